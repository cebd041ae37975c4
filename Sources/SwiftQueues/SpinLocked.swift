//===----------------------------------------------------------------------===//
//
// SwiftQueues — SpinLocked: a value behind a SpinLock.
//
//===----------------------------------------------------------------------===//

/// A value that only one thread at a time may touch: the value lives inside
/// the lock, and the only way to it is ``withLock(_:)``.
///
///     let hits = SpinLocked([String: Int]())
///     queue.async { hits.withLock { $0[path, default: 0] += 1 } }
///     let top = hits.withLock { $0.max { $0.value < $1.value } }
///
/// It plays the part of `Synchronization.Mutex`, with two differences that
/// matter on Linux: ThreadSanitizer sees its acquire and release (it is a
/// ``SpinLock``, built on C11 atomics; `Mutex`'s futex system calls are
/// invisible to TSan, which then reports races on the guarded value), and a
/// waiter spins briefly, then yields, then sleeps on a futex, so short
/// critical sections never pay for a system call. Unlike `Mutex` it is a
/// class: share it by reference (capture it, store it in several places)
/// without wrapping it in one yourself.
///
/// `SpinLocked` is `Sendable` when `Value` is: `withLock` hands the value to
/// one thread at a time, and a `Sendable` value may be seen by many threads
/// over its life. `Value` and the results of the closures may be
/// noncopyable.
///
/// The lock is not recursive: calling `withLock` on the same `SpinLocked`
/// from inside its own closure waits forever.
public final class SpinLocked<Value: ~Copyable> {
    @usableFromInline
    internal let lock = SpinLock()
    @usableFromInline
    internal var value: Value

    /// Creates the lock, holding `value`.
    public init(_ value: consuming sending Value) {
        self.value = value
    }

    /// Runs `body` with the value while holding the lock, and returns what
    /// it returns (or throws what it throws, with its type). The lock is
    /// released however `body` exits.
    ///
    /// `body` runs on the calling thread, in the caller's isolation: it may
    /// capture non-`Sendable` values, and return noncopyable ones.
    @inlinable
    public func withLock<Result: ~Copyable, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// Like ``withLock(_:)``, but returns nil at once, without running
    /// `body`, when another thread holds the lock.
    @inlinable
    public func withLockIfAvailable<Result: ~Copyable, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result? {
        guard lock.tryLock() else { return nil }
        defer { lock.unlock() }
        return try body(&value)
    }
}

// `@unchecked Sendable` is safe: `value` is only touched inside `withLock` /
// `withLockIfAvailable`, so every access is ordered by the lock's acquire
// (on lock) and release (on unlock), and `lock` itself is immutable.
extension SpinLocked: @unchecked Sendable where Value: ~Copyable & Sendable {}
