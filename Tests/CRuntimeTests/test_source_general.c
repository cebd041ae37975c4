/*
 * What every source shares, shown on data and timer sources: cancellation
 * is asynchronous and final (merges and resumes after it deliver nothing),
 * the cancel handler runs exactly once and after the last event handler
 * (also under a merge storm), testcancel, cancelling twice, context freed
 * by the cancel handler, reference counting with the cancel handler before
 * the free, cancel + release while a handler runs, a source keeping its
 * target queue alive, changing the target queue (a queued handler stays,
 * later ones move), replacing the event handler, handlers let go at cancel
 * (breaking source <-> handler cycles), get_handle of timer / data sources.
 */
#include "source_helpers.h"

static void
noop(void *ctx)
{
}

/* ---- a recording data source --------------------------------------------------- */

#define MAX_CALLS 16

struct gen {
	sq_source_t src;
	atomic_int calls, cancels, inside, max_inside;
	atomic_int after_cancel;   /* event handler after the cancel handler */
	atomic_int cancel_while_in; /* cancel handler while a handler ran */
	atomic_ulong sum;
	atomic_int seq;            /* order stamps */
	int cancel_stamp, finalize_stamp;
	char labels[MAX_CALLS][32];
	unsigned sleep_ms;
	sq_semaphore_t started, each, cancel_sem, finalized;
	uint64_t handler_end, cancel_start;
};

static void
gen_handler(void *ctx)
{
	struct gen *g = ctx;
	int in = atomic_fetch_add(&g->inside, 1) + 1;
	sqt_atomic_max(&g->max_inside, in);
	if (atomic_load(&g->cancels))
		atomic_fetch_add(&g->after_cancel, 1);
	int n = atomic_load(&g->calls);
	if (n < MAX_CALLS)
		snprintf(g->labels[n], sizeof(g->labels[n]), "%s",
				sq_queue_get_label(SQ_CURRENT_QUEUE_LABEL));
	atomic_fetch_add(&g->sum, sq_source_get_data(g->src));
	if (g->started)
		sq_semaphore_signal(g->started);
	if (g->sleep_ms)
		sqt_sleep_ms(g->sleep_ms);
	g->handler_end = sqt_now_ns();
	atomic_store(&g->calls, n + 1);
	atomic_fetch_sub(&g->inside, 1);
	sq_semaphore_signal(g->each);
}

static void
gen_cancel(void *ctx)
{
	struct gen *g = ctx;
	g->cancel_start = sqt_now_ns();
	if (atomic_load(&g->inside))
		atomic_fetch_add(&g->cancel_while_in, 1);
	g->cancel_stamp = atomic_fetch_add(&g->seq, 1) + 1;
	atomic_fetch_add(&g->cancels, 1);
	sq_semaphore_signal(g->cancel_sem);
}

static void
gen_finalize(void *ctx)
{
	struct gen *g = ctx;
	g->finalize_stamp = atomic_fetch_add(&g->seq, 1) + 1;
	sq_semaphore_signal(g->finalized);
}

static struct gen *
gen_new(sq_source_type_t type, sq_queue_t q)
{
	struct gen *g = calloc(1, sizeof(*g));
	g->each = sq_semaphore_create(0);
	g->cancel_sem = sq_semaphore_create(0);
	g->finalized = sq_semaphore_create(0);
	g->src = sq_source_create(type, 0, 0, q ? q : global_queue());
	if (g->src == NULL) {
		fprintf(stderr, "sq_source_create: %s\n", strerror(errno));
		exit(2);
	}
	sq_set_context(g->src, g);
	sq_source_set_event_handler_f(g->src, gen_handler);
	sq_source_set_cancel_handler_f(g->src, gen_cancel);
	return g;
}

/* Checks the common invariants, then frees everything but the source. */
static void
gen_free(struct gen *g)
{
	CHECK_EQ(atomic_load(&g->cancels), 1);
	CHECK_EQ(atomic_load(&g->after_cancel), 0);
	CHECK_EQ(atomic_load(&g->cancel_while_in), 0);
	CHECK(atomic_load(&g->max_inside) <= 1);
	settle();
	sq_release(g->each);
	sq_release(g->cancel_sem);
	sq_release(g->finalized);
	if (g->started)
		sq_release(g->started);
	free(g);
}

/* ---- cancel is final and idempotent --------------------------------------------- */

static void
test_cancel_is_final(void)
{
	struct gen *g = gen_new(SQ_SOURCE_TYPE_DATA_ADD, NULL);
	sq_activate(g->src);
	sq_source_merge_data(g->src, 1);
	CHECK(sem_wait_ms(g->each, 10000));
	CHECK_EQ(sq_source_testcancel(g->src), 0);

	sq_suspend(g->src);
	sq_source_merge_data(g->src, 2); /* pending, then dropped */
	sq_source_cancel(g->src);
	CHECK(sq_source_testcancel(g->src) != 0);
	sq_source_cancel(g->src);
	sq_source_merge_data(g->src, 4);
	settle();
	/* Suspended: the cancel handler waits for the resume. */
	CHECK_EQ(atomic_load(&g->cancels), 0);
	sq_resume(g->src);
	CHECK(sem_wait_ms(g->cancel_sem, 10000));
	sq_source_merge_data(g->src, 8);
	sq_source_cancel(g->src);
	settle();
	CHECK_EQ(atomic_load(&g->calls), 1);
	CHECK_EQ(atomic_load(&g->sum), 1);
	CHECK(sq_source_testcancel(g->src) != 0);
	sq_release(g->src);
	gen_free(g);
}

/* ---- cancel (and release) while a handler runs -------------------------------- */

static void
test_cancel_release_in_flight(bool release)
{
	struct gen *g = gen_new(SQ_SOURCE_TYPE_DATA_ADD, NULL);
	g->started = sq_semaphore_create(0);
	g->sleep_ms = 50;
	sq_activate(g->src);
	sq_source_merge_data(g->src, 1);
	CHECK(sem_wait_ms(g->started, 10000));
	sq_source_cancel(g->src);
	if (release)
		sq_release(g->src); /* RemoveDispatchSource */
	else
		sq_source_merge_data(g->src, 1); /* after cancel: ignored */
	CHECK(sem_wait_ms(g->cancel_sem, 10000));
	settle();
	CHECK_EQ(atomic_load(&g->calls), 1);
	CHECK(g->cancel_start >= g->handler_end);
	if (!release)
		sq_release(g->src);
	gen_free(g);
}

/* ---- changing the target queue --------------------------------------------------- */

static void
test_change_target(void)
{
	sq_queue_t q1 = sq_queue_create("general.q1", NULL);
	sq_queue_t q2 = sq_queue_create("general.q2", NULL);
	struct gen *g = gen_new(SQ_SOURCE_TYPE_DATA_ADD, q1);
	sq_activate(g->src);
	settle();
	sq_sync_f(q1, NULL, noop); /* the registration job is done */
	sq_suspend(q1);
	sq_source_merge_data(g->src, 1); /* its handler job waits on q1 */
	sq_set_target_queue(g->src, q2);
	sq_resume(q1);
	CHECK(sem_wait_ms(g->each, 10000));
	sq_source_merge_data(g->src, 2);
	CHECK(sem_wait_ms(g->each, 10000));
	CHECK_EQ(atomic_load(&g->calls), 2);
	CHECK(strcmp(g->labels[0], "general.q1") == 0);
	CHECK(strcmp(g->labels[1], "general.q2") == 0);
	/* And to a concurrent queue: still never concurrent with itself. */
	sq_queue_t c = sq_queue_create("general.concurrent",
			SQ_QUEUE_CONCURRENT);
	sq_set_target_queue(g->src, c);
	for (int i = 0; i < 1000; i++)
		sq_source_merge_data(g->src, 1);
	uint64_t deadline = sqt_now_ns() + 10000 * MS;
	while (atomic_load(&g->sum) < 1003 && sqt_now_ns() < deadline)
		sem_wait_ms(g->each, 100);
	CHECK_EQ(atomic_load(&g->sum), 1003);
	CHECK(strcmp(g->labels[2], "general.concurrent") == 0);
	sq_source_cancel(g->src);
	CHECK(sem_wait_ms(g->cancel_sem, 10000));
	sq_release(g->src);
	sq_release(q1);
	sq_release(q2);
	sq_release(c);
	gen_free(g);
}

/* ---- context data freed by the cancel handler ----------------------------------- */

static atomic_int ctx_matches;
static sq_semaphore_t ctx_sem;

static void
ctx_handler(void *ctx)
{
	if (strcmp((const char *)ctx, "/tmp/original-name") == 0)
		atomic_fetch_add(&ctx_matches, 1);
	sq_semaphore_signal(ctx_sem);
}

static void
ctx_cancel(void *ctx)
{
	free(ctx); /* ASan reports a leak if this never runs */
	sq_semaphore_signal(ctx_sem);
}

static void
test_context_freed_by_cancel(void)
{
	ctx_sem = sq_semaphore_create(0);
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_DATA_OR, 0xf, 0, NULL);
	const char *name = "/tmp/original-name";
	char *copy = malloc(strlen(name) + 1);
	strcpy(copy, name);
	sq_set_context(s, copy);
	sq_source_set_event_handler_f(s, ctx_handler);
	sq_source_set_cancel_handler_f(s, ctx_cancel);
	sq_resume(s);
	sq_source_merge_data(s, 1);
	CHECK(sem_wait_ms(ctx_sem, 10000));
	CHECK_EQ(atomic_load(&ctx_matches), 1);
	sq_source_cancel(s);
	CHECK(sem_wait_ms(ctx_sem, 10000));
	sq_set_context(s, NULL);
	sq_release(s);
	settle();
	sq_release(ctx_sem);
}

/* ---- retain, cancel, release twice ---------------------------------------------- */

static void
test_refcount_cancel_before_free(void)
{
	struct gen *g = gen_new(SQ_SOURCE_TYPE_DATA_ADD, NULL);
	sq_set_finalizer_f(g->src, gen_finalize);
	sq_activate(g->src);
	sq_retain(g->src);
	sq_source_cancel(g->src);
	sq_release(g->src);
	sq_release(g->src);
	CHECK(sem_wait_ms(g->finalized, 10000));
	CHECK_EQ(atomic_load(&g->cancels), 1);
	CHECK_EQ(g->cancel_stamp, 1);
	CHECK_EQ(g->finalize_stamp, 2);
	gen_free(g);
}

/* ---- a source keeps its target queue alive -------------------------------------- */

static sq_semaphore_t q_final;
static atomic_int q_finalized;

static void
queue_finalizer(void *ctx)
{
	atomic_fetch_add(&q_finalized, 1);
	sq_semaphore_signal(q_final);
}

static void
test_source_holds_queue(void)
{
	static int cookie;
	q_final = sq_semaphore_create(0);
	sq_queue_t q = sq_queue_create("general.held", NULL);
	sq_set_context(q, &cookie);
	sq_set_finalizer_f(q, queue_finalizer);
	struct gen *g = gen_new(SQ_SOURCE_TYPE_DATA_ADD, q);
	sq_activate(g->src);
	sq_release(q);
	settle();
	CHECK_EQ(atomic_load(&q_finalized), 0);
	/* Still usable through the source. */
	sq_source_merge_data(g->src, 3);
	CHECK(sem_wait_ms(g->each, 10000));
	CHECK(strcmp(g->labels[0], "general.held") == 0);
	CHECK_EQ(atomic_load(&q_finalized), 0);
	sq_source_cancel(g->src);
	CHECK(sem_wait_ms(g->cancel_sem, 10000));
	settle();
	CHECK_EQ(atomic_load(&q_finalized), 0); /* we still hold the source */
	sq_release(g->src);
	CHECK(sem_wait_ms(q_final, 10000));
	CHECK_EQ(atomic_load(&q_finalized), 1);
	gen_free(g);
	sq_release(q_final);
}

/* ---- the cancel handler under a merge storm -------------------------------------- */

struct storm {
	sq_source_t src;
	atomic_bool stop;
};

static void *
storm_merge(void *arg)
{
	struct storm *st = *(struct storm **)arg;
	while (!atomic_load(&st->stop))
		sq_source_merge_data(st->src, 1);
	return NULL;
}

static void
test_cancel_during_storm(void)
{
	const int rounds = SQT_SCALE(100, 20);
	sq_queue_t c = sq_queue_create("general.storm", SQ_QUEUE_CONCURRENT);
	int bad_order = 0, bad_count = 0;
	for (int r = 0; r < rounds; r++) {
		struct gen *g = gen_new(SQ_SOURCE_TYPE_DATA_ADD, c);
		sq_activate(g->src);
		struct storm st = { g->src, false };
		struct storm *arg[2] = { &st, &st };
		pthread_t t[2];
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, storm_merge, &arg[i]);
		sqt_sleep_us(200 + (unsigned)(r % 7) * 300);
		sq_source_cancel(g->src);
		bool ok = sem_wait_ms(g->cancel_sem, 10000);
		int calls_at_cancel = atomic_load(&g->calls);
		sqt_sleep_ms(2);
		atomic_store(&st.stop, true);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		if (!ok || atomic_load(&g->cancels) != 1)
			bad_count++;
		if (atomic_load(&g->after_cancel) ||
				atomic_load(&g->cancel_while_in) ||
				atomic_load(&g->calls) != calls_at_cancel ||
				atomic_load(&g->max_inside) > 1)
			bad_order++;
		sq_release(g->src);
		sq_release(g->each);
		sq_release(g->cancel_sem);
		sq_release(g->finalized);
		free(g);
	}
	CHECK_EQ(bad_count, 0);
	CHECK_EQ(bad_order, 0);
	settle();
	sq_release(c);
}

/* ---- replacing handlers; handlers let go at cancel -------------------------------- */

static atomic_int first_calls, second_calls, destroyed;
static sq_semaphore_t repl_sem;

static void
first_handler(void *ctx)
{
	atomic_fetch_add(&first_calls, 1);
	sq_semaphore_signal(repl_sem);
}

static void
second_handler(void *ctx)
{
	/* ctx is the handler's own context, not the source's. */
	if (ctx == &second_calls)
		atomic_fetch_add(&second_calls, 1);
	sq_semaphore_signal(repl_sem);
}

static void
handler_destructor(void *ctx)
{
	atomic_fetch_add(&destroyed, 1);
}

static void
test_replace_and_let_go(void)
{
	repl_sem = sq_semaphore_create(0);
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	sq_source_set_event_handler_f(s, first_handler);
	sq_activate(s);
	sq_source_merge_data(s, 1);
	CHECK(sem_wait_ms(repl_sem, 10000));
	/* Later events go to the new handler. */
	_sq_source_set_handler(s, 0, second_handler, &second_calls,
			handler_destructor);
	sq_source_merge_data(s, 1);
	CHECK(sem_wait_ms(repl_sem, 10000));
	CHECK_EQ(atomic_load(&first_calls), 1);
	CHECK_EQ(atomic_load(&second_calls), 1);
	CHECK_EQ(atomic_load(&destroyed), 0);
	/* A cancel handler may be set at any time; at cancel the runtime
	 * lets every handler go (a block capturing the source would
	 * otherwise keep it alive), while we still hold the source. */
	sq_source_set_cancel_handler_f(s, first_handler);
	sq_source_cancel(s);
	CHECK(sem_wait_ms(repl_sem, 10000));
	settle();
	CHECK_EQ(atomic_load(&first_calls), 2);
	CHECK_EQ(atomic_load(&destroyed), 1);
	sq_release(s);
	settle();
	CHECK_EQ(atomic_load(&destroyed), 1);
	sq_release(repl_sem);
}

/* ---- get_handle of timer and custom sources --------------------------------------- */

static void
test_get_handle_zero(void)
{
	sq_source_type_t types[4] = { SQ_SOURCE_TYPE_TIMER,
		SQ_SOURCE_TYPE_DATA_ADD, SQ_SOURCE_TYPE_DATA_OR,
		SQ_SOURCE_TYPE_DATA_REPLACE };
	for (int i = 0; i < 4; i++) {
		/* A non-zero handle is ignored for these types. */
		sq_source_t s = sq_source_create(types[i], 1234, 0, NULL);
		CHECK(s != NULL);
		if (s == NULL)
			continue;
		CHECK_EQ(sq_source_get_handle(s), 0);
		CHECK_EQ(sq_source_get_mask(s), 0);
		CHECK_EQ(sq_source_get_data(s), 0);
		sq_source_cancel(s);
		sq_release(s);
	}
}

int
main(void)
{
	test_cancel_is_final();
	test_cancel_release_in_flight(false);
	test_cancel_release_in_flight(true);
	test_change_target();
	test_context_freed_by_cancel();
	test_refcount_cancel_before_free();
	test_source_holds_queue();
	test_cancel_during_storm();
	test_replace_and_let_go();
	test_get_handle_zero();
	return sqt_finish("test_source_general");
}
