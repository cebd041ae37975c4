// The lock-free building blocks under the queues, and what they cost.

import SwiftQueues

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A plain integer that only the spin lock protects.
final class Tally: @unchecked Sendable {
    var value = 0
}

func primitivesTour() {
    let threadCount = 4

    // AtomicCounter: four threads, 100,000 increments each.
    section("AtomicCounter")
    let hits = AtomicCounter()
    let statistics = AtomicCounter()
    onThreads(threadCount) { _ in
        for _ in 0..<100_000 {
            hits.increment()
            statistics.increment(ordering: .relaxed)
        }
    }
    print("barrier increments: \(hits.load()) (expected \(threadCount * 100_000))")
    print("relaxed increments: \(statistics.load()) (expected \(threadCount * 100_000))")
    let flags = AtomicCounter()
    let wasSet = flags.testAndSetBit(3)
    print("bit 3 was set: \(wasSet), flags now \(flags.load()); or 0b101 -> \(flags.or(0b101))")
    let slot = AtomicCounter()
    print("compareExchange 0 -> 7: \(slot.compareExchange(expected: 0, desired: 7)), "
        + "again: \(slot.compareExchange(expected: 0, desired: 8)), value \(slot.load())")

    // SpinLock: a plain integer guarded across four threads.
    section("SpinLock")
    let lock = SpinLock()
    let tally = Tally()
    onThreads(threadCount) { _ in
        for _ in 0..<50_000 {
            lock.withLock { tally.value += 1 }
        }
    }
    print("guarded total: \(lock.withLock { tally.value }) (expected \(threadCount * 50_000))")
    let otherThreadGotIt = AtomicCounter()
    lock.lock()
    onThreads(1) { _ in
        if lock.tryLock() {  // must fail: the main thread holds the lock
            otherThreadGotIt.store(1)
            lock.unlock()
        }
    }
    lock.unlock()
    print("tryLock from another thread while held: "
        + (otherThreadGotIt.load() == 0 ? "failed, as it must" : "succeeded (bug)"))

    // LockFreeStack and LockFreeQueue.
    section("LockFreeStack / LockFreeQueue")
    let stack = LockFreeStack<String>()
    let queue = LockFreeQueue<String>()
    for word in ["first", "second", "third"] {
        stack.push(word)
        queue.push(word)
    }
    var lifoOrder: [String] = []
    while let word = stack.pop() { lifoOrder.append(word) }
    var fifoOrder: [String] = []
    while let word = queue.pop() { fifoOrder.append(word) }
    print("LIFO pops: \(lifoOrder.joined(separator: ", "))")
    print("FIFO pops: \(fifoOrder.joined(separator: ", "))")

    let work = LockFreeQueue<Int>()
    let consumed = AtomicCounter()
    let sum = AtomicCounter()
    let perProducer = 10_000
    onThreads(threadCount * 2) { index in
        if index < threadCount {
            for n in 1...perProducer { work.push(n) }
        } else {
            while consumed.load() < Int64(threadCount * perProducer) {
                if let n = work.pop() {
                    sum.add(Int64(n))
                    consumed.increment()
                } else {
                    sched_yield()
                }
            }
        }
    }
    let expectedSum = threadCount * perProducer * (perProducer + 1) / 2
    print("\(threadCount) producers, \(threadCount) consumers: \(consumed.load()) items, "
        + "sum \(sum.load()) (expected \(expectedSum))")

    // benchmark: mean nanoseconds per call.
    section("benchmark")
    let counter = AtomicCounter()
    let barrierNs = benchmark(iterations: 1_000_000) { counter.increment() }
    let relaxedNs = benchmark(iterations: 1_000_000) { counter.increment(ordering: .relaxed) }
    let lockNs = benchmark(iterations: 1_000_000) { lock.lock(); lock.unlock() }
    print("AtomicCounter.increment(): \(barrierNs) ns")
    print("AtomicCounter.increment(ordering: .relaxed): \(relaxedNs) ns")
    print("SpinLock lock + unlock: \(lockNs) ns")
}
