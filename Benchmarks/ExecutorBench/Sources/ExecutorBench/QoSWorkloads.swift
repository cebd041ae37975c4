// Task priorities on the default executor and on SwiftQueues installed as
// the global executor: the Swift counterparts of Benchmarks/bench_qos.c.
//
//   Task priority inversion   2 x CPUs `.medium` tasks spin 10 ms of CPU
//                             and yield, over and over, until the round
//                             ends; a `.background` task has 20 slices of
//                             1 ms CPU (a yield after each); a
//                             `.userInitiated` task then awaits its
//                             value: the time from the await to its return
//                             (Swift escalates the awaited task to the
//                             waiter's priority). p50 and p99 over the
//                             rounds (QOS_ROUNDS per child, default 5).
//                             Target: ours <= 0.1 x default.
//   userInitiated requests    a `.userInitiated` task of 75 us CPU every
//                             2 ms (QOS_REQUESTS, default 750: a p99 of
//                             250 was its third-worst sample, set by
//                             whatever else ran), latency from
//                             Task.init to the task's end; alone, then with
//                             a `.background` batch (4 x CPUs tasks of 20
//                             ms CPU, yielding between them) in the same
//                             process. p99 of each and with / without.
//                             Target: ours <= 1.2 x (not a ratio to the
//                             default executor).
//
// CPU work spins on CLOCK_THREAD_CPUTIME_ID, so preemption stretches it.
// The experiments are driven from a thread of their own (not a task), so
// the driver's own wake-ups do not compete with the work measured. The
// hogs stop by themselves 2 s after the await starts, so a starved
// background task ends a round with a figure of 2 s or more instead of
// hanging.
//
// Only these rows: ONLY=priority or ONLY=userInitiated (see main.swift).
// QOS_DEBUG=1 prints each child's rounds and request percentiles on
// standard error; QOS_DEBUG=2 also when each background slice started
// (ms from the await) and at which priority it ran.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

// MARK: - Helpers

func qosMonoNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func qosThreadCPUNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Burns `ns` of the calling thread's CPU time.
@inline(never)
func qosSpin(_ ns: UInt64) {
    let start = qosThreadCPUNs()
    while qosThreadCPUNs() &- start < ns {}
}

func qosSleepUntil(_ mono: UInt64) {
    var ts = timespec(tv_sec: Int(mono / 1_000_000_000), tv_nsec: Int(mono % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}

let qosCPUs: Int = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))

func qosEnv(_ name: String, _ fallback: Int) -> Int {
    guard let raw = getenv(name), let n = Int(String(cString: raw)), n > 0 else { return fallback }
    return n
}

/// A POSIX semaphore (the default executor's side should not start
/// SwiftQueues' pool, so no CountingSemaphore here).
final class PosixSemaphore: @unchecked Sendable {
    private let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    init() { sem_init(sem, 0, 0) }
    deinit { sem_destroy(sem); sem.deallocate() }
    func signal() { sem_post(sem) }
    func wait() { while sem_wait(sem) != 0 {} }
}

private final class ThreadBody {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// Runs `body` on a new thread of its own and returns its result.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        let box = Unmanaged.passRetained(ThreadBody { continuation.resume(returning: body()) })
        var thread = pthread_t()
        let err = pthread_create(&thread, nil, { arg in
            Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, box.toOpaque())
        guard err == 0 else { fatalError("pthread_create: \(err)") }
        pthread_detach(thread)
    }
}

/// A line on standard error, tagged with the child's executor.
func qosDebug(_ line: String) {
    var text = "[\(CommandLine.arguments.last ?? "")] " + line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

func percentile(_ values: [Double], _ p: Int) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, sorted.count * p / 100)]
}

/// Figures one workload computes for the next ones to report.
final class QoSResults: Sendable {
    let figures = Mutex<[String: Double]>([:])
    func set(_ key: String, _ value: Double) { figures.withLock { $0[key] = value } }
    func get(_ key: String) -> Double? { figures.withLock { $0[key] } }
}

let qosResults = QoSResults()

// MARK: - Task priority inversion

final class InversionRound: Sendable {
    let running = Atomic<Bool>(true)
    let hogDeadline = Atomic<UInt64>(0) // 0: none yet
    let hogsStarted = Atomic<Int>(0)
    let latency = Atomic<UInt64>(0)
    let awaitStart = Atomic<UInt64>(0)
}

/// One round; returns the await's latency in us.
func inversionRound() -> Double {
    let round = InversionRound()
    let hogs = 2 * qosCPUs
    let hogsDone = PosixSemaphore()
    for _ in 0..<hogs {
        Task(priority: .medium) {
            while round.running.load(ordering: .relaxed) {
                let deadline = round.hogDeadline.load(ordering: .relaxed)
                if deadline != 0 && qosMonoNs() > deadline { break }
                round.hogsStarted.add(1, ordering: .relaxed)
                qosSpin(10_000_000)
                await Task.yield()
            }
            hogsDone.signal()
        }
    }
    while round.hogsStarted.load(ordering: .relaxed) < qosCPUs { usleep(200) }
    usleep(2000)

    let trace = getenv("QOS_DEBUG").map { String(cString: $0) == "2" } ?? false
    let background = Task(priority: .background) { () -> Int in
        var slices: [(UInt64, UInt8)] = []
        for _ in 0..<20 {
            if trace { slices.append((qosMonoNs(), Task.currentPriority.rawValue)) }
            qosSpin(1_000_000)
            await Task.yield()
        }
        if trace {
            let t0 = round.awaitStart.load(ordering: .relaxed)
            qosDebug("slices (ms from the await, priority): " + slices.map {
                "\(Double(Int64(bitPattern: $0.0 &- t0) / 100_000) / 10):\(String($0.1, radix: 16))"
            }.joined(separator: " "))
        }
        return 20
    }
    let done = PosixSemaphore()
    Task(priority: .userInitiated) {
        round.hogDeadline.store(qosMonoNs() + 2_000_000_000, ordering: .relaxed)
        let t0 = qosMonoNs()
        round.awaitStart.store(t0, ordering: .relaxed)
        let slices = await background.value
        round.latency.store(qosMonoNs() - t0, ordering: .relaxed)
        if slices != 20 { fatalError("background task ran \(slices) slices") }
        done.signal()
    }
    done.wait()
    round.running.store(false, ordering: .relaxed)
    for _ in 0..<hogs { hogsDone.wait() }
    return Double(round.latency.load(ordering: .relaxed)) / 1e3
}

func runInversion() async {
    let rounds = qosEnv("QOS_ROUNDS", 5)
    let samples = await onOwnThread { () -> [Double] in
        _ = inversionRound() // warm-up: starts the threads
        return (0..<rounds).map { _ in inversionRound() }
    }
    if getenv("QOS_DEBUG") != nil { qosDebug("inversion rounds (us): \(samples.map { Int($0) })") }
    qosResults.set("inv.p50", percentile(samples, 50))
    qosResults.set("inv.p99", percentile(samples, 99))
}

// MARK: - userInitiated requests next to a background batch

final class RequestSeries: @unchecked Sendable {
    let latency: UnsafeMutableBufferPointer<UInt64>
    let left: Atomic<Int>
    let done = PosixSemaphore()
    let batchRunning = Atomic<Bool>(true)
    let batchStarted = Atomic<Int>(0)
    init(_ n: Int) {
        latency = .allocate(capacity: n)
        latency.initialize(repeating: 0)
        left = Atomic(n)
    }
    deinit { latency.deallocate() }
}

/// One series of `n` requests; returns the latencies in us.
func requestSeries(withBatch: Bool, n: Int) -> [Double] {
    let series = RequestSeries(n)
    let batchTasks = 4 * qosCPUs
    let batchDone = PosixSemaphore()
    if withBatch {
        for _ in 0..<batchTasks {
            Task(priority: .background) {
                while series.batchRunning.load(ordering: .relaxed) {
                    series.batchStarted.add(1, ordering: .relaxed)
                    qosSpin(20_000_000)
                    await Task.yield()
                }
                batchDone.signal()
            }
        }
        while series.batchStarted.load(ordering: .relaxed) < qosCPUs { usleep(200) }
        usleep(20_000)
    }
    var next = qosMonoNs() + 2_000_000
    for i in 0..<n {
        qosSleepUntil(next)
        next += 2_000_000
        let submit = qosMonoNs()
        Task(priority: .userInitiated) {
            qosSpin(75_000)
            series.latency[i] = qosMonoNs() - submit
            if series.left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                series.done.signal()
            }
        }
    }
    series.done.wait()
    if withBatch {
        series.batchRunning.store(false, ordering: .relaxed)
        for _ in 0..<batchTasks { batchDone.wait() }
    }
    return series.latency.map { Double($0) / 1e3 }
}

func runRequests(withBatch: Bool) async -> Double {
    let n = qosEnv("QOS_REQUESTS", 750)
    let p99 = await onOwnThread { () -> Double in
        if !withBatch { _ = requestSeries(withBatch: false, n: 20) } // warm-up
        let latency = requestSeries(withBatch: withBatch, n: n)
        if getenv("QOS_DEBUG") != nil {
            qosDebug("requests \(withBatch ? "with" : "without") batch: p50 \(Int(percentile(latency, 50))) p90 \(Int(percentile(latency, 90))) p99 \(Int(percentile(latency, 99))) max \(Int(percentile(latency, 100))) us")
        }
        return percentile(latency, 99)
    }
    qosResults.set(withBatch ? "req.batch" : "req.alone", p99)
    return p99
}

// MARK: - The workloads

let qosWorkloads: [Workload] = [
    Workload(name: "Task priority inversion: await p50", unit: "us", target: 0.1) {
        await runInversion()
        return qosResults.get("inv.p50") ?? .nan
    },
    Workload(name: "Task priority inversion: await p99", unit: "us", target: 0.1) {
        if qosResults.get("inv.p99") == nil { await runInversion() }
        return qosResults.get("inv.p99") ?? .nan
    },
    Workload(name: "userInitiated p99 alone (75 us / 2 ms)", unit: "us") {
        await runRequests(withBatch: false)
    },
    Workload(name: "userInitiated p99 + background batch", unit: "us") {
        await runRequests(withBatch: true)
    },
    Workload(name: "userInitiated p99 with / without batch", unit: "x", oursAtMost: 1.2) {
        if qosResults.get("req.alone") == nil { _ = await runRequests(withBatch: false) }
        if qosResults.get("req.batch") == nil { _ = await runRequests(withBatch: true) }
        return (qosResults.get("req.batch") ?? .nan) / (qosResults.get("req.alone") ?? .nan)
    },
]
