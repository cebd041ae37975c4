/*!
 * \defgroup swiftqueues_introspect Introspection: sq_debug, descriptions and snapshots
 * \ingroup swiftqueues
 *
 * Looking inside a running program: sq_debug (libdispatch's
 * dispatch_debug), an object's description in a buffer, and snapshots of
 * the whole runtime (every live queue, source and I/O channel, the pool's
 * figures) as a structure, as text and as JSON.
 *
 * Environment (read when the pool starts):
 *   SQ_SNAPSHOT_SIGNAL=\<number or name, e.g. USR1\>  on that signal a text
 *       snapshot is written to stderr, by a thread of its own, so it works
 *       while every worker is blocked.
 *   SQ_WATCHDOG_MS=\<n\>  one "SwiftQueues: watchdog: ..." line and a text
 *       snapshot on stderr when a task holds a serial queue (or the main
 *       queue) longer than n ms, when queued work waits longer than n ms,
 *       and when threads wait for each other in sq_sync (a wait cycle).
 *   SQ_LOG=stderr|file|syslog|NO  where sq_debug writes (default stderr;
 *       file: /var/tmp/swiftqueues.\<pid\>.log). Read at the first sq_debug.
 * docs/OBSERVABILITY.md says what each figure means.
 * @{
 */
#ifndef SWIFTQUEUES_INTROSPECT_H
#define SWIFTQUEUES_INTROSPECT_H

#include <swiftqueues/base.h>
#include <swiftqueues/object.h>
#include <swiftqueues/pool.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*!
 * Logs `message` (a printf format) after a description of the object's
 * state: one line "<description>: <message>", or "NULL: <message>" for a
 * NULL object, as libdispatch's dispatch_debug does. The line goes where
 * SQ_LOG says (stderr by default). Any thread.
 * \param object any SwiftQueues object, or NULL.
 * \param message a printf format, followed by its arguments.
 */
SQ_EXPORT SQ_NOTHROW __attribute__((__format__(__printf__, 2, 3)))
void
sq_debug(sq_object_t SQ_NULLABLE object, const char *message, ...);

/*! sq_debug with a va_list (dispatch_debugv).
 *  \param object any SwiftQueues object, or NULL.
 *  \param message a printf format.
 *  \param ap its arguments. */
SQ_EXPORT SQ_NOTHROW __attribute__((__format__(__printf__, 2, 0)))
void
sq_debugv(sq_object_t SQ_NULLABLE object, const char *message, va_list ap);

/*!
 * Writes the object's description (what sq_debug prints before the
 * message) into buf, as snprintf does: at most size - 1 characters and a
 * NUL (nothing when size is 0). Returns the length of the whole
 * description, so a return value >= size means it was cut short. A NULL
 * object is described as "NULL".
 * \param object any SwiftQueues object, or NULL.
 * \param buf where to write; may be NULL when `size` is 0.
 * \param size the room in `buf`, NUL included.
 * \return the length of the whole description.
 */
SQ_EXPORT SQ_NOTHROW
size_t
sq_object_describe(sq_object_t SQ_NULLABLE object, char *SQ_NULLABLE buf,
		size_t size);

/*! A queue in a snapshot. Strings belong to the snapshot. */
typedef struct sq_snapshot_queue_s {
	const char *label;       /*!< its label; "" when it has none */
	/*! The queue's address. */
	uintptr_t address;
	const char *kind;        /*!< one of "main", "global", "serial", "concurrent" */
	const char *SQ_NULLABLE target; /*!< its target's label; NULL: none */
	/*! Suspensions not yet balanced by sq_resume. */
	uint32_t suspend_count;
	/*! Created inactive and not yet activated. */
	bool inactive;
	bool queued_capped;      /*!< more than `queued` jobs: the count stopped */
	int64_t queued;          /*!< jobs waiting in it (not running); -1: it
	                            could not be counted in time */
	int32_t running;         /*!< its tasks running now; -1 for global
	                            queues (not tracked) */
	int64_t waiting_ms;      /*!< how long its queued work has waited with
	                            no job of it starting, as far as the
	                            runtime's looks tell; -1: nothing queued */
} sq_snapshot_queue_t;

/*! A source in a snapshot. */
typedef struct sq_snapshot_source_s {
	/*! The source's address. */
	uintptr_t address;
	const char *type;        /*!< its type: "timer", "read", "signal", ... */
	/*! The handle it was created with (descriptor, signal, pid, ...). */
	uintptr_t handle;
	/*! The mask it was created with. */
	uintptr_t mask;
	const char *target;      /*!< the label of the queue its handlers run on */
	/*! Suspensions not yet balanced by sq_resume. */
	uint32_t suspend_count;
	/*! Not yet activated. */
	bool inactive;
	/*! Cancelled (sq_source_cancel). */
	bool cancelled;
	bool registered;         /*!< the event loop is watching for it */
	bool snapshot_signal;    /*!< the runtime's own SQ_SNAPSHOT_SIGNAL source */
	uintptr_t pending;       /*!< event data merged, not yet delivered */
} sq_snapshot_source_t;

/*! An I/O channel in a snapshot. */
typedef struct sq_snapshot_channel_s {
	/*! The channel's address. */
	uintptr_t address;
	const char *type;        /*!< its type: "stream" or "random" */
	int fd;                  /*!< -1: a path channel not opened yet */
	const char *SQ_NULLABLE path; /*!< NULL for a channel on a descriptor */
	const char *queue;       /*!< the label of the queue its work runs on */
	bool closed;             /*!< closed or released by the program */
	uint64_t calls;          /*!< handler calls queued or running, plus
	                            one until the channel is done with its
	                            descriptor */
} sq_snapshot_channel_t;

/*! A thread that runs tasks (listed only while SQ_WATCHDOG_MS is set). */
typedef struct sq_snapshot_thread_s {
	/*! Its kernel thread id. */
	int32_t tid;
	/*! Its name ("sq.worker 3", "main thread", ...). */
	const char *name;
	bool busy;               /*!< running a task now */
	const char *SQ_NULLABLE queue; /*!< the serial queue its task holds */
	int64_t running_ms;      /*!< for how long; -1: no such task */
	const char *SQ_NULLABLE waiting_for; /*!< the queue its sq_sync waits for */
	int64_t waiting_ms;      /*!< for how long; -1: not waiting */
	const char *SQ_NULLABLE task_queue; /*!< the label of the queue of the
	                            task it runs (its outermost) */
	const char *SQ_NULLABLE function; /*!< that task's function, by name */
	int32_t holder_tid;      /*!< the thread that holds the queue it waits
	                            for (or one up its target chain); 0: none
	                            seen */
	const char *SQ_NULLABLE holder_queue; /*!< the queue the holder's task
	                            holds */
	const char *SQ_NULLABLE holder_function; /*!< and that task's function */
} sq_snapshot_thread_t;

/*! The whole runtime at one moment (each part read without stopping the
 *  others, so the parts may be a few microseconds apart). */
typedef struct sq_snapshot_s {
	/*! The process id. */
	int32_t pid;
	uint64_t time_ns;        /*!< CLOCK_MONOTONIC when it was taken */
	uint32_t watchdog_ms;    /*!< SQ_WATCHDOG_MS; 0: off */
	/*! The pool's figures (sq_pool_stats). */
	sq_pool_stats_t pool;
	uint64_t local_jobs;     /*!< jobs in the workers' own run queues */
	/*! How many entries `queues` has. */
	size_t queue_count;
	const sq_snapshot_queue_t *queues; /*!< main, global, then by creation */
	/*! How many entries `sources` has. */
	size_t source_count;
	/*! The live sources, by creation. */
	const sq_snapshot_source_t *sources;
	/*! How many entries `channels` has. */
	size_t channel_count;
	/*! The live I/O channels, by creation. */
	const sq_snapshot_channel_t *channels;
	/*! How many entries `threads` has. */
	size_t thread_count;
	/*! The threads that run tasks (with SQ_WATCHDOG_MS set). */
	const sq_snapshot_thread_t *threads;
} sq_snapshot_t;

/*! Takes a snapshot without stopping the runtime. Any thread.
 *  \return the snapshot (free it with sq_snapshot_free), or NULL with
 *          errno ENOMEM when memory runs out. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_snapshot_t *SQ_NULLABLE
sq_snapshot_create(void);

/*! Frees a snapshot and its strings.
 *  \param snapshot from sq_snapshot_create; NULL is ignored. */
SQ_EXPORT SQ_NOTHROW
void
sq_snapshot_free(sq_snapshot_t *SQ_NULLABLE snapshot);

/*! A snapshot as text, one line per item (what SQ_SNAPSHOT_SIGNAL and the
 *  watchdog write).
 *  \return the text, malloc'd (the caller frees it), or NULL with errno
 *          ENOMEM. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
char *SQ_NULLABLE
sq_snapshot_text(void);

/*! A snapshot as one JSON object.
 *  \return the JSON, malloc'd (the caller frees it), or NULL with errno
 *          ENOMEM. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
char *SQ_NULLABLE
sq_snapshot_json(void);

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_INTROSPECT_H */
