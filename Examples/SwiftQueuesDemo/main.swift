// SwiftQueuesDemo: each SwiftQueues primitive in action, in a second or two.
//
//     swift run SwiftQueuesDemo

import SwiftQueues

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs `body(i)` on `count` new threads and waits for them all.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    final class Job: Sendable {
        let index: Int
        let body: @Sendable (Int) -> Void
        init(_ index: Int, _ body: @escaping @Sendable (Int) -> Void) {
            self.index = index
            self.body = body
        }
    }
    var threads: [pthread_t] = []
    for index in 0..<count {
        var thread = pthread_t()
        let job = Unmanaged.passRetained(Job(index, body)).toOpaque()
        let rc = pthread_create(&thread, nil, { argument in
            let job = Unmanaged<Job>.fromOpaque(argument!).takeRetainedValue()
            job.body(job.index)
            return nil
        }, job)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        threads.append(thread)
    }
    for thread in threads {
        pthread_join(thread, nil)
    }
}

/// A plain integer that only the spin lock protects.
final class Tally: @unchecked Sendable {
    var value = 0
}

let threadCount = 4

// 1. OnceToken: eight threads race, one closure runs.
print("== OnceToken")
let setUp = OnceToken()
let executions = AtomicCounter()
onThreads(8) { _ in
    setUp.run { executions.increment() }
}
print("Executed \(executions.load()) time(s)")

// 2. AtomicCounter: four threads, 100,000 increments each.
print("== AtomicCounter")
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

// 3. SpinLock: a plain integer guarded across four threads.
print("== SpinLock")
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
    if lock.tryLock() {  // must fail: this thread holds the lock
        otherThreadGotIt.store(1)
        lock.unlock()
    }
}
lock.unlock()
print("tryLock from another thread while held: "
    + (otherThreadGotIt.load() == 0 ? "failed, as it must" : "succeeded (bug)"))

// 4. LockFreeStack and LockFreeQueue.
print("== LockFreeStack / LockFreeQueue")
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

// 5. benchmark: mean nanoseconds per call.
print("== benchmark")
let counter = AtomicCounter()
let barrierNs = benchmark(iterations: 1_000_000) { counter.increment() }
let relaxedNs = benchmark(iterations: 1_000_000) { counter.increment(ordering: .relaxed) }
let lockNs = benchmark(iterations: 1_000_000) { lock.lock(); lock.unlock() }
print("AtomicCounter.increment(): \(barrierNs) ns")
print("AtomicCounter.increment(ordering: .relaxed): \(relaxedNs) ns")
print("SpinLock lock + unlock: \(lockNs) ns")
