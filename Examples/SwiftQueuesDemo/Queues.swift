// Recipes for queues, groups, once and delayed work.

import SwiftQueues

/// Three tasks on one serial queue run one after another, in order.
func serialQueueRecipe() {
    section("Serial queue")
    let queue = WorkQueue(label: "demo.serial")
    for name in ["First", "Second", "Third"] {
        queue.async {
            for counter in 0..<5 {
                print("\(name) iteration, counter = \(counter)")
            }
        }
    }
    let drained = CountingSemaphore(value: 0)
    queue.async { drained.signal() }  // runs after the three tasks
    waitOrExit(drained, "the serial queue")
}

/// A group tracks tasks on several queues; notify runs once all have left.
func groupNotifyRecipe() {
    section("Group notify")
    let group = WorkGroup()
    let finished = AtomicCounter()
    for _ in 0..<3 {
        WorkQueue.global().async(group: group) { finished.increment() }
    }
    let done = CountingSemaphore(value: 0)
    group.notify(queue: .global()) {
        print("All tasks done (\(finished.load()) of 3)")
        done.signal()
    }
    waitOrExit(done, "the group")
}

/// Eight threads race to run a closure guarded by a once token: one wins.
func onceRecipe() {
    section("Once")
    let setUp = OnceToken()
    let executions = AtomicCounter()
    onThreads(8) { _ in
        setUp.run { executions.increment() }
    }
    print("Executed \(executions.load()) time(s)")
}

/// Work submitted to run after a delay.
func asyncAfterRecipe() {
    section("asyncAfter")
    let fired = CountingSemaphore(value: 0)
    let due = WorkDeadline.now() + .milliseconds(100)
    WorkQueue.global().asyncAfter(delay: .milliseconds(100)) {
        print("Time flies.")
        print("not early: \(WorkDeadline.now() >= due)")
        fired.signal()
    }
    waitOrExit(fired, "asyncAfter")
}

/// A concurrent queue isolating a dictionary: reads are `sync` and run in
/// parallel, writes are barriers and run alone.
final class Inventory: @unchecked Sendable {
    private let isolation = WorkQueue(label: "demo.inventory", attributes: .concurrent)
    private var stock: [String: Int] = [:]

    func value(for item: String) -> Int? {
        isolation.sync { stock[item] }
    }

    func set(_ value: Int, for item: String) {
        isolation.asyncBarrier { self.stock[item] = value }
    }

    var count: Int {
        isolation.sync { stock.count }
    }
}

func readerWriterRecipe() {
    section("Reader-writer isolation queue")
    let inventory = Inventory()
    WorkQueue.concurrentPerform(iterations: 100) { index in
        inventory.set(index, for: "item-\(index)")    // barrier write
        _ = inventory.value(for: "item-\(index / 2)")  // concurrent read
    }
    print("Final dictionary count: \(inventory.count) (expected 100)")
}
