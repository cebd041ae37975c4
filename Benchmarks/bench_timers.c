/*
 * SwiftQueues benchmarks — what precise timers cost in CPU, against the
 * toolchain's libdispatch:
 *
 *   timer CPU, N afters / s   N sq_after_f / dispatch_after_f (N = 3,000,
 *                             10,000, 1,000,000) onto the default global
 *                             queue, due at random over the next second
 *                             (the same deadlines for both sides); the CPU
 *                             time of the whole process (getrusage, user +
 *                             sys) from the first call to the last handler,
 *                             in us. Target: at most libdispatch's.
 *
 * The row carries the CPU us through the harness clock (bench_report_value,
 * which waits that many ns: large enough to be timed to within a fraction of
 * a per cent), so the "ns/op" columns hold microseconds. Ours are precise (no leeway);
 * libdispatch's dispatch_after takes an implicit leeway (a tenth of the
 * delay, so up to 100 ms here) and merges wake-ups: its lateness is far
 * larger. How late the handlers ran, per side, is printed after the table.
 * The 1,000,000 row runs 3 counted rounds (each side takes seconds).
 */
#define _GNU_SOURCE
#include "harness.h"
#include "dispatch_compat.h"

#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <swiftqueues.h>

enum { OURS = 0, THEIRS = 1 };

#define SPREAD_NS 1000000000ull

static double
process_cpu_ms(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
			(double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

static struct {
	uint64_t *deadline;  /* per after, absolute CLOCK_MONOTONIC ns */
	int64_t *late;       /* per after, ns */
	size_t n;
	atomic_size_t left;
	sem_t done;
} spread;

/* Lateness of every counted run, per density and side: p50 / p99 in us. */
#define DENSITIES 3
static const size_t densities[DENSITIES] = { 3000, 10000, 1000000 };
static double late_p50[DENSITIES][2], late_p99[DENSITIES][2];
static unsigned late_runs[DENSITIES][2];

static void
spread_landed(void *ctx)
{
	size_t i = (size_t)(uintptr_t)ctx;
	spread.late[i] = (int64_t)(bench_mono_ns() - spread.deadline[i]);
	if (atomic_fetch_sub_explicit(&spread.left, 1,
			memory_order_acq_rel) == 1)
		sem_post(&spread.done);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void print_summary(void);

/* One run: `ops` is only what the harness divides the reported figure by
 * (BENCH_SCALE does not change the densities). */
static void
spread_run(int side, int density, size_t ops)
{
	size_t n = densities[density];
	if (spread.n != n) {
		free(spread.deadline);
		free(spread.late);
		spread.deadline = malloc(n * sizeof(uint64_t));
		spread.late = malloc(n * sizeof(int64_t));
		if (spread.deadline == NULL || spread.late == NULL)
			bench_fail("out of memory");
		spread.n = n;
	}
	/* The same random offsets every run, for both sides. */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	atomic_store(&spread.left, n);
	sem_init(&spread.done, 0, 0);
	double cpu0 = process_cpu_ms();
	uint64_t base = bench_mono_ns();
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		spread.deadline[i] = base + x % SPREAD_NS;
	}
	for (size_t i = 0; i < n; i++) {
		if (side == OURS)
			sq_after_f(spread.deadline[i], sq_get_global_queue(
					SQ_QUEUE_PRIORITY_DEFAULT, 0),
					(void *)(uintptr_t)i, spread_landed);
		else
			dispatch_after_f((dispatch_time_t)spread.deadline[i],
					dispatch_get_global_queue(0, 0),
					(void *)(uintptr_t)i, spread_landed);
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 120;
	while (sem_timedwait(&spread.done, &ts) != 0)
		if (errno != EINTR)
			bench_fail("timer CPU: %zu afters not run",
					atomic_load(&spread.left));
	double cpu_us = (process_cpu_ms() - cpu0) * 1e3;
	sem_destroy(&spread.done);

	qsort(spread.late, n, sizeof(int64_t), cmp_i64);
	if (late_runs[density][side]++ > 0) { /* not the warm-up run */
		unsigned k = late_runs[density][side] - 1;
		/* Running means of the per-run percentiles. */
		late_p50[density][side] += ((double)spread.late[n / 2] / 1e3 -
				late_p50[density][side]) / k;
		late_p99[density][side] += ((double)spread.late[n * 99 / 100] /
				1e3 - late_p99[density][side]) / k;
	}
	bench_report_value(cpu_us, ops);
}

static void spread_3k_ours(size_t ops) { spread_run(OURS, 0, ops); }
static void spread_3k_theirs(size_t ops) { spread_run(THEIRS, 0, ops); }
static void spread_10k_ours(size_t ops) { spread_run(OURS, 1, ops); }
static void spread_10k_theirs(size_t ops) { spread_run(THEIRS, 1, ops); }
static void spread_1m_ours(size_t ops) { spread_run(OURS, 2, ops); }
static void spread_1m_theirs(size_t ops) { spread_run(THEIRS, 2, ops); }

static void
spread_setup(void)
{
	static bool armed;
	if (!armed) {
		armed = true;
		atexit(print_summary);
	}
}

static void
spread_1m_setup(void)
{
	spread_setup();
	bench_limit_rounds(3);
}

static void
print_summary(void)
{
	bool any = false;
	for (int d = 0; d < DENSITIES; d++)
		any |= late_runs[d][OURS] > 1 && late_runs[d][THEIRS] > 1;
	if (!any)
		return;
	printf("\nTimer CPU rows: how late the handlers ran, in us (mean of "
			"the counted runs' percentiles; libdispatch's afters "
			"have a leeway of a tenth of their delay).\n\n");
	printf("%-32s %10s %10s %10s %10s\n", "afters per second", "ours p50",
			"ours p99", "theirs p50", "theirs p99");
	for (int d = 0; d < DENSITIES; d++) {
		if (late_runs[d][OURS] <= 1 || late_runs[d][THEIRS] <= 1)
			continue;
		printf("%-32zu %10.1f %10.1f %10.1f %10.1f\n", densities[d],
				late_p50[d][OURS], late_p99[d][OURS],
				late_p50[d][THEIRS], late_p99[d][THEIRS]);
	}
}

const bench_scenario_t bench_timers[] = {
	{ "timer CPU, 3k afters/s, us", 1,
	  spread_3k_ours, spread_3k_theirs,
	  "libdispatch", 1.0, spread_setup, NULL },
	{ "timer CPU, 10k afters/s, us", 1,
	  spread_10k_ours, spread_10k_theirs,
	  "libdispatch", 1.0, spread_setup, NULL },
	{ "timer CPU, 1M afters/s, us", 1,
	  spread_1m_ours, spread_1m_theirs,
	  "libdispatch", 1.0, spread_1m_setup, NULL },
	{ NULL, 0, NULL, NULL, NULL, 0, NULL, NULL }
};
