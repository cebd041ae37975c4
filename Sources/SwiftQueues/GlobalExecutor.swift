//===----------------------------------------------------------------------===//
//
// SwiftQueues — the whole of Swift concurrency on SwiftQueues:
// WorkQueue.installAsGlobalExecutor() sets the concurrency runtime's
// executor hooks (the C side is Sources/CRuntime/swift_executor.c).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues
@_spi(ExperimentalCustomExecutors) import _Concurrency

extension WorkQueue {
    /// Makes SwiftQueues the executor of all of Swift concurrency in this
    /// process: every task, every default actor and `Task.sleep` then run on
    /// SwiftQueues' pool, and the main actor on ``WorkQueue/main``.
    ///
    ///     @main struct Server {
    ///         static func main() async {
    ///             // ... everything here already runs on SwiftQueues
    ///         }
    ///     }
    ///
    /// Call it once, before the first task is created: first thing in a
    /// synchronous `main`, or from a static initializer that runs before
    /// it. Returns `true` once SwiftQueues is the executor (a second call is
    /// harmless and returns `true` again), and `false`, changing nothing,
    /// when it is too late (called from inside a task, which already runs on
    /// the default executor) or another library has set the runtime's hooks.
    ///
    /// Once installed:
    /// - A job's priority picks the root queue: `.high` and
    ///   `.userInitiated` the high one, `.medium` (and no priority) the
    ///   default one, `.utility` / `.low` the low one, `.background` the
    ///   background one.
    /// - `Task.sleep` is an event-loop timer; a `tolerance` becomes the
    ///   timer's leeway.
    /// - The main actor runs on ``WorkQueue/main``: the two are one serial
    ///   context (`MainActor.assumeIsolated` holds in work sent to
    ///   `WorkQueue.main`). An `async` `main` drains the main queue by
    ///   itself. A synchronous `main` must drain it, with
    ///   ``runMain()``, ``runMain(until:deadline:)`` or ``drainMain()``,
    ///   for main-actor work to run — exactly as for `WorkQueue.main.async`.
    /// - A call from a task into an actor whose executor is a serial
    ///   `WorkQueue` no longer crosses between two thread pools.
    @discardableResult
    public static func installAsGlobalExecutor() -> Bool {
        let installed = sq_swift_executor_install(mainExecutorRef())
        if installed {
            // The Swift side of the runtime keeps its own main and default
            // executors (MainActor.executor, Task.defaultExecutor: used by
            // the async-main runner and by Task.sleep): ours too. Setting
            // them again on a second call stores the same objects.
            _createExecutors(factory: SwiftQueuesExecutorFactory.self)
        }
        return installed
    }

    /// Whether ``installAsGlobalExecutor()`` succeeded in this process.
    public static var isGlobalExecutor: Bool {
        sq_swift_executor_installed()
    }
}

/// `WorkQueue.main` as an executor reference: what the main actor runs on.
private func mainExecutorRef() -> sq_swift_executor_ref_t {
    let main = unsafeBitCast(WorkQueue.main.asUnownedSerialExecutor(),
                             to: (UnsafeMutableRawPointer?, UInt).self)
    return sq_swift_executor_ref_t(identity: main.0, implementation: main.1)
}

/// Called by the C library as the program loads when
/// SWIFTQUEUES_GLOBAL_EXECUTOR=1.
@_cdecl("_sq_swift_install_from_environment")
func _sqSwiftInstallFromEnvironment() {
    WorkQueue.installAsGlobalExecutor()
}

// MARK: - The Swift runtime's executor objects

/// The executors the Swift half of the runtime asks for (the 6.3
/// `ExecutorFactory` protocol). The compiler's `-executor-factory` option,
/// which would name such a type for a whole program, is not accepted by the
/// 6.3.1 toolchain, so ``WorkQueue/installAsGlobalExecutor()`` installs it
/// with `_createExecutors(factory:)` instead.
enum SwiftQueuesExecutorFactory: ExecutorFactory {
    static var mainExecutor: any MainExecutor { MainQueueExecutor.shared }
    static var defaultExecutor: any TaskExecutor { PoolExecutor.shared }
}

/// `MainActor.executor`: the main queue. Its serial-executor identity is
/// ``WorkQueue/main`` itself, so the main actor and the main queue are one
/// context whichever way a job arrives.
final class MainQueueExecutor: MainExecutor, @unchecked Sendable {
    static let shared = MainQueueExecutor()
    private let stopped = AtomicCounter()

    func enqueue(_ job: consuming ExecutorJob) {
        WorkQueue.main.enqueue(job)
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        WorkQueue.main.asUnownedSerialExecutor()
    }

    func checkIsolated() {
        WorkQueue.main.checkIsolated()
    }

    func isIsolatingCurrentContext() -> Bool? {
        WorkQueue.main.isIsolatingCurrentContext()
    }

    /// Drains the main queue until ``stop()``.
    func run() throws {
        stopped.store(0)
        WorkQueue.runMain(until: { self.stopped.load() != 0 })
    }

    func runUntil(_ condition: () -> Bool) throws {
        WorkQueue.runMain(until: condition)
    }

    func stop() {
        stopped.store(1)
        WorkQueue.main.async {}   // wakes run() to look at the flag
    }
}

/// `Task.defaultExecutor`: the root queues, by job priority. Not a
/// scheduling executor, so `Task.sleep` goes through the runtime's
/// delayed-enqueue hook (event-loop timers, tolerance as leeway).
final class PoolExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = PoolExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = unsafeBitCast(UnownedJob(job), to: UnsafeMutableRawPointer.self)
        sq_swift_enqueue_task_job(job, runPoolExecutorJob)
    }
}

/// A job enqueued on ``PoolExecutor`` as a task executor runs with it as
/// the task executor.
private func runPoolExecutorJob(_ context: UnsafeMutableRawPointer?) {
    let job = unsafeBitCast(context.unsafelyUnwrapped, to: UnownedJob.self)
    job.runSynchronously(on: PoolExecutor.shared.asUnownedTaskExecutor())
}
