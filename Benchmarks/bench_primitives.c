/*
 * SwiftQueues benchmarks — the primitives: spin lock, once, atomic
 * counters, time, LIFO and FIFO.
 *
 * Where libdispatch has a public counterpart (dispatch_once_f,
 * dispatch_time) the other side is libdispatch; otherwise it is the plain
 * baseline a C programmer would write instead: a pthread mutex, a C11
 * atomic, a mutex-guarded intrusive list.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "dispatch_compat.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <swiftqueues.h>

#define NOINLINE __attribute__((noinline))

/* ops / n for thread i, the remainder going to thread 0. */
static size_t
share(size_t ops, unsigned n, unsigned i)
{
	return ops / n + (i == 0 ? ops % n : 0);
}

/* ---- spin lock vs pthread mutex, uncontended ------------------------------ */

static sq_spinlock_t lone_spinlock = SQ_SPINLOCK_INIT;
static pthread_mutex_t lone_mutex = PTHREAD_MUTEX_INITIALIZER;

static void
spinlock_uncontended_ours(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++) {
		sq_spinlock_lock(&lone_spinlock);
		sq_spinlock_unlock(&lone_spinlock);
	}
}

static void
spinlock_uncontended_theirs(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++) {
		pthread_mutex_lock(&lone_mutex);
		pthread_mutex_unlock(&lone_mutex);
	}
}

/* ---- spin lock vs pthread mutex, 2 threads incrementing one counter ------- */

#define CONTENDED_THREADS 2

/* The counter shares the lock's cache line, as it would in real code. */
static struct {
	sq_spinlock_t lock;
	uint64_t count;
} _Alignas(64) shared_spin;

static struct {
	pthread_mutex_t lock;
	uint64_t count;
} _Alignas(64) shared_mutex = { PTHREAD_MUTEX_INITIALIZER, 0 };

static void
contended_spin_body(void *arg, unsigned i)
{
	size_t n = share(*(size_t *)arg, CONTENDED_THREADS, i);
	while (n-- > 0) {
		sq_spinlock_lock(&shared_spin.lock);
		shared_spin.count++;
		sq_spinlock_unlock(&shared_spin.lock);
	}
}

static void
contended_mutex_body(void *arg, unsigned i)
{
	size_t n = share(*(size_t *)arg, CONTENDED_THREADS, i);
	while (n-- > 0) {
		pthread_mutex_lock(&shared_mutex.lock);
		shared_mutex.count++;
		pthread_mutex_unlock(&shared_mutex.lock);
	}
}

static void
spinlock_contended_ours(size_t ops)
{
	shared_spin.count = 0;
	bench_parallel(CONTENDED_THREADS, contended_spin_body, &ops);
	if (shared_spin.count != ops)
		bench_fail("spin lock lost increments: %llu of %zu",
				(unsigned long long)shared_spin.count, ops);
}

static void
spinlock_contended_theirs(size_t ops)
{
	shared_mutex.count = 0;
	bench_parallel(CONTENDED_THREADS, contended_mutex_body, &ops);
	if (shared_mutex.count != ops)
		bench_fail("mutex lost increments: %llu of %zu",
				(unsigned long long)shared_mutex.count, ops);
}

/* ---- once, fast path ------------------------------------------------------ */

static sq_once_t sq_once_pred;
static dispatch_once_t dispatch_once_pred;
static atomic_int once_calls;

static void
once_init(void *ctx)
{
	(void)ctx;
	atomic_fetch_add(&once_calls, 1);
}

static void
once_ours(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++) {
		sq_once_f(&sq_once_pred, NULL, once_init);
		bench_clobber();
	}
}

static void
once_theirs(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++) {
		dispatch_once_f(&dispatch_once_pred, NULL, once_init);
		bench_clobber();
	}
}

static void
once_teardown(void)
{
	if (atomic_load(&once_calls) != 2)
		bench_fail("once functions ran %d times, want 2 (1 per side)",
				atomic_load(&once_calls));
}

/* ---- atomic counter ------------------------------------------------------- */

static volatile int64_t sq_counter;
static _Atomic int64_t c11_counter;

static void
atomic_barrier_ours(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++)
		sq_atomic_inc64(&sq_counter);
}

static void
atomic_barrier_theirs(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++)
		atomic_fetch_add(&c11_counter, 1);
}

static void
atomic_relaxed_ours(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++)
		sq_atomic_inc64_relaxed(&sq_counter);
}

static void
atomic_relaxed_theirs(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++)
		atomic_fetch_add_explicit(&c11_counter, 1,
				memory_order_relaxed);
}

/* ---- time ----------------------------------------------------------------- */

static void
time_ours(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++)
		bench_sink = sq_time(SQ_TIME_NOW, 1);
}

static void
time_theirs(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++)
		bench_sink = dispatch_time(DISPATCH_TIME_NOW, 1);
}

/* ---- LIFO and FIFO, single thread ----------------------------------------- */

/*
 * A run pushes a batch of items and pops them all, batch after batch; an op
 * is one push plus one pop. Both sides check the order they get back.
 */
#define LIST_BATCH 256

struct item {
	sq_lifo_node_t lifo_link;
	sq_fifo_node_t fifo_link;
	struct item *next;        /* the baseline's link */
};

static struct item items[LIST_BATCH];

/* The baseline: an intrusive list under a pthread mutex. Out of line, like
 * the library calls of the other side. */
struct mutex_list {
	pthread_mutex_t lock;
	struct item *head;
	struct item *tail;
};

static struct mutex_list mlist = { PTHREAD_MUTEX_INITIALIZER, NULL, NULL };

static NOINLINE void
mlist_push(struct mutex_list *l, struct item *it)
{
	pthread_mutex_lock(&l->lock);
	it->next = l->head;
	l->head = it;
	pthread_mutex_unlock(&l->lock);
}

static NOINLINE struct item *
mlist_pop(struct mutex_list *l)
{
	struct item *it;
	pthread_mutex_lock(&l->lock);
	it = l->head;
	if (it != NULL)
		l->head = it->next;
	pthread_mutex_unlock(&l->lock);
	return it;
}

static NOINLINE void
mlist_enqueue(struct mutex_list *l, struct item *it)
{
	pthread_mutex_lock(&l->lock);
	it->next = NULL;
	if (l->tail != NULL)
		l->tail->next = it;
	else
		l->head = it;
	l->tail = it;
	pthread_mutex_unlock(&l->lock);
}

static NOINLINE struct item *
mlist_dequeue(struct mutex_list *l)
{
	struct item *it;
	pthread_mutex_lock(&l->lock);
	it = l->head;
	if (it != NULL) {
		l->head = it->next;
		if (l->head == NULL)
			l->tail = NULL;
	}
	pthread_mutex_unlock(&l->lock);
	return it;
}

static size_t
batch_size(size_t ops, size_t done)
{
	return ops - done < LIST_BATCH ? ops - done : LIST_BATCH;
}

static sq_lifo_t sq_lifo = SQ_LIFO_INIT;
static sq_fifo_t sq_fifo;

static void
lifo_ours(size_t ops)
{
	const size_t off = offsetof(struct item, lifo_link);
	size_t done, n, i;
	for (done = 0; done < ops; done += n) {
		n = batch_size(ops, done);
		for (i = 0; i < n; i++)
			sq_lifo_push(&sq_lifo, &items[i], off);
		for (i = n; i-- > 0;)
			if (sq_lifo_pop(&sq_lifo, off) != &items[i])
				bench_fail("sq_lifo_pop: wrong item");
	}
}

static void
lifo_theirs(size_t ops)
{
	size_t done, n, i;
	for (done = 0; done < ops; done += n) {
		n = batch_size(ops, done);
		for (i = 0; i < n; i++)
			mlist_push(&mlist, &items[i]);
		for (i = n; i-- > 0;)
			if (mlist_pop(&mlist) != &items[i])
				bench_fail("mutex stack: wrong item");
	}
}

static void
fifo_setup(void)
{
	sq_fifo_init(&sq_fifo);
}

static void
fifo_ours(size_t ops)
{
	const size_t off = offsetof(struct item, fifo_link);
	size_t done, n, i;
	for (done = 0; done < ops; done += n) {
		n = batch_size(ops, done);
		for (i = 0; i < n; i++)
			sq_fifo_enqueue(&sq_fifo, &items[i], off);
		for (i = 0; i < n; i++)
			if (sq_fifo_dequeue(&sq_fifo, off) != &items[i])
				bench_fail("sq_fifo_dequeue: wrong item");
	}
}

static void
fifo_theirs(size_t ops)
{
	size_t done, n, i;
	for (done = 0; done < ops; done += n) {
		n = batch_size(ops, done);
		for (i = 0; i < n; i++)
			mlist_enqueue(&mlist, &items[i]);
		for (i = 0; i < n; i++)
			if (mlist_dequeue(&mlist) != &items[i])
				bench_fail("mutex queue: wrong item");
	}
}

/* ---- the table ------------------------------------------------------------ */

/*
 * Ops per run are sized for roughly 50-150 ms per run on a 2-core VM, which
 * keeps the whole suite under a minute at 7 rounds. docs/PERFORMANCE.md sets no
 * targets for primitives, so none is given here.
 */
const bench_scenario_t bench_primitives[] = {
	{ "spinlock lock+unlock", 20000000,
	  spinlock_uncontended_ours, spinlock_uncontended_theirs,
	  "pthread_mutex", 0, NULL, NULL },
	{ "spinlock 2 threads contended", 2000000,
	  spinlock_contended_ours, spinlock_contended_theirs,
	  "pthread_mutex", 0, NULL, NULL },
	{ "once fast path", 200000000,
	  once_ours, once_theirs,
	  "libdispatch", 0, NULL, once_teardown },
	{ "atomic inc64 (barrier)", 20000000,
	  atomic_barrier_ours, atomic_barrier_theirs,
	  "C11 atomic seq_cst", 0, NULL, NULL },
	{ "atomic inc64 (relaxed)", 20000000,
	  atomic_relaxed_ours, atomic_relaxed_theirs,
	  "C11 atomic relaxed", 0, NULL, NULL },
	{ "time(NOW, 1)", 2000000,
	  time_ours, time_theirs,
	  "libdispatch", 0, NULL, NULL },
	{ "LIFO push+pop", 4000000,
	  lifo_ours, lifo_theirs,
	  "mutex + list", 0, NULL, NULL },
	{ "FIFO enqueue+dequeue", 4000000,
	  fifo_ours, fifo_theirs,
	  "mutex + list", 0, fifo_setup, NULL },
	{ NULL, 0, NULL, NULL, NULL, 0, NULL, NULL }
};
