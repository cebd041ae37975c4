/*!
 * \defgroup swiftqueues_spinlock Spin lock
 * \ingroup swiftqueues
 *
 * Spin lock (OSSpinLock's counterpart, made safe).
 *
 * Uncontended, lock and unlock are one atomic instruction each, inline.
 * Contended, a waiter spins with the CPU's pause instruction for a short
 * while, then yields its time slice a few times, then sleeps on a futex.
 * A holder that is preempted therefore never makes its waiters burn the
 * CPU it needs to finish (the livelock that made Apple deprecate
 * OSSpinLock); unlock wakes one sleeper only when one is sleeping.
 *
 * The lock is not recursive and has no owner check: lock it twice on one
 * thread and that thread sleeps forever. Zero-initialised memory is an
 * unlocked lock.
 * @{
 */
#ifndef SWIFTQUEUES_SPINLOCK_H
#define SWIFTQUEUES_SPINLOCK_H

#include <swiftqueues/base.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! A spin lock; zero-initialised memory (or SQ_SPINLOCK_INIT) is unlocked. Its field is private. */
typedef struct sq_spinlock_s {
	/* 0 unlocked, 1 locked, 2 locked and a waiter may sleep on the futex. */
	uint32_t _sq_state;
} sq_spinlock_t;

/*! A static initialiser for an unlocked sq_spinlock_t. */
#define SQ_SPINLOCK_INIT { 0 }

/* The contended paths; call sq_spinlock_lock / _unlock instead. */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
void
_sq_spinlock_lock_slow(sq_spinlock_t *lock);

SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
void
_sq_spinlock_wake(sq_spinlock_t *lock);

/*! Acquires the lock, waiting as long as it takes (OSSpinLockLock).
 *  Acquiring makes visible everything the previous holder wrote before
 *  releasing.
 *  \param lock the lock. */
SQ_INLINE SQ_NONNULL_ALL void
sq_spinlock_lock(sq_spinlock_t *lock)
{
	uint32_t expected = 0;
	/* Acquire: the critical section sees what the last holder wrote. */
	if (SQ_LIKELY(__atomic_compare_exchange_n(&lock->_sq_state, &expected,
			1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
		return;
	}
	_sq_spinlock_lock_slow(lock);
}

/*! Acquires the lock if it is free; never waits (OSSpinLockTry).
 *  \param lock the lock.
 *  \return true if it acquired the lock. */
SQ_INLINE SQ_NONNULL_ALL bool
sq_spinlock_trylock(sq_spinlock_t *lock)
{
	uint32_t expected = 0;
	return __atomic_compare_exchange_n(&lock->_sq_state, &expected, 1,
			false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/*! Releases the lock and wakes one sleeping waiter, if any; the calling
 *  thread must hold it (OSSpinLockUnlock).
 *  \param lock the lock. */
SQ_INLINE SQ_NONNULL_ALL void
sq_spinlock_unlock(sq_spinlock_t *lock)
{
	/* Release: publishes the critical section to the next holder. */
	if (SQ_UNLIKELY(__atomic_exchange_n(&lock->_sq_state, 0,
			__ATOMIC_RELEASE) == 2)) {
		_sq_spinlock_wake(lock);
	}
}

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_SPINLOCK_H */
