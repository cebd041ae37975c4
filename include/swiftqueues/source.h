/*!
 * \defgroup swiftqueues_source Dispatch sources and sq_after
 * \ingroup swiftqueues
 *
 * Dispatch sources (libdispatch's source.h, renamed) and
 * delayed submission (sq_after).
 *
 * A source watches a system event — a timer, a readable or writable
 * descriptor, a signal, a process exit, a file-system change — or a value
 * the program merges itself, and submits its event handler to its target
 * queue when the event occurs. Events that arrive while the handler is
 * queued or running coalesce into one delivery (get_data tells how much);
 * a handler never runs concurrently with itself. All sources are watched
 * by one manager thread running a libevent loop.
 *
 * A new source is inactive: nothing is delivered until sq_activate or
 * sq_resume. Cancellation is asynchronous and final: a handler already
 * running finishes, then the cancel handler runs once, after the last event
 * handler (the place to close the descriptor). A suspended source runs its
 * cancel handler when resumed, as libdispatch does.
 *
 * After fork() the child has a fresh runtime: it can create and use new
 * sources, but a source made before the fork (its registration belongs to
 * the parent) stops the process with a "SwiftQueues:" message when used;
 * sq_release on it is allowed and does nothing. Signal dispositions the
 * runtime installed are the program's own again in the child.
 *
 * \par Errors
 * sq_source_create returns NULL with errno set: EBADF (the descriptor is
 * not open), ENOENT (a watched file is gone), EINVAL (a bad signal number,
 * type or mask bits), ENOTSUP (SQ_PROC_FORK, SQ_PROC_EXEC, SQ_PROC_SIGNAL),
 * EMFILE, ENFILE, EAGAIN or ENOSPC (a descriptor, a thread or an inotify
 * watch could not be had; the same call succeeds once they are free).
 * sq_source_set_timer on a source that is not a timer stops the process.
 * @{
 */
#ifndef SWIFTQUEUES_SOURCE_H
#define SWIFTQUEUES_SOURCE_H

#include <swiftqueues/base.h>
#include <swiftqueues/object.h>
#include <swiftqueues/queue.h>
#include <swiftqueues/time.h>
#include <swiftqueues/workitem.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! A dispatch source (an object: sq_retain, sq_release, sq_suspend, sq_resume, sq_activate). */
typedef struct sq_source_s *sq_source_t;
/*! What a source watches: one of the SQ_SOURCE_TYPE_* constants. */
typedef const struct sq_source_type_s *sq_source_type_t;

SQ_EXPORT const struct sq_source_type_s _sq_source_type_data_add;
SQ_EXPORT const struct sq_source_type_s _sq_source_type_data_or;
SQ_EXPORT const struct sq_source_type_s _sq_source_type_data_replace;
SQ_EXPORT const struct sq_source_type_s _sq_source_type_read;
SQ_EXPORT const struct sq_source_type_s _sq_source_type_write;
SQ_EXPORT const struct sq_source_type_s _sq_source_type_signal;
SQ_EXPORT const struct sq_source_type_s _sq_source_type_timer;
SQ_EXPORT const struct sq_source_type_s _sq_source_type_proc;
SQ_EXPORT const struct sq_source_type_s _sq_source_type_vnode;

/*! Merged values add up; handle 0, mask 0. get_data: the sum. */
#define SQ_SOURCE_TYPE_DATA_ADD (&_sq_source_type_data_add)
/*! Merged values are OR-ed, limited to `mask`. get_data: the union. */
#define SQ_SOURCE_TYPE_DATA_OR (&_sq_source_type_data_or)
/*! Each merge replaces the value (0 delivers nothing). */
#define SQ_SOURCE_TYPE_DATA_REPLACE (&_sq_source_type_data_replace)
/*! handle: a descriptor. get_data: bytes readable (an estimate; 0 at end of
 * file, delivered once). Regular files are always readable. */
#define SQ_SOURCE_TYPE_READ (&_sq_source_type_read)
/*! handle: a descriptor. get_data: positive while writable (an estimate of
 * the room in its buffer). */
#define SQ_SOURCE_TYPE_WRITE (&_sq_source_type_write)
/*! handle: a signal number. get_data: deliveries since the last handler
 * run (each delivery counts: queued real-time signals exactly). While a
 * signal source is active the signal is caught (its default action does
 * not happen), whatever the signal masks of the program's threads: a
 * runtime thread keeps exactly the watched numbers unblocked, so a signal
 * the program blocks everywhere is still delivered (a signal sent to one
 * thread, with pthread_kill, stays that thread's). When the last source for
 * a number is cancelled, the disposition from before the first one (SIG_IGN,
 * SIG_DFL or a program handler) comes back, unless the program installed
 * its own in between: that one stays. sq_activate (or the sq_resume that
 * activates) returns once the signal is caught: a signal raised right
 * after it reaches the source, so no SIG_IGN is needed first. */
#define SQ_SOURCE_TYPE_SIGNAL (&_sq_source_type_signal)
/*! Configure with sq_source_set_timer. get_data: fires since the last run. */
#define SQ_SOURCE_TYPE_TIMER (&_sq_source_type_timer)
/*! handle: a pid; mask: SQ_PROC_EXIT. get_data: the events seen. A pid
 * that does not exist (a child already reaped, or none at all) delivers
 * SQ_PROC_EXIT at once, as Darwin's libdispatch does. */
#define SQ_SOURCE_TYPE_PROC (&_sq_source_type_proc)
/*! handle: a descriptor of a file or directory; mask: SQ_VNODE_* flags.
 * get_data: the events seen (inotify). */
#define SQ_SOURCE_TYPE_VNODE (&_sq_source_type_vnode)

/* The types as functions, for languages that cannot take the address of
 * an incomplete type (Swift imports these; not the macros above). */
/*! SQ_SOURCE_TYPE_DATA_ADD as a function.
 *  \return SQ_SOURCE_TYPE_DATA_ADD. */
SQ_INLINE sq_source_type_t
sq_source_type_data_add(void)
{
	return SQ_SOURCE_TYPE_DATA_ADD;
}

/*! SQ_SOURCE_TYPE_DATA_OR as a function.
 *  \return SQ_SOURCE_TYPE_DATA_OR. */
SQ_INLINE sq_source_type_t
sq_source_type_data_or(void)
{
	return SQ_SOURCE_TYPE_DATA_OR;
}

/*! SQ_SOURCE_TYPE_DATA_REPLACE as a function.
 *  \return SQ_SOURCE_TYPE_DATA_REPLACE. */
SQ_INLINE sq_source_type_t
sq_source_type_data_replace(void)
{
	return SQ_SOURCE_TYPE_DATA_REPLACE;
}

/*! SQ_SOURCE_TYPE_READ as a function.
 *  \return SQ_SOURCE_TYPE_READ. */
SQ_INLINE sq_source_type_t
sq_source_type_read(void)
{
	return SQ_SOURCE_TYPE_READ;
}

/*! SQ_SOURCE_TYPE_WRITE as a function.
 *  \return SQ_SOURCE_TYPE_WRITE. */
SQ_INLINE sq_source_type_t
sq_source_type_write(void)
{
	return SQ_SOURCE_TYPE_WRITE;
}

/*! SQ_SOURCE_TYPE_SIGNAL as a function.
 *  \return SQ_SOURCE_TYPE_SIGNAL. */
SQ_INLINE sq_source_type_t
sq_source_type_signal(void)
{
	return SQ_SOURCE_TYPE_SIGNAL;
}

/*! SQ_SOURCE_TYPE_TIMER as a function.
 *  \return SQ_SOURCE_TYPE_TIMER. */
SQ_INLINE sq_source_type_t
sq_source_type_timer(void)
{
	return SQ_SOURCE_TYPE_TIMER;
}

/*! SQ_SOURCE_TYPE_PROC as a function.
 *  \return SQ_SOURCE_TYPE_PROC. */
SQ_INLINE sq_source_type_t
sq_source_type_proc(void)
{
	return SQ_SOURCE_TYPE_PROC;
}

/*! SQ_SOURCE_TYPE_VNODE as a function.
 *  \return SQ_SOURCE_TYPE_VNODE. */
SQ_INLINE sq_source_type_t
sq_source_type_vnode(void)
{
	return SQ_SOURCE_TYPE_VNODE;
}

/*!
 * \name Process events (SQ_SOURCE_TYPE_PROC masks)
 * Linux reports exits (through a pidfd); FORK, EXEC and
 * SIGNAL would need the netlink process connector (root) or ptrace, so a
 * mask asking for them fails with ENOTSUP.
 */
/*! @{ */
/*! The process exited (EXIT; FORK, EXEC and SIGNAL fail with ENOTSUP). */
#define SQ_PROC_EXIT 0x80000000ul
#define SQ_PROC_FORK 0x40000000ul
#define SQ_PROC_EXEC 0x20000000ul
#define SQ_PROC_SIGNAL 0x08000000ul
/*! @} */

/*!
 * \name File-system events (SQ_SOURCE_TYPE_VNODE masks)
 * Through inotify:
 *   DELETE  the object was unlinked (its link count reached 0; directories:
 *           removed)
 *   WRITE   contents changed (directories: an entry was added, removed or
 *           renamed)
 *   EXTEND  a file grew
 *   ATTRIB  metadata changed
 *   LINK    the link count changed
 *   RENAME  the object was renamed or moved (it stays watched)
 *   REVOKE  the file system was unmounted
 */
/*! @{ */
/*! One event each: DELETE, WRITE, EXTEND, ATTRIB, LINK, RENAME, REVOKE (above). */
#define SQ_VNODE_DELETE 0x1ul
#define SQ_VNODE_WRITE 0x2ul
#define SQ_VNODE_EXTEND 0x4ul
#define SQ_VNODE_ATTRIB 0x8ul
#define SQ_VNODE_LINK 0x10ul
#define SQ_VNODE_RENAME 0x20ul
#define SQ_VNODE_REVOKE 0x40ul
/*! @} */

/*! Timer mask flag: fire on time, ignoring leeway. */
#define SQ_TIMER_STRICT 0x1ul

/*! The largest leeway a timer is given, in ns (1 s): a larger leeway,
 * including INT64_MAX and (uint64_t)-1 (libdispatch's "any leeway"), is
 * treated as this. See sq_source_set_timer for the whole policy. */
#define SQ_TIMER_LEEWAY_MAX 1000000000ull

/*!
 * Creates a source (inactive) that submits its handlers to `queue` (NULL:
 * the default global queue). Returns NULL with errno set when the outside
 * world says no: EBADF (descriptor), ENOENT (a watched file is gone),
 * EINVAL (signal number, unknown type or mask bits), ENOTSUP (a process
 * event Linux cannot report); EMFILE or ENFILE when a descriptor the
 * source or the event loop needs cannot be had, EAGAIN when a thread
 * cannot, ENOSPC when a file-system source's inotify watch cannot (the
 * per-user limit, fs.inotify.max_user_watches); the same call succeeds
 * once they are free again. Timer and
 * data sources are made even then: they start working when the event
 * loop can start, as sq_after waits for it (dispatch_source_create).
 * \param type an SQ_SOURCE_TYPE_* value.
 * \param handle a descriptor, signal number or pid, by type (0 for timer
 *        and data sources).
 * \param mask the type's flags (SQ_PROC_*, SQ_VNODE_*, SQ_TIMER_STRICT,
 *        the DATA_OR bits), else 0.
 * \param queue where the handlers run (NULL: the default global queue).
 * \return a new, inactive source (the caller owns one reference), or NULL
 *         with errno set.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_source_t SQ_NULLABLE
sq_source_create(sq_source_type_t type, uintptr_t handle, uintptr_t mask,
		sq_queue_t SQ_NULLABLE queue);

/*!
 * Sets the event handler: called with the source's context at call time,
 * once per delivery, never concurrently with itself
 * (dispatch_source_set_event_handler_f). Out of memory stops the process
 * ("SwiftQueues: sq_source_set_event_handler: out of memory").
 * \param source the source.
 * \param handler the function; NULL removes it.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_source_set_event_handler_f(sq_source_t source,
		sq_function_t SQ_NULLABLE handler);

/*!
 * Sets the cancel handler: called once, with the source's context, after
 * the last event handler; the place to close the descriptor
 * (dispatch_source_set_cancel_handler_f).
 * \param source the source.
 * \param handler the function; NULL removes it.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_source_set_cancel_handler_f(sq_source_t source,
		sq_function_t SQ_NULLABLE handler);

/*! The registration handler: called once, when the source starts watching
 * (after the first resume or activate), before any event handler
 * (dispatch_source_set_registration_handler_f).
 * \param source the source.
 * \param handler the function; NULL removes it. */
SQ_EXPORT SQ_NOTHROW
void
sq_source_set_registration_handler_f(sq_source_t source,
		sq_function_t SQ_NULLABLE handler);

/*! Stops the source, asynchronously and for good: a running handler
 * finishes, then the cancel handler runs once. Idempotent; any thread
 * (dispatch_source_cancel).
 * \param source the source. */
SQ_EXPORT SQ_NOTHROW
void
sq_source_cancel(sq_source_t source);

/*! Whether the source has been cancelled (dispatch_source_testcancel).
 * \param source the source.
 * \return non-zero once sq_source_cancel was called. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
intptr_t
sq_source_testcancel(sq_source_t source);

/*! The handle given at creation (dispatch_source_get_handle).
 * \param source the source.
 * \return the handle (0 for timer and data sources). */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
uintptr_t
sq_source_get_handle(sq_source_t source);

/*! The mask given at creation (dispatch_source_get_mask).
 * \param source the source.
 * \return the mask. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
uintptr_t
sq_source_get_mask(sq_source_t source);

/*! The data of a delivery (dispatch_source_get_data).
 * \param source the source.
 * \return inside a handler, the data of the delivery being handled (see
 *         each SQ_SOURCE_TYPE_*); elsewhere, that of the latest delivery. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
uintptr_t
sq_source_get_data(sq_source_t source);

/*! Merges `value` into a DATA_ADD / DATA_OR / DATA_REPLACE source; from any
 * thread. Ignored on other types and after cancel
 * (dispatch_source_merge_data).
 * \param source the source.
 * \param value added, OR-ed or stored, by type. */
SQ_EXPORT SQ_NOTHROW
void
sq_source_merge_data(sq_source_t source, uintptr_t value);

/*!
 * Arms a timer source: first fire at `start` (SQ_TIME_NOW: at once; an
 * sq_walltime value: on the wall clock), then every `interval` ns
 * (SQ_TIME_FOREVER: once). Re-arming a running timer replaces its schedule.
 * Calling it on a source that is not a timer stops the process
 * ("SwiftQueues: sq_source_set_timer: <type> source is not a timer")
 * (dispatch_source_set_timer).
 *
 * Leeway policy. The leeway used is the one given, capped at
 * SQ_TIMER_LEEWAY_MAX (so INT64_MAX or (uint64_t)-1 means 1 s) and, for a
 * repeating timer, at half its interval (so it still fires once per
 * interval); SQ_TIMER_STRICT makes it 0. Leeway only ever buys a merged
 * wake-up: a timer fires at its deadline, unless waiting (no longer than
 * its leeway) lets the same wake-up also serve another timer's deadline.
 * Precisely, the loop wakes at the latest deadline that comes no later
 * than the earliest `deadline + leeway` of all armed timers, and fires
 * every timer whose deadline has passed. A lone timer, whatever its
 * leeway, fires at its deadline; a timer never fires before it.
 *
 * Precision and its cost. A timer with less than 90 us of leeway (leeway
 * 0, and every sq_after_f) is prepared 200 us ahead and its handler
 * started by a worker that spins for the last 90 us: on time to a few
 * microseconds on an idle machine, for about 0.1 ms of CPU per deadline.
 * Give 90 us of leeway or more to a timer that does not need it.
 *
 * \param source a timer source.
 * \param start the first deadline.
 * \param interval nanoseconds between fires, or SQ_TIME_FOREVER for one.
 * \param leeway how late a fire may come, in nanoseconds.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_source_set_timer(sq_source_t source, sq_time_t start, uint64_t interval,
		uint64_t leeway);

/*!
 * Submits `function(context)` to `queue` at `when`. A timer entry on the
 * manager thread, not a source: one allocation, and thousands pending are
 * cheap. SQ_TIME_FOREVER never submits it. If the event loop cannot start
 * (no descriptor or thread to spare), the entry waits for it: the loop is
 * tried again every 10 ms and on every call that needs it, and the work
 * is submitted once it runs (at once if `when` has passed), late but
 * never lost (dispatch_after_f). Out of memory stops the process
 * ("SwiftQueues: sq_after_f: out of memory").
 * \param when the deadline; never submitted before it.
 * \param queue the queue; retained until then.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_after_f(sq_time_t when, sq_queue_t queue, void *SQ_NULLABLE context,
		sq_function_t function);

/*!
 * sq_after_f that may submit up to `leeway` nanoseconds after `when` (a
 * SwiftQueues extension). The leeway lets the manager thread serve this
 * deadline with another one's wake-up, by the rule of sq_source_set_timer,
 * and with 90 us or more it skips the precise path's spinning worker:
 * for deadlines that need no precision (timeouts, watchdogs, retries).
 * Never submits before `when`; leeway 0 is sq_after_f.
 * \param when the deadline.
 * \param leeway how late it may be submitted, in nanoseconds.
 * \param queue the queue.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_after_leeway_f(sq_time_t when, uint64_t leeway, sq_queue_t queue,
		void *SQ_NULLABLE context, sq_function_t function);

/*!
 * Submits a work item to `queue` at `when`: cancel the item
 * (sq_workitem_cancel) and it never runs — a cancellable sq_after
 * (dispatch_after with a dispatch block).
 * \param when the deadline.
 * \param queue the queue.
 * \param item the item; retained until submitted.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_after_workitem(sq_time_t when, sq_queue_t queue, sq_workitem_t item);

/* Handlers with their own context (used by the block forms below): ctx is
 * passed instead of the source's context, and `destructor(ctx)` runs when
 * the handler is replaced or the source destroyed. kind: 0 event, 1 cancel,
 * 2 registration. */
SQ_EXPORT SQ_NOTHROW
void
_sq_source_set_handler(sq_source_t source, int kind,
		sq_function_t SQ_NULLABLE handler, void *SQ_NULLABLE ctx,
		sq_function_t SQ_NULLABLE destructor);

#ifdef __BLOCKS__
SQ_INLINE void
_sq_release_block(void *SQ_NULLABLE block)
{
	_Block_release(block);
}

SQ_INLINE void
_sq_source_set_block(sq_source_t source, int kind, sq_block_t SQ_NULLABLE b)
{
	if (b == NULL) {
		_sq_source_set_handler(source, kind, NULL, NULL, NULL);
		return;
	}
	_sq_source_set_handler(source, kind, _sq_call_block,
			_Block_copy((const void *)b), _sq_release_block);
}

/*! sq_source_set_event_handler_f with a block (copied; NULL removes the
 *  handler; released when replaced or the source is destroyed).
 *  \param source the source.
 *  \param block the handler, or NULL. */
SQ_INLINE void
sq_source_set_event_handler(sq_source_t source, sq_block_t SQ_NULLABLE block)
{
	_sq_source_set_block(source, 0, block);
}

/*! sq_source_set_cancel_handler_f with a block (copied; NULL removes the handler).
 *  \param source the source.
 *  \param block the handler, or NULL. */
SQ_INLINE void
sq_source_set_cancel_handler(sq_source_t source, sq_block_t SQ_NULLABLE block)
{
	_sq_source_set_block(source, 1, block);
}

/*! sq_source_set_registration_handler_f with a block (copied; NULL removes the handler).
 *  \param source the source.
 *  \param block the handler, or NULL. */
SQ_INLINE void
sq_source_set_registration_handler(sq_source_t source,
		sq_block_t SQ_NULLABLE block)
{
	_sq_source_set_block(source, 2, block);
}

/*! sq_after_f with a block: copied, released after it has run (dispatch_after).
 *  \param when the deadline.
 *  \param queue the queue.
 *  \param block the work. */
SQ_INLINE void
sq_after(sq_time_t when, sq_queue_t queue, sq_block_t block)
{
	sq_after_f(when, queue, _Block_copy((const void *)block),
			_sq_call_and_release_block);
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_SOURCE_H */
