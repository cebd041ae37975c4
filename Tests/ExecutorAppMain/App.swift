// A program written as an async main through SwiftQueuesMain, run by
// GlobalExecutorTests.swift: its synchronous `main` installs SwiftQueues as
// the global executor before the first task, then runs `run()` on the main
// actor while the main thread drains the main queue. `throw` as the first
// argument makes run() throw (the process must end with status 1).

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftQueues

private func require(_ condition: Bool, _ message: String) {
    guard !condition else { return }
    print("FAIL: \(message)")
    exit(2)
}

private func onMainQueue() -> Bool { WorkQueue.currentLabel == WorkQueue.main.label }

private struct Planned: Error {}

@main struct ExecutorAppMain: SwiftQueuesMain {
    static func run() async throws {
        require(WorkQueue.isGlobalExecutor, "not installed")
        require(onMainQueue(), "run() off the main queue")
        MainActor.preconditionIsolated()
        let label = await Task.detached { WorkQueue.currentLabel }.value
        require(label == WorkQueue.global(.default).label, "detached task ran on '\(label)'")
        let sum = await withTaskGroup(of: Int.self) { group in
            for i in 1...100 { group.addTask { i } }
            var total = 0
            for await value in group { total += value }
            return total
        }
        require(sum == 5050, "task group sum \(sum)")
        try await Task.sleep(for: .milliseconds(2))
        require(onMainQueue(), "resumed off the main queue after sleep")
        if CommandLine.arguments.dropFirst().first == "throw" {
            print("app-main: throwing")
            fflush(nil)
            throw Planned()
        }
        print("app-main: installed before the first task; run() on the main actor; returned")
    }
}
