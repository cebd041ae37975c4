//===----------------------------------------------------------------------===//
//
// SwiftQueues — micro-benchmarking over the C runtime's sq_benchmark_f
// (include/swiftqueues/benchmark.h).
//
//===----------------------------------------------------------------------===//

import CSwiftQueues

/// Runs `body` `iterations` times on the calling thread and returns the mean
/// nanoseconds per call on the monotonic clock, less the cost of the calling
/// loop itself (measured by calling an empty function the same way).
///
///     let ns = benchmark(iterations: 1_000_000) { counter.increment() }
///
/// Returns 0 when `iterations` is 0 (and when `body` costs less than the
/// loop's own noise). For profiling and tuning, not for production paths.
public func benchmark(iterations: Int, _ body: () -> Void) -> UInt64 {
    if iterations < 0 { misuse("benchmark(iterations:)", "negative iteration count \(iterations)") }
    // `body` crosses into C as a pointer to this stack slot: it is called
    // only while sq_benchmark_f runs, on this thread.
    return withoutActuallyEscaping(body) { body in
        withUnsafePointer(to: body) { slot in
            sq_benchmark_f(iterations, UnsafeMutableRawPointer(mutating: slot)) { context in
                context.unsafelyUnwrapped
                    .assumingMemoryBound(to: (() -> Void).self).pointee()
            }
        }
    }
}
