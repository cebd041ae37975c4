//===----------------------------------------------------------------------===//
//
// SwiftQueues — LockFreeStack over the C runtime's sq_lifo_t
// (include/swiftqueues/lifo.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A last-in, first-out stack that any number of threads may push to and pop
/// from at once (`OSAtomicEnqueue` / `OSAtomicDequeue`).
///
///     let free = LockFreeStack<Buffer>()
///     free.push(buffer)
///     if let reused = free.pop() { ... }
///
/// `push` is lock-free (one compare-and-swap loop). Poppers are serialised
/// by a short lock inside the C runtime that pushers never take. Each element
/// lives in its own heap node, allocated by `push` and freed by `pop`;
/// elements still on the stack when it is destroyed are destroyed with it.
///
/// The stack is `Sendable` when its elements are.
public final class LockFreeStack<Element> {
    /// One heap node: the C link first, then the element itself.
    internal typealias Node = _LockFreeNode<sq_lifo_node_t, Element>

    private let lifo: UnsafeMutablePointer<sq_lifo_t>

    /// Creates an empty stack.
    public init() {
        lifo = .allocate(capacity: 1)
        lifo.initialize(to: sq_lifo_t())
        sq_lifo_init(lifo)
    }

    deinit {
        // No other thread holds a reference: drain and free what is left.
        while pop() != nil {}
        lifo.deinitialize(count: 1)
        lifo.deallocate()
    }

    /// Pushes `element` on top of the stack. Returns `true` if the stack was
    /// empty before (useful to wake a consumer only when needed).
    @discardableResult
    public func push(_ element: Element) -> Bool {
        let node = Node.make(element)
        return sq_lifo_push(lifo, node, Node.linkOffset)
    }

    /// Removes and returns the most recently pushed element, or `nil` when
    /// the stack is empty.
    public func pop() -> Element? {
        guard let item = sq_lifo_pop(lifo, Node.linkOffset) else { return nil }
        return Node.take(item)
    }

    /// Whether the stack is empty at the moment of the call (another thread
    /// may change that at once).
    public var isEmpty: Bool {
        sq_lifo_empty(lifo)
    }
}

// Safe when elements are Sendable: the C stack is thread-safe, `lifo` never
// changes, and each element is handed from the pushing thread to the popping
// thread with the full barrier of the C push and pop.
extension LockFreeStack: @unchecked Sendable where Element: Sendable {}
