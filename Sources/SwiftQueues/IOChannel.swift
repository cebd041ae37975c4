//===----------------------------------------------------------------------===//
//
// SwiftQueues — IOChannel over the C runtime's sq_io_t
// (include/swiftqueues/io.h): asynchronous reads and writes on a file
// descriptor or a path, delivered as DataBuffers, plus the one-shot
// sq_read_f / sq_write_f conveniences and their async/await forms.
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues

/// An I/O failure: the `errno` the C runtime reported.
///
///     do {
///         let data = try await channel.read()
///     } catch {
///         print(error.errnoCode == EBADF, error)   // "Bad file descriptor (errno 9)"
///     }
///
/// The codes seen in practice: `EBADF` (a bad or closed descriptor, or one
/// not open for that direction), `EPIPE` / `ECONNRESET` (the peer went
/// away), `ECANCELED` (the channel was closed with `stop: true`, the
/// operation was issued after ``IOChannel/close(stop:)``, or the task
/// awaiting an async read was cancelled), `ESPIPE` (a
/// random-access channel on something that is not a file), `ENOENT` /
/// `EACCES` (a path channel could not open its file), `EINVAL` (a relative
/// path: the description says so).
///
/// Two errors are equal when their codes are (``detail`` is for people).
public struct IOError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `errno` value.
    public let errnoCode: Int32

    /// What was wrong, when the code alone does not say it (nil otherwise).
    public let detail: String?

    /// An error for `errnoCode`.
    public init(errnoCode: Int32) {
        self.init(errnoCode: errnoCode, detail: nil)
    }

    /// An error for `errnoCode` that says what was wrong.
    public init(errnoCode: Int32, detail: String?) {
        self.errnoCode = errnoCode
        self.detail = detail
    }

    public static func == (lhs: IOError, rhs: IOError) -> Bool {
        lhs.errnoCode == rhs.errnoCode
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(errnoCode)
    }

    /// nil for 0 (success), else the error.
    internal static func from(_ code: Int32) -> IOError? {
        code == 0 ? nil : IOError(errnoCode: code)
    }

    /// The system's text for the code (`strerror`).
    public var message: String {
        String(cString: strerror(errnoCode))
    }

    /// `<strerror> (errno <n>)`, then `: <detail>` if there is one.
    public var description: String {
        let text = "\(message) (errno \(errnoCode))"
        return detail.map { "\(text): \($0)" } ?? text
    }
}

/// A channel that reads and writes a file descriptor asynchronously
/// (`DispatchIO`), handing the bytes over as ``DataBuffer``s that are never
/// gathered into one big buffer.
///
///     let channel = IOChannel(kind: .stream, fileDescriptor: socket, queue: queue) { error in
///         close(socket)                       // the descriptor is ours again
///     }
///     channel.setLowWater(1)
///     channel.read(length: .max, queue: queue) { chunk in
///         parser.feed(chunk.data)             // the new bytes, not copied
///         if chunk.isDone { parser.finish(chunk.error) }
///     }
///
/// - A **stream** channel (pipes, sockets, ttys) reads and writes in order,
///   one operation per direction at a time, without blocking a thread.
/// - A **random** channel (regular files) reads and writes at offsets,
///   several operations at once, on the runtime's I/O threads.
///
/// The channel owns the descriptor from creation until its cleanup handler
/// runs: set socket options before, and close the descriptor (if you want)
/// in the cleanup handler. The cleanup handler runs once, after
/// ``close(stop:)`` (or the last reference going away, which closes the
/// channel) and the end of every operation. A channel made from a path
/// opens its file lazily, on the first operation, and closes it itself.
///
/// Errors never crash: they arrive in the handlers as an ``IOError``, with
/// whatever was already read.
//
// `@unchecked Sendable` is safe: the stored properties are immutable and
// every sq_io_* call is thread-safe (the C channel serialises its state on
// its own queue).
public final class IOChannel: @unchecked Sendable {
    /// What the descriptor is.
    public enum Kind: Sendable, Hashable {
        /// Pipes, sockets, ttys: in-order reads and writes (`SQ_IO_STREAM`).
        case stream
        /// Regular files: reads and writes at offsets (`SQ_IO_RANDOM`).
        case random

        internal var cValue: sq_io_type_t {
            switch self {
            case .stream: return sq_io_type_t(SQ_IO_STREAM)
            case .random: return sq_io_type_t(SQ_IO_RANDOM)
            }
        }
    }

    /// One call of a read or write handler.
    ///
    /// A read handler gets the bytes read since its previous call (as the
    /// water marks and interval allow) and is called a last time with
    /// ``isDone``. A write handler may report progress while the write
    /// runs (not done, ``data`` the bytes still to be written, fewer each
    /// time, as the water marks and interval allow), and is called a last
    /// time with ``isDone`` and the bytes that were **not** written (empty
    /// when everything was).
    public struct Chunk: Sendable {
        /// Whether this is the operation's last call.
        public let isDone: Bool
        /// Reads: the new bytes (may be empty). Writes: the bytes not
        /// written (yet).
        public let data: DataBuffer
        /// Why the operation ended early, or nil.
        public let error: IOError?

        /// A chunk (for tests and adapters).
        public init(isDone: Bool, data: DataBuffer, error: IOError?) {
            self.isDone = isDone
            self.data = data
            self.error = error
        }
    }

    /// The C channel (one reference, owned: releasing it closes the
    /// channel, as libdispatch does).
    internal let raw: OpaquePointer

    /// The kind given at creation.
    public let kind: Kind

    /// Creates a channel over `fileDescriptor`, which belongs to the
    /// channel until `cleanup` runs (`sq_io_create`).
    ///
    /// - Parameters:
    ///   - queue: where `cleanup` runs (nil: the default global queue).
    ///   - cleanup: called once with nil, or with why the descriptor could
    ///     not be used (`EBADF`). From then on the descriptor is yours
    ///     again (its flags restored): close it here if you are done.
    ///
    /// A bad descriptor is not reported here but to the operations
    /// (`EBADF`) and to `cleanup`.
    public init(kind: Kind, fileDescriptor: Int32, queue: WorkQueue? = nil,
                cleanup: (@Sendable (IOError?) -> Void)? = nil) {
        let box = cleanup.map(CallbackBox.retained)
        guard let raw = sq_io_create_f(kind.cValue, fileDescriptor, queue?.raw, box,
                                       cleanup == nil ? nil : runCleanupBox) else {
            misuse("IOChannel(kind:fileDescriptor:)", "sq_io_create failed: \(String(cString: strerror(errno)))")
        }
        self.raw = raw
        self.kind = kind
    }

    /// Creates a channel over the file at `path` (absolute), opened with
    /// `open(path, flags, mode)` on the first operation
    /// (`sq_io_create_with_path`): channels never used hold no
    /// descriptor. A failing open is reported to the operations and to
    /// `cleanup`; the channel closes the file it opened itself.
    ///
    /// - Throws: `EINVAL` when `path` is not absolute (the error's
    ///   description says so).
    public init(kind: Kind, path: String, flags: Int32, mode: mode_t = 0,
                queue: WorkQueue? = nil,
                cleanup: (@Sendable (IOError?) -> Void)? = nil) throws(IOError) {
        guard path.hasPrefix("/") else {
            throw IOError(errnoCode: EINVAL,
                          detail: "path '\(path)' is relative: a path channel needs an absolute path")
        }
        let box = cleanup.map(CallbackBox.retained)
        errno = 0
        let created = path.withCString {
            sq_io_create_with_path_f(kind.cValue, $0, flags, mode, queue?.raw, box,
                                     cleanup == nil ? nil : runCleanupBox)
        }
        guard let raw = created else {
            let code = errno
            if let box { Unmanaged<CallbackBox<@Sendable (IOError?) -> Void>>.fromOpaque(box).release() }
            throw IOError(errnoCode: code == 0 ? EINVAL : code)
        }
        self.raw = raw
        self.kind = kind
    }

    /// Creates a channel of `kind` over the descriptor of `channel`
    /// (`sq_io_create_with_io`), with its own water marks, interval, queue
    /// and cleanup handler.
    ///
    /// The two channels share the descriptor: closing one does not end the
    /// other, and both cleanup handlers run (once each) only when both are
    /// done with it, so a cleanup that closes the descriptor cannot pull it
    /// from under the other channel. If `channel` was made from a path, the
    /// new channel opens the path itself, lazily (with the same flags but
    /// `O_TRUNC` and `O_EXCL`). Errors reach the new channel's handlers and
    /// `cleanup`: `ECANCELED` if `channel` was already closed, its error if
    /// it has one, `ESPIPE` for a random channel over a pipe or socket.
    public init(kind: Kind, channel: IOChannel, queue: WorkQueue? = nil,
                cleanup: (@Sendable (IOError?) -> Void)? = nil) {
        let box = cleanup.map(CallbackBox.retained)
        guard let raw = sq_io_create_with_io_f(kind.cValue, channel.raw, queue?.raw, box,
                                               cleanup == nil ? nil : runCleanupBox) else {
            misuse("IOChannel(kind:channel:)", "sq_io_create_with_io failed: \(String(cString: strerror(errno)))")
        }
        self.raw = raw
        self.kind = kind
    }

    deinit {
        sq_release(cObject(raw))
    }

    // MARK: - Operations

    /// Reads `length` bytes (`.max`, the default: to end of file) at
    /// `offset` (random channels; ignored by streams), calling `handler` on
    /// `queue` as the bytes arrive (`sq_io_read`). The calls never overlap
    /// and come in order; the last has ``Chunk/isDone`` set (and an error,
    /// if the read ended early). The handler is released after that call.
    public func read(offset: Int64 = 0, length: Int = .max, queue: WorkQueue,
                     handler: @escaping @Sendable (Chunk) -> Void) {
        if length < 0 { misuse("IOChannel.read(offset:length:queue:handler:)", "negative length \(length) (.max: to end of file)") }
        sq_io_read_f(raw, off_t(offset), cLength(length), queue.raw,
                     CallbackBox.retained(handler), runChunkBox)
    }

    /// Writes `data` at `offset` (random channels; ignored by streams),
    /// calling `handler` on `queue` (`sq_io_write`): with progress while a
    /// long write runs (the bytes still to be written; see the water marks
    /// and interval), and a last time with ``Chunk/isDone`` set and the
    /// bytes not written (empty on success). A write that goes out at once
    /// gets only that last call. The handler is released after it.
    public func write(offset: Int64 = 0, data: DataBuffer, queue: WorkQueue,
                      handler: @escaping @Sendable (Chunk) -> Void) {
        sq_io_write_f(raw, off_t(offset), data.raw, queue.raw,
                      CallbackBox.retained(handler), runChunkBox)
    }

    /// Reads `length` bytes (`.max`: to end of file) at `offset` and
    /// returns them once the read is done; throws if it ended with an
    /// error (what was read before it is dropped). The read's handler runs
    /// on `queue` (a suspended queue holds the result back).
    ///
    /// Cancelling the awaiting task stops the read, which then throws
    /// `ECANCELED`. The C runtime stops operations per channel (as
    /// libdispatch does), so this is ``close(stop:)`` with `stop: true`:
    /// the channel's other operations end with `ECANCELED` too, later ones
    /// fail, and the cleanup handler runs. A task cancelled before the
    /// call gets `ECANCELED` without reading.
    public func read(offset: Int64 = 0, length: Int = .max,
                     queue: WorkQueue = .global()) async throws(IOError) -> DataBuffer {
        let awaiter = ReadAwaiter(cleanup: false)
        let result = await withTaskCancellationHandler {
            read(offset: offset, length: length, queue: queue, handler: awaiter.chunk)
            return await awaiter.result()
        } onCancel: {
            close(stop: true)
        }
        return try result.get()
    }

    /// Writes `data` at `offset` and returns once it is written; throws
    /// if the write ended with an error.
    public func write(offset: Int64 = 0, data: DataBuffer) async throws(IOError) {
        let error: IOError? = await withCheckedContinuation { continuation in
            write(offset: offset, data: data, queue: .global()) { chunk in
                if chunk.isDone {
                    continuation.resume(returning: chunk.error)
                }
            }
        }
        if let error { throw error }
    }

    /// Runs `body` on the channel's own queue once every operation issued
    /// before it has finished, and before any issued after it starts
    /// (`sq_io_barrier`); ``fileDescriptor`` is usable in it (to `fsync`,
    /// say).
    public func barrier(_ body: @escaping @Sendable () -> Void) {
        sq_io_barrier_f(raw, ClosureBox.retained(body), runAndReleaseClosureBox)
    }

    /// Closes the channel (`sq_io_close`): operations issued afterwards
    /// fail with `ECANCELED`; those already issued finish, or with
    /// `stop: true` end at once with `ECANCELED` (keeping what they read).
    /// Then the cleanup handler runs. Releasing the last reference closes
    /// the channel too (without stopping).
    public func close(stop: Bool = false) {
        sq_io_close(raw, stop ? sq_io_close_flags_t(SQ_IO_STOP) : 0)
    }

    // MARK: - Configuration

    /// The descriptor, or -1 before a path channel has opened its file and
    /// once the cleanup handler has been scheduled.
    public var fileDescriptor: Int32 {
        sq_io_get_descriptor(raw)
    }

    /// At least this many bytes per read handler call, and written between
    /// two write progress calls, unless the operation is done (default 1:
    /// deliver whatever arrives, report every step; 0 counts as 1).
    public func setLowWater(_ bytes: Int) {
        if bytes < 0 { misuse("IOChannel.setLowWater(_:)", "negative size \(bytes)") }
        sq_io_set_low_water(raw, bytes)
    }

    /// At most this many bytes per read handler call, and written between
    /// two write progress calls (default `.max`: no limit; 0 counts as 1).
    public func setHighWater(_ bytes: Int) {
        if bytes < 0 { misuse("IOChannel.setHighWater(_:)", "negative size \(bytes)") }
        sq_io_set_high_water(raw, cLength(bytes))
    }

    /// Calls read handlers every `interval` with the bytes gathered in
    /// between, instead of as soon as low water is reached: only if they
    /// reach low water, or (`strict`) whatever there is
    /// (`SQ_IO_STRICT_INTERVAL`); write progress likewise. `.zero` turns
    /// it off; a negative interval stops the process with a message.
    public func setInterval(_ interval: Duration, strict: Bool = false) {
        if interval.isNegative { misuse("IOChannel.setInterval(_:strict:)", "negative interval \(interval)") }
        sq_io_set_interval(raw, UInt64(interval.saturatingNanoseconds),
                           strict ? sq_io_interval_flags_t(SQ_IO_STRICT_INTERVAL) : 0)
    }

    // MARK: - One-shot reads and writes

    /// Reads `length` bytes (`.max`: to end of file) from `fileDescriptor`
    /// and calls `handler` once on `queue` with all of them, and nil or the
    /// error that ended the read (`sq_read`). The descriptor is yours again
    /// when `handler` runs (it is not closed).
    public static func read(fileDescriptor: Int32, length: Int = .max, queue: WorkQueue,
                            handler: @escaping @Sendable (_ data: DataBuffer, _ error: IOError?) -> Void) {
        if length < 0 { misuse("IOChannel.read(fileDescriptor:length:)", "negative length \(length) (.max: to end of file)") }
        sq_read_f(fileDescriptor, cLength(length), queue.raw, CallbackBox.retained(handler)) { context, data, error in
            Unmanaged<CallbackBox<@Sendable (DataBuffer, IOError?) -> Void>>
                .fromOpaque(context.unsafelyUnwrapped).takeRetainedValue()
                .body(DataBuffer(retaining: data), IOError.from(error))
        }
    }

    /// Writes `data` to `fileDescriptor`, then calls `handler` once on
    /// `queue` with the bytes not written (empty on success) and nil or the
    /// error (`sq_write`). The descriptor is yours again when `handler`
    /// runs.
    public static func write(fileDescriptor: Int32, data: DataBuffer, queue: WorkQueue,
                             handler: @escaping @Sendable (_ unwritten: DataBuffer, _ error: IOError?) -> Void) {
        sq_write_f(fileDescriptor, data.raw, queue.raw, CallbackBox.retained(handler)) { context, unwritten, error in
            Unmanaged<CallbackBox<@Sendable (DataBuffer, IOError?) -> Void>>
                .fromOpaque(context.unsafelyUnwrapped).takeRetainedValue()
                .body(unwritten.map(DataBuffer.init(retaining:)) ?? DataBuffer(), IOError.from(error))
        }
    }

    /// ``read(fileDescriptor:length:queue:handler:)`` that returns the
    /// bytes, or throws the error that ended the read. The read's handler
    /// runs on `queue`. The descriptor is yours again when this returns or
    /// throws (it is not closed).
    ///
    /// Cancelling the awaiting task stops the read (the bytes read so far
    /// are dropped) and it throws `ECANCELED`, once the descriptor is
    /// given back.
    public static func read(fileDescriptor: Int32, length: Int = .max,
                            queue: WorkQueue = .global()) async throws(IOError) -> DataBuffer {
        if length < 0 { misuse("IOChannel.read(fileDescriptor:length:)", "negative length \(length) (.max: to end of file)") }
        // sq_read's recipe, in Swift so that cancellation can reach the
        // channel: a private stream channel, closed as soon as the read is
        // issued (so it cleans up when the read ends), stopped on cancel.
        let awaiter = ReadAwaiter(cleanup: true)
        let channel = IOChannel(kind: .stream, fileDescriptor: fileDescriptor, queue: queue,
                                cleanup: awaiter.cleanup)
        let result = await withTaskCancellationHandler {
            channel.read(length: length, queue: queue, handler: awaiter.chunk)
            channel.close()
            return await awaiter.result()
        } onCancel: {
            channel.close(stop: true)
        }
        return try result.get()
    }

    /// ``write(fileDescriptor:data:queue:handler:)`` that returns once
    /// everything is written, or throws the error that stopped it.
    public static func write(fileDescriptor: Int32, data: DataBuffer) async throws(IOError) {
        let error: IOError? = await withCheckedContinuation { continuation in
            write(fileDescriptor: fileDescriptor, data: data, queue: .global()) { _, error in
                continuation.resume(returning: error)
            }
        }
        if let error { throw error }
    }
}

// MARK: - Crossing into C

/// A length for C: `Int.max` means "all" (`SIZE_MAX`).
private func cLength(_ length: Int) -> Int {
    length == .max ? Int(bitPattern: UInt.max) : length
}

/// One handler on its way through the C runtime (the ``ClosureBox``
/// pattern for closures that take arguments): C holds one retain, dropped
/// after the last call.
//
// `Sendable`: the only state is an immutable closure, and `Handler` is
// always a `@Sendable` function type.
private final class CallbackBox<Handler: Sendable>: Sendable {
    let body: Handler

    init(_ body: Handler) {
        self.body = body
    }

    /// A new box holding `body`, as a C context that owns one retain.
    static func retained(_ body: Handler) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(CallbackBox(body)).toOpaque()
    }
}

/// `sq_io_cleanup_function_t`: called exactly once; drops the box.
private func runCleanupBox(_ context: UnsafeMutableRawPointer?, _ error: Int32) {
    Unmanaged<CallbackBox<@Sendable (IOError?) -> Void>>
        .fromOpaque(context.unsafelyUnwrapped).takeRetainedValue()
        .body(IOError.from(error))
}

/// `sq_io_handler_function_t`: called until `done`; the last call drops
/// the box.
private func runChunkBox(_ context: UnsafeMutableRawPointer?, _ done: Bool,
                         _ data: OpaquePointer?, _ error: Int32) {
    let box = Unmanaged<CallbackBox<@Sendable (IOChannel.Chunk) -> Void>>
        .fromOpaque(context.unsafelyUnwrapped)
    let chunk = IOChannel.Chunk(isDone: done,
                                data: data.map(DataBuffer.init(retaining:)) ?? DataBuffer(),
                                error: IOError.from(error))
    box.takeUnretainedValue().body(chunk)
    if done {
        box.release()
    }
}

/// One async read: gathers its chunks and resumes the awaiting task once
/// the read is done (and, for a one-shot read, the private channel's
/// cleanup has run: the descriptor is the caller's again), whichever of
/// those and the task's suspension comes last.
private final class ReadAwaiter: Sendable {
    private struct State {
        var data = DataBuffer()
        var error: IOError?
        /// The last chunk, and the cleanup if awaited, still to come.
        var owed: Int
        var continuation: CheckedContinuation<Result<DataBuffer, IOError>, Never>?

        var result: Result<DataBuffer, IOError> {
            error.map { .failure($0) } ?? .success(data)
        }
    }

    // The handler calls of one operation never overlap, and the cleanup
    // comes after the last one, so the lock is hardly ever contended; it
    // orders those hand-overs with the awaiting task's.
    private let state: SpinLocked<State>

    init(cleanup: Bool) {
        state = SpinLocked(State(owed: cleanup ? 2 : 1))
    }

    /// The read's handler.
    func chunk(_ chunk: IOChannel.Chunk) {
        let ready = state.withLock { state -> CheckedContinuation<Result<DataBuffer, IOError>, Never>? in
            state.data.append(chunk.data)
            guard chunk.isDone else { return nil }
            state.error = chunk.error
            return Self.arrive(&state)
        }
        ready?.resume(returning: state.withLock { $0.result })
    }

    /// The one-shot read's cleanup handler: its error counts only if the
    /// read itself reported none (as with `sq_read`).
    func cleanup(_ error: IOError?) {
        let ready = state.withLock { state -> CheckedContinuation<Result<DataBuffer, IOError>, Never>? in
            if state.error == nil { state.error = error }
            return Self.arrive(&state)
        }
        ready?.resume(returning: state.withLock { $0.result })
    }

    /// Suspends until the read (and cleanup) are done.
    func result() async -> Result<DataBuffer, IOError> {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if state.owed == 0 { return true }
                state.continuation = continuation
                return false
            }
            if done { continuation.resume(returning: state.withLock { $0.result }) }
        }
    }

    /// One of the awaited events happened: the continuation to resume if
    /// it was the last and the task is already waiting.
    private static func arrive(
        _ state: inout State
    ) -> CheckedContinuation<Result<DataBuffer, IOError>, Never>? {
        state.owed -= 1
        guard state.owed == 0 else { return nil }
        defer { state.continuation = nil }
        return state.continuation
    }
}
