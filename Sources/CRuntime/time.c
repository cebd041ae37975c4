/*
 * SwiftQueues — time values. Encoding in include/swiftqueues/time.h.
 */
#include "internal.h"

/* The largest nanosecond count either clock can hold below FOREVER. */
#define SQ_TIME_MAX_NS ((uint64_t)INT64_MAX - 1)

/* base + delta, clamped to [1, SQ_TIME_MAX_NS]; above it means FOREVER. */
static sq_time_t
_sq_time_offset(uint64_t base, int64_t delta, bool *forever)
{
	*forever = false;
	if (delta >= 0) {
		uint64_t d = (uint64_t)delta;
		if (d > SQ_TIME_MAX_NS || base > SQ_TIME_MAX_NS - d) {
			*forever = true;
			return SQ_TIME_FOREVER;
		}
		return base + d;
	}
	/* -(INT64_MIN) does not fit an int64_t: negate in unsigned. */
	uint64_t d = (uint64_t)0 - (uint64_t)delta;
	/* 0 would read as SQ_TIME_NOW: the earliest real instant is 1. */
	return base > d ? base - d : 1;
}

sq_time_t
sq_time(sq_time_t when, int64_t delta)
{
	bool forever;
	if (when == SQ_TIME_FOREVER)
		return SQ_TIME_FOREVER;
	if (when == SQ_WALLTIME_NOW)
		when = SQ_TIME_WALL_FLAG | _sq_wall_ns();
	if (when & SQ_TIME_WALL_FLAG) {
		sq_time_t t = _sq_time_offset(when & ~SQ_TIME_WALL_FLAG, delta,
				&forever);
		return forever ? SQ_TIME_FOREVER : (t | SQ_TIME_WALL_FLAG);
	}
	if (when == SQ_TIME_NOW)
		when = _sq_monotonic_ns(); /* as libdispatch: "now" becomes a time */
	return _sq_time_offset(when, delta, &forever);
}

sq_time_t
sq_walltime(const struct timespec *when, int64_t delta)
{
	uint64_t base;
	if (when == NULL) {
		base = _sq_wall_ns();
	} else {
		if (when->tv_sec < 0)
			base = 0;
		else if ((uint64_t)when->tv_sec > SQ_TIME_MAX_NS / NSEC_PER_SEC)
			return SQ_TIME_FOREVER;
		else
			base = (uint64_t)when->tv_sec * NSEC_PER_SEC
					+ (uint64_t)when->tv_nsec;
	}
	bool forever;
	sq_time_t t = _sq_time_offset(base, delta, &forever);
	return forever ? SQ_TIME_FOREVER : (t | SQ_TIME_WALL_FLAG);
}

uint64_t
sq_time_nanoseconds_until(sq_time_t when)
{
	if (when == SQ_TIME_FOREVER)
		return UINT64_MAX;
	if (when == SQ_TIME_NOW)
		return 0;
	uint64_t now;
	if (when == SQ_WALLTIME_NOW)
		return 0;
	if (when & SQ_TIME_WALL_FLAG) {
		when &= ~SQ_TIME_WALL_FLAG;
		now = _sq_wall_ns();
	} else {
		now = _sq_monotonic_ns();
	}
	return when > now ? when - now : 0;
}
