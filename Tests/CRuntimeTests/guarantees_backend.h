/*
 * The guarantee checker's runtime: SwiftQueues (this header), or the
 * toolchain's libdispatch (guarantees_dispatch.h, under -DGQ_DISPATCH),
 * which maps the sq_* names the checker uses onto dispatch_*. What the two
 * do not share is here: draining the main queue while the driver waits, and
 * the pool's statistics.
 */
#ifndef SQTEST_GUARANTEES_BACKEND_H
#define SQTEST_GUARANTEES_BACKEND_H

#ifdef GQ_DISPATCH
#include "guarantees_dispatch.h"
#else
#include <swiftqueues.h>

#define GQ_BACKEND "SwiftQueues"
#define GQ_HAS_WIDTH 1

/* A work item cancelled before it started is finished at once: its
 * waiters return and its notifications go out (libdispatch: when its
 * execution is next attempted). */
#define GQ_CANCEL_AT_ONCE 1

/* A channel's cleanup handler runs after the last handler call of every
 * operation of the channel (libdispatch: once the descriptor is let go,
 * which can come before calls still queued). */
#define GQ_CLEANUP_AFTER_HANDLERS 1

#define gq_item_retain sq_retain
#define gq_item_release sq_release

/* Runs main-queue work on the calling (main) thread for up to `us`
 * microseconds, or until condition(ctx). */
static inline void
gq_main_run(unsigned us, bool (*condition)(void *), void *ctx)
{
	sq_main_queue_run_until(sq_time(SQ_TIME_NOW, (int64_t)us * 1000),
			condition, ctx);
}

/* The pool's safety net must never have fired (see test_pool_matrix). */
static inline unsigned long long
gq_net_firings(void)
{
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	return (unsigned long long)st.net_firings;
}
#endif

#endif /* SQTEST_GUARANTEES_BACKEND_H */
