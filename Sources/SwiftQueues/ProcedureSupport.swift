//===----------------------------------------------------------------------===//
//
// SwiftQueues — support for the operation queue: per-thread state (the
// current ProcedureQueue, the runner's inline-finish hand-off, the iterative
// release list), thread priority as a nice value, and small C-callback boxes.
//
//===----------------------------------------------------------------------===//

import CSwiftQueues
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - A small lock

/// A lock for a procedure's own short critical sections, built on inlined
/// atomics: uncontended it is one compare-and-swap and one store, it needs no
/// allocation, and thread sanitizers see its ordering (Synchronization's
/// Mutex locks inside a precompiled library they cannot see). Contended, a
/// waiter spins briefly, then yields the CPU.
struct ProcedureLockWord: ~Copyable {
    private let state = Atomic<UInt32>(0)

    init() {}

    @inline(__always)
    func lock() {
        if state.compareExchange(expected: 0, desired: 1, successOrdering: .acquiring,
                                 failureOrdering: .relaxed).exchanged {
            return
        }
        lockSlow()
    }

    @inline(never)
    private func lockSlow() {
        var spins = 0
        while true {
            if state.load(ordering: .relaxed) == 0
                && state.compareExchange(expected: 0, desired: 1, successOrdering: .acquiring,
                                         failureOrdering: .relaxed).exchanged {
                return
            }
            spins += 1
            if spins > 64 { sched_yield() }
        }
    }

    @inline(__always)
    func unlock() {
        state.store(0, ordering: .releasing)
    }
}

// MARK: - Per-thread state

/// What one thread knows about the procedures it runs. Lives in raw memory
/// behind a pthread key (no exclusivity checks on the hot path), touched only
/// by its own thread.
struct ProcedureThreadState {
    /// The queue whose runner is on this thread (`ProcedureQueue.current`),
    /// or whose BlockProcedure's blocks this thread helps run.
    var currentQueue: Unmanaged<ProcedureQueue>?
    /// Whether this is the process's main thread (`ProcedureQueue.current`
    /// is `main` there outside procedures); fixed when the state is made.
    var isMainThread = false
    /// The procedure this thread's runner is starting, while `start()` runs.
    var runnerProcedure: UnsafeMutableRawPointer?
    /// Set by the finish hook when `runnerProcedure` finished on this thread
    /// inside `start()`: the runner then does the queue's bookkeeping itself,
    /// under the same lock acquisition that picks the next procedure.
    var finishedInline = false
    /// The completion block handed over with an inline finish.
    var deferredCompletion: (@Sendable () -> Void)?
    /// True while this thread drains `releaseBacklog`.
    var releasing = false
    /// Dependency lists of deinitialised procedures, released iteratively.
    var releaseBacklog: [[Procedure]] = []
}

/// The pthread key of `ProcedureThreadState`; the destructor frees it when
/// the thread exits.
private let procedureThreadKey: pthread_key_t = {
    var key = pthread_key_t()
    let rc = pthread_key_create(&key) { raw in
        guard let raw else { return }
        let state = raw.assumingMemoryBound(to: ProcedureThreadState.self)
        state.deinitialize(count: 1)
        state.deallocate()
    }
    if rc != 0 {
        misuse("ProcedureQueue", "pthread_key_create failed: \(String(cString: strerror(rc)))")
    }
    return key
}()

/// This thread's state, created on first use.
@inline(__always)
func procedureThreadState() -> UnsafeMutablePointer<ProcedureThreadState> {
    if let raw = pthread_getspecific(procedureThreadKey) {
        return raw.assumingMemoryBound(to: ProcedureThreadState.self)
    }
    return makeProcedureThreadState()
}

/// Whether the calling thread is the process's main thread: its kernel
/// thread id is the process id. (Glibc's module does not declare gettid, so
/// the id is read from /proc/thread-self, "<pid>/task/<tid>", once per
/// thread.)
private func callerIsMainThread() -> Bool {
    var buffer = [CChar](repeating: 0, count: 64)
    let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard n > 0 else { return false }
    let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return link.hasSuffix("/task/\(getpid())")
}

@inline(never)
private func makeProcedureThreadState() -> UnsafeMutablePointer<ProcedureThreadState> {
    let state = UnsafeMutablePointer<ProcedureThreadState>.allocate(capacity: 1)
    state.initialize(to: ProcedureThreadState())
    state.pointee.isMainThread = callerIsMainThread()
    pthread_setspecific(procedureThreadKey, state)
    return state
}

// MARK: - Iterative release

/// Releases dependency lists without recursion. A procedure keeps strong
/// references to its dependencies (so `dependencies` stays meaningful after
/// they finish); releasing the last procedure of a long chain would otherwise
/// run one nested `deinit` per link and overflow the stack (Foundation's
/// OperationQueue crashes this way on a 50,000-long chain). Here a `deinit`
/// that runs inside another one only queues its list; the outermost one
/// drains the queue in a loop, so the depth stays at two frames.
enum ProcedureReleaser {
    static func release(_ list: consuming [Procedure]) {
        let state = procedureThreadState()
        if state.pointee.releasing {
            state.pointee.releaseBacklog.append(consume list)
            return
        }
        state.pointee.releasing = true
        var batch: [Procedure]? = consume list
        while true {
            batch = nil  // may run deinits, which append to the backlog
            guard let next = state.pointee.releaseBacklog.popLast() else { break }
            batch = next
        }
        _ = batch
        state.pointee.releasing = false
    }
}

// MARK: - Thread priority

/// Thread priority (0.0 ... 1.0) as a Linux per-thread nice value.
enum ProcedureThreadPriority {
    /// The lowest nice value (highest priority) this process may set and
    /// later undo: -20 with CAP_SYS_NICE, else 20 - RLIMIT_NICE (so 20, i.e.
    /// "none", under the default limit of 0).
    static let lowestPermittedNice: Int32 = {
        if hasCapSysNice() { return -20 }
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(13 /* RLIMIT_NICE */), &limit) == 0 else { return 20 }
        if limit.rlim_cur == rlim_t.max { return -20 }  // RLIM_INFINITY
        return Int32(max(-20, 20 - Int(min(limit.rlim_cur, 40))))
    }()

    /// Whether the effective capability set holds CAP_SYS_NICE (bit 23).
    private static func hasCapSysNice() -> Bool {
        guard let file = fopen("/proc/self/status", "r") else { return geteuid() == 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) },
                              as: UTF8.self)
            if text.hasPrefix("CapEff:") {
                let hex = text.dropFirst(7).trimmingPrefix { $0 == " " || $0 == "\t" }
                    .prefix { $0.isHexDigit }
                guard let bits = UInt64(hex, radix: 16) else { return false }
                return bits & (1 << 23) != 0
            }
        }
        return false
    }

    /// The nice value for `priority`: 0.0 → 19, 0.5 → 0, 1.0 → -20,
    /// linear on each half; values outside 0...1 are clamped.
    static func nice(for priority: Double) -> Int32 {
        let p = priority.isNaN ? 0.5 : min(1.0, max(0.0, priority))
        if p <= 0.5 {
            return Int32(((0.5 - p) / 0.5 * 19).rounded())
        }
        return -Int32(((p - 0.5) / 0.5 * 20).rounded())
    }

    private static var who: id_t { 0 }  // Linux: PRIO_PROCESS, 0 = the calling thread

    /// The calling thread's nice value.
    static func current() -> Int32 {
        errno = 0
        return getpriority(__priority_which_t(PRIO_PROCESS.rawValue), who)
    }

    /// Moves the calling thread to `priority` as far as the OS allows and
    /// returns the nice value to restore, or nil when nothing changed. A
    /// change is made only if it can be undone: raising priority above what
    /// the process may set is clamped; a thread already running above that
    /// bound is left alone (lowering it could not be undone).
    static func apply(_ priority: Double) -> Int32? {
        let old = current()
        let floor = lowestPermittedNice
        guard old >= floor else { return nil }
        let target = max(nice(for: priority), floor)
        guard target != old else { return nil }
        guard setpriority(__priority_which_t(PRIO_PROCESS.rawValue), who, target) == 0 else {
            return nil
        }
        return old
    }

    /// Undoes `apply`.
    static func restore(_ saved: Int32?) {
        guard let saved else { return }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), who, saved)
    }
}

/// The monotonic clock in nanoseconds (vDSO: no system call).
@inline(__always)
func procedureClockNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

// MARK: - C callback boxes

/// A closure carried through `sq_async_f` / `sq_group_notify_f` as a
/// retained context pointer.
final class ProcedureCallbackBox: Sendable {
    let body: @Sendable () -> Void

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
    }

    /// Runs `body` once on `queue` (asynchronously).
    static func async(on queue: sq_queue_t, _ body: @escaping @Sendable () -> Void) {
        sq_async_f(queue, Unmanaged.passRetained(ProcedureCallbackBox(body)).toOpaque(),
                   procedureCallbackEntry)
    }

    /// Runs `body` on `queue` once `group` is empty.
    static func notify(_ group: sq_group_t, on queue: sq_queue_t,
                       _ body: @escaping @Sendable () -> Void) {
        sq_group_notify_f(group, queue,
                          Unmanaged.passRetained(ProcedureCallbackBox(body)).toOpaque(),
                          procedureCallbackEntry)
    }
}

/// The C entry point of `ProcedureCallbackBox`: takes the box back and runs it.
let procedureCallbackEntry: sq_function_t = { context in
    Unmanaged<ProcedureCallbackBox>.fromOpaque(context.unsafelyUnwrapped)
        .takeRetainedValue().body()
}

/// The default-priority global queue (completion blocks and async waits).
@inline(__always)
func procedureDefaultGlobalQueue() -> sq_queue_t {
    sq_get_global_queue(Int(SQ_QUEUE_PRIORITY_DEFAULT), 0)
}

/// Stops the process with one line on stderr naming the API and the
/// procedures involved (docs/ARCHITECTURE.md, "Error policy"), in every build mode.
func procedureMisuse(_ message: String) -> Never {
    misuseLine(message)
}
