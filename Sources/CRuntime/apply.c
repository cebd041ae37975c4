/*
 * SwiftQueues — sq_apply_f and sq_apply_range_f.
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
 *
 * sq_apply_f hands out fixed chunks of about iterations / (width * 64).
 * sq_apply_range_f calls its function once per chunk, so a chunk costs one
 * call whatever its size, and it sizes the chunks while it runs: each
 * participant times its chunks and aims the next at SQ_APPLY_RANGE_NS of
 * work (cheap bodies get large chunks, costly ones small chunks that
 * balance), and no chunk takes more than 1 / (participants * 4) of what is
 * left (guided self-scheduling), so the last chunks are small whatever the
 * body costs and the participants finish close together.
 */
#include "queue_internal.h"
#include "trace_internal.h"

#include <stdlib.h>

/* The work a range chunk aims at: long enough that claiming and timing it
 * (tens of ns) are noise, short enough to balance uneven bodies. */
#define SQ_APPLY_RANGE_NS 50000u
/* A chunk takes at most 1 / (participants * this) of what is left. */
#define SQ_APPLY_RANGE_SLICES 4u
/* How much a participant's next chunk may grow over its last one: a tiny
 * chunk's time is near the clock's resolution (even 0), which must not
 * make the next one huge. */
#define SQ_APPLY_RANGE_GROWTH 64u

struct sq_apply_s {
	size_t iterations;
	size_t chunk;             /* sq_apply_f: iterations per claim */
	size_t participants;      /* the caller and its helpers */
	sq_apply_function_t function;             /* sq_apply_f, or NULL */
	sq_apply_range_function_t range_function; /* sq_apply_range_f */
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

/* Counts `n` finished iterations; the last of them wakes the caller. */
static inline void
_sq_apply_finish(struct sq_apply_s *a, size_t n)
{
	/* Release: the caller's acquire of `finished` sees every iteration's
	 * writes. */
	if (__atomic_add_fetch(&a->done, n, __ATOMIC_ACQ_REL) == a->iterations) {
		SQ_TRACE_RELEASE(SQ_WAIT_APPLY, NULL, a);
		__atomic_store_n(&a->finished, 1, __ATOMIC_RELEASE);
		_sq_futex_wake(&a->finished, 1);
	}
}

/* sq_apply_f's chunks: a fixed size, one function call per index. */
static void
_sq_apply_work_indices(struct sq_apply_s *a)
{
	for (;;) {
		size_t i = __atomic_fetch_add(&a->next, a->chunk,
				__ATOMIC_RELAXED);
		if (i >= a->iterations)
			break;
		size_t end = a->iterations - i < a->chunk ? a->iterations
				: i + a->chunk;
		for (size_t k = i; k < end; k++)
			a->function(a->ctx, k);
		_sq_apply_finish(a, end - i);
	}
}

/* Claims up to `want` iterations from the shared index; returns how many
 * (0: none left) and where they begin. Relaxed: the index only shares the
 * iterations out; `done` and `finished` order their effects. */
static size_t
_sq_apply_claim(struct sq_apply_s *a, size_t want, size_t *begin)
{
	size_t i = __atomic_load_n(&a->next, __ATOMIC_RELAXED);
	for (;;) {
		if (i >= a->iterations)
			return 0;
		size_t cap = (a->iterations - i) /
				(a->participants * SQ_APPLY_RANGE_SLICES);
		size_t n = want < cap ? want : cap;
		if (n == 0)
			n = 1;
		if (__atomic_compare_exchange_n(&a->next, &i, i + n, true,
				__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			*begin = i;
			return n;
		}
	}
}

/* sq_apply_range_f's chunks: sized from this thread's own timing of the
 * last one (see the top of the file), one function call each. */
static void
_sq_apply_work_ranges(struct sq_apply_s *a)
{
	size_t want = 1, begin, n;
	while ((n = _sq_apply_claim(a, want, &begin)) != 0) {
		uint64_t t0 = _sq_monotonic_ns();
		a->range_function(a->ctx, begin, begin + n);
		uint64_t ns = _sq_monotonic_ns() - t0;
		_sq_apply_finish(a, n);
		/* n iterations took ns: aim the next chunk at the target (in
		 * double: no overflow however large n is). */
		double most = (double)n * SQ_APPLY_RANGE_GROWTH;
		double next = ns == 0 ? most
				: (double)n * SQ_APPLY_RANGE_NS / (double)ns;
		if (next > most)
			next = most;
		want = next < 1 ? 1 : next >= (double)SIZE_MAX ? SIZE_MAX
				: (size_t)next;
	}
}

/* Runs chunks until none are left. */
static void
_sq_apply_work(struct sq_apply_s *a)
{
	struct sq_frame_s frame;
	_sq_frame_push(&frame, a->queue, false);
	_sq_apply_depth++;
	if (a->function != NULL)
		_sq_apply_work_indices(a);
	else
		_sq_apply_work_ranges(a);
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

/* One call of sq_apply_f or sq_apply_range_f, as the caller made it. */
struct sq_apply_call_s {
	const char *name; /* for messages */
	size_t iterations;
	struct sq_queue_s *queue;
	void *ctx;
	sq_apply_function_t function;             /* or NULL: */
	sq_apply_range_function_t range_function;
};

/* Every iteration on this thread, in order. */
static void
_sq_apply_here(struct sq_apply_call_s *c)
{
	if (c->function == NULL) {
		c->range_function(c->ctx, 0, c->iterations);
		return;
	}
	for (size_t i = 0; i < c->iterations; i++)
		c->function(c->ctx, i);
}

/* The sync task of an apply on a serial queue. */
static void
_sq_apply_serial(void *arg)
{
	_sq_apply_here(arg);
}

SQ_INTERNAL void _sq_sync_for_apply(const char *call, struct sq_queue_s *q,
		void *ctx, sq_function_t func);

/* The iterations shared out on `queue`'s workers (and this thread). */
static void
_sq_apply_parallel(struct sq_apply_call_s *c)
{
	int width = _sq_pool_width();
	/* Nested inside another apply, or too small to share: run here. */
	if (_sq_apply_depth > 0 || c->iterations == 1 || width == 1) {
		struct sq_frame_s frame;
		_sq_frame_push(&frame, c->queue, false);
		_sq_apply_depth++;
		_sq_apply_here(c);
		_sq_apply_depth--;
		_sq_frame_pop(&frame);
		return;
	}

	struct sq_apply_s *a = malloc(sizeof(*a));
	if (a == NULL)
		_sq_client_crash(c->name, "out of memory");
	size_t helpers = (size_t)width - 1;
	if (helpers > c->iterations - 1)
		helpers = c->iterations - 1;
	/* Chunks small enough to balance, large enough that the shared
	 * index is not the bottleneck. */
	size_t chunk = c->iterations / ((size_t)width * 64);
	a->iterations = c->iterations;
	a->chunk = chunk < 1 ? 1 : (chunk > 4096 ? 4096 : chunk);
	a->participants = helpers + 1;
	a->function = c->function;
	a->range_function = c->range_function;
	a->ctx = c->ctx;
	a->queue = c->queue;
	a->next = 0;
	a->done = 0;
	a->finished = 0;
	a->refs = (int32_t)helpers + 1;

	struct sq_queue_s *root = _sq_queue_root_of(c->queue);
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
	_sq_apply_parallel(arg);
}

/* Both forms once the arguments are checked. */
static void
_sq_apply(struct sq_apply_call_s *c)
{
	if (c->queue == SQ_APPLY_AUTO)
		c->queue = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	_sq_object_validate(c->name, c->queue);
	if (c->iterations == 0)
		return;

	/* A serial queue anywhere up the chain serialises the iterations:
	 * run them as one sync task (with its deadlock detection). */
	for (struct sq_queue_s *x = c->queue; !_sq_queue_is_root(x);
			x = __atomic_load_n(&x->obj.target, __ATOMIC_ACQUIRE)) {
		if (_sq_queue_is_serial(x)) {
			_sq_sync_for_apply(c->name, c->queue, c,
					_sq_apply_serial);
			return;
		}
	}
	/* A concurrent queue: one sync task holds it for every iteration
	 * (unless this thread runs its work already: an apply nested in one
	 * of its iterations or tasks). */
	if (!_sq_queue_is_root(c->queue) && !_sq_apply_holds(c->queue)) {
		_sq_sync_for_apply(c->name, c->queue, c, _sq_apply_in_sync);
		return;
	}
	_sq_apply_parallel(c);
}

void
sq_apply_f(size_t iterations, sq_queue_t queue, void *ctx,
		sq_apply_function_t function)
{
	_SQ_REQUIRE_FUNCTION("sq_apply_f", function);
	struct sq_apply_call_s c = { "sq_apply_f", iterations, queue, ctx,
			function, NULL };
	_sq_apply(&c);
}

void
sq_apply_range_f(size_t iterations, sq_queue_t queue, void *ctx,
		sq_apply_range_function_t function)
{
	_SQ_REQUIRE_FUNCTION("sq_apply_range_f", function);
	struct sq_apply_call_s c = { "sq_apply_range_f", iterations, queue,
			ctx, NULL, function };
	_sq_apply(&c);
}
