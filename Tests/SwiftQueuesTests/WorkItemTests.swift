// WorkItem: cancel before run, wait, notify, barrier, perform-once.

import Testing
import SwiftQueues

@Suite struct WorkItemTests {
    @Test func theClosureRunsAtMostOnce() {
        let runs = AtomicCounter()
        let item = WorkItem { runs.increment() }
        let queue = WorkQueue(label: "item.once")
        item.perform()
        item.perform()
        queue.async(execute: item)
        queue.sync(execute: item)
        queue.sync {}
        #expect(runs.load() == 1)
        #expect(item.wait(timeout: .now()) == .success)
        #expect(!item.isCancelled)
    }

    @Test func cancelBeforeItRunsMeansItNeverRuns() {
        let queue = WorkQueue(label: "item.cancel")
        let runs = AtomicCounter()
        let item = WorkItem { runs.increment() }
        queue.suspend()
        queue.async(execute: item)
        item.cancel()
        #expect(item.isCancelled)
        #expect(item.wait(timeout: .now()) == .success)  // cancelled counts as finished
        queue.resume()
        queue.sync {}
        item.perform()
        #expect(runs.load() == 0)
    }

    @Test func cancelDoesNotInterruptARunningItem() {
        let started = CountingSemaphore(value: 0), proceed = CountingSemaphore(value: 0)
        let sawCancel = AtomicCounter()
        let box = UnsafeBox<WorkItem?>(nil)
        let item = WorkItem {
            started.signal()
            _ = proceed.wait(timeout: .now() + rendezvousTimeout)
            if box.value?.isCancelled == true { sawCancel.increment() }
        }
        box.value = item
        WorkQueue.global().async(execute: item)
        _ = started.wait(timeout: .now() + rendezvousTimeout)
        item.cancel()
        proceed.signal()
        item.wait()
        #expect(sawCancel.load() == 1)  // it finished, and could see the request
        box.value = nil
    }

    @Test func waitReturnsAfterTheItemRan() {
        let flag = AtomicCounter()
        let item = WorkItem {
            sleepMilliseconds(20)
            flag.store(1)
        }
        WorkQueue.global().async(execute: item)
        item.wait()
        #expect(flag.load() == 1)
    }

    @Test func waitTimesOutForAnItemNeverSubmitted() {
        let item = WorkItem {}
        let start = ContinuousClock.now
        #expect(item.wait(timeout: .now() + .milliseconds(30)) == .timedOut)
        #expect(millisecondsSince(start) >= 29)
        item.cancel()
    }

    @Test func notifyRunsAfterTheItemOrItsCancellation() {
        let queue = WorkQueue(label: "item.notify")
        let log = EventLog()
        let notified = CountingSemaphore(value: 0)
        let item = WorkItem { log.log("ran") }
        item.notify(queue: queue) {
            log.log("notified")
            notified.signal()
        }
        WorkQueue.global().async(execute: item)
        #expect(notified.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(log.lines == ["ran", "notified"])

        let cancelled = WorkItem { log.log("must not run") }
        cancelled.notify(queue: queue) { notified.signal() }
        cancelled.cancel()
        #expect(notified.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(!log.lines.contains("must not run"))
    }

    @Test func aBarrierItemRunsAlone() {
        let queue = WorkQueue(label: "item.barrier", attributes: .concurrent)
        let meter = OverlapMeter()
        let othersDuringBarrier = AtomicCounter(-1)
        let group = WorkGroup()
        for _ in 0..<6 {
            queue.async(group: group) {
                meter.enter()
                sleepMilliseconds(2)
                meter.leave()
            }
        }
        let barrier = WorkItem(flags: [.barrier]) { othersDuringBarrier.store(meter.current) }
        #expect(barrier.flags == .barrier)
        queue.async(execute: barrier)
        for _ in 0..<6 {
            queue.async(group: group) {
                meter.enter()
                sleepMilliseconds(2)
                meter.leave()
            }
        }
        barrier.wait()
        group.wait()
        #expect(othersDuringBarrier.load() == 0)
    }

    @Test func theClosureIsReleasedWithTheItem() {
        let released = CountingSemaphore(value: 0)
        do {
            let probe = DeinitProbe { released.signal() }
            let item = WorkItem { withExtendedLifetime(probe) {} }
            item.cancel()  // never runs: the finalizer still releases it
        }
        #expect(released.wait(timeout: .now() + rendezvousTimeout) == .success)
    }
}
