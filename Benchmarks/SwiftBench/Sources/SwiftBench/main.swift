//===----------------------------------------------------------------------===//
//
// SwiftBench — SwiftQueues' Swift API against the toolchain's Dispatch
// (swift-corelibs-libdispatch), in one run on one machine, as ratios.
//
// Every scenario runs one warm-up per side, then BENCH_ROUNDS rounds
// (default 5) alternating ours and Dispatch (A B A B ...). The table shows
// the median ns per operation of each side and ours/theirs of the medians.
// Writes build/bench/swift.json (relative to the repository root).
// BENCH_ONLY=text runs only the scenarios whose name contains `text` (for
// profiling one of them) and then writes no JSON.
//
//===----------------------------------------------------------------------===//

import Dispatch
import Glibc
import SwiftQueues

// MARK: - Timing

@inline(never)
func nanoseconds(_ body: () -> Void) -> Double {
    var start = timespec()
    var end = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    body()
    clock_gettime(CLOCK_MONOTONIC, &end)
    return Double(end.tv_sec - start.tv_sec) * 1e9 + Double(end.tv_nsec - start.tv_nsec)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    if sorted.isEmpty { return .nan }
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/// Writes one line to standard error.
func logLine(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Keeps a value alive for the optimiser without doing anything.
@inline(never)
func blackHole(_ value: Int) {}

let rounds: Int = {
    if let raw = getenv("BENCH_ROUNDS"), let n = Int(String(cString: raw)), n > 0 { return n }
    return 5
}()

/// `BENCH_ONLY=text`: run only the scenarios whose name contains `text`
/// (for profiling one scenario; no JSON is written then).
let only: String? = {
    guard let raw = getenv("BENCH_ONLY"), raw.pointee != 0 else { return nil }
    return String(cString: raw)
}()

func selected(_ name: String) -> Bool {
    guard let only else { return true }
    return name.contains(only)
}

struct Row {
    let name: String
    let ops: Int
    let target: Double?
    let ours: [Double]   // ns per op, one per round
    let theirs: [Double]
    var oursMedian: Double { median(ours) }
    var theirsMedian: Double { median(theirs) }
    var ratio: Double { oursMedian / theirsMedian }
}

/// Times `ours` and `theirs` (each doing `ops` operations): one warm-up
/// each, then `rounds` interleaved rounds. Nil when `BENCH_ONLY` skips it.
func compare(_ name: String, ops: Int, target: Double? = nil,
             ours: () -> Void, theirs: () -> Void) -> Row? {
    guard selected(name) else { return nil }
    _ = nanoseconds(ours)
    _ = nanoseconds(theirs)
    var a: [Double] = []
    var b: [Double] = []
    for _ in 0..<rounds {
        a.append(nanoseconds(ours) / Double(ops))
        b.append(nanoseconds(theirs) / Double(ops))
    }
    let row = Row(name: name, ops: ops, target: target, ours: a, theirs: b)
    logLine("  \(name): ours \(format(row.oursMedian)) ns, dispatch \(format(row.theirsMedian)) ns")
    return row
}

extension Array where Element == Row {
    mutating func add(_ row: Row?) {
        if let row { append(row) }
    }
}

func format(_ value: Double, digits: Int = 1) -> String {
    guard value.isFinite else { return "-" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    var text = String(rounded)
    if let dot = text.firstIndex(of: ".") {
        let decimals = text.distance(from: dot, to: text.endIndex) - 1
        if decimals < digits { text += String(repeating: "0", count: digits - decimals) }
    } else if digits > 0 {
        text += "." + String(repeating: "0", count: digits)
    }
    return text
}

// MARK: - Actors

/// An actor on a serial WorkQueue.
actor QueueActor {
    let queue = WorkQueue(label: "swiftbench.actor")
    var value = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        queue.asUnownedSerialExecutor()
    }
    func bump() -> Int {
        value &+= 1
        return value
    }
}

/// An actor on the default executor.
actor DefaultActor {
    var value = 0
    func bump() -> Int {
        value &+= 1
        return value
    }
}

/// A serial executor over a `DispatchQueue`: the like-for-like partner of
/// `QueueActor`. Dispatch on Linux has no `DispatchSerialQueue` and its
/// `DispatchQueue` is not a `SerialExecutor`, so this is the executor one
/// writes by hand there: every job is one `async` to the queue.
final class DispatchQueueExecutor: SerialExecutor {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}

/// An actor on a serial DispatchQueue, through `DispatchQueueExecutor`.
actor DispatchQueueActor {
    let executor = DispatchQueueExecutor(label: "swiftbench.dispatch-actor")
    var value = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor {
        executor.asUnownedSerialExecutor()
    }
    func bump() -> Int {
        value &+= 1
        return value
    }
}

/// Runs `body` in a detached task (off the main actor) and blocks the
/// calling thread until it has finished.
func blockOn(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await body()
        done.signal()
    }
    done.wait()
}

/// The benchmark actors: one call is one message round trip.
protocol CountingActor: Actor {
    func bump() -> Int
}

extension QueueActor: CountingActor {}
extension DefaultActor: CountingActor {}
extension DispatchQueueActor: CountingActor {}

/// `calls` round trips to `actor` from a detached task (preferring
/// `executor` as its task executor, if given); returns when all are done.
func roundTrips(_ actor: some CountingActor, calls: Int,
                preferring executor: (any TaskExecutor)? = nil) {
    blockOn {
        await withTaskExecutorPreference(executor) {
            var total = 0
            for _ in 0..<calls { total &+= await actor.bump() }
            blackHole(total)
        }
    }
}

// MARK: - Scenarios

func runAll() -> [Row] {
    var rows: [Row] = []
    let n = 200_000

    // 1. Closure async to a serial queue, then one sync to drain it.
    let ourSerial = WorkQueue(label: "swiftbench.serial")
    let theirSerial = DispatchQueue(label: "swiftbench.serial")
    rows.add(compare("async to a serial queue + sync drain", ops: n, target: 0.8,
        ours: {
            for _ in 0..<n { ourSerial.async {} }
            ourSerial.sync {}
        },
        theirs: {
            for _ in 0..<n { theirSerial.async {} }
            theirSerial.sync {}
        }))

    // 2. Closure async to the global queue, with a group, then wait.
    let ourGlobal = WorkQueue.global()
    let theirGlobal = DispatchQueue.global()
    rows.add(compare("async to the global queue + group wait", ops: n, target: 0.8,
        ours: {
            let group = WorkGroup()
            for _ in 0..<n { ourGlobal.async(group: group) {} }
            group.wait()
        },
        theirs: {
            let group = DispatchGroup()
            for _ in 0..<n { theirGlobal.async(group: group) {} }
            group.wait()
        }))

    // 3. sync returning a value.
    rows.add(compare("sync returning a value", ops: n,
        ours: {
            var total = 0
            for i in 0..<n { total &+= ourSerial.sync { i } }
            blackHole(total)
        },
        theirs: {
            var total = 0
            for i in 0..<n { total &+= theirSerial.sync { i } }
            blackHole(total)
        }))

    // 4. concurrentPerform, trivial body.
    let iterations = 1_000_000
    rows.add(compare("concurrentPerform 1M, trivial body", ops: iterations,
        ours: { WorkQueue.concurrentPerform(iterations: iterations) { blackHole($0) } },
        theirs: { DispatchQueue.concurrentPerform(iterations: iterations) { blackHole($0) } }))

    // 5. Actor message round trip from a detached task.
    let calls = 100_000
    let queueActor = QueueActor()
    let defaultActor = DefaultActor()
    rows.add(compare("actor round trip: WorkQueue executor vs default", ops: calls,
        ours: { roundTrips(queueActor, calls: calls) },
        theirs: { roundTrips(defaultActor, calls: calls) }))

    // 6. The WorkQueue actor again, but the calling task prefers the
    // actor's queue as its task executor: both hops are then enqueues on
    // that queue, drained by the same worker without a wake-up.
    rows.add(compare("actor round trip: WorkQueue executor + task preference vs default", ops: calls,
        ours: { roundTrips(queueActor, calls: calls, preferring: queueActor.queue) },
        theirs: { roundTrips(defaultActor, calls: calls) }))

    // 7. The same, like for like: both actors on a serial queue executor,
    // so both pay a thread hop there and back per call.
    let dispatchActor = DispatchQueueActor()
    rows.add(compare("actor round trip: WorkQueue vs DispatchQueue executor", ops: calls,
        ours: { roundTrips(queueActor, calls: calls) },
        theirs: { roundTrips(dispatchActor, calls: calls) }))

    // Many small files (FileHashing.swift).
    rows.append(contentsOf: fileHashingRows())
    return rows
}

// MARK: - Report

func printTable(_ rows: [Row]) {
    print("| scenario | ours ns/op | Dispatch ns/op | ratio | target |")
    print("|---|---:|---:|---:|---|")
    for row in rows {
        var target = ""
        if let t = row.target {
            target = "<= \(format(t)) " + (row.ratio <= t ? "(met)" : "(not met)")
        }
        print("| \(row.name) | \(format(row.oursMedian)) | \(format(row.theirsMedian)) | \(format(row.ratio, digits: 2)) | \(target) |")
    }
}

func jsonString(_ s: String) -> String {
    "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false)
            .joined(separator: replacement)
    }
}

func writeJSON(_ rows: [Row]) {
    // #filePath is <repo>/Benchmarks/SwiftBench/Sources/SwiftBench/main.swift.
    var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    parts.removeLast(5)
    let root = parts.joined(separator: "/")
    let dir = root + "/build/bench"
    mkdir(root + "/build", 0o755)
    mkdir(dir, 0o755)
    let path = dir + "/swift.json"
    var out = "{\n  \"benchmark\": \"SwiftBench\",\n  \"rounds\": \(rounds),\n  \"unit\": \"ns/op\",\n  \"scenarios\": [\n"
    for (i, row) in rows.enumerated() {
        out += "    {\"name\": \(jsonString(row.name)), \"ops\": \(row.ops), "
        out += "\"ours\": \(row.oursMedian), \"theirs\": \(row.theirsMedian), \"ratio\": \(row.ratio), "
        out += "\"target\": \(row.target.map { String($0) } ?? "null"), "
        out += "\"ours_rounds\": [\(row.ours.map { String($0) }.joined(separator: ", "))], "
        out += "\"theirs_rounds\": [\(row.theirs.map { String($0) }.joined(separator: ", "))]}"
        out += i == rows.count - 1 ? "\n" : ",\n"
    }
    out += "  ]\n}\n"
    guard let file = fopen(path, "w") else {
        logLine("SwiftBench: cannot write \(path)")
        return
    }
    fputs(out, file)
    fclose(file)
    print("wrote \(path)")
}

logLine("SwiftBench: \(rounds) rounds per side, interleaved")
let rows = runAll()
printTable(rows)
if only == nil {
    writeJSON(rows)
} else {
    logLine("SwiftBench: BENCH_ONLY set, build/bench/swift.json not written")
}
