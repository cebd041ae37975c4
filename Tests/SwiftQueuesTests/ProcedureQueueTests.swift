// ProcedureQueue: dependencies on and across queues, priority, width,
// suspension, cancellation, barriers, waiting (blocking and async), the main
// queue, the current queue, the underlying queue, ownership.

import CSwiftQueues
import Synchronization
import Testing
@testable import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite struct ProcedureQueueTests {
    // MARK: Dependencies

    @Test("Dependency order on one queue, 200 times")
    func dependencyOrder() {
        let queue = ProcedureQueue(name: "dependency-order")
        var failures = 0
        for _ in 0..<200 {
            let log = ProcLog()
            let second = InvocationProcedure(argument: 222) { (object: Int) in
                for line in 0..<3 { log.append("Second Operation - \(object) \(line)") }
            }
            let first = InvocationProcedure(argument: 111) { (object: Int) in
                for line in 0..<3 { log.append("First Operation - \(object) \(line)") }
            }
            first.addDependency(second)
            queue.addProcedure(first)  // the dependent first: order of adding does not matter
            queue.addProcedure(second)
            log.append("Main thread is here")
            queue.waitUntilAllFinished()
            let lines = log.lines.filter { $0 != "Main thread is here" }
            let expected = (0..<3).map { "Second Operation - 222 \($0)" }
                + (0..<3).map { "First Operation - 111 \($0)" }
            if lines != expected { failures += 1 }
        }
        #expect(failures == 0)
    }

    @Test("After removeDependency both may run at once")
    func removedDependency() {
        let rendezvous = ProcRendezvous(parties: 2)
        let met = ProcBox<[Bool]>([])
        let first = BlockProcedure { let ok = rendezvous.arrive(); met.update { $0.append(ok) } }
        let second = BlockProcedure { let ok = rendezvous.arrive(); met.update { $0.append(ok) } }
        first.addDependency(second)
        first.removeDependency(second)
        let queue = ProcedureQueue(name: "removed-dependency")
        queue.addProcedures([first, second], waitUntilFinished: true)
        #expect(met.value == [true, true])
    }

    @Test("A dependency across queues")
    func crossQueueDependency() {
        let log = ProcLog()
        let q1 = ProcedureQueue(name: "Q1")
        let q2 = ProcedureQueue(name: "Q2")
        let a = BlockProcedure { procSleep(20); log.append("A") }
        let sawA = ProcBox(false)
        let b = BlockProcedure { sawA.value = a.isFinished; log.append("B") }
        b.addDependency(a)
        q2.addProcedure(b)
        q1.addProcedure(a)
        b.waitUntilFinished()
        #expect(log.lines == ["A", "B"])
        #expect(sawA.value)
    }

    @Test("A diamond of dependencies: A first, D last")
    func diamond() {
        for _ in 0..<50 {
            let log = ProcLog()
            let a = BlockProcedure { log.append("A") }
            let b = BlockProcedure { log.append("B") }
            let c = BlockProcedure { log.append("C") }
            let d = BlockProcedure { log.append("D") }
            b.addDependency(a)
            c.addDependency(a)
            d.addDependency(b)
            d.addDependency(c)
            let queue = ProcedureQueue(name: "diamond")
            queue.addProcedures([d, c, b, a], waitUntilFinished: true)
            let lines = log.lines
            #expect(lines.count == 4)
            #expect(lines.first == "A")
            #expect(lines.last == "D")
        }
    }

    @Test("A cancelled dependency releases its dependent")
    func cancelledDependency() {
        let queue = ProcedureQueue(name: "cancelled-dependency")
        queue.isSuspended = true
        let aRan = ProcBox(false)
        let bRan = ProcBox(false)
        let a = BlockProcedure { aRan.value = true }
        let b = BlockProcedure { bRan.value = true }
        b.addDependency(a)
        queue.addProcedures([a, b], waitUntilFinished: false)
        a.cancel()
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(!aRan.value)
        #expect(a.isFinished && a.isCancelled)
        #expect(bRan.value)

        // Cancelled before it was ever added, too.
        let c = BlockProcedure {}
        let d = BlockProcedure { bRan.value = false }
        d.addDependency(c)
        c.cancel()
        queue.addProcedures([d, c], waitUntilFinished: true)
        #expect(!bRan.value)
    }

    @Test("Decision: a cancelled procedure still finishes after its dependencies")
    func cancelledProcedureWaitsForItsDependencies() {
        let queue = ProcedureQueue(name: "cancel-order")
        let gate = ProcBox(false)
        let slow = BlockProcedure { _ = procWaitUntil { gate.value } }
        let dependent = BlockProcedure {}
        dependent.addDependency(slow)
        queue.addProcedures([slow, dependent], waitUntilFinished: false)
        dependent.cancel()
        procSleep(30)
        #expect(!dependent.isFinished)  // not before `slow`
        gate.value = true
        queue.waitUntilAllFinished()
        #expect(dependent.isFinished && dependent.isCancelled)
    }

    @Test("A dependency added after enqueueing counts until the procedure starts")
    func lateDependency() {
        let queue = ProcedureQueue(name: "late-dependency")
        let other = ProcedureQueue(name: "late-dependency other")
        queue.isSuspended = true
        other.isSuspended = true
        let late = BlockProcedure {}
        let sawLateFinished = ProcBox<Bool?>(nil)
        let procedure = BlockProcedure { sawLateFinished.value = late.isFinished }
        queue.addProcedure(procedure)  // ready and waiting in the queue
        procedure.addDependency(late)
        other.addProcedure(late)
        queue.isSuspended = false
        procSleep(30)
        #expect(!procedure.isFinished)
        other.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(sawLateFinished.value == true)
    }

    // MARK: Priority

    @Test("Priority order among ready procedures; FIFO among equals")
    func priorityOrder() {
        let queue = ProcedureQueue(name: "priority", maxConcurrentCount: 1)
        queue.isSuspended = true
        let log = ProcLog()
        let levels: [(String, Procedure.QueuePriority)] = [
            ("low", .low), ("normal", .normal), ("high", .high), ("veryHigh", .veryHigh), ("veryLow", .veryLow),
        ]
        for (name, priority) in levels {
            let procedure = BlockProcedure { log.append(name) }
            procedure.queuePriority = priority
            queue.addProcedure(procedure)
        }
        for index in 0..<10 {
            queue.addBlock { log.append("fifo \(index)") }
        }
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(log.lines == ["veryHigh", "high", "normal"] + (0..<10).map { "fifo \($0)" } + ["low", "veryLow"])
    }

    @Test("Readiness comes before priority")
    func readinessBeforePriority() {
        let queue = ProcedureQueue(name: "readiness-first", maxConcurrentCount: 1)
        queue.isSuspended = true
        let log = ProcLog()
        let low = BlockProcedure { log.append("L") }
        low.queuePriority = .low
        let high = BlockProcedure { log.append("H") }
        high.queuePriority = .high
        high.addDependency(low)
        let normal = BlockProcedure { log.append("N") }
        queue.addProcedures([high, low, normal], waitUntilFinished: false)
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        let lines = log.lines
        #expect(lines == ["N", "L", "H"])
        #expect(lines.firstIndex(of: "L")! < lines.firstIndex(of: "H")!)
    }

    @Test("Priority applies per queue")
    func priorityPerQueue() {
        let q1 = ProcedureQueue(name: "priority a", maxConcurrentCount: 1)
        let q2 = ProcedureQueue(name: "priority b", maxConcurrentCount: 1)
        let low = BlockProcedure {}
        low.queuePriority = .veryLow
        let high = BlockProcedure {}
        high.queuePriority = .veryHigh
        q1.addProcedure(low)  // nothing ahead of it on its own queue: it runs
        q2.addProcedure(high)
        q1.waitUntilAllFinished()
        q2.waitUntilAllFinished()
        #expect(low.isFinished && high.isFinished)
    }

    @Test func changingPriorityReordersAWaitingProcedure() {
        let queue = ProcedureQueue(name: "reprioritise", maxConcurrentCount: 1)
        queue.isSuspended = true
        let log = ProcLog()
        let procedures = (0..<3).map { index in BlockProcedure { log.append("\(index)") } }
        queue.addProcedures(procedures, waitUntilFinished: false)
        procedures[2].queuePriority = .veryHigh
        procedures[0].queuePriority = .low
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(log.lines == ["2", "1", "0"])
    }

    @Test func aHigherPriorityArrivalOvertakesWaitingProceduresOnWidthOne() {
        let queue = ProcedureQueue(name: "overtake", maxConcurrentCount: 1)
        // Teach the runner that procedures are short (it then takes batches).
        for _ in 0..<1_000 { queue.addBlock {} }
        queue.waitUntilAllFinished()
        queue.isSuspended = true
        let log = ProcLog()
        let urgent = BlockProcedure { log.append("urgent") }
        urgent.queuePriority = .veryHigh
        queue.addBlock {
            log.append("0")
            queue.addProcedure(urgent)  // becomes ready while 1...9 wait
        }
        for index in 1..<10 {
            queue.addBlock { log.append("\(index)") }
        }
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(log.lines == ["0", "urgent"] + (1..<10).map { "\($0)" })
    }

    // MARK: Width

    @Test("maxConcurrentCount 1 runs one at a time, but is not FIFO")
    func widthOne() {
        let queue = ProcedureQueue(name: "width-1", maxConcurrentCount: 1)
        let inFlight = ProcInFlight()
        for _ in 0..<50 {
            queue.addBlock {
                inFlight.enter()
                procSleep(1)
                inFlight.exit()
            }
        }
        queue.waitUntilAllFinished()
        #expect(inFlight.max == 1)

        // With priorities and dependencies the order is not the order of adding.
        queue.isSuspended = true
        let log = ProcLog()
        let first = BlockProcedure { log.append("first") }
        let second = BlockProcedure { log.append("second") }
        let third = BlockProcedure { log.append("third") }
        first.addDependency(third)
        second.queuePriority = .high
        queue.addProcedures([first, second, third], waitUntilFinished: false)
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(log.lines == ["second", "third", "first"])
    }

    @Test("maxConcurrentCount 4: at most four at once")
    func widthFour() {
        let queue = ProcedureQueue(name: "width-4", maxConcurrentCount: 4)
        #expect(queue.maxConcurrentCount == 4)
        let inFlight = ProcInFlight()
        for _ in 0..<50 {
            queue.addBlock {
                inFlight.enter()
                procSleep(20)
                inFlight.exit()
            }
        }
        queue.waitUntilAllFinished()
        #expect(inFlight.max <= 4)
        #expect(inFlight.max >= 2)
    }

    @Test func widthZeroStartsNothingUntilRaised() {
        let queue = ProcedureQueue(name: "width-0", maxConcurrentCount: 0)
        let ran = ProcBox(false)
        queue.addBlock { ran.value = true }
        procSleep(30)
        #expect(!ran.value)
        queue.maxConcurrentCount = 2
        queue.waitUntilAllFinished()
        #expect(ran.value)
        #expect(ProcedureQueue(name: "default").maxConcurrentCount == ProcedureQueue.defaultMaxConcurrentCount)
        #expect(ProcedureQueue.defaultMaxConcurrentCount == -1)
    }

    @Test("The default width runs two procedures at once")
    func defaultWidthRunsSideBySide() {
        let rendezvous = ProcRendezvous(parties: 2)
        let met = ProcBox<[Bool]>([])
        let queue = ProcedureQueue(name: "side-by-side")
        for _ in 0..<2 {
            queue.addBlock { let ok = rendezvous.arrive(); met.update { $0.append(ok) } }
        }
        queue.waitUntilAllFinished()
        #expect(met.value == [true, true])
    }

    @Test func longProceduresAfterShortOnesStillRunSideBySide() {
        let queue = ProcedureQueue(name: "short-then-long")
        for _ in 0..<5_000 {
            queue.addBlock {}
        }
        queue.waitUntilAllFinished()  // the queue now believes its work is short
        for _ in 0..<3 {
            let rendezvous = ProcRendezvous(parties: 2)
            let met = ProcBox<[Bool]>([])
            for _ in 0..<2 {
                queue.addBlock { let ok = rendezvous.arrive(timeout: 5); met.update { $0.append(ok) } }
            }
            queue.waitUntilAllFinished()
            #expect(met.value == [true, true])
            for _ in 0..<1_000 {
                queue.addBlock {}
            }
        }
    }

    @Test func proceduresInOneBatchDoNotWaitBehindEachOther() {
        // Adjacent in a stream of short procedures, the two land in one
        // runner's batch; the second must not wait behind the first (which
        // waits for it): the watchdog hands it to another runner.
        let queue = ProcedureQueue(name: "batch-hostage")
        for _ in 0..<3 {
            let rendezvous = ProcRendezvous(parties: 2)
            let met = ProcBox<[Bool]>([])
            let short = { (count: Int) in (0..<count).map { _ in BlockProcedure {} } }
            let pair = (0..<2).map { _ in
                BlockProcedure { let ok = rendezvous.arrive(timeout: 5); met.update { $0.append(ok) } }
            }
            queue.addProcedures(short(20_000) + pair + short(100), waitUntilFinished: true)
            #expect(met.value == [true, true])
        }
    }

    @Test func addsFromManyThreadsWhileRunnersAreBusy() {
        // Short procedures keep runners busy, so most adds go through the
        // lock-free inbox; barriers among them still see every earlier add
        // of their thread finished, and waiting sees every add.
        let queue = ProcedureQueue(name: "many-adders")
        let ran = Atomic<Int>(0)
        let late = Atomic<Int>(0)
        let threads = 4, perThread = 20_000
        onThreads(threads) { t in
            let mine = Atomic<Int>(0)
            for i in 0..<perThread {
                if t == 0 && i % 10_000 == 9_999 {
                    let expected = i - i / 10_000  // this thread's blocks so far
                    queue.addBarrierBlock {
                        if mine.load(ordering: .relaxed) != expected {
                            late.wrappingAdd(1, ordering: .relaxed)
                        }
                    }
                } else {
                    queue.addBlock {
                        mine.wrappingAdd(1, ordering: .relaxed)
                        ran.wrappingAdd(1, ordering: .relaxed)
                    }
                }
                if t == 0 && i % 5_000 == 0 { _ = queue.procedureCount }
            }
        }
        queue.waitUntilAllFinished()
        #expect(ran.load(ordering: .relaxed) == threads * perThread - perThread / 10_000)
        #expect(late.load(ordering: .relaxed) == 0)
        #expect(queue.procedureCount == 0)
        #if DEBUG
        // ThreadSanitizer makes every procedure too long for the inbox
        // (it opens only for short ones): the adds then take the lock.
        if !procUnderTSan {
            #expect(queue.inboxAdds.load(ordering: .relaxed) > 0)
        }
        #endif
    }

    @Test func aProcedureAddedBehindABlockedRunnerStillRuns() {
        // While runners are busy with short procedures, adds go to the
        // inbox that runners empty at their next batch. Here the runners
        // block until a procedure added after them has run: it must be
        // moved and started by the watchdog, not wait for them.
        let queue = ProcedureQueue(name: "inbox-hostage")
        var inboxed = 0
        for round in 0..<5 {
            let released = Atomic<Bool>(false)
            let ok = Atomic<Int>(0)
            for _ in 0..<20_000 { queue.addBlock {} }
            for _ in 0..<2 {
                queue.addBlock {
                    if procWaitUntil(seconds: 5, { released.load(ordering: .acquiring) }) {
                        ok.wrappingAdd(1, ordering: .relaxed)
                    }
                }
            }
            for _ in 0..<100 { queue.addBlock {} }
            #if DEBUG
            let before = queue.inboxAdds.load(ordering: .relaxed)
            #endif
            queue.addBlock { released.store(true, ordering: .releasing) }
            #if DEBUG
            if queue.inboxAdds.load(ordering: .relaxed) > before { inboxed += 1 }
            #endif
            queue.waitUntilAllFinished()
            #expect(ok.load(ordering: .relaxed) == 2, "round \(round)")
        }
        #if DEBUG
        if !procUnderTSan { #expect(inboxed > 0) }  // as above
        #endif
    }

    // MARK: Suspension and cancellation

    @Test("Cancelled before it starts: main never runs, the completion block does")
    func cancelBeforeStart() {
        let queue = ProcedureQueue(name: "cancelled-before-start")
        queue.isSuspended = true
        let ran = ProcBox(false)
        let completed = ProcBox(false)
        let procedure = BlockProcedure { ran.value = true }
        procedure.completionBlock = { completed.value = true }
        queue.addProcedure(procedure)
        procedure.cancel()
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(!ran.value)
        #expect(procedure.isFinished && procedure.isCancelled)
        #expect(completed.value)
    }

    @Test("cancelAll cancels what is queued, not what is added later")
    func cancelAll() {
        let queue = ProcedureQueue(name: "cancel-all")
        queue.isSuspended = true
        let mains = Atomic<Int>(0)
        let procedures = (0..<10).map { _ in BlockProcedure { mains.wrappingAdd(1, ordering: .relaxed) } }
        queue.addProcedures(procedures, waitUntilFinished: false)
        let single = BlockProcedure { mains.wrappingAdd(1, ordering: .relaxed) }
        queue.addProcedure(single)
        single.cancel()
        queue.cancelAll()
        let later = BlockProcedure {}  // added after cancelAll: not cancelled
        queue.addProcedure(later)
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        let mainCount = mains.load(ordering: .relaxed)
        #expect(mainCount == 0)
        #expect(procedures.allSatisfy { $0.isFinished && $0.isCancelled })
        #expect(single.isFinished)
        #expect(later.isFinished && !later.isCancelled)
    }

    @Test("Suspending does not pause running procedures")
    func suspensionStopsOnlyStarting() {
        let queue = ProcedureQueue(name: "suspended")
        let long = BlockProcedure { procSleep(100) }
        queue.addProcedure(long)
        #expect(procWaitUntil { long.isExecuting })
        procSleep(10)
        queue.isSuspended = true
        #expect(queue.isSuspended)
        let started = Atomic<Int>(0)
        let waiting = (0..<5).map { _ in BlockProcedure { started.wrappingAdd(1, ordering: .relaxed) } }
        queue.addProcedures(waiting, waitUntilFinished: false)
        #expect(procWaitUntil { long.isFinished })  // it completed while suspended
        procSleep(50)
        let startedWhileSuspended = started.load(ordering: .relaxed)
        #expect(startedWhileSuspended == 0)
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        let startedAfter = started.load(ordering: .relaxed)
        #expect(startedAfter == 5)
    }

    // MARK: Barriers

    @Test func barrierWaitsForEverythingBeforeAndBlocksEverythingAfter() {
        let queue = ProcedureQueue(name: "barrier")
        let log = ProcLog()
        let inFlight = ProcInFlight()
        let alone = ProcBox(false)
        for _ in 0..<8 {
            queue.addBlock {
                inFlight.enter()
                procSleep(5)
                log.append("before")
                inFlight.exit()
            }
        }
        let barrier = queue.addBarrierBlock {
            inFlight.enter()
            alone.value = inFlight.now == 1
            log.append("barrier")
            procSleep(5)
            inFlight.exit()
        }
        for _ in 0..<8 {
            queue.addBlock {
                inFlight.enter()
                log.append("after")
                inFlight.exit()
            }
        }
        queue.waitUntilAllFinished()
        #expect(log.lines == Array(repeating: "before", count: 8) + ["barrier"] + Array(repeating: "after", count: 8))
        #expect(alone.value)
        #expect(barrier.isFinished)
    }

    @Test func barriersInARowAndOnAnEmptyQueue() {
        let queue = ProcedureQueue(name: "barriers")
        let log = ProcLog()
        queue.addBarrierBlock { log.append("b1") }
        queue.addBarrierBlock { log.append("b2") }
        queue.addBlock { log.append("x") }
        queue.addBarrierBlock { log.append("b3") }
        queue.addBarrierBlock { log.append("b4") }
        queue.addBlock { log.append("y") }
        queue.waitUntilAllFinished()
        #expect(log.lines == ["b1", "b2", "x", "b3", "b4", "y"])
    }

    @Test func barrierWaitsForAProcedureBlockedOnAnotherQueue() {
        let queue = ProcedureQueue(name: "barrier-deps")
        let other = ProcedureQueue(name: "barrier-other")
        other.isSuspended = true
        let log = ProcLog()
        let external = BlockProcedure { log.append("external") }
        let waiting = BlockProcedure { log.append("waiting") }
        waiting.addDependency(external)
        queue.addProcedure(waiting)
        queue.addBarrierBlock { log.append("barrier") }
        queue.addBlock { log.append("after") }
        other.addProcedure(external)
        procSleep(30)
        #expect(log.lines.isEmpty)
        other.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(log.lines == ["external", "waiting", "barrier", "after"])
    }

    @Test func cancelledBarrierStillReleasesWhatFollows() {
        let queue = ProcedureQueue(name: "barrier-cancel")
        queue.isSuspended = true
        let log = ProcLog()
        queue.addBlock { log.append("before") }
        let barrier = queue.addBarrierBlock { log.append("barrier") }
        queue.addBlock { log.append("after") }
        barrier.cancel()
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(log.lines == ["before", "after"])
    }

    // MARK: Waiting

    @Test("The three ways to add work")
    func threeWaysToAdd() {
        let queue = ProcedureQueue(name: "three-ways")
        let count = Atomic<Int>(0)
        let single = BlockProcedure { count.wrappingAdd(1, ordering: .relaxed) }
        queue.addProcedure(single)
        let batch = (0..<3).map { _ in BlockProcedure { procSleep(10); count.wrappingAdd(1, ordering: .relaxed) } }
        queue.addProcedures(batch, waitUntilFinished: true)
        #expect(batch.allSatisfy { $0.isFinished })  // returned only after all had finished

        queue.isSuspended = true
        let held = BlockProcedure { count.wrappingAdd(1, ordering: .relaxed) }
        queue.addProcedures([held], waitUntilFinished: false)  // returns at once
        #expect(!held.isFinished)
        let block = queue.addBlock { count.wrappingAdd(1, ordering: .relaxed) }
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(held.isFinished && block.isFinished)
        let total = count.load(ordering: .relaxed)
        #expect(total == 6)
    }

    @Test("waitUntilAllFinished also waits for procedures added while it waits")
    func waitSeesLateAdditions() {
        let queue = ProcedureQueue(name: "late-additions")
        let addingDone = ProcBox(false)
        let count = Atomic<Int>(0)
        // Keeps the queue non-empty until the other thread is done adding.
        queue.addBlock { _ = procWaitUntil { addingDone.value } }
        procDetach {
            for _ in 0..<10 {
                queue.addBlock {
                    procSleep(10)
                    count.wrappingAdd(1, ordering: .relaxed)
                }
                procSleep(5)
            }
            addingDone.value = true
        }
        queue.waitUntilAllFinished()
        let total = count.load(ordering: .relaxed)
        #expect(total == 10)
        #expect(queue.procedureCount == 0)
    }

    @Test func waitUntilAllFinishedAlsoWaitsForCompletionBlocks() {
        let queue = ProcedureQueue(name: "completion-wait")
        let done = ProcBox(false)
        let procedure = BlockProcedure {}
        procedure.completionBlock = {
            procSleep(20)
            done.value = true
        }
        queue.addProcedure(procedure)
        queue.waitUntilAllFinished()
        #expect(done.value)
    }

    @Test func asyncWaiting() async {
        let queue = ProcedureQueue(name: "async-wait")
        let procedures = (0..<10).map { _ in BlockProcedure { procSleep(2) } }
        await queue.addProcedures(procedures, waitUntilFinished: true)
        #expect(procedures.allSatisfy { $0.isFinished })
        let last = queue.addBlock { procSleep(5) }
        await queue.waitUntilAllFinished()
        #expect(last.isFinished)
        #expect(queue.procedureCount == 0)
        await queue.addProcedures([], waitUntilFinished: true)
        await queue.waitUntilAllFinished()  // empty: at once
    }

    @Test("Batching with completion blocks keeps the queue shallow")
    func batching() {
        let queue = ProcedureQueue(name: "batching")
        let ran = Atomic<Int>(0)
        let deepest = ProcInFlight()
        let batches = ProcBox(0)
        @Sendable func enqueueBatch() {
            let count = batches.update { value -> Int in value += 1; return value }
            let work = (0..<10).map { _ in
                BlockProcedure {
                    ran.wrappingAdd(1, ordering: .relaxed)
                    deepest.enter()  // records the depth seen
                    deepest.exit()
                }
            }
            let last = BlockProcedure {}
            for procedure in work { last.addDependency(procedure) }
            if count < 10 {
                last.completionBlock = { enqueueBatch() }
            }
            queue.addProcedures(work + [last], waitUntilFinished: false)
        }
        let depth = ProcBox(0)
        let sampler = BlockProcedure {}
        _ = sampler
        enqueueBatch()
        // Sample the depth while it runs.
        while batches.value < 10 || queue.procedureCount > 0 {
            depth.update { $0 = max($0, queue.procedureCount) }
            procSleep(1)
        }
        queue.waitUntilAllFinished()
        let total = ran.load(ordering: .relaxed)
        #expect(total == 100)
        #expect(depth.value <= 11)
    }

    // MARK: Queues

    @Test("The queue keeps no reference to finished procedures")
    func queueKeepsNoReference() {
        let queue = ProcedureQueue(name: "no-reference")
        weak var weakProcedure: Procedure?
        do {
            let procedure = BlockProcedure { procSleep(5) }
            weakProcedure = procedure
            queue.addProcedure(procedure)
            #expect(queue.procedureCount <= 1)
            queue.waitUntilAllFinished()
            #expect(procedure.isFinished)  // our reference still answers
            #expect(queue.procedures.isEmpty)
            #expect(queue.procedureCount == 0)
        }
        #expect(weakProcedure == nil)
    }

    @Test("Finished procedures are freed while the queue stays busy: by the next add, or past a bound")
    func finishedProceduresFreedWhileBusy() {
        final class Deaths: Sendable { let count = Atomic<Int>(0) }
        final class Counted: Procedure, @unchecked Sendable {
            let deaths: Deaths
            let done: CountingSemaphore
            init(deaths: Deaths, done: CountingSemaphore) {
                self.deaths = deaths
                self.done = done
            }
            override func main() { done.signal() }
            deinit { deaths.count.add(1, ordering: .relaxed) }
        }
        let deaths = Deaths()
        let done = CountingSemaphore(value: 0)
        let release = CountingSemaphore(value: 0)
        let queue = ProcedureQueue(name: "graveyard", maxConcurrentCount: 2)
        // Keeps the queue busy (never idle) until the end.
        queue.addBlock { release.wait() }
        let count = 1_000
        for _ in 0..<count {
            queue.addProcedure(Counted(deaths: deaths, done: done))
        }
        for _ in 0..<count {
            #expect(done.wait(timeout: .now() + .seconds(10)) == .success)
        }
        // Dropped by the workers once 64 wait (the queue's bound; the
        // last finishers may not have handed theirs over yet).
        let floor = count - 64 - 64
        let deadline = procNow() + 10
        while deaths.count.load(ordering: .relaxed) < floor && procNow() < deadline {
            procSleep(1)
        }
        #expect(deaths.count.load(ordering: .relaxed) >= floor)
        // Every one accounted for (main() signals before its runner's
        // bookkeeping): only the blocker is left in the queue's list.
        let accounted = procWaitUntil { queue.procedures.count == 1 }
        #expect(accounted)
        // The next add drops what the graveyard still holds (a finishing
        // thread may hold the last reference a moment longer), while the
        // queue is still busy.
        queue.addBlock {}
        let freed = procWaitUntil { deaths.count.load(ordering: .relaxed) == count }
        #expect(freed)
        release.signal()
        queue.waitUntilAllFinished()
        #expect(deaths.count.load(ordering: .relaxed) == count)
    }

    @Test func proceduresSnapshot() {
        let queue = ProcedureQueue(name: "snapshot")
        queue.isSuspended = true
        let procedures = (0..<3).map { _ in BlockProcedure {} }
        queue.addProcedures(procedures, waitUntilFinished: false)
        let snapshot = queue.procedures
        #expect(snapshot.count == 3)
        #expect(zip(snapshot, procedures).allSatisfy { $0 === $1 })
        #expect(queue.procedureCount == 3)
        queue.isSuspended = false
        queue.waitUntilAllFinished()
        #expect(queue.procedures.isEmpty)
    }

    @Test func currentQueue() {
        let queue = ProcedureQueue(name: "current")
        #expect(ProcedureQueue.current == nil)
        let seen = ProcBox<Bool?>(nil)
        queue.addBlock { seen.value = ProcedureQueue.current === queue }
        queue.waitUntilAllFinished()
        #expect(seen.value == true)
        #expect(queue.name == "current")
        #expect(queue.description == "ProcedureQueue 'current'")
        queue.name = "renamed"
        #expect(queue.name == "renamed")
    }

    @Test func queuesAndProceduresCompareByIdentity() {
        let queue = ProcedureQueue(name: "same-name")
        let twin = ProcedureQueue(name: "same-name")
        #expect(queue == queue)
        #expect(queue != twin)
        #expect(Set([queue, twin, queue]).count == 2)
        let procedure = BlockProcedure {}
        let other = BlockProcedure {}
        let invocation = InvocationProcedure(argument: 1) { $0 }
        #expect(procedure == procedure)
        #expect(procedure != other)
        #expect(invocation as Procedure != procedure)
        #expect([procedure, other] == [procedure, other])
        var seen: [Procedure: Int] = [procedure: 1, other: 2]
        seen[invocation] = 3
        #expect(seen[procedure] == 1 && seen[other] == 2 && seen[invocation] == 3)
        #expect(procedure.hashValue == procedure.hashValue)
    }

    /// A BlockProcedure's blocks run on the procedure's thread and on pool
    /// threads; `current` is the procedure's queue in every one of them.
    @Test func currentInEveryBlockOfABlockProcedure() {
        let queue = ProcedureQueue(name: "blocks")
        for round in 0..<5 {
            let seen = ProcBox<[(thread: UInt, current: ProcedureQueue?)]>([])
            // The first two blocks wait for each other: with more than one
            // thread taking part, some blocks run off the procedure's thread.
            let twoIn = ProcRendezvous(parties: 2)
            let procedure = BlockProcedure()
            for index in 0..<16 {
                procedure.addExecutionBlock {
                    if index < 2 { _ = twoIn.arrive(timeout: 2) } else { procSleep(1) }
                    let current = ProcedureQueue.current
                    let thread = procThreadID()
                    seen.update { $0.append((thread, current)) }
                }
            }
            queue.addProcedure(procedure)
            queue.waitUntilAllFinished()
            let results = seen.value
            let threads = Set(results.map(\.thread)).count
            #expect(results.count == 16, "round \(round)")
            #expect(results.allSatisfy { $0.current == queue },
                    "round \(round): \(results.filter { $0.current != queue }.count) of 16 blocks on \(threads) threads saw another current queue")
        }
    }

    @Test func serialUnderlyingQueueRunsOneAtATime() {
        let serial = WorkQueue(label: "procedure-target")
        let queue = ProcedureQueue(name: "on-serial")
        #expect(queue.underlyingQueue == nil)
        queue.underlyingQueue = serial
        #expect(queue.underlyingQueue === serial)
        let inFlight = ProcInFlight()
        let label = ProcBox<String>("")
        for _ in 0..<10 {
            queue.addBlock {
                inFlight.enter()
                label.value = WorkQueue.currentLabel
                procSleep(2)
                inFlight.exit()
            }
        }
        queue.waitUntilAllFinished()
        #expect(inFlight.max == 1)
        #expect(label.value == "procedure-target")
        queue.underlyingQueue = nil
        queue.addBlock {}
        queue.waitUntilAllFinished()
    }

    /// Procedures run on one's own WorkQueue (seen through a queue-specific
    /// value), are held back while it is suspended, and the ProcedureQueue
    /// keeps the WorkQueue alive while it is set.
    @Test func proceduresRunOnOwnWorkQueue() {
        let key = SpecificKey<Int>()
        let queue = ProcedureQueue(name: "on-own", maxConcurrentCount: 4)
        let started = ProcBox<Int>(0)
        do {
            let own = WorkQueue(label: "own", attributes: .concurrent)
            own.setSpecific(key, value: 42)
            queue.underlyingQueue = own
            own.suspend()
            let seen = ProcBox<[Int?]>([])
            for _ in 0..<8 {
                queue.addBlock {
                    seen.update { $0.append(WorkQueue.getSpecific(key)) }
                    started.update { $0 += 1 }
                }
            }
            procSleep(20)
            #expect(started.value == 0)  // own is suspended: nothing started
            own.resume()
            queue.waitUntilAllFinished()
            #expect(seen.value == Array(repeating: 42, count: 8))
        }
        // The only reference to `own` is now the ProcedureQueue's.
        let later = ProcBox<Int?>(nil)
        queue.addBlock { later.value = WorkQueue.getSpecific(key) }
        queue.waitUntilAllFinished()
        #expect(later.value == 42)
        #expect(queue.underlyingQueue?.label == "own")
        queue.underlyingQueue = nil
        queue.addBlock { later.value = WorkQueue.getSpecific(key) }
        queue.waitUntilAllFinished()
        #expect(later.value == nil)
    }

    /// A runner submitted to the old underlying queue that has not started
    /// when the queue changes must neither hold up procedures added later
    /// (the old queue may stay suspended) nor run them on the old queue.
    @Test func changingTheUnderlyingQueueLeavesNoRunnerBehind() {
        let key = SpecificKey<Int>()
        let queue = ProcedureQueue(name: "retarget", maxConcurrentCount: 4)
        let old = WorkQueue(label: "old", attributes: .concurrent)
        old.setSpecific(key, value: 7)
        queue.underlyingQueue = old
        old.suspend()
        let seen = ProcBox<[Int?]>([])
        queue.addBlock { seen.update { $0.append(WorkQueue.getSpecific(key)) } }
        procSleep(5)  // its runner now waits on the suspended queue
        queue.underlyingQueue = nil
        var stuck = false
        for round in 1...3 where !stuck {
            let done = CountingSemaphore(value: 0)
            queue.addBlock {
                seen.update { $0.append(WorkQueue.getSpecific(key)) }
                done.signal()
            }
            stuck = done.wait(timeout: .now() + .seconds(10)) != .success
            #expect(!stuck, "round \(round) waited for the old queue")
        }
        old.resume()  // the old runner starts now, and must run nothing there
        queue.waitUntilAllFinished()
        #expect(seen.value == [nil, nil, nil, nil])
        queue.addBlock { seen.update { $0.append(WorkQueue.getSpecific(key)) } }
        queue.waitUntilAllFinished()
        procSleep(5)
        queue.addBlock { seen.update { $0.append(WorkQueue.getSpecific(key)) } }
        queue.waitUntilAllFinished()
        #expect(seen.value == [Int?](repeating: nil, count: 6))
    }

    @MainActor
    @Test func mainQueueRunsOnTheMainThread() {
        guard procIsMainThread() else { return }  // main-actor tests run on the main thread
        // With SwiftQueues as the global executor this body is itself
        // main-queue work, and the (serial) main queue cannot run the
        // procedure until it returns: nothing to wait for here.
        guard !WorkQueue.isGlobalExecutor else { return }
        let onMain = ProcBox<Bool?>(nil)
        let isCurrent = ProcBox<Bool?>(nil)
        let procedure = BlockProcedure {
            onMain.value = procIsMainThread()
            isCurrent.value = ProcedureQueue.current === ProcedureQueue.main
        }
        #expect(ProcedureQueue.main.maxConcurrentCount == 1)
        ProcedureQueue.main.maxConcurrentCount = 4  // ignored on the main queue
        #expect(ProcedureQueue.main.maxConcurrentCount == 1)
        ProcedureQueue.main.addProcedure(procedure)
        let finished = sq_main_queue_run_until(
            sq_time(SQ_TIME_NOW, 10 * Int64(NSEC_PER_SEC)),
            { context in
                Unmanaged<Procedure>.fromOpaque(context!).takeUnretainedValue().isFinished
            },
            Unmanaged.passUnretained(procedure).toOpaque())
        #expect(finished)
        #expect(onMain.value == true)
        #expect(isCurrent.value == true)
    }
    /// A procedure a width-1 runner took in a batch but had not started yet
    /// can be cancelled (back on a ready list), run by another runner once
    /// the width grows, and lose every other reference: the runner that
    /// took it still holds it until it has moved past it (without that,
    /// the runner reads a freed procedure: a crash, or a sanitizer report).
    /// Whether a run takes the two together depends on the measured time
    /// of the first procedure, hence the repetitions.
    @Test func aTakenProcedureOutlivesItsRunElsewhere() {
        final class Probe: BlockProcedure, @unchecked Sendable {
            let freed: ProcBox<Bool>
            init(freed: ProcBox<Bool>) {
                self.freed = freed
                super.init {}
            }
            deinit { freed.value = true }
        }
        for _ in 0..<50 {
            let queue = ProcedureQueue(name: "taken", maxConcurrentCount: 1)
            let freed = ProcBox(false)
            let taken = ProcBox<Procedure?>(Probe(freed: freed))
            let first = BlockProcedure {
                // The runner holds `taken` in its batch, not started.
                taken.value?.cancel()  // back on the ready list
                queue.maxConcurrentCount = 2  // another runner takes it
                let probe = BlockProcedure {}
                queue.addProcedure(probe)
                probe.waitUntilFinished()  // ran after `taken` was accounted
                taken.value = nil
                queue.addBlock {}  // drops finished procedures' references
            }
            // Suspended, so that one runner takes `warm` alone (its time
            // lets the next batch grow), then `first` and `taken` together.
            let warm = BlockProcedure {}
            queue.isSuspended = true
            queue.addProcedures([warm, first, taken.value!], waitUntilFinished: false)
            queue.isSuspended = false
            queue.waitUntilAllFinished()
            #expect(procWaitUntil { freed.value })
        }
    }
}
