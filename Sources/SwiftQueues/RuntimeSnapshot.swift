//===----------------------------------------------------------------------===//
//
// SwiftQueues — RuntimeSnapshot: the whole runtime at one moment, over the
// C runtime's sq_snapshot_create (include/swiftqueues/introspect.h).
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues

/// Every live queue, source and I/O channel and the worker pool's figures,
/// taken at one moment: what a stuck or slow program is doing, as a value
/// to log, compare or encode (`Codable`: `JSONEncoder` writes it as JSON).
///
///     let snapshot = RuntimeSnapshot.capture()
///     for queue in snapshot.queues where (queue.queued ?? 0) > 1000 {
///         print(queue.label, "has", queue.queued!, "jobs waiting")
///     }
///     print(RuntimeSnapshot.text())            // the same, as readable lines
///
/// Each part is read without stopping the others, so parts may be a few
/// microseconds apart. docs/OBSERVABILITY.md says what each figure means.
/// The runtime writes the same snapshot on stderr when the process gets
/// the signal named by `SQ_SNAPSHOT_SIGNAL`, and with each report of the
/// watchdog (`SQ_WATCHDOG_MS`).
public struct RuntimeSnapshot: Codable, Sendable, Hashable {
    /// The worker pool's figures (`sq_pool_stats`).
    public struct PoolInfo: Codable, Sendable, Hashable {
        /// Workers kept running: the usable CPUs, or `SQ_WORKERS`.
        public var width: Int
        /// The thread cap, `SQ_MAX_THREADS`.
        public var maxThreads: Int
        /// Worker threads alive, idle, and looking for work.
        public var live: Int
        /// Workers parked on the idle list now.
        public var idle: Int
        /// Workers looking for work now.
        public var searching: Int
        /// Jobs started by live workers so far.
        public var jobs: UInt64
        /// Idle workers woken by submissions.
        public var wakeups: UInt64
        /// Worker threads started ever, and of those, started for blocked
        /// workers.
        public var spawned: UInt64
        /// Of the threads started, those started by the monitor for blocked workers.
        public var compensated: UInt64
        /// Times the monitor's safety net had to wake a worker (0 unless
        /// the wake-up protocol has a bug).
        public var netFirings: UInt64
        /// Jobs waiting in the workers' own run queues.
        public var localJobs: UInt64
    }

    /// A queue.
    public struct QueueInfo: Codable, Sendable, Hashable {
        /// What kind of queue it is.
        public enum Kind: String, Codable, Sendable, Hashable {
            /// The main queue, a global queue, a serial or a concurrent queue.
            case main, global, serial, concurrent
        }
        /// Its label; `""` when it has none.
        public var label: String
        /// Its address: tells apart queues with the same label.
        public var address: UInt
        /// Main, global, serial or concurrent.
        public var kind: Kind
        /// The label of the queue it targets; `nil` for the main and
        /// global queues.
        public var target: String?
        /// Suspensions not yet balanced by a resume.
        public var suspendCount: Int
        /// Created inactive and not yet activated.
        public var isInactive: Bool
        /// Jobs waiting in it (not running); `nil` when it could not be
        /// counted in time.
        public var queued: Int?
        /// `queued` is a lower bound: the count stopped at a million.
        public var queuedIsCapped: Bool
        /// Its tasks running now; `nil` for global queues (not tracked).
        public var running: Int?
        /// How long its queued work has waited with no job of it starting,
        /// as far as the runtime's looks tell (a lower bound); `nil` when
        /// nothing is queued.
        public var waitingMilliseconds: Int?
    }

    /// A source.
    public struct SourceInfo: Codable, Sendable, Hashable {
        /// The source's address.
        public var address: UInt
        /// `"timer"`, `"read"`, `"write"`, `"signal"`, `"process"`,
        /// `"vnode"`, `"data-add"`, `"data-or"`, `"data-replace"`.
        public var type: String
        /// The handle it watches (descriptor, signal number, process id, ...).
        public var handle: UInt
        /// The mask it was created with.
        public var mask: UInt
        /// The label of the queue its handlers run on.
        public var target: String
        /// Suspensions not yet balanced by a resume.
        public var suspendCount: Int
        /// Not yet activated.
        public var isInactive: Bool
        /// Cancelled.
        public var isCancelled: Bool
        /// The event loop is watching for it.
        public var isRegistered: Bool
        /// The runtime's own source for `SQ_SNAPSHOT_SIGNAL`.
        public var isSnapshotSignal: Bool
        /// Event data merged and not yet delivered.
        public var pending: UInt
    }

    /// An I/O channel.
    public struct ChannelInfo: Codable, Sendable, Hashable {
        /// The channel's address.
        public var address: UInt
        /// `"stream"` or `"random"`.
        public var type: String
        /// `nil` while a channel made from a path has not opened it.
        public var fileDescriptor: Int32?
        /// `nil` for a channel made on a descriptor.
        public var path: String?
        /// The label of the queue its work runs on.
        public var queue: String
        /// Closed, or released by the program.
        public var isClosed: Bool
        /// Handler calls queued or running, plus one until the channel is
        /// done with its descriptor.
        public var calls: UInt64
    }

    /// A thread that runs tasks (listed while `SQ_WATCHDOG_MS` is set).
    public struct ThreadInfo: Codable, Sendable, Hashable {
        /// The kernel's thread id.
        public var id: Int32
        /// Its name (`sq.worker 3`, `main thread`, ...).
        public var name: String
        /// Running a task now.
        public var isBusy: Bool
        /// The serial queue its task holds, and for how long.
        public var queue: String?
        /// For how long its task has held that queue.
        public var runningMilliseconds: Int?
        /// The queue its `sync` waits for, and for how long.
        public var waitingFor: String?
        /// For how long it has waited.
        public var waitingMilliseconds: Int?
        /// The task it runs (its outermost): the queue's label and the
        /// function's name.
        public var taskQueue: String?
        /// The function of the task it runs, by name.
        public var function: String?
        /// The thread holding the queue it waits for, and that thread's
        /// task (queue label, function name).
        public var holderThread: Int32?
        /// The queue the holder's task holds.
        public var holderQueue: String?
        /// The function of the holder's task, by name.
        public var holderFunction: String?
    }

    /// The process id.
    public var processID: Int32
    /// `CLOCK_MONOTONIC` when it was taken, in nanoseconds.
    public var time: UInt64
    /// `SQ_WATCHDOG_MS`; `nil` while the watchdog is off.
    public var watchdogMilliseconds: Int?
    /// The worker pool's figures.
    public var pool: PoolInfo
    /// The main queue, the global queues, then the others by creation.
    public var queues: [QueueInfo]
    /// The live sources, by creation.
    public var sources: [SourceInfo]
    /// The live I/O channels, by creation.
    public var channels: [ChannelInfo]
    /// The threads that run tasks (while `SQ_WATCHDOG_MS` is set).
    public var threads: [ThreadInfo]

    /// Takes a snapshot of the runtime now.
    public static func capture() -> RuntimeSnapshot {
        guard let raw = sq_snapshot_create() else {
            fatalError("SwiftQueues: RuntimeSnapshot.capture: out of memory")
        }
        defer { sq_snapshot_free(raw) }
        return RuntimeSnapshot(raw.pointee)
    }

    /// A snapshot as text, one line per item (what `SQ_SNAPSHOT_SIGNAL`
    /// writes).
    public static func text() -> String {
        render(sq_snapshot_text())
    }

    /// A snapshot as one JSON object (the C runtime's field names).
    public static func json() -> String {
        render(sq_snapshot_json())
    }

    private static func render(_ text: UnsafeMutablePointer<CChar>?) -> String {
        guard let text else {
            fatalError("SwiftQueues: RuntimeSnapshot: out of memory")
        }
        defer { free(text) }
        return String(cString: text)
    }

    private init(_ s: sq_snapshot_t) {
        processID = s.pid
        time = s.time_ns
        watchdogMilliseconds = s.watchdog_ms == 0 ? nil : Int(s.watchdog_ms)
        pool = PoolInfo(
            width: Int(s.pool.width), maxThreads: Int(s.pool.max_threads),
            live: Int(s.pool.live), idle: Int(s.pool.idle),
            searching: Int(s.pool.searching), jobs: s.pool.jobs,
            wakeups: s.pool.wakeups, spawned: s.pool.spawned,
            compensated: s.pool.compensated, netFirings: s.pool.net_firings,
            localJobs: s.local_jobs)
        queues = UnsafeBufferPointer(start: s.queues, count: s.queue_count).map { q in
            QueueInfo(
                label: String(cString: q.label), address: UInt(q.address),
                kind: QueueInfo.Kind(rawValue: String(cString: q.kind)) ?? .serial,
                target: q.target.map { String(cString: $0) },
                suspendCount: Int(q.suspend_count), isInactive: q.inactive,
                queued: q.queued < 0 ? nil : Int(q.queued),
                queuedIsCapped: q.queued_capped,
                running: q.running < 0 ? nil : Int(q.running),
                waitingMilliseconds: q.waiting_ms < 0 ? nil : Int(q.waiting_ms))
        }
        sources = UnsafeBufferPointer(start: s.sources, count: s.source_count).map { e in
            SourceInfo(
                address: UInt(e.address), type: String(cString: e.type),
                handle: UInt(e.handle), mask: UInt(e.mask),
                target: String(cString: e.target),
                suspendCount: Int(e.suspend_count), isInactive: e.inactive,
                isCancelled: e.cancelled, isRegistered: e.registered,
                isSnapshotSignal: e.snapshot_signal, pending: UInt(e.pending))
        }
        channels = UnsafeBufferPointer(start: s.channels, count: s.channel_count).map { e in
            ChannelInfo(
                address: UInt(e.address), type: String(cString: e.type),
                fileDescriptor: e.fd < 0 ? nil : e.fd,
                path: e.path.map { String(cString: $0) },
                queue: String(cString: e.queue), isClosed: e.closed,
                calls: e.calls)
        }
        threads = UnsafeBufferPointer(start: s.threads, count: s.thread_count).map { t in
            ThreadInfo(
                id: t.tid, name: String(cString: t.name), isBusy: t.busy,
                queue: t.queue.map { String(cString: $0) },
                runningMilliseconds: t.running_ms < 0 ? nil : Int(t.running_ms),
                waitingFor: t.waiting_for.map { String(cString: $0) },
                waitingMilliseconds: t.waiting_ms < 0 ? nil : Int(t.waiting_ms),
                taskQueue: t.task_queue.map { String(cString: $0) },
                function: t.function.map { String(cString: $0) },
                holderThread: t.holder_tid == 0 ? nil : t.holder_tid,
                holderQueue: t.holder_queue.map { String(cString: $0) },
                holderFunction: t.holder_function.map { String(cString: $0) })
        }
    }
}
