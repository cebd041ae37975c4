/*
 * SwiftQueues — internal definitions shared by the C core.
 * Not installed; nothing here is public API.
 */
#ifndef SWIFTQUEUES_INTERNAL_H
#define SWIFTQUEUES_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <swiftqueues.h>

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SQ_INTERNAL __attribute__((visibility("hidden")))
#define SQ_NOINLINE __attribute__((noinline))
#define SQ_NORETURN __attribute__((noreturn))
#define SQ_CACHELINE 64
/* Thread-locals in the initial-exec model: a plain %fs-relative access
 * even inside libswiftqueues.so, instead of a __tls_get_addr call. */
#define SQ_TLS __thread __attribute__((tls_model("initial-exec")))

/*
 * Reports a programming error in the caller and stops the process:
 * prints "SwiftQueues: <call>: <message>" on one line on stderr, then aborts.
 */
SQ_INTERNAL SQ_NORETURN __attribute__((format(printf, 2, 3))) void
_sq_client_crash(const char *call, const char *format, ...);

/* Stops the process when a required function pointer is NULL. */
#define _SQ_REQUIRE_FUNCTION(call, fn)                                         \
	do {                                                                   \
		if (SQ_UNLIKELY((fn) == NULL))                                 \
			_sq_client_crash(call, "function pointer is NULL");    \
	} while (0)

/*
 * ThreadSanitizer annotations. liburcu is not instrumented, so TSan cannot
 * see the ordering its exchanges provide; hand-offs through it (a node
 * pushed by one thread and popped by another) announce the edge themselves.
 */
#if defined(__SANITIZE_THREAD__)
#define SQ_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SQ_TSAN 1
#endif
#endif
#ifdef SQ_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define _sq_tsan_release(addr) __tsan_release(addr)
#define _sq_tsan_acquire(addr) __tsan_acquire(addr)
#else
#define _sq_tsan_release(addr) ((void)(addr))
#define _sq_tsan_acquire(addr) ((void)(addr))
#endif

/*
 * Chaos builds (-DSQ_CHAOS, `make test-chaos`): SQ_CHAOS_POINT() between the
 * steps of the pool's park / wake / search protocol and of the queue state
 * word's transitions injects, at random, a sched_yield, a short spin or a
 * micro-sleep, to widen race windows. Nothing in other builds.
 */
#ifdef SQ_CHAOS
SQ_INTERNAL void _sq_chaos_point(void);

#define SQ_CHAOS_POINT() _sq_chaos_point()
#else
#define SQ_CHAOS_POINT() ((void)0)
#endif

/* A worker points this at its own flag, which the spin lock's slow path
 * sets while the thread sleeps for a lock: such a worker waits for the
 * lock's holder, a runnable thread, not for the outside world, and the
 * pool's monitor does not count it as blocked (pool_monitor.c). NULL on
 * other threads. */
SQ_INTERNAL extern SQ_TLS uint32_t *_sq_lock_sleep_flag;

/* The pause instruction for spin-wait loops. */
SQ_INLINE void
_sq_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* Sleeps while *addr == expected (or until woken / a timeout expires).
 * `timeout` is relative, NULL waits forever. Private futex: the word never
 * crosses a process boundary. */
SQ_INLINE int
_sq_futex_wait(uint32_t *addr, uint32_t expected, const struct timespec *timeout)
{
	return (int)syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected,
			timeout, NULL, 0);
}

/* Wakes up to `count` threads sleeping on addr. */
SQ_INLINE int
_sq_futex_wake(uint32_t *addr, int count)
{
	return (int)syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, count,
			NULL, NULL, 0);
}

/*
 * Sleeps while *addr == expected, until woken or `deadline` (an sq_time_t:
 * monotonic, wall-clock or FOREVER) passes. Returns 0 when woken (or the
 * value already differed, or a signal interrupted: callers re-check their
 * condition), ETIMEDOUT once the deadline has passed. The deadline is
 * absolute, so a wall-clock jump does not stretch a monotonic wait.
 */
SQ_INLINE int
_sq_futex_wait_until(uint32_t *addr, uint32_t expected, sq_time_t deadline)
{
	if (deadline == SQ_TIME_FOREVER) {
		_sq_futex_wait(addr, expected, NULL);
		return 0;
	}
	int op = FUTEX_WAIT_BITSET_PRIVATE;
	uint64_t ns;
	struct timespec now;
	if (deadline == SQ_TIME_NOW || deadline == SQ_WALLTIME_NOW)
		return ETIMEDOUT;
	if (deadline & SQ_TIME_WALL_FLAG) {
		op |= FUTEX_CLOCK_REALTIME;
		ns = deadline & ~SQ_TIME_WALL_FLAG;
		clock_gettime(CLOCK_REALTIME, &now);
	} else {
		ns = deadline;
		clock_gettime(CLOCK_MONOTONIC, &now);
	}
	if ((uint64_t)now.tv_sec * NSEC_PER_SEC + (uint64_t)now.tv_nsec >= ns)
		return ETIMEDOUT;
	struct timespec abs = {
		.tv_sec = (time_t)(ns / NSEC_PER_SEC),
		.tv_nsec = (long)(ns % NSEC_PER_SEC),
	};
	if (syscall(SYS_futex, addr, op, expected, &abs, NULL,
			FUTEX_BITSET_MATCH_ANY) == -1 && errno == ETIMEDOUT)
		return ETIMEDOUT;
	return 0;
}

/* Reads CLOCK_MONOTONIC in nanoseconds. */
SQ_INLINE uint64_t
_sq_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Reads CLOCK_REALTIME in nanoseconds since the epoch. */
SQ_INLINE uint64_t
_sq_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/*
 * Adaptive spin budgets (the pool's idle spin, semaphore waits), in ns:
 * doubled, from `min` up to `max`, when spinning paid or would have (work
 * came soon after a sleep began); halved when a spin found nothing, and 0
 * (no spin) below `min`. Relaxed: a budget is a hint, racing updates only
 * blur it.
 */
SQ_INLINE void
_sq_spin_budget_grow(uint32_t *budget, uint32_t min, uint32_t max)
{
	uint32_t b = __atomic_load_n(budget, __ATOMIC_RELAXED);
	b = b < min ? min : b * 2;
	__atomic_store_n(budget, b > max ? max : b, __ATOMIC_RELAXED);
}

SQ_INLINE void
_sq_spin_budget_shrink(uint32_t *budget, uint32_t spent, uint32_t min)
{
	__atomic_store_n(budget, spent / 2 < min ? 0 : spent / 2,
			__ATOMIC_RELAXED);
}

/* The CPUs this process may use (affinity, cgroup quota), computed on the
 * first call (pool.c). */
SQ_INTERNAL int _sq_usable_cpus(void);

/*
 * Starts a detached thread for the runtime besides the workers (the event
 * loop's manager, the signal watcher, an I/O thread), with every
 * asynchronous signal blocked; stack_size 0 is the default. When the
 * system refuses a thread (EAGAIN), the worker pool gives back an idle
 * worker, if it has more than one, and the creation is tried again.
 * Returns 0 or the error (pool.c).
 */
SQ_INTERNAL int _sq_thread_start(void *(*main)(void *), void *arg,
		size_t stack_size);

/* pthread_create with the runtime threads' signal mask (every asynchronous
 * signal blocked but SIGPROF; faults deliverable), at the caller's CPU
 * priority; no retry. For a thread started while the pool itself starts
 * (the watchdog), where _sq_thread_start cannot be used. Returns 0 or the
 * error (pool.c). */
SQ_INTERNAL int _sq_thread_create_here(const pthread_attr_t *attr,
		void *(*main)(void *), void *arg);

/*
 * Something the runtime could not start for want of a descriptor or a
 * thread, and that work waits for (the event loop, for an sq_after): the
 * pool's monitor calls `retry` every 10 ms until it returns true. A few
 * kinds at most; asking again for the same function is a no-op (pool.c).
 */
SQ_INTERNAL void _sq_pool_retry_later(bool (*retry)(void));

/* fork() child resets (fork.c calls them; each in its own file): the
 * worker pool, the I/O thread pool and open-file slots, the main queue's
 * eventfd. */
SQ_INTERNAL void _sq_pool_atfork_child(void);
SQ_INTERNAL void _sq_io_atfork_child(void);
SQ_INTERNAL void _sq_main_queue_atfork_child(void);

#include "object_internal.h"

/* A wait of the runtime's (sq_sync, semaphores, groups, work items, apply,
 * synchronous I/O) is about to put the calling thread to sleep, and has
 * ended: a worker announces it, so that its queued jobs go to other
 * threads and another thread runs in its place at once (pool_block.c, "Blocked
 * workers"). Nothing on other threads. Nest. */
SQ_INTERNAL void _sq_pool_block_begin(bool sync);
SQ_INTERNAL void _sq_pool_block_end(void);
/* A worker about to wait forever for `arg` runs, newest first, the
 * continuations its current job queued on its own ring that are part of
 * what it waits for (`mine`), until done(arg) (pool_block.c, "Waiting helps").
 * Returns whether it ran any. */
struct sq_cont_s;
struct sq_job_s;
/* Whether nobody is likely to take `job` soon: the pool is saturated, or
 * it waits in the calling worker's own slot or ring (pool.c). */
SQ_INTERNAL bool _sq_pool_holds(struct sq_job_s *job);
SQ_INTERNAL bool _sq_pool_help(bool (*done)(void *),
		bool (*mine)(const struct sq_cont_s *, void *), void *arg);

#endif /* SWIFTQUEUES_INTERNAL_H */
