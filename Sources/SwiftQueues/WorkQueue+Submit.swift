//===----------------------------------------------------------------------===//
//
// SwiftQueues — submitting work to a WorkQueue: async, sync, barriers,
// fork-join children, work items, concurrentPerform (sq_async_f,
// sq_sync_f, sq_barrier_*_f, sq_group_async_f, sq_spawn_f,
// sq_group_spawn_f, sq_async_workitem, sq_apply_f, sq_apply_range_f).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

extension WorkQueue {
    // MARK: - Asynchronous

    /// Submits `body` and returns at once (`DispatchQueue.async`). It runs
    /// after everything submitted before it has started (serial queue:
    /// finished). The closure is released as soon as it has run.
    public func async(_ body: @escaping @Sendable () -> Void) {
        sq_async_f(raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    /// Submits `body` as a member of `group`: the group is not empty until
    /// `body` has returned (`DispatchQueue.async(group:)`).
    public func async(group: WorkGroup, _ body: @escaping @Sendable () -> Void) {
        sq_group_async_f(group.raw, raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    /// Submits `body` as a fork-join child (`sq_spawn_f`; no Dispatch
    /// counterpart): as ``async(_:)``, but on a global queue with no start
    /// order. Spawned from a pool worker it runs newest first on that
    /// worker, so a tree of spawns runs depth first where it was made while
    /// idle workers take the oldest; one look in 8 takes the oldest work
    /// anyway. From any other thread, or on any other queue, it is
    /// ``async(_:)``.
    public func spawn(_ body: @escaping @Sendable () -> Void) {
        sq_spawn_f(raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    /// ``spawn(_:)`` as a member of `group` (`sq_group_spawn_f`): a node
    /// that spawns its children into a group and waits for it runs them
    /// itself, depth first.
    public func spawn(group: WorkGroup, _ body: @escaping @Sendable () -> Void) {
        sq_group_spawn_f(group.raw, raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    /// Submits a work item (as a barrier if it was created with
    /// ``WorkItem/Flags/barrier``). A cancelled item does not run.
    public func async(execute item: WorkItem) {
        sq_async_workitem(raw, item.raw)
    }

    /// Submits `body` as a barrier and returns at once
    /// (`async(flags: .barrier)`). On a concurrent queue it starts once
    /// everything submitted before it has finished and runs alone; work
    /// submitted after it waits for it. On a serial queue it is an ordinary
    /// submission; global queues treat it as one too.
    public func asyncBarrier(_ body: @escaping @Sendable () -> Void) {
        sq_barrier_async_f(raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    // MARK: - Synchronous

    /// Runs `body` on the queue, waits for it and returns its result or
    /// rethrows its error (`DispatchQueue.sync`).
    ///
    ///     let value = cache.sync { storage[key] }
    ///
    /// On an idle serial queue `body` runs on the calling thread with no
    /// thread switch; otherwise the caller waits its turn. Nothing is
    /// allocated: `body` and its result stay on the caller's stack.
    ///
    /// Calling `sync` on the serial queue the thread is already running
    /// (directly or through a target chain) is a deadlock: the runtime
    /// stops the process and names the queue.
    ///
    /// The error type is typed (`throws(E)`): a non-throwing `body` makes a
    /// non-throwing call, exactly like `rethrows`, and a throwing one keeps
    /// its error type.
    @inlinable
    public func sync<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        var result: Result<T, E>? = nil
        _syncOnQueue(barrier: false) { result = Result(catching: body) }
        return try result.unsafelyUnwrapped.get()
    }

    /// ``sync(_:)`` as a barrier (`sync(flags: .barrier)`): on a concurrent
    /// queue, `body` waits for everything before it and runs alone. Prefer
    /// ``asyncBarrier(_:)``: a thread blocked in a barrier is easily part of
    /// a deadlock.
    @inlinable
    public func syncBarrier<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        var result: Result<T, E>? = nil
        _syncOnQueue(barrier: true) { result = Result(catching: body) }
        return try result.unsafelyUnwrapped.get()
    }

    /// The non-generic half of ``sync(_:)``: runs `thunk` through
    /// `sq_sync_f` (or `sq_barrier_sync_f`). The generic half is inlinable,
    /// so it is specialised in the caller's module (no unspecialised
    /// `Result<T, E>` at run time); this half keeps the C call out of it.
    @usableFromInline
    internal func _syncOnQueue(barrier: Bool, _ thunk: () -> Void) {
        withStackCallback(thunk) { context, function in
            if barrier {
                sq_barrier_sync_f(raw, context, function)
            } else {
                sq_sync_f(raw, context, function)
            }
        }
    }

    /// Runs a work item on the queue and waits for it (as a barrier if it
    /// was created with ``WorkItem/Flags/barrier``). A cancelled item does
    /// not run.
    public func sync(execute item: WorkItem) {
        if item.flags.contains(.barrier) {
            syncBarrier { item.perform() }
        } else {
            sync { item.perform() }
        }
    }

    // MARK: - Loops

    /// Calls `body(i)` for every `i` in `0..<iterations` on this queue and
    /// returns when all calls have returned (`sq_apply_f` on this queue).
    ///
    /// On a concurrent queue the calls run in parallel (the calling thread
    /// takes part); on a serial queue they run one after another. Calling it
    /// on the serial queue the thread is running is a deadlock, reported by
    /// the runtime. Give each call enough work to outweigh its scheduling
    /// cost, striding if need be.
    public func concurrentPerform(iterations: Int, _ body: @Sendable (Int) -> Void) {
        Self.apply(iterations, on: raw, body)
    }

    /// Calls `body(i)` for every `i` in `0..<iterations`, in parallel on the
    /// worker pool (and the calling thread), and returns when all calls have
    /// returned (`DispatchQueue.concurrentPerform`, `SQ_APPLY_AUTO`).
    /// A nested call runs its iterations on the calling thread, so nesting
    /// never oversubscribes the pool.
    public static func concurrentPerform(iterations: Int, _ body: @Sendable (Int) -> Void) {
        apply(iterations, on: nil, body)
    }

    /// Calls `body` with disjoint ranges that together cover `range`, on this
    /// queue, and returns when all calls have returned (`sq_apply_range_f`).
    ///
    /// The body loops over its range itself, so the compiler inlines and
    /// vectorizes that loop; a call costs the same however many indices its
    /// range holds, which makes this the form for small bodies:
    ///
    ///     WorkQueue.concurrentPerform(range: 0..<values.count) { range in
    ///         for i in range { output[i] = values[i] * 2 }
    ///     }
    ///
    /// The runtime sizes the ranges while the loop runs (large ones for a
    /// cheap body, small ones that balance for a costly or uneven one). On
    /// a concurrent queue the calls run in parallel (the calling thread
    /// takes part); on a serial queue there is one call for all of `range`.
    /// A nested call runs all of its range on the calling thread.
    @inlinable
    public func concurrentPerform(range: Range<Int>, _ body: @Sendable (Range<Int>) -> Void) {
        Self._applyRange(range, on: raw, body)
    }

    /// ``concurrentPerform(range:_:)`` on the worker pool (and the calling
    /// thread), like ``concurrentPerform(iterations:_:)`` (`SQ_APPLY_AUTO`).
    @inlinable
    public static func concurrentPerform(range: Range<Int>, _ body: @Sendable (Range<Int>) -> Void) {
        _applyRange(range, on: nil, body)
    }

    /// Runs `body` through `sq_apply_range_f`: one C call per range, the
    /// closure reached through a pointer to a stack value (no allocation,
    /// and no reference counting but a copy of the closure per range).
    @inlinable
    internal static func _applyRange(
        _ range: Range<Int>, on queue: OpaquePointer?, _ body: @Sendable (Range<Int>) -> Void
    ) {
        if range.isEmpty { return }
        withoutActuallyEscaping(body) { body in
            var loop = _RangeLoop(body: body, lowerBound: range.lowerBound)
            // C calls the function only before sq_apply_range_f returns
            // (a helper that starts later finds nothing left), so `loop`
            // and its escaping copy of `body` are gone again when
            // withoutActuallyEscaping checks it.
            withUnsafeMutablePointer(to: &loop) { pointer in
                sq_apply_range_f(range.count, queue, UnsafeMutableRawPointer(pointer)) { context, begin, end in
                    let loop = context.unsafelyUnwrapped.assumingMemoryBound(to: _RangeLoop.self)
                    let base = loop.pointee.lowerBound
                    loop.pointee.body(base &+ Int(bitPattern: UInt(begin))..<base &+ Int(bitPattern: UInt(end)))
                }
            }
        }
    }

    /// Runs `body` through `sq_apply_f` with no per-iteration reference
    /// counting and one C call per *unit* of up to 16 iterations.
    ///
    /// Two costs dominated this path with a small body (profiled with
    /// `perf`): loading the closure from the C context copied it, which is a
    /// `swift_retain`/`swift_release` pair per iteration on a context object
    /// shared by every participating thread (atomic traffic on one cache
    /// line); and each iteration went through C's indirect call, the C thunk,
    /// and reabstraction thunks for the closure stored as a generic value.
    /// Now the closure is a `let` of a class instance, borrowed in the thunk
    /// without a copy, and the thunk runs a unit of consecutive indices.
    private static func apply(
        _ iterations: Int, on queue: OpaquePointer?, _ body: @Sendable (Int) -> Void
    ) {
        if iterations < 0 {
            misuse("WorkQueue.concurrentPerform(iterations:)", "negative iteration count \(iterations)")
        }
        // Units of up to 16 iterations, but never fewer than 1024 units, so
        // the C side still has as many pieces to balance across workers as
        // before (it hands out chunks of about iterations / (width * 64)).
        let unit = Swift.min(Swift.max(iterations / 1024, 1), 16)
        let units = iterations / unit + (iterations % unit == 0 ? 0 : 1)
        withoutActuallyEscaping(body) { body in
            let loop = ApplyLoop(body, iterations: iterations, unit: unit)
            // The C context is unretained: `loop` outlives sq_apply_f, and C
            // only calls the function before sq_apply_f returns (a helper
            // that starts later finds no iterations left and does not call
            // it). So the escaping copy of `body` is gone again when
            // withoutActuallyEscaping checks it.
            withExtendedLifetime(loop) {
                sq_apply_f(units, queue, Unmanaged.passUnretained(loop).toOpaque()) { context, index in
                    // A guaranteed reference: `loop` is not retained, and
                    // (optimised builds) its `let body` is borrowed rather
                    // than copied, so no reference counting per unit.
                    Unmanaged<ApplyLoop>.fromOpaque(context.unsafelyUnwrapped)
                        ._withUnsafeGuaranteedRef { $0.run(unitAt: index) }
                }
            }
        }
    }
}

/// One `concurrentPerform`: the body and how its iterations are cut into
/// units. The participating threads share it through a raw pointer while the
/// call runs, which is safe: every field is an immutable `let`, and `body`
/// is `@Sendable`.
private final class ApplyLoop {
    let body: @Sendable (Int) -> Void
    let iterations: Int
    let unit: Int

    init(_ body: @escaping @Sendable (Int) -> Void, iterations: Int, unit: Int) {
        self.body = body
        self.iterations = iterations
        self.unit = unit
    }

    /// Calls `body` for the indices of unit `index`, in ascending order (so
    /// a serial queue still sees 0, 1, 2, ...).
    @inline(__always)
    func run(unitAt index: Int) {
        let start = index &* unit
        let end = iterations &- start < unit ? iterations : start &+ unit
        var i = start
        while i < end {
            body(i)
            i &+= 1
        }
    }
}

/// One `concurrentPerform(range:)`: the body and where the range starts.
/// The participating threads share it through a raw pointer while the call
/// runs, which is safe: it is only read, and `body` is `@Sendable`.
@usableFromInline
internal struct _RangeLoop {
    @usableFromInline let body: @Sendable (Range<Int>) -> Void
    @usableFromInline let lowerBound: Int

    @inlinable
    init(body: @escaping @Sendable (Range<Int>) -> Void, lowerBound: Int) {
        self.body = body
        self.lowerBound = lowerBound
    }
}
