//===----------------------------------------------------------------------===//
//
// SwiftQueues — the whole of Swift concurrency on SwiftQueues:
// WorkQueue.installAsGlobalExecutor() sets the concurrency runtime's
// executor hooks (the C side is Sources/CRuntime/swift_executor.c).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

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
        sq_swift_executor_install(_sqSwiftMainExecutorRef())
    }

    /// Whether ``installAsGlobalExecutor()`` succeeded in this process.
    public static var isGlobalExecutor: Bool {
        sq_swift_executor_installed()
    }
}

/// `WorkQueue.main` as an executor reference, for the C side when the
/// executor was installed from the environment (SWIFTQUEUES_GLOBAL_EXECUTOR=1)
/// before Swift code could run.
@_cdecl("_sq_swift_main_executor_ref")
func _sqSwiftMainExecutorRef() -> sq_swift_executor_ref_t {
    let main = unsafeBitCast(WorkQueue.main.asUnownedSerialExecutor(),
                             to: (UnsafeMutableRawPointer?, UInt).self)
    return sq_swift_executor_ref_t(identity: main.0, implementation: main.1)
}
