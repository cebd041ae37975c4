// Scale and stress: a dependency chain of a million procedures (200,000 in
// debug builds, which sanitizer runs are) that completes and is released
// without a stack overflow, memory back to baseline; a random acyclic graph
// with random cancels and priority changes where every procedure finishes
// exactly once and never before its dependencies; a large fan-in.

import Synchronization
import Testing
import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The chain length for this build.
private var chainLength: Int {
    #if DEBUG
    return 200_000
    #else
    return 1_000_000
    #endif
}

/// Resident memory in bytes (/proc/self/statm).
private func residentBytes() -> Int {
    let fd = open("/proc/self/statm", O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let n = read(fd, &buffer, buffer.count)
    guard n > 0 else { return 0 }
    let fields = String(decoding: buffer.prefix(n), as: UTF8.self).split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// glibc's malloc_trim (not in the Swift Glibc module): gives free memory
/// of every arena back to the system, so resident size reflects live data.
private func trimMalloc() {
    typealias Trim = @convention(c) (Int) -> Int32
    if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") {
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
    }
}

/// Builds a chain (each depends on the previous one), runs it, checks it,
/// and drops it holding only the last procedure (which holds the rest
/// through its dependencies): the worst case for recursive release.
private func runChain(length: Int) -> Bool {
    let queue = ProcedureQueue(name: "chain")
    var procedures: [Procedure] = []
    procedures.reserveCapacity(length)
    var previous: Procedure?
    for _ in 0..<length {
        let procedure = ProcCountedProcedure {}
        if let previous { procedure.addDependency(previous) }
        procedures.append(procedure)
        previous = procedure
    }
    queue.addProcedures(procedures, waitUntilFinished: true)
    let allFinished = procedures.allSatisfy { $0.isFinished }
    procedures = []
    previous = nil  // the last link goes: a million deinits, iteratively
    return allFinished && queue.procedureCount == 0
}

/// A procedure of the random graph: counts its runs.
private final class StressProcedure: Procedure, @unchecked Sendable {
    let mainRuns = Atomic<Int>(0)
    let finishes = Atomic<Int>(0)
    let violations = Atomic<Int>(0)

    override func main() {
        mainRuns.wrappingAdd(1, ordering: .relaxed)
        if !dependencies.allSatisfy({ $0.isFinished }) {
            violations.wrappingAdd(1, ordering: .relaxed)
        }
    }
}

/// Ready only once opened; readiness notifications may come at any time.
private final class FlickeringProcedure: Procedure, @unchecked Sendable {
    let opened = Atomic<Bool>(false)
    let runs = Atomic<Int>(0)

    override var isReady: Bool {
        super.isReady && opened.load(ordering: .acquiring)
    }

    override func main() {
        runs.wrappingAdd(1, ordering: .relaxed)
    }
}

@Suite(.serialized) struct ProcedureStressTests {
    @Test func readinessNotificationsRacingWithLaunches() {
        let count = 20_000
        let procedures = (0..<count).map { _ in FlickeringProcedure() }
        let queue = ProcedureQueue(name: "flicker")
        queue.addProcedures(procedures, waitUntilFinished: false)
        // Two threads open them and notify (twice); a third notifies at
        // random, so notifications race with runners launching them.
        let opening = ProcBox(true)
        procDetach {
            var random = ProcSplitMix64(seed: 7)
            while opening.value {
                procedures[Int(random.next() % UInt64(count))].notifyReadinessChanged()
            }
        }
        onThreads(2) { thread in
            for (index, procedure) in procedures.enumerated() where index % 2 == thread {
                procedure.opened.store(true, ordering: .releasing)
                procedure.notifyReadinessChanged()
                procedure.notifyReadinessChanged()
            }
        }
        queue.waitUntilAllFinished()
        opening.value = false
        let ranOnce = procedures.filter { $0.isFinished && $0.runs.load(ordering: .relaxed) == 1 }.count
        #expect(ranOnce == count)
    }

    @Test func aLongChainCompletesAndIsReleasedWithoutRecursion() {
        let before = procLiveCount.load(ordering: .relaxed)
        let ok = runChain(length: chainLength)
        #expect(ok)
        let after = procLiveCount.load(ordering: .relaxed)
        #expect(after == before)  // every procedure was freed
    }

    @Test("After a long chain, resident memory returns to its baseline")
    func chainMemoryReturnsToBaseline() async {
        if procUnderSanitizer { return }  // sanitizer allocators keep freed memory resident
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let length: Int
            #if DEBUG
            length = 200_000
            #else
            length = 1_000_000
            #endif
            _ = runChain(length: 1_000)  // warm up the runtime's own allocations
            trimMalloc()
            let baseline = residentBytes()
            guard runChain(length: length) else { exit(2) }
            trimMalloc()
            let after = residentBytes()
            let grown = after - baseline
            let message = "baseline \(baseline >> 20) MiB, after \(after >> 20) MiB\n"
            _ = message.withCString { write(2, $0, strlen($0)) }
            if grown > 16 << 20 { exit(1) }
        }
        if let result {
            // "baseline N MiB, after M MiB", for the log.
            print("chain memory:", String(decoding: result.standardErrorContent, as: UTF8.self), terminator: "")
        }
    }

    @Test("Random acyclic graph with random cancels and priority changes")
    func randomGraph() {
        let count = 100_000  // also under TSan (about 10 s there)
        var generator = ProcSplitMix64(seed: 0x5EED_0F_0CE5)
        // Creation order is random relative to the graph's order, so about
        // half of the edges go against it (the cycle check's search path).
        let created = (0..<count).map { _ in StressProcedure() }
        var topological = Array(0..<count)
        topological.shuffle(using: &generator)
        let finishEvents = Atomic<Int>(0)
        let orderViolations = Atomic<Int>(0)
        var edges = 0
        for (position, index) in topological.enumerated() {
            let procedure = created[index]
            let dependencyCount = Int(generator.next() % 4)
            for _ in 0..<dependencyCount where position > 0 {
                let back = 1 + Int(generator.next() % UInt64(min(position, 64)))
                procedure.addDependency(created[topological[position - back]])
                edges += 1
            }
            procedure.queuePriority = Procedure.QueuePriority.allCases[Int(generator.next() % 5)]
            procedure.addObserver { procedure, event in
                guard event == .finished, let stress = procedure as? StressProcedure else { return }
                stress.finishes.wrappingAdd(1, ordering: .relaxed)
                finishEvents.wrappingAdd(1, ordering: .relaxed)
                if !procedure.dependencies.allSatisfy({ $0.isFinished }) {
                    orderViolations.wrappingAdd(1, ordering: .relaxed)
                }
            }
        }
        #expect(edges > count)

        let queues = [
            ProcedureQueue(name: "stress default"),
            ProcedureQueue(name: "stress 1", maxConcurrentCount: 1),
            ProcedureQueue(name: "stress 3", maxConcurrentCount: 3),
            ProcedureQueue(name: "stress 8", maxConcurrentCount: 8),
        ]
        var batches: [[Procedure]] = Array(repeating: [], count: queues.count)
        for procedure in created {
            batches[Int(generator.next() % UInt64(queues.count))].append(procedure)
        }
        // Meddle while they run: cancel and reprioritise at random.
        let meddling = ProcBox(true)
        let meddled = Atomic<Int>(0)
        let targets = created
        procDetach {
            var random = ProcSplitMix64(seed: 42)
            while meddling.value {
                let victim = targets[Int(random.next() % UInt64(targets.count))]
                if random.next() % 3 == 0 {
                    victim.cancel()
                } else {
                    victim.queuePriority = Procedure.QueuePriority.allCases[Int(random.next() % 5)]
                }
                meddled.wrappingAdd(1, ordering: .relaxed)
                if random.next() % 64 == 0 { sched_yield() }
            }
            meddled.wrappingAdd(1_000_000_000, ordering: .relaxed)  // done marker
        }
        for (queue, batch) in zip(queues, batches) {
            queue.addProcedures(batch, waitUntilFinished: false)
        }
        for queue in queues {
            queue.waitUntilAllFinished()
        }
        meddling.value = false
        _ = procWaitUntil { meddled.load(ordering: .relaxed) >= 1_000_000_000 }

        let finished = created.filter { $0.isFinished }.count
        let exactlyOnce = created.filter { $0.finishes.load(ordering: .relaxed) == 1 }.count
        let mainTwice = created.filter { $0.mainRuns.load(ordering: .relaxed) > 1 }.count
        let cancelledButRan = created.filter {
            $0.isCancelled && $0.mainRuns.load(ordering: .relaxed) > 0
        }.count
        let mainViolations = created.reduce(0) { $0 + $1.violations.load(ordering: .relaxed) }
        let events = finishEvents.load(ordering: .relaxed)
        let violations = orderViolations.load(ordering: .relaxed)
        #expect(finished == count)
        #expect(exactlyOnce == count)
        #expect(events == count)
        #expect(mainTwice == 0)
        #expect(violations == 0)
        #expect(mainViolations == 0)
        // Cancelled while running is allowed; a procedure cancelled before
        // it started never runs — counted here only as a sanity bound.
        #expect(cancelledButRan <= count)
        #expect(queues.allSatisfy { $0.procedureCount == 0 })
    }

    @Test func aFanInOfTenThousand() {
        let count = 10_000
        let queue = ProcedureQueue(name: "fan-in")
        let done = Atomic<Int>(0)
        let sawAll = ProcBox(false)
        let sink = BlockProcedure { sawAll.value = done.load(ordering: .acquiring) == count }
        var sources: [Procedure] = []
        for _ in 0..<count {
            let source = BlockProcedure { done.wrappingAdd(1, ordering: .releasing) }
            sink.addDependency(source)  // the sink was created first: against creation order
            sources.append(source)
        }
        #expect(sink.dependencies.count == count)
        queue.addProcedures(sources + [sink], waitUntilFinished: true)
        #expect(sawAll.value)
    }
}

/// A small, seedable random generator (deterministic tests).
private struct ProcSplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
