//===----------------------------------------------------------------------===//
//
// SwiftQueues — draining the main queue (sq_main, sq_main_queue_drain,
// sq_main_queue_fd, sq_main_queue_run_until).
//
// Linux has no run loop that drains the main queue by itself: work sent to
// WorkQueue.main runs only while the main thread is in one of these calls.
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues

extension WorkQueue {
    /// Drains the main queue on the main thread forever (`dispatchMain()`).
    /// Never returns: end the program from a closure with `exit(_:)`.
    /// Calling it on another thread stops the process.
    public static func runMain() -> Never {
        sq_main()
    }

    /// Runs the closures waiting on the main queue now, without waiting for
    /// more, and returns how many ran. For programs with their own event
    /// loop: poll ``mainQueueFileDescriptor`` and call this when it is
    /// readable. Main thread only.
    @discardableResult
    public static func drainMain() -> Int {
        sq_main_queue_drain()
    }

    /// A file descriptor that becomes readable when the main queue has work
    /// (``drainMain()`` makes it unreadable again). Do not read, write or
    /// close it. Made on first use; throws ``IOError`` (`EMFILE`, `ENFILE`)
    /// while the process has no descriptor to spare, and a later use tries
    /// again. (The main queue itself needs no descriptor.)
    public static var mainQueueFileDescriptor: Int32 {
        get throws(IOError) {
            errno = 0
            let fd = sq_main_queue_fd()
            if fd < 0 { throw IOError(errnoCode: errno) }
            return fd
        }
    }

    /// Drains the main queue on the main thread, waiting for work, until
    /// `condition` returns true (checked first and after every closure) or
    /// `deadline` passes; returns whether `condition` became true. Main
    /// thread only. For tests and for programs that run the main queue for a
    /// while.
    ///
    ///     WorkQueue.main.async { done.store(1) }
    ///     let finished = WorkQueue.runMain(until: { done.load() == 1 },
    ///                                      deadline: .now() + .seconds(5))
    @discardableResult
    public static func runMain(
        until condition: () -> Bool, deadline: WorkDeadline = .distantFuture
    ) -> Bool {
        withoutActuallyEscaping(condition) { condition in
            withUnsafePointer(to: condition) { slot in
                sq_main_queue_run_until(deadline.rawValue, { context in
                    context.unsafelyUnwrapped
                        .assumingMemoryBound(to: (() -> Bool).self).pointee()
                }, UnsafeMutableRawPointer(mutating: slot))
            }
        }
    }

    /// Drains the main queue on the main thread, waiting for work, until
    /// `deadline` passes. Main thread only.
    public static func runMain(until deadline: WorkDeadline) {
        sq_main_queue_run_until(deadline.rawValue, nil, nil)
    }
}
