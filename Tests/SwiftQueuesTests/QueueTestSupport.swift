// Helpers for the queue, group, semaphore, work item and concurrency tests.
// Nothing here relies on timing for correctness: rendezvous use semaphores
// with generous timeouts, and timing checks are lower bounds only.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftQueues

/// A thread-safe list of log lines, in the order they were logged.
final class EventLog: Sendable {
    private let lock = SpinLock()
    private let storage = UnsafeBox<[String]>([])

    func log(_ line: String) {
        lock.withLock { storage.value.append(line) }
    }

    var lines: [String] {
        lock.withLock { storage.value }
    }

    /// The position of the first `line`, or nil.
    func index(of line: String) -> Int? {
        lines.firstIndex(of: line)
    }
}

/// Counts how many closures are inside a region at once, and the maximum.
final class OverlapMeter: Sendable {
    private let active = AtomicCounter()
    private let peak = AtomicCounter()

    func enter() {
        let now = active.increment()
        var seen = peak.load()
        while now > seen, !peak.compareExchange(expected: seen, desired: now) {
            seen = peak.load()
        }
    }

    func leave() {
        active.decrement()
    }

    var current: Int64 { active.load() }
    var maximum: Int64 { peak.load() }
}

/// An error with an identity, for rethrow tests.
struct TestError: Error, Equatable {
    let code: Int
}

/// Calls `onDeinit` when the last reference goes.
final class DeinitProbe: Sendable {
    private let onDeinit: @Sendable () -> Void

    init(_ onDeinit: @escaping @Sendable () -> Void) {
        self.onDeinit = onDeinit
    }

    deinit {
        onDeinit()
    }
}

/// Generous bound for rendezvous on a loaded 2-core machine: reaching it
/// means something is broken, not slow.
let rendezvousTimeout: Duration = .seconds(10)

/// Sleeps the calling thread for `milliseconds`.
func sleepMilliseconds(_ milliseconds: Int) {
    usleep(UInt32(milliseconds * 1000))
}

/// An identifier of the calling OS thread.
func currentThread() -> pthread_t {
    pthread_self()
}

/// Milliseconds elapsed since `start` on the continuous clock.
func millisecondsSince(_ start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    let (seconds, attoseconds) = elapsed.components
    return Double(seconds) * 1000 + Double(attoseconds) / 1e15
}
