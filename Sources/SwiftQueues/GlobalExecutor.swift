//===----------------------------------------------------------------------===//
//
// SwiftQueues — the whole of Swift concurrency on SwiftQueues:
// WorkQueue.installAsGlobalExecutor() sets the concurrency runtime's
// executor hooks (the C side is Sources/CRuntime/swift_executor.c).
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues
@_spi(ExperimentalCustomExecutors) import _Concurrency

extension WorkQueue {
    /// Makes SwiftQueues the executor of all of Swift concurrency in this
    /// process: every task, every default actor and `Task.sleep` then run on
    /// SwiftQueues' pool, and the main actor on ``WorkQueue/main``.
    ///
    ///     WorkQueue.installAsGlobalExecutor()   // first statement of a synchronous main
    ///
    /// Call it once, before the first task is created: first thing in a
    /// synchronous `main`, or from a static initializer that runs before
    /// it. An `async` `main` (or a `main.swift` with top-level `await`)
    /// already runs in a task when its first line runs: there use
    /// ``runAsyncMain(_:)`` or ``SwiftQueuesMain``, which install first and
    /// then run the async code, or set `SWIFTQUEUES_GLOBAL_EXECUTOR=1`.
    ///
    /// Returns `true` once SwiftQueues is the executor (a second call is
    /// harmless and returns `true` again), and `false`, changing nothing,
    /// when it is too late (called from inside a task, or after a task has
    /// already run on Swift's default executor) or another library has set
    /// the runtime's hooks. The first refusal in a process says why on
    /// standard error, in one line
    /// `SwiftQueues: WorkQueue.installAsGlobalExecutor(): not installed: ...`.
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
        install(from: "WorkQueue.installAsGlobalExecutor()")
    }

    fileprivate static func install(from call: String) -> Bool {
        let installed = sq_swift_executor_install(mainExecutorRef())
        if installed {
            // The Swift side of the runtime keeps its own main and default
            // executors (MainActor.executor, Task.defaultExecutor: used by
            // the async-main runner and by Task.sleep): ours too. Setting
            // them again on a second call stores the same objects.
            _createExecutors(factory: SwiftQueuesExecutorFactory.self)
        } else if refusalReported.increment() == 1, let reason = sq_swift_executor_refusal() {
            warningLine("\(call): not installed: \(String(cString: reason)); install first thing in a "
                + "synchronous main, run async code with WorkQueue.runAsyncMain or SwiftQueuesMain, "
                + "or set SWIFTQUEUES_GLOBAL_EXECUTOR=1")
        }
        return installed
    }

    /// Whether a refused install has been reported (once per process).
    private static let refusalReported = AtomicCounter()

    /// The synchronous entry of a program whose code is async: installs
    /// SwiftQueues as the global executor, runs `body` as a main-actor
    /// task while the main thread drains the main queue, and ends the
    /// process when `body` returns (status 0) or throws (the error on
    /// standard error, status 1). What an `async` `main` does, with the
    /// executor installed before the first task.
    ///
    ///     // main.swift: no top-level await, so main is synchronous
    ///     import SwiftQueues
    ///     WorkQueue.runAsyncMain {
    ///         let rows = try await database.load()
    ///         print(rows.count)
    ///     }
    ///
    /// Call it on the main thread, before any task. If the install is
    /// refused (the reason is on standard error), `body` still runs, on
    /// Swift's default executor and Dispatch's main queue.
    @available(*, noasync, message: "an async context already runs in a task: call it from a synchronous main")
    public static func runAsyncMain(_ body: @escaping @MainActor () async throws -> Void) -> Never {
        let installed = install(from: "WorkQueue.runAsyncMain(_:)")
        Task { @MainActor in
            do {
                try await body()
            } catch {
                var line = "Error raised at top level: \(String(reflecting: error))\n"
                line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
                exit(1)
            }
            exit(0)
        }
        if installed { runMain() }
        // Not installed: the runtime's own async-main loop drains the main
        // actor's queue (Dispatch's).
        swiftAsyncMainDrainQueue()
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
    _ = WorkQueue.install(from: "SWIFTQUEUES_GLOBAL_EXECUTOR=1")
}

/// The concurrency runtime's loop at the end of an async `main`: drains the
/// main actor's queue for ever.
@_silgen_name("swift_task_asyncMainDrainQueue")
private func swiftAsyncMainDrainQueue() -> Never

/// A program whose `main` is async, on SwiftQueues: mark the type `@main`
/// and write the program in ``run()``. Its `main` installs SwiftQueues as
/// the global executor first, then runs `run()` on the main actor (see
/// ``WorkQueue/runAsyncMain(_:)``). An `async` `main` cannot install it
/// itself: it already runs in a task on Swift's default executor.
///
///     @main struct Server: SwiftQueuesMain {
///         static func run() async throws {
///             let listener = try await Listener.bind(port: 8080)
///             for await connection in listener { handle(connection) }
///         }
///     }
public protocol SwiftQueuesMain: SendableMetatype {
    /// The program. Returning ends the process with status 0; throwing
    /// prints the error and ends it with status 1.
    @MainActor static func run() async throws
}

extension SwiftQueuesMain {
    /// The entry point `@main` calls: synchronous, so the executor is
    /// installed before the first task.
    public static func main() {
        WorkQueue.runAsyncMain { try await run() }
    }
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
        WorkQueue.wakeMain()      // run() looks at the flag again
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
