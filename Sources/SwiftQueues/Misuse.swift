//===----------------------------------------------------------------------===//
//
// SwiftQueues — stopping the process for a programmer error, in every build.
//
// The Swift side of the C runtime's _sq_client_crash (docs/ARCHITECTURE.md,
// "Error policy"): one line `SwiftQueues: <call>: <what>` on standard
// error, then abort(). Swift's `precondition` keeps its message only in
// debug builds (an -O build prints "precondition failure" and nothing
// else), so every misuse check of the module goes through here instead.
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Stops the process: `SwiftQueues: <call>: <what>` on stderr, then abort().
/// `call` names the API as the program wrote it (`CountingSemaphore(value:)`),
/// `what` says what was wrong with the arguments or the state.
@usableFromInline
@inline(never)
func misuse(_ call: String, _ what: String) -> Never {
    misuseLine("\(call): \(what)")
}

/// Writes `SwiftQueues: <text>` as one line with a single write(2) (a line
/// under PIPE_BUF never interleaves with another thread's), then aborts.
@inline(never)
func misuseLine(_ text: String) -> Never {
    var line = "SwiftQueues: \(text)\n"
    line.withUTF8 { bytes in
        var rest = UnsafeRawBufferPointer(bytes)
        // One write; the loop only finishes a partial write, which a
        // terminal or pipe does not do for a line this short.
        while !rest.isEmpty {
            let n = write(2, rest.baseAddress, rest.count)
            if n <= 0 { break }
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        }
    }
    abort()
}

/// Writes `SwiftQueues: <text>` as one line on stderr and goes on: for
/// warnings that must not be missed (an executor install that was refused).
func warningLine(_ text: String) {
    var line = "SwiftQueues: \(text)\n"
    line.withUTF8 { bytes in
        _ = write(2, bytes.baseAddress, bytes.count)
    }
}

extension Duration {
    /// Whether the duration is below zero.
    var isNegative: Bool {
        let (seconds, attoseconds) = components
        return seconds < 0 || (seconds == 0 && attoseconds < 0)
    }
}
