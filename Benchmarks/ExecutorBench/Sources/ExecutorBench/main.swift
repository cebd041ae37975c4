// Swift concurrency workloads timed on the default executor and with
// SwiftQueues installed as the global executor. Without arguments the
// program is the driver: it runs itself as a child with `--child default`
// and `--child swiftqueues`, alternating, ROUNDS times (default 3), and
// prints the median of each figure with the ratio ours / default. A child
// runs every workload once and prints one line per workload:
// `name<TAB>figure<TAB>cpu-ms`.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftQueues

// MARK: - Workloads

/// CPU time (user + system) of the process so far, in ms.
func cpuMilliseconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func ms(_ t: timeval) -> Double { Double(t.tv_sec) * 1e3 + Double(t.tv_usec) / 1e3 }
    return ms(usage.ru_utime) + ms(usage.ru_stime)
}

func milliseconds(_ d: Duration) -> Double {
    let (s, a) = d.components
    return Double(s) * 1e3 + Double(a) / 1e15
}

actor Ponger {
    var count = 0
    func pong() -> Int { count += 1; return count }
}

actor Pinger {
    let partner = Ponger()
    func run(_ n: Int) async -> Int {
        var last = 0
        for _ in 0..<n { last = await partner.pong() }
        return last
    }
}

/// An actor whose executor is a serial WorkQueue.
actor QueueActor {
    let queue = WorkQueue(label: "bench.queue-actor")
    var count = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
    func bump() -> Int { count += 1; return count }
}

/// Two actors on serial WorkQueues, one calling the other: every call is a
/// hop from one queue to the other and back.
actor QueuePonger {
    let queue = WorkQueue(label: "bench.queue-ponger")
    var count = 0
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
    func pong() -> Int { count += 1; return count }
}

actor QueuePinger {
    let queue = WorkQueue(label: "bench.queue-pinger")
    let partner = QueuePonger()
    nonisolated var unownedExecutor: UnownedSerialExecutor { queue.asUnownedSerialExecutor() }
    func run(_ n: Int) async -> Int {
        var last = 0
        for _ in 0..<n { last = await partner.pong() }
        return last
    }
}

actor DefaultCounter {
    var count = 0
    func bump() -> Int { count += 1; return count }
}

struct Workload: Sendable {
    let name: String
    let unit: String
    /// The goal for ours / default (docs/PERFORMANCE.md), if there is one.
    var target: Double? = nil
    /// A goal for ours' figure itself (a ratio the workload computes, as
    /// the QoS rows' with / without), if there is one.
    var oursAtMost: Double? = nil
    /// Returns the figure (ms for throughput workloads, µs for lateness).
    let run: @Sendable () async -> Double
}

@inline(never) func blackHole<T>(_ value: T) { withExtendedLifetime(value) {} }

let workloads: [Workload] = [
    Workload(name: "task group, 200,000 children", unit: "ms", target: 0.5) {
        let start = ContinuousClock.now
        let sum = await withTaskGroup(of: Int.self) { group in
            for i in 0..<200_000 { group.addTask { i & 7 } }
            var total = 0
            for await value in group { total += value }
            return total
        }
        blackHole(sum)
        return milliseconds(ContinuousClock.now - start)
    },
    Workload(name: "Task {} round trip x 50,000", unit: "ms", target: 0.5) {
        let start = ContinuousClock.now
        var total = 0
        for i in 0..<50_000 { total += await Task { i & 1 }.value }
        blackHole(total)
        return milliseconds(ContinuousClock.now - start)
    },
    Workload(name: "AsyncStream pipeline, 64 stages x 20,000", unit: "ms", target: 0.5) {
        let stages = 64, items = 20_000
        let start = ContinuousClock.now
        var (stream, source) = AsyncStream.makeStream(of: Int.self)
        var tasks: [Task<Void, Never>] = []
        for _ in 0..<stages {
            let (next, sink) = AsyncStream.makeStream(of: Int.self)
            let input = stream
            tasks.append(Task {
                for await value in input { sink.yield(value + 1) }
                sink.finish()
            })
            stream = next
        }
        let output = stream
        let consumer = Task { () -> Int in
            var total = 0
            for await value in output { total += value }
            return total
        }
        for i in 0..<items { source.yield(i & 1) }
        source.finish()
        blackHole(await consumer.value)
        for task in tasks { await task.value }
        return milliseconds(ContinuousClock.now - start)
    },
    Workload(name: "Task.sleep(1 ms) lateness p99 (300)", unit: "us", target: 0.5) {
        var late: [Double] = []
        for _ in 0..<300 {
            let start = ContinuousClock.now
            try? await Task.sleep(for: .milliseconds(1))
            late.append(milliseconds(ContinuousClock.now - start - .milliseconds(1)) * 1e3)
        }
        late.sort()
        return late[late.count * 99 / 100]
    },
    Workload(name: "default actor ping-pong x 100,000", unit: "ms") {
        let start = ContinuousClock.now
        blackHole(await Pinger().run(100_000))
        return milliseconds(ContinuousClock.now - start)
    },
    Workload(name: "queue-backed actor ping-pong x 100,000", unit: "ms") {
        let pinger = QueuePinger()
        let start = ContinuousClock.now
        blackHole(await pinger.run(100_000))
        return milliseconds(ContinuousClock.now - start)
    },
    Workload(name: "calls into a default actor x 100,000", unit: "ms") {
        let actor = DefaultCounter()
        let start = ContinuousClock.now
        for _ in 0..<100_000 { blackHole(await actor.bump()) }
        return milliseconds(ContinuousClock.now - start)
    },
    Workload(name: "calls into a queue-backed actor x 100,000", unit: "ms") {
        let actor = QueueActor()
        let start = ContinuousClock.now
        for _ in 0..<100_000 { blackHole(await actor.bump()) }
        return milliseconds(ContinuousClock.now - start)
    },
] + qosWorkloads // QoSWorkloads.swift

// MARK: - Child

func runChild(install: Bool) -> Never {
    if install {
        guard WorkQueue.installAsGlobalExecutor() else {
            print("FAIL: installAsGlobalExecutor returned false")
            exit(1)
        }
    }
    let done = CountingSemaphore(value: 0)
    Task.detached {
        // One warm-up pass of a smaller task group starts the threads.
        await withTaskGroup(of: Void.self) { g in for _ in 0..<1000 { g.addTask {} } }
        // ONLY=<text>: just the workloads whose name contains it (profiling).
        let only = getenv("ONLY").map { String(cString: $0) }
        for workload in workloads where only.map(workload.name.contains) ?? true {
            let cpu0 = cpuMilliseconds()
            let figure = await workload.run()
            let cpu = cpuMilliseconds() - cpu0
            print("\(workload.name)\t\(figure)\t\(cpu)")
        }
        done.signal()
    }
    done.wait()
    exit(0)
}

// MARK: - Driver

func runSelf(_ mode: String) -> [String: (Double, Double)] {
    var pipe: [Int32] = [0, 0]
    guard Glibc.pipe(&pipe) == 0 else { fatalError("pipe") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipe[0])
    let exe = "/proc/self/exe"
    var pid: pid_t = 0
    let args = [exe, "--child", mode]
    let argv = args.map { strdup($0) } + [nil]
    guard posix_spawn(&pid, exe, &actions, nil, argv, environ) == 0 else { fatalError("spawn") }
    close(pipe[1])
    var output = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(pipe[0], &buffer, buffer.count)
        if n <= 0 { break }
        output += buffer[0..<n]
    }
    close(pipe[0])
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    var result: [String: (Double, Double)] = [:]
    for line in String(decoding: output, as: UTF8.self).split(separator: "\n") {
        let parts = line.split(separator: "\t")
        guard parts.count == 3, let figure = Double(parts[1]), let cpu = Double(parts[2]) else {
            print(line)
            continue
        }
        result[String(parts[0])] = (figure, cpu)
    }
    if status != 0 { print("child \(mode) failed with status \(status)") }
    return result
}

func pad(_ s: String, _ width: Int) -> String {
    s + String(repeating: " ", count: max(0, width - s.count))
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
}

func fmt(_ v: Double, _ width: Int, _ digits: Int = 1) -> String {
    // A workload that ONLY filtered out, or a side that failed, has no figure.
    guard v.isFinite else { return String(repeating: " ", count: max(0, width - 1)) + "-" }
    var s = String(Int((v * pow(10, Double(digits))).rounded()))
    if digits > 0 {
        while s.count <= digits { s = "0" + s }
        s.insert(".", at: s.index(s.endIndex, offsetBy: -digits))
    }
    return String(repeating: " ", count: max(0, width - s.count)) + s
}

let arguments = CommandLine.arguments
if arguments.count >= 3, arguments[1] == "--child" {
    runChild(install: arguments[2] == "swiftqueues")
}

let rounds = Int(getenv("ROUNDS").map { String(cString: $0) } ?? "") ?? 3
var samples: [String: [String: [(Double, Double)]]] = ["default": [:], "swiftqueues": [:]]
for round in 1...rounds {
    for mode in round % 2 == 1 ? ["default", "swiftqueues"] : ["swiftqueues", "default"] {
        for (name, value) in runSelf(mode) { samples[mode]![name, default: []].append(value) }
    }
}
print("Swift concurrency: default executor vs SwiftQueues installed (median of \(rounds) alternated runs)")
print("workload                                    unit   default   ours   ratio target met | cpu ms: default    ours  ratio")
for workload in workloads {
    let d = samples["default"]![workload.name] ?? [], o = samples["swiftqueues"]![workload.name] ?? []
    if d.isEmpty && o.isEmpty { continue } // not selected by ONLY
    let df = median(d.map(\.0)), of = median(o.map(\.0))
    let dc = median(d.map(\.1)), oc = median(o.map(\.1))
    let name = pad(workload.name, 43)
    var goal = workload.target.map { "<= " + fmt($0, 4, 1) } ?? "     -"
    var met = workload.target.map { of / df <= $0 ? "yes" : " NO" } ?? "  -"
    if let most = workload.oursAtMost { // a goal for ours' own figure
        goal = "ours<=" + fmt(most, 3, 1)
        met = of <= most ? "yes" : " NO"
    }
    let digits = workload.unit == "x" ? 2 : 1
    print("\(name) \(pad(workload.unit, 4)) \(fmt(df, 9, digits)) \(fmt(of, 7, digits)) \(fmt(of / df, 6, 2)) \(goal) \(met) |        \(fmt(dc, 8, 0)) \(fmt(oc, 7, 0)) \(fmt(oc / dc, 6, 2))")
}
