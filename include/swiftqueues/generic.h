/*!
 * \defgroup swiftqueues_generic C11 generic calls
 * \ingroup swiftqueues
 *
 * The C11 generic calls of libdispatch: sq_wait, sq_notify,
 * sq_cancel and sq_testcancel pick the call for the object's type.
 *
 *   sq_wait(object, timeout)          a group, semaphore, work item or
 *                                     (with blocks) a block from
 *                                     sq_block_create
 *   sq_notify(object, queue, block)   a group, work item or block
 *                                     (blocks only)
 *   sq_cancel(object)                 a source, work item or block
 *   sq_testcancel(object)             a source, work item or block
 *
 * C11 only (_Generic), not C++. An object of another type does not
 * compile.
 * @{
 */
#ifndef SWIFTQUEUES_GENERIC_H
#define SWIFTQUEUES_GENERIC_H

#include <swiftqueues/group.h>
#include <swiftqueues/semaphore.h>
#include <swiftqueues/source.h>
#include <swiftqueues/workitem.h>

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && \
		__STDC_VERSION__ >= 201112L

#ifdef __BLOCKS__
#define _SQ_GENERIC_BLOCK(call) sq_block_t: call,
#else
#define _SQ_GENERIC_BLOCK(call)
#endif

/*! Waits for a group, semaphore, work item or block (sq_block_create)
 *  until done or `timeout` (libdispatch's dispatch_wait).
 *  \param object an sq_group_t, sq_semaphore_t, sq_workitem_t or sq_block_t.
 *  \param timeout as for sq_group_wait.
 *  \return what the type's own wait returns: 0 when done (or a unit was
 *          taken), non-zero on timeout. */
#define sq_wait(object, timeout)                                              \
	_Generic((object),                                                     \
		_SQ_GENERIC_BLOCK(sq_block_wait)                               \
		sq_workitem_t: sq_workitem_wait,                               \
		sq_group_t: sq_group_wait,                                     \
		sq_semaphore_t: sq_semaphore_wait)((object), (timeout))

/*! Cancels a source, work item or block (sq_source_cancel,
 *  sq_workitem_cancel, sq_block_cancel; dispatch_cancel).
 *  \param object an sq_source_t, sq_workitem_t or sq_block_t. */
#define sq_cancel(object)                                                     \
	_Generic((object),                                                     \
		_SQ_GENERIC_BLOCK(sq_block_cancel)                             \
		sq_workitem_t: sq_workitem_cancel,                             \
		sq_source_t: sq_source_cancel)((object))

/*! Whether a source, work item or block was cancelled (dispatch_testcancel).
 *  \param object an sq_source_t, sq_workitem_t or sq_block_t.
 *  \return non-zero once it was cancelled, 0 otherwise. */
#define sq_testcancel(object)                                                 \
	_Generic((object),                                                     \
		_SQ_GENERIC_BLOCK(sq_block_testcancel)                         \
		sq_workitem_t: sq_workitem_testcancel,                         \
		sq_source_t: sq_source_testcancel)((object))

#ifdef __BLOCKS__
/*! Submits the block `notification` to `queue` once a group, work item or
 *  block is done (blocks only; dispatch_notify).
 *  \param object an sq_group_t, sq_workitem_t or sq_block_t.
 *  \param queue where the notification runs.
 *  \param notification the block; copied, released after it has run. */
#define sq_notify(object, queue, notification)                                \
	_Generic((object),                                                     \
		sq_block_t: sq_block_notify,                                   \
		sq_workitem_t: sq_workitem_notify,                             \
		sq_group_t: sq_group_notify)((object), (queue),                \
				(notification))
#endif

#endif /* C11 */

/*! @} */

#endif /* SWIFTQUEUES_GENERIC_H */
