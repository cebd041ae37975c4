// SwiftQueues as Swift concurrency's global executor
// (WorkQueue.installAsGlobalExecutor). Installing is once per process and
// must precede the first task, and test bodies already run in tasks, so
// each case starts a program (Tests/ExecutorChecks, Tests/ExecutorAsyncMain)
// that installs it and checks one area. The whole suite also runs with the
// executor installed: SWIFTQUEUES_GLOBAL_EXECUTOR=1 swift test.

import Testing
import Foundation
import SwiftQueues

@Suite struct GlobalExecutorTests {
    /// Runs a check program without the executor installed from the
    /// environment, unless `environment` says otherwise.
    static func run(_ program: String, _ arguments: [String] = [],
                    environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        var env: [String: String?] = ["SWIFTQUEUES_GLOBAL_EXECUTOR": nil]
        for (key, value) in environment { env[key] = value }
        return try runTestProgram(program, arguments, environment: env)
    }

    @Test func jobPrioritiesPickTheRootQueues() throws {
        let (status, output) = try Self.run("ExecutorChecks", ["priorities"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("priorities: each TaskPriority ran on its root queue"))
    }

    @Test func taskLocalsCancellationSleepAndExecutorPreference() throws {
        let (status, output) = try Self.run("ExecutorChecks", ["semantics"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("task-locals: 100 children saw the value"))
        #expect(output.contains("cancellation: a spinning task saw cancel()"))
        #expect(output.contains("sleep-cancellation: a 30 s sleep ended on cancel()"))
        #expect(output.contains("sleep: waited at least the duration on both clocks"))
        #expect(output.contains("executor-preference: child task ran on the preferred queue"))
    }

    /// Hops into queue-backed actors may run in place: still isolated,
    /// serialised with the queue's other work, none lost.
    @Test func actorsOnWorkQueues() throws {
        let (status, output) = try Self.run("ExecutorChecks", ["queue-actors"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("queue-actors: 17,002 isolated calls, serialised with queue work"))
    }

    /// With one worker, a long chain of such hops still lets other pool
    /// work through.
    @Test func actorCallChainsGiveWayToPoolWork() throws {
        let (status, output) = try Self.run("ExecutorChecks", ["queue-actor-chain"],
                                            environment: ["SQ_WORKERS": "1"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("queue-actor-chain: pool work ran between the calls of a long chain"))
    }

    @Test func mainActorWithASynchronousMain() throws {
        let (status, output) = try Self.run("ExecutorChecks", ["sync-main"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("sync-main: MainActor work ran while main drained WorkQueue.main"))
    }

    @Test func mainActorWithAnAsyncMain() throws {
        let (status, output) = try Self.run("ExecutorAsyncMain",
                                            environment: ["SWIFTQUEUES_GLOBAL_EXECUTOR": "1"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("async-main: main drained WorkQueue.main; MainActor isolated there"))
    }

    /// A condition made true by a task, by global-queue work or by a
    /// thread that calls wakeMain() ends runMain(until:) at once.
    @Test func runMainWakesForConditionsMadeTrueOffTheMainQueue() throws {
        let (status, output) = try Self.run("ExecutorChecks", ["main-wake"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("main-wake: runMain(until:) woke for tasks, global-queue work"))
    }

    @Test func installingTooLateChangesNothing() throws {
        let (status, output) = try Self.run("ExecutorChecks", ["too-late"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("too-late: install from a task returned false; tasks still ran"))
        let (asyncStatus, asyncOutput) = try Self.run("ExecutorAsyncMain")
        #expect(asyncStatus == 0, "\(asyncOutput)")
        #expect(asyncOutput.contains("async-main-too-late: install returned false; tasks still ran"))
    }

    /// In this process the runner's tasks already exist: installing now is
    /// refused, unless the suite runs with the executor installed from the
    /// environment, where a second call is harmless.
    @Test func installingFromATestIsTooLateOrAlreadyDone() {
        let before = WorkQueue.isGlobalExecutor
        #expect(WorkQueue.installAsGlobalExecutor() == before)
        #expect(WorkQueue.isGlobalExecutor == before)
    }
}

/// Runs a program built next to the test binary (a check program the tests
/// start), with `environment` changes (nil removes a variable), and returns
/// its exit status and standard output.
func runTestProgram(_ program: String, _ arguments: [String],
                    environment: [String: String?] = [:]) throws -> (status: Int32, output: String) {
    let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let process = Process()
    process.executableURL = testBinary.deletingLastPathComponent().appendingPathComponent(program)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
