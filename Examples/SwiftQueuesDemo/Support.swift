// Helpers shared by the tour: a deadline-bounded wait and raw threads.

import SwiftQueues

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Prints a section header.
func section(_ title: String) {
    print("\n== \(title)")
}

/// Waits for `semaphore` for at most `seconds`; on a timeout the demo
/// reports what it was waiting for and exits with status 1.
func waitOrExit(_ semaphore: CountingSemaphore, _ what: String, seconds: Int = 2) {
    if semaphore.wait(timeout: .now() + .seconds(seconds)) == .timedOut {
        print("timed out waiting for \(what)")
        exit(1)
    }
}

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
