/*
 * SwiftQueues — the object model: reference counts, context, finalizer,
 * and the dispatch of suspend / resume / activate / set_target to each type.
 */
#include "queue_internal.h"

#include <stdlib.h>
#include <string.h>

void *
_sq_object_alloc(const struct sq_vtable_s *vtable, size_t size)
{
	/* malloc + memset, not calloc: glibc's calloc skips the per-thread
	 * cache (tcache) and always takes the arena's path (and the free
	 * then merges the block back into the heap's top): a queue's create
	 * + release would spend most of its time in malloc. */
	struct sq_object_s *o = malloc(size);
	if (o == NULL)
		_sq_client_crash(vtable->kind, "out of memory");
	/* Hides the pointer's origin: gcc turns malloc + memset 0 back into
	 * calloc. */
	__asm__("" : "+r"(o));
	memset(o, 0, size);
	o->vtable = vtable;
	o->xref = 1;
	o->ref = 1;
	if (vtable->fork_bound)
		o->fork_gen = _sq_fork_generation;
	return o;
}

void
_sq_object_free(struct sq_object_s *object)
{
	free(object->label);
	/* Poison: a release that comes after this (an over-release) has a
	 * chance to read it instead of a plausible count. */
	__atomic_store_n(&object->xref, SQ_REF_FREED, __ATOMIC_RELAXED);
	free(object);
}

void
_sq_object_invalid(const char *call, const void *object)
{
	if (object == NULL)
		_sq_client_crash(call, "object is NULL");
	_sq_client_crash(call, "use of an object that was released and "
			"destroyed");
}

void
_sq_object_forked(const char *call, const void *object)
{
	const struct sq_object_s *o = object;
	_sq_client_crash(call, "%s '%s' was made before fork(): it cannot be "
			"used in the child", o->vtable->kind,
			_sq_object_label(o));
}

/* Public calls that act on the object need a reference of the program's
 * (a released source may still be alive, waiting for its cancellation). */
static inline void
_sq_object_require_reference(const char *call, struct sq_object_s *o)
{
	if (SQ_UNLIKELY(__atomic_load_n(&o->xref, __ATOMIC_RELAXED) <= 0))
		_sq_client_crash(call, "%s '%s' was already released",
				o->vtable->kind, _sq_object_label(o));
}

static void
_sq_object_finalize(void *object)
{
	struct sq_object_s *o = object;
	o->finalizer(o->context);
	o->vtable->dispose(o);
}

void
_sq_object_last_internal_release(struct sq_object_s *o)
{
	/* Out of the registry of live objects first: from here on no
	 * snapshot looks at it (introspect.c). */
	if (__atomic_load_n(&o->reg_slot, __ATOMIC_RELAXED) != 0)
		_sq_introspect_unregister(o);
	if (o->finalizer != NULL && o->context != NULL) {
		/* The finalizer runs on the object's target queue, after all of
		 * the object's own work (which held the references). The queue
		 * is still alive: the object holds it until dispose. */
		sq_queue_t target = o->target ? o->target
				: sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
		sq_async_f(target, o, _sq_object_finalize);
		return;
	}
	o->vtable->dispose(o);
}

void
sq_retain(sq_object_t object)
{
	/* A source or channel made before fork(), in the child: nothing to
	 * count (its memory stays), so a child may drop what it inherited. */
	if (SQ_UNLIKELY(object != NULL && _sq_object_is_stale(object)))
		return;
	_sq_object_validate("sq_retain", object);
	struct sq_object_s *o = object;
	if (_sq_object_is_immortal(o))
		return;
	int32_t old = __atomic_fetch_add(&o->xref, 1, __ATOMIC_RELAXED);
	if (SQ_UNLIKELY(old <= 0)) {
		_sq_client_crash("sq_retain", "%s '%s' was already released",
				o->vtable->kind, _sq_object_label(o));
	}
}

void
sq_release(sq_object_t object)
{
	/* A source or channel made before fork(), in the child: nothing to
	 * count (its memory stays), so a child may drop what it inherited. */
	if (SQ_UNLIKELY(object != NULL && _sq_object_is_stale(object)))
		return;
	_sq_object_validate("sq_release", object);
	struct sq_object_s *o = object;
	if (_sq_object_is_immortal(o))
		return;
	/* Acq_rel, as for _sq_release_internal. */
	int32_t n = __atomic_sub_fetch(&o->xref, 1, __ATOMIC_ACQ_REL);
	if (SQ_LIKELY(n > 0))
		return;
	if (SQ_UNLIKELY(n < 0)) {
		_sq_client_crash("sq_release", "over-release of %s '%s'",
				o->vtable->kind, _sq_object_label(o));
	}
	if (o->vtable->last_external_release)
		o->vtable->last_external_release(o);
	_sq_release_internal(o);
}

void *
sq_get_context(sq_object_t object)
{
	_sq_object_validate("sq_get_context", object);
	struct sq_object_s *o = object;
	return __atomic_load_n(&o->context, __ATOMIC_ACQUIRE);
}

void
sq_set_context(sq_object_t object, void *context)
{
	_sq_object_validate("sq_set_context", object);
	struct sq_object_s *o = object;
	if (_sq_object_is_immortal(o))
		return; /* global and main queues: ignored */
	__atomic_store_n(&o->context, context, __ATOMIC_RELEASE);
}

void
sq_set_finalizer_f(sq_object_t object, sq_function_t finalizer)
{
	_sq_object_validate("sq_set_finalizer_f", object);
	struct sq_object_s *o = object;
	if (_sq_object_is_immortal(o))
		return;
	__atomic_store_n(&o->finalizer, finalizer, __ATOMIC_RELEASE);
}

void
sq_suspend(sq_object_t object)
{
	_sq_object_validate("sq_suspend", object);
	struct sq_object_s *o = object;
	_sq_object_require_reference("sq_suspend", o);
	if (o->vtable->suspend) {
		/* Held across the call: a self-owned object (a source whose
		 * handler releases it) may drop the program's last reference
		 * on another thread while we are still inside. */
		_sq_retain_internal(o);
		o->vtable->suspend(o);
		_sq_release_internal(o);
	}
}

void
sq_resume(sq_object_t object)
{
	_sq_object_validate("sq_resume", object);
	struct sq_object_s *o = object;
	_sq_object_require_reference("sq_resume", o);
	if (o->vtable->resume) {
		/* Held across the call: a self-owned object (a source whose
		 * handler releases it) may drop the program's last reference
		 * on another thread while we are still inside. */
		_sq_retain_internal(o);
		o->vtable->resume(o);
		_sq_release_internal(o);
	}
}

void
sq_activate(sq_object_t object)
{
	_sq_object_validate("sq_activate", object);
	struct sq_object_s *o = object;
	_sq_object_require_reference("sq_activate", o);
	if (o->vtable->activate) {
		/* Held across the call: a self-owned object (a source whose
		 * handler releases it) may drop the program's last reference
		 * on another thread while we are still inside. */
		_sq_retain_internal(o);
		o->vtable->activate(o);
		_sq_release_internal(o);
	}
}

void
sq_set_target_queue(sq_object_t object, sq_queue_t queue)
{
	_sq_object_validate("sq_set_target_queue", object);
	struct sq_object_s *o = object;
	if (queue == NULL)
		queue = _sq_object_is_queue(o) ? _sq_queue_default_target(
				(struct sq_queue_s *)o) : sq_get_global_queue(
				SQ_QUEUE_PRIORITY_DEFAULT, 0);
	if (o->vtable->set_target)
		o->vtable->set_target(o, queue);
}
