//===----------------------------------------------------------------------===//
//
// SwiftQueues — WorkGroup over the C runtime's sq_group_t
// (include/swiftqueues/group.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A set of work to wait for, or be told about, as a whole
/// (`DispatchGroup`).
///
///     let group = WorkGroup()
///     for url in urls {
///         WorkQueue.global().async(group: group) { fetch(url) }
///     }
///     group.notify(queue: .main) { print("all fetched") }  // or:
///     await group.wait()                                    // or, off async code:
///     group.wait()
///
/// Work joins the group by being submitted with
/// ``WorkQueue/async(group:_:)``, or by ``enter()`` … ``leave()`` around
/// work the group does not submit itself (a callback-based API). The group
/// is empty when every member has finished and every enter has its leave;
/// it can then be used again.
///
/// Leaving more often than entering stops the process.
//
// `@unchecked Sendable` is safe: the only state is the immutable pointer to
// the C group, whose operations are thread-safe.
public final class WorkGroup: @unchecked Sendable {
    /// The C group (one reference, owned).
    internal let raw: OpaquePointer

    /// Creates an empty group.
    public init() {
        raw = sq_group_create()
    }

    deinit {
        sq_release(cObject(raw))
    }

    /// Counts one more unit of outstanding work; balance it with
    /// ``leave()``, on every path, errors included.
    public func enter() {
        sq_group_enter(raw)
    }

    /// Marks one unit of outstanding work (one ``enter()``) as finished.
    public func leave() {
        sq_group_leave(raw)
    }

    /// Blocks the calling thread until the group is empty (at once if it
    /// is). From async code, use the async ``wait()`` instead.
    @available(*, noasync, message: "blocks the thread; use the async wait() instead")
    public func wait() {
        _ = sq_group_wait(raw, SQ_TIME_FOREVER)
    }

    /// Blocks the calling thread until the group is empty or `timeout`
    /// passes, and says which came first.
    public func wait(timeout: WorkDeadline) -> WaitResult {
        WaitResult(sq_group_wait(raw, timeout.rawValue))
    }

    /// Submits `body` to `queue` once the group is empty (at once if it
    /// already is). The group need not outlive the call: the notification
    /// keeps what it needs.
    public func notify(queue: WorkQueue, execute body: @escaping @Sendable () -> Void) {
        sq_group_notify_f(raw, queue.raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    /// Suspends the calling task, without blocking a thread, until the
    /// group is empty. Built on ``notify(queue:execute:)``: the task is
    /// resumed from a global-queue worker. Not cancellable: it returns only
    /// when the group is empty.
    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            notify(queue: .global()) { continuation.resume() }
        }
    }
}

/// A group that lives for one ``withWorkGroup(_:)`` call, in that call's
/// stack frame: fork-join code can make one per node with no allocation.
///
/// It cannot be copied or kept past the call. Everything a ``WorkGroup``
/// does, it does; submissions go through ``async(on:_:)``.
public struct ScopedWorkGroup: ~Copyable {
    /// The C group, in the storage of the enclosing `withWorkGroup`.
    internal let raw: OpaquePointer

    internal init(raw: OpaquePointer) {
        self.raw = raw
    }

    /// Submits `body` to `queue` as a member of the group.
    public func async(
        on queue: WorkQueue = .global(),
        _ body: @escaping @Sendable () -> Void
    ) {
        sq_group_async_f(raw, queue.raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    /// Submits `body` to `queue` as a fork-join child and a member of the
    /// group (``WorkQueue/spawn(group:_:)``): no start order on a global
    /// queue, and the scope's wait runs the children itself, depth first.
    public func spawn(
        on queue: WorkQueue = .global(),
        _ body: @escaping @Sendable () -> Void
    ) {
        sq_group_spawn_f(raw, queue.raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    /// Counts one more unit of outstanding work; balance it with
    /// ``leave()`` before the scope ends.
    public func enter() {
        sq_group_enter(raw)
    }

    /// Marks one unit of outstanding work (one ``enter()``) as finished.
    public func leave() {
        sq_group_leave(raw)
    }

    /// Blocks the calling thread until the group is empty. On a pool
    /// worker, it first runs the members its own task submitted, as
    /// ``WorkGroup/wait()`` does.
    @available(*, noasync, message: "blocks the thread")
    public func wait() {
        _ = sq_group_wait(raw, SQ_TIME_FOREVER)
    }

    /// Blocks until the group is empty or `timeout` passes, and says which
    /// came first.
    public func wait(timeout: WorkDeadline) -> WaitResult {
        WaitResult(sq_group_wait(raw, timeout.rawValue))
    }

    /// Submits `body` to `queue` once the group is empty (at once if it
    /// already is); at the latest, before the scope ends.
    public func notify(queue: WorkQueue, execute body: @escaping @Sendable () -> Void) {
        sq_group_notify_f(raw, queue.raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }
}

/// Runs `body` with a new group kept in this call's stack frame
/// (`sq_group_init`), then waits until the group is empty and ends it: the
/// call returns after every member has finished, with `body`'s result or
/// error.
///
///     let (left, right) = withWorkGroup { group in
///         let left = AtomicCounter(), right = AtomicCounter()
///         group.async { left.store(count(lhs)) }
///         group.async { right.store(count(rhs)) }
///         return (left, right)
///     }
///
/// Every ``ScopedWorkGroup/enter()`` must have its leave by the end of
/// `body`: the call waits for it.
@available(*, noasync, message: "blocks the thread until the group is empty")
public func withWorkGroup<Result, Failure: Error>(
    _ body: (borrowing ScopedWorkGroup) throws(Failure) -> Result
) throws(Failure) -> Result {
    try withUnsafeTemporaryAllocation(of: sq_group_storage_t.self, capacity: 1) {
        (storage) throws(Failure) -> Result in
        let group = ScopedWorkGroup(raw: sq_group_init(storage.baseAddress!))
        defer {
            _ = sq_group_wait(group.raw, SQ_TIME_FOREVER)
            sq_group_destroy(group.raw)
        }
        return try body(group)
    }
}
