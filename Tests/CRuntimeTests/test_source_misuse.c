/*
 * Source misuse and bad input.
 *
 * Misuse stops the process with one line naming the call (each case in a
 * child, via CHECK_CRASH): sq_source_set_timer on a source that is not a
 * timer, over-resume, resume / merge / suspend of a released source,
 * over-release, a source call on an object that is not a source, NULL.
 *
 * Failures of the outside world return NULL with errno and leave the
 * runtime working: bad descriptors (EBADF), unknown mask bits and bad
 * signal numbers (EINVAL), process events Linux cannot report (ENOTSUP) —
 * then a data source, a timer and an sq_after still deliver.
 *
 * The error policy (docs/ARCHITECTURE.md): every misuse has a test that
 * runs it in a child process and checks the message; every outside-world
 * failure has a test that checks the error and that the runtime keeps
 * working afterwards; the calls are source.h's.
 *
 * The parent calls no runtime function until the crash cases are done, so
 * each child starts the runtime from scratch. Each child arms a 10 s alarm.
 */
#include "source_helpers.h"

#include <fcntl.h>

static void
child_start(void)
{
	alarm(10);
}

static void
nothing(void *ctx)
{
}

static sq_semaphore_t reg_sem;

static void
registered(void *ctx)
{
	sq_semaphore_signal(reg_sem);
}

/* A data source the loop is watching (so a released one stays alive). */
static sq_source_t
live_data_source(void)
{
	reg_sem = sq_semaphore_create(0);
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	sq_source_set_event_handler_f(s, nothing);
	sq_source_set_registration_handler_f(s, registered);
	sq_activate(s);
	if (sq_semaphore_wait(reg_sem, sq_time(SQ_TIME_NOW,
			(int64_t)5000 * (int64_t)MS)) != 0)
		_exit(3);
	return s;
}

/* ---- the crash cases ----------------------------------------------------------- */

static void
set_timer_on_data_source(void *ctx)
{
	child_start();
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	sq_source_set_timer(s, SQ_TIME_NOW, 1000000, 0);
}

static void
set_timer_on_read_source(void *ctx)
{
	child_start();
	int p[2];
	if (pipe(p) != 0)
		_exit(3);
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0],
			0, NULL);
	sq_source_set_timer(s, SQ_TIME_NOW, 1000000, 0);
}

static void
over_resume(void *ctx)
{
	child_start();
	sq_source_t s = live_data_source();
	sq_resume(s);
}

static void
over_resume_after_suspend(void *ctx)
{
	child_start();
	sq_source_t s = live_data_source();
	sq_suspend(s);
	sq_resume(s);
	sq_resume(s);
}

static void
resume_released(void *ctx)
{
	child_start();
	sq_source_t s = live_data_source();
	sq_suspend(s);
	sq_release(s); /* the loop still holds it: alive, but not ours */
	sq_resume(s);
}

static void
merge_released(void *ctx)
{
	child_start();
	sq_source_t s = live_data_source();
	sq_release(s);
	sq_source_merge_data(s, 1);
}

static void
suspend_released(void *ctx)
{
	child_start();
	sq_source_t s = live_data_source();
	sq_release(s);
	sq_suspend(s);
}

static void
over_release(void *ctx)
{
	child_start();
	sq_source_t s = live_data_source();
	sq_release(s);
	sq_release(s);
}

static void
source_call_on_queue(void *ctx)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.not-a-source", NULL);
	sq_source_cancel((sq_source_t)(void *)q);
}

static void
source_call_on_null(void *ctx)
{
	child_start();
	sq_source_t volatile none = NULL;
	sq_source_cancel(none);
}

static void
test_crashes(void)
{
	CHECK_CRASH(set_timer_on_data_source, NULL,
			"SwiftQueues: sq_source_set_timer");
	CHECK_CRASH(set_timer_on_data_source, NULL, "not a timer");
	CHECK_CRASH(set_timer_on_read_source, NULL,
			"SwiftQueues: sq_source_set_timer");
	CHECK_CRASH(over_resume, NULL, "SwiftQueues: sq_resume");
	CHECK_CRASH(over_resume, NULL, "over-resume");
	CHECK_CRASH(over_resume_after_suspend, NULL, "SwiftQueues: sq_resume");
	CHECK_CRASH(resume_released, NULL, "SwiftQueues: sq_resume");
	CHECK_CRASH(resume_released, NULL, "already released");
	/* Not checked: resuming a suspended, cancelled source whose last
	 * reference the program gave away. Once the loop has let go of a
	 * cancelled source nothing holds it, so whether sq_resume still
	 * finds the object (and reports) or it is already freed depends on
	 * timing; the sanitizers flagged the freed case. */
	CHECK_CRASH(merge_released, NULL, "SwiftQueues: sq_source_merge_data");
	CHECK_CRASH(merge_released, NULL, "already released");
	CHECK_CRASH(suspend_released, NULL, "SwiftQueues: sq_suspend");
	CHECK_CRASH(over_release, NULL, "SwiftQueues: sq_release");
	CHECK_CRASH(source_call_on_queue, NULL,
			"SwiftQueues: sq_source_cancel");
	CHECK_CRASH(source_call_on_queue, NULL, "not a source");
	CHECK_CRASH(source_call_on_null, NULL, "SwiftQueues: sq_source_cancel");
}

/* ---- bad input: NULL with errno, and the runtime works on --------------------------- */

#define CHECK_FAILS(call, err)                                                 \
	do {                                                                   \
		errno = 0;                                                     \
		sq_source_t _s = (call);                                       \
		CHECK(_s == NULL);                                             \
		CHECK_EQ(errno, err);                                          \
		if (_s != NULL) {                                              \
			sq_source_cancel(_s);                                  \
			sq_release(_s);                                        \
		}                                                              \
	} while (0)

static void
test_bad_input(void)
{
	int p[2];
	CHECK_EQ(pipe(p), 0);
	int closed = dup(p[0]);
	close(closed);

	/* Descriptors. */
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)-1, 0,
			NULL), EBADF);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)closed, 0,
			NULL), EBADF);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_READ,
			(uintptr_t)INT32_MAX + 1, 0, NULL), EBADF);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_WRITE, (uintptr_t)closed,
			0, NULL), EBADF);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)closed,
			SQ_VNODE_WRITE, NULL), EBADF);

	/* Pids: events Linux cannot report. (A pid with no process is not
	 * an error: its exit is delivered at once, test_source_proc.c.) */
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_PROC, (uintptr_t)getpid(),
			SQ_PROC_FORK, NULL), ENOTSUP);

	/* Unknown mask bits. */
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)p[0],
			0x1000, NULL), EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0x2, NULL),
			EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 1,
			NULL), EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_WRITE, (uintptr_t)p[1], 1,
			NULL), EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGUSR1, 1, NULL),
			EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 1, NULL),
			EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_DATA_REPLACE, 0, 1, NULL),
			EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_PROC, (uintptr_t)getpid(),
			0x1, NULL), EINVAL);

	/* Signals. */
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGKILL, 0, NULL),
			EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_SIGNAL, 1000, 0, NULL),
			EINVAL);
	CHECK_FAILS(sq_source_create(SQ_SOURCE_TYPE_SIGNAL, 0, 0, NULL),
			EINVAL);
	close(p[0]);
	close(p[1]);
}

/* The runtime works on after all those failures. */
static atomic_ulong got_data;
static atomic_int got_timer, got_after;
static sq_semaphore_t works_sem;

static void
works_data(void *ctx)
{
	atomic_fetch_add(&got_data, sq_source_get_data(ctx));
	sq_semaphore_signal(works_sem);
}

static void
works_timer(void *ctx)
{
	atomic_fetch_add(&got_timer, 1);
	sq_semaphore_signal(works_sem);
}

static void
works_after(void *ctx)
{
	atomic_fetch_add(&got_after, 1);
	sq_semaphore_signal(works_sem);
}

static void
test_runtime_works_on(void)
{
	works_sem = sq_semaphore_create(0);
	sq_source_t d = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	sq_set_context(d, d);
	sq_source_set_event_handler_f(d, works_data);
	sq_activate(d);
	sq_source_merge_data(d, 41);
	sq_source_merge_data(d, 1);

	sq_source_t t = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, NULL);
	sq_source_set_event_handler_f(t, works_timer);
	sq_source_set_timer(t, sq_time(SQ_TIME_NOW, 5 * (int64_t)MS),
			SQ_TIME_FOREVER, 0);
	sq_activate(t);

	sq_after_f(sq_time(SQ_TIME_NOW, 5 * (int64_t)MS),
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0), NULL,
			works_after);

	uint64_t deadline = sqt_now_ns() + 10000 * MS;
	while ((atomic_load(&got_data) < 42 || atomic_load(&got_timer) < 1 ||
			atomic_load(&got_after) < 1) && sqt_now_ns() < deadline)
		sq_semaphore_wait(works_sem, sq_time(SQ_TIME_NOW,
				100 * (int64_t)MS));
	CHECK_EQ(atomic_load(&got_data), 42);
	CHECK_EQ(atomic_load(&got_timer), 1);
	CHECK_EQ(atomic_load(&got_after), 1);
	sq_source_cancel(d);
	sq_source_cancel(t);
	sq_release(d);
	sq_release(t);
	/* Take every unit the handlers gave back before destroying the
	 * semaphore: a handler may still be inside sq_semaphore_signal, and
	 * the wait that takes its unit is what orders our release after it. */
	while (sq_semaphore_wait(works_sem, sq_time(SQ_TIME_NOW,
			SQT_SCALE(60, 150) * (int64_t)MS)) == 0)
		;
	sq_release(works_sem);
}

int
main(void)
{
	test_crashes(); /* first: this process has no runtime threads yet */
	test_bad_input();
	test_runtime_works_on();
	return sqt_finish("test_source_misuse");
}
