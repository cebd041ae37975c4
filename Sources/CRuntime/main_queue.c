/*
 * SwiftQueues — the main queue's thread side: sq_main, the non-blocking
 * drain and its eventfd, and the run-until call for tests and embedders.
 *
 * The main queue is a serial queue whose "target" is the main thread: when
 * it gets work, its wake-up makes an eventfd readable instead of pushing it
 * onto a root queue, and only the main thread drains it. Suspend, resume
 * and set_context are ignored on it (seed 002 says so of global queues; we
 * treat the main queue alike so the main thread can never be left stuck).
 *
 * sq_main_queue_run_until waits for a condition that other threads make
 * true. Three things wake it to look again: work for the main queue, a
 * job that finishes on a worker while it waits (it arms a flag that the
 * worker loop reads after each job, pool.c), and sq_main_queue_wakeup
 * from any thread. Each writes the eventfd; the runner empties it before
 * each look at the condition, so a wake-up that comes after the look
 * finds it empty-and-polled, and one that comes before it is seen by it.
 */
#include "queue_internal.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>

static int _sq_main_fd = -1;
static sq_once_t _sq_main_fd_once;

static void
_sq_main_fd_create(void *unused)
{
	_sq_main_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (_sq_main_fd < 0)
		_sq_client_crash("sq_get_main_queue", "eventfd: %s",
				strerror(errno));
}

static inline int
_sq_main_event_fd(void)
{
	sq_once_f(&_sq_main_fd_once, NULL, _sq_main_fd_create);
	return _sq_main_fd;
}

bool
_sq_is_main_thread(void)
{
	return gettid() == getpid();
}

void
_sq_main_queue_wakeup(void)
{
	uint64_t one = 1;
	ssize_t n = write(_sq_main_event_fd(), &one, sizeof(one));
	(void)n; /* EAGAIN: the counter is already non-zero, readable */
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
	/* Only the first job to see the flag writes the eventfd. */
	if (__atomic_exchange_n(&_sq_main_runner.armed, 0, __ATOMIC_SEQ_CST))
		_sq_main_queue_wakeup();
}

/* Empties the eventfd: the wake-ups so far have been seen. */
static void
_sq_main_fd_clear(void)
{
	uint64_t count;
	ssize_t n = read(_sq_main_event_fd(), &count, sizeof(count));
	(void)n; /* EAGAIN: it was empty */
}

int
sq_main_queue_fd(void)
{
	return _sq_main_event_fd();
}

/* Runs what waits on the main queue (the eventfd already emptied). */
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
	_sq_main_fd_clear();
	return _sq_main_queue_drain_queued();
}

/* Waits until the eventfd is readable or the deadline passes. */
static void
_sq_main_wait(sq_time_t deadline)
{
	uint64_t ns = sq_time_nanoseconds_until(deadline);
	int timeout_ms = ns == UINT64_MAX ? -1
			: (int)((ns + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
	struct pollfd pfd = { .fd = _sq_main_event_fd(), .events = POLLIN };
	(void)poll(&pfd, 1, timeout_ms);
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
		/* Emptied before the look: a wake-up from now on is
		 * seen by the poll below. */
		_sq_main_fd_clear();
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
 * thread waits on it; the child gets its own on first use. */
void
_sq_main_queue_atfork_child(void)
{
	if (_sq_main_fd >= 0)
		close(_sq_main_fd);
	_sq_main_fd = -1;
	_sq_main_fd_once = 0;
}
