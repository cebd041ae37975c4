/*
 * Helpers shared by the group, work item, semaphore and source tests:
 * sleeping, deadlines in milliseconds, an atomic read of a counter the
 * runtime's threads bump, and small function-pointer tasks.
 */
#ifndef SQTEST_WAIT_HELPERS_H
#define SQTEST_WAIT_HELPERS_H

#include "sqtest.h"

/* Sleeps `ms` milliseconds, resuming after signals. */
static inline void
msleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The deadline `ms` milliseconds from now. */
static inline sq_time_t
in_ms(long ms)
{
	return sq_time(SQ_TIME_NOW, ms * (int64_t)NSEC_PER_MSEC);
}

static inline sq_queue_t
global_queue(void)
{
	return sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
}

/* A sequentially consistent read of a counter other threads update with
 * __atomic builtins. */
static inline int32_t
load32(int32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

/* A task: signals the semaphore it is given. */
static inline void
signal_semaphore(void *ctx)
{
	sq_semaphore_signal(ctx);
}

#endif
