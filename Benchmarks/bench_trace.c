/*
 * SwiftQueues benchmarks — what recording a trace costs: the same work
 * with a trace being recorded ("ours") and without ("theirs"), so the
 * difference is the recording's cost per task. The target is an added
 * cost, not a ratio: at most 100 ns per task for async enqueue + drain on
 * a serial queue. The teardown also reports the trace's size per million
 * such tasks.
 *
 * What tracing costs while it is compiled in but off is measured by
 * comparing the whole table against a build without it (`make
 * bench-trace-cost`, which builds the library with -DSQ_NO_TRACE).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <swiftqueues.h>

#define NOINLINE __attribute__((noinline))

static sq_queue_t queue;
static uint64_t count; /* touched only on the queue */
static char trace_file[256];
static bool traceable = true; /* false in a build without tracing */

static NOINLINE void
bump(void *ctx)
{
	(*(uint64_t *)ctx)++;
}

static NOINLINE void
noop(void *ctx)
{
	(void)ctx;
}

static void
setup(void)
{
	queue = sq_queue_create("bench.trace", NULL);
	snprintf(trace_file, sizeof(trace_file), "%s/sq-bench-trace-%d.json",
			getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			(int)getpid());
	if (sq_trace_start(trace_file) == 0)
		sq_trace_stop();
	else if (errno == ENOTSUP)
		traceable = false; /* -DSQ_NO_TRACE: both sides untraced */
	else
		bench_fail("sq_trace_start %s: %s", trace_file, strerror(errno));
}

/* Starts recording (not timed), or stops and writes (not timed). */
static void
recording(bool on)
{
	if (!traceable)
		return;
	if (on) {
		if (sq_trace_start(trace_file) != 0)
			bench_fail("sq_trace_start: %s", strerror(errno));
		bench_timer_restart();
	} else {
		bench_timer_stop();
		if (sq_trace_stop() != 0)
			bench_fail("sq_trace_stop: %s", strerror(errno));
		/* The file goes at once: its pages, never written back,
		 * go with it. Kept, they were written to disk during the
		 * rounds that followed, and took the CPU from them. */
		unlink(trace_file);
	}
}

static void
async_serial(size_t ops)
{
	sq_sync_f(queue, NULL, noop);
	count = 0;
	for (size_t i = 0; i < ops; i++)
		sq_async_f(queue, &count, bump);
	sq_sync_f(queue, NULL, noop); /* the drain */
	if (count != ops)
		bench_fail("traced serial queue ran %llu of %zu",
				(unsigned long long)count, ops);
}

static void
async_serial_traced(size_t ops)
{
	recording(true);
	async_serial(ops);
	recording(false);
}

static void
sync_idle(size_t ops)
{
	uint64_t n = 0;
	for (size_t i = 0; i < ops; i++)
		sq_sync_f(queue, &n, bump);
	if (n != ops)
		bench_fail("sync ran %llu of %zu", (unsigned long long)n, ops);
}

static void
sync_idle_traced(size_t ops)
{
	recording(true);
	sync_idle(ops);
	recording(false);
}

static void
teardown(void)
{
	sq_release(queue);
	unlink(trace_file);
}

/* The same, and the trace's size for a known number of async tasks, with
 * rings that hold them all, scaled to a million. */
static void
teardown_with_size(void)
{
	sq_release(queue);
	queue = sq_queue_create("bench.trace", NULL);
	const size_t tasks = 100000;
	if (traceable) {
		setenv("SQ_TRACE_BUFFER_KB", "32768", 1);
		if (sq_trace_start(trace_file) != 0)
			bench_fail("sq_trace_start: %s", strerror(errno));
		unsetenv("SQ_TRACE_BUFFER_KB");
		async_serial(tasks);
		if (sq_trace_stop() != 0)
			bench_fail("sq_trace_stop: %s", strerror(errno));
		struct stat st;
		if (stat(trace_file, &st) == 0)
			printf("\nTrace size: %.1f MB of JSON per million async "
					"tasks (%lld bytes for %zu; in memory, "
					"96 bytes of ring per task)\n",
					(double)st.st_size / (double)tasks,
					(long long)st.st_size, tasks);
	}
	unlink(trace_file);
	sq_release(queue);
}

const bench_scenario_t bench_trace[] = {
	{ "tracing on: async serial", 500000,
	  async_serial_traced, async_serial,
	  "tracing off", -100, setup, teardown_with_size },
	{ "tracing on: sync idle serial", 2000000,
	  sync_idle_traced, sync_idle,
	  "tracing off", 0, setup, teardown },
	{ NULL, 0, NULL, NULL, NULL, 0, NULL, NULL }
};
