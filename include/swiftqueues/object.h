/*!
 * \defgroup swiftqueues_object The object model
 * \ingroup swiftqueues
 *
 * The object model shared by queues, groups, semaphores,
 * work items (and, later, sources): reference counting, context, finalizer,
 * suspension and activation.
 *
 * Thread safety: retain, release, suspend and resume may be called from
 * any thread.
 *
 * \par Misuse
 * Releasing more often than retained ("SwiftQueues: sq_release:
 * over-release of ..."), releasing the last reference of a queue that is
 * still inactive or suspended, retaining a destroyed object, resuming an
 * object that is not suspended ("SwiftQueues: sq_resume: over-resume of
 * ...") and more suspensions than the counter holds stop the process.
 * @{
 */
#ifndef SWIFTQUEUES_OBJECT_H
#define SWIFTQUEUES_OBJECT_H

#include <swiftqueues/base.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*!
 * Any SwiftQueues object (sq_queue_t, sq_group_t, sq_semaphore_t,
 * sq_workitem_t, ...). A plain pointer so every object type converts to it
 * without a cast, as dispatch_object_t does in C.
 */
typedef void *sq_object_t;

/*!
 * Adds a reference (dispatch_retain). Global and main queues ignore retain
 * and release. Retaining an object already destroyed stops the process
 * ("SwiftQueues: sq_retain: ... was already released").
 * \param object any SwiftQueues object.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_retain(sq_object_t object);

/*!
 * Drops a reference. When the last one goes, the object is destroyed
 * asynchronously: pending work still runs first (a queue with tasks stays
 * alive until they have run), then the finalizer, if one is set and the
 * context is not NULL, runs with the context on the object's target queue
 * (the default global queue for objects without one) (dispatch_release).
 * Releasing an object more times than it was retained stops the process
 * ("SwiftQueues: sq_release: over-release of <kind> 'label'"), as does
 * releasing the last reference of a queue still inactive or suspended
 * ("... release of suspended queue 'label'").
 * \param object any SwiftQueues object.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_release(sq_object_t object);

/*!
 * The application-defined context (dispatch_get_context).
 * \param object any SwiftQueues object.
 * \return the context, NULL until set.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
void *SQ_NULLABLE
sq_get_context(sq_object_t object);

/*!
 * Sets the application-defined context (dispatch_set_context). Ignored on
 * global queues and the main queue.
 * \param object any SwiftQueues object.
 * \param context the pointer to keep; not retained or freed.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_set_context(sq_object_t object, void *SQ_NULLABLE context);

/*!
 * Sets the function called with the context after the last release
 * (only if the context is not NULL at that moment), on the object's target
 * queue (dispatch_set_finalizer_f).
 * \param object any SwiftQueues object.
 * \param finalizer the function; NULL removes it.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_set_finalizer_f(sq_object_t object, sq_function_t SQ_NULLABLE finalizer);

/*!
 * Suspends a queue (or source): tasks already running finish; no new task
 * starts until every suspend is balanced by a resume. Counted. Ignored on
 * global queues and on the main queue (dispatch_suspend). More suspensions
 * than the counter holds stop the process ("SwiftQueues: sq_suspend: too
 * many suspends of queue 'label'").
 * \param object a queue or source.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_suspend(sq_object_t object);

/*!
 * Balances one sq_suspend (dispatch_resume). Resuming an object that is not
 * suspended stops the process ("SwiftQueues: sq_resume: over-resume of
 * queue 'label'"); resuming an inactive object with no suspension
 * activates it.
 * \param object a queue or source.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_resume(sq_object_t object);

/*!
 * Activates an object created inactive (sq_queue_attr_make_initially_inactive):
 * its tasks may run from now on. Activating an active object does nothing
 * (dispatch_activate). A new source is inactive until activated too.
 * \param object an inactive queue or a source.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_activate(sq_object_t object);

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_OBJECT_H */
