/*
 * Semaphores: the uncontended path makes no system call, timeouts, one
 * signal wakes one waiter, the semaphore as a lock over sq_apply_f
 * (libdispatch's dispatch_sema test), limiting a resource (at most N
 * holders, like a pool of file descriptors), ping-pong, timeouts racing
 * signals without losing a unit, and the misuse reports.
 */
#include "wait_helpers.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <sys/time.h>

/*
 * A test-build syscall counter: the library reaches the futex through
 * syscall(2), and a definition in the executable takes precedence over
 * libc's. Counted per thread, so the pool's own futex calls do not count.
 */
static long (*real_syscall)(long, ...);
static __thread long futex_calls;

long
syscall(long number, ...)
{
	va_list ap;
	long a[6];
	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (number == SYS_futex)
		futex_calls++;
	return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static void
test_create(void)
{
	errno = 0;
	CHECK(sq_semaphore_create(-1) == NULL);
	CHECK_EQ(errno, EINVAL);

	sq_semaphore_t s = sq_semaphore_create(1);
	CHECK(s != NULL);
	CHECK_EQ(sq_semaphore_wait(s, SQ_TIME_FOREVER), 0);
	CHECK(sq_semaphore_wait(s, SQ_TIME_NOW) != 0);
	CHECK_EQ(sq_semaphore_signal(s), 0); /* nobody to wake */
	CHECK_EQ(sq_semaphore_wait(s, SQ_TIME_NOW), 0);
	CHECK_EQ(sq_semaphore_signal(s), 0);
	CHECK_EQ(sq_semaphore_signal(s), 0); /* above the creation value */
	sq_release(s); /* balanced (or more): no complaint */

	/* Context and finalizer work as on any object. */
	s = sq_semaphore_create(0);
	static int ctx;
	sq_set_context(s, &ctx);
	CHECK(sq_get_context(s) == &ctx);
	sq_release(s);
}

/* 1e6 uncontended pairs, zero futex calls, well under a second. */
static void
test_fast_path(void)
{
	sq_semaphore_t s = sq_semaphore_create(1);
	enum { PAIRS = 1000000 };
	long before = futex_calls;
	uint64_t t0 = sqt_now_ns();
	for (int i = 0; i < PAIRS; i++) {
		if (sq_semaphore_wait(s, SQ_TIME_FOREVER) != 0)
			break;
		sq_semaphore_signal(s);
	}
	uint64_t ns = sqt_now_ns() - t0;
	long calls = futex_calls - before;
	printf("semaphore: %d uncontended pairs in %.1f ms (%.1f ns/pair), "
			"%ld futex calls\n", PAIRS, ns / 1e6,
			(double)ns / PAIRS, calls);
	CHECK_EQ(calls, 0);
	CHECK(ns < 1000000000ull);

	/* Also with a count above 1 and a signal-first pattern. */
	sq_semaphore_t z = sq_semaphore_create(0);
	before = futex_calls;
	for (int i = 0; i < 1000; i++) {
		sq_semaphore_signal(z);
		sq_semaphore_signal(z);
		(void)sq_semaphore_wait(z, SQ_TIME_FOREVER);
		(void)sq_semaphore_wait(z, SQ_TIME_NOW);
	}
	CHECK_EQ(futex_calls - before, 0);
	/* The counter itself works: a contended wait does call the kernel. */
	before = futex_calls;
	CHECK(sq_semaphore_wait(z, in_ms(20)) != 0);
	CHECK(futex_calls - before >= 1);
	sq_release(z);
	sq_release(s);
}

/* A timed wait on an empty semaphore, monotonic and wall clock. */
static void
test_timeout(void)
{
	sq_semaphore_t s = sq_semaphore_create(0);
	uint64_t t0 = sqt_now_ns();
	intptr_t r = sq_semaphore_wait(s, in_ms(100));
	uint64_t ms = (sqt_now_ns() - t0) / 1000000;
	printf("semaphore: 100 ms timeout returned %ld after %" PRIu64
			" ms\n", (long)r, ms);
	CHECK(r != 0);
	CHECK(ms >= 90);
	CHECK(ms < 2000);

	t0 = sqt_now_ns();
	sq_time_t wall = sq_walltime(NULL, 100 * (int64_t)NSEC_PER_MSEC);
	r = sq_semaphore_wait(s, wall);
	ms = (sqt_now_ns() - t0) / 1000000;
	CHECK(r != 0);
	CHECK(ms >= 90);
	CHECK(ms < 2000);

	/* A deadline in the past times out at once. */
	t0 = sqt_now_ns();
	CHECK(sq_semaphore_wait(s, in_ms(-5)) != 0);
	CHECK((sqt_now_ns() - t0) / 1000000 < 1000);

	/* Timed-out waits gave their claims back: one signal, one unit. */
	CHECK_EQ(sq_semaphore_signal(s), 0);
	CHECK_EQ(sq_semaphore_wait(s, SQ_TIME_NOW), 0);
	CHECK(sq_semaphore_wait(s, SQ_TIME_NOW) != 0);
	sq_release(s);
}

/* One signal wakes exactly one of several waiters. */
static sq_semaphore_t wake_sema;
static int32_t wake_started, wake_returned;

static void *
wake_waiter(void *arg)
{
	__atomic_add_fetch(&wake_started, 1, __ATOMIC_SEQ_CST);
	if (sq_semaphore_wait(wake_sema, SQ_TIME_FOREVER) == 0)
		__atomic_add_fetch(&wake_returned, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static bool
poll_until(int32_t *p, int32_t value, long timeout_ms)
{
	for (long waited = 0; load32(p) != value && waited < timeout_ms;
			waited++)
		msleep(1);
	return load32(p) == value;
}

static void
test_wake_one(void)
{
	enum { WAITERS = 3 };
	pthread_t t[WAITERS];
	wake_sema = sq_semaphore_create(0);
	for (int i = 0; i < WAITERS; i++)
		pthread_create(&t[i], NULL, wake_waiter, NULL);
	CHECK(poll_until(&wake_started, WAITERS, 10000));
	msleep(50); /* let them reach the futex */

	intptr_t woke = sq_semaphore_signal(wake_sema);
	CHECK(poll_until(&wake_returned, 1, 10000));
	msleep(100);
	CHECK_EQ(load32(&wake_returned), 1); /* and only one */

	woke += sq_semaphore_signal(wake_sema);
	woke += sq_semaphore_signal(wake_sema);
	for (int i = 0; i < WAITERS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(load32(&wake_returned), WAITERS);
	CHECK(woke <= WAITERS);
	CHECK(sq_semaphore_wait(wake_sema, SQ_TIME_NOW) != 0);
	sq_release(wake_sema);
}

/* signal's result: non-zero when it woke a sleeping thread. */
static sq_semaphore_t report_sema;

static void *
report_signaller(void *arg)
{
	intptr_t *woke = arg;
	msleep(30); /* the main thread is asleep in wait by now */
	*woke = sq_semaphore_signal(report_sema);
	return NULL;
}

static void
test_signal_result(void)
{
	report_sema = sq_semaphore_create(0);
	bool saw_wake = false;
	for (int round = 0; round < 20 && !saw_wake; round++) {
		intptr_t woke = -1;
		pthread_t t;
		pthread_create(&t, NULL, report_signaller, &woke);
		CHECK_EQ(sq_semaphore_wait(report_sema, SQ_TIME_FOREVER), 0);
		pthread_join(t, NULL);
		saw_wake = woke != 0;
	}
	CHECK(saw_wake);
	sq_release(report_sema);
}

/* libdispatch's dispatch_sema: a semaphore of 1 as a lock over apply. */
enum { APPLY_ITERATIONS = 10000 };
static sq_semaphore_t apply_lock;
static long apply_counter; /* deliberately plain: the semaphore guards it */

static void
apply_locked_increment(void *ctx, size_t i)
{
	sq_semaphore_wait(apply_lock, SQ_TIME_FOREVER);
	apply_counter++;
	sq_semaphore_signal(apply_lock);
}

static void
test_lock_over_apply(void)
{
	apply_lock = sq_semaphore_create(1);
	sq_apply_f(APPLY_ITERATIONS,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0), NULL,
			apply_locked_increment);
	CHECK_EQ(apply_counter, APPLY_ITERATIONS);
	sq_release(apply_lock);
}

/* At most N holders at once (a semaphore guarding N file descriptors). */
enum { UNITS = 3, TASKS = 20 };
static sq_semaphore_t resource_sema, resource_done;
static int32_t holders, max_holders, completed;

static void
use_resource(void *ctx)
{
	long hold_ms = (long)(intptr_t)ctx;
	sq_semaphore_wait(resource_sema, SQ_TIME_FOREVER);
	int32_t now = __atomic_add_fetch(&holders, 1, __ATOMIC_SEQ_CST);
	int32_t max = __atomic_load_n(&max_holders, __ATOMIC_SEQ_CST);
	while (now > max && !__atomic_compare_exchange_n(&max_holders, &max,
			now, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	char path[] = "/tmp/sqtest-semaXXXXXX";
	int fd = mkstemp(path);
	if (fd >= 0) {
		unlink(path);
		msleep(hold_ms);
		close(fd);
		__atomic_add_fetch(&completed, 1, __ATOMIC_SEQ_CST);
	}
	__atomic_sub_fetch(&holders, 1, __ATOMIC_SEQ_CST);
	sq_semaphore_signal(resource_sema);
	sq_semaphore_signal(resource_done);
}

static void *
use_resource_thread(void *arg)
{
	use_resource((void *)(intptr_t)20);
	return NULL;
}

static void
test_limit_resource(void)
{
	resource_sema = sq_semaphore_create(UNITS);
	resource_done = sq_semaphore_create(0);

	/* On the global queue, where all the tasks could run at once: the
	 * semaphore is what limits them. */
	sq_queue_t global = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	for (int i = 0; i < TASKS; i++)
		sq_async_f(global, (void *)(intptr_t)10, use_resource);
	for (int i = 0; i < TASKS; i++)
		CHECK_EQ(sq_semaphore_wait(resource_done, in_ms(10000)), 0);
	printf("semaphore: %d units, %d tasks on the global queue: at most "
			"%d holders at once\n", UNITS, TASKS,
			(int)load32(&max_holders));
	CHECK_EQ(load32(&completed), TASKS);
	CHECK(load32(&max_holders) <= UNITS);
	CHECK(load32(&max_holders) >= 1);
	/* With UNITS or more CPUs the pool runs at least UNITS tasks. */
	if (sysconf(_SC_NPROCESSORS_ONLN) >= UNITS)
		CHECK_EQ(load32(&max_holders), UNITS);

	/* With one thread per task, all UNITS are held at once. */
	max_holders = 0;
	completed = 0;
	sqt_run_threads(TASKS, use_resource_thread, NULL, 0);
	for (int i = 0; i < TASKS; i++)
		CHECK_EQ(sq_semaphore_wait(resource_done, SQ_TIME_NOW), 0);
	CHECK_EQ(load32(&completed), TASKS);
	CHECK_EQ(load32(&max_holders), UNITS);

	sq_release(resource_done);
	sq_release(resource_sema); /* every unit given back: no complaint */
}

/* Ping-pong between two threads. */
enum { ROUND_TRIPS = 10000 };
static sq_semaphore_t ping, pong;
static long pongs;

static void *
ponger(void *arg)
{
	for (int i = 0; i < ROUND_TRIPS; i++) {
		if (sq_semaphore_wait(ping, in_ms(10000)) != 0)
			break;
		pongs++;
		sq_semaphore_signal(pong);
	}
	return NULL;
}

static void
test_ping_pong(void)
{
	ping = sq_semaphore_create(0);
	pong = sq_semaphore_create(0);
	pthread_t t;
	uint64_t t0 = sqt_now_ns();
	pthread_create(&t, NULL, ponger, NULL);
	int trips = 0;
	for (int i = 0; i < ROUND_TRIPS; i++) {
		sq_semaphore_signal(ping);
		if (sq_semaphore_wait(pong, in_ms(10000)) != 0)
			break;
		trips++;
	}
	pthread_join(t, NULL);
	uint64_t ns = sqt_now_ns() - t0;
	printf("semaphore: %d ping-pong round trips in %.1f ms "
			"(%.2f us each)\n", trips, ns / 1e6,
			(double)ns / 1000 / ROUND_TRIPS);
	CHECK_EQ(trips, ROUND_TRIPS);
	CHECK_EQ(pongs, ROUND_TRIPS);
	sq_release(ping);
	sq_release(pong);
}

/*
 * Timeouts racing signals: short timed waits on several threads while
 * others signal. Whatever the interleaving, units are neither lost nor
 * duplicated: units left == signals - successful waits. The one-to-one
 * round makes "timed out, but a signal already counted us" likelier.
 */
enum { RACE_OPS = 20000 };
static sq_semaphore_t race_sema;
static int64_t race_acquired;
static int race_waiters;

static void *
race_waiter(void *arg)
{
	long got = 0;
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int i = 0; i < RACE_OPS; i++) {
		int64_t ns = (int64_t)(rand_r(&seed) % 50) * 1000;
		if (sq_semaphore_wait(race_sema, sq_time(SQ_TIME_NOW, ns)) == 0)
			got++;
	}
	__atomic_add_fetch(&race_acquired, got, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *
race_signaller(void *arg)
{
	for (int i = 0; i < RACE_OPS; i++) {
		sq_semaphore_signal(race_sema);
		for (volatile int spin = 0; spin < (i % 9) * 30; spin++)
			; /* vary the moment of the next signal */
	}
	return NULL;
}

static void *
race_thread(void *arg)
{
	intptr_t i = (intptr_t)arg;
	return i < race_waiters ? race_waiter((void *)(i + 1))
			: race_signaller(NULL);
}

static void
timeout_race(int waiters, int signallers)
{
	pthread_t t[16];
	race_sema = sq_semaphore_create(0);
	race_acquired = 0;
	race_waiters = waiters;
	for (intptr_t i = 0; i < waiters + signallers; i++)
		pthread_create(&t[i], NULL, race_thread, (void *)i);
	for (int i = 0; i < waiters + signallers; i++)
		pthread_join(t[i], NULL);
	int64_t left = 0;
	while (sq_semaphore_wait(race_sema, SQ_TIME_NOW) == 0)
		left++;
	int64_t signals = (int64_t)signallers * RACE_OPS;
	printf("semaphore: timeout race (%d waiters, %d signallers): %" PRId64
			" taken by timed waits, %" PRId64 " left, of %" PRId64
			" signals\n", waiters, signallers, race_acquired, left,
			signals);
	CHECK_EQ(race_acquired + left, signals);
	/* Put them back so the release below is balanced. */
	for (int64_t i = 0; i < left; i++)
		sq_semaphore_signal(race_sema);
	sq_release(race_sema);
}

static void
test_timeout_race(void)
{
	timeout_race(4, 2);
	timeout_race(1, 1);
}

/* ---- misuse, each in a child process ---- */

/*
 * The release comes from a signal handler while the only thread sleeps in
 * wait: no thread is started after fork (ThreadSanitizer forbids it).
 */
static sq_semaphore_t doomed;

static void
release_from_handler(int signo)
{
	sq_release(doomed);
}

static void
release_while_waiting(void *unused)
{
	doomed = sq_semaphore_create(0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = release_from_handler;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 0 }, { 0, 200000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	(void)sq_semaphore_wait(doomed, SQ_TIME_FOREVER);
}

static void
release_with_unit_taken(void *unused)
{
	sq_semaphore_t s = sq_semaphore_create(1);
	(void)sq_semaphore_wait(s, SQ_TIME_FOREVER);
	sq_release(s);
}

static void
test_misuse(void)
{
	CHECK_CRASH(release_while_waiting, NULL,
			"SwiftQueues: sq_release: semaphore destroyed "
			"while in use");
	CHECK_CRASH(release_with_unit_taken, NULL,
			"SwiftQueues: sq_release: semaphore destroyed "
			"while in use");
}

int
main(void)
{
	real_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (real_syscall == NULL) {
		fprintf(stderr, "dlsym(syscall): %s\n", dlerror());
		return 2;
	}
	test_create();
	test_fast_path();
	test_timeout();
	test_wake_one();
	test_signal_result();
	test_lock_over_apply();
	test_limit_resource();
	test_ping_pong();
	test_timeout_race();
	test_misuse();
	return sqt_finish("semaphore");
}
