/*
 * SwiftQueues — dispatch groups.
 *
 * All of a group's state is one 64-bit word:
 *
 *   63            32 31          30          29             0
 *   +--------------+------------+-----------+----------------+
 *   |  generation  | HAS_NOTIFS | HAS_WAIT. |     count      |
 *   +--------------+------------+-----------+----------------+
 *
 *   count       enters not yet balanced by a leave
 *   HAS_WAIT.   a thread may sleep in sq_group_wait: the leave that empties
 *               the group must wake it
 *   HAS_NOTIFS  the notify list is not empty
 *   generation  bumped by every leave that empties the group; waiters sleep
 *               on this 32-bit half, so a waiter whose group emptied and
 *               was entered again before it woke still sees the change
 *
 * The leave that takes count from 1 to 0 bumps the generation and clears
 * both flags in the same compare-and-swap, so exactly one thread handles
 * each emptying. enter and leave touch no lock; the notify list is guarded
 * by a spin lock that only notify registration and an emptying leave with
 * HAS_NOTIFS set take. Holding it across "count reaches 0, detach the list"
 * is what keeps a notification registered after the group emptied and was
 * entered again from firing early (the rdar://11445820 race).
 *
 * While count > 0 the group holds an internal reference on itself, so a
 * group released with work pending still wakes its waiters and notifies.
 *
 * Groups in the program's storage (sq_group_init). Fork-join code makes a
 * group per node, and a node's group lives exactly as long as the node's
 * task waits in it: the task's stack can hold it, with no allocation. Such
 * a group is the same object with another vtable, ended by
 * sq_group_destroy (never sq_release), which requires it empty. It does
 * without the self-reference: the program cannot drop it while members
 * are pending, so an enter from 0 and an emptying leave cost no atomic on
 * the reference count. What destroy must add is waiting for the runtime
 * to be out of the storage, since a waiter may see the group empty before
 * the emptying leave is done with it:
 *   - without notifications or sleepers, that leave's compare-and-swap is
 *     its last access: destroy's acquire load of the empty count orders it;
 *   - with sleepers it also wakes the futex: a system call on the address
 *     that reads no memory (a wake that reaches storage reused as another
 *     futex word is spurious, which every futex waiter tolerates);
 *   - with notifications it detaches the list under notify_lock: destroy
 *     waits until the lock is free, which waits the detach out;
 *   - a thread that slept in sq_group_wait reads the state after its wake:
 *     it holds an internal reference while it sleeps, and destroy waits
 *     until the count is back to the program's one.
 */
#include "queue_internal.h"
#include "trace_internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_COUNT_MASK 0x3fffffffull
#define GROUP_HAS_WAITERS (1ull << 30)
#define GROUP_HAS_NOTIFS (1ull << 31)
#define GROUP_GEN_ONE (1ull << 32)
#define GROUP_GEN_SHIFT 32

struct sq_group_s {
	struct sq_object_s object;
	uint64_t state;
	sq_spinlock_t notify_lock;
	struct sq_notify_s *notify_head;  /* FIFO, under notify_lock */
	struct sq_notify_s **notify_tail;
};

/* The generation half of the state word, whatever the byte order. */
static inline uint32_t *
_sq_group_gen_word(struct sq_group_s *g)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return (uint32_t *)(void *)&g->state;
#else
	return (uint32_t *)(void *)&g->state + 1;
#endif
}

static void
_sq_group_dispose(struct sq_object_s *object)
{
	struct sq_group_s *g = (struct sq_group_s *)object;
	/* Empty by construction: notifications are only registered while
	 * count > 0, and then the group holds itself alive. */
	_sq_notify_fire(g->notify_head);
	_sq_object_free(object);
}

/* sq_debug: the state word's fields. */
static size_t
_sq_group_debug(struct sq_object_s *object, char *buf, size_t size)
{
	struct sq_group_s *g = (struct sq_group_s *)object;
	uint64_t st = __atomic_load_n(&g->state, __ATOMIC_RELAXED);
	int n = snprintf(buf, size, "count = %llu, waiters = %d, "
			"notifications = %d, generation = %llu",
			(unsigned long long)(st & GROUP_COUNT_MASK),
			(st & GROUP_HAS_WAITERS) != 0,
			(st & GROUP_HAS_NOTIFS) != 0,
			(unsigned long long)(st >> GROUP_GEN_SHIFT));
	return n < 0 ? 0 : (size_t)n;
}

static const struct sq_vtable_s _sq_group_vtable = {
	.kind = "group",
	.dispose = _sq_group_dispose,
	.debug = _sq_group_debug,
};

sq_group_t
sq_group_create(void)
{
	struct sq_group_s *g = _sq_object_alloc(&_sq_group_vtable, sizeof(*g));
	g->notify_tail = &g->notify_head;
	return g;
}

/* ---- groups in the program's storage ------------------------------------- */

_Static_assert(sizeof(struct sq_group_s) <= sizeof(sq_group_storage_t),
		"sq_group_storage_t is too small for a group");
_Static_assert(_Alignof(struct sq_group_s) <= _Alignof(sq_group_storage_t),
		"sq_group_storage_t is not aligned enough for a group");

/* The program dropped its last reference with sq_release: its storage is
 * not ours to free. */
static void
_sq_group_storage_last_release(struct sq_object_s *object)
{
	(void)object;
	_sq_client_crash("sq_release", "the group lives in the program's "
			"storage (sq_group_init): end it with "
			"sq_group_destroy");
}

/* Reached only past the crash above (the internal count cannot reach zero
 * otherwise: destroy ends the program's reference without the count). The
 * storage stays the program's: nothing to free. */
static void
_sq_group_storage_dispose(struct sq_object_s *object)
{
	struct sq_group_s *g = (struct sq_group_s *)object;
	_sq_notify_fire(g->notify_head);
}

static const struct sq_vtable_s _sq_group_storage_vtable = {
	.kind = "group",
	.dispose = _sq_group_storage_dispose,
	.last_external_release = _sq_group_storage_last_release,
	.debug = _sq_group_debug,
};

sq_group_t
sq_group_init(sq_group_storage_t *storage)
{
	if (SQ_UNLIKELY(storage == NULL))
		_sq_client_crash("sq_group_init", "storage is NULL");
	struct sq_group_s *g = (struct sq_group_s *)(void *)storage;
	memset(g, 0, sizeof(*g));
	g->object.vtable = &_sq_group_storage_vtable;
	g->object.xref = 1;
	g->object.ref = 1;
	g->notify_tail = &g->notify_head;
	return g;
}

void
sq_group_destroy(sq_group_t group)
{
	_sq_object_validate("sq_group_destroy", group);
	struct sq_group_s *g = group;
	struct sq_object_s *o = &g->object;
	if (SQ_UNLIKELY(o->vtable != &_sq_group_storage_vtable)) {
		_sq_client_crash("sq_group_destroy", "the group was made by "
				"sq_group_create: release it with sq_release");
	}
	int32_t xref = __atomic_load_n(&o->xref, __ATOMIC_RELAXED);
	if (SQ_UNLIKELY(xref != 1)) {
		_sq_client_crash("sq_group_destroy", "the program still holds "
				"%d sq_retain of the group", xref - 1);
	}
	/* Acquire: the emptying leave's CAS (acq_rel) happens before what
	 * follows, the reuse of the storage included. */
	uint64_t st = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
	if (SQ_UNLIKELY((st & GROUP_COUNT_MASK) != 0)) {
		_sq_client_crash("sq_group_destroy", "the group is not empty "
				"(%llu member%s not done)%s",
				(unsigned long long)(st & GROUP_COUNT_MASK),
				(st & GROUP_COUNT_MASK) == 1 ? "" : "s",
				(st & GROUP_HAS_WAITERS) ?
				" and a thread waits on it" : "");
	}
	/* An emptying leave that detaches notifications takes the lock
	 * before its CAS, so with the group seen empty the lock is either
	 * still held by it or was dropped (release) for good. Acquire: an
	 * unlocked word orders that detach before us; a held one is waited
	 * out by taking the lock. Fork-join groups never notify: one load. */
	if (__atomic_load_n(&g->notify_lock._sq_state, __ATOMIC_ACQUIRE) != 0) {
		sq_spinlock_lock(&g->notify_lock);
		sq_spinlock_unlock(&g->notify_lock);
	}
	/* Until every thread woken in sq_group_wait dropped its internal
	 * reference, its last touch of the storage. Acquire: pairs with
	 * their acq_rel release. The window is a few instructions unless
	 * that thread was preempted in it: yield, do not spin. */
	while (__atomic_load_n(&o->ref, __ATOMIC_ACQUIRE) != 1)
		sched_yield();
	sq_function_t finalizer = __atomic_load_n(&o->finalizer,
			__ATOMIC_ACQUIRE);
	void *context = __atomic_load_n(&o->context, __ATOMIC_ACQUIRE);
	if (finalizer != NULL && context != NULL)
		finalizer(context);
	/* As _sq_object_free: a later use of the group is caught while the
	 * storage still holds these bytes. */
	__atomic_store_n(&o->ref, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&o->xref, SQ_REF_FREED, __ATOMIC_RELAXED);
}

/* Whether the group lives in the program's storage (sq_group_init). */
static inline bool
_sq_group_in_storage(const struct sq_group_s *g)
{
	return g->object.vtable == &_sq_group_storage_vtable;
}

static void
_sq_group_enter(struct sq_group_s *g)
{
	/* Relaxed: entering publishes nothing; the leaves carry the order. */
	uint64_t old = __atomic_fetch_add(&g->state, 1, __ATOMIC_RELAXED);
	uint64_t count = old & GROUP_COUNT_MASK;
	if (SQ_UNLIKELY(count == GROUP_COUNT_MASK)) {
		_sq_client_crash("sq_group_enter", "too many enters "
				"(count overflow)");
	}
	/* 0 -> 1: the group keeps itself alive until it is empty again.
	 * The caller holds a reference, so the object cannot go away
	 * between the add and this retain. (Not a group in the program's
	 * storage: it cannot go away while not empty.) */
	if (count == 0 && !_sq_group_in_storage(g))
		_sq_retain_internal(g);
}

void
sq_group_enter(sq_group_t group)
{
	_sq_object_validate("sq_group_enter", group);
	_sq_group_enter(group);
}

/*
 * The notifications of an emptying leave. A single one for a global queue,
 * fired by a job on a worker, goes to that worker's next-job slot: it runs
 * on this thread as soon as the job returns, warm, with no wake-up (the
 * slot's guard hands it to another worker if the job goes on for long).
 * That is a fork-join tree's continuation: the member that finishes last
 * runs what waited for the group, depth first, where a shared queue would
 * put it behind the tree's whole frontier.
 */
static void
_sq_group_fire(struct sq_notify_s *list)
{
	if (list != NULL && list->next == NULL && _sq_pool_can_hand_off()) {
		struct sq_queue_s *q = list->queue;
		/* Not an overcommit root: its job gets a worker of its own. */
		if (_sq_queue_is_root(q) &&
				q == &_sq_root_queues[q->root_index]) {
			SQ_TRACE_SUBMIT_KIND(SQ_SUBMIT_NOTIFY);
			_sq_root_async_next_f(q->root_index, list->context,
					list->function);
			SQ_TRACE_SUBMIT_KIND(0);
			_sq_notify_free(list);
			_sq_release_internal(q);
			return;
		}
	}
	_sq_notify_fire(list);
}

void
_sq_group_leave(struct sq_group_s *g)
{
	struct sq_notify_s *list = NULL;
	bool locked = false;
	/* Read now: past the emptying CAS, a group in the program's storage
	 * may be gone (see the top of the file). */
	bool in_storage = _sq_group_in_storage(g);
	/* Relaxed: a first guess for the CAS loop. */
	uint64_t old = __atomic_load_n(&g->state, __ATOMIC_RELAXED);
	uint64_t new;
	for (;;) {
		uint64_t count = old & GROUP_COUNT_MASK;
		if (SQ_UNLIKELY(count == 0)) {
			if (locked)
				sq_spinlock_unlock(&g->notify_lock);
			/* Groups have no label to name. */
			_sq_client_crash("sq_group_leave", "unbalanced leave: "
					"group left more times than entered");
		}
		if (count > 1) {
			new = old - 1;
		} else if ((old & GROUP_HAS_NOTIFS) && !locked) {
			/* Emptying with notifications: detach the list in
			 * the same critical section as the transition. */
			sq_spinlock_lock(&g->notify_lock);
			locked = true;
			/* Relaxed: a fresh guess; the CAS decides. */
			old = __atomic_load_n(&g->state, __ATOMIC_RELAXED);
			continue;
		} else {
			new = (old - 1 + GROUP_GEN_ONE) &
					~(GROUP_HAS_WAITERS | GROUP_HAS_NOTIFS);
		}
		/* Acq_rel: release publishes this member's work; the acquire
		 * half lets the emptying leave (which fires notifications)
		 * see every earlier member's work through the chain of
		 * read-modify-writes on the state word. */
		if (__atomic_compare_exchange_n(&g->state, &old, new, true,
				__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			break;
	}
	if ((old & GROUP_COUNT_MASK) != 1) {
		if (locked)
			sq_spinlock_unlock(&g->notify_lock);
		return;
	}
	if (locked) {
		/* HAS_NOTIFS cannot be cleared by anyone else while we hold
		 * the lock: only an emptying leave clears it, and it would
		 * need the lock too. */
		list = g->notify_head;
		g->notify_head = NULL;
		g->notify_tail = &g->notify_head;
		sq_spinlock_unlock(&g->notify_lock);
	}
	/* Notifications are submitted before waiters wake, as libdispatch
	 * does: a waiter that returns finds them on their queues already. */
	_sq_group_fire(list);
	if (old & GROUP_HAS_WAITERS) {
		SQ_TRACE_RELEASE(SQ_WAIT_GROUP, NULL, g);
		_sq_futex_wake(_sq_group_gen_word(g), INT_MAX);
	}
	/* Last: drop the reference taken when the group became non-empty. */
	if (!in_storage)
		_sq_release_internal(g);
}

void
sq_group_leave(sq_group_t group)
{
	_sq_object_validate("sq_group_leave", group);
	_sq_group_leave(group);
}

/* A continuation that is a member of the group (sq_group_async_f). */
static bool
_sq_group_is_member(const struct sq_cont_s *c, void *group)
{
	return (c->job.flags & SQ_CONT_GROUP) && c->data == group;
}

static bool
_sq_group_is_empty(void *group)
{
	struct sq_group_s *g = group;
	/* Acquire: as sq_group_wait's look. */
	return (__atomic_load_n(&g->state, __ATOMIC_ACQUIRE) &
			GROUP_COUNT_MASK) == 0;
}

intptr_t
sq_group_wait(sq_group_t group, sq_time_t timeout)
{
	_sq_object_validate("sq_group_wait", group);
	struct sq_group_s *g = group;
	/* Acquire: seeing the group empty means seeing its members' work. */
	uint64_t old = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
	/* A worker waiting for good runs the members its task queued on
	 * its own ring itself, depth first (pool_block.c, "Waiting helps"). */
	if ((old & GROUP_COUNT_MASK) != 0 && timeout == SQ_TIME_FOREVER &&
			_sq_pool_help(_sq_group_is_empty, _sq_group_is_member,
			g))
		old = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
	if ((old & GROUP_COUNT_MASK) == 0)
		return 0;
	if (timeout == SQ_TIME_NOW)
		return ETIMEDOUT;
	/* A sleeper touches the group after the emptying leave woke it: an
	 * internal reference, taken before it announces itself, makes
	 * sq_group_destroy wait for it (above). */
	_sq_retain_internal(g);
	for (;;) {
		if ((old & GROUP_COUNT_MASK) == 0) {
			_sq_release_internal(g);
			return 0;
		}
		if (old & GROUP_HAS_WAITERS)
			break;
		/* Announce a sleeper. Acquire (both ways): the value read
		 * may be the empty group we return on, as for the load. */
		if (__atomic_compare_exchange_n(&g->state, &old,
				old | GROUP_HAS_WAITERS, true,
				__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
			old |= GROUP_HAS_WAITERS;
			break;
		}
	}
	uint32_t gen = (uint32_t)(old >> GROUP_GEN_SHIFT);
	_sq_pool_block_begin(false);
	SQ_TRACE_WAIT_BEGIN(SQ_WAIT_GROUP, NULL, g);
	int result;
	for (;;) {
		int r = _sq_futex_wait_until(_sq_group_gen_word(g), gen,
				timeout);
		/* Acquire: pairs with the emptying leave's release. */
		uint64_t now = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
		if ((uint32_t)(now >> GROUP_GEN_SHIFT) != gen) {
			result = 0; /* emptied since we looked (maybe reused) */
			break;
		}
		if (r == ETIMEDOUT) {
			result = ETIMEDOUT;
			break;
		}
	}
	SQ_TRACE_WAIT_END(SQ_WAIT_GROUP, NULL, g);
	_sq_pool_block_end();
	_sq_release_internal(g);
	return result;
}

void
sq_group_notify_f(sq_group_t group, sq_queue_t queue, void *context,
		sq_function_t function)
{
	_sq_object_validate("sq_group_notify_f", group);
	_sq_object_validate("sq_group_notify_f", queue);
	_SQ_REQUIRE_FUNCTION("sq_group_notify_f", function);
	struct sq_group_s *g = group;

	struct sq_notify_s *n = _sq_notify_alloc();
	n->next = NULL;
	n->queue = queue;
	n->context = context;
	n->function = function;

	sq_spinlock_lock(&g->notify_lock);
	/* Acquire: if the group is empty, the notification must see the
	 * members' work (pairs with the emptying leave's release). */
	uint64_t old = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
	for (;;) {
		if ((old & GROUP_COUNT_MASK) == 0) {
			sq_spinlock_unlock(&g->notify_lock);
			_sq_notify_free(n);
			sq_async_f(queue, context, function);
			return;
		}
		if (old & GROUP_HAS_NOTIFS)
			break;
		/* Acquire (both ways), as for the load: on failure the
		 * value read may be the empty group we submit on. The lock
		 * orders the list itself. */
		if (__atomic_compare_exchange_n(&g->state, &old,
				old | GROUP_HAS_NOTIFS, true,
				__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
			break;
	}
	_sq_retain_internal(queue);
	*g->notify_tail = n;
	g->notify_tail = &n->next;
	sq_spinlock_unlock(&g->notify_lock);
}

void
sq_group_async_f(sq_group_t group, sq_queue_t queue, void *context,
		sq_function_t function)
{
	_sq_object_validate("sq_group_async_f", group);
	_sq_object_validate("sq_group_async_f", queue);
	_SQ_REQUIRE_FUNCTION("sq_group_async_f", function);
	/* The continuation itself carries the group and leaves it after the
	 * function ran: no wrapper allocation. The enter keeps the group
	 * alive until that leave, even if the program releases it. */
	_sq_group_enter(group);
	_sq_async_group(queue, context, function, group, false);
}

void
sq_group_spawn_f(sq_group_t group, sq_queue_t queue, void *context,
		sq_function_t function)
{
	_sq_object_validate("sq_group_spawn_f", group);
	_sq_object_validate("sq_group_spawn_f", queue);
	_SQ_REQUIRE_FUNCTION("sq_group_spawn_f", function);
	_sq_group_enter(group);
	_sq_async_group(queue, context, function, group, true);
}
