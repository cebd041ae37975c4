/*
 * The C side of Swift concurrency's global executor (swift_executor.c):
 * without the Swift runtime installing is refused and changes nothing;
 * _sq_queue_try_run_here_f runs a function in place, as the queue's work,
 * only on an idle serial queue; sq_after_leeway_f entries (Task.sleep's
 * path) fire, never early. The Swift behaviour is tested by GlobalExecutorTests.swift.
 */
#include "queue_helpers.h"

/* Internal entry points (hidden in the shared library, linked statically
 * here). */
bool _sq_queue_try_run_here_f(sq_queue_t q, void *ctx, sq_function_t func);

struct here_s {
	sq_queue_t queue;
	pthread_t thread;
	atomic_int ran;
	atomic_int on_queue;
	atomic_int same_thread;
};

static void
record_here(void *ctx)
{
	struct here_s *h = ctx;
	atomic_store(&h->on_queue, sq_get_current_queue() == h->queue);
	atomic_store(&h->same_thread, pthread_equal(pthread_self(), h->thread));
	atomic_fetch_add(&h->ran, 1);
}

static void
signal_sem(void *ctx)
{
	sq_semaphore_signal(ctx);
}

static void
nothing(void *ctx)
{
}

static void
wait_sem(void *ctx)
{
	sq_semaphore_wait(ctx, SQ_TIME_FOREVER);
}

/* Submits more work to the queue from inside the in-place run: it must run
 * after the in-place function gives the queue back. */
struct chain_s {
	sq_queue_t queue;
	sq_semaphore_t done;
};

static void
submit_more(void *ctx)
{
	struct chain_s *c = ctx;
	sq_async_f(c->queue, c->done, signal_sem);
}

static void
test_install_without_swift(void)
{
	int identity;
	CHECK(sq_swift_executor_refusal() == NULL);
	CHECK(!sq_swift_executor_install((sq_swift_executor_ref_t){
			&identity, 0 }));
	CHECK(!sq_swift_executor_installed());
	/* Why, for the Swift module's message. */
	CHECK(sq_swift_executor_refusal() != NULL &&
			strstr(sq_swift_executor_refusal(), "no executor hooks"));
	CHECK(!sq_swift_defer_async_f(sq_get_main_queue(), &identity,
			signal_sem));
}

static void
test_run_here(void)
{
	sq_queue_t q = sq_queue_create("exec.here", SQ_QUEUE_SERIAL);
	struct here_s h = { .queue = q, .thread = pthread_self() };

	/* Idle: runs now, on this thread, as the queue's work. */
	CHECK(_sq_queue_try_run_here_f(q, &h, record_here));
	CHECK_EQ(atomic_load(&h.ran), 1);
	CHECK(atomic_load(&h.on_queue));
	CHECK(atomic_load(&h.same_thread));

	/* Busy (a task holds it): refused, nothing runs. */
	sq_semaphore_t gate = sq_semaphore_create(0);
	sq_semaphore_t done = sq_semaphore_create(0);
	sq_async_f(q, gate, wait_sem);
	CHECK(!_sq_queue_try_run_here_f(q, &h, record_here));
	sq_semaphore_signal(gate);
	sq_sync_f(q, NULL, nothing);
	CHECK_EQ(atomic_load(&h.ran), 1);

	/* Suspended: refused. */
	sq_suspend(q);
	CHECK(!_sq_queue_try_run_here_f(q, &h, record_here));
	sq_resume(q);
	CHECK_EQ(atomic_load(&h.ran), 1);

	/* Work submitted during the in-place run runs after it. (The drainer
	 * of the earlier work may hold the queue a moment after sq_sync_f
	 * returned: try until it is idle.) */
	struct chain_s c = { q, done };
	bool ran = false;
	for (int i = 0; i < 5000 && !ran; i++) {
		ran = _sq_queue_try_run_here_f(q, &c, submit_more);
		if (!ran)
			usleep(1000);
	}
	CHECK(ran);
	CHECK(sq_semaphore_wait(done, sq_time(SQ_TIME_NOW,
			10 * (int64_t)NSEC_PER_SEC)) == 0);

	/* Concurrent queues are not taken. */
	sq_queue_t cq = sq_queue_create("exec.concurrent", SQ_QUEUE_CONCURRENT);
	CHECK(!_sq_queue_try_run_here_f(cq, &h, record_here));
	CHECK_EQ(atomic_load(&h.ran), 1);

	sq_release(cq);
	sq_release(gate);
	sq_release(done);
	sq_release(q);
}

struct fired_s {
	sq_semaphore_t sem;
	_Atomic uint64_t at;
};

static void
fired(void *ctx)
{
	struct fired_s *f = ctx;
	atomic_store(&f->at, sqt_now_ns());
	sq_semaphore_signal(f->sem);
}

static void
test_after_leeway(void)
{
	struct fired_s f = { .sem = sq_semaphore_create(0) };
	uint64_t start = sqt_now_ns();
	sq_after_leeway_f(sq_time(SQ_TIME_NOW, 20 * (int64_t)NSEC_PER_MSEC),
			10 * NSEC_PER_MSEC,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0), &f,
			fired);
	CHECK(sq_semaphore_wait(f.sem, sq_time(SQ_TIME_NOW,
			10 * (int64_t)NSEC_PER_SEC)) == 0);
	CHECK(atomic_load(&f.at) - start >= 20 * NSEC_PER_MSEC);
	sq_release(f.sem);
}

int
main(void)
{
	test_install_without_swift();
	test_run_here();
	test_after_leeway();
	return sqt_finish("test_swift_executor");
}
