// WorkGroup: wait, timeouts, notify, nested group tasks, enter/leave.

import Testing
import SwiftQueues

@Suite struct WorkGroupTests {
    /// Wait for ten tasks.
    @Test func waitReturnsWhenEveryMemberHasFinished() {
        let group = WorkGroup()
        let results = (0..<10).map { _ in AtomicCounter(-1) }
        let finished = AtomicCounter()
        for index in 0..<10 {
            WorkQueue.global().async(group: group) {
                sleepMilliseconds(Int.random(in: 0...5))
                results[index].store(Int64(index * index))
                finished.increment()
            }
        }
        group.wait()
        #expect(finished.load() == 10)
        #expect((0..<10).allSatisfy { results[$0].load() == Int64($0 * $0) })
    }

    @Test func anEmptyGroupIsDoneAtOnce() {
        let group = WorkGroup()
        #expect(group.wait(timeout: .now()) == .success)
        group.wait()
    }

    /// A wait with a timeout on a group that does not finish.
    @Test func waitTimesOut() {
        let group = WorkGroup()
        group.enter()
        let start = ContinuousClock.now
        #expect(group.wait(timeout: .now() + .milliseconds(50)) == .timedOut)
        #expect(millisecondsSince(start) >= 49)
        group.leave()
        #expect(group.wait(timeout: .now()) == .success)
    }

    /// Notify runs once, on its queue, after everything, although the group
    /// itself is gone by then.
    @Test func notifyRunsOnceAfterAllMembersOnItsQueue() {
        let queue = WorkQueue(label: "notify")
        let key = SpecificKey<String>()
        queue.setSpecific(key, value: "notify")
        let log = EventLog()
        let notified = CountingSemaphore(value: 0)
        let gate = CountingSemaphore(value: 0)
        do {
            let group = WorkGroup()
            for name in ["one", "two", "three"] {
                WorkQueue.global().async(group: group) {
                    _ = gate.wait(timeout: .now() + rendezvousTimeout)
                    log.log(name)
                }
            }
            group.notify(queue: queue) {
                log.log("notified on \(WorkQueue.getSpecific(key) ?? "?")")
                notified.signal()
            }
        }  // the group is released here, with its members still waiting
        for _ in 0..<3 { gate.signal() }
        #expect(notified.wait(timeout: .now() + rendezvousTimeout) == .success)
        queue.sync {}
        let lines = log.lines
        #expect(lines.count == 4)
        #expect(lines.last == "notified on notify")
    }

    @Test func notifyOnAnEmptyGroupRunsAtOnceAndTheGroupCanBeReused() {
        let group = WorkGroup()
        let notified = CountingSemaphore(value: 0)
        group.notify(queue: .global()) { notified.signal() }
        #expect(notified.wait(timeout: .now() + rendezvousTimeout) == .success)

        let ran = AtomicCounter()
        WorkQueue.global().async(group: group) { ran.increment() }
        group.notify(queue: .global()) { notified.signal() }
        #expect(notified.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(ran.load() == 1)
    }

    /// Nested group tasks (each global task adds one to the main queue),
    /// with a serial queue standing in for the main queue.
    @Test func nestedGroupTasksKeepTheGroupBusy() {
        let main = WorkQueue(label: "main.standin")
        let state = UnsafeBox((foo: 0, bar: 0))  // touched on `main` only
        let log = EventLog()
        let done = CountingSemaphore(value: 0)
        let group = WorkGroup()
        WorkQueue.global().async(group: group) {
            sleepMilliseconds(5)  // doSomeFoo
            main.async(group: group) { state.value.foo = 42 }
        }
        WorkQueue.global().async(group: group) {
            sleepMilliseconds(2)  // doSomeBar
            main.async(group: group) { state.value.bar = 1 }
        }
        group.notify(queue: main) {
            log.log("foo: \(state.value.foo)")
            log.log("bar: \(state.value.bar)")
            done.signal()
        }
        #expect(done.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(log.lines == ["foo: 42", "bar: 1"])
    }

    /// Enter/leave around a callback-based API, errors included.
    @Test func enterAndLeaveWrapACallbackAPI() {
        @Sendable func fakeRequest(_ index: Int, completion: @escaping @Sendable (Result<Int, TestError>) -> Void) {
            WorkQueue.global().async {
                sleepMilliseconds(1 + index % 3)
                completion(index == 3 ? .failure(TestError(code: index)) : .success(index))
            }
        }
        @Sendable func withGroup(_ group: WorkGroup?, _ index: Int, _ handler: @escaping @Sendable (Result<Int, TestError>) -> Void) {
            guard let group else { return fakeRequest(index, completion: handler) }
            group.enter()
            fakeRequest(index) { result in
                handler(result)
                group.leave()  // on the error path too
            }
        }
        let group = WorkGroup()
        let successes = AtomicCounter(), failures = AtomicCounter()
        for index in 0..<5 {
            withGroup(group, index) { result in
                switch result {
                case .success: successes.increment()
                case .failure: failures.increment()
                }
            }
        }
        let notified = CountingSemaphore(value: 0)
        group.notify(queue: .global()) { notified.signal() }
        #expect(notified.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(successes.load() == 4)
        #expect(failures.load() == 1)

        let direct = CountingSemaphore(value: 0)
        withGroup(nil, 0) { _ in direct.signal() }  // no group: no enter/leave
        #expect(direct.wait(timeout: .now() + rendezvousTimeout) == .success)
    }

    /// The async wait suspends the task until the group is empty.
    @Test func asyncWaitSuspendsUntilTheGroupIsEmpty() async {
        let group = WorkGroup()
        let finished = AtomicCounter()
        let queue = WorkQueue(label: "async.wait", attributes: .concurrent)
        for _ in 0..<20 {
            queue.async(group: group) {
                sleepMilliseconds(1)
                finished.increment()
            }
        }
        await group.wait()
        #expect(finished.load() == 20)
        await WorkGroup().wait()  // empty: returns at once
    }
}
