//===----------------------------------------------------------------------===//
//
// SwiftQueues — SpinLock over the C runtime's sq_spinlock_t
// (include/swiftqueues/spinlock.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A lock for short critical sections.
///
/// Uncontended, `lock()` and `unlock()` are one atomic instruction each.
/// Contended, a waiter spins briefly, then yields, then sleeps on a futex, so
/// a preempted holder never makes its waiters burn the CPU it needs to finish.
///
///     let lock = SpinLock()
///     let total = lock.withLock { shared.count }
///
/// The lock is not recursive and has no owner check: locking it twice on one
/// thread waits forever. Unlock only from the thread that locked it.
//
// `@unchecked Sendable` is safe: the only state is `pointer`, an immutable
// pointer to a heap-allocated sq_spinlock_t that is only accessed through the
// C runtime's atomic lock operations. The lock word lives on the heap (not in
// a stored property passed `inout`) so its address is stable for as long as
// the object lives, as the C lock and its futex require.
public final class SpinLock: @unchecked Sendable {
    @usableFromInline
    internal let pointer: UnsafeMutablePointer<sq_spinlock_t>

    /// Creates an unlocked lock.
    public init() {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: sq_spinlock_t())  // zero: SQ_SPINLOCK_INIT
    }

    deinit {
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }

    /// Acquires the lock, waiting as long as it takes.
    @inlinable
    public func lock() {
        sq_spinlock_lock(pointer)
    }

    /// Acquires the lock if it is free and returns `true`; returns `false`
    /// at once if another thread holds it.
    @inlinable
    public func tryLock() -> Bool {
        sq_spinlock_trylock(pointer)
    }

    /// Releases the lock, which the calling thread must hold.
    @inlinable
    public func unlock() {
        sq_spinlock_unlock(pointer)
    }

    /// Runs `body` while holding the lock and returns its result, releasing
    /// the lock however `body` exits.
    ///
    /// `body` runs on the calling thread, in the caller's isolation, so it may
    /// capture and return non-`Sendable` values (and noncopyable ones).
    @inlinable
    public func withLock<Result: ~Copyable, Failure: Error>(
        _ body: () throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}
