/*
 * SwiftQueues — counting semaphores.
 *
 * Two words:
 *   value    units available; when negative, minus the number of threads
 *            that are (or are about to be) asleep waiting for a unit.
 *   wakeups  units handed to sleepers by sq_semaphore_signal and not yet
 *            picked up. The 32-bit futex word the sleepers wait on.
 *
 * Uncontended wait and signal are one atomic add each on `value` and make
 * no system call. A waiter that finds no unit sleeps until it can take one
 * of `wakeups`; a signal that finds sleepers adds one to `wakeups` and
 * wakes one thread. Wake-up tokens are anonymous: whichever sleeper takes
 * one owns the unit.
 *
 * Timeouts: a waiter whose deadline passes withdraws its claim by adding
 * one back to `value`, but only while `value` is still negative. If it is
 * not, a signal has already counted this waiter as served and its token is
 * on its way (or already in `wakeups`): the waiter then waits for it
 * without a deadline and returns success. So a signal racing a timeout
 * never loses or duplicates a unit. The invariant, between operations:
 *   threads inside the slow path == wakeups + max(0, -value)
 *
 * libdispatch sleeps on a POSIX sem_t with a CLOCK_REALTIME deadline; here
 * the futex takes the deadline on the clock the sq_time_t names, so a
 * wall-clock jump cannot stretch a monotonic wait.
 */
#include "internal.h"

struct sq_semaphore_s {
	struct sq_object_s object;
	intptr_t value;
	uint32_t wakeups;
	intptr_t created_value;
};

static void
_sq_semaphore_dispose(struct sq_object_s *object)
{
	_sq_object_free(object);
}

static void
_sq_semaphore_last_external_release(struct sq_object_s *object)
{
	struct sq_semaphore_s *s = (struct sq_semaphore_s *)object;
	/* Relaxed: sq_release's acq_rel decrement of the last xref already
	 * ordered us after every balanced wait and signal; only threads
	 * still (wrongly) inside wait race with us, which is what we
	 * report. */
	intptr_t value = __atomic_load_n(&s->value, __ATOMIC_RELAXED);
	uint32_t wakeups = __atomic_load_n(&s->wakeups, __ATOMIC_RELAXED);
	if (SQ_LIKELY(value >= s->created_value && wakeups == 0))
		return;
	intptr_t waiting = (intptr_t)wakeups + (value < 0 ? -value : 0);
	_sq_client_crash("sq_release", "semaphore destroyed while in use "
			"(value %ld, created with %ld, %ld thread(s) waiting)",
			(long)value, (long)s->created_value, (long)waiting);
}

static const struct sq_vtable_s _sq_semaphore_vtable = {
	.kind = "semaphore",
	.dispose = _sq_semaphore_dispose,
	.last_external_release = _sq_semaphore_last_external_release,
};

sq_semaphore_t
sq_semaphore_create(intptr_t value)
{
	if (value < 0) {
		errno = EINVAL;
		return NULL;
	}
	struct sq_semaphore_s *s = _sq_object_alloc(&_sq_semaphore_vtable,
			sizeof(*s));
	s->value = value;
	s->created_value = value;
	return s;
}

/* Takes one wake-up token if there is one. */
static inline bool
_sq_semaphore_take_wakeup(struct sq_semaphore_s *s)
{
	/* Relaxed load: only a hint for the CAS below. */
	uint32_t w = __atomic_load_n(&s->wakeups, __ATOMIC_RELAXED);
	while (w > 0) {
		/* Acquire: pairs with the release add in signal, so the
		 * signaller's writes are visible to the new unit owner. */
		if (__atomic_compare_exchange_n(&s->wakeups, &w, w - 1, true,
				__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

SQ_NOINLINE static intptr_t
_sq_semaphore_wait_slow(struct sq_semaphore_s *s, sq_time_t deadline)
{
	for (;;) {
		if (_sq_semaphore_take_wakeup(s))
			return 0;
		if (_sq_futex_wait_until(&s->wakeups, 0, deadline) != ETIMEDOUT)
			continue; /* woken, changed, spurious: re-check */
		/* Timed out (never for FOREVER). A token may have arrived
		 * right at the deadline: prefer it. */
		if (_sq_semaphore_take_wakeup(s))
			return 0;
		/* Withdraw our claim while no signal has counted us yet.
		 * Relaxed: giving a claim back publishes nothing; the CAS
		 * still orders itself in value's modification order. */
		intptr_t v = __atomic_load_n(&s->value, __ATOMIC_RELAXED);
		while (v < 0) {
			if (__atomic_compare_exchange_n(&s->value, &v, v + 1,
					true, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
				return ETIMEDOUT;
		}
		/* A signal counted us: its token is ours. Wait for it. */
		deadline = SQ_TIME_FOREVER;
	}
}

intptr_t
sq_semaphore_wait(sq_semaphore_t semaphore, sq_time_t timeout)
{
	_sq_object_validate("sq_semaphore_wait", semaphore);
	struct sq_semaphore_s *s = semaphore;
	/* Acquire: pairs with signal's release add, so whoever takes a unit
	 * sees what the thread that gave it back wrote (the lock pattern). */
	intptr_t old = __atomic_fetch_sub(&s->value, 1, __ATOMIC_ACQUIRE);
	if (SQ_LIKELY(old > 0))
		return 0;
	return _sq_semaphore_wait_slow(s, timeout);
}

intptr_t
sq_semaphore_signal(sq_semaphore_t semaphore)
{
	_sq_object_validate("sq_semaphore_signal", semaphore);
	struct sq_semaphore_s *s = semaphore;
	/* Release: publishes our writes to the next owner of the unit. */
	intptr_t old = __atomic_fetch_add(&s->value, 1, __ATOMIC_RELEASE);
	if (SQ_LIKELY(old >= 0))
		return 0;
	/* A thread waits (or is about to): hand it the unit. Release: the
	 * acquire CAS in _sq_semaphore_take_wakeup sees our writes. */
	__atomic_fetch_add(&s->wakeups, 1, __ATOMIC_RELEASE);
	/* The waiter may take the token, return and free the semaphore
	 * before this call: a private FUTEX_WAKE never touches the memory,
	 * and at worst wakes someone spuriously. */
	_sq_futex_wake(&s->wakeups, 1);
	return 1;
}
