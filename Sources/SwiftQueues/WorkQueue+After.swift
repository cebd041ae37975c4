//===----------------------------------------------------------------------===//
//
// SwiftQueues — delayed submission: WorkQueue.asyncAfter over the C
// runtime's sq_after_workitem (include/swiftqueues/source.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

extension WorkQueue {
    /// Submits `body` to the queue at `deadline` and returns at once
    /// (`DispatchQueue.asyncAfter(deadline:execute:)`). It never runs before
    /// the deadline (a wall-clock deadline follows the wall clock;
    /// ``WorkDeadline/distantFuture`` never runs it).
    ///
    /// The returned work item is the handle: ``WorkItem/cancel()`` before
    /// the deadline and `body` never runs; ``WorkItem/wait()`` and
    /// ``WorkItem/notify(queue:execute:)`` observe it. A pending delay is a
    /// timer entry on the runtime's manager thread, not a thread: thousands
    /// are cheap.
    ///
    ///     let reminder = queue.asyncAfter(deadline: .now() + .seconds(3)) { remind() }
    ///     if done { reminder.cancel() }
    @discardableResult
    public func asyncAfter(
        deadline: WorkDeadline, execute body: @escaping @Sendable () -> Void
    ) -> WorkItem {
        let item = WorkItem(body)
        asyncAfter(deadline: deadline, execute: item)
        return item
    }

    /// Submits `body` to the queue once `delay` has passed on the monotonic
    /// clock (a delay of zero or less: at once, as a deadline already
    /// passed); see `asyncAfter(deadline:execute:)`.
    ///
    ///     queue.asyncAfter(delay: .milliseconds(300)) { print("Grand Central Dispatch") }
    @discardableResult
    public func asyncAfter(
        delay: Duration, execute body: @escaping @Sendable () -> Void
    ) -> WorkItem {
        asyncAfter(deadline: .now() + delay, execute: body)
    }

    /// Submits `item` to the queue at `deadline` (as a barrier if it was
    /// created with ``WorkItem/Flags/barrier``). Cancel it before then and
    /// it never runs.
    public func asyncAfter(deadline: WorkDeadline, execute item: WorkItem) {
        sq_after_workitem(deadline.rawValue, raw, item.raw)
    }
}
