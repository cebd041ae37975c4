//===----------------------------------------------------------------------===//
//
// SwiftQueues — RepeatingTimer, Foundation's Timer (NSTimer) shape over a
// TimerSource: a handler that receives the timer, first fire one interval
// after scheduling, invalidate().
//
//===----------------------------------------------------------------------===//

import Synchronization

/// A timer in Foundation's `Timer` shape, on a ``WorkQueue`` instead of a
/// run loop: the handler runs on the queue one interval after the timer is
/// scheduled, then (if it repeats) every interval, until ``invalidate()``.
///
///     let timer = RepeatingTimer.scheduled(interval: .seconds(1), queue: .main) { timer in
///         print("Painting")
///         if finished { timer.invalidate() }
///     }
///
/// Fires that the queue could not run in time are skipped, not queued up
/// (as `Timer` does): the handler runs once per delivery. A non-repeating
/// timer invalidates itself after its fire. A scheduled timer keeps itself
/// alive until it is invalidated, as a `Timer` scheduled on a run loop does;
/// invalidating releases the handler and the ``userInfo``.
//
// `@unchecked Sendable` is safe: `source`, `interval`, `repeats` and
// `queue` are immutable; `userInfo` is behind a SpinLocked; the rest of the
// state is the thread-safe TimerSource.
public final class RepeatingTimer: @unchecked Sendable {
    /// The time between fires (and before the first).
    public let interval: Duration

    /// Whether the timer fires more than once.
    public let repeats: Bool

    /// The queue the handler runs on.
    public let queue: WorkQueue

    /// How late a fire may be so that wake-ups coalesce (`Timer.tolerance`).
    public let tolerance: Duration

    private let source: TimerSource
    private let info: SpinLocked<(any Sendable)?>
    private let scheduledFlag = Atomic<Bool>(false)

    /// Creates a timer that is not scheduled yet (`Timer(timeInterval:…)`):
    /// it does nothing until ``schedule()``.
    ///
    /// - Parameters:
    ///   - interval: the time between fires, and before the first.
    ///   - repeats: `false` for a single fire.
    ///   - tolerance: how late a fire may be (default: none).
    ///   - queue: the queue the handler runs on.
    ///   - userInfo: a value for the handler (``userInfo``), released on
    ///     invalidation.
    ///   - handler: called with the timer on every fire.
    ///
    /// A repeating timer's interval must be positive, a single fire's zero
    /// or more (zero: as soon as the queue can run it), and the tolerance
    /// zero or more; anything else stops the process with a message
    /// (Foundation takes an interval of zero or less as 0.1 ms).
    public init(interval: Duration, repeats: Bool = true, tolerance: Duration = .zero,
                queue: WorkQueue, userInfo: (any Sendable)? = nil,
                handler: @escaping @Sendable (RepeatingTimer) -> Void) {
        let call = "RepeatingTimer(interval:repeats:tolerance:)"
        if repeats && interval <= .zero {
            misuse(call, "a repeating timer's interval \(interval) is not positive")
        }
        if interval.isNegative { misuse(call, "negative interval \(interval)") }
        if tolerance.isNegative { misuse(call, "negative tolerance \(tolerance)") }
        self.interval = interval
        self.repeats = repeats
        self.tolerance = tolerance
        self.queue = queue
        self.info = SpinLocked(userInfo)
        self.source = TimerSource(queue: queue)
        // The handler holds the timer strongly: a scheduled timer lives until
        // it is invalidated (the source drops its handlers once cancelled).
        source.setEventHandler { [self] in
            if source.isCancelled { return }
            handler(self)
            if !repeats { invalidate() }
        }
    }

    /// Creates a timer and schedules it (`Timer.scheduledTimer(withTimeInterval:repeats:block:)`).
    public static func scheduled(interval: Duration, repeats: Bool = true,
                                 tolerance: Duration = .zero, queue: WorkQueue,
                                 userInfo: (any Sendable)? = nil,
                                 handler: @escaping @Sendable (RepeatingTimer) -> Void)
        -> RepeatingTimer
    {
        let timer = RepeatingTimer(interval: interval, repeats: repeats, tolerance: tolerance,
                                   queue: queue, userInfo: userInfo, handler: handler)
        timer.schedule()
        return timer
    }

    /// Starts the timer (`RunLoop.add(_:forMode:)`): first fire one
    /// interval from now. Only the first call has an effect, and none on an
    /// invalidated timer.
    public func schedule() {
        guard !scheduledFlag.exchange(true, ordering: .acquiringAndReleasing),
              !source.isCancelled else { return }
        source.schedule(deadline: .now() + interval,
                        repeating: repeats ? interval : nil, leeway: tolerance)
        source.activate()
    }

    /// Stops the timer for good (`Timer.invalidate()`): no fire starts after
    /// this call returns, except one already running. Idempotent; callable
    /// from any thread, the handler included.
    public func invalidate() {
        source.cancel()
        // An unscheduled timer was never activated: activate it so that its
        // cancellation completes and the handler is released.
        if !scheduledFlag.exchange(true, ordering: .acquiringAndReleasing) {
            source.activate()
        }
        let old = info.withLock { info in
            defer { info = nil }
            return info
        }
        _ = old
    }

    /// Whether the timer can still fire (`Timer.isValid`).
    public var isValid: Bool {
        !source.isCancelled
    }

    /// The value given at creation, until the timer is invalidated
    /// (`Timer.userInfo`).
    public var userInfo: (any Sendable)? {
        info.withLock { $0 }
    }
}
