/*
 * Custom data sources (DATA_ADD, DATA_OR, DATA_REPLACE): merges from many
 * threads add up, the handler never runs concurrently with itself even on a
 * concurrent queue, events coalesce while the handler is queued, running or
 * the source is suspended, merges before activation are delivered after it,
 * OR masks, REPLACE keeping the last value, get_handle / get_mask.
 */
#include "source_helpers.h"

/* ---- helpers ---------------------------------------------------------------- */

static void
noop(void *ctx)
{
}

/* What a handler records about its calls. */
struct rec {
	sq_source_t src;
	atomic_int calls;
	atomic_ulong sum;       /* ADD: the sum of get_data over the calls */
	atomic_ulong last;      /* the latest get_data */
	atomic_ulong ored;      /* OR of get_data over the calls */
	atomic_int inside;
	atomic_int max_inside;
	unsigned long target;   /* signal `done` once sum reaches it */
	unsigned sleep_ms;      /* the handler sleeps this long */
	sq_semaphore_t each;    /* signalled on every call */
	sq_semaphore_t done;    /* signalled once sum == target */
	atomic_int cancelled;
	sq_semaphore_t cancel_sem;
};

static void
rec_init(struct rec *r, sq_source_t src)
{
	memset(r, 0, sizeof(*r));
	r->src = src;
	r->each = sq_semaphore_create(0);
	r->done = sq_semaphore_create(0);
	r->cancel_sem = sq_semaphore_create(0);
	sq_set_context(src, r);
}

static void
rec_handler(void *ctx)
{
	struct rec *r = ctx;
	int in = atomic_fetch_add(&r->inside, 1) + 1;
	sqt_atomic_max(&r->max_inside, in);
	unsigned long d = sq_source_get_data(r->src);
	if (r->sleep_ms)
		sqt_sleep_ms(r->sleep_ms);
	atomic_store(&r->last, d);
	atomic_fetch_or(&r->ored, d);
	unsigned long sum = atomic_fetch_add(&r->sum, d) + d;
	atomic_fetch_add(&r->calls, 1);
	atomic_fetch_sub(&r->inside, 1);
	if (r->target && sum == r->target)
		sq_semaphore_signal(r->done);
	sq_semaphore_signal(r->each);
}

static void
rec_cancel_handler(void *ctx)
{
	struct rec *r = ctx;
	atomic_fetch_add(&r->cancelled, 1);
	sq_semaphore_signal(r->cancel_sem);
}

static sq_source_t
make_source(sq_source_type_t type, uintptr_t mask, sq_queue_t q, struct rec *r)
{
	sq_source_t s = sq_source_create(type, 0, mask, q);
	if (s == NULL) {
		fprintf(stderr, "sq_source_create: %s\n", strerror(errno));
		exit(2);
	}
	rec_init(r, s);
	sq_source_set_event_handler_f(s, rec_handler);
	sq_source_set_cancel_handler_f(s, rec_cancel_handler);
	return s;
}

/* Cancels, waits for the cancel handler, releases. */
static void
finish(struct rec *r)
{
	sq_source_cancel(r->src);
	CHECK(sem_wait_ms(r->cancel_sem, 10000));
	CHECK_EQ(atomic_load(&r->cancelled), 1);
	sq_release(r->src);
	/* Let the handler job that ran the cancel handler return before the
	 * semaphores go (it touches nothing of ours after that, but be
	 * generous to the sanitizers' bookkeeping). */
	settle();
	sq_release(r->each);
	sq_release(r->done);
	sq_release(r->cancel_sem);
}

/* ---- 8 threads merge 1..1000 each into an ADD source ------------------------- */

struct merger {
	sq_source_t src;
	unsigned long from, to;
	unsigned long value; /* nonzero: merge this, (to - from + 1) times */
};

static void *
merge_range(void *arg)
{
	struct merger *m = arg;
	for (unsigned long i = m->from; i <= m->to; i++)
		sq_source_merge_data(m->src, m->value ? m->value : i);
	return NULL;
}

static void
test_add_from_8_threads(void)
{
	sq_queue_t q = sq_queue_create("data.concurrent", SQ_QUEUE_CONCURRENT);
	struct rec r;
	sq_source_t s = make_source(SQ_SOURCE_TYPE_DATA_ADD, 0, q, &r);
	r.target = 8ul * 500500ul;
	sq_activate(s);

	struct merger m[8];
	for (int i = 0; i < 8; i++)
		m[i] = (struct merger){ s, 1, 1000, 0 };
	sqt_run_threads(8, merge_range, m, sizeof(m[0]));

	CHECK(sem_wait_ms(r.done, 10000));
	settle();
	CHECK_EQ(atomic_load(&r.sum), 8ul * 500500ul);
	CHECK_EQ(atomic_load(&r.max_inside), 1);
	CHECK(atomic_load(&r.calls) >= 1);
	finish(&r);
	sq_release(q);
}

/* ---- a slow handler on a concurrent queue -------------------------------------- */

static void
test_slow_handler_never_overlaps(void)
{
	struct rec r;
	sq_source_t s = make_source(SQ_SOURCE_TYPE_DATA_ADD, 0, global_queue(),
			&r);
	r.target = 1000;
	r.sleep_ms = 50;
	sq_activate(s);
	for (int i = 0; i < 1000; i++)
		sq_source_merge_data(s, 1);
	CHECK(sem_wait_ms(r.done, 20000));
	settle();
	CHECK_EQ(atomic_load(&r.sum), 1000);
	CHECK_EQ(atomic_load(&r.max_inside), 1);
	/* Events were held while the handler slept: far fewer calls than
	 * merges (typically 2). */
	CHECK(atomic_load(&r.calls) < 100);
	finish(&r);
}

/* ---- stress: 4 threads, many merges, concurrent queue -------------------------- */

static void
test_merge_stress(void)
{
	const unsigned long per = SQT_SCALE(100000, 20000);
	sq_queue_t q = sq_queue_create("data.stress", SQ_QUEUE_CONCURRENT);
	struct rec r;
	sq_source_t s = make_source(SQ_SOURCE_TYPE_DATA_ADD, 0, q, &r);
	r.target = 4 * per;
	sq_activate(s);
	struct merger m[4];
	for (int i = 0; i < 4; i++)
		m[i] = (struct merger){ s, 1, per, 1 };
	sqt_run_threads(4, merge_range, m, sizeof(m[0]));
	CHECK(sem_wait_ms(r.done, 20000));
	settle();
	CHECK_EQ(atomic_load(&r.sum), 4 * per);
	CHECK_EQ(atomic_load(&r.max_inside), 1);
	finish(&r);
	sq_release(q);
}

/* ---- a handler that merges into its own source ---------------------------------- */

static atomic_int self_calls;
static sq_semaphore_t self_done;
static atomic_int self_inside, self_max_inside;

static void
self_merge_handler(void *ctx)
{
	sq_source_t s = ctx;
	int in = atomic_fetch_add(&self_inside, 1) + 1;
	sqt_atomic_max(&self_max_inside, in);
	int n = atomic_fetch_add(&self_calls, 1) + 1;
	/* Held while we run: delivered as a new call after we return. */
	if (n < 100)
		sq_source_merge_data(s, 1);
	atomic_fetch_sub(&self_inside, 1);
	if (n == 100)
		sq_semaphore_signal(self_done);
}

static void
test_merge_from_own_handler(void)
{
	self_done = sq_semaphore_create(0);
	sq_queue_t q = sq_queue_create("data.self", SQ_QUEUE_CONCURRENT);
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, q);
	sq_set_context(s, s);
	sq_source_set_event_handler_f(s, self_merge_handler);
	sq_activate(s);
	sq_source_merge_data(s, 1);
	CHECK(sem_wait_ms(self_done, 10000));
	settle();
	CHECK_EQ(atomic_load(&self_calls), 100);
	CHECK_EQ(atomic_load(&self_max_inside), 1);
	sq_source_cancel(s);
	sq_release(s);
	sq_release(q);
	settle();
	sq_release(self_done);
}

/* ---- coalescing while the handler is pending ------------------------------------ */

static void
test_coalesce_on_suspended_queue(sq_source_type_t type, uintptr_t mask,
		const unsigned long *values, int n, unsigned long expect)
{
	sq_queue_t q = sq_queue_create("data.pending", NULL);
	struct rec r;
	sq_source_t s = make_source(type, mask, q, &r);
	sq_activate(s);
	/* Let the registration go through first: the only job queued on q
	 * should be the one for our merges. The registration job is queued
	 * on q once the loop has registered the source; then a sync on the
	 * serial queue waits for it to finish. */
	settle();
	sq_sync_f(q, NULL, noop);
	sq_suspend(q);
	for (int i = 0; i < n; i++)
		sq_source_merge_data(s, values[i]);
	settle();
	CHECK_EQ(atomic_load(&r.calls), 0);
	sq_resume(q);
	CHECK(sem_wait_ms(r.each, 10000));
	settle();
	CHECK_EQ(atomic_load(&r.calls), 1);
	CHECK_EQ(atomic_load(&r.last), expect);
	/* Outside a handler, get_data is the latest delivery. */
	CHECK_EQ(sq_source_get_data(s), expect);
	CHECK_EQ(sq_source_get_mask(s), mask);
	CHECK_EQ(sq_source_get_handle(s), 0);
	finish(&r);
	sq_release(q);
}

/* ---- suspending the source itself ----------------------------------------------- */

/* Suspended once, or twice (then one resume is not enough). */
static void
test_coalesce_while_suspended(sq_source_type_t type, uintptr_t mask,
		int suspend_count, const unsigned long *values, int n,
		unsigned long expect)
{
	struct rec r;
	sq_source_t s = make_source(type, mask, global_queue(), &r);
	sq_activate(s);
	for (int i = 0; i < suspend_count; i++)
		sq_suspend(s);
	for (int i = 0; i < n; i++)
		sq_source_merge_data(s, values[i]);
	for (int i = 0; i < suspend_count - 1; i++) {
		sq_resume(s);
		settle();
		/* Still suspended once: nothing yet. */
		CHECK_EQ(atomic_load(&r.calls), 0);
	}
	settle();
	CHECK_EQ(atomic_load(&r.calls), 0);
	sq_resume(s);
	CHECK(sem_wait_ms(r.each, 10000));
	settle();
	CHECK_EQ(atomic_load(&r.calls), 1);
	CHECK_EQ(atomic_load(&r.last), expect);
	finish(&r);
}

/* ---- merges before activation --------------------------------------------------- */

static void
test_merge_before_activation(void)
{
	struct rec r;
	sq_source_t s = make_source(SQ_SOURCE_TYPE_DATA_ADD, 0, global_queue(),
			&r);
	sq_source_merge_data(s, 5);
	settle();
	CHECK_EQ(atomic_load(&r.calls), 0);
	sq_activate(s);
	CHECK(sem_wait_ms(r.each, 10000));
	settle();
	CHECK_EQ(atomic_load(&r.calls), 1);
	CHECK_EQ(atomic_load(&r.last), 5);
	finish(&r);

	/* sq_resume activates an inactive source too. */
	struct rec r2;
	sq_source_t s2 = make_source(SQ_SOURCE_TYPE_DATA_OR, 0xff,
			global_queue(), &r2);
	sq_source_merge_data(s2, 0x10);
	sq_source_merge_data(s2, 0x01);
	settle();
	CHECK_EQ(atomic_load(&r2.calls), 0);
	sq_resume(s2);
	CHECK(sem_wait_ms(r2.each, 10000));
	settle();
	CHECK_EQ(atomic_load(&r2.calls), 1);
	CHECK_EQ(atomic_load(&r2.last), 0x11);
	finish(&r2);
}

static atomic_int never_calls;

static void
never_handler(void *ctx)
{
	atomic_fetch_add(&never_calls, 1);
}

static void
test_never_activated(void)
{
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	CHECK(s != NULL);
	sq_source_set_event_handler_f(s, never_handler);
	for (int i = 0; i < 100; i++)
		sq_source_merge_data(s, 1);
	settle();
	settle();
	CHECK_EQ(atomic_load(&never_calls), 0);
	sq_source_cancel(s);
	CHECK(sq_source_testcancel(s) != 0);
	sq_release(s);
	settle();
	CHECK_EQ(atomic_load(&never_calls), 0);
}

/* ---- OR mask, REPLACE ------------------------------------------------------------ */

static void
test_or_mask_filters(void)
{
	struct rec r;
	sq_source_t s = make_source(SQ_SOURCE_TYPE_DATA_OR, 0x5, global_queue(),
			&r);
	sq_activate(s);
	/* Bits outside the mask are dropped; nothing left, nothing sent. */
	sq_source_merge_data(s, 0x2);
	settle();
	CHECK_EQ(atomic_load(&r.calls), 0);
	sq_source_merge_data(s, 0x3);
	CHECK(sem_wait_ms(r.each, 10000));
	settle();
	CHECK_EQ(atomic_load(&r.calls), 1);
	CHECK_EQ(atomic_load(&r.last), 0x1);
	CHECK_EQ(sq_source_get_mask(s), 0x5);
	/* An ADD source takes no mask. */
	errno = 0;
	CHECK(sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0x1, NULL) == NULL);
	CHECK_EQ(errno, EINVAL);
	finish(&r);
}

static void
test_replace(void)
{
	static const unsigned long v[] = { 3, 7, 5 };
	test_coalesce_while_suspended(SQ_SOURCE_TYPE_DATA_REPLACE, 0, 1, v, 3,
			5);

	/* One by one, each value is delivered as it is. */
	struct rec r;
	sq_source_t s = make_source(SQ_SOURCE_TYPE_DATA_REPLACE, 0,
			global_queue(), &r);
	sq_activate(s);
	sq_source_merge_data(s, 42);
	CHECK(sem_wait_ms(r.each, 10000));
	CHECK_EQ(atomic_load(&r.last), 42);
	sq_source_merge_data(s, 7);
	CHECK(sem_wait_ms(r.each, 10000));
	CHECK_EQ(atomic_load(&r.last), 7);
	/* Zero delivers nothing, and a zero replacing a pending value leaves
	 * nothing to deliver. */
	sq_source_merge_data(s, 0);
	settle();
	CHECK_EQ(atomic_load(&r.calls), 2);
	sq_suspend(s);
	sq_source_merge_data(s, 9);
	sq_source_merge_data(s, 0);
	sq_resume(s);
	settle();
	CHECK_EQ(atomic_load(&r.calls), 2);
	finish(&r);
}

/* ---- merges after cancel are ignored ---------------------------------------------- */

static void
test_merge_after_cancel(void)
{
	struct rec r;
	sq_source_t s = make_source(SQ_SOURCE_TYPE_DATA_ADD, 0, global_queue(),
			&r);
	sq_activate(s);
	sq_source_merge_data(s, 1);
	CHECK(sem_wait_ms(r.each, 10000));
	sq_source_cancel(s);
	for (int i = 0; i < 10; i++)
		sq_source_merge_data(s, 1);
	CHECK(sem_wait_ms(r.cancel_sem, 10000));
	sq_source_merge_data(s, 1);
	settle();
	CHECK_EQ(atomic_load(&r.calls), 1);
	CHECK_EQ(atomic_load(&r.sum), 1);
	sq_release(s);
	sq_release(r.each);
	sq_release(r.done);
	sq_release(r.cancel_sem);
}

int
main(void)
{
	test_add_from_8_threads();
	test_slow_handler_never_overlaps();
	test_merge_stress();
	test_merge_from_own_handler();

	static const unsigned long add[] = { 1, 2, 3 };
	static const unsigned long or[] = { 0x1, 0x4 };
	test_coalesce_on_suspended_queue(SQ_SOURCE_TYPE_DATA_ADD, 0, add, 3, 6);
	test_coalesce_on_suspended_queue(SQ_SOURCE_TYPE_DATA_OR, 0xff, or, 2,
			0x5);
	test_coalesce_while_suspended(SQ_SOURCE_TYPE_DATA_ADD, 0, 1, add, 3, 6);
	test_coalesce_while_suspended(SQ_SOURCE_TYPE_DATA_OR, 0xff, 1, or, 2,
			0x5);
	test_coalesce_while_suspended(SQ_SOURCE_TYPE_DATA_ADD, 0, 2, add, 3, 6);
	test_coalesce_while_suspended(SQ_SOURCE_TYPE_DATA_OR, 0xff, 2, or, 2,
			0x5);

	test_merge_before_activation();
	test_never_activated();
	test_or_mask_filters();
	test_replace();
	test_merge_after_cancel();
	return sqt_finish("test_source_data");
}
