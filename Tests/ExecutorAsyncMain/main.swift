// An async main with SwiftQueues as the global executor, run by
// GlobalExecutorTests.swift with SWIFTQUEUES_GLOBAL_EXECUTOR=1 (which
// installs the executor as the program loads, before main's task exists),
// and once without it (then installing from main is too late).

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftQueues

/// Whether the calling thread is the process's main thread (its kernel
/// thread id is the process id).
private func isMainThread() -> Bool {
    var buffer = [CChar](repeating: 0, count: 64)
    let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard n > 0 else { return false }
    let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return link.hasSuffix("/task/\(getpid())")
}

private func check(_ condition: Bool, _ message: String) {
    if !condition {
        print("FAIL: \(message)")
        exit(1)
    }
}

@main struct ExecutorAsyncMain {
    @MainActor static func main() async {
        if getenv("SWIFTQUEUES_GLOBAL_EXECUTOR") == nil {
            check(!WorkQueue.installAsGlobalExecutor(), "install from async main returned true")
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<100 { group.addTask {} }
            }
            print("async-main-too-late: install returned false; tasks still ran")
            return
        }
        check(WorkQueue.isGlobalExecutor, "not installed from the environment")
        check(isMainThread(), "async main off the main thread")
        // MainActor and WorkQueue.main are one serial context.
        let ran = await withCheckedContinuation { continuation in
            WorkQueue.main.async {
                MainActor.assumeIsolated { continuation.resume(returning: isMainThread()) }
            }
        }
        check(ran, "WorkQueue.main work off the main thread")
        let label = await Task.detached { WorkQueue.currentLabel }.value
        check(label == WorkQueue.global(.default).label, "detached task ran on '\(label)'")
        try? await Task.sleep(for: .milliseconds(2))
        check(isMainThread(), "resumed off the main thread after sleep")
        print("async-main: main drained WorkQueue.main; MainActor isolated there")
    }
}
