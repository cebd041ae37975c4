/*
 * SwiftQueues — sq_apply_f.
 *
 * Iterations are handed out in chunks from one atomic index. The calling
 * thread takes part, and up to (pool width - 1) helper jobs join it from the
 * pool: if every worker is busy the caller simply does all the work itself,
 * so apply never waits for a free worker. The shared state lives on the
 * heap with a reference per participant, because a helper may start after
 * the caller has already returned.
 *
 * The iterations are the queue's work. On a serial queue (or one with a
 * serial queue up its chain) they run one after the other as one sync
 * task. On a concurrent queue they run inside one sync task too, which
 * the caller holds until the last iteration is done: so they start after a
 * barrier queued before the apply, a barrier queued during it waits for
 * them, and a suspended queue holds them back (libdispatch's apply also
 * runs as a sync on any queue but a global one).
 */
#include "queue_internal.h"
#include "trace_internal.h"

#include <stdlib.h>

struct sq_apply_s {
	size_t iterations;
	size_t chunk;
	sq_apply_function_t function;
	void *ctx;
	struct sq_queue_s *queue; /* the current queue inside the iterations */
	size_t next;              /* the next iteration to hand out */
	size_t done;              /* iterations finished */
	uint32_t finished;        /* futex word: 1 once done == iterations */
	int32_t refs;
};

static void
_sq_apply_release(struct sq_apply_s *a)
{
	if (__atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(a);
}

/* Runs chunks until none are left. */
static void
_sq_apply_work(struct sq_apply_s *a)
{
	struct sq_frame_s frame;
	_sq_frame_push(&frame, a->queue, false);
	_sq_apply_depth++;
	for (;;) {
		size_t i = __atomic_fetch_add(&a->next, a->chunk,
				__ATOMIC_RELAXED);
		if (i >= a->iterations)
			break;
		size_t end = a->iterations - i < a->chunk ? a->iterations
				: i + a->chunk;
		for (size_t k = i; k < end; k++)
			a->function(a->ctx, k);
		/* Release: the caller's acquire of `finished` sees every
		 * iteration's writes. */
		if (__atomic_add_fetch(&a->done, end - i, __ATOMIC_ACQ_REL)
				== a->iterations) {
			SQ_TRACE_RELEASE(SQ_WAIT_APPLY, NULL, a);
			__atomic_store_n(&a->finished, 1, __ATOMIC_RELEASE);
			_sq_futex_wake(&a->finished, 1);
		}
	}
	_sq_apply_depth--;
	_sq_frame_pop(&frame);
}

static void
_sq_apply_helper(void *ctx)
{
	struct sq_apply_s *a = ctx;
	_sq_apply_work(a);
	_sq_apply_release(a);
}

struct sq_apply_serial_s {
	size_t iterations;
	sq_apply_function_t function;
	void *ctx;
};

static void
_sq_apply_serial(void *ctx)
{
	struct sq_apply_serial_s *s = ctx;
	for (size_t i = 0; i < s->iterations; i++)
		s->function(s->ctx, i);
}

SQ_INTERNAL void _sq_sync_for_apply(struct sq_queue_s *q, void *ctx,
		sq_function_t func);

/* The iterations shared out on `queue`'s workers (and this thread). */
static void
_sq_apply_parallel(size_t iterations, struct sq_queue_s *queue, void *ctx,
		sq_apply_function_t function)
{
	int width = _sq_pool_width();
	/* Nested inside another apply, or too small to share: run here. */
	if (_sq_apply_depth > 0 || iterations == 1 || width == 1) {
		struct sq_frame_s frame;
		_sq_frame_push(&frame, queue, false);
		_sq_apply_depth++;
		for (size_t i = 0; i < iterations; i++)
			function(ctx, i);
		_sq_apply_depth--;
		_sq_frame_pop(&frame);
		return;
	}

	struct sq_apply_s *a = malloc(sizeof(*a));
	if (a == NULL)
		_sq_client_crash("sq_apply_f", "out of memory");
	size_t helpers = (size_t)width - 1;
	if (helpers > iterations - 1)
		helpers = iterations - 1;
	/* Chunks small enough to balance, large enough that the shared
	 * index is not the bottleneck. */
	size_t chunk = iterations / ((size_t)width * 64);
	a->iterations = iterations;
	a->chunk = chunk < 1 ? 1 : (chunk > 4096 ? 4096 : chunk);
	a->function = function;
	a->ctx = ctx;
	a->queue = queue;
	a->next = 0;
	a->done = 0;
	a->finished = 0;
	a->refs = (int32_t)helpers + 1;

	struct sq_queue_s *root = _sq_queue_root_of(queue);
	for (size_t i = 0; i < helpers; i++)
		sq_async_f(root, a, _sq_apply_helper);

	_sq_apply_work(a);
	if (__atomic_load_n(&a->finished, __ATOMIC_ACQUIRE) == 0) {
		_sq_pool_block_begin(false);
		SQ_TRACE_WAIT_BEGIN(SQ_WAIT_APPLY, NULL, a);
		while (__atomic_load_n(&a->finished, __ATOMIC_ACQUIRE) == 0)
			_sq_futex_wait(&a->finished, 0, NULL);
		SQ_TRACE_WAIT_END(SQ_WAIT_APPLY, NULL, a);
		_sq_pool_block_end();
	}
	_sq_apply_release(a);
}

struct sq_apply_call_s {
	size_t iterations;
	struct sq_queue_s *queue;
	void *ctx;
	sq_apply_function_t function;
};

/* Whether the calling thread runs work of `q` (a frame for it). */
static bool
_sq_apply_holds(struct sq_queue_s *q)
{
	for (struct sq_frame_s *f = _sq_current_frame; f; f = f->prev)
		if (f->queue == q)
			return true;
	return false;
}

/* The sync task of an apply on a concurrent queue. */
static void
_sq_apply_in_sync(void *arg)
{
	struct sq_apply_call_s *c = arg;
	_sq_apply_parallel(c->iterations, c->queue, c->ctx, c->function);
}

void
sq_apply_f(size_t iterations, sq_queue_t queue, void *ctx,
		sq_apply_function_t function)
{
	_SQ_REQUIRE_FUNCTION("sq_apply_f", function);
	if (queue == SQ_APPLY_AUTO)
		queue = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	_sq_object_validate("sq_apply_f", queue);
	if (iterations == 0)
		return;

	/* A serial queue anywhere up the chain serialises the iterations:
	 * run them as one sync task (with its deadlock detection). */
	for (struct sq_queue_s *x = queue; !_sq_queue_is_root(x);
			x = __atomic_load_n(&x->obj.target, __ATOMIC_ACQUIRE)) {
		if (_sq_queue_is_serial(x)) {
			struct sq_apply_serial_s s = { iterations, function,
					ctx };
			_sq_sync_for_apply(queue, &s, _sq_apply_serial);
			return;
		}
	}
	/* A concurrent queue: one sync task holds it for every iteration
	 * (unless this thread runs its work already: an apply nested in one
	 * of its iterations or tasks). */
	if (!_sq_queue_is_root(queue) && !_sq_apply_holds(queue)) {
		struct sq_apply_call_s c = { iterations, queue, ctx, function };
		_sq_sync_for_apply(queue, &c, _sq_apply_in_sync);
		return;
	}
	_sq_apply_parallel(iterations, queue, ctx, function);
}
