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
        let (status, output, _) = try runWithErrors(program, arguments, environment: environment)
        return (status, output)
    }

    /// `run`, with the program's standard error too.
    static func runWithErrors(_ program: String, _ arguments: [String] = [],
                              environment: [String: String] = [:])
        throws -> (status: Int32, output: String, errors: String)
    {
        var env: [String: String?] = ["SWIFTQUEUES_GLOBAL_EXECUTOR": nil]
        for (key, value) in environment { env[key] = value }
        return try runTestProgramCapturingErrors(program, arguments, environment: env)
    }

    /// The line a refused install writes, for `reason`.
    static func refusal(_ call: String, _ reason: String) -> String {
        "SwiftQueues: \(call): not installed: \(reason)"
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

    /// Under the installed executor, a trace shows each Swift job as a
    /// slice with its task id and priority.
    @Test func traceShowsSwiftJobsWithTaskIdAndPriority() throws {
        let path = NSTemporaryDirectory() + "sq-executor-trace-\(getpid()).json"
        defer { unlink(path) }
        let (status, output) = try Self.run("ExecutorChecks", ["trace", path],
                                            environment: ["SQ_TRACE": ""])
        #expect(status == 0, "\(output)")
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let root = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let events = try #require(root?["traceEvents"] as? [[String: Any]])
        let jobs = events.filter { $0["ph"] as? String == "X" && $0["cat"] as? String == "swift" }
        let args = jobs.compactMap { $0["args"] as? [String: Any] }
        let ids = args.compactMap { $0["task_id"] as? Int }
        let priorities = Set(args.compactMap { $0["priority"] as? Int })
        #expect(!jobs.isEmpty)
        #expect(ids.allSatisfy { $0 > 0 })
        // The slice's name carries the id too.
        #expect(jobs.allSatisfy { ($0["name"] as? String)?.hasPrefix("Swift task ") == true })
        // TaskPriority raw values: high 25, background 9.
        #expect(priorities.contains(25), "priorities seen: \(priorities)")
        #expect(priorities.contains(9), "priorities seen: \(priorities)")
    }

    /// With one worker, work after a background task does not stay niced
    /// when the process cannot raise its priority again.
    @Test func workAfterABackgroundTaskIsNotNiced() throws {
        let (status, output) = try Self.run("ExecutorChecks", ["background-nice"],
                                            environment: ["SQ_WORKERS": "1"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("background-nice: 100,000 actor calls after a background task, none niced"))
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

    /// From inside a task (a test body, an async main, top-level await):
    /// refused, and the first refusal says why on stderr.
    @Test func installingTooLateChangesNothing() throws {
        let inTask = Self.refusal("WorkQueue.installAsGlobalExecutor()",
                                  "called from inside a task, which already runs on Swift's default executor")
        let (status, output, errors) = try Self.runWithErrors("ExecutorChecks", ["too-late"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("too-late: install from a task returned false; tasks still ran"))
        #expect(errors.contains(inTask), "\(errors)")
        let (asyncStatus, asyncOutput, asyncErrors) = try Self.runWithErrors("ExecutorAsyncMain")
        #expect(asyncStatus == 0, "\(asyncOutput)")
        #expect(asyncOutput.contains("async-main-too-late: install returned false; tasks still ran"))
        #expect(asyncErrors.contains(inTask), "\(asyncErrors)")
        #expect(asyncErrors.contains("WorkQueue.runAsyncMain or SwiftQueuesMain"))
    }

    /// From the main thread, after a task already ran on the default
    /// executor: refused too, said once (two calls, one line).
    @Test func installingAfterATaskRanIsRefused() throws {
        let (status, output, errors) = try Self.runWithErrors("ExecutorChecks", ["late-install"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("late-install: refused after a task ran on the default executor; tasks still ran"))
        let line = Self.refusal("WorkQueue.installAsGlobalExecutor()",
                                "a task has already run on Swift's default executor")
        #expect(errors.components(separatedBy: line).count == 2, "\(errors)")
        #expect(errors.components(separatedBy: "\n").filter { $0.hasPrefix("SwiftQueues:") }.count == 1)
    }

    /// The ways that work for async code: runAsyncMain from a synchronous
    /// main.swift, and a @main type conforming to SwiftQueuesMain.
    @Test func asyncCodeWithTheExecutorInstalledFirst() throws {
        let (status, output, errors) = try Self.runWithErrors("ExecutorChecks", ["run-async-main"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("run-async-main: installed, the body ran on the main actor"))
        #expect(errors.isEmpty, "\(errors)")
        let (appStatus, appOutput, appErrors) = try Self.runWithErrors("ExecutorAppMain")
        #expect(appStatus == 0, "\(appOutput)")
        #expect(appOutput.contains("app-main: installed before the first task; run() on the main actor; returned"))
        #expect(appErrors.isEmpty, "\(appErrors)")
        let (throwStatus, throwOutput, throwErrors) = try Self.runWithErrors("ExecutorAppMain", ["throw"])
        #expect(throwStatus == 1, "\(throwOutput)")
        #expect(throwOutput.contains("app-main: throwing"))
        #expect(throwErrors.contains("Error raised at top level: "), "\(throwErrors)")
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
    let (status, output, _) = try runTestProgramCapturingErrors(program, arguments,
                                                                environment: environment)
    return (status, output)
}

/// `runTestProgram`, returning standard error too.
func runTestProgramCapturingErrors(_ program: String, _ arguments: [String],
                                   environment: [String: String?] = [:])
    throws -> (status: Int32, output: String, errors: String)
{
    let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let process = Process()
    process.executableURL = testBinary.deletingLastPathComponent().appendingPathComponent(program)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let output = Pipe(), errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Both pipes drained at once, so a chatty program cannot fill one and stall.
    let errorData = SpinLocked(Data())
    let errorsDone = CountingSemaphore(value: 0)
    WorkQueue.global().async {
        let data = errors.fileHandleForReading.readDataToEndOfFile()
        errorData.withLock { $0 = data }
        errorsDone.signal()
    }
    let outputData = output.fileHandleForReading.readDataToEndOfFile()
    errorsDone.wait()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: outputData, as: UTF8.self),
            String(decoding: errorData.withLock { $0 }, as: UTF8.self))
}
