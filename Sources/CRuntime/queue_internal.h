/*
 * SwiftQueues — queues, continuations and the worker pool: the structures
 * shared by pool.c, queue.c, apply.c and main.c. Not installed.
 */
#ifndef SWIFTQUEUES_QUEUE_INTERNAL_H
#define SWIFTQUEUES_QUEUE_INTERNAL_H

#include "internal.h"

#include <urcu/wfcqueue.h>

/* ---- Jobs ---------------------------------------------------------------
 *
 * Everything a run queue holds is a job: a continuation (a function to
 * call) or a queue (a serial or concurrent queue to drain). The link comes
 * first so a job is a liburcu wfcqueue node.
 */
enum sq_job_kind {
	SQ_JOB_CONT = 1,
	SQ_JOB_QUEUE = 2,
};

struct sq_job_s {
	struct cds_wfcq_node link;
	uint16_t kind;
	uint16_t flags;      /* SQ_CONT_* for continuations */
	uint32_t trace_flow; /* continuations: the submission's flow id in a
	                        trace (trace_internal.h), 0 for none */
};

/* Continuation flags. */
#define SQ_CONT_BARRIER 0x1u   /* runs alone on a concurrent queue */
#define SQ_CONT_SYNC 0x2u      /* data is a struct sq_sync_waiter_s */
#define SQ_CONT_FORWARDED 0x4u /* started by concurrent queue `queue`; tell
                                  it when done (_sq_concurrent_item_done) */
#define SQ_CONT_GROUP 0x8u     /* data is a group to leave when done */
#define SQ_CONT_SPAWN 0x10u    /* sq_spawn_f: no start order on its root */
/* Bits 8-10: 1 + the root index of the continuation's own QoS class (a
 * work item's), 0 for none: it runs no lower than that class. */
#define SQ_CONT_QOS_SHIFT 8
#define SQ_CONT_QOS_MASK (7u << SQ_CONT_QOS_SHIFT)

/* One unit of submitted work: 48 bytes, from a per-thread cache. */
struct sq_cont_s {
	struct sq_job_s job;
	sq_function_t func;
	void *ctx;
	struct sq_queue_s *queue; /* the queue it was submitted to */
	void *data;               /* SQ_CONT_SYNC: the waiter */
};

SQ_INTERNAL struct sq_cont_s *_sq_cont_alloc(void);
SQ_INTERNAL void _sq_cont_free(struct sq_cont_s *cont);

/* ---- Queues ---------------------------------------------------------- */

enum sq_queue_type {
	SQ_QUEUE_TYPE_ROOT = 1,
	SQ_QUEUE_TYPE_SERIAL,
	SQ_QUEUE_TYPE_CONCURRENT,
	SQ_QUEUE_TYPE_MAIN,
};

/*
 * The queue state word (serial, concurrent and main queues):
 *   bit 0       ENQUEUED: the queue is on its target (or being drained, or
 *               held by a sync caller): whoever set it is the one drainer.
 *   bit 1       INACTIVE: created inactive and not yet activated.
 *   bit 2       INSPECT: a snapshot is counting the queue's jobs; its
 *               drainer takes none meanwhile (see "Drain marks").
 *   bit 3       DRAINING (serial queues): someone is popping: the drainer
 *               that runs the queue's job, a sync caller on the fast path,
 *               or a sync caller that took the queue over while its job
 *               waited for a thread (queue_sync.c, "Taking a queue over").
 *               ENQUEUED without DRAINING: the job waits in a run queue.
 *   bit 4       DETACHED: the queue's job ran while a sync caller had
 *               taken the queue over; the job is the caller's to finish.
 *   bit 5       WANTED: a sync caller found DRAINING held and sleeps;
 *               whoever drops DRAINING wakes a waiter.
 *   bits 32-62  suspend count.
 * A queue runs tasks only with all of these clear except ENQUEUED, which
 * the drainer holds.
 */
#define SQ_STATE_ENQUEUED 0x1ull
#define SQ_STATE_INACTIVE 0x2ull
#define SQ_STATE_INSPECT 0x4ull
#define SQ_STATE_DRAINING 0x8ull
#define SQ_STATE_DETACHED 0x10ull
#define SQ_STATE_WANTED 0x20ull
#define SQ_STATE_SUSPEND_ONE (1ull << 32)
#define SQ_STATE_SUSPEND_MASK (0x7fffffffull << 32)

struct sq_specific_s {
	struct sq_specific_s *next;
	const void *key;
	void *ctx;
	sq_function_t destructor;
};

/*
 * A queue: 136 bytes, then the label's copy, if any (a concurrent queue
 * keeps 16 more between the two: struct sq_concurrent_s).
 *
 * The tasks are an MPSC list consumed only by the queue's one drainer:
 * its head (written by the drainer) and its tail (written by producers)
 * sit on separate cache lines by distance, not by alignment: queues come
 * from malloc, which aligns to 16 bytes, not to a line. `head` starts a
 * 16-byte slot (offset 64) and `tail` starts the slot a full line further
 * on (static assert below): two 16-byte slots a line apart never share a
 * line, whatever the allocation's offset within one. (Aligning the
 * members to a line instead would pad the queue by up to two lines that
 * malloc does not honour anyway.) The distance is not padding: it holds
 * the drain marks, which the drainer writes next to the head, the queue's
 * own job and the fields that are rarely touched. (What the runtime's
 * looks last saw of a queue, for the watchdog, is kept apart, in
 * introspect_look.c: only queues that have work waiting need it.)
 */
struct sq_queue_s {
	struct sq_object_s obj; /* target and label live here */
	uint64_t state;         /* see SQ_STATE_* */
	struct __cds_wfcq_head head;
	/* The drain marks (see "Drain marks"). */
	uint32_t pops;
	uint8_t phase;
	uint8_t type;         /* enum sq_queue_type */
	/* The queue's own QoS class as a root index (SQ_ROOT_NONE: none) and
	 * its relative priority, from its attribute; fixed at creation. */
	uint8_t qos_root;
	int8_t qos_relpri;
	struct sq_job_s job;  /* this queue as a job on its target */
	/* A job the drainer took and found it must not run yet (the queue was
	 * suspended in between): first in line for the next drain. Written
	 * only by the drainer; read by anyone who asks whether the queue is
	 * empty. */
	struct sq_job_s *stashed;
	struct sq_specific_s *specifics; /* under _sq_specific_lock(q) */
	/* Serial queues: sync callers queued and waiting, who may take the
	 * queue over (queue_sync.c, "Taking a queue over"). */
	int32_t sync_waiters;
	uint32_t serial_num;  /* for messages and debugging */
	uint32_t trace_label; /* the label's number in traces, 0 until asked */
	/* Raised (see "Overrides", queue.c): the root index its job goes to
	 * while work of a higher class waits in it; SQ_ROOT_NONE when not
	 * raised. Lowered by CAS, reset by the drainer that gives the queue
	 * up empty. */
	uint8_t override_root;
	int8_t root_index;    /* root queues: which priority */
	uint8_t spare[2];
	struct cds_wfcq_tail tail;
};

_Static_assert(__builtin_offsetof(struct sq_queue_s, head) % 16 == 0 &&
		__builtin_offsetof(struct sq_queue_s, tail) -
		__builtin_offsetof(struct sq_queue_s, head) == SQ_CACHELINE,
		"a queue's head and tail must sit a cache line apart");
#if defined(__LP64__)
_Static_assert(sizeof(struct sq_queue_s) == 136,
		"ARCHITECTURE.md, \"Object sizes\", states a queue's bytes");
#endif

/* A concurrent queue: what only a concurrent queue keeps follows the
 * queue (a serial queue does without these 16 bytes): tasks started and
 * not finished, barriers submitted and not finished, and the barrier the
 * drainer holds back until `running` drops to zero. */
struct sq_concurrent_s {
	struct sq_queue_s q;
	int32_t running;
	int32_t barriers;
	struct sq_cont_s *pending_barrier;
};

/* Only for a queue of type SQ_QUEUE_TYPE_CONCURRENT. */
SQ_INLINE struct sq_concurrent_s *
_sq_concurrent(struct sq_queue_s *q)
{
	return (struct sq_concurrent_s *)q;
}

/* ---- Drain marks --------------------------------------------------------
 *
 * Written only by whoever holds ENQUEUED: `pops`, the jobs popped so far
 * (wrapping), and `phase`, what the holder is doing:
 *   IDLE    not popping: the queue waits on its target, or its drainer has
 *           finished;
 *   LOOP    a drainer between jobs: it may be about to pop;
 *   TASK    running a job it popped, or a sync caller's function;
 *   PAUSED  a drainer that saw INSPECT and waits for it to clear.
 * Three plain stores per job. A snapshot counting the jobs sets INSPECT
 * and walks the list once no pop can be under way (introspect.c argues
 * when that is); the drainer reads the state word before every pop
 * anyway, so looking for INSPECT there costs nothing. The pop count lets
 * the watchdog see a queue whose work does not move.
 */
#define SQ_DRAIN_IDLE 0u
#define SQ_DRAIN_LOOP 1u
#define SQ_DRAIN_TASK 2u
#define SQ_DRAIN_PAUSED 3u

/* Release: a snapshot that reads the phase (acquire) sees the pops before
 * it. */
SQ_INLINE void
_sq_drain_phase(struct sq_queue_s *q, uint8_t phase)
{
	__atomic_store_n(&q->phase, phase, __ATOMIC_RELEASE);
}

/* Relaxed: a count the watchdog compares, nothing read through it. */
SQ_INLINE void
_sq_drain_pops(struct sq_queue_s *q, uint32_t pops)
{
	__atomic_store_n(&q->pops, pops, __ATOMIC_RELAXED);
}

/* A drainer that saw INSPECT: marks itself PAUSED, waits until INSPECT is
 * clear, marks itself LOOP (introspect.c). */
SQ_INTERNAL void _sq_queue_inspect_pause(struct sq_queue_s *q);

/* ---- Watchdog hooks (watchdog.c) -----------------------------------------
 *
 * With SQ_WATCHDOG_MS set, each thread that runs tasks has a record the
 * watchdog reads: whether it runs a task, since when it holds a serial
 * queue, which queue its sq_sync waits for. Without it, a hook is one load
 * of a flag that never changes once the pool has started, and a branch.
 */
SQ_INTERNAL void _sq_watch_task_run(sq_function_t func, void *ctx);
SQ_INTERNAL void _sq_watch_wait_begin(struct sq_queue_s *q);
SQ_INTERNAL void _sq_watch_wait_end(void);
/* Work was queued where no task will start for it by itself (the main
 * queue): wakes the watchdog if it sleeps until a task starts. */
SQ_INTERNAL void _sq_watch_work_queued(void);

/* The word every observation point looks at (trace_internal.h): its low
 * half is the USDT probes' semaphore, then a byte that is 1 while a trace
 * is recorded and one that is 1 while the watchdog watches tasks. One
 * word, so that a point with nothing observing makes one compare for all
 * three (a sync on an idle queue looked at two flags). */
union sq_observe_u {
	uint32_t word;
	struct {
		uint16_t probes;    /* the USDT semaphore (offset 0) */
		uint8_t recording;  /* 1 while a trace is recorded */
		uint8_t watching;   /* 1 while the watchdog watches tasks */
	} half;
};

SQ_INTERNAL extern union sq_observe_u _sq_observe;

/* Relaxed: the flag is set once, before the watchdog looks at anything;
 * a task that starts before it is simply not watched. */
SQ_INLINE bool
_sq_watching(void)
{
	return SQ_UNLIKELY(__atomic_load_n(&_sq_observe.half.watching,
			__ATOMIC_RELAXED) != 0);
}

/* Runs a task (the function of a continuation, of a sync, of an in-place
 * run), with its frames pushed: watched, with the watchdog on. */
SQ_INLINE void
_sq_task_run(sq_function_t func, void *ctx)
{
	if (_sq_watching()) {
		_sq_watch_task_run(func, ctx);
		return;
	}
	func(ctx);
}

/* The root queues, one per QoS class, highest first: a lower index is a
 * higher class (the pool's precedence compares indexes). HIGH is
 * USER_INITIATED and LOW is UTILITY, as in libdispatch. */
#define SQ_ROOT_COUNT 5
enum {
	SQ_ROOT_INTERACTIVE = 0,
	SQ_ROOT_HIGH = 1,
	SQ_ROOT_DEFAULT = 2,
	SQ_ROOT_LOW = 3,
	SQ_ROOT_BACKGROUND = 4,
};
/* A queue with no QoS class of its own (struct sq_queue_s, qos_root). */
#define SQ_ROOT_NONE 0xff

/* sq_async_f (or the barrier form) of work with a class of its own
 * (`root`, SQ_ROOT_NONE for none): it runs no lower than that class, and
 * raises a serial queue it waits in (workitem.c). */
SQ_INTERNAL void _sq_async_qos(const char *call, struct sq_queue_s *q,
		void *ctx, sq_function_t func, bool barrier, int root);
/* Raises a serial queue (and the serial queues it targets) to class
 * `root` until the work queued in it now has run (queue.c, "Overrides"). */
SQ_INTERNAL void _sq_queue_raise(struct sq_queue_s *q, int root);
/* The root index a job pushed to root queue `root` goes to: higher if the
 * job is a raised queue or a continuation with a class of its own. */
SQ_INTERNAL int _sq_job_root(struct sq_job_s *job, int root);
/* A queue's class as a root index: its own or its chain's, the higher. */
SQ_INTERNAL int _sq_queue_class(struct sq_queue_s *q);
/* The class of the calling thread's work as a root index (pool.c). */
SQ_INTERNAL int _sq_thread_root(void);
/* Whether an object is a queue one can retarget (created, not global). */
SQ_INTERNAL bool _sq_object_is_queue(const struct sq_object_s *o);
/* A queue's target when given none: its class's root, or DEFAULT. */
SQ_INTERNAL struct sq_queue_s *_sq_queue_default_target(struct sq_queue_s *q);
/* The classes' names by root index, for traces and messages (queue.c). */
SQ_INTERNAL extern const char *const _sq_root_qos_names[SQ_ROOT_COUNT];
/* QoS class <-> root index (queue.c); -1 for a value that is no class. */
SQ_INTERNAL int _sq_qos_root(unsigned qos_class);
SQ_INTERNAL unsigned _sq_root_qos(int root);

SQ_INTERNAL extern struct sq_queue_s _sq_root_queues[2 * SQ_ROOT_COUNT];
SQ_INTERNAL extern struct sq_queue_s _sq_main_queue;

SQ_INLINE bool
_sq_queue_is_root(const struct sq_queue_s *q)
{
	return q->type == SQ_QUEUE_TYPE_ROOT;
}

/* Whether root queue `q` is an overcommit one (sq_get_global_queue). */
SQ_INLINE bool
_sq_root_is_overcommit(const struct sq_queue_s *q)
{
	return q >= &_sq_root_queues[SQ_ROOT_COUNT];
}

/* Whether `q` runs one task at a time on its own. */
SQ_INLINE bool
_sq_queue_is_serial(const struct sq_queue_s *q)
{
	return q->type == SQ_QUEUE_TYPE_SERIAL || q->type == SQ_QUEUE_TYPE_MAIN;
}

/* The root queue at the end of q's target chain. */
SQ_INTERNAL struct sq_queue_s *_sq_queue_root_of(struct sq_queue_s *q);

/* Submits a job to a queue: root queues hand it to the pool, other queues
 * append it to their tasks and wake themselves up. */
SQ_INTERNAL void _sq_queue_push(struct sq_queue_s *q, struct sq_job_s *job);

/* Runs a job: a continuation is invoked, a queue drained. */
SQ_INTERNAL void _sq_job_run(struct sq_job_s *job);

/* Runs a job that q's drainer popped, with the drain marks around it
 * (`pops` counts the drain's pops). */
static inline void
_sq_drain_run(struct sq_queue_s *q, struct sq_job_s *job, uint32_t *pops)
{
	_sq_drain_phase(q, SQ_DRAIN_TASK);
	_sq_drain_pops(q, ++*pops);
	_sq_job_run(job);
	_sq_drain_phase(q, SQ_DRAIN_LOOP);
}

/* Submits func(ctx) to q as a member of group g (already entered): the
 * continuation leaves the group after the function returns. `spawn`: as
 * sq_spawn_f, with no start order on a global queue. */
struct sq_group_s;
SQ_INTERNAL void _sq_async_group(struct sq_queue_s *q, void *ctx,
		sq_function_t func, struct sq_group_s *g, bool spawn);
SQ_INTERNAL void _sq_group_leave(struct sq_group_s *g);

/* A pending notification (groups, work items): `function(context)` to be
 * submitted to `queue`, which it holds an internal reference on. */
struct sq_notify_s {
	struct sq_notify_s *next;
	struct sq_queue_s *queue;
	void *context;
	sq_function_t function;
};

/* A notification's memory, from the continuation cache (continuation.c):
 * no malloc per notification. */
SQ_INTERNAL struct sq_notify_s *_sq_notify_alloc(void);
SQ_INTERNAL void _sq_notify_free(struct sq_notify_s *n);

/* Submits, in order, and frees a detached list of notifications. */
SQ_INTERNAL void _sq_notify_fire(struct sq_notify_s *list);

/* Tells concurrent queue `q` that one of its started tasks finished. */
SQ_INTERNAL void _sq_concurrent_item_done(struct sq_queue_s *q);

/* Drains a serial or main queue whose ENQUEUED bit the caller holds;
 * returns how many tasks ran. `budget` 0 means "until empty". */
SQ_INTERNAL size_t _sq_queue_drain(struct sq_queue_s *q, unsigned budget);

/* The longest target chain (a cycle check's bound). */
#define SQ_MAX_TARGET_DEPTH 64

/* queue.c and queue_sync.c share these (sq_sync's paths are in
 * queue_sync.c, the queue's state word and drain in queue.c). */
SQ_INLINE struct sq_queue_s *
_sq_queue_target(struct sq_queue_s *q)
{
	return __atomic_load_n(&q->obj.target, __ATOMIC_ACQUIRE);
}
SQ_INTERNAL void _sq_queue_validate(const char *call, struct sq_queue_s *q);
/* cds_wfcq_empty without the library call: empty means the head has no
 * successor and the tail still points at the head; and no job is stashed
 * (taken by a drainer that then found the queue suspended). */
SQ_INLINE bool
_sq_queue_is_empty(struct sq_queue_s *q)
{
	return __atomic_load_n(&q->stashed, __ATOMIC_SEQ_CST) == NULL &&
			__atomic_load_n(&q->head.node.next, __ATOMIC_SEQ_CST) ==
			NULL && __atomic_load_n(&q->tail.p, __ATOMIC_SEQ_CST) ==
			&q->head.node;
}

SQ_INTERNAL void _sq_queue_wakeup(struct sq_queue_s *q);
SQ_INTERNAL void _sq_queue_relinquish(struct sq_queue_s *q);
SQ_INTERNAL bool _sq_drain_may_pop(struct sq_queue_s *q);
SQ_INTERNAL struct sq_job_s *_sq_queue_next(struct sq_queue_s *q);
SQ_INTERNAL void _sq_concurrent_leave(struct sq_queue_s *q);
/* queue_sync.c: a sync continuation's drainer side, a thread's frame for
 * a queue, and DRAINING (see "Taking a queue over" there). */
SQ_INTERNAL void _sq_sync_handoff(struct sq_cont_s *c);
SQ_INTERNAL struct sq_frame_s *_sq_frame_find(struct sq_queue_s *q);
SQ_INTERNAL bool _sq_drain_claim(struct sq_queue_s *q);
SQ_INTERNAL bool _sq_drain_start(struct sq_queue_s *q);
SQ_INTERNAL void _sq_drain_release(struct sq_queue_s *q);

/* ---- Per-thread frames ------------------------------------------------
 *
 * Each thread keeps the chain of queues whose tasks it is running,
 * innermost first: it gives sq_get_current_queue, sq_get_specific,
 * sq_assert_queue and deadlock detection for sq_sync.
 */
struct sq_frame_s {
	struct sq_queue_s *queue;
	struct sq_frame_s *prev;
	bool exclusive; /* the thread runs `queue` alone (serial or barrier) */
};

SQ_INTERNAL extern SQ_TLS struct sq_frame_s *_sq_current_frame;

SQ_INLINE void
_sq_frame_push(struct sq_frame_s *frame, struct sq_queue_s *q, bool exclusive)
{
	frame->queue = q;
	frame->exclusive = exclusive;
	frame->prev = _sq_current_frame;
	_sq_current_frame = frame;
}

SQ_INLINE void
_sq_frame_pop(struct sq_frame_s *frame)
{
	_sq_current_frame = frame->prev;
}

/* ---- Sync waiters ----------------------------------------------------- */

/* How a drainer hands a sync task back to its waiting caller. */
enum sq_sync_state {
	SQ_SYNC_WAITING = 0, /* queued, the caller sleeps */
	SQ_SYNC_GO = 1,      /* the caller may run now; the drainer waits */
	SQ_SYNC_DONE = 2,    /* ran (by the drainer, or by the caller) */
	SQ_SYNC_RETRY = 3,   /* the queue's job waits for a thread: the
	                        caller should try to take the queue over */
};

struct sq_sync_waiter_s {
	uint32_t state; /* futex word, enum sq_sync_state */
	uint32_t done;  /* futex word: the caller finished (GO handoffs) */
};

/* ---- The pool --------------------------------------------------------- */

/* Makes sure the pool exists (idempotent, cheap after the first call). */
SQ_INTERNAL void _sq_pool_init(void);

/* Submits a job to a root queue. */
SQ_INTERNAL void _sq_pool_push(int root_index, struct sq_job_s *job);
SQ_INTERNAL void _sq_pool_push_overcommit(int root_index, struct sq_job_s *job);
/* The same from a job running on a worker: the job goes to that worker's
 * next-job slot, to run there when the current job returns
 * (pool_slot.c). */
SQ_INTERNAL void _sq_pool_push_next(int root_index, struct sq_job_s *job);
/* Whether the calling thread may hand work to its next-job slot: a worker
 * running a job, outside sq_apply_f and sq_apply_range_f. */
SQ_INTERNAL bool _sq_pool_can_hand_off(void);
/* Moves the calling worker's next-job slot job, if any, to its ring or a
 * root queue: for work that goes on after a hand-off (the on-time runner). */
SQ_INTERNAL void _sq_pool_flush_next(void);
/* Whether work of a higher class than the calling worker's job waits
 * where the worker could take it (false off the pool). */
SQ_INTERNAL bool _sq_pool_higher_waiting(void);
/* Diagnostics (tests, benchmarks): slot jobs run by their owners, taken by
 * the slots' guard, and the guard's naps, summed over the workers. */
SQ_INTERNAL void _sq_debug_pool_handoffs(uint64_t *handoffs,
		uint64_t *guard_takes, uint64_t *guard_naps);
/* Whether work waits that the calling worker would run next: a job in its
 * next-job slot or ring, or in a root queue. Racy looks, a hint. */
SQ_INTERNAL bool _sq_pool_work_waiting(void);
/* func(ctx) on root queue `root_index`, through _sq_pool_push_next. */
SQ_INTERNAL void _sq_root_async_next_f(int root_index, void *ctx,
		sq_function_t func);
/* Runs func(ctx) here as q's work if q is a root queue, or a serial queue
 * on a root that is idle; false (nothing done) otherwise. */
SQ_INTERNAL bool _sq_queue_try_run_here_f(sq_queue_t q, void *ctx,
		sq_function_t func);
/* From the work of a serial queue that a worker drains straight from
 * `root` (and in no sync): leaves func(ctx) to run on this thread, as
 * root's task, once the drain is over, and returns true; else (a function
 * already left, another root, any other context) returns false. */
SQ_INTERNAL bool _sq_queue_defer_to_root_f(sq_queue_t root, void *ctx,
		sq_function_t func);

/* Introspection: the jobs queued on root queue `index`, counted under
 * its lock, at most `limit`; the jobs in the workers' rings and next-job
 * slots (racy reads). pool.c. */
SQ_INTERNAL size_t _sq_pool_root_queued(int index, size_t limit);
SQ_INTERNAL size_t _sq_pool_local_queued(void);

/* Starts the watchdog's thread if the environment asks for it
 * (SQ_WATCHDOG_MS, SQ_SNAPSHOT_SIGNAL) and it has not started: called
 * as the pool starts (watchdog.c). */
SQ_INTERNAL void _sq_watchdog_start(void);

/* A queue's description for sq_debug (introspect.c). */
SQ_INTERNAL size_t _sq_queue_debug(struct sq_object_s *object, char *buf,
		size_t size);

/* The number of workers the pool aims to keep running (usable CPUs). */
SQ_INTERNAL int _sq_pool_width(void);

/* How deep the calling thread is inside sq_apply_f / sq_apply_range_f
 * calls. */
SQ_INTERNAL extern SQ_TLS int _sq_apply_depth;

/* Whether the calling thread is the process's main thread. */
SQ_INTERNAL bool _sq_is_main_thread(void);

/* The main queue's hook: its wake-up makes the eventfd readable. */
SQ_INTERNAL void _sq_main_queue_wakeup(void);

/* Set while sq_main_queue_run_until waits on a condition (main_queue.c).
 * Alone on its cache line (the alignment pads the struct to a line):
 * workers read it after every job, the runner writes it at each look. */
struct sq_main_runner_s {
	_Alignas(SQ_CACHELINE) uint32_t armed;
};
SQ_INTERNAL extern struct sq_main_runner_s _sq_main_runner;
SQ_INTERNAL void _sq_main_runner_wake_slow(void);

/* Called by a worker after each job: wakes a main-queue runner that waits
 * on a condition, so that it looks at it again (the job may have made it
 * true). One relaxed load of a line nobody writes otherwise. */
static inline void
_sq_main_runner_job_done(void)
{
	if (__builtin_expect(__atomic_load_n(&_sq_main_runner.armed,
			__ATOMIC_RELAXED) != 0, 0))
		_sq_main_runner_wake_slow();
}

#endif /* SWIFTQUEUES_QUEUE_INTERNAL_H */
