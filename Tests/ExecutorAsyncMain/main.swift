// An async main with SwiftQueues as the global executor, run by
// GlobalExecutorTests.swift with SWIFTQUEUES_GLOBAL_EXECUTOR=1 (which
// installs the executor as the program loads, before main's task exists),
// and once without it (then installing from main is too late).

import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Ends the program with status 1 and a message unless `condition` holds.
private func require(_ condition: Bool, _ message: String) {
    guard !condition else { return }
    print("FAIL: \(message)")
    exit(1)
}

/// Whether the calling thread runs main-queue work (so: the main thread).
private func onMainQueue() -> Bool { WorkQueue.currentLabel == WorkQueue.main.label }

@main struct ExecutorAsyncMain {
    @MainActor static func main() async {
        // The main thread is on the main queue even outside its work (as
        // with libdispatch): this stops the process if not.
        WorkQueue.precondition(.onQueue(.main))
        if getenv("SWIFTQUEUES_GLOBAL_EXECUTOR") == nil {
            require(!WorkQueue.installAsGlobalExecutor(), "install from async main returned true")
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<100 { group.addTask {} }
            }
            print("async-main-too-late: install returned false; tasks still ran")
            return
        }
        require(WorkQueue.isGlobalExecutor, "not installed from the environment")
        // main's first job runs on the main thread directly; every later
        // one is main-queue work.
        // MainActor and WorkQueue.main are one serial context.
        let ran = await withCheckedContinuation { continuation in
            WorkQueue.main.async {
                MainActor.assumeIsolated { continuation.resume(returning: onMainQueue()) }
            }
        }
        require(ran, "WorkQueue.main work off the main queue")
        let label = await Task.detached { WorkQueue.currentLabel }.value
        require(label == WorkQueue.global(.default).label, "detached task ran on '\(label)'")
        try? await Task.sleep(for: .milliseconds(2))
        require(onMainQueue(), "resumed off the main queue after sleep")
        WorkQueue.precondition(.onQueue(.main))
        print("async-main: main drained WorkQueue.main; MainActor isolated there")
    }
}
