/*
 * Instruction counts of the hot paths, for scripts/trace-cost.sh: the same
 * operations as the benchmark table, each run `n` times between a reset and
 * a dump of Valgrind's callgrind counters, so callgrind reports exactly the
 * instructions of that many operations (every thread's). Built once against
 * the library with tracing compiled in and once against one built with
 * -DSQ_NO_TRACE; "--record" records a trace meanwhile. Timing on a shared
 * machine is noise; instruction counts are not.
 *
 *   valgrind --tool=callgrind trace_cost [--record]
 */
#define _GNU_SOURCE
#include <swiftqueues.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_DUMP_STATS_AT
#define CALLGRIND_ZERO_STATS ((void)0)
#define CALLGRIND_DUMP_STATS_AT(name) ((void)(name))
#endif

static uint64_t counter;

static void
bump(void *ctx)
{
	(*(uint64_t *)ctx)++;
}

static void
noop(void *ctx)
{
	(void)ctx;
}

static sq_queue_t a, b;
static sq_semaphore_t done;
static int hops_left;

static void hop_b(void *ctx);

static void
hop_a(void *ctx)
{
	if (--hops_left <= 0)
		sq_semaphore_signal(done);
	else
		sq_async_f(b, ctx, hop_b);
}

static void
hop_b(void *ctx)
{
	sq_async_f(a, ctx, hop_a);
}

static void
apply_body(void *ctx, size_t i)
{
	(void)ctx;
	(void)i;
}

static void
source_handler(void *ctx)
{
	sq_semaphore_signal(done);
}

/* Until every worker is parked (not running, not looking for work) and
 * asleep. */
static void
wait_pool_parked(void)
{
	for (;;) {
		sq_pool_stats_t st;
		sq_pool_stats(&st);
		if (st.idle == st.live && st.searching == 0)
			break;
		sched_yield();
	}
	/* A worker is counted idle when it joins the idle list, a few
	 * steps before it sleeps: let it get there. */
	usleep(100);
}

#define MEASURE(name, n, body)                                                 \
	do {                                                                   \
		CALLGRIND_ZERO_STATS;                                          \
		body;                                                          \
		CALLGRIND_DUMP_STATS_AT(name " x" #n);                         \
	} while (0)

int
main(int argc, char **argv)
{
	bool record = argc > 1 && strcmp(argv[1], "--record") == 0;
	char path[64];
	snprintf(path, sizeof(path), "/tmp/sq-trace-cost-%d.json",
			(int)getpid());
	if (record && sq_trace_start(path) != 0) {
		perror("sq_trace_start");
		return 1;
	}
	a = sq_queue_create("cost.a", NULL);
	b = sq_queue_create("cost.b", NULL);
	done = sq_semaphore_create(0);
	sq_queue_t global = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_group_t group = sq_group_create();
	sq_queue_t conc = sq_queue_create("cost.concurrent", SQ_QUEUE_CONCURRENT);
	sq_source_t src = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, a);
	sq_source_set_event_handler_f(src, source_handler);
	sq_resume(src);

	/* Warm-up: threads started, caches filled. */
	for (int i = 0; i < 1000; i++)
		sq_async_f(a, &counter, bump);
	sq_sync_f(a, NULL, noop);

	/* The queue is suspended while the tasks are submitted and resumed
	 * for the drain, so the worker runs them all in one go: a worker that
	 * keeps running out of work spins for a while (a time budget), which
	 * would add a different count each run. */
	MEASURE("async serial enqueue+drain", 20000, {
		sq_suspend(a);
		for (int i = 0; i < 20000; i++)
			sq_async_f(a, &counter, bump);
		sq_resume(a);
		sq_sync_f(a, NULL, noop);
	});
	MEASURE("sync idle serial queue", 20000, {
		for (int i = 0; i < 20000; i++)
			sq_sync_f(a, &counter, bump);
	});
	MEASURE("async concurrent + group wait", 20000, {
		sq_suspend(conc);
		for (int i = 0; i < 20000; i++)
			sq_group_async_f(group, conc, NULL, noop);
		sq_resume(conc);
		sq_group_wait(group, SQ_TIME_FOREVER);
	});
	MEASURE("ping-pong 2 serial queues", 10000, {
		hops_left = 10000;
		sq_async_f(a, NULL, hop_a);
		sq_semaphore_wait(done, SQ_TIME_FOREVER);
	});
	MEASURE("group enter+leave", 100000, {
		for (int i = 0; i < 100000; i++) {
			sq_group_enter(group);
			sq_group_leave(group);
		}
	});
	MEASURE("semaphore signal+wait", 100000, {
		for (int i = 0; i < 100000; i++) {
			sq_semaphore_signal(done);
			sq_semaphore_wait(done, SQ_TIME_FOREVER);
		}
	});
	MEASURE("apply empty iterations", 100000, {
		sq_apply_f(100000, global, NULL, apply_body);
	});
	/* Each merge finds the worker parked: one that finds it still
	 * spinning after the last handler skips the wake-up, about 60
	 * instructions, so the count would depend on the timing.
	 * scripts/trace-cost.sh counts this row inside the merge and the
	 * queue's drain only, not in the wait for the park. */
	MEASURE("source merge + handler", 2000, {
		for (int i = 0; i < 2000; i++) {
			wait_pool_parked();
			sq_source_merge_data(src, 1);
			sq_semaphore_wait(done, SQ_TIME_FOREVER);
		}
	});

	sq_source_cancel(src);
	sq_release(src);
	sq_release(group);
	if (record) {
		sq_trace_stop();
		unlink(path);
	}
	return 0;
}
