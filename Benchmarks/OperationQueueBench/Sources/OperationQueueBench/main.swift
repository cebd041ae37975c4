//===----------------------------------------------------------------------===//
//
// OperationQueueBench — SwiftQueues' ProcedureQueue against Foundation's
// OperationQueue (the toolchain's swift-corelibs-foundation), in one run on
// one machine, reported as ratios (docs/PERFORMANCE.md).
//
// Each scenario times the whole life of its work: create the procedures
// (operations), link dependencies, add them, wait until all have finished.
// Every side runs one warm-up and then BENCH_ROUNDS rounds (default 5;
// Foundation's quadratic dependency chain gets at most 3), ours and
// Foundation's alternating; the table shows the median per procedure and the
// median of the per-round ratios. Writes build/bench/operations.json.
//
//===----------------------------------------------------------------------===//

import Foundation
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

/// Process CPU time (user + system, all threads) in nanoseconds.
func cpuNanoseconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = Double(usage.ru_utime.tv_sec) * 1e9 + Double(usage.ru_utime.tv_usec) * 1e3
    let system = Double(usage.ru_stime.tv_sec) * 1e9 + Double(usage.ru_stime.tv_usec) * 1e3
    return user + system
}

/// Wall and CPU nanoseconds of one run of `body`.
func timed(_ body: () -> Void) -> (wall: Double, cpu: Double) {
    let cpuStart = cpuNanoseconds()
    let wall = nanoseconds(body)
    return (wall, cpuNanoseconds() - cpuStart)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    if sorted.isEmpty { return .nan }
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

let rounds = max(1, Int(ProcessInfo.processInfo.environment["BENCH_ROUNDS"] ?? "") ?? 5)

// MARK: - Scenarios: SwiftQueues

func oursIndependent(_ count: Int, width: Int) {
    let queue = ProcedureQueue(name: "bench", maxConcurrentCount: width)
    for _ in 0..<count {
        queue.addBlock {}
    }
    queue.waitUntilAllFinished()
}

func oursChain(_ count: Int) {
    let queue = ProcedureQueue(name: "bench")
    var procedures: [Procedure] = []
    procedures.reserveCapacity(count)
    var previous: Procedure?
    for _ in 0..<count {
        let procedure = BlockProcedure {}
        if let previous { procedure.addDependency(previous) }
        procedures.append(procedure)
        previous = procedure
    }
    queue.addProcedures(procedures, waitUntilFinished: true)
}

func oursFanIn(_ count: Int) {
    let queue = ProcedureQueue(name: "bench")
    var procedures: [Procedure] = []
    procedures.reserveCapacity(count + 1)
    let sink = BlockProcedure {}
    for _ in 0..<count {
        let source = BlockProcedure {}
        sink.addDependency(source)
        procedures.append(source)
    }
    procedures.append(sink)
    queue.addProcedures(procedures, waitUntilFinished: true)
}

// MARK: - Scenarios: Foundation

func theirsIndependent(_ count: Int, width: Int) {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = width
    for _ in 0..<count {
        queue.addOperation {}
    }
    queue.waitUntilAllOperationsAreFinished()
}

func theirsChain(_ count: Int) {
    let queue = OperationQueue()
    var operations: [Operation] = []
    operations.reserveCapacity(count)
    var previous: Operation?
    for _ in 0..<count {
        let operation = BlockOperation {}
        if let previous { operation.addDependency(previous) }
        operations.append(operation)
        previous = operation
    }
    queue.addOperations(operations, waitUntilFinished: true)
}

func theirsFanIn(_ count: Int) {
    let queue = OperationQueue()
    var operations: [Operation] = []
    operations.reserveCapacity(count + 1)
    let sink = BlockOperation {}
    for _ in 0..<count {
        let source = BlockOperation {}
        sink.addDependency(source)
        operations.append(source)
    }
    operations.append(sink)
    queue.addOperations(operations, waitUntilFinished: true)
}

// MARK: - Run

struct Row: Codable {
    var scenario: String
    var count: Int
    var oursNsPerOp: Double
    var foundationNsPerOp: Double?
    var ratio: Double?
    /// CPU time (all threads) per operation, and its ratio.
    var oursCpuNsPerOp: Double?
    var foundationCpuNsPerOp: Double?
    var cpuRatio: Double?
    var target: String
    var met: Bool?
}

var rows: [Row] = []

/// Ours and Foundation's rounds alternate (after one warm-up each), so a
/// change in machine load hits both sides alike; the ratio is the median of
/// the per-round ratios.
@MainActor
func compare(_ scenario: String, count: Int, target: Double?, theirsRounds: Int = rounds,
             ours: () -> Void, theirs: () -> Void) {
    ours()
    if !oursOnly { theirs() }
    var oursSamples: [Double] = []
    var theirsSamples: [Double] = []
    var oursCpu: [Double] = []
    var theirsCpu: [Double] = []
    var ratios: [Double] = []
    var cpuRatios: [Double] = []
    for round in 0..<rounds {
        let o = timed(ours)
        oursSamples.append(o.wall / Double(count))
        oursCpu.append(o.cpu / Double(count))
        if !oursOnly && round < theirsRounds {
            let t = timed(theirs)
            theirsSamples.append(t.wall / Double(count))
            theirsCpu.append(t.cpu / Double(count))
            ratios.append(o.wall / t.wall)
            cpuRatios.append(o.cpu / t.cpu)
        }
    }
    let o = median(oursSamples)
    let t = oursOnly ? Double.nan : median(theirsSamples)
    let ratio = oursOnly ? Double.nan : median(ratios)
    rows.append(Row(scenario: scenario, count: count, oursNsPerOp: o, foundationNsPerOp: t,
                    ratio: ratio, oursCpuNsPerOp: median(oursCpu),
                    foundationCpuNsPerOp: oursOnly ? nil : median(theirsCpu),
                    cpuRatio: oursOnly ? nil : median(cpuRatios),
                    target: target.map { "<= \($0)" } ?? "-",
                    met: target.map { ratio <= $0 }))
    FileHandle.standardError.write(("  \(scenario): ours \(Int(o)) ns/op, Foundation "
        + "\(t.isNaN ? "-" : String(Int(t))) ns/op\n").data(using: .utf8)!)
}

@MainActor
func alone(_ scenario: String, count: Int, target: String, rounds: Int = rounds, ours: () -> Void) {
    ours()
    var wall: [Double] = []
    var cpu: [Double] = []
    for _ in 0..<rounds {
        let sample = timed(ours)
        wall.append(sample.wall / Double(count))
        cpu.append(sample.cpu / Double(count))
    }
    let o = median(wall)
    rows.append(Row(scenario: scenario, count: count, oursNsPerOp: o, foundationNsPerOp: nil,
                    ratio: nil, oursCpuNsPerOp: median(cpu), target: target, met: nil))
    FileHandle.standardError.write("  \(scenario): ours \(Int(o)) ns/op\n".data(using: .utf8)!)
}

let only = ProcessInfo.processInfo.environment["BENCH_ONLY"]
/// BENCH_OURS_ONLY=1 skips Foundation (for profiling).
let oursOnly = ProcessInfo.processInfo.environment["BENCH_OURS_ONLY"] != nil
func selected(_ name: String) -> Bool { only.map { name == $0 || name.contains($0) } ?? true }

FileHandle.standardError.write("OperationQueueBench: \(rounds) rounds per side\n".data(using: .utf8)!)

if selected("independent") || selected("default width") {
    compare("200k independent blocks, default width", count: 200_000, target: 0.1,
            ours: { oursIndependent(200_000, width: ProcedureQueue.defaultMaxConcurrentCount) },
            theirs: { theirsIndependent(200_000, width: OperationQueue.defaultMaxConcurrentOperationCount) })
}
if selected("independent") || selected("width 1") {
    compare("200k independent blocks, width 1", count: 200_000, target: 0.1,
            ours: { oursIndependent(200_000, width: 1) },
            theirs: { theirsIndependent(200_000, width: 1) })
}
if selected("chain") {
    compare("dependency chain of 5,000", count: 5_000, target: 0.01,
            theirsRounds: min(rounds, 3),
            ours: { oursChain(5_000) }, theirs: { theirsChain(5_000) })
    alone("dependency chain of 5,000 (ours)", count: 5_000, target: "flat", ours: { oursChain(5_000) })
    alone("dependency chain of 100,000", count: 100_000, target: "flat", ours: { oursChain(100_000) })
    alone("dependency chain of 1,000,000", count: 1_000_000, target: "flat",
          rounds: min(rounds, 3), ours: { oursChain(1_000_000) })
}
if only == "micro" {
    // Producer and consumer costs apart: adds to a suspended queue, then the drain.
    for width in [ProcedureQueue.defaultMaxConcurrentCount, 1] {
        var adds: [Double] = [], drains: [Double] = [], creates: [Double] = []
        for _ in 0..<5 {
            let queue = ProcedureQueue(name: "micro", maxConcurrentCount: width)
            queue.isSuspended = true
            var made: [Procedure] = []
            made.reserveCapacity(200_000)
            creates.append(nanoseconds { for _ in 0..<200_000 { made.append(BlockProcedure {}) } } / 200_000)
            adds.append(nanoseconds { for p in made { queue.addProcedure(p) } } / 200_000)
            made = []
            drains.append(nanoseconds { queue.isSuspended = false; queue.waitUntilAllFinished() } / 200_000)
        }
        print("width \(width): create \(Int(median(creates))) ns, add \(Int(median(adds))) ns, drain \(Int(median(drains))) ns")
    }
}
if selected("fan") {
    compare("fan-in of 10,000 into one", count: 10_001, target: nil,
            ours: { oursFanIn(10_000) }, theirs: { theirsFanIn(10_000) })
}

// MARK: - Report

func format(_ value: Double?) -> String {
    guard let value else { return "-" }
    if value >= 100 { return String(Int(value.rounded())) }
    return String(format: "%.1f", value)
}

var table = "| scenario | ours ns/op | Foundation ns/op | ratio | target | ours CPU ns/op | Foundation CPU ns/op | CPU ratio |\n"
    + "|---|---:|---:|---:|---|---:|---:|---:|\n"
for row in rows {
    let ratio = row.ratio.map { String(format: "%.4f", $0) } ?? "-"
    let cpuRatio = row.cpuRatio.map { String(format: "%.4f", $0) } ?? "-"
    let verdict = row.met.map { $0 ? " (met)" : " (MISSED)" } ?? ""
    table += "| \(row.scenario) | \(format(row.oursNsPerOp)) | \(format(row.foundationNsPerOp)) "
        + "| \(ratio) | \(row.target)\(verdict) | \(format(row.oursCpuNsPerOp)) "
        + "| \(format(row.foundationCpuNsPerOp)) | \(cpuRatio) |\n"
}
print(table, terminator: "")

let chainRows = rows.filter { $0.scenario.hasPrefix("dependency chain") && $0.foundationNsPerOp == nil }
if let lowest = chainRows.map(\.oursNsPerOp).min(), let highest = chainRows.map(\.oursNsPerOp).max() {
    print(String(format: "chain growth, 5,000 -> 1,000,000: ns/op max/min = %.2f", highest / lowest))
}

struct Report: Codable {
    var date: String
    var cpus: Int
    var loadAverage: String
    var rounds: Int
    var rows: [Row]
}

let root = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()
let outputDirectory = root.appendingPathComponent("build/bench")
try? FileManager.default.createDirectory(at: outputDirectory, withIntermediateDirectories: true)
let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?
    .split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
let report = Report(date: ISO8601DateFormatter().string(from: Date()),
                    cpus: ProcessInfo.processInfo.activeProcessorCount,
                    loadAverage: load, rounds: rounds, rows: rows)
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
if only == nil, !oursOnly, let data = try? encoder.encode(report) {
    let file = outputDirectory.appendingPathComponent("operations.json")
    try? data.write(to: file)
    print("wrote \(file.path)")
}
