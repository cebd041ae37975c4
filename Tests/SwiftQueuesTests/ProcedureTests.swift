// Procedure, BlockProcedure and InvocationProcedure: states, manual start,
// subclassing (synchronous and asynchronous), cancellation, observers,
// thread priority, completion blocks, waiting, dependencies without a queue.

import Synchronization
import Testing
import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - Subclasses used below

/// `MyNonConcurrentOperation`: data in, result stored in the
/// procedure.
fileprivate final class SumProcedure: Procedure, @unchecked Sendable {
    let data: [Int]
    private let output = ProcBox<Int?>(nil)
    private let ranOn = ProcBox<UInt>(0)

    init(data: [Int]) {
        self.data = data
        super.init()
    }

    override func main() {
        guard !isCancelled else { return }
        let sum = data.reduce(0, +)
        output.value = sum
        ranOn.value = procThreadID()
    }

    var sum: Int? { output.value }
    var thread: UInt { ranOn.value }
}

/// A loop that polls isCancelled once per 1 ms iteration.
fileprivate final class LoopProcedure: Procedure, @unchecked Sendable {
    let iterations = Atomic<Int>(0)
    let cleanedUp = Atomic<Bool>(false)
    let exitedAt = ProcBox<Double>(0)

    override func main() {
        var isDone = false
        while !isCancelled && !isDone {
            procSleep(1)
            if iterations.wrappingAdd(1, ordering: .relaxed).newValue >= 10_000 { isDone = true }
        }
        cleanedUp.store(true, ordering: .relaxed)  // the cleanup an early exit must still do
        exitedAt.value = procNow()
    }
}

/// `MyOperation`: overrides start(), never calls super, runs
/// main() on a thread of its own and reports executing / finished itself.
fileprivate final class MyOperation: Procedure, @unchecked Sendable {
    let workMilliseconds: Int
    let workDone = Atomic<Bool>(false)

    init(workMilliseconds: Int) {
        self.workMilliseconds = workMilliseconds
        super.init()
    }

    override var isAsynchronous: Bool { true }

    override func start() {
        // Always check for cancellation before launching the task; a
        // cancelled operation must move to the finished state.
        if isCancelled {
            finish()
            return
        }
        markExecuting()
        procDetach { [self] in
            main()
            completeOperation()
        }
    }

    override func main() {
        procSleep(workMilliseconds)
        workDone.store(true, ordering: .releasing)
    }

    func completeOperation() {
        finish()
    }
}

/// An asynchronous procedure that keeps the default start(): main() starts
/// the work on another thread, which calls finish().
fileprivate final class DeferredFinish: Procedure, @unchecked Sendable {
    let inFlight: ProcInFlight
    let milliseconds: Int
    let finishedOn = ProcBox<UInt>(0)

    init(inFlight: ProcInFlight, milliseconds: Int) {
        self.inFlight = inFlight
        self.milliseconds = milliseconds
        super.init()
    }

    override var isAsynchronous: Bool { true }

    override func main() {
        inFlight.enter()
        procDetach { [self] in
            procSleep(milliseconds)
            finishedOn.value = procThreadID()
            inFlight.exit()
            finish()
        }
    }
}

/// An asynchronous procedure that reports finished only when told.
fileprivate final class ManualFinish: Procedure, @unchecked Sendable {
    override var isAsynchronous: Bool { true }
    override func main() {}
}

/// Readiness also depends on an external flag.
fileprivate final class GatedProcedure: Procedure, @unchecked Sendable {
    private let gate = Atomic<Bool>(false)
    let ran = Atomic<Bool>(false)

    override var isReady: Bool {
        super.isReady && gate.load(ordering: .acquiring)
    }

    func open() {
        gate.store(true, ordering: .releasing)
        notifyReadinessChanged()
    }

    override func main() {
        ran.store(true, ordering: .releasing)
    }
}

/// Records the nice value while main() runs.
fileprivate final class NiceProbe: Procedure, @unchecked Sendable {
    private let seen = ProcBox<Int32?>(nil)

    override func main() {
        seen.value = procNice()
    }

    var niceInMain: Int32? { seen.value }
}

/// Errors are caught in main() and kept in the procedure.
fileprivate final class FailingProcedure: Procedure, @unchecked Sendable {
    struct Failure: Error, Equatable { let code: Int }
    private let caught = ProcBox<Failure?>(nil)

    private func risky() throws(Failure) {
        throw Failure(code: 42)
    }

    override func main() {
        do {
            try risky()
        } catch {
            caught.value = error
        }
    }

    var error: Failure? { caught.value }
}

/// The lowest nice value this process may set (mirrors the runtime's rule).
fileprivate func lowestPermittedNice() -> Int32 {
    if geteuid() == 0 { return -20 }
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(13), &limit) == 0 else { return 20 }
    if limit.rlim_cur == rlim_t.max { return -20 }
    return Int32(max(-20, 20 - Int(min(limit.rlim_cur, 40))))
}

/// The nice value main() should see for `priority` on a thread at `baseline`.
fileprivate func expectedNice(for priority: Double, baseline: Int32) -> Int32 {
    let floor = lowestPermittedNice()
    if baseline < floor { return baseline }
    return max(Procedure.niceValue(forThreadPriority: priority), floor)
}

// MARK: - Tests

@Suite struct ProcedureTests {
    @Test func aNewProcedureIsReadyAndNotStarted() {
        let procedure = BlockProcedure {}
        #expect(procedure.isReady)
        #expect(procedure.state == .ready)
        #expect(!procedure.isExecuting && !procedure.isFinished && !procedure.isCancelled)
        #expect(!procedure.isAsynchronous && !procedure.isConcurrent)
        #expect(procedure.queuePriority == .normal)
        #expect(procedure.threadPriority == 0.5)
        #expect(procedure.dependencies.isEmpty)
        #expect(procedure.completionBlock == nil)
        #expect(procedure.unfinishedDependencyCount == 0)
    }

    @Test("Invocation procedure, started by hand and by a queue")
    func invocationProcedure() throws {
        final class Target: Sendable {
            let log = ProcLog()
            let thread = ProcBox<UInt>(0)
            func simpleOperationEntry(_ object: Int) {
                log.append("Parameter Object = \(object)")
                thread.value = procThreadID()
            }
        }
        let target = Target()
        let manual = InvocationProcedure(target: target, action: Target.simpleOperationEntry, argument: 123)
        manual.start()
        #expect(target.log.lines == ["Parameter Object = 123"])
        #expect(target.thread.value == procThreadID())  // start() ran it on the calling thread
        #expect(manual.isFinished && !manual.isExecuting)
        try manual.result

        let queued = InvocationProcedure(target: target, action: Target.simpleOperationEntry, argument: 123)
        let queue = ProcedureQueue(name: "invocation")
        queue.addProcedure(queued)
        queued.waitUntilFinished()
        #expect(target.log.lines == ["Parameter Object = 123", "Parameter Object = 123"])
        #expect(target.thread.value != procThreadID())  // a queue thread

        let doubling = InvocationProcedure(argument: 21) { (value: Int) in value * 2 }
        doubling.start()
        #expect(try doubling.result == 42)
        #expect(doubling.argument == 21)
    }

    @Test("The result of a cancelled invocation procedure")
    func cancelledInvocationHasNoResult() {
        let ran = ProcBox(false)
        let procedure = InvocationProcedure(argument: 1) { (_: Int) -> Int in
            ran.value = true
            return 7
        }
        #expect(throws: ProcedureError.notFinished) { try procedure.result }
        procedure.cancel()
        procedure.start()
        #expect(!ran.value)
        #expect(procedure.isFinished)
        #expect(throws: ProcedureError.cancelled) { try procedure.result }
    }

    @Test("Block procedure with one block")
    func blockProcedureWithOneBlock() {
        let log = ProcLog()
        let procedure = BlockProcedure { log.append("Beginning operation.") }
        procedure.addObserver { procedure, event in
            if event == .finished { log.append("finished: \(procedure.isFinished)") }
        }
        procedure.start()
        #expect(log.lines == ["Beginning operation.", "finished: true"])
        #expect(procedure.executionBlocks.count == 1)
    }

    @Test("start() on a block procedure blocks the caller")
    func startBlocksTheCaller() {
        let log = ProcLog()
        let caller = procThreadID()
        let procedure = BlockProcedure {
            log.append("Main Thread = \(caller)")
            log.append("Current Thread = \(procThreadID())")
            for count in 0..<1000 {
                log.append("Count = \(count)")
            }
        }
        procedure.start()
        log.append("Main thread is here")
        let lines = log.lines
        #expect(lines.count == 1003)
        #expect(lines[0] == "Main Thread = \(caller)")
        #expect(lines[1] == "Current Thread = \(caller)")
        #expect(Array(lines[2..<1002]) == (0..<1000).map { "Count = \($0)" })
        #expect(lines.last == "Main thread is here")
    }

    @Test("Several blocks run concurrently; the procedure waits for all")
    func blockProcedureWithSeveralBlocks() {
        let count = Atomic<Int>(0)
        let inFlight = ProcInFlight()
        let procedure = BlockProcedure()
        // Each block waits (up to 10 s) until another block is running
        // too: blocks run one after another never see that, blocks run
        // concurrently see it as soon as the pool has a thread for a second
        // one (when other tests keep every worker busy, that may take a
        // while, so no time bound is asserted).
        let overlapped = Atomic<Int>(0)
        for _ in 0..<4 {
            procedure.addExecutionBlock {
                inFlight.enter()
                let until = procNow() + 10
                while inFlight.now < 2 && overlapped.load(ordering: .acquiring) == 0
                    && procNow() < until {
                    procSleep(1)
                }
                // 1: overlapped; 2: one gave up (the others need not wait).
                overlapped.store(inFlight.now >= 2 ? 1 : 2, ordering: .releasing)
                procSleep(10)
                count.wrappingAdd(1, ordering: .relaxed)
                inFlight.exit()
            }
        }
        #expect(procedure.executionBlocks.count == 4)
        let atCompletion = ProcBox(-1)
        procedure.completionBlock = { atCompletion.value = count.load(ordering: .relaxed) }
        let queue = ProcedureQueue(name: "blocks")
        queue.addProcedure(procedure)
        queue.waitUntilAllFinished()  // also waits for the completion block
        let total = count.load(ordering: .relaxed)
        #expect(total == 4)
        #expect(atCompletion.value == 4)
        #expect(inFlight.max >= 2)  // the blocks overlapped
    }

    @Test func aBlockProcedureWithoutBlocksJustFinishes() {
        let procedure = BlockProcedure()
        procedure.start()
        #expect(procedure.isFinished)
        #expect(procedure.executionBlocks.isEmpty)
    }

    @Test("A synchronous subclass keeps its result; main runs on a queue thread")
    func nonConcurrentSubclass() {
        let procedure = SumProcedure(data: Array(1...100))
        let queue = ProcedureQueue(name: "synchronous")
        queue.addProcedure(procedure)
        procedure.waitUntilFinished()
        #expect(procedure.sum == 5050)
        #expect(procedure.thread != procThreadID())
        #expect(procedure.isFinished)
    }

    @Test("Cooperative cancellation in a loop")
    func cooperativeCancellation() {
        let procedure = LoopProcedure()
        let queue = ProcedureQueue(name: "cancellation")
        queue.addProcedure(procedure)
        #expect(procWaitUntil { procedure.isExecuting })
        procSleep(20)
        let cancelledAt = procNow()
        procedure.cancel()
        procedure.waitUntilFinished()
        #expect(procedure.isCancelled && procedure.isFinished && !procedure.isExecuting)
        let cleanedUp = procedure.cleanedUp.load(ordering: .relaxed)
        #expect(cleanedUp)
        let reaction = procedure.exitedAt.value - cancelledAt
        #expect(reaction < 0.25)  // about one 1 ms iteration; generous for loaded machines
        let iterations = procedure.iterations.load(ordering: .relaxed)
        #expect(iterations < 10_000)
    }

    @Test("Asynchronous procedure (MyOperation), started by hand")
    func asynchronousProcedureByHand() {
        let events = ProcBox<[ProcedureEvent]>([])
        let procedure = MyOperation(workMilliseconds: 50)
        procedure.addObserver { _, event in events.update { $0.append(event) } }
        procedure.start()
        // start() returned before the work was done.
        let doneAtReturn = procedure.workDone.load(ordering: .acquiring)
        #expect(!doneAtReturn)
        #expect(procedure.isExecuting && !procedure.isFinished)
        procedure.waitUntilFinished()
        let doneAfterWait = procedure.workDone.load(ordering: .acquiring)
        #expect(doneAfterWait)
        #expect(!procedure.isExecuting && procedure.isFinished)
        #expect(events.value == [.executing, .finished])
    }

    @Test("Asynchronous procedure in a queue; its dependent runs after it finishes")
    func asynchronousProcedureInAQueue() {
        let operation = MyOperation(workMilliseconds: 30)
        let sawFinished = ProcBox<Bool?>(nil)
        let dependent = BlockProcedure { sawFinished.value = operation.isFinished }
        dependent.addDependency(operation)
        let queue = ProcedureQueue(name: "asynchronous")
        queue.addProcedures([dependent, operation], waitUntilFinished: true)
        #expect(sawFinished.value == true)
        let workDone = operation.workDone.load(ordering: .acquiring)
        #expect(workDone)
    }

    @Test("Asynchronous procedure cancelled before start")
    func asynchronousProcedureCancelledBeforeStart() {
        let events = ProcBox<[ProcedureEvent]>([])
        let procedure = MyOperation(workMilliseconds: 10)
        procedure.addObserver { _, event in events.update { $0.append(event) } }
        procedure.cancel()
        procedure.start()
        #expect(procedure.isFinished && !procedure.isExecuting)
        let workDone = procedure.workDone.load(ordering: .acquiring)
        #expect(!workDone)
        #expect(events.value == [.cancelled, .finished])
    }

    @Test func asynchronousProcedureFinishingOnAnotherThreadHoldsItsSlot() {
        let inFlight = ProcInFlight()
        let queue = ProcedureQueue(name: "async-slot", maxConcurrentCount: 1)
        let procedures = (0..<4).map { _ in DeferredFinish(inFlight: inFlight, milliseconds: 15) }
        queue.addProcedures(procedures, waitUntilFinished: true)
        #expect(inFlight.max == 1)  // each kept the only slot until finish()
        for procedure in procedures {
            #expect(procedure.isFinished)
            #expect(procedure.finishedOn.value != procThreadID())
        }
    }

    @Test("An asynchronous procedure that never finishes blocks its dependents")
    func neverFinishingBlocksDependents() {
        let stuck = ManualFinish()
        let ran = Atomic<Bool>(false)
        let dependent = BlockProcedure { ran.store(true, ordering: .relaxed) }
        dependent.addDependency(stuck)
        let queue = ProcedureQueue(name: "unfinished")
        queue.addProcedures([stuck, dependent], waitUntilFinished: false)
        #expect(procWaitUntil { stuck.isExecuting })
        procSleep(100)
        let ranEarly = ran.load(ordering: .relaxed)
        #expect(!ranEarly)
        #expect(!dependent.isReady)
        #expect(dependent.state == .pending)
        stuck.finish()  // let the queue drain
        queue.waitUntilAllFinished()
        let ranLater = ran.load(ordering: .relaxed)
        #expect(ranLater)
    }

    @Test("Observers see every kind of change")
    func observers() {
        let events = ProcBox<[ProcedureEvent]>([])
        let dependency = BlockProcedure {}
        let procedure = BlockProcedure {}
        let token = procedure.addObserver { _, event in events.update { $0.append(event) } }
        procedure.queuePriority = .high
        procedure.threadPriority = 0.4
        procedure.completionBlock = {}
        procedure.addDependency(dependency)
        procedure.removeDependency(dependency)
        procedure.addDependency(dependency)
        let queue = ProcedureQueue(name: "observed")
        queue.addProcedure(procedure)
        #expect(procedure.state == .pending)
        queue.addProcedure(dependency)
        queue.waitUntilAllFinished()
        #expect(events.value == [.priority, .threadPriority, .completionBlock,
                                 .dependencies, .dependencies, .dependencies,
                                 .ready, .executing, .finished])

        let cancelled = BlockProcedure {}
        let cancelEvents = ProcBox<[ProcedureEvent]>([])
        cancelled.addObserver { _, event in cancelEvents.update { $0.append(event) } }
        cancelled.cancel()
        cancelled.cancel()  // once only
        #expect(cancelEvents.value == [.cancelled])

        procedure.removeObserver(token)
        let before = events.value.count
        let other = BlockProcedure {}
        other.queuePriority = .low
        #expect(events.value.count == before)
    }

    @Test("A custom isReady holds the procedure until it says so")
    func customReadiness() {
        let gated = GatedProcedure()
        #expect(!gated.isReady)
        let queue = ProcedureQueue(name: "gated")
        queue.addProcedure(gated)
        procSleep(50)
        let ranEarly = gated.ran.load(ordering: .acquiring)
        #expect(!ranEarly)
        #expect(!gated.isFinished)
        gated.open()
        queue.waitUntilAllFinished()
        let ranLater = gated.ran.load(ordering: .acquiring)
        #expect(ranLater)
    }

    @Test("Thread priority applies only while main() runs")
    func threadPriority() {
        let queue = ProcedureQueue(name: "priority", maxConcurrentCount: 1)
        let low = NiceProbe()
        low.threadPriority = 0.1
        let high = NiceProbe()
        high.threadPriority = 0.9
        let plain = NiceProbe()
        let completionNice = ProcBox<Int32?>(nil)
        low.completionBlock = { completionNice.value = procNice() }
        let afterMain = ProcBox<Int32?>(nil)
        low.addObserver { _, event in
            if event == .finished { afterMain.value = procNice() }  // same thread, after main
        }
        queue.addProcedures([low, high, plain], waitUntilFinished: true)
        queue.waitUntilAllFinished()

        let baseline = afterMain.value ?? 0
        #expect(plain.niceInMain == baseline)
        #expect(low.niceInMain == expectedNice(for: 0.1, baseline: baseline))
        #expect(high.niceInMain == expectedNice(for: 0.9, baseline: baseline))
        #expect(completionNice.value == 0)  // default priority
        if geteuid() == 0 {
            #expect(low.niceInMain == 15)
            #expect(high.niceInMain == -16)
        }

        // By hand, on this thread: restored afterwards.
        let before = procNice()
        let manual = NiceProbe()
        manual.threadPriority = 0.2
        manual.start()
        #expect(manual.niceInMain == expectedNice(for: 0.2, baseline: before))
        #expect(procNice() == before)

        // Out-of-range values are clamped.
        manual.threadPriority = 2
        #expect(manual.threadPriority == 1.0)
        manual.threadPriority = -1
        #expect(manual.threadPriority == 0.0)
    }

    @Test("The completion block runs once, after main")
    func completionBlock() {
        let flag = Atomic<Bool>(false)
        let runs = Atomic<Int>(0)
        let sawFlag = ProcBox(false)
        let procedure = BlockProcedure { flag.store(true, ordering: .releasing) }
        procedure.completionBlock = {
            runs.wrappingAdd(1, ordering: .relaxed)
            sawFlag.value = flag.load(ordering: .acquiring)
        }
        #expect(procedure.completionBlock != nil)
        procedure.start()
        #expect(procWaitUntil { runs.load(ordering: .relaxed) == 1 })
        procSleep(20)
        let runCount = runs.load(ordering: .relaxed)
        #expect(runCount == 1)
        #expect(sawFlag.value)
        #expect(procedure.completionBlock == nil)  // released after use
    }

    @Test("Decision: the completion block also runs for a cancelled procedure")
    func completionBlockOfACancelledProcedure() {
        let ran = Atomic<Bool>(false)
        let mainRan = Atomic<Bool>(false)
        let procedure = BlockProcedure { mainRan.store(true, ordering: .relaxed) }
        procedure.completionBlock = { ran.store(true, ordering: .releasing) }
        procedure.cancel()
        let queue = ProcedureQueue(name: "cancelled-completion")
        queue.addProcedure(procedure)
        queue.waitUntilAllFinished()
        let completionRan = ran.load(ordering: .acquiring)
        let mainDidRun = mainRan.load(ordering: .relaxed)
        #expect(completionRan)
        #expect(!mainDidRun)
    }

    @Test("waitUntilFinished on a secondary thread, and its async form")
    func waiting() async {
        let procedure = BlockProcedure { procSleep(50) }
        let queue = ProcedureQueue(name: "waiting")
        let sawFinished = ProcBox<Bool?>(nil)
        let waiterDone = Atomic<Bool>(false)
        procDetach {
            procedure.waitUntilFinished()
            sawFinished.value = procedure.isFinished
            waiterDone.store(true, ordering: .releasing)
        }
        queue.addProcedure(procedure)
        await procedure.waitUntilFinished()
        #expect(procedure.isFinished)
        let done = await Task.detached { procWaitUntil { waiterDone.load(ordering: .acquiring) } }.value
        #expect(done)
        #expect(sawFinished.value == true)
        await procedure.waitUntilFinished()  // already finished: returns at once
    }

    @Test("Errors are caught and kept; the queue keeps working")
    func errorsDoNotEscape() {
        let failing = FailingProcedure()
        let after = BlockProcedure {}
        let queue = ProcedureQueue(name: "failing")
        queue.addProcedures([failing, after], waitUntilFinished: true)
        #expect(failing.error == FailingProcedure.Failure(code: 42))
        #expect(after.isFinished)
    }

    @Test("Dependencies without a queue")
    func dependenciesWithoutAQueue() {
        let first = BlockProcedure {}
        let second = BlockProcedure {}
        second.addDependency(first)
        second.addDependency(first)  // again: no second edge
        #expect(second.dependencies.count == 1)
        #expect(!second.isReady)
        #expect(second.state == .pending)
        #expect(second.unfinishedDependencyCount == 1)
        first.start()
        #expect(second.isReady)
        #expect(second.unfinishedDependencyCount == 0)
        second.start()
        #expect(second.isFinished)
        #expect(second.dependencies.count == 1 && second.dependencies[0] === first)  // kept
    }

    @Test func removingTheLastDependencyMakesAProcedureReady() {
        let first = BlockProcedure {}
        let second = BlockProcedure {}
        second.addDependency(first)
        #expect(!second.isReady)
        second.removeDependency(first)
        second.removeDependency(first)  // no longer a dependency: no effect
        #expect(second.isReady)
        #expect(second.dependencies.isEmpty)
    }

    @Test func dependingOnAFinishedProcedureIsAlreadySatisfied() {
        let first = BlockProcedure {}
        first.start()
        let second = BlockProcedure {}
        second.addDependency(first)
        #expect(second.isReady)
        let queue = ProcedureQueue(name: "finished-dependency")
        queue.addProcedure(second)
        second.waitUntilFinished()
        #expect(second.isFinished)
    }

    @Test func namesAndDescriptions() {
        let named = BlockProcedure {}
        named.name = "resize"
        #expect(named.name == "resize")
        #expect(named.description == "'resize'")
        let unnamed = BlockProcedure {}
        #expect(unnamed.description.hasPrefix("BlockProcedure#"))
        #expect(unnamed.serial > named.serial)
    }

    @Test func queuePriorityLevels() {
        #expect(Procedure.QueuePriority.allCases.map(\.rawValue) == [-8, -4, 0, 4, 8])
        #expect(Procedure.QueuePriority.veryLow < .veryHigh)
        let procedure = BlockProcedure {}
        procedure.queuePriority = .veryHigh
        #expect(procedure.queuePriority == .veryHigh)
    }
}
