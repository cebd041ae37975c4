/*!
 * \defgroup swiftqueues_executor Swift concurrency's global executor
 * \ingroup swiftqueues
 *
 * SwiftQueues as the global executor of Swift concurrency.
 *
 * The Swift concurrency runtime (libswift_Concurrency) lets a process
 * replace its executors through hook variables. sq_swift_executor_install
 * sets them so that every task job runs on SwiftQueues' root queues (job
 * priority picks the queue), delayed jobs (Task.sleep) on the event loop's
 * timers, and main-actor jobs on the main queue, which an async main drains.
 * The Swift module calls it from WorkQueue.installAsGlobalExecutor(); a C
 * program has no use for it.
 * @{
 */
#ifndef SWIFTQUEUES_EXECUTOR_H
#define SWIFTQUEUES_EXECUTOR_H

#include <swiftqueues/base.h>
#include <swiftqueues/queue.h>
#include <stdbool.h>
#include <stdint.h>

SQ_ASSUME_NONNULL_BEGIN

/*! A Swift executor reference (the two words of UnownedSerialExecutor). */
typedef struct {
	/*! The executor object. */
	void *SQ_NULLABLE identity;
	/*! Its SerialExecutor witness table, with flag bits. */
	uintptr_t implementation;
} sq_swift_executor_ref_t;

/*!
 * Installs the hooks. `main_executor` is the executor the main actor is to
 * run on (the Swift object of the main queue as a SerialExecutor). Returns
 * true if the hooks are ours (now or from an earlier call), false if
 * nothing was changed: no Swift concurrency runtime in the process, another
 * hook already set, called from inside a task, or after a job has run on
 * the default executor (too late: jobs would be left there);
 * sq_swift_executor_refusal() says which. Call it early, before any
 * task runs.
 * \param main_executor the main actor's executor.
 * \return true if the hooks are SwiftQueues', false if nothing changed.
 */
SQ_EXPORT SQ_NOTHROW
bool
sq_swift_executor_install(sq_swift_executor_ref_t main_executor);

/*! Whether sq_swift_executor_install succeeded in this process.
 *  \return true once the hooks are installed. */
SQ_EXPORT SQ_NOTHROW
bool
sq_swift_executor_installed(void);

/*!
 * Why the last call of sq_swift_executor_install returned false, as a
 * phrase (static storage); NULL if none did, or a later one succeeded.
 * Besides the cases above, an install is refused once a job has reached
 * Swift's default executor, even from the main thread: the library
 * watches that executor from its load until its first job (the runtime's
 * enqueue hooks, passed on at once and removed after that job).
 * \return the reason, or NULL.
 */
SQ_EXPORT SQ_NOTHROW
const char *SQ_NULLABLE
sq_swift_executor_refusal(void);

/*!
 * Runs a Swift job on the generic executor (no actor isolation) on the
 * calling thread: the function behind every job on the root queues.
 * \param job the Swift job.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_swift_job_run_generic(void *job);

/*!
 * Submits a Swift job to the root queue of its priority, to be run by
 * `func(job)`. Called from a job running on a worker, it goes to that
 * worker's next-job slot: it runs there when the current job returns, or
 * on another worker if the current job goes on for a while.
 * \param job the Swift job.
 * \param func runs the job (sq_swift_job_run_generic, or an executor's own).
 */
SQ_EXPORT SQ_NOTHROW
void
sq_swift_enqueue_task_job(void *job, sq_function_t func);

/*!
 * For a SerialExecutor's enqueue: if `job` is the job the calling thread is
 * running for the installed executor (the task is leaving it), records
 * `sq_async_f(queue, job, func)` to be done when that job returns — run in
 * place if `queue` is then idle — and returns true. Otherwise returns false
 * and the caller submits as usual.
 * \param queue the executor's queue.
 * \param job the Swift job.
 * \param func runs the job on `queue`.
 * \return true if the submission was deferred, false if the caller must
 *         submit.
 */
SQ_EXPORT SQ_NOTHROW
bool
sq_swift_defer_async_f(sq_queue_t queue, void *job, sq_function_t func);

SQ_ASSUME_NONNULL_END

/*! @} */

#endif /* SWIFTQUEUES_EXECUTOR_H */
