/*
 * Precise timers fired early (event.c, "Precise wake-ups"): the loop fires
 * leeway-0 timers up to 200 us ahead and an on-time runner on a worker
 * does the rest at the deadline. What must hold whatever the timing:
 *
 *   - no after and no timer tick runs before its deadline;
 *   - every after runs exactly once, dense ones (37 us apart) and 20,000
 *     due at one instant included,
 *     and afters on a serial queue due at least 1 ms apart run in
 *     deadline order;
 *   - a repeating leeway-0 timer's data adds up to the ticks due;
 *   - work that blocks does not hold up the next precise deadline: an
 *     after due 2 ms after one that sleeps 300 ms runs during that sleep;
 *   - a timer cancelled long before its deadline never calls its handler,
 *     and one re-armed later fires at the new time only.
 *
 * Timing policy: "not early" is exact; upper bounds leave hundreds of ms.
 */
#include "queue_helpers.h"

#include <stdatomic.h>

#define MS 1000000ull
#define US 1000ull

/* ---- afters: never early, exactly once, in order ------------------------ */

#define AFTERS 400

struct after_rec {
	uint64_t deadline;
	atomic_ullong ran_at;
	atomic_int runs;
	int order; /* position in the serial queue's run order */
};

static struct after_rec afters[AFTERS];
static atomic_int after_left;
static atomic_int serial_pos;
static sem_t afters_done;

static void
after_hit(void *ctx)
{
	struct after_rec *r = ctx;
	atomic_store(&r->ran_at, sqt_now_ns());
	r->order = atomic_fetch_add(&serial_pos, 1);
	atomic_fetch_add(&r->runs, 1);
	if (atomic_fetch_sub(&after_left, 1) == 1)
		sem_post(&afters_done);
}

static void
test_afters(sq_queue_t q, const char *what)
{
	atomic_store(&after_left, AFTERS);
	atomic_store(&serial_pos, 0);
	uint64_t now = sqt_now_ns() + 2 * MS;
	for (int i = 0; i < AFTERS; i++) {
		struct after_rec *r = &afters[i];
		/* Half dense (37 us apart), half spread (1 ms apart, in
		 * reverse submission order). */
		r->deadline = i < AFTERS / 2 ? now + (uint64_t)i * 37 * US
				: now + 10 * MS + (uint64_t)(AFTERS - i) * MS;
		atomic_store(&r->ran_at, 0);
		atomic_store(&r->runs, 0);
		sq_after_f(r->deadline, q, r, after_hit);
	}
	CHECK(sqt_sem_wait_ms(&afters_done, 10000));
	sqt_sleep_ms(20); /* a second run would show here */
	int early = 0, once = 0;
	for (int i = 0; i < AFTERS; i++) {
		if (atomic_load(&afters[i].ran_at) < afters[i].deadline)
			early++;
		if (atomic_load(&afters[i].runs) == 1)
			once++;
	}
	if (early || once != AFTERS)
		fprintf(stderr, "%s: %d early, %d of %d once\n", what,
				early, once, AFTERS);
	CHECK_EQ(early, 0);
	CHECK_EQ(once, AFTERS);
}

static void
test_serial_order(void)
{
	sq_queue_t q = sq_queue_create("ontime.serial", NULL);
	test_afters(q, "serial");
	/* The spread half: due 1 ms apart, submitted latest first. */
	int inversions = 0;
	for (int i = AFTERS / 2; i + 1 < AFTERS; i++)
		if (afters[i].order < afters[i + 1].order)
			inversions++; /* i is due later than i + 1 */
	CHECK_EQ(inversions, 0);
	sq_release(q);
}

/* ---- many afters due at one instant ------------------------------------- */

#define SAME 20000

static atomic_int same_left, same_early;
static uint64_t same_deadline;
static sem_t same_done;

static void
same_hit(void *ctx)
{
	if (sqt_now_ns() < same_deadline)
		atomic_fetch_add(&same_early, 1);
	if (atomic_fetch_sub(&same_left, 1) == 1)
		sem_post(&same_done);
}

static void
test_same_deadline(void)
{
	sem_init(&same_done, 0, 0);
	atomic_store(&same_left, SAME);
	same_deadline = sqt_now_ns() + 30 * MS;
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	for (int i = 0; i < SAME; i++)
		sq_after_f(same_deadline, g, NULL, same_hit);
	CHECK(sqt_sem_wait_ms(&same_done, 20000));
	CHECK_EQ(atomic_load(&same_early), 0);
	CHECK_EQ(atomic_load(&same_left), 0);
}

/* ---- a blocking after does not hold up the next ------------------------- */

static atomic_ullong blocker_end, second_at;
static sem_t block_done, second_done;

static void
blocker(void *ctx)
{
	sqt_sleep_ms(300);
	atomic_store(&blocker_end, sqt_now_ns());
	sem_post(&block_done);
}

static void
second(void *ctx)
{
	atomic_store(&second_at, sqt_now_ns());
	sem_post(&second_done);
}

static void
test_blocking_work(void)
{
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	uint64_t t = sqt_now_ns() + 5 * MS;
	sq_after_f(t, g, NULL, blocker);
	sq_after_f(t + 2 * MS, g, NULL, second);
	CHECK(sqt_sem_wait_ms(&second_done, 5000));
	CHECK(sqt_sem_wait_ms(&block_done, 5000));
	CHECK(atomic_load(&second_at) >= t + 2 * MS);
	CHECK(atomic_load(&second_at) < atomic_load(&blocker_end));
}

/* ---- timer sources ------------------------------------------------------ */

struct tick_rec {
	sq_source_t src;
	uint64_t start, interval;
	atomic_ulong fires;
	atomic_int early;
	atomic_int calls;
	sem_t called;
};

static void
tick_hit(void *ctx)
{
	struct tick_rec *r = ctx;
	uint64_t now = sqt_now_ns();
	unsigned long total = atomic_fetch_add(&r->fires,
			sq_source_get_data(r->src)) + sq_source_get_data(r->src);
	/* The latest tick this call stands for is due by now. */
	if (now < r->start + (total - 1) * r->interval)
		atomic_fetch_add(&r->early, 1);
	atomic_fetch_add(&r->calls, 1);
	sem_post(&r->called);
}

static struct tick_rec *
tick_new(sq_queue_t q)
{
	struct tick_rec *r = calloc(1, sizeof(*r));
	sem_init(&r->called, 0, 0);
	r->src = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, q);
	sq_set_context(r->src, r);
	sq_source_set_event_handler_f(r->src, tick_hit);
	return r;
}

/* After cancel and a pause: no handler call is left to come. */
static void
tick_free(struct tick_rec *r)
{
	sem_destroy(&r->called);
	free(r);
}

static void
test_repeating(sq_queue_t q, const char *what)
{
	struct tick_rec *r = tick_new(q);
	r->interval = 1 * MS;
	r->start = sqt_now_ns() + 2 * MS;
	sq_source_set_timer(r->src, r->start, r->interval, 0);
	sq_activate(r->src);
	while (atomic_load(&r->fires) < 300)
		CHECK(sqt_sem_wait_ms(&r->called, 5000));
	sq_source_cancel(r->src);
	uint64_t stop = sqt_now_ns();
	unsigned long fires = atomic_load(&r->fires);
	unsigned long due = (unsigned long)((stop - r->start) / r->interval) + 1;
	if (atomic_load(&r->early) || fires > due)
		fprintf(stderr, "%s: %d early calls, %lu fires, %lu due\n",
				what, atomic_load(&r->early), fires, due);
	CHECK_EQ(atomic_load(&r->early), 0);
	CHECK(fires <= due);
	sqt_sleep_ms(20);
	sq_release(r->src);
	tick_free(r);
}

static void
test_cancel_and_rearm(void)
{
	sq_queue_t q = sq_queue_create("ontime.rearm", NULL);
	/* Cancelled 50 ms before its deadline: never called. */
	struct tick_rec *c = tick_new(q);
	c->interval = 1;
	c->start = sqt_now_ns() + 60 * MS;
	sq_source_set_timer(c->src, c->start, SQ_TIME_FOREVER, 0);
	sq_activate(c->src);
	sqt_sleep_ms(10);
	sq_source_cancel(c->src);
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&c->calls), 0);
	sq_release(c->src);
	tick_free(c);

	/* Armed for +20 ms, re-armed for +80 ms before the first deadline:
	 * one call, not before the second. */
	struct tick_rec *r = tick_new(q);
	r->interval = 1;
	uint64_t first = sqt_now_ns() + 20 * MS;
	sq_source_set_timer(r->src, first, SQ_TIME_FOREVER, 0);
	sq_activate(r->src);
	uint64_t later = sqt_now_ns() + 80 * MS;
	r->start = later;
	sq_source_set_timer(r->src, later, SQ_TIME_FOREVER, 0);
	CHECK(sqt_sem_wait_ms(&r->called, 5000));
	CHECK(sqt_now_ns() >= later);
	sqt_sleep_ms(50);
	CHECK_EQ(atomic_load(&r->calls), 1);
	CHECK_EQ(atomic_load(&r->early), 0);
	sq_source_cancel(r->src);
	sqt_sleep_ms(20);
	sq_release(r->src);
	tick_free(r);
	sq_release(q);
}

int
main(void)
{
	sem_init(&afters_done, 0, 0);
	sem_init(&block_done, 0, 0);
	sem_init(&second_done, 0, 0);
	test_afters(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
			"global");
	test_afters(sq_get_global_queue(SQ_QUEUE_PRIORITY_HIGH, 0),
			"global high");
	test_serial_order();
	test_same_deadline();
	test_blocking_work();
	sq_queue_t serial = sq_queue_create("ontime.timer", NULL);
	test_repeating(serial, "serial");
	test_repeating(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
			"global");
	sq_release(serial);
	test_cancel_and_rearm();
	return sqt_finish("test_timer_ontime");
}
