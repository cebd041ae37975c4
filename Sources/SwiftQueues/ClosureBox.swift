//===----------------------------------------------------------------------===//
//
// SwiftQueues — how Swift closures cross into the C runtime.
//
// An escaping closure is two words (function, context); a C callback takes
// one (`void *context`). Every asynchronous submission therefore wraps its
// closure in one heap box, hands the box to C with exactly one retain, and
// the C trampoline takes that retain back when it runs the closure. Nothing
// else is allocated, locked or queued on the Swift side.
//
// Synchronous calls (sync, runMain(until:)) need no box: the closure stays
// on the caller's stack and C gets a pointer to it. concurrentPerform is
// the exception: it keeps its closure in one small object for the length of
// the call, so that its per-iteration thunk can call the closure without
// copying (retaining) it (see `WorkQueue.apply`).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// One closure on its way through the C runtime.
//
// `Sendable`: the only state is an immutable `@Sendable` closure.
internal final class ClosureBox: Sendable {
    internal let body: @Sendable () -> Void

    internal init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
    }

    /// A new box holding `body`, as a C context that owns one retain.
    /// Pass it with ``runAndReleaseClosureBox`` (runs it once, then releases
    /// it), or with ``runClosureBox`` plus a finalizer that calls
    /// ``releaseClosureBox``.
    internal static func retained(
        _ body: @escaping @Sendable () -> Void
    ) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(ClosureBox(body)).toOpaque()
    }
}

/// `sq_function_t`: runs the box's closure and drops the box's C retain.
/// For contexts that C calls exactly once (async, notify).
internal func runAndReleaseClosureBox(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<ClosureBox>.fromOpaque(context.unsafelyUnwrapped)
        .takeRetainedValue().body()
}

/// `sq_function_t`: runs the box's closure and keeps the box. For contexts
/// that C may never call (a cancelled work item): a finalizer releases them.
internal func runClosureBox(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<ClosureBox>.fromOpaque(context.unsafelyUnwrapped)
        .takeUnretainedValue().body()
}

/// `sq_function_t`: drops the box's C retain without running it.
internal func releaseClosureBox(_ context: UnsafeMutableRawPointer?) {
    Unmanaged<ClosureBox>.fromOpaque(context.unsafelyUnwrapped).release()
}

/// Calls `submit` with a C context and function that run `body` once,
/// synchronously, before `submit` returns. The closure stays on the stack:
/// no box, no retain, no allocation. `submit` must not let C keep the
/// context past its return (sq_sync_f, sq_barrier_sync_f and the like).
@inline(__always)
internal func withStackCallback(
    _ body: () -> Void,
    _ submit: (UnsafeMutableRawPointer, sq_function_t) -> Void
) {
    withoutActuallyEscaping(body) { body in
        withUnsafePointer(to: body) { slot in
            submit(UnsafeMutableRawPointer(mutating: slot)) { context in
                context.unsafelyUnwrapped
                    .assumingMemoryBound(to: (() -> Void).self).pointee()
            }
        }
    }
}

/// The `sq_object_t` (`void *`) view of a C object pointer.
@inline(__always)
internal func cObject(_ pointer: OpaquePointer) -> UnsafeMutableRawPointer {
    UnsafeMutableRawPointer(pointer)
}
