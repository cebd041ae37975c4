// Main-queue checks run by MainQueueTests.swift: each mode drains
// WorkQueue.main on this program's main thread and prints what it saw; the
// test compares the output. Exit status 0 means every check held.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftQueues

/// The kernel thread id of the calling thread; the main thread's is the pid.
private func onMainThread() -> Bool {
    // /proc/thread-self names the calling thread's task directory.
    var buffer = [CChar](repeating: 0, count: 64)
    let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard n > 0 else { return false }
    let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return link.hasSuffix("/task/\(getpid())")
}

private func fail(_ message: String) -> Never {
    print("FAIL: \(message)")
    exit(1)
}

private func drain() {
    // Work on the main queue runs in order, on the main thread.
    let log = SpinLock()
    nonisolated(unsafe) var order: [Int] = []
    let offMain = AtomicCounter()
    for i in 0..<100 {
        WorkQueue.main.async {
            if !onMainThread() { offMain.increment() }
            log.withLock { order.append(i) }
        }
    }
    // The descriptor is readable while work waits, and not after draining.
    // (Made now, after the work was queued: it starts readable.)
    guard let fd = try? WorkQueue.mainQueueFileDescriptor else { fail("no descriptor") }
    var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&pfd, 1, 10_000) == 1 else { fail("fd not readable with work queued") }
    var total = 0
    while total < 100 { total += WorkQueue.drainMain() }
    pfd.revents = 0
    guard poll(&pfd, 1, 0) == 0 else { fail("fd still readable after draining") }
    guard WorkQueue.drainMain() == 0 else { fail("second drain ran something") }
    guard offMain.load() == 0 else { fail("\(offMain.load()) closures ran off the main thread") }
    guard order == Array(0..<100) else { fail("order \(order)") }
    print("drain: 100 closures in order on the main thread")
}

private func runUntilCondition() {
    // Work sent from other threads wakes the waiting main thread.
    let counter = AtomicCounter()
    let group = WorkGroup()
    for _ in 0..<10 {
        WorkQueue.global().async(group: group) {
            WorkQueue.main.async { counter.increment() }
        }
    }
    let finished = WorkQueue.runMain(until: { counter.load() == 10 },
                                     deadline: .now() + .seconds(30))
    guard finished, counter.load() == 10 else { fail("runMain(until:) returned early: \(counter.load())") }
    print("runMain(until:): 10 closures from other threads")
}

private func runUntilTaskOrGroup() {
    // A task ends the wait: on Swift's own threads without the executor
    // installed (the runner then also looks every 10 ms), on the pool with.
    for round in 0..<20 {
        let flag = AtomicCounter()
        Task.detached { flag.store(1) }
        let begin = ContinuousClock.now
        let met = WorkQueue.runMain(until: { flag.load() == 1 }, deadline: .now() + .seconds(20))
        guard met, ContinuousClock.now - begin < .seconds(10) else {
            fail("round \(round): a task's flag was not seen")
        }
    }
    let value = WorkQueue.runMain(until: Task.detached { () -> Int in
        try? await Task.sleep(for: .milliseconds(2))
        return 7
    })
    guard value == 7 else { fail("runMain(until: task) returned \(value)") }
    struct Failed: Error {}
    do {
        try WorkQueue.runMain(until: Task.detached { () throws -> Int in throw Failed() })
        fail("runMain(until: task) did not rethrow")
    } catch is Failed {
    } catch {
        fail("runMain(until: task) threw \(error)")
    }
    let group = WorkGroup()
    let done = AtomicCounter()
    for _ in 0..<10 { WorkQueue.global().async(group: group) { done.increment() } }
    guard WorkQueue.runMain(until: group, deadline: .now() + .seconds(20)), done.load() == 10 else {
        fail("runMain(until: group) returned before the group was empty")
    }
    // A wall-clock deadline ends a wait on a condition that never holds.
    let begin = ContinuousClock.now
    guard !WorkQueue.runMain(until: { false }, deadline: .wallNow() + .milliseconds(30)),
          ContinuousClock.now - begin < .seconds(10) else {
        fail("runMain(until:) with a wall-clock deadline")
    }
    print("runMain(until:): woken by tasks; task and group forms")
}

private func runUntilDeadline() {
    let start = ContinuousClock.now
    let ran = AtomicCounter()
    WorkQueue.main.asyncAfter(delay: .milliseconds(20)) { ran.increment() }
    WorkQueue.runMain(until: .now() + .milliseconds(100))
    let elapsed = ContinuousClock.now - start
    guard elapsed >= .milliseconds(95) else { fail("returned after \(elapsed)") }
    guard ran.load() == 1 else { fail("the delayed closure did not run") }
    print("runMain(until: deadline): returned after the deadline; the delayed closure ran")
}

/// An actor isolated to the main queue.
private actor MainBound {
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        WorkQueue.main.asUnownedSerialExecutor()
    }
    private var calls = 0

    func call() -> Bool {
        calls += 1
        return onMainThread()
    }
}

private func mainActorAndExecutor() async {
    // The main queue is a serial executor on the main thread.
    let value = await WorkQueue.main.run { onMainThread() ? 42 : -1 }
    guard value == 42 else { fail("run on main returned \(value)") }
    print("await WorkQueue.main.run: ran on the main thread")
    let actor = MainBound()
    for _ in 0..<100 {
        guard await actor.call() else { fail("actor call ran off the main thread") }
    }
    print("actor on WorkQueue.main: 100 calls on the main thread")
}

private func runForever() -> Never {
    // Like dispatch_main(), runMain() never returns; a closure ends the
    // program.
    WorkQueue.global().async {
        WorkQueue.main.async {
            print("runMain: on main thread \(onMainThread()), exiting from a closure")
            exit(0)
        }
    }
    WorkQueue.runMain()
}

private func withoutDescriptors() {
    // Every descriptor in use before the runtime's first source: the main
    // queue still runs, the calls that need a descriptor throw its errno,
    // a timer waits for the event loop, and once descriptors are back the
    // same calls succeed.
    var pipeFDs: [Int32] = [0, 0]
    guard pipe(&pipeFDs) == 0 else { fail("pipe") }
    var limit = rlimit(rlim_cur: 64, rlim_max: 64)
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { fail("setrlimit") }
    var fillers: [Int32] = []
    while true {
        let fd = open("/dev/null", O_RDONLY)
        if fd < 0 { break }
        fillers.append(fd)
    }
    do {
        _ = try WorkQueue.mainQueueFileDescriptor
        fail("mainQueueFileDescriptor did not throw")
    } catch {
        guard error.errnoCode == EMFILE else { fail("mainQueueFileDescriptor: \(error)") }
    }
    do {
        _ = try ReadSource(fileDescriptor: pipeFDs[0])
        fail("ReadSource did not throw")
    } catch {
        guard error.errnoCode == EMFILE else { fail("ReadSource: \(error)") }
    }
    let fired = AtomicCounter()
    let timer = TimerSource(queue: .global())
    timer.setEventHandler { fired.increment() }
    timer.schedule(deadline: .now() + .milliseconds(10), repeating: nil)
    timer.activate()
    let ran = AtomicCounter()
    WorkQueue.main.async { ran.increment() }
    guard WorkQueue.runMain(until: { ran.load() == 1 }, deadline: .now() + .seconds(10)) else {
        fail("the main queue did not run without descriptors")
    }
    print("no descriptors: the main queue runs; mainQueueFileDescriptor and ReadSource throw EMFILE")
    for fd in fillers { close(fd) }
    let deadline = ContinuousClock.now + .seconds(10)
    while fired.load() == 0 && ContinuousClock.now < deadline { usleep(1000) }
    guard fired.load() == 1 else { fail("the timer did not fire once descriptors were back") }
    guard (try? WorkQueue.mainQueueFileDescriptor) != nil else { fail("no descriptor after all") }
    guard let source = try? ReadSource(fileDescriptor: pipeFDs[0]) else { fail("no read source after all") }
    source.cancel()
    timer.cancel()
    print("descriptors back: the timer fired, the same calls succeed")
}

/// `ProcedureQueue.current` is `main` on the main thread outside procedures
/// (as Foundation's `OperationQueue.current`), in procedures of the main
/// queue, and in every block of a several-block `BlockProcedure`, including
/// the blocks that run on pool threads; it is nil on other threads outside
/// procedures.
private func procedureCurrent() {
    guard ProcedureQueue.current === ProcedureQueue.main else {
        fail("current is not main on the main thread")
    }
    let offMain = SpinLock()
    nonisolated(unsafe) var offMainCurrent: [ProcedureQueue?] = []
    let answered = AtomicCounter()
    WorkQueue.global().async {
        offMain.withLock { offMainCurrent.append(ProcedureQueue.current) }
        answered.increment()
    }
    guard WorkQueue.runMain(until: { answered.load() == 1 }, deadline: .now() + .seconds(10)) else {
        fail("the pool thread did not answer")
    }
    guard offMain.withLock({ offMainCurrent.count == 1 && offMainCurrent[0] == nil }) else {
        fail("current is not nil on a pool thread outside procedures")
    }

    // Blocks record what they see; (main thread?, current is main?) each.
    let log = SpinLock()
    nonisolated(unsafe) var seen: [(onMain: Bool, isMain: Bool)] = []
    func severalBlocks() -> BlockProcedure {
        let procedure = BlockProcedure()
        for _ in 0..<8 {
            procedure.addExecutionBlock {
                usleep(2_000)  // long enough for pool threads to take some
                let entry = (onMainThread(), ProcedureQueue.current === ProcedureQueue.main)
                log.withLock { seen.append(entry) }
            }
        }
        return procedure
    }

    let byHand = severalBlocks()
    byHand.start()
    let handSeen = log.withLock { seen }
    guard handSeen.count == 8, handSeen.allSatisfy(\.isMain) else {
        let wrong = handSeen.filter { !$0.isMain }.count
        fail("a BlockProcedure started on the main thread: \(wrong) of \(handSeen.count) blocks "
            + "(\(handSeen.filter { !$0.onMain }.count) off the main thread) did not see main")
    }

    log.withLock { seen = [] }
    let single = BlockProcedure {
        let entry = (onMainThread(), ProcedureQueue.current === ProcedureQueue.main)
        log.withLock { seen.append(entry) }
    }
    let queued = severalBlocks()
    ProcedureQueue.main.addProcedure(single)
    ProcedureQueue.main.addProcedure(queued)
    guard WorkQueue.runMain(until: { queued.isFinished && single.isFinished },
                            deadline: .now() + .seconds(10)) else {
        fail("the main queue's procedures did not finish")
    }
    let queuedSeen = log.withLock { seen }
    guard queuedSeen.count == 9, queuedSeen.allSatisfy(\.isMain), queuedSeen[0].onMain else {
        fail("main-queue procedures: \(queuedSeen.filter { !$0.isMain }.count) of "
            + "\(queuedSeen.count) blocks did not see main")
    }
    print("ProcedureQueue.current: main on the main thread, in main-queue procedures and in "
        + "every block of a BlockProcedure started there")
}

let mode = CommandLine.arguments.dropFirst().first ?? ""
switch mode {
case "drain": drain()
case "run-until": runUntilCondition()
case "run-until-deadline": runUntilDeadline()
case "run-until-task": runUntilTaskOrGroup()
case "run-main": runForever()
case "no-descriptors": withoutDescriptors()
case "procedure-current": procedureCurrent()
case "executor":
    // The closure-based run awaits on a task while the main thread drains.
    let done = AtomicCounter()
    Task.detached {
        await mainActorAndExecutor()
        done.increment()
    }
    WorkQueue.runMain(until: { done.load() == 1 }, deadline: .now() + .seconds(30))
    guard done.load() == 1 else { fail("executor check did not finish") }
default:
    fail("unknown mode '\(mode)'")
}
