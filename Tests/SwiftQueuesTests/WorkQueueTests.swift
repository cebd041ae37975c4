// WorkQueue at the Swift level: serial, concurrent and global queues,
// barriers, sync and async, targets, suspension, labels, concurrentPerform.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
import SwiftQueues

@Suite struct WorkQueueTests {
    // MARK: - Kinds

    /// FIFO, one at a time.
    @Test func serialQueueIsFIFOAndRunsOneAtATime() {
        let queue = WorkQueue(label: "com.example.MyQueue")
        let order = UnsafeBox<[Int]>([])  // plain array: the queue serialises
        let meter = OverlapMeter()
        for index in 0..<1000 {
            queue.async {
                meter.enter()
                order.value.append(index)
                meter.leave()
            }
        }
        queue.sync {}
        #expect(order.value == Array(0..<1000))
        #expect(meter.maximum == 1)
    }

    /// A concurrent queue runs closures side by side (each waits for the
    /// other, which only works if both run at once).
    @Test func concurrentQueueRunsClosuresSideBySide() {
        let queue = WorkQueue(label: "concurrent", attributes: .concurrent)
        #expect(queue.isConcurrent)
        let first = CountingSemaphore(value: 0), second = CountingSemaphore(value: 0)
        let results = WorkGroup()
        let met = AtomicCounter()
        queue.async(group: results) {
            first.signal()
            if second.wait(timeout: .now() + rendezvousTimeout) == .success { met.increment() }
        }
        queue.async(group: results) {
            second.signal()
            if first.wait(timeout: .now() + rendezvousTimeout) == .success { met.increment() }
        }
        results.wait()
        #expect(met.load() == 2)
    }

    /// Separate serial queues run concurrently with each other.
    @Test func separateSerialQueuesRunConcurrently() {
        let a = WorkQueue(label: "a"), b = WorkQueue(label: "b")
        let fromA = CountingSemaphore(value: 0), fromB = CountingSemaphore(value: 0)
        let group = WorkGroup()
        let met = AtomicCounter()
        a.async(group: group) {
            fromA.signal()
            if fromB.wait(timeout: .now() + rendezvousTimeout) == .success { met.increment() }
        }
        b.async(group: group) {
            fromB.signal()
            if fromA.wait(timeout: .now() + rendezvousTimeout) == .success { met.increment() }
        }
        group.wait()
        #expect(met.load() == 2)
    }

    /// One object per priority, the same on every call.
    @Test func globalQueuesAreSingletons() {
        #expect(WorkQueue.global() === WorkQueue.global(.default))
        let all = WorkQueue.Priority.allCases.map { WorkQueue.global($0) }
        #expect(Set(all.map(ObjectIdentifier.init)).count == 4)
        for priority in WorkQueue.Priority.allCases {
            let queue = WorkQueue.global(priority)
            #expect(queue === WorkQueue.global(priority))
            #expect(queue.isConcurrent)
            #expect(!queue.label.isEmpty)
        }
        #expect(!WorkQueue.main.isConcurrent)
        #expect(WorkQueue.main === WorkQueue.main)
    }

    /// Suspend is ignored on global queues.
    @Test func suspendingAGlobalQueueHasNoEffect() {
        let global = WorkQueue.global(.low)
        global.suspend()
        let ran = CountingSemaphore(value: 0)
        global.async { ran.signal() }
        #expect(ran.wait(timeout: .now() + rendezvousTimeout) == .success)
        global.resume()  // also ignored: not an over-resume
    }

    // MARK: - Barriers

    /// A barrier starts after every earlier reader has ended, runs alone, and
    /// every later reader starts after it.
    @Test func barrierRunsAloneBetweenReaders() {
        let queue = WorkQueue(label: "rw", attributes: .concurrent)
        let clock = AtomicCounter()  // a logical clock: event order
        let starts = (0..<21).map { _ in AtomicCounter() }
        let ends = (0..<21).map { _ in AtomicCounter() }
        let meter = OverlapMeter()
        let barrierSawOthers = AtomicCounter(-1)
        let group = WorkGroup()
        func reader(_ index: Int) {
            queue.async(group: group) {
                meter.enter()
                starts[index].store(clock.increment())
                sleepMilliseconds(1)
                ends[index].store(clock.increment())
                meter.leave()
            }
        }
        for index in 0..<10 { reader(index) }
        group.enter()
        queue.asyncBarrier {
            barrierSawOthers.store(meter.current)
            starts[10].store(clock.increment())
            sleepMilliseconds(2)
            ends[10].store(clock.increment())
            group.leave()
        }
        for index in 11..<21 { reader(index) }
        group.wait()

        #expect(barrierSawOthers.load() == 0)
        let barrierStart = starts[10].load(), barrierEnd = ends[10].load()
        #expect((0..<10).allSatisfy { ends[$0].load() < barrierStart })
        #expect((11..<21).allSatisfy { starts[$0].load() > barrierEnd })
    }

    /// A dictionary isolated by a queue, serial and reader-writer variants.
    @Test(arguments: [false, true])
    func isolationQueueDictionary(readerWriter: Bool) {
        let counts = Counts(readerWriter: readerWriter)
        counts.set(3, for: "a")
        counts.set(5, for: "b")
        counts.set(0, for: "b")
        #expect(counts.count(for: "a") == 3)
        #expect(counts.count(for: "b") == 0)
        #expect(counts.count(for: "zzz") == 0)

        // Read-your-writes from many threads at once, each on its own key.
        let mismatches = AtomicCounter()
        onThreads(4) { thread in
            for value in 1...500 {
                counts.set(value, for: "t\(thread)")
                if counts.count(for: "t\(thread)") != value { mismatches.increment() }
                _ = counts.count(for: "a")
            }
        }
        #expect(mismatches.load() == 0)
        #expect((0..<4).allSatisfy { counts.count(for: "t\($0)") == 500 })
    }

    // MARK: - sync

    /// sync returns values, mutates captures, waits.
    @Test func syncReturnsValuesAndWaits() {
        let queue = WorkQueue(label: "sync")
        #expect(queue.sync { 6 * 7 } == 42)
        var local = 0
        queue.sync { local = 42 }
        #expect(local == 42)

        let start = ContinuousClock.now
        var flag = false
        queue.sync {
            sleepMilliseconds(50)
            flag = true
        }
        #expect(flag)
        #expect(millisecondsSince(start) >= 49)

        let concurrent = WorkQueue(label: "sync.concurrent", attributes: .concurrent)
        #expect(concurrent.sync { "value" } == "value")
        #expect(concurrent.syncBarrier { [1, 2, 3] } == [1, 2, 3])
        #expect(WorkQueue.global().sync { 7 } == 7)
    }

    @Test func syncRethrowsTheClosuresError() {
        let queue = WorkQueue(label: "sync.throws")
        let concurrent = WorkQueue(label: "sync.throws.concurrent", attributes: .concurrent)
        #expect(throws: TestError(code: 1)) {
            try queue.sync { () throws -> Int in throw TestError(code: 1) }
        }
        #expect(throws: TestError(code: 2)) {
            try concurrent.syncBarrier { () throws(TestError) -> Void in throw TestError(code: 2) }
        }
        // Typed: the error comes back as a TestError, no cast needed.
        do {
            _ = try queue.sync { () throws(TestError) -> Int in throw TestError(code: 3) }
        } catch {
            #expect(error.code == 3)
        }
        // The queue still works afterwards.
        #expect(queue.sync { 1 } == 1)
    }

    /// async then sync: the sync closure runs after the async one, and both
    /// are done when sync returns.
    @Test func asyncThenSyncOrdering() {
        let queue = WorkQueue(label: "com.example.MyCustomQueue")
        let log = EventLog()
        queue.async { log.log("Do some work here.") }
        log.log("The first block may or may not have run.")
        queue.sync { log.log("Do some more work here.") }
        log.log("Both blocks have completed.")

        let lines = log.lines
        #expect(lines.count == 4)
        #expect(Set(lines) == ["Do some work here.", "The first block may or may not have run.",
                               "Do some more work here.", "Both blocks have completed."])
        let position = { (line: String) in lines.firstIndex(of: line) ?? -1 }
        #expect(position("Do some work here.") < position("Do some more work here."))
        #expect(position("Do some more work here.") < position("Both blocks have completed."))
        #expect(position("The first block may or may not have run.") < position("Do some more work here."))
    }

    /// async from a queue to itself never deadlocks.
    @Test func nestedAsyncOnTheSameSerialQueue() {
        let queue = WorkQueue(label: "nested")
        let done = CountingSemaphore(value: 0)
        let calls = AtomicCounter()
        queue.async {
            queue.async {
                calls.increment()
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(calls.load() == 1)
    }

    /// The closure runs once and is released after it ran.
    @Test func asyncReleasesTheClosureAfterItRuns() {
        let queue = WorkQueue(label: "release")
        let released = CountingSemaphore(value: 0)
        let runs = AtomicCounter()
        do {
            let probe = DeinitProbe { released.signal() }
            queue.async {
                withExtendedLifetime(probe) {}
                runs.increment()
            }
        }
        #expect(released.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(runs.load() == 1)
    }

    /// Submissions from many threads; each producer's order kept.
    @Test func submissionFromManyThreadsKeepsEachProducersOrder() {
        let queue = WorkQueue(label: "producers")
        let producers = 4, perProducer = 5000
        let seen = UnsafeBox([Int](repeating: -1, count: producers))
        let outOfOrder = UnsafeBox(0)
        let total = UnsafeBox(0)
        onThreads(producers) { producer in
            for sequence in 0..<perProducer {
                queue.async {
                    if seen.value[producer] != sequence - 1 { outOfOrder.value += 1 }
                    seen.value[producer] = sequence
                    total.value += 1
                }
            }
        }
        queue.sync {}
        #expect(total.value == producers * perProducer)
        #expect(outOfOrder.value == 0)
    }

    // MARK: - Targets

    /// A serial target serialises a concurrent queue.
    @Test func serialTargetSerialisesAConcurrentQueue() {
        let serial = WorkQueue(label: "target.serial")
        let concurrent = WorkQueue(label: "target.concurrent", attributes: .concurrent, target: serial)
        let meter = OverlapMeter()
        let group = WorkGroup()
        for _ in 0..<30 {
            concurrent.async(group: group) {
                meter.enter()
                sleepMilliseconds(1)
                meter.leave()
            }
        }
        group.wait()
        #expect(meter.maximum == 1)
    }

    /// Foo targeting Bar shares Bar's isolation.
    @Test func targetingSharesIsolation() {
        let bar = WorkQueue(label: "Bar.isolation")
        let foo = WorkQueue(label: "Foo.isolation", target: bar)
        let counter = UnsafeBox(0)  // plain int: only the queues protect it
        for _ in 0..<5000 {
            foo.async { counter.value += 1 }
            bar.async { counter.value += 1 }
        }
        foo.sync {}
        bar.sync {}
        #expect(counter.value == 10_000)
    }

    /// setTarget on an inactive queue, then activate: the work runs on the
    /// new target.
    @Test func setTargetBeforeActivation() {
        let parent = WorkQueue(label: "parent")
        let key = SpecificKey<String>()
        parent.setSpecific(key, value: "parent")
        let child = WorkQueue(label: "child", attributes: .initiallyInactive)
        child.setTarget(parent)
        child.activate()
        #expect(child.sync { WorkQueue.getSpecific(key) } == "parent")
        child.setTarget(nil)
        #expect(child.sync { WorkQueue.getSpecific(key) } == nil)
    }

    // MARK: - Suspend, resume, activate

    /// Suspension is counted and takes effect between closures; a running
    /// closure is not interrupted.
    @Test func suspendAndResumeAreCounted() {
        let queue = WorkQueue(label: "suspend")
        let log = EventLog()
        let started = CountingSemaphore(value: 0), release = CountingSemaphore(value: 0), finished = CountingSemaphore(value: 0)
        queue.async {
            started.signal()
            _ = release.wait(timeout: .now() + rendezvousTimeout)
            log.log("A")
            finished.signal()
        }
        _ = started.wait(timeout: .now() + rendezvousTimeout)
        queue.suspend()
        queue.suspend()
        queue.async { log.log("B") }
        queue.async { log.log("C") }
        release.signal()
        _ = finished.wait(timeout: .now() + rendezvousTimeout)  // A was not interrupted
        sleepMilliseconds(20)
        #expect(log.lines == ["A"])
        queue.resume()
        sleepMilliseconds(20)
        #expect(log.lines == ["A"])  // one suspension left
        queue.resume()
        queue.sync {}
        #expect(log.lines == ["A", "B", "C"])
    }

    @Test(arguments: [WorkQueue.Attributes.initiallyInactive, [.initiallyInactive, .concurrent]])
    func initiallyInactiveQueueWaitsForActivate(attributes: WorkQueue.Attributes) {
        let queue = WorkQueue(label: "inactive", attributes: attributes)
        #expect(queue.isConcurrent == attributes.contains(.concurrent))
        let ran = AtomicCounter()
        queue.async { ran.increment() }
        sleepMilliseconds(20)
        #expect(ran.load() == 0)
        queue.activate()
        queue.activate()  // a second activate does nothing
        queue.syncBarrier {}
        #expect(ran.load() == 1)
    }

    // MARK: - Labels, specific keys, preconditions

    /// Labels, and the current queue's label.
    @Test func labelsAndCurrentLabel() {
        let queue = WorkQueue(label: "com.example.MyQueue")
        let inner = WorkQueue(label: "com.example.Inner")
        #expect(queue.label == "com.example.MyQueue")
        #expect(WorkQueue(label: "").label == "")
        #expect(queue.description == "WorkQueue(label: \"com.example.MyQueue\", serial)")

        let labels = queue.sync { () -> [String] in
            let outer = WorkQueue.currentLabel
            let nested = inner.sync { WorkQueue.currentLabel }
            return [outer, nested, WorkQueue.currentLabel]
        }
        #expect(labels == ["com.example.MyQueue", "com.example.Inner", "com.example.MyQueue"])
        #expect(WorkQueue.currentLabel == WorkQueue.global().label)  // outside queue work

        let fromAsync = CountingSemaphore(value: 0)
        let seen = UnsafeBox("")
        queue.async {
            seen.value = WorkQueue.currentLabel
            fromAsync.signal()
        }
        _ = fromAsync.wait(timeout: .now() + rendezvousTimeout)
        #expect(seen.value == "com.example.MyQueue")
    }

    /// Specific values: per queue, through the target chain, typed, released.
    @Test func specificKeysFollowTheTargetChain() {
        let root = WorkQueue(label: "root")
        let middle = WorkQueue(label: "middle", target: root)
        let leaf = WorkQueue(label: "leaf", target: middle)
        let name = SpecificKey<String>()
        let otherName = SpecificKey<String>()
        let number = SpecificKey<Int>()

        root.setSpecific(name, value: "root")
        root.setSpecific(number, value: 1)
        middle.setSpecific(number, value: 2)

        #expect(root.getSpecific(name) == "root")
        #expect(leaf.getSpecific(name) == nil)  // the instance form: the queue itself only
        #expect(root.getSpecific(otherName) == nil)
        #expect(WorkQueue.getSpecific(name) == nil)  // outside queue work

        let fromLeaf = leaf.sync { (WorkQueue.getSpecific(name), WorkQueue.getSpecific(number)) }
        #expect(fromLeaf.0 == "root")
        #expect(fromLeaf.1 == 2)  // the nearest queue along the chain wins

        middle.setSpecific(number, value: nil)
        #expect(leaf.sync { WorkQueue.getSpecific(number) } == 1)

        // Global queues keep no values.
        WorkQueue.global().setSpecific(name, value: "global")
        #expect(WorkQueue.global().getSpecific(name) == nil)
    }

    @Test func replacedSpecificValuesAreReleased() {
        let queue = WorkQueue(label: "specific.release")
        let key = SpecificKey<DeinitProbe>()
        let released = AtomicCounter()
        queue.setSpecific(key, value: DeinitProbe { released.increment() })
        queue.setSpecific(key, value: DeinitProbe { released.increment() })
        #expect(released.load() == 1)
        queue.setSpecific(key, value: nil)
        #expect(released.load() == 2)
        #expect(queue.getSpecific(key) == nil)
    }

    @Test func preconditionsHoldWhereTheyShould() {
        let queue = WorkQueue(label: "precondition")
        let other = WorkQueue(label: "precondition.other")
        let concurrent = WorkQueue(label: "precondition.concurrent", attributes: .concurrent)
        let child = WorkQueue(label: "precondition.child", target: queue)
        WorkQueue.precondition(.notOnQueue(queue))
        queue.sync {
            WorkQueue.precondition(.onQueue(queue))
            WorkQueue.precondition(.onQueueAsBarrier(queue))
            WorkQueue.precondition(.notOnQueue(other))
        }
        child.sync {
            WorkQueue.precondition(.onQueue(queue))  // through the target chain
            WorkQueue.precondition(.onQueue(child))
        }
        concurrent.sync { WorkQueue.precondition(.onQueue(concurrent)) }
        concurrent.syncBarrier { WorkQueue.precondition(.onQueueAsBarrier(concurrent)) }
        let checked = CountingSemaphore(value: 0)
        queue.async {
            WorkQueue.precondition(.onQueue(queue))
            checked.signal()
        }
        #expect(checked.wait(timeout: .now() + rendezvousTimeout) == .success)
    }

    // MARK: - concurrentPerform

    /// Every index once, returns when all are done.
    @Test func concurrentPerformVisitsEveryIndexOnce() {
        let hits = UnsafeMutableBufferPointer<Int>.allocate(capacity: 1000)
        hits.initialize(repeating: 0)
        defer { hits.deallocate() }
        let sum = AtomicCounter()
        nonisolated(unsafe) let slots = hits
        WorkQueue.concurrentPerform(iterations: 1000) { index in
            sum.add(Int64(index))
            slots[index] += 1
        }
        #expect(sum.load() == 499_500)
        #expect(hits.allSatisfy { $0 == 1 })

        WorkQueue.concurrentPerform(iterations: 0) { _ in Issue.record("ran with 0 iterations") }

        let concurrent = WorkQueue(label: "apply.concurrent", attributes: .concurrent)
        let count = AtomicCounter()
        concurrent.concurrentPerform(iterations: 100) { _ in count.increment() }
        #expect(count.load() == 100)
    }

    /// On a serial queue, in order, one at a time.
    @Test func concurrentPerformOnASerialQueueRunsInOrder() {
        let queue = WorkQueue(label: "apply.serial")
        let order = UnsafeBox<[Int]>([])
        let meter = OverlapMeter()
        queue.concurrentPerform(iterations: 200) { index in
            meter.enter()
            order.value.append(index)
            meter.leave()
        }
        #expect(order.value == Array(0..<200))
        #expect(meter.maximum == 1)
    }

    /// Large counts run in units of up to 16 consecutive indices per C
    /// call: every index still runs exactly once, including the ragged last
    /// unit, on every kind of queue; a serial queue still sees them in order.
    @Test(arguments: [2_048, 16_383, 100_003, 1_000_000])
    func concurrentPerformLargeCountsVisitEveryIndexOnce(iterations: Int) {
        let hits = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: iterations)
        hits.initialize(repeating: 0)
        defer { hits.deallocate() }
        nonisolated(unsafe) let slots = hits
        let sum = AtomicCounter()
        let expected = Int64(iterations) * Int64(iterations - 1) / 2

        WorkQueue.concurrentPerform(iterations: iterations) { index in
            sum.add(Int64(index), ordering: .relaxed)
            slots[index] &+= 1
        }
        #expect(sum.load() == expected)
        #expect(hits.allSatisfy { $0 == 1 })

        let concurrent = WorkQueue(label: "apply.large.concurrent", attributes: .concurrent)
        sum.store(0)
        concurrent.concurrentPerform(iterations: iterations) { index in
            sum.add(Int64(index), ordering: .relaxed)
            slots[index] &+= 1
        }
        #expect(sum.load() == expected)
        #expect(hits.allSatisfy { $0 == 2 })

        let serial = WorkQueue(label: "apply.large.serial")
        let next = UnsafeBox(0)
        let outOfOrder = UnsafeBox(0)
        serial.concurrentPerform(iterations: iterations) { index in
            if index != next.value { outOfOrder.value += 1 }
            next.value = index + 1
        }
        #expect(outOfOrder.value == 0)
        #expect(next.value == iterations)
    }

    @Test func nestedConcurrentPerformCompletes() {
        let total = AtomicCounter()
        WorkQueue.concurrentPerform(iterations: 8) { _ in
            WorkQueue.concurrentPerform(iterations: 8) { _ in total.increment() }
        }
        #expect(total.load() == 64)
    }

    /// Striding: 100 iterations with stride 4 are 25 calls.
    @Test func stridedConcurrentPerform() {
        let count = 100, stride = 4
        let calls = AtomicCounter()
        let covered = (0..<count).map { _ in AtomicCounter() }
        WorkQueue.concurrentPerform(iterations: count / stride) { block in
            calls.increment()
            for index in block * stride..<(block + 1) * stride { covered[index].increment() }
        }
        for index in count - count % stride..<count { covered[index].increment() }
        #expect(calls.load() == 25)
        #expect(covered.allSatisfy { $0.load() == 1 })
    }

    // MARK: - concurrentPerform(range:)

    /// Non-empty, disjoint ranges inside `range` that cover every index once,
    /// on the pool, a concurrent queue, and from a lower bound other than 0.
    @Test(arguments: [0..<1, 0..<1_000, 100..<100_103, -500..<500])
    func concurrentPerformRangeCoversEveryIndexOnce(range: Range<Int>) {
        let hits = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: range.count)
        hits.initialize(repeating: 0)
        defer { hits.deallocate() }
        nonisolated(unsafe) let slots = hits
        let bad = AtomicCounter()
        let calls = AtomicCounter()
        let check: @Sendable (Range<Int>) -> Void = { part in
            calls.increment()
            if part.isEmpty || part.lowerBound < range.lowerBound || part.upperBound > range.upperBound {
                bad.increment()
                return
            }
            for index in part { slots[index - range.lowerBound] &+= 1 }
        }
        WorkQueue.concurrentPerform(range: range, check)
        #expect(bad.load() == 0)
        #expect(hits.allSatisfy { $0 == 1 })
        #expect(calls.load() >= 1 && calls.load() <= Int64(range.count))

        let concurrent = WorkQueue(label: "range.concurrent", attributes: .concurrent)
        concurrent.concurrentPerform(range: range, check)
        #expect(bad.load() == 0)
        #expect(hits.allSatisfy { $0 == 2 })
    }

    /// An empty range calls nothing.
    @Test func concurrentPerformEmptyRangeCallsNothing() {
        WorkQueue.concurrentPerform(range: 0..<0) { _ in Issue.record("called for 0..<0") }
        WorkQueue.concurrentPerform(range: 7..<7) { _ in Issue.record("called for 7..<7") }
    }

    /// A cheap body over many indices: a sum over large ranges, far fewer
    /// calls than indices.
    @Test func concurrentPerformRangeSumsACheapBody() {
        let sum = AtomicCounter()
        let calls = AtomicCounter()
        let count = 4_000_000
        WorkQueue.concurrentPerform(range: 0..<count) { range in
            var partial: Int64 = 0
            for index in range { partial &+= Int64(index) }
            sum.add(partial, ordering: .relaxed)
            calls.increment()
        }
        #expect(sum.load() == Int64(count) * Int64(count - 1) / 2)
        #expect(calls.load() < Int64(count / 100))
    }

    /// On a serial queue: one call with the whole range, on that queue.
    @Test func concurrentPerformRangeOnASerialQueueIsOneCall() {
        let queue = WorkQueue(label: "range.serial")
        let seen = UnsafeBox<[Range<Int>]>([])
        let onQueue = UnsafeBox(true)
        queue.concurrentPerform(range: 10..<510) { range in
            seen.value.append(range)
            if WorkQueue.currentLabel != "range.serial" { onQueue.value = false }
        }
        #expect(seen.value == [10..<510])
        #expect(onQueue.value)
    }

    /// A nested call runs inline: one call for its whole range.
    @Test func nestedConcurrentPerformRangeRunsInline() {
        let inner = AtomicCounter()
        let whole = AtomicCounter()
        WorkQueue.concurrentPerform(range: 0..<16) { outer in
            for _ in outer {
                WorkQueue.concurrentPerform(range: 0..<100) { range in
                    inner.increment()
                    if range == 0..<100 { whole.increment() }
                }
            }
        }
        #expect(inner.load() == 16)
        #expect(whole.load() == 16)
    }
}

/// A dictionary isolated by a queue: a serial queue, or a concurrent queue
/// with barrier writes.
private final class Counts: Sendable {
    private let queue: WorkQueue
    private let readerWriter: Bool
    private let counts = UnsafeBox<[String: Int]>([:])  // guarded by `queue`

    init(readerWriter: Bool) {
        self.readerWriter = readerWriter
        queue = WorkQueue(label: "Counts.isolation", attributes: readerWriter ? .concurrent : [])
    }

    func set(_ count: Int, for key: String) {
        let write: @Sendable () -> Void = { [counts] in
            if count == 0 { counts.value.removeValue(forKey: key) } else { counts.value[key] = count }
        }
        if readerWriter { queue.asyncBarrier(write) } else { queue.async(write) }
    }

    func count(for key: String) -> Int {
        queue.sync { counts.value[key] ?? 0 }
    }
}
