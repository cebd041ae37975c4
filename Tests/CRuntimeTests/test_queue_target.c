/*
 * Target queues and queue-specific data: a serial target serialises every
 * queue that targets it, retargeting, suspension of a target, queue-specific
 * keys through target chains, sq_assert_queue / sq_assert_queue_not (the
 * passing cases; the failing ones are in test_queue_misuse.c). Two serial
 * queues targeting one serial queue never run at once; a concurrent queue
 * targeting a serial queue is serial. After libdispatch's context_for_key
 * test.
 */
#include "queue_helpers.h"

#define WAIT_MS 10000

/* ---- two serial queues onto one serial target ------------------------------ */

#define TWO_N SQT_SCALE(5000, 1000)

static struct {
	atomic_int inside;
	atomic_int overlaps;
	atomic_int ran;
	int plain; /* updated by every task without a lock */
} shared;

static void
exclusive_task(void *arg)
{
	if (atomic_fetch_add(&shared.inside, 1) != 0)
		atomic_fetch_add(&shared.overlaps, 1);
	shared.plain++;
	for (volatile int spin = 0; spin < 100; spin++) {
	}
	atomic_fetch_sub(&shared.inside, 1);
	atomic_fetch_add(&shared.ran, 1);
}

static void
reset_shared(void)
{
	atomic_store(&shared.inside, 0);
	atomic_store(&shared.overlaps, 0);
	atomic_store(&shared.ran, 0);
	shared.plain = 0;
}

static void
read_plain(void *arg)
{
	*(int *)arg = shared.plain;
}

static void
test_two_serial_onto_one(void)
{
	reset_shared();
	sq_queue_t t = sq_queue_create("com.example.target", NULL);
	sq_queue_t q1 = sq_queue_create_with_target("com.example.q1", NULL, t);
	sq_queue_t q2 = sq_queue_create("com.example.q2", NULL);
	sq_set_target_queue(q2, t);
	for (int i = 0; i < TWO_N; i++) {
		sq_async_f(q1, NULL, exclusive_task);
		sq_async_f(q2, NULL, exclusive_task);
		if (i % 100 == 0)
			sq_async_f(t, NULL, exclusive_task);
	}
	int expected = 2 * TWO_N + (TWO_N + 99) / 100;
	CHECK(sqt_wait_int(&shared.ran, expected, WAIT_MS));
	CHECK_EQ(atomic_load(&shared.overlaps), 0);
	int plain = 0;
	sq_sync_f(t, &plain, read_plain);
	CHECK_EQ(plain, expected);
	sq_release(q1);
	sq_release(q2);
	sq_release(t);
}

/* ---- a concurrent queue targeting a serial queue is serial ---------------- */

static void
sleepy_exclusive_task(void *arg)
{
	if (atomic_fetch_add(&shared.inside, 1) != 0)
		atomic_fetch_add(&shared.overlaps, 1);
	sqt_sleep_ms(2);
	shared.plain++;
	atomic_fetch_sub(&shared.inside, 1);
	atomic_fetch_add(&shared.ran, 1);
}

static void
test_concurrent_onto_serial(void)
{
	reset_shared();
	sq_queue_t s = sq_queue_create("com.example.S", NULL);
	sq_queue_t c = sq_queue_create_with_target("com.example.C",
			SQ_QUEUE_CONCURRENT, s);
	for (int i = 0; i < 50; i++)
		sq_async_f(c, NULL, sleepy_exclusive_task);
	CHECK(sqt_wait_int(&shared.ran, 50, WAIT_MS));
	CHECK_EQ(atomic_load(&shared.overlaps), 0);

	/* Set after creation, with barriers and sync mixed in. */
	reset_shared();
	sq_queue_t c2 = sq_queue_create("com.example.C2", SQ_QUEUE_CONCURRENT);
	sq_set_target_queue(c2, s);
	for (int i = 0; i < 200; i++) {
		if (i % 10 == 0)
			sq_barrier_async_f(c2, NULL, exclusive_task);
		else
			sq_async_f(c2, NULL, exclusive_task);
		sq_async_f(c, NULL, exclusive_task);
	}
	sq_sync_f(c2, NULL, exclusive_task);
	CHECK(sqt_wait_int(&shared.ran, 401, WAIT_MS));
	CHECK_EQ(atomic_load(&shared.overlaps), 0);
	sq_release(c);
	sq_release(c2);
	sq_release(s);
}

/* ---- shared isolation through targeting ------------------------------------ */

static void
test_shared_isolation(void)
{
	reset_shared();
	sq_queue_t bar = sq_queue_create("Bar.isolation", NULL);
	sq_queue_t foo = sq_queue_create("Foo.isolation", NULL);
	sq_set_target_queue(foo, bar);
	for (int i = 0; i < 10000; i++) {
		sq_async_f(foo, NULL, exclusive_task);
		sq_async_f(bar, NULL, exclusive_task);
	}
	int plain = 0;
	sq_sync_f(foo, &plain, read_plain);
	sq_sync_f(bar, &plain, read_plain);
	sq_sync_f(foo, &plain, read_plain);
	CHECK_EQ(plain, 20000);
	CHECK_EQ(atomic_load(&shared.overlaps), 0);
	sq_release(foo);
	sq_release(bar);
}

/* ---- a serial queue on a concurrent target stays serial -------------------- */

static void
test_serial_onto_concurrent(void)
{
	reset_shared();
	sq_queue_t c = sq_queue_create("com.example.wide", SQ_QUEUE_CONCURRENT);
	sq_queue_t s1 = sq_queue_create_with_target("com.example.s1", NULL, c);
	for (int i = 0; i < 30; i++)
		sq_async_f(s1, NULL, sleepy_exclusive_task);
	CHECK(sqt_wait_int(&shared.ran, 30, WAIT_MS));
	CHECK_EQ(atomic_load(&shared.overlaps), 0);
	sq_release(s1);
	sq_release(c);
}

/* ---- suspending a target holds the queues that target it ----------------- */

static atomic_int held_ran;

static void
held_task(void *arg)
{
	atomic_fetch_add(&held_ran, 1);
}

static void
test_suspended_target(void)
{
	sq_queue_t t = sq_queue_create("com.example.suspended.target", NULL);
	sq_queue_t q = sq_queue_create_with_target("com.example.child", NULL, t);
	sq_suspend(t);
	sq_async_f(q, NULL, held_task);
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&held_ran), 0);
	sq_resume(t);
	CHECK(sqt_wait_int(&held_ran, 1, WAIT_MS));
	sq_release(q);
	sq_release(t);
}

/* ---- queue-specific data (context_for_key port) ---------------------------- */

static char key_a, key_b, key_c, key_d;
static atomic_int destructor_slots;   /* taken */
static atomic_int destructor_calls;   /* published: slot written */
static void *_Atomic destructed[16];

static void
destructor(void *ctx)
{
	int n = atomic_fetch_add(&destructor_slots, 1);
	if (n < 16)
		atomic_store(&destructed[n], ctx);
	atomic_fetch_add(&destructor_calls, 1);
}

struct specific_probe {
	void *a, *b, *c, *own_b;
	sq_queue_t q;
	sem_t done;
};

static void
specific_probe_task(void *arg)
{
	struct specific_probe *p = arg;
	p->a = sq_get_specific(&key_a);
	p->b = sq_get_specific(&key_b);
	p->c = sq_get_specific(&key_c);
	p->own_b = sq_queue_get_specific(p->q, &key_b);
	sem_post(&p->done);
}

static void
probe_specific(sq_queue_t q, struct specific_probe *p)
{
	p->a = p->b = p->c = p->own_b = (void *)1;
	p->q = q;
	sq_async_f(q, p, specific_probe_task);
	CHECK(sqt_sem_wait_ms(&p->done, WAIT_MS));
}

static void
test_queue_specific(void)
{
	static char ctx_a1[] = "a1", ctx_a2[] = "a2", ctx_b[] = "b",
		ctx_tb[] = "target-b", ctx_tc[] = "target-c", ctx_d[] = "d",
		ctx_x[] = "x";
	static struct specific_probe p;
	sem_init(&p.done, 0, 0);

	sq_queue_t t = sq_queue_create("com.example.specific.target", NULL);
	sq_queue_t q = sq_queue_create_with_target("com.example.specific",
			NULL, t);

	/* set / get on the queue itself */
	sq_queue_set_specific(q, &key_a, ctx_a1, destructor);
	CHECK(sq_queue_get_specific(q, &key_a) == ctx_a1);
	CHECK(sq_queue_get_specific(q, &key_b) == NULL);
	CHECK(sq_queue_get_specific(t, &key_a) == NULL);
	/* outside any task */
	CHECK(sq_get_specific(&key_a) == NULL);

	/* through the target chain: t's keys are visible from q's tasks,
	 * q's own value shadows t's */
	sq_queue_set_specific(t, &key_b, ctx_tb, destructor);
	sq_queue_set_specific(t, &key_c, ctx_tc, destructor);
	probe_specific(q, &p);
	CHECK(p.a == ctx_a1);
	CHECK(p.b == ctx_tb);
	CHECK(p.c == ctx_tc);
	CHECK(p.own_b == NULL); /* sq_queue_get_specific: the queue itself */
	sq_queue_set_specific(q, &key_b, ctx_b, destructor);
	probe_specific(q, &p);
	CHECK(p.b == ctx_b);
	CHECK(p.own_b == ctx_b);
	probe_specific(t, &p);
	CHECK(p.a == NULL);
	CHECK(p.b == ctx_tb);

	/* inside sync from this thread */
	p.q = q;
	sq_sync_f(q, &p, specific_probe_task);
	CHECK(sqt_sem_wait_ms(&p.done, WAIT_MS));
	CHECK(p.a == ctx_a1);
	CHECK(p.c == ctx_tc);

	/* replace: the destructor gets the old value (perhaps asynchronously,
	 * as in libdispatch) */
	CHECK_EQ(atomic_load(&destructor_calls), 0);
	sq_queue_set_specific(q, &key_a, ctx_a2, destructor);
	CHECK(sqt_wait_int(&destructor_calls, 1, WAIT_MS));
	CHECK(destructed[0] == ctx_a1);
	CHECK(sq_queue_get_specific(q, &key_a) == ctx_a2);

	/* NULL removes; the destructor runs */
	sq_queue_set_specific(q, &key_a, NULL, NULL);
	CHECK(sqt_wait_int(&destructor_calls, 2, WAIT_MS));
	CHECK(destructed[1] == ctx_a2);
	CHECK(sq_queue_get_specific(q, &key_a) == NULL);
	probe_specific(q, &p);
	CHECK(p.a == NULL);

	/* a key without a destructor */
	sq_queue_set_specific(q, &key_d, ctx_d, NULL);
	CHECK(sq_queue_get_specific(q, &key_d) == ctx_d);
	sq_queue_set_specific(q, &key_d, ctx_x, NULL);
	CHECK(sq_queue_get_specific(q, &key_d) == ctx_x);
	sqt_sleep_ms(10);
	CHECK_EQ(atomic_load(&destructor_calls), 2);

	/* destroying the queues runs the remaining destructors:
	 * q's key_b, t's key_b and key_c -> 5 in all */
	sq_release(q);
	sq_release(t);
	CHECK(sqt_wait_int(&destructor_calls, 5, WAIT_MS));
	sqt_sleep_ms(20);
	CHECK_EQ(atomic_load(&destructor_calls), 5);
	int seen_b = 0, seen_tb = 0, seen_tc = 0;
	for (int i = 2; i < 5; i++) {
		seen_b += destructed[i] == ctx_b;
		seen_tb += destructed[i] == ctx_tb;
		seen_tc += destructed[i] == ctx_tc;
	}
	CHECK(seen_b == 1 && seen_tb == 1 && seen_tc == 1);
	sem_destroy(&p.done);
}

/* ---- sq_assert_queue / _not / _barrier: the passing cases ----------------- */

struct assert_ctx {
	sq_queue_t q, t, other;
	atomic_int reached;
};

static void
asserting_task(void *arg)
{
	struct assert_ctx *a = arg;
	sq_assert_queue(a->q);
	sq_assert_queue(a->t); /* q targets t: t's work is running too */
	sq_assert_queue_not(a->other);
	sq_assert_queue_barrier(a->q);
	atomic_fetch_add(&a->reached, 1);
}

static void
asserting_barrier(void *arg)
{
	struct assert_ctx *a = arg;
	sq_assert_queue(a->other);
	sq_assert_queue_barrier(a->other);
	sq_assert_queue_not(a->q);
	atomic_fetch_add(&a->reached, 1);
}

static void
test_assert_queue_passes(void)
{
	static struct assert_ctx a;
	a.t = sq_queue_create("com.example.assert.t", NULL);
	a.q = sq_queue_create_with_target("com.example.assert.q", NULL, a.t);
	a.other = sq_queue_create("com.example.assert.other",
			SQ_QUEUE_CONCURRENT);
	sq_async_f(a.q, &a, asserting_task);
	sq_sync_f(a.q, &a, asserting_task);
	sq_barrier_async_f(a.other, &a, asserting_barrier);
	sq_barrier_sync_f(a.other, &a, asserting_barrier);
	CHECK(sqt_wait_int(&a.reached, 4, WAIT_MS));
	sq_assert_queue_not(a.q);
	sq_assert_queue_not(a.other);
	sq_release(a.q);
	sq_release(a.t);
	sq_release(a.other);
}

/* ---- retargeting ----------------------------------------------------------- */

static char where_key;

struct retarget {
	sem_t started, release;
	void *where[64];
	int n;
	atomic_int ran;
	atomic_int inside, overlaps;
};

static void
retarget_gate(void *arg)
{
	struct retarget *r = arg;
	sem_post(&r->started);
	sqt_sem_wait_ms(&r->release, WAIT_MS);
	atomic_fetch_add(&r->ran, 1);
}

static void
retarget_task(void *arg)
{
	struct retarget *r = arg;
	if (atomic_fetch_add(&r->inside, 1) != 0)
		atomic_fetch_add(&r->overlaps, 1);
	if (r->n < 64)
		r->where[r->n++] = sq_get_specific(&where_key);
	atomic_fetch_sub(&r->inside, 1);
	atomic_fetch_add(&r->ran, 1);
}

static void
test_retarget(void)
{
	static char m1[] = "t1", m2[] = "t2";
	static struct retarget r;
	sem_init(&r.started, 0, 0);
	sem_init(&r.release, 0, 0);
	sq_queue_t t1 = sq_queue_create("com.example.t1", NULL);
	sq_queue_t t2 = sq_queue_create("com.example.t2", SQ_QUEUE_CONCURRENT);
	sq_queue_set_specific(t1, &where_key, m1, NULL);
	sq_queue_set_specific(t2, &where_key, m2, NULL);
	sq_queue_t q = sq_queue_create_with_target("com.example.retargeted",
			NULL, t1);

	/* idle: the next task runs through the new target */
	sq_async_f(q, &r, retarget_task);
	CHECK(sqt_wait_int(&r.ran, 1, WAIT_MS));
	CHECK(r.where[0] == m1);
	sq_set_target_queue(q, t2);
	sq_async_f(q, &r, retarget_task);
	CHECK(sqt_wait_int(&r.ran, 2, WAIT_MS));
	CHECK(r.where[1] == m2);

	/* busy: retarget while a task runs and others wait; every task runs
	 * once, in order, one at a time */
	sq_async_f(q, &r, retarget_gate);
	CHECK(sqt_sem_wait_ms(&r.started, WAIT_MS));
	for (int i = 0; i < 20; i++)
		sq_async_f(q, &r, retarget_task);
	sq_set_target_queue(q, t1);
	for (int i = 0; i < 20; i++)
		sq_async_f(q, &r, retarget_task);
	sem_post(&r.release);
	CHECK(sqt_wait_int(&r.ran, 43, WAIT_MS));
	CHECK_EQ(atomic_load(&r.overlaps), 0);
	/* once idle again, the new target holds */
	sq_async_f(q, &r, retarget_task);
	CHECK(sqt_wait_int(&r.ran, 44, WAIT_MS));
	CHECK(r.where[42] == m1);

	/* NULL means the default global queue */
	sq_set_target_queue(q, SQ_TARGET_QUEUE_DEFAULT);
	sq_async_f(q, &r, retarget_task);
	CHECK(sqt_wait_int(&r.ran, 45, WAIT_MS));
	CHECK(r.where[43] == NULL);

	/* a queue that targets HIGH still reports itself as current */
	sq_set_target_queue(q, sq_get_global_queue(SQ_QUEUE_PRIORITY_HIGH, 0));
	sq_async_f(q, &r, retarget_task);
	CHECK(sqt_wait_int(&r.ran, 46, WAIT_MS));
	sq_release(q);
	sq_release(t1);
	sq_release(t2);
	sem_destroy(&r.started);
	sem_destroy(&r.release);
}

int
main(void)
{
	test_two_serial_onto_one();
	test_concurrent_onto_serial();
	test_shared_isolation();
	test_serial_onto_concurrent();
	test_suspended_target();
	test_queue_specific();
	test_assert_queue_passes();
	test_retarget();
	return sqt_finish("test_queue_target");
}
