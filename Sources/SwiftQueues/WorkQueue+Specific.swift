//===----------------------------------------------------------------------===//
//
// SwiftQueues — queue identity: typed queue-specific values, the current
// label, and preconditions (sq_queue_set_specific, sq_queue_get_specific,
// sq_get_specific, sq_queue_get_label, sq_assert_queue*).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A key for values attached to queues (`DispatchSpecificKey`).
///
///     let owner = SpecificKey<String>()
///     database.setSpecific(owner, value: "db")
///     database.async {
///         WorkQueue.getSpecific(owner)   // "db", also from queues targeting it
///     }
///
/// The key is its identity: two keys never see each other's values, even
/// for the same `Value` type.
//
// `Sendable`: the only state is an immutable serial number.
public final class SpecificKey<Value: Sendable>: Sendable {
    /// Tells this key's values from those of a dead key whose address was
    /// reused (the C runtime keys on the address).
    internal let serial: Int64

    /// Creates a new key.
    public init() {
        serial = specificKeySerials.increment(ordering: .relaxed)
    }

    /// The C key: this object's address.
    internal var cKey: UnsafeRawPointer {
        UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
    }
}

/// Serial numbers for ``SpecificKey``.
private let specificKeySerials = AtomicCounter()

/// A value stored on a queue, tagged with its key's serial number.
//
// `@unchecked Sendable`: both stored properties are immutable and the value
// is `Sendable` (the subclass's generic constraint).
internal class AnySpecificBox: @unchecked Sendable {
    let serial: Int64

    init(serial: Int64) {
        self.serial = serial
    }
}

internal final class SpecificBox<Value: Sendable>: AnySpecificBox, @unchecked Sendable {
    let value: Value

    init(serial: Int64, value: Value) {
        self.value = value
        super.init(serial: serial)
    }
}

/// `sq_function_t` destructor for a stored value: drops the queue's retain.
private func releaseSpecificBox(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<AnySpecificBox>.fromOpaque(context.unsafelyUnwrapped).release()
}

/// The value of `key` in a C context found by the runtime, if it is one.
private func specificValue<Value>(
    _ context: UnsafeMutableRawPointer?, for key: SpecificKey<Value>
) -> Value? {
    guard let context else { return nil }
    let box = Unmanaged<AnySpecificBox>.fromOpaque(context).takeUnretainedValue()
    guard box.serial == key.serial else { return nil }
    return unsafeDowncast(box, to: SpecificBox<Value>.self).value
}

extension WorkQueue {
    // MARK: - Queue-specific values

    /// Attaches `value` to this queue under `key`, replacing (and releasing)
    /// any earlier value; nil removes it. Ignored on global queues and the
    /// main queue.
    ///
    /// Like `DispatchQueue.setSpecific`, replacing a value while another
    /// thread reads the same key of the same queue is a race: set a queue's
    /// values before sharing it, or from its own work.
    public func setSpecific<Value>(_ key: SpecificKey<Value>, value: Value?) {
        guard let value else {
            sq_queue_set_specific(raw, key.cKey, nil, nil)
            return
        }
        let box = Unmanaged.passRetained(
            SpecificBox(serial: key.serial, value: value) as AnySpecificBox).toOpaque()
        sq_queue_set_specific(raw, key.cKey, box, releaseSpecificBox)
    }

    /// The value attached to this queue itself under `key`, or nil.
    public func getSpecific<Value>(_ key: SpecificKey<Value>) -> Value? {
        specificValue(sq_queue_get_specific(raw, key.cKey), for: key)
    }

    /// The value under `key` of the queue whose work is running on this
    /// thread or, failing that, of the first queue along its target chain
    /// that has one; nil outside queue work (`DispatchQueue.getSpecific`).
    /// This is the reliable way to ask "am I on queue X?".
    public static func getSpecific<Value>(_ key: SpecificKey<Value>) -> Value? {
        specificValue(sq_get_specific(key.cKey), for: key)
    }

    // MARK: - Debugging

    /// The label of the queue whose work is running on this thread (the
    /// innermost, through nested `sync` calls), or the default global
    /// queue's label outside queue work. For logs and debugging: use
    /// the static ``getSpecific(_:)`` or ``precondition(_:)`` to
    /// base decisions on the current queue.
    public static var currentLabel: String {
        String(cString: sq_queue_get_label(nil))
    }

    // MARK: - Preconditions

    /// A statement about the current thread's queue, checked by
    /// ``WorkQueue/precondition(_:)`` (`DispatchPredicate`).
    public enum Predicate: Sendable {
        /// The thread runs work of the queue, directly or through a queue
        /// that targets it (or is blocked in a `sync` onto it from there).
        case onQueue(WorkQueue)
        /// The thread runs the queue exclusively: a serial queue's work, or
        /// a barrier of a concurrent one.
        case onQueueAsBarrier(WorkQueue)
        /// The thread does not run work of the queue.
        case notOnQueue(WorkQueue)
    }

    /// Stops the process, with one line naming the queue, unless
    /// `predicate` holds (`dispatchPrecondition(condition:)`). Always
    /// checked, in every build configuration.
    ///
    ///     func flush() {
    ///         WorkQueue.precondition(.onQueue(ioQueue))
    ///         ...
    ///     }
    public static func precondition(_ predicate: Predicate) {
        switch predicate {
        case .onQueue(let queue): sq_assert_queue(queue.raw)
        case .onQueueAsBarrier(let queue): sq_assert_queue_barrier(queue.raw)
        case .notOnQueue(let queue): sq_assert_queue_not(queue.raw)
        }
    }
}
