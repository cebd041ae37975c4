/*
 * Wake-ups in the pool: two serial queues whose tasks wait for each other,
 * round after round, in a fresh process (only the pool's own workers, as a
 * program starts). The second task must reach a worker while the first
 * blocks, so a lost wake-up shows as a round that stalls.
 *
 * This found one (since fixed): a worker that stopped searching and then
 * saw work ran a job as a plain worker, while submitters had counted on it
 * as a searcher to wake the next worker (about 1 round in 400 with a short
 * idle spin). test_pool_matrix.c now covers it at every pool width, with
 * the safety net off. Some rounds first flood the global queue, so workers
 * are in every state when the pair arrives.
 *
 * It also checks which idle worker a wake-up takes (longest idle at the
 * pool's width, most recent above it); those tests run first, while the
 * pool is fresh.
 */
#include "queue_helpers.h"

#include <string.h>

static void
pair_nop(void *arg)
{
}

static void
test_waiting_pairs_never_stall(void)
{
	int rounds = (SQT_TSAN || SQT_ASAN) ? 2000 : 20000, stalled = 0;
	uint64_t t0 = sqt_now_ns();
	for (int i = 0; i < rounds; i++) {
		struct handshake r;
		sem_init(&r.a_to_b, 0, 0);
		sem_init(&r.b_to_a, 0, 0);
		sem_init(&r.done, 0, 0);
		atomic_init(&r.ok, 0);
		sq_queue_t qa = sq_queue_create("pair.a", NULL);
		sq_queue_t qb = sq_queue_create("pair.b", NULL);
		if (i % 3 == 0)
			for (int k = 0; k < 50; k++)
				sq_async_f(sq_get_global_queue(0, 0), NULL,
						pair_nop);
		sq_async_f(qa, &r, handshake_a);
		sq_async_f(qb, &r, handshake_b);
		bool both = sqt_sem_wait_ms(&r.done, 10000) &&
				sqt_sem_wait_ms(&r.done, 10000);
		if (!both || atomic_load(&r.ok) != 2)
			stalled++;
		sq_release(qa);
		sq_release(qb);
		sem_destroy(&r.a_to_b);
		sem_destroy(&r.b_to_a);
		sem_destroy(&r.done);
		if (stalled >= 3)
			break; /* enough to fail; each stall costs 5 s */
	}
	CHECK_EQ(stalled, 0);
	printf("waiting pairs: %d rounds in %.0f ms, %d stalled\n", rounds,
			(double)(sqt_now_ns() - t0) / 1e6, stalled);
}

/* ---- Which idle worker a wake-up takes ----------------------------------
 *
 * Tasks on the global queue hold `count` workers at once, then return one
 * at a time, each after the previous one's worker has parked, so the
 * workers go idle in a known order. One more task then shows which worker
 * a wake-up took: the one idle longest while the pool is at its width, the
 * most recent one while it has extra workers. */

struct park_order {
	int count;
	bool block;             /* hold by sleeping (the monitor adds workers) */
	atomic_int started;
	atomic_int turn;        /* the task whose worker parks next */
	atomic_int idle_base;   /* idle workers before the first returned */
	atomic_int failed;
	pid_t tid[64];
};

static struct park_order order;
static _Atomic pid_t probe_tid;
static sem_t probe_done;

static int
pool_idle_now(void)
{
	sq_pool_stats_t s;
	sq_pool_stats(&s);
	return (int)s.idle;
}

static void
order_wait(uint64_t deadline)
{
	if (sqt_now_ns() > deadline)
		atomic_store(&order.failed, 1);
	else if (order.block)
		sqt_sleep_us(200);
	else
		sched_yield();
}

static void
park_order_task(void *arg)
{
	uint64_t deadline = sqt_now_ns() + 10 * 1000000000ull;
	int i = atomic_fetch_add(&order.started, 1);
	order.tid[i] = sqt_gettid();
	while (atomic_load(&order.started) < order.count &&
			!atomic_load(&order.failed))
		order_wait(deadline);
	/* Task i returns once i workers have parked since the first one
	 * returned (task 0 waits until main has counted the idle base). */
	while (atomic_load(&order.turn) != i && !atomic_load(&order.failed))
		order_wait(deadline);
	while (pool_idle_now() < atomic_load(&order.idle_base) + i &&
			!atomic_load(&order.failed))
		order_wait(deadline);
	atomic_store(&order.turn, i + 1);
}

static void
probe_task(void *arg)
{
	atomic_store(&probe_tid, sqt_gettid());
	sem_post(&probe_done);
}

/* Returns the index of the task whose worker ran the probe, or -1. */
static int
run_park_order(int count, bool block)
{
	memset(&order, 0, sizeof(order));
	order.count = count;
	order.block = block;
	atomic_store(&order.turn, -1);
	sem_init(&probe_done, 0, 0);
	sq_queue_t global = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	for (int i = 0; i < count; i++)
		sq_async_f(global, NULL, park_order_task);
	uint64_t deadline = sqt_now_ns() + 10 * 1000000000ull;
	while (atomic_load(&order.started) < count && sqt_now_ns() < deadline)
		sqt_sleep_us(200);
	/* Every worker not holding a task is idle (not searching, not
	 * spinning) before the first task returns. */
	sq_pool_stats_t s;
	do {
		sqt_sleep_ms(2);
		sq_pool_stats(&s);
	} while ((s.live - s.idle != (uint32_t)count || s.searching != 0) &&
			sqt_now_ns() < deadline);
	atomic_store(&order.idle_base, (int)s.idle);
	atomic_store(&order.turn, 0);
	while (atomic_load(&order.turn) != count && !atomic_load(&order.failed)
			&& sqt_now_ns() < deadline)
		sqt_sleep_us(200);
	/* The last one has parked too. */
	while (pool_idle_now() < (int)s.idle + count &&
			sqt_now_ns() < deadline)
		sqt_sleep_us(200);
	CHECK(sqt_now_ns() < deadline);
	CHECK_EQ(atomic_load(&order.failed), 0);
	sq_async_f(global, NULL, probe_task);
	CHECK(sqt_sem_wait_ms(&probe_done, 10000));
	sem_destroy(&probe_done);
	pid_t tid = atomic_load(&probe_tid);
	for (int i = 0; i < count; i++)
		if (order.tid[i] == tid)
			return i;
	return -1;
}

static void
test_wake_takes_longest_idle_at_width(void)
{
	sq_pool_stats_t s;
	sq_pool_stats(&s);
	int width = (int)s.width;
	if (width < 2 || s.live > s.width) {
		printf("longest idle: skipped (width %d, %u live)\n", width,
				s.live);
		return;
	}
	int ran_on = run_park_order(width, false);
	sq_pool_stats(&s);
	CHECK_EQ(s.live, (uint32_t)width);
	CHECK_EQ(ran_on, 0);
	printf("longest idle: %d workers, the probe ran on the one that parked "
			"at index %d (0 expected)\n", width, ran_on);
}

static void
test_wake_takes_most_recent_above_width(void)
{
	sq_pool_stats_t s;
	sq_pool_stats(&s);
	int count = (int)s.width * 2 + 2;
	if (count > 64 || (uint32_t)count > s.max_threads)
		count = (int)s.width + 1;
	int ran_on = run_park_order(count, true);
	sq_pool_stats(&s);
	CHECK(s.live > s.width);
	CHECK_EQ(ran_on, count - 1);
	printf("most recent: %d workers (%u live, width %u), the probe ran on "
			"the one that parked at index %d (%d expected)\n", count,
			s.live, s.width, ran_on, count - 1);
}

int
main(void)
{
	/* First: a fresh pool at its width, no worker added for blocking. */
	test_wake_takes_longest_idle_at_width();
	test_wake_takes_most_recent_above_width();
	test_waiting_pairs_never_stall();
	return sqt_finish("test_queue_wakeups");
}
