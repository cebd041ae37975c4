/*
 * SwiftQueues — the worker pool: the structures and functions shared by
 * pool.c (root queues, rings, the idle list, workers, threads), pool_slot.c
 * (the next-job slots and their guard) and pool_monitor.c (blocking
 * compensation, the safety net, retries). Not installed.
 */
#ifndef SWIFTQUEUES_POOL_INTERNAL_H
#define SWIFTQUEUES_POOL_INTERNAL_H

#include "queue_internal.h"
#include "trace_internal.h"

#include <pthread.h>

#define SQ_RING_SIZE 256u
#define SQ_POOL_MAX_THREADS 512
/* After the system refused the monitor a thread, it is not tried again
 * before this long (an idle worker tries it then, see _sq_worker_park). */
#define SQ_MONITOR_RETRY_NS (100 * NSEC_PER_MSEC)
#define SQ_RETRY_SLOTS 4
/* Slot jobs a worker runs in a row while other work is queued (see
 * "Next-job slot", pool_slot.c). */
#define SQ_NEXT_STREAK 32u

/* Occupied slots a busy worker notes at one look (pool_slot.c). */
#define SQ_SCAN_CANDIDATES 8

/* A worker's `blocked` bits. */
#define SQ_BLOCKED_WAIT 1u /* in a wait of the runtime's (announced) */
#define SQ_BLOCKED_SEEN 2u /* seen asleep mid-job by the monitor */
#define SQ_BLOCKED_SYNC 4u /* waiting for its turn on a queue (sync) */

/* Ring entries carry the root index of the job in their low bits (jobs
 * are 8-byte aligned: they begin with a pointer). */
#define SQ_RING_ROOT_MASK ((uintptr_t)7)

struct sq_ring_s {
	uint32_t head; /* CAS by the owner and by thieves */
	uint32_t tail; /* written by the owner only */
	uintptr_t slots[SQ_RING_SIZE];
};

enum sq_worker_slot {
	SQ_SLOT_FREE = 0,
	SQ_SLOT_LIVE = 1,
};

struct sq_worker_s {
	_Alignas(SQ_CACHELINE) struct sq_ring_s ring;
	uint32_t slot_state; /* SQ_SLOT_*, under the spawn lock */
	uint32_t parked;     /* futex word: 1 while parked */
	bool searching;      /* counted in _sq_pool.searching */
	int nice;            /* its thread's nice value now */
	bool sched_idle;     /* and whether it is under SCHED_IDLE */
	bool io_idle;        /* and at the idle I/O priority */
	bool short_slice;    /* and asked for a short time slice */
	/* The highest class its thread may still run (0: any). A process
	 * that may not lower its threads' nice values again binds a thread
	 * to the lower class it niced it for (see "CPU priorities",
	 * pool_class.c). Owner only. */
	uint8_t bound;
	bool on_idle_list;   /* under the idle lock */
	bool leave;          /* asked to give its thread back (pool.c) */
	/* The root index of every entry in the ring: the owner sets it when
	 * it pushes to an empty ring and pushes only that root's jobs after
	 * (see "Precedence", pool_class.c). Read by others as a hint. */
	uint8_t ring_root;
	/* The class it is counted in (`_sq_pool.busy`), SQ_ROOT_COUNT when
	 * none: owner only. */
	uint8_t busy_root;
	int root;            /* root index of the job being run */
	uint32_t tick;
	uint64_t parked_at;  /* when it last parked (monotonic ns) */
	uint64_t woken_at;   /* when it was last woken (monotonic ns) */
	uint64_t jobs;       /* jobs started; read by the monitor */
	uint32_t lock_sleep; /* 1 while asleep for a spin lock (internal.h) */
	pid_t tid;
	char name[16];       /* the thread's current name */
	struct sq_worker_s *next_idle; /* the idle list, under the idle lock */
	struct sq_worker_s *prev_idle;
	/* The next-job slot (see "Next-job slot", pool_slot.c). */
	uintptr_t next;      /* a ring-style entry or 0; owner puts, anyone takes */
	uint32_t next_streak; /* owner only: slot jobs run in a row */
	uint32_t guard_nap;  /* futex word: 1 while napping as the slots' guard */
	/* Blocked (see "Blocked workers", pool.c): SQ_BLOCKED_* bits, set by
	 * the worker around a wait of the runtime's and by the monitor for a
	 * worker it sees asleep in the middle of a job. */
	uint32_t blocked;
	uint32_t block_depth; /* owner only: nested waits */
	uint32_t job_mark;    /* owner only: ring tail when its job began */
	/* Owner only: how many of the ring's newest entries are spawned jobs
	 * (sq_spawn_f), which have no start order (_sq_ring_take_own). */
	uint32_t spawn_run;
	uint32_t block_bit;   /* owner only: the outermost wait's bit */
	uint64_t blocked_at;  /* when its sync wait began (monotonic ns) */
	/* Owner only: the busy worker's look at the others' slots
	 * (_sq_next_scan, pool_slot.c). */
	uint32_t looks;
	uint32_t scan_count;  /* candidates noted at the last look */
	struct {
		int32_t victim;   /* worker index */
		uintptr_t entry;  /* its slot entry and job count when seen */
		uint64_t jobs;
	} scan[SQ_SCAN_CANDIDATES];
	uint64_t scan_at;
	/* Diagnostics, written by this worker only (_sq_debug_pool_handoffs). */
	uint64_t handoffs;   /* slot jobs it ran as their owner */
	uint64_t slot_takes; /* slot jobs it took from others as the guard */
	uint64_t guard_naps; /* naps it took as the guard */
};

struct sq_root_rq_s {
	_Alignas(SQ_CACHELINE) struct __cds_wfcq_head head;
	sq_spinlock_t lock;
	_Alignas(SQ_CACHELINE) struct cds_wfcq_tail tail;
};

struct sq_pool_s {
	/* The classes' root queues, then their overcommit twins' (index
	 * SQ_ROOT_COUNT + class), whose jobs start beyond the width. */
	struct sq_root_rq_s roots[2 * SQ_ROOT_COUNT];
	int width;       /* workers kept: usable CPUs or SQ_WORKERS */
	int max_threads; /* SQ_MAX_THREADS */
	int32_t live;    /* worker threads alive */
	int32_t slots;   /* high-water mark of worker slots ever used */
	int32_t searching;
	int32_t spinning;
	/* Live workers with a `blocked` bit set: they hold a thread but run
	 * nothing, so they do not count against the width. */
	int32_t nblocked;
	int32_t nwaiting; /* of which in an announced wait (SQ_BLOCKED_WAIT) */
	/* The searcher guarding the next-job slots, and the same while it
	 * naps (see "Guarding next-job slots", pool_slot.c); NULL when
	 * none. */
	struct sq_worker_s *guard;
	struct sq_worker_s *sleeper;
	uint32_t spin_ns;  /* the adaptive spin budget (relaxed: a hint) */
	int32_t nidle;
	uint32_t pop_counter;
	/* Bit r: some ring may hold root r's jobs (see "Precedence",
	 * pool_class.c). Set by a pusher, cleared by a looker that found
	 * none. */
	uint32_t ring_mask;
	/* Workers running a job of each class (see "Room for a higher
	 * class", pool.c). */
	int32_t busy[SQ_ROOT_COUNT];
	sq_spinlock_t spawn_lock;
	sq_spinlock_t idle_lock;
	struct sq_worker_s *idle;        /* the idle list: most recent first */
	struct sq_worker_s *idle_oldest; /* and its other end */
	pthread_attr_t thread_attr;
	/* The nice value of the thread that started the pool (the program's),
	 * and whether a thread may go from BACKGROUND's nice back to it. */
	int base_nice;
	bool nice_reversible;
	bool nice_raise; /* and may go below base_nice (the classes above
	                    DEFAULT) */
	bool sched_idle_ok; /* and to SCHED_IDLE and back (BACKGROUND) */
	bool background_idle; /* SQ_BACKGROUND_IDLE: BACKGROUND under
	                         SCHED_IDLE (where sched_idle_ok) */
	bool short_slice; /* SQ_SHORT_SLICE (default 1): the classes above
	                     DEFAULT ask for a short time slice */
	/* The monitor: started with the first worker; sleeps on `kick` while
	 * no work waits. */
	uint32_t monitor_kick;  /* futex word: 1 once kicked */
	uint32_t monitor_deep;  /* 1 while it sleeps until kicked */
	uint32_t monitor_state; /* SQ_MONITOR_* */
	uint64_t monitor_retry_at; /* no new try before (a refused thread) */
	bool monitor_running;
	/* Refused threads (relaxed: hints, racing updates only blur them). */
	uint64_t spawn_after;   /* no new worker tried before this (ns) */
	uint64_t spawn_pause;   /* the next pause, 0 after a success */
	/* Functions the monitor calls until they succeed
	 * (_sq_pool_retry_later). */
	bool (*retry[SQ_RETRY_SLOTS])(void);
	uint64_t retry_at;
	bool net_enabled;  /* SQ_MONITOR_NET (default 1) */
	bool net_debug;    /* SQ_DEBUG_NET: report each firing */
	/* Statistics (sq_pool_stats), relaxed counters. */
	uint64_t wakeups;
	uint64_t spawned;
	uint64_t compensated;
	uint64_t net_firings;
	struct sq_worker_s workers[SQ_POOL_MAX_THREADS];
};

/* The pool, one per process (pool.c). */
SQ_INTERNAL extern struct sq_pool_s _sq_pool;

/* Whether w runs at a lower class's values: a nice value above the
 * program's, SCHED_IDLE or the idle I/O class (pool_class.c). */
static inline bool
_sq_worker_lowered(const struct sq_worker_s *w)
{
	return w->nice > _sq_pool.base_nice || w->sched_idle || w->io_idle;
}

enum {
	SQ_MONITOR_NONE = 0,     /* not started, or refused a thread */
	SQ_MONITOR_STARTING = 1, /* a thread is creating it */
	SQ_MONITOR_RUNNING = 2,
};

/* A pool event for traces and probes: worker w's index, and the pool's
 * counters at that moment (read only when observed). */
#define SQ_POOL_EVENT(kind, w, b)                                              \
	SQ_TRACE_POOL(kind, (uint64_t)((w) - _sq_pool.workers), (b),           \
			__atomic_load_n(&_sq_pool.live, __ATOMIC_RELAXED),     \
			__atomic_load_n(&_sq_pool.nidle, __ATOMIC_RELAXED),    \
			__atomic_load_n(&_sq_pool.searching, __ATOMIC_RELAXED))

/* The worker this thread is, or NULL (pool.c). */
SQ_INTERNAL extern SQ_TLS struct sq_worker_s *_sq_self;

/* Whether a ring is empty (racy: a hint, or a look before parking). */
static inline bool
_sq_ring_empty(struct sq_ring_s *r)
{
	return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) ==
			__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
}

/* ---- Local rings ------------------------------------------------------- */

static inline bool
_sq_ring_push(struct sq_ring_s *r, uintptr_t entry)
{
	uint32_t t = r->tail; /* only the owner writes it */
	uint32_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	if (t - h >= SQ_RING_SIZE)
		return false;
	__atomic_store_n(&r->slots[t % SQ_RING_SIZE], entry, __ATOMIC_RELAXED);
	/* Release: a thief that sees the new tail sees the slot. */
	__atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
	return true;
}

/* Takes the oldest entry (owner or thief); 0 when empty. The loads of
 * head and tail are seq-cst: they pair with the owner's take from the
 * tail (_sq_ring_pop_tail), which stores the tail then loads the head.
 * Empty is a tail at or below the head: while the owner takes the last
 * entry that a thief took first, its tail is one below the head for a
 * moment, and the slot at the head holds an entry taken a lap ago. */
static inline uintptr_t
_sq_ring_pop(struct sq_ring_s *r)
{
	uint32_t h = __atomic_load_n(&r->head, __ATOMIC_SEQ_CST);
	for (;;) {
		uint32_t t = __atomic_load_n(&r->tail, __ATOMIC_SEQ_CST);
		if ((int32_t)(t - h) <= 0)
			return 0;
		uintptr_t entry = __atomic_load_n(&r->slots[h % SQ_RING_SIZE],
				__ATOMIC_RELAXED);
		/* If the CAS fails the slot may have been reused: the entry
		 * read above is discarded and we retry with the new head. */
		if (__atomic_compare_exchange_n(&r->head, &h, h + 1, false,
				__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return entry;
	}
}

/* The owner takes its newest entry, if it was pushed at or after index
 * `mark`; 0 otherwise (Chase-Lev's pop: the last entry is raced for with
 * thieves by a CAS of the head). */
static inline uintptr_t
_sq_ring_pop_tail(struct sq_ring_s *r, uint32_t mark)
{
	uint32_t t = r->tail; /* only the owner writes it */
	uint32_t h = __atomic_load_n(&r->head, __ATOMIC_SEQ_CST);
	if (t == h || (int32_t)(t - 1 - mark) < 0)
		return 0;
	t--;
	/* Seq-cst store, then seq-cst load of the head: a thief loads the
	 * head then the tail, so one of us sees the other. */
	__atomic_store_n(&r->tail, t, __ATOMIC_SEQ_CST);
	h = __atomic_load_n(&r->head, __ATOMIC_SEQ_CST);
	uintptr_t entry = 0;
	if ((int32_t)(t - h) > 0) {
		/* More than one left: no thief can reach index t. */
		return __atomic_load_n(&r->slots[t % SQ_RING_SIZE],
				__ATOMIC_RELAXED);
	}
	if (t == h) {
		entry = __atomic_load_n(&r->slots[t % SQ_RING_SIZE],
				__ATOMIC_RELAXED);
		if (!__atomic_compare_exchange_n(&r->head, &h, h + 1, false,
				__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			entry = 0; /* a thief took it */
	}
	/* The ring is empty now (head is t + 1): put the tail back there. */
	__atomic_store_n(&r->tail, t + 1, __ATOMIC_RELEASE);
	return entry;
}

/* The owner's take from its own ring: the oldest entry, as a queue starts
 * its tasks in order, but a spawned job at the newest end first (a
 * fork-join tree then runs depth first on the thread that made it, warm,
 * as oneTBB's and Cilk's owners run it; thieves still take the oldest).
 * One look in 8 (`tick`) takes the oldest anyway, so spawned jobs that
 * spawn more cannot hold the ring's older entries back for good. */
static inline uintptr_t
_sq_ring_take_own(struct sq_worker_s *w)
{
	if (w->spawn_run != 0 && w->tick % 8 != 0) {
		uintptr_t e = _sq_ring_pop_tail(&w->ring, w->ring.tail - 1);
		w->spawn_run = e != 0 ? w->spawn_run - 1 : 0;
		if (e != 0)
			return e;
	}
	return _sq_ring_pop(&w->ring);
}

/* A ring entry's job, and its root index through `root`. */
static inline struct sq_job_s *
_sq_entry_job(uintptr_t entry, int *root)
{
	*root = (int)(entry & SQ_RING_ROOT_MASK);
	return (struct sq_job_s *)(entry & ~SQ_RING_ROOT_MASK);
}

/* ---- By class (pool_class.c, "Precedence") ------------------------------ */

/* The highest class below `limit` with work another worker could take: a
 * root queue not empty, or a ring that may hold it; `limit` if none. */
static inline int
_sq_best_waiting(int limit)
{
	uint32_t mask = __atomic_load_n(&_sq_pool.ring_mask, __ATOMIC_RELAXED);
	for (int r = 0; r < limit; r++)
		if ((mask & (1u << r)) || !cds_wfcq_empty(
				&_sq_pool.roots[r].head, &_sq_pool.roots[r].tail) ||
				!cds_wfcq_empty(&_sq_pool.roots[SQ_ROOT_COUNT + r].head,
				&_sq_pool.roots[SQ_ROOT_COUNT + r].tail))
			return r;
	return limit;
}

/* Whether a job of class r queued behind a blocked worker may go to
 * another worker now: not while work of a higher class waits. That work
 * goes first, as everywhere ("Precedence", pool_class.c); its class may be
 * closed ("Taking within the width"), and the workers that run it look
 * again when their jobs end. Without this, a blocked drainer's ring of
 * background jobs ran beyond the width, ahead of waiting utility work. A
 * relaxed hint: a wrong guess costs one job out of order, or a look. */
static inline bool
_sq_blocked_may_take(int r)
{
	return _sq_best_waiting(r) == r;
}

/* Notes that a ring now holds root r's jobs (after the push's fence). */
static inline void
_sq_ring_mask_set(int r)
{
	if (!(__atomic_load_n(&_sq_pool.ring_mask, __ATOMIC_SEQ_CST) &
			(1u << r)))
		__atomic_fetch_or(&_sq_pool.ring_mask, 1u << r,
				__ATOMIC_SEQ_CST);
}

/* Moves w into class r's busy count (SQ_ROOT_COUNT: none). */
static inline void
_sq_worker_count_class(struct sq_worker_s *w, int r)
{
	if (w->busy_root == r)
		return;
	/* Seq-cst: a worker that stops running, then looks at the queues
	 * before it parks, and another that looks at these counts to decide
	 * whether it may take a job (pool_class.c, "Taking within the
	 * width"): one of them sees the other. */
	if (w->busy_root < SQ_ROOT_COUNT)
		__atomic_sub_fetch(&_sq_pool.busy[w->busy_root], 1,
				__ATOMIC_SEQ_CST);
	if (r < SQ_ROOT_COUNT)
		__atomic_add_fetch(&_sq_pool.busy[r], 1, __ATOMIC_SEQ_CST);
	/* Relaxed atomic: other workers read it (_sq_take_stop's caller
	 * passes only itself, but the runners' look in pool_monitor.c
	 * reads any worker's). */
	__atomic_store_n(&w->busy_root, (uint8_t)r, __ATOMIC_RELAXED);
}


/* Live workers that are not in an announced wait; a sync caller's wait
 * for its turn counts as running (see _sq_pool_compensate), and so does
 * blocking only the monitor has seen (it compensates for it itself).
 * Racy: a count to compare with the width. Seq-cst: read after a job's
 * enqueue, as `live` is. */
static inline int32_t
_sq_pool_running(void)
{
	return __atomic_load_n(&_sq_pool.live, __ATOMIC_SEQ_CST) -
			__atomic_load_n(&_sq_pool.nwaiting, __ATOMIC_SEQ_CST);
}

/* pool.c: the run queues, waking and spawning. */
SQ_INTERNAL struct sq_job_s *_sq_root_pop(int index);
SQ_INTERNAL bool _sq_roots_empty(void);
SQ_INTERNAL bool _sq_pool_has_work_in(bool slots);
SQ_INTERNAL bool _sq_pool_has_work(void);
SQ_INTERNAL struct sq_worker_s *_sq_idle_pop(void);
SQ_INTERNAL int _sq_thread_create(const pthread_attr_t *attr,
		void *(*main)(void *), void *arg);
SQ_INTERNAL int _sq_thread_create_at_base(struct sq_worker_s *w,
		const pthread_attr_t *attr, void *(*main)(void *), void *arg);
SQ_INTERNAL bool _sq_thread_io_idle(void);
SQ_INTERNAL bool _sq_thread_short_slice(void);
SQ_INTERNAL void _sq_pool_class_atfork_child(void);
SQ_INTERNAL bool _sq_pool_spawn(void);
SQ_INTERNAL void _sq_worker_wake(struct sq_worker_s *w);
SQ_INTERNAL void _sq_pool_notify(void);
SQ_INTERNAL void _sq_pool_notify_root(int root);
SQ_INTERNAL void _sq_pool_wake_sleeper(void);

/* pool_class.c: taking by class, stealing, room for a higher class, the
 * classes' CPU priorities. */
SQ_INTERNAL struct sq_job_s *_sq_take_by_class(struct sq_worker_s *self,
		int stop, int *root);
SQ_INTERNAL struct sq_job_s *_sq_steal(struct sq_worker_s *self, int r,
		int *root);
SQ_INTERNAL struct sq_job_s *_sq_take_aged(struct sq_worker_s *self,
		int stop, int own, int *root);
SQ_INTERNAL struct sq_job_s *_sq_steal_above(struct sq_worker_s *self,
		int stop, int *root);
SQ_INTERNAL bool _sq_pool_class_room(int r);
SQ_INTERNAL int _sq_take_stop(const struct sq_worker_s *self);
SQ_INTERNAL bool _sq_pool_has_takeable(const struct sq_worker_s *self);
SQ_INTERNAL void _sq_worker_set_class_nice(struct sq_worker_s *w, int root);
SQ_INTERNAL void _sq_worker_before_look(struct sq_worker_s *w);
SQ_INTERNAL bool _sq_worker_bound_should_leave(struct sq_worker_s *w);

/* pool_slot.c: the owner takes its own slot's job; a searcher that found
 * nothing else guards the others' slots. */
SQ_INTERNAL struct sq_job_s *_sq_next_take(struct sq_worker_s *w, int *root);
SQ_INTERNAL struct sq_job_s *_sq_next_guard(struct sq_worker_s *self,
		int *root);
SQ_INTERNAL struct sq_job_s *_sq_next_scan(struct sq_worker_s *self,
		int *root);

/* pool_block.c: blocked workers (`blocked` bits, `nblocked`), what waits
 * behind them, waiting that helps. */
SQ_INTERNAL struct sq_job_s *_sq_take_blocked(struct sq_worker_s *self,
		int *root, bool rings);
SQ_INTERNAL void _sq_worker_mark_blocked(struct sq_worker_s *w,
		uint32_t bit);
SQ_INTERNAL void _sq_worker_unmark_blocked(struct sq_worker_s *w,
		uint32_t bit);

/* pool_monitor.c: jobs started so far; starting and kicking the monitor. */
SQ_INTERNAL uint64_t _sq_pool_jobs_total(void);
SQ_INTERNAL void _sq_monitor_ensure(void);
SQ_INTERNAL void _sq_monitor_kick(void);
SQ_INTERNAL bool _sq_pool_mark_sleeping_runners(struct sq_worker_s *self);

#endif
