/*!
 * \defgroup swiftqueues_semaphore Counting semaphores
 * \ingroup swiftqueues
 *
 * Counting semaphores. No system call while the count stays
 * non-negative; waiters sleep on a futex against the monotonic clock.
 *
 * Thread safety: signal and wait may be called from any thread.
 *
 * Memory: what a thread did before sq_semaphore_signal happens-before the
 * return of the sq_semaphore_wait that takes that unit.
 *
 * \par Misuse
 * Releasing the last reference while threads wait on the semaphore, or
 * while it holds fewer units than it was created with, stops the process
 * ("SwiftQueues: sq_release: semaphore destroyed while in use ...").
 * @{
 */
#ifndef SWIFTQUEUES_SEMAPHORE_H
#define SWIFTQUEUES_SEMAPHORE_H

#include <swiftqueues/base.h>
#include <swiftqueues/object.h>
#include <swiftqueues/time.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! A counting semaphore (an object: sq_retain, sq_release). */
typedef struct sq_semaphore_s *sq_semaphore_t;

/*!
 * Creates a semaphore with `value` (>= 0) units; returns NULL for a negative
 * value. Releasing it while threads wait on it stops the process, as does
 * releasing it with fewer units than it was created with (a unit taken and
 * never given back) (dispatch_semaphore_create).
 * \param value the initial number of units, 0 or more.
 * \return a new semaphore (the caller owns one reference), or NULL for a
 *         negative value.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_semaphore_t SQ_NULLABLE
sq_semaphore_create(intptr_t value);

/*!
 * Takes one unit, waiting until one is available or `timeout` passes
 * (dispatch_semaphore_wait). No system call while a unit is available.
 * \param semaphore the semaphore.
 * \param timeout SQ_TIME_NOW, SQ_TIME_FOREVER or a time from sq_time /
 *        sq_walltime.
 * \return 0 when it took a unit, non-zero on timeout.
 */
SQ_EXPORT SQ_NOTHROW
intptr_t
sq_semaphore_wait(sq_semaphore_t semaphore, sq_time_t timeout);

/*!
 * Gives one unit back and wakes one waiting thread, if any
 * (dispatch_semaphore_signal).
 * \param semaphore the semaphore.
 * \return non-zero if it woke a thread, 0 otherwise.
 */
SQ_EXPORT SQ_NOTHROW
intptr_t
sq_semaphore_signal(sq_semaphore_t semaphore);

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_SEMAPHORE_H */
