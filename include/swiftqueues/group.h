/*!
 * \defgroup swiftqueues_group Dispatch groups
 * \ingroup swiftqueues
 *
 * Dispatch groups: wait for, or be told about, the completion
 * of a set of tasks.
 *
 * Thread safety: any thread may enter, leave, wait or ask to be notified.
 *
 * Memory: everything the members did (their tasks, the work before each
 * sq_group_leave) happens-before sq_group_wait returns 0 and before the
 * sq_group_notify function runs.
 *
 * \par Misuse
 * sq_group_leave without a matching sq_group_enter stops the process
 * ("SwiftQueues: sq_group_leave: unbalanced leave ..."), as do more enters
 * than the counter holds, sq_group_destroy on a group that is not empty or
 * was made by sq_group_create, and sq_release on a group made by
 * sq_group_init.
 * @{
 */
#ifndef SWIFTQUEUES_GROUP_H
#define SWIFTQUEUES_GROUP_H

#include <swiftqueues/base.h>
#include <swiftqueues/object.h>
#include <swiftqueues/queue.h>
#include <swiftqueues/time.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! A dispatch group: counts outstanding work (an object: sq_retain, sq_release). */
typedef struct sq_group_s *sq_group_t;

/*!
 * Creates an empty group (dispatch_group_create).
 * \return a new group; the caller owns one reference (sq_release).
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_group_t
sq_group_create(void);

/*!
 * Room for a group kept in storage the program owns (a local variable, a
 * field of its own struct): sq_group_init makes a group in it with no
 * allocation, for fork-join code that makes a group per node.
 */
typedef struct sq_group_storage_s {
	uint64_t _sq_opaque[12];
} sq_group_storage_t;

/*!
 * Makes an empty group in `storage` and returns it. It works with every
 * group call; the program holds it as with sq_group_create, but ends it
 * with sq_group_destroy instead of sq_release. The storage must stay
 * valid until sq_group_destroy returns. No libdispatch counterpart.
 * NULL storage stops the process ("SwiftQueues: sq_group_init: storage is
 * NULL"), and sq_release on such a group ("SwiftQueues: sq_release: the
 * group lives in the program's storage ...") too.
 * \param storage where the group lives.
 * \return the group, at `storage`.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_group_t
sq_group_init(sq_group_storage_t *storage);

/*!
 * Ends a group made by sq_group_init. The group must be empty (every
 * member done, no thread waiting in it) and hold no sq_retain of the
 * program's; otherwise the process stops. Returns once the runtime is done
 * with the storage (the last leave may still be on its way out), after
 * which the storage may go. The group's finalizer, if any, runs first, on
 * the calling thread. Misuse stops the process: "SwiftQueues:
 * sq_group_destroy: the group is not empty ...", "... the program still
 * holds N sq_retain of the group", "... the group was made by
 * sq_group_create: release it with sq_release".
 * \param group a group made by sq_group_init.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_group_destroy(sq_group_t group);

/*!
 * Submits `function(context)` to `queue` as a member of `group`: the group
 * is not empty until it has run (dispatch_group_async_f).
 * \param group the group; retained until the function has run.
 * \param queue the queue.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_group_async_f(sq_group_t group, sq_queue_t queue, void *SQ_NULLABLE context,
		sq_function_t function);

/*!
 * sq_group_async_f as a fork-join child: with no start order on a global
 * queue, newest first on the worker that spawned it (see sq_spawn_f). A
 * node that spawns its children into a group and waits for it runs them
 * itself, depth first, while other workers take the oldest. No libdispatch
 * counterpart.
 * \param group the group; retained until the function has run.
 * \param queue the queue.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_group_spawn_f(sq_group_t group, sq_queue_t queue, void *SQ_NULLABLE context,
		sq_function_t function);

/*!
 * Waits until the group is empty (every enter balanced by a leave, every
 * member task finished) or `timeout` passes. Waits on the monotonic clock
 * unless the timeout is a wall-clock time (dispatch_group_wait).
 * \param group the group.
 * \param timeout SQ_TIME_NOW, SQ_TIME_FOREVER or a time from sq_time /
 *        sq_walltime.
 * \return 0 when the group emptied (at once for an empty group), non-zero
 *         on timeout.
 */
SQ_EXPORT SQ_NOTHROW
intptr_t
sq_group_wait(sq_group_t group, sq_time_t timeout);

/*!
 * Submits `function(context)` to `queue` once the group is empty (at once
 * if it already is). The group can be reused afterwards; several notify
 * calls may be pending at once (dispatch_group_notify_f). Returns at once.
 * \param group the group.
 * \param queue where the function runs; retained until then.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_group_notify_f(sq_group_t group, sq_queue_t queue,
		void *SQ_NULLABLE context, sq_function_t function);

/*!
 * Counts one more unit of outstanding work in the group, done some other
 * way than sq_group_async (dispatch_group_enter). More enters than the
 * counter holds stop the process ("SwiftQueues: sq_group_enter: too many
 * enters (count overflow)").
 * \param group the group.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_group_enter(sq_group_t group);

/*!
 * Balances one sq_group_enter (dispatch_group_leave); the leave that
 * empties the group releases waiters and submits the notify functions.
 * Leaving more than entered stops the process ("SwiftQueues:
 * sq_group_leave: unbalanced leave: group left more times than entered").
 * \param group the group.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_group_leave(sq_group_t group);

#ifdef __BLOCKS__
/*! sq_group_async_f with a block: copied, released after it has run
 *  (dispatch_group_async).
 *  \param group the group.
 *  \param queue the queue.
 *  \param block the work. */
SQ_INLINE void
sq_group_async(sq_group_t group, sq_queue_t queue, sq_block_t block)
{
	sq_group_async_f(group, queue, _Block_copy((const void *)block),
			_sq_call_and_release_block);
}

/*! sq_group_notify_f with a block: copied, released after it has run
 *  (dispatch_group_notify).
 *  \param group the group.
 *  \param queue where the block runs.
 *  \param block the work. */
SQ_INLINE void
sq_group_notify(sq_group_t group, sq_queue_t queue, sq_block_t block)
{
	sq_group_notify_f(group, queue, _Block_copy((const void *)block),
			_sq_call_and_release_block);
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_GROUP_H */
