/*
 * The guarantee checker's runtime: SwiftQueues (this header), or the
 * toolchain's libdispatch (guarantees_dispatch.h, under -DGQ_DISPATCH),
 * which maps the sq_* names the checker uses onto dispatch_*. What the two
 * do not share is here: draining the main queue while the driver waits, the
 * pool's statistics and thread cap, whether waits help (the liveness
 * family, guarantees_liveness.h), and whether the precedence family runs
 * by default (guarantees_priority.h).
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

/* A wait forever for a group or a work item runs the members its task
 * queued on global queues itself (docs/ARCHITECTURE.md, "Waiting helps"):
 * the liveness family (guarantees_liveness.h) does not count it against
 * the thread cap. */
#define GQ_WAIT_HELPS 1

/* Liveness shapes skipped unless SQT_OPS names them (bits of 1 << LV_*),
 * and the dependent waits a program may make, at most: none skipped, the
 * family's own bound (guarantees_liveness.h). */
#define GQ_LIVE_SKIP 0u
#define GQ_LIVE_DEPENDENT_CAP GQ_LIVE_MAX_DEPENDENT
#define GQ_LIVE_SKIP_WHY ""

/* The precedence family (guarantees_priority.h): tasks may ask their
 * class (sq_qos_class_self), and the family runs by default. */
#define GQ_HAS_QOS_SELF 1
#define GQ_PRIO_SKIP 0
#define GQ_PRIO_SKIP_WHY ""

/* The pool's thread cap (SQ_MAX_THREADS) and its live threads now. */
static inline int
gq_thread_cap(void)
{
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	return (int)st.max_threads;
}

static inline unsigned
gq_pool_live(void)
{
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	return st.live;
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
