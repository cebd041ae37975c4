//===----------------------------------------------------------------------===//
//
// SwiftQueues — EventSource, the common half of every source over the C
// runtime's sq_source_t (include/swiftqueues/source.h): handlers,
// activation, cancellation, the delivered data, and sources as
// AsyncSequences. The concrete sources are in SourceKinds.swift.
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues

/// Why a source could not be created: the `errno` the C runtime reported.
///
///     do {
///         let source = try ReadSource(fileDescriptor: fd)
///     } catch {
///         print(error.errnoCode == EBADF)   // a closed descriptor
///     }
///
/// The codes the runtime uses: `EBADF` (a bad descriptor), `ENOENT` (a
/// watched file is gone), `EINVAL` (a signal that cannot be watched, or bad
/// mask bits), `ENOTSUP` (a process event Linux cannot report); `EMFILE` or
/// `ENFILE` when the process or the system has no descriptor to spare for
/// the source or the event loop, `EAGAIN` when no thread can be started
/// for them (the same call succeeds once they are free again). Timers and
/// data sources never throw: without an event loop they wait for one.
public struct SourceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `errno` value (`EBADF`, `ENOENT`, `EINVAL`, `ENOTSUP`, `EMFILE`, ...).
    public let errnoCode: Int32

    /// The source type that could not be created (`"read"`, `"signal"`, ...).
    public let sourceType: String

    /// An error for `errnoCode` while creating a source of `sourceType`.
    public init(errnoCode: Int32, sourceType: String) {
        self.errnoCode = errnoCode
        self.sourceType = sourceType
    }

    /// `cannot create <type> source: <strerror> (errno <n>)`.
    public var description: String {
        "cannot create \(sourceType) source: \(String(cString: strerror(errnoCode))) (errno \(errnoCode))"
    }
}

/// What every source shares (`DispatchSourceProtocol`): handlers,
/// activation, suspension, cancellation and the data of each delivery.
/// Create one of its final subclasses: ``TimerSource``, ``ReadSource``,
/// ``WriteSource``, ``SignalSource``, ``ProcessSource``,
/// ``FileSystemSource``, ``DataSource``.
///
///     let source = DataSource(kind: .add, queue: queue)
///     source.setEventHandler { print("total", source.data) }
///     source.activate()
///     source.merge(2)
///
/// A new source is **inactive**: it records events but delivers nothing
/// until ``activate()`` (or ``resume()``). Events that arrive while the
/// handler is queued or running coalesce into one delivery (``data`` says
/// how much), and a source's handler never runs concurrently with itself,
/// even on a concurrent queue.
///
/// ``cancel()`` is asynchronous and final: a handler already running
/// finishes, then the cancel handler runs once, after the last event
/// handler (the place to close a descriptor). Once it has run, the source
/// lets go of every handler it holds, so a handler that captures its own
/// source makes no lasting retain cycle. A suspended source runs its cancel
/// handler when it is resumed.
///
/// A source that was activated keeps watching until it is cancelled, even
/// after its last Swift reference is gone (a source may own itself, as the
/// C runtime's do): cancel every source you are done with.
///
/// Every source is also an `AsyncSequence` of its deliveries' data (see
/// ``events``): the sequence ends when the source is cancelled.
///
///     for await fires in timer.events { ... }
//
// `@unchecked Sendable` is safe: the stored properties are immutable, the C
// source's calls are thread-safe, and the mutable handler state lives in the
// `SourceCore`, under its lock (SpinLocked).
public class EventSource: @unchecked Sendable {
    /// The C source (one reference, owned).
    internal let raw: OpaquePointer

    /// The handlers and streams; the C source holds it as the context of its
    /// three handlers.
    internal let core: SourceCore

    /// Wraps `raw` (a new, inactive C source the caller gives up its one
    /// reference to) and installs the three C handlers.
    internal init(raw: OpaquePointer) {
        self.raw = raw
        self.core = SourceCore(raw: raw)
        core.install()
    }

    deinit {
        sq_release(cObject(raw))
    }

    /// Creates a C source; throws the `errno` the runtime set on failure.
    internal static func create(
        _ type: sq_source_type_t, handle: UInt, mask: UInt, queue: WorkQueue?, name: String
    ) throws(SourceError) -> OpaquePointer {
        errno = 0
        guard let raw = sq_source_create(type, handle, mask, queue?.raw) else {
            throw SourceError(errnoCode: errno, sourceType: name)
        }
        return raw
    }

    /// Creates a C source that cannot fail for these arguments (timers and
    /// data sources, which wait for the event loop when it cannot start);
    /// a failure is a bug in SwiftQueues.
    internal static func createInfallible(
        _ type: sq_source_type_t, mask: UInt, queue: WorkQueue?, name: String
    ) -> OpaquePointer {
        do {
            return try create(type, handle: 0, mask: mask, queue: queue, name: name)
        } catch {
            fatalError("SwiftQueues: \(error)")
        }
    }

    // MARK: - Handlers

    /// Sets the closure run on the source's queue for every delivery (nil:
    /// none). Inside it, ``data`` is the delivery's data. Replacing the
    /// handler takes effect from the next delivery; after the source has
    /// been cancelled, it is ignored.
    public final func setEventHandler(_ handler: (@Sendable () -> Void)?) {
        core.setHandler(.event, handler)
    }

    /// Sets the closure run once after ``cancel()``, after the last event
    /// handler has returned (nil: none). Close the source's descriptor here.
    public final func setCancelHandler(_ handler: (@Sendable () -> Void)?) {
        core.setHandler(.cancel, handler)
    }

    /// Sets the closure run once when the source starts watching (after
    /// the first ``activate()`` or ``resume()``), before any event handler:
    /// from then on no event is missed. Set it before activating.
    public final func setRegistrationHandler(_ handler: (@Sendable () -> Void)?) {
        core.setHandler(.registration, handler)
    }

    // MARK: - State

    /// Starts delivering events (a new source is inactive). Does nothing
    /// on a source that is already active.
    public final func activate() {
        sq_activate(cObject(raw))
    }

    /// Stops deliveries until a matching ``resume()``; events that arrive
    /// meanwhile coalesce into one delivery on resume. Counted.
    public final func suspend() {
        sq_suspend(cObject(raw))
    }

    /// Balances one ``suspend()``, or activates a new source. Resuming an
    /// active source that is not suspended stops the process.
    public final func resume() {
        sq_resume(cObject(raw))
    }

    /// Makes `queue` (nil: the default global queue) the queue the
    /// handlers run on, from the next delivery.
    public final func setTarget(_ queue: WorkQueue?) {
        sq_set_target_queue(cObject(raw), queue?.raw)
    }

    /// Stops the source, asynchronously and for good: no new delivery
    /// starts, then the cancel handler runs and ``events`` finish.
    /// Idempotent; callable from any thread, handlers included.
    public final func cancel() {
        sq_source_cancel(raw)
    }

    /// Whether ``cancel()`` has been called.
    public final var isCancelled: Bool {
        sq_source_testcancel(raw) != 0
    }

    /// Inside a handler, the data of the delivery being handled (a count,
    /// a sum, event flags or an estimate of bytes, depending on the
    /// source); elsewhere, the data of the latest delivery.
    public final var data: UInt {
        sq_source_get_data(raw)
    }

    /// The handle given at creation: a descriptor, a signal number or a
    /// process id (0 for timers and data sources).
    public final var handle: UInt {
        sq_source_get_handle(raw)
    }

    /// The mask given at creation (event flags, the OR mask, or the timer
    /// flags).
    public final var mask: UInt {
        sq_source_get_mask(raw)
    }

    // MARK: - Async sequence

    /// The data of each delivery made after this call, as an asynchronous
    /// sequence that finishes when the source is cancelled (at once if it
    /// already was). Each call makes a new sequence; all of them see every
    /// delivery, after the event handler. Values are buffered without
    /// limit, so a slow consumer loses none. Create it before activating
    /// the source to see the first deliveries.
    ///
    ///     source.activate()
    ///     for await sum in source.events { print(sum) }
    public final var events: AsyncStream<UInt> {
        core.makeStream()
    }
}

extension EventSource: AsyncSequence {
    /// The data of one delivery.
    public typealias Element = UInt

    /// The iterator of a new ``events`` sequence.
    public func makeAsyncIterator() -> AsyncStream<UInt>.Iterator {
        events.makeAsyncIterator()
    }
}

extension EventSource: CustomStringConvertible {
    /// `TimerSource(handle: …, mask: …, cancelled: …)`.
    public var description: String {
        "\(type(of: self))(handle: \(handle), mask: \(mask), cancelled: \(isCancelled))"
    }
}

/// The mutable half of a source: its Swift handlers and stream
/// continuations. The C source holds one retain on it per C handler (the
/// destructor drops it), so it outlives every delivery; it holds the C
/// source unretained (the C runtime keeps the source alive while it calls a
/// handler), so it makes no cycle with the ``EventSource``.
//
// `@unchecked Sendable` is safe: `raw` is immutable and only used for the
// thread-safe sq_source_get_data; everything mutable is inside `state`.
internal final class SourceCore: @unchecked Sendable {
    internal enum Kind: Int32 {
        case event = 0
        case cancel = 1
        case registration = 2
    }

    internal struct State {
        var event: (@Sendable () -> Void)?
        var cancel: (@Sendable () -> Void)?
        var registration: (@Sendable () -> Void)?
        var streams: [Int: AsyncStream<UInt>.Continuation] = [:]
        var nextStream = 0
        /// The cancel handler has run: handlers are dropped, streams finished.
        var finished = false
    }

    private let raw: OpaquePointer
    private let state = SpinLocked(State())

    internal init(raw: OpaquePointer) {
        self.raw = raw
    }

    /// Installs the three C handlers, each owning one retain of `self`.
    internal func install() {
        for kind in [Kind.event, .cancel, .registration] {
            let context = Unmanaged.passRetained(self).toOpaque()
            let function: sq_function_t
            switch kind {
            case .event:
                function = { Unmanaged<SourceCore>.fromOpaque($0.unsafelyUnwrapped)
                    .takeUnretainedValue().deliverEvent() }
            case .cancel:
                function = { Unmanaged<SourceCore>.fromOpaque($0.unsafelyUnwrapped)
                    .takeUnretainedValue().deliverCancel() }
            case .registration:
                function = { Unmanaged<SourceCore>.fromOpaque($0.unsafelyUnwrapped)
                    .takeUnretainedValue().deliverRegistration() }
            }
            _sq_source_set_handler(raw, kind.rawValue, function, context) {
                Unmanaged<SourceCore>.fromOpaque($0.unsafelyUnwrapped).release()
            }
        }
    }

    internal func setHandler(_ kind: Kind, _ handler: (@Sendable () -> Void)?) {
        // The replaced closure is released outside the lock (its captures'
        // deinits may do anything).
        let old: (@Sendable () -> Void)? = state.withLock { state in
            if state.finished { return handler }
            switch kind {
            case .event:
                defer { state.event = handler }
                return state.event
            case .cancel:
                defer { state.cancel = handler }
                return state.cancel
            case .registration:
                defer { state.registration = handler }
                return state.registration
            }
        }
        _ = old
    }

    internal func makeStream() -> AsyncStream<UInt> {
        let (stream, continuation) = AsyncStream<UInt>.makeStream(bufferingPolicy: .unbounded)
        let id: Int? = state.withLock { state in
            if state.finished { return nil }
            let id = state.nextStream
            state.nextStream += 1
            state.streams[id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.removeStream(id)
        }
        return stream
    }

    private func removeStream(_ id: Int) {
        let removed = state.withLock { $0.streams.removeValue(forKey: id) }
        _ = removed
    }

    /// One delivery: the event handler, then every stream.
    private func deliverEvent() {
        let data = sq_source_get_data(raw)
        let (handler, streams) = state.withLock { state in
            (state.event, state.streams.isEmpty ? [] : Array(state.streams.values))
        }
        handler?()
        for stream in streams {
            stream.yield(data)
        }
    }

    /// The end: the cancel handler, then every stream finishes, and every
    /// closure is let go.
    private func deliverCancel() {
        let (handler, dropped) = state.withLock { state in
            state.finished = true
            let dropped = state
            state = State(finished: true)
            return (dropped.cancel, dropped)
        }
        handler?()
        for stream in dropped.streams.values {
            stream.finish()
        }
    }

    /// The registration handler, once.
    private func deliverRegistration() {
        let handler = state.withLock { state in
            defer { state.registration = nil }
            return state.registration
        }
        handler?()
    }
}
