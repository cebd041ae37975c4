/*
 * SwiftQueues — the main queue's thread side: sq_main, the non-blocking
 * drain and its eventfd, and the run-until call for tests and embedders.
 *
 * The main queue is a serial queue whose "target" is the main thread: when
 * it gets work, its wake-up wakes the main thread (and makes the eventfd
 * readable, once a program asked for one) instead of pushing it onto a
 * root queue, and only the main thread drains it. Suspend, resume
 * and set_context are ignored on it (as libdispatch documents for the
 * global queues; the main queue is treated alike so the main thread can
 * never be left stuck).
 *
 * sq_main_queue_run_until waits for a condition that other threads make
 * true. Three things wake it to look again: work for the main queue, a
 * job that finishes on a worker while it waits (it arms a flag that the
 * worker loop reads after each job, pool.c), and sq_main_queue_wakeup
 * from any thread. Each is a wake-up (below); the runner takes the
 * wake-up before each look at the condition, so one that comes after the
 * look is still pending when it goes to sleep, and one that comes before
 * it is seen by the look.
 */
#include "queue_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>

/*
 * Wake-ups. The main thread's own waits (sq_main, run_until) sleep on a
 * futex word, which needs no descriptor: the main queue works with every
 * descriptor in use. The eventfd exists only once a program asks for it
 * (sq_main_queue_fd, to poll it in its own loop); from then on wake-ups
 * also make it readable.
 *
 * `signal` is 1 from a wake-up until the next drain takes it. A wake-up
 * stores it, then looks for the eventfd and for a sleeper; the main thread
 * (or the eventfd's maker) stores its side, then looks at `signal`: all
 * sequentially consistent, so one of each pair sees the other.
 */
static struct {
	uint32_t signal;   /* futex word */
	uint32_t sleeping; /* 1 while the main thread sleeps on it */
	int fd;            /* the eventfd, or -1 */
} _sq_main_wake = { .fd = -1 };

static pthread_mutex_t _sq_main_fd_lock = PTHREAD_MUTEX_INITIALIZER;

bool
_sq_is_main_thread(void)
{
	return gettid() == getpid();
}

static void
_sq_main_fd_signal(int fd)
{
	uint64_t one = 1;
	ssize_t n = write(fd, &one, sizeof(one));
	(void)n; /* EAGAIN: the counter is already non-zero, readable */
}

void
_sq_main_queue_wakeup(void)
{
	__atomic_store_n(&_sq_main_wake.signal, 1, __ATOMIC_SEQ_CST);
	int fd = __atomic_load_n(&_sq_main_wake.fd, __ATOMIC_SEQ_CST);
	if (fd >= 0)
		_sq_main_fd_signal(fd);
	if (__atomic_load_n(&_sq_main_wake.sleeping, __ATOMIC_SEQ_CST))
		_sq_futex_wake(&_sq_main_wake.signal, 1);
	/* Main-queue work starts no task until the main thread drains it:
	 * a watchdog asleep until a task starts must hear of it. */
	if (_sq_watching())
		_sq_watch_work_queued();
}

int
sq_main_queue_fd(void)
{
	int fd = __atomic_load_n(&_sq_main_wake.fd, __ATOMIC_SEQ_CST);
	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&_sq_main_fd_lock);
	fd = _sq_main_wake.fd;
	if (fd < 0) {
		fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fd >= 0) {
			__atomic_store_n(&_sq_main_wake.fd, fd,
					__ATOMIC_SEQ_CST);
			/* A wake-up that came before saw no descriptor. */
			if (__atomic_load_n(&_sq_main_wake.signal,
					__ATOMIC_SEQ_CST))
				_sq_main_fd_signal(fd);
		}
	}
	pthread_mutex_unlock(&_sq_main_fd_lock);
	return fd; /* -1 with errno (EMFILE, ENFILE): ask again later */
}

void
sq_main_queue_wakeup(void)
{
	_sq_main_queue_wakeup();
}

/* armed is 1 while sq_main_queue_run_until waits on a condition: the next
 * job to finish on a worker takes it to 0 and wakes the runner. */
struct sq_main_runner_s _sq_main_runner;

void
_sq_main_runner_wake_slow(void)
{
	/* Only the first job to see the flag wakes the main thread. */
	if (__atomic_exchange_n(&_sq_main_runner.armed, 0, __ATOMIC_SEQ_CST))
		_sq_main_queue_wakeup();
}

/* Takes the pending wake-up (and empties the eventfd, if there is one):
 * one that comes after this is for something the caller may not see, and
 * stays for its next wait. */
static void
_sq_main_wake_take(void)
{
	__atomic_store_n(&_sq_main_wake.signal, 0, __ATOMIC_SEQ_CST);
	int fd = __atomic_load_n(&_sq_main_wake.fd, __ATOMIC_SEQ_CST);
	if (fd >= 0) {
		uint64_t count;
		ssize_t n = read(fd, &count, sizeof(count));
		(void)n; /* EAGAIN: it was empty */
	}
}

/* Runs what waits on the main queue (the wake-up already taken). */
static size_t
_sq_main_queue_drain_queued(void)
{
	/* Re-entered from a main-queue task: the outer drain goes on. */
	for (struct sq_frame_s *f = _sq_current_frame; f; f = f->prev)
		if (f->queue == &_sq_main_queue)
			return 0;
	/* ENQUEUED was set by the wake-up that signalled the eventfd: the
	 * main thread is the drainer that wake-up was meant for. */
	uint64_t s = __atomic_load_n(&_sq_main_queue.state, __ATOMIC_ACQUIRE);
	if (!(s & SQ_STATE_ENQUEUED))
		return 0;
	return _sq_queue_drain(&_sq_main_queue, 1024);
}

size_t
sq_main_queue_drain(void)
{
	if (!_sq_is_main_thread())
		_sq_client_crash("sq_main_queue_drain", "called on a thread "
				"other than the main thread");
	_sq_main_wake_take();
	return _sq_main_queue_drain_queued();
}

/* Waits until a wake-up comes or the deadline passes. */
static void
_sq_main_wait(sq_time_t deadline)
{
	__atomic_store_n(&_sq_main_wake.sleeping, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&_sq_main_wake.signal, __ATOMIC_SEQ_CST) == 0)
		(void)_sq_futex_wait_until(&_sq_main_wake.signal, 0, deadline);
	__atomic_store_n(&_sq_main_wake.sleeping, 0, __ATOMIC_RELAXED);
}

void
sq_main(void)
{
	if (!_sq_is_main_thread())
		_sq_client_crash("sq_main", "called on a thread other than "
				"the main thread");
	for (;;) {
		sq_main_queue_drain();
		_sq_main_wait(SQ_TIME_FOREVER);
	}
}

bool
sq_main_queue_run_until(sq_time_t deadline, bool (*condition)(void *),
		void *context)
{
	if (!_sq_is_main_thread())
		_sq_client_crash("sq_main_queue_run_until", "called on a thread "
				"other than the main thread");
	bool met = false;
	for (;;) {
		if (condition) {
			/* Armed, then a full fence, then the look: a worker
			 * whose job made the condition true either read the
			 * flag after its job's writes were visible here (and
			 * wakes us), or those writes are seen by this look
			 * (pool.c reads the flag after each job, and again
			 * after a fence before it parks). */
			__atomic_store_n(&_sq_main_runner.armed, 1,
					__ATOMIC_SEQ_CST);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
		}
		/* Taken before the look: a wake-up from now on ends the
		 * wait below at once. */
		_sq_main_wake_take();
		if (condition && condition(context)) {
			met = true;
			break;
		}
		if (sq_time_nanoseconds_until(deadline) == 0)
			break;
		if (_sq_main_queue_drain_queued() > 0)
			continue;
		_sq_main_wait(deadline);
	}
	if (condition)
		__atomic_store_n(&_sq_main_runner.armed, 0, __ATOMIC_RELAXED);
	return met;
}

/* fork() child (fork.c): the eventfd is shared with the parent, whose main
 * thread waits on it; the child gets its own when it asks. */
void
_sq_main_queue_atfork_child(void)
{
	if (_sq_main_wake.fd >= 0)
		close(_sq_main_wake.fd);
	_sq_main_wake.fd = -1;
	_sq_main_wake.signal = 0;
	_sq_main_wake.sleeping = 0;
	pthread_mutex_init(&_sq_main_fd_lock, NULL);
}
