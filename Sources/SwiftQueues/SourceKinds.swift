//===----------------------------------------------------------------------===//
//
// SwiftQueues — the concrete sources: TimerSource, ReadSource, WriteSource,
// SignalSource, ProcessSource, FileSystemSource, DataSource
// (SQ_SOURCE_TYPE_* in include/swiftqueues/source.h).
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues

// MARK: - Timer

/// A timer (`DispatchSourceTimer`): fires at a deadline, then optionally
/// every interval. ``EventSource/data`` is the number of fires since the
/// last delivery (more than 1 when the queue was busy or the source
/// suspended).
///
///     let timer = TimerSource(queue: queue)
///     timer.setEventHandler { tick() }
///     timer.schedule(deadline: .now(), repeating: .seconds(1), leeway: .milliseconds(100))
///     timer.activate()
///
/// A timer that has not been scheduled never fires.
public final class TimerSource: EventSource, @unchecked Sendable {
    /// Timer options (`DispatchSource.TimerFlags`).
    public struct Flags: OptionSet, Sendable, Hashable {
        /// The bits (`SQ_TIMER_*`).
        public let rawValue: UInt

        /// Flags from their bits.
        public init(rawValue: UInt) {
            self.rawValue = rawValue
        }

        /// Fire on time, ignoring any leeway (`SQ_TIMER_STRICT`).
        public static let strict = Flags(rawValue: UInt(SQ_TIMER_STRICT))
    }

    /// Creates an inactive, unscheduled timer whose handlers run on `queue`
    /// (nil: the default global queue).
    public init(flags: Flags = [], queue: WorkQueue? = nil) {
        super.init(raw: EventSource.createInfallible(
            sq_source_type_timer(), mask: flags.rawValue, queue: queue, name: "timer"))
    }

    /// The flags given at creation.
    public var flags: Flags {
        Flags(rawValue: mask)
    }

    /// Arms the timer, replacing any earlier schedule: first fire at
    /// `deadline` (``WorkDeadline/now()`` or earlier: at once; a wall-clock
    /// deadline follows the wall clock), then every `interval` (nil: only
    /// once). The timer may fire up to `leeway` late so that wake-ups
    /// coalesce (none with ``Flags/strict``). Fires are scheduled at
    /// `deadline + k × interval`, so they do not drift.
    ///
    /// An `interval` of zero or less, or a negative `leeway`, stops the
    /// process with a message (Dispatch stops a negative one too; a zero
    /// interval it takes as 1 ns, a timer that never stops firing).
    public func schedule(deadline: WorkDeadline, repeating interval: Duration? = nil,
                         leeway: Duration = .zero) {
        let call = "TimerSource.schedule(deadline:repeating:leeway:)"
        let period: UInt64
        if let interval {
            if interval <= .zero {
                misuse(call, "repeating interval \(interval) is not positive (nil: fire once)")
            }
            // At least 1 ns: a positive interval below a nanosecond is
            // not 0, which the C runtime would take as "no interval".
            period = UInt64(Swift.max(interval.saturatingNanoseconds, 1))
        } else {
            period = SQ_TIME_FOREVER
        }
        if leeway.isNegative { misuse(call, "negative leeway \(leeway)") }
        sq_source_set_timer(raw, deadline.rawValue, period, UInt64(leeway.saturatingNanoseconds))
    }

    /// The number of fires the delivery being handled stands for.
    public var fireCount: Int {
        Int(data)
    }
}

// MARK: - Descriptors

/// Watches a descriptor for data to read (`DispatchSourceRead`).
/// ``EventSource/data`` is an estimate of the bytes readable; 0 means end
/// of file or hang-up (delivered once: cancel the source then). Regular
/// files are always readable. Use a non-blocking descriptor, and close it
/// in the cancel handler.
///
///     let source = try ReadSource(fileDescriptor: fd, queue: queue)
///     source.setEventHandler { if read(fd, &buffer, 4096) <= 0 { source.cancel() } }
///     source.setCancelHandler { close(fd) }
///     source.activate()
public final class ReadSource: EventSource, @unchecked Sendable {
    /// Creates an inactive read source on `fileDescriptor`. Throws
    /// ``SourceError`` with `EBADF` for a descriptor that is not open.
    public init(fileDescriptor: Int32, queue: WorkQueue? = nil) throws(SourceError) {
        try super.init(raw: EventSource.create(
            sq_source_type_read(), handle: UInt(bitPattern: Int(fileDescriptor)), mask: 0,
            queue: queue, name: "read"))
    }

    /// The descriptor watched.
    public var fileDescriptor: Int32 {
        Int32(truncatingIfNeeded: handle)
    }

    /// The estimate of bytes readable for the delivery being handled.
    public var bytesAvailable: Int {
        Int(bitPattern: data)
    }
}

/// Watches a descriptor for room to write (`DispatchSourceWrite`).
/// ``EventSource/data`` is positive while it is writable (an estimate of
/// the room in its buffer). Use a non-blocking descriptor, and close it in
/// the cancel handler.
public final class WriteSource: EventSource, @unchecked Sendable {
    /// Creates an inactive write source on `fileDescriptor`. Throws
    /// ``SourceError`` with `EBADF` for a descriptor that is not open.
    public init(fileDescriptor: Int32, queue: WorkQueue? = nil) throws(SourceError) {
        try super.init(raw: EventSource.create(
            sq_source_type_write(), handle: UInt(bitPattern: Int(fileDescriptor)), mask: 0,
            queue: queue, name: "write"))
    }

    /// The descriptor watched.
    public var fileDescriptor: Int32 {
        Int32(truncatingIfNeeded: handle)
    }
}

// MARK: - Signals and processes

/// Reports the arrival of a signal (`DispatchSourceSignal`).
/// ``EventSource/data`` is the number of deliveries since the last handler
/// run. The handler runs on a queue, so it may call anything.
///
/// While the source is active the signal is caught (its default action
/// does not happen); the previous disposition comes back when the last
/// source for the signal is cancelled. ``EventSource/activate()`` (or the
/// first ``EventSource/resume()``) returns once the signal is caught, so a
/// signal sent after it reaches the source: unlike with GCD, no
/// `signal(SIGHUP, SIG_IGN)` is needed first. A signal that arrives
/// before activation still gets its previous disposition.
public final class SignalSource: EventSource, @unchecked Sendable {
    /// Creates an inactive source for `signal`. Throws ``SourceError`` with
    /// `EINVAL` for a signal that cannot be watched (SIGKILL, SIGSTOP,
    /// SIGILL, SIGBUS, SIGSEGV, SIGFPE, or no such signal).
    public init(signal: Int32, queue: WorkQueue? = nil) throws(SourceError) {
        // A negative number is invalid: keep it invalid as an unsigned handle.
        let handle = signal < 0 ? UInt.max : UInt(signal)
        try super.init(raw: EventSource.create(
            sq_source_type_signal(), handle: handle, mask: 0, queue: queue, name: "signal"))
    }

    /// The signal number watched.
    public var signal: Int32 {
        Int32(truncatingIfNeeded: handle)
    }

    /// The number of arrivals the delivery being handled stands for.
    public var count: Int {
        Int(data)
    }
}

/// Reports events of a process (`DispatchSourceProcess`). Linux reports
/// ``Events/exit`` only (through a pidfd); the source does not reap the
/// process. A process that is already gone (a child already reaped, a pid
/// no process has) reports ``Events/exit`` as soon as the source is
/// activated, as Darwin's Dispatch does.
public final class ProcessSource: EventSource, @unchecked Sendable {
    /// Process events (`DispatchSource.ProcessEvent`).
    public struct Events: OptionSet, Sendable, Hashable {
        /// The bits (`SQ_PROC_*`).
        public let rawValue: UInt

        /// Events from their bits.
        public init(rawValue: UInt) {
            self.rawValue = rawValue
        }

        /// The process exited (`SQ_PROC_EXIT`).
        public static let exit = Events(rawValue: UInt(SQ_PROC_EXIT))
        /// The process forked (`SQ_PROC_FORK`): not reportable on Linux.
        public static let fork = Events(rawValue: UInt(SQ_PROC_FORK))
        /// The process called exec (`SQ_PROC_EXEC`): not reportable on Linux.
        public static let exec = Events(rawValue: UInt(SQ_PROC_EXEC))
        /// A signal was delivered to it (`SQ_PROC_SIGNAL`): not reportable
        /// on Linux.
        public static let signal = Events(rawValue: UInt(SQ_PROC_SIGNAL))
    }

    /// Creates an inactive source for `processIdentifier`. Throws
    /// ``SourceError`` with `ENOTSUP` for an event Linux cannot report, and
    /// with `EMFILE` / `ENFILE` (no descriptor for the pidfd or the event
    /// loop) or `EAGAIN` (no thread for the loop) while the process has
    /// none to spare.
    public init(processIdentifier: pid_t, eventMask: Events = .exit,
                queue: WorkQueue? = nil) throws(SourceError) {
        let handle = processIdentifier <= 0 ? UInt.max : UInt(processIdentifier)
        try super.init(raw: EventSource.create(
            sq_source_type_proc(), handle: handle, mask: eventMask.rawValue, queue: queue,
            name: "process"))
    }

    /// The process watched.
    public var processIdentifier: pid_t {
        pid_t(truncatingIfNeeded: handle)
    }

    /// The events asked for at creation.
    public var eventMask: Events {
        Events(rawValue: mask)
    }

    /// The events of the delivery being handled.
    public var receivedEvents: Events {
        Events(rawValue: data)
    }
}

// MARK: - File system

/// Reports changes to a file or directory (`DispatchSourceFileSystemObject`),
/// through inotify. The watch follows the object, not its name: one source
/// sees any number of renames. Keep the descriptor open while the source
/// watches, and close it in the cancel handler.
public final class FileSystemSource: EventSource, @unchecked Sendable {
    /// File-system events (`DispatchSource.FileSystemEvent`).
    public struct Events: OptionSet, Sendable, Hashable {
        /// The bits (`SQ_VNODE_*`).
        public let rawValue: UInt

        /// Events from their bits.
        public init(rawValue: UInt) {
            self.rawValue = rawValue
        }

        /// Unlinked (its link count reached 0); a directory: removed.
        public static let delete = Events(rawValue: UInt(SQ_VNODE_DELETE))
        /// Contents changed (a directory: an entry was added, removed or
        /// renamed).
        public static let write = Events(rawValue: UInt(SQ_VNODE_WRITE))
        /// The file grew.
        public static let extend = Events(rawValue: UInt(SQ_VNODE_EXTEND))
        /// Metadata changed.
        public static let attrib = Events(rawValue: UInt(SQ_VNODE_ATTRIB))
        /// The link count changed.
        public static let link = Events(rawValue: UInt(SQ_VNODE_LINK))
        /// Renamed or moved (it stays watched).
        public static let rename = Events(rawValue: UInt(SQ_VNODE_RENAME))
        /// The file system was unmounted.
        public static let revoke = Events(rawValue: UInt(SQ_VNODE_REVOKE))
        /// Every event.
        public static let all: Events = [.delete, .write, .extend, .attrib, .link, .rename, .revoke]
    }

    /// Creates an inactive source watching the object open on
    /// `fileDescriptor` for `eventMask`. Throws ``SourceError`` with `EBADF`
    /// for a descriptor that is not open, `ENOENT` when the object is gone,
    /// `ENOSPC` when the per-user limit of inotify watches is reached.
    public init(fileDescriptor: Int32, eventMask: Events,
                queue: WorkQueue? = nil) throws(SourceError) {
        try super.init(raw: EventSource.create(
            sq_source_type_vnode(), handle: UInt(bitPattern: Int(fileDescriptor)),
            mask: eventMask.rawValue, queue: queue, name: "file-system"))
    }

    /// The descriptor watched.
    public var fileDescriptor: Int32 {
        Int32(truncatingIfNeeded: handle)
    }

    /// The events asked for at creation.
    public var eventMask: Events {
        Events(rawValue: mask)
    }

    /// The events of the delivery being handled (OR-ed together).
    public var receivedEvents: Events {
        Events(rawValue: data)
    }
}

// MARK: - Data

/// A source the program triggers itself (`DispatchSourceUserDataAdd`,
/// `…Or`, `…Replace`): ``merge(_:)`` from any thread folds a value into the
/// pending data and queues one delivery; merges made before the handler
/// runs coalesce.
///
///     let progress = DataSource(kind: .add, queue: .main)
///     progress.setEventHandler { bar.advance(by: progress.data) }
///     progress.activate()
///     WorkQueue.global().async { progress.merge(1) }   // from anywhere
public final class DataSource: EventSource, @unchecked Sendable {
    /// How merged values combine.
    public enum Kind: Sendable, Hashable {
        /// They add up; ``EventSource/data`` is the sum.
        case add
        /// They are OR-ed; ``EventSource/data`` is the union.
        case or
        /// Each replaces the previous one; merging 0 delivers nothing.
        case replace
    }

    /// How this source combines merged values.
    public let kind: Kind

    /// Creates an inactive data source.
    public init(kind: Kind, queue: WorkQueue? = nil) {
        let type: sq_source_type_t
        switch kind {
        case .add: type = sq_source_type_data_add()
        case .or: type = sq_source_type_data_or()
        case .replace: type = sq_source_type_data_replace()
        }
        self.kind = kind
        super.init(raw: EventSource.createInfallible(type, mask: 0, queue: queue, name: "data"))
    }

    /// Creates an inactive `.or` source whose merged values are limited to
    /// the bits of `mask` (values with none of them deliver nothing).
    public init(orMask mask: UInt, queue: WorkQueue? = nil) {
        self.kind = .or
        super.init(raw: EventSource.createInfallible(
            sq_source_type_data_or(), mask: mask, queue: queue, name: "data"))
    }

    /// Folds `value` into the pending data (add, OR or replace) and queues
    /// a delivery. Callable from any thread; ignored after ``cancel()``.
    public func merge(_ value: UInt) {
        sq_source_merge_data(raw, value)
    }
}
