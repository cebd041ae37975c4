/*
 * Spin lock: mutual exclusion, trylock, and no livelock when the holder is
 * preempted (the livelock that made Apple deprecate OSSpinLock).
 */
#include "sqtest.h"

#define THREADS 4
#define ITERATIONS 200000

static sq_spinlock_t lock = SQ_SPINLOCK_INIT;
static long plain_counter; /* deliberately not atomic: the lock guards it */

static void *
increment_under_lock(void *arg)
{
	for (int i = 0; i < ITERATIONS; i++) {
		sq_spinlock_lock(&lock);
		plain_counter++;
		sq_spinlock_unlock(&lock);
	}
	return NULL;
}

static void
test_mutual_exclusion(void)
{
	plain_counter = 0;
	sqt_run_threads(THREADS, increment_under_lock, NULL, 0);
	CHECK_EQ(plain_counter, (long)THREADS * ITERATIONS);
}

static volatile int trylock_result = -1;

static void *
try_from_other_thread(void *arg)
{
	trylock_result = sq_spinlock_trylock(&lock);
	if (trylock_result)
		sq_spinlock_unlock(&lock);
	return NULL;
}

static void
test_trylock(void)
{
	CHECK(sq_spinlock_trylock(&lock));
	CHECK(!sq_spinlock_trylock(&lock));
	sqt_run_threads(1, try_from_other_thread, NULL, 0);
	CHECK_EQ(trylock_result, 0);
	sq_spinlock_unlock(&lock);
	sqt_run_threads(1, try_from_other_thread, NULL, 0);
	CHECK_EQ(trylock_result, 1);
}

/*
 * More threads than cores, each yielding inside the critical section so the
 * holder is regularly descheduled: everything still completes and adds up.
 */
#define CROWD 8

static void *
crowd_worker(void *arg)
{
	for (int i = 0; i < 20000; i++) {
		sq_spinlock_lock(&lock);
		plain_counter++;
		if (i % 64 == 0)
			sched_yield();
		sq_spinlock_unlock(&lock);
	}
	return NULL;
}

static void
test_oversubscribed(void)
{
	plain_counter = 0;
	sqt_run_threads(CROWD, crowd_worker, NULL, 0);
	CHECK_EQ(plain_counter, (long)CROWD * 20000);
}

/*
 * A waiter on a lock held for a long time sleeps instead of spinning: over a
 * 300 ms hold it uses far less CPU than wall time.
 */
static volatile uint64_t waiter_cpu_ns, waiter_wall_ns;
static volatile int32_t waiter_started;

static void *
long_waiter(void *arg)
{
	uint64_t wall = sqt_now_ns(), cpu = sqt_thread_cpu_ns();
	sq_atomic_store32(&waiter_started, 1);
	sq_spinlock_lock(&lock);
	waiter_cpu_ns = sqt_thread_cpu_ns() - cpu;
	waiter_wall_ns = sqt_now_ns() - wall;
	sq_spinlock_unlock(&lock);
	return NULL;
}

static void
test_waiter_sleeps(void)
{
	pthread_t waiter;
	sq_spinlock_lock(&lock);
	pthread_create(&waiter, NULL, long_waiter, NULL);
	/* Hold the lock for 300 ms from the moment the waiter is running. */
	while (!sq_atomic_load32(&waiter_started))
		sched_yield();
	struct timespec hold = { 0, 300 * 1000000 };
	nanosleep(&hold, NULL);
	sq_spinlock_unlock(&lock);
	pthread_join(waiter, NULL);
	CHECK(waiter_wall_ns >= 200 * 1000000ull);
	/* Spinning the whole time would cost ~300 ms of CPU. */
	CHECK(waiter_cpu_ns < 100 * 1000000ull);
}

int
main(void)
{
	test_trylock();
	test_mutual_exclusion();
	test_oversubscribed();
	test_waiter_sleeps();
	return sqt_finish("spinlock");
}
