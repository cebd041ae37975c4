/*
 * Serial queues: FIFO, one task at a time, separate serial queues side by
 * side, labels and thread names, the exact output of three tasks printing
 * five lines each (the queue released right after submitting them),
 * lifetime, context and finalizer, async then sync, completion callbacks,
 * suspension, inactive queues, the current queue, nested async, many
 * producers (16 x 10,000 and 4 x 100,000), a serial queue as a lock and as
 * a producer-consumer channel; after libdispatch's queue_finalizer and
 * thread_name tests.
 */
#include "queue_helpers.h"

#include <malloc.h>
#include <sched.h>

#define WAIT_MS 10000 /* "it never happened": far beyond any correct run */

/* ---- FIFO, one at a time -------------------------------------------------- */

#define FIFO_N 1000

struct fifo_shared {
	int order[FIFO_N];
	int n;
	atomic_int inside;
	atomic_int overlaps;
	sem_t done;
};

struct fifo_item {
	struct fifo_shared *s;
	int index;
};

static void
fifo_task(void *arg)
{
	struct fifo_item *it = arg;
	struct fifo_shared *s = it->s;
	if (atomic_fetch_add(&s->inside, 1) != 0)
		atomic_fetch_add(&s->overlaps, 1);
	/* A little work so overlaps, if the queue allowed them, would show. */
	for (volatile int spin = 0; spin < 200; spin++) {
	}
	s->order[s->n++] = it->index; /* deliberately not thread-safe */
	atomic_fetch_sub(&s->inside, 1);
	if (it->index == FIFO_N - 1)
		sem_post(&s->done);
}

static void
test_fifo_one_at_a_time(void)
{
	static struct fifo_shared s;
	static struct fifo_item items[FIFO_N];
	sem_init(&s.done, 0, 0);
	sq_queue_t q = sq_queue_create("com.example.MyQueue", NULL);
	CHECK(q != NULL);
	for (int i = 0; i < FIFO_N; i++) {
		items[i].s = &s;
		items[i].index = i;
		sq_async_f(q, &items[i], fifo_task);
	}
	CHECK(sqt_sem_wait_ms(&s.done, WAIT_MS));
	CHECK_EQ(s.n, FIFO_N);
	int in_order = 1;
	for (int i = 0; i < s.n; i++)
		if (s.order[i] != i)
			in_order = 0;
	CHECK(in_order);
	CHECK_EQ(atomic_load(&s.overlaps), 0);
	sq_release(q);
	sem_destroy(&s.done);
}

/* ---- separate serial queues run concurrently ------------------------------ */

#define RDV_QUEUES 4

struct rendezvous {
	atomic_int arrived;
	atomic_int met;
	sem_t done;
};

static void
rendezvous_task(void *arg)
{
	struct rendezvous *r = arg;
	atomic_fetch_add(&r->arrived, 1);
	uint64_t deadline = sqt_now_ns() + 5000000000ull;
	while (atomic_load(&r->arrived) < RDV_QUEUES && sqt_now_ns() < deadline)
		sqt_sleep_us(500);
	if (atomic_load(&r->arrived) >= RDV_QUEUES)
		atomic_fetch_add(&r->met, 1);
	sem_post(&r->done);
}

static void
test_serial_queues_run_concurrently(void)
{
	/* (a) two serial queues, each task waiting for the other's signal. */
	static struct handshake h;
	sem_init(&h.a_to_b, 0, 0);
	sem_init(&h.b_to_a, 0, 0);
	sem_init(&h.done, 0, 0);
	sq_queue_t qa = sq_queue_create("com.example.A", NULL);
	sq_queue_t qb = sq_queue_create("com.example.B", NULL);
	sq_async_f(qa, &h, handshake_a);
	sq_async_f(qb, &h, handshake_b);
	CHECK(sqt_sem_wait_ms(&h.done, WAIT_MS));
	CHECK(sqt_sem_wait_ms(&h.done, WAIT_MS));
	CHECK_EQ(atomic_load(&h.ok), 2);
	sq_release(qa);
	sq_release(qb);

	/* (b) four serial queues meeting at a 4-party rendezvous (the pool
	 * must find 4 threads; on fewer cores, by adding blocked workers). */
	static struct rendezvous r;
	sem_init(&r.done, 0, 0);
	sq_queue_t qs[RDV_QUEUES];
	for (int i = 0; i < RDV_QUEUES; i++) {
		qs[i] = sq_queue_create("com.example.rendezvous", NULL);
		sq_async_f(qs[i], &r, rendezvous_task);
	}
	for (int i = 0; i < RDV_QUEUES; i++)
		CHECK(sqt_sem_wait_ms(&r.done, WAIT_MS));
	CHECK_EQ(atomic_load(&r.met), RDV_QUEUES);
	for (int i = 0; i < RDV_QUEUES; i++)
		sq_release(qs[i]);
}

/* ---- labels and thread names ---------------------------------------------- */

struct label_probe {
	char current_label[128];
	char thread_name[16];
	pid_t tid;
	sem_t done;
};

static void
label_probe_task(void *arg)
{
	struct label_probe *p = arg;
	const char *l = sq_queue_get_label(SQ_CURRENT_QUEUE_LABEL);
	snprintf(p->current_label, sizeof(p->current_label), "%s",
			l ? l : "(null)");
	sqt_thread_name(p->thread_name);
	p->tid = sqt_gettid();
	sem_post(&p->done);
}

static void
probe_queue(sq_queue_t q, struct label_probe *p)
{
	memset(p, 0, sizeof(*p));
	sem_init(&p->done, 0, 0);
	sq_async_f(q, p, label_probe_task);
	CHECK(sqt_sem_wait_ms(&p->done, WAIT_MS));
	sem_destroy(&p->done);
}

static void
test_labels(void)
{
	/* The label is copied at creation. */
	char buffer[64];
	strcpy(buffer, "com.example.MyQueue");
	sq_queue_t q = sq_queue_create(buffer, NULL);
	memset(buffer, 'x', sizeof(buffer) - 1);
	buffer[sizeof(buffer) - 1] = '\0';
	CHECK(strcmp(sq_queue_get_label(q), "com.example.MyQueue") == 0);
	CHECK(sq_queue_get_label(q) != buffer);

	/* A string literal of the program's is kept by pointer, not copied
	 * (it cannot change or go away), in serial and concurrent queues; a
	 * static array that can change is copied. */
	static const char literal[] = "com.example.literal";
	static char writable[] = "com.example.writable";
	sq_queue_t lit = sq_queue_create(literal, NULL);
	sq_queue_t lit_c = sq_queue_create(literal, SQ_QUEUE_CONCURRENT);
	sq_queue_t wr = sq_queue_create(writable, NULL);
	writable[0] = 'X';
	CHECK(sq_queue_get_label(lit) == literal);
	CHECK(sq_queue_get_label(lit_c) == literal);
	CHECK(sq_queue_get_label(wr) != writable);
	CHECK(strcmp(sq_queue_get_label(wr), "com.example.writable") == 0);
	sq_release(lit);
	sq_release(lit_c);
	sq_release(wr);

	/* A NULL label reads as "". */
	sq_queue_t anonymous = sq_queue_create(NULL, NULL);
	CHECK(sq_queue_get_label(anonymous) != NULL);
	CHECK(strcmp(sq_queue_get_label(anonymous), "") == 0);

	/* Concurrent queues and global queues have labels too. */
	sq_queue_t c = sq_queue_create("com.example.concurrent",
			SQ_QUEUE_CONCURRENT);
	CHECK(strcmp(sq_queue_get_label(c), "com.example.concurrent") == 0);
	CHECK(sq_queue_get_label(sq_get_global_queue(0, 0)) != NULL);
	CHECK(sq_queue_get_label(sq_get_main_queue()) != NULL);
	/* Outside any task: the current queue is the default global queue. */
	CHECK(strcmp(sq_queue_get_label(SQ_CURRENT_QUEUE_LABEL),
			sq_queue_get_label(sq_get_global_queue(0, 0))) == 0);

	/* SQ_CURRENT_QUEUE_LABEL inside a task, and the worker's thread name
	 * (a label of at most 15 characters is shown whole). */
	struct label_probe p;
	sq_queue_t named = sq_queue_create("sq.test.label", NULL);
	probe_queue(named, &p);
	CHECK(strcmp(p.current_label, "sq.test.label") == 0);
	CHECK(strcmp(p.thread_name, "sq.test.label") == 0);
	if (strcmp(p.thread_name, "sq.test.label") != 0)
		fprintf(stderr, "  thread name inside 'sq.test.label': '%s'\n",
				p.thread_name);
	CHECK(p.tid != getpid()); /* async work never runs on the main thread */

	/* A long label is truncated to 15 characters (either end kept). */
	const char *long_label = "com.example.a.rather.long.queue.label";
	sq_queue_t longq = sq_queue_create(long_label, NULL);
	probe_queue(longq, &p);
	CHECK(strcmp(p.current_label, long_label) == 0);
	size_t nl = strlen(p.thread_name);
	CHECK(nl > 0 && nl <= 15);
	CHECK(nl > 0 && strstr(long_label, p.thread_name) != NULL);
	if (nl == 0 || strstr(long_label, p.thread_name) == NULL)
		fprintf(stderr, "  thread name inside '%s': '%s'\n",
				long_label, p.thread_name);

	/* Duplicate labels are allowed; the queues are independent. */
	sq_queue_t dup1 = sq_queue_create("sq.test.dup", NULL);
	sq_queue_t dup2 = sq_queue_create("sq.test.dup", NULL);
	CHECK(dup1 != dup2);
	probe_queue(dup1, &p);
	CHECK(strcmp(p.current_label, "sq.test.dup") == 0);
	probe_queue(dup2, &p);
	CHECK(strcmp(p.current_label, "sq.test.dup") == 0);

	/* libdispatch's thread_name: a worker's name is not inherited from
	 * the thread that submitted the work, and is not empty. */
	pthread_setname_np(pthread_self(), "sqt-submitter");
	probe_queue(sq_get_global_queue(0, 0), &p);
	CHECK(p.thread_name[0] != '\0');
	CHECK(strcmp(p.thread_name, "sqt-submitter") != 0);
	probe_queue(named, &p);
	CHECK(strcmp(p.thread_name, "sqt-submitter") != 0);

	/* A worker's name follows the queue it runs, back and forth between
	 * a global queue and a labelled one (the global queue's name is a
	 * constant the worker compares by address). */
	for (int round = 0; round < 3; round++) {
		probe_queue(sq_get_global_queue(0, 0), &p);
		CHECK(strcmp(p.thread_name, "sq.default") == 0);
		if (strcmp(p.thread_name, "sq.default") != 0)
			fprintf(stderr, "  thread name on the default global "
					"queue: '%s'\n", p.thread_name);
		probe_queue(named, &p);
		CHECK(strcmp(p.thread_name, "sq.test.label") == 0);
	}

	sq_release(q);
	sq_release(anonymous);
	sq_release(c);
	sq_release(named);
	sq_release(longq);
	sq_release(dup1);
	sq_release(dup2);
}

/* ---- labels of every length ------------------------------------------------ */

/* Short labels live inside the queue, longer ones in a copy of their own:
 * every length around that limit reads back whole, independent of the
 * caller's buffer, while the queue runs work and after it (ASan checks
 * the frees). */
static void
label_probe_len(void *arg)
{
	size_t *len = arg;
	*len = strlen(sq_queue_get_label(SQ_CURRENT_QUEUE_LABEL));
}

static void
test_labels_of_every_length(void)
{
	enum { MAX = 100 };
	char buffer[MAX + 1];
	sq_queue_t q[MAX + 1];
	for (size_t n = 0; n <= MAX; n++) {
		for (size_t i = 0; i < n; i++)
			buffer[i] = (char)('a' + (i + n) % 26);
		buffer[n] = '\0';
		q[n] = sq_queue_create(buffer, n % 2 ? SQ_QUEUE_CONCURRENT
				: NULL);
		memset(buffer, 'x', n);
	}
	for (size_t n = 0; n <= MAX; n++) {
		const char *l = sq_queue_get_label(q[n]);
		CHECK(strlen(l) == n);
		bool same = true;
		for (size_t i = 0; i < n && same; i++)
			same = l[i] == (char)('a' + (i + n) % 26);
		CHECK(same);
		size_t len = SIZE_MAX;
		sq_sync_f(q[n], &len, label_probe_len);
		CHECK(len == n);
	}
	for (size_t n = 0; n <= MAX; n++)
		sq_release(q[n]);
}

/* ---- three tasks' exact output, release right after submitting ------------ */

struct golden {
	char text[2048];
	size_t len;
	atomic_int on_main;
	atomic_int finalized;
	atomic_int blocks_at_finalize;
	atomic_int blocks_done;
	void *finalizer_context;
	sem_t finalized_sem;
};

static struct golden golden;

static void
golden_line(const char *which, int counter)
{
	golden.len += (size_t)snprintf(golden.text + golden.len,
			sizeof(golden.text) - golden.len,
			"%s iteration, counter = %d\n", which, counter);
}

static void
golden_iteration(const char *which)
{
	if (sqt_on_main_thread())
		atomic_fetch_add(&golden.on_main, 1);
	for (int counter = 0; counter < 5; counter++)
		golden_line(which, counter);
	atomic_fetch_add(&golden.blocks_done, 1);
}

static void
firstIteration(void *ctx)
{
	golden_iteration("First");
}

static void
secondIteration(void *ctx)
{
	golden_iteration("Second");
}

static void
thirdIteration(void *ctx)
{
	golden_iteration("Third");
}

static void
golden_finalizer(void *ctx)
{
	golden.finalizer_context = ctx;
	atomic_store(&golden.blocks_at_finalize, atomic_load(&golden.blocks_done));
	atomic_fetch_add(&golden.finalized, 1);
	sem_post(&golden.finalized_sem);
}

static const char *
golden_expected(void)
{
	static char expected[2048];
	size_t n = 0;
	const char *names[3] = { "First", "Second", "Third" };
	for (int b = 0; b < 3; b++)
		for (int c = 0; c < 5; c++)
			n += (size_t)snprintf(expected + n, sizeof(expected) - n,
					"%s iteration, counter = %d\n",
					names[b], c);
	return expected;
}

/* variant 0: release once right after submitting;
 * variant 1: retain, then release twice while tasks are pending. */
static void
run_golden(int variant)
{
	static int context_cookie;
	memset(&golden, 0, sizeof(golden));
	sem_init(&golden.finalized_sem, 0, 0);
	sq_queue_t q = sq_queue_create("com.pixolity.GCD.serialQueue1", 0);
	sq_set_context(q, &context_cookie);
	sq_set_finalizer_f(q, golden_finalizer);
	if (variant == 1)
		sq_retain(q);
	sq_async_f(q, NULL, firstIteration);
	sq_async_f(q, NULL, secondIteration);
	sq_async_f(q, NULL, thirdIteration);
	sq_release(q);
	if (variant == 1)
		sq_release(q);

	CHECK(sqt_sem_wait_ms(&golden.finalized_sem, WAIT_MS));
	sqt_sleep_ms(20); /* a second finalizer call would show up here */
	CHECK(strcmp(golden.text, golden_expected()) == 0);
	if (strcmp(golden.text, golden_expected()) != 0)
		fprintf(stderr, "  got:\n%s", golden.text);
	CHECK_EQ(atomic_load(&golden.on_main), 0);
	CHECK_EQ(atomic_load(&golden.finalized), 1);
	CHECK_EQ(atomic_load(&golden.blocks_at_finalize), 3);
	CHECK(golden.finalizer_context == &context_cookie);
	sem_destroy(&golden.finalized_sem);
}

static void
test_release_after_submitting(void)
{
	run_golden(0);
	run_golden(1);
}

/* ---- context and finalizer: a queue that frees its context data ------------ */

typedef struct {
	int magic;
	int cleaned;
} MyDataContext;

static atomic_int finalizer_calls;
static void *volatile finalizer_arg;
static atomic_int tasks_done_at_finalize;
static atomic_int pending_tasks_done;
static sem_t finalizer_sem;

static void
myFinalizerFunction(void *context)
{
	MyDataContext *theData = context;
	finalizer_arg = context;
	if (theData->magic == 0x5eed)
		theData->cleaned++; /* myCleanUpDataContextFunction */
	atomic_store(&tasks_done_at_finalize, atomic_load(&pending_tasks_done));
	atomic_fetch_add(&finalizer_calls, 1);
	free(theData);
	sem_post(&finalizer_sem);
}

static sem_t gate;

static void
gated_task(void *ctx)
{
	sqt_sem_wait_ms(&gate, WAIT_MS);
	atomic_fetch_add(&pending_tasks_done, 1);
}

static void
plain_task(void *ctx)
{
	atomic_fetch_add(&pending_tasks_done, 1);
}

static void
set_own_context(void *ctx)
{
	sq_set_context(sq_get_current_queue(), ctx);
	atomic_fetch_add(&pending_tasks_done, 1);
}

static void
test_context_and_finalizer(void)
{
	sem_init(&finalizer_sem, 0, 0);
	sem_init(&gate, 0, 0);

	/* createMyQueue: the finalizer runs once, with the same pointer. */
	atomic_store(&finalizer_calls, 0);
	MyDataContext *data = malloc(sizeof(*data));
	data->magic = 0x5eed;
	data->cleaned = 0;
	sq_queue_t q = sq_queue_create("com.example.CriticalTaskQueue", NULL);
	sq_set_context(q, data);
	CHECK(sq_get_context(q) == data);
	sq_set_finalizer_f(q, myFinalizerFunction);
	uint64_t start = sqt_now_ns();
	sq_release(q);
	CHECK(sqt_sem_wait_ms(&finalizer_sem, WAIT_MS));
	CHECK(sqt_ms_since(start) < 1000.0); /* "within 1 s" */
	sqt_sleep_ms(20);
	CHECK_EQ(atomic_load(&finalizer_calls), 1);
	CHECK(finalizer_arg == data);

	/* Variant 1: context NULL, the finalizer is never called. */
	atomic_store(&finalizer_calls, 0);
	atomic_store(&pending_tasks_done, 0);
	q = sq_queue_create("com.example.NullContext", NULL);
	sq_set_finalizer_f(q, myFinalizerFunction);
	sq_async_f(q, NULL, plain_task);
	sq_release(q);
	CHECK(sqt_wait_int(&pending_tasks_done, 1, WAIT_MS));
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&finalizer_calls), 0);

	/* Variant 2: tasks pending at the release; the finalizer waits for
	 * them. */
	atomic_store(&finalizer_calls, 0);
	atomic_store(&pending_tasks_done, 0);
	data = malloc(sizeof(*data));
	data->magic = 0x5eed;
	data->cleaned = 0;
	q = sq_queue_create("com.example.PendingAtRelease", NULL);
	sq_set_context(q, data);
	sq_set_finalizer_f(q, myFinalizerFunction);
	sq_async_f(q, NULL, gated_task);
	for (int i = 0; i < 9; i++)
		sq_async_f(q, NULL, plain_task);
	sq_release(q);
	sqt_sleep_ms(50);
	CHECK_EQ(atomic_load(&finalizer_calls), 0);
	sem_post(&gate);
	CHECK(sqt_sem_wait_ms(&finalizer_sem, WAIT_MS));
	CHECK_EQ(atomic_load(&tasks_done_at_finalize), 10);
	CHECK_EQ(atomic_load(&finalizer_calls), 1);
	CHECK(finalizer_arg == data);

	/* libdispatch's queue_finalizer: the context is set by a task enqueued
	 * before the release; the finalizer gets that context. */
	atomic_store(&finalizer_calls, 0);
	atomic_store(&pending_tasks_done, 0);
	data = malloc(sizeof(*data));
	data->magic = 0x5eed;
	data->cleaned = 0;
	q = sq_queue_create("com.example.ContextFromTask", NULL);
	sq_set_finalizer_f(q, myFinalizerFunction);
	sq_async_f(q, data, set_own_context);
	sq_release(q);
	CHECK(sqt_sem_wait_ms(&finalizer_sem, WAIT_MS));
	CHECK_EQ(atomic_load(&finalizer_calls), 1);
	CHECK(finalizer_arg == data);

	/* The context reads back as set, and NULL once cleared. */
	static int marker;
	q = sq_queue_create("com.example.ReadContext", NULL);
	sq_set_context(q, &marker);
	CHECK(sq_get_context(q) == &marker);
	sq_set_context(q, NULL);
	CHECK(sq_get_context(q) == NULL);
	sq_release(q);

	sem_destroy(&gate);
	sem_destroy(&finalizer_sem);
}

/* ---- async then sync, sync blocks, sync inline ----------------------------- */

struct four_lines {
	atomic_int seq;
	int work, first_maybe, more_work, both_done; /* sequence numbers */
};

static void
do_some_work(void *arg)
{
	struct four_lines *f = arg;
	f->work = atomic_fetch_add(&f->seq, 1);
}

static void
do_more_work(void *arg)
{
	struct four_lines *f = arg;
	f->more_work = atomic_fetch_add(&f->seq, 1);
}

struct sync_probe {
	pthread_t thread;
	pid_t tid;
	bool flag;
	sq_queue_t current;
};

static void
sync_probe_task(void *arg)
{
	struct sync_probe *p = arg;
	p->thread = pthread_self();
	p->tid = sqt_gettid();
	p->current = sq_get_current_queue();
}

static void
slow_set_flag(void *arg)
{
	sqt_sleep_ms(50);
	*(bool *)arg = true;
}

static void *
sync_from_thread(void *arg)
{
	sq_queue_t q = arg;
	struct sync_probe p;
	memset(&p, 0, sizeof(p));
	sq_sync_f(q, &p, sync_probe_task);
	CHECK(pthread_equal(p.thread, pthread_self()));
	CHECK(p.current == q);
	return NULL;
}

static void
test_async_then_sync(void)
{
	/* async some work, then sync more work: the sync returns after both. */
	for (int round = 0; round < 50; round++) {
		struct four_lines f;
		memset(&f, 0, sizeof(f));
		sq_queue_t q = sq_queue_create("com.example.MyCustomQueue", NULL);
		sq_async_f(q, &f, do_some_work);
		f.first_maybe = atomic_fetch_add(&f.seq, 1);
		sq_sync_f(q, &f, do_more_work);
		f.both_done = atomic_fetch_add(&f.seq, 1);
		CHECK(f.work < f.more_work);
		CHECK(f.more_work < f.both_done);
		CHECK(f.first_maybe < f.more_work);
		sq_release(q);
	}

	/* sync returns after the work, flag visible. */
	sq_queue_t q = sq_queue_create("com.example.sync", NULL);
	bool flag = false;
	uint64_t start = sqt_now_ns();
	sq_sync_f(q, &flag, slow_set_flag);
	CHECK(flag);
	CHECK(sqt_ms_since(start) >= 49.0);

	/* Sync on an idle serial queue runs on the calling thread. */
	struct sync_probe p;
	memset(&p, 0, sizeof(p));
	sq_sync_f(q, &p, sync_probe_task);
	CHECK(pthread_equal(p.thread, pthread_self()));
	CHECK(p.tid == sqt_gettid());
	CHECK(p.current == q);
	sq_barrier_sync_f(q, &p, sync_probe_task);
	CHECK(pthread_equal(p.thread, pthread_self()));
	pthread_t t;
	pthread_create(&t, NULL, sync_from_thread, q);
	pthread_join(t, NULL);
	sq_release(q);
}

/* ---- FIFO against the end of a drain ---------------------------------------
 *
 * async A then sync B from one thread, while a worker finishes draining the
 * queue (sqt_tail_race): B must not run before A, however the caller's
 * calls fall against the drainer's last steps. The same through a target
 * chain (B's queue idle, A queued on its serial target), and for apply on a
 * serial queue (one sync task).
 */

#define TAIL_ROUNDS SQT_SCALE(20000, 2000)

static void
tail_sync_b(void *ctx, struct sqt_tail_race *r)
{
	sq_sync_f(ctx, r, sqt_tail_b);
}

static void
tail_apply_b(void *ctx, size_t i)
{
	(void)i;
	sqt_tail_b(ctx);
}

static void
tail_apply(void *ctx, struct sqt_tail_race *r)
{
	sq_apply_f(1, ctx, r, tail_apply_b);
}

static void
test_fifo_against_drain_end(void)
{
	sq_queue_t q = sq_queue_create("com.example.tail", NULL);
	CHECK_EQ(sqt_tail_race(TAIL_ROUNDS, q, q, false, tail_sync_b, q), 0);
	CHECK_EQ(sqt_tail_race(TAIL_ROUNDS / 2, q, q, false, tail_apply, q),
			0);

	/* q -> t: A and the drain on q, B through q's chain */
	sq_queue_t t = sq_queue_create("com.example.tail.target", NULL);
	sq_queue_t qt = sq_queue_create_with_target("com.example.tail.sub",
			NULL, t);
	CHECK_EQ(sqt_tail_race(TAIL_ROUNDS / 2, qt, qt, false, tail_sync_b,
			qt), 0);
	/* A and the drain on the target t, B on q (idle) */
	CHECK_EQ(sqt_tail_race(TAIL_ROUNDS / 2, t, t, false, tail_sync_b, qt),
			0);
	sq_release(qt);
	sq_release(t);
	sq_release(q);
}

/* ---- Suspension against a drain --------------------------------------------
 *
 * A task submitted after sq_suspend returned must not start before the
 * resume, even when the queue's drainer is between its look at the state
 * and its next job: a few short tasks, a spin of random length (so the
 * suspend falls anywhere in their drain), the suspend, task T, the resume.
 */

struct suspend_race {
	atomic_int resumed;
	atomic_int early;
	atomic_int ran;
};

static void
suspend_race_short(void *arg)
{
	for (volatile int i = 0; i < (int)(intptr_t)arg; i++) {
	}
}

static void
suspend_race_t(void *arg)
{
	struct suspend_race *r = arg;
	if (!atomic_load(&r->resumed))
		atomic_fetch_add(&r->early, 1);
	atomic_fetch_add(&r->ran, 1);
}

static void
test_suspension_against_drain(void)
{
	static struct suspend_race r;
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int rounds = SQT_SCALE(10000, 1000);
	sq_queue_t q = sq_queue_create("com.example.suspend.race", NULL);
	for (int i = 0; i < rounds; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		int n = 1 + (int)(rng % 8);
		for (int k = 0; k < n; k++)
			sq_async_f(q, (void *)(intptr_t)((rng >> (8 + k)) % 300),
					suspend_race_short);
		for (volatile unsigned k = 0; k < (rng >> 20) % 3000; k++) {
		}
		atomic_store(&r.resumed, 0);
		sq_suspend(q);
		sq_async_f(q, &r, suspend_race_t);
		for (volatile int k = 0; k < 2000; k++) {
		}
		atomic_store(&r.resumed, 1);
		sq_resume(q);
		/* spinning: a worker that parks between rounds would start
		 * every drain from a wake-up */
		for (unsigned spins = 0; atomic_load(&r.ran) <= i; spins++)
			if (spins > 100000)
				sched_yield();
	}
	CHECK_EQ(atomic_load(&r.early), 0);
	sq_release(q);
}

/* ---- completion callback (average_async) ---------------------------------- */

static char callback_key;

struct average_call {
	const int *data;
	size_t len;
	sq_queue_t queue;
	void (*block)(int avg);
};

struct average_result {
	int avg;
	void (*block)(int avg);
};

static int
average(const int *data, size_t len)
{
	int sum = 0;
	for (size_t i = 0; i < len; i++)
		sum += data[i];
	return sum / (int)len;
}

static void
average_deliver(void *arg)
{
	struct average_result *r = arg;
	r->block(r->avg);
	free(r);
}

static void
average_work(void *arg)
{
	struct average_call *c = arg;
	struct average_result *r = malloc(sizeof(*r));
	r->avg = average(c->data, c->len);
	r->block = c->block;
	sq_async_f(c->queue, r, average_deliver);
	sq_release(c->queue);
	free(c);
}

static void
average_async(const int *data, size_t len, sq_queue_t queue,
		void (*block)(int avg))
{
	struct average_call *c = malloc(sizeof(*c));
	c->data = data;
	c->len = len;
	c->queue = queue;
	c->block = block;
	sq_retain(queue);
	sq_async_f(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0), c,
			average_work);
}

static atomic_int callback_avg;
static atomic_int callback_on_queue;
static sem_t callback_sem;
static void *expected_marker;

static void
on_average(int avg)
{
	atomic_store(&callback_avg, avg);
	atomic_store(&callback_on_queue, sq_get_specific(&callback_key) ==
			expected_marker);
	sem_post(&callback_sem);
}

static void
test_completion_callback(void)
{
	static const int data1[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	static const int data2[5] = { 1, 2, 3, 4, 5 };
	static int marker1, marker2;
	sem_init(&callback_sem, 0, 0);

	sq_queue_t q = sq_queue_create("com.example.callback", NULL);
	sq_queue_set_specific(q, &callback_key, &marker1, NULL);
	expected_marker = &marker1;
	average_async(data1, 10, q, on_average);
	sq_release(q); /* the caller's reference goes at once */
	CHECK(sqt_sem_wait_ms(&callback_sem, WAIT_MS));
	CHECK_EQ(atomic_load(&callback_avg), 5);
	CHECK_EQ(atomic_load(&callback_on_queue), 1);

	q = sq_queue_create("com.example.callback2", NULL);
	sq_queue_set_specific(q, &callback_key, &marker2, NULL);
	expected_marker = &marker2;
	average_async(data2, 5, q, on_average);
	sq_release(q);
	CHECK(sqt_sem_wait_ms(&callback_sem, WAIT_MS));
	CHECK_EQ(atomic_load(&callback_avg), 3);
	CHECK_EQ(atomic_load(&callback_on_queue), 1);
	sem_destroy(&callback_sem);
}

/* ---- suspension is counted, between tasks --------------------------------- */

struct susp {
	sem_t a_started, a_release;
	atomic_int a_done;
	atomic_int seq;
	int b_seq, c_seq;
	atomic_int b_ran, c_ran;
	uint64_t b_time;
};

static void
susp_a(void *arg)
{
	struct susp *s = arg;
	sem_post(&s->a_started);
	sqt_sem_wait_ms(&s->a_release, WAIT_MS);
	sqt_sleep_ms(20); /* suspended meanwhile: must still finish */
	atomic_store(&s->a_done, 1);
}

static void
susp_b(void *arg)
{
	struct susp *s = arg;
	s->b_time = sqt_now_ns();
	s->b_seq = atomic_fetch_add(&s->seq, 1);
	atomic_store(&s->b_ran, 1);
}

static void
susp_c(void *arg)
{
	struct susp *s = arg;
	s->c_seq = atomic_fetch_add(&s->seq, 1);
	atomic_store(&s->c_ran, 1);
}

static void
test_suspension(void)
{
	static struct susp s;
	memset(&s, 0, sizeof(s));
	sem_init(&s.a_started, 0, 0);
	sem_init(&s.a_release, 0, 0);
	sq_queue_t q = sq_queue_create("com.example.suspend", NULL);

	sq_async_f(q, &s, susp_a);
	CHECK(sqt_sem_wait_ms(&s.a_started, WAIT_MS));
	sq_suspend(q);
	sq_suspend(q);
	sq_async_f(q, &s, susp_b);
	sq_async_f(q, &s, susp_c);
	sem_post(&s.a_release);
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&s.a_done), 1); /* not interrupted */
	CHECK_EQ(atomic_load(&s.b_ran), 0);
	sq_resume(q);
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&s.b_ran), 0); /* still suspended once */
	sq_resume(q);
	CHECK(sqt_wait_int(&s.c_ran, 1, WAIT_MS));
	CHECK_EQ(atomic_load(&s.b_ran), 1);
	CHECK(s.b_seq < s.c_seq);

	/* An idle suspended queue holds new work until resumed. */
	memset(&s, 0, sizeof(s));
	sq_suspend(q);
	sq_async_f(q, &s, susp_b);
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&s.b_ran), 0);
	uint64_t resumed = sqt_now_ns();
	sq_resume(q);
	CHECK(sqt_wait_int(&s.b_ran, 1, WAIT_MS));
	/* Promptly after the resume (50 ms on a quiet machine); allow for a
	 * loaded one. */
	CHECK((double)(s.b_time - resumed) / 1e6 < 1000.0);

	sq_release(q);
	sem_destroy(&s.a_started);
	sem_destroy(&s.a_release);
}

/* ---- initially inactive queues --------------------------------------------- */

struct inactive {
	atomic_int ran;
	int order[8];
	int n;
};

struct inactive_item {
	struct inactive *s;
	int index;
};

static void
inactive_task(void *arg)
{
	struct inactive_item *it = arg;
	it->s->order[it->s->n++] = it->index;
	atomic_fetch_add(&it->s->ran, 1);
}

static void
check_inactive(sq_queue_attr_t attr, int how, bool serial)
{
	static struct inactive s;
	static struct inactive_item items[8];
	memset(&s, 0, sizeof(s));
	sq_queue_t q = sq_queue_create("com.example.inactive", attr);
	/* Configure before activation: the usual reason for inactive queues. */
	sq_queue_t hi = sq_get_global_queue(SQ_QUEUE_PRIORITY_HIGH, 0);
	sq_set_target_queue(q, hi);
	for (int i = 0; i < 8; i++) {
		items[i].s = &s;
		items[i].index = i;
		sq_async_f(q, &items[i], inactive_task);
	}
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&s.ran), 0);
	if (how == 0) {
		sq_activate(q);
		sq_activate(q); /* activating an active object does nothing */
	} else {
		sq_resume(q); /* resume of an inactive, unsuspended queue */
	}
	CHECK(sqt_wait_int(&s.ran, 8, WAIT_MS));
	if (serial) {
		int in_order = 1;
		for (int i = 0; i < 8; i++)
			if (s.order[i] != i)
				in_order = 0;
		CHECK(in_order);
	}
	sq_release(q);
}

static void
count_task(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

static void
test_initially_inactive(void)
{
	check_inactive(sq_queue_attr_make_initially_inactive(NULL), 0, true);
	check_inactive(SQ_QUEUE_SERIAL_INACTIVE, 0, true);
	check_inactive(SQ_QUEUE_SERIAL_INACTIVE, 1, true);
	/* Concurrent inactive queues: only count (no order promise). */
	static atomic_int cran;
	atomic_store(&cran, 0);
	sq_queue_t c = sq_queue_create("com.example.inactive.concurrent",
			sq_queue_attr_make_initially_inactive(SQ_QUEUE_CONCURRENT));
	sq_queue_t c2 = sq_queue_create("com.example.inactive.concurrent2",
			SQ_QUEUE_CONCURRENT_INACTIVE);
	for (int i = 0; i < 8; i++) {
		sq_async_f(c, &cran, count_task);
		sq_async_f(c2, &cran, count_task);
	}
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&cran), 0);
	sq_activate(c);
	CHECK(sqt_wait_int(&cran, 8, WAIT_MS));
	sqt_sleep_ms(20);
	CHECK_EQ(atomic_load(&cran), 8); /* c2 still inactive */
	sq_activate(c2);
	CHECK(sqt_wait_int(&cran, 16, WAIT_MS));
	sq_release(c);
	sq_release(c2);
}

/* ---- the current queue ----------------------------------------------------- */

struct current_probe {
	sq_queue_t q, q2;
	sq_queue_t in_q, in_q2, after_nested;
	sem_t done;
};

static void
current_inner(void *arg)
{
	struct current_probe *p = arg;
	p->in_q2 = sq_get_current_queue();
}

static void
current_outer(void *arg)
{
	struct current_probe *p = arg;
	p->in_q = sq_get_current_queue();
	sq_sync_f(p->q2, p, current_inner);
	p->after_nested = sq_get_current_queue();
	sem_post(&p->done);
}

static void *
current_from_plain_thread(void *arg)
{
	*(sq_queue_t *)arg = sq_get_current_queue();
	return NULL;
}

static void
test_current_queue(void)
{
	static struct current_probe p;
	memset(&p, 0, sizeof(p));
	sem_init(&p.done, 0, 0);
	p.q = sq_queue_create("com.example.current.q", NULL);
	p.q2 = sq_queue_create("com.example.current.q2", NULL);
	sq_async_f(p.q, &p, current_outer);
	CHECK(sqt_sem_wait_ms(&p.done, WAIT_MS));
	CHECK(p.in_q == p.q);
	CHECK(p.in_q2 == p.q2);
	CHECK(p.after_nested == p.q);

	sq_queue_t from_thread = NULL;
	pthread_t t;
	pthread_create(&t, NULL, current_from_plain_thread, &from_thread);
	pthread_join(t, NULL);
	CHECK(from_thread == sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));
	CHECK(sq_get_current_queue() ==
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));

	/* Inside sync from the main thread, too. */
	memset(&p.in_q, 0, sizeof(p.in_q));
	sq_sync_f(p.q, &p, current_outer);
	CHECK(sqt_sem_wait_ms(&p.done, WAIT_MS));
	CHECK(p.in_q == p.q);
	CHECK(p.in_q2 == p.q2);
	CHECK(p.after_nested == p.q);
	CHECK(sq_get_current_queue() ==
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));

	sq_release(p.q);
	sq_release(p.q2);
	sem_destroy(&p.done);
}

/* ---- nested async on the same serial queue --------------------------------- */

static atomic_int foo_calls;
static sq_queue_t queueA;

static void
foo(void *ctx)
{
	atomic_fetch_add(&foo_calls, 1);
}

static void
submit_foo(void *ctx)
{
	sq_async_f(queueA, NULL, foo);
}

static void
test_nested_async(void)
{
	queueA = sq_queue_create("com.example.queueA", NULL);
	sq_async_f(queueA, NULL, submit_foo);
	CHECK(sqt_wait_int(&foo_calls, 1, WAIT_MS));
	sqt_sleep_ms(10);
	CHECK_EQ(atomic_load(&foo_calls), 1);
	sq_release(queueA);
}

/* ---- many producers on one serial queue ---------------------------------- */

#define MAX_PRODUCERS 16

struct prod_task {
	uint32_t producer;
	uint32_t seq;
};

static struct {
	sq_queue_t q;
	int producers;
	int per_producer;
	struct prod_task *tasks;
	atomic_int inside;
	atomic_int overlaps;
	long count;                 /* only touched on the queue */
	long last[MAX_PRODUCERS];   /* only touched on the queue */
	long order_errors;          /* only touched on the queue */
} prod;

static void
prod_consume(void *arg)
{
	struct prod_task *t = arg;
	if (atomic_fetch_add_explicit(&prod.inside, 1, memory_order_relaxed) != 0)
		atomic_fetch_add(&prod.overlaps, 1);
	if ((long)t->seq != prod.last[t->producer] + 1)
		prod.order_errors++;
	prod.last[t->producer] = t->seq;
	prod.count++;
	atomic_fetch_sub_explicit(&prod.inside, 1, memory_order_relaxed);
}

static void *
producer_main(void *arg)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	struct prod_task *mine = prod.tasks + (size_t)id * prod.per_producer;
	for (uint32_t i = 0; i < (uint32_t)prod.per_producer; i++) {
		mine[i].producer = id;
		mine[i].seq = i;
		sq_async_f(prod.q, &mine[i], prod_consume);
	}
	return NULL;
}

static void
read_count(void *arg)
{
	*(long *)arg = prod.count;
}

static void
run_producers(int producers, int per_producer)
{
	prod.q = sq_queue_create("com.example.producers", NULL);
	prod.producers = producers;
	prod.per_producer = per_producer;
	prod.count = 0;
	prod.order_errors = 0;
	atomic_store(&prod.overlaps, 0);
	prod.tasks = calloc((size_t)producers * per_producer,
			sizeof(*prod.tasks));
	for (int i = 0; i < producers; i++)
		prod.last[i] = -1;
	pthread_t threads[MAX_PRODUCERS];
	for (int i = 0; i < producers; i++)
		pthread_create(&threads[i], NULL, producer_main,
				(void *)(uintptr_t)i);
	for (int i = 0; i < producers; i++)
		pthread_join(threads[i], NULL);
	long count = 0;
	sq_sync_f(prod.q, &count, read_count); /* after every async before it */
	CHECK_EQ(count, (long)producers * per_producer);
	CHECK_EQ(prod.order_errors, 0);
	CHECK_EQ(atomic_load(&prod.overlaps), 0);
	int all_last = 1;
	for (int i = 0; i < producers; i++)
		if (prod.last[i] != per_producer - 1)
			all_last = 0;
	CHECK(all_last);
	sq_release(prod.q);
	free(prod.tasks);
}

static void
test_producers(void)
{
	/* 4 producers x 100,000 */
	run_producers(4, SQT_SCALE(100000, 25000));
	/* 16 threads x 10,000 */
	run_producers(16, SQT_SCALE(10000, 2500));
}

/* ---- a serial queue as a lock: async updates, sync critical section ------- */

#define LOCK_THREADS 8
#define LOCK_PER_THREAD SQT_SCALE(10000, 2000)

static struct {
	sq_queue_t serial_queue;
	long counter;
	atomic_long max_cpu_ns_per_call;
} lockq;

static void
increment(void *ctx)
{
	lockq.counter += 1;
}

static void *
async_lock_thread(void *arg)
{
	uint64_t cpu0 = sqt_thread_cpu_ns();
	for (int i = 0; i < LOCK_PER_THREAD; i++)
		sq_async_f(lockq.serial_queue, NULL, increment);
	long per_call = (long)((sqt_thread_cpu_ns() - cpu0) / LOCK_PER_THREAD);
	long old = atomic_load(&lockq.max_cpu_ns_per_call);
	while (per_call > old && !atomic_compare_exchange_weak(
			&lockq.max_cpu_ns_per_call, &old, per_call)) {
	}
	return NULL;
}

static atomic_int lock_errors;

static void
critical_section(void *arg)
{
	long *seen = arg;
	long before = lockq.counter;
	lockq.counter = before + 1;
	*seen = lockq.counter;
}

static void *
sync_lock_thread(void *arg)
{
	for (int i = 0; i < 1000; i++) {
		long seen = 0;
		sq_sync_f(lockq.serial_queue, &seen, critical_section);
		if (seen <= 0)
			atomic_fetch_add(&lock_errors, 1);
	}
	return NULL;
}

static void
read_lock_counter(void *arg)
{
	*(long *)arg = lockq.counter;
}

static void
test_async_lock(void)
{
	lockq.serial_queue = sq_queue_create("com.example.lock", NULL);
	sqt_run_threads(LOCK_THREADS, async_lock_thread, NULL, 0);
	long value = 0;
	sq_sync_f(lockq.serial_queue, &value, read_lock_counter);
	CHECK_EQ(value, (long)LOCK_THREADS * LOCK_PER_THREAD);
	/* "Callers never block": each async costs the caller < 10 us of CPU
	 * on average (not checked under sanitizers, which slow every call). */
	if (!SQT_SANITIZED)
		CHECK(atomic_load(&lockq.max_cpu_ns_per_call) < 10000);

	/* sync as a critical section from several threads. */
	sqt_run_threads(4, sync_lock_thread, NULL, 0);
	sq_sync_f(lockq.serial_queue, &value, read_lock_counter);
	CHECK_EQ(value, (long)LOCK_THREADS * LOCK_PER_THREAD + 4 * 1000);
	CHECK_EQ(atomic_load(&lock_errors), 0);
	sq_release(lockq.serial_queue);
}

/* ---- producer-consumer on a serial queue ---------------------------------- */

#define PC_ITEMS 10000

static struct {
	int processed[PC_ITEMS];
	int n;
	sem_t done;
} pc;

static void
pc_consume(void *arg)
{
	pc.processed[pc.n++] = (int)(intptr_t)arg;
	if (pc.n == PC_ITEMS)
		sem_post(&pc.done);
}

static void
test_producer_consumer(void)
{
	sem_init(&pc.done, 0, 0);
	sq_queue_t q = sq_queue_create("com.example.consumer", NULL);
	for (int i = 0; i < PC_ITEMS; i++)
		sq_async_f(q, (void *)(intptr_t)i, pc_consume);
	CHECK(sqt_sem_wait_ms(&pc.done, WAIT_MS));
	int in_order = pc.n == PC_ITEMS;
	for (int i = 0; i < pc.n; i++)
		if (pc.processed[i] != i)
			in_order = 0;
	CHECK(in_order);
	sq_release(q);
	sem_destroy(&pc.done);
}

/* ---- memory circulates: a producer ahead of its consumer ------------------- */

/* Each round, the main thread submits CIRC_TASKS tasks that each take a
 * little time, so it runs ahead and the queue grows long; the worker that
 * runs them frees their continuations. Those must come back to the
 * producer (in batches). The heap in use then grows only while the
 * producer gets further ahead than in any round before: at most one
 * round's worth of continuations is ever live or cached at once (48 bytes
 * each, and a batch's pointer to it). Measured, that plateaus at 3-8 MB
 * above the first round. A runtime that lost batches grows the heap by
 * about 14 MB a round, 72 MB over the five rounds after the first. */
#define CIRC_TASKS SQT_SCALE(200000, 20000)
#define CIRC_ROUNDS 6

struct circ_state {
	int next;   /* on the queue only */
	int errors; /* on the queue only */
};

static void
circ_task(void *arg)
{
	struct circ_state *c = arg;
	for (volatile int spin = 0; spin < 100; spin++) {
	}
	c->next++;
}

static void
circ_check(void *arg)
{
	struct circ_state *c = arg;
	if (c->next != CIRC_TASKS)
		c->errors++;
	c->next = 0;
}

static void
circ_noop(void *arg)
{
	(void)arg;
}

static void
test_memory_circulates(void)
{
	sq_queue_t q = sq_queue_create("com.example.circulate", NULL);
	struct circ_state c = { 0, 0 };
	size_t after_first = 0, last = 0;
	for (int r = 0; r < CIRC_ROUNDS; r++) {
		for (int i = 0; i < CIRC_TASKS; i++)
			sq_async_f(q, &c, circ_task);
		sq_sync_f(q, &c, circ_check);
		last = mallinfo2().uordblks;
		if (r == 0)
			after_first = last;
	}
	CHECK_EQ(c.errors, 0);
	/* The sanitizers' allocators do not report to mallinfo2. */
	if (!SQT_ASAN && !SQT_TSAN && after_first > 0) {
		long grown = (long)last - (long)after_first;
		long bound = (long)CIRC_TASKS * 64;
		printf("circulation: heap in use grew by %ld bytes over %d "
				"rounds (bound %ld)\n", grown, CIRC_ROUNDS - 1,
				bound);
		CHECK(grown <= bound);
	}
	sq_release(q);
}

/* Threads that submit and exit: each leaves its cached continuations to
 * the others, so rounds of short-lived submitters reuse the same memory
 * instead of leaving theirs behind. */
#define EXIT_ROUNDS 12
#define EXIT_THREADS 16
#define EXIT_TASKS 1000

static sq_queue_t exit_queue;
static struct circ_state exit_state; /* on the (serial) queue only */

static void *
exit_submitter(void *arg)
{
	(void)arg;
	for (int i = 0; i < EXIT_TASKS; i++)
		sq_async_f(exit_queue, &exit_state, circ_task);
	return NULL;
}

static void
test_exiting_threads_hand_memory_on(void)
{
	exit_queue = sq_queue_create("com.example.exiting", NULL);
	size_t after_first = 0, last = 0;
	for (int r = 0; r < EXIT_ROUNDS; r++) {
		sqt_run_threads(EXIT_THREADS, exit_submitter, NULL, 0);
		sq_sync_f(exit_queue, NULL, circ_noop);
		last = mallinfo2().uordblks;
		if (r == 0)
			after_first = last;
	}
	CHECK_EQ(exit_state.next, EXIT_ROUNDS * EXIT_THREADS * EXIT_TASKS);
	if (!SQT_ASAN && !SQT_TSAN && after_first > 0) {
		long grown = (long)last - (long)after_first;
		/* Continuations left behind by every exiting thread (its
		 * cache, the rest of its block and of the batch it took
		 * from) would add up to tens of KiB a round. */
		long bound = 32 * 1024;
		printf("exiting submitters: heap in use grew by %ld bytes over "
				"%d rounds (bound %ld)\n", grown,
				EXIT_ROUNDS - 1, bound);
		CHECK(grown <= bound);
	}
	sq_release(exit_queue);
}

int
main(void)
{
	test_fifo_one_at_a_time();
	test_serial_queues_run_concurrently();
	test_labels();
	test_labels_of_every_length();
	test_release_after_submitting();
	test_context_and_finalizer();
	test_async_then_sync();
	test_fifo_against_drain_end();
	test_completion_callback();
	test_suspension();
	test_suspension_against_drain();
	test_initially_inactive();
	test_current_queue();
	test_nested_async();
	test_producers();
	test_async_lock();
	test_producer_consumer();
	test_memory_circulates();
	test_exiting_threads_hand_memory_on();
	return sqt_finish("test_queue_serial");
}
