/*!
 * \defgroup swiftqueues_time Time values
 * \ingroup swiftqueues
 *
 * Time values (libdispatch's dispatch_time_t, renamed).
 *
 * An sq_time_t is an absolute point in time on one of two clocks:
 *   - monotonic (CLOCK_MONOTONIC): values 1 .. 2^63-1, nanoseconds since an
 *     arbitrary start; built by sq_time(). A wall-clock jump does not move it.
 *   - wall clock (CLOCK_REALTIME): bit 63 set, the low 63 bits nanoseconds
 *     since the Unix epoch; built by sq_walltime().
 * Two values are special: SQ_TIME_NOW (0) and SQ_TIME_FOREVER (all ones).
 * Arithmetic saturates: a delta that would overflow gives SQ_TIME_FOREVER,
 * one that would go below the clock's origin gives its earliest value.
 *
 * For example, waiting at most 250 ms for a group:
 * \code
 * if (sq_group_wait(group, sq_time(SQ_TIME_NOW, 250 * NSEC_PER_MSEC)) != 0)
 *         report_timeout();
 * \endcode
 * @{
 */
#ifndef SWIFTQUEUES_TIME_H
#define SWIFTQUEUES_TIME_H

#include <swiftqueues/base.h>

struct timespec;

/*! \name Unit conversions (defined unless the program already has them) */
/*! @{ */
#ifndef NSEC_PER_SEC
/*! Nanoseconds per second. */
#define NSEC_PER_SEC 1000000000ull
#endif
#ifndef NSEC_PER_MSEC
/*! Nanoseconds per millisecond. */
#define NSEC_PER_MSEC 1000000ull
#endif
#ifndef USEC_PER_SEC
/*! Microseconds per second. */
#define USEC_PER_SEC 1000000ull
#endif
#ifndef NSEC_PER_USEC
/*! Nanoseconds per microsecond. */
#define NSEC_PER_USEC 1000ull
#endif
/*! @} */

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! An absolute time on the monotonic clock or the wall clock (see above). */
typedef uint64_t sq_time_t;

/*! Now, on the monotonic clock. */
#define SQ_TIME_NOW (0ull)
/*! Never: a wait with it does not time out. */
#define SQ_TIME_FOREVER (~0ull)
/*! Now on the wall clock: sq_time(SQ_WALLTIME_NOW, d) reads CLOCK_REALTIME. */
#define SQ_WALLTIME_NOW (~1ull)
/*! Bit 63 marks a wall-clock value. */
#define SQ_TIME_WALL_FLAG (1ull << 63)

/*!
 * Returns `when` moved by `delta` nanoseconds (which may be negative).
 * `when` may be SQ_TIME_NOW (monotonic now), SQ_WALLTIME_NOW, a value from
 * sq_time or sq_walltime. SQ_TIME_FOREVER stays SQ_TIME_FOREVER
 * (dispatch_time). Thread-safe; makes no system call beyond reading the
 * clock for the two "now" values.
 * \param when the starting point.
 * \param delta nanoseconds to add; may be negative.
 * \return the moved time, on `when`'s clock; saturated.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_time_t
sq_time(sq_time_t when, int64_t delta);

/*!
 * Returns a wall-clock time: `when` (or the current time when NULL) plus
 * `delta` nanoseconds (dispatch_walltime).
 * \param when a CLOCK_REALTIME time, or NULL for now.
 * \param delta nanoseconds to add; may be negative.
 * \return a wall-clock sq_time_t (bit 63 set); saturated.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_time_t
sq_walltime(const struct timespec *SQ_NULLABLE when, int64_t delta);

/*!
 * Nanoseconds from now until `when` on `when`'s own clock. No libdispatch
 * counterpart.
 * \param when a time from sq_time or sq_walltime, or a special value.
 * \return 0 when it has passed, UINT64_MAX for SQ_TIME_FOREVER.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
uint64_t
sq_time_nanoseconds_until(sq_time_t when);

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_TIME_H */
