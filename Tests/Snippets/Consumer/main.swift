// A first program in a user's own package (Swift 6 mode), depending on
// SwiftQueues by path: the C module under its package-specific name, a
// value lock, procedures on one's own WorkQueue. Built with every warning
// an error and run by `make test-snippets` (scripts/check-snippets.sh).

import CSwiftQueues
import SwiftQueues

/// A job pipeline on one's own serial queue, counting with a SpinLocked.
func runPipeline() -> [String: Int] {
    let database = WorkQueue(label: "com.example.db")
    let jobs = ProcedureQueue(name: "jobs")
    jobs.underlyingQueue = database
    let tally = SpinLocked([String: Int]())
    for index in 0..<20 {
        jobs.addBlock {
            tally.withLock { $0[WorkQueue.currentLabel, default: 0] += index % 2 == 0 ? 1 : 0 }
        }
    }
    jobs.waitUntilAllFinished()
    return tally.withLock { $0 }
}

/// The C runtime, straight from Swift.
func cRuntimeLabel() -> String {
    let queue = sq_queue_create("com.example.c", nil)
    defer { sq_release(UnsafeMutableRawPointer(queue)) }
    return String(cString: sq_queue_get_label(queue))
}

enum Quota: Error { case exceeded }

/// Typed throws through the lock.
func take(_ amount: Int, from budget: SpinLocked<Int>) throws(Quota) -> Int {
    try budget.withLock { (left: inout Int) throws(Quota) -> Int in
        guard left >= amount else { throw .exceeded }
        left -= amount
        return left
    }
}

let counts = runPipeline()
precondition(counts == ["com.example.db": 10], "procedures ran elsewhere: \(counts)")
precondition(cRuntimeLabel() == "com.example.c")
let budget = SpinLocked(5)
precondition((try? take(3, from: budget)) == 2)
precondition((try? take(3, from: budget)) == nil)
print("consumer: procedures on com.example.db, CSwiftQueues and SpinLocked ok")
