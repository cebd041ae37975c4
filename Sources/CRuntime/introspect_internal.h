/*
 * SwiftQueues — what introspect.c (descriptions, snapshots),
 * introspect_look.c (what looks last saw) and watchdog.c (the watchdog,
 * SQ_SNAPSHOT_SIGNAL) share. Not installed.
 */
#ifndef SWIFTQUEUES_INTROSPECT_INTERNAL_H
#define SWIFTQUEUES_INTROSPECT_INTERNAL_H

#include "queue_internal.h"

#include <stdarg.h>

/* CLOCK_MONOTONIC_COARSE in ns: a few ns to read (no TSC read), ticks of
 * 1-4 ms, plenty for figures in milliseconds. */
SQ_INLINE uint64_t
_sq_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* ---- Looks: what the watchdog and snapshots last saw -----------------------
 *
 * For each queue seen with jobs waiting: since when (coarse monotonic ms,
 * wrapping: a difference is right for waits under 49 days) the drain's
 * pop count has not changed, that count, and whether the watchdog
 * reported the wait. Kept in introspect_look.c, not in the queue, so a
 * queue costs no bytes for it: only queues that have work waiting at a
 * look have a record. An open-addressing table keyed by the queue's address (linear
 * probing, deletion by shifting back), under the registry's lock; a
 * queue's record goes when the queue leaves the registry, so a new queue
 * at the same address starts with none. */
struct sq_look_s {
	struct sq_queue_s *queue; /* NULL: a free slot */
	uint32_t since_ms;
	uint32_t count;
	bool reported;
};

/* q's record, or NULL. */
SQ_INTERNAL struct sq_look_s *_sq_look_find(struct sq_queue_s *q);
/* q's record, made if it has none (*made set; NULL: out of memory). */
SQ_INTERNAL struct sq_look_s *_sq_look_get(struct sq_queue_s *q, bool *made);
/* Drops q's record, if any (q leaves the registry). */
SQ_INTERNAL void _sq_look_drop(struct sq_queue_s *q);

/* ---- A growing string ------------------------------------------------- */

/* Text built by appending; `failed` once memory ran out. With a fixed
 * buffer (`fixed`), it is cut at `size` and `len` counts what was asked
 * for (snprintf's rule). */
struct sq_sb_s {
	char *buf;
	size_t size;
	size_t len;
	bool fixed;
	bool failed;
};

SQ_INTERNAL __attribute__((format(printf, 2, 3))) void
_sq_sb_printf(struct sq_sb_s *sb, const char *format, ...);
SQ_INTERNAL void _sq_sb_vprintf(struct sq_sb_s *sb, const char *format,
		va_list ap);
/* Appends s quoted, as 'label' (text) or as a JSON string. */
SQ_INTERNAL void _sq_sb_quote(struct sq_sb_s *sb, const char *s);
SQ_INTERNAL void _sq_sb_json_string(struct sq_sb_s *sb, const char *s);

/* ---- Queues ------------------------------------------------------------ */

/* Copies the label of `q` into out if q is a live queue (a static one, or
 * one in the registry); false otherwise. For a pointer that may be stale:
 * it is not read unless found. Takes the registry's lock. */
SQ_INTERNAL bool _sq_introspect_queue_label(const struct sq_queue_s *q,
		char *out, size_t size);

/* One look at every queue, for the watchdog (under the registry's lock):
 * updates each queue's look (introspect.c), appends a report line to
 * `report` for queued work that has waited `threshold` ns or more and was
 * not reported yet, and returns whether any queue that may run has work
 * queued. */
/* A thread holding a queue, as the watchdog saw it (`queue` only compared,
 * never followed): the report of a queue's waiting work names it. */
struct sq_watch_holder_s {
	const struct sq_queue_s *queue;
	pid_t tid;
	const void *func;        /* its task's function */
	uint64_t since;          /* coarse ns */
};
SQ_INTERNAL bool _sq_introspect_scan_waits(uint64_t now, uint64_t threshold,
		struct sq_sb_s *report, const struct sq_watch_holder_s *holders,
		size_t nholders);

/* ---- Snapshots ---------------------------------------------------------- */

/* Writes a text snapshot to `fd` (one write per line group; best effort:
 * nothing when memory is short). */
SQ_INTERNAL void _sq_snapshot_write(int fd);

/* A snapshot being built: strings go to its arena. */
struct sq_snapshot_build_s;
SQ_INTERNAL const char *_sq_snapshot_strdup(struct sq_snapshot_build_s *b,
		const char *s);
SQ_INTERNAL sq_snapshot_thread_t *_sq_snapshot_add_thread(
		struct sq_snapshot_build_s *b);

/* watchdog.c: adds the threads it watches (none while the watchdog is
 * off), SQ_WATCHDOG_MS (0: off). */
SQ_INTERNAL void _sq_watchdog_add_threads(struct sq_snapshot_build_s *b,
		uint64_t now);
SQ_INTERNAL uint32_t _sq_watchdog_ms(void);
SQ_INTERNAL bool _sq_watchdog_is_snapshot_source(const void *source);

/* ---- I/O channels (io.c) ------------------------------------------------ */

/* What a snapshot shows of a channel: fields set at creation, and
 * atomics. */
struct sq_io_facts_s {
	const char *type;         /* "stream", "random" */
	int fd;                   /* -1: not opened yet */
	const char *path;         /* NULL: made on a descriptor */
	struct sq_queue_s *queue; /* retained by the channel */
	bool closed;
	uint64_t calls;           /* handler calls queued or running, + 1
	                             until it is done with its descriptor */
};
SQ_INTERNAL void _sq_io_facts(struct sq_object_s *object,
		struct sq_io_facts_s *facts);
/* A channel's description for sq_debug (introspect.c). */
SQ_INTERNAL size_t _sq_io_debug(struct sq_object_s *object, char *buf,
		size_t size);

/* fork() children (fork.c). */
SQ_INTERNAL void _sq_introspect_atfork_child(void);
SQ_INTERNAL void _sq_watchdog_atfork_child(void);

#endif /* SWIFTQUEUES_INTROSPECT_INTERNAL_H */
