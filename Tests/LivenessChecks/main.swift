// Liveness checks, run by LivenessTests.swift: shapes of code where work is
// queued behind threads that block (or compute) and must still run. Each
// mode is one run of this program, started as a child with a deadline, so
// a runtime that hangs on a shape fails that test instead of hanging the
// test run. The pool's width comes from the environment (SQ_WORKERS), read
// once when the pool starts.
//
// Besides the test's own deadline, a watchdog thread of this program (a
// plain pthread, not a worker) ends it with status 2 when the mode is not
// done after LIVENESS_DEADLINE_SECONDS (default 20) or makes no progress
// for LIVENESS_STALL_SECONDS (default 10): it prints what the mode was
// waiting for and a RuntimeSnapshot first. Exit status 0 means every check
// held; each mode then prints one summary line the test looks for.
//
//   task-cache COUNT SLEEP_US REPS     tasks read and write a cache queue (executor installed)
//   queue-cache COUNT SLEEP_US         the same as global-queue work in a WorkGroup
//   child-start ROUNDS COMPUTE_MS BOUND_MS
//                                      a computing task's child must start promptly
//                                      while two tasks ping-pong (executor installed)
//   service REQUESTS                   a queue-based service: semaphore, fan-out, serial
//                                      cache and index queues, a timer, deadlines, procedures

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization
import SwiftQueues

// MARK: - Support

private let mode = CommandLine.arguments.dropFirst().first ?? ""

/// Prints a line and flushes it, so it reaches the test even if this
/// process is killed afterwards.
private func say(_ line: String) {
    print(line)
    fflush(nil)
}

private func fail(_ message: String) -> Never {
    say("FAIL: \(mode): \(message)")
    exit(1)
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

/// The integer argument at `position` (after the mode), or `fallback`.
private func argument(_ position: Int, _ fallback: Int) -> Int {
    let arguments = CommandLine.arguments
    guard arguments.count > position + 1, let value = Int(arguments[position + 1]) else {
        return fallback
    }
    return value
}

private func environmentSeconds(_ name: String, _ fallback: Int) -> Int {
    guard let raw = getenv(name), let value = Int(String(cString: raw)), value > 0 else {
        return fallback
    }
    return value
}

private func milliseconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
}

private func format(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(abs(tenths % 10))"
}

/// A plain value guarded by the queue it is used on.
private final class Box: @unchecked Sendable {
    var n = 0
}

/// What the watchdog reports: a progress count (any work done bumps it)
/// and a description of where the mode is.
private final class Watch: Sendable {
    let progress = AtomicCounter()
    private let describer = Mutex<@Sendable () -> String>({ "" })

    func describe(_ body: @escaping @Sendable () -> String) {
        describer.withLock { $0 = body }
    }

    var description: String {
        describer.withLock { $0 }()
    }
}

private let watch = Watch()

private final class ThreadBody {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts a thread of our own (not a worker of the pool).
private func startThread(_ body: @escaping @Sendable () -> Void) {
    var thread = pthread_t()
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    let rc = pthread_create(&thread, nil, { context in
        Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
        return nil
    }, box)
    check(rc == 0, "pthread_create failed")
    pthread_detach(thread)
}

/// Ends the process with status 2 on a hang: past the deadline, or no
/// progress for the stall time.
private func startWatchdog() {
    let deadline = Duration.seconds(environmentSeconds("LIVENESS_DEADLINE_SECONDS", 20))
    let stall = Duration.seconds(environmentSeconds("LIVENESS_STALL_SECONDS", 10))
    startThread {
        let start = ContinuousClock.now
        var last = watch.progress.load()
        var lastChange = start
        while true {
            usleep(50_000)
            let now = ContinuousClock.now
            let progress = watch.progress.load()
            if progress != last {
                last = progress
                lastChange = now
            }
            let late = now - start > deadline
            guard late || now - lastChange > stall else { continue }
            let why = late ? "not done after \(deadline)" : "no progress for \(stall)"
            say("FAIL: \(mode): hung: \(why): \(watch.description)")
            // May block if the runtime is wedged; the test kills us then.
            say("runtime snapshot:\n\(RuntimeSnapshot.text())")
            _exit(2)
        }
    }
}

private func install() {
    check(WorkQueue.installAsGlobalExecutor(), "installAsGlobalExecutor returned false")
    check(WorkQueue.isGlobalExecutor, "isGlobalExecutor is false")
}

/// Runs `body` in a detached task; this (the main) thread only waits, so
/// nothing of the runtime is needed to notice the end.
private func runTask(_ body: @escaping @Sendable () async -> Void) {
    let done = AtomicCounter()
    Task.detached {
        await body()
        done.store(1)
    }
    while done.load() == 0 { usleep(1_000) }
}

// MARK: - Shape 1: the cache pattern as tasks

/// COUNT tasks in a group, each blocking SLEEP_US (a blocking read), then
/// reading through a serial cache queue with sync and writing back with
/// async; REPS rounds. Every read happens and every write lands.
private func taskCache() {
    let count = argument(1, 1_000), sleepMicros = argument(2, 100), reps = argument(3, 3)
    install()
    for rep in 0..<reps {
        let q = WorkQueue(label: "liveness.cache")
        let box = Box()
        let reads = AtomicCounter(), started = AtomicCounter()
        watch.describe {
            "round \(rep + 1) of \(reps): \(started.load()) of \(count) tasks started, "
                + "\(reads.load()) reads done"
        }
        runTask {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        started.increment()
                        watch.progress.increment()
                        if sleepMicros > 0 { usleep(UInt32(sleepMicros)) }  // blocking I/O in a task
                        _ = q.sync { box.n }                                // read through the cache queue
                        reads.increment()
                        watch.progress.increment()
                        q.async { box.n += 1 }                              // write back
                    }
                }
            }
        }
        let n = q.sync { box.n }   // after every write sent before
        check(reads.load() == Int64(count), "round \(rep + 1): \(reads.load()) of \(count) reads")
        check(n == count, "round \(rep + 1): box.n is \(n), not \(count)")
    }
    say("task-cache: \(reps) rounds of \(count) tasks (usleep \(sleepMicros)): every read and write done")
}

// MARK: - Shape 2: the cache pattern as queue work

/// COUNT items on the global queue in a WorkGroup, each blocking SLEEP_US,
/// then the same sync read and async write; the main thread polls the
/// group with wait(timeout:).
private func queueCache() {
    let count = argument(1, 2_000), sleepMicros = argument(2, 200)
    let deadline = Duration.seconds(environmentSeconds("LIVENESS_DEADLINE_SECONDS", 20))
    let q = WorkQueue(label: "liveness.queue-cache")
    let box = Box()
    let reads = AtomicCounter(), started = AtomicCounter()
    let group = WorkGroup()
    watch.describe { "\(started.load()) of \(count) items started, \(reads.load()) reads done" }
    let start = ContinuousClock.now
    for _ in 0..<count {
        WorkQueue.global().async(group: group) {
            started.increment()
            watch.progress.increment()
            if sleepMicros > 0 { usleep(UInt32(sleepMicros)) }
            _ = q.sync { box.n }
            reads.increment()
            watch.progress.increment()
            q.async(group: group) { box.n += 1 }
        }
    }
    while group.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
        // A second before the watchdog's deadline (a stall it reports
        // sooner, with a snapshot).
        if ContinuousClock.now - start > deadline - .seconds(1) {
            fail("hung: \(started.load()) of \(count) items started, \(reads.load()) reads done "
                 + "after \(ContinuousClock.now - start)")
        }
    }
    let n = q.sync { box.n }
    check(reads.load() == Int64(count), "\(reads.load()) of \(count) reads")
    check(n == count, "box.n is \(n), not \(count)")
    let took = milliseconds(ContinuousClock.now - start)
    say("queue-cache: \(count) items (usleep \(sleepMicros)): every read and write done in \(format(took)) ms")
}

// MARK: - Shape 3: the child of a computing parent

/// A task starts a child with Task { } and then computes for COMPUTE_MS
/// without suspending, while two other tasks ping-pong through a pair of
/// AsyncStreams the whole time. The child must start within BOUND_MS of its
/// creation (the target is about 1 ms; a child left behind its parent
/// starts only when the parent's compute ends). ROUNDS times.
private func childStart() {
    let rounds = argument(1, 3), computeMs = argument(2, 500), boundMs = argument(3, 100)
    install()
    var delays: [Double] = []
    var fewestHops = Int64.max
    for round in 0..<rounds {
        let result = SpinLocked<(delay: Double, hops: Int64)?>(nil)
        let hops = AtomicCounter()
        let phase = SpinLocked("starting the ping-pong")
        watch.describe { "round \(round + 1) of \(rounds): \(phase.withLock { $0 }), \(hops.load()) hops" }
        runTask {
            let (aStream, aInput) = AsyncStream.makeStream(of: Int.self)
            let (bStream, bInput) = AsyncStream.makeStream(of: Int.self)
            let ping = Task.detached {
                for await value in aStream {
                    hops.increment()
                    watch.progress.increment()
                    bInput.yield(value + 1)
                }
                bInput.finish()
            }
            let pong = Task.detached {
                for await value in bStream {
                    hops.increment()
                    watch.progress.increment()
                    aInput.yield(value + 1)
                }
            }
            aInput.yield(0)
            // The parent, once the ping-pong is going.
            let parent = Task.detached { () -> (delay: Double, hops: Int64) in
                while hops.load() < 1_000 { try? await Task.sleep(for: .milliseconds(1)) }
                phase.withLock { $0 = "parent computing, child not started" }
                let created = ContinuousClock.now
                let child = Task { () -> ContinuousClock.Instant in
                    let started = ContinuousClock.now
                    phase.withLock { $0 = "child started" }
                    return started
                }
                let hopsBefore = hops.load()
                var spins = 0
                while ContinuousClock.now - created < .milliseconds(computeMs) { spins &+= 1 }
                let hopsDuring = hops.load() - hopsBefore
                phase.withLock { $0 = "parent done computing (\(spins) spins), waiting for its child" }
                let started = await child.value
                return (milliseconds(started - created), hopsDuring)
            }
            let measured = await parent.value
            phase.withLock { $0 = "stopping the ping-pong" }
            aInput.finish()
            await ping.value
            await pong.value
            result.withLock { $0 = measured }
        }
        let (delay, hopsDuring) = result.withLock { $0 }!
        say("child-start: round \(round + 1): child started \(format(delay)) ms after Task { } "
              + "(\(hopsDuring) ping-pong hops during the \(computeMs) ms compute)")
        delays.append(delay)
        fewestHops = min(fewestHops, hopsDuring)
    }
    let worst = delays.max() ?? 0
    say("child-start: worst \(format(worst)) ms of \(rounds) rounds (bound \(boundMs) ms)")
    check(worst < Double(boundMs),
          "a child started \(format(worst)) ms after its creation, behind its computing parent "
          + "(bound \(boundMs) ms)")
    // The shape held: the other two tasks kept going during each compute.
    check(fewestHops > 0, "the ping-pong made no progress during a compute")
    say("child-start: every child started within \(boundMs) ms")
}

// MARK: - Shape 4: a service written the older way, as queue work

/// The key-value store behind the cache queue.
private final class Store: @unchecked Sendable {
    var values: [Int: Int] = [:]
    var index = 0
}

/// REQUESTS requests through a service written with queues: at most 64 in
/// flight (a CountingSemaphore), each a WorkGroup fan-out of four
/// sub-lookups on the global queue; a sub-lookup syncs onto a serial cache
/// queue around a blocking backend call (beside the sync, or inside it on
/// a miss); the index is loaded at start-up and rebuilt by a repeating
/// timer, holding a serial index queue for 150 ms every 300 ms, while one
/// request in eight syncs onto it; each request has an
/// asyncAfter deadline work item, cancelled when it finishes; one request
/// in four goes through a ProcedureQueue pipeline (parse, lookup,
/// respond). Every request must finish.
private func service() {
    let requests = argument(1, 1_000)
    let deadline = Duration.seconds(environmentSeconds("LIVENESS_DEADLINE_SECONDS", 20))
    let inFlight = CountingSemaphore(value: 64)
    let cache = WorkQueue(label: "liveness.service.cache")
    let index = WorkQueue(label: "liveness.service.index")
    let store = Store(), indexData = Store()
    let pipeline = ProcedureQueue(name: "liveness.service.pipeline", maxConcurrentCount: 8)
    let all = WorkGroup()
    let accepted = AtomicCounter(), finished = AtomicCounter(), subLookups = AtomicCounter()
    let expired = AtomicCounter(), rebuilds = AtomicCounter(), indexReads = AtomicCounter()
    let pipelined = AtomicCounter()
    watch.describe {
        "\(accepted.load()) of \(requests) requests accepted, \(finished.load()) finished, "
            + "\(subLookups.load()) sub-lookups, \(rebuilds.load()) index rebuilds, "
            + "\(indexReads.load()) index reads, \(expired.load()) deadlines fired"
    }

    // The index: loaded at start-up, then rebuilt by a timer, each time
    // holding the index queue for 150 ms, every 300 ms.
    index.async {
        usleep(150_000)
        indexData.index += 1
        rebuilds.increment()
    }
    let timer = RepeatingTimer.scheduled(interval: .milliseconds(300), queue: index) { _ in
        usleep(150_000)
        indexData.index += 1
        rebuilds.increment()
        watch.progress.increment()
    }

    @Sendable func backend(_ key: Int) { usleep(UInt32(200 + (key &* 7919) % 301)) }

    @Sendable func subLookup(_ key: Int) {
        if key % 8 == 0 {
            // A miss: filled under the cache queue, the backend call inside.
            cache.sync {
                backend(key)
                store.values[key % 512] = key
            }
        } else {
            let cached = cache.sync { store.values[key % 512] }
            backend(key)                                         // beside the sync
            cache.async { store.values[key % 512] = (cached ?? 0) &+ 1 }
        }
        subLookups.increment()
        watch.progress.increment()
    }

    @Sendable func lookup(_ request: Int) {
        let fanOut = WorkGroup()
        for part in 0..<4 {
            WorkQueue.global().async(group: fanOut) { subLookup(request &* 4 &+ part) }
        }
        if request % 8 == 5 {
            _ = index.sync { indexData.index }
            indexReads.increment()
        }
        fanOut.wait()
    }

    let start = ContinuousClock.now
    for request in 0..<requests {
        inFlight.wait()   // the acceptor: 64 requests in flight at most
        accepted.increment()
        all.enter()
        let expiry = WorkQueue.global().asyncAfter(delay: .seconds(5)) {
            expired.increment()
        }
        let finish: @Sendable () -> Void = {
            expiry.cancel()
            finished.increment()
            watch.progress.increment()
            inFlight.signal()
            all.leave()
        }
        WorkQueue.global().async {
            if request % 4 == 3 {
                // Through the pipeline: parse, then lookup, then respond.
                pipelined.increment()
                let parse = BlockProcedure { usleep(50) }
                let find = BlockProcedure { lookup(request) }
                let respond = BlockProcedure { _ = cache.sync { store.values.count } }
                find.addDependency(parse)
                respond.addDependency(find)
                respond.completionBlock = finish
                pipeline.addProcedures([parse, find, respond], waitUntilFinished: false)
            } else {
                lookup(request)
                finish()
            }
        }
    }
    while all.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
        if ContinuousClock.now - start > deadline - .seconds(1) {
            fail("hung: \(watch.description) after \(ContinuousClock.now - start)")
        }
    }
    let elapsed = ContinuousClock.now - start
    timer.invalidate()
    check(finished.load() == Int64(requests), "\(finished.load()) of \(requests) requests finished")
    check(subLookups.load() == Int64(requests * 4),
          "\(subLookups.load()) of \(requests * 4) sub-lookups done")
    // The timer's fires must get through too, once there was time for one.
    check(elapsed < .seconds(1) || rebuilds.load() > 1,
          "no index rebuild in \(elapsed): the timer's handler never ran")
    say("service: \(requests) requests (\(pipelined.load()) through procedures) finished in "
          + "\(format(milliseconds(elapsed))) ms; \(rebuilds.load()) index rebuilds, "
          + "\(indexReads.load()) index reads, \(expired.load()) deadlines fired")
}

// MARK: - Main

startWatchdog()
switch mode {
case "task-cache": taskCache()
case "queue-cache": queueCache()
case "child-start": childStart()
case "service": service()
default: fail("unknown mode")
}
exit(0)
