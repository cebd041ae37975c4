import CSwiftQueues
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Recording a trace of what ran where, in Chrome's JSON trace format,
/// which Perfetto UI and `chrome://tracing` open: a track per thread
/// (workers, the main thread, the event loop, I/O threads), a slice for
/// every task named by its queue's label, arrows from where work was
/// submitted to where it ran, and counters for the pool and each queue's
/// depth. Swift jobs run by SwiftQueues as the global executor show their
/// task id and priority.
///
///     try WorkTrace.start(path: "app.json")
///     defer { try? WorkTrace.stop() }    // writes the file
///
/// Or, without changing the program: `SQ_TRACE=app.json` in the
/// environment records from the start and writes the file at exit. Each
/// thread records into a ring of bounded size (`SQ_TRACE_BUFFER_KB`,
/// 2048 by default): a long recording keeps the newest events and says how
/// many it dropped. docs/OBSERVABILITY.md tells how to read a trace.
public enum WorkTrace {
    /// Starts recording; the trace is written to `path` (`%p` is replaced
    /// by the process id) when the recording stops. The file is created
    /// now, so a path that cannot be written fails here.
    ///
    /// - Throws: ``TraceError``: `EBUSY` while a recording runs (one
    ///   started by `SQ_TRACE` too), `EINVAL` for an empty path, or the
    ///   error of creating the file.
    public static func start(path: String) throws(TraceError) {
        if sq_trace_start(path) != 0 {
            throw TraceError(errnoCode: errno)
        }
    }

    /// Stops the recording and writes the trace file.
    ///
    /// - Throws: ``TraceError``: `EINVAL` when nothing is being recorded,
    ///   or the error of writing the file.
    public static func stop() throws(TraceError) {
        if sq_trace_stop() != 0 {
            throw TraceError(errnoCode: errno)
        }
    }

    /// Whether a trace is being recorded now.
    public static var isRecording: Bool {
        sq_trace_recording()
    }
}

/// Why ``WorkTrace/start(path:)`` or ``WorkTrace/stop()`` failed: an
/// `errno` value.
public struct TraceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `errno` value.
    public let errnoCode: Int32

    /// An error for `errnoCode`.
    public init(errnoCode: Int32) {
        self.errnoCode = errnoCode
    }

    /// The system's text for the code (`strerror`).
    public var message: String {
        String(cString: strerror(errnoCode))
    }

    /// `<strerror> (errno <n>)`.
    public var description: String {
        "\(message) (errno \(errnoCode))"
    }
}
