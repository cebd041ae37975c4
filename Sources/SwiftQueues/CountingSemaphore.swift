//===----------------------------------------------------------------------===//
//
// SwiftQueues — CountingSemaphore over the C runtime's sq_semaphore_t
// (include/swiftqueues/semaphore.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// A counting semaphore (`DispatchSemaphore`): ``wait()`` takes a unit,
/// waiting for one if none is left, and ``signal()`` gives one back.
///
///     let connections = CountingSemaphore(value: 4)   // at most 4 at once
///     WorkQueue.global().async {
///         connections.wait()
///         defer { connections.signal() }
///         useConnection()
///     }
///
/// Taking an available unit and giving one back with nobody waiting are one
/// atomic operation each, with no system call.
///
/// Letting the last reference go while a thread waits on the semaphore, or
/// while it holds fewer units than it was created with (a unit taken and
/// never given back), stops the process: both mean a unit was lost.
///
/// (Not `Semaphore`: Glibc, which Foundation re-exports, already has a
/// `Semaphore` type alias, so the short name would be ambiguous in any file
/// that imports Foundation.)
//
// `@unchecked Sendable` is safe: the only state is the immutable pointer to
// the C semaphore, whose operations are thread-safe.
public final class CountingSemaphore: @unchecked Sendable {
    /// The C semaphore (one reference, owned).
    internal let raw: OpaquePointer

    /// Creates a semaphore holding `value` units (`value >= 0`). Use 0 to
    /// signal events between threads, n to guard a pool of n resources.
    public init(value: Int) {
        if value < 0 {
            misuse("CountingSemaphore(value:)", "negative value \(value) (a semaphore starts with 0 or more units)")
        }
        raw = sq_semaphore_create(value).unsafelyUnwrapped
    }

    deinit {
        sq_release(cObject(raw))
    }

    /// Takes a unit, blocking the calling thread until one is available.
    /// From async code, use the async ``wait()`` instead.
    @available(*, noasync, message: "blocks the thread; use the async wait() instead")
    public func wait() {
        _ = sq_semaphore_wait(raw, SQ_TIME_FOREVER)
    }

    /// Takes a unit, blocking the calling thread until one is available or
    /// `timeout` passes; on ``WaitResult/timedOut`` no unit was taken.
    public func wait(timeout: WorkDeadline) -> WaitResult {
        WaitResult(sq_semaphore_wait(raw, timeout.rawValue))
    }

    /// Gives a unit back; returns whether that woke a waiting thread.
    @discardableResult
    public func signal() -> Bool {
        sq_semaphore_signal(raw) != 0
    }

    /// Takes a unit without blocking a thread of Swift's cooperative pool.
    ///
    /// If a unit is available it is taken at once, with no suspension.
    /// Otherwise the task suspends while a global-queue worker of
    /// SwiftQueues' pool blocks in the C wait for it, and resumes the task
    /// with the unit.
    ///
    /// The trade-off: the C semaphore keeps no list of suspended tasks (and
    /// this wrapper adds no lock to keep one), so each task waiting here
    /// occupies one SwiftQueues worker thread until it gets its unit. The
    /// pool adds threads when its workers block (up to `SQ_MAX_THREADS`,
    /// default 64), so a few waiters cost little; for hundreds of waiting
    /// tasks, prefer an async-native primitive. Not cancellable: it returns
    /// only with a unit.
    public func wait() async {
        if sq_semaphore_wait(raw, SQ_TIME_NOW) == 0 {
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            WorkQueue.global().async {
                _ = sq_semaphore_wait(self.raw, SQ_TIME_FOREVER)
                continuation.resume()
            }
        }
    }
}
