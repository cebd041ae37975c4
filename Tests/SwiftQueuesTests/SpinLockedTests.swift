import Testing
import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Compiles only if `value` is Sendable.
private func requireSendable<T: Sendable>(_ value: T) -> T { value }

/// A noncopyable value and result.
private struct Token: ~Copyable {
    let id: Int
}

private enum LedgerError: Error, Equatable {
    case overdrawn(Int)
}

@Suite struct SpinLockedTests {
    @Test func guardsItsValueAcrossFourThreads() {
        let counts = requireSendable(SpinLocked([Int: Int]()))
        onThreads(4) { thread in
            for _ in 0..<20_000 {
                counts.withLock { $0[thread, default: 0] += 1 }
            }
        }
        let snapshot = counts.withLock { $0 }
        #expect(snapshot == [0: 20_000, 1: 20_000, 2: 20_000, 3: 20_000])
    }

    @Test func typedThrowsKeepTheErrorTypeAndReleaseTheLock() throws {
        let balance = SpinLocked(10)
        func withdraw(_ amount: Int) throws(LedgerError) -> Int {
            try balance.withLock { (value: inout Int) throws(LedgerError) -> Int in
                guard value >= amount else { throw .overdrawn(value) }
                value -= amount
                return value
            }
        }
        #expect(try withdraw(4) == 6)
        do {
            _ = try withdraw(7)
            Issue.record("withdraw(7) should throw")
        } catch {
            // `error` is a LedgerError here, not `any Error`.
            #expect(error == .overdrawn(6))
        }
        // The throw released the lock and left the value alone.
        #expect(balance.withLockIfAvailable { $0 } == 6)
    }

    @Test func noncopyableValuesAndResults() {
        let next = SpinLocked(Token(id: 1))
        let token: Token = next.withLock { current in
            let taken = Token(id: current.id)
            current = Token(id: current.id + 1)
            return taken
        }
        #expect(token.id == 1)
        #expect(next.withLock { $0.id } == 2)
        let maybe: Token? = next.withLockIfAvailable { Token(id: $0.id * 10) }
        var id = 0
        if let got = consume maybe { id = got.id }
        #expect(id == 20)
    }

    @Test func withLockIfAvailableFailsWhileAnotherThreadHoldsIt() {
        let shared = SpinLocked(0)
        let held = AtomicCounter(0)
        let release = AtomicCounter(0)
        let attempt = UnsafeBox<Int?>(-1)
        onThreads(2) { thread in
            if thread == 0 {
                shared.withLock { value in
                    value = 5
                    held.store(1)
                    while release.load() == 0 { sched_yield() }
                }
            } else {
                while held.load() == 0 { sched_yield() }
                attempt.value = shared.withLockIfAvailable { $0 }
                release.store(1)
            }
        }
        #expect(attempt.value == .some(nil))  // busy: body not run
        #expect(shared.withLockIfAvailable { $0 } == 5)
    }

    @Test func nonSendableValuesStayInTheirIsolation() {
        final class Log { var lines: [String] = [] }
        let log = SpinLocked(Log())  // not Sendable, still usable locally
        log.withLock { $0.lines.append("one") }
        #expect(log.withLock { $0.lines } == ["one"])
    }
}
