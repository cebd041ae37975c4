// CountingSemaphore: limiting concurrency, timeouts, a signal waking a
// waiter, waiting forever, the async wait.

import Testing
import SwiftQueues

@Suite struct CountingSemaphoreTests {
    /// At most `value` holders at once; everyone served.
    @Test func limitsConcurrencyToItsValue() {
        let semaphore = CountingSemaphore(value: 2)
        let meter = OverlapMeter()
        let group = WorkGroup()
        let queue = WorkQueue(label: "sem.users", attributes: .concurrent)
        for _ in 0..<20 {
            queue.async(group: group) {
                semaphore.wait()
                meter.enter()
                sleepMilliseconds(1)
                meter.leave()
                semaphore.signal()
            }
        }
        group.wait()
        #expect(meter.maximum <= 2)
        #expect(meter.maximum >= 1)
    }

    /// The timeout, and no unit taken on timeout.
    @Test func waitTimesOutWithoutTakingAUnit() {
        let semaphore = CountingSemaphore(value: 0)
        let start = ContinuousClock.now
        #expect(semaphore.wait(timeout: .now() + .milliseconds(50)) == .timedOut)
        #expect(millisecondsSince(start) >= 49)
        #expect(semaphore.signal() == false)  // nobody waits
        #expect(semaphore.wait(timeout: .now()) == .success)
        #expect(semaphore.wait(timeout: .now()) == .timedOut)
    }

    /// A wait is woken by a signal from another thread.
    @Test func signalWakesAWaiter() {
        let request = CountingSemaphore(value: 0), reply = CountingSemaphore(value: 0)
        let rounds = 200
        WorkQueue.global().async {
            for _ in 0..<rounds {
                _ = request.wait(timeout: .now() + rendezvousTimeout)
                reply.signal()
            }
        }
        var answered = 0
        for _ in 0..<rounds {
            request.signal()
            if reply.wait(timeout: .now() + rendezvousTimeout) == .success { answered += 1 }
        }
        #expect(answered == rounds)
    }

    /// A FOREVER wait blocks until the signal.
    @Test func waitingForeverEndsWithTheSignal() {
        let semaphore = CountingSemaphore(value: 0)
        let signalled = AtomicCounter()
        WorkQueue.global().async {
            sleepMilliseconds(10)
            signalled.store(1)
            semaphore.signal()
        }
        semaphore.wait()
        #expect(signalled.load() == 1)
    }

    /// The async wait: immediate when a unit is free, suspends otherwise.
    @Test func asyncWaitTakesAUnitWithoutBlockingTheTask() async {
        let free = CountingSemaphore(value: 1)
        await free.wait()  // fast path
        free.signal()

        let semaphore = CountingSemaphore(value: 0)
        let waiters = 6
        let woken = AtomicCounter()
        await withTaskGroup(of: Void.self) { tasks in
            for _ in 0..<waiters {
                tasks.addTask {
                    await semaphore.wait()
                    woken.increment()
                }
            }
            WorkQueue.global().async {
                for _ in 0..<waiters { semaphore.signal() }
            }
        }
        #expect(woken.load() == Int64(waiters))
    }
}
