//===----------------------------------------------------------------------===//
//
// SwiftQueues — LockFreeQueue over the C runtime's sq_fifo_t
// (include/swiftqueues/lifo.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A first-in, first-out queue that any number of threads may push to and
/// pop from at once (`OSAtomicFifoEnqueue` / `OSAtomicFifoDequeue`).
///
///     let inbox = LockFreeQueue<Message>()
///     inbox.push(message)              // producers
///     while let next = inbox.pop() { } // consumers
///
/// `push` is wait-free (one exchange and one store) and never blocks.
/// Poppers are serialised by a short lock inside the C runtime that pushers
/// never take. Elements pushed by one thread are popped in the order that
/// thread pushed them. Each element lives in its own heap node, allocated by
/// `push` and freed by `pop`; elements still queued when the queue is
/// destroyed are destroyed with it.
///
/// The queue is `Sendable` when its elements are.
public final class LockFreeQueue<Element> {
    /// One heap node: the C link first, then the element itself.
    internal typealias Node = _LockFreeNode<sq_fifo_node_t, Element>

    /// The C queue, in a stable heap allocation.
    private let fifo: UnsafeMutablePointer<sq_fifo_t>

    /// Creates an empty queue.
    public init() {
        fifo = .allocate(capacity: 1)
        fifo.initialize(to: sq_fifo_t())
        sq_fifo_init(fifo)
    }

    deinit {
        // No other thread holds a reference: drain and free what is left.
        while pop() != nil {}
        fifo.deinitialize(count: 1)
        fifo.deallocate()
    }

    /// Appends `element` at the tail. Returns `true` if the queue was empty
    /// before (useful to wake a consumer only when needed).
    @discardableResult
    public func push(_ element: Element) -> Bool {
        let node = Node.make(element)
        return sq_fifo_enqueue(fifo, node, Node.linkOffset)
    }

    /// Removes and returns the oldest element, or `nil` when the queue is
    /// empty.
    public func pop() -> Element? {
        guard let item = sq_fifo_dequeue(fifo, Node.linkOffset) else { return nil }
        return Node.take(item)
    }

    /// Whether the queue is empty at the moment of the call (another thread
    /// may change that at once).
    public var isEmpty: Bool {
        sq_fifo_empty(fifo)
    }
}

// Safe when elements are Sendable: the C queue is thread-safe, `fifo` never
// changes, and each element is handed from the pushing thread to the popping
// thread with the full barrier of the C enqueue and dequeue.
extension LockFreeQueue: @unchecked Sendable where Element: Sendable {}
