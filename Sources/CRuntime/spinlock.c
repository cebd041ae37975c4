/*
 * SwiftQueues — spin lock contended paths. The fast paths are inline in
 * include/swiftqueues/spinlock.h.
 *
 * State word: 0 unlocked, 1 locked, 2 locked with (possible) sleepers.
 * A waiter goes through three phases, so a preempted holder costs waiters
 * no more than a few microseconds of CPU before they sleep:
 *   1. spin with pause, re-trying when the word reads 0;
 *   2. yield the CPU a few times (the holder may be waiting for it);
 *   3. mark the word 2 and sleep on the futex until unlock wakes one.
 * A thread that takes the lock in phase 3 leaves the word at 2, so its own
 * unlock wakes the next sleeper: no wake-up is ever lost.
 */
#include "internal.h"

#define SQ_SPIN_ATTEMPTS 100
#define SQ_YIELD_ATTEMPTS 4

SQ_TLS uint32_t *_sq_lock_sleep_flag;

static inline bool
_sq_spinlock_try_from_free(uint32_t *state)
{
	uint32_t expected = 0;
	return __atomic_load_n(state, __ATOMIC_RELAXED) == 0 &&
			__atomic_compare_exchange_n(state, &expected, 1, false,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

void
_sq_spinlock_lock_slow(sq_spinlock_t *lock)
{
	uint32_t *state = &lock->_sq_state;

	for (int i = 0; i < SQ_SPIN_ATTEMPTS; i++) {
		_sq_cpu_relax();
		if (_sq_spinlock_try_from_free(state))
			return;
	}
	for (int i = 0; i < SQ_YIELD_ATTEMPTS; i++) {
		sched_yield();
		if (_sq_spinlock_try_from_free(state))
			return;
	}
	/* Acquire on the exchange that returns 0: we own the lock. The flag
	 * is only read by the monitor's estimate (relaxed). */
	uint32_t *flag = _sq_lock_sleep_flag;
	if (flag != NULL)
		__atomic_store_n(flag, 1, __ATOMIC_RELAXED);
	while (__atomic_exchange_n(state, 2, __ATOMIC_ACQUIRE) != 0)
		_sq_futex_wait(state, 2, NULL);
	if (flag != NULL)
		__atomic_store_n(flag, 0, __ATOMIC_RELAXED);
}

void
_sq_spinlock_wake(sq_spinlock_t *lock)
{
	_sq_futex_wake(&lock->_sq_state, 1);
}
