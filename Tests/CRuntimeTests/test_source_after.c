/*
 * sq_after_f and sq_after_workitem: delays land in deadline order and never
 * early, chained afters on the main queue (libdispatch's after test, scaled
 * down), 10,000 pending afters from several threads each run once, wall-clock
 * deadlines, deadlines in the past, SQ_TIME_FOREVER never runs, an after
 * into a suspended queue waits for the resume, a cancelled work item never
 * runs and an uncancelled one runs at or after its deadline.
 */
#include "source_helpers.h"

static uint64_t
wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- one landing ------------------------------------------------------------- */

struct landing {
	uint64_t target;        /* monotonic ns; 0: "now" */
	int id;
	atomic_int *order_pos;  /* where to record our id */
	int *order;
	atomic_int *early;
	uint64_t when;
	sq_semaphore_t sem;
};

static void
land(void *ctx)
{
	struct landing *l = ctx;
	l->when = sqt_now_ns();
	if (l->when < l->target)
		atomic_fetch_add(l->early, 1);
	int pos = atomic_fetch_add(l->order_pos, 1);
	if (pos < 8)
		l->order[pos] = l->id;
	sq_semaphore_signal(l->sem);
}

/* 60 ms, 20 ms and 0 ms, submitted in that order, land 0, 20, 60. */
static void
test_order_and_not_early(void)
{
	sq_queue_t q = sq_queue_create("after.serial", NULL);
	sq_semaphore_t sem = sq_semaphore_create(0);
	atomic_int pos = 0, early = 0;
	int order[8] = { 0 };
	const int delays[3] = { 60, 20, 0 };
	struct landing l[3];
	uint64_t start = sqt_now_ns();
	for (int i = 0; i < 3; i++) {
		sq_time_t when = sq_time(SQ_TIME_NOW,
				(int64_t)delays[i] * (int64_t)MS);
		l[i] = (struct landing){ when == SQ_TIME_NOW ? 0 : when,
			delays[i], &pos, order, &early, 0, sem };
		sq_after_f(when, q, &l[i], land);
	}
	for (int i = 0; i < 3; i++)
		CHECK(sem_wait_ms(sem, 10000));
	CHECK_EQ(atomic_load(&early), 0);
	CHECK_EQ(order[0], 0);
	CHECK_EQ(order[1], 20);
	CHECK_EQ(order[2], 60);
	CHECK(l[1].when - start >= 20 * MS);
	CHECK(l[0].when - start >= 60 * MS);
	CHECK(l[0].when - start < 2000 * MS);
	sq_release(q);
	settle();
	sq_release(sem);
}

/* ---- dispatch_after: a chain on the main queue ---------------------------------- */

static atomic_int chain_step, chain_early, chain_off_main;
static uint64_t chain_target[3], chain_when[3];

static void chain_next(void *ctx);

static void
chain_schedule(int step, int delay_ms)
{
	sq_time_t when = sq_time(SQ_TIME_NOW, (int64_t)delay_ms * (int64_t)MS);
	chain_target[step] = when == SQ_TIME_NOW ? sqt_now_ns() : when;
	sq_after_f(when, sq_get_main_queue(), (void *)(intptr_t)step,
			chain_next);
}

static void
chain_next(void *ctx)
{
	int step = (int)(intptr_t)ctx;
	uint64_t now = sqt_now_ns();
	chain_when[step] = now;
	if (now < chain_target[step])
		atomic_fetch_add(&chain_early, 1);
	if (!sqt_on_main_thread())
		atomic_fetch_add(&chain_off_main, 1);
	atomic_store(&chain_step, step + 1);
	if (step == 0)
		chain_schedule(1, 20);
	else if (step == 1)
		chain_schedule(2, 0);
}

static bool
chain_done(void *ctx)
{
	return atomic_load(&chain_step) == 3;
}

static void
test_chain_on_main_queue(void)
{
	uint64_t start = sqt_now_ns();
	chain_schedule(0, 60);
	CHECK(sq_main_queue_run_until(sq_time(SQ_TIME_NOW, 10000 * MS),
			chain_done, NULL));
	CHECK_EQ(atomic_load(&chain_step), 3);
	CHECK_EQ(atomic_load(&chain_early), 0);
	CHECK_EQ(atomic_load(&chain_off_main), 0);
	CHECK(chain_when[0] - start >= 60 * MS);
	CHECK(chain_when[1] - chain_when[0] >= 20 * MS);
	CHECK(chain_when[2] >= chain_when[1]);
	CHECK(chain_when[2] - start < 3000 * MS);
}

/* ---- 10,000 pending afters, from 4 threads --------------------------------------- */

#define NAFTER 10000

static atomic_int after_counts[NAFTER];
static sq_group_t after_group;
static uint64_t after_base;

static void
after_count(void *ctx)
{
	atomic_int *c = ctx;
	if (atomic_fetch_add(c, 1) == 0)
		sq_group_leave(after_group);
}

static void *
post_afters(void *arg)
{
	int t = (int)(intptr_t)*(void **)arg;
	for (int i = t; i < NAFTER; i += 4) {
		sq_group_enter(after_group);
		sq_after_f(after_base + (uint64_t)(1 + i % 100) * MS,
				global_queue(), &after_counts[i], after_count);
	}
	return NULL;
}

static void
test_many_pending(void)
{
	after_group = sq_group_create();
	after_base = sqt_now_ns();
	void *args[4] = { (void *)0, (void *)1, (void *)2, (void *)3 };
	sqt_run_threads(4, post_afters, args, sizeof(args[0]));
	CHECK_EQ(sq_group_wait(after_group, sq_time(SQ_TIME_NOW,
			20000 * MS)), 0);
	settle();
	int once = 0;
	for (int i = 0; i < NAFTER; i++)
		once += atomic_load(&after_counts[i]) == 1;
	CHECK_EQ(once, NAFTER);
	sq_release(after_group);
}

/* ---- wall clock, the past, FOREVER ------------------------------------------------ */

static atomic_int simple_runs;
static uint64_t simple_when_mono, simple_when_wall;
static sq_semaphore_t simple_sem;

static void
simple(void *ctx)
{
	simple_when_mono = sqt_now_ns();
	simple_when_wall = wall_ns();
	atomic_fetch_add(&simple_runs, 1);
	sq_semaphore_signal(simple_sem);
}

static void
test_clocks_and_edges(void)
{
	simple_sem = sq_semaphore_create(0);

	/* Wall clock, 30 ms from now: not early on either clock (1 ms for
	 * the clocks' own granularity). */
	uint64_t w0 = wall_ns(), m0 = sqt_now_ns();
	sq_after_f(sq_walltime(NULL, 30 * MS), global_queue(), NULL, simple);
	CHECK(sem_wait_ms(simple_sem, 10000));
	CHECK(simple_when_wall + 1 * MS >= w0 + 30 * MS);
	CHECK(simple_when_mono + 1 * MS >= m0 + 30 * MS);
	CHECK(simple_when_mono - m0 < 3000 * MS);

	/* SQ_WALLTIME_NOW and a deadline in the past: at once. */
	m0 = sqt_now_ns();
	sq_after_f(SQ_WALLTIME_NOW, global_queue(), NULL, simple);
	CHECK(sem_wait_ms(simple_sem, 10000));
	CHECK(simple_when_mono - m0 < 500 * MS);
	m0 = sqt_now_ns();
	sq_after_f(sq_time(SQ_TIME_NOW, -1000 * (int64_t)MS), global_queue(),
			NULL, simple);
	CHECK(sem_wait_ms(simple_sem, 10000));
	CHECK(simple_when_mono - m0 < 500 * MS);
	CHECK_EQ(atomic_load(&simple_runs), 3);

	/* SQ_TIME_FOREVER: never. */
	sq_after_f(SQ_TIME_FOREVER, global_queue(), NULL, simple);
	settle();
	settle();
	CHECK_EQ(atomic_load(&simple_runs), 3);

	/* Into a suspended queue: lands there, runs on resume. */
	sq_queue_t q = sq_queue_create("after.suspended", NULL);
	sq_suspend(q);
	sq_after_f(sq_time(SQ_TIME_NOW, 10 * MS), q, NULL, simple);
	settle();
	CHECK_EQ(atomic_load(&simple_runs), 3);
	sq_resume(q);
	CHECK(sem_wait_ms(simple_sem, 10000));
	CHECK_EQ(atomic_load(&simple_runs), 4);

	/* The target queue stays alive while an after is pending. */
	sq_queue_t q2 = sq_queue_create("after.released", NULL);
	sq_after_f(sq_time(SQ_TIME_NOW, 30 * MS), q2, NULL, simple);
	sq_release(q2);
	CHECK(sem_wait_ms(simple_sem, 10000));
	CHECK_EQ(atomic_load(&simple_runs), 5);

	sq_release(q);
	settle();
	sq_release(simple_sem);
}

/* ---- sq_after_workitem ----------------------------------------------------------- */

struct item_ctx {
	atomic_int runs;
	uint64_t when;
};

static void
item_fn(void *ctx)
{
	struct item_ctx *c = ctx;
	c->when = sqt_now_ns();
	atomic_fetch_add(&c->runs, 1);
}

static void
test_after_workitem(void)
{
	struct item_ctx cancelled = { 0, 0 }, kept = { 0, 0 },
			forever = { 0, 0 };
	sq_workitem_t a = sq_workitem_create_f(0, &cancelled, item_fn);
	sq_workitem_t b = sq_workitem_create_f(0, &kept, item_fn);
	sq_workitem_t c = sq_workitem_create_f(0, &forever, item_fn);
	sq_time_t deadline = sq_time(SQ_TIME_NOW, 40 * MS);
	sq_after_workitem(deadline, global_queue(), a);
	sq_after_workitem(deadline, global_queue(), b);
	sq_after_workitem(SQ_TIME_FOREVER, global_queue(), c);
	sq_workitem_cancel(a);
	/* Cancelled: finished at once, never runs. */
	CHECK_EQ(sq_workitem_wait(a, sq_time(SQ_TIME_NOW, 10000 * MS)), 0);
	CHECK_EQ(sq_workitem_wait(b, sq_time(SQ_TIME_NOW, 10000 * MS)), 0);
	CHECK_EQ(atomic_load(&kept.runs), 1);
	CHECK(kept.when >= deadline);
	settle();
	CHECK_EQ(atomic_load(&cancelled.runs), 0);
	CHECK_EQ(atomic_load(&kept.runs), 1);
	CHECK_EQ(atomic_load(&forever.runs), 0);
	/* The FOREVER item was never submitted: it is not finished. */
	CHECK(sq_workitem_wait(c, sq_time(SQ_TIME_NOW, 20 * MS)) != 0);
	/* Releasing our references is all it takes; the pending after
	 * holds its own. */
	sq_release(a);
	sq_release(b);
	sq_release(c);

	/* Cancel after it fired but before the queue ran it: never runs. */
	struct item_ctx late = { 0, 0 };
	sq_queue_t q = sq_queue_create("after.item", NULL);
	sq_suspend(q);
	sq_workitem_t d = sq_workitem_create_f(0, &late, item_fn);
	sq_after_workitem(sq_time(SQ_TIME_NOW, 10 * MS), q, d);
	settle();
	sq_workitem_cancel(d);
	sq_resume(q);
	settle();
	CHECK_EQ(atomic_load(&late.runs), 0);
	sq_release(d);
	sq_release(q);
}

/* ---- close precise afters: one loop pass ------------------------------------- */

uint64_t _sq_debug_timer_wakeups(void);

#define CLOSE_N 10

/* Ten afters 37 us apart, the first 30 ms away, on a serial queue: each
 * lands at or after its deadline, in order, and the loop serves the whole
 * chain in one pass (each one extends the early window; without that the
 * loop would wake again while the first ones wait for their deadlines). A
 * loop held up past the deadlines also fires them in one pass, so only a
 * registration split across passes by a stall needs the retry. */
static uint64_t
close_chain_passes(void)
{
	sq_queue_t q = sq_queue_create("after.close", NULL);
	sq_semaphore_t sem = sq_semaphore_create(0);
	atomic_int pos = 0, early = 0;
	int order[8] = { 0 };
	struct landing l[CLOSE_N];
	uint64_t before = _sq_debug_timer_wakeups();
	uint64_t base = sqt_now_ns() + 30 * MS;
	for (int i = 0; i < CLOSE_N; i++) {
		l[i] = (struct landing){ base + (uint64_t)i * 37 * 1000, i,
				&pos, order, &early, 0, sem };
		sq_after_f((sq_time_t)l[i].target, q, &l[i], land);
	}
	for (int i = 0; i < CLOSE_N; i++)
		CHECK_EQ(sq_semaphore_wait(sem, sq_time(SQ_TIME_NOW,
				5000 * MS)), 0);
	uint64_t passes = _sq_debug_timer_wakeups() - before;
	CHECK_EQ(atomic_load(&early), 0);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(order[i], i);
	for (int i = 0; i < CLOSE_N; i++)
		CHECK(l[i].when >= l[i].target);
	sq_release(sem);
	sq_release(q);
	return passes;
}

static void
test_close_afters_one_pass(void)
{
	uint64_t passes = 0;
	for (int attempt = 0; attempt < 3 && passes != 1; attempt++)
		passes = close_chain_passes();
	CHECK_EQ(passes, 1);
}

/* ---- sq_after_leeway_f --------------------------------------------------------- */

/* A at +30 ms with 40 ms of leeway, B at +50 ms with none: A's window holds
 * B's deadline, so one loop pass serves both, at B's deadline; neither
 * lands early. Returns the passes. */
static uint64_t
leeway_pair_passes(uint64_t *a_at, uint64_t *b_at)
{
	sq_semaphore_t sem = sq_semaphore_create(0);
	atomic_int pos = 0, early = 0;
	int order[8] = { 0 };
	uint64_t base = sqt_now_ns();
	struct landing a = { base + 30 * MS, 1, &pos, order, &early, 0, sem };
	struct landing b = { base + 50 * MS, 2, &pos, order, &early, 0, sem };
	uint64_t before = _sq_debug_timer_wakeups();
	sq_after_leeway_f((sq_time_t)a.target, 40 * MS, global_queue(), &a,
			land);
	sq_after_leeway_f((sq_time_t)b.target, 0, global_queue(), &b, land);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(sq_semaphore_wait(sem, sq_time(SQ_TIME_NOW,
				5000 * MS)), 0);
	uint64_t passes = _sq_debug_timer_wakeups() - before;
	CHECK_EQ(atomic_load(&early), 0);
	*a_at = a.when - base;
	*b_at = b.when - base;
	sq_release(sem);
	return passes;
}

static void
test_after_leeway(void)
{
	uint64_t a_at = 0, b_at = 0, passes = 0;
	for (int attempt = 0; attempt < 3 && passes != 1; attempt++)
		passes = leeway_pair_passes(&a_at, &b_at);
	CHECK_EQ(passes, 1);
	/* Served by B's wake-up (which, B being precise, comes up to 0.2 ms
	 * ahead of B's deadline), not at its own deadline. */
	CHECK(a_at >= 45 * MS);
	CHECK(b_at >= 50 * MS);

	/* Leeway 0 is sq_after_f; FOREVER never submits. */
	sq_semaphore_t sem = sq_semaphore_create(0);
	atomic_int pos = 0, early = 0;
	int order[8] = { 0 };
	struct landing c = { sqt_now_ns() + 5 * MS, 3, &pos, order, &early, 0,
			sem };
	sq_after_leeway_f((sq_time_t)c.target, 0, global_queue(), &c, land);
	sq_after_leeway_f(SQ_TIME_FOREVER, 10 * MS, global_queue(), &c, land);
	CHECK_EQ(sq_semaphore_wait(sem, sq_time(SQ_TIME_NOW, 5000 * MS)), 0);
	CHECK(c.when >= c.target);
	settle();
	CHECK_EQ(atomic_load(&pos), 1);
	CHECK_EQ(atomic_load(&early), 0);
	sq_release(sem);
}

int
main(void)
{
	test_order_and_not_early();
	test_chain_on_main_queue();
	test_many_pending();
	test_clocks_and_edges();
	test_after_workitem();
	test_close_afters_one_pass();
	test_after_leeway();
	return sqt_finish("test_source_after");
}
