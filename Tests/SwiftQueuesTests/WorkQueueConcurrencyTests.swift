// WorkQueue and Swift concurrency: run, actors on a serial queue,
// assumeIsolated, task executor preference.

import Testing
import SwiftQueues

/// An actor whose executor is a serial WorkQueue.
actor Ledger {
    let queue: WorkQueue
    let key = SpecificKey<String>()
    private(set) var balance = 0

    init(label: String) {
        queue = WorkQueue(label: label)
        queue.setSpecific(key, value: label)
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        queue.asUnownedSerialExecutor()
    }

    func deposit(_ amount: Int) -> (label: String, specific: String?) {
        balance += amount
        return (WorkQueue.currentLabel, WorkQueue.getSpecific(key))
    }

    /// Called from plain queue work through assumeIsolated.
    func depositSynchronously(_ amount: Int) {
        balance += amount
    }
}

/// A nonisolated async function: where it runs depends on the task's
/// executor preference.
nonisolated func labelOfNonisolatedCode() async -> String {
    WorkQueue.currentLabel
}

nonisolated func specificInNonisolatedCode<Value>(_ key: SpecificKey<Value>) async -> Value? {
    WorkQueue.getSpecific(key)
}

@Suite struct WorkQueueConcurrencyTests {
    @Test func runReturnsTheResultToTheAwaitingTask() async {
        let queue = WorkQueue(label: "run.serial")
        let label = await queue.run { WorkQueue.currentLabel }
        #expect(label == "run.serial")
        let sum = await WorkQueue.global().run { (1...100).reduce(0, +) }
        #expect(sum == 5050)
    }

    @Test func runRethrowsTheClosuresError() async {
        let queue = WorkQueue(label: "run.throws")
        await #expect(throws: TestError(code: 7)) {
            try await queue.run { () throws(TestError) -> Int in throw TestError(code: 7) }
        }
        do {
            _ = try await queue.run { () throws(TestError) -> Int in throw TestError(code: 8) }
        } catch {
            #expect(error.code == 8)  // typed: no cast
        }
    }

    @Test func runCallsOnASerialQueueAreSerialised() async {
        let queue = WorkQueue(label: "run.many")
        let meter = OverlapMeter()
        let total = await withTaskGroup(of: Int.self) { tasks in
            for index in 0..<50 {
                tasks.addTask {
                    await queue.run {
                        meter.enter()
                        defer { meter.leave() }
                        return index
                    }
                }
            }
            return await tasks.reduce(0, +)
        }
        #expect(total == 1225)
        #expect(meter.maximum == 1)
    }

    /// An actor on a serial queue: its methods run on the queue.
    @Test func actorMethodsRunOnTheirSerialQueue() async {
        let ledger = Ledger(label: "ledger.queue")
        let where_ = await ledger.deposit(10)
        #expect(where_.label == "ledger.queue")
        #expect(where_.specific == "ledger.queue")

        await withTaskGroup(of: Void.self) { tasks in
            for _ in 0..<100 {
                tasks.addTask { _ = await ledger.deposit(1) }
            }
        }
        #expect(await ledger.balance == 110)
    }

    /// Plain queue work can enter the actor synchronously: it holds the
    /// actor's queue, so `assumeIsolated` passes (checkIsolated).
    @Test func assumeIsolatedWorksFromQueueWork() async {
        let ledger = Ledger(label: "ledger.assume")
        let group = WorkGroup()
        for _ in 0..<50 {
            ledger.queue.async(group: group) {
                ledger.assumeIsolated { $0.depositSynchronously(2) }
                ledger.preconditionIsolated()
            }
        }
        // Interleave actor calls with the queue work: both are serialised.
        for _ in 0..<50 { _ = await ledger.deposit(1) }
        await group.wait()
        #expect(await ledger.balance == 150)

        // Also through a queue that targets the actor's queue.
        let child = WorkQueue(label: "ledger.child", target: ledger.queue)
        child.sync { ledger.assumeIsolated { $0.depositSynchronously(5) } }
        #expect(await ledger.balance == 155)
    }

    /// withTaskExecutorPreference: child tasks run on SwiftQueues' workers.
    @Test func taskExecutorPreferenceRunsChildTasksOnTheQueue() async {
        let global = WorkQueue.global(.high)
        let labels = await withTaskExecutorPreference(global) {
            await withTaskGroup(of: String.self) { tasks in
                for _ in 0..<8 {
                    tasks.addTask { WorkQueue.currentLabel }
                }
                return await tasks.reduce(into: [String]()) { $0.append($1) }
            }
        }
        #expect(labels.count == 8)
        #expect(labels.allSatisfy { $0 == global.label })

        // A custom concurrent queue, identified by a queue-specific value.
        let pool = WorkQueue(label: "task.pool", attributes: .concurrent)
        let key = SpecificKey<Int>()
        pool.setSpecific(key, value: 99)
        let values = await withTaskExecutorPreference(pool) {
            async let first = labelOfNonisolatedCode()
            async let second = specificInNonisolatedCode(key)
            return await (first, second)
        }
        #expect(values.0 == "task.pool")
        #expect(values.1 == 99)
    }

    /// Unstructured tasks do not inherit a preference (SE-0417); they take
    /// one explicitly.
    @Test func unstructuredTaskWithExecutorPreference() async {
        let queue = WorkQueue(label: "task.serial")
        let label = await Task(executorPreference: queue) {
            await labelOfNonisolatedCode()
        }.value
        #expect(label == "task.serial")
    }

    /// A task preferring the same serial queue an actor runs on.
    @Test func actorAndTaskPreferenceOnTheSameSerialQueue() async {
        let ledger = Ledger(label: "ledger.shared")
        let result = await withTaskExecutorPreference(ledger.queue) {
            let outside = await labelOfNonisolatedCode()
            let inside = await ledger.deposit(3)
            return (outside, inside.label)
        }
        #expect(result.0 == "ledger.shared")
        #expect(result.1 == "ledger.shared")
        #expect(await ledger.balance == 3)
    }
}
