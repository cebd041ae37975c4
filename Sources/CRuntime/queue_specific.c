/*
 * SwiftQueues — queue-specific data: sq_queue_set_specific,
 * sq_queue_get_specific and sq_get_specific (which walks the current
 * queue's target chain). A queue frees its list when it is disposed of
 * (queue.c).
 *
 * A queue's specifics are guarded by one of a few locks that queues share
 * by address: a lock in each queue would cost every queue 4 bytes for a
 * call few programs make. Each lock has a cache line of its own.
 */
#include "queue_internal.h"

#include <stdlib.h>

#define SQ_SPECIFIC_LOCKS 16

static struct {
	sq_spinlock_t lock;
	char pad[SQ_CACHELINE - sizeof(sq_spinlock_t)];
} _sq_specific_locks[SQ_SPECIFIC_LOCKS];

static inline sq_spinlock_t *
_sq_specific_lock(struct sq_queue_s *q)
{
	uintptr_t a = (uintptr_t)q;
	return &_sq_specific_locks[((a >> 4) ^ (a >> 12)) %
			SQ_SPECIFIC_LOCKS].lock;
}

void
sq_queue_set_specific(sq_queue_t q, const void *key, void *ctx,
		sq_function_t destructor)
{
	_sq_queue_validate("sq_queue_set_specific", q);
	if (key == NULL)
		return;
	if (_sq_object_is_immortal(q)) {
		/* Global and main queues keep no specifics: the value is not
		 * stored, so its destructor runs now (nothing leaks). */
		if (ctx != NULL && destructor != NULL)
			destructor(ctx);
		return;
	}

	struct sq_specific_s *fresh = NULL;
	if (ctx != NULL) {
		fresh = malloc(sizeof(*fresh));
		if (fresh == NULL)
			_sq_client_crash("sq_queue_set_specific",
					"out of memory");
		fresh->key = key;
		fresh->ctx = ctx;
		fresh->destructor = destructor;
	}

	sq_spinlock_lock(_sq_specific_lock(q));
	struct sq_specific_s **link = &q->specifics, *old = NULL;
	for (; *link; link = &(*link)->next) {
		if ((*link)->key == key) {
			old = *link;
			*link = old->next;
			break;
		}
	}
	if (fresh) {
		fresh->next = q->specifics;
		q->specifics = fresh;
	}
	sq_spinlock_unlock(_sq_specific_lock(q));

	/* The old value's destructor runs outside the lock. */
	if (old) {
		if (old->destructor)
			old->destructor(old->ctx);
		free(old);
	}
}

void *
sq_queue_get_specific(sq_queue_t q, const void *key)
{
	_sq_queue_validate("sq_queue_get_specific", q);
	if (key == NULL || _sq_object_is_immortal(q))
		return NULL;
	void *ctx = NULL;
	sq_spinlock_lock(_sq_specific_lock(q));
	for (struct sq_specific_s *sp = q->specifics; sp; sp = sp->next) {
		if (sp->key == key) {
			ctx = sp->ctx;
			break;
		}
	}
	sq_spinlock_unlock(_sq_specific_lock(q));
	return ctx;
}

void *
sq_get_specific(const void *key)
{
	struct sq_frame_s *f = _sq_current_frame;
	if (f == NULL || key == NULL)
		return NULL;
	for (struct sq_queue_s *q = f->queue; !_sq_queue_is_root(q);
			q = _sq_queue_target(q)) {
		void *ctx = sq_queue_get_specific(q, key);
		if (ctx != NULL)
			return ctx;
		if (q->type == SQ_QUEUE_TYPE_MAIN)
			break;
	}
	return NULL;
}
