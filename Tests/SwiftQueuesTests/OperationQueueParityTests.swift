// Foundation's OperationQueue behaviour, checked on ProcedureQueue: each case
// restates a case of swift-corelibs-foundation's TestOperationQueue with
// Procedure / BlockProcedure / ProcedureQueue in place of Operation /
// BlockOperation / OperationQueue (shorter sleeps, waits with generous
// timeouts instead of expectations). Of its 31 cases, one cannot be
// expressed: a dependency cycle is refused (addDependency stops the process)
// rather than broken later by a cancel. `current` on the main thread is
// checked by the MainQueueChecks program (test bodies never run on the
// process's main thread).

import Synchronization
import Testing
@testable import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Finishes on a queue of its own 100 ms after `start()`.
fileprivate final class LaterProcedure: Procedure, @unchecked Sendable {
    private let finisher = WorkQueue(label: "later-procedure")

    override var isAsynchronous: Bool { true }

    override func start() {
        if isCancelled {
            finish()
            return
        }
        markExecuting()
        finisher.asyncAfter(deadline: .now() + .milliseconds(100)) { self.finish() }
    }
}

/// Sleeps 100 ms in `main()` and records that it ran.
fileprivate final class SleepingProcedure: Procedure, @unchecked Sendable {
    let hasRun = Atomic<Bool>(false)

    override func main() {
        procSleep(100)
        hasRun.store(true, ordering: .releasing)
    }
}

/// Not ready until `makeReady()`, whatever its dependencies.
fileprivate final class GatedProcedure: Procedure, @unchecked Sendable {
    private let open = Atomic<Bool>(false)

    override var isReady: Bool { open.load(ordering: .acquiring) && super.isReady }

    func makeReady() {
        open.store(true, ordering: .releasing)
        notifyReadinessChanged()
    }
}

@Suite struct OperationQueueParityTests {
    @Test func procedureCountAndSnapshot() {
        let queue = ProcedureQueue()
        let first = BlockProcedure { procSleep(300) }
        queue.addProcedure(first)
        #expect(queue.procedureCount == 1)
        queue.waitUntilAllFinished()
        #expect(queue.procedureCount == 0)

        let second = BlockProcedure { procSleep(200) }
        let third = BlockProcedure { procSleep(200) }
        queue.addProcedure(second)
        queue.addProcedure(third)
        #expect(queue.procedureCount == 2)
        let snapshot = queue.procedures
        #expect(snapshot == [second, third])
        queue.waitUntilAllFinished()
        #expect(queue.procedureCount == 0)
        #expect(queue.procedures.isEmpty)
    }

    @Test func prioritiesOrderAWidthOneQueue() {
        let log = ProcLog()
        let priorities: [Procedure.QueuePriority] = [.normal, .low, .veryHigh, .veryLow]
        let procedures = priorities.enumerated().map { index, priority in
            let procedure = BlockProcedure { log.append("procedure \(index + 1)") }
            procedure.queuePriority = priority
            return procedure
        }
        let queue = ProcedureQueue(maxConcurrentCount: 1)
        queue.addProcedures(procedures, waitUntilFinished: true)
        #expect(log.lines == ["procedure 3", "procedure 1", "procedure 2", "procedure 4"])
    }

    @Test func isExecutingInsideTheBlock() {
        let queue = ProcedureQueue()
        let holder = ProcBox<Procedure?>(nil)
        let seen = ProcBox<Bool?>(nil)
        let procedure = BlockProcedure { seen.value = holder.value?.isExecuting }
        holder.value = procedure
        #expect(!procedure.isExecuting)
        queue.addProcedure(procedure)
        queue.waitUntilAllFinished()
        #expect(seen.value == true)
        #expect(!procedure.isExecuting)
        holder.value = nil  // the block holds the box, the box the procedure
    }

    @Test func asynchronousProcedureStartedByHand() {
        let procedure = LaterProcedure()
        #expect(!procedure.isExecuting)
        #expect(!procedure.isFinished)
        procedure.start()
        #expect(procWaitUntil { procedure.isFinished })
        #expect(!procedure.isExecuting)
        #expect(procedure.isFinished)
    }

    @Test func synchronousProcedureWithoutAQueue() {
        let procedure = SleepingProcedure()
        #expect(!procedure.isExecuting)
        #expect(!procedure.isFinished)
        procedure.start()
        #expect(!procedure.isExecuting)
        #expect(procedure.isFinished)
        let hasRun = procedure.hasRun.load(ordering: .acquiring)
        #expect(hasRun)
    }

    @Test func mainIsOneLivingQueue() {
        #expect(ProcedureQueue.main === ProcedureQueue.main)
        #expect(ProcedureQueue.main == ProcedureQueue.main)
        #expect(!ProcedureQueue.main.isSuspended)
    }

    @Test func cancellingOneQueuedProcedureSkipsIt() {
        let values = ProcBox<[Int]>([])
        var procedures = (0..<5).map { index in
            BlockProcedure {
                values.update { $0.append(index) }
                procSleep(100)
            }
        }
        let queue = ProcedureQueue(maxConcurrentCount: 1)
        queue.addProcedures(procedures, waitUntilFinished: false)
        procedures.remove(at: 2).cancel()
        queue.waitUntilAllFinished()
        #expect(!values.value.contains(2))
    }

    @Test func cancellingTheProceduresOfOnePriority() {
        let values = ProcBox<[Int]>([])
        let priorities: [Procedure.QueuePriority] = [.high, .high, .normal, .normal, .normal]
        let procedures = priorities.enumerated().map { index, priority in
            let procedure = BlockProcedure {
                values.update { $0.append(index) }
                if index < 2 { procSleep(200) }
            }
            procedure.queuePriority = priority
            return procedure
        }
        let queue = ProcedureQueue(maxConcurrentCount: 1)
        queue.addProcedures(procedures, waitUntilFinished: false)
        for procedure in procedures where procedure.queuePriority == .normal {
            procedure.cancel()
        }
        queue.waitUntilAllFinished()
        #expect(values.value == [0, 1])
    }

    @Test func currentOnTheMainThreadIsMain() throws {
        let (status, output) = try runTestProgram("MainQueueChecks", ["procedure-current"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("ProcedureQueue.current: main on the main thread, in main-queue "
            + "procedures and in every block of a BlockProcedure started there"))
    }

    @Test func currentInsideAProcedure() {
        let queue = ProcedureQueue()
        let seen = ProcBox<ProcedureQueue?>(nil)
        queue.addBlock { seen.value = ProcedureQueue.current }
        queue.waitUntilAllFinished()
        #expect(seen.value == queue)
    }

    @Test func currentInsideAProcedureThatCancelsItsQueue() {
        let queue = ProcedureQueue(maxConcurrentCount: 1)
        let seen = ProcBox<ProcedureQueue?>(nil)
        queue.addBlock {
            seen.value = ProcedureQueue.current
            queue.cancelAll()  // cancelling the running procedure from inside is fine
        }
        queue.waitUntilAllFinished()
        #expect(seen.value == queue)
    }

    @Test func currentWithAnUnderlyingQueue() {
        let queue = ProcedureQueue()
        queue.underlyingQueue = WorkQueue(label: "underlying-queue")
        let seen = ProcBox<ProcedureQueue?>(nil)
        queue.addBlock { seen.value = ProcedureQueue.current }
        queue.waitUntilAllFinished()
        #expect(seen.value == queue)
    }

    @Test func resumedFromItsUnderlyingQueue() {
        let underlying = WorkQueue(label: "underlying-queue")
        let queue = ProcedureQueue(maxConcurrentCount: 1)
        queue.underlyingQueue = underlying
        queue.isSuspended = true
        let sawUnderlying = ProcBox<Bool?>(nil)
        let resumed = ProcBox<Bool>(false)
        queue.addBlock { sawUnderlying.value = ProcedureQueue.current?.underlyingQueue === underlying }
        underlying.async {
            queue.isSuspended = false
            resumed.value = true
        }
        #expect(procWaitUntil { resumed.value && sawUnderlying.value != nil })
        #expect(sawUnderlying.value == true)
    }

    @Test func currentAfterTheUnderlyingQueueIsReset() {
        let queue = ProcedureQueue()
        queue.underlyingQueue = WorkQueue(label: "underlying-queue")
        queue.underlyingQueue = nil
        let seen = ProcBox<ProcedureQueue?>(nil)
        queue.addBlock { seen.value = ProcedureQueue.current }
        queue.waitUntilAllFinished()
        #expect(seen.value == queue)
    }

    @Test func dependencyCount() {
        let first = BlockProcedure {}
        first.name = "first"
        let second = BlockProcedure {}
        second.name = "second"
        first.addDependency(second)
        #expect(first.dependencies == [second])
    }

    @Test func aCancelledDependencyStillReleasesItsDependent() {
        let queue = ProcedureQueue(maxConcurrentCount: 1)
        let ranCancelled = ProcBox<Bool>(false)
        let ranDependent = ProcBox<Bool>(false)
        let cancelled = BlockProcedure { ranCancelled.value = true }
        let dependent = BlockProcedure { ranDependent.value = true }
        dependent.addDependency(cancelled)
        cancelled.cancel()
        queue.addProcedure(cancelled)
        queue.addProcedure(dependent)
        #expect(procWaitUntil { ranDependent.value })
        queue.waitUntilAllFinished()
        #expect(!ranCancelled.value)
    }

    @Test func proceduresOutliveADroppedQueue() {
        let ran = ProcLog()
        let first = BlockProcedure { ran.append("first") }
        first.name = "first"
        let second = BlockProcedure { ran.append("second") }
        second.name = "second"
        first.addDependency(second)
        do {
            let queue = ProcedureQueue(maxConcurrentCount: 1)
            queue.addProcedure(first)
            queue.addProcedure(second)
        }
        #expect(procWaitUntil { ran.lines.count == 2 })
        #expect(ran.lines == ["second", "first"])
        first.waitUntilFinished()
    }

    @Test func cancelledOutsideAQueue() {
        let procedure = Procedure()
        procedure.cancel()
        #expect(procedure.isCancelled)
        #expect(!procedure.isExecuting)
        #expect(!procedure.isFinished)
    }

    @Test func dependencyAcrossQueues() {
        let queue = ProcedureQueue()
        let other = ProcedureQueue()
        let ran = ProcLog()
        let first = BlockProcedure { ran.append("first") }
        let second = BlockProcedure { ran.append("second") }
        first.addDependency(second)
        queue.addProcedure(first)
        other.addProcedure(second)
        #expect(procWaitUntil { ran.lines.count == 2 })
        #expect(ran.lines == ["second", "first"])
        queue.waitUntilAllFinished()
    }

    @Test func cancelledWhileSuspended() {
        let queue = ProcedureQueue()
        queue.isSuspended = true
        let first = BlockProcedure {}
        let second = BlockProcedure {}
        queue.addProcedure(first)
        queue.addProcedure(second)
        first.cancel()
        second.cancel()
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        for procedure in [first, second] {
            #expect(procedure.isCancelled)
            #expect(!procedure.isExecuting)
            #expect(procedure.isFinished)
        }
    }

    @Test func equalPrioritiesRunInTheOrderAdded() {
        let queue = ProcedureQueue(maxConcurrentCount: 1)
        queue.isSuspended = true
        let order = ProcBox<[Int]>([])
        for number in 1...5 {
            let procedure = BlockProcedure { order.update { $0.append(number) } }
            procedure.queuePriority = .normal
            procedure.name = "procedure \(number)"
            queue.addProcedure(procedure)
        }
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(order.value == [1, 2, 3, 4, 5])
    }

    @Test func higherPrioritiesRunFirst() {
        let queue = ProcedureQueue(maxConcurrentCount: 1)
        queue.isSuspended = true
        let order = ProcBox<[Int]>([])
        let priorities: [Procedure.QueuePriority] = [.veryLow, .low, .normal, .high, .veryHigh]
        for (index, priority) in priorities.enumerated() {
            let procedure = BlockProcedure { order.update { $0.append(index + 1) } }
            procedure.queuePriority = priority
            queue.addProcedure(procedure)
        }
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(order.value == [5, 4, 3, 2, 1])
    }

    @Test func aDependencyRunsBeforeItsDependent() {
        let queue = ProcedureQueue()
        let log = ProcLog()
        let dependent = BlockProcedure { log.append("dependent") }
        let dependency = BlockProcedure { log.append("dependency") }
        dependent.addDependency(dependency)
        queue.addProcedures([dependent, dependency], waitUntilFinished: false)
        queue.addBlock { log.append("other") }
        #expect(procWaitUntil { log.lines.count == 3 })
        let lines = log.lines
        #expect(lines.firstIndex(of: "dependency")! < lines.firstIndex(of: "dependent")!)
        #expect(lines.contains("other"))
        queue.waitUntilAllFinished()
    }

    @Test func waitingForAQueueWhoseProcedureDependsOnAnother() {
        let queue = ProcedureQueue()
        let other = ProcedureQueue()
        let slow = BlockProcedure { procSleep(300) }
        let dependent = BlockProcedure {}
        dependent.addDependency(slow)
        queue.addProcedure(slow)
        other.addProcedure(dependent)
        other.waitUntilAllFinished()
        #expect(other.procedureCount == 0)
        #expect(slow.isFinished)
    }

    @Test func aFinishedProcedureLeavesItsQueue() {
        let queue = ProcedureQueue()
        let procedure = BlockProcedure { procSleep(300) }
        queue.addProcedure(procedure)
        procedure.waitUntilFinished()
        // The queue drops a finished procedure just after it finishes.
        #expect(procWaitUntil { queue.procedureCount == 0 })
    }

    @Test func aCustomReadinessConditionHoldsAProcedure() {
        let queue = ProcedureQueue()
        let gated = GatedProcedure()
        let ran = ProcBox<Bool>(false)
        queue.addProcedure(gated)
        queue.addBlock { ran.value = true }
        #expect(procWaitUntil { ran.value })
        #expect(procWaitUntil { queue.procedureCount == 1 })
        #expect(!gated.isFinished)
        gated.makeReady()
        queue.waitUntilAllFinished()
        #expect(queue.procedureCount == 0)
        #expect(gated.isFinished)
    }

    @Test func aDroppedQueueIsFreedAfterItsProcedures() {
        let started = ProcRendezvous(parties: 2)
        let done = ProcBox<Bool>(false)
        let waiter = BlockProcedure { procSleep(100) }
        let running = BlockProcedure {
            _ = started.arrive()
            procSleep(100)
            done.value = true
        }
        waiter.addDependency(running)
        weak var weakQueue: ProcedureQueue?
        do {
            let queue = ProcedureQueue()
            weakQueue = queue
            queue.addProcedure(waiter)
            queue.addProcedure(running)
        }
        #expect(started.arrive())
        running.cancel()
        #expect(procWaitUntil { done.value })
        waiter.waitUntilFinished()
        #expect(procWaitUntil { weakQueue == nil }, "the queue outlived its procedures")
    }

    @Test func widthTwoRunsTwoAtOnce() {
        let queue = ProcedureQueue(maxConcurrentCount: 2)
        for round in 0..<3 {
            let bothIn = ProcRendezvous(parties: 2)
            let results = ProcBox<[Bool]>([])
            queue.addBlock { let met = bothIn.arrive(); results.update { $0.append(met) } }
            queue.addBlock { let met = bothIn.arrive(); results.update { $0.append(met) } }
            queue.waitUntilAllFinished()
            #expect(results.value == [true, true], "round \(round)")
        }
    }

    @Test func widthTwoWithDependenciesAndCompletions() {
        let queue = ProcedureQueue(maxConcurrentCount: 2)
        for round in 0..<3 {
            let dependencyRan = ProcBox<Bool>(false)
            let otherRan = ProcBox<Bool>(false)
            let sawBoth = ProcBox<Bool?>(nil)
            let completed = ProcBox<Bool>(false)
            let first = BlockProcedure {
                sawBoth.value = procWaitUntil(seconds: 5) {
                    dependencyRan.value && otherRan.value
                }
            }
            first.completionBlock = { completed.value = true }
            let dependency = BlockProcedure { dependencyRan.value = true }
            queue.addProcedures([first, dependency], waitUntilFinished: false)
            queue.addBlock { otherRan.value = true }
            #expect(procWaitUntil { completed.value }, "round \(round)")
            #expect(sawBoth.value == true, "round \(round)")
            queue.waitUntilAllFinished()
        }
    }

    @Test func addedExecutionBlocksAllRun() {
        let ran = ProcBox<Set<Int>>([])
        let procedure = BlockProcedure { _ = ran.update { $0.insert(1) } }
        procedure.addExecutionBlock { _ = ran.update { $0.insert(2) } }
        #expect(procedure.executionBlocks.count == 2)
        let queue = ProcedureQueue()
        queue.addProcedure(procedure)
        queue.waitUntilAllFinished()
        #expect(ran.value == [1, 2])
    }
}
