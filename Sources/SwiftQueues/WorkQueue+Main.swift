//===----------------------------------------------------------------------===//
//
// SwiftQueues — draining the main queue (sq_main, sq_main_queue_drain,
// sq_main_queue_fd, sq_main_queue_run_until).
//
// Linux has no run loop that drains the main queue by itself: work sent to
// WorkQueue.main runs only while the main thread is in one of these calls.
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues

extension WorkQueue {
    /// Drains the main queue on the main thread forever (`dispatchMain()`).
    /// Never returns: end the program from a closure with `exit(_:)`.
    /// Calling it on another thread stops the process.
    public static func runMain() -> Never {
        sq_main()
    }

    /// Runs the closures waiting on the main queue now, without waiting for
    /// more, and returns how many ran. For programs with their own event
    /// loop: poll ``mainQueueFileDescriptor`` and call this when it is
    /// readable. Main thread only.
    @discardableResult
    public static func drainMain() -> Int {
        sq_main_queue_drain()
    }

    /// A file descriptor that becomes readable when the main queue has work
    /// (``drainMain()`` makes it unreadable again). Do not read, write or
    /// close it. Made on first use; throws ``IOError`` (`EMFILE`, `ENFILE`)
    /// while the process has no descriptor to spare, and a later use tries
    /// again. (The main queue itself needs no descriptor.)
    public static var mainQueueFileDescriptor: Int32 {
        get throws(IOError) {
            errno = 0
            let fd = sq_main_queue_fd()
            if fd < 0 { throw IOError(errnoCode: errno) }
            return fd
        }
    }

    /// Drains the main queue on the main thread, waiting for work, until
    /// `condition` returns true or `deadline` passes; returns whether
    /// `condition` became true. Main thread only. For tests and for
    /// programs that run the main queue for a while.
    ///
    ///     let done = AtomicCounter()
    ///     Task.detached { await work(); done.store(1) }
    ///     WorkQueue.runMain(until: { done.load() == 1 })
    ///
    /// `condition` runs on the main thread: first, after every closure of
    /// the main queue, after every job that finishes on SwiftQueues' pool
    /// (queue work of any kind, and every task once SwiftQueues is the
    /// global executor), and after every ``wakeMain()``. While SwiftQueues
    /// is not the global executor, tasks run on Swift's own threads, whose
    /// jobs it does not see end: then it also looks every 10 ms. A thread
    /// of your own that makes the condition true calls ``wakeMain()``.
    @discardableResult
    public static func runMain(
        until condition: () -> Bool, deadline: WorkDeadline = .distantFuture
    ) -> Bool {
        if isGlobalExecutor {
            return runMainUntil(condition, deadline: deadline)
        }
        // Slices of 10 ms, the last one ending at the deadline (which may
        // be on the wall clock: compared through the time left).
        while sq_time_nanoseconds_until(deadline.rawValue) > 10_000_000 {
            if runMainUntil(condition, deadline: .now() + .milliseconds(10)) { return true }
        }
        return runMainUntil(condition, deadline: deadline)
    }

    private static func runMainUntil(_ condition: () -> Bool, deadline: WorkDeadline) -> Bool {
        withoutActuallyEscaping(condition) { condition in
            withUnsafePointer(to: condition) { slot in
                sq_main_queue_run_until(deadline.rawValue, { context in
                    context.unsafelyUnwrapped
                        .assumingMemoryBound(to: (() -> Bool).self).pointee()
                }, UnsafeMutableRawPointer(mutating: slot))
            }
        }
    }

    /// Drains the main queue on the main thread until `group` is empty or
    /// `deadline` passes; returns whether the group became empty. Main
    /// thread only.
    ///
    ///     let group = WorkGroup()
    ///     WorkQueue.global().async(group: group) { load() }
    ///     WorkQueue.runMain(until: group)
    @discardableResult
    public static func runMain(until group: WorkGroup, deadline: WorkDeadline = .distantFuture) -> Bool {
        let empty = AtomicCounter()
        // The notification is main-queue work: the runner looks after it.
        group.notify(queue: .main) { empty.store(1) }
        return runMainUntil({ empty.load() == 1 }, deadline: deadline)
    }

    /// Drains the main queue on the main thread until `task` has finished,
    /// and returns its value (or throws its error). Main thread only.
    ///
    ///     let task = Task.detached { await fetchRows() }
    ///     let rows = WorkQueue.runMain(until: task)
    ///
    /// Main-actor work of the task runs here once SwiftQueues is the global
    /// executor (the main actor is then ``WorkQueue/main``); without it, the
    /// main actor is Dispatch's main queue, which this does not drain.
    @discardableResult
    public static func runMain<Success: Sendable, Failure: Error>(
        until task: Task<Success, Failure>
    ) throws(Failure) -> Success {
        let result = SpinLocked<Result<Success, Failure>?>(nil)
        Task.detached {
            let outcome = await task.result
            result.withLock { $0 = outcome }
            // On Swift's own threads too: wake the runner explicitly.
            WorkQueue.wakeMain()
        }
        _ = runMainUntil({ result.withLock { $0 != nil } }, deadline: .distantFuture)
        return try result.withLock { $0! }.get()
    }

    /// Makes a ``runMain(until:deadline:)`` that waits on the main thread
    /// look at its condition again. Any thread; cheap (one `write(2)`).
    /// Needed only after a thread of your own (not a queue's work, not a
    /// task) makes the condition true.
    public static func wakeMain() {
        sq_main_queue_wakeup()
    }

    /// Drains the main queue on the main thread, waiting for work, until
    /// `deadline` passes. Main thread only.
    public static func runMain(until deadline: WorkDeadline) {
        sq_main_queue_run_until(deadline.rawValue, nil, nil)
    }
}
