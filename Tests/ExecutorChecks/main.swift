// Checks of SwiftQueues as Swift concurrency's global executor, run by
// GlobalExecutorTests.swift. Installation is once per process and must come
// before the first task, so each mode is a run of this program: a
// synchronous main that installs the executor first (except in `too-late`),
// runs its checks and prints one line per check. Exit status 0 means every
// check held.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftQueues

/// Whether the calling thread runs main-queue work (so: the main thread).
private func onMainQueue() -> Bool { WorkQueue.currentLabel == WorkQueue.main.label }

private func fail(_ message: String) -> Never {
    print("FAIL: \(message)")
    exit(1)
}

private func check(_ condition: Bool, _ message: String) {
    if !condition { fail(message) }
}

/// Runs `body` in a task and waits for it on this (the main) thread,
/// draining the main queue meanwhile so main-actor work can run.
private func runAsync(_ body: @escaping @Sendable () async -> Void) {
    let done = AtomicCounter()
    Task.detached {
        await body()
        done.increment()   // seen when this task's job ends
    }
    guard WorkQueue.runMain(until: { done.load() == 1 }, deadline: .now() + .seconds(30)) else {
        fail("timed out")
    }
}

private func install() {
    check(WorkQueue.installAsGlobalExecutor(), "installAsGlobalExecutor returned false")
    check(WorkQueue.installAsGlobalExecutor(), "a second call returned false")
    check(WorkQueue.isGlobalExecutor, "isGlobalExecutor is false")
}

// MARK: - Modes

private func priorities() {
    install()
    let cases: [(TaskPriority, WorkQueue.Priority)] = [
        (.high, .high), (.userInitiated, .high), (.medium, .default),
        (.utility, .low), (.low, .low), (.background, .background),
    ]
    for (taskPriority, queuePriority) in cases {
        runAsync {
            let task = Task.detached(priority: taskPriority) { WorkQueue.currentLabel }
            let label = await task.value
            check(label == WorkQueue.global(queuePriority).label,
                  "priority \(taskPriority) ran on '\(label)'")
        }
    }
    print("priorities: each TaskPriority ran on its root queue")
}

private enum Trace {
    @TaskLocal static var id = 0
}

private func semantics() {
    install()
    runAsync {
        // Task-local values reach child tasks and survive hops.
        let seen = await Trace.$id.withValue(42) {
            await withTaskGroup(of: Int.self) { group in
                for _ in 0..<100 { group.addTask { Trace.id } }
                return await group.reduce(0) { $0 + ($1 == 42 ? 1 : 0) }
            }
        }
        check(seen == 100, "task-local seen by \(seen) of 100 children")
        print("task-locals: 100 children saw the value")

        // Cancellation: a cancelled task sees it, a group cancels children.
        let task = Task { () -> Bool in
            while !Task.isCancelled { await Task.yield() }
            return true
        }
        task.cancel()
        check(await task.value, "cancelled task did not see it")
        print("cancellation: a spinning task saw cancel()")

        // Task.sleep ends early with CancellationError when cancelled.
        let start = ContinuousClock.now
        let sleeper = Task { () -> Bool in
            do {
                try await Task.sleep(for: .seconds(30))
                return false
            } catch is CancellationError {
                return true
            } catch {
                return false
            }
        }
        try? await Task.sleep(for: .milliseconds(20))
        sleeper.cancel()
        check(await sleeper.value, "sleep was not cancelled")
        check(ContinuousClock.now - start < .seconds(10), "cancelled sleep took too long")
        print("sleep-cancellation: a 30 s sleep ended on cancel()")

        // Task.sleep waits at least its duration (with tolerance too).
        let t0 = ContinuousClock.now
        try? await Task.sleep(for: .milliseconds(30), tolerance: .milliseconds(5))
        check(ContinuousClock.now - t0 >= .milliseconds(30), "sleep returned early")
        try? await Task.sleep(until: .now + .milliseconds(10), clock: .suspending)
        print("sleep: waited at least the duration on both clocks")

        // A task executor preference is still honoured, by child tasks too.
        let queue = WorkQueue(label: "checks.preferred")
        let label = await withTaskExecutorPreference(queue) {
            async let child = WorkQueue.currentLabel
            return await child
        }
        check(label == "checks.preferred", "preferred executor ignored: ran on '\(label)'")
        print("executor-preference: child task ran on the preferred queue")
    }
}

/// An actor isolated to a serial WorkQueue.
private actor QueueCounter {
    let queue: WorkQueue
    var count = 0
    init(queue: WorkQueue) { self.queue = queue }
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
    func bump() -> Int {
        queue.checkIsolated()   // stops the process unless on the queue
        count += 1
        return count
    }
}

private func queueActors() {
    install()
    runAsync {
        let queue = WorkQueue(label: "checks.actor")
        let counter = QueueCounter(queue: queue)
        // Many tasks hop in at once: every call isolated, none lost.
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<2_000 { _ = await counter.bump() } }
            }
        }
        check(await counter.bump() == 16_001, "lost or duplicated calls")
        // Plain queue work and actor calls stay serialised with each other.
        let interleaved = AtomicCounter()
        for _ in 0..<1_000 {
            queue.async { counter.assumeIsolated { _ = $0.count }; _ = interleaved.increment() }
            _ = await counter.bump()
        }
        await queue.run {}
        check(interleaved.load() == 1_000, "queue work lost")
        // A busy queue: the call waits for the queue's work, then runs.
        let gate = CountingSemaphore(value: 0)
        queue.async { gate.wait() }
        let call = Task { await counter.bump() }
        try? await Task.sleep(for: .milliseconds(20))
        gate.signal()
        check(await call.value == 17_002, "call into a busy queue")
    }
    print("queue-actors: 17,002 isolated calls, serialised with queue work")
}

/// Run with one worker (SQ_WORKERS=1): a task calling into a queue-backed
/// actor over and over is one chain of hops run in place on that worker;
/// pool work submitted meanwhile must still get through (the chain gives
/// way when it sees work waiting).
private func queueActorChain() {
    install()
    runAsync {
        let counter = QueueCounter(queue: WorkQueue(label: "checks.chain"))
        let ran = AtomicCounter()
        WorkQueue.global().asyncAfter(delay: .milliseconds(5)) { _ = ran.increment() }
        let deadline = ContinuousClock.now + .seconds(10)
        var calls = 0
        while ran.load() == 0 {
            _ = await counter.bump()
            calls += 1
            if calls % 1024 == 0 {
                check(ContinuousClock.now < deadline, "pool work starved by a chain of actor calls")
            }
        }
    }
    print("queue-actor-chain: pool work ran between the calls of a long chain")
}

private func mainActorSyncMain() {
    install()
    // MainActor work runs on the main thread while main drains the main
    // queue, and main-queue work is isolated to the main actor.
    let steps = AtomicCounter()
    Task { @MainActor in
        check(onMainQueue(), "MainActor task off the main queue")
        steps.increment()
    }
    WorkQueue.main.async {
        MainActor.assumeIsolated { _ = steps.increment() }
    }
    Task.detached {
        let onMain = await MainActor.run { onMainQueue() }
        check(onMain, "MainActor.run off the main queue")
        await WorkQueue.main.run { MainActor.assumeIsolated { _ = steps.increment() } }
        await MainActor.run { _ = steps.increment() }
    }
    guard WorkQueue.runMain(until: { steps.load() == 4 }, deadline: .now() + .seconds(30)) else {
        fail("main-actor work did not run (\(steps.load()) of 4)")
    }
    print("sync-main: MainActor work ran while main drained WorkQueue.main")
}

/// A thread of our own (not a worker of the pool), running `body`.
private final class ThreadBody {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

private func startThread(_ body: @escaping @Sendable () -> Void) {
    var thread = pthread_t()
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    let rc = pthread_create(&thread, nil, { context in
        Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
        return nil
    }, box)
    check(rc == 0, "pthread_create failed")
    pthread_detach(thread)
}

/// runMain(until:) wakes for a condition made true off the main queue, with
/// nothing sent to the main queue: by a task, by global-queue work, by a
/// thread of our own that calls wakeMain(). Installed, the runner does not
/// poll: a lost wake-up waits for the 20 s deadline.
private func mainWake() {
    install()
    func rounds(_ what: String, _ start: (AtomicCounter) -> Void) {
        for round in 0..<100 {
            let flag = AtomicCounter()
            start(flag)
            let begin = ContinuousClock.now
            let met = WorkQueue.runMain(until: { flag.load() == 1 }, deadline: .now() + .seconds(20))
            check(met && ContinuousClock.now - begin < .seconds(10),
                  "\(what): round \(round) was not woken")
        }
    }
    rounds("task") { flag in Task.detached { flag.store(1) } }
    rounds("global queue") { flag in WorkQueue.global().async { flag.store(1) } }
    rounds("thread") { flag in startThread { flag.store(1); WorkQueue.wakeMain() } }
    // The forms that wait for a group or a task.
    let group = WorkGroup()
    let slept = AtomicCounter()
    WorkQueue.global().async(group: group) { usleep(2_000); slept.store(1) }
    check(WorkQueue.runMain(until: group, deadline: .now() + .seconds(20)), "group wait timed out")
    check(slept.load() == 1, "group wait returned early")
    let task = Task { @MainActor () -> Int in
        check(onMainQueue(), "main-actor task off the main queue")
        try? await Task.sleep(for: .milliseconds(2))
        return 42
    }
    check(WorkQueue.runMain(until: task) == 42, "runMain(until: task) returned the wrong value")
    print("main-wake: runMain(until:) woke for tasks, global-queue work and a thread's wakeMain(); group and task forms")
}

private func tooLate() {
    let result = AtomicCounter()
    let done = CountingSemaphore(value: 0)
    Task.detached {
        result.add(WorkQueue.installAsGlobalExecutor() ? 1 : 2)
        done.signal()
    }
    done.wait()
    check(result.load() == 2, "install from inside a task returned true")
    checkTasksStillRun()
    print("too-late: install from a task returned false; tasks still ran")
}

/// After a refused install, everything keeps working on the default
/// executor: a task group, a sleep.
private func checkTasksStillRun() {
    check(!WorkQueue.isGlobalExecutor, "isGlobalExecutor after a refused install")
    let done = CountingSemaphore(value: 0)
    let sum = AtomicCounter()
    Task.detached {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 { group.addTask { sum.increment() } }
        }
        try? await Task.sleep(for: .milliseconds(5))
        done.signal()
    }
    done.wait()
    check(sum.load() == 1000, "tasks lost after a refused install")
}

/// From the main thread, after a task has already run on Swift's default
/// executor: refused (once with a line on stderr), and tasks keep running.
private func lateInstall() {
    let done = CountingSemaphore(value: 0)
    Task.detached { done.signal() }
    done.wait()
    check(!WorkQueue.installAsGlobalExecutor(), "a late install from the main thread returned true")
    check(!WorkQueue.installAsGlobalExecutor(), "a second late install returned true")
    checkTasksStillRun()
    print("late-install: refused after a task ran on the default executor; tasks still ran")
}

/// A synchronous main.swift that runs its async code with runAsyncMain:
/// installed first, the body on the main actor, exit(0) when it returns.
private func runAsyncMainMode() -> Never {
    WorkQueue.runAsyncMain {
        check(WorkQueue.isGlobalExecutor, "runAsyncMain did not install")
        check(onMainQueue(), "the body ran off the main queue")
        let value = await Task.detached { 21 * 2 }.value
        try await Task.sleep(for: .milliseconds(2))
        check(value == 42 && onMainQueue(), "after awaits")
        print("run-async-main: installed, the body ran on the main actor")
    }
}

/// The calling thread's nice value.
private func threadNice() -> Int32 {
    errno = 0
    // who 0: the calling thread (Linux keeps a nice value per thread).
    let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
    return errno == 0 ? nice : -100
}

private actor CallCounter {
    var calls = 0
    var niced = 0
    func call(_ base: Int32) {
        calls += 1
        if threadNice() != base { niced += 1 }
    }
}

/// Run with SQ_WORKERS=1: a process that may not lower its nice value again
/// (no CAP_SYS_NICE, RLIMIT_NICE 0) runs one background task, at nice 10
/// on a thread bound to the background class, then 100,000 calls into a
/// default actor. None of them may run niced: a thread that ran background
/// work cannot come back to the program's value (a tenth of a contended
/// CPU).
private func backgroundNice() {
    var none = rlimit(rlim_cur: 0, rlim_max: 0)
    _ = setrlimit(__rlimit_resource_t(__RLIMIT_NICE.rawValue), &none)
    if getuid() == 0 {
        check(setgid(65534) == 0 && setuid(65534) == 0, "could not drop root")
    }
    install()
    let base = threadNice()
    runAsync {
        let background = await Task.detached(priority: .background) { threadNice() }.value
        let expected = min(base + 10, 19)
        check(background == expected, "background task ran at nice \(background), not \(expected)")
        let counter = CallCounter()
        let niced = await Task.detached { () -> Int in
            for _ in 0..<100_000 { await counter.call(base) }
            return await counter.niced
        }.value
        check(niced == 0, "\(niced) of 100,000 actor calls ran niced")
    }
    print("background-nice: 100,000 actor calls after a background task, none niced")
}

/// A trace recorded with the executor installed: the test reads the file
/// (its path is the second argument) for Swift jobs with their task ids
/// and priorities.
private func traceTasks() {
    install()
    let path = CommandLine.arguments.count > 2 ? CommandLine.arguments[2] : ""
    do { try WorkTrace.start(path: path) } catch { fail("start: \(error)") }
    runAsync {
        let high = Task.detached(priority: .high) { 1 }
        let background = Task.detached(priority: .background) { 2 }
        let sum = await high.value + background.value
        check(sum == 3, "tasks returned \(sum)")
    }
    do { try WorkTrace.stop() } catch { fail("stop: \(error)") }
    print("trace: recorded Swift jobs")
}

switch CommandLine.arguments.dropFirst().first {
case "trace": traceTasks()
case "priorities": priorities()
case "semantics": semantics()
case "queue-actors": queueActors()
case "queue-actor-chain": queueActorChain()
case "sync-main": mainActorSyncMain()
case "too-late": tooLate()
case "main-wake": mainWake()
case "late-install": lateInstall()
case "run-async-main": runAsyncMainMode()
case "background-nice": backgroundNice()
default: fail("unknown mode")
}
exit(0)
