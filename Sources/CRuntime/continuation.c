/*
 * SwiftQueues — continuations: the 48-byte records that carry a submitted
 * function, its context and its queue until a worker runs them, allocated
 * from a per-thread cache so that a submission normally costs no malloc.
 * The queues (queue.c) take them with _sq_cont_alloc and give them back
 * with _sq_cont_free.
 */
#include "internal.h"
#include "pool_internal.h"
#include "queue_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* ---- Continuation cache ------------------------------------------------
 *
 * A per-thread free list so sq_async_f normally costs no malloc. A
 * continuation goes back to the cache of the thread that frees it (a
 * worker), before its function runs, so the function's own submissions
 * reuse a hot cache line. Producer / consumer patterns would leave every
 * producer allocating and every worker freeing: a worker whose cache is
 * full fills a batch, and hands it to a global lock-free stack, where a
 * thread whose cache is empty takes it, so memory circulates in batches
 * instead of going through malloc and free one continuation at a time.
 *
 * A batch is an array of pointers, not a chain through the continuations:
 * a chain makes every allocation from a batch load the continuation to
 * find the next one, a miss each once the batch has gone cold (one that
 * waited on the stack while a producer ran ahead of its consumers: the
 * producer's submissions cost twice as much). From an array the taker
 * reads pointers in sequence and fetches the continuations a few ahead,
 * and the worker that fills a batch stores a pointer without touching the
 * continuation.
 *
 * Continuations are carved from blocks of SQ_CONT_BLOCK: alone, a 48-byte
 * malloc is a 64-byte chunk in glibc (malloc_usable_size 56), a third more
 * memory per pending task than the continuation's bytes, and a fan-out's
 * peak memory is its pending continuations. So a continuation never goes
 * back to malloc: it circulates through the caches and batches (full
 * batches were never freed either), a thread that exits hands its cached
 * ones on as batches, and the blocks stay on a list of their own, so that
 * leak checkers see them reachable.
 */
#define SQ_CONT_CACHE_LIMIT 512
/* Continuations per block: a 3 KiB malloc. */
#define SQ_CONT_BLOCK 64
#define SQ_CONT_BATCH 128
/* Continuations fetched ahead of the one a batch hands out. */
#define SQ_CONT_PREFETCH 8

/* ---- Back-pressure -------------------------------------------------------
 *
 * A thread that submits faster than the workers run (a fan-out from the
 * main thread) piles up pending continuations, and a fan-out's peak memory
 * is that pile. Once SQ_CONT_AHEAD continuations exist and none is free
 * anywhere (no batch waits on the shared stack), a thread that is not a
 * worker and runs no task of the runtime waits for the workers to give a
 * batch back, instead of carving a new block: it sleeps in steps of
 * SQ_CONT_WAIT_STEP_NS and goes on as soon as a batch is there.
 *
 * The wait never runs a task and is bounded in total, so a program whose
 * workers wait for the submitter (a lock it holds, a semaphore it posts
 * after submitting), or whose tasks are slow, is slowed a little, never
 * stalled. A thread keeps a debt of the time it waited: each batch it
 * waited for pays back SQ_CONT_WAIT_PER_TASK_NS per continuation in it
 * (the workers moved that much), and the thread waits only while its debt
 * is under SQ_CONT_DEBT_NS. A wait that sees no batch for SQ_CONT_WAIT_NS
 * gives up and carves, and the thread does not wait again until it has
 * taken a batch. So waits cost a thread at most SQ_CONT_DEBT_NS plus
 * SQ_CONT_WAIT_PER_TASK_NS per task the workers finished meanwhile: a
 * fan-out waits a little while the workers keep up, and a thread whose
 * workers crawl (1 ms tasks: a batch every 30 ms) or stand still goes
 * on after 200 ms. Workers never wait (they run the backlog), nor does a
 * thread inside a task (a sync body, the main queue's task), which some
 * task may be waiting for.
 */
#define SQ_CONT_AHEAD (32u * 1024u)
#define SQ_CONT_WAIT_NS 50000000ull    /* 50 ms with no batch: a time-out */
#define SQ_CONT_WAIT_STEP_NS 20000l    /* 20 us (+ the timer slack) */
#define SQ_CONT_DEBT_NS 200000000ull   /* 200 ms */
#define SQ_CONT_WAIT_PER_TASK_NS 5000ull /* paid back per continuation */

static unsigned long _sq_cont_made; /* continuations carved so far */
static SQ_TLS uint64_t _sq_cont_debt;    /* ns waited, less paid back */
static SQ_TLS bool _sq_cont_stalled;     /* last wait timed out */

struct sq_cont_batch_s {
	sq_lifo_node_t link;     /* on _sq_cont_batches or _sq_cont_empties */
	unsigned count;
	struct sq_cont_s *conts[SQ_CONT_BATCH];
};

struct sq_cont_block_s {
	struct sq_cont_block_s *next; /* on _sq_cont_blocks */
	struct sq_cont_s conts[SQ_CONT_BLOCK];
};

static struct sq_cont_block_s *_sq_cont_blocks; /* every block made */
static SQ_TLS struct sq_cont_block_s *_sq_cont_carving; /* carving from */
static SQ_TLS unsigned _sq_cont_carved; /* of _sq_cont_carving's */

static sq_lifo_t _sq_cont_batches = SQ_LIFO_INIT; /* full batches */
static sq_lifo_t _sq_cont_empties = SQ_LIFO_INIT; /* their empty arrays */
static SQ_TLS struct sq_cont_s *_sq_cont_cache;
static SQ_TLS unsigned _sq_cont_cache_count;
static SQ_TLS struct sq_cont_batch_s *_sq_cont_taking;   /* allocating from */
static SQ_TLS struct sq_cont_batch_s *_sq_cont_outgoing; /* the next batch */

static inline void _sq_cont_cache_register(void);

static inline struct sq_cont_s *
_sq_cont_next(struct sq_cont_s *c)
{
	return (struct sq_cont_s *)c->job.link.next;
}

/* A continuation never used: the next one of this thread's block. */
static struct sq_cont_s *
_sq_cont_carve(void)
{
	struct sq_cont_block_s *b = _sq_cont_carving;
	if (b == NULL || _sq_cont_carved == SQ_CONT_BLOCK) {
		b = malloc(sizeof(*b));
		if (b == NULL)
			_sq_client_crash("sq_async_f", "out of memory");
		/* Release: a thread that walks the list sees the link. */
		b->next = __atomic_load_n(&_sq_cont_blocks, __ATOMIC_RELAXED);
		while (!__atomic_compare_exchange_n(&_sq_cont_blocks, &b->next,
				b, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
		}
		_sq_cont_carving = b;
		_sq_cont_carved = 0;
		/* Relaxed: a threshold, nothing read through it. */
		__atomic_add_fetch(&_sq_cont_made, SQ_CONT_BLOCK,
				__ATOMIC_RELAXED);
	}
	struct sq_cont_s *c = &b->conts[_sq_cont_carved++];
	c->job.trace_flow = 0;
	return c;
}

/* Whether this thread, about to carve, waits for a batch instead. */
static inline bool
_sq_cont_should_wait(void)
{
	if (_sq_cont_carving != NULL && _sq_cont_carved < SQ_CONT_BLOCK)
		return false; /* the block being carved is paid for */
	return __atomic_load_n(&_sq_cont_made, __ATOMIC_RELAXED) >=
			SQ_CONT_AHEAD && _sq_self == NULL &&
			_sq_current_frame == NULL && !_sq_cont_stalled &&
			_sq_cont_debt < SQ_CONT_DEBT_NS;
}

/* A batch the workers gave back: they moved, which pays back some of the
 * time this thread waited. */
static inline void
_sq_cont_paid(const struct sq_cont_batch_s *b)
{
	uint64_t paid = (uint64_t)b->count * SQ_CONT_WAIT_PER_TASK_NS;
	_sq_cont_debt = _sq_cont_debt > paid ? _sq_cont_debt - paid : 0;
	_sq_cont_stalled = false;
}

/* Sleeps until a batch is on the shared stack and takes it, or gives up
 * after SQ_CONT_WAIT_NS with none (NULL). */
static SQ_NOINLINE struct sq_cont_batch_s *
_sq_cont_wait_batch(void)
{
	uint64_t start = _sq_monotonic_ns();
	for (;;) {
		struct timespec step = { 0, SQ_CONT_WAIT_STEP_NS };
		nanosleep(&step, NULL);
		struct sq_cont_batch_s *b = sq_lifo_pop(&_sq_cont_batches, 0);
		uint64_t waited = _sq_monotonic_ns() - start;
		if (b != NULL) {
			_sq_cont_debt += waited;
			_sq_cont_paid(b);
			return b;
		}
		if (waited >= SQ_CONT_WAIT_NS) {
			_sq_cont_stalled = true;
			_sq_cont_debt += waited;
			return NULL;
		}
	}
}

static SQ_NOINLINE struct sq_cont_s *
_sq_cont_alloc_batch(void)
{
	struct sq_cont_batch_s *b = _sq_cont_taking;
	if (b == NULL || b->count == 0) {
		if (b != NULL)
			sq_lifo_push(&_sq_cont_empties, b, 0);
		/* Our own batch in the making (never empty), before anyone
		 * else's. */
		b = _sq_cont_outgoing;
		if (b != NULL)
			_sq_cont_outgoing = NULL;
		else if ((b = sq_lifo_pop(&_sq_cont_batches, 0)) != NULL)
			_sq_cont_paid(b); /* the workers move */
		else if (_sq_cont_should_wait())
			b = _sq_cont_wait_batch();
		_sq_cont_taking = b;
		if (b == NULL)
			return _sq_cont_carve();
		for (unsigned i = 1; i <= SQ_CONT_PREFETCH && i <= b->count; i++)
			__builtin_prefetch(b->conts[b->count - i], 1, 3);
	}
	unsigned n = --b->count;
	if (n >= SQ_CONT_PREFETCH)
		__builtin_prefetch(b->conts[n - SQ_CONT_PREFETCH], 1, 3);
	return b->conts[n];
}

struct sq_cont_s *
_sq_cont_alloc(void)
{
	_sq_cont_cache_register(); /* so the cache is freed at thread exit */
	struct sq_cont_s *c = _sq_cont_cache;
	if (SQ_UNLIKELY(c == NULL))
		return _sq_cont_alloc_batch();
	_sq_cont_cache = _sq_cont_next(c);
	_sq_cont_cache_count--;
	return c;
}

static SQ_NOINLINE void
_sq_cont_free_batch(struct sq_cont_s *c)
{
	struct sq_cont_batch_s *b = _sq_cont_outgoing;
	if (SQ_UNLIKELY(b == NULL)) {
		b = sq_lifo_pop(&_sq_cont_empties, 0);
		if (b == NULL) {
			b = malloc(sizeof(*b));
			if (b == NULL) {
				/* No array for a batch: this thread keeps the
				 * continuation, over its cache's limit. */
				c->job.link.next =
						(struct cds_wfcq_node *)_sq_cont_cache;
				_sq_cont_cache = c;
				_sq_cont_cache_count++;
				return;
			}
		}
		b->count = 0;
		_sq_cont_outgoing = b;
	}
	b->conts[b->count++] = c;
	if (b->count == SQ_CONT_BATCH) {
		sq_lifo_push(&_sq_cont_batches, b, 0);
		_sq_cont_outgoing = NULL;
	}
}

void
_sq_cont_free(struct sq_cont_s *c)
{
	_sq_cont_cache_register(); /* so the cache is freed at thread exit */
	if (SQ_LIKELY(_sq_cont_cache_count < SQ_CONT_CACHE_LIMIT)) {
		c->job.link.next = (struct cds_wfcq_node *)_sq_cont_cache;
		_sq_cont_cache = c;
		_sq_cont_cache_count++;
		return;
	}
	_sq_cont_free_batch(c);
}

/* ---- Notifications --------------------------------------------------------
 *
 * A group's or a work item's pending notification is smaller than a
 * continuation and lives about as long as a task: fork-join code registers
 * one per node, so it comes from the same cache instead of malloc. */
_Static_assert(sizeof(struct sq_notify_s) <= sizeof(struct sq_cont_s),
		"a notification must fit in a continuation's memory");
_Static_assert(_Alignof(struct sq_notify_s) <= _Alignof(struct sq_cont_s),
		"a notification must be aligned as a continuation");

struct sq_notify_s *
_sq_notify_alloc(void)
{
	return (struct sq_notify_s *)(void *)_sq_cont_alloc();
}

void
_sq_notify_free(struct sq_notify_s *n)
{
	_sq_cont_free((struct sq_cont_s *)(void *)n);
}

/* Thread exit: the thread's continuations go to the shared batches, where
 * other threads take them (they live in blocks: never freed one by one). */
static pthread_key_t _sq_cont_cache_key;
static sq_once_t _sq_cont_cache_key_once;

static void
_sq_cont_cache_destroy(void *unused)
{
	/* The rest of the block being carved joins the cache. */
	while (_sq_cont_carving != NULL && _sq_cont_carved < SQ_CONT_BLOCK) {
		struct sq_cont_s *c = _sq_cont_carve();
		c->job.link.next = (struct cds_wfcq_node *)_sq_cont_cache;
		_sq_cont_cache = c;
	}
	_sq_cont_carving = NULL;
	/* The batch being taken from goes on as it is. */
	struct sq_cont_batch_s *b = _sq_cont_taking;
	_sq_cont_taking = NULL;
	if (b != NULL && b->count > 0)
		sq_lifo_push(&_sq_cont_batches, b, 0);
	else if (b != NULL)
		sq_lifo_push(&_sq_cont_empties, b, 0);
	/* The cache, as batches (with the one being filled). If no array for
	 * a batch can be had, the rest stay unused in their blocks. */
	b = _sq_cont_outgoing;
	_sq_cont_outgoing = NULL;
	struct sq_cont_s *c = _sq_cont_cache;
	_sq_cont_cache = NULL;
	_sq_cont_cache_count = 0;
	while (c != NULL) {
		if (b == NULL) {
			b = sq_lifo_pop(&_sq_cont_empties, 0);
			if (b == NULL && (b = malloc(sizeof(*b))) == NULL)
				return;
			b->count = 0;
		}
		struct sq_cont_s *next = _sq_cont_next(c);
		b->conts[b->count++] = c;
		if (b->count == SQ_CONT_BATCH) {
			sq_lifo_push(&_sq_cont_batches, b, 0);
			b = NULL;
		}
		c = next;
	}
	if (b != NULL && b->count > 0)
		sq_lifo_push(&_sq_cont_batches, b, 0);
	else if (b != NULL)
		sq_lifo_push(&_sq_cont_empties, b, 0);
}

static void
_sq_cont_cache_key_create(void *unused)
{
	pthread_key_create(&_sq_cont_cache_key, _sq_cont_cache_destroy);
}

static inline void
_sq_cont_cache_register(void)
{
	/* Registers the destructor for this thread once; the value only
	 * needs to be non-NULL. */
	static SQ_TLS bool registered;
	if (SQ_UNLIKELY(!registered)) {
		registered = true;
		sq_once_f(&_sq_cont_cache_key_once, NULL,
				_sq_cont_cache_key_create);
		pthread_setspecific(_sq_cont_cache_key, (void *)1);
	}
}
