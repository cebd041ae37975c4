// Misuse stops the process with one line naming the call and the queue.
// Each case runs in a child process (Swift Testing exit tests).

import Testing
import SwiftQueues

@Suite struct WorkQueueCrashTests {
    @Test func failedPreconditionNamesTheQueue() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = WorkQueue(label: "com.example.crash")
            WorkQueue.precondition(.onQueue(queue))
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("sq_assert_queue: not running on queue 'com.example.crash'"))
    }

    @Test func notOnQueuePreconditionFailsOnTheQueue() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = WorkQueue(label: "com.example.here")
            queue.sync { WorkQueue.precondition(.notOnQueue(queue)) }
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("com.example.here"))
    }

    /// sync onto the serial queue the thread runs.
    @Test func syncOntoTheCurrentSerialQueueIsReported() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = WorkQueue(label: "com.example.db")
            queue.sync { queue.sync {} }
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("deadlock"))
        #expect(message.contains("com.example.db"))
    }

    @Test func aConcurrentQueueCannotIsolateAnActor() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = WorkQueue(label: "com.example.wide", attributes: .concurrent).asUnownedSerialExecutor()
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("SwiftQueues: WorkQueue.asUnownedSerialExecutor(): queue 'com.example.wide' is concurrent"))
    }

    @Test func drainingTheMainQueueOffTheMainThreadIsReported() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            // Test bodies do not run on the process's main thread.
            WorkQueue.drainMain()
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("sq_main_queue_drain"))
    }

    @Test func aSemaphoreDestroyedWithAUnitMissingIsReported() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let semaphore = CountingSemaphore(value: 1)
            _ = semaphore.wait(timeout: .distantFuture)  // taken, never given back
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("semaphore destroyed while in use"))
    }
}
