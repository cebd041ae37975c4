//===----------------------------------------------------------------------===//
//
// SwiftQueues — ProcedureQueue: runs procedures by readiness, then priority,
// with a concurrency limit, suspension, barriers and waiting.
//
// Inside: one spin lock guards five ready lists (one per priority, FIFO,
// intrusive and doubly linked, so a priority change moves a procedure in
// O(1)), an intrusive list of the unfinished procedures (the queue's lasting
// references to them; a runner holds its batch too, see runLoop), and counters. A procedure enters a ready list
// only when its last dependency finishes, so nothing ever walks procedures
// that are not ready: every add, finish, readiness change and priority change
// is O(1). "Runners" — plain function-pointer tasks on the underlying queue —
// pop the highest-priority ready procedure and start it; a runner keeps going
// while there is ready work and a free slot (up to a budget, then it
// re-submits itself so other work on the pool gets a turn). When a procedure
// finishes inside its runner's start(), the runner does the bookkeeping and
// picks the next one under a single lock acquisition.
//
// A finished procedure's list reference is not dropped by the thread that
// finished it but by the next one that adds to the queue (or once a few
// dozen wait, or the queue goes idle): the adding thread allocated the
// procedure, so freeing it there keeps malloc's memory in that thread's
// cache and arena, where workers freeing it would contend with the adder
// for the arena lock (a third of the time of a stream of small blocks).
//
// While runners are busy with short procedures, an add does not take the
// lock: it pushes the procedure onto a lock-free inbox that the runners
// empty under the lock they take for their next batch anyway (see
// `addProcedure`), instead of spinning for the lock while a runner does a
// batch's bookkeeping (about a fifth of the adding thread's time).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues
import Synchronization

/// One priority's ready list.
struct ProcedureReadyList {
    var head: Unmanaged<Procedure>?
    var tail: Unmanaged<Procedure>?
}

/// Procedures added after a barrier, held until it finishes.
struct ProcedureBarrierSegment {
    var held: [Procedure] = []
    var barrier: Procedure?
}

/// A queue's counters and lists; guarded by its lock.
struct ProcedureQueueState {
    var name: String?
    var maxConcurrent: Int
    /// `maxConcurrent`, with "the pool decides" as Int.max.
    var width: Int
    /// How many runners may exist at once.
    var runnerLimit: Int
    var suspended = false
    /// Where runners are submitted: `customQueue`'s C queue, or the
    /// default global (or main) queue.
    var target: sq_queue_t
    /// ``ProcedureQueue/underlyingQueue``; holding it keeps `target` alive.
    var customQueue: WorkQueue?
    /// Changes of `target` so far. A runner carries the generation it was
    /// submitted in; one of an older generation that had not started when
    /// the target changed is no longer counted in `runners`.
    var targetGeneration: UInt32 = 0
    var readyCount = 0
    /// Procedures started and not finished (the slots in use).
    var executing = 0
    /// Runner tasks submitted and not exited (of the current generation,
    /// or busy when it began).
    var runners = 0
    /// Runners running a batch. Under the lock every counted runner is busy
    /// or has not started (or waits for the lock to start).
    var busy = 0
    /// Nanoseconds per procedure in the last measured batch; .max before
    /// any (then every ready procedure may get a runner).
    var nanosPerProcedure: UInt64 = .max
    /// A watchdog timer is pending (see `spawnCheck`).
    var watchdogArmed = false
    /// Batches (of more than one, on wider queues) in progress, for the
    /// watchdog.
    var batches: [Unmanaged<ProcedureBatchRecord>] = []
    /// Batches started so far, and the count when the watchdog was armed:
    /// unchanged when it fires means the busy runners made no progress.
    var batchEpoch: UInt64 = 0
    var watchdogEpoch: UInt64 = 0
    /// The unfinished procedures, in the order they were added.
    var allHead: Unmanaged<Procedure>?
    var allTail: Unmanaged<Procedure>?
    var count = 0
    /// Unfinished procedures plus completion blocks not yet run; the group
    /// is entered while it is non-zero.
    var outstanding = 0
    /// Admitted procedures (before the first pending barrier) not finished.
    var frontUnfinished = 0
    /// The first pending barrier.
    var frontBarrier: Procedure?
    /// Later segments, each closed by a barrier (the last may be open).
    var later: [ProcedureBarrierSegment] = []
    /// Procedures taken so far: the next one's `queueOrder`.
    var additions = 0
}

/// What to do once the lock is released.
struct ProcedureQueuePostLock {
    var spawn = 0
    var armWatchdog = false
    var resubmit = false
    var target: sq_queue_t?
    /// `targetGeneration` when `target` was read.
    var generation: UInt32 = 0
    var completion: (@Sendable () -> Void)?
    /// Finished procedures whose list references to drop (linked through
    /// `queueNext`), taken from the graveyard.
    var release: Unmanaged<Procedure>?
    /// Procedures moved from the inbox: the group enter each add made.
    var inboxLeaves = 0
    var leaveGroup = false
}

/// The C entry point of a queue's watchdog timer: the context is a retained queue.
let procedureWatchdogEntry: sq_function_t = { context in
    Unmanaged<ProcedureQueue>.fromOpaque(context.unsafelyUnwrapped).takeRetainedValue().watchdogFired()
}

/// A runner's batch in progress, as the watchdog sees it (under the queue's
/// lock): the runner's buffer, its size, and the next index the runner will
/// start (the rest may be handed back to the ready lists).
final class ProcedureBatchRecord {
    let items: UnsafeMutablePointer<Unmanaged<Procedure>>
    var count = 0
    let next = Atomic<Int>(0)

    init(items: UnsafeMutablePointer<Unmanaged<Procedure>>) {
        self.items = items
    }
}

/// A procedure a runner saw finish inside start(), awaiting bookkeeping.
struct ProcedureFinishedSlot {
    let procedure: Unmanaged<Procedure>
    let completion: (@Sendable () -> Void)?
}

/// The C entry point of a runner of a queue whose target never changed
/// from the default global queue (the common case, no allocation): the
/// context is a retained queue.
let procedureRunnerEntry: sq_function_t = { context in
    Unmanaged<ProcedureQueue>.fromOpaque(context.unsafelyUnwrapped).takeRetainedValue()
        .runLoop(servedTarget: procedureDefaultGlobalQueue(), generation: 0)
}

/// Any other runner carries the queue it was submitted to and the target's
/// generation then: the underlying queue may change between the submission
/// and the start, and a runner must not start procedures that now belong on
/// another queue.
struct ProcedureRunnerTicket {
    let queue: Unmanaged<ProcedureQueue>
    let target: sq_queue_t
    let generation: UInt32
}

/// The C entry point of such a runner: the context is a ticket to free.
let procedureTargetedRunnerEntry: sq_function_t = { context in
    let ticket = context.unsafelyUnwrapped.assumingMemoryBound(to: ProcedureRunnerTicket.self)
    let taken = ticket.move()
    ticket.deallocate()
    taken.queue.takeRetainedValue().runLoop(servedTarget: taken.target,
                                            generation: taken.generation)
}

/// Runs ``Procedure``s: SwiftQueues' `OperationQueue`.
///
///     let queue = ProcedureQueue(name: "thumbnails")
///     let load = BlockProcedure { ... }
///     let resize = Resize(...)
///     resize.addDependency(load)
///     queue.addProcedures([load, resize], waitUntilFinished: false)
///     queue.addBlock { print("independent") }
///     await queue.waitUntilAllFinished()
///
/// **Order.** Readiness first (a procedure starts only after all its
/// dependencies — on any queue — have finished), then ``Procedure/queuePriority``
/// (highest first), then the order of addition, as Foundation's queue
/// (with the default width, where ready procedures start about at once:
/// the order they became ready). Width 1 is therefore not a serial
/// dispatch queue: a higher-priority or earlier-ready procedure may
/// overtake. Without dependencies nothing guarantees order.
///
/// **Cost.** Every add, finish, readiness and priority change is O(1)
/// (on a queue with a width of its own, a procedure that becomes ready
/// after later-added ones of its priority walks past them): nothing else
/// walks waiting procedures, so a dependency chain of a million
/// procedures costs the same per procedure as ten.
///
/// **Ownership.** The queue holds each procedure from ``addProcedure(_:)``
/// until it finishes, and then drops it at once: keep your own reference to
/// read a result. A queue with unfinished procedures (or completion blocks
/// not yet run) keeps itself alive.
///
/// **Threads.** Procedures run on the underlying queue (by default the
/// default-priority global queue of the SwiftQueues pool). With the default
/// ``maxConcurrentCount`` the pool decides how many run at once: as many as
/// it has threads for, more when they block. ``main`` runs its procedures on
/// the main thread, one at a time, when the main queue is drained
/// (`sq_main()` or `sq_main_queue_run_until`).
///
/// **Barriers.** ``addBarrierBlock(_:)`` runs its block after every
/// procedure added before it has finished, alone, and holds every procedure
/// added after it until it is done. (A procedure added before a barrier must
/// not depend on one added after it: that would wait forever.)
public final class ProcedureQueue: @unchecked Sendable, CustomStringConvertible {
    /// The default ``maxConcurrentCount``: no limit of the queue's own; the
    /// pool decides.
    public static let defaultMaxConcurrentCount = -1

    /// Runners a default-width queue may have (the pool's default thread
    /// cap: enough to use every thread the pool adds for blocking work).
    static let defaultRunnerLimit = 64
    /// Procedures a runner starts before it re-submits itself.
    static let runnerBudget = 256
    /// The most procedures a runner takes per lock acquisition.
    static let maxBatch = 32
    /// A batch should take about this long (ns): short procedures are
    /// taken many at a time, long ones one at a time (so they spread over
    /// threads).
    static let batchTargetNanoseconds: UInt64 = 10_000
    /// Procedures shorter than this (ns, as last measured) are short: busy
    /// runners will be back soon, so runners are added by backlog.
    static let shortProcedureNanoseconds: UInt64 = 2_500
    /// When runners are busy and ready work waits on the bet that they are
    /// back soon, a watchdog looks again after this long (ns); if no runner
    /// started a batch meanwhile, every ready procedure may get a runner.
    static let watchdogNanoseconds: UInt64 = 500_000
    /// Finished procedures kept for the adding thread to drop, at most.
    static let graveLimit = 64

    private let lock = SpinLock()
    private let state: UnsafeMutablePointer<ProcedureQueueState>
    private let lists: UnsafeMutablePointer<ProcedureReadyList>
    private let group: sq_group_t
    private let isMainQueue: Bool
    /// Mirrors `state.suspended` for runners between lock acquisitions.
    private let suspendedHint = Atomic<Bool>(false)
    /// Procedures that finished inside a runner's batch and await its
    /// bookkeeping (still in `state.count` until then).
    private let deferredFinishes = Atomic<Int>(0)
    /// The highest non-empty ready list (-1: none); written under the lock,
    /// read by a width-1 runner between the procedures of its batch.
    private let topReadyHint = Atomic<Int>(-1)
    /// Ready procedures placed ahead of others of their priority so far
    /// (they were added earlier but became ready later); a width-1 runner
    /// hands its batch back when this changes (see `pushReady`).
    private let readyOvertakes = Atomic<Int>(0)
    /// The latest `queueOrder` in the batch a runner is running (-1: none):
    /// a procedure added before it that becomes ready meanwhile overtakes
    /// the rest of the batch. Written under the lock.
    private let batchCeiling = Atomic<Int>(-1)
    /// Procedures added without the lock, newest first, linked through
    /// `queueNext`; each holds the queue's reference (see `addProcedure`).
    private let inbox = Atomic<Unmanaged<Procedure>?>(nil)
    /// Whether adds may use the inbox; written under the lock (see
    /// `refreshInbox`).
    private let inboxOpen = Atomic<Bool>(false)
    /// Finished procedures whose list reference the next add drops, newest
    /// first, linked through `queueNext` (see `bury`), and about how many.
    private let graveyard = Atomic<Unmanaged<Procedure>?>(nil)
    private let graveCount = Atomic<Int>(0)
    #if DEBUG
    /// Adds that went through the inbox (tests check the path is taken).
    let inboxAdds = Atomic<Int>(0)
    #endif

    /// Creates a queue.
    ///
    /// - Parameters:
    ///   - name: A name for debugging and messages.
    ///   - maxConcurrentCount: How many procedures may execute at once;
    ///     ``defaultMaxConcurrentCount`` (-1) lets the pool decide.
    public init(name: String? = nil, maxConcurrentCount: Int = ProcedureQueue.defaultMaxConcurrentCount) {
        Self.checkWidth(maxConcurrentCount)
        isMainQueue = false
        group = sq_group_create()
        lists = .allocate(capacity: 5)
        lists.initialize(repeating: ProcedureReadyList(), count: 5)
        state = .allocate(capacity: 1)
        state.initialize(to: ProcedureQueueState(
            name: name, maxConcurrent: maxConcurrentCount,
            width: Self.width(for: maxConcurrentCount),
            runnerLimit: Self.runnerLimit(for: maxConcurrentCount),
            target: procedureDefaultGlobalQueue()))
    }

    private init(mainQueue: Void) {
        isMainQueue = true
        group = sq_group_create()
        lists = .allocate(capacity: 5)
        lists.initialize(repeating: ProcedureReadyList(), count: 5)
        state = .allocate(capacity: 1)
        state.initialize(to: ProcedureQueueState(
            name: "main", maxConcurrent: 1, width: 1, runnerLimit: 1,
            target: sq_get_main_queue()))
    }

    deinit {
        // (An idle queue's graveyard and inbox are empty: the graveyard is
        // emptied when the last outstanding unit goes, an inbox procedure
        // holds the group entered, and the queue lives until then.)
        sq_release(UnsafeMutableRawPointer(group))
        state.deinitialize(count: 1)
        state.deallocate()
        lists.deinitialize(count: 5)
        lists.deallocate()
    }

    /// The queue whose procedures run on the main thread, one at a time
    /// (``maxConcurrentCount`` is 1 and cannot change). On Linux they run
    /// only while the main thread drains the main queue.
    public static let main = ProcedureQueue(mainQueue: ())

    /// The queue running the calling procedure (in every block of a
    /// ``BlockProcedure``, also those on pool threads); outside procedures
    /// started by a queue, ``main`` on the main thread and nil elsewhere.
    public static var current: ProcedureQueue? {
        let thread = procedureThreadState()
        if let queue = thread.pointee.currentQueue { return queue.takeUnretainedValue() }
        return thread.pointee.isMainThread ? main : nil
    }

    // MARK: Configuration

    /// A name for debugging and messages.
    public var name: String? {
        get { withLock { $0.name } }
        set { withLock { $0.name = newValue } }
    }

    /// How the queue appears in messages.
    public var description: String {
        if let name { return "ProcedureQueue '\(name)'" }
        return "ProcedureQueue \(ObjectIdentifier(self))"
    }

    /// How many procedures may execute at once (asynchronous ones count
    /// until they finish). ``defaultMaxConcurrentCount`` (-1, the default):
    /// the pool decides. 0 starts nothing. 1 runs one at a time, still in
    /// readiness-then-priority order. Ignored on ``main``. Other negative
    /// values stop the process.
    public var maxConcurrentCount: Int {
        get { withLock { $0.maxConcurrent } }
        set {
            Self.checkWidth(newValue)
            if isMainQueue { return }
            var post = ProcedureQueuePostLock()
            lock.lock()
            state.pointee.maxConcurrent = newValue
            state.pointee.width = Self.width(for: newValue)
            state.pointee.runnerLimit = Self.runnerLimit(for: newValue)
            spawnCheck(&post)
            refreshInbox(&post)
            lock.unlock()
            runPost(&post)
        }
    }

    /// While true, the queue starts no procedure; running ones continue.
    /// Procedures can still be added (they wait). A flag, not a counter.
    /// Waiting for a suspended queue with procedures waits until it resumes.
    public var isSuspended: Bool {
        get { withLock { $0.suspended } }
        set {
            var post = ProcedureQueuePostLock()
            lock.lock()
            state.pointee.suspended = newValue
            suspendedHint.store(newValue, ordering: .relaxed)
            if !newValue { spawnCheck(&post) }
            refreshInbox(&post)
            lock.unlock()
            runPost(&post)
        }
    }

    /// The queue the procedures run on; nil means the default-priority
    /// global queue. The queue is kept alive while it is set. May change at
    /// any time: it applies to procedures started afterwards. A serial queue
    /// here runs one procedure at a time, interleaved with the other work
    /// submitted to it. Setting it on ``main`` stops the process.
    ///
    ///     let database = WorkQueue(label: "com.example.db")
    ///     let jobs = ProcedureQueue(name: "jobs")
    ///     jobs.underlyingQueue = database   // jobs run one at a time, with database's other work
    public var underlyingQueue: WorkQueue? {
        get { withLock { $0.customQueue } }
        set {
            if isMainQueue {
                procedureMisuse("ProcedureQueue.underlyingQueue: the main ProcedureQueue always "
                    + "runs on the main queue")
            }
            // Runners already submitted hold their own reference to the C
            // queue (taken under the lock, see spawnCheck), so the old
            // WorkQueue may go away as soon as it is swapped out.
            var post = ProcedureQueuePostLock()
            lock.lock()
            let s = state
            let old = s.pointee.customQueue
            s.pointee.customQueue = newValue
            let target = newValue?.raw ?? procedureDefaultGlobalQueue()
            if target != s.pointee.target {
                s.pointee.target = target
                // Runners submitted to the old target that have not started
                // may wait there for long (it may be suspended): stop
                // counting them, and start runners on the new target for
                // the ready work. They exit when they start (see runLoop).
                s.pointee.runners = s.pointee.busy
                s.pointee.targetGeneration &+= 1
                spawnCheck(&post)
            }
            refreshInbox(&post)
            lock.unlock()
            runPost(&post)
            _ = old  // released here, outside the lock
        }
    }

    /// The number of unfinished procedures in the queue.
    public var procedureCount: Int {
        var post = ProcedureQueuePostLock()
        lock.lock()
        drainInbox(&post)
        let count = state.pointee.count - deferredFinishes.load(ordering: .acquiring)
        refreshInbox(&post)
        lock.unlock()
        runPost(&post)
        return count
    }

    /// The unfinished procedures, in the order they were added (a snapshot:
    /// they may finish and leave at any moment).
    public var procedures: [Procedure] {
        var post = ProcedureQueuePostLock()
        lock.lock()
        drainInbox(&post)
        refreshInbox(&post)
        var result: [Procedure] = []
        result.reserveCapacity(state.pointee.count)
        var node = state.pointee.allHead
        while let current = node {
            let procedure = current.takeUnretainedValue()
            if !procedure.isFinished {  // finished, bookkeeping pending
                result.append(procedure)
            }
            node = procedure.queueNext.load(ordering: .relaxed)
        }
        lock.unlock()
        runPost(&post)
        return result
    }

    // MARK: Adding work

    /// Adds a procedure; it starts when it is ready, in priority order.
    /// Returns at once. Adding a procedure that is in a queue, has started
    /// or has finished stops the process.
    public func addProcedure(_ procedure: Procedure) {
        procedure.claimEnqueue(queue: self)
        procedure.startTracking()
        if inboxOpen.load(ordering: .relaxed) {
            addToInbox(procedure)
            return
        }
        var post = ProcedureQueuePostLock()
        lock.lock()
        drainInbox(&post)  // adds that came first go first
        insertLocked(Unmanaged.passRetained(procedure), barrier: false)
        spawnCheck(&post)
        refreshInbox(&post)
        lock.unlock()
        takeGraveyard(&post)
        runPost(&post)
    }

    /// An add without the lock, while the inbox is open: runners are busy
    /// with short procedures (so each takes the lock again within about a
    /// batch, 10 us, and moves the inbox to the ready lists under it), the
    /// queue is not suspended, and the watchdog is armed (should the runners
    /// be stuck after all, it moves the inbox within 0.5 ms). The group is
    /// entered for the procedure at once, so waiting for the queue waits for
    /// it; the move leaves it again once the procedure is counted.
    ///
    /// The inbox closes under the lock (`refreshInbox`): the closer stores
    /// false, then moves what the inbox holds; an add pushes, then reads the
    /// flag again and, if it closed meanwhile, moves the inbox itself. Both
    /// sides are sequentially consistent, so one of them sees the other.
    private func addToInbox(_ procedure: Procedure) {
        #if DEBUG
        inboxAdds.wrappingAdd(1, ordering: .relaxed)
        #endif
        sq_group_enter(group)
        let node = Unmanaged.passRetained(procedure)  // the queue's reference
        var head = inbox.load(ordering: .relaxed)
        while true {
            procedure.queueNext.store(head, ordering: .relaxed)
            let (done, current) = inbox.compareExchange(
                expected: head, desired: node,
                successOrdering: .sequentiallyConsistent, failureOrdering: .relaxed)
            if done { break }
            head = current
        }
        var post = ProcedureQueuePostLock()
        if !inboxOpen.load(ordering: .sequentiallyConsistent) {
            lock.lock()
            drainInbox(&post)
            refreshInbox(&post)
            lock.unlock()
        }
        takeGraveyard(&post)
        runPost(&post)
    }

    /// Under the lock: moves the inbox's procedures, oldest first, to the
    /// queue's lists (the group enters of their adds go with `post`).
    private func drainInbox(_ post: inout ProcedureQueuePostLock) {
        guard inbox.load(ordering: .sequentiallyConsistent) != nil,
              var node = inbox.exchange(nil, ordering: .sequentiallyConsistent) else { return }
        // Newest first: reverse the links.
        var reversed: Unmanaged<Procedure>? = nil
        while true {
            let procedure = node.takeUnretainedValue()
            let next = procedure.queueNext.load(ordering: .relaxed)
            procedure.queueNext.store(reversed, ordering: .relaxed)
            reversed = node
            guard let n = next else { break }
            node = n
        }
        var n = 0
        while let current = reversed {
            reversed = current.takeUnretainedValue().queueNext.load(ordering: .relaxed)
            insertLocked(current, barrier: false)
            n += 1
        }
        post.inboxLeaves += n
        spawnCheck(&post)
    }

    /// Under the lock, last before unlocking: opens or closes the inbox.
    /// It is open while every add would find runners that come back soon
    /// (see `addToInbox`); closing moves what it holds.
    private func refreshInbox(_ post: inout ProcedureQueuePostLock) {
        let s = state
        let open = s.pointee.runners > 0 && !s.pointee.suspended
            && s.pointee.nanosPerProcedure < Self.shortProcedureNanoseconds
            && s.pointee.watchdogArmed && s.pointee.frontBarrier == nil
        if open {
            if !inboxOpen.load(ordering: .relaxed) {
                inboxOpen.store(true, ordering: .sequentiallyConsistent)
            }
            return
        }
        if inboxOpen.load(ordering: .relaxed) {
            inboxOpen.store(false, ordering: .sequentiallyConsistent)
        }
        drainInbox(&post)
    }

    /// Adds procedures (under one lock acquisition). With
    /// `waitUntilFinished: true` it then blocks until every one of them has
    /// finished.
    @available(*, noasync, message: "use 'await addProcedures(_:waitUntilFinished:)'")
    public func addProcedures(_ procedures: [Procedure], waitUntilFinished: Bool) {
        guard waitUntilFinished else {
            insert(procedures)
            return
        }
        let countdown = ProcedureCountdown(procedures.count)
        let arrive: @Sendable () -> Void = { countdown.arrive() }
        for procedure in procedures {
            procedure.onFinish(arrive)
        }
        insert(procedures)
        countdown.wait()
    }

    /// Adds procedures; with `waitUntilFinished: true` it then suspends the
    /// calling task (without blocking a thread) until every one has finished.
    public func addProcedures(_ procedures: [Procedure], waitUntilFinished: Bool) async {
        guard waitUntilFinished, !procedures.isEmpty else {
            insert(procedures)
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let box = ProcedureCountdownAsync(procedures.count) { continuation.resume() }
            let arrive: @Sendable () -> Void = { box.arrive() }
            for procedure in procedures {
                procedure.onFinish(arrive)
            }
            insert(procedures)
        }
    }

    /// Wraps `block` in a ``BlockProcedure`` and adds it; returns the
    /// procedure (to cancel it or wait for it).
    @discardableResult
    public func addBlock(_ block: @escaping @Sendable () -> Void) -> BlockProcedure {
        let procedure = BlockProcedure(block)
        addProcedure(procedure)
        return procedure
    }

    /// Adds `block` as a barrier: it starts after every procedure added
    /// before it has finished, runs alone, and procedures added after it
    /// wait until it has finished. Returns its procedure.
    @discardableResult
    public func addBarrierBlock(_ block: @escaping @Sendable () -> Void) -> BlockProcedure {
        let barrier = BlockProcedure(block)
        barrier.name = "barrier"
        barrier.isBarrier.store(true, ordering: .relaxed)
        barrier.claimEnqueue(queue: self)
        barrier.startTracking()
        var post = ProcedureQueuePostLock()
        lock.lock()
        drainInbox(&post)
        insertLocked(Unmanaged.passRetained(barrier), barrier: true)
        spawnCheck(&post)
        refreshInbox(&post)
        lock.unlock()
        takeGraveyard(&post)
        runPost(&post)
        return barrier
    }

    // MARK: Cancelling and waiting

    /// Cancels every procedure in the queue now (not ones added later).
    /// Those not started finish without running; running ones see
    /// ``Procedure/isCancelled``.
    public func cancelAll() {
        for procedure in procedures {
            procedure.cancel()
        }
    }

    /// Blocks until the queue has no unfinished procedures and their
    /// completion blocks have run — including procedures added while it
    /// waits. On a suspended queue with procedures it waits for the resume.
    @available(*, noasync, message: "use 'await waitUntilAllFinished()'")
    public func waitUntilAllFinished() {
        _ = sq_group_wait(group, SQ_TIME_FOREVER)
    }

    /// Suspends the calling task, without blocking a thread, until the queue
    /// has no unfinished procedures (as ``waitUntilAllFinished()``).
    public func waitUntilAllFinished() async {
        let group = self.group
        let handle = UInt(bitPattern: UnsafeMutableRawPointer(group))
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            ProcedureCallbackBox.notify(sq_group_t(bitPattern: handle)!,
                                        on: procedureDefaultGlobalQueue()) {
                continuation.resume()
            }
        }
    }

    // MARK: Internals: adding

    private func insert(_ procedures: [Procedure]) {
        if procedures.isEmpty { return }
        for procedure in procedures {
            procedure.claimEnqueue(queue: self)
            procedure.startTracking()
        }
        var post = ProcedureQueuePostLock()
        lock.lock()
        drainInbox(&post)
        for procedure in procedures {
            insertLocked(Unmanaged.passRetained(procedure), barrier: false)
        }
        spawnCheck(&post)
        refreshInbox(&post)
        lock.unlock()
        takeGraveyard(&post)
        runPost(&post)
    }

    /// Under the lock: link, count, admit (or hold behind a barrier).
    /// `node` carries the queue's reference (retained by the caller).
    private func insertLocked(_ node: Unmanaged<Procedure>, barrier: Bool) {
        let s = state
        let procedure = node.takeUnretainedValue()
        procedure.queueOrder.store(s.pointee.additions, ordering: .relaxed)
        s.pointee.additions &+= 1
        procedure.queueNext.store(nil, ordering: .relaxed)
        procedure.queuePrev.store(s.pointee.allTail, ordering: .relaxed)
        if let tail = s.pointee.allTail {
            tail.takeUnretainedValue().queueNext.store(node, ordering: .relaxed)
        } else {
            s.pointee.allHead = node
        }
        s.pointee.allTail = node
        s.pointee.count += 1
        s.pointee.outstanding += 1
        if s.pointee.outstanding == 1 {
            // Work outstanding: the group is entered and the queue keeps
            // itself alive (procedures hold it unretained).
            sq_group_enter(group)
            _ = Unmanaged.passUnretained(self).retain()
        }
        if barrier {
            if s.pointee.frontBarrier == nil {
                s.pointee.frontBarrier = procedure
                if s.pointee.frontUnfinished == 0 { admit(procedure) }
            } else {
                openLaterSegment()
                s.pointee.later[s.pointee.later.count - 1].barrier = procedure
            }
        } else if s.pointee.frontBarrier == nil {
            s.pointee.frontUnfinished += 1
            admit(procedure)
        } else {
            openLaterSegment()
            s.pointee.later[s.pointee.later.count - 1].held.append(procedure)
        }
    }

    /// Makes sure the last later segment is open (has no barrier yet).
    private func openLaterSegment() {
        if state.pointee.later.last.map({ $0.barrier != nil }) ?? true {
            state.pointee.later.append(ProcedureBarrierSegment())
        }
    }

    /// Under the lock: the procedure may be scheduled from now on.
    private func admit(_ procedure: Procedure) {
        procedure.admitted.store(true, ordering: .relaxed)
        let w = procedure.word.load(ordering: .acquiring)
        if ProcedureWord.pending(w) == 0 && ProcedureWord.phase(w) == ProcedureWord.initial {
            pushReady(procedure)
        }
    }

    // MARK: Internals: ready lists

    /// Puts a procedure on its priority's ready list. On a queue with a
    /// width of its own (`maxConcurrentCount` set), where procedures wait
    /// for slots and the order they start in shows, in the order the queue
    /// took them — Foundation's order among equal priorities: the one added
    /// first starts first, whichever became ready first. From the tail:
    /// O(1) when procedures become ready in the order they were added
    /// (independent ones, chains); otherwise a walk past the later-added
    /// ready procedures of its priority. With the default width (the pool
    /// decides, ready procedures start about at once) at the tail, O(1).
    @inline(__always)
    private func pushReady(_ procedure: Procedure) {
        let index = procedure.queuePriority.bucket
        let order = procedure.queueOrder.load(ordering: .relaxed)
        var after = lists[index].tail
        if state.pointee.maxConcurrent >= 0 {
            while let candidate = after,
                  candidate.takeUnretainedValue().queueOrder.load(ordering: .relaxed) > order {
                after = candidate.takeUnretainedValue().readyPrev.load(ordering: .relaxed)
            }
        }
        if state.pointee.maxConcurrent >= 0
            && (after?.toOpaque() != lists[index].tail?.toOpaque()
                || order < batchCeiling.load(ordering: .relaxed)) {
            readyOvertakes.wrappingAdd(1, ordering: .relaxed)
        }
        linkReady(procedure, bucket: index, after: after)
    }

    /// Puts a procedure a runner took but did not start back on its ready
    /// list, from the head: it was at the head when taken, so only
    /// procedures added earlier that became ready since go before it.
    private func pushReadyFront(_ procedure: Procedure) {
        let index = procedure.queuePriority.bucket
        let order = procedure.queueOrder.load(ordering: .relaxed)
        var after: Unmanaged<Procedure>? = nil
        var next = lists[index].head
        while state.pointee.maxConcurrent >= 0, let candidate = next,
              candidate.takeUnretainedValue().queueOrder.load(ordering: .relaxed) < order {
            after = candidate
            next = candidate.takeUnretainedValue().readyNext.load(ordering: .relaxed)
        }
        linkReady(procedure, bucket: index, after: after)
    }

    /// Links a procedure into ready list `index` after `after` (nil: at
    /// the head).
    @inline(__always)
    private func linkReady(_ procedure: Procedure, bucket index: Int, after: Unmanaged<Procedure>?) {
        let node = Unmanaged.passUnretained(procedure)
        let next = after == nil ? lists[index].head
                                : after.unsafelyUnwrapped.takeUnretainedValue().readyNext.load(ordering: .relaxed)
        procedure.readyBucket.store(index, ordering: .relaxed)
        procedure.readyPrev.store(after, ordering: .relaxed)
        procedure.readyNext.store(next, ordering: .relaxed)
        if let after {
            after.takeUnretainedValue().readyNext.store(node, ordering: .relaxed)
        } else {
            lists[index].head = node
        }
        if let next {
            next.takeUnretainedValue().readyPrev.store(node, ordering: .relaxed)
        } else {
            lists[index].tail = node
        }
        state.pointee.readyCount += 1
        if index > topReadyHint.load(ordering: .relaxed) {
            topReadyHint.store(index, ordering: .relaxed)
        }
    }

    @inline(__always)
    private func unlinkReady(_ procedure: Procedure) {
        let index = procedure.readyBucket.load(ordering: .relaxed)
        let next = procedure.readyNext.load(ordering: .relaxed)
        let prev = procedure.readyPrev.load(ordering: .relaxed)
        if let prev {
            prev.takeUnretainedValue().readyNext.store(next, ordering: .relaxed)
        } else {
            lists[index].head = next
        }
        if let next {
            next.takeUnretainedValue().readyPrev.store(prev, ordering: .relaxed)
        } else {
            lists[index].tail = prev
        }
        procedure.readyNext.store(nil, ordering: .relaxed)
        procedure.readyPrev.store(nil, ordering: .relaxed)
        procedure.readyBucket.store(-1, ordering: .relaxed)
        state.pointee.readyCount -= 1
        if lists[index].head == nil && index == topReadyHint.load(ordering: .relaxed) {
            var top = index - 1
            while top >= 0 && lists[top].head == nil { top -= 1 }
            topReadyHint.store(top, ordering: .relaxed)
        }
    }

    /// The first procedure of the highest non-empty ready list.
    @inline(__always)
    private func popReady() -> Procedure {
        var index = 4
        while lists[index].head == nil { index -= 1 }
        let procedure = lists[index].head.unsafelyUnwrapped.takeUnretainedValue()
        unlinkReady(procedure)
        return procedure
    }

    // MARK: Internals: hooks from procedures

    /// A procedure of this queue may have become ready.
    func procedureMayBeReady(_ procedure: Procedure) {
        // On a runner of this queue whose procedure is finishing: that runner
        // is about to pick the next procedure, so count it as idle.
        let thread = procedureThreadState()
        let returning = thread.pointee.finishedInline
            && thread.pointee.currentQueue?.toOpaque() == Unmanaged.passUnretained(self).toOpaque()
        var post = ProcedureQueuePostLock()
        lock.lock()
        let w = procedure.word.load(ordering: .acquiring)
        if procedure.admitted.load(ordering: .relaxed)
            && procedure.readyBucket.load(ordering: .relaxed) < 0
            && ProcedureWord.phase(w) == ProcedureWord.initial
            && ProcedureWord.pending(w) == 0 {
            pushReady(procedure)
            spawnCheck(&post, returningRunners: returning ? 1 : 0)
        }
        refreshInbox(&post)
        lock.unlock()
        runPost(&post)
    }

    /// A procedure's queue priority changed: move it if it is waiting.
    func procedurePriorityChanged(_ procedure: Procedure) {
        lock.lock()
        let index = procedure.readyBucket.load(ordering: .relaxed)
        if index >= 0 && index != procedure.queuePriority.bucket {
            unlinkReady(procedure)
            pushReady(procedure)
        }
        lock.unlock()
    }

    /// A procedure of this queue finished (from `Procedure.didFinish`).
    func procedureDidFinish(_ procedure: Procedure, completion: (@Sendable () -> Void)?) {
        let thread = procedureThreadState()
        if thread.pointee.runnerProcedure == Unmanaged.passUnretained(procedure).toOpaque() {
            // Inside its runner's start(): the runner does the bookkeeping
            // (didFinish has set finishedInline).
            thread.pointee.deferredCompletion = completion
            deferredFinishes.wrappingAdd(1, ordering: .releasing)
            return
        }
        var post = ProcedureQueuePostLock()
        lock.lock()
        accountFinish(procedure, hasCompletion: completion != nil, releasesSlot: true, post: &post)
        refreshInbox(&post)
        lock.unlock()
        post.completion = completion
        runPost(&post)
    }

    /// Under the lock: a procedure finished — slot, list, barriers, counts.
    /// The caller then (unlocked) dispatches its completion block and drops
    /// the queue's reference (the list's retain). A procedure that finished
    /// inside its runner's batch shares the batch's slot, which the runner
    /// gives back itself (`releasesSlot` false).
    private func accountFinish(_ procedure: Procedure, hasCompletion: Bool, releasesSlot: Bool,
                               post: inout ProcedureQueuePostLock) {
        let s = state
        if releasesSlot {
            s.pointee.executing -= 1
        }
        // A readiness hook racing with its launch may have put it back on a
        // ready list: take it off before the list's reference goes.
        if procedure.readyBucket.load(ordering: .relaxed) >= 0 {
            unlinkReady(procedure)
        }
        // Unlink from the list of unfinished procedures.
        let next = procedure.queueNext.load(ordering: .relaxed)
        let prev = procedure.queuePrev.load(ordering: .relaxed)
        if let prev {
            prev.takeUnretainedValue().queueNext.store(next, ordering: .relaxed)
        } else {
            s.pointee.allHead = next
        }
        if let next {
            next.takeUnretainedValue().queuePrev.store(prev, ordering: .relaxed)
        } else {
            s.pointee.allTail = prev
        }
        procedure.queueNext.store(nil, ordering: .relaxed)
        procedure.queuePrev.store(nil, ordering: .relaxed)
        s.pointee.count -= 1
        // Barriers.
        if procedure.isBarrier.load(ordering: .relaxed) {
            s.pointee.frontBarrier = nil
            if !s.pointee.later.isEmpty {
                let segment = s.pointee.later.removeFirst()
                s.pointee.frontBarrier = segment.barrier
                s.pointee.frontUnfinished = segment.held.count
                for held in segment.held {
                    admit(held)
                }
                if segment.held.isEmpty, let barrier = segment.barrier {
                    admit(barrier)
                }
            }
        } else {
            s.pointee.frontUnfinished -= 1
            if s.pointee.frontUnfinished == 0, let barrier = s.pointee.frontBarrier,
               !barrier.admitted.load(ordering: .relaxed) {
                admit(barrier)
            }
        }
        // Counts: a completion block keeps the procedure's unit outstanding.
        if !hasCompletion {
            s.pointee.outstanding -= 1
            if s.pointee.outstanding == 0 { post.leaveGroup = true }
        }
        bury(procedure, post: &post)
        spawnCheck(&post)
    }

    /// Under the lock: keeps a finished procedure's list reference for the
    /// next adding thread to drop (see the top of the file). Past about
    /// `graveLimit` of them, or when the queue goes idle, the caller drops
    /// them all itself. A lock-free stack: adds take it without the lock.
    @inline(__always)
    private func bury(_ procedure: Procedure, post: inout ProcedureQueuePostLock) {
        let node = Unmanaged.passUnretained(procedure)
        var head = graveyard.load(ordering: .relaxed)
        while true {
            procedure.queueNext.store(head, ordering: .relaxed)
            // Release: the taker sees the link.
            let (done, current) = graveyard.compareExchange(
                expected: head, desired: node,
                successOrdering: .releasing, failureOrdering: .relaxed)
            if done { break }
            head = current
        }
        let buried = graveCount.wrappingAdd(1, ordering: .relaxed).newValue
        if buried >= Self.graveLimit || state.pointee.outstanding == 0 {
            takeGraveyard(&post)
        }
    }

    /// The graveyard's procedures go with `post` (runPost drops their
    /// references, after the lock if it is held).
    @inline(__always)
    private func takeGraveyard(_ post: inout ProcedureQueuePostLock) {
        guard graveyard.load(ordering: .relaxed) != nil,
              let head = graveyard.exchange(nil, ordering: .acquiring) else { return }
        graveCount.store(0, ordering: .relaxed)
        if let held = post.release {
            // What `post` already holds goes behind the graveyard's oldest.
            var last = head
            while let next = last.takeUnretainedValue().queueNext.load(ordering: .relaxed) {
                last = next
            }
            last.takeUnretainedValue().queueNext.store(held, ordering: .relaxed)
        }
        post.release = head
    }

    /// The watchdog fired: look again. If no runner started a batch since it
    /// was armed, the busy ones are stuck in long procedures: waiting
    /// procedures get runners of their own.
    func watchdogFired() {
        var post = ProcedureQueuePostLock()
        lock.lock()
        drainInbox(&post)
        state.pointee.watchdogArmed = false
        let stalled = state.pointee.batchEpoch == state.pointee.watchdogEpoch
        if stalled {
            reclaimStalledBatches()
        } else if !state.pointee.batches.isEmpty {
            armWatchdog(&post)  // batches in progress: keep watching
        }
        spawnCheck(&post, runnersStalled: stalled)
        refreshInbox(&post)
        lock.unlock()
        runPost(&post)
    }

    /// Runs a completion block on the default global queue; the queue's
    /// outstanding count keeps it waited for until it has run.
    private func dispatchCompletion(_ completion: @escaping @Sendable () -> Void) {
        ProcedureCallbackBox.async(on: procedureDefaultGlobalQueue()) { [self] in
            completion()
            completionDidRun()
        }
    }

    /// A completion block ran.
    private func completionDidRun() {
        var post = ProcedureQueuePostLock()
        lock.lock()
        state.pointee.outstanding -= 1
        post.leaveGroup = state.pointee.outstanding == 0
        if post.leaveGroup { takeGraveyard(&post) }
        refreshInbox(&post)
        lock.unlock()
        runPost(&post)
    }

    // MARK: Internals: runners

    /// Under the lock: starts as many runners as ready work and free slots
    /// call for, counting runners that are already looking for work (idle,
    /// or about to return from a procedure that just finished). Long (or not
    /// yet measured) procedures get a runner each, so they run side by side
    /// on as many threads as the pool gives; short ones get runners by
    /// backlog.
    @inline(__always)
    private func spawnCheck(_ post: inout ProcedureQueuePostLock, returningRunners: Int = 0,
                            runnersStalled: Bool = false) {
        let s = state
        guard !s.pointee.suspended, s.pointee.readyCount > 0 else { return }
        let startable = min(s.pointee.readyCount, s.pointee.width - s.pointee.executing)
        var wanted: Int
        let each = s.pointee.nanosPerProcedure
        if each < Self.shortProcedureNanoseconds && s.pointee.runners > 0 && !runnersStalled {
            // Short procedures and runners making progress: busy runners are
            // back within a batch, so add runners only for a backlog longer
            // than a batch per runner (more would fight over the lock and
            // the CPUs with the threads adding the work).
            let backlog = UInt64(s.pointee.readyCount) &* each
            let needed = Int(min(UInt64(startable), backlog / Self.batchTargetNanoseconds + 1))
            wanted = needed - s.pointee.runners
            if wanted <= 0 {
                // Ready work waits on the bet that the runners are back
                // soon: look again shortly, in case they are stuck in long
                // procedures.
                armWatchdog(&post)
            }
        } else {
            let idle = s.pointee.runners - s.pointee.busy + returningRunners
            wanted = startable - idle
        }
        wanted = min(wanted, s.pointee.runnerLimit - s.pointee.runners)
        guard wanted > 0 else { return }
        s.pointee.runners += wanted
        post.spawn += wanted
        captureTarget(&post)
    }

    /// Under the lock: where the runners of `post` go (retained until
    /// runPost has submitted them), with the target's generation.
    @inline(__always)
    private func captureTarget(_ post: inout ProcedureQueuePostLock) {
        guard post.target == nil else { return }
        post.target = state.pointee.target
        post.generation = state.pointee.targetGeneration
        sq_retain(UnsafeMutableRawPointer(state.pointee.target))
    }

    /// After the lock: submits runners, schedules a completion block,
    /// drops the queue's reference to a finished procedure, leaves the group.
    @inline(__always)
    private func runPost(_ post: inout ProcedureQueuePostLock) {
        if post.armWatchdog {
            // A look, not a deadline: a quarter of the delay as leeway
            // keeps it off the precise timers' spinning worker.
            sq_after_leeway_f(sq_time(SQ_TIME_NOW, Int64(Self.watchdogNanoseconds)),
                              Self.watchdogNanoseconds / 4, procedureDefaultGlobalQueue(),
                              Unmanaged.passRetained(self).toOpaque(), procedureWatchdogEntry)
        }
        if let target = post.target {
            var count = post.spawn + (post.resubmit ? 1 : 0)
            let plain = post.generation == 0 && target == procedureDefaultGlobalQueue()
            while count > 0 {
                if plain {
                    sq_async_f(target, Unmanaged.passRetained(self).toOpaque(), procedureRunnerEntry)
                } else {
                    let ticket = UnsafeMutablePointer<ProcedureRunnerTicket>.allocate(capacity: 1)
                    ticket.initialize(to: ProcedureRunnerTicket(
                        queue: Unmanaged.passRetained(self), target: target,
                        generation: post.generation))
                    sq_async_f(target, ticket, procedureTargetedRunnerEntry)
                }
                count -= 1
            }
            sq_release(UnsafeMutableRawPointer(target))
        }
        if let completion = post.completion {
            dispatchCompletion(completion)
        }
        for _ in 0..<post.inboxLeaves {
            sq_group_leave(group)  // counted in `outstanding` now
        }
        var dead = post.release
        while let procedure = dead {
            // Read the link first: the release may free the procedure.
            dead = procedure.takeUnretainedValue().queueNext.load(ordering: .relaxed)
            procedure.release()  // the list's retain
        }
        if post.leaveGroup {
            post = ProcedureQueuePostLock()
            sq_group_leave(group)
            // Last: may deinitialise the queue.
            Unmanaged.passUnretained(self).release()
            return
        }
        post = ProcedureQueuePostLock()
    }

    /// A runner: starts ready procedures while there are free slots.
    ///
    /// On a width-1 queue it takes a batch per lock acquisition — as many as
    /// fit in about `batchTargetNanoseconds` judging by the previous batch,
    /// at most `maxBatch` — and runs them one after another in the one slot,
    /// then does the bookkeeping of those that finished inside start() and
    /// takes the next batch under the same acquisition. The rest of a batch
    /// goes back to the ready lists when a procedure is still running after
    /// its start() returns (asynchronous: it keeps the slot), when the queue
    /// is suspended, or when a higher-priority procedure becomes ready. On
    /// wider queues it takes one procedure at a time, so that no procedure
    /// waits behind a long one while another thread could run it.
    ///
    /// **Lifetimes.** A procedure taken into a batch is off the ready lists
    /// but not launched, and nothing marks it taken: a readiness hook
    /// (cancel(), a dependency removed or finished, notifyReadinessChanged)
    /// or the watchdog may put it back on a ready list, where another runner
    /// — once a slot is free: a wider queue, a width raised, an asynchronous
    /// procedure finished on another thread — launches and finishes it, and
    /// the queue drops it. So the queue's list does not keep a batch alive:
    /// the runner takes a reference to each procedure it pops (under the
    /// lock, while the list still holds it) and drops it outside the lock
    /// after the batch's hand-back, in `held`. The launch is a
    /// compare-and-swap, so a procedure taken twice still runs once.
    func runLoop(servedTarget: sq_queue_t, generation: UInt32) {
        withUnsafeTemporaryAllocation(of: Unmanaged<Procedure>.self, capacity: Self.maxBatch) { batch in
            withUnsafeTemporaryAllocation(of: Unmanaged<Procedure>.self, capacity: Self.maxBatch) { held in
                withUnsafeTemporaryAllocation(of: ProcedureFinishedSlot.self, capacity: Self.maxBatch) { slots in
                    runLoop(servedTarget: servedTarget, generation: generation,
                            batch: batch.baseAddress!, held: held.baseAddress!,
                            finished: slots.baseAddress!)
                }
            }
        }
    }

    private func runLoop(servedTarget: sq_queue_t, generation: UInt32,
                         batch: UnsafeMutablePointer<Unmanaged<Procedure>>,
                         held: UnsafeMutablePointer<Unmanaged<Procedure>>,
                         finished: UnsafeMutablePointer<ProcedureFinishedSlot>) {
        let record = ProcedureBatchRecord(items: batch)
        var post = ProcedureQueuePostLock()
        var finishedCount = 0
        // The previous batch's references, dropped at the next unlock.
        var heldCount = 0
        var limit = 1
        var budget = Self.runnerBudget
        let s = state
        lock.lock()
        if generation != s.pointee.targetGeneration {
            // Submitted before the target changed, and not started then:
            // the change stopped counting this runner (and started others
            // on the new target).
            lock.unlock()
            return
        }
        let thread = procedureThreadState()
        let saved = thread.pointee
        thread.pointee.currentQueue = Unmanaged.passUnretained(self)
        // `servedTarget` is the queue this runner runs on; if
        // underlyingQueue changed since it was submitted, the procedures
        // started from now on belong on the new one.
        while true {
            drainInbox(&post)  // adds made without the lock
            if s.pointee.suspended || s.pointee.readyCount == 0
                || s.pointee.executing >= s.pointee.width {
                s.pointee.runners -= 1
                break
            }
            if budget <= 0 || s.pointee.target != servedTarget {
                // Let other work on the pool run: go to the back of the line
                // (of the new underlying queue, if it changed).
                post.resubmit = true
                captureTarget(&post)
                break
            }
            let count = min(limit, s.pointee.readyCount, budget)
            for i in 0..<count {
                // The runner's reference (see Lifetimes above).
                batch[i] = Unmanaged.passRetained(popReady())
            }
            var ceiling = -1
            for i in 0..<count {
                ceiling = max(ceiling, batch[i].takeUnretainedValue().queueOrder.load(ordering: .relaxed))
            }
            batchCeiling.store(ceiling, ordering: .relaxed)
            let overtakes = readyOvertakes.load(ordering: .relaxed)
            budget -= count
            s.pointee.batchEpoch &+= 1
            // Time a sample of the batches (every one when it can grow).
            let timed = count > 1 || s.pointee.batchEpoch & 7 == 0
                || s.pointee.nanosPerProcedure == .max
            // One slot for the batch: its procedures run one after another.
            s.pointee.executing += 1
            s.pointee.busy += 1
            let watched = count > 1 && s.pointee.width > 1
            if watched {
                // Others may run its procedures if it stalls: the watchdog
                // hands the rest of a stalled batch back to the ready lists.
                record.count = count
                record.next.store(1, ordering: .relaxed)
                s.pointee.batches.append(Unmanaged.passUnretained(record))
                armWatchdog(&post)
            }
            if s.pointee.readyCount > 0 {
                spawnCheck(&post)  // work left behind: enough runners for it?
            }
            refreshInbox(&post)
            lock.unlock()
            releaseHeld(held, count: heldCount)
            heldCount = 0
            releaseFinished(finished, count: finishedCount)
            finishedCount = 0
            runPost(&post)

            // The runner's references keep the batch alive (see Lifetimes).
            let began = timed ? procedureClockNanoseconds() : 0
            var index = 0
            var slotTaken = false  // by an asynchronous procedure still running
            while index < count {
                let procedure = batch[index].takeUnretainedValue()
                if index > 0 && (slotTaken || suspendedHint.load(ordering: .relaxed)
                    || topReadyHint.load(ordering: .relaxed) > procedure.queuePriority.bucket
                    || readyOvertakes.load(ordering: .relaxed) != overtakes) {
                    // The slot is taken, the queue was suspended, or a
                    // procedure that goes first became ready (of a higher
                    // priority, or added earlier): hand back the rest.
                    break
                }
                index += 1
                record.next.store(index, ordering: .relaxed)
                guard procedure.tryLaunch() else {
                    // Not ready after all (a dependency was added, or a
                    // custom isReady said no: it comes back when readiness
                    // changes), or handed back and started by another runner.
                    continue
                }
                thread.pointee.runnerProcedure = Unmanaged.passUnretained(procedure).toOpaque()
                thread.pointee.finishedInline = false
                procedure.start()
                if thread.pointee.finishedInline {
                    (finished + finishedCount).initialize(to: ProcedureFinishedSlot(
                        procedure: Unmanaged.passUnretained(procedure),
                        completion: thread.pointee.deferredCompletion))
                    finishedCount += 1
                } else {
                    // Still running (asynchronous): it keeps the slot until
                    // it finishes; the rest of the batch goes back.
                    slotTaken = true
                }
                thread.pointee.deferredCompletion = nil
                thread.pointee.finishedInline = false
                thread.pointee.runnerProcedure = nil
            }
            var each: UInt64 = 0
            if timed {
                each = max(1, (procedureClockNanoseconds() &- began) / UInt64(index))
                limit = Self.nextBatchLimit(each: each)
            }

            lock.lock()
            if watched, let at = s.pointee.batches.firstIndex(where: {
                $0.toOpaque() == Unmanaged.passUnretained(record).toOpaque()
            }) {
                s.pointee.batches.remove(at: at)  // leave the watchdog's view
            }
            handBack(batch, from: index, count: count)
            // Dropped outside the lock (a procedure that another runner
            // finished may go with it), before `batch` is reused.
            held.update(from: batch, count: count)
            heldCount = count
            if timed {
                s.pointee.nanosPerProcedure = each
            }
            s.pointee.busy -= 1
            batchCeiling.store(-1, ordering: .relaxed)
            if !slotTaken {
                s.pointee.executing -= 1
            }
            for i in 0..<finishedCount {
                accountFinish(finished[i].procedure.takeUnretainedValue(),
                              hasCompletion: finished[i].completion != nil,
                              releasesSlot: false, post: &post)
            }
            if finishedCount > 0 {
                deferredFinishes.wrappingSubtract(finishedCount, ordering: .releasing)
            }
        }
        refreshInbox(&post)
        lock.unlock()
        releaseHeld(held, count: heldCount)
        releaseFinished(finished, count: finishedCount)
        runPost(&post)
        thread.pointee.currentQueue = saved.currentQueue
        thread.pointee.runnerProcedure = saved.runnerProcedure
        thread.pointee.finishedInline = saved.finishedInline
        thread.pointee.deferredCompletion = saved.deferredCompletion
    }

    /// Under the lock: puts the part of a batch a runner did not get to back
    /// at the head of the ready lists, in order — except procedures already
    /// back there (handed back by the watchdog) or started by another runner.
    private func handBack(_ batch: UnsafeMutablePointer<Unmanaged<Procedure>>, from index: Int, count: Int) {
        var back = count
        while back > index {
            back -= 1
            let procedure = batch[back].takeUnretainedValue()
            if procedure.readyBucket.load(ordering: .relaxed) < 0
                && ProcedureWord.phase(procedure.word.load(ordering: .acquiring)) == ProcedureWord.initial {
                pushReadyFront(procedure)
            }
        }
    }

    /// Under the lock, when the watchdog found no progress: the unstarted
    /// rest of every registered batch goes back to the ready lists, where
    /// other runners can take it (a procedure's launch is a compare-and-swap,
    /// so each still runs once).
    private func reclaimStalledBatches() {
        for record in state.pointee.batches {
            record._withUnsafeGuaranteedRef { record in
                let from = record.next.load(ordering: .relaxed)
                var index = from
                while index < record.count {
                    let procedure = record.items[index].takeUnretainedValue()
                    if procedure.readyBucket.load(ordering: .relaxed) < 0
                        && ProcedureWord.phase(procedure.word.load(ordering: .acquiring))
                            == ProcedureWord.initial {
                        pushReady(procedure)
                    }
                    index += 1
                }
            }
        }
    }

    /// Arms the watchdog unless it is armed (under the lock).
    private func armWatchdog(_ post: inout ProcedureQueuePostLock) {
        if !state.pointee.watchdogArmed {
            state.pointee.watchdogArmed = true
            state.pointee.watchdogEpoch = state.pointee.batchEpoch
            post.armWatchdog = true
        }
    }

    /// After the lock: drops a runner's references to its last batch.
    @inline(__always)
    private func releaseHeld(_ held: UnsafeMutablePointer<Unmanaged<Procedure>>, count: Int) {
        for i in 0..<count {
            held[i].release()
        }
    }

    /// After the lock, for procedures a runner accounted: completion blocks,
    /// then the queue's references (before any group leave in runPost).
    @inline(__always)
    private func releaseFinished(_ finished: UnsafeMutablePointer<ProcedureFinishedSlot>, count: Int) {
        for i in 0..<count {
            let slot = (finished + i).move()
            if let completion = slot.completion { dispatchCompletion(completion) }
        }
    }

    /// The next batch size when procedures took `each` nanoseconds.
    @inline(__always)
    private static func nextBatchLimit(each: UInt64) -> Int {
        Int(min(UInt64(maxBatch), max(1, batchTargetNanoseconds / each)))
    }

    // MARK: Internals: helpers

    @inline(__always)
    private func withLock<R>(_ body: (inout ProcedureQueueState) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&state.pointee)
    }

    private static func checkWidth(_ count: Int) {
        if count < -1 {
            procedureMisuse("ProcedureQueue.maxConcurrentCount: \(count) is not a valid count "
                + "(use a count >= 0, or defaultMaxConcurrentCount)")
        }
    }

    private static func width(for count: Int) -> Int {
        count < 0 ? Int.max : count
    }

    private static func runnerLimit(for count: Int) -> Int {
        count < 0 ? defaultRunnerLimit : min(count, 512)
    }
}

// MARK: - Identity

/// Queues are equal only to themselves (as Foundation's `OperationQueue`).
extension ProcedureQueue: Hashable {
    public static func == (lhs: ProcedureQueue, rhs: ProcedureQueue) -> Bool {
        lhs === rhs
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}

/// Counts arrivals and lets one thread wait for the last (a semaphore that
/// stays alive as long as any arriving closure holds the box).
final class ProcedureCountdown: @unchecked Sendable {
    private let remaining: Atomic<Int>
    private let semaphore: sq_semaphore_t

    init(_ count: Int) {
        remaining = Atomic(count)
        guard let semaphore = sq_semaphore_create(0) else {
            procedureMisuse("ProcedureQueue: cannot create a semaphore")
        }
        self.semaphore = semaphore
    }

    deinit {
        sq_release(UnsafeMutableRawPointer(semaphore))
    }

    func arrive() {
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            _ = sq_semaphore_signal(semaphore)
        }
    }

    func wait() {
        if remaining.load(ordering: .acquiring) <= 0 { return }
        _ = sq_semaphore_wait(semaphore, SQ_TIME_FOREVER)
    }
}

/// Counts arrivals and runs a closure on the last.
final class ProcedureCountdownAsync: Sendable {
    private let remaining: Atomic<Int>
    private let done: @Sendable () -> Void

    init(_ count: Int, _ done: @escaping @Sendable () -> Void) {
        remaining = Atomic(count)
        self.done = done
    }

    func arrive() {
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            done()
        }
    }
}
