//===----------------------------------------------------------------------===//
//
// SwiftQueues — WorkDeadline and WaitResult over the C runtime's sq_time_t
// (include/swiftqueues/time.h).
//
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSwiftQueues

/// A point in time that a wait gives up at (`dispatch_time_t`, `DispatchTime`,
/// `DispatchWallTime`).
///
///     let result = group.wait(timeout: .now() + .milliseconds(100))
///
/// A deadline lives on one of two clocks:
/// - the **monotonic** clock (``now()``): it does not jump when someone sets
///   the system time, so it is what timeouts should normally use;
/// - the **wall** clock (``wallNow()``, ``wallClock(sinceEpoch:)``): real
///   calendar time, for "at 09:00" deadlines; a change of the system time
///   moves them.
///
/// Add or subtract a standard-library `Duration` to move a deadline. The
/// arithmetic saturates: it never wraps, and a deadline moved past the end
/// of its clock becomes ``distantFuture``.
///
/// Deadlines compare by their ``rawValue``: within one clock that is time
/// order; every monotonic deadline sorts before every wall-clock one, and
/// ``distantFuture`` after both.
public struct WorkDeadline: Sendable, Hashable, Comparable, RawRepresentable {
    /// The C runtime's encoding (`sq_time_t`): monotonic nanoseconds, or
    /// wall-clock nanoseconds since 1970 with bit 63 set; `0` means "now"
    /// and all ones means "never".
    public let rawValue: UInt64

    /// The deadline with the given C encoding (`sq_time_t`).
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// The current time on the monotonic clock.
    public static func now() -> WorkDeadline {
        // sq_time(SQ_TIME_NOW, 0) returns the SQ_TIME_NOW sentinel itself
        // (0), not the current time; a 1 ns offset forces a clock reading,
        // which is then taken back (the result is at least 2: no underflow).
        WorkDeadline(rawValue: sq_time(SQ_TIME_NOW, 1) - 1)
    }

    /// A deadline that never passes (`SQ_TIME_FOREVER`): waits with it
    /// wait as long as it takes.
    public static let distantFuture = WorkDeadline(rawValue: SQ_TIME_FOREVER)

    /// The current time on the wall clock.
    public static func wallNow() -> WorkDeadline {
        WorkDeadline(rawValue: sq_walltime(nil, 0))
    }

    /// The wall-clock time `sinceEpoch` after 1970-01-01 00:00:00 UTC
    /// (negative durations before it clamp to the epoch itself).
    public static func wallClock(sinceEpoch: Duration) -> WorkDeadline {
        let (seconds, attoseconds) = sinceEpoch.components
        if seconds < 0 || (seconds == 0 && attoseconds < 0) {
            return wallClock(sinceEpoch: .zero)
        }
        var when = timespec()
        when.tv_sec = Int(seconds)
        when.tv_nsec = Int(attoseconds / 1_000_000_000)
        return WorkDeadline(rawValue: sq_walltime(&when, 0))
    }

    /// Whether this deadline is on the wall clock rather than the monotonic
    /// one (``distantFuture`` is on neither: `false`).
    public var isWallClock: Bool {
        self != .distantFuture && rawValue & SQ_TIME_WALL_FLAG != 0
    }

    /// `deadline` moved later by `duration` (earlier if it is negative).
    public static func + (deadline: WorkDeadline, duration: Duration) -> WorkDeadline {
        WorkDeadline(rawValue: sq_time(deadline.rawValue, duration.saturatingNanoseconds))
    }

    /// `deadline` moved earlier by `duration` (later if it is negative).
    public static func - (deadline: WorkDeadline, duration: Duration) -> WorkDeadline {
        let nanoseconds = duration.saturatingNanoseconds
        let negated = nanoseconds == .min ? Int64.max : -nanoseconds
        return WorkDeadline(rawValue: sq_time(deadline.rawValue, negated))
    }

    /// Moves `deadline` later by `duration`.
    public static func += (deadline: inout WorkDeadline, duration: Duration) {
        deadline = deadline + duration
    }

    /// Moves `deadline` earlier by `duration`.
    public static func -= (deadline: inout WorkDeadline, duration: Duration) {
        deadline = deadline - duration
    }

    /// Whether `lhs` comes before `rhs` (see the type's ordering notes).
    public static func < (lhs: WorkDeadline, rhs: WorkDeadline) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}

extension WorkDeadline: CustomStringConvertible {
    /// A readable form: `WorkDeadline(monotonic: …ns)`, `WorkDeadline(wall: …ns)`
    /// or `WorkDeadline.distantFuture`.
    public var description: String {
        if self == .distantFuture { return "WorkDeadline.distantFuture" }
        if isWallClock {
            return "WorkDeadline(wall: \(rawValue & ~SQ_TIME_WALL_FLAG)ns)"
        }
        return "WorkDeadline(monotonic: \(rawValue)ns)"
    }
}

extension Duration {
    /// The duration in whole nanoseconds (rounded toward zero), clamped to
    /// `Int64`'s range instead of overflowing.
    internal var saturatingNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return total
    }
}

/// How a wait with a timeout ended (`DispatchTimeoutResult`).
public enum WaitResult: Sendable, Hashable {
    /// What was waited for happened before the deadline.
    case success
    /// The deadline passed first.
    case timedOut

    /// Maps a C wait's return value (0: success, non-zero: timeout).
    internal init(_ status: Int) {
        self = status == 0 ? .success : .timedOut
    }
}
