// Every SwiftQueues type, used unqualified next to Foundation, Dispatch,
// Synchronization and the standard library: if any name collided, this file
// would not compile.
import Foundation
import Dispatch
import Synchronization
import Testing
import SwiftQueues

@Suite struct NameCollisionTests {
    @Test func everyTypeIsUsableUnqualified() {
        let counter: AtomicCounter = AtomicCounter(1)
        let ordering: AtomicCounter.Ordering = .relaxed
        counter.increment(ordering: ordering)

        let lock: SpinLock = SpinLock()
        _ = lock.withLock { counter.add(1) }

        let once: OnceToken = OnceToken()
        once.run { counter.add(10) }

        let stack: LockFreeStack<Int> = LockFreeStack<Int>()
        stack.push(1)
        let queue: LockFreeQueue<Int> = LockFreeQueue<Int>()
        queue.push(2)

        let ns: UInt64 = benchmark(iterations: 10) { _ = counter.load() }

        // The neighbours, in the same scope.
        let mutex = Mutex(0)
        mutex.withLock { $0 += 1 }
        let atomic = Atomic<Int>(0)
        atomic.add(1, ordering: .relaxed)
        let nsLock = NSLock()
        nsLock.withLock { _ = stack.pop() }
        DispatchQueue(label: "collision-test").sync { _ = queue.pop() }
        let duration: Duration = .seconds(1)

        #expect(counter.load() == 13)
        #expect(stack.isEmpty && queue.isEmpty)
        #expect(ns < 1_000_000_000)
        #expect(mutex.withLock { $0 } == 1)
        #expect(atomic.load(ordering: .relaxed) == 1)
        #expect(duration == .seconds(1))
    }
}
