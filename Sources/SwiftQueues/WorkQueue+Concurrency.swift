//===----------------------------------------------------------------------===//
//
// SwiftQueues — WorkQueue and Swift concurrency: `await queue.run { … }`,
// and queues as executors (a serial queue is a SerialExecutor, every queue
// is a TaskExecutor).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

extension WorkQueue {
    // MARK: - async/await

    /// Runs `body` on the queue and returns its result (or throws its
    /// error) to the awaiting task.
    ///
    ///     let thumbnail = try await imageQueue.run { try render(photo) }
    ///
    /// The task suspends; no thread blocks: `body` is submitted like
    /// ``async(_:)`` and its result is handed back through a continuation
    /// from the queue's thread. Cancelling the awaiting task does not stop
    /// `body`: it is plain queue work, which always runs to completion.
    ///
    /// The error type is typed: a non-throwing `body` makes a non-throwing
    /// call.
    public func run<T: Sendable, E: Error>(
        _ body: @escaping @Sendable () throws(E) -> T
    ) async throws(E) -> T {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<T, E>, Never>) in
            self.async { continuation.resume(returning: Result(catching: body)) }
        }
        return try result.get()
    }
}

// MARK: - Executors

/// A queue as an executor for Swift concurrency.
///
/// **SerialExecutor** (serial queues, including ``WorkQueue/main``): an
/// actor can run on the queue, so its methods are serialised with
/// everything else submitted to the queue, and code already on the queue
/// can enter the actor synchronously with `assumeIsolated`.
///
///     actor Database {
///         let queue = WorkQueue(label: "com.example.db")
///         nonisolated var unownedExecutor: UnownedSerialExecutor {
///             queue.asUnownedSerialExecutor()
///         }
///     }
///
/// **TaskExecutor** (every queue; meant for concurrent and global ones):
/// tasks run their nonisolated code on the queue's workers.
///
///     await withTaskExecutorPreference(WorkQueue.global()) {
///         async let a = work(1)   // child tasks run on SwiftQueues' pool
///         async let b = work(2)
///         return await a + b
///     }
///
/// One class plays both roles: a job runs isolated to the queue's serial
/// executor *and* with the queue as its task executor, which is truthful for
/// a serial queue whichever role enqueued it (its work holds the queue
/// exclusively). A concurrent queue runs jobs as a task executor only and
/// cannot isolate an actor: ``asUnownedSerialExecutor()`` on it stops the
/// process with a message.
///
/// A job crosses into C as itself (`UnownedJob` is one pointer), with no
/// allocation; the queue it runs on finds its Swift object again through
/// the C queue's context slot (or, for global and main queues, their fixed
/// identities).
///
/// **Cost of a call into a queue actor.** The Swift runtime switches in
/// place (on the calling thread) only to default actors. To an actor on any
/// custom executor, this one included, an `await` from a task on the
/// default executor is two thread hand-offs: the job is enqueued here and
/// runs on a SwiftQueues worker, and on return the task is enqueued on the
/// cooperative pool, which usually has to wake a sleeping thread. That
/// wake-up, not this enqueue, dominates the several microseconds such a round
/// trip takes. A task that calls the actor often can prefer the actor's queue
/// as its task executor: calls into the actor then run in place (the job
/// already holds the queue), and each return is one enqueue onto the same
/// queue, picked up by the same worker with no wake-up.
///
///     await withTaskExecutorPreference(database.queue) {
///         for row in rows { await database.insert(row) }
///     }
extension WorkQueue: SerialExecutor, TaskExecutor {
    /// Submits a job of an actor running on this queue, or of a task that
    /// prefers this queue as its executor.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = unsafeBitCast(UnownedJob(job), to: UnsafeMutableRawPointer.self)
        // With SwiftQueues as the global executor, a task leaving a pool
        // thread for this queue runs here in place once it has left, if the
        // queue is idle (see GlobalExecutor.swift).
        if !sq_swift_defer_async_f(raw, job, runExecutorJob) {
            sq_async_f(raw, job, runExecutorJob)
        }
    }

    /// This queue as an actor's executor. Serial queues only: on a
    /// concurrent queue actor methods could overlap, so this stops the
    /// process.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        if isConcurrent {
            misuse("WorkQueue.asUnownedSerialExecutor()",
                   "queue '\(label)' is concurrent: only a serial queue can be an actor's executor")
        }
        return UnownedSerialExecutor(ordinary: self)
    }

    /// This queue as a task's preferred executor.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Stops the process unless the calling thread runs this queue's work
    /// (`sq_assert_queue`): what `assumeIsolated` and `preconditionIsolated`
    /// of an actor on this queue rely on.
    public func checkIsolated() {
        if isConcurrent {
            sq_assert_queue_barrier(raw)
        } else {
            sq_assert_queue(raw)
        }
    }

    /// `true` when the innermost queue work on this thread is this queue's;
    /// otherwise nil, so the runtime falls back to ``checkIsolated()``
    /// (which also accepts work of queues targeting this one).
    public func isIsolatingCurrentContext() -> Bool? {
        !isConcurrent && sq_get_current_queue() == raw ? true : nil
    }
}

/// `sq_function_t` for an executor job: the context is the job itself.
private func runExecutorJob(_ context: UnsafeMutableRawPointer?) {
    let job = unsafeBitCast(context.unsafelyUnwrapped, to: UnownedJob.self)
    let queue = WorkQueue.runningExecutor()
    if queue.isConcurrent {
        job.runSynchronously(on: queue.asUnownedTaskExecutor())
    } else {
        job.runSynchronously(isolatedTo: queue.asUnownedSerialExecutor(),
                             taskExecutor: queue.asUnownedTaskExecutor())
    }
}

extension WorkQueue {
    /// The Swift object of the queue whose job is running on this thread.
    /// Only valid inside ``runExecutorJob(_:)``: the job was submitted to
    /// exactly that queue, so it is the innermost one, and the executor
    /// contract keeps its Swift object alive while jobs are pending.
    fileprivate static func runningExecutor() -> WorkQueue {
        let current = sq_get_current_queue()
        if let context = sq_get_context(cObject(current)) {
            return Unmanaged<WorkQueue>.fromOpaque(context).takeUnretainedValue()
        }
        guard let shared = shared(for: current) else {
            misuse("WorkQueue executor", "a job ran outside the WorkQueue it was enqueued on")
        }
        return shared
    }
}
