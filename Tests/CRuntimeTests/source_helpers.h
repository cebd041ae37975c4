/*
 * Helpers shared by the source tests (test_source_*.c): milliseconds in
 * nanoseconds, a bounded semaphore wait, a pause long enough for the event
 * loop to have delivered whatever it was going to (longer under the
 * sanitizers); wait_helpers.h brings the default global queue and more.
 */
#ifndef SQTEST_SOURCE_HELPERS_H
#define SQTEST_SOURCE_HELPERS_H

#include "queue_helpers.h"
#include "wait_helpers.h"

#include <stdatomic.h>

#define MS 1000000ull

/* Waits at most `ms` for `s`; true if it was signalled. */
static inline bool
sem_wait_ms(sq_semaphore_t s, unsigned ms)
{
	return sq_semaphore_wait(s, sq_time(SQ_TIME_NOW,
			(int64_t)ms * 1000000)) == 0;
}

/* Lets pending deliveries happen (or show that none will). */
static inline void
settle(void)
{
	sqt_sleep_ms(SQT_SCALE(60, 150));
}

#endif
