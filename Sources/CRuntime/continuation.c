/*
 * SwiftQueues — continuations: the 48-byte records that carry a submitted
 * function, its context and its queue until a worker runs them, allocated
 * from a per-thread cache so that a submission normally costs no malloc.
 * The queues (queue.c) take them with _sq_cont_alloc and give them back
 * with _sq_cont_free.
 */
#include "internal.h"
#include "queue_internal.h"

#include <pthread.h>
#include <stdlib.h>

/* ---- Continuation cache ------------------------------------------------
 *
 * A per-thread free list so sq_async_f normally costs no malloc. A
 * continuation goes back to the cache of the thread that frees it (a
 * worker), before its function runs, so the function's own submissions
 * reuse a hot cache line. Producer / consumer patterns would leave every
 * producer allocating and every worker freeing: a worker whose cache is
 * full hands a batch to a global lock-free stack, where a thread whose
 * cache is empty takes it, so memory circulates in batches instead of going
 * through malloc and free one continuation at a time. Past a full cache,
 * frees build the next batch on a second chain: handing it over is one
 * push. (Splitting a batch off the cache walked 128 links, each a cache
 * miss once the lines had gone cold: 0.3% of a worker's time in short
 * bursts.)
 */
#define SQ_CONT_CACHE_LIMIT 512
#define SQ_CONT_BATCH 128
/* A batch is a chain (job.link.next) of SQ_CONT_BATCH continuations; its
 * first one's `data` field is the link on the global stack. */
#define SQ_CONT_BATCH_LINK offsetof(struct sq_cont_s, data)

static sq_lifo_t _sq_cont_batches = SQ_LIFO_INIT;
static SQ_TLS struct sq_cont_s *_sq_cont_cache;
static SQ_TLS unsigned _sq_cont_cache_count;
static SQ_TLS struct sq_cont_s *_sq_cont_outgoing; /* the next batch */
static SQ_TLS unsigned _sq_cont_outgoing_count;

static inline void _sq_cont_cache_register(void);

static inline struct sq_cont_s *
_sq_cont_next(struct sq_cont_s *c)
{
	return (struct sq_cont_s *)c->job.link.next;
}

struct sq_cont_s *
_sq_cont_alloc(void)
{
	_sq_cont_cache_register(); /* so the cache is freed at thread exit */
	struct sq_cont_s *c = _sq_cont_cache;
	if (SQ_UNLIKELY(c == NULL) && _sq_cont_outgoing) {
		/* Our own batch in the making, before anyone else's. */
		c = _sq_cont_outgoing;
		_sq_cont_cache_count = _sq_cont_outgoing_count;
		_sq_cont_outgoing = NULL;
		_sq_cont_outgoing_count = 0;
	} else if (SQ_UNLIKELY(c == NULL)) {
		c = sq_lifo_pop(&_sq_cont_batches, SQ_CONT_BATCH_LINK);
		if (c == NULL) {
			c = malloc(sizeof(*c));
			if (c == NULL)
				_sq_client_crash("sq_async_f", "out of memory");
			c->job.trace_flow = 0;
			return c;
		}
		_sq_cont_cache_count = SQ_CONT_BATCH;
	}
	_sq_cont_cache = _sq_cont_next(c);
	_sq_cont_cache_count--;
	return c;
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
	/* Full: the batch in the making (its first link is NULL). */
	c->job.link.next = (struct cds_wfcq_node *)_sq_cont_outgoing;
	if (++_sq_cont_outgoing_count < SQ_CONT_BATCH) {
		_sq_cont_outgoing = c;
		return;
	}
	sq_lifo_push(&_sq_cont_batches, c, SQ_CONT_BATCH_LINK);
	_sq_cont_outgoing = NULL;
	_sq_cont_outgoing_count = 0;
}

/* Thread exit: give the cached continuations back to malloc (a key
 * destructor, registered by the first use of the cache on each thread). */
static pthread_key_t _sq_cont_cache_key;
static sq_once_t _sq_cont_cache_key_once;

static void
_sq_cont_cache_destroy(void *unused)
{
	struct sq_cont_s *lists[2] = { _sq_cont_cache, _sq_cont_outgoing };
	for (int i = 0; i < 2; i++) {
		struct sq_cont_s *c = lists[i];
		while (c) {
			struct sq_cont_s *next = _sq_cont_next(c);
			free(c);
			c = next;
		}
	}
	_sq_cont_cache = NULL;
	_sq_cont_cache_count = 0;
	_sq_cont_outgoing = NULL;
	_sq_cont_outgoing_count = 0;
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
