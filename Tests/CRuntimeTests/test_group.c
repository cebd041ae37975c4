/*
 * Groups: wait, reuse, timeouts, notify after every member, enter/leave from
 * other threads, the notify race of libdispatch's rdar://11445820, a released
 * group that still notifies, a notification fired by a task's leave (after
 * the leave, not behind the task), waiters that must not miss an emptying,
 * and the misuse reports.
 */
#include "wait_helpers.h"

static void
test_empty(void)
{
	sq_group_t g = sq_group_create();
	CHECK(g != NULL);
	uint64_t t0 = sqt_now_ns();
	CHECK_EQ(sq_group_wait(g, SQ_TIME_NOW), 0);
	CHECK_EQ(sq_group_wait(g, SQ_TIME_FOREVER), 0);
	CHECK((sqt_now_ns() - t0) < 500000000ull);
	sq_release(g);
}

/* 100 tasks on 100 serial queues, then reuse the group. */
enum { QUEUES = 100 };
static int32_t member_count;

static void
count_member(void *ctx)
{
	if (ctx != NULL)
		msleep((long)(intptr_t)ctx);
	__atomic_add_fetch(&member_count, 1, __ATOMIC_SEQ_CST);
}

static void
test_wait_many_queues(void)
{
	sq_group_t g = sq_group_create();
	sq_queue_t q[QUEUES];
	char label[32];
	for (int i = 0; i < QUEUES; i++) {
		snprintf(label, sizeof(label), "test.group.%d", i);
		q[i] = sq_queue_create(label, SQ_QUEUE_SERIAL);
	}
	member_count = 0;
	for (int i = 0; i < QUEUES; i++)
		sq_group_async_f(g, q[i], (void *)(intptr_t)(i % 3),
				count_member);
	CHECK_EQ(sq_group_wait(g, SQ_TIME_FOREVER), 0);
	CHECK_EQ(load32(&member_count), QUEUES);

	/* Reuse: the group works the same after it emptied. */
	member_count = 0;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < QUEUES; i += 2)
			sq_group_async_f(g, q[i], NULL, count_member);
		CHECK_EQ(sq_group_wait(g, in_ms(10000)), 0);
		CHECK_EQ(load32(&member_count), (round + 1) * QUEUES / 2);
	}
	for (int i = 0; i < QUEUES; i++)
		sq_release(q[i]);
	sq_release(g);
}

/* A timed wait while a member sleeps 1 s: times out, then FOREVER works. */
static void
test_wait_timeout(void)
{
	sq_group_t g = sq_group_create();
	member_count = 0;
	uint64_t t0 = sqt_now_ns();
	sq_group_async_f(g, global_queue(), (void *)(intptr_t)1000,
			count_member);
	intptr_t r = sq_group_wait(g, in_ms(200));
	uint64_t ms = (sqt_now_ns() - t0) / 1000000;
	printf("group: 200 ms timeout returned %ld after %" PRIu64 " ms\n",
			(long)r, ms);
	CHECK(r != 0);
	CHECK(ms >= 190);
	CHECK_EQ(load32(&member_count), 0);

	/* The wall clock works too. */
	r = sq_group_wait(g, sq_walltime(NULL, 50 * (int64_t)NSEC_PER_MSEC));
	CHECK(r != 0);
	CHECK(sq_group_wait(g, SQ_TIME_NOW) != 0);

	CHECK_EQ(sq_group_wait(g, SQ_TIME_FOREVER), 0);
	ms = (sqt_now_ns() - t0) / 1000000;
	CHECK(ms >= 990);
	CHECK_EQ(load32(&member_count), 1);
	sq_release(g);
}

/* Notify runs after every member, once, on its queue. */
enum { NOTIFY_MEMBERS = 10 };
static int order[NOTIFY_MEMBERS + 2];
static int order_len;
static int32_t count_at_notify = -1;
static sq_semaphore_t notify_done;

static void
record_member(void *ctx)
{
	msleep(1);
	order[order_len++] = (int)(intptr_t)ctx; /* serial queue: no race */
	__atomic_add_fetch(&member_count, 1, __ATOMIC_SEQ_CST);
}

static void
record_notify(void *ctx)
{
	order[order_len++] = -1;
	count_at_notify = load32(&member_count);
	sq_semaphore_signal(notify_done);
}

static void
read_order_len(void *ctx)
{
	*(int *)ctx = order_len; /* on the serial queue that writes it */
}

static void
test_notify(void)
{
	sq_queue_t q = sq_queue_create("test.group.notify", SQ_QUEUE_SERIAL);
	sq_group_t g = sq_group_create();
	notify_done = sq_semaphore_create(0);
	member_count = 0;
	order_len = 0;
	for (int i = 0; i < NOTIFY_MEMBERS; i++)
		sq_group_async_f(g, q, (void *)(intptr_t)i, record_member);
	sq_group_notify_f(g, q, NULL, record_notify);
	sq_release(g); /* released right away: notify still comes */
	CHECK_EQ(sq_semaphore_wait(notify_done, in_ms(10000)), 0);
	CHECK_EQ(count_at_notify, NOTIFY_MEMBERS);
	CHECK_EQ(order_len, NOTIFY_MEMBERS + 1);
	for (int i = 0; i < NOTIFY_MEMBERS; i++)
		CHECK_EQ(order[i], i);
	CHECK_EQ(order[NOTIFY_MEMBERS], -1);
	/* Exactly once. */
	CHECK(sq_semaphore_wait(notify_done, in_ms(100)) != 0);

	/* Members on the global queue, notify elsewhere. */
	g = sq_group_create();
	member_count = 0;
	count_at_notify = -1;
	order_len = 0;
	for (int i = 0; i < NOTIFY_MEMBERS; i++)
		sq_group_async_f(g, global_queue(), (void *)(intptr_t)5,
				count_member);
	sq_group_notify_f(g, q, NULL, record_notify);
	CHECK_EQ(sq_semaphore_wait(notify_done, in_ms(10000)), 0);
	CHECK_EQ(count_at_notify, NOTIFY_MEMBERS);

	/* On an empty group it is submitted at once. */
	count_at_notify = -1;
	sq_group_notify_f(g, q, NULL, record_notify);
	CHECK_EQ(sq_semaphore_wait(notify_done, in_ms(10000)), 0);
	CHECK_EQ(count_at_notify, NOTIFY_MEMBERS);

	/* Several notifications, all fire, in registration order. */
	order_len = 0;
	sq_group_enter(g);
	for (int i = 0; i < 3; i++)
		sq_group_notify_f(g, q, NULL, record_notify);
	msleep(20);
	CHECK_EQ(order_len, 0);
	sq_group_leave(g);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(sq_semaphore_wait(notify_done, in_ms(10000)), 0);
	CHECK_EQ(order_len, 3);

	/* The notifications are on their queue before a waiter returns (as
	 * in libdispatch): a task sent there after the wait runs after them. */
	for (int round = 0; round < 20; round++) {
		order_len = 0;
		sq_group_async_f(g, global_queue(), (void *)(intptr_t)5,
				count_member);
		sq_group_notify_f(g, q, NULL, record_notify);
		CHECK_EQ(sq_group_wait(g, in_ms(10000)), 0);
		int seen = -1;
		sq_sync_f(q, &seen, read_order_len);
		CHECK_EQ(seen, 1);
		CHECK_EQ(sq_semaphore_wait(notify_done, in_ms(10000)), 0);
	}

	sq_release(g);
	sq_release(q);
	sq_release(notify_done);
}

/* Manual enter / leave from other threads. */
static sq_group_t manual_group;

static void *
leave_later(void *arg)
{
	msleep(20);
	sq_group_leave(manual_group);
	return NULL;
}

static void *
wait_forever(void *arg)
{
	intptr_t *r = arg;
	*r = sq_group_wait(manual_group, SQ_TIME_FOREVER);
	return NULL;
}

static void
test_enter_leave(void)
{
	manual_group = sq_group_create();
	sq_semaphore_t done = sq_semaphore_create(0);
	for (int i = 0; i < 3; i++)
		sq_group_enter(manual_group);
	sq_group_notify_f(manual_group, global_queue(), done,
			signal_semaphore);
	CHECK(sq_group_wait(manual_group, SQ_TIME_NOW) != 0);
	CHECK(sq_semaphore_wait(done, SQ_TIME_NOW) != 0);
	sq_group_leave(manual_group);
	CHECK(sq_group_wait(manual_group, SQ_TIME_NOW) != 0);
	sqt_run_threads(2, leave_later, NULL, 0);
	CHECK_EQ(sq_group_wait(manual_group, SQ_TIME_NOW), 0);
	CHECK_EQ(sq_semaphore_wait(done, in_ms(10000)), 0);

	/* Several sleeping waiters all wake on the one leave. */
	enum { WAITERS = 4 };
	intptr_t results[WAITERS];
	pthread_t t[WAITERS];
	sq_group_enter(manual_group);
	for (int i = 0; i < WAITERS; i++) {
		results[i] = -1;
		pthread_create(&t[i], NULL, wait_forever, &results[i]);
	}
	msleep(50);
	sq_group_leave(manual_group);
	for (int i = 0; i < WAITERS; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(results[i], 0);
	}
	sq_release(done);
	sq_release(manual_group);
}

/*
 * A waiter must not miss an emptying even when the group is entered again
 * at once (the generation word): one thread enters and leaves in a loop,
 * two others wait in a loop; no waiter may hang. At most 2 s.
 */
enum { FLIPS = 100000 };
static int32_t flipper_done;
static int32_t waits_done;
static int32_t flips_done;

static void *
flipper(void *arg)
{
	uint64_t t0 = sqt_now_ns();
	int i;
	for (i = 0; i < FLIPS; i++) {
		if ((i & 1023) == 0 && sqt_now_ns() - t0 > 2 * NSEC_PER_SEC)
			break;
		sq_group_enter(manual_group);
		for (volatile int spin = 0; spin < (i % 5) * 20; spin++)
			; /* let the waiters see the group non-empty */
		sq_group_leave(manual_group);
	}
	__atomic_store_n(&flips_done, i, __ATOMIC_SEQ_CST);
	__atomic_store_n(&flipper_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *
looping_waiter(void *arg)
{
	int n = 0;
	while (!load32(&flipper_done)) {
		if (sq_group_wait(manual_group, in_ms(10000)) != 0)
			return (void *)1;
		n++;
	}
	__atomic_add_fetch(&waits_done, n, __ATOMIC_SEQ_CST);
	return NULL;
}

static void
test_waiter_vs_reuse(void)
{
	manual_group = sq_group_create();
	pthread_t f, w[2];
	pthread_create(&f, NULL, flipper, NULL);
	pthread_create(&w[0], NULL, looping_waiter, NULL);
	pthread_create(&w[1], NULL, looping_waiter, NULL);
	void *r0, *r1;
	pthread_join(f, NULL);
	pthread_join(w[0], &r0);
	pthread_join(w[1], &r1);
	CHECK(r0 == NULL);
	CHECK(r1 == NULL);
	CHECK_EQ(sq_group_wait(manual_group, SQ_TIME_NOW), 0);
	printf("group: %d enter/leave flips, %d waits returned\n",
			(int)load32(&flips_done), (int)load32(&waits_done));
	CHECK(load32(&flips_done) >= 1000);
	sq_release(manual_group);
}

/*
 * rdar://11445820: enter; async x2; leave; notify; every cycle's
 * notification must run. A fresh group per cycle, released at once.
 */
enum { RACE_CYCLES = 200000 };
static int32_t race_sink;

static void
race_member(void *ctx)
{
	float x = 0;
	for (int i = 1; i < 20; i++)
		x += 1.0f / (float)i;
	__atomic_store_n((int *)ctx, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&race_sink, (int32_t)(x * 1000), __ATOMIC_RELAXED);
}

static void
test_notify_race(void)
{
	sq_queue_t qa = sq_queue_create("test.group.race.a", SQ_QUEUE_SERIAL);
	sq_queue_t qb = sq_queue_create("test.group.race.b", SQ_QUEUE_SERIAL);
	sq_queue_t nq = sq_queue_create("test.group.race.n", SQ_QUEUE_SERIAL);
	sq_semaphore_t done = sq_semaphore_create(0);
	uint64_t t0 = sqt_now_ns();
	uint64_t budget = 4 * NSEC_PER_SEC;
	int cycles = 0, lost = 0;
	int ran_a, ran_b;
	for (; cycles < RACE_CYCLES; cycles++) {
		if ((cycles & 1023) == 0 && sqt_now_ns() - t0 > budget)
			break;
		sq_group_t g = sq_group_create();
		sq_group_enter(g);
		sq_group_async_f(g, (cycles & 1) ? global_queue() : qa, &ran_a,
				race_member);
		sq_group_async_f(g, qb, &ran_b, race_member);
		sq_group_leave(g);
		sq_group_notify_f(g, nq, done, signal_semaphore);
		sq_release(g);
		if (sq_semaphore_wait(done, in_ms(10000)) != 0) {
			lost++;
			break;
		}
	}
	uint64_t ns = sqt_now_ns() - t0;
	printf("group: notify race: %d cycles in %.1f ms (%.2f us each)\n",
			cycles, ns / 1e6, cycles ? ns / 1e3 / cycles : 0.0);
	CHECK_EQ(lost, 0);
	CHECK(cycles >= 2000);
	sq_release(done);
	sq_release(qa);
	sq_release(qb);
	sq_release(nq);
}

/* A released group with pending members still notifies. */
static int32_t member_done_before_notify;

static void
slow_member(void *ctx)
{
	msleep(50);
	__atomic_store_n(&member_done_before_notify, 1, __ATOMIC_SEQ_CST);
}

static void
check_members_then_signal(void *ctx)
{
	if (load32(&member_done_before_notify))
		sq_semaphore_signal(ctx);
}

static void
test_released_group_notifies(void)
{
	sq_semaphore_t done = sq_semaphore_create(0);
	sq_group_t g = sq_group_create();
	sq_group_async_f(g, global_queue(), NULL, slow_member);
	sq_group_notify_f(g, global_queue(), done, check_members_then_signal);
	sq_release(g);
	CHECK_EQ(sq_semaphore_wait(done, in_ms(10000)), 0);

	/* Same with a manual member left from another thread. */
	g = sq_group_create();
	manual_group = g;
	sq_group_enter(g);
	sq_group_notify_f(g, global_queue(), done, signal_semaphore);
	sq_release(g);
	sqt_run_threads(1, leave_later, NULL, 0);
	CHECK_EQ(sq_semaphore_wait(done, in_ms(10000)), 0);
	sq_release(done);
}

/* The member that empties the group from a task on a global queue: the
 * notification for a global queue is not run inside that leave, and runs
 * while the task goes on for long (not held up behind it: the task waits
 * until the notification has run, with a 10 s limit). */
static struct {
	sq_group_t group;
	sq_semaphore_t notified;
	sq_semaphore_t task_done;
	pthread_t leaver;
	int32_t in_leave;
	int32_t ran_inside_leave;
	int32_t task_saw_notify;
} last_member;

static void
note_notify(void *ctx)
{
	if (load32(&last_member.in_leave) &&
			pthread_equal(pthread_self(), last_member.leaver))
		__atomic_store_n(&last_member.ran_inside_leave, 1,
				__ATOMIC_SEQ_CST);
	sq_semaphore_signal(last_member.notified);
}

static void
leave_then_go_on(void *ctx)
{
	last_member.leaver = pthread_self();
	__atomic_store_n(&last_member.in_leave, 1, __ATOMIC_SEQ_CST);
	sq_group_leave(last_member.group);
	__atomic_store_n(&last_member.in_leave, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&last_member.task_saw_notify,
			sq_semaphore_wait(last_member.notified,
			in_ms(10000)) == 0, __ATOMIC_SEQ_CST);
	sq_semaphore_signal(last_member.task_done);
}

static void
test_notify_from_last_member(void)
{
	last_member.notified = sq_semaphore_create(0);
	last_member.task_done = sq_semaphore_create(0);
	for (int round = 0; round < 20; round++) {
		/* A group in the program's storage and one of the runtime's. */
		sq_group_storage_t storage;
		sq_group_t g = round % 2 ? sq_group_init(&storage)
				: sq_group_create();
		last_member.group = g;
		last_member.in_leave = 0;
		last_member.ran_inside_leave = 0;
		last_member.task_saw_notify = 0;
		sq_group_enter(g);
		sq_group_notify_f(g, global_queue(), NULL, note_notify);
		sq_async_f(global_queue(), NULL, leave_then_go_on);
		CHECK_EQ(sq_semaphore_wait(last_member.task_done,
				in_ms(20000)), 0);
		CHECK_EQ(load32(&last_member.task_saw_notify), 1);
		CHECK_EQ(load32(&last_member.ran_inside_leave), 0);
		if (round % 2)
			sq_group_destroy(g);
		else
			sq_release(g);
	}
	sq_release(last_member.notified);
	sq_release(last_member.task_done);
}

/* ---- misuse, each in a child process ---- */

static void
leave_without_enter(void *unused)
{
	sq_group_t g = sq_group_create();
	sq_group_leave(g);
}

static void
leave_twice(void *unused)
{
	sq_group_t g = sq_group_create();
	sq_group_enter(g);
	sq_group_leave(g);
	sq_group_leave(g);
}

static void
async_null_function(void *unused)
{
	sq_group_async_f(sq_group_create(), global_queue(), NULL, NULL);
}

static void
notify_null_function(void *unused)
{
	sq_group_notify_f(sq_group_create(), global_queue(), NULL, NULL);
}

static void
test_misuse(void)
{
	CHECK_CRASH(leave_without_enter, NULL,
			"SwiftQueues: sq_group_leave: unbalanced leave");
	CHECK_CRASH(leave_twice, NULL,
			"SwiftQueues: sq_group_leave: unbalanced leave");
	CHECK_CRASH(async_null_function, NULL,
			"SwiftQueues: sq_group_async_f: "
			"function pointer is NULL");
	CHECK_CRASH(notify_null_function, NULL,
			"SwiftQueues: sq_group_notify_f: "
			"function pointer is NULL");
}

int
main(void)
{
	test_empty();
	test_wait_many_queues();
	test_wait_timeout();
	test_notify();
	test_enter_leave();
	test_waiter_vs_reuse();
	test_notify_race();
	test_released_group_notifies();
	test_notify_from_last_member();
	test_misuse();
	return sqt_finish("group");
}
