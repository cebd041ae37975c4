/*
 * Time values: sq_time / sq_walltime arithmetic, clocks, saturation.
 */
#include "sqtest.h"

static uint64_t
mono_ns(void)
{
	return sqt_now_ns();
}

static uint64_t
wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

#define WITHIN(value, target, slack)                                           \
	((value) + (slack) >= (target) && (value) <= (target) + (slack))

static void
test_monotonic(void)
{
	uint64_t before = mono_ns();
	sq_time_t t = sq_time(SQ_TIME_NOW, NSEC_PER_SEC);
	uint64_t after = mono_ns();
	/* About one second ahead of the monotonic clock. */
	CHECK(t >= before + NSEC_PER_SEC);
	CHECK(t <= after + NSEC_PER_SEC);
	CHECK(!(t & SQ_TIME_WALL_FLAG));
	CHECK(WITHIN(sq_time_nanoseconds_until(t), NSEC_PER_SEC,
			100 * NSEC_PER_MSEC));

	/* "Now" plus nothing is the current time, not the NOW sentinel. */
	sq_time_t now = sq_time(SQ_TIME_NOW, 0);
	CHECK(now != SQ_TIME_NOW && now >= before && now <= mono_ns());
	CHECK_EQ(sq_time(t, 5), t + 5);
	CHECK_EQ(sq_time(t, -(int64_t)NSEC_PER_SEC), t - NSEC_PER_SEC);
	CHECK_EQ(sq_time_nanoseconds_until(sq_time(SQ_TIME_NOW, -1000)), 0);
	CHECK_EQ(sq_time_nanoseconds_until(SQ_TIME_NOW), 0);
	CHECK_EQ(sq_time_nanoseconds_until(SQ_TIME_FOREVER), (long long)UINT64_MAX);
}

static void
test_saturation(void)
{
	CHECK_EQ(sq_time(SQ_TIME_FOREVER, 1), (long long)SQ_TIME_FOREVER);
	CHECK_EQ(sq_time(SQ_TIME_FOREVER, -1), (long long)SQ_TIME_FOREVER);
	CHECK_EQ(sq_time(SQ_TIME_NOW, INT64_MAX), (long long)SQ_TIME_FOREVER);
	sq_time_t t = sq_time(SQ_TIME_NOW, NSEC_PER_SEC);
	CHECK_EQ(sq_time(t, INT64_MAX), (long long)SQ_TIME_FOREVER);
	CHECK_EQ(sq_time(t, INT64_MAX - (int64_t)t), (long long)SQ_TIME_FOREVER);
	/* Far into the past clamps to the clock's earliest instant, never NOW
	 * and never a wrap into the wall-clock range. */
	CHECK_EQ(sq_time(t, INT64_MIN), 1);
	CHECK_EQ(sq_time(SQ_TIME_NOW, INT64_MIN), 1);
	sq_time_t w = sq_walltime(NULL, 0);
	CHECK_EQ(sq_time(w, INT64_MIN), (long long)(SQ_TIME_WALL_FLAG | 1));
	CHECK_EQ(sq_time(w, INT64_MAX), (long long)SQ_TIME_FOREVER);
	struct timespec huge = { .tv_sec = INT64_MAX / 2, .tv_nsec = 0 };
	CHECK_EQ(sq_walltime(&huge, 0), (long long)SQ_TIME_FOREVER);
}

static void
test_walltime(void)
{
	uint64_t now = wall_ns();
	sq_time_t w = sq_walltime(NULL, 0);
	CHECK(w & SQ_TIME_WALL_FLAG);
	CHECK(WITHIN(w & ~SQ_TIME_WALL_FLAG, now, 100 * NSEC_PER_MSEC));

	struct timespec ts = { .tv_sec = 1700000000, .tv_nsec = 5 };
	sq_time_t fixed = sq_walltime(&ts, 10);
	CHECK_EQ(fixed, (long long)(SQ_TIME_WALL_FLAG |
			(1700000000ull * NSEC_PER_SEC + 15)));
	CHECK_EQ(sq_time(fixed, 85), (long long)(fixed + 85));
	/* A wall-clock time in the past is due now. */
	CHECK_EQ(sq_time_nanoseconds_until(fixed), 0);

	sq_time_t soon = sq_time(SQ_WALLTIME_NOW, 2 * (int64_t)NSEC_PER_SEC);
	CHECK(soon & SQ_TIME_WALL_FLAG);
	CHECK(WITHIN(sq_time_nanoseconds_until(soon), 2 * NSEC_PER_SEC,
			100 * NSEC_PER_MSEC));
	/* The two clocks are different: a wall time is not a monotonic one. */
	CHECK((sq_time(SQ_TIME_NOW, 1) & SQ_TIME_WALL_FLAG) == 0);
}

int
main(void)
{
	test_monotonic();
	test_saturation();
	test_walltime();
	return sqt_finish("time");
}
