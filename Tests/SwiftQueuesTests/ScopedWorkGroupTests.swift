// withWorkGroup: a group in the call's stack frame; the call returns once
// every member has finished; fork-join with one per node; misuse reports.

import Testing
import SwiftQueues

/// fib(n) with a scoped group per node above `cutoff`, waiting inside the
/// node's task (on a pool worker, the wait runs the node's children); the
/// children submitted with `async`, or spawned (no start order).
private func forkJoinFib(_ n: Int, cutoff: Int, nodes: AtomicCounter, spawn: Bool = false) -> Int64 {
    _ = nodes.increment()
    if n <= cutoff {
        return serialFib(n)
    }
    let left = AtomicCounter(), right = AtomicCounter()
    withWorkGroup { group in
        for (m, result) in [(n - 1, left), (n - 2, right)] {
            let child: @Sendable () -> Void = {
                result.store(forkJoinFib(m, cutoff: cutoff, nodes: nodes, spawn: spawn))
            }
            if spawn { group.spawn(child) } else { group.async(child) }
        }
    }
    return left.load() + right.load()
}

private func serialFib(_ n: Int) -> Int64 {
    n < 2 ? Int64(n) : serialFib(n - 1) + serialFib(n - 2)
}

private func nodeCount(_ n: Int, cutoff: Int) -> Int64 {
    n <= cutoff ? 1 : 1 + nodeCount(n - 1, cutoff: cutoff) + nodeCount(n - 2, cutoff: cutoff)
}

private struct Failure: Error, Equatable {}

@Suite struct ScopedWorkGroupTests {
    @Test func theScopeReturnsAfterEveryMember() {
        let finished = AtomicCounter()
        withWorkGroup { group in
            for _ in 0..<10 {
                group.async {
                    sleepMilliseconds(Int.random(in: 1...5))
                    _ = finished.increment()
                }
            }
        }
        #expect(finished.load() == 10)
    }

    @Test func forkJoinWithAGroupPerNodeAddsUp() {
        for _ in 0..<5 {
            let nodes = AtomicCounter()
            let result = AtomicCounter()
            withWorkGroup { group in
                group.async { result.store(forkJoinFib(16, cutoff: 8, nodes: nodes)) }
            }
            #expect(result.load() == 987)
            #expect(nodes.load() == nodeCount(16, cutoff: 8))
        }
    }

    @Test func forkJoinWithSpawnedChildrenAddsUp() {
        for _ in 0..<5 {
            let nodes = AtomicCounter()
            let result = AtomicCounter()
            withWorkGroup { group in
                group.spawn { result.store(forkJoinFib(18, cutoff: 8, nodes: nodes, spawn: true)) }
            }
            #expect(result.load() == 2584)
            #expect(nodes.load() == nodeCount(18, cutoff: 8))
        }
    }

    /// Spawned onto a serial queue, children keep the queue's order; every
    /// spawn into a WorkGroup on a global queue runs once.
    @Test func spawnKeepsASerialQueuesOrderAndRunsEveryChild() {
        let serial = WorkQueue(label: "test.spawn.serial")
        let order = SpinLocked([Int]())
        let group = WorkGroup()
        for k in 0..<100 {
            serial.spawn(group: group) { order.withLock { $0.append(k) } }
        }
        let ran = AtomicCounter()
        for _ in 0..<100 {
            WorkQueue.global().spawn(group: group) { _ = ran.increment() }
        }
        let plain = CountingSemaphore(value: 0)
        WorkQueue.global().spawn { plain.signal() }
        group.wait()
        #expect(plain.wait(timeout: .now() + rendezvousTimeout) == .success)
        #expect(order.withLock { $0 } == Array(0..<100))
        #expect(ran.load() == 100)
    }

    @Test func resultsAndErrorsPassThroughAfterTheMembers() {
        let finished = AtomicCounter()
        let value = withWorkGroup { group in
            group.async {
                sleepMilliseconds(20)
                _ = finished.increment()
            }
            return 42
        }
        #expect(value == 42)
        #expect(finished.load() == 1)

        #expect(throws: Failure()) {
            try withWorkGroup { (group) throws(Failure) in
                group.async {
                    sleepMilliseconds(20)
                    _ = finished.increment()
                }
                throw Failure()
            }
        }
        #expect(finished.load() == 2)
    }

    @Test func enterLeaveTimeoutAndNotify() {
        let notified = CountingSemaphore(value: 0)
        withWorkGroup { group in
            group.enter()
            #expect(group.wait(timeout: .now() + .milliseconds(20)) == .timedOut)
            group.notify(queue: .global()) { notified.signal() }
            group.leave()
        }
        #expect(notified.wait(timeout: .now() + .seconds(10)) == .success)
    }

    @Test func leavingMoreThanEnteredIsReported() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            withWorkGroup { group in
                group.leave()
            }
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("SwiftQueues: sq_group_leave: unbalanced leave"))
    }
}
