// The main queue from Swift: WorkQueue.main work runs only while the main
// thread drains it. Test bodies never run on the process's main thread (not
// even through MainActor, nor in exit tests), so each case starts the
// MainQueueChecks program (Tests/MainQueueChecks) and checks its output.

import Testing
import Foundation

@Suite struct MainQueueTests {
    /// The checks program sits next to the test binary in the build folder.
    static func runChecks(_ mode: String) throws -> (status: Int32, output: String) {
        try runTestProgram("MainQueueChecks", [mode])
    }

    /// Closures sent to the main queue run in order on the main thread when
    /// it drains; the descriptor signals work.
    @Test func drainMainRunsClosuresInOrderOnTheMainThread() throws {
        let (status, output) = try Self.runChecks("drain")
        #expect(status == 0, "\(output)")
        #expect(output.contains("drain: 100 closures in order on the main thread"))
    }

    @Test func runMainUntilWakesForWorkFromOtherThreads() throws {
        let (status, output) = try Self.runChecks("run-until")
        #expect(status == 0, "\(output)")
        #expect(output.contains("runMain(until:): 10 closures from other threads"))
    }

    @Test func runMainUntilWakesForTasksGroupsAndTaskResults() throws {
        let (status, output) = try Self.runChecks("run-until-task")
        #expect(status == 0, "\(output)")
        #expect(output.contains("runMain(until:): woken by tasks; task and group forms"))
    }

    @Test func runMainUntilADeadlineReturnsAfterIt() throws {
        let (status, output) = try Self.runChecks("run-until-deadline")
        #expect(status == 0, "\(output)")
        #expect(output.contains("returned after the deadline; the delayed closure ran"))
    }

    /// Like dispatch_main(), runMain() never returns; the program ends from
    /// a closure on the main queue.
    @Test func runMainServesTheMainQueueUntilExit() throws {
        let (status, output) = try Self.runChecks("run-main")
        #expect(status == 0, "\(output)")
        #expect(output.contains("runMain: on main thread true, exiting from a closure"))
    }

    @Test func theMainQueueIsAnExecutorOnTheMainThread() throws {
        let (status, output) = try Self.runChecks("executor")
        #expect(status == 0, "\(output)")
        #expect(output.contains("await WorkQueue.main.run: ran on the main thread"))
        #expect(output.contains("actor on WorkQueue.main: 100 calls on the main thread"))
    }

    /// Out of descriptors: the main queue needs none; the calls that do
    /// throw their errno (`IOError`, `SourceError` with `EMFILE`), a timer
    /// waits for the event loop, and all of it works once descriptors are
    /// back.
    @Test func withoutDescriptorsTheMainQueueRunsAndCallsThrow() throws {
        let (status, output) = try Self.runChecks("no-descriptors")
        #expect(status == 0, "\(output)")
        #expect(output.contains("no descriptors: the main queue runs; mainQueueFileDescriptor and ReadSource throw EMFILE"))
        #expect(output.contains("descriptors back: the timer fired, the same calls succeed"))
    }

    @Test func anUnknownModeFails() throws {
        // The harness itself can fail: a wrong mode exits non-zero.
        let (status, output) = try Self.runChecks("no-such-mode")
        #expect(status == 1)
        #expect(output.contains("FAIL: unknown mode"))
    }
}
