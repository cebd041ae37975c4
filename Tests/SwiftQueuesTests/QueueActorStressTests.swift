// Actors on a serial WorkQueue under heavy concurrent use (10,000
// concurrent calls), `await queue.run` fanned in from 1,000 tasks, and an
// over-resume reported like the C API.

import Testing
import SwiftQueues

/// An actor whose executor is a serial WorkQueue tagged with a SpecificKey.
private actor QueueActorCounter {
    let queue: WorkQueue
    let key = SpecificKey<Int>()
    let tag: Int
    private(set) var count = 0
    private(set) var sum = 0
    private(set) var offQueueCalls = 0

    init(label: String, tag: Int) {
        self.tag = tag
        queue = WorkQueue(label: label)
        queue.setSpecific(key, value: tag)
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        queue.asUnownedSerialExecutor()
    }

    /// Records the call; returns the count after it, and whether it ran on
    /// this actor's queue.
    func record(_ value: Int) -> (count: Int, onQueue: Bool) {
        let onQueue = WorkQueue.getSpecific(key) == tag
        if !onQueue { offQueueCalls += 1 }
        // A read-modify-write split across two statements: overlapping
        // calls would lose updates.
        let before = count
        count = before + 1
        sum += value
        return (count, onQueue)
    }

    func snapshot() -> (count: Int, sum: Int, offQueueCalls: Int) {
        (count, sum, offQueueCalls)
    }
}

@Suite struct QueueActorStressTests {
    @Test func anActorOnASerialQueueTakesTenThousandConcurrentCalls() async {
        let calls = 10_000
        let counter = QueueActorCounter(label: "stress.actor", tag: 5)
        let results = await withTaskGroup(of: (count: Int, onQueue: Bool).self) { group in
            for i in 0..<calls {
                group.addTask { await counter.record(i) }
            }
            var results: [(count: Int, onQueue: Bool)] = []
            results.reserveCapacity(calls)
            for await result in group { results.append(result) }
            return results
        }
        #expect(results.count == calls)
        #expect(results.allSatisfy { $0.onQueue })
        // Every call saw a distinct count: 1...calls, each exactly once.
        #expect(Set(results.map(\.count)) == Set(1...calls))
        let state = await counter.snapshot()
        #expect(state.count == calls)
        #expect(state.sum == (0..<calls).reduce(0, +))
        #expect(state.offQueueCalls == 0)
        // Plain queue work is serialised with the actor's methods.
        let fromQueue = counter.queue.sync { WorkQueue.getSpecific(counter.key) }
        #expect(fromQueue == 5)
    }

    @Test func runFromAThousandConcurrentTasksReturnsEveryResult() async {
        let tasks = 1_000
        let queue = WorkQueue(label: "stress.run")
        let key = SpecificKey<String>()
        queue.setSpecific(key, value: "stress.run")
        let results = await withTaskGroup(of: (Int, Int, String?).self) { group in
            for i in 0..<tasks {
                group.addTask {
                    let (value, specific) = await queue.run { (i * i, WorkQueue.getSpecific(key)) }
                    return (i, value, specific)
                }
            }
            var results: [(Int, Int, String?)] = []
            for await result in group { results.append(result) }
            return results
        }
        #expect(results.count == tasks)
        #expect(Set(results.map { $0.0 }) == Set(0..<tasks))
        #expect(results.allSatisfy { $0.1 == $0.0 * $0.0 })
        #expect(results.allSatisfy { $0.2 == "stress.run" })

        // The same through a global (concurrent) queue.
        let sums = await withTaskGroup(of: Int.self) { group in
            for i in 0..<tasks {
                group.addTask { await WorkQueue.global().run { i + 1 } }
            }
            var total = 0
            for await value in group { total += value }
            return total
        }
        #expect(sums == (1...tasks).reduce(0, +))
    }

    @Test func overResumeIsReportedLikeTheCAPI() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = WorkQueue(label: "stress.resume")
            queue.resume()
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("SwiftQueues: sq_resume: over-resume"))
        #expect(message.contains("stress.resume"))
        // One line, as from C.
        let lines = message.split(separator: "\n").filter { $0.contains("SwiftQueues:") }
        #expect(lines.count == 1)
    }
}
