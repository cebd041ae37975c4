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
import Synchronization

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
/// away), `ECANCELED` (the channel was closed with `stop: true`, or the
/// operation was issued after ``IOChannel/close(stop:)``), `ESPIPE` (a
/// random-access channel on something that is not a file), `ENOENT` /
/// `EACCES` (a path channel could not open its file), `EINVAL` (a relative
/// path).
public struct IOError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `errno` value.
    public let errnoCode: Int32

    /// An error for `errnoCode`.
    public init(errnoCode: Int32) {
        self.errnoCode = errnoCode
    }

    /// nil for 0 (success), else the error.
    internal static func from(_ code: Int32) -> IOError? {
        code == 0 ? nil : IOError(errnoCode: code)
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
            fatalError("SwiftQueues: sq_io_create failed (errno \(errno))")
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
    /// - Throws: `EINVAL` when `path` is not absolute.
    public init(kind: Kind, path: String, flags: Int32, mode: mode_t = 0,
                queue: WorkQueue? = nil,
                cleanup: (@Sendable (IOError?) -> Void)? = nil) throws(IOError) {
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
            fatalError("SwiftQueues: sq_io_create_with_io failed (errno \(errno))")
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
        Swift.precondition(length >= 0, "IOChannel.read: negative length \(length)")
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
    /// error (what was read before it is dropped). Cancelling the task
    /// does not stop the read: ``close(stop:)`` does.
    public func read(offset: Int64 = 0, length: Int = .max) async throws(IOError) -> DataBuffer {
        let result: Result<DataBuffer, IOError> = await withCheckedContinuation { continuation in
            let gathered = Gathered()
            read(offset: offset, length: length, queue: .global()) { chunk in
                let all = gathered.append(chunk.data)
                guard chunk.isDone else { return }
                if let error = chunk.error {
                    continuation.resume(returning: .failure(error))
                } else {
                    continuation.resume(returning: .success(all))
                }
            }
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
        Swift.precondition(bytes >= 0, "IOChannel.setLowWater: negative size \(bytes)")
        sq_io_set_low_water(raw, bytes)
    }

    /// At most this many bytes per read handler call, and written between
    /// two write progress calls (default `.max`: no limit; 0 counts as 1).
    public func setHighWater(_ bytes: Int) {
        Swift.precondition(bytes >= 0, "IOChannel.setHighWater: negative size \(bytes)")
        sq_io_set_high_water(raw, cLength(bytes))
    }

    /// Calls read handlers every `interval` with the bytes gathered in
    /// between, instead of as soon as low water is reached: only if they
    /// reach low water, or (`strict`) whatever there is
    /// (`SQ_IO_STRICT_INTERVAL`); write progress likewise. `.zero` turns
    /// it off.
    public func setInterval(_ interval: Duration, strict: Bool = false) {
        let nanoseconds = Swift.max(interval.saturatingNanoseconds, 0)
        sq_io_set_interval(raw, UInt64(nanoseconds),
                           strict ? sq_io_interval_flags_t(SQ_IO_STRICT_INTERVAL) : 0)
    }

    // MARK: - One-shot reads and writes

    /// Reads `length` bytes (`.max`: to end of file) from `fileDescriptor`
    /// and calls `handler` once on `queue` with all of them, and nil or the
    /// error that ended the read (`sq_read`). The descriptor is yours again
    /// when `handler` runs (it is not closed).
    public static func read(fileDescriptor: Int32, length: Int = .max, queue: WorkQueue,
                            handler: @escaping @Sendable (_ data: DataBuffer, _ error: IOError?) -> Void) {
        Swift.precondition(length >= 0, "IOChannel.read(fileDescriptor:): negative length \(length)")
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
    /// bytes, or throws the error that ended the read.
    public static func read(fileDescriptor: Int32, length: Int = .max) async throws(IOError) -> DataBuffer {
        let result: Result<DataBuffer, IOError> = await withCheckedContinuation { continuation in
            read(fileDescriptor: fileDescriptor, length: length, queue: .global()) { data, error in
                continuation.resume(returning: error.map { .failure($0) } ?? .success(data))
            }
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

/// What an async read has gathered so far. The handler calls of one
/// operation never overlap, so the lock is never contended; it is there
/// to make the hand-over between them visible to the checker.
private final class Gathered: Sendable {
    private let data = Mutex(DataBuffer())

    /// Appends `chunk` and returns everything so far.
    func append(_ chunk: DataBuffer) -> DataBuffer {
        data.withLock { data in
            data.append(chunk)
            return data
        }
    }
}
