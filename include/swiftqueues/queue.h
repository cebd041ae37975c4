/*!
 * \defgroup swiftqueues_queue Dispatch queues
 * \ingroup swiftqueues
 *
 * Dispatch queues (libdispatch's queue.h, renamed).
 *
 * Serial queues run one task at a time in FIFO order; concurrent queues start
 * tasks in FIFO order and run them side by side, barriers excepted; the four
 * global queues are concurrent queues at fixed priorities; the main queue is
 * a serial queue drained by the main thread. A queue's tasks finally run on
 * SwiftQueues' worker pool (or, for sq_sync, on the calling thread).
 *
 * Thread safety: every call may be made from any thread, queue or task.
 *
 * \par Misuse
 * Misuse stops the process with one line on standard error,
 * "SwiftQueues: <call>: <what>": sq_sync / sq_barrier_sync on a serial
 * queue the calling thread already runs (directly or through its chain of
 * targets), or on the main queue from the main thread, would deadlock and
 * stops it; so does a cycle of target queues (sq_set_target_queue), running
 * out of memory, or a pool that cannot start a single worker thread.
 * sq_main, sq_main_queue_drain and sq_main_queue_run_until called on a
 * thread other than the main thread stop it too. A failed sq_assert_queue
 * or sq_assert_queue_not prints the queue's label and aborts. Setting the
 * target of a global queue or of the main queue has no effect.
 * @{
 */
#ifndef SWIFTQUEUES_QUEUE_H
#define SWIFTQUEUES_QUEUE_H

#include <swiftqueues/base.h>
#include <swiftqueues/object.h>
#include <swiftqueues/time.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! A dispatch queue (an object: sq_retain, sq_release, sq_suspend, sq_resume). */
typedef struct sq_queue_s *sq_queue_t;
/*! A queue's attributes, given to sq_queue_create (NULL: serial). */
typedef struct sq_queue_attr_s *sq_queue_attr_t;

/*! Work for sq_apply_f: called with the context and an iteration index. */
typedef void (*sq_apply_function_t)(void *SQ_NULLABLE context, size_t iteration);

/*! Work for sq_apply_range_f: called with the context and the iterations
 *  [begin, end) to run. */
typedef void (*sq_apply_range_function_t)(void *SQ_NULLABLE context,
		size_t begin, size_t end);

/* ---- Attributes ---- */

/*! A serial queue (the default): one task at a time, FIFO. */
#define SQ_QUEUE_SERIAL ((sq_queue_attr_t)NULL)

SQ_EXPORT struct sq_queue_attr_s _sq_queue_attr_concurrent;
SQ_EXPORT struct sq_queue_attr_s _sq_queue_attr_serial_inactive;
SQ_EXPORT struct sq_queue_attr_s _sq_queue_attr_concurrent_inactive;

/*! A concurrent queue: tasks start in FIFO order and may run in parallel. */
#define SQ_QUEUE_CONCURRENT (&_sq_queue_attr_concurrent)
/*! A serial queue created inactive: nothing runs before sq_activate. */
#define SQ_QUEUE_SERIAL_INACTIVE (&_sq_queue_attr_serial_inactive)
/*! A concurrent queue created inactive: nothing runs before sq_activate. */
#define SQ_QUEUE_CONCURRENT_INACTIVE (&_sq_queue_attr_concurrent_inactive)

/* The attributes as functions, for languages that cannot take the address
 * of an incomplete type (Swift imports these; not the macros above). */
/*! SQ_QUEUE_CONCURRENT as a function.
 *  \return SQ_QUEUE_CONCURRENT. */
SQ_INLINE sq_queue_attr_t
sq_queue_attr_concurrent(void)
{
	return SQ_QUEUE_CONCURRENT;
}

/*! SQ_QUEUE_CONCURRENT_INACTIVE as a function.
 *  \return SQ_QUEUE_CONCURRENT_INACTIVE. */
SQ_INLINE sq_queue_attr_t
sq_queue_attr_concurrent_inactive(void)
{
	return SQ_QUEUE_CONCURRENT_INACTIVE;
}

/*!
 * The inactive form of an attribute: a queue created with it accepts
 * tasks but runs none until sq_activate (dispatch_queue_attr_make_initially_inactive).
 * \param attr the attribute to start from (NULL: serial).
 * \return the inactive attribute; a constant, never released.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_queue_attr_t
sq_queue_attr_make_initially_inactive(sq_queue_attr_t SQ_NULLABLE attr);

/*!
 * How often a queue's tasks drain an autorelease pool (libdispatch's
 * dispatch_autorelease_frequency_t). Linux has no autorelease pools, so
 * the three are accepted and mean the same.
 */
typedef unsigned long sq_autorelease_frequency_t;
/*! \name Autorelease frequencies */
/*! @{ */
/*! INHERIT (the target's), WORK_ITEM (a pool per task), NEVER: accepted, all the same on Linux. */
#define SQ_AUTORELEASE_FREQUENCY_INHERIT 0ul
#define SQ_AUTORELEASE_FREQUENCY_WORK_ITEM 1ul
#define SQ_AUTORELEASE_FREQUENCY_NEVER 2ul
/*! @} */

/*!
 * `attr` with an autorelease frequency
 * (dispatch_queue_attr_make_with_autorelease_frequency). Accepted for
 * portability: a queue created with the result behaves as one created
 * with `attr`. A frequency that is not one of the three leaves `attr` as
 * it is, as libdispatch does.
 * \param attr the attribute to start from (NULL: serial).
 * \param frequency an SQ_AUTORELEASE_FREQUENCY_* value.
 * \return an attribute for sq_queue_create.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_queue_attr_t SQ_NULLABLE
sq_queue_attr_make_with_autorelease_frequency(sq_queue_attr_t SQ_NULLABLE attr,
		sq_autorelease_frequency_t frequency);

/* ---- Quality of service ---- */

/*!
 * Quality-of-service classes, libdispatch's values. Work of a higher class
 * runs before waiting work of a lower one, and on threads the system
 * schedules ahead of the lower classes' (see docs/PRIORITIES.md).
 * UNSPECIFIED means "no class of its own": a queue without one takes its
 * target's, and a program's own thread counts as DEFAULT.
 */
typedef unsigned int sq_qos_class_t;
/*! \name Quality-of-service classes */
/*! @{ */
/*! From the highest, USER_INTERACTIVE, USER_INITIATED, DEFAULT, UTILITY to BACKGROUND; UNSPECIFIED: no class of its own. */
#define SQ_QOS_CLASS_USER_INTERACTIVE 0x21u
#define SQ_QOS_CLASS_USER_INITIATED 0x19u
#define SQ_QOS_CLASS_DEFAULT 0x15u
#define SQ_QOS_CLASS_UTILITY 0x11u
#define SQ_QOS_CLASS_BACKGROUND 0x09u
#define SQ_QOS_CLASS_UNSPECIFIED 0x00u
/*! @} */
/*! Relative priorities run from this to 0 (within a class; lower first). */
#define SQ_QOS_MIN_RELATIVE_PRIORITY (-15)

/*!
 * An attribute with a QoS class and a relative priority
 * (dispatch_queue_attr_make_with_qos_class). A queue created with it and
 * no target of its own targets the global queue of that class.
 * \param attr the attribute to start from (NULL: serial).
 * \param qos_class one of the six SQ_QOS_CLASS_* values.
 * \param relative_priority SQ_QOS_MIN_RELATIVE_PRIORITY (-15) to 0;
 *        orders work within the class.
 * \return the attribute, or NULL (SQ_QUEUE_SERIAL: a plain serial queue)
 *         for a class that is not one of the six or a priority out of
 *         range, as libdispatch does. UNSPECIFIED on a NULL `attr` is a
 *         plain serial queue too.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_queue_attr_t SQ_NULLABLE
sq_queue_attr_make_with_qos_class(sq_queue_attr_t SQ_NULLABLE attr,
		sq_qos_class_t qos_class, int relative_priority);

/*!
 * The QoS class a queue was created with (dispatch_queue_get_qos_class).
 * \param queue the queue.
 * \param relative_priority_ptr if not NULL, receives the relative priority.
 * \return the class; a global queue's own class; SQ_QOS_CLASS_UNSPECIFIED
 *         (priority 0) for the main queue and a queue created without one.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_qos_class_t
sq_queue_get_qos_class(sq_queue_t queue,
		int *SQ_NULLABLE relative_priority_ptr);

/*!
 * The QoS class the calling thread runs at (qos_class_self).
 * \return the class of the work a worker runs (raised while it runs work
 *         of a higher class on that work's behalf); SQ_QOS_CLASS_DEFAULT on
 *         a thread of the program's own outside any work.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_qos_class_t
sq_qos_class_self(void);

/* ---- Global, main and current queues ---- */

/*! \name Global queue priorities */
/*! @{ */
/*! sq_get_global_queue's older priorities: HIGH, DEFAULT, LOW and BACKGROUND name the USER_INITIATED, DEFAULT, UTILITY and BACKGROUND classes. */
#define SQ_QUEUE_PRIORITY_HIGH 2
#define SQ_QUEUE_PRIORITY_DEFAULT 0
#define SQ_QUEUE_PRIORITY_LOW (-2)
#define SQ_QUEUE_PRIORITY_BACKGROUND (-32768) /* INT16_MIN, as a literal Swift imports */
/*! @} */

/*! sq_get_global_queue's flag: the class's overcommit queue. */
#define SQ_QUEUE_OVERCOMMIT ((uintptr_t)0x2)

/*! The target that means "the default global queue". */
#define SQ_TARGET_QUEUE_DEFAULT ((sq_queue_t)NULL)

/*!
 * The global concurrent queue for a QoS class (SQ_QOS_CLASS_*) or a
 * priority (HIGH is USER_INITIATED, DEFAULT and UNSPECIFIED are DEFAULT,
 * LOW is UTILITY, BACKGROUND is BACKGROUND; other values round to the
 * nearest priority). `flags`: 0, or SQ_QUEUE_OVERCOMMIT for the class's
 * overcommit queue: the same class and run queue, but each job queued on
 * it gets a worker of its own at once, an idle one or a new one beyond
 * the pool's width (up to SQ_MAX_THREADS), as libdispatch's overcommit
 * queues do; for work that may occupy its thread for long (spinning,
 * waiting on something the pool does not see). Retain, release, suspend,
 * resume and set_context are ignored on them (dispatch_get_global_queue).
 * \param identifier an SQ_QOS_CLASS_* value or an SQ_QUEUE_PRIORITY_* value.
 * \param flags 0 or SQ_QUEUE_OVERCOMMIT.
 * \return the global queue; never released.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_queue_t
sq_get_global_queue(intptr_t identifier, uintptr_t flags);

/*!
 * The main queue (dispatch_get_main_queue): a serial queue whose tasks run
 * on the main thread, one at a time and in order, only while that thread
 * drains it (sq_main, sq_main_queue_drain, sq_main_queue_run_until).
 * \return the main queue; retain, release, suspend and context changes are
 *         ignored on it.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_queue_t
sq_get_main_queue(void);

/*!
 * The queue whose task is running on the calling thread (the innermost one,
 * through nested sq_sync calls), or the default global queue outside any
 * task. For debugging and logging only: do not base logic on it
 * (dispatch_get_current_queue, deprecated there).
 * \return the current queue; not retained for the caller.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_queue_t
sq_get_current_queue(void);

/* ---- Creating and configuring queues ---- */

/*!
 * Creates a queue (dispatch_queue_create). A queue with pending tasks
 * stays alive until they have run, whatever its reference count.
 * \param label names the queue in thread names, debuggers and error
 *        messages; copied, unless it lies in the program's read-only
 *        memory (a string literal of the executable), which is kept by
 *        pointer; may be NULL.
 * \param attr SQ_QUEUE_SERIAL (NULL), SQ_QUEUE_CONCURRENT, an inactive
 *        form, or a value from the sq_queue_attr_make_* calls.
 * \return a new queue; the caller owns one reference (sq_release).
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_queue_t
sq_queue_create(const char *SQ_NULLABLE label, sq_queue_attr_t SQ_NULLABLE attr);

/*!
 * sq_queue_create and sq_set_target_queue in one step
 * (dispatch_queue_create_with_target).
 * \param label as for sq_queue_create.
 * \param attr as for sq_queue_create.
 * \param target the target queue (NULL: the default global queue).
 * \return a new queue; the caller owns one reference.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_queue_t
sq_queue_create_with_target(const char *SQ_NULLABLE label,
		sq_queue_attr_t SQ_NULLABLE attr, sq_queue_t SQ_NULLABLE target);

/*!
 * Makes `queue` (NULL: the default global queue) the target of `object`: the
 * object's work finally runs there, and a serial target serialises every
 * queue that targets it. Takes effect between tasks (dispatch_set_target_queue).
 * A cycle of targets stops the process ("SwiftQueues: sq_set_target_queue:
 * ..."); setting the target of a global queue or the main queue has no effect.
 * \param object a queue or a source.
 * \param queue the new target (NULL: the default global queue).
 */
SQ_EXPORT SQ_NOTHROW
void
sq_set_target_queue(sq_object_t object, sq_queue_t SQ_NULLABLE queue);

/*! Pass to sq_queue_get_label for the current queue's label. */
#define SQ_CURRENT_QUEUE_LABEL ((sq_queue_t)NULL)

/*!
 * A queue's label (dispatch_queue_get_label).
 * \param queue the queue, or SQ_CURRENT_QUEUE_LABEL (NULL) for the
 *        current queue.
 * \return the label given at creation, "" for a queue created without one;
 *         valid while the queue lives.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
const char *
sq_queue_get_label(sq_queue_t SQ_NULLABLE queue);

/*!
 * Associates `context` with `key` on `queue` (NULL context removes it).
 * `destructor`, if given, is called with the old context when it is
 * replaced or removed, or when the queue is destroyed. Global queues and the
 * main queue keep no specific data: the destructor runs at once
 * (dispatch_queue_set_specific).
 * \param queue the queue.
 * \param key compared as a pointer (the address of a static variable
 *        makes a good key).
 * \param context the value, or NULL to remove it.
 * \param destructor called with the old context; may be NULL.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_queue_set_specific(sq_queue_t queue, const void *key,
		void *SQ_NULLABLE context, sq_function_t SQ_NULLABLE destructor);

/*!
 * The context for `key` on `queue` itself (dispatch_queue_get_specific).
 * \param queue the queue.
 * \param key the key given to sq_queue_set_specific.
 * \return the context, or NULL when there is none.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
void *SQ_NULLABLE
sq_queue_get_specific(sq_queue_t queue, const void *key);

/*!
 * The context for `key` on the current queue or, failing that, on the
 * first queue of its target chain that has one (dispatch_get_specific).
 * \param key the key given to sq_queue_set_specific.
 * \return the first context found, or NULL (always NULL outside any task).
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
void *SQ_NULLABLE
sq_get_specific(const void *key);

/*! Stops the process unless the calling thread runs a task of `queue`
 * (directly or through a queue that targets it). The main thread always
 * counts as running on the main queue, inside its tasks or not, as with
 * libdispatch (so sq_assert_queue_not(main queue) fails there)
 * (dispatch_assert_queue). A failure prints "SwiftQueues: sq_assert_queue:
 * not running on queue 'label'" and aborts.
 * \param queue the queue the caller expects to run on. */
SQ_EXPORT SQ_NOTHROW
void
sq_assert_queue(sq_queue_t queue);

/*! Stops the process unless the calling thread runs `queue` exclusively
 * (a serial queue, or a barrier task of a concurrent one)
 * (dispatch_assert_queue_barrier). A failure prints "SwiftQueues:
 * sq_assert_queue_barrier: not running alone on queue 'label'" and aborts.
 * \param queue the queue the caller expects to run alone on. */
SQ_EXPORT SQ_NOTHROW
void
sq_assert_queue_barrier(sq_queue_t queue);

/*! Stops the process if the calling thread runs a task of `queue`
 * (dispatch_assert_queue_not). A failure prints "SwiftQueues:
 * sq_assert_queue_not: running on queue 'label'" and aborts.
 * \param queue the queue the caller expects not to run on. */
SQ_EXPORT SQ_NOTHROW
void
sq_assert_queue_not(sq_queue_t queue);

/*
 * The three assertions in programs built with SQ_DEBUG defined non-zero
 * (libdispatch's DISPATCH_DEBUG); otherwise they evaluate `queue` only.
 */
#if defined(SQ_DEBUG) && SQ_DEBUG
#define sq_assert_queue_debug(queue) sq_assert_queue(queue)
#define sq_assert_queue_barrier_debug(queue) sq_assert_queue_barrier(queue)
#define sq_assert_queue_not_debug(queue) sq_assert_queue_not(queue)
#else
/*! sq_assert_queue when SQ_DEBUG is non-zero; otherwise only evaluates `queue`.
 *  \param queue as for sq_assert_queue. */
#define sq_assert_queue_debug(queue) ((void)(queue))
/*! sq_assert_queue_barrier when SQ_DEBUG is non-zero; otherwise only evaluates `queue`.
 *  \param queue as for sq_assert_queue_barrier. */
#define sq_assert_queue_barrier_debug(queue) ((void)(queue))
/*! sq_assert_queue_not when SQ_DEBUG is non-zero; otherwise only evaluates `queue`.
 *  \param queue as for sq_assert_queue_not. */
#define sq_assert_queue_not_debug(queue) ((void)(queue))
#endif

/* ---- Submitting work ---- */

/*!
 * Submits `function(context)` to `queue` and returns at once
 * (dispatch_async_f). It runs later on a worker of the pool (on the main
 * thread for the main queue); the submission happens-before the call.
 * Running out of memory, or a pool that cannot start a single worker,
 * stops the process ("SwiftQueues: sq_async_f: ...").
 * \param queue the queue; retained until the function has run.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_async_f(sq_queue_t queue, void *SQ_NULLABLE context, sq_function_t function);

/*!
 * Submits `function(context)` to `queue` as a fork-join child: as
 * sq_async_f, but on a global queue with no start order (no libdispatch
 * counterpart; oneTBB's task_group::run). Submitted from a worker, it goes
 * to that worker's own run queue, and the worker runs the newest such
 * child first, so a tree of them runs depth first on the thread that made
 * it while idle workers take the oldest (its biggest subtrees); one look
 * in 8 takes the oldest entry anyway, so a child that spawns more cannot
 * hold older work back. From any other thread, or on any other queue
 * (serial, concurrent, overcommit), it is sq_async_f and keeps the
 * queue's order. Errors as sq_async_f ("SwiftQueues: sq_spawn_f: ...").
 * \param queue the queue; retained until the function has run.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_spawn_f(sq_queue_t queue, void *SQ_NULLABLE context, sq_function_t function);

/*!
 * Runs `function(context)` on `queue` and returns when it has run. On a
 * serial queue it runs on the calling thread, after every task submitted
 * before it. Calling it on a serial queue the thread already runs (directly
 * or through a target chain) is a deadlock and stops the process; so is
 * calling it on the main queue (or a queue that targets it) from the main
 * thread, which runs the main queue, as in libdispatch
 * ("SwiftQueues: sq_sync_f: deadlock: queue 'label' is already running on
 * this thread"). On a concurrent queue it runs beside the
 * queue's other tasks. Everything the function did is visible to the
 * caller when this returns (dispatch_sync_f).
 * \param queue the queue.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_sync_f(sq_queue_t queue, void *SQ_NULLABLE context, sq_function_t function);

/*!
 * Submits a barrier: on a concurrent queue it starts after every task before
 * it has finished, and runs alone; tasks after it wait for it. On a serial
 * queue it is an ordinary task. Global queues treat it as an ordinary task
 * (dispatch_barrier_async_f). Returns at once.
 * \param queue the queue (a concurrent one made by sq_queue_create for
 *        barrier behaviour).
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_barrier_async_f(sq_queue_t queue, void *SQ_NULLABLE context,
		sq_function_t function);

/*!
 * The synchronous form of sq_barrier_async_f: returns once the barrier has
 * run (dispatch_barrier_sync_f). The deadlock rules of sq_sync_f apply.
 * \param queue the queue.
 * \param context passed to `function`.
 * \param function the work.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_barrier_sync_f(sq_queue_t queue, void *SQ_NULLABLE context,
		sq_function_t function);

/*! Pass to sq_apply_f / sq_apply_range_f to let the pool choose (the
 *  default global queue). */
#define SQ_APPLY_AUTO ((sq_queue_t)NULL)

/*!
 * Calls `function(context, i)` for every i in [0, iterations) and returns
 * when all have run. On a concurrent queue (or SQ_APPLY_AUTO) the calls run
 * in parallel and the calling thread takes part; on a serial queue they run
 * one after another on that queue. A nested apply runs its iterations on the
 * calling thread, so nesting never deadlocks or oversubscribes the pool.
 * Idle workers join the caller; with none free the caller runs every
 * iteration itself, so the call never waits for a worker. The iterations
 * count as work of `queue`: they start after a barrier submitted before
 * the call, and a barrier submitted during it waits for them
 * (dispatch_apply_f). Running out of memory stops the process
 * ("SwiftQueues: sq_apply_f: out of memory").
 * \param iterations how many calls.
 * \param queue a concurrent or serial queue, or SQ_APPLY_AUTO.
 * \param context passed to `function`.
 * \param function called with the context and each index, in no set order.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_apply_f(size_t iterations, sq_queue_t SQ_NULLABLE queue,
		void *SQ_NULLABLE context, sq_apply_function_t function);

/*!
 * sq_apply_f in ranges: calls `function(context, begin, end)` for disjoint
 * ranges that together cover [0, iterations) exactly once, and returns when
 * all have run. The body loops over its range itself, so the compiler can
 * inline and vectorize it, and a call costs the same however many
 * iterations its range holds.
 *
 * The runtime sizes the ranges while the loop runs: each thread times its
 * last range and aims the next at about 50 us of work, and no range takes
 * more than a quarter of what is left per thread, so cheap bodies get few
 * large ranges and costly or uneven ones small ranges that balance. The
 * queue argument, the calling thread's part, nesting (a nested call runs
 * its whole range on the calling thread: one call [0, iterations)) and
 * serial queues (one call, on that queue) are as for sq_apply_f. No
 * libdispatch counterpart.
 * \param iterations the size of the index space.
 * \param queue a concurrent or serial queue, or SQ_APPLY_AUTO.
 * \param context passed to `function`.
 * \param function called with the context and a range [begin, end).
 */
SQ_EXPORT SQ_NOTHROW
void
sq_apply_range_f(size_t iterations, sq_queue_t SQ_NULLABLE queue,
		void *SQ_NULLABLE context, sq_apply_range_function_t function);

/* ---- The main queue ---- */

/*!
 * Drains the main queue on the main thread forever (dispatch_main). Never
 * returns: exit from a task (exit(3)) to end the program. On any other
 * thread it stops the process ("SwiftQueues: sq_main: called on a thread
 * other than the main thread").
 */
SQ_EXPORT __attribute__((noreturn))
void
sq_main(void);

/*!
 * Runs the tasks on the main queue now, without waiting for more; returns
 * how many ran. For programs with their own event loop (GLib, libevent, a
 * game loop): poll sq_main_queue_fd() and call this when it is readable.
 * Must be called on the main thread: elsewhere it stops the process
 * ("SwiftQueues: sq_main_queue_drain: called on a thread other than ...").
 * No libdispatch counterpart.
 * \return the number of tasks that ran.
 */
SQ_EXPORT SQ_NOTHROW
size_t
sq_main_queue_drain(void);

/*!
 * A file descriptor (an eventfd) that becomes readable when the main queue
 * has tasks; sq_main_queue_drain makes it unreadable again. Do not read,
 * write or close it. Made on the first call (the main queue needs none
 * otherwise); returns -1 with errno (EMFILE, ENFILE) when no descriptor
 * can be had, and a later call tries again. Any thread.
 * \return the descriptor, or -1 with errno set.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
int
sq_main_queue_fd(void);

/*!
 * Drains the main queue on the main thread, waiting for tasks, until
 * `condition(context)` returns true or `deadline` passes. Returns whether
 * the condition became true. `condition` may be NULL: then it runs until
 * the deadline.
 *
 * The condition is checked at the start, after every main-queue task,
 * after every task that finishes on a worker of the pool (any queue, and
 * Swift tasks once SwiftQueues is their executor) and after every
 * sq_main_queue_wakeup(). A thread of the program's own that makes it
 * true calls sq_main_queue_wakeup() afterwards. Off the main thread it
 * stops the process ("SwiftQueues: sq_main_queue_run_until: called on a
 * thread other than ...").
 * \param deadline when to give up (SQ_TIME_FOREVER: never).
 * \param condition the predicate, called on the main thread; may be NULL.
 * \param context passed to `condition`.
 * \return true if the condition became true, false at the deadline.
 */
SQ_EXPORT SQ_NOTHROW
bool
sq_main_queue_run_until(sq_time_t deadline,
		bool (*SQ_NULLABLE condition)(void *SQ_NULLABLE context),
		void *SQ_NULLABLE context);

/*!
 * Makes a waiting sq_main_queue_run_until check its condition again (and
 * sq_main_queue_fd() readable until the next drain). Any thread; cheap
 * (one write to an eventfd). Call it after making the condition true from
 * a thread that is not one of the pool's workers.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_main_queue_wakeup(void);

/* ---- Block forms ---- */

/* Submits a block made by sq_block_create as its work item (returns
 * false for any other block). */
SQ_EXPORT SQ_NOTHROW
bool
_sq_async_workitem_block(sq_queue_t queue, const void *block);

/* The invoke function of the blocks sq_block_create makes, and the start
 * every block shares (the Blocks ABI): what tells those blocks apart
 * without a call. */
SQ_EXPORT void _sq_workitem_block_invoke(void *block);
struct _sq_block_start {
	void *isa;
	int flags;
	int reserved;
	void (*invoke)(void *block);
};

#ifdef __BLOCKS__
/* Runs and releases a block copied by one of the async wrappers below. */
SQ_INLINE void
_sq_call_and_release_block(void *SQ_NULLABLE block)
{
	((sq_block_t)block)();
	_Block_release(block);
}

SQ_INLINE void
_sq_call_apply_block(void *SQ_NULLABLE block, size_t iteration)
{
	((void (^)(size_t))block)(iteration);
}

/*! sq_async_f with a block (copied, released after it runs). A block made
 * by sq_block_create goes as its work item (sq_async_workitem), so its
 * SQ_BLOCK_BARRIER flag and class apply (dispatch_async).
 * \param queue the queue.
 * \param block the work. */
SQ_INLINE void
sq_async(sq_queue_t queue, sq_block_t block)
{
	if (((const struct _sq_block_start *)(const void *)block)->invoke ==
			_sq_workitem_block_invoke &&
			_sq_async_workitem_block(queue, (const void *)block))
		return;
	sq_async_f(queue, _Block_copy((const void *)block),
			_sq_call_and_release_block);
}

/*! sq_barrier_async_f with a block: copied, released after it has run
 *  (dispatch_barrier_async).
 *  \param queue the queue.
 *  \param block the work. */
SQ_INLINE void
sq_barrier_async(sq_queue_t queue, sq_block_t block)
{
	sq_barrier_async_f(queue, _Block_copy((const void *)block),
			_sq_call_and_release_block);
}

/*! sq_sync_f with a block: called on the caller's behalf, not copied
 *  (dispatch_sync).
 *  \param queue the queue.
 *  \param block the work. */
SQ_INLINE void
sq_sync(sq_queue_t queue, sq_block_t SQ_NOESCAPE block)
{
	sq_sync_f(queue, (void *)block, _sq_call_block);
}

/*! sq_barrier_sync_f with a block: not copied (dispatch_barrier_sync).
 *  \param queue the queue.
 *  \param block the work. */
SQ_INLINE void
sq_barrier_sync(sq_queue_t queue, sq_block_t SQ_NOESCAPE block)
{
	sq_barrier_sync_f(queue, (void *)block, _sq_call_block);
}

/*! sq_apply_f with a block, called with each iteration's index
 *  (synchronously, not copied; dispatch_apply).
 *  \param iterations how many calls.
 *  \param queue a queue or SQ_APPLY_AUTO.
 *  \param block called with each index. */
SQ_INLINE void
sq_apply(size_t iterations, sq_queue_t SQ_NULLABLE queue,
		void (^SQ_NOESCAPE block)(size_t iteration))
{
	sq_apply_f(iterations, queue, (void *)block, _sq_call_apply_block);
}

SQ_INLINE void
_sq_call_apply_range_block(void *SQ_NULLABLE block, size_t begin, size_t end)
{
	((void (^)(size_t, size_t))block)(begin, end);
}

/*! sq_apply_range_f with a block (called synchronously, not copied).
 *  \param iterations the size of the index space.
 *  \param queue a queue or SQ_APPLY_AUTO.
 *  \param block called with each range [begin, end). */
SQ_INLINE void
sq_apply_range(size_t iterations, sq_queue_t SQ_NULLABLE queue,
		void (^SQ_NOESCAPE block)(size_t begin, size_t end))
{
	sq_apply_range_f(iterations, queue, (void *)block,
			_sq_call_apply_range_block);
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_QUEUE_H */
