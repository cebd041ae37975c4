/*
 * SwiftQueues — work items: a function and its context as an object that
 * can be submitted, performed, cancelled, waited for and observed.
 *
 * All state is one 32-bit word, which is also the futex waiters sleep on:
 *
 *   STARTED    the function was claimed for running (set once, by whoever
 *              wins: a submission being drained or sq_workitem_perform)
 *   FINISHED   the function returned, or the item was cancelled before it
 *              started; set once, never cleared
 *   CANCELLED  sq_workitem_cancel was called
 *   WAITERS    a thread may sleep in sq_workitem_wait: wake it on FINISHED
 *   NOTIFS     the notify list is not empty
 *
 * Transitions (each one compare-and-swap or fetch-or):
 *   run:     none of STARTED, CANCELLED        -> |= STARTED
 *            after the function returned        -> |= FINISHED
 *   cancel:  not STARTED                       -> |= CANCELLED | FINISHED
 *            STARTED                            -> |= CANCELLED
 *   wait:    not FINISHED                      -> |= WAITERS
 *   notify:  not FINISHED (under notify_lock)  -> |= NOTIFS
 * So the function runs at most once, and never after a cancel that came
 * before it started. Whoever sets FINISHED wakes the waiters and, if NOTIFS
 * was set, takes the notify lock (which waits out a registration in
 * progress) and submits the notifications.
 *
 * The object header's context and finalizer belong to the program
 * (sq_set_context); the function's own context is kept apart.
 */
#include "queue_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define WI_STARTED 0x1u
#define WI_FINISHED 0x2u
#define WI_CANCELLED 0x4u
#define WI_WAITERS 0x8u
#define WI_NOTIFS 0x10u

#define WI_KNOWN_FLAGS SQ_WORKITEM_BARRIER

struct sq_workitem_s {
	struct sq_object_s object;
	uint32_t state;
	sq_workitem_flags_t flags;
	void *function_context;
	sq_function_t function;
	sq_spinlock_t notify_lock;
	struct sq_notify_s *notify_head; /* FIFO, under the lock */
	struct sq_notify_s **notify_tail;
};

static void
_sq_workitem_dispose(struct sq_object_s *object)
{
	struct sq_workitem_s *item = (struct sq_workitem_s *)object;
	/* An item destroyed before it ran or was cancelled can never run
	 * now: like libdispatch's blocks, it counts as done, and pending
	 * notifications are submitted rather than dropped. */
	_sq_notify_fire(item->notify_head);
	_sq_object_free(object);
}

/* sq_debug: where the item is in its life. */
static size_t
_sq_workitem_debug(struct sq_object_s *object, char *buf, size_t size)
{
	struct sq_workitem_s *item = (struct sq_workitem_s *)object;
	uint32_t st = __atomic_load_n(&item->state, __ATOMIC_RELAXED);
	int n = snprintf(buf, size, "started = %d, finished = %d, "
			"cancelled = %d, waiters = %d, notifications = %d, "
			"barrier = %d", (st & WI_STARTED) != 0,
			(st & WI_FINISHED) != 0, (st & WI_CANCELLED) != 0,
			(st & WI_WAITERS) != 0, (st & WI_NOTIFS) != 0,
			(item->flags & SQ_WORKITEM_BARRIER) != 0);
	return n < 0 ? 0 : (size_t)n;
}

static const struct sq_vtable_s _sq_workitem_vtable = {
	.kind = "work item",
	.dispose = _sq_workitem_dispose,
	.debug = _sq_workitem_debug,
};

sq_workitem_t
sq_workitem_create_f(sq_workitem_flags_t flags, void *context,
		sq_function_t function)
{
	_SQ_REQUIRE_FUNCTION("sq_workitem_create_f", function);
	if (SQ_UNLIKELY(flags & ~(sq_workitem_flags_t)WI_KNOWN_FLAGS)) {
		_sq_client_crash("sq_workitem_create_f", "unknown flags 0x%lx",
				flags & ~(sq_workitem_flags_t)WI_KNOWN_FLAGS);
	}
	struct sq_workitem_s *item = _sq_object_alloc(&_sq_workitem_vtable,
			sizeof(*item));
	item->flags = flags;
	item->function_context = context;
	item->function = function;
	item->notify_tail = &item->notify_head;
	return item;
}

/* Called once by whoever set FINISHED; `old` is the state before. */
static void
_sq_workitem_finished(struct sq_workitem_s *item, uint32_t old)
{
	if (old & WI_WAITERS)
		_sq_futex_wake(&item->state, INT_MAX);
	if (old & WI_NOTIFS) {
		/* The lock waits out a registration that set NOTIFS and is
		 * still appending; later ones see FINISHED and submit. */
		sq_spinlock_lock(&item->notify_lock);
		struct sq_notify_s *list = item->notify_head;
		item->notify_head = NULL;
		item->notify_tail = &item->notify_head;
		sq_spinlock_unlock(&item->notify_lock);
		_sq_notify_fire(list);
	}
}

/* Runs the function unless it started already or was cancelled. */
static void
_sq_workitem_run(struct sq_workitem_s *item)
{
	/* Relaxed: a first guess for the CAS loop. */
	uint32_t old = __atomic_load_n(&item->state, __ATOMIC_RELAXED);
	do {
		if (old & (WI_STARTED | WI_CANCELLED))
			return;
		/* Acquire: the claim orders the call after every state
		 * change before it (cheap on a CAS); the function and its
		 * context were published by whoever handed us the item. */
	} while (!__atomic_compare_exchange_n(&item->state, &old,
			old | WI_STARTED, true, __ATOMIC_ACQUIRE,
			__ATOMIC_RELAXED));

	item->function(item->function_context);

	/* Release: a waiter or notification that sees FINISHED sees what
	 * the function wrote. No acquire needed: the notify list is read
	 * under its lock, and waking needs no data. */
	old = __atomic_fetch_or(&item->state, WI_FINISHED, __ATOMIC_RELEASE);
	_sq_workitem_finished(item, old);
}

static void
_sq_workitem_invoke(void *context)
{
	struct sq_workitem_s *item = context;
	_sq_workitem_run(item);
	/* The submission's reference (taken in sq_async_workitem). */
	_sq_release_internal(item);
}

void
sq_async_workitem(sq_queue_t queue, sq_workitem_t item)
{
	_sq_object_validate("sq_async_workitem", queue);
	_sq_object_validate("sq_async_workitem", item);
	/* Relaxed: a hint; _sq_workitem_run decides for good. */
	uint32_t state = __atomic_load_n(&item->state, __ATOMIC_RELAXED);
	if (state & (WI_STARTED | WI_CANCELLED))
		return; /* ran, running or cancelled: nothing to do */
	_sq_retain_internal(item);
	if (item->flags & SQ_WORKITEM_BARRIER)
		sq_barrier_async_f(queue, item, _sq_workitem_invoke);
	else
		sq_async_f(queue, item, _sq_workitem_invoke);
}

void
sq_workitem_perform(sq_workitem_t item)
{
	_sq_object_validate("sq_workitem_perform", item);
	_sq_workitem_run(item);
}

void
sq_workitem_cancel(sq_workitem_t item)
{
	_sq_object_validate("sq_workitem_cancel", item);
	/* Relaxed: a first guess for the CAS loop. */
	uint32_t old = __atomic_load_n(&item->state, __ATOMIC_RELAXED);
	uint32_t new;
	do {
		if (old & WI_CANCELLED)
			return;
		new = old | WI_CANCELLED;
		if (!(old & WI_STARTED))
			new |= WI_FINISHED;
		/* Release: a waiter woken by this cancel sees what we wrote
		 * before it. No acquire needed, as in _sq_workitem_run. */
	} while (!__atomic_compare_exchange_n(&item->state, &old, new, true,
			__ATOMIC_RELEASE, __ATOMIC_RELAXED));
	if (!(old & WI_STARTED))
		_sq_workitem_finished(item, old);
}

bool
sq_workitem_testcancel(sq_workitem_t item)
{
	_sq_object_validate("sq_workitem_testcancel", item);
	/* Relaxed: a flag polled by the running function; no data rides
	 * on it. */
	return (__atomic_load_n(&item->state, __ATOMIC_RELAXED) &
			WI_CANCELLED) != 0;
}

/* The continuation sq_async_workitem made for the item. */
static bool
_sq_workitem_is_its_job(const struct sq_cont_s *c, void *item)
{
	return c->func == _sq_workitem_invoke && c->ctx == item;
}

static bool
_sq_workitem_is_finished(void *item)
{
	/* Acquire: as sq_workitem_wait's look. */
	return (__atomic_load_n(&((struct sq_workitem_s *)item)->state,
			__ATOMIC_ACQUIRE) & WI_FINISHED) != 0;
}

intptr_t
sq_workitem_wait(sq_workitem_t item, sq_time_t timeout)
{
	_sq_object_validate("sq_workitem_wait", item);
	/* Acquire: seeing FINISHED means seeing what the function wrote. */
	uint32_t old = __atomic_load_n(&item->state, __ATOMIC_ACQUIRE);
	/* A worker waiting for good runs what its task queued on its own
	 * ring itself (pool_block.c, "Waiting helps"). */
	if (!(old & WI_FINISHED) && timeout == SQ_TIME_FOREVER &&
			_sq_pool_help(_sq_workitem_is_finished,
			_sq_workitem_is_its_job, item))
		old = __atomic_load_n(&item->state, __ATOMIC_ACQUIRE);
	for (;;) {
		if (old & WI_FINISHED)
			return 0;
		if (timeout == SQ_TIME_NOW)
			return ETIMEDOUT;
		if (!(old & WI_WAITERS)) {
			/* Announce a sleeper. Acquire (both ways): the
			 * value read may be the FINISHED we return on. */
			if (!__atomic_compare_exchange_n(&item->state, &old,
					old | WI_WAITERS, true,
					__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
				continue;
			old |= WI_WAITERS;
		}
		/* The futex compares the whole word: any change (started,
		 * cancelled while running) just sends us round again. */
		_sq_pool_block_begin(false);
		int r = _sq_futex_wait_until(&item->state, old, timeout);
		_sq_pool_block_end();
		/* Acquire: as for the first load. */
		old = __atomic_load_n(&item->state, __ATOMIC_ACQUIRE);
		if (old & WI_FINISHED)
			return 0;
		if (r == ETIMEDOUT)
			return ETIMEDOUT;
	}
}

void
sq_workitem_notify_f(sq_workitem_t item, sq_queue_t queue, void *context,
		sq_function_t function)
{
	_sq_object_validate("sq_workitem_notify_f", item);
	_sq_object_validate("sq_workitem_notify_f", queue);
	_SQ_REQUIRE_FUNCTION("sq_workitem_notify_f", function);

	struct sq_notify_s *n = malloc(sizeof(*n));
	if (n == NULL)
		_sq_client_crash("sq_workitem_notify_f", "out of memory");
	n->next = NULL;
	n->queue = queue;
	n->context = context;
	n->function = function;

	sq_spinlock_lock(&item->notify_lock);
	/* Acquire: a notification of a finished item sees its effects. */
	uint32_t old = __atomic_load_n(&item->state, __ATOMIC_ACQUIRE);
	for (;;) {
		if (old & WI_FINISHED) {
			sq_spinlock_unlock(&item->notify_lock);
			free(n);
			sq_async_f(queue, context, function);
			return;
		}
		if (old & WI_NOTIFS)
			break;
		/* Acquire (both ways), as for the load; the lock orders
		 * the list itself. */
		if (__atomic_compare_exchange_n(&item->state, &old,
				old | WI_NOTIFS, true, __ATOMIC_ACQUIRE,
				__ATOMIC_ACQUIRE))
			break;
	}
	_sq_retain_internal(queue);
	*item->notify_tail = n;
	item->notify_tail = &n->next;
	sq_spinlock_unlock(&item->notify_lock);
}
