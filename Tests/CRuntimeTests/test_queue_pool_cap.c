/*
 * SQ_MAX_THREADS caps the pool: with SQ_MAX_THREADS=8 (set before the first
 * queue call), 32 tasks that each sleep never run more than 8 at a time and
 * never make the process hold more than 8 workers + a few other threads;
 * they all still finish.
 *
 * The cap bounds the pool's blocking compensation (docs/ARCHITECTURE.md,
 * "The worker pool").
 */
#include "queue_helpers.h"

#define CAP 8
#define TASKS 32
#define SLEEP_MS 200
#define NON_WORKER_THREADS 4 /* main, the monitor, a sanitizer's, a manager */

static atomic_int done, inside, max_inside;

static void
sleeper(void *arg)
{
	int n = atomic_fetch_add(&inside, 1) + 1;
	sqt_atomic_max(&max_inside, n);
	sqt_sleep_ms(SLEEP_MS);
	atomic_fetch_sub(&inside, 1);
	atomic_fetch_add(&done, 1);
}

static void
count_task(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

int
main(void)
{
	/* Before anything touches the runtime. */
	setenv("SQ_MAX_THREADS", "8", 1);

	struct sqt_thread_monitor m;
	sqt_thread_monitor_start(&m);
	uint64_t start = sqt_now_ns();
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	for (int i = 0; i < TASKS; i++)
		sq_async_f(g, NULL, sleeper);
	CHECK(sqt_wait_int(&done, TASKS, 20000));
	double ms = sqt_ms_since(start);
	int peak = sqt_thread_monitor_stop(&m);
	printf("SQ_MAX_THREADS=8, 32 sleepers of %d ms: %.0f ms, peak %d "
			"threads, %d at once\n", SLEEP_MS, ms, peak,
			atomic_load(&max_inside));
	CHECK(peak <= CAP + NON_WORKER_THREADS);
	CHECK(atomic_load(&max_inside) <= CAP);
	/* With at most 8 at a time, 32 sleeps of 200 ms take >= 800 ms. */
	CHECK(ms >= (double)(TASKS / CAP) * SLEEP_MS - 20);
	CHECK(ms < 8000.0);

	/* A serial queue and the pool keep working afterwards. */
	sq_queue_t q = sq_queue_create("com.example.after-cap", NULL);
	static atomic_int after;
	for (int i = 0; i < 100; i++)
		sq_async_f(q, &after, count_task);
	CHECK(sqt_wait_int(&after, 100, 10000));
	sq_release(q);
	return sqt_finish("test_queue_pool_cap");
}
