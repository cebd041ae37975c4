/*
 * SwiftQueues benchmarks — quality of service against the toolchain's
 * libdispatch, through the same _f (function pointer) calls and the same
 * QoS class values (libdispatch accepts 0x21, 0x19, 0x15, 0x11, 0x09 in
 * dispatch_get_global_queue on Linux):
 *
 *   qos inversion: sync          a serial queue S targeting the BACKGROUND
 *                                global queue holds 20 tasks of 1 ms CPU
 *                                each; DEFAULT-class hogs (2 x CPUs tasks
 *                                of 10 ms CPU, resubmitted until the round
 *                                ends) keep every CPU busy; then a task on
 *                                the USER_INTERACTIVE global queue calls
 *                                sync(S, empty) and we time that call, from
 *                                the call to its return. Target: ours <=
 *                                0.1 of libdispatch's, p50 and p99.
 *   qos bg batch: UIN latency    requests of 75 us CPU submitted to the
 *                                USER_INITIATED global queue every 2 ms;
 *                                latency = submit to the end of the task.
 *                                Once alone, once with a BACKGROUND batch
 *                                job (4 x CPUs tasks of 20 ms CPU,
 *                                resubmitted) in the same process. Target:
 *                                ours' p99 with the batch <= 1.2 x ours'
 *                                p99 alone; libdispatch's is reported.
 *
 * CPU work is a spin on CLOCK_THREAD_CPUTIME_ID, so preemption stretches
 * it rather than shortening it.
 *
 * Both experiments interleave the two sides at a fine grain (one inversion
 * round of each, alternately; one request series of each, alternately) so
 * they see the same machine. They run once, in the rows' setup, and the
 * rows' run functions report the figures they found (bench_report_exact,
 * in microseconds: the "ns/op" columns hold us) with one counted round, so
 * results.json carries p50 / p99 per side and the ratio ours / theirs.
 * The with / without ratios of the batch rows and the details (mean, max,
 * samples) are printed after the table and written to qos.json next to
 * the bench binary, with the load average around each experiment: other
 * processes' CPU use shows in every latency here.
 *
 * Run only these rows:  build/bench/bench qos
 *                       make -C Benchmarks ROOT=$PWD run FILTER=qos
 * Env: BENCH_QOS_INV_ROUNDS (default 16) inversion rounds per side (but
 *      none after the 12th once the row has run 15 s),
 *      BENCH_QOS_REQ_SERIES (default 6) request series per side and phase,
 *      BENCH_QOS_REQ_N (default 125) requests per series.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "dispatch_compat.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <swiftqueues.h>

enum { OURS = 0, THEIRS = 1 };

#define US 1000ull
#define MS 1000000ull

/* libdispatch's QoS class values (qos_class_t), which Linux headers may
 * not define. */
#define D_QOS_USER_INTERACTIVE 0x21
#define D_QOS_USER_INITIATED 0x19
#define D_QOS_DEFAULT 0x15
#define D_QOS_BACKGROUND 0x09

/* ---- helpers ------------------------------------------------------------- */

static uint64_t
thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Burns `ns` of this thread's CPU time. */
static void
cpu_spin(uint64_t ns)
{
	uint64_t start = thread_cpu_ns();
	while (thread_cpu_ns() - start < ns)
		bench_clobber();
}

static unsigned
usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

static void
sleep_until(uint64_t mono)
{
	struct timespec ts = { (time_t)(mono / 1000000000ull),
		(long)(mono % 1000000000ull) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)
			== EINTR) {
	}
}

static unsigned
env_unsigned(const char *name, unsigned def, unsigned lo, unsigned hi)
{
	const char *s = getenv(name);
	char *end;
	if (s == NULL || *s == '\0')
		return def;
	unsigned long v = strtoul(s, &end, 10);
	if (*end != '\0' || v < lo || v > hi)
		bench_fail("%s=%s: want a whole number in [%u, %u]", name, s,
				lo, hi);
	return (unsigned)v;
}

/* The two sides behind one interface: queues and groups as void *. */
static void *
global_queue(int side, long qos)
{
	if (side == OURS)
		return sq_get_global_queue(qos, 0);
	return dispatch_get_global_queue(qos, 0);
}

static void
side_async(int side, void *q, void *ctx, void (*fn)(void *))
{
	if (side == OURS)
		sq_async_f(q, ctx, fn);
	else
		dispatch_async_f(q, ctx, fn);
}

static void
side_group_async(int side, void *g, void *q, void *ctx, void (*fn)(void *))
{
	if (side == OURS)
		sq_group_async_f(g, q, ctx, fn);
	else
		dispatch_group_async_f(g, q, ctx, fn);
}

static void *
side_group_create(int side)
{
	if (side == OURS)
		return sq_group_create();
	return dispatch_group_create();
}

static void
side_group_wait_release(int side, void *g)
{
	if (side == OURS) {
		if (sq_group_wait(g, sq_time(SQ_TIME_NOW, 60 * (int64_t)
				1000000000)) != 0)
			bench_fail("qos: sq group wait timed out");
		sq_release(g);
	} else {
		if (dispatch_group_wait(g, dispatch_time(DISPATCH_TIME_NOW,
				60 * (int64_t)1000000000)) != 0)
			bench_fail("qos: dispatch group wait timed out");
		dispatch_release(g);
	}
}

/* ---- samples and statistics ---------------------------------------------- */

struct stats {
	double p50, p99, mean, max; /* us */
	size_t n;
};

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* p50 = s[n / 2], p99 = s[n * 99 / 100] of the sorted samples (ns in, us
 * out), as bench_sources.c counts them. */
static struct stats
stats_of(const uint64_t *v, size_t n)
{
	struct stats st = { 0, 0, 0, 0, n };
	if (n == 0)
		return st;
	uint64_t *s = malloc(n * sizeof(*s));
	if (s == NULL)
		bench_fail("out of memory");
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_u64);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)s[i];
	st.mean = sum / (double)n / 1e3;
	st.p50 = (double)s[n / 2] / 1e3;
	st.p99 = (double)s[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 1e3;
	st.max = (double)s[n - 1] / 1e3;
	free(s);
	return st;
}

static void print_summary(void);

/* The 1-minute load average, to judge the machine the figures came from
 * (other processes' CPU use shows in every latency here). */
static double
loadavg1(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f != NULL) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

/* Wall time and load averages around each experiment. */
struct span {
	double seconds, load_before, load_after;
};

static void
span_begin(struct span *sp)
{
	sp->load_before = loadavg1();
	sp->seconds = (double)bench_mono_ns() / 1e9;
}

static void
span_end(struct span *sp)
{
	sp->seconds = (double)bench_mono_ns() / 1e9 - sp->seconds;
	sp->load_after = loadavg1();
}

static void
summary_at_exit(void)
{
	static bool armed;
	if (!armed) {
		armed = true;
		atexit(print_summary);
	}
}

/* ==== 1. Inversion: a USER_INTERACTIVE sync onto a BACKGROUND serial queue
 * ========================================================================== */

#define INV_TASKS 20
#define INV_TASK_NS (1 * MS)
#define INV_HOG_NS (10 * MS)
#define INV_MAX_ROUNDS 200
#define INV_MIN_ROUNDS 12
#define INV_SOFT_LIMIT_S 15.0

static struct {
	int side;
	void *serial;          /* S: sq_queue_t or dispatch_queue_t */
	void *hogs;            /* the hogs' group */
	void *default_q;
	atomic_bool running;   /* the hogs resubmit themselves while set */
	atomic_uint hogs_started;
	atomic_uint done;      /* S's tasks run */
	unsigned done_at_call; /* S's tasks run when sync was called */
	unsigned on_caller;    /* S's tasks run on the sync caller's thread */
	pid_t caller_tid;
	unsigned seen_in_sync; /* S's tasks run when the sync block ran */
	unsigned caller_qos;   /* ours: sq_qos_class_self() of the caller */
	uint64_t latency;
	sem_t finished;
} inv;

/* Every round's figures, per side. */
static uint64_t inv_lat[2][INV_MAX_ROUNDS];
static unsigned inv_before[2][INV_MAX_ROUNDS];
static unsigned inv_on_caller[2][INV_MAX_ROUNDS];
static unsigned inv_rounds;
static bool inv_ran;
static unsigned inv_bad_qos;
static struct span inv_span;

static void
inv_hog(void *ctx)
{
	if (!atomic_load_explicit(&inv.running, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&inv.hogs_started, 1, memory_order_relaxed);
	cpu_spin(INV_HOG_NS);
	if (atomic_load_explicit(&inv.running, memory_order_relaxed))
		side_group_async(inv.side, inv.hogs, inv.default_q, ctx,
				inv_hog);
}

static void
inv_task(void *ctx)
{
	cpu_spin(INV_TASK_NS);
	if (gettid() == __atomic_load_n(&inv.caller_tid, __ATOMIC_ACQUIRE))
		inv.on_caller++; /* S is serial: one task at a time */
	atomic_fetch_add_explicit(&inv.done, 1, memory_order_release);
}

static void
inv_sync_block(void *ctx)
{
	/* Empty but for a look: everything queued on S before it ran. */
	inv.seen_in_sync = atomic_load_explicit(&inv.done,
			memory_order_acquire);
}

/* On the USER_INTERACTIVE global queue. */
static void
inv_caller(void *ctx)
{
	if (inv.side == OURS)
		inv.caller_qos = sq_qos_class_self();
	__atomic_store_n(&inv.caller_tid, gettid(), __ATOMIC_RELEASE);
	inv.done_at_call = atomic_load(&inv.done);
	uint64_t t0 = bench_mono_ns();
	if (inv.side == OURS)
		sq_sync_f(inv.serial, NULL, inv_sync_block);
	else
		dispatch_sync_f(inv.serial, NULL, inv_sync_block);
	inv.latency = bench_mono_ns() - t0;
	__atomic_store_n(&inv.caller_tid, 0, __ATOMIC_RELEASE);
	sem_post(&inv.finished);
}

static void
inv_round(int side, unsigned round)
{
	unsigned cpus = usable_cpus();
	unsigned hogs = 2 * cpus;

	memset(&inv, 0, sizeof(inv));
	inv.side = side;
	sem_init(&inv.finished, 0, 0);
	inv.default_q = global_queue(side, D_QOS_DEFAULT);
	if (side == OURS)
		inv.serial = sq_queue_create_with_target("bench.qos.bg", NULL,
				sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND,
				0));
	else
		inv.serial = dispatch_queue_create_with_target("bench.qos.bg",
				NULL, dispatch_get_global_queue(
				D_QOS_BACKGROUND, 0));
	inv.hogs = side_group_create(side);

	/* The hogs first, until every CPU runs one. */
	atomic_store(&inv.running, true);
	for (unsigned i = 0; i < hogs; i++)
		side_group_async(side, inv.hogs, inv.default_q, NULL, inv_hog);
	uint64_t give_up = bench_mono_ns() + 2000 * MS;
	while (atomic_load(&inv.hogs_started) < cpus) {
		if (bench_mono_ns() > give_up)
			bench_fail("qos inversion: %u of %u hogs started",
					atomic_load(&inv.hogs_started), cpus);
		usleep(200);
	}
	usleep(2000);

	/* S's backlog, then the USER_INTERACTIVE caller. */
	for (unsigned i = 0; i < INV_TASKS; i++)
		side_async(side, inv.serial, NULL, inv_task);
	side_async(side, global_queue(side, D_QOS_USER_INTERACTIVE), NULL,
			inv_caller);
	bench_sem_wait(&inv.finished, 60000, "qos inversion: sync");

	atomic_store(&inv.running, false);
	side_group_wait_release(side, inv.hogs);
	if (inv.seen_in_sync != INV_TASKS)
		bench_fail("qos inversion (%s): the sync ran after %u of S's "
				"%u tasks", side == OURS ? "ours" : "theirs",
				inv.seen_in_sync, INV_TASKS);
	if (side == OURS) {
		if (inv.caller_qos != SQ_QOS_CLASS_USER_INTERACTIVE)
			inv_bad_qos++;
		sq_release(inv.serial);
	} else {
		dispatch_release(inv.serial);
	}
	sem_destroy(&inv.finished);
	inv_lat[side][round] = inv.latency;
	inv_before[side][round] = inv.done_at_call;
	inv_on_caller[side][round] = inv.on_caller;
}

static void
inv_run_all(void)
{
	if (inv_ran)
		return;
	inv_ran = true;
	summary_at_exit();
	inv_rounds = env_unsigned("BENCH_QOS_INV_ROUNDS", 16, 1,
			INV_MAX_ROUNDS);
	span_begin(&inv_span);
	uint64_t start = bench_mono_ns();
	/* One unrecorded round of each to start the threads. */
	inv_round(OURS, 0);
	inv_round(THEIRS, 0);
	for (unsigned r = 0; r < inv_rounds; r++) {
		/* On a loaded machine libdispatch's rounds stretch (its
		 * BACKGROUND thread's share of a CPU shrinks): past 15 s, no
		 * round beyond the 12th. */
		if (r >= INV_MIN_ROUNDS && bench_mono_ns() - start >
				(uint64_t)(INV_SOFT_LIMIT_S * 1e9)) {
			inv_rounds = r;
			break;
		}
		int first = r % 2 ? THEIRS : OURS;
		inv_round(first, r);
		inv_round(!first, r);
	}
	span_end(&inv_span);
}

static void
inv_setup(void)
{
	inv_run_all();
	bench_limit_rounds(1);
}

static void
inv_p50_ours(size_t ops)
{
	bench_report_exact(stats_of(inv_lat[OURS], inv_rounds).p50);
}

static void
inv_p50_theirs(size_t ops)
{
	bench_report_exact(stats_of(inv_lat[THEIRS], inv_rounds).p50);
}

static void
inv_p99_ours(size_t ops)
{
	bench_report_exact(stats_of(inv_lat[OURS], inv_rounds).p99);
}

static void
inv_p99_theirs(size_t ops)
{
	bench_report_exact(stats_of(inv_lat[THEIRS], inv_rounds).p99);
}

/* ==== 2. A BACKGROUND batch job next to USER_INITIATED requests
 * ========================================================================== */

#define REQ_INTERVAL_NS (2 * MS)
#define REQ_WORK_NS (75 * US)
#define REQ_MAX_N 5000
#define REQ_MAX_SERIES 50
#define BATCH_TASK_NS (20 * MS)

enum { ALONE = 0, BATCH = 1 };

struct req {
	uint64_t submit;
	uint64_t *latency;
};

static struct {
	int side;
	unsigned n;
	struct req reqs[REQ_MAX_N];
	uint64_t lat[REQ_MAX_N];
	atomic_uint left;
	sem_t done;
	/* the batch */
	void *batch;
	void *bg_q;
	atomic_bool batch_running;
	atomic_uint batch_started;
	atomic_ulong batch_runs;
} rq;

/* Every request's latency, per side and phase, over every series. */
static uint64_t *req_lat[2][2];
static size_t req_count[2][2];
static unsigned long req_batch_runs[2];
static bool req_ran;
static unsigned req_series, req_n;
static struct span req_span;

static void
req_task(void *ctx)
{
	struct req *r = ctx;
	cpu_spin(REQ_WORK_NS);
	*r->latency = bench_mono_ns() - r->submit;
	if (atomic_fetch_sub_explicit(&rq.left, 1, memory_order_acq_rel) == 1)
		sem_post(&rq.done);
}

static void
batch_task(void *ctx)
{
	if (!atomic_load_explicit(&rq.batch_running, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&rq.batch_started, 1, memory_order_relaxed);
	cpu_spin(BATCH_TASK_NS);
	atomic_fetch_add_explicit(&rq.batch_runs, 1, memory_order_relaxed);
	if (atomic_load_explicit(&rq.batch_running, memory_order_relaxed))
		side_group_async(rq.side, rq.batch, rq.bg_q, ctx, batch_task);
}

static void
req_series_run(int side, int phase)
{
	unsigned cpus = usable_cpus();
	void *uin = global_queue(side, D_QOS_USER_INITIATED);

	rq.side = side;
	rq.n = req_n;
	atomic_store(&rq.left, req_n);
	sem_init(&rq.done, 0, 0);
	if (phase == BATCH) {
		rq.bg_q = global_queue(side, D_QOS_BACKGROUND);
		rq.batch = side_group_create(side);
		atomic_store(&rq.batch_running, true);
		atomic_store(&rq.batch_started, 0);
		atomic_store(&rq.batch_runs, 0);
		for (unsigned i = 0; i < 4 * cpus; i++)
			side_group_async(side, rq.batch, rq.bg_q, NULL,
					batch_task);
		uint64_t give_up = bench_mono_ns() + 2000 * MS;
		while (atomic_load(&rq.batch_started) < cpus) {
			if (bench_mono_ns() > give_up)
				bench_fail("qos batch: %u of %u batch tasks "
						"started", atomic_load(
						&rq.batch_started), cpus);
			usleep(200);
		}
		usleep(20000); /* settled: every CPU in the batch */
	}

	uint64_t next = bench_mono_ns() + REQ_INTERVAL_NS;
	for (unsigned i = 0; i < req_n; i++) {
		sleep_until(next);
		next += REQ_INTERVAL_NS;
		struct req *r = &rq.reqs[i];
		r->latency = &rq.lat[i];
		r->submit = bench_mono_ns();
		side_async(side, uin, r, req_task);
	}
	bench_sem_wait(&rq.done, 60000, "qos batch: requests");
	sem_destroy(&rq.done);

	if (phase == BATCH) {
		atomic_store(&rq.batch_running, false);
		side_group_wait_release(side, rq.batch);
		req_batch_runs[side] += atomic_load(&rq.batch_runs);
	}
	memcpy(req_lat[side][phase] + req_count[side][phase], rq.lat,
			req_n * sizeof(uint64_t));
	req_count[side][phase] += req_n;
}

static void
req_run_all(void)
{
	if (req_ran)
		return;
	req_ran = true;
	summary_at_exit();
	req_series = env_unsigned("BENCH_QOS_REQ_SERIES", 6, 1,
			REQ_MAX_SERIES);
	req_n = env_unsigned("BENCH_QOS_REQ_N", 125, 10, REQ_MAX_N);
	for (int s = 0; s < 2; s++)
		for (int p = 0; p < 2; p++) {
			req_lat[s][p] = calloc((size_t)req_series * req_n,
					sizeof(uint64_t));
			if (req_lat[s][p] == NULL)
				bench_fail("out of memory");
		}
	span_begin(&req_span);
	/* A short unrecorded series of each to start the threads. */
	unsigned n = req_n;
	req_n = 20;
	for (int s = 0; s < 2; s++) {
		req_series_run(s, ALONE);
		req_count[s][ALONE] = 0;
	}
	req_n = n;
	/* Short series, the sides and the phases in turn, so that a burst
	 * of load from outside lands on both sides and both phases alike
	 * rather than on one series of one. */
	for (unsigned i = 0; i < req_series; i++) {
		int first = i % 2 ? THEIRS : OURS;
		int phase = (i / 2) % 2 ? BATCH : ALONE;
		req_series_run(first, phase);
		req_series_run(!first, phase);
		req_series_run(first, !phase);
		req_series_run(!first, !phase);
	}
	span_end(&req_span);
}

static void
req_setup(void)
{
	req_run_all();
	bench_limit_rounds(1);
}

static double
req_p99(int side, int phase)
{
	return stats_of(req_lat[side][phase], req_count[side][phase]).p99;
}

static void
req_alone_ours(size_t ops)
{
	bench_report_exact(req_p99(OURS, ALONE));
}

static void
req_alone_theirs(size_t ops)
{
	bench_report_exact(req_p99(THEIRS, ALONE));
}

static void
req_batch_ours(size_t ops)
{
	bench_report_exact(req_p99(OURS, BATCH));
}

static void
req_batch_theirs(size_t ops)
{
	bench_report_exact(req_p99(THEIRS, BATCH));
}

/* ---- the summary after the table ----------------------------------------- */

static const char *
met(double ratio, double target)
{
	return target <= 0 ? "-" : ratio <= target ? "yes" : "NO";
}

static void
print_summary(void)
{
	char exe[PATH_MAX], path[PATH_MAX + 32];
	FILE *f = NULL;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len > 0) {
		exe[len] = '\0';
		snprintf(path, sizeof(path), "%s/qos.json", dirname(exe));
		f = fopen(path, "w");
	}
	if (f != NULL)
		fprintf(f, "{\n  \"unit\": \"us\",\n  \"theirs\": "
				"\"libdispatch\",\n  \"cpus\": %u", usable_cpus());

	if (inv_ran && inv_rounds > 0) {
		struct stats st[2];
		double before[2] = { 0, 0 }, on_caller[2] = { 0, 0 };
		for (int s = 0; s < 2; s++) {
			st[s] = stats_of(inv_lat[s], inv_rounds);
			for (unsigned r = 0; r < inv_rounds; r++) {
				before[s] += inv_before[s][r];
				on_caller[s] += inv_on_caller[s][r];
			}
			before[s] /= inv_rounds;
			on_caller[s] /= inv_rounds;
		}
		printf("\nQoS inversion: USER_INTERACTIVE sync onto a "
				"BACKGROUND serial queue holding %d x %llu ms, "
				"%u x %llu ms DEFAULT hogs (%u CPUs), %u rounds "
				"per side; us.\n\n", INV_TASKS,
				(unsigned long long)(INV_TASK_NS / MS),
				2 * usable_cpus(), (unsigned long long)
				(INV_HOG_NS / MS), usable_cpus(), inv_rounds);
		printf("%-26s %10s %10s %7s %7s %4s\n", "sync latency (us)",
				"ours", "theirs", "ratio", "target", "met");
		const char *names[] = { "p50", "p99", "mean", "max" };
		double o[] = { st[0].p50, st[0].p99, st[0].mean, st[0].max };
		double t[] = { st[1].p50, st[1].p99, st[1].mean, st[1].max };
		double tg[] = { 0.1, 0.1, 0, 0 };
		for (int i = 0; i < 4; i++) {
			double ratio = t[i] > 0 ? o[i] / t[i] : 0;
			char target[16] = "-";
			if (tg[i] > 0)
				snprintf(target, sizeof(target), "<= %.2f",
						tg[i]);
			printf("%-26s %10.0f %10.0f %7.3f %7s %4s\n", names[i],
					o[i], t[i], ratio, target,
					met(ratio, tg[i]));
		}
		printf("%-26s %10.1f %10.1f  (of %d, when sync was called)\n",
				"S tasks already run", before[0], before[1],
				INV_TASKS);
		printf("%-26s %10.1f %10.1f  (of %d)\n",
				"S tasks run by the caller", on_caller[0],
				on_caller[1], INV_TASKS);
		printf("(%.1f s for both sides; load average %.2f before, "
				"%.2f after)\n", inv_span.seconds,
				inv_span.load_before, inv_span.load_after);
		if (inv_bad_qos)
			printf("(ours: sq_qos_class_self() on the "
					"USER_INTERACTIVE queue was not "
					"USER_INTERACTIVE in %u rounds)\n",
					inv_bad_qos);
		if (f != NULL) {
			fprintf(f, ",\n  \"inversion\": {\"rounds\": %u, "
					"\"tasks\": %d, \"task_us\": %llu, "
					"\"hogs\": %u, \"hog_us\": %llu, "
					"\"seconds\": %.1f, \"loadavg\": "
					"[%.2f, %.2f]",
					inv_rounds, INV_TASKS,
					(unsigned long long)(INV_TASK_NS / US),
					2 * usable_cpus(), (unsigned long long)
					(INV_HOG_NS / US), inv_span.seconds,
					inv_span.load_before,
					inv_span.load_after);
			for (int s = 0; s < 2; s++) {
				fprintf(f, ",\n    \"%s\": {\"p50\": %.1f, "
						"\"p99\": %.1f, \"mean\": %.1f, "
						"\"max\": %.1f, \"tasks_run_"
						"before_sync\": %.2f, \"tasks_run_"
						"by_caller\": %.2f, \"samples\": [",
						s == OURS ? "ours" : "theirs",
						st[s].p50, st[s].p99, st[s].mean,
						st[s].max, before[s],
						on_caller[s]);
				for (unsigned r = 0; r < inv_rounds; r++)
					fprintf(f, "%s%.1f", r ? ", " : "",
							(double)inv_lat[s][r] /
							1e3);
				fprintf(f, "]}");
			}
			double r50 = st[1].p50 > 0 ? st[0].p50 / st[1].p50 : 0;
			double r99 = st[1].p99 > 0 ? st[0].p99 / st[1].p99 : 0;
			fprintf(f, ",\n    \"ratio_p50\": %.4f, \"ratio_p99\": "
					"%.4f, \"target\": 0.1, \"met\": %s}",
					r50, r99, r50 <= 0.1 && r99 <= 0.1 ?
					"true" : "false");
		}
	}

	if (req_ran) {
		struct stats st[2][2];
		for (int s = 0; s < 2; s++)
			for (int p = 0; p < 2; p++)
				st[s][p] = stats_of(req_lat[s][p],
						req_count[s][p]);
		printf("\nQoS requests: %llu us CPU at USER_INITIATED every "
				"%llu ms, %u x %u per side and phase; batch: "
				"%u x %llu ms CPU at BACKGROUND, resubmitted; "
				"submit-to-finish latency in us.\n\n",
				(unsigned long long)(REQ_WORK_NS / US),
				(unsigned long long)(REQ_INTERVAL_NS / MS),
				req_series, req_n, 4 * usable_cpus(),
				(unsigned long long)(BATCH_TASK_NS / MS));
		printf("%-12s %9s %9s %9s %9s %9s %7s %7s %4s\n", "side",
				"p50 alone", "p99 alone", "p50 batch",
				"p99 batch", "max batch", "p99 x", "target",
				"met");
		for (int s = 0; s < 2; s++) {
			double x = st[s][ALONE].p99 > 0 ? st[s][BATCH].p99 /
					st[s][ALONE].p99 : 0;
			double tg = s == OURS ? 1.2 : 0;
			char target[16] = "-";
			if (tg > 0)
				snprintf(target, sizeof(target), "<= %.1f", tg);
			printf("%-12s %9.0f %9.0f %9.0f %9.0f %9.0f %7.2f %7s "
					"%4s\n", s == OURS ? "ours" :
					"libdispatch", st[s][ALONE].p50,
					st[s][ALONE].p99, st[s][BATCH].p50,
					st[s][BATCH].p99, st[s][BATCH].max, x,
					target, met(x, tg));
		}
		printf("%-12s %9s %9s %9s %9.2f  (batch tasks done: ours %lu"
				", libdispatch %lu)\n", "ours/theirs", "", "",
				"", st[1][BATCH].p99 > 0 ? st[0][BATCH].p99 /
				st[1][BATCH].p99 : 0, req_batch_runs[OURS],
				req_batch_runs[THEIRS]);
		printf("(%.1f s for both sides; load average %.2f before, "
				"%.2f after)\n", req_span.seconds,
				req_span.load_before, req_span.load_after);
		if (f != NULL) {
			fprintf(f, ",\n  \"background_batch\": {\"requests\": "
					"%zu, \"request_us\": %llu, "
					"\"interval_us\": %llu, \"batch_tasks\": "
					"%u, \"batch_task_us\": %llu, "
					"\"seconds\": %.1f, \"loadavg\": "
					"[%.2f, %.2f]",
					req_count[0][0], (unsigned long long)
					(REQ_WORK_NS / US), (unsigned long long)
					(REQ_INTERVAL_NS / US), 4 *
					usable_cpus(), (unsigned long long)
					(BATCH_TASK_NS / US), req_span.seconds,
					req_span.load_before,
					req_span.load_after);
			for (int s = 0; s < 2; s++) {
				double x = st[s][ALONE].p99 > 0 ?
						st[s][BATCH].p99 /
						st[s][ALONE].p99 : 0;
				fprintf(f, ",\n    \"%s\": {\"alone\": {\"p50\": "
						"%.1f, \"p99\": %.1f, \"mean\": "
						"%.1f, \"max\": %.1f}, \"batch\": "
						"{\"p50\": %.1f, \"p99\": %.1f, "
						"\"mean\": %.1f, \"max\": %.1f}, "
						"\"p99_with_over_without\": %.4f, "
						"\"batch_tasks_done\": %lu",
						s == OURS ? "ours" : "theirs",
						st[s][ALONE].p50, st[s][ALONE].p99,
						st[s][ALONE].mean, st[s][ALONE].max,
						st[s][BATCH].p50, st[s][BATCH].p99,
						st[s][BATCH].mean, st[s][BATCH].max,
						x, req_batch_runs[s]);
				if (s == OURS)
					fprintf(f, ", \"target\": 1.2, "
							"\"met\": %s", x <= 1.2
							? "true" : "false");
				fprintf(f, "}");
			}
			fprintf(f, "}");
		}
	}
	if (f != NULL) {
		fprintf(f, "\n}\n");
		fclose(f);
		printf("QoS details: %s\n", path);
	}
}

/* ---- the table ----------------------------------------------------------- */

const bench_scenario_t bench_qos[] = {
	{ "qos inversion: sync p50, us", 1,
	  inv_p50_ours, inv_p50_theirs,
	  "libdispatch", 0.1, inv_setup, NULL },
	{ "qos inversion: sync p99, us", 1,
	  inv_p99_ours, inv_p99_theirs,
	  "libdispatch", 0.1, inv_setup, NULL },
	{ "qos bg batch: UIN p99 alone, us", 1,
	  req_alone_ours, req_alone_theirs,
	  "libdispatch", 0, req_setup, NULL },
	{ "qos bg batch: UIN p99 +batch, us", 1,
	  req_batch_ours, req_batch_theirs,
	  "libdispatch", 0, req_setup, NULL },
	{ NULL, 0, NULL, NULL, NULL, 0, NULL, NULL }
};
