// Helpers for the operation-queue tests (Procedure*Tests.swift): thread-safe
// logs and boxes, polling with a timeout, detached threads, in-flight
// counters and rendezvous; plus the tests of the helpers' assumptions.

import Synchronization
import Testing
import SwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A thread-safe list of log lines. (Guarded by SwiftQueues' SpinLock, which
/// thread sanitizers see; Synchronization's Mutex locks in a library they
/// cannot see, so they would report false races.)
final class ProcLog: @unchecked Sendable {
    private let lock = SpinLock()
    private var storage: [String] = []

    func append(_ line: String) {
        lock.withLock { storage.append(line) }
    }

    var lines: [String] { lock.withLock { storage } }
}

/// A thread-safe value.
final class ProcBox<Value: Sendable>: @unchecked Sendable {
    private let lock = SpinLock()
    private var storage: Value

    init(_ value: Value) {
        storage = value
    }

    var value: Value {
        get { lock.withLock { storage } }
        set { lock.withLock { storage = newValue } }
    }

    func update<R>(_ body: (inout Value) -> R) -> R {
        lock.withLock { body(&storage) }
    }
}

/// Polls `condition` every millisecond until it holds or `seconds` pass;
/// returns whether it held.
func procWaitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = procNow() + seconds
    while !condition() {
        if procNow() > deadline { return condition() }
        usleep(1_000)
    }
    return true
}

/// The monotonic clock in seconds.
func procNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Sleeps for `milliseconds`.
func procSleep(_ milliseconds: Int) {
    usleep(UInt32(milliseconds * 1_000))
}

/// The calling thread's pthread handle.
func procThreadID() -> UInt {
    UInt(pthread_self())
}

/// The calling thread's nice value (Linux: per thread).
func procNice() -> Int32 {
    errno = 0
    return getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
}

/// Whether the process runs under ThreadSanitizer (its runtime is linked).
let procUnderTSan: Bool = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil

/// Whether the process runs under any sanitizer (whose allocators keep freed
/// memory resident, so resident-size checks mean nothing).
let procUnderSanitizer: Bool = procUnderTSan
    || dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") != nil

private final class DetachedJob: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Runs `body` on a new thread of its own and returns at once.
func procDetach(_ body: @escaping @Sendable () -> Void) {
    let job = Unmanaged.passRetained(DetachedJob(body)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { argument in
        Unmanaged<DetachedJob>.fromOpaque(argument!).takeRetainedValue().body()
        return nil
    }, job)
    precondition(rc == 0, "pthread_create failed: \(rc)")
    pthread_detach(thread)
}

/// Counts how many bodies run at once and remembers the maximum.
final class ProcInFlight: Sendable {
    private let current = Atomic<Int>(0)
    private let maximum = Atomic<Int>(0)

    func enter() {
        let now = current.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
        var seen = maximum.load(ordering: .relaxed)
        while now > seen {
            let (done, actual) = maximum.compareExchange(expected: seen, desired: now,
                                                         ordering: .relaxed)
            if done { break }
            seen = actual
        }
    }

    func exit() {
        current.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    var max: Int { maximum.load(ordering: .relaxed) }
    var now: Int { current.load(ordering: .sequentiallyConsistent) }
}

/// `parties` arrivals; each waits (up to a timeout) for all to arrive.
final class ProcRendezvous: Sendable {
    private let parties: Int
    private let arrived = Atomic<Int>(0)

    init(parties: Int) {
        self.parties = parties
    }

    /// Arrives and waits; returns whether everyone arrived in time.
    func arrive(timeout seconds: Double = 5) -> Bool {
        arrived.wrappingAdd(1, ordering: .sequentiallyConsistent)
        return procWaitUntil(seconds: seconds) { arrived.load(ordering: .sequentiallyConsistent) >= parties }
    }
}

/// Whether the calling thread is the process's main thread (tid == pid).
func procIsMainThread() -> Bool {
    var buffer = [CChar](repeating: 0, count: 128)
    let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard n > 0 else { return false }
    let path = String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return path.split(separator: "/").last.flatMap { Int32($0) } == getpid()
}

/// Counts live instances of `ProcCountedProcedure`.
let procLiveCount = Atomic<Int>(0)

/// A block procedure that counts its live instances (deinit decrements).
final class ProcCountedProcedure: BlockProcedure, @unchecked Sendable {
    override init(_ block: @escaping @Sendable () -> Void) {
        procLiveCount.wrappingAdd(1, ordering: .relaxed)
        super.init(block)
    }

    deinit {
        procLiveCount.wrappingSubtract(1, ordering: .relaxed)
    }
}

@Suite struct ProcedureSupportTests {
    @Test func niceValueMappingIsLinearAndClamped() {
        #expect(Procedure.niceValue(forThreadPriority: 0.0) == 19)
        #expect(Procedure.niceValue(forThreadPriority: 0.5) == 0)
        #expect(Procedure.niceValue(forThreadPriority: 1.0) == -20)
        #expect(Procedure.niceValue(forThreadPriority: 0.25) == 10)  // 9.5 rounds away from zero
        #expect(Procedure.niceValue(forThreadPriority: 0.75) == -10)
        #expect(Procedure.niceValue(forThreadPriority: -3) == 19)  // clamped
        #expect(Procedure.niceValue(forThreadPriority: 7) == -20)
    }

    @Test func rendezvousTimesOutAlone() {
        #expect(!ProcRendezvous(parties: 2).arrive(timeout: 0.05))
    }
}
