/*
 * SwiftQueues — the object header every object starts with, and the
 * internal reference counting. Included through internal.h.
 */
#ifndef SWIFTQUEUES_OBJECT_INTERNAL_H
#define SWIFTQUEUES_OBJECT_INTERNAL_H

struct sq_object_s;
struct sq_queue_s;

/* What differs between object types. NULL hooks mean "not supported":
 * the public call is then ignored (suspend on a group, say). */
struct sq_vtable_s {
	const char *kind; /* "queue", "group", ... for messages */
	/* Frees the object; called once, after the finalizer (if any) ran. */
	void (*dispose)(struct sq_object_s *object);
	void (*suspend)(struct sq_object_s *object);
	void (*resume)(struct sq_object_s *object);
	void (*activate)(struct sq_object_s *object);
	void (*set_target)(struct sq_object_s *object, struct sq_queue_s *target);
	/* Called when the program drops its last reference (xref reaches 0),
	 * before the internal reference that xref held is dropped. */
	void (*last_external_release)(struct sq_object_s *object);
	/* Objects of this kind hold runtime threads or kernel registrations
	 * (sources, I/O channels): in a child process they are unusable
	 * (see fork.c). */
	bool fork_bound;
	/* Writes what is particular to this kind of object into buf, as
	 * snprintf does (returns the length it needed), for sq_debug and
	 * sq_object_describe (introspect.c); NULL: the header's fields only.
	 * Also tells the kinds apart for the snapshot. */
	size_t (*debug)(struct sq_object_s *object, char *buf, size_t size);
};

/*
 * Two counts, as in libdispatch: `xref` counts the program's references
 * (sq_retain / sq_release), `ref` the runtime's (pending work, a queue
 * enqueued on its target, ...) plus one for as long as xref > 0. Keeping
 * them apart lets an over-release be caught while the object is still alive,
 * and lets pending work keep a released queue alive.
 * xref sits past the first 16 bytes so it survives glibc's free-list link
 * and the poison written before free() can still catch a late release.
 */
struct sq_object_s {
	const struct sq_vtable_s *vtable;
	void *context;
	int32_t xref;
	int32_t ref;
	sq_function_t finalizer;
	struct sq_queue_s *target; /* retained; NULL for objects without one */
	char *label;               /* owned copy or NULL */
	/* Fork-bound kinds: the process generation that made it (fork.c);
	 * 0 for every other object. */
	uint32_t fork_gen;
	/* Queues, sources and channels: 1 + the object's index in the
	 * registry of live objects (introspect.c), 0 when not in it. Under
	 * the registry's lock. */
	uint32_t reg_slot;
};

/* This process's generation: 1, plus one in each child of fork(). Written
 * only by the child's atfork handler, while it is the only thread. */
SQ_INTERNAL extern uint32_t _sq_fork_generation;

/* Stops the process: a fork-bound object made before fork() used in the
 * child. */
SQ_INTERNAL SQ_NORETURN void
_sq_object_forked(const char *call, const void *object);

/* The registry of live queues, sources and I/O channels (introspect.c):
 * an object is added at the end of its creation and leaves when its last
 * internal reference goes (_sq_object_last_internal_release), before
 * anything of it is torn down. */
SQ_INTERNAL void _sq_introspect_register(struct sq_object_s *object);
SQ_INTERNAL void _sq_introspect_unregister(struct sq_object_s *object);

/* Immortal objects (global queues, the main queue) have this xref. */
#define SQ_REF_IMMORTAL INT32_MAX
/* Written into xref just before an object's memory is freed. */
#define SQ_REF_FREED (INT32_MIN / 2)

/* Allocates a zeroed object of `size` bytes with one reference of each kind. */
SQ_INTERNAL void *
_sq_object_alloc(const struct sq_vtable_s *vtable, size_t size);

/* Frees an object's memory (after poisoning xref) and its label. */
SQ_INTERNAL void
_sq_object_free(struct sq_object_s *object);

/* Whether the object ignores reference counting (global and main queues).
 * A relaxed atomic load: xref of other objects changes concurrently. */
SQ_INLINE bool
_sq_object_is_immortal(const void *object)
{
	const struct sq_object_s *o = object;
	return __atomic_load_n(&o->xref, __ATOMIC_RELAXED) == SQ_REF_IMMORTAL;
}

/* Internal references: hold an object alive across asynchronous work. */
SQ_INLINE void
_sq_retain_internal(void *object)
{
	struct sq_object_s *o = object;
	if (_sq_object_is_immortal(o))
		return;
	__atomic_add_fetch(&o->ref, 1, __ATOMIC_RELAXED);
}

SQ_INTERNAL void
_sq_object_last_internal_release(struct sq_object_s *object);

SQ_INLINE void
_sq_release_internal(void *object)
{
	struct sq_object_s *o = object;
	if (_sq_object_is_immortal(o))
		return;
	/* Acq_rel: our writes to the object happen before its disposal, and
	 * the thread that reaches zero sees everyone's. (Not release plus an
	 * acquire fence: ThreadSanitizer does not model fences; on x86 both
	 * are the same locked instruction.) */
	int32_t n = __atomic_sub_fetch(&o->ref, 1, __ATOMIC_ACQ_REL);
	if (SQ_LIKELY(n > 0))
		return;
	_sq_object_last_internal_release(o);
}

/* The object's label for messages: "" when it has none. */
SQ_INLINE const char *
_sq_object_label(const void *object)
{
	const struct sq_object_s *o = object;
	return o->label ? o->label : "";
}

SQ_INTERNAL SQ_NORETURN void
_sq_object_invalid(const char *call, const void *object);

/* Whether `object` is fork-bound and was made before the last fork().
 * One compare: fork_gen 0 (not bound) wraps to UINT32_MAX and never
 * passes; an older generation than the process's does. */
SQ_INLINE bool
_sq_object_is_stale(const void *object)
{
	const struct sq_object_s *o = object;
	return o->fork_gen - 1u < _sq_fork_generation - 1u;
}

/* Stops the process unless `object` looks like a live SwiftQueues object. */
SQ_INLINE void
_sq_object_validate(const char *call, const void *object)
{
	const struct sq_object_s *o = object;
	if (SQ_UNLIKELY(o == NULL || __atomic_load_n(&o->xref,
			__ATOMIC_RELAXED) <= SQ_REF_FREED / 2))
		_sq_object_invalid(call, object);
	if (SQ_UNLIKELY(_sq_object_is_stale(o)))
		_sq_object_forked(call, object);
}

#endif /* SWIFTQUEUES_OBJECT_INTERNAL_H */
