/*
 * Helpers shared by the queue tests (test_queue_*.c, test_apply.c):
 * sanitizer detection and scaling, sleeping, bounded waits, thread counts.
 *
 * Waits in the tests use POSIX semaphores and C11 atomics rather than
 * sq_semaphore / sq_group, so a queue test fails for a queue bug only.
 * Every wait has a timeout: a runtime bug shows as a failed check, never
 * as a hung test program.
 */
#ifndef SQTEST_QUEUE_HELPERS_H
#define SQTEST_QUEUE_HELPERS_H

#include "sqtest.h"

#include <dirent.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#if defined(__SANITIZE_THREAD__)
#define SQT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SQT_TSAN 1
#endif
#endif
#ifndef SQT_TSAN
#define SQT_TSAN 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define SQT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SQT_ASAN 1
#endif
#endif
#ifndef SQT_ASAN
#define SQT_ASAN 0
#endif

#define SQT_SANITIZED (SQT_TSAN || SQT_ASAN)

/* `normal` normally, `sanitized` under TSan or ASan. */
#define SQT_SCALE(normal, sanitized) (SQT_SANITIZED ? (sanitized) : (normal))

static inline void
sqt_sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

static inline void
sqt_sleep_us(unsigned us)
{
	struct timespec ts = { (time_t)(us / 1000000),
		(long)(us % 1000000) * 1000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

static inline double
sqt_ms_since(uint64_t start_ns)
{
	return (double)(sqt_now_ns() - start_ns) / 1e6;
}

/* Waits until *value >= target or `timeout_ms` passes; true if reached. */
static inline bool
sqt_wait_atleast(atomic_long *value, long target, unsigned timeout_ms)
{
	uint64_t deadline = sqt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (atomic_load(value) < target) {
		if (sqt_now_ns() > deadline)
			return false;
		sqt_sleep_us(200);
	}
	return true;
}

/* Same for an atomic_int. */
static inline bool
sqt_wait_int(atomic_int *value, int target, unsigned timeout_ms)
{
	uint64_t deadline = sqt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (atomic_load(value) < target) {
		if (sqt_now_ns() > deadline)
			return false;
		sqt_sleep_us(200);
	}
	return true;
}

/* sem_wait with a timeout (CLOCK_REALTIME, as sem_timedwait wants). */
static inline bool
sqt_sem_wait_ms(sem_t *sem, unsigned timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	for (;;) {
		if (sem_timedwait(sem, &ts) == 0)
			return true;
		if (errno != EINTR)
			return false;
	}
}

static inline pid_t
sqt_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static inline bool
sqt_on_main_thread(void)
{
	return sqt_gettid() == getpid();
}

/* The number of threads in this process (entries of /proc/self/task). */
static inline int
sqt_thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* The pool's width: workers it keeps running (the usable CPUs, or
 * SQ_WORKERS). Thread-count and parallelism checks scale with it, so the
 * suite also holds when run with SQ_WORKERS=8 on a small machine. */
static inline int
sqt_pool_width(void)
{
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	return st.width < 1 ? 1 : (int)st.width;
}

/* Keeps the maximum of a value seen by several threads. */
static inline void
sqt_atomic_max(atomic_int *max, int value)
{
	int old = atomic_load(max);
	while (value > old && !atomic_compare_exchange_weak(max, &old, value)) {
	}
}

/*
 * Samples the process's thread count in the background, keeping the peak,
 * until stopped.
 */
struct sqt_thread_monitor {
	pthread_t thread;
	atomic_int peak;
	atomic_bool stop;
};

static inline void *
sqt_thread_monitor_main(void *arg)
{
	struct sqt_thread_monitor *m = arg;
	while (!atomic_load(&m->stop)) {
		sqt_atomic_max(&m->peak, sqt_thread_count());
		sqt_sleep_ms(2);
	}
	return NULL;
}

static inline void
sqt_thread_monitor_start(struct sqt_thread_monitor *m)
{
	atomic_init(&m->peak, sqt_thread_count());
	atomic_init(&m->stop, false);
	if (pthread_create(&m->thread, NULL, sqt_thread_monitor_main, m) != 0) {
		perror("pthread_create");
		exit(2);
	}
}

/* Stops the monitor; returns the peak thread count (the monitor included). */
static inline int
sqt_thread_monitor_stop(struct sqt_thread_monitor *m)
{
	atomic_store(&m->stop, true);
	pthread_join(m->thread, NULL);
	return atomic_load(&m->peak);
}

/* The name of the calling thread ("" if it cannot be read). */
static inline void
sqt_thread_name(char out[16])
{
	out[0] = '\0';
	if (pthread_getname_np(pthread_self(), out, 16) != 0)
		out[0] = '\0';
}

/*
 * Two tasks that wait for each other (each posts its side, then waits up
 * to 5 s for the other's): run on two serial queues, both succeed only if
 * the pool runs them at the same time. `ok` counts the sides that met.
 */
struct handshake {
	sem_t a_to_b, b_to_a;
	atomic_int ok;
	sem_t done;
};

static inline void
handshake_a(void *arg)
{
	struct handshake *h = arg;
	sem_post(&h->a_to_b);
	if (sqt_sem_wait_ms(&h->b_to_a, 5000))
		atomic_fetch_add(&h->ok, 1);
	sem_post(&h->done);
}

static inline void
handshake_b(void *arg)
{
	struct handshake *h = arg;
	sem_post(&h->b_to_a);
	if (sqt_sem_wait_ms(&h->a_to_b, 5000))
		atomic_fetch_add(&h->ok, 1);
	sem_post(&h->done);
}

/*
 * The tail of a drain, raced: a short task X raises `x_ran` and spins a
 * few hundred loop turns before it returns; the submitting thread waits
 * for the flag, then submits task A and runs B with a synchronous call
 * (the caller's `run_b`). Whatever the spin, A is queued at some point of
 * the end of X's drain: while the drainer still runs X, between its last
 * look at the queue and its giving the queue up, or after. B must start
 * only once A has finished, since A was queued first on the same thread.
 * A random spin of 0-400 turns lands A between the drainer's last look
 * and its giving up the queue in about 1% of the rounds, the window in
 * which a caller that takes an idle queue without looking at its jobs
 * overtakes them. Returns the rounds in which B started before A was
 * done.
 */
struct sqt_tail_race {
	unsigned tail_spins;
	atomic_int x_ran;
	atomic_int a_done;
	atomic_int violations;
};

static inline void
sqt_tail_x(void *arg)
{
	struct sqt_tail_race *r = arg;
	atomic_store(&r->x_ran, 1);
	for (volatile unsigned i = 0; i < r->tail_spins; i++) {
	}
}

static inline void
sqt_tail_a(void *arg)
{
	atomic_store(&((struct sqt_tail_race *)arg)->a_done, 1);
}

static inline void
sqt_tail_b(void *arg)
{
	struct sqt_tail_race *r = arg;
	if (!atomic_load(&r->a_done))
		atomic_fetch_add(&r->violations, 1);
}

static inline int
sqt_tail_race(int rounds, sq_queue_t xq, sq_queue_t aq, bool a_barrier,
		void (*run_b)(void *ctx, struct sqt_tail_race *r), void *ctx)
{
	struct sqt_tail_race r;
	uint64_t rng = 0x2545f4914f6cdd1dull;
	atomic_init(&r.violations, 0);
	for (int i = 0; i < rounds; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		r.tail_spins = (unsigned)(rng % 400);
		atomic_init(&r.x_ran, 0);
		atomic_init(&r.a_done, 0);
		sq_async_f(xq, &r, sqt_tail_x);
		/* spinning, to act at once; yielding after a while, so that a
		 * loaded machine still runs X */
		for (unsigned spins = 0; !atomic_load(&r.x_ran); spins++)
			if (spins > 20000)
				sched_yield();
		if (a_barrier)
			sq_barrier_async_f(aq, &r, sqt_tail_a);
		else
			sq_async_f(aq, &r, sqt_tail_a);
		run_b(ctx, &r);
		/* A overtaken: let it run before the round's state goes. */
		while (!atomic_load(&r.a_done))
			sqt_sleep_us(50);
	}
	return atomic_load(&r.violations);
}

/* Fork-join tests: fib(n) as the leaves' work (recursive, so it costs
 * time) and the value every tree must add up to (a loop). */
static inline long
sqt_fib_serial(int n)
{
	return n < 2 ? n : sqt_fib_serial(n - 1) + sqt_fib_serial(n - 2);
}

static inline long
sqt_fib_expected(int n)
{
	long a = 0, b = 1;
	for (int i = 0; i < n; i++) {
		long t = a + b;
		a = b;
		b = t;
	}
	return a;
}

#endif /* SQTEST_QUEUE_HELPERS_H */
