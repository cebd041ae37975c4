/*
 * Concurrent and global queues: global-queue identity and the calls they
 * ignore, parallelism, start order, sync on the caller's thread (and nested
 * sync onto the same concurrent queue), barriers (reader-writer, directly
 * and through a target queue), the _f forms passing their context through,
 * producer-consumer over concurrent and global queues; libdispatch's
 * readsync test (scaled); at width 1, tasks start in the order they were
 * submitted, also those a task submits.
 */
#include "queue_helpers.h"
#include "child_helpers.h"

#define WAIT_MS 10000

static void
count_task(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* ---- global queue identity; retain/release ignored ------------------------ */

static void
test_global_identity(void)
{
	const intptr_t prios[4] = { SQ_QUEUE_PRIORITY_HIGH,
		SQ_QUEUE_PRIORITY_DEFAULT, SQ_QUEUE_PRIORITY_LOW,
		SQ_QUEUE_PRIORITY_BACKGROUND };
	sq_queue_t g[4];
	for (int i = 0; i < 4; i++) {
		g[i] = sq_get_global_queue(prios[i], 0);
		CHECK(g[i] != NULL);
		CHECK(sq_get_global_queue(prios[i], 0) == g[i]);
	}
	for (int i = 0; i < 4; i++)
		for (int j = i + 1; j < 4; j++)
			CHECK(g[i] != g[j]);
	CHECK(g[1] == sq_get_global_queue(0, 0));
	CHECK(sq_get_main_queue() != NULL);
	CHECK(sq_get_main_queue() == sq_get_main_queue());
	for (int i = 0; i < 4; i++)
		CHECK(sq_get_main_queue() != g[i]);
	/* Other values round to the nearest priority. */
	CHECK(sq_get_global_queue(100, 0) == g[0]);
	CHECK(sq_get_global_queue(-3, 0) == g[2]);
	CHECK(sq_get_global_queue(INT16_MIN, 0) == g[3]);

	/* 1000 extra releases and retain/release pairs: ignored. */
	for (int i = 0; i < 1000; i++) {
		sq_release(g[1]);
		sq_retain(g[1]);
		sq_release(g[1]);
		sq_release(sq_get_main_queue());
	}
	static atomic_int ran;
	for (int i = 0; i < 4; i++)
		sq_async_f(g[i], &ran, count_task);
	CHECK(sqt_wait_int(&ran, 4, WAIT_MS));
}

/* ---- suspend / resume / set_context / target ignored on globals ----------- */

static void
test_global_ignores(void)
{
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	static int cookie;
	static atomic_int ran;

	sq_suspend(g);
	sq_async_f(g, &ran, count_task);
	CHECK(sqt_wait_int(&ran, 1, WAIT_MS)); /* still runs */
	sq_resume(g);
	sq_resume(g); /* no over-resume on a global queue: ignored */
	sq_resume(g);

	sq_set_context(g, &cookie);
	CHECK(sq_get_context(g) == NULL);
	sq_set_finalizer_f(g, count_task);

	/* Target changes are ignored too. */
	sq_queue_t s = sq_queue_create("com.example.not-a-target", NULL);
	sq_set_target_queue(g, s);
	sq_suspend(s);
	sq_async_f(g, &ran, count_task);
	CHECK(sqt_wait_int(&ran, 2, WAIT_MS)); /* not held by suspended s */
	sq_resume(s);
	sq_release(s);

	/* A barrier on a global queue is an ordinary async. */
	sq_barrier_async_f(g, &ran, count_task);
	CHECK(sqt_wait_int(&ran, 3, WAIT_MS));
	sq_barrier_sync_f(g, &ran, count_task);
	CHECK_EQ(atomic_load(&ran), 4);
}

/* ---- parallelism and start order ------------------------------------------- */

struct rdv {
	atomic_int arrived;
	atomic_int met;
	atomic_int done;
	int target;
};

static void
rdv_task(void *arg)
{
	struct rdv *r = arg;
	atomic_fetch_add(&r->arrived, 1);
	uint64_t deadline = sqt_now_ns() + 5000000000ull;
	while (atomic_load(&r->arrived) < r->target && sqt_now_ns() < deadline)
		sqt_sleep_us(200);
	if (atomic_load(&r->arrived) >= r->target)
		atomic_fetch_add(&r->met, 1);
	atomic_fetch_add(&r->done, 1);
}

#define ORDER_N 2000

static struct {
	atomic_int next;
	int ticket[ORDER_N];
	atomic_int ran;
} order;

static void
order_task(void *arg)
{
	int i = (int)(intptr_t)arg;
	order.ticket[i] = atomic_fetch_add(&order.next, 1);
	atomic_fetch_add(&order.ran, 1);
}

struct pair {
	sem_t one, two;
	atomic_int ok;
	atomic_int done;
};

static void
pair_one(void *arg)
{
	struct pair *p = arg;
	sem_post(&p->one);
	if (sqt_sem_wait_ms(&p->two, 5000))
		atomic_fetch_add(&p->ok, 1);
	atomic_fetch_add(&p->done, 1);
}

static void
pair_two(void *arg)
{
	struct pair *p = arg;
	sem_post(&p->two);
	if (sqt_sem_wait_ms(&p->one, 5000))
		atomic_fetch_add(&p->ok, 1);
	atomic_fetch_add(&p->done, 1);
}

static void
test_parallelism(void)
{
	int ncpu = sqt_pool_width();

	/* (a) 8 tasks on the DEFAULT global queue: at least min(8, ncpu)
	 * (and at least 2) of them are in flight at once. */
	static struct rdv r;
	r.target = ncpu < 2 ? 2 : (ncpu > 8 ? 8 : ncpu);
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	for (int i = 0; i < 8; i++)
		sq_async_f(g, &r, rdv_task);
	CHECK(sqt_wait_int(&r.done, 8, WAIT_MS));
	CHECK_EQ(atomic_load(&r.met), 8);

	/* (b) a custom concurrent queue runs two tasks at once: each waits
	 * for the other. */
	static struct pair p;
	sem_init(&p.one, 0, 0);
	sem_init(&p.two, 0, 0);
	sq_queue_t c = sq_queue_create("com.example.concurrent",
			SQ_QUEUE_CONCURRENT);
	sq_async_f(c, &p, pair_one);
	sq_async_f(c, &p, pair_two);
	CHECK(sqt_wait_int(&p.done, 2, WAIT_MS));
	CHECK_EQ(atomic_load(&p.ok), 2);

	/* Start order: tasks are dequeued FIFO, so the tickets they take are
	 * in order except where two workers race for adjacent tasks, so the
	 * count of descents is informational only (a LIFO order would give
	 * ORDER_N - 1). Every task runs once. */
	for (int i = 0; i < ORDER_N; i++)
		sq_async_f(c, (void *)(intptr_t)i, order_task);
	CHECK(sqt_wait_int(&order.ran, ORDER_N, WAIT_MS));
	int descents = 0;
	for (int i = 1; i < ORDER_N; i++)
		if (order.ticket[i] < order.ticket[i - 1])
			descents++;
	printf("concurrent queue start order: %d descents in %d tasks\n",
			descents, ORDER_N);
	int all_once = 1;
	static unsigned char seen[ORDER_N];
	for (int i = 0; i < ORDER_N; i++) {
		if (order.ticket[i] < 0 || order.ticket[i] >= ORDER_N ||
				seen[order.ticket[i]]++)
			all_once = 0;
	}
	CHECK(all_once);
	sq_release(c);
	sem_destroy(&p.one);
	sem_destroy(&p.two);
}

/* ---- sync onto a concurrent queue runs on the caller's thread ------------- */

static struct {
	int lines[2000];
	pthread_t threads[2000];
	int n;
} counter_log;

static void
printFrom1To1000(void *ctx)
{
	for (int counter = 1; counter <= 1000; counter++) {
		counter_log.lines[counter_log.n] = counter;
		counter_log.threads[counter_log.n] = pthread_self();
		counter_log.n++;
	}
}

static void
check_sync_inline(sq_queue_t q)
{
	counter_log.n = 0;
	sq_sync_f(q, NULL, printFrom1To1000);
	sq_sync_f(q, NULL, printFrom1To1000);
	CHECK_EQ(counter_log.n, 2000);
	int ok = 1, same_thread = 1;
	for (int i = 0; i < counter_log.n; i++) {
		if (counter_log.lines[i] != i % 1000 + 1)
			ok = 0;
		if (!pthread_equal(counter_log.threads[i], pthread_self()))
			same_thread = 0;
	}
	CHECK(ok);
	CHECK(same_thread);
}

/* A task on a concurrent queue syncs onto the same queue. */
static atomic_int nested_done;

static void
nested_inner(void *arg)
{
	atomic_fetch_add(&nested_done, 1);
}

static void
nested_outer(void *arg)
{
	sq_queue_t q = arg;
	sq_sync_f(q, NULL, nested_inner);
	sq_sync_f(q, NULL, nested_inner);
	atomic_fetch_add(&nested_done, 1);
}

static void
test_sync_concurrent(void)
{
	check_sync_inline(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));
	sq_queue_t c = sq_queue_create("com.example.sync.concurrent",
			SQ_QUEUE_CONCURRENT);
	check_sync_inline(c);

	sq_async_f(c, c, nested_outer);
	sq_queue_t g = sq_get_global_queue(0, 0);
	sq_async_f(g, g, nested_outer);
	CHECK(sqt_wait_int(&nested_done, 6, WAIT_MS));
	sq_release(c);
}

/* ---- barrier exclusivity -------------------------------------------------- */

struct interval {
	uint64_t start, end;
};

static struct interval rw[21]; /* 0..9 R1..R10, 10 = W, 11..20 R11..R20 */
static atomic_int rw_done;

static void
rw_reader(void *arg)
{
	struct interval *iv = arg;
	iv->start = sqt_now_ns();
	sqt_sleep_ms(10);
	iv->end = sqt_now_ns();
	atomic_fetch_add(&rw_done, 1);
}

static void
test_barrier_exclusive(void)
{
	sq_queue_t q = sq_queue_create("com.example.rw", SQ_QUEUE_CONCURRENT);
	for (int i = 0; i < 10; i++)
		sq_async_f(q, &rw[i], rw_reader);
	sq_barrier_async_f(q, &rw[10], rw_reader);
	for (int i = 11; i < 21; i++)
		sq_async_f(q, &rw[i], rw_reader);
	CHECK(sqt_wait_int(&rw_done, 21, WAIT_MS));
	const struct interval w = rw[10];
	int before = 1, after = 1, overlaps = 0;
	for (int i = 0; i < 10; i++)
		if (rw[i].end > w.start)
			before = 0;
	for (int i = 11; i < 21; i++)
		if (rw[i].start < w.end)
			after = 0;
	for (int i = 0; i < 10; i++)
		for (int j = i + 1; j < 10; j++)
			if (rw[i].start < rw[j].end && rw[j].start < rw[i].end)
				overlaps++;
	CHECK(before);
	CHECK(after);
	if (sqt_pool_width() >= 2)
		CHECK(overlaps >= 1);

	/* A barrier_sync from outside waits for the earlier tasks, runs
	 * alone, and later tasks wait for it. */
	atomic_store(&rw_done, 0);
	for (int i = 0; i < 10; i++)
		sq_async_f(q, &rw[i], rw_reader);
	sq_barrier_sync_f(q, &rw[10], rw_reader);
	CHECK_EQ(atomic_load(&rw_done), 11);
	for (int i = 0; i < 10; i++)
		CHECK(rw[i].end <= rw[10].start);
	sq_release(q);
}

/* ---- readsync port: sync readers, barrier-async writers -------------------- */

#define RS_THREADS 4
#define RS_READS SQT_SCALE(1500, 300)
#define RS_WRITES SQT_SCALE(300, 60)

static struct {
	sq_queue_t q;
	atomic_int readers;
	atomic_int writers;
	atomic_int max_readers;
	atomic_int max_writers;
	atomic_int bad; /* a writer beside anything, a reader beside a writer */
	atomic_int writes_done;
	long value; /* written by writers only, read by readers */
} rs;

static void
rs_read(void *arg)
{
	int n = atomic_fetch_add(&rs.readers, 1) + 1;
	sqt_atomic_max(&rs.max_readers, n);
	if (atomic_load(&rs.writers) != 0)
		atomic_fetch_add(&rs.bad, 1);
	*(long *)arg += rs.value;
	sqt_sleep_us(20);
	if (atomic_load(&rs.writers) != 0)
		atomic_fetch_add(&rs.bad, 1);
	atomic_fetch_sub(&rs.readers, 1);
}

static void
rs_write(void *arg)
{
	int n = atomic_fetch_add(&rs.writers, 1) + 1;
	sqt_atomic_max(&rs.max_writers, n);
	if (n != 1 || atomic_load(&rs.readers) != 0)
		atomic_fetch_add(&rs.bad, 1);
	rs.value++;
	for (volatile int spin = 0; spin < 500; spin++) {
	}
	if (atomic_load(&rs.readers) != 0)
		atomic_fetch_add(&rs.bad, 1);
	atomic_fetch_sub(&rs.writers, 1);
	atomic_fetch_add(&rs.writes_done, 1);
}

static void *
rs_reader_thread(void *arg)
{
	long sum = 0;
	for (int i = 0; i < RS_READS; i++)
		sq_sync_f(rs.q, &sum, rs_read);
	return (void *)sum;
}

static void *
rs_writer_thread(void *arg)
{
	for (int i = 0; i < RS_WRITES; i++) {
		sq_barrier_async_f(rs.q, NULL, rs_write);
		sqt_sleep_us(100);
	}
	return NULL;
}

static void
run_readsync(sq_queue_t q)
{
	rs.q = q;
	atomic_store(&rs.readers, 0);
	atomic_store(&rs.writers, 0);
	atomic_store(&rs.max_readers, 0);
	atomic_store(&rs.max_writers, 0);
	atomic_store(&rs.bad, 0);
	atomic_store(&rs.writes_done, 0);
	pthread_t readers[RS_THREADS], writer;
	for (int i = 0; i < RS_THREADS; i++)
		pthread_create(&readers[i], NULL, rs_reader_thread, NULL);
	pthread_create(&writer, NULL, rs_writer_thread, NULL);
	for (int i = 0; i < RS_THREADS; i++)
		pthread_join(readers[i], NULL);
	pthread_join(writer, NULL);
	CHECK(sqt_wait_int(&rs.writes_done, RS_WRITES, WAIT_MS));
	CHECK_EQ(atomic_load(&rs.bad), 0);
	CHECK_EQ(atomic_load(&rs.max_writers), 1);
	CHECK(atomic_load(&rs.max_readers) >= 2); /* readers do overlap */
	CHECK(atomic_load(&rs.max_readers) <= RS_THREADS);
}

static void
test_readsync(void)
{
	sq_queue_t q = sq_queue_create("com.example.readsync",
			SQ_QUEUE_CONCURRENT);
	run_readsync(q);
	/* Repeated on a concurrent queue that targets another concurrent
	 * queue. */
	sq_queue_t outer = sq_queue_create("com.example.readsync.target",
			SQ_QUEUE_CONCURRENT);
	sq_queue_t inner = sq_queue_create_with_target(
			"com.example.readsync.inner", SQ_QUEUE_CONCURRENT, outer);
	run_readsync(inner);
	sq_release(inner);
	sq_release(outer);
	sq_release(q);
}

/* ---- the _f forms pass the context unchanged ------------------------------ */

static int sentinel;
static atomic_int sentinel_ok, sentinel_bad;

static void
check_sentinel(void *ctx)
{
	if (ctx == &sentinel)
		atomic_fetch_add(&sentinel_ok, 1);
	else
		atomic_fetch_add(&sentinel_bad, 1);
}

static void
check_sentinel_apply(void *ctx, size_t i)
{
	check_sentinel(ctx);
}

static void
test_context_passthrough(void)
{
	sq_queue_t s = sq_queue_create("com.example.f", NULL);
	sq_queue_t c = sq_queue_create("com.example.f.c", SQ_QUEUE_CONCURRENT);
	sq_queue_t qs[3] = { s, c, sq_get_global_queue(0, 0) };
	for (int i = 0; i < 3; i++) {
		sq_async_f(qs[i], &sentinel, check_sentinel);
		sq_sync_f(qs[i], &sentinel, check_sentinel);
		sq_barrier_async_f(qs[i], &sentinel, check_sentinel);
		sq_barrier_sync_f(qs[i], &sentinel, check_sentinel);
		sq_apply_f(5, qs[i], &sentinel, check_sentinel_apply);
	}
	CHECK(sqt_wait_int(&sentinel_ok, 3 * 9, WAIT_MS));
	CHECK_EQ(atomic_load(&sentinel_bad), 0);
	sq_release(s);
	sq_release(c);
}

/* ---- producer-consumer on concurrent queues: every item consumed once ------ */

#define MIG_ITEMS 10000

static atomic_uchar mig_hits[MIG_ITEMS];
static atomic_int mig_done;

static void
mig_consume(void *arg)
{
	atomic_fetch_add(&mig_hits[(intptr_t)arg], 1);
	atomic_fetch_add(&mig_done, 1);
}

static void
test_producer_consumer_concurrent(void)
{
	sq_queue_t c = sq_queue_create("com.example.consumers",
			SQ_QUEUE_CONCURRENT);
	for (int i = 0; i < MIG_ITEMS; i++)
		sq_async_f(i % 2 ? c : sq_get_global_queue(0, 0),
				(void *)(intptr_t)i, mig_consume);
	CHECK(sqt_wait_int(&mig_done, MIG_ITEMS, WAIT_MS));
	sqt_sleep_ms(10);
	int once = 1;
	for (int i = 0; i < MIG_ITEMS; i++)
		if (atomic_load(&mig_hits[i]) != 1)
			once = 0;
	CHECK(once);
	CHECK_EQ(atomic_load(&mig_done), MIG_ITEMS);
	sq_release(c);
}

/* ---- Barriers against the end of a drain -----------------------------------
 *
 * sqt_tail_race on a concurrent queue: async A then barrier sync B (B
 * starts once A is done), barrier async A then sync B (B starts once the
 * barrier is done), and async A then sync B on a concurrent queue that
 * targets a serial one, which runs its tasks one at a time in order.
 */

#define TAIL_ROUNDS SQT_SCALE(10000, 1000)

static void
tail_barrier_sync_b(void *ctx, struct sqt_tail_race *r)
{
	sq_barrier_sync_f(ctx, r, sqt_tail_b);
}

static void
tail_sync_b(void *ctx, struct sqt_tail_race *r)
{
	sq_sync_f(ctx, r, sqt_tail_b);
}

static void
test_barriers_against_drain_end(void)
{
	sq_queue_t c = sq_queue_create("com.example.tail.c",
			SQ_QUEUE_CONCURRENT);
	CHECK_EQ(sqt_tail_race(TAIL_ROUNDS, c, c, false, tail_barrier_sync_b,
			c), 0);
	CHECK_EQ(sqt_tail_race(TAIL_ROUNDS, c, c, true, tail_sync_b, c), 0);
	sq_queue_t s = sq_queue_create("com.example.tail.s", NULL);
	sq_queue_t cs = sq_queue_create_with_target("com.example.tail.cs",
			SQ_QUEUE_CONCURRENT, s);
	CHECK_EQ(sqt_tail_race(TAIL_ROUNDS, cs, cs, false, tail_sync_b, cs),
			0);
	sq_release(cs);
	sq_release(s);
	sq_release(c);
}

/* ---- start order at width 1 ---------------------------------------------- */

/* With one worker and no safety net, a queue's tasks start in the order
 * they were submitted, as libdispatch's FIFO root queues start them: here
 * from a task (a worker's own submissions are where a run queue per worker
 * could reorder them). A task submits ORDER1_N tasks to its queue; the
 * first of them submits ORDER1_LATE more, which were submitted after all
 * of those and must start after them. */
#define ORDER1_N 200
#define ORDER1_LATE 10

static struct {
	sq_queue_t q;
	atomic_int ticket;
	int started[ORDER1_N + ORDER1_LATE]; /* ticket -> task id */
	sem_t done;
} order1;

static void
order1_task(void *arg)
{
	int id = (int)(intptr_t)arg;
	int t = atomic_fetch_add(&order1.ticket, 1);
	order1.started[t] = id;
	if (id == 0)
		for (int k = 0; k < ORDER1_LATE; k++)
			sq_async_f(order1.q, (void *)(intptr_t)(ORDER1_N + k),
					order1_task);
	if (t == ORDER1_N + ORDER1_LATE - 1)
		sem_post(&order1.done);
}

static void
order1_submitter(void *arg)
{
	for (int k = 0; k < ORDER1_N; k++)
		sq_async_f(order1.q, (void *)(intptr_t)k, order1_task);
}

/* In the child: each queue in turn; one stderr line per queue. */
static void
order1_child(void *unused)
{
	sq_queue_t queues[] = {
		sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
		sq_get_global_queue(SQ_QUEUE_PRIORITY_LOW, 0),
		sq_queue_create("order1.concurrent", SQ_QUEUE_CONCURRENT),
	};
	sem_init(&order1.done, 0, 0);
	for (int i = 0; i < 3; i++) {
		order1.q = queues[i];
		atomic_store(&order1.ticket, 0);
		sq_async_f(order1.q, NULL, order1_submitter);
		if (!sqt_sem_wait_ms(&order1.done, WAIT_MS)) {
			fprintf(stderr, "queue %d: stalled at %d\n", i,
					atomic_load(&order1.ticket));
			continue;
		}
		int bad = -1;
		for (int t = 0; t < ORDER1_N + ORDER1_LATE && bad < 0; t++)
			if (order1.started[t] != t)
				bad = t;
		if (bad < 0)
			fprintf(stderr, "queue %d: in order\n", i);
		else
			fprintf(stderr, "queue %d: start %d was task %d\n", i,
					bad, order1.started[bad]);
	}
}

static void
test_start_order_width1(void)
{
	struct sqt_child c;
	sqt_child_run(&c, order1_child, NULL, sqt_one_worker_env, 30000);
	CHECK_EQ(sqt_count(c.out, ": in order\n"), 3);
}

int
main(void)
{
	/* First: the child is forked before this process starts the pool. */
	test_start_order_width1();
	test_global_identity();
	test_global_ignores();
	test_parallelism();
	test_sync_concurrent();
	test_barrier_exclusive();
	test_readsync();
	test_context_passthrough();
	test_producer_consumer_concurrent();
	test_barriers_against_drain_end();
	return sqt_finish("test_queue_concurrent");
}
