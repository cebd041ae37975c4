// Helpers for the tests: real OS threads (joined with pthread_join, which
// ThreadSanitizer understands) and a start gate that makes them race.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftQueues

/// One thread's work: the closure and the index it is called with.
private final class ThreadJob: Sendable {
    let index: Int
    let body: @Sendable (Int) -> Void

    init(index: Int, body: @escaping @Sendable (Int) -> Void) {
        self.index = index
        self.body = body
    }
}

/// Calls `body(i)` for each `i` in `0..<count`, each on a new thread of its
/// own, and returns when every thread has finished.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    var threads: [pthread_t] = []
    threads.reserveCapacity(count)
    for index in 0..<count {
        let job = Unmanaged.passRetained(ThreadJob(index: index, body: body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { argument in
            let job = Unmanaged<ThreadJob>.fromOpaque(argument!).takeRetainedValue()
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

/// Holds `parties` threads until all have arrived, so they start their racy
/// part together. Waiters yield rather than spin (tests run on small, loaded
/// machines).
final class StartGate: Sendable {
    private let parties: Int64
    private let arrived = AtomicCounter()

    init(parties: Int) {
        self.parties = Int64(parties)
    }

    func arriveAndWait() {
        arrived.increment()
        while arrived.load() < parties {
            sched_yield()
        }
    }
}

/// A plain, unsynchronised value for tests that check some other primitive
/// provides the synchronisation.
final class UnsafeBox<Value>: @unchecked Sendable {
    var value: Value

    init(_ value: Value) {
        self.value = value
    }
}
