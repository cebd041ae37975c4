//===----------------------------------------------------------------------===//
//
// SwiftQueues — OnceToken over the C runtime's sq_once_f
// (include/swiftqueues/once.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// Runs a closure exactly once for the life of the token, however many
/// threads race to run it (`dispatch_once` / `pthread_once`).
///
///     let setUp = OnceToken()
///     setUp.run { loadConfiguration() }   // the first caller runs it
///
/// The first caller runs its closure on its own thread; callers that arrive
/// while it runs wait for it to return; every later call costs one acquire
/// load and sees everything the closure wrote. Calling `run` on the same
/// token from inside its own closure is a programming error: the runtime
/// reports it and stops the process.
//
// `@unchecked Sendable` is safe: the only state is `predicate`, an immutable
// pointer to a heap-allocated sq_once_t (zero until the closure has run) that
// is only accessed through sq_once_f's atomic protocol. Heap storage gives it
// the stable address sq_once_f requires.
public final class OnceToken: @unchecked Sendable {
    private let predicate: UnsafeMutablePointer<sq_once_t>

    /// Creates a token whose closure has not run yet.
    public init() {
        predicate = .allocate(capacity: 1)
        predicate.initialize(to: 0)
    }

    deinit {
        predicate.deinitialize(count: 1)
        predicate.deallocate()
    }

    /// Runs `body` if no closure has run on this token yet; otherwise waits
    /// for the one that is running, or returns at once if it has finished.
    public func run(_ body: () -> Void) {
        // The closure never escapes: sq_once_f calls it (on this thread)
        // before returning. It crosses into C as a pointer to this stack
        // slot; no allocation, no retain, no Swift-side locking.
        withoutActuallyEscaping(body) { body in
            withUnsafePointer(to: body) { slot in
                sq_once_f(predicate, UnsafeMutableRawPointer(mutating: slot)) { context in
                    context.unsafelyUnwrapped
                        .assumingMemoryBound(to: (() -> Void).self).pointee()
                }
            }
        }
    }
}
