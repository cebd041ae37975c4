/*
 * SwiftQueues — the manager thread's event loop (event.c) and the sources
 * it serves (source.c). Not installed.
 */
#ifndef SWIFTQUEUES_EVENT_INTERNAL_H
#define SWIFTQUEUES_EVENT_INTERNAL_H

#include "queue_internal.h"

#include <sys/stat.h>

struct event;
struct event_base;

/* ---- Commands ----------------------------------------------------------
 *
 * Other threads never call libevent: they post a node on the loop's
 * wait-free command queue and, if it was empty, wake the loop through an
 * eventfd (a write is never lost, even before the loop runs).
 */
enum sq_loop_node_kind {
	SQ_LOOP_SOURCE = 1, /* a source with command bits to process */
	SQ_LOOP_AFTER = 2,  /* an sq_after entry to schedule */
};

struct sq_loop_node_s {
	struct cds_wfcq_node link;
	uint32_t kind;
};

SQ_INTERNAL void _sq_loop_post(struct sq_loop_node_s *node);

/*
 * Starts the event loop unless it runs already. Returns 0, or the errno of
 * what it lacks: EMFILE / ENFILE (descriptors for libevent's base and the
 * wake-up eventfd), ENOMEM, EAGAIN (the manager thread). What was made is
 * kept, and the next call tries again.
 */
SQ_INTERNAL int _sq_loop_start(void);
/* _sq_loop_start() == 0, for _sq_pool_retry_later: what waits for the
 * loop (an sq_after, a timer or data source) has it retried. */
SQ_INTERNAL bool _sq_loop_retry(void);

/* Wakes the loop (async-signal-safe: one eventfd write). */
SQ_INTERNAL void _sq_loop_kick(void);

/* The loop's libevent base; only for code running on the loop thread. */
SQ_INTERNAL struct event_base *_sq_loop_base(void);

/* ---- Timers (loop thread only) ----------------------------------------
 *
 * Two clocks (monotonic, wall), each with two binary heaps over the same
 * entries: by deadline and by latest (deadline + leeway). The loop sleeps
 * until the latest deadline that is no later than the earliest `latest`;
 * when it wakes it fires every entry whose deadline has passed. So a timer
 * fires within [deadline, latest], timers whose windows overlap fire
 * together, and a timer alone fires on its deadline.
 */
enum { SQ_CLOCK_MONOTONIC = 0, SQ_CLOCK_WALL = 1 };

struct sq_timer_s {
	uint64_t deadline; /* ns on its clock */
	uint64_t latest;   /* deadline + leeway, saturated */
	uint32_t heap_index[2]; /* by deadline, by latest; UINT32_MAX: out */
	uint8_t clock;
	uint32_t trace_flow; /* an after's flow id in a trace, else 0 */
	/* Called on the loop thread when the entry fires (it has already
	 * been removed from the heaps). `now` is the clock's time; `early`:
	 * a precise wake-up fired it up to SQ_TIMER_AHEAD_NS ahead, `now`
	 * is its deadline, and what it hands to other threads must wait
	 * until then (an on-time entry, below). */
	void (*fire)(struct sq_timer_s *timer, uint64_t now, bool early);
};

SQ_INTERNAL void _sq_timer_init(struct sq_timer_s *t,
		void (*fire)(struct sq_timer_s *, uint64_t, bool));
/* An "on time" entry: the part of an early-fired timer that must wait
 * for its deadline (event.c, "Precise wake-ups"). run() is called on a
 * worker at `due`, and may run the timer's work on that thread. */
struct sq_ontime_s {
	struct sq_ontime_s *next;
	uint64_t due;
	void (*run)(struct sq_ontime_s *e);
};
/* Loop thread: queue an entry for the on-time runner. */
SQ_INTERNAL void _sq_ontime_post(struct sq_ontime_s *e);
SQ_INTERNAL void _sq_timer_schedule(struct sq_timer_s *t);
SQ_INTERNAL void _sq_timer_unschedule(struct sq_timer_s *t);
/* Loop passes that fired timers so far (for tests). */
SQ_INTERNAL uint64_t _sq_debug_timer_wakeups(void);
/* The on-time runner's current spin margin and the wake-up lateness
 * percentiles it came from, and the time spent spinning so far, ns (for
 * tests and benchmarks). */
SQ_INTERNAL void _sq_debug_timer_margin(uint64_t *margin, uint64_t *p50,
		uint64_t *p99, uint64_t *spun_ns);
/* Current time on a clock, ns. */
SQ_INTERNAL uint64_t _sq_clock_now(int clock);

/* ---- Sources ------------------------------------------------------------ */

enum sq_source_kind {
	SQ_SOURCE_DATA_ADD = 1,
	SQ_SOURCE_DATA_OR,
	SQ_SOURCE_DATA_REPLACE,
	SQ_SOURCE_READ,
	SQ_SOURCE_WRITE,
	SQ_SOURCE_SIGNAL,
	SQ_SOURCE_TIMER,
	SQ_SOURCE_PROC,
	SQ_SOURCE_VNODE,
};

struct sq_source_type_s {
	enum sq_source_kind kind;
	const char *name;
	uintptr_t valid_mask; /* mask bits accepted at creation */
};

/* Command bits, processed by the loop in this order. */
#define SQ_CMD_REGISTER 0x1u
#define SQ_CMD_TIMER 0x2u
#define SQ_CMD_CANCEL 0x8u

struct sq_source_handler_s {
	sq_function_t func;
	void *ctx; /* NULL: pass the source's context */
	sq_function_t destructor;
	int32_t refs;
};

struct sq_source_s {
	struct sq_object_s obj; /* target: the queue handlers run on */
	const struct sq_source_type_s *type;
	uintptr_t handle;
	uintptr_t mask;
	uint64_t state;   /* SQ_SRC_* and the suspend count */
	uintptr_t pending; /* merged event data, atomic */
	uintptr_t data;    /* the delivery being / last handled */

	sq_spinlock_t handler_lock;
	struct sq_source_handler_s *handlers[3];

	/* Commands for the loop. */
	struct sq_loop_node_s node;
	uint32_t cmd_bits;
	/* Signal sources: 1 once the loop has handled the activation (the
	 * handler is installed, or the source was cancelled first). A futex
	 * word: sq_activate waits on it. */
	uint32_t activated;

	/* Loop-thread state. */
	bool registered;
	bool always_ready;       /* regular files: epoll cannot watch them */
	bool stale;              /* its descriptor was closed and reused */
	bool tracked;            /* on the descriptor list */
	bool fd_eof;             /* end of file delivered (delivery side) */
	struct event *ev;        /* descriptor or pidfd watch */
	int pidfd;               /* -1: the process is gone (exit at once) */
	int wd;                  /* inotify watch (source_vnode.c's lock) */
	int parent_wd;           /* directories: their parent's watch */
	struct sq_source_s *next_in_list; /* signal / inotify lists */

	/* Timer sources. */
	struct sq_timer_s timer;
	uint64_t timer_start;    /* set by sq_source_set_timer */
	uint64_t timer_interval;
	uint64_t timer_leeway;
	sq_spinlock_t timer_lock;

	/* Descriptor identity, to notice a descriptor closed and reused. */
	dev_t dev;
	ino_t ino;
	/* Vnode bookkeeping (loop thread). */
	off_t last_size;
	nlink_t last_nlink;
};

/* Source state word. */
#define SQ_SRC_INACTIVE 0x1ull
#define SQ_SRC_CANCELLED 0x2ull
#define SQ_SRC_QUEUED 0x4ull       /* the handler job is queued/running */
#define SQ_SRC_REGISTERED 0x8ull   /* the loop is watching */
#define SQ_SRC_UNREGISTERED 0x10ull /* after cancel: the loop let go */
#define SQ_SRC_REG_DONE 0x20ull    /* registration handler ran */
#define SQ_SRC_CANCEL_DONE 0x40ull /* cancel handler ran */
#define SQ_SRC_SUSPEND_ONE (1ull << 32)
#define SQ_SRC_SUSPEND_MASK (0x7fffffffull << 32)

/* Runs a source's pending commands (loop thread). */
SQ_INTERNAL void _sq_source_run_commands(struct sq_source_s *s);

/* Folds an event into a source's pending word and wakes its delivery
 * (any thread). */
SQ_INTERNAL void _sq_source_merge(struct sq_source_s *s, uintptr_t value);

/* Vnode sources (source_vnode.c). The open: 0 or the errno (EMFILE,
 * ENFILE, inotify's per-user limit), any thread. The watch, by
 * sq_source_create once the descriptor is open: 0 or the errno (ENOSPC:
 * the per-user limit of watches), any thread. Registering: loop thread. Giving the watch back:
 * the loop's unregistering, or the destruction of a source never
 * registered, any thread. */
SQ_INTERNAL int _sq_inotify_open(void);
SQ_INTERNAL int _sq_vnode_watch(struct sq_source_s *s, bool is_dir);
SQ_INTERNAL void _sq_vnode_register(struct sq_source_s *s);
SQ_INTERNAL void _sq_vnode_unwatch(struct sq_source_s *s);
SQ_INTERNAL void _sq_vnode_atfork_child(void);

/* Hands the deliveries counted by the signal handler to the signal
 * sources (loop thread). */
SQ_INTERNAL void _sq_signals_drain(void);

/* fork child: puts back the program's dispositions for every signal the
 * runtime caught and forgets the watcher thread (source.c). */
SQ_INTERNAL void _sq_signals_atfork_child(void);
/* fork child: forgets the parent's descriptor and inotify registrations
 * (source.c, source_vnode.c) and the event loop, its timers and sq_after
 * entries (event.c). */
SQ_INTERNAL void _sq_sources_atfork_child(void);
SQ_INTERNAL void _sq_loop_atfork_child(void);

/* A source's description for sq_debug (introspect.c). */
SQ_INTERNAL size_t _sq_source_debug(struct sq_object_s *object, char *buf,
		size_t size);

/* SQ_SNAPSHOT_SIGNAL's number (0: none), and what the signal handler
 * calls for it: wakes the watchdog's thread to write a snapshot
 * (async-signal-safe). watchdog.c. */
SQ_INTERNAL extern int _sq_snapshot_signo;
SQ_INTERNAL void _sq_watchdog_signal(void);

/* Runs an sq_after entry's scheduling (loop thread). */
SQ_INTERNAL void _sq_after_schedule(struct sq_loop_node_s *node);

#endif /* SWIFTQUEUES_EVENT_INTERNAL_H */
