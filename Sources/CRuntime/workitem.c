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
 * before it started. Whoever sets FINISHED, if NOTIFS was set, takes the
 * notify lock (which waits out a registration in progress) and submits the
 * notifications, then wakes the waiters.
 *
 * The object header's context and finalizer belong to the program
 * (sq_set_context); the function's own context is kept apart.
 */
#include "queue_internal.h"
#include "trace_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define WI_STARTED 0x1u
#define WI_FINISHED 0x2u
#define WI_CANCELLED 0x4u
#define WI_WAITERS 0x8u
#define WI_NOTIFS 0x10u

#define WI_KNOWN_FLAGS (SQ_WORKITEM_BARRIER | SQ_WORKITEM_DETACHED |        \
		SQ_WORKITEM_ASSIGN_CURRENT | SQ_WORKITEM_NO_QOS_CLASS |        \
		SQ_WORKITEM_INHERIT_QOS_CLASS | SQ_WORKITEM_ENFORCE_QOS_CLASS)

struct sq_workitem_s {
	struct sq_object_s object;
	uint32_t state;
	sq_workitem_flags_t flags;
	void *function_context;
	sq_function_t function;
	sq_spinlock_t notify_lock;
	/* Its QoS class as a root index (SQ_ROOT_NONE: none) and relative
	 * priority (in the lock's padding); the queue its last submission
	 * went to (a reference held until the item is destroyed), for
	 * waiters to raise. */
	uint8_t qos_root;
	int8_t relpri;
	struct sq_notify_s *notify_head; /* FIFO, under the lock */
	struct sq_notify_s **notify_tail;
	struct sq_queue_s *queue;
};

static void
_sq_workitem_dispose(struct sq_object_s *object)
{
	struct sq_workitem_s *item = (struct sq_workitem_s *)object;
	/* An item destroyed before it ran or was cancelled can never run
	 * now: like libdispatch's blocks, it counts as done, and pending
	 * notifications are submitted rather than dropped. */
	_sq_notify_fire(item->notify_head);
	if (item->queue != NULL)
		_sq_release_internal(item->queue);
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

static sq_workitem_t
_sq_workitem_create(const char *call, sq_workitem_flags_t flags, int root,
		int relpri, void *context, sq_function_t function)
{
	_SQ_REQUIRE_FUNCTION(call, function);
	if (SQ_UNLIKELY(flags & ~(sq_workitem_flags_t)WI_KNOWN_FLAGS)) {
		_sq_client_crash(call, "unknown flags 0x%lx",
				flags & ~(sq_workitem_flags_t)WI_KNOWN_FLAGS);
	}
	struct sq_workitem_s *item = _sq_object_alloc(&_sq_workitem_vtable,
			sizeof(*item));
	item->flags = flags;
	item->function_context = context;
	item->function = function;
	item->notify_tail = &item->notify_head;
	if (root == SQ_ROOT_NONE && (flags & SQ_WORKITEM_ASSIGN_CURRENT))
		root = _sq_thread_root();
	item->qos_root = (uint8_t)root;
	item->relpri = (int8_t)relpri;
	return item;
}

sq_workitem_t
sq_workitem_create_f(sq_workitem_flags_t flags, void *context,
		sq_function_t function)
{
	return _sq_workitem_create("sq_workitem_create_f", flags,
			SQ_ROOT_NONE, 0, context, function);
}

sq_workitem_t
sq_workitem_create_with_qos_class_f(sq_workitem_flags_t flags,
		sq_qos_class_t qos_class, int relative_priority, void *context,
		sq_function_t function)
{
	const char *call = "sq_workitem_create_with_qos_class_f";
	int root = qos_class == SQ_QOS_CLASS_UNSPECIFIED ? SQ_ROOT_NONE
			: _sq_qos_root(qos_class);
	if (SQ_UNLIKELY(root < 0))
		_sq_client_crash(call, "0x%x is not a QoS class", qos_class);
	if (SQ_UNLIKELY(relative_priority > 0 ||
			relative_priority < SQ_QOS_MIN_RELATIVE_PRIORITY))
		_sq_client_crash(call, "relative priority %d is out of range "
				"(%d to 0)", relative_priority,
				SQ_QOS_MIN_RELATIVE_PRIORITY);
	return _sq_workitem_create(call, flags, root, relative_priority,
			context, function);
}

/* Called once by whoever set FINISHED; `old` is the state before. */
static void
_sq_workitem_finished(struct sq_workitem_s *item, uint32_t old)
{
	/* Notifications are submitted before waiters wake, as libdispatch
	 * does: a waiter that returns finds them on their queues already. */
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
	if (old & WI_WAITERS) {
		SQ_TRACE_RELEASE(SQ_WAIT_WORKITEM, NULL, item);
		_sq_futex_wake(&item->state, INT_MAX);
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
	/* The class it runs at: the queue's, or the item's where that is
	 * higher and the item enforces it or the queue has none of its own
	 * (libdispatch's ENFORCE and INHERIT). */
	int root = SQ_ROOT_NONE;
	if (item->qos_root != SQ_ROOT_NONE) {
		int qr = _sq_queue_class(queue);
		bool own = _sq_queue_is_root(queue) ||
				queue->qos_root != SQ_ROOT_NONE;
		if (item->qos_root < qr && (!own ||
				(item->flags & SQ_WORKITEM_ENFORCE_QOS_CLASS)))
			root = item->qos_root;
	}
	_sq_retain_internal(queue);
	struct sq_queue_s *old = __atomic_exchange_n(&item->queue, queue,
			__ATOMIC_ACQ_REL);
	if (old != NULL)
		_sq_release_internal(old);
	_sq_async_qos("sq_async_workitem", queue, item, _sq_workitem_invoke,
			(item->flags & SQ_WORKITEM_BARRIER) != 0, root);
}

/* A waiter of a higher class than the item's queue: raise the queue (a
 * serial one), or run the item on the waiter's class (a global queue:
 * whichever runs first claims it, the other does nothing). */
static void
_sq_workitem_raise(struct sq_workitem_s *item)
{
	struct sq_queue_s *q = __atomic_load_n(&item->queue, __ATOMIC_ACQUIRE);
	if (q == NULL)
		return;
	int mine = _sq_thread_root();
	if (mine >= _sq_queue_class(q))
		return;
	if (q->type == SQ_QUEUE_TYPE_SERIAL) {
		_sq_queue_raise(q, mine);
	} else if (_sq_queue_is_root(q)) {
		_sq_retain_internal(item);
		sq_async_f(&_sq_root_queues[mine], item, _sq_workitem_invoke);
	}
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
	if (!(old & (WI_FINISHED | WI_STARTED)) && timeout != SQ_TIME_NOW)
		_sq_workitem_raise(item);
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
		SQ_TRACE_WAIT_BEGIN(SQ_WAIT_WORKITEM, NULL, item);
		int r = _sq_futex_wait_until(&item->state, old, timeout);
		SQ_TRACE_WAIT_END(SQ_WAIT_WORKITEM, NULL, item);
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

	struct sq_notify_s *n = _sq_notify_alloc();
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
			_sq_notify_free(n);
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
