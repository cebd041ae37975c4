//===----------------------------------------------------------------------===//
//
// SwiftQueues — WorkQueue over the C runtime's sq_queue_t
// (include/swiftqueues/queue.h, object.h): creation, the shared queues,
// configuration. Submitting work is in WorkQueue+Submit.swift, queue-specific
// values and preconditions in WorkQueue+Specific.swift, the main queue's
// drain in WorkQueue+Main.swift, async/await and executors in
// WorkQueue+Concurrency.swift.
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A queue of work (`DispatchQueue`): closures submitted to it run on the
/// SwiftQueues worker pool, in FIFO order.
///
/// - A **serial** queue (the default) runs one closure at a time, each
///   after the previous one has returned: a lock that never blocks its
///   callers.
/// - A **concurrent** queue (``Attributes/concurrent``) starts closures in
///   FIFO order but lets them run side by side; a barrier
///   (``asyncBarrier(_:)``) runs alone.
/// - The five **global** queues (``global(qos:)``, ``global(_:)``) are
///   shared concurrent queues, one per quality-of-service class
///   (``WorkQoS``): user-interactive, user-initiated (``Priority/high``),
///   default, utility (``Priority/low``) and background.
/// - The **main** queue (``main``) is serial and runs on the main thread
///   once something drains it (``runMain()``, ``runMain(until:deadline:)``,
///   ``drainMain()``).
///
///     let database = WorkQueue(label: "com.example.db")
///     database.async { store.insert(row) }           // returns at once
///     let count = database.sync { store.count }      // waits, returns a value
///     let sum = await database.run { store.sum() }   // suspends, no thread blocked
///
/// A serial queue is also a `SerialExecutor` (an actor can run on it), and
/// every queue is a `TaskExecutor`: see WorkQueue+Concurrency.swift.
///
/// Errors in use (a `sync` onto the serial queue the thread is already
/// running, resuming a queue that is not suspended, releasing a suspended or
/// inactive queue) stop the process with one line naming the queue.
//
// `@unchecked Sendable` is safe: every stored property is immutable after
// `init`, and the C queue it wraps is thread-safe (every sq_* queue call may
// be made from any thread).
public final class WorkQueue: @unchecked Sendable {
    /// How a new queue behaves (`DispatchQueue.Attributes`).
    public struct Attributes: OptionSet, Sendable, Hashable {
        /// The bits.
        public let rawValue: UInt

        /// Attributes from their bits.
        public init(rawValue: UInt) {
            self.rawValue = rawValue
        }

        /// Closures start in FIFO order but may run side by side.
        public static let concurrent = Attributes(rawValue: 1 << 0)
        /// Nothing runs until ``WorkQueue/activate()`` is called; the queue
        /// may be configured (``WorkQueue/setTarget(_:)``) meanwhile.
        public static let initiallyInactive = Attributes(rawValue: 1 << 1)
    }

    /// The priority of a global queue (`DISPATCH_QUEUE_PRIORITY_*`): when
    /// work is waiting at several priorities, the pool starts the higher one
    /// first (and ages the lower ones, so they are never starved). Each
    /// priority is a quality-of-service class (``qosClass``): `.high` is
    /// `.userInitiated`, `.low` is `.utility`.
    public enum Priority: Sendable, Hashable, CaseIterable {
        /// `SQ_QUEUE_PRIORITY_HIGH` (2).
        case high
        /// `SQ_QUEUE_PRIORITY_DEFAULT` (0): what queues target unless told
        /// otherwise.
        case `default`
        /// `SQ_QUEUE_PRIORITY_LOW` (-2).
        case low
        /// `SQ_QUEUE_PRIORITY_BACKGROUND` (`INT16_MIN`): work nobody waits for.
        case background

        /// The C priority value.
        internal var cValue: Int {
            switch self {
            case .high: return 2
            case .default: return 0
            case .low: return -2
            case .background: return Int(SQ_QUEUE_PRIORITY_BACKGROUND)
            }
        }
    }

    /// The C queue. Owned (one reference) unless ``isShared``.
    @usableFromInline
    internal let raw: OpaquePointer

    /// The label given at creation (`""` for none): shown as the worker
    /// thread's name while it runs this queue's work, and in error messages.
    public let label: String

    /// Whether closures may run side by side (a concurrent or global queue).
    public let isConcurrent: Bool

    /// A global or the main queue: immortal in C, never released.
    private let isShared: Bool

    /// Creates a queue.
    ///
    /// - Parameters:
    ///   - label: a name for debugging: thread names, `currentLabel`, error
    ///     messages. Reverse-DNS style (`"com.example.cache"`) is customary;
    ///     it need not be unique.
    ///   - qos: the queue's quality-of-service class and relative priority
    ///     (default `.unspecified`: none of its own). Without a `target`, a
    ///     queue with a class targets that class's global queue, so its
    ///     work runs at that class; a work item of a higher class submitted
    ///     to it runs at the queue's class unless the item has
    ///     ``WorkItem/Flags/enforceQoS``.
    ///   - attributes: ``Attributes/concurrent`` for a concurrent queue
    ///     (serial otherwise), ``Attributes/initiallyInactive`` to hold its
    ///     work until ``activate()``.
    ///   - target: the queue this one's work finally runs on (default: the
    ///     global queue of `qos`'s class, or the default-priority one). A
    ///     serial target serialises this queue with everything else that
    ///     targets it.
    ///
    /// An initially inactive queue must be activated, and a suspended one
    /// resumed, before the last reference to it goes away.
    public init(label: String, qos: WorkQoS = .unspecified, attributes: Attributes = [],
                target: WorkQueue? = nil) {
        let concurrent = attributes.contains(.concurrent)
        let inactive = attributes.contains(.initiallyInactive)
        var attribute: sq_queue_attr_t? = concurrent
            ? (inactive ? sq_queue_attr_concurrent_inactive() : sq_queue_attr_concurrent())
            : (inactive ? sq_queue_attr_make_initially_inactive(nil) : nil)
        if qos.qosClass != .unspecified {
            // NULL only for a class or relative priority out of range,
            // which WorkQoS does not let through.
            guard let withQoS = sq_queue_attr_make_with_qos_class(
                attribute, qos.qosClass.rawValue, Int32(qos.relativePriority)) else {
                misuse("WorkQueue(label:qos:attributes:target:)", "QoS \(qos) refused")
            }
            attribute = withQoS
        }
        self.raw = label.withCString { sq_queue_create_with_target($0, attribute, target?.raw) }
        self.label = label
        self.isConcurrent = concurrent
        self.isShared = false
        // The executor trampoline finds the Swift object of the queue it
        // runs on through the context slot (see WorkQueue+Concurrency.swift).
        // Unretained: the queue's owner keeps it alive; the Swift API does
        // not otherwise use the context.
        sq_set_context(cObject(raw), Unmanaged.passUnretained(self).toOpaque())
    }

    /// Wraps one of the C runtime's immortal queues (global or main).
    private init(shared raw: OpaquePointer, concurrent: Bool) {
        self.raw = raw
        self.label = String(cString: sq_queue_get_label(raw))
        self.isConcurrent = concurrent
        self.isShared = true
    }

    deinit {
        if !isShared {
            sq_release(cObject(raw))
        }
    }

    // MARK: - Shared queues

    /// The serial queue whose work runs on the main thread
    /// (`DispatchQueue.main`). Linux has no run loop: the main thread must
    /// drain it (``runMain()``, ``runMain(until:deadline:)`` or
    /// ``drainMain()``), or its work never runs. Suspend and resume are
    /// ignored on it.
    public static let main = WorkQueue(shared: sq_get_main_queue(), concurrent: false)

    private static let globalUserInteractive = WorkQueue(
        shared: sq_get_global_queue(Int(SQ_QOS_CLASS_USER_INTERACTIVE), 0), concurrent: true)
    private static let globalHigh = WorkQueue(
        shared: sq_get_global_queue(Priority.high.cValue, 0), concurrent: true)
    private static let globalDefault = WorkQueue(
        shared: sq_get_global_queue(Priority.default.cValue, 0), concurrent: true)
    private static let globalLow = WorkQueue(
        shared: sq_get_global_queue(Priority.low.cValue, 0), concurrent: true)
    private static let globalBackground = WorkQueue(
        shared: sq_get_global_queue(Priority.background.cValue, 0), concurrent: true)

    /// The global concurrent queue for `priority`
    /// (`DispatchQueue.global()`). There is one per priority: every call
    /// with the same priority returns the same object, the one
    /// ``global(qos:)`` returns for the priority's ``Priority/qosClass``.
    /// Suspend, resume, barriers and queue-specific values have no effect
    /// on them.
    public static func global(_ priority: Priority = .default) -> WorkQueue {
        switch priority {
        case .high: return globalHigh
        case .default: return globalDefault
        case .low: return globalLow
        case .background: return globalBackground
        }
    }

    /// The global concurrent queue for a quality-of-service class
    /// (`DispatchQueue.global(qos:)`): its work runs at that class. One
    /// object per class; `.unspecified` gives the default one, and
    /// `.userInitiated` / `.utility` the ones of ``Priority/high`` /
    /// ``Priority/low``.
    ///
    ///     WorkQueue.global(qos: .utility).async { compactLogs() }
    public static func global(qos: WorkQoS.Class) -> WorkQueue {
        switch qos {
        case .userInteractive: return globalUserInteractive
        case .userInitiated: return globalHigh
        case .default, .unspecified: return globalDefault
        case .utility: return globalLow
        case .background: return globalBackground
        }
    }

    /// The Swift object for one of the C runtime's immortal queues, or nil.
    internal static func shared(for raw: OpaquePointer) -> WorkQueue? {
        if raw == globalDefault.raw { return globalDefault }
        if raw == main.raw { return main }
        if raw == globalHigh.raw { return globalHigh }
        if raw == globalLow.raw { return globalLow }
        if raw == globalBackground.raw { return globalBackground }
        if raw == globalUserInteractive.raw { return globalUserInteractive }
        return nil
    }

    // MARK: - Configuration

    /// Stops the queue from starting more work until a matching
    /// ``resume()``. Work already running finishes; counted (two suspends
    /// need two resumes). Ignored on global queues and the main queue.
    public func suspend() {
        sq_suspend(cObject(raw))
    }

    /// Balances one ``suspend()``; when none is left the queue runs again.
    /// Resuming a queue that is not suspended stops the process.
    public func resume() {
        sq_resume(cObject(raw))
    }

    /// Lets a queue created ``Attributes/initiallyInactive`` run its work.
    /// Does nothing on an active queue.
    public func activate() {
        sq_activate(cObject(raw))
    }

    /// Makes `target` (nil: the global queue of the queue's ``qos`` class,
    /// or the default-priority one) the queue this one's work finally runs
    /// on. Takes effect between two closures. A chain of targets that
    /// loops back to this queue stops the process. Ignored on global queues
    /// and the main queue.
    public func setTarget(_ target: WorkQueue?) {
        sq_set_target_queue(cObject(raw), target?.raw)
    }

    // MARK: - Quality of service

    /// The quality-of-service class and relative priority the queue was
    /// created with (`DispatchQueue.qos`): `.unspecified` for a queue
    /// created without one and for the main queue; a global queue's class.
    public var qos: WorkQoS {
        var relativePriority: Int32 = 0
        let qosClass = sq_queue_get_qos_class(raw, &relativePriority)
        return WorkQoS(unchecked: WorkQoS.Class(c: qosClass), relativePriority: Int(relativePriority))
    }

    /// The class of the work the calling thread runs (`qos_class_self()`):
    /// in queue work, the class it runs at (its queue's, or the higher one
    /// of an item or a waiter that raised it); `.default` on the program's
    /// own threads and in `sync` work called from them (it runs on the
    /// caller's thread). Never `.unspecified`.
    public static var currentQoSClass: WorkQoS.Class {
        WorkQoS.Class(c: sq_qos_class_self())
    }
}

extension WorkQueue: Hashable {
    /// Whether `lhs` and `rhs` are the same queue.
    public static func == (lhs: WorkQueue, rhs: WorkQueue) -> Bool {
        lhs === rhs
    }

    /// Hashes the queue's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}

extension WorkQueue: CustomStringConvertible {
    /// `WorkQueue(label: "…", serial)` or `…, concurrent)`.
    public var description: String {
        "WorkQueue(label: \"\(label)\", \(isConcurrent ? "concurrent" : "serial"))"
    }
}

