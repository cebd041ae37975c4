/*
 * SwiftQueues — the watchdog (SQ_WATCHDOG_MS) and snapshots on a signal
 * (SQ_SNAPSHOT_SIGNAL), both served by one thread, `sq.watchdog`, started
 * with the pool only when the environment asks for one of them.
 *
 * Snapshots on a signal. The signal is watched through an internal signal
 * source, so source.c installs the runtime's handler and has its watcher
 * thread unblock the number, as for any signal source (the source itself
 * is kept suspended: nothing is delivered to a queue). The handler, seeing
 * SQ_SNAPSHOT_SIGNAL's number, sets a bit in this thread's futex word and
 * wakes it (both async-signal-safe); the thread writes the snapshot to
 * stderr. No worker, no queue and no event loop pass is needed, so a
 * server whose workers are all blocked can still be looked at.
 *
 * The watchdog. Each thread that runs tasks gets a record (on its first
 * task while the watchdog is on) that only it writes:
 *   - `busy` while it runs any task;
 *   - for the outermost task during which it holds a serial queue (a
 *     frame held exclusively: a serial queue, the main queue, a barrier),
 *     the queue and since when, on the coarse clock (a few ns to read),
 *     published seqlock-style through `seq` (odd while such a task runs);
 *   - in sq_sync's slow path, under the record's spin lock: the queue it
 *     waits for with that queue's target chain, and the queues it holds.
 * The thread ticks every SQ_WATCHDOG_MS and reports, once per stall:
 *   - a task that has held a serial queue for n ms or more;
 *   - queued work that has waited n ms or more with no job of its queue
 *     starting (introspect.c's looks: the drain's pop count unchanged), on
 *     a queue that may run (nothing up its chain suspended or inactive),
 *     and work on a global queue while the pool started no job at all;
 *   - a wait cycle: threads in sq_sync each waiting for a queue (or a
 *     queue up its chain) that the next one holds.
 * then writes a snapshot. When a tick finds no task running and nothing
 * queued, the thread sleeps until a task starts: it sets `deep`, issues a
 * process-wide memory barrier (membarrier(2)), and looks once more; a
 * task's start marks its record busy, then reads `deep` and kicks the
 * thread if it is set. The barrier makes the two sides a Dekker pair with
 * only compiler ordering on the task's side: either the look sees the
 * task, or the task sees `deep`. Work queued on the main queue starts no
 * task until the main thread drains it, so its wake-up kicks too. Without membarrier(2) the thread never
 * sleeps that deep and ticks every n ms. The watchdog's flag is a byte of
 * the word the observation points look at (queue_internal.h): with it
 * off, a task pays nothing beyond the look its run's point makes anyway.
 */
#include "event_internal.h"
#include "introspect_internal.h"
#include "trace_internal.h"

#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQ_WATCH_CHAIN 8        /* queues kept per chain / held list */
#define SQ_WATCH_WAITERS 64     /* waiting threads a cycle search looks at */
#define SQ_WATCH_LABEL 128
#define SQ_WATCH_MAX_MS (3600u * 1000u)

/* The futex word's bits. */
#define SQ_WATCH_KICK 0x1u      /* a task started while it slept deep */
#define SQ_WATCH_SNAPSHOT 0x2u  /* SQ_SNAPSHOT_SIGNAL arrived */

int _sq_snapshot_signo;

struct sq_watch_rec_s {
	struct sq_watch_rec_s *next, *prev; /* the list, under its lock */
	pid_t tid;
	/* The owner's alone. */
	uint32_t depth;         /* tasks it is inside */
	uint32_t held_depth;    /* depth of the task that holds a queue */
	/* Written by the owner, read by the watchdog (atomics). */
	uint32_t busy;
	uint32_t seq;           /* odd while a task holds `queue` */
	struct sq_queue_s *queue;
	const void *held_func;  /* the function of the task that holds it */
	uint64_t since;
	/* The outermost task it runs (while busy): its queue, its function. */
	struct sq_queue_s *task_queue;
	const void *task_func;
	/* What the thread is, for its name (the trace's roles). */
	int role, role_index;
	/* sq_sync's wait, under `lock`. */
	sq_spinlock_t lock;
	struct sq_queue_s *wait_for; /* NULL: not waiting */
	uint64_t wait_since;
	uint32_t wait_gen;
	int nchain, nheld;
	struct sq_queue_s *chain[SQ_WATCH_CHAIN];
	struct sq_queue_s *held[SQ_WATCH_CHAIN];
	/* The watchdog thread's, under the list lock. */
	uint32_t reported_seq;
	uint32_t reported_gen;
};

static struct {
	pthread_mutex_t lock;       /* the records list */
	struct sq_watch_rec_s *records;
	uint32_t word;              /* futex: SQ_WATCH_* bits */
	uint32_t deep;              /* 1 while it sleeps until kicked */
	uint32_t ms;                /* SQ_WATCHDOG_MS; 0: off */
	int signo;                  /* SQ_SNAPSHOT_SIGNAL; 0: none */
	sq_source_t signal_source;  /* atomic: read by snapshots */
	/* Global queues: the pool's job count while work waited, since when. */
	uint64_t root_jobs[SQ_ROOT_COUNT];
	uint64_t root_since[SQ_ROOT_COUNT];
	bool root_reported[SQ_ROOT_COUNT];
} _sq_watch = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static SQ_TLS struct sq_watch_rec_s *_sq_watch_self;
static pthread_key_t _sq_watch_key;
static sq_once_t _sq_watch_key_once;

/* ---- Records ------------------------------------------------------------ */

/* Thread exit: the record leaves the list. */
static void
_sq_watch_rec_destroy(void *arg)
{
	struct sq_watch_rec_s *r = arg;
	_sq_watch_self = NULL;
	pthread_mutex_lock(&_sq_watch.lock);
	if (r->prev)
		r->prev->next = r->next;
	else
		_sq_watch.records = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&_sq_watch.lock);
	free(r);
}

static void
_sq_watch_key_create(void *unused)
{
	pthread_key_create(&_sq_watch_key, _sq_watch_rec_destroy);
}

/* The calling thread's record, made on first use (NULL: out of memory,
 * the thread is then not watched). */
static struct sq_watch_rec_s *
_sq_watch_rec(void)
{
	struct sq_watch_rec_s *r = _sq_watch_self;
	if (SQ_LIKELY(r != NULL))
		return r;
	sq_once_f(&_sq_watch_key_once, NULL, _sq_watch_key_create);
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->tid = gettid();
	r->role = _sq_trace_role;
	r->role_index = _sq_trace_role_index;
	pthread_mutex_lock(&_sq_watch.lock);
	r->next = _sq_watch.records;
	if (r->next)
		r->next->prev = r;
	_sq_watch.records = r;
	pthread_mutex_unlock(&_sq_watch.lock);
	pthread_setspecific(_sq_watch_key, r);
	_sq_watch_self = r;
	return r;
}

/* The queue the calling thread holds alone, innermost first. */
static struct sq_queue_s *
_sq_watch_held_queue(void)
{
	for (struct sq_frame_s *f = _sq_current_frame; f; f = f->prev)
		if (f->exclusive && !_sq_queue_is_root(f->queue))
			return f->queue;
	return NULL;
}

/* A task started while the watchdog sleeps until one does. A plain read
 * first: a burst of tasks kicks once. */
static void
_sq_watch_kick(void)
{
	if (__atomic_load_n(&_sq_watch.word, __ATOMIC_RELAXED) & SQ_WATCH_KICK)
		return;
	if (!(__atomic_fetch_or(&_sq_watch.word, SQ_WATCH_KICK,
			__ATOMIC_SEQ_CST) & SQ_WATCH_KICK))
		_sq_futex_wake(&_sq_watch.word, 1);
}

static void
_sq_watch_task_begin(sq_function_t func)
{
	struct sq_watch_rec_s *r = _sq_watch_rec();
	if (r == NULL)
		return;
	if (r->depth++ == 0) {
		/* Read only while `busy` (a snapshot may read a pair from
		 * two tasks in a row: it names a queue, or a function, that
		 * ran a moment ago). */
		__atomic_store_n(&r->task_queue, _sq_current_frame ?
				_sq_current_frame->queue : NULL,
				__ATOMIC_RELEASE);
		__atomic_store_n(&r->task_func, (const void *)func,
				__ATOMIC_RELEASE);
		/* Release: with `seq`, what the watchdog reads is whole. The
		 * store goes before the read of `deep` (the compiler's order
		 * here; the CPU's is the watchdog's membarrier, see the top). */
		__atomic_store_n(&r->busy, 1, __ATOMIC_RELEASE);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&_sq_watch.deep, __ATOMIC_RELAXED))
			_sq_watch_kick();
	}
	if (r->held_depth != 0)
		return; /* an outer task holds a queue already */
	struct sq_queue_s *q = _sq_watch_held_queue();
	if (q == NULL)
		return;
	r->held_depth = r->depth;
	/* A seqlock with release stores and acquire loads only (no fences:
	 * ThreadSanitizer does not model them; on x86 all are plain moves).
	 * These stay after the even `seq` of the last task's end; the odd
	 * one below stays after them, so the watchdog that reads it reads
	 * these. */
	__atomic_store_n(&r->queue, q, __ATOMIC_RELEASE);
	__atomic_store_n(&r->held_func, (const void *)func, __ATOMIC_RELEASE);
	__atomic_store_n(&r->since, _sq_coarse_ns(), __ATOMIC_RELEASE);
	__atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELEASE);
}

static void
_sq_watch_task_end(void)
{
	struct sq_watch_rec_s *r = _sq_watch_self;
	if (r == NULL || r->depth == 0)
		return; /* began before the watchdog was on */
	if (r->held_depth == r->depth) {
		r->held_depth = 0;
		__atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELEASE);
	}
	if (--r->depth == 0)
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
}

void
_sq_watch_work_queued(void)
{
	/* After the queue's seq-cst wake-up: either the watchdog's look
	 * after it set `deep` sees the work, or this sees `deep`. */
	if (__atomic_load_n(&_sq_watch.deep, __ATOMIC_SEQ_CST))
		_sq_watch_kick();
}

void
_sq_watch_task_run(sq_function_t func, void *ctx)
{
	_sq_watch_task_begin(func);
	func(ctx);
	_sq_watch_task_end();
}

void
_sq_watch_wait_begin(struct sq_queue_s *q)
{
	struct sq_watch_rec_s *r = _sq_watch_rec();
	if (r == NULL)
		return;
	sq_spinlock_lock(&r->lock);
	r->wait_for = q;
	r->wait_since = _sq_coarse_ns();
	r->wait_gen++;
	/* q and its chain stay alive while we wait (the caller's reference;
	 * each queue holds its target). */
	r->nchain = 0;
	for (struct sq_queue_s *x = q; x != NULL && !_sq_queue_is_root(x) &&
			r->nchain < SQ_WATCH_CHAIN;
			x = __atomic_load_n(&x->obj.target, __ATOMIC_ACQUIRE)) {
		r->chain[r->nchain++] = x;
		if (x->type == SQ_QUEUE_TYPE_MAIN)
			break;
	}
	r->nheld = 0;
	for (struct sq_frame_s *f = _sq_current_frame; f != NULL &&
			r->nheld < SQ_WATCH_CHAIN; f = f->prev)
		if (f->exclusive && !_sq_queue_is_root(f->queue))
			r->held[r->nheld++] = f->queue;
	sq_spinlock_unlock(&r->lock);
}

void
_sq_watch_wait_end(void)
{
	struct sq_watch_rec_s *r = _sq_watch_self;
	if (r == NULL)
		return;
	sq_spinlock_lock(&r->lock);
	r->wait_for = NULL;
	sq_spinlock_unlock(&r->lock);
}

/* A record's held task, read seqlock-style: true with the queue, its
 * task's function and since when, if one runs. */
static bool
_sq_watch_read_held(struct sq_watch_rec_s *r, uint32_t *seq,
		struct sq_queue_s **q, const void **func, uint64_t *since)
{
	uint32_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
	if (!(s1 & 1))
		return false;
	/* Acquire: the second read of `seq` stays after these. */
	*q = __atomic_load_n(&r->queue, __ATOMIC_ACQUIRE);
	*func = __atomic_load_n(&r->held_func, __ATOMIC_ACQUIRE);
	*since = __atomic_load_n(&r->since, __ATOMIC_ACQUIRE);
	*seq = s1;
	return __atomic_load_n(&r->seq, __ATOMIC_RELAXED) == s1;
}

static bool
_sq_watch_read_task(struct sq_watch_rec_s *r, uint32_t *seq,
		struct sq_queue_s **q, uint64_t *since)
{
	const void *func;
	return _sq_watch_read_held(r, seq, q, &func, since);
}

/* ---- Wait cycles ------------------------------------------------------------ */

/* A waiting thread as the cycle search sees it (copied under its lock). */
struct sq_watch_waiter_s {
	struct sq_watch_rec_s *r;
	pid_t tid;
	uint32_t gen;
	int nchain, nheld;
	struct sq_queue_s *chain[SQ_WATCH_CHAIN];
	struct sq_queue_s *held[SQ_WATCH_CHAIN];
	char wait_label[SQ_WATCH_LABEL];
	char held_label[SQ_WATCH_CHAIN][SQ_WATCH_LABEL];
	int next;     /* the waiter holding what this one waits for; -1 */
	int next_via; /* which of next's held queues */
	int mark;
};

/* Finds wait cycles among the waiting threads and reports each once.
 * List lock held. */
static void
_sq_watch_find_cycles(struct sq_sb_s *report)
{
	static struct sq_watch_waiter_s w[SQ_WATCH_WAITERS];
	int n = 0;
	for (struct sq_watch_rec_s *r = _sq_watch.records; r != NULL &&
			n < SQ_WATCH_WAITERS; r = r->next) {
		sq_spinlock_lock(&r->lock);
		if (r->wait_for != NULL) {
			struct sq_watch_waiter_s *x = &w[n++];
			x->r = r;
			x->tid = r->tid;
			x->gen = r->wait_gen;
			x->nchain = r->nchain;
			x->nheld = r->nheld;
			memcpy(x->chain, r->chain, sizeof(x->chain));
			memcpy(x->held, r->held, sizeof(x->held));
			/* Alive while it waits: the lock keeps it waiting. */
			snprintf(x->wait_label, sizeof(x->wait_label), "%s",
					_sq_object_label(r->wait_for));
			for (int h = 0; h < r->nheld; h++)
				snprintf(x->held_label[h],
						sizeof(x->held_label[h]), "%s",
						_sq_object_label(r->held[h]));
			x->next = -1;
			x->mark = -1;
		}
		sq_spinlock_unlock(&r->lock);
	}
	/* Who holds what each one waits for: the queue nearest to the one
	 * it syncs onto first. */
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < w[i].nchain && w[i].next < 0; k++) {
			for (int j = 0; j < n && w[i].next < 0; j++) {
				if (j == i)
					continue;
				for (int h = 0; h < w[j].nheld; h++) {
					if (w[j].held[h] == w[i].chain[k]) {
						w[i].next = j;
						w[i].next_via = h;
						break;
					}
				}
			}
		}
	}
	/* Each thread waits for one holder: follow the links. */
	for (int i = 0; i < n; i++) {
		int x = i;
		for (int steps = 0; x >= 0 && w[x].mark < 0 && steps <= n;
				steps++) {
			w[x].mark = i;
			x = w[x].next;
		}
		if (x < 0 || w[x].mark != i)
			continue; /* no cycle, or one found from another start */
		/* x is on a cycle: start it at its smallest thread id. */
		int start = x;
		for (int y = w[x].next; y != x; y = w[y].next)
			if (w[y].tid < w[start].tid)
				start = y;
		bool fresh = false;
		int y = start;
		do {
			fresh |= w[y].r->reported_gen != w[y].gen;
			y = w[y].next;
		} while (y != start);
		if (!fresh)
			continue;
		_sq_sb_printf(report, "SwiftQueues: watchdog: wait cycle:");
		int prev = start;
		while (w[prev].next != start)
			prev = w[prev].next;
		y = start;
		do {
			/* y holds what its predecessor waits for. */
			_sq_sb_printf(report, "%s thread %d holds ", y == start ?
					"" : ";", (int)w[y].tid);
			_sq_sb_quote(report, w[y].held_label[w[prev].next_via]);
			_sq_sb_printf(report, " and waits for ");
			_sq_sb_quote(report, w[y].wait_label);
			w[y].r->reported_gen = w[y].gen;
			prev = y;
			y = w[y].next;
		} while (y != start);
		_sq_sb_printf(report, "\n");
	}
}

/* ---- The thread ------------------------------------------------------------- */

/* Long tasks, wait cycles, waiting work; returns whether anything runs or
 * waits. Writes the report and a snapshot when there is news. */
static bool
_sq_watch_tick(uint64_t now)
{
	uint64_t threshold = (uint64_t)_sq_watch.ms * NSEC_PER_MSEC;
	struct sq_sb_s report = { 0 };
	bool active = false;

	/* The threads holding queues, for the reports of waiting work. */
	static struct sq_watch_holder_s holders[SQ_WATCH_WAITERS];
	size_t nholders = 0;
	pthread_mutex_lock(&_sq_watch.lock);
	for (struct sq_watch_rec_s *r = _sq_watch.records; r; r = r->next) {
		if (__atomic_load_n(&r->busy, __ATOMIC_ACQUIRE))
			active = true;
		uint32_t seq;
		struct sq_queue_s *q;
		const void *func;
		uint64_t since;
		if (!_sq_watch_read_held(r, &seq, &q, &func, &since))
			continue;
		if (nholders < SQ_WATCH_WAITERS)
			holders[nholders++] = (struct sq_watch_holder_s){ q,
					r->tid, func, since };
		if (r->reported_seq == seq || now < since ||
				now - since < threshold)
			continue;
		/* The queue is alive while its task runs; the lookup makes
		 * sure of it (a pointer read just as the task ended is not
		 * followed), the second look that the task still runs. */
		char label[SQ_WATCH_LABEL];
		if (!_sq_introspect_queue_label(q, label, sizeof(label)) ||
				__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != seq)
			continue;
		r->reported_seq = seq;
		_sq_sb_printf(&report, "SwiftQueues: watchdog: a task on "
				"queue ");
		_sq_sb_quote(&report, label);
		char fn[256];
		_sq_symbol_name(func, fn, sizeof(fn));
		_sq_sb_printf(&report, " has run for %llu ms (thread %d, "
				"running %s)\n", (unsigned long long)((now -
				since) / NSEC_PER_MSEC), (int)r->tid, fn);
	}
	_sq_watch_find_cycles(&report);
	pthread_mutex_unlock(&_sq_watch.lock);

	if (_sq_introspect_scan_waits(now, threshold, &report, holders,
			nholders))
		active = true;

	/* Global queues: work waits while the pool starts no job at all. */
	sq_pool_stats_t stats;
	sq_pool_stats(&stats);
	for (int i = 0; i < SQ_ROOT_COUNT; i++) {
		if (_sq_pool_root_queued(i, 1) == 0) {
			_sq_watch.root_since[i] = 0;
			continue;
		}
		active = true;
		if (_sq_watch.root_since[i] == 0 ||
				_sq_watch.root_jobs[i] != stats.jobs) {
			_sq_watch.root_since[i] = now;
			_sq_watch.root_jobs[i] = stats.jobs;
			_sq_watch.root_reported[i] = false;
			continue;
		}
		if (now - _sq_watch.root_since[i] < threshold ||
				_sq_watch.root_reported[i])
			continue;
		_sq_watch.root_reported[i] = true;
		_sq_sb_printf(&report, "SwiftQueues: watchdog: work queued on "
				"global queue ");
		_sq_sb_quote(&report, _sq_object_label(&_sq_root_queues[i]));
		_sq_sb_printf(&report, " has waited %llu ms while no worker "
				"started a job (%u live, %u idle)\n",
				(unsigned long long)((now -
				_sq_watch.root_since[i]) / NSEC_PER_MSEC),
				stats.live, stats.idle);
	}
	if (_sq_pool_local_queued() != 0)
		active = true;

	if (report.len > 0 && !report.failed) {
		ssize_t w = write(STDERR_FILENO, report.buf, report.len);
		(void)w;
		/* Each finding also goes into a trace being recorded, as an
		 * instant on this thread's track. */
		for (const char *line = report.buf, *end = report.buf +
				report.len; line < end;) {
			const char *nl = memchr(line, '\n', (size_t)(end - line));
			size_t len = nl ? (size_t)(nl - line) : (size_t)(end -
					line);
			_sq_trace_note(SQ_NOTE_WATCHDOG, line, len);
			line += len + 1;
		}
		_sq_snapshot_write(STDERR_FILENO);
	}
	free(report.buf);
	return active;
}

/* Whether the process is idle now: no task runs, no work waits. */
static bool
_sq_watch_idle(void)
{
	bool busy = false;
	pthread_mutex_lock(&_sq_watch.lock);
	for (struct sq_watch_rec_s *r = _sq_watch.records; r && !busy;
			r = r->next)
		busy = __atomic_load_n(&r->busy, __ATOMIC_ACQUIRE) != 0;
	pthread_mutex_unlock(&_sq_watch.lock);
	if (busy || _sq_pool_local_queued() != 0)
		return false;
	for (int i = 0; i < SQ_ROOT_COUNT; i++)
		if (_sq_pool_root_queued(i, 1) != 0)
			return false;
	struct sq_sb_s none = { 0 };
	bool work = _sq_introspect_scan_waits(_sq_coarse_ns(), UINT64_MAX,
			&none, NULL, 0);
	free(none.buf);
	return !work;
}

static bool
_sq_watch_membarrier(void)
{
	static int state; /* 0 unknown, 1 registered, -1 refused */
	if (state == 0)
		state = syscall(SYS_membarrier,
				MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)
				== 0 ? 1 : -1;
	return state > 0 && syscall(SYS_membarrier,
			MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* Arms SQ_SNAPSHOT_SIGNAL through a signal source of our own (see the
 * top): kept suspended, so its events go nowhere. */
static void
_sq_watch_arm_signal(int signo)
{
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_SIGNAL,
			(uintptr_t)signo, 0, NULL);
	if (s == NULL) {
		fprintf(stderr, "SwiftQueues: SQ_SNAPSHOT_SIGNAL: signal %d "
				"cannot be watched: %s\n", signo,
				strerror(errno));
		return;
	}
	__atomic_store_n(&_sq_snapshot_signo, signo, __ATOMIC_RELAXED);
	__atomic_store_n(&_sq_watch.signal_source, s, __ATOMIC_RELEASE);
	/* Suspended first, so that not even its activation queues a
	 * handler job (on a global queue, maybe behind blocked workers). */
	sq_suspend(s);
	sq_activate(s); /* the loop installs the handler */
}

static void *
_sq_watch_main(void *unused)
{
	pthread_setname_np(pthread_self(), "sq.watchdog");
	if (_sq_watch.signo)
		_sq_watch_arm_signal(_sq_watch.signo);
	uint64_t period = (uint64_t)_sq_watch.ms * NSEC_PER_MSEC;
	/* Ticks are timed on the precise clock, with an absolute deadline.
	 * The coarse clock (what the records' times are on) steps by a tick
	 * of 1-4 ms, sometimes 1 ns short of one: a wait timed on it can
	 * end just short of its deadline, and a loop that waits out the rest
	 * spins until the coarse clock steps again. */
	uint64_t next_tick = _sq_monotonic_ns() + period;
	for (;;) {
		/* Acquire: a kick's task, a signal's request. */
		uint32_t bits = __atomic_exchange_n(&_sq_watch.word, 0,
				__ATOMIC_ACQUIRE);
		if (bits & SQ_WATCH_SNAPSHOT)
			_sq_snapshot_write(STDERR_FILENO);
		if (period == 0) {
			_sq_futex_wait(&_sq_watch.word, 0, NULL);
			continue;
		}
		if (_sq_monotonic_ns() >= next_tick) {
			bool active = _sq_watch_tick(_sq_coarse_ns());
			next_tick = _sq_monotonic_ns() + period;
			if (!active) {
				/* Sleep until a task starts (see the top). */
				__atomic_store_n(&_sq_watch.deep, 1,
						__ATOMIC_SEQ_CST);
				if (_sq_watch_membarrier() && _sq_watch_idle())
					_sq_futex_wait(&_sq_watch.word, 0, NULL);
				__atomic_store_n(&_sq_watch.deep, 0,
						__ATOMIC_SEQ_CST);
				next_tick = _sq_monotonic_ns() + period;
				continue;
			}
		}
		_sq_futex_wait_until(&_sq_watch.word, 0, next_tick);
	}
	return NULL;
}

/* ---- Starting -------------------------------------------------------------- */

static const struct {
	const char *name;
	int signo;
} _sq_signal_names[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
	{ "ILL", SIGILL }, { "BUS", SIGBUS }, { "FPE", SIGFPE },
	{ "KILL", SIGKILL }, { "SEGV", SIGSEGV }, { "STOP", SIGSTOP },
	{ "TRAP", SIGTRAP }, { "ABRT", SIGABRT }, { "USR1", SIGUSR1 },
	{ "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },
	{ "TERM", SIGTERM }, { "CHLD", SIGCHLD }, { "CONT", SIGCONT },
	{ "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },
	{ "URG", SIGURG }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH },
	{ "IO", SIGIO }, { "PWR", SIGPWR }, { "SYS", SIGSYS },
};

/* A signal number from "USR1", "SIGUSR1", "10", "RTMIN+2"; 0 if none. */
static int
_sq_parse_signal(const char *v)
{
	char *end;
	if (strncmp(v, "SIG", 3) == 0)
		v += 3;
	long n = strtol(v, &end, 10);
	if (end != v && *end == '\0')
		return n > 0 && n < NSIG ? (int)n : 0;
	for (size_t i = 0; i < sizeof(_sq_signal_names) /
			sizeof(_sq_signal_names[0]); i++)
		if (strcmp(v, _sq_signal_names[i].name) == 0)
			return _sq_signal_names[i].signo;
	if (strncmp(v, "RTMIN", 5) == 0 || strncmp(v, "RTMAX", 5) == 0) {
		bool min = strncmp(v, "RTMIN", 5) == 0;
		long off = 0;
		if (v[5] != '\0') {
			off = strtol(v + 5, &end, 10);
			if (*end != '\0' || (min && off < 0) || (!min && off > 0))
				return 0;
		}
		long signo = (min ? SIGRTMIN : SIGRTMAX) + off;
		return signo >= SIGRTMIN && signo <= SIGRTMAX ? (int)signo : 0;
	}
	return 0;
}

static sq_once_t _sq_watch_once;

static void
_sq_watch_start_once(void *unused)
{
	const char *ms = getenv("SQ_WATCHDOG_MS");
	const char *sig = getenv("SQ_SNAPSHOT_SIGNAL");
	_sq_watch.ms = 0;
	_sq_watch.signo = 0;
	if (ms != NULL && *ms != '\0') {
		char *end;
		long n = strtol(ms, &end, 10);
		if (*end != '\0' || n <= 0 || n > (long)SQ_WATCH_MAX_MS)
			fprintf(stderr, "SwiftQueues: SQ_WATCHDOG_MS: '%s' is "
					"not a number of milliseconds from 1 "
					"to %u: the watchdog is off\n", ms,
					SQ_WATCH_MAX_MS);
		else
			_sq_watch.ms = (uint32_t)n;
	}
	if (sig != NULL && *sig != '\0') {
		_sq_watch.signo = _sq_parse_signal(sig);
		if (_sq_watch.signo == 0)
			fprintf(stderr, "SwiftQueues: SQ_SNAPSHOT_SIGNAL: '%s' "
					"is not a signal\n", sig);
	}
	if (_sq_watch.ms == 0 && _sq_watch.signo == 0)
		return;
	/* Like the workers, it takes no signal meant for the program. */
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int err = _sq_thread_create_here(&attr, _sq_watch_main, NULL);
	pthread_attr_destroy(&attr);
	if (err != 0) {
		fprintf(stderr, "SwiftQueues: SQ_WATCHDOG_MS / SQ_SNAPSHOT_SIGNAL:"
				" cannot start the watchdog thread: %s\n",
				strerror(err));
		return;
	}
	/* Relaxed: tasks begin being watched from some point on. */
	if (_sq_watch.ms)
		__atomic_store_n(&_sq_observe.half.watching, 1,
				__ATOMIC_RELAXED);
}

void
_sq_watchdog_start(void)
{
	sq_once_f(&_sq_watch_once, NULL, _sq_watch_start_once);
}

/* When the library loads: a program started with SQ_WATCHDOG_MS or
 * SQ_SNAPSHOT_SIGNAL is watched from its first line, also if it only ever
 * uses the main queue (the pool's start would be too late for it). */
__attribute__((constructor)) static void
_sq_watchdog_load(void)
{
	if (getenv("SQ_WATCHDOG_MS") || getenv("SQ_SNAPSHOT_SIGNAL"))
		_sq_watchdog_start();
}

void
_sq_watchdog_signal(void)
{
	if (!(__atomic_fetch_or(&_sq_watch.word, SQ_WATCH_SNAPSHOT,
			__ATOMIC_SEQ_CST) & SQ_WATCH_SNAPSHOT))
		_sq_futex_wake(&_sq_watch.word, 1);
}

uint32_t
_sq_watchdog_ms(void)
{
	return _sq_watching() ?
			_sq_watch.ms : 0;
}

bool
_sq_watchdog_is_snapshot_source(const void *source)
{
	return source != NULL && source == __atomic_load_n(
			&_sq_watch.signal_source, __ATOMIC_ACQUIRE);
}

/* The thread's name, from /proc (a thread of this process). */
static void
_sq_watch_thread_name(pid_t tid, char *out, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	out[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, size - 1);
	close(fd);
	if (n <= 0)
		n = 0;
	out[n] = '\0';
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = '\0';
}

/* A record's thread as snapshots name it: the runtime's threads by role
 * ("sq.worker 3": a worker's system name follows the queue it runs), a
 * program's thread by its own name. */
static void
_sq_watch_rec_name(const struct sq_watch_rec_s *r, char *out, size_t size)
{
	switch (r->role) {
	case SQ_ROLE_WORKER:
		snprintf(out, size, "sq.worker %d", r->role_index);
		return;
	case SQ_ROLE_IO:
		snprintf(out, size, "sq.io %d", r->role_index);
		return;
	case SQ_ROLE_MANAGER:
		snprintf(out, size, "sq.manager");
		return;
	default:
		break;
	}
	if (r->tid == getpid()) {
		snprintf(out, size, "main thread");
		return;
	}
	_sq_watch_thread_name(r->tid, out, size);
}

/* Another thread holding q or a queue up q's chain (list lock held; the
 * waiter's chain copied by the caller): its record, the queue it holds
 * and its task's function. */
static struct sq_watch_rec_s *
_sq_watch_holder(struct sq_watch_rec_s *waiter, struct sq_queue_s *const *chain,
		int nchain, struct sq_queue_s **held, const void **func)
{
	for (struct sq_watch_rec_s *x = _sq_watch.records; x; x = x->next) {
		uint32_t seq;
		uint64_t since;
		if (x == waiter || !_sq_watch_read_held(x, &seq, held, func,
				&since))
			continue;
		for (int i = 0; i < nchain; i++)
			if (chain[i] == *held)
				return x;
	}
	return NULL;
}

void
_sq_watchdog_add_threads(struct sq_snapshot_build_s *b, uint64_t now)
{
	pthread_mutex_lock(&_sq_watch.lock);
	for (struct sq_watch_rec_s *r = _sq_watch.records; r; r = r->next) {
		sq_snapshot_thread_t *t = _sq_snapshot_add_thread(b);
		if (t == NULL)
			break;
		char text[SQ_WATCH_LABEL];
		t->tid = (int32_t)r->tid;
		_sq_watch_rec_name(r, text, sizeof(text));
		t->name = _sq_snapshot_strdup(b, text);
		t->busy = __atomic_load_n(&r->busy, __ATOMIC_ACQUIRE) != 0;
		if (t->busy) {
			/* The task it runs; a queue gone meanwhile is not
			 * named (the lookup checks it is alive). */
			struct sq_queue_s *tq = __atomic_load_n(&r->task_queue,
					__ATOMIC_ACQUIRE);
			const void *fn = __atomic_load_n(&r->task_func,
					__ATOMIC_ACQUIRE);
			if (tq != NULL && _sq_introspect_queue_label(tq, text,
					sizeof(text)))
				t->task_queue = _sq_snapshot_strdup(b, text);
			if (fn != NULL) {
				_sq_symbol_name(fn, text, sizeof(text));
				t->function = _sq_snapshot_strdup(b, text);
			}
		}
		t->running_ms = -1;
		t->waiting_ms = -1;
		uint32_t seq;
		struct sq_queue_s *q;
		uint64_t since;
		if (_sq_watch_read_task(r, &seq, &q, &since) &&
				_sq_introspect_queue_label(q, text, sizeof(text))
				&& __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE)
				== seq) {
			t->queue = _sq_snapshot_strdup(b, text);
			t->running_ms = now > since ? (int64_t)((now - since) /
					NSEC_PER_MSEC) : 0;
		}
		struct sq_queue_s *chain[SQ_WATCH_CHAIN];
		int nchain = 0;
		sq_spinlock_lock(&r->lock);
		if (r->wait_for != NULL) {
			t->waiting_for = _sq_snapshot_strdup(b,
					_sq_object_label(r->wait_for));
			t->waiting_ms = now > r->wait_since ? (int64_t)((now -
					r->wait_since) / NSEC_PER_MSEC) : 0;
			nchain = r->nchain;
			memcpy(chain, r->chain, (size_t)nchain *
					sizeof(chain[0]));
		}
		sq_spinlock_unlock(&r->lock);
		/* Who holds what it waits for. */
		struct sq_queue_s *held;
		const void *fn;
		struct sq_watch_rec_s *h = nchain ? _sq_watch_holder(r, chain,
				nchain, &held, &fn) : NULL;
		if (h != NULL) {
			t->holder_tid = (int32_t)h->tid;
			if (_sq_introspect_queue_label(held, text, sizeof(text)))
				t->holder_queue = _sq_snapshot_strdup(b, text);
			if (fn != NULL) {
				_sq_symbol_name(fn, text, sizeof(text));
				t->holder_function = _sq_snapshot_strdup(b,
						text);
			}
		}
	}
	pthread_mutex_unlock(&_sq_watch.lock);
}

/* ---- fork ------------------------------------------------------------------ */

/* fork() child (fork.c): the thread is gone, and so are the threads of
 * every record but the caller's. The pool's start in the child starts the
 * watchdog again (and arms the signal with a source of the child's). */
void
_sq_watchdog_atfork_child(void)
{
	struct sq_watch_rec_s *self = _sq_watch_self;
	struct sq_watch_rec_s *r = _sq_watch.records;
	while (r != NULL) {
		struct sq_watch_rec_s *next = r->next;
		if (r != self)
			free(r);
		r = next;
	}
	pthread_mutex_init(&_sq_watch.lock, NULL);
	_sq_watch.records = NULL;
	if (self != NULL) {
		self->tid = gettid();
		self->next = self->prev = NULL;
		self->wait_for = NULL;
		self->lock = (sq_spinlock_t)SQ_SPINLOCK_INIT;
		_sq_watch.records = self;
	}
	_sq_watch.word = 0;
	_sq_watch.deep = 0;
	_sq_watch.signal_source = NULL;
	memset(_sq_watch.root_since, 0, sizeof(_sq_watch.root_since));
	_sq_snapshot_signo = 0;
	_sq_observe.half.watching = 0;
	_sq_watch_once = 0;
}
