/*
 * sq_apply_range_f and sq_apply_range: the ranges are disjoint, non-empty
 * and cover [0, iterations) exactly once, the call returns when all have
 * run, zero iterations call nothing, uneven bodies are shared out (no one
 * thread runs all the costly iterations), nesting runs inline without
 * oversubscribing the pool, serial queues get one call in their own
 * context, a concurrent queue's barrier waits for the loop, the loop
 * finishes while every worker is busy, and misuse aborts with
 * "SwiftQueues: sq_apply_range_f: ...".
 *
 * The behaviour checks run in a child process per pool width
 * (SQ_WORKERS = 1, 2, 4, 8; SQT_RANGE_WIDTHS overrides the list).
 */
#include "queue_helpers.h"

#include <spawn.h>

extern char **environ;

#define WAIT_MS 10000

/* ---- ranges: disjoint, covering, each index once --------------------------- */

#define NMAX 200000

static atomic_uchar hits[NMAX];
static atomic_long range_calls, empty_ranges, out_of_bounds;

static void
record_range(void *ctx, size_t begin, size_t end)
{
	size_t n = (size_t)(uintptr_t)ctx;
	atomic_fetch_add(&range_calls, 1);
	if (begin >= end)
		atomic_fetch_add(&empty_ranges, 1);
	if (end > n || begin > n) {
		atomic_fetch_add(&out_of_bounds, 1);
		return;
	}
	for (size_t i = begin; i < end; i++)
		atomic_fetch_add(&hits[i], 1);
}

static void
reset_ranges(size_t n)
{
	atomic_store(&range_calls, 0);
	atomic_store(&empty_ranges, 0);
	atomic_store(&out_of_bounds, 0);
	for (size_t i = 0; i < n; i++)
		atomic_store(&hits[i], 0);
}

/* Every index in [0, n) hit exactly once. */
static bool
covered_once(size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (atomic_load(&hits[i]) != 1) {
			fprintf(stderr, "  index %zu hit %d times\n", i,
					(int)atomic_load(&hits[i]));
			return false;
		}
	return true;
}

static void
test_covering(void)
{
	sq_queue_t conc = sq_queue_create("com.example.range.concurrent",
			SQ_QUEUE_CONCURRENT);
	sq_queue_t queues[3] = { sq_get_global_queue(0, 0), SQ_APPLY_AUTO,
		conc };
	size_t sizes[] = { 1, 2, 3, 7, 64, 1000, 4097, NMAX };
	for (int q = 0; q < 3; q++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			reset_ranges(n);
			sq_apply_range_f(n, queues[q], (void *)(uintptr_t)n,
					record_range);
			/* immediately after the return */
			CHECK(covered_once(n));
			CHECK_EQ(atomic_load(&empty_ranges), 0);
			CHECK_EQ(atomic_load(&out_of_bounds), 0);
			CHECK(atomic_load(&range_calls) >= 1);
			CHECK(atomic_load(&range_calls) <= (long)n);
		}
	}
	sq_release(conc);

	/* zero iterations: no call, an immediate return */
	reset_ranges(1);
	uint64_t start = sqt_now_ns();
	sq_apply_range_f(0, SQ_APPLY_AUTO, (void *)(uintptr_t)1, record_range);
	CHECK_EQ(atomic_load(&range_calls), 0);
	CHECK(sqt_ms_since(start) < 1000.0);
}

/* A cheap body over many iterations: large ranges, few calls. */
static atomic_ulong cheap_sum;

static void
cheap_range(void *ctx, size_t begin, size_t end)
{
	unsigned long s = 0;
	for (size_t i = begin; i < end; i++)
		s += i;
	atomic_fetch_add(&cheap_sum, s);
	atomic_fetch_add(&range_calls, 1);
}

static void
test_cheap_body(void)
{
	const size_t n = SQT_SCALE(10000000, 1000000);
	atomic_store(&cheap_sum, 0);
	atomic_store(&range_calls, 0);
	sq_apply_range_f(n, SQ_APPLY_AUTO, NULL, cheap_range);
	CHECK_EQ(atomic_load(&cheap_sum), (unsigned long)(n * (n - 1) / 2));
	/* far fewer calls than iterations (a call per index would be n) */
	CHECK(atomic_load(&range_calls) < (long)(n / 100));
}

/* ---- uneven bodies are shared out ------------------------------------------- */

/* The first UNEVEN_HEAVY of UNEVEN_N iterations sleep; the rest are free.
 * Sleeping, not spinning, so a loaded machine's CPUs do not decide who
 * runs them. The heavy ones fit in the first 1/64 of the loop: a runtime
 * that handed out large ranges first would give them all to one thread. */
#define UNEVEN_N 4096
#define UNEVEN_HEAVY 64
#define MAX_THREADS 64

static struct {
	pthread_t thread[MAX_THREADS];
	atomic_int heavy[MAX_THREADS];
	atomic_int nthreads;
	pthread_mutex_t lock;
} uneven = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int
uneven_slot(void)
{
	pthread_t self = pthread_self();
	pthread_mutex_lock(&uneven.lock);
	int n = atomic_load(&uneven.nthreads), i;
	for (i = 0; i < n; i++)
		if (pthread_equal(uneven.thread[i], self))
			break;
	if (i == n && n < MAX_THREADS) {
		uneven.thread[n] = self;
		atomic_store(&uneven.nthreads, n + 1);
	}
	pthread_mutex_unlock(&uneven.lock);
	return i < MAX_THREADS ? i : MAX_THREADS - 1;
}

static void
uneven_range(void *ctx, size_t begin, size_t end)
{
	int slot = uneven_slot();
	for (size_t i = begin; i < end; i++) {
		atomic_fetch_add(&hits[i], 1);
		if (i < UNEVEN_HEAVY) {
			sqt_sleep_us(2000);
			atomic_fetch_add(&uneven.heavy[slot], 1);
		}
	}
}

static void
test_uneven_body(void)
{
	int width = sqt_pool_width();
	atomic_store(&uneven.nthreads, 0);
	for (int i = 0; i < MAX_THREADS; i++)
		atomic_store(&uneven.heavy[i], 0);
	reset_ranges(UNEVEN_N);
	sq_apply_range_f(UNEVEN_N, SQ_APPLY_AUTO, NULL, uneven_range);
	CHECK(covered_once(UNEVEN_N));
	int most = 0, total = 0;
	for (int i = 0; i < atomic_load(&uneven.nthreads); i++) {
		int h = atomic_load(&uneven.heavy[i]);
		total += h;
		most = h > most ? h : most;
	}
	CHECK_EQ(total, UNEVEN_HEAVY);
	if (width > 1) {
		/* ~130 ms of sleeps: the helpers have long started; with a
		 * generous margin, no one thread ran 90% of them. */
		CHECK(most <= UNEVEN_HEAVY * 9 / 10);
		if (most > UNEVEN_HEAVY * 9 / 10)
			fprintf(stderr, "  uneven: one thread ran %d of %d "
					"costly iterations (width %d)\n", most,
					UNEVEN_HEAVY, width);
	}
}

/* ---- nesting ---------------------------------------------------------------- */

static atomic_long nested_count, inner_calls, inner_whole;

static void
level3(void *ctx, size_t begin, size_t end)
{
	atomic_fetch_add(&nested_count, (long)(end - begin));
}

static void
level2(void *ctx, size_t begin, size_t end)
{
	for (size_t i = begin; i < end; i++)
		sq_apply_range_f(32, sq_get_global_queue(0, 0), NULL, level3);
}

static void
level1(void *ctx, size_t begin, size_t end)
{
	for (size_t i = begin; i < end; i++)
		sq_apply_range_f(32, SQ_APPLY_AUTO, NULL, level2);
}

static void
inner_range(void *ctx, size_t begin, size_t end)
{
	atomic_fetch_add(&inner_calls, 1);
	if (begin == 0 && end == 100)
		atomic_fetch_add(&inner_whole, 1);
}

static void
outer_range(void *ctx, size_t begin, size_t end)
{
	for (size_t i = begin; i < end; i++)
		sq_apply_range_f(100, SQ_APPLY_AUTO, NULL, inner_range);
}

static void
test_nested(void)
{
	int ncpu = sqt_pool_width();
	struct sqt_thread_monitor m;
	sqt_thread_monitor_start(&m);
	int before = atomic_load(&m.peak);
	atomic_store(&nested_count, 0);
	sq_apply_range_f(32, sq_get_global_queue(0, 0), NULL, level1);
	int peak = sqt_thread_monitor_stop(&m);
	CHECK_EQ(atomic_load(&nested_count), 32 * 32 * 32);
	/* nesting neither deadlocks nor oversubscribes the pool */
	int limit = ncpu + 4 + SQT_SCALE(0, 4); /* see test_queue_pool.c */
	CHECK(peak <= (before > limit ? before : limit));
	if (peak > (before > limit ? before : limit))
		fprintf(stderr, "  nested range: %d threads (before %d)\n",
				peak, before);

	/* A nested loop runs inline: one call for its whole range. */
	atomic_store(&inner_calls, 0);
	atomic_store(&inner_whole, 0);
	sq_apply_range_f(50, SQ_APPLY_AUTO, NULL, outer_range);
	CHECK_EQ(atomic_load(&inner_calls), 50);
	CHECK_EQ(atomic_load(&inner_whole), 50);
}

/* ---- serial and concurrent queues ------------------------------------------- */

static char queue_key;
static char serial_marker[] = "serial";

static struct {
	atomic_int calls, wrong_queue;
	size_t begin, end;
} sr;

static void
serial_range(void *ctx, size_t begin, size_t end)
{
	if (sq_get_specific(&queue_key) != ctx)
		atomic_fetch_add(&sr.wrong_queue, 1);
	atomic_fetch_add(&sr.calls, 1);
	sr.begin = begin;
	sr.end = end;
}

static void
test_serial_queue(void)
{
	sq_queue_t q = sq_queue_create("com.example.range.serial", NULL);
	sq_queue_set_specific(q, &queue_key, serial_marker, NULL);
	sq_apply_range_f(500, q, serial_marker, serial_range);
	/* one call, the whole range, in the queue's context */
	CHECK_EQ(atomic_load(&sr.calls), 1);
	CHECK_EQ(sr.begin, 0);
	CHECK_EQ(sr.end, 500);
	CHECK_EQ(atomic_load(&sr.wrong_queue), 0);
	sq_release(q);
}

struct barrier_watch {
	sq_queue_t q;
	atomic_int iterating, overlaps, barrier_done;
};

static void
watch_barrier(void *arg)
{
	struct barrier_watch *w = arg;
	if (atomic_load(&w->iterating) != 0)
		atomic_fetch_add(&w->overlaps, 1);
	atomic_fetch_add(&w->barrier_done, 1);
}

static void
watch_range(void *arg, size_t begin, size_t end)
{
	struct barrier_watch *w = arg;
	atomic_fetch_add(&w->iterating, 1);
	if (begin == 0) /* a barrier queued while the loop runs */
		sq_barrier_async_f(w->q, w, watch_barrier);
	sqt_sleep_us(200 * (unsigned)(end - begin));
	atomic_fetch_sub(&w->iterating, 1);
}

static void
test_concurrent_queue_barrier(void)
{
	struct barrier_watch w;
	memset(&w, 0, sizeof(w));
	w.q = sq_queue_create("com.example.range.barriers",
			SQ_QUEUE_CONCURRENT);
	for (int round = 0; round < 10; round++) {
		sq_barrier_async_f(w.q, &w, watch_barrier);
		sq_apply_range_f(16, w.q, &w, watch_range);
		/* the barrier before: done before the loop began */
		CHECK(atomic_load(&w.barrier_done) >= 2 * round + 1);
		CHECK(sqt_wait_int(&w.barrier_done, 2 * round + 2, WAIT_MS));
	}
	CHECK_EQ(atomic_load(&w.overlaps), 0);
	sq_release(w.q);
}

/* ---- the loop finishes while every worker is busy --------------------------- */

static atomic_bool busy_flag;
static atomic_int busy_running, busy_finished;

static void
busy_spinner(void *ctx)
{
	atomic_fetch_add(&busy_running, 1);
	uint64_t deadline = sqt_now_ns() + 15000000000ull;
	while (atomic_load(&busy_flag) && sqt_now_ns() < deadline)
		sched_yield();
	atomic_fetch_add(&busy_finished, 1);
}

static void
test_while_busy(void)
{
	int ncpu = sqt_pool_width();
	sq_queue_t g = sq_get_global_queue(0, 0);
	atomic_store(&busy_flag, true);
	for (int i = 0; i < ncpu; i++)
		sq_async_f(g, NULL, busy_spinner);
	CHECK(sqt_wait_int(&busy_running, ncpu, WAIT_MS));
	reset_ranges(1000);
	sq_apply_range_f(1000, g, (void *)(uintptr_t)1000, record_range);
	/* returned while the spinners still spin */
	CHECK(covered_once(1000));
	CHECK_EQ(atomic_load(&busy_finished), 0);
	atomic_store(&busy_flag, false);
	CHECK(sqt_wait_int(&busy_finished, ncpu, WAIT_MS));
}

/* ---- misuse ------------------------------------------------------------------ */

static void
null_range(void *unused)
{
	alarm(10);
	sq_apply_range_f(4, NULL, NULL, (sq_apply_range_function_t)unused);
}

static void
nothing_range(void *ctx, size_t begin, size_t end)
{
}

static void
range_self(void *q)
{
	sq_apply_range_f(4, q, NULL, nothing_range);
}

static void
deadlock_range(void *unused)
{
	alarm(10);
	sq_queue_t q = sq_queue_create("com.example.range.deadlock", NULL);
	sq_async_f(q, q, range_self);
	pause();
}

static void
test_misuse(void)
{
	CHECK_CRASH(null_range, NULL,
			"SwiftQueues: sq_apply_range_f: function pointer is NULL");
	CHECK_CRASH(deadlock_range, NULL,
			"SwiftQueues: sq_apply_range_f: deadlock");
	CHECK_CRASH(deadlock_range, NULL, "'com.example.range.deadlock'");
}

/* ---- one width per child process -------------------------------------------- */

static int
run_child(void)
{
	test_while_busy(); /* first: a fresh pool of `width` workers */
	test_covering();
	test_cheap_body();
	test_uneven_body();
	test_nested();
	test_serial_queue();
	test_concurrent_queue_barrier();
	char name[64];
	snprintf(name, sizeof(name), "test_apply_range (width %d)",
			sqt_pool_width());
	int rc = sqt_finish(name);
	fflush(NULL);
	/* Exit without waiting for anything a failed check left behind. */
	_exit(rc);
}

/* Runs this program as a child with SQ_WORKERS=width; true if it passed. */
static bool
run_width(int width)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return false;
	self[n] = '\0';
	char w[16];
	snprintf(w, sizeof(w), "%d", width);
	setenv("SQT_RANGE_CHILD", "1", 1);
	setenv("SQ_WORKERS", w, 1);
	char *argv[] = { self, NULL };
	pid_t pid;
	if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
		return false;
	uint64_t deadline = sqt_now_ns() + (SQT_SANITIZED ? 600 : 120) *
			1000000000ull;
	int status = 0;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (sqt_now_ns() > deadline) {
			fprintf(stderr, "width %d: hung, killed\n", width);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return false;
		}
		sqt_sleep_ms(20);
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int
main(void)
{
	if (getenv("SQT_RANGE_CHILD"))
		return run_child();

	test_misuse();
	const char *list = getenv("SQT_RANGE_WIDTHS");
	if (list == NULL || *list == '\0')
		list = "1 2 4 8";
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,")) {
		int width = atoi(tok);
		if (width < 1)
			continue;
		bool ok = run_width(width);
		if (!ok)
			fprintf(stderr, "FAIL width %d\n", width);
		CHECK(ok);
	}
	return sqt_finish("test_apply_range");
}
