// Delayed submission (WorkQueue.asyncAfter) and RepeatingTimer, with the
// classic dispatch_after and NSTimer usage examples checked against their
// exact output. UI output becomes log lines; "the main queue" is a serial
// stand-in queue (the test runner does not drain WorkQueue.main). Timing
// checks are lower bounds or the examples' tolerance ranges.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import SwiftQueues
import Synchronization

@Suite struct TimerTests {
    // MARK: - asyncAfter

    /// The closure runs on the queue, never before its deadline, and the
    /// caller is not blocked.
    @Test func asyncAfterLandsNotEarly() {
        let queue = WorkQueue(label: "test.after")
        let key = SpecificKey<Int>()
        queue.setSpecific(key, value: 7)
        let ran = CountingSemaphore(value: 0)
        let ranAt = UnsafeBox<WorkDeadline?>(nil)
        let onQueue = UnsafeBox<Int?>(nil)
        let deadline = WorkDeadline.now() + .milliseconds(100)
        let start = ContinuousClock.now
        queue.asyncAfter(deadline: deadline) {
            ranAt.value = .now()
            onQueue.value = WorkQueue.getSpecific(key)
            ran.signal()
        }
        #expect(millisecondsSince(start) < 100)   // did not block
        #expect(ran.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(ranAt.value.map { $0 >= deadline } == true)
        #expect(onQueue.value == 7)
    }

    /// A wall-clock deadline and a delay also land not early.
    @Test func asyncAfterWallDeadlineAndDelay() {
        let queue = WorkQueue(label: "test.after.wall")
        let group = WorkGroup()
        let wallDeadline = WorkDeadline.wallNow() + .milliseconds(60)
        let delayStart = WorkDeadline.now()
        let late = AtomicCounter()
        group.enter()
        queue.asyncAfter(deadline: wallDeadline) {
            if WorkDeadline.wallNow() >= wallDeadline { late.increment() }
            group.leave()
        }
        group.enter()
        queue.asyncAfter(delay: .milliseconds(60)) {
            if WorkDeadline.now() >= delayStart + .milliseconds(60) { late.increment() }
            group.leave()
        }
        #expect(group.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(late.load() == 2)
    }

    /// Cancelling the returned handle before the deadline means it never
    /// runs; the handle counts as finished at once.
    @Test func cancelledAsyncAfterNeverRuns() {
        let queue = WorkQueue(label: "test.after.cancel")
        let ran = AtomicCounter()
        let handle = queue.asyncAfter(delay: .milliseconds(50)) { ran.increment() }
        handle.cancel()
        #expect(handle.isCancelled)
        #expect(handle.wait(timeout: .now() + rendezvousTimeout) == .success)
        let later = CountingSemaphore(value: 0)
        queue.asyncAfter(delay: .milliseconds(150)) { later.signal() }
        #expect(later.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(ran.load() == 0)

        // distantFuture: never submitted, and nothing leaks.
        let never = queue.asyncAfter(deadline: .distantFuture) { ran.increment() }
        #expect(never.wait(timeout: .now() + .milliseconds(20)) == .timedOut)
        never.cancel()
        #expect(ran.load() == 0)
    }

    /// A work item submitted with a delay runs once; notify sees it.
    @Test func asyncAfterWorkItem() {
        let queue = WorkQueue(label: "test.after.item")
        let count = AtomicCounter()
        let item = WorkItem { count.increment() }
        let notified = CountingSemaphore(value: 0)
        item.notify(queue: queue) { notified.signal() }
        queue.asyncAfter(deadline: .now() + .milliseconds(10), execute: item)
        #expect(notified.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(count.load() == 1)
    }

    // MARK: - dispatch_after examples

    /// "Grand Central Dispatch" printed once, at least 300 ms later (the
    /// example's 3.0 s, scaled down), in place of
    /// performSelector:withObject:afterDelay:.
    @Test func printAfterDelay() {
        let mainStandIn = WorkQueue(label: "main-stand-in")
        let log = EventLog()
        let done = CountingSemaphore(value: 0)
        let start = ContinuousClock.now
        let elapsed = UnsafeBox<Double>(0)
        mainStandIn.asyncAfter(delay: .milliseconds(300)) {
            elapsed.value = millisecondsSince(start)
            log.log("Grand Central Dispatch")
            done.signal()
        }
        #expect(done.wait(timeout: .now() + rendezvousTimeout) == .success)
        sleepMilliseconds(50)
        #expect(log.lines == ["Grand Central Dispatch"])
        #expect(elapsed.value >= 300)
    }

    /// processSomething on the global queue after 200 ms: exactly one
    /// "Processing..." line.
    @Test func processSomethingOnGlobalQueueAfterDelay() {
        let log = EventLog()
        let done = CountingSemaphore(value: 0)
        let start = ContinuousClock.now
        let elapsed = UnsafeBox<Double>(0)
        WorkQueue.global().asyncAfter(deadline: .now() + .milliseconds(200)) {
            elapsed.value = millisecondsSince(start)
            log.log("Processing...")
            done.signal()
        }
        #expect(done.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(log.lines == ["Processing..."])
        #expect(elapsed.value >= 200)
    }

    // MARK: - NSTimer examples

    /// A repeating 0.1 s timer run for 1.05 s paints ~10 times; the k-th
    /// fire comes no sooner than k intervals after scheduling. A loaded
    /// machine can delay a fire past the next one, and a late timer skips
    /// what it missed (as `Timer` does), so fewer fires are allowed; a
    /// timer that stopped re-arming fires once, and one that runs early
    /// fails the spacing check. The queue is user-interactive, as a UI's
    /// paint queue would be: the suite's other tests flood the default
    /// class in parallel, and a handler queued behind them fired 3 times.
    @Test func repeatingScheduledTimer() {
        let log = EventLog()
        let start = ContinuousClock.now
        let fireTimes = Mutex<[Double]>([])
        let timer = RepeatingTimer.scheduled(
            interval: .milliseconds(100),
            queue: WorkQueue(label: "paint", qos: .userInteractive)
        ) { _ in
            let at = millisecondsSince(start)
            fireTimes.withLock { $0.append(at) }
            log.log("Painting")
        }
        while millisecondsSince(start) < 1050 { sleepMilliseconds(5) }
        timer.invalidate()
        let lines = log.lines
        #expect((5...11).contains(lines.count), "\(lines.count) fires")
        #expect(Set(lines) == ["Painting"])
        let times = fireTimes.withLock { $0 }
        for (k, at) in times.enumerated() {
            #expect(at >= Double(k + 1) * 100, "fire \(k + 1) at \(at) ms")
        }
    }

    /// Invalidated after its 3rd fire (twice: harmless), the timer
    /// fires no more and is not valid.
    @Test func invalidatingATimer() {
        let fires = AtomicCounter()
        let timer = RepeatingTimer.scheduled(
            interval: .milliseconds(20), queue: WorkQueue(label: "invalidate")
        ) { timer in
            if fires.increment() == 3 {
                timer.invalidate()
                timer.invalidate()
            }
        }
        #expect(sourcePoll { fires.load() >= 3 })
        sleepMilliseconds(500)
        #expect(fires.load() == 3)
        #expect(!timer.isValid)
        timer.invalidate()
    }

    /// A non-repeating timer fires once, then is invalid and has
    /// released its userInfo.
    @Test func nonRepeatingTimer() {
        let fires = AtomicCounter()
        let released = AtomicCounter()
        let timer = RepeatingTimer.scheduled(
            interval: .milliseconds(30), repeats: false, queue: WorkQueue(label: "once"),
            userInfo: DeinitProbe { released.increment() }
        ) { _ in fires.increment() }
        #expect(timer.userInfo is DeinitProbe)
        #expect(sourcePoll { !timer.isValid && released.load() == 1 })
        sleepMilliseconds(150)
        #expect(fires.load() == 1)
        #expect(timer.userInfo == nil)
    }

    /// An unscheduled timer does not fire; once scheduled it does.
    @Test func unscheduledTimer() {
        let fires = AtomicCounter()
        let timer = RepeatingTimer(interval: .milliseconds(20), queue: WorkQueue(label: "later")) {
            _ in fires.increment()
        }
        sleepMilliseconds(300)
        #expect(fires.load() == 0)
        #expect(timer.isValid)
        timer.schedule()
        #expect(sourcePoll { fires.load() >= 1 })
        timer.invalidate()
        #expect(!timer.isValid)

        // Invalidating a timer that was never scheduled releases it too.
        let released = AtomicCounter()
        let idle = RepeatingTimer(interval: .seconds(1), queue: WorkQueue(label: "idle"),
                                  userInfo: DeinitProbe { released.increment() }) { _ in }
        idle.invalidate()
        idle.schedule()   // no effect on an invalid timer
        #expect(released.load() == 1)
        #expect(!idle.isValid)
    }

    /// The handler receives the timer itself, reads its userInfo,
    /// and invalidating there stops it after one fire.
    @Test func handlerReceivesTheTimer() {
        let same = AtomicCounter()
        let info = UnsafeBox<String?>(nil)
        let fires = AtomicCounter()
        let holder = UnsafeBox<RepeatingTimer?>(nil)
        let ready = CountingSemaphore(value: 0)
        let timer = RepeatingTimer(interval: .milliseconds(20), queue: WorkQueue(label: "self"),
                                   userInfo: "Painting parameters") { timer in
            ready.wait()
            if holder.value === timer { same.increment() }
            info.value = timer.userInfo as? String
            fires.increment()
            timer.invalidate()
            ready.signal()
        }
        holder.value = timer
        ready.signal()
        timer.schedule()
        #expect(sourcePoll { fires.load() == 1 })
        sleepMilliseconds(200)
        ready.wait()
        #expect(fires.load() == 1)
        #expect(same.load() == 1)
        #expect(info.value == "Painting parameters")
        #expect(!timer.isValid)
    }

    /// 0.25 s and 0.5 s intervals give about 4 and 2 fires a second (in
    /// 1.1 s: 4 and 2, one fewer each when a loaded machine delays a fire
    /// past the next; never more).
    @Test func intervalGranularity() {
        let quarter = AtomicCounter()
        let half = AtomicCounter()
        let start = ContinuousClock.now
        let a = RepeatingTimer.scheduled(interval: .milliseconds(250),
                                         queue: WorkQueue(label: "quarter")) { _ in quarter.increment() }
        let b = RepeatingTimer.scheduled(interval: .milliseconds(500),
                                         queue: WorkQueue(label: "half")) { _ in half.increment() }
        while millisecondsSince(start) < 1100 { sleepMilliseconds(5) }
        a.invalidate()
        b.invalidate()
        #expect((2...5).contains(quarter.load()), "\(quarter.load())")
        #expect((1...3).contains(half.load()), "\(half.load())")
    }

    /// A timer whose queue is not running (the run loop of a
    /// thread that is not running it) does not fire; once the queue runs,
    /// the handler does.
    @Test func timerOnAQueueThatIsNotRunning() {
        let background = WorkQueue(label: "background-loop")
        background.suspend()
        let fires = AtomicCounter()
        let timer = RepeatingTimer.scheduled(interval: .milliseconds(20), queue: background) {
            _ in fires.increment()
        }
        sleepMilliseconds(200)
        #expect(fires.load() == 0)
        background.resume()
        #expect(sourcePoll { fires.load() >= 1 })
        timer.invalidate()
    }
}
