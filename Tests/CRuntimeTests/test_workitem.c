/*
 * Work items: run once, cancel before submission / while queued / while
 * running, wait with and without a timeout, perform on the caller, double
 * submission, barriers, notifications, the context slots, a cancel-vs-run
 * stress, and the misuse reports.
 */
#include "wait_helpers.h"

static void
noop(void *ctx)
{
}

/* A fence: everything submitted to serial `q` before has run. */
static void
drain(sq_queue_t q)
{
	sq_sync_f(q, NULL, noop);
}

struct job {
	sq_workitem_t item;
	int32_t calls;
	int32_t saw_cancel;
	int32_t finished;
	pthread_t thread;
	sq_semaphore_t started;
};

static void
count_call(void *ctx)
{
	struct job *j = ctx;
	j->thread = pthread_self();
	__atomic_add_fetch(&j->calls, 1, __ATOMIC_SEQ_CST);
}

static void
test_run_once(void)
{
	struct job j = { 0 };
	sq_workitem_t item = sq_workitem_create_f(0, &j, count_call);
	CHECK(item != NULL);
	CHECK(!sq_workitem_testcancel(item));
	CHECK(sq_workitem_wait(item, SQ_TIME_NOW) != 0);
	sq_async_workitem(global_queue(), item);
	CHECK_EQ(sq_workitem_wait(item, in_ms(10000)), 0);
	CHECK_EQ(load32(&j.calls), 1);
	CHECK_EQ(sq_workitem_wait(item, SQ_TIME_NOW), 0);
	CHECK(!sq_workitem_testcancel(item));

	/* Submitting or performing again does nothing. */
	sq_queue_t q = sq_queue_create("test.workitem.once", SQ_QUEUE_SERIAL);
	sq_async_workitem(q, item);
	sq_workitem_perform(item);
	drain(q);
	CHECK_EQ(load32(&j.calls), 1);
	/* Cancelling after it ran is harmless (and is then reported). */
	sq_workitem_cancel(item);
	CHECK(sq_workitem_testcancel(item));
	CHECK_EQ(sq_workitem_wait(item, SQ_TIME_NOW), 0);
	sq_release(item);
	sq_release(q);
}

static void
test_double_submission(void)
{
	struct job j = { 0 };
	sq_queue_t q = sq_queue_create("test.workitem.double", SQ_QUEUE_SERIAL);
	sq_workitem_t item = sq_workitem_create_f(0, &j, count_call);
	sq_suspend(q); /* both submissions are queued before either runs */
	for (int i = 0; i < 10; i++) {
		sq_async_workitem(q, item);
		sq_async_workitem(global_queue(), item);
	}
	CHECK_EQ(sq_workitem_wait(item, in_ms(10000)), 0);
	sq_resume(q);
	drain(q);
	CHECK_EQ(load32(&j.calls), 1);
	sq_release(item);
	sq_release(q);
}

static void
test_perform(void)
{
	struct job j = { 0 };
	sq_workitem_t item = sq_workitem_create_f(0, &j, count_call);
	sq_workitem_perform(item);
	CHECK_EQ(load32(&j.calls), 1);
	CHECK(pthread_equal(j.thread, pthread_self()));
	CHECK_EQ(sq_workitem_wait(item, SQ_TIME_NOW), 0);
	sq_workitem_perform(item);
	CHECK_EQ(load32(&j.calls), 1);
	sq_release(item);
}

/* Cancelled before submission: never runs, finished at once, notifies. */
static void
test_cancel_before_submit(void)
{
	struct job j = { 0 };
	sq_semaphore_t notified = sq_semaphore_create(0);
	sq_queue_t q = sq_queue_create("test.workitem.cancel", SQ_QUEUE_SERIAL);
	sq_workitem_t item = sq_workitem_create_f(0, &j, count_call);
	sq_workitem_notify_f(item, global_queue(), notified,
			signal_semaphore);
	sq_workitem_cancel(item);
	CHECK(sq_workitem_testcancel(item));
	uint64_t t0 = sqt_now_ns();
	CHECK_EQ(sq_workitem_wait(item, SQ_TIME_FOREVER), 0);
	CHECK((sqt_now_ns() - t0) < 1000000000ull);
	CHECK_EQ(sq_semaphore_wait(notified, in_ms(10000)), 0);
	sq_async_workitem(q, item);
	sq_workitem_perform(item);
	drain(q);
	CHECK_EQ(load32(&j.calls), 0);
	/* A notification registered now is submitted at once. */
	sq_workitem_notify_f(item, q, notified, signal_semaphore);
	CHECK_EQ(sq_semaphore_wait(notified, in_ms(10000)), 0);
	sq_workitem_cancel(item); /* twice: nothing more happens */
	CHECK(sq_semaphore_wait(notified, in_ms(50)) != 0);
	sq_release(item);
	sq_release(q);
	sq_release(notified);
}

/* Cancelled while queued behind a blocked task: never runs. */
static void
block_on_semaphore(void *ctx)
{
	sq_semaphore_wait(ctx, SQ_TIME_FOREVER);
}

static void
test_cancel_while_queued(void)
{
	struct job j = { 0 };
	sq_semaphore_t gate = sq_semaphore_create(0);
	sq_queue_t q = sq_queue_create("test.workitem.queued", SQ_QUEUE_SERIAL);
	sq_workitem_t item = sq_workitem_create_f(0, &j, count_call);
	sq_async_f(q, gate, block_on_semaphore);
	sq_async_workitem(q, item);
	msleep(10);
	sq_workitem_cancel(item);
	CHECK_EQ(sq_workitem_wait(item, SQ_TIME_NOW), 0);
	sq_release(item); /* the submission keeps it alive */
	sq_semaphore_signal(gate);
	drain(q);
	CHECK_EQ(load32(&j.calls), 0);
	sq_release(q);
	sq_release(gate);
}

/* Cancelled while running: testcancel turns true, it finishes normally. */
static void
cooperative(void *ctx)
{
	struct job *j = ctx;
	__atomic_add_fetch(&j->calls, 1, __ATOMIC_SEQ_CST);
	sq_semaphore_signal(j->started);
	uint64_t t0 = sqt_now_ns();
	while (!sq_workitem_testcancel(j->item) &&
			sqt_now_ns() - t0 < 10 * NSEC_PER_SEC)
		msleep(1);
	__atomic_store_n(&j->saw_cancel, sq_workitem_testcancel(j->item),
			__ATOMIC_SEQ_CST);
	msleep(50); /* wait must not return before this */
	__atomic_store_n(&j->finished, 1, __ATOMIC_SEQ_CST);
}

static void
test_cancel_while_running(void)
{
	struct job j = { 0 };
	sq_semaphore_t notified = sq_semaphore_create(0);
	j.started = sq_semaphore_create(0);
	j.item = sq_workitem_create_f(0, &j, cooperative);
	sq_workitem_notify_f(j.item, global_queue(), notified,
			signal_semaphore);
	sq_async_workitem(global_queue(), j.item);
	CHECK_EQ(sq_semaphore_wait(j.started, in_ms(10000)), 0);
	sq_workitem_cancel(j.item);
	CHECK_EQ(sq_workitem_wait(j.item, SQ_TIME_FOREVER), 0);
	CHECK_EQ(load32(&j.finished), 1);
	CHECK_EQ(load32(&j.saw_cancel), 1);
	CHECK_EQ(load32(&j.calls), 1);
	CHECK_EQ(sq_semaphore_wait(notified, in_ms(10000)), 0);
	sq_release(j.item);
	sq_release(j.started);
	sq_release(notified);
}

/* wait with a timeout on an item that has not run. */
static void
test_wait_timeout(void)
{
	struct job j = { 0 };
	sq_workitem_t item = sq_workitem_create_f(0, &j, count_call);
	uint64_t t0 = sqt_now_ns();
	intptr_t r = sq_workitem_wait(item, in_ms(100));
	uint64_t ms = (sqt_now_ns() - t0) / 1000000;
	printf("workitem: 100 ms timeout returned %ld after %" PRIu64 " ms\n",
			(long)r, ms);
	CHECK(r != 0);
	CHECK(ms >= 90);
	CHECK(ms < 2000);
	CHECK(sq_workitem_wait(item, sq_walltime(NULL,
			20 * (int64_t)NSEC_PER_MSEC)) != 0);
	sq_workitem_perform(item);
	CHECK_EQ(sq_workitem_wait(item, in_ms(100)), 0);
	sq_release(item);
}

/* Waiters on other threads wake when the item finishes. */
static void *
wait_item(void *arg)
{
	struct job *j = arg;
	if (sq_workitem_wait(j->item, in_ms(10000)) == 0 &&
			load32(&j->finished))
		__atomic_add_fetch(&j->saw_cancel, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void
slow_job(void *ctx)
{
	struct job *j = ctx;
	msleep(50);
	__atomic_store_n(&j->finished, 1, __ATOMIC_SEQ_CST);
}

static void
test_many_waiters(void)
{
	struct job j = { 0 };
	j.item = sq_workitem_create_f(0, &j, slow_job);
	sq_async_workitem(global_queue(), j.item);
	sqt_run_threads(4, wait_item, &j, 0);
	CHECK_EQ(load32(&j.saw_cancel), 4); /* here: "woke after it ran" */
	sq_release(j.item);
}

/* SQ_WORKITEM_BARRIER on a concurrent queue runs alone. */
enum { BARRIER_TASKS = 16 };
static int32_t active, barrier_running;
static int32_t barrier_saw_active = -1, overlapped;

static void
normal_task(void *ctx)
{
	__atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);
	if (load32(&barrier_running))
		__atomic_add_fetch(&overlapped, 1, __ATOMIC_SEQ_CST);
	msleep(3);
	if (load32(&barrier_running))
		__atomic_add_fetch(&overlapped, 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
	sq_semaphore_signal(ctx);
}

static void
barrier_task(void *ctx)
{
	__atomic_store_n(&barrier_running, 1, __ATOMIC_SEQ_CST);
	int32_t seen = load32(&active);
	msleep(30);
	if (load32(&active) > seen)
		seen = load32(&active);
	__atomic_store_n(&barrier_saw_active, seen, __ATOMIC_SEQ_CST);
	__atomic_store_n(&barrier_running, 0, __ATOMIC_SEQ_CST);
}

static void
test_barrier(void)
{
	sq_queue_t cq = sq_queue_create("test.workitem.concurrent",
			SQ_QUEUE_CONCURRENT);
	sq_semaphore_t done = sq_semaphore_create(0);
	sq_workitem_t item = sq_workitem_create_f(SQ_WORKITEM_BARRIER, NULL,
			barrier_task);
	for (int i = 0; i < BARRIER_TASKS; i++)
		sq_async_f(cq, done, normal_task);
	sq_async_workitem(cq, item);
	for (int i = 0; i < BARRIER_TASKS; i++)
		sq_async_f(cq, done, normal_task);
	CHECK_EQ(sq_workitem_wait(item, in_ms(10000)), 0);
	for (int i = 0; i < 2 * BARRIER_TASKS; i++)
		CHECK_EQ(sq_semaphore_wait(done, in_ms(10000)), 0);
	CHECK_EQ(load32(&barrier_saw_active), 0);
	CHECK_EQ(load32(&overlapped), 0);
	sq_release(item);
	sq_release(done);
	sq_release(cq);
}

/* Notifications: after the run, in order, on their queue. */
static int notify_order[4];
static int notify_len;
static int32_t job_calls_at_notify = -1;
static struct job notify_job;
static sq_semaphore_t notify_sem;

static void
record_notify(void *ctx)
{
	notify_order[notify_len++] = (int)(intptr_t)ctx; /* serial queue */
	job_calls_at_notify = load32(&notify_job.calls);
	sq_semaphore_signal(notify_sem);
}

static void
test_notify(void)
{
	sq_queue_t q = sq_queue_create("test.workitem.notify", SQ_QUEUE_SERIAL);
	sq_workitem_t item = sq_workitem_create_f(0, &notify_job, count_call);
	notify_sem = sq_semaphore_create(0);
	for (int i = 0; i < 3; i++)
		sq_workitem_notify_f(item, q, (void *)(intptr_t)i,
				record_notify);
	msleep(10);
	drain(q);
	CHECK_EQ(notify_len, 0);
	sq_async_workitem(global_queue(), item);
	CHECK_EQ(sq_workitem_wait(item, in_ms(10000)), 0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(sq_semaphore_wait(notify_sem, in_ms(10000)), 0);
	drain(q);
	CHECK_EQ(notify_len, 3);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(notify_order[i], i);
	CHECK_EQ(job_calls_at_notify, 1);

	/* Registered after it finished: submitted at once. */
	sq_workitem_notify_f(item, q, (void *)(intptr_t)3, record_notify);
	CHECK_EQ(sq_semaphore_wait(notify_sem, in_ms(10000)), 0);
	drain(q);
	CHECK_EQ(notify_len, 4);
	CHECK_EQ(notify_order[3], 3);
	sq_release(item);
	sq_release(q);
	sq_release(notify_sem);
}

/* The object's context slot is the program's; the function has its own. */
static int user_context, function_context;
static void *function_got;
static int32_t finalized;

static void
record_context(void *ctx)
{
	function_got = ctx;
}

static void
finalize(void *ctx)
{
	if (ctx == &user_context)
		__atomic_store_n(&finalized, 1, __ATOMIC_SEQ_CST);
}

static void
test_context(void)
{
	sq_workitem_t item = sq_workitem_create_f(0, &function_context,
			record_context);
	CHECK(sq_get_context(item) == NULL);
	sq_set_context(item, &user_context);
	sq_set_finalizer_f(item, finalize);
	sq_workitem_perform(item);
	CHECK(function_got == &function_context);
	CHECK(sq_get_context(item) == &user_context);
	sq_release(item);
	for (int i = 0; i < 10000 && !load32(&finalized); i++)
		msleep(1);
	CHECK_EQ(load32(&finalized), 1);
}

/* Released before it ran (never submitted): notifications still fire. */
static void
test_released_unrun(void)
{
	sq_semaphore_t notified = sq_semaphore_create(0);
	sq_workitem_t item = sq_workitem_create_f(0, NULL, noop);
	sq_workitem_notify_f(item, global_queue(), notified,
			signal_semaphore);
	sq_release(item);
	CHECK_EQ(sq_semaphore_wait(notified, in_ms(10000)), 0);
	sq_release(notified);
}

/*
 * Cancel racing the run: each item either ran once or was cancelled
 * before starting; either way wait returns and exactly one notification
 * per item fires.
 */
enum { RACE_ITEMS = 5000 };
static int32_t race_runs;

static void
race_run(void *ctx)
{
	__atomic_add_fetch(&race_runs, 1, __ATOMIC_RELAXED);
}

static void
test_cancel_race(void)
{
	sq_semaphore_t notified = sq_semaphore_create(0);
	sq_queue_t q = global_queue();
	int not_finished = 0;
	for (int i = 0; i < RACE_ITEMS; i++) {
		sq_workitem_t item = sq_workitem_create_f(0, NULL, race_run);
		sq_workitem_notify_f(item, q, notified, signal_semaphore);
		sq_async_workitem(q, item);
		for (volatile int spin = 0; spin < (i % 7) * 50; spin++)
			; /* vary the moment of the cancel */
		sq_workitem_cancel(item);
		if (sq_workitem_wait(item, in_ms(10000)) != 0)
			not_finished++;
		sq_release(item);
	}
	int notifications = 0;
	while (notifications < RACE_ITEMS &&
			sq_semaphore_wait(notified, in_ms(10000)) == 0)
		notifications++;
	CHECK_EQ(not_finished, 0);
	CHECK_EQ(notifications, RACE_ITEMS);
	CHECK(sq_semaphore_wait(notified, in_ms(20)) != 0);
	printf("workitem: cancel race: %d of %d items ran\n",
			(int)load32(&race_runs), RACE_ITEMS);
	CHECK(load32(&race_runs) <= RACE_ITEMS);
	sq_release(notified);
}

/* ---- misuse, each in a child process ---- */

static void
create_null_function(void *unused)
{
	sq_workitem_t item = sq_workitem_create_f(0, NULL, NULL);
	sq_release(item);
}

static void
create_unknown_flags(void *unused)
{
	sq_workitem_t item = sq_workitem_create_f(0x80, NULL, noop);
	sq_release(item);
}

static void
notify_null_function(void *unused)
{
	sq_workitem_t item = sq_workitem_create_f(0, NULL, noop);
	sq_workitem_notify_f(item, global_queue(), NULL, NULL);
}

static void
test_misuse(void)
{
	CHECK_CRASH(create_null_function, NULL,
			"SwiftQueues: sq_workitem_create_f: "
			"function pointer is NULL");
	CHECK_CRASH(create_unknown_flags, NULL,
			"SwiftQueues: sq_workitem_create_f: unknown flags");
	CHECK_CRASH(notify_null_function, NULL,
			"SwiftQueues: sq_workitem_notify_f: "
			"function pointer is NULL");
}

int
main(void)
{
	test_run_once();
	test_double_submission();
	test_perform();
	test_cancel_before_submit();
	test_cancel_while_queued();
	test_cancel_while_running();
	test_wait_timeout();
	test_many_waiters();
	test_barrier();
	test_notify();
	test_context();
	test_released_unrun();
	test_cancel_race();
	test_misuse();
	return sqt_finish("workitem");
}
