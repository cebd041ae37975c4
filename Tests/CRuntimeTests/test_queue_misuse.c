/*
 * Misuse of queues, each in a child process that must stop with SIGABRT and
 * a one-line message naming the call (and the queue's label): deadlocking
 * sync / barrier_sync / apply (directly, A->B->A, through target chains, on
 * the main queue), over-release, over-resume, NULL function pointers,
 * target cycles, failing sq_assert_queue / _not / _barrier.
 *
 * The messages follow the error policy (docs/ARCHITECTURE.md).
 *
 * The parent never calls the runtime, so it has no threads when it forks.
 * Each child arms a 10 s alarm: a deadlock that is not detected shows as a
 * failed check (killed by SIGALRM), not as a hung test.
 */
#include "queue_helpers.h"

static void
child_start(void)
{
	alarm(10);
}

static void
nothing(void *ctx)
{
}

static void
nothing_apply(void *ctx, size_t i)
{
}

/* ---- sync onto the serial queue the thread is draining -------------------- */

static void
sync_self(void *q)
{
	sq_sync_f(q, NULL, nothing);
}

/* (1) from an async task of q */
static void
deadlock_async_then_sync(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.deadlock", NULL);
	sq_async_f(q, q, sync_self);
	pause();
}

/* (1') sq_sync(q, ^{ sq_sync(q, ^{}); }) from the main thread */
static void
deadlock_sync_in_sync(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.deadlock", NULL);
	sq_sync_f(q, q, sync_self);
}

/* (2) A -> B -> A */
static sq_queue_t queueA, queueB;

static void
baz(void *ctx)
{
}

static void
bar(void *ctx)
{
	sq_sync_f(queueA, NULL, baz);
}

static void
foo(void *ctx)
{
	sq_sync_f(queueB, NULL, bar);
}

static void
deadlock_a_b_a(void *unused)
{
	child_start();
	queueA = sq_queue_create("com.example.queueA", NULL);
	queueB = sq_queue_create("com.example.queueB", NULL);
	sq_sync_f(queueA, NULL, foo);
}

static void
deadlock_a_b_a_async(void *unused)
{
	child_start();
	queueA = sq_queue_create("com.example.queueA", NULL);
	queueB = sq_queue_create("com.example.queueB", NULL);
	sq_async_f(queueA, NULL, foo);
	pause();
}

/* (3) through a target chain: a task of q1 (q1 -> q2) syncs onto q2 */
static void
deadlock_sync_onto_target(void *unused)
{
	child_start();
	sq_queue_t q2 = sq_queue_create("com.example.chain.q2", NULL);
	sq_queue_t q1 = sq_queue_create_with_target("com.example.chain.q1",
			NULL, q2);
	sq_async_f(q1, q2, sync_self);
	pause();
}

/* (3') a task of q1 syncs onto q3, whose target is q1 */
static void
deadlock_sync_onto_child(void *unused)
{
	child_start();
	sq_queue_t q1 = sq_queue_create("com.example.chain.q1", NULL);
	sq_queue_t q3 = sq_queue_create_with_target("com.example.chain.q3",
			NULL, q1);
	sq_async_f(q1, q3, sync_self);
	pause();
}

/* barrier_sync onto the current serial queue */
static void
barrier_sync_self(void *q)
{
	sq_barrier_sync_f(q, NULL, nothing);
}

static void
deadlock_barrier_sync(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.barrier.deadlock", NULL);
	sq_async_f(q, q, barrier_sync_self);
	pause();
}

/* apply onto the current serial queue */
static void
apply_self(void *q)
{
	sq_apply_f(4, q, NULL, nothing_apply);
}

static void
deadlock_apply(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.apply.deadlock", NULL);
	sq_async_f(q, q, apply_self);
	pause();
}

/* sync onto the main queue from a main-queue task */
static void
deadlock_main(void *unused)
{
	child_start();
	sq_async_f(sq_get_main_queue(), sq_get_main_queue(), sync_self);
	sq_main_queue_drain();
}

/* sync onto the main queue from the main thread outside its tasks: the
 * main thread runs the main queue (libdispatch stops there too), idle or
 * with work queued (which only the main thread could run) */
static void
deadlock_main_thread(void *unused)
{
	child_start();
	sq_sync_f(sq_get_main_queue(), NULL, nothing);
	_exit(0);
}

static void
deadlock_main_thread_queued(void *unused)
{
	child_start();
	sq_async_f(sq_get_main_queue(), NULL, nothing);
	sq_sync_f(sq_get_main_queue(), NULL, nothing);
	_exit(0);
}

static void
deadlock_main_thread_chain(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create_with_target("com.example.onmain", NULL,
			sq_get_main_queue());
	sq_sync_f(q, NULL, nothing);
	_exit(0);
}

static void
test_deadlocks(void)
{
	CHECK_CRASH(deadlock_async_then_sync, NULL,
			"SwiftQueues: sq_sync: deadlock");
	CHECK_CRASH(deadlock_async_then_sync, NULL, "'com.example.deadlock'");
	CHECK_CRASH(deadlock_sync_in_sync, NULL,
			"SwiftQueues: sq_sync: deadlock");
	CHECK_CRASH(deadlock_a_b_a, NULL, "SwiftQueues: sq_sync: deadlock");
	CHECK_CRASH(deadlock_a_b_a, NULL, "'com.example.queueA'");
	CHECK_CRASH(deadlock_a_b_a_async, NULL,
			"SwiftQueues: sq_sync: deadlock");
	CHECK_CRASH(deadlock_sync_onto_target, NULL,
			"SwiftQueues: sq_sync: deadlock");
	CHECK_CRASH(deadlock_sync_onto_target, NULL, "com.example.chain.q");
	CHECK_CRASH(deadlock_sync_onto_child, NULL,
			"SwiftQueues: sq_sync: deadlock");
	CHECK_CRASH(deadlock_barrier_sync, NULL, "SwiftQueues: sq_barrier_sync");
	CHECK_CRASH(deadlock_barrier_sync, NULL, "deadlock");
	CHECK_CRASH(deadlock_barrier_sync, NULL,
			"'com.example.barrier.deadlock'");
	CHECK_CRASH(deadlock_apply, NULL, "SwiftQueues: sq_apply_f: deadlock");
	CHECK_CRASH(deadlock_apply, NULL, "'com.example.apply.deadlock'");
	CHECK_CRASH(deadlock_main, NULL, "SwiftQueues: sq_sync: deadlock");
	CHECK_CRASH(deadlock_main_thread, NULL,
			"SwiftQueues: sq_sync: deadlock: queue "
			"'com.swiftqueues.main-thread'");
	CHECK_CRASH(deadlock_main_thread_queued, NULL,
			"SwiftQueues: sq_sync: deadlock");
	CHECK_CRASH(deadlock_main_thread_chain, NULL,
			"SwiftQueues: sq_sync: deadlock: queue "
			"'com.swiftqueues.main-thread'");
}

/* ---- over-release, over-resume --------------------------------------------- */

static void
blocked_task(void *ctx)
{
	sem_wait((sem_t *)ctx); /* never posted: keeps the queue alive */
}

static void
over_release(void *unused)
{
	child_start();
	static sem_t never;
	sem_init(&never, 0, 0);
	sq_queue_t q = sq_queue_create("com.example.overreleased", NULL);
	sq_async_f(q, &never, blocked_task);
	sq_async_f(q, NULL, nothing); /* pending behind the blocked one */
	sq_release(q);
	sq_release(q);
	pause();
}

static void
over_release_concurrent(void *unused)
{
	child_start();
	static sem_t never;
	sem_init(&never, 0, 0);
	sq_queue_t q = sq_queue_create("com.example.overreleased.c",
			SQ_QUEUE_CONCURRENT);
	sq_async_f(q, &never, blocked_task);
	sq_release(q);
	sq_release(q);
	pause();
}

static void
over_resume(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.overresumed", NULL);
	sq_resume(q);
	pause();
}

static void
over_resume_after_balance(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.overresumed", NULL);
	sq_suspend(q);
	sq_suspend(q);
	sq_resume(q);
	sq_resume(q);
	sq_resume(q);
	pause();
}

static void
test_counts(void)
{
	CHECK_CRASH(over_release, NULL, "SwiftQueues: sq_release: "
			"over-release of queue 'com.example.overreleased'");
	CHECK_CRASH(over_release_concurrent, NULL, "SwiftQueues: sq_release: "
			"over-release of queue 'com.example.overreleased.c'");
	CHECK_CRASH(over_resume, NULL, "SwiftQueues: sq_resume");
	CHECK_CRASH(over_resume, NULL, "'com.example.overresumed'");
	CHECK_CRASH(over_resume_after_balance, NULL, "SwiftQueues: sq_resume");
}

/* ---- NULL function pointers ------------------------------------------------- */

static void
null_async(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.null", NULL);
	sq_async_f(q, NULL, (sq_function_t)unused);
	pause();
}

static void
null_async_global(void *unused)
{
	child_start();
	sq_async_f(sq_get_global_queue(0, 0), NULL, (sq_function_t)unused);
	pause();
}

static void
null_spawn(void *unused)
{
	child_start();
	sq_spawn_f(sq_get_global_queue(0, 0), NULL, (sq_function_t)unused);
	pause();
}

static void
null_group_spawn(void *unused)
{
	child_start();
	sq_group_spawn_f(sq_group_create(), sq_get_global_queue(0, 0), NULL,
			(sq_function_t)unused);
	pause();
}

static void
null_sync(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.null", NULL);
	sq_sync_f(q, NULL, (sq_function_t)unused);
}

static void
null_barrier_async(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.null", SQ_QUEUE_CONCURRENT);
	sq_barrier_async_f(q, NULL, (sq_function_t)unused);
	pause();
}

static void
null_apply(void *unused)
{
	child_start();
	sq_apply_f(4, NULL, NULL, (sq_apply_function_t)unused);
}

static void
test_null_functions(void)
{
	CHECK_CRASH(null_async, NULL,
			"SwiftQueues: sq_async_f: function pointer is NULL");
	CHECK_CRASH(null_async_global, NULL,
			"SwiftQueues: sq_async_f: function pointer is NULL");
	CHECK_CRASH(null_spawn, NULL,
			"SwiftQueues: sq_spawn_f: function pointer is NULL");
	CHECK_CRASH(null_group_spawn, NULL,
			"SwiftQueues: sq_group_spawn_f: function pointer is NULL");
	CHECK_CRASH(null_sync, NULL, "function pointer is NULL");
	CHECK_CRASH(null_barrier_async, NULL, "function pointer is NULL");
	CHECK_CRASH(null_apply, NULL, "function pointer is NULL");
}

/* ---- target cycles ---------------------------------------------------------- */

static void
cycle_two(void *unused)
{
	child_start();
	sq_queue_t a = sq_queue_create("com.example.ring.a", NULL);
	sq_queue_t b = sq_queue_create_with_target("com.example.ring.b",
			NULL, a);
	sq_set_target_queue(a, b);
	sq_async_f(a, NULL, nothing);
	pause();
}

static void
cycle_three(void *unused)
{
	child_start();
	sq_queue_t a = sq_queue_create("com.example.ring.a", NULL);
	sq_queue_t b = sq_queue_create_with_target("com.example.ring.b",
			SQ_QUEUE_CONCURRENT, a);
	sq_queue_t c = sq_queue_create_with_target("com.example.ring.c",
			NULL, b);
	sq_set_target_queue(a, c);
	sq_async_f(a, NULL, nothing);
	pause();
}

static void
cycle_self(void *unused)
{
	child_start();
	sq_queue_t a = sq_queue_create("com.example.ring.self", NULL);
	sq_set_target_queue(a, a);
	sq_async_f(a, NULL, nothing);
	pause();
}

static void
test_cycles(void)
{
	CHECK_CRASH(cycle_two, NULL, "SwiftQueues: sq_set_target_queue");
	CHECK_CRASH(cycle_two, NULL, "'com.example.ring.a'");
	CHECK_CRASH(cycle_three, NULL, "SwiftQueues: sq_set_target_queue");
	CHECK_CRASH(cycle_three, NULL, "'com.example.ring.a'");
	CHECK_CRASH(cycle_self, NULL, "SwiftQueues: sq_set_target_queue");
}

/* ---- sq_assert_queue / _not / _barrier failing ----------------------------- */

static void
assert_outside(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.asserted", NULL);
	sq_assert_queue(q);
	_exit(0);
}

static void
assert_other_queue(void *other)
{
	sq_assert_queue(other);
}

static void
assert_on_other(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.running", NULL);
	sq_queue_t other = sq_queue_create("com.example.asserted", NULL);
	sq_async_f(q, other, assert_other_queue);
	pause();
}

static void
assert_not_self(void *q)
{
	sq_assert_queue_not(q);
}

static void
assert_not_inside(void *unused)
{
	child_start();
	sq_queue_t q = sq_queue_create("com.example.asserted", NULL);
	sq_async_f(q, q, assert_not_self);
	pause();
}

static void
assert_not_target(void *unused)
{
	child_start();
	sq_queue_t t = sq_queue_create("com.example.asserted", NULL);
	sq_queue_t q = sq_queue_create_with_target("com.example.child", NULL, t);
	sq_async_f(q, t, assert_not_self);
	pause();
}

static void
assert_barrier_self(void *q)
{
	sq_assert_queue_barrier(q);
}

static void
assert_barrier_not_barrier(void *unused)
{
	child_start();
	sq_queue_t c = sq_queue_create("com.example.asserted",
			SQ_QUEUE_CONCURRENT);
	sq_async_f(c, c, assert_barrier_self);
	pause();
}

/* The main thread owns the main queue: sq_assert_queue_not fails there
 * even outside main-queue work. */
static void
assert_not_main_on_main_thread(void *unused)
{
	child_start();
	sq_assert_queue_not(sq_get_main_queue());
	_exit(0);
}

static void
assert_main_self(void *unused)
{
	sq_assert_queue(sq_get_main_queue());
}

/* A worker does not. */
static void
assert_main_on_worker(void *unused)
{
	child_start();
	sq_async_f(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0), NULL,
			assert_main_self);
	pause();
}

static void
test_asserts(void)
{
	/* On the main thread, outside any task: on the main queue. */
	sq_assert_queue(sq_get_main_queue());
	sq_assert_queue_barrier(sq_get_main_queue());
	CHECK_CRASH(assert_not_main_on_main_thread, NULL,
			"SwiftQueues: sq_assert_queue_not");
	CHECK_CRASH(assert_main_on_worker, NULL,
			"SwiftQueues: sq_assert_queue");
	CHECK_CRASH(assert_outside, NULL, "SwiftQueues: sq_assert_queue");
	CHECK_CRASH(assert_outside, NULL, "'com.example.asserted'");
	CHECK_CRASH(assert_on_other, NULL, "SwiftQueues: sq_assert_queue");
	CHECK_CRASH(assert_not_inside, NULL, "SwiftQueues: sq_assert_queue_not");
	CHECK_CRASH(assert_not_inside, NULL, "'com.example.asserted'");
	CHECK_CRASH(assert_not_target, NULL, "SwiftQueues: sq_assert_queue_not");
	CHECK_CRASH(assert_barrier_not_barrier, NULL,
			"SwiftQueues: sq_assert_queue_barrier");
}

int
main(void)
{
	test_deadlocks();
	test_counts();
	test_null_functions();
	test_cycles();
	test_asserts();
	return sqt_finish("test_queue_misuse");
}
