//===----------------------------------------------------------------------===//
//
// SwiftQueues — Procedure: one unit of work for a ProcedureQueue
// (NSOperation's behaviour with explicit state changes instead of KVO,
// O(1) work per state change and no recursion proportional to the graph).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a ``Procedure`` observer is told about. Observers replace KVO: one
/// callback per change, after the change, on the thread that made it.
public enum ProcedureEvent: Sendable, Hashable, CaseIterable {
    /// The procedure may have become ready: in a queue, its last unfinished
    /// dependency finished or was removed; anywhere, a subclass called
    /// ``Procedure/notifyReadinessChanged()`` (readiness may be true or false
    /// then; read ``Procedure/isReady``). Outside a queue dependencies are
    /// not tracked, only checked when asked: poll ``Procedure/isReady`` or
    /// observe the dependencies' ``finished``.
    case ready
    /// The procedure started executing (``Procedure/isExecuting`` is true).
    case executing
    /// The procedure finished, normally or after cancellation
    /// (``Procedure/isFinished`` is true, ``Procedure/isExecuting`` false).
    case finished
    /// ``Procedure/cancel()`` set the cancelled flag.
    case cancelled
    /// A dependency was added or removed.
    case dependencies
    /// ``Procedure/queuePriority`` changed.
    case priority
    /// ``Procedure/threadPriority`` changed.
    case threadPriority
    /// ``Procedure/completionBlock`` was set or cleared.
    case completionBlock
}

/// A registered observer, returned by ``Procedure/addObserver(_:)``; pass it
/// to ``Procedure/removeObserver(_:)`` to unregister.
public final class ProcedureObservation: Sendable {
    fileprivate init() {}
}

/// One observer: its token and its callback.
struct ProcedureObserverEntry: Sendable {
    let token: ObjectIdentifier
    let handler: @Sendable (Procedure, ProcedureEvent) -> Void
}

/// The state word: phase, flags and the count of unfinished dependencies in
/// one atomic, so "ready and not started" is a single compare-and-swap.
enum ProcedureWord {
    static let phaseMask: UInt64 = 0b11
    static let initial: UInt64 = 0
    static let launched: UInt64 = 1  // a queue (or manual start) claimed it
    static let executing: UInt64 = 2
    static let finished: UInt64 = 3
    static let enqueued: UInt64 = 1 << 2
    static let cancelled: UInt64 = 1 << 3
    static let observed: UInt64 = 1 << 4
    /// A dependency was added at some point (so deinit has a list to drop).
    static let hasDependencies: UInt64 = 1 << 5
    /// The pending count is tracked (the procedure is in a queue and
    /// registered with its dependencies); otherwise readiness is computed
    /// from the dependencies.
    static let tracked: UInt64 = 1 << 6
    /// Another procedure depends on this one at some point (so finishing
    /// clears its reverse edges in the graph).
    static let hasDependents: UInt64 = 1 << 7
    /// Something that finishing must take out of `locked` was registered
    /// (a tracked dependent, a finish waiter, a completion block). Set by
    /// compare-and-swap only while not finished, under `locked`: a finish
    /// that sees it clear needs no lock, and one that sees it set takes the
    /// lock after the registration is complete.
    static let needsFinishLock: UInt64 = 1 << 8
    static let pendingShift: UInt64 = 32
    static let pendingOne: UInt64 = 1 << 32

    @inline(__always) static func phase(_ word: UInt64) -> UInt64 { word & phaseMask }
    @inline(__always) static func pending(_ word: UInt64) -> UInt64 { word >> pendingShift }
}

/// The fields guarded by a procedure's own lock (`Procedure.withLocked`).
struct ProcedureLocked {
    var name: String?
    var dependencies: [Procedure] = []
    /// Dependents whose pending count includes this procedure: only tracked
    /// ones (in a queue), unretained — the queue holds each until it
    /// finishes, and it cannot finish before this procedure does.
    var dependents: [Unmanaged<Procedure>] = []

    var observers: [ProcedureObserverEntry] = []
    var completionBlock: (@Sendable () -> Void)?
    var finishWaiters: [@Sendable () -> Void] = []
    /// Identities of `dependencies`, kept once the list is long enough that
    /// a linear duplicate check would make a large fan-in quadratic.
    var dependencyIDs: Set<ObjectIdentifier>?

    static let indexThreshold = 16

    func containsDependency(_ procedure: Procedure) -> Bool {
        if let ids = dependencyIDs { return ids.contains(ObjectIdentifier(procedure)) }
        return dependencies.contains { $0 === procedure }
    }

    mutating func appendDependency(_ procedure: Procedure) {
        dependencies.append(procedure)
        if dependencyIDs != nil {
            dependencyIDs!.insert(ObjectIdentifier(procedure))
        } else if dependencies.count >= Self.indexThreshold {
            dependencyIDs = Set(dependencies.map(ObjectIdentifier.init))
        }
    }

    mutating func removeDependency(_ procedure: Procedure) -> Bool {
        if let ids = dependencyIDs, !ids.contains(ObjectIdentifier(procedure)) { return false }
        guard let index = dependencies.firstIndex(where: { $0 === procedure }) else { return false }
        dependencies.remove(at: index)
        dependencyIDs?.remove(ObjectIdentifier(procedure))
        return true
    }
}

/// A unit of work with state, dependencies, priority, cancellation and a
/// completion block: SwiftQueues' `Operation`.
///
/// Subclass it and override ``main()`` for synchronous work: ``start()``
/// (called by a ``ProcedureQueue``, or by you) checks readiness, skips
/// cancelled procedures, marks the procedure executing, runs `main()` at the
/// procedure's ``threadPriority`` and marks it finished.
///
///     final class Resize: Procedure, @unchecked Sendable {
///         let image: Image
///         private(set) var output: Image?   // written by main, read after finish
///         init(_ image: Image) { self.image = image }
///         override func main() {
///             guard !isCancelled else { return }
///             output = image.resized()
///         }
///     }
///
/// **Asynchronous procedures** either return true from ``isAsynchronous``
/// and have `main()` start the work, or override `start()` (never calling
/// `super.start()`) and call ``markExecuting()`` themselves; either way they
/// call ``finish()`` when the work is done, from any thread. There is no
/// KVO: these two calls are the state changes that dependents, queues and
/// observers react to. A procedure that never calls `finish()` keeps its
/// dependents waiting forever.
///
/// **States.** ``isReady`` (all dependencies finished; overridable),
/// ``isExecuting``, ``isFinished`` and ``isCancelled`` are lock-free atomic
/// reads, safe from any thread; ``state`` combines them. A procedure finishes
/// exactly once.
///
/// **Cancellation** is cooperative: ``cancel()`` sets a flag that `main()`
/// polls (an atomic load, cheap enough for every loop iteration). A
/// procedure cancelled before it starts finishes without running `main()`.
/// Cancelled counts as finished for dependents. Unlike Foundation, a
/// cancelled procedure still finishes *after* its own dependencies (it does
/// not jump the graph), so `isFinished` always follows dependency order.
///
/// **Dependencies** (``addDependency(_:)``) may cross queues and form any
/// acyclic graph. Adding an edge that would close a cycle stops the process
/// with a message naming every procedure on the cycle (never a silent hang).
/// Dependencies may be added until the procedure starts (also after it was
/// enqueued: the queue then waits for them).
///
/// **Completion block.** Runs once, after the procedure finished — also
/// when it was cancelled — asynchronously on the default-priority global
/// queue (so at default thread priority, and never on a stack that holds a
/// lock). A queue's ``ProcedureQueue/waitUntilAllFinished()`` also waits for
/// the completion blocks of its procedures.
///
/// **Ownership.** A queue holds a procedure only until it finishes; keep
/// your own reference to read results. A procedure holds its dependencies
/// (``dependencies`` lists them, finished or not) but not its dependents.
/// Releasing a chain of any length is iterative: no stack overflow.
///
/// Subclasses that add stored state must make it thread-safe themselves and
/// declare `@unchecked Sendable`.
open class Procedure: @unchecked Sendable, CustomStringConvertible {
    /// The relative order of ready procedures in one ``ProcedureQueue``:
    /// higher first, first-in first-out among equals. Readiness comes first:
    /// priority never lets a procedure run before its dependencies.
    public enum QueuePriority: Int, Sendable, Comparable, CaseIterable {
        /// -8
        case veryLow = -8
        /// -4
        case low = -4
        /// 0, the default.
        case normal = 0
        /// 4
        case high = 4
        /// 8
        case veryHigh = 8

        /// Orders by raw value.
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

        /// The queue's bucket index, 0 (veryLow) ... 4 (veryHigh).
        @inline(__always) var bucket: Int { (rawValue + 8) >> 2 }
    }

    /// A summary of the state flags.
    public enum State: Sendable, Hashable {
        /// Waiting for dependencies (or a custom readiness condition).
        case pending
        /// Ready to start (or being started).
        case ready
        /// Running.
        case executing
        /// Done, normally or after cancellation.
        case finished
    }

    // MARK: Storage (hot fields first: they share cache lines)

    final let word = Atomic<UInt64>(0)
    /// Hooks that are using `owner` right now; a finish waits for zero
    /// before telling the queue (which may then be freed).
    final let hookCount = Atomic<Int>(0)
    /// The queue holding the procedure, unretained (a queue keeps itself
    /// alive while it has unfinished procedures). Written before the
    /// enqueued bit; read by the finish, and by hooks only between
    /// `hookCount` increments while the procedure is not finished.
    final let owner = Atomic<Unmanaged<ProcedureQueue>?>(nil)
    // Owned by the ProcedureQueue that holds the procedure (its lock); atomics
    // only to avoid exclusivity checks — every access is under that lock.
    final let queueNext = Atomic<Unmanaged<Procedure>?>(nil)
    final let queuePrev = Atomic<Unmanaged<Procedure>?>(nil)
    final let readyNext = Atomic<Unmanaged<Procedure>?>(nil)
    final let readyPrev = Atomic<Unmanaged<Procedure>?>(nil)
    /// The ready bucket it is in, or -1.
    final let readyBucket = Atomic<Int>(-1)
    final let priorityStorage = Atomic<Int>(0)
    final let threadPriorityBits = Atomic<UInt64>((0.5).bitPattern)
    /// Admitted by its queue's barrier accounting (may be scheduled).
    final let admitted = Atomic<Bool>(false)
    /// A barrier of its queue.
    final let isBarrier = Atomic<Bool>(false)
    /// When its queue took it (the queue's count of additions): orders
    /// ready procedures of one priority, as Foundation's queue does.
    final let queueOrder = Atomic<Int>(0)
    final let lockWord = ProcedureLockWord()
    /// Guarded by `lockWord`: use `withLocked`.
    final var lockedState = ProcedureLocked()
    /// Creation number: names unnamed procedures in messages.
    public final let serial: Int
    /// Topological order among unfinished procedures; guarded by the graph
    /// lock (see ProcedureGraph.swift).
    final var graphOrder: Int
    /// The procedures that depend on this one, for cycle detection only;
    /// unretained, guarded by the graph lock (a dependent's deinit removes
    /// itself under that lock; finishing clears the list).
    final var graphDependents: [Unmanaged<Procedure>] = []

    /// Creates a procedure with no dependencies, normal priority, thread
    /// priority 0.5 and no completion block.
    public init() {
        let n = ProcedureGraph.nextSerial()
        serial = n
        graphOrder = n
    }

    deinit {
        if word.load(ordering: .relaxed) & ProcedureWord.hasDependencies == 0 { return }
        ProcedureGraph.procedureWillDeinit(self)
        // Hand the list over (no copy left here): releasing it may free the
        // rest of a chain, which the releaser does iteratively.
        ProcedureReleaser.release(withLocked { state -> [Procedure] in
            var list: [Procedure] = []
            swap(&list, &state.dependencies)
            state.dependencyIDs = nil
            return list
        })
    }

    // MARK: Overridable behaviour

    /// Runs the procedure on the calling thread.
    ///
    /// The default implementation: stops the process if the procedure is in
    /// a queue (the queue starts it), not ready, already started or
    /// finished; finishes at once if it was cancelled; otherwise marks it
    /// executing, runs ``main()`` at ``threadPriority`` and, unless
    /// ``isAsynchronous``, marks it finished. Asynchronous subclasses may
    /// override it without calling `super.start()`; they then call
    /// ``markExecuting()`` and ``finish()`` themselves (and check
    /// ``isCancelled`` first).
    open func start() {
        claimStart(api: "start()")
        if isCancelled {
            finishClaimed()
            return
        }
        enterExecuting(api: "start()")
        runMain()
        if !isAsynchronous {
            finishClaimed()
        }
    }

    /// The work. The default does nothing. Poll ``isCancelled`` and return
    /// early when it is true.
    open func main() {}

    /// Whether the procedure may start: all dependencies have finished.
    /// Override to add conditions (return `super.isReady && condition`) and
    /// call ``notifyReadinessChanged()`` whenever the condition may have
    /// changed, or a queue will not notice.
    open var isReady: Bool {
        let w = word.load(ordering: .acquiring)
        if w & ProcedureWord.tracked != 0 { return ProcedureWord.pending(w) == 0 }
        if w & ProcedureWord.hasDependencies == 0 { return true }
        return withLocked { $0.dependencies.allSatisfy { $0.isFinished } }
    }

    /// Whether the procedure finishes after ``start()`` returns (it calls
    /// ``finish()`` later itself). Default false.
    open var isAsynchronous: Bool { false }

    /// Requests cancellation: sets ``isCancelled`` (idempotent; no effect on
    /// a finished procedure). A procedure that has not started will finish
    /// without running ``main()``, once its dependencies have finished; a
    /// running one should notice and return early. Overrides must call
    /// `super.cancel()`.
    open func cancel() {
        var old = word.load(ordering: .relaxed)
        while true {
            if ProcedureWord.phase(old) == ProcedureWord.finished
                || old & ProcedureWord.cancelled != 0 {
                return
            }
            let (done, current) = word.compareExchange(
                expected: old, desired: old | ProcedureWord.cancelled,
                successOrdering: .acquiringAndReleasing, failureOrdering: .relaxed)
            if done { break }
            old = current
        }
        emit(.cancelled)
        if old & ProcedureWord.enqueued != 0
            && ProcedureWord.phase(old) == ProcedureWord.initial {
            // Not-ready-by-override procedures become schedulable.
            withOwningQueue { $0.procedureMayBeReady(self) }
        }
    }

    /// How the procedure appears in messages: its name in quotes, or its
    /// class and creation number.
    open var description: String {
        if let name = self.name { return "'\(name)'" }
        return "\(type(of: self))#\(serial)"
    }

    // MARK: State

    /// Whether ``cancel()`` was called. One relaxed atomic load: cheap to
    /// poll in every loop iteration.
    public final var isCancelled: Bool {
        word.load(ordering: .relaxed) & ProcedureWord.cancelled != 0
    }

    /// Whether the procedure is running (between ``markExecuting()`` or the
    /// default ``start()`` and ``finish()``).
    public final var isExecuting: Bool {
        ProcedureWord.phase(word.load(ordering: .acquiring)) == ProcedureWord.executing
    }

    /// Whether the procedure has finished (normally or after cancellation).
    /// Terminal.
    public final var isFinished: Bool {
        ProcedureWord.phase(word.load(ordering: .acquiring)) == ProcedureWord.finished
    }

    /// `isAsynchronous` under its older name.
    public final var isConcurrent: Bool { isAsynchronous }

    /// The state flags in one value.
    public final var state: State {
        switch ProcedureWord.phase(word.load(ordering: .acquiring)) {
        case ProcedureWord.finished: return .finished
        case ProcedureWord.executing: return .executing
        case ProcedureWord.launched: return .ready
        default: return isReady ? .ready : .pending
        }
    }

    /// The number of dependencies that have not finished yet.
    public final var unfinishedDependencyCount: Int {
        let w = word.load(ordering: .acquiring)
        if w & ProcedureWord.tracked != 0 { return Int(ProcedureWord.pending(w)) }
        if w & ProcedureWord.hasDependencies == 0 { return 0 }
        return withLocked { state in state.dependencies.count { !$0.isFinished } }
    }

    /// A name for messages and debugging.
    public final var name: String? {
        get { withLocked { $0.name } }
        set { withLocked { $0.name = newValue } }
    }

    // MARK: Configuration

    /// The order among ready procedures of the same queue (default
    /// `.normal`). May change at any time; a queue reorders a waiting
    /// procedure at once.
    public final var queuePriority: QueuePriority {
        get { QueuePriority(rawValue: priorityStorage.load(ordering: .relaxed)) ?? .normal }
        set {
            let old = priorityStorage.exchange(newValue.rawValue, ordering: .relaxed)
            guard old != newValue.rawValue else { return }
            emit(.priority)
            if word.load(ordering: .acquiring) & ProcedureWord.enqueued != 0 {
                withOwningQueue { $0.procedurePriorityChanged(self) }
            }
        }
    }

    /// The thread priority while ``main()`` runs: 0.0 (lowest) ... 1.0
    /// (highest), default 0.5; values outside are clamped.
    ///
    /// On Linux it is the thread's nice value: 0.0 → +19, 0.5 → 0,
    /// 1.0 → -20, linear in between (``niceValue(forThreadPriority:)``). It
    /// applies only during `main()` and is restored afterwards; everything
    /// else, the completion block included, runs at the thread's normal
    /// priority. Raising priority needs CAP_SYS_NICE or RLIMIT_NICE: without
    /// them it is clamped to what is allowed (never an error), and a change
    /// is made only if it can be undone. Overrides of ``start()`` that do
    /// not call `super` do not get it.
    public final var threadPriority: Double {
        get { Double(bitPattern: threadPriorityBits.load(ordering: .relaxed)) }
        set {
            let value = newValue.isNaN ? 0.5 : min(1.0, max(0.0, newValue))
            threadPriorityBits.store(value.bitPattern, ordering: .relaxed)
            emit(.threadPriority)
        }
    }

    /// The nice value a thread priority maps to (before clamping to what the
    /// process may set): 0.0 → 19, 0.5 → 0, 1.0 → -20.
    public static func niceValue(forThreadPriority priority: Double) -> Int32 {
        ProcedureThreadPriority.nice(for: priority)
    }

    /// Runs once after the procedure finishes (also after cancellation), on
    /// the default-priority global queue. Setting it after the procedure
    /// started is a programmer error and stops the process.
    public final var completionBlock: (@Sendable () -> Void)? {
        get { withLocked { $0.completionBlock } }
        set {
            let phase = ProcedureWord.phase(word.load(ordering: .acquiring))
            if phase != ProcedureWord.initial {
                procedureMisuse("Procedure.completionBlock: \(self) "
                    + (phase == ProcedureWord.finished ? "has already finished" : "has already started")
                    + "; set the completion block before it starts")
            }
            let stored = withLocked { state -> Bool in
                guard setNeedsFinishLock() else { return false }
                state.completionBlock = newValue
                return true
            }
            if !stored {
                procedureMisuse("Procedure.completionBlock: \(self) has already finished; "
                    + "set the completion block before it starts")
            }
            emit(.completionBlock)
        }
    }

    // MARK: Reporting state (asynchronous procedures)

    /// Marks the procedure executing. For asynchronous procedures whose
    /// ``start()`` override does not call `super.start()`: call it when the
    /// work begins. Calling it on a procedure that is not ready, that a queue
    /// holds but did not start, or that already started or finished stops
    /// the process.
    public final func markExecuting() {
        var old = word.load(ordering: .acquiring)
        while true {
            switch ProcedureWord.phase(old) {
            case ProcedureWord.launched:
                break
            case ProcedureWord.initial:
                checkManualStart(old, api: "markExecuting()")
            case ProcedureWord.executing:
                procedureMisuse("Procedure.markExecuting(): \(self) was started twice (it is already executing)")
            default:
                procedureMisuse("Procedure.markExecuting(): \(self) has already finished; it cannot start again")
            }
            let desired = (old & ~ProcedureWord.phaseMask) | ProcedureWord.executing
            let (done, current) = word.compareExchange(
                expected: old, desired: desired,
                successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
            if done { break }
            old = current
        }
        emit(.executing)
    }

    /// Marks the procedure finished: releases its dependents, wakes waiters,
    /// frees its queue slot, tells observers and schedules the completion
    /// block. For asynchronous procedures: call it exactly once, from any
    /// thread, when the work is done (or at once from `start()` when
    /// cancelled). Calling it twice, on a procedure that a queue holds but
    /// did not start, or on one whose dependencies have not finished stops
    /// the process.
    public final func finish() {
        var old = word.load(ordering: .acquiring)
        while true {
            switch ProcedureWord.phase(old) {
            case ProcedureWord.finished:
                procedureMisuse("Procedure.finish(): \(self) finished twice")
            case ProcedureWord.initial:
                if old & ProcedureWord.enqueued != 0 {
                    procedureMisuse("Procedure.finish(): \(self) is in a ProcedureQueue and has not "
                        + "started; the queue starts it (use cancel() to skip it)")
                }
                let pending = unfinishedDependencyCount
                if pending != 0 {
                    procedureMisuse("Procedure.finish(): \(self) has \(pending) unfinished "
                        + "dependenc\(pending == 1 ? "y" : "ies"); it cannot finish before them")
                }
            default:
                break
            }
            let desired = (old & ~ProcedureWord.phaseMask) | ProcedureWord.finished
            let (done, current) = word.compareExchange(
                expected: old, desired: desired,
                successOrdering: .sequentiallyConsistent, failureOrdering: .acquiring)
            if done { break }
            old = current
        }
        didFinish()
    }

    /// Tells the procedure's queue and observers that a custom ``isReady``
    /// condition may have changed. Subclasses that override `isReady` must
    /// call it (the replacement for KVO's `isReady` notification).
    public final func notifyReadinessChanged() {
        readinessChanged()
    }

    // MARK: Dependencies

    /// Makes this procedure wait until `dependency` has finished (or was
    /// cancelled and finished). Works across queues and without queues.
    ///
    /// Allowed until this procedure starts (also while it waits in a queue).
    /// Adding it again adds nothing. Stops the process if this procedure has
    /// started, if `dependency` is this procedure, or if the edge would close
    /// a dependency cycle (the message names the procedures on it).
    public final func addDependency(_ dependency: Procedure) {
        ProcedureGraph.addEdge(from: self, to: dependency)
        emit(.dependencies)
    }

    /// Removes a dependency added with ``addDependency(_:)``; the procedure
    /// becomes ready if that was the last unfinished one. No effect if it is
    /// not a dependency.
    public final func removeDependency(_ dependency: Procedure) {
        if ProcedureGraph.removeEdge(from: self, to: dependency) {
            emit(.dependencies)
        }
    }

    /// The procedures this one depends on, finished or not, in the order
    /// they were added.
    public final var dependencies: [Procedure] {
        withLocked { $0.dependencies }
    }

    // MARK: Waiting

    /// Blocks the calling thread until the procedure has finished. Do not
    /// call it on the main thread or from a procedure of a width-1 queue
    /// that this procedure waits behind.
    @available(*, noasync, message: "use 'await waitUntilFinished()'")
    public final func waitUntilFinished() {
        if isFinished { return }
        let countdown = ProcedureCountdown(1)
        onFinish { countdown.arrive() }
        countdown.wait()
    }

    /// Suspends the calling task until the procedure has finished, without
    /// blocking a thread.
    public final func waitUntilFinished() async {
        if isFinished { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            onFinish { continuation.resume() }
        }
    }

    /// Runs `body` once the procedure has finished (at once if it has),
    /// on the finishing thread.
    final func onFinish(_ body: @escaping @Sendable () -> Void) {
        let registered = withLocked { state -> Bool in
            guard setNeedsFinishLock() else { return false }
            state.finishWaiters.append(body)
            return true
        }
        if !registered { body() }
    }

    /// Under `locked`: sets `needsFinishLock` unless the procedure has
    /// finished; returns whether it did.
    final func setNeedsFinishLock() -> Bool {
        var old = word.load(ordering: .acquiring)
        while true {
            if ProcedureWord.phase(old) == ProcedureWord.finished { return false }
            if old & ProcedureWord.needsFinishLock != 0 { return true }
            let (done, current) = word.compareExchange(
                expected: old, desired: old | ProcedureWord.needsFinishLock,
                successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
            if done { return true }
            old = current
        }
    }

    // MARK: Observers

    /// Registers `handler` for every ``ProcedureEvent`` of this procedure.
    /// It runs synchronously on the thread that made the change, after the
    /// change and with no SwiftQueues lock held; keep it short and do not
    /// block in it. Returns the token for ``removeObserver(_:)``.
    @discardableResult
    public final func addObserver(
        _ handler: @escaping @Sendable (Procedure, ProcedureEvent) -> Void
    ) -> ProcedureObservation {
        let token = ProcedureObservation()
        withLocked { state in
            state.observers.append(ProcedureObserverEntry(token: ObjectIdentifier(token),
                                                          handler: handler))
        }
        _ = word.bitwiseOr(ProcedureWord.observed, ordering: .releasing)
        return token
    }

    /// Unregisters an observer; no effect if it is not registered here.
    public final func removeObserver(_ observation: ProcedureObservation) {
        let id = ObjectIdentifier(observation)
        withLocked { state in
            state.observers.removeAll { $0.token == id }
        }
    }

    /// Calls the observers (and nothing when there are none: one load).
    @inline(__always)
    final func emit(_ event: ProcedureEvent) {
        if word.load(ordering: .acquiring) & ProcedureWord.observed != 0 {
            emitSlow(event)
        }
    }

    @inline(never)
    final func emitSlow(_ event: ProcedureEvent) {
        let observers = withLocked { $0.observers }
        for observer in observers {
            observer.handler(self, event)
        }
    }

    // MARK: Internals

    /// Runs `body` on the fields guarded by the procedure's lock.
    @inline(__always)
    final func withLocked<R>(_ body: (inout ProcedureLocked) throws(Never) -> R) -> R {
        lockWord.lock()
        defer { lockWord.unlock() }
        return body(&lockedState)
    }

    /// Calls `body` with the queue holding the procedure, if it is in one
    /// and has not finished. A hazard count: a finish that follows waits
    /// until `body` has returned before its queue may let go of itself
    /// (Dekker: each side writes, then reads the other's word).
    final func withOwningQueue(_ body: (ProcedureQueue) -> Void) {
        hookCount.wrappingAdd(1, ordering: .sequentiallyConsistent)
        let w = word.load(ordering: .sequentiallyConsistent)
        if w & ProcedureWord.enqueued != 0 && ProcedureWord.phase(w) != ProcedureWord.finished,
           let queue = owner.load(ordering: .acquiring) {
            queue._withUnsafeGuaranteedRef(body)
        }
        hookCount.wrappingSubtract(1, ordering: .releasing)
    }

    /// Validates a manual start from the initial phase.
    final func checkManualStart(_ word: UInt64, api: String) {
        if word & ProcedureWord.enqueued != 0 {
            procedureMisuse("Procedure.\(api): \(self) is in a ProcedureQueue; "
                + "the queue starts it (do not start it yourself)")
        }
        let pending = unfinishedDependencyCount
        let ready = word & ProcedureWord.cancelled != 0 ? pending == 0 : isReady
        if !ready {
            procedureMisuse("Procedure.\(api): \(self) is not ready"
                + (pending > 0
                   ? " (\(pending) unfinished dependenc\(pending == 1 ? "y" : "ies"))"
                   : " (its isReady is false)"))
        }
    }

    /// The default start's claim: a queue already launched it, or a manual
    /// start is valid and moves it to launched.
    @inline(__always)
    final func claimStart(api: String) {
        var old = word.load(ordering: .acquiring)
        if ProcedureWord.phase(old) == ProcedureWord.launched { return }
        while true {
            switch ProcedureWord.phase(old) {
            case ProcedureWord.initial:
                checkManualStart(old, api: api)
            case ProcedureWord.launched:
                return
            case ProcedureWord.executing:
                procedureMisuse("Procedure.\(api): \(self) was started twice (it is already executing)")
            default:
                procedureMisuse("Procedure.\(api): \(self) has already finished"
                    + (old & ProcedureWord.cancelled != 0 ? " (it was cancelled)" : "")
                    + "; it cannot start again")
            }
            let desired = (old & ~ProcedureWord.phaseMask) | ProcedureWord.launched
            let (done, current) = word.compareExchange(
                expected: old, desired: desired,
                successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
            if done { return }
            old = current
        }
    }

    /// launched → executing, for the default start.
    @inline(__always)
    final func enterExecuting(api: String) {
        var old = word.load(ordering: .relaxed)
        while true {
            if ProcedureWord.phase(old) != ProcedureWord.launched {
                procedureMisuse("Procedure.\(api): \(self) changed state while starting "
                    + "(started twice from two threads?)")
            }
            let desired = (old & ~ProcedureWord.phaseMask) | ProcedureWord.executing
            let (done, current) = word.compareExchange(
                expected: old, desired: desired,
                successOrdering: .acquiringAndReleasing, failureOrdering: .relaxed)
            if done { break }
            old = current
        }
        emit(.executing)
    }

    /// launched/executing → finished, for the default start.
    @inline(__always)
    final func finishClaimed() {
        var old = word.load(ordering: .relaxed)
        while true {
            let phase = ProcedureWord.phase(old)
            if phase == ProcedureWord.finished {
                procedureMisuse("Procedure.start(): \(self) finished twice (a synchronous procedure "
                    + "must not call finish(); return true from isAsynchronous to finish it yourself)")
            }
            let desired = (old & ~ProcedureWord.phaseMask) | ProcedureWord.finished
            let (done, current) = word.compareExchange(
                expected: old, desired: desired,
                successOrdering: .sequentiallyConsistent, failureOrdering: .relaxed)
            if done { break }
            old = current
        }
        didFinish()
    }

    /// Runs main() at the thread priority.
    @inline(__always)
    final func runMain() {
        let priority = threadPriority
        if priority == 0.5 {
            main()
            return
        }
        let saved = ProcedureThreadPriority.apply(priority)
        main()
        ProcedureThreadPriority.restore(saved)
    }

    /// After the transition to finished: everything that reacts to it, in
    /// order — observers, dependents, waiters, the queue (slot, completion).
    final func didFinish() {
        let thread = procedureThreadState()
        if thread.pointee.runnerProcedure == Unmanaged.passUnretained(self).toOpaque() {
            // Finishing inside its runner's start(): the runner will look for
            // more work right after, so hooks below need not start another.
            thread.pointee.finishedInline = true
        }
        let w = word.load(ordering: .sequentiallyConsistent)
        var dependents: [Unmanaged<Procedure>] = []
        var waiters: [@Sendable () -> Void] = []
        var completion: (@Sendable () -> Void)? = nil
        if w & ProcedureWord.needsFinishLock != 0 {
            withLocked { state in
                swap(&dependents, &state.dependents)
                swap(&waiters, &state.finishWaiters)
                swap(&completion, &state.completionBlock)
            }
        }
        emit(.finished)
        // The queue first, so that by the time a dependent can run, this
        // procedure no longer counts in its queue.
        if w & ProcedureWord.enqueued != 0, let queue = owner.load(ordering: .acquiring) {
            // Hooks that saw this procedure unfinished may still use the
            // queue: let them finish first.
            while hookCount.load(ordering: .sequentiallyConsistent) != 0 {
                sched_yield()
            }
            // The queue is alive: this procedure still counts in it. (It may
            // let go of itself inside this call; it is not touched after.)
            queue._withUnsafeGuaranteedRef { $0.procedureDidFinish(self, completion: completion) }
        } else if let completion {
            ProcedureCallbackBox.async(on: procedureDefaultGlobalQueue(), completion)
        }
        for dependent in dependents {
            // Alive: its queue holds it until it finishes, which it cannot
            // do before this decrement.
            dependent._withUnsafeGuaranteedRef { $0.dependencyDidFinish() }
        }
        if w & ProcedureWord.hasDependents != 0 {
            ProcedureGraph.procedureDidFinish(self)
        }
        for waiter in waiters {
            waiter()
        }
    }

    /// One dependency finished (or was removed).
    @inline(__always)
    final func dependencyDidFinish() {
        let new = word.subtract(ProcedureWord.pendingOne, ordering: .acquiringAndReleasing).newValue
        if ProcedureWord.pending(new) == 0 {
            readinessChanged()
        }
    }

    /// Readiness may have changed: observers, then the queue.
    final func readinessChanged() {
        emit(.ready)
        let w = word.load(ordering: .acquiring)
        if w & ProcedureWord.enqueued != 0 && ProcedureWord.phase(w) == ProcedureWord.initial {
            withOwningQueue { $0.procedureMayBeReady(self) }
        }
    }

    /// For a queue's runner: claims the procedure for starting if it is
    /// ready (or cancelled with no unfinished dependencies).
    @inline(__always)
    final func tryLaunch() -> Bool {
        var old = word.load(ordering: .acquiring)
        if old & ProcedureWord.cancelled == 0 && !isReady { return false }
        while true {
            guard ProcedureWord.phase(old) == ProcedureWord.initial,
                  ProcedureWord.pending(old) == 0 else { return false }
            let desired = (old & ~ProcedureWord.phaseMask) | ProcedureWord.launched
            let (done, current) = word.compareExchange(
                expected: old, desired: desired,
                successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
            if done { return true }
            old = current
        }
    }

    /// For `ProcedureQueue.add`, after `claimEnqueue` and before the queue
    /// admits it: starts tracking the pending count — registers with each
    /// dependency that has not finished. O(dependencies).
    @inline(__always)
    final func startTracking() {
        // No dependencies: set the bit, unless addDependency (which sets
        // hasDependencies in the same word) got there first.
        var old = word.load(ordering: .relaxed)
        while old & ProcedureWord.hasDependencies == 0 {
            let (done, current) = word.compareExchange(
                expected: old, desired: old | ProcedureWord.tracked,
                successOrdering: .acquiringAndReleasing, failureOrdering: .relaxed)
            if done { return }
            old = current
        }
        startTrackingSlow()
    }

    @inline(never)
    final func startTrackingSlow() {
        // Count every dependency first (conservative: never ready early),
        // then register; one that already finished is uncounted again.
        let dependencies = withLocked { state -> [Procedure] in
            let count = UInt64(state.dependencies.count)
            _ = word.wrappingAdd(count << ProcedureWord.pendingShift | ProcedureWord.tracked,
                                 ordering: .acquiringAndReleasing)
            return state.dependencies
        }
        var uncount: UInt64 = 0
        for dependency in dependencies {
            if !dependency.registerDependent(self) { uncount += 1 }
        }
        if uncount > 0 {
            let new = word.wrappingSubtract(uncount << ProcedureWord.pendingShift,
                                            ordering: .acquiringAndReleasing).newValue
            if ProcedureWord.pending(new) == 0 {
                readinessChanged()
            }
        }
    }

    /// Adds a tracked dependent whose count includes this procedure; false
    /// if this procedure has already finished (the caller uncounts it).
    final func registerDependent(_ dependent: Procedure) -> Bool {
        withLocked { state in
            guard setNeedsFinishLock() else { return false }
            state.dependents.append(Unmanaged.passUnretained(dependent))
            return true
        }
    }

    /// For `ProcedureQueue.add`: marks the procedure enqueued, or stops the
    /// process if it cannot be.
    final func claimEnqueue(queue: ProcedureQueue) {
        owner.store(Unmanaged.passUnretained(queue), ordering: .relaxed)
        var old = word.load(ordering: .acquiring)
        while true {
            if old & ProcedureWord.enqueued != 0 {
                procedureMisuse("ProcedureQueue.addProcedure: \(self) is already in a ProcedureQueue")
            }
            switch ProcedureWord.phase(old) {
            case ProcedureWord.initial:
                break
            case ProcedureWord.finished:
                procedureMisuse("ProcedureQueue.addProcedure: \(self) has already finished")
            default:
                procedureMisuse("ProcedureQueue.addProcedure: \(self) has already started")
            }
            let (done, current) = word.compareExchange(
                expected: old, desired: old | ProcedureWord.enqueued,
                successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
            if done { return }
            old = current
        }
    }
}

// MARK: - Identity

/// Procedures are equal only to themselves (as Foundation's `Operation`, an
/// `NSObject`): usable in sets, as dictionary keys and in `==` assertions.
extension Procedure: Hashable {
    public static func == (lhs: Procedure, rhs: Procedure) -> Bool {
        lhs === rhs
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}

/// Misuse reported by result-returning procedures.
public enum ProcedureError: Error, Sendable, Hashable {
    /// The procedure was cancelled, so it has no result.
    case cancelled
    /// The procedure has not finished yet.
    case notFinished
}
