/*
 * sq_apply_f: every index exactly once, returns when all have run, count 0,
 * serial queues (in order, on that queue), striding, nesting (32x32x32),
 * progress while every worker is busy, from inside other queues, async +
 * apply, a semaphore used as a lock inside apply, and barriers and
 * suspension of a concurrent queue holding back its iterations. After
 * libdispatch's apply and sema tests. The deadlocking case (apply onto the
 * serial queue the thread runs) is in test_queue_misuse.c.
 */
#include "queue_helpers.h"

#include <sched.h>

#define WAIT_MS 10000

/* ---- every index once ------------------------------------------------------ */

#define N1 1000

static atomic_long sum;
static atomic_int calls;
static atomic_uchar hits[N1];

static void
visit(void *ctx, size_t i)
{
	atomic_fetch_add(&sum, (long)i);
	if (i < N1)
		atomic_fetch_add(&hits[i], 1);
	atomic_fetch_add(&calls, 1);
}

static void
reset_visits(void)
{
	atomic_store(&sum, 0);
	atomic_store(&calls, 0);
	for (int i = 0; i < N1; i++)
		atomic_store(&hits[i], 0);
}

static bool
all_hit_once(size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (atomic_load(&hits[i]) != 1)
			return false;
	return true;
}

static void
test_every_index_once(void)
{
	sq_queue_t queues[3] = { sq_get_global_queue(0, 0), SQ_APPLY_AUTO,
		sq_queue_create("com.example.apply.concurrent",
				SQ_QUEUE_CONCURRENT) };
	for (int q = 0; q < 3; q++) {
		reset_visits();
		sq_apply_f(N1, queues[q], NULL, visit);
		/* immediately after the return */
		CHECK_EQ(atomic_load(&sum), 499500);
		CHECK_EQ(atomic_load(&calls), N1);
		CHECK(all_hit_once(N1));
	}
	reset_visits();
	uint64_t start = sqt_now_ns();
	sq_apply_f(0, queues[0], NULL, visit);
	CHECK_EQ(atomic_load(&calls), 0);
	CHECK(sqt_ms_since(start) < 1000.0);
	sq_apply_f(1, queues[0], NULL, visit);
	CHECK_EQ(atomic_load(&calls), 1);
	CHECK(atomic_load(&hits[0]) == 1);
	sq_release(queues[2]);

	/* Many iterations: chunking must not lose or repeat any. */
	const size_t big = SQT_SCALE(1000000, 100000);
	atomic_store(&sum, 0);
	atomic_store(&calls, 0);
	sq_apply_f(big, NULL, NULL, visit);
	CHECK_EQ(atomic_load(&calls), (long)big);
	CHECK_EQ(atomic_load(&sum), (long)(big * (big - 1) / 2));
}

/* ---- dispatch_apply port: 32, nested 32x32x32 ------------------------------ */

static atomic_long nested_count;

static void
level3(void *ctx, size_t i)
{
	atomic_fetch_add(&nested_count, 1);
}

static void
level2(void *ctx, size_t i)
{
	sq_apply_f(32, sq_get_global_queue(0, 0), NULL, level3);
}

static void
level1(void *ctx, size_t i)
{
	sq_apply_f(32, SQ_APPLY_AUTO, NULL, level2);
}

static void
test_nested(void)
{
	atomic_store(&nested_count, 0);
	sq_apply_f(32, sq_get_global_queue(0, 0), NULL, level3);
	CHECK_EQ(atomic_load(&nested_count), 32);

	int ncpu = sqt_pool_width();
	struct sqt_thread_monitor m;
	sqt_thread_monitor_start(&m);
	int before = atomic_load(&m.peak);
	atomic_store(&nested_count, 0);
	sq_apply_f(32, sq_get_global_queue(0, 0), NULL, level1);
	int peak = sqt_thread_monitor_stop(&m);
	CHECK_EQ(atomic_load(&nested_count), 32 * 32 * 32);
	/* nesting neither deadlocks nor oversubscribes the pool */
	int limit = ncpu + 4 + SQT_SCALE(0, 4); /* see test_queue_pool.c */
	CHECK(peak <= (before > limit ? before : limit));
	if (peak > (before > limit ? before : limit))
		fprintf(stderr, "  nested apply: %d threads (before %d)\n", peak,
				before);
}

/* ---- apply completes while every worker is busy ----------------------------- */

static atomic_bool busy_flag;
static atomic_int busy_running, busy_finished;

static void
busy_spinner(void *ctx)
{
	atomic_fetch_add(&busy_running, 1);
	uint64_t deadline = sqt_now_ns() + 15000000000ull;
	while (atomic_load(&busy_flag) && sqt_now_ns() < deadline) {
	}
	atomic_fetch_add(&busy_finished, 1);
}

static atomic_int busy_apply_calls;

static void
busy_apply_body(void *ctx, size_t i)
{
	atomic_fetch_add(&busy_apply_calls, 1);
}

static void
test_apply_while_busy(void)
{
	int ncpu = sqt_pool_width();
	sq_queue_t g = sq_get_global_queue(0, 0);
	atomic_store(&busy_flag, true);
	for (int i = 0; i < ncpu; i++)
		sq_async_f(g, NULL, busy_spinner);
	CHECK(sqt_wait_int(&busy_running, ncpu, WAIT_MS));
	sq_apply_f(32, g, NULL, busy_apply_body);
	/* apply returned while the spinners still spin */
	CHECK_EQ(atomic_load(&busy_apply_calls), 32);
	CHECK_EQ(atomic_load(&busy_finished), 0);
	atomic_store(&busy_flag, false);
	CHECK(sqt_wait_int(&busy_finished, ncpu, WAIT_MS));
}

/* ---- apply on a serial queue ----------------------------------------------- */

static char queue_key;
static char serial_marker[] = "serial", concurrent_marker[] = "concurrent";

static struct {
	size_t order[256];
	size_t n;
	atomic_int inside, max_inside, wrong_queue;
} sa;

static void
serial_body(void *ctx, size_t i)
{
	int in = atomic_fetch_add(&sa.inside, 1) + 1;
	sqt_atomic_max(&sa.max_inside, in);
	if (sq_get_specific(&queue_key) != ctx)
		atomic_fetch_add(&sa.wrong_queue, 1);
	if (sa.n < 256)
		sa.order[sa.n++] = i;
	sqt_sleep_us(50);
	atomic_fetch_sub(&sa.inside, 1);
}

static void
concurrent_body(void *ctx, size_t i)
{
	if (sq_get_specific(&queue_key) != ctx)
		atomic_fetch_add(&sa.wrong_queue, 1);
	atomic_fetch_add(&hits[i], 1);
}

static void
test_serial_queue(void)
{
	sq_queue_t q = sq_queue_create("com.example.apply.serial", NULL);
	sq_queue_set_specific(q, &queue_key, serial_marker, NULL);
	sq_apply_f(100, q, serial_marker, serial_body);
	CHECK_EQ(sa.n, 100);
	int in_order = 1;
	for (size_t i = 0; i < sa.n; i++)
		if (sa.order[i] != i)
			in_order = 0;
	CHECK(in_order);
	CHECK_EQ(atomic_load(&sa.max_inside), 1);
	CHECK_EQ(atomic_load(&sa.wrong_queue), 0);

	/* On a custom concurrent queue, the iterations run on that queue. */
	sq_queue_t c = sq_queue_create("com.example.apply.c", SQ_QUEUE_CONCURRENT);
	sq_queue_set_specific(c, &queue_key, concurrent_marker, NULL);
	reset_visits();
	sq_apply_f(N1, c, concurrent_marker, concurrent_body);
	CHECK(all_hit_once(N1));
	CHECK_EQ(atomic_load(&sa.wrong_queue), 0);
	sq_release(q);
	sq_release(c);
}

/* ---- striding ---------------------------------------------------------------- */

#define STRIDE 137
#define STRIDE_MAX 10000

static atomic_uchar stride_hits[STRIDE_MAX];
static atomic_int stride_blocks;

static void
mark(size_t j)
{
	atomic_fetch_add(&stride_hits[j], 1);
}

static void
strided_body(void *ctx, size_t idx)
{
	size_t stride = *(size_t *)ctx;
	size_t j = idx * stride;
	size_t j_stop = j + stride;
	atomic_fetch_add(&stride_blocks, 1);
	do {
		mark(j++);
	} while (j < j_stop);
}

/* Striding: count / stride iterations of `stride` indices each, the
 * remainder on the caller. */
static void
apply_strided(size_t count, size_t stride, sq_queue_t q)
{
	sq_apply_f(count / stride, q, &stride, strided_body);
	for (size_t i = count - (count % stride); i < count; i++)
		mark(i);
}

static bool
stride_once(size_t count)
{
	for (size_t i = 0; i < STRIDE_MAX; i++)
		if (atomic_load(&stride_hits[i]) != (i < count ? 1 : 0))
			return false;
	return true;
}

static void
test_striding(void)
{
	const size_t counts[] = { 0, 1, 136, 137, 138, 10000 };
	sq_queue_t g = sq_get_global_queue(0, 0);
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		for (size_t i = 0; i < STRIDE_MAX; i++)
			atomic_store(&stride_hits[i], 0);
		apply_strided(counts[k], STRIDE, g);
		CHECK(stride_once(counts[k]));
	}
	for (size_t i = 0; i < STRIDE_MAX; i++)
		atomic_store(&stride_hits[i], 0);
	atomic_store(&stride_blocks, 0);
	apply_strided(100, 4, g);
	CHECK_EQ(atomic_load(&stride_blocks), 25);
	CHECK(stride_once(100));
}

/* ---- apply from an async task, and from inside other queues ------------------ */

static sem_t apply5_done;
static atomic_int apply5_calls;

static void
op(void *ctx, size_t i)
{
	atomic_fetch_add(&apply5_calls, 1);
}

static void
async_apply(void *ctx)
{
	sq_apply_f(1000, (sq_queue_t)ctx, NULL, op);
	sem_post(&apply5_done);
}

static void
test_apply_from_queues(void)
{
	sem_init(&apply5_done, 0, 0);
	sq_queue_t concurrent = sq_queue_create("com.example.apply5",
			SQ_QUEUE_CONCURRENT);
	uint64_t start = sqt_now_ns();
	sq_async_f(sq_get_global_queue(0, 0), concurrent, async_apply);
	double submit_ms = sqt_ms_since(start);
	CHECK(submit_ms < 1000.0); /* the call returns at once */
	CHECK(sqt_sem_wait_ms(&apply5_done, WAIT_MS));
	CHECK_EQ(atomic_load(&apply5_calls), 1000);

	/* From a serial queue's task onto another queue: no deadlock. */
	sq_queue_t serial = sq_queue_create("com.example.apply.caller", NULL);
	sq_queue_t other = sq_queue_create("com.example.apply.other", NULL);
	sq_async_f(serial, sq_get_global_queue(0, 0), async_apply);
	sq_async_f(serial, other, async_apply);
	sq_async_f(serial, concurrent, async_apply);
	for (int i = 0; i < 3; i++)
		CHECK(sqt_sem_wait_ms(&apply5_done, WAIT_MS));
	CHECK_EQ(atomic_load(&apply5_calls), 4000);

	/* From a concurrent queue's task onto the same concurrent queue. */
	sq_async_f(concurrent, concurrent, async_apply);
	CHECK(sqt_sem_wait_ms(&apply5_done, WAIT_MS));
	CHECK_EQ(atomic_load(&apply5_calls), 5000);

	sq_release(serial);
	sq_release(other);
	sq_release(concurrent);
	sem_destroy(&apply5_done);
}

/* ---- dispatch_sema port: a semaphore as a lock inside apply ----------------- */

static sq_semaphore_t lock_sema;
static long total;

static void
sema_body(void *ctx, size_t i)
{
	sq_semaphore_wait(lock_sema, SQ_TIME_FOREVER);
	total++;
	sq_semaphore_signal(lock_sema);
}

static void
test_sema_lock(void)
{
	lock_sema = sq_semaphore_create(1);
	CHECK(lock_sema != NULL);
	const size_t n = SQT_SCALE(10000, 2000);
	sq_apply_f(n, sq_get_global_queue(0, 0), NULL, sema_body);
	CHECK_EQ(total, (long)n);
	sq_release(lock_sema);
}

/* ---- Barriers and suspension on a concurrent queue ------------------------------
 *
 * The iterations of an apply on a concurrent queue are its work: a barrier
 * queued before the apply has finished before the first iteration starts,
 * a barrier queued from an iteration waits for the last one, and nothing
 * starts while the queue is suspended.
 */

struct barrier_watch {
	atomic_int in_barrier;   /* a barrier is running */
	atomic_int iterating;    /* iterations running */
	atomic_int overlaps;
	atomic_int barrier_done;
	atomic_int started;      /* iterations started */
	sq_queue_t q;
};

static void
watch_barrier(void *arg)
{
	struct barrier_watch *w = arg;
	atomic_store(&w->in_barrier, 1);
	if (atomic_load(&w->iterating) != 0)
		atomic_fetch_add(&w->overlaps, 1);
	sqt_sleep_ms(2);
	if (atomic_load(&w->iterating) != 0)
		atomic_fetch_add(&w->overlaps, 1);
	atomic_store(&w->in_barrier, 0);
	atomic_fetch_add(&w->barrier_done, 1);
}

static void
watch_iteration(void *arg, size_t i)
{
	struct barrier_watch *w = arg;
	atomic_fetch_add(&w->iterating, 1);
	atomic_fetch_add(&w->started, 1);
	if (atomic_load(&w->in_barrier))
		atomic_fetch_add(&w->overlaps, 1);
	if (i == 3) /* a barrier queued while the apply runs */
		sq_barrier_async_f(w->q, w, watch_barrier);
	sqt_sleep_us(200);
	if (atomic_load(&w->in_barrier))
		atomic_fetch_add(&w->overlaps, 1);
	atomic_fetch_sub(&w->iterating, 1);
}

struct suspended_apply {
	struct barrier_watch *w;
	atomic_int returned;
};

static void *
apply_on_suspended(void *arg)
{
	struct suspended_apply *held = arg;
	sq_apply_f(8, held->w->q, held->w, watch_iteration);
	atomic_store(&held->returned, 1);
	return NULL;
}

static void
test_concurrent_queue_barriers(void)
{
	struct barrier_watch w;
	memset(&w, 0, sizeof(w));
	w.q = sq_queue_create("com.example.apply.barriers",
			SQ_QUEUE_CONCURRENT);
	for (int round = 0; round < 20; round++) {
		sq_barrier_async_f(w.q, &w, watch_barrier);
		sq_apply_f(16, w.q, &w, watch_iteration);
		/* the barrier before: done before the first iteration */
		CHECK(atomic_load(&w.barrier_done) >= 2 * round + 1);
		CHECK(sqt_wait_int(&w.barrier_done, 2 * round + 2, WAIT_MS));
	}
	CHECK_EQ(atomic_load(&w.overlaps), 0);

	/* suspended: the apply waits for the resume */
	struct suspended_apply held = { &w, 0 };
	atomic_store(&w.started, 0);
	sq_suspend(w.q);
	pthread_t t;
	pthread_create(&t, NULL, apply_on_suspended, &held);
	sqt_sleep_ms(20);
	CHECK_EQ(atomic_load(&w.started), 0);
	CHECK_EQ(atomic_load(&held.returned), 0);
	sq_resume(w.q);
	pthread_join(t, NULL);
	CHECK_EQ(atomic_load(&w.started), 8);
	CHECK(sqt_wait_int(&w.barrier_done, 41, WAIT_MS));
	CHECK_EQ(atomic_load(&w.overlaps), 0);
	sq_release(w.q);
}

int
main(void)
{
	test_apply_while_busy(); /* first: a fresh pool of ncpu workers */
	test_every_index_once();
	test_nested();
	test_serial_queue();
	test_striding();
	test_apply_from_queues();
	test_sema_lock();
	test_concurrent_queue_barriers();
	return sqt_finish("test_apply");
}
