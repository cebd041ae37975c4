/*
 * SwiftQueues benchmarks — sources and timers against the toolchain's
 * libdispatch, through the same _f (function pointer) calls:
 *
 *   after 1-20 ms lateness    200 sq_after_f / dispatch_after_f per run,
 *                             deadlines 1-20 ms away; how late each handler
 *                             starts.
 *   timer 1 ms p99 lateness   a 1 ms repeating timer, leeway 0, 300 ticks
 *                             per run; how late each handler starts after
 *                             its tick (target: <= 0.2, docs/PERFORMANCE.md).
 *   pipe write -> read handler  one byte written, the read source's handler
 *                             reads it and wakes the writer: a round trip.
 *   after x100k: schedule     100,000 pending afters: the cost of one call
 *                             (they all fire afterwards, outside the clock).
 *
 * The two latency rows are not a time per operation: the run measures the
 * latency and reports it through the harness clock (it restarts the clock,
 * waits the measured time, stops it), so the table and results.json carry
 * it as "ns/op" with the usual medians and ratio. Their full distributions
 * (mean, p50, p99, max over every counted round, 2,000+ samples per side)
 * and the RSS growth of 100,000 pending afters are printed after the table
 * and written to sources.json next to the bench binary (same shape as
 * results.json, unit "us").
 */
#define _GNU_SOURCE
#include "harness.h"
#include "dispatch_compat.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <swiftqueues.h>

#define MS 1000000ull
#define US 1000ull

enum { OURS = 0, THEIRS = 1 };

/* libdispatch's DISPATCH_TIME_NOW-based times are CLOCK_MONOTONIC ns on
 * Linux, as sq_time's are: one absolute deadline serves both sides. */
static dispatch_time_t
d_time(uint64_t mono)
{
	return (dispatch_time_t)mono;
}

/* ---- samples and statistics ------------------------------------------------- */

struct samples {
	int64_t *v;
	size_t n, cap;
};

static void
samples_add(struct samples *s, const int64_t *v, size_t n)
{
	if (s->n + n > s->cap) {
		size_t cap = s->cap ? s->cap : 1024;
		while (cap < s->n + n)
			cap *= 2;
		int64_t *grown = realloc(s->v, cap * sizeof(*grown));
		if (grown == NULL)
			bench_fail("out of memory");
		s->v = grown;
		s->cap = cap;
	}
	memcpy(s->v + s->n, v, n * sizeof(*v));
	s->n += n;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

struct stats {
	double mean, p50, p99, max;
	size_t n;
};

static struct stats
stats_of(const int64_t *v, size_t n)
{
	struct stats st = { 0, 0, 0, 0, n };
	if (n == 0)
		return st;
	int64_t *s = malloc(n * sizeof(*s));
	if (s == NULL)
		bench_fail("out of memory");
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_i64);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)s[i];
	st.mean = sum / (double)n;
	st.p50 = (double)s[n / 2];
	st.p99 = (double)s[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
	st.max = (double)s[n - 1];
	free(s);
	return st;
}

/* Every counted run's samples, per scenario and side. */
static struct samples after_all[2], timer_all[2];
static size_t timer_coalesced[2], timer_calls[2];
static long rss_growth_kib[2] = { -1, -1 };
/* The harness runs each side once to warm up, then the counted rounds. */
static unsigned after_runs[2], timer_runs[2];

static void print_summary(void);

static void
summary_at_exit(void)
{
	static bool armed;
	if (!armed) {
		armed = true;
		atexit(print_summary);
	}
}

/* ---- after 1-20 ms lateness -------------------------------------------------- */

#define AFTER_N 200

struct after_run {
	uint64_t deadline[AFTER_N];
	int64_t late[AFTER_N];
	atomic_int left;
	sem_t done;
};

struct after_ctx {
	struct after_run *run;
	int i;
};

static struct after_ctx after_ctxs[AFTER_N];

static void
after_landed(void *ctx)
{
	struct after_ctx *c = ctx;
	c->run->late[c->i] = (int64_t)(bench_mono_ns() - c->run->deadline[c->i]);
	if (atomic_fetch_sub(&c->run->left, 1) == 1)
		sem_post(&c->run->done);
}

static void
after_lateness(int side, size_t ops)
{
	static struct after_run r;
	atomic_store(&r.left, AFTER_N);
	sem_init(&r.done, 0, 0);
	uint64_t now = bench_mono_ns();
	for (int i = 0; i < AFTER_N; i++) {
		/* 1..20 ms, ten per millisecond, 37 us apart. */
		uint64_t delay = (1 + (uint64_t)(i % 20)) * MS +
				(uint64_t)(i / 20) * 37 * US;
		r.deadline[i] = now + delay;
		after_ctxs[i] = (struct after_ctx){ &r, i };
	}
	for (int i = 0; i < AFTER_N; i++) {
		if (side == OURS)
			sq_after_f(r.deadline[i], sq_get_global_queue(
					SQ_QUEUE_PRIORITY_DEFAULT, 0),
					&after_ctxs[i], after_landed);
		else
			dispatch_after_f(d_time(r.deadline[i]),
					dispatch_get_global_queue(0, 0),
					&after_ctxs[i], after_landed);
	}
	bench_sem_wait(&r.done, 30000, "after lateness");
	sem_destroy(&r.done);
	if (after_runs[side]++ > 0)
		samples_add(&after_all[side], r.late, AFTER_N);
	struct stats st = stats_of(r.late, AFTER_N);
	bench_report_value(st.mean, ops);
}

static void
after_ours(size_t ops)
{
	after_lateness(OURS, ops);
}

static void
after_theirs(size_t ops)
{
	after_lateness(THEIRS, ops);
}

static void
after_setup(void)
{
	summary_at_exit();
}

/* ---- 1 ms timer, leeway 0 ------------------------------------------------------ */

#define TICKS 300

struct timer_run {
	int side;
	void *src;      /* sq_source_t or dispatch_source_t */
	uint64_t start; /* the first tick */
	uint64_t fires;
	size_t calls;
	int64_t late[TICKS + 1];
	sem_t done, cancelled;
};

static sq_queue_t timer_q_ours;
static dispatch_queue_t timer_q_theirs;

static void
tick(void *ctx)
{
	struct timer_run *r = ctx;
	uint64_t now = bench_mono_ns();
	unsigned long d = r->side == OURS ? sq_source_get_data(r->src)
			: dispatch_source_get_data(r->src);
	if (r->fires >= TICKS)
		return;
	r->fires += d;
	/* Late relative to the latest tick this call stands for. */
	uint64_t due = r->start + (r->fires - 1) * MS;
	if (r->calls < TICKS)
		r->late[r->calls++] = (int64_t)(now - due);
	if (r->fires >= TICKS)
		sem_post(&r->done);
}

static void
tick_cancelled(void *ctx)
{
	sem_post(&((struct timer_run *)ctx)->cancelled);
}

static void
timer_lateness(int side, size_t ops)
{
	static struct timer_run r;
	memset(&r, 0, sizeof(r));
	r.side = side;
	sem_init(&r.done, 0, 0);
	sem_init(&r.cancelled, 0, 0);
	r.start = bench_mono_ns() + 1 * MS;
	if (side == OURS) {
		sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0,
				timer_q_ours);
		r.src = s;
		sq_set_context(s, &r);
		sq_source_set_event_handler_f(s, tick);
		sq_source_set_cancel_handler_f(s, tick_cancelled);
		sq_source_set_timer(s, r.start, 1 * MS, 0);
		sq_activate(s);
		bench_sem_wait(&r.done, 30000, "sq timer");
		sq_source_cancel(s);
		bench_sem_wait(&r.cancelled, 30000, "sq timer cancel");
		sq_release(s);
	} else {
		dispatch_source_t s = dispatch_source_create(
				DISPATCH_SOURCE_TYPE_TIMER, 0, 0,
				timer_q_theirs);
		r.src = s;
		dispatch_set_context(s, &r);
		dispatch_source_set_event_handler_f(s, tick);
		dispatch_source_set_cancel_handler_f(s, tick_cancelled);
		dispatch_source_set_timer(s, d_time(r.start), 1 * MS, 0);
		dispatch_resume(s);
		bench_sem_wait(&r.done, 30000, "dispatch timer");
		dispatch_source_cancel(s);
		bench_sem_wait(&r.cancelled, 30000, "dispatch timer cancel");
		dispatch_release(s);
	}
	sem_destroy(&r.done);
	sem_destroy(&r.cancelled);
	if (timer_runs[side]++ > 0) {
		samples_add(&timer_all[side], r.late, r.calls);
		timer_calls[side] += r.calls;
		timer_coalesced[side] += r.fires - r.calls;
	}
	struct stats st = stats_of(r.late, r.calls);
	bench_report_value(st.p99, ops);
}

static void
timer_ours(size_t ops)
{
	timer_lateness(OURS, ops);
}

static void
timer_theirs(size_t ops)
{
	timer_lateness(THEIRS, ops);
}

static void
timer_setup(void)
{
	summary_at_exit();
	timer_q_ours = sq_queue_create("bench.timer", NULL);
	timer_q_theirs = dispatch_queue_create("bench.timer", NULL);
}

static void
timer_teardown(void)
{
	sq_release(timer_q_ours);
	dispatch_release(timer_q_theirs);
}

/* ---- pipe write -> read handler ------------------------------------------------ */

struct pipe_side {
	int fds[2];
	void *src;
	void *queue;
	sem_t got, cancelled;
	uint64_t bytes;
};

static struct pipe_side pipes[2];

static void
pipe_read(void *ctx)
{
	struct pipe_side *p = ctx;
	char buf[64];
	ssize_t n;
	while ((n = read(p->fds[0], buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			sem_post(&p->got);
		p->bytes += (uint64_t)n;
	}
}

static void
pipe_cancelled(void *ctx)
{
	sem_post(&((struct pipe_side *)ctx)->cancelled);
}

static void
pipe_setup(void)
{
	for (int side = 0; side < 2; side++) {
		struct pipe_side *p = &pipes[side];
		if (pipe(p->fds) != 0)
			bench_fail("pipe: %s", strerror(errno));
		fcntl(p->fds[0], F_SETFL, O_NONBLOCK);
		sem_init(&p->got, 0, 0);
		sem_init(&p->cancelled, 0, 0);
		if (side == OURS) {
			p->queue = sq_queue_create("bench.pipe", NULL);
			sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_READ,
					(uintptr_t)p->fds[0], 0, p->queue);
			if (s == NULL)
				bench_fail("sq read source: %s",
						strerror(errno));
			p->src = s;
			sq_set_context(s, p);
			sq_source_set_event_handler_f(s, pipe_read);
			sq_source_set_cancel_handler_f(s, pipe_cancelled);
			sq_activate(s);
		} else {
			p->queue = dispatch_queue_create("bench.pipe", NULL);
			dispatch_source_t s = dispatch_source_create(
					DISPATCH_SOURCE_TYPE_READ,
					(uintptr_t)p->fds[0], 0, p->queue);
			p->src = s;
			dispatch_set_context(s, p);
			dispatch_source_set_event_handler_f(s, pipe_read);
			dispatch_source_set_cancel_handler_f(s, pipe_cancelled);
			dispatch_resume(s);
		}
	}
}

static void
pipe_roundtrips(int side, size_t ops)
{
	struct pipe_side *p = &pipes[side];
	for (size_t i = 0; i < ops; i++) {
		if (write(p->fds[1], "x", 1) != 1)
			bench_fail("pipe write: %s", strerror(errno));
		bench_sem_wait(&p->got, 10000, "pipe read handler");
	}
}

static void
pipe_ours(size_t ops)
{
	pipe_roundtrips(OURS, ops);
}

static void
pipe_theirs(size_t ops)
{
	pipe_roundtrips(THEIRS, ops);
}

static void
pipe_teardown(void)
{
	sq_source_cancel(pipes[OURS].src);
	dispatch_source_cancel(pipes[THEIRS].src);
	for (int side = 0; side < 2; side++) {
		struct pipe_side *p = &pipes[side];
		bench_sem_wait(&p->cancelled, 10000, "pipe cancel");
		if (side == OURS) {
			sq_release(p->src);
			sq_release(p->queue);
		} else {
			dispatch_release(p->src);
			dispatch_release(p->queue);
		}
		close(p->fds[0]);
		close(p->fds[1]);
		sem_destroy(&p->got);
		sem_destroy(&p->cancelled);
	}
}

/* ---- 100,000 pending afters ---------------------------------------------------- */

static atomic_size_t pending_left;
static sem_t pending_done;

static void
pending_fired(void *ctx)
{
	if (atomic_fetch_sub(&pending_left, 1) == 1)
		sem_post(&pending_done);
}

/* Schedules `ops` afters 50-70 ms away; only the scheduling is timed. */
static void
schedule_pending(int side, size_t ops, bool timed)
{
	atomic_store(&pending_left, ops);
	uint64_t base = bench_mono_ns() + 50 * MS;
	sq_queue_t sq_g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	dispatch_queue_t d_g = dispatch_get_global_queue(0, 0);
	if (timed)
		bench_timer_restart();
	if (side == OURS) {
		for (size_t i = 0; i < ops; i++)
			sq_after_f(base + (i % 1000) * 20 * US, sq_g, NULL,
					pending_fired);
	} else {
		for (size_t i = 0; i < ops; i++)
			dispatch_after_f(d_time(base + (i % 1000) * 20 * US),
					d_g, NULL, pending_fired);
	}
	if (timed)
		bench_timer_stop();
}

static void
pending_wait(void)
{
	bench_sem_wait(&pending_done, 60000, "pending afters");
}

static long
rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

#define PENDING_OPS 100000

/*
 * The footprint of 100,000 pending afters is measured in a fresh process
 * per side (this binary again, stopped in a constructor before the harness
 * starts), so allocations of earlier scenarios do not hide it: warm up with
 * one after, then VmRSS before and after scheduling 100,000 afters 10 s
 * away. The child prints the growth in KiB and exits without waiting.
 */
#define RSS_ENV "SQ_BENCH_SOURCES_RSS"

__attribute__((constructor)) static void
rss_child(void)
{
	const char *side = getenv(RSS_ENV);
	if (side == NULL)
		return;
	int s = strcmp(side, "ours") == 0 ? OURS : THEIRS;
	sem_init(&pending_done, 0, 0);
	atomic_store(&pending_left, 1);
	if (s == OURS)
		sq_after_f(bench_mono_ns() + 1 * MS, sq_get_global_queue(
				SQ_QUEUE_PRIORITY_DEFAULT, 0), NULL,
				pending_fired);
	else
		dispatch_after_f(d_time(bench_mono_ns() + 1 * MS),
				dispatch_get_global_queue(0, 0), NULL,
				pending_fired);
	bench_sem_wait(&pending_done, 10000, "rss warm-up");
	long before = rss_kib();
	uint64_t base = bench_mono_ns() + 10000 * MS;
	for (size_t i = 0; i < PENDING_OPS; i++) {
		if (s == OURS)
			sq_after_f(base + i * US, sq_get_global_queue(
					SQ_QUEUE_PRIORITY_DEFAULT, 0), NULL,
					pending_fired);
		else
			dispatch_after_f(d_time(base + i * US),
					dispatch_get_global_queue(0, 0), NULL,
					pending_fired);
	}
	/* Let the manager thread take them all in. */
	usleep(200000);
	long after = rss_kib();
	printf("%ld\n", before < 0 || after < 0 ? -1 : after - before);
	fflush(stdout);
	_exit(0);
}

static long
rss_in_child(const char *side)
{
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		return -1;
	exe[len] = '\0';
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof(cmd), "%s=%s '%s' -l", RSS_ENV, side, exe);
	FILE *p = popen(cmd, "r");
	if (p == NULL)
		return -1;
	long kib = -1;
	if (fscanf(p, "%ld", &kib) != 1)
		kib = -1;
	pclose(p);
	return kib;
}

static void
pending_setup(void)
{
	summary_at_exit();
	sem_init(&pending_done, 0, 0);
	rss_growth_kib[OURS] = rss_in_child("ours");
	rss_growth_kib[THEIRS] = rss_in_child("theirs");
}

static void
pending_ours(size_t ops)
{
	schedule_pending(OURS, ops, true);
	pending_wait();
}

static void
pending_theirs(size_t ops)
{
	schedule_pending(THEIRS, ops, true);
	pending_wait();
}

static void
pending_teardown(void)
{
	sem_destroy(&pending_done);
}

/* ---- the summary after the table ----------------------------------------------- */

struct summary_row {
	const char *name;
	double ours, theirs;
	double target; /* 0: none */
};

static void
print_summary(void)
{
	struct stats a[2], t[2];
	for (int s = 0; s < 2; s++) {
		a[s] = stats_of(after_all[s].v, after_all[s].n);
		t[s] = stats_of(timer_all[s].v, timer_all[s].n);
	}
	struct summary_row rows[16];
	int n = 0;
	if (a[OURS].n && a[THEIRS].n) {
		rows[n++] = (struct summary_row){ "after 1-20 ms lateness mean",
			a[0].mean / 1e3, a[1].mean / 1e3, 0 };
		rows[n++] = (struct summary_row){ "after 1-20 ms lateness p50",
			a[0].p50 / 1e3, a[1].p50 / 1e3, 1.0 };
		rows[n++] = (struct summary_row){ "after 1-20 ms lateness p99",
			a[0].p99 / 1e3, a[1].p99 / 1e3, 0.2 };
		rows[n++] = (struct summary_row){ "after 1-20 ms lateness max",
			a[0].max / 1e3, a[1].max / 1e3, 0 };
	}
	if (t[OURS].n && t[THEIRS].n) {
		rows[n++] = (struct summary_row){ "timer 1 ms lateness p50",
			t[0].p50 / 1e3, t[1].p50 / 1e3, 1.0 };
		rows[n++] = (struct summary_row){ "timer 1 ms lateness mean",
			t[0].mean / 1e3, t[1].mean / 1e3, 0 };
		rows[n++] = (struct summary_row){ "timer 1 ms lateness p99",
			t[0].p99 / 1e3, t[1].p99 / 1e3, 0.2 };
		rows[n++] = (struct summary_row){ "timer 1 ms lateness max",
			t[0].max / 1e3, t[1].max / 1e3, 0 };
	}
	if (n == 0 && rss_growth_kib[OURS] < 0)
		return;

	printf("\nSources and timers, ours / libdispatch");
	if (n > 0)
		printf(": latency in us over every counted round (after: %zu "
				"/ %zu samples; timer: %zu / %zu ticks handled, "
				"%zu / %zu coalesced)", after_all[0].n,
				after_all[1].n, timer_calls[0], timer_calls[1],
				timer_coalesced[0], timer_coalesced[1]);
	printf(".\n\n");
	printf("%-32s %10s %10s %7s %7s %4s\n", "metric (us)", "ours",
			"theirs", "ratio", "target", "met");
	for (int i = 0; i < n; i++) {
		double ratio = rows[i].theirs > 0 ? rows[i].ours /
				rows[i].theirs : 0;
		char target[16] = "-";
		if (rows[i].target > 0)
			snprintf(target, sizeof(target), "<= %.2f",
					rows[i].target);
		printf("%-32s %10.1f %10.1f %7.2f %7s %4s\n", rows[i].name,
				rows[i].ours, rows[i].theirs, ratio, target,
				rows[i].target > 0 ? (ratio <= rows[i].target
				? "yes" : "NO") : "-");
	}
	if (rss_growth_kib[OURS] >= 0 && rss_growth_kib[THEIRS] >= 0)
		printf("%-32s %10ld %10ld %7.2f %7s %4s  (KiB; %.0f / %.0f "
				"B per after)\n", "100k pending afters: RSS",
				rss_growth_kib[0], rss_growth_kib[1],
				rss_growth_kib[1] > 0 ? (double)rss_growth_kib[0]
				/ (double)rss_growth_kib[1] : 0, "-", "-",
				rss_growth_kib[0] * 1024.0 / PENDING_OPS,
				rss_growth_kib[1] * 1024.0 / PENDING_OPS);

	/* sources.json next to the binary, shaped like results.json. */
	char exe[PATH_MAX], path[PATH_MAX + 32];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		return;
	exe[len] = '\0';
	snprintf(path, sizeof(path), "%s/sources.json", dirname(exe));
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return;
	fprintf(f, "{\n  \"unit\": \"us\",\n  \"ratio\": \"ours / theirs\",\n"
			"  \"theirs\": \"libdispatch\",\n  \"samples\": "
			"{\"after\": [%zu, %zu], \"timer_ticks\": [%zu, %zu], "
			"\"timer_coalesced\": [%zu, %zu]},\n  \"metrics\": [\n",
			after_all[0].n, after_all[1].n, timer_calls[0],
			timer_calls[1], timer_coalesced[0],
			timer_coalesced[1]);
	for (int i = 0; i < n; i++) {
		double ratio = rows[i].theirs > 0 ? rows[i].ours /
				rows[i].theirs : 0;
		fprintf(f, "    {\"name\": \"%s\", \"ours\": %.3f, "
				"\"theirs\": %.3f, \"ratio\": %.4f, ",
				rows[i].name, rows[i].ours, rows[i].theirs,
				ratio);
		if (rows[i].target > 0)
			fprintf(f, "\"target\": %.4f, \"met\": %s}",
					rows[i].target, ratio <= rows[i].target
					? "true" : "false");
		else
			fprintf(f, "\"target\": null, \"met\": null}");
		fprintf(f, ",\n");
	}
	fprintf(f, "    {\"name\": \"100k pending afters: RSS growth\", "
			"\"unit\": \"KiB\", \"ours\": %ld, \"theirs\": %ld, "
			"\"target\": null, \"met\": null}\n  ]\n}\n",
			rss_growth_kib[0], rss_growth_kib[1]);
	fclose(f);
	printf("Sources latency: %s\n", path);
}

/* ---- the table ---------------------------------------------------------------- */

const bench_scenario_t bench_sources[] = {
	{ "after 1-20 ms: mean lateness", 1,
	  after_ours, after_theirs,
	  "libdispatch", 0, after_setup, NULL },
	{ "timer 1 ms leeway 0: p99 late", 1,
	  timer_ours, timer_theirs,
	  "libdispatch", 0.2, timer_setup, timer_teardown },
	{ "pipe write -> read handler", 20000,
	  pipe_ours, pipe_theirs,
	  "libdispatch", 0, pipe_setup, pipe_teardown },
	{ "after x100k pending: schedule", PENDING_OPS,
	  pending_ours, pending_theirs,
	  "libdispatch", 0, pending_setup, pending_teardown },
	{ NULL, 0, NULL, NULL, NULL, 0, NULL, NULL }
};
