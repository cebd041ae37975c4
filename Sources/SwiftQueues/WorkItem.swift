//===----------------------------------------------------------------------===//
//
// SwiftQueues — WorkItem over the C runtime's sq_workitem_t
// (include/swiftqueues/workitem.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A closure as an object that can be submitted, cancelled before it runs,
/// waited for and observed (`DispatchWorkItem`).
///
///     let save = WorkItem { document.save() }
///     queue.async(execute: save)
///     save.notify(queue: .main) { print("saved (or cancelled)") }
///     if userChangedTheirMind { save.cancel() }   // only stops it before it starts
///
/// The closure runs at most once, whether the item is submitted several
/// times or performed directly. Cancelling stops an item that has not
/// started; a running one finishes (it can poll ``isCancelled`` to stop
/// early). A cancelled item counts as finished: waiters return and
/// notifications run.
//
// `@unchecked Sendable` is safe: the stored properties are immutable and
// the C work item's operations are thread-safe.
public final class WorkItem: @unchecked Sendable {
    /// Options for a work item (`DispatchWorkItemFlags`).
    public struct Flags: OptionSet, Sendable, Hashable {
        /// The bits (`sq_workitem_flags_t`).
        public let rawValue: UInt

        /// Flags from their bits.
        public init(rawValue: UInt) {
            self.rawValue = rawValue
        }

        /// Submitted to a concurrent queue, the item runs as a barrier:
        /// after everything before it, alone (`SQ_WORKITEM_BARRIER`).
        public static let barrier = Flags(rawValue: UInt(SQ_WORKITEM_BARRIER))

        /// Accepted for `DispatchWorkItemFlags.detached`
        /// (`SQ_WORKITEM_DETACHED`); Linux has no activities or vouchers
        /// for an item to detach from, so it changes nothing.
        public static let detached = Flags(rawValue: UInt(SQ_WORKITEM_DETACHED))

        /// The item takes the class of the work running where it is
        /// created (``WorkQueue/currentQoSClass``) unless it is given one
        /// (`SQ_WORKITEM_ASSIGN_CURRENT`; `DispatchWorkItemFlags`'
        /// `.assignCurrentContext`).
        public static let assignCurrent = Flags(rawValue: UInt(SQ_WORKITEM_ASSIGN_CURRENT))

        /// The item has no class of its own and runs at its queue's
        /// (`SQ_WORKITEM_NO_QOS_CLASS`): what an item created without `qos`
        /// does already. An item given a `qos` keeps it.
        public static let noQoS = Flags(rawValue: UInt(SQ_WORKITEM_NO_QOS_CLASS))

        /// The queue's class is preferred to the item's
        /// (`SQ_WORKITEM_INHERIT_QOS_CLASS`): what happens already without
        /// ``enforceQoS`` (an item of a higher class runs at its own class
        /// only on a queue without a class of its own).
        public static let inheritQoS = Flags(rawValue: UInt(SQ_WORKITEM_INHERIT_QOS_CLASS))

        /// The item's class is preferred to the queue's where it is higher
        /// (`SQ_WORKITEM_ENFORCE_QOS_CLASS`): the item runs at its class on
        /// any queue, a serial queue being raised until it has run.
        public static let enforceQoS = Flags(rawValue: UInt(SQ_WORKITEM_ENFORCE_QOS_CLASS))
    }

    /// The C work item (one reference, owned).
    internal let raw: OpaquePointer

    /// The flags given at creation.
    public let flags: Flags

    /// Creates a work item that runs `body` at most once.
    ///
    /// - Parameters:
    ///   - qos: the item's quality-of-service class (default
    ///     `.unspecified`: none, it runs at its queue's class). Submitted to
    ///     a queue of a lower class, the item runs at its own class if the
    ///     queue has no class of its own (it targets a global queue, or was
    ///     created without `qos:`) or the item has ``Flags/enforceQoS``; a
    ///     serial queue is raised to it until the item has run. A waiter
    ///     (``wait()``) of a higher class than the item's queue raises the
    ///     queue too.
    ///   - flags: ``Flags/barrier`` and the QoS flags.
    ///   - body: the work.
    ///
    ///       let save = WorkItem(qos: .userInitiated, flags: .enforceQoS) { document.save() }
    ///       backgroundQueue.async(execute: save)   // runs at .userInitiated
    public init(qos: WorkQoS = .unspecified, flags: Flags = [], _ body: @escaping @Sendable () -> Void) {
        // The box may never run (a cancelled item), so the item does not
        // release it when it runs: the item's finalizer does, when the last
        // reference (this object's or a pending submission's) goes.
        let box = ClosureBox.retained(body)
        raw = qos == .unspecified
            ? sq_workitem_create_f(flags.rawValue, box, runClosureBox)
            : sq_workitem_create_with_qos_class_f(flags.rawValue, qos.qosClass.rawValue,
                                                  Int32(qos.relativePriority), box, runClosureBox)
        sq_set_context(cObject(raw), box)
        sq_set_finalizer_f(cObject(raw), releaseClosureBox)
        self.flags = flags
    }

    deinit {
        sq_release(cObject(raw))
    }

    /// Runs the closure now, on the calling thread, unless the item was
    /// cancelled or has already run.
    public func perform() {
        sq_workitem_perform(raw)
    }

    /// Cancels the item: if it has not started, it never runs and counts as
    /// finished at once. A running closure is not interrupted.
    public func cancel() {
        sq_workitem_cancel(raw)
    }

    /// Whether ``cancel()`` has been called.
    public var isCancelled: Bool {
        sq_workitem_testcancel(raw)
    }

    /// Blocks the calling thread until the item has run or been cancelled.
    public func wait() {
        _ = sq_workitem_wait(raw, SQ_TIME_FOREVER)
    }

    /// Blocks the calling thread until the item has run or been cancelled,
    /// or `timeout` passes, and says which came first.
    public func wait(timeout: WorkDeadline) -> WaitResult {
        WaitResult(sq_workitem_wait(raw, timeout.rawValue))
    }

    /// Submits `body` to `queue` once the item has run or been cancelled (at
    /// once if it already has).
    public func notify(queue: WorkQueue, execute body: @escaping @Sendable () -> Void) {
        sq_workitem_notify_f(raw, queue.raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }
}
