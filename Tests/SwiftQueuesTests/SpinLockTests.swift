import Testing
import SwiftQueues

@Suite struct SpinLockTests {
    @Test func guardsANonAtomicCounterAcrossFourThreads() {
        let lock = SpinLock()
        let total = UnsafeBox(0)
        onThreads(4) { _ in
            for _ in 0..<50_000 {
                lock.withLock { total.value += 1 }
            }
        }
        #expect(lock.withLock { total.value } == 200_000)
    }

    @Test func lockAndUnlockGuardACounter() {
        let lock = SpinLock()
        let total = UnsafeBox(0)
        onThreads(4) { _ in
            for _ in 0..<10_000 {
                lock.lock()
                total.value += 2
                lock.unlock()
            }
        }
        lock.lock()
        #expect(total.value == 80_000)
        lock.unlock()
    }

    @Test func tryLockFailsWhileAnotherThreadHoldsIt() {
        let lock = SpinLock()
        let acquired = AtomicCounter(-1)

        lock.lock()
        onThreads(1) { _ in acquired.store(lock.tryLock() ? 1 : 0) }
        #expect(acquired.load() == 0)
        #expect(!lock.tryLock())  // not recursive either
        lock.unlock()

        onThreads(1) { _ in
            let got = lock.tryLock()
            acquired.store(got ? 1 : 0)
            if got { lock.unlock() }
        }
        #expect(acquired.load() == 1)
        #expect(lock.tryLock())
        lock.unlock()
    }

    @Test func withLockReturnsValuesAndReleasesOnThrow() {
        struct Failure: Error {}
        final class NotSendable { var items = [1, 2, 3] }

        let lock = SpinLock()
        let owner = NotSendable()
        let items = lock.withLock { owner.items }  // a non-Sendable capture and result
        #expect(items == [1, 2, 3])

        #expect(throws: Failure.self) {
            try lock.withLock { () throws(Failure) -> Int in throw Failure() }
        }
        #expect(lock.tryLock())  // released by the throw
        lock.unlock()
    }
}
