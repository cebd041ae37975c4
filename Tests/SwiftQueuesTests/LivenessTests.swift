// Liveness: work queued behind threads that block (or compute) always runs.
// Each shape is a run of Tests/LivenessChecks in a child process with a
// deadline, at a pool width set by SQ_WORKERS in the child's environment:
// a runtime that hangs on a shape fails that test (with what the child was
// waiting for and a runtime snapshot) instead of hanging the test run.
//
// The child ends itself (status 2) when a mode is not done after
// LIVENESS_DEADLINE_SECONDS or makes no progress for LIVENESS_STALL_SECONDS;
// the test kills it (SIGKILL) if it is still there some seconds later. The
// children run one at a time (the suite is serialised: they time things on
// a small machine) and never with SwiftQueues installed from the
// environment: the modes that need the executor install it themselves.
//
//   swift test --filter Liveness

import Testing
import Foundation
import Synchronization
import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite(.serialized) struct LivenessTests {
    /// How a run of the check program ended.
    struct ChildRun: CustomStringConvertible {
        var arguments: [String]
        var workers: Int?
        /// The exit status, or the signal that ended the child.
        var status: Int32
        var signaled: Bool
        /// Killed by the test: the child's own watchdog did not end it.
        var killed: Bool
        var seconds: Double
        var output: String
        var errors: String

        var succeeded: Bool { !signaled && !killed && status == 0 }

        var description: String {
            let width = workers.map { "SQ_WORKERS=\($0)" } ?? "default width"
            let end = killed ? "killed at the test's deadline"
                : signaled ? "ended by signal \(status)" : "exit status \(status)"
            return "LivenessChecks \(arguments.joined(separator: " ")) (\(width)): \(end) after "
                + "\(Int(seconds * 1000)) ms\n--- stdout ---\n\(output)--- stderr ---\n\(errors)"
        }
    }

    /// The child's own deadline and stall limit (seconds); the test's
    /// deadline is `deadline + killMargin`.
    static let deadline = 20
    static let stall = 10
    static let killMargin = 10

    /// Runs LivenessChecks with `arguments` at `workers` (nil: the default
    /// width) and returns how it ended. Uses plain threads, not the runtime
    /// under test, to drain the child's output and to watch the deadline.
    ///
    /// posix_spawn and waitpid rather than Foundation's Process: Process
    /// learns of the exit from a socket the child holds, which any process
    /// another test starts meanwhile may inherit (the socket is not
    /// close-on-exec), and then waitUntilExit waits for that process too.
    /// Here the pipes are close-on-exec (only the child gets them, as 1
    /// and 2), and the exit comes from waitpid.
    static func run(_ arguments: [String], workers: Int?) throws -> ChildRun {
        let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let path = testBinary.deletingLastPathComponent()
            .appendingPathComponent("LivenessChecks").path
        var env = ProcessInfo.processInfo.environment
        env["SWIFTQUEUES_GLOBAL_EXECUTOR"] = nil
        env["SQ_WORKERS"] = workers.map { String($0) }
        env["LIVENESS_DEADLINE_SECONDS"] = String(deadline)
        env["LIVENESS_STALL_SECONDS"] = String(stall)

        var output: [Int32] = [-1, -1], errors: [Int32] = [-1, -1]
        guard pipe(&output) == 0, pipe(&errors) == 0 else {
            throw SpawnError(call: "pipe", code: errno)
        }
        for fd in output + errors { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO)
        posix_spawn_file_actions_adddup2(&actions, errors[1], STDERR_FILENO)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        let captured = Captured()
        let start = ContinuousClock.now
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, envp)
        posix_spawn_file_actions_destroy(&actions)
        close(output[1])
        close(errors[1])
        guard spawned == 0 else {
            close(output[0])
            close(errors[0])
            throw SpawnError(call: "posix_spawn", code: spawned)
        }
        let limit = Duration.seconds(deadline + killMargin)
        let reads = (output[0], errors[0]), child = pid
        // Both pipes drained at once; both reach end of file when the
        // child is gone. Meanwhile the third thread kills it at the limit.
        onThreads(3) { index in
            switch index {
            case 0, 1:
                let handle = FileHandle(fileDescriptor: index == 0 ? reads.0 : reads.1,
                                        closeOnDealloc: true)
                let data = handle.readDataToEndOfFile()
                if index == 0 {
                    captured.output.withLock { $0 = data }
                } else {
                    captured.errors.withLock { $0 = data }
                }
                captured.closed.add(1, ordering: .sequentiallyConsistent)
            default:
                while captured.closed.load(ordering: .sequentiallyConsistent) < 2 {
                    if ContinuousClock.now - start > limit {
                        captured.killed.store(true, ordering: .sequentiallyConsistent)
                        kill(child, SIGKILL)
                        return
                    }
                    usleep(20_000)
                }
            }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let elapsed = ContinuousClock.now - start
        // The wait status: the low 7 bits are the ending signal (0: an
        // exit, whose status is the next byte).
        let signal = status & 0x7f
        return ChildRun(
            arguments: arguments, workers: workers,
            status: signal == 0 ? (status >> 8) & 0xff : signal,
            signaled: signal != 0,
            killed: captured.killed.load(ordering: .sequentiallyConsistent),
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            output: String(decoding: captured.output.withLock { $0 }, as: UTF8.self),
            errors: String(decoding: captured.errors.withLock { $0 }, as: UTF8.self))
    }

    /// Runs a mode, expects it to succeed and print `summary`, and logs its
    /// lines (with the time it took).
    @discardableResult
    static func expectLive(_ arguments: [String], workers: Int?, summary: String,
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> ChildRun {
        let run = try run(arguments, workers: workers)
        let width = workers.map { "SQ_WORKERS=\($0)" } ?? "default width"
        for line in run.output.split(separator: "\n") where !line.hasPrefix("  ") {
            print("[liveness \(arguments[0]), \(width), \(Int(run.seconds * 1000)) ms] \(line)")
        }
        #expect(run.succeeded, "\(run)", sourceLocation: sourceLocation)
        #expect(run.output.contains(summary), "no '\(summary)' in:\n\(run)",
                sourceLocation: sourceLocation)
        return run
    }

    // MARK: - Shapes

    /// 1. The cache pattern as tasks, SwiftQueues the global executor: 1,000
    /// tasks in a group each block 100 us (or not at all), read through a
    /// serial cache queue with sync and write back with async; three rounds.
    /// Every read happens and box.n ends at 1,000. Blocked tasks must not
    /// hold every thread the cache queue's work needs.
    @Test(arguments: [100, 0], [1, 2, 4, 16])
    func cachePatternAsTasks(sleepMicros: Int, workers: Int) throws {
        try Self.expectLive(["task-cache", "1000", "\(sleepMicros)", "3"], workers: workers,
                            summary: "task-cache: 3 rounds of 1000 tasks (usleep \(sleepMicros)): every read and write done")
    }

    /// 2. The same as queue work: 2,000 items on the global queue in a
    /// WorkGroup, each blocking 200 us, then the sync read and the async
    /// write; the group polled with wait(timeout:).
    @Test(arguments: [nil, 1, 4] as [Int?])
    func cachePatternAsQueueWork(workers: Int?) throws {
        try Self.expectLive(["queue-cache", "2000", "200"], workers: workers,
                            summary: "queue-cache: 2000 items (usleep 200): every read and write done")
    }

    /// 2, at full size: 10,000 items blocking 1 ms each, at a width of 4
    /// (about 1.5 s on 2 CPUs; at width 1 it takes about 8 s, as the pool
    /// barely adds threads for usleep).
    @Test func cachePatternAsQueueWorkFullSize() throws {
        try Self.expectLive(["queue-cache", "10000", "1000"], workers: 4,
                            summary: "queue-cache: 10000 items (usleep 1000): every read and write done")
    }

    /// 3. A task starts a child with Task { } and computes for 500 ms
    /// without suspending while two other tasks ping-pong through a pair of
    /// AsyncStreams: the child starts within 100 ms (the target is about
    /// 1 ms; left in its parent's next-job slot it would wait the whole
    /// 500 ms). Three rounds; each round's figure is printed.
    @Test(arguments: [2, 4])
    func childOfAComputingParentStartsPromptly(workers: Int) throws {
        try Self.expectLive(["child-start", "3", "500", "100"], workers: workers,
                            summary: "child-start: every child started within 100 ms")
    }

    /// 4. A service written the older way, as queue work: 1,000 requests,
    /// 64 in flight (a CountingSemaphore), a WorkGroup fan-out of four
    /// sub-lookups each, a serial cache queue synced around blocking backend
    /// calls, a timer holding a serial index queue 150 ms of every 300 ms
    /// while requests sync onto it, an asyncAfter deadline per request
    /// (cancelled when it finishes), one request in four through a
    /// ProcedureQueue pipeline. Every request finishes.
    @Test(arguments: [nil, 1, 4] as [Int?])
    func queueBasedServiceFinishesEveryRequest(workers: Int?) throws {
        try Self.expectLive(["service", "1000"], workers: workers,
                            summary: "service: 1000 requests (250 through procedures) finished")
    }
}

/// What the threads of `LivenessTests.run` share.
/// A failed pipe2 or posix_spawn, with its errno.
private struct SpawnError: Error {
    let call: String
    let code: Int32
}

private final class Captured: Sendable {
    let output = Mutex(Data())
    let errors = Mutex(Data())
    /// Pipes that reached end of file.
    let closed = Atomic<Int>(0)
    let killed = Atomic<Bool>(false)
}
