/*!
 * \defgroup swiftqueues_workitem Work items and blocks
 * \ingroup swiftqueues
 *
 * Work items: a task as an object that can be submitted,
 * cancelled before it runs, waited for and observed (libdispatch's
 * dispatch_block_* for function pointers).
 *
 * Thread safety: a work item may be submitted, cancelled, waited for and
 * observed from any thread.
 *
 * An item runs at most once. What it did happens-before sq_workitem_wait
 * returns 0 and before its notify functions run. The block forms copy
 * their block; the item releases the copy when it is destroyed.
 *
 * The sq_block_* calls are libdispatch's dispatch_block_*: each block they
 * make carries a work item; the program calls it, copies it
 * (_Block_copy), submits it and releases it (_Block_release) like any
 * block. Its body runs at most once: a second call or submission does
 * nothing.
 *
 * \par Misuse
 * sq_workitem_create_with_qos_class_f with a class that does not exist or
 * a relative priority out of range stops the process. sq_block_wait,
 * sq_block_notify, sq_block_cancel and sq_block_testcancel given a block
 * that sq_block_create did not make stop it ("SwiftQueues: sq_block_wait:
 * the block was not made by sq_block_create").
 * @{
 */
#ifndef SWIFTQUEUES_WORKITEM_H
#define SWIFTQUEUES_WORKITEM_H

#include <swiftqueues/base.h>
#include <swiftqueues/object.h>
#include <swiftqueues/queue.h>
#include <swiftqueues/time.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! A work item (an object: sq_retain, sq_release). */
typedef struct sq_workitem_s *sq_workitem_t;

/*! A work item's flags: the SQ_WORKITEM_* (or SQ_BLOCK_*) values below, or'ed. */
typedef unsigned long sq_workitem_flags_t;
/*! Submitted with sq_async_workitem, the item runs as a barrier. */
#define SQ_WORKITEM_BARRIER 0x1ul
/*! Accepted for libdispatch's sake: no execution context is attached on
 * Linux, so there is nothing to detach from. */
#define SQ_WORKITEM_DETACHED 0x2ul
/*! The item takes the QoS class of the thread that creates it
 * (sq_qos_class_self) unless given one with
 * sq_workitem_create_with_qos_class_f. */
#define SQ_WORKITEM_ASSIGN_CURRENT 0x4ul
/*! The item has no QoS class (the default unless one is given). */
#define SQ_WORKITEM_NO_QOS_CLASS 0x8ul
/*! Submitted asynchronously, the queue's class wins when the queue has one
 * of its own (a global queue, or a queue created with a class); the item's
 * otherwise, never below the class of the queue's target. The default. */
#define SQ_WORKITEM_INHERIT_QOS_CLASS 0x10ul
/*! The item's class wins when it is higher than the queue's: a serial
 * queue it waits in is raised until it has run. */
#define SQ_WORKITEM_ENFORCE_QOS_CLASS 0x20ul

/*! \name libdispatch's names for the flags (dispatch_block_flags_t) */
/*! @{ */
/*! SQ_BLOCK_X is SQ_WORKITEM_X. */
#define SQ_BLOCK_BARRIER SQ_WORKITEM_BARRIER
#define SQ_BLOCK_DETACHED SQ_WORKITEM_DETACHED
#define SQ_BLOCK_ASSIGN_CURRENT SQ_WORKITEM_ASSIGN_CURRENT
#define SQ_BLOCK_NO_QOS_CLASS SQ_WORKITEM_NO_QOS_CLASS
#define SQ_BLOCK_INHERIT_QOS_CLASS SQ_WORKITEM_INHERIT_QOS_CLASS
#define SQ_BLOCK_ENFORCE_QOS_CLASS SQ_WORKITEM_ENFORCE_QOS_CLASS
/*! @} */

/*!
 * Creates a work item that will call `function(context)` at most once
 * (dispatch_block_create for a function). Unknown flags stop the process
 * ("SwiftQueues: sq_workitem_create_f: unknown flags 0x...").
 * \param flags SQ_WORKITEM_* values, or'ed (0: none).
 * \param context passed to `function`.
 * \param function the work.
 * \return a new item; the caller owns one reference, and a submission
 *         holds its own until the item has run.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_workitem_t
sq_workitem_create_f(sq_workitem_flags_t flags, void *SQ_NULLABLE context,
		sq_function_t function);

/*!
 * sq_workitem_create_f with a QoS class (SQ_QOS_CLASS_*) and a relative
 * priority (SQ_QOS_MIN_RELATIVE_PRIORITY to 0). A waiter of a higher class
 * than the queue the item waits in raises that queue (a serial queue) or
 * runs the item at its own class (a global queue) until it has run.
 * Misuse stops the process ("SwiftQueues:
 * sq_workitem_create_with_qos_class_f: 0x... is not a QoS class", "...
 * relative priority N is out of range ...")
 * (dispatch_block_create_with_qos_class).
 * \param flags SQ_WORKITEM_* values, or'ed.
 * \param qos_class an SQ_QOS_CLASS_* value.
 * \param relative_priority SQ_QOS_MIN_RELATIVE_PRIORITY to 0.
 * \param context passed to `function`.
 * \param function the work.
 * \return a new item; the caller owns one reference.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_workitem_t
sq_workitem_create_with_qos_class_f(sq_workitem_flags_t flags,
		sq_qos_class_t qos_class, int relative_priority,
		void *SQ_NULLABLE context, sq_function_t function);

/*!
 * Submits the item to `queue` (as a barrier with SQ_WORKITEM_BARRIER);
 * returns at once. A cancelled item is dropped when its turn comes
 * (dispatch_async of a dispatch block).
 * \param queue the queue.
 * \param item the item; retained until it has run.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_async_workitem(sq_queue_t queue, sq_workitem_t item);

/*!
 * Runs the item now on the calling thread, unless cancelled or already run
 * (dispatch_block_perform).
 * \param item the item.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_workitem_perform(sq_workitem_t item);

/*!
 * Cancels the item: if it has not started it never runs, and it counts as
 * finished at once (waiters return, notifications are submitted). A running
 * item is not interrupted; sq_workitem_testcancel tells it to stop early
 * (dispatch_block_cancel).
 * \param item the item.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_workitem_cancel(sq_workitem_t item);

/*!
 * Whether the item has been cancelled (dispatch_block_testcancel).
 * \param item the item.
 * \return true once sq_workitem_cancel was called on it.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
bool
sq_workitem_testcancel(sq_workitem_t item);

/*!
 * Waits until the item has run or been cancelled, or `timeout` passes
 * (dispatch_block_wait).
 * \param item the item.
 * \param timeout as for sq_group_wait.
 * \return 0 when finished, non-zero on timeout.
 */
SQ_EXPORT SQ_NOTHROW
intptr_t
sq_workitem_wait(sq_workitem_t item, sq_time_t timeout);

/*!
 * Submits `function(context)` to `queue` once the item has run or been
 * cancelled (at once if it already has) (dispatch_block_notify).
 * \param item the item.
 * \param queue where the function runs.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_workitem_notify_f(sq_workitem_t item, sq_queue_t queue,
		void *SQ_NULLABLE context, sq_function_t function);

/*!
 * A block that performs `item` when called (sq_workitem_perform): the
 * program may call it, copy it (_Block_copy), submit it and release it
 * (_Block_release); the item lives until the last copy is released. Each
 * call returns a new block the caller owns. Needs the Blocks runtime in
 * the process (clang -fblocks, -lBlocksRuntime); without it, stops the
 * process ("SwiftQueues: sq_workitem_block: the Blocks runtime is not
 * loaded ..."). A block from sq_async goes to the queue as the item itself
 * (sq_async_workitem: its barrier flag and class apply).
 * \param item the item; the block holds a reference.
 * \return a new block (void * so that C without blocks can hold it).
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
void *
sq_workitem_block(sq_workitem_t item);

/*! The item of a block made by sq_workitem_block (or sq_block_create).
 * \param block any block, or NULL.
 * \return the item, or NULL for any other block; no reference is added. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_workitem_t SQ_NULLABLE
sq_workitem_from_block(const void *SQ_NULLABLE block);

/* sq_workitem_from_block for the sq_block_* calls: stops the process with
 * `call` in the message when the block is not such a block. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_workitem_t
_sq_workitem_for_block(const char *call, const void *SQ_NULLABLE block);

#ifdef __BLOCKS__
/*!
 * A work item running a block. The block is copied now and released by the
 * item's finalizer (so the item's context slot holds the block).
 * \param flags SQ_WORKITEM_* values, or'ed.
 * \param block the work.
 * \return a new item; the caller owns one reference.
 */
SQ_INLINE sq_workitem_t
sq_workitem_create(sq_workitem_flags_t flags, sq_block_t block)
{
	void *copy = _Block_copy((const void *)block);
	sq_workitem_t item = sq_workitem_create_f(flags, copy, _sq_call_block);
	sq_set_context(item, copy);
	sq_set_finalizer_f(item, (sq_function_t)(void (*)(const void *))_Block_release);
	return item;
}

/*! sq_workitem_create_with_qos_class_f with a block (copied, released with the item).
 *  \param flags SQ_WORKITEM_* values, or'ed.
 *  \param qos_class an SQ_QOS_CLASS_* value.
 *  \param relative_priority SQ_QOS_MIN_RELATIVE_PRIORITY to 0.
 *  \param block the work.
 *  \return a new item; the caller owns one reference. */
SQ_INLINE sq_workitem_t
sq_workitem_create_with_qos_class(sq_workitem_flags_t flags,
		sq_qos_class_t qos_class, int relative_priority,
		sq_block_t block)
{
	void *copy = _Block_copy((const void *)block);
	sq_workitem_t item = sq_workitem_create_with_qos_class_f(flags,
			qos_class, relative_priority, copy, _sq_call_block);
	sq_set_context(item, copy);
	sq_set_finalizer_f(item, (sq_function_t)(void (*)(const void *))_Block_release);
	return item;
}

/*! sq_workitem_notify_f with a block: copied, released after it has run.
 *  \param item the item.
 *  \param queue where the block runs.
 *  \param block the work. */
SQ_INLINE void
sq_workitem_notify(sq_workitem_t item, sq_queue_t queue, sq_block_t block)
{
	sq_workitem_notify_f(item, queue, _Block_copy((const void *)block),
			_sq_call_and_release_block);
}

/* ---- libdispatch's dispatch_block_* ---- */

/*! libdispatch's dispatch_block_flags_t: the SQ_BLOCK_* flags above. */
typedef sq_workitem_flags_t sq_block_flags_t;

/*!
 * A new block (the caller owns it: _Block_release) that runs `block` at
 * most once however often it is called or submitted, and that
 * sq_block_wait, sq_block_notify, sq_block_cancel and sq_block_testcancel
 * accept. Its work item (sq_workitem_create) lives as long as the block
 * (dispatch_block_create).
 * \param flags SQ_BLOCK_* values, or'ed.
 * \param block the body; copied.
 * \return the new block.
 */
SQ_INLINE sq_block_t
sq_block_create(sq_block_flags_t flags, sq_block_t block)
{
	sq_workitem_t item = sq_workitem_create(flags, block);
	void *made = sq_workitem_block(item);
	sq_release(item);
	return (sq_block_t)made;
}

/*! sq_block_create with a QoS class and a relative priority
 *  (dispatch_block_create_with_qos_class).
 *  \param flags SQ_BLOCK_* values, or'ed.
 *  \param qos_class an SQ_QOS_CLASS_* value.
 *  \param relative_priority SQ_QOS_MIN_RELATIVE_PRIORITY to 0.
 *  \param block the body; copied.
 *  \return the new block. */
SQ_INLINE sq_block_t
sq_block_create_with_qos_class(sq_block_flags_t flags,
		sq_qos_class_t qos_class, int relative_priority,
		sq_block_t block)
{
	sq_workitem_t item = sq_workitem_create_with_qos_class(flags,
			qos_class, relative_priority, block);
	void *made = sq_workitem_block(item);
	sq_release(item);
	return (sq_block_t)made;
}

/*! Runs `block` on the calling thread as a block made with `flags`
 * would run (dispatch_block_perform); not copied.
 * \param flags SQ_BLOCK_* values, or'ed.
 * \param block the body. */
SQ_INLINE void
sq_block_perform(sq_block_flags_t flags, sq_block_t SQ_NOESCAPE block)
{
	sq_workitem_t item = sq_workitem_create_f(flags, (void *)block,
			_sq_call_block);
	sq_workitem_perform(item);
	sq_release(item);
}

/*! sq_workitem_wait on the block's item (dispatch_block_wait).
 * \param block a block made by sq_block_create.
 * \param timeout as for sq_group_wait.
 * \return 0 once it has run or been cancelled, non-zero when `timeout`
 *         passed first. */
SQ_INLINE intptr_t
sq_block_wait(sq_block_t block, sq_time_t timeout)
{
	return sq_workitem_wait(_sq_workitem_for_block("sq_block_wait",
			(const void *)block), timeout);
}

/*! Submits `notification` to `queue` once `block` has run or been
 * cancelled (dispatch_block_notify).
 * \param block a block made by sq_block_create.
 * \param queue where the notification runs.
 * \param notification the block to submit; copied. */
SQ_INLINE void
sq_block_notify(sq_block_t block, sq_queue_t queue, sq_block_t notification)
{
	sq_workitem_notify(_sq_workitem_for_block("sq_block_notify",
			(const void *)block), queue, notification);
}

/*! Cancels the block: it never runs if it has not started
 *  (dispatch_block_cancel).
 *  \param block a block made by sq_block_create. */
SQ_INLINE void
sq_block_cancel(sq_block_t block)
{
	sq_workitem_cancel(_sq_workitem_for_block("sq_block_cancel",
			(const void *)block));
}

/*! Whether the block has been cancelled (dispatch_block_testcancel).
 *  \param block a block made by sq_block_create.
 *  \return non-zero once it has been cancelled. */
SQ_INLINE intptr_t
sq_block_testcancel(sq_block_t block)
{
	return sq_workitem_testcancel(_sq_workitem_for_block(
			"sq_block_testcancel", (const void *)block));
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_WORKITEM_H */
