/*
 * SwiftQueues — sq_sync, sq_barrier_sync and the runtime's in-place runs
 * on queues: the fast path on idle queues, the slow path's hand-off from
 * the drainer to the waiting caller, and a waiting caller's take-over of a
 * queue whose job waits for a thread. The queues themselves (state word,
 * submission, draining) are in queue.c; queue_internal.h holds what the
 * two share.
 */
#include "queue_internal.h"
#include "trace_internal.h"

#include <stdlib.h>

/* The sync continuation of the calling thread's innermost sync through a
 * target chain that it took over ("Taking a queue over"). */
static SQ_TLS struct sq_sync_cont_s *_sq_sync_own;

/* ---- Sync -----------------------------------------------------------------
 *
 * Fast path: when the queue and every serial queue up its target chain are
 * idle, the caller takes them (sets ENQUEUED, as a drainer would) and runs
 * the function on its own thread. Slow path: a sync continuation is queued;
 * the drainer that reaches it hands over (the caller runs the function on
 * its own thread while the drainer waits) — except on the main queue, whose
 * drainer, the main thread, runs the function itself.
 */

struct sq_sync_cont_s {
	struct sq_cont_s cont;
	struct sq_sync_waiter_s waiter;
	int32_t owners; /* caller and drainer: the last one frees it */
	bool barrier;
	bool traced;    /* the caller's wait slice is open (trace.c) */
};

#define SQ_SYNC_WAIT_KIND(sc)                                                  \
	((sc)->barrier ? SQ_WAIT_BARRIER_SYNC : SQ_WAIT_SYNC)

/* Whether the calling thread holds `q` exclusively (or at all). */
struct sq_frame_s *
_sq_frame_find(struct sq_queue_s *q)
{
	for (struct sq_frame_s *f = _sq_current_frame; f; f = f->prev)
		if (f->queue == q)
			return f;
	return NULL;
}

/*
 * A sync onto a queue the thread runs is a deadlock. The main thread runs
 * the main queue in every sense, inside main-queue work or not (as in
 * libdispatch, and as the assertions see it): only it drains the main
 * queue, so it could never wait there for work queued ahead of its own;
 * running its work at once would overtake that work.
 */
static void
_sq_sync_check_deadlock(const char *call, struct sq_queue_s *q, bool barrier)
{
	for (struct sq_queue_s *x = q; !_sq_queue_is_root(x);
			x = _sq_queue_target(x)) {
		struct sq_frame_s *f = _sq_frame_find(x);
		if ((f != NULL && (f->exclusive || _sq_queue_is_serial(x) ||
				(barrier && x == q))) ||
				(x->type == SQ_QUEUE_TYPE_MAIN &&
				_sq_is_main_thread())) {
			_sq_client_crash(call, "deadlock: queue '%s' is already "
					"running on this thread",
					_sq_object_label(x));
		}
		if (x->type == SQ_QUEUE_TYPE_MAIN)
			break;
	}
}

/*
 * Takes an idle serial queue for the calling thread (ENQUEUED set by us).
 * Idle means no drainer *and nothing queued*: a drainer that has just run
 * the queue dry clears ENQUEUED before its second look, so a job queued in
 * that window is on the queue with ENQUEUED clear. Taking the queue then
 * would run the caller's work ahead of it (async A then sync B on one
 * thread ran B first). Anything submitted before this call happened
 * before this seq-cst look at the queue, so the look sees it; and the
 * drainer's second look, or the submitter's wake-up, puts it on the
 * target as usual.
 */
static bool
_sq_serial_try_take(struct sq_queue_s *q)
{
	/* Acquire: a drainer's stash is written before it gives the queue
	 * up; seeing the queue given up, the look below sees the stash. */
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE);
	if (s & (SQ_STATE_ENQUEUED | SQ_STATE_INACTIVE | SQ_STATE_SUSPEND_MASK))
		return false;
	if (!_sq_queue_is_empty(q))
		return false;
	/* Acquire: what the previous drainer wrote is visible to us. */
	if (!__atomic_compare_exchange_n(&q->state, &s, s | SQ_STATE_ENQUEUED |
			SQ_STATE_DRAINING, false, __ATOMIC_SEQ_CST,
			__ATOMIC_RELAXED))
		return false;
	_sq_drain_phase(q, SQ_DRAIN_TASK);
	return true;
}

/* Gives back a queue _sq_serial_try_take took. */
static inline void
_sq_serial_give_back(struct sq_queue_s *q)
{
	_sq_drain_phase(q, SQ_DRAIN_IDLE);
	_sq_queue_relinquish(q);
}

/* Enters a concurrent queue as one more running task, unless a barrier is
 * pending, work is queued ahead of the caller (not yet forwarded: tasks
 * start in FIFO order) or it is stopped. running++ then look at barriers:
 * the mirror of a barrier's barriers++ then look at running. */
static bool
_sq_concurrent_try_enter(struct sq_queue_s *q)
{
	if (__atomic_load_n(&_sq_concurrent(q)->barriers,
			__ATOMIC_SEQ_CST) != 0 ||
			!_sq_queue_is_empty(q))
		return false;
	__atomic_add_fetch(&_sq_concurrent(q)->running, 1, __ATOMIC_SEQ_CST);
	SQ_CHAOS_POINT();
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&_sq_concurrent(q)->barriers,
			__ATOMIC_SEQ_CST) != 0 ||
			(s & (SQ_STATE_INACTIVE | SQ_STATE_SUSPEND_MASK))) {
		_sq_concurrent_leave(q);
		return false;
	}
	return true;
}

/* Takes a concurrent queue for a barrier: nothing running, nothing queued
 * ahead of us, no drainer. */
static bool
_sq_concurrent_try_take_barrier(struct sq_queue_s *q)
{
	if (__atomic_load_n(&_sq_concurrent(q)->barriers,
			__ATOMIC_SEQ_CST) != 0 ||
			__atomic_load_n(&_sq_concurrent(q)->running,
					__ATOMIC_SEQ_CST) != 0)
		return false;
	__atomic_add_fetch(&_sq_concurrent(q)->barriers, 1, __ATOMIC_SEQ_CST);
	if (_sq_serial_try_take(q)) {
		if (__atomic_load_n(&_sq_concurrent(q)->running,
				__ATOMIC_SEQ_CST) == 0 &&
				_sq_queue_is_empty(q))
			return true;
		__atomic_sub_fetch(&_sq_concurrent(q)->barriers,
				1, __ATOMIC_SEQ_CST);
		_sq_serial_give_back(q);
		return false;
	}
	__atomic_sub_fetch(&_sq_concurrent(q)->barriers, 1, __ATOMIC_SEQ_CST);
	_sq_queue_wakeup(q);
	return false;
}

/* Gives back what _sq_sync_try_take took, innermost last. */
static void
_sq_sync_give_back(struct sq_queue_s **taken, bool *as_barrier, int count)
{
	while (count-- > 0) {
		struct sq_queue_s *x = taken[count];
		if (_sq_queue_is_serial(x)) {
			_sq_serial_give_back(x);
		} else if (as_barrier[count]) {
			__atomic_sub_fetch(&_sq_concurrent(x)->barriers,
					1, __ATOMIC_SEQ_CST);
			_sq_serial_give_back(x);
		} else {
			_sq_concurrent_leave(x);
		}
	}
}

/* Takes q and its chain for the caller; returns how many queues were
 * taken, or -1 (nothing held) when the fast path is not possible. */
static int
_sq_sync_try_take(struct sq_queue_s *q, bool barrier,
		struct sq_queue_s **taken, bool *as_barrier)
{
	int n = 0;
	for (struct sq_queue_s *x = q; !_sq_queue_is_root(x);
			x = _sq_queue_target(x)) {
		bool ok;
		as_barrier[n] = false;
		if (n == SQ_MAX_TARGET_DEPTH || x->type == SQ_QUEUE_TYPE_MAIN) {
			/* the main queue: only the main thread drains it (a
			 * sync from there is a deadlock, reported before) */
			ok = false;
		} else if (x->type == SQ_QUEUE_TYPE_SERIAL) {
			ok = _sq_serial_try_take(x);
		} else if (barrier && x == q) {
			ok = _sq_concurrent_try_take_barrier(x);
			as_barrier[n] = true;
		} else {
			ok = _sq_concurrent_try_enter(x);
		}
		if (!ok) {
			_sq_sync_give_back(taken, as_barrier, n);
			return -1;
		}
		taken[n++] = x;
		if (x->type == SQ_QUEUE_TYPE_MAIN)
			break;
	}
	return n;
}

/* Runs func on the calling thread with frames for q's chain. */
static void
_sq_sync_run_here(struct sq_queue_s *q, bool barrier, void *ctx,
		sq_function_t func)
{
	struct sq_frame_s frames[SQ_MAX_TARGET_DEPTH];
	struct sq_queue_s *chain[SQ_MAX_TARGET_DEPTH];
	int n = 0;
	for (struct sq_queue_s *x = q; !_sq_queue_is_root(x) &&
			n < SQ_MAX_TARGET_DEPTH; x = _sq_queue_target(x)) {
		chain[n++] = x;
		if (x->type == SQ_QUEUE_TYPE_MAIN)
			break;
	}
	if (n == 0) {
		/* A root queue: the task runs on the caller, "on" it. */
		_sq_frame_push(&frames[0], q, false);
		SQ_TRACE_SYNC_CALL(q, func, ctx);
		_sq_frame_pop(&frames[0]);
		return;
	}
	/* Outermost first, so the innermost (q) is the current queue. */
	for (int i = n - 1; i >= 0; i--)
		_sq_frame_push(&frames[i], chain[i], _sq_queue_is_serial(chain[i])
				|| (barrier && chain[i] == q));
	SQ_TRACE_SYNC_CALL(q, func, ctx);
	for (int i = 0; i < n; i++)
		_sq_frame_pop(&frames[i]);
}

static void
_sq_sync_cont_release(struct sq_sync_cont_s *sc)
{
	if (__atomic_sub_fetch(&sc->owners, 1, __ATOMIC_ACQ_REL) == 0)
		free(sc);
}

/* The drainer's side of a sync continuation. */
void
_sq_sync_handoff(struct sq_cont_s *c)
{
	struct sq_sync_cont_s *sc = (struct sq_sync_cont_s *)c;
	struct sq_sync_waiter_s *w = &sc->waiter;

	if (c->queue->type == SQ_QUEUE_TYPE_MAIN || sc == _sq_sync_own) {
		/* Main-queue work runs on the main thread, and a caller that
		 * took over its queue's target chain reaches its own
		 * continuation ("Taking a queue over"): run it here. */
		_sq_sync_run_here(c->queue, sc->barrier, c->ctx, c->func);
		if (sc != _sq_sync_own)
			SQ_TRACE_RELEASE(SQ_SYNC_WAIT_KIND(sc), c->queue, sc);
		__atomic_store_n(&w->state, SQ_SYNC_DONE, __ATOMIC_RELEASE);
		if (sc != _sq_sync_own)
			_sq_futex_wake(&w->state, 1);
		_sq_sync_cont_release(sc);
		return;
	}
	/* Release: the caller sees everything the queue's earlier tasks
	 * wrote; then wait (acquire) for the caller to finish, holding the
	 * queue for it. */
	SQ_TRACE_RELEASE(SQ_SYNC_WAIT_KIND(sc), c->queue, sc);
	__atomic_store_n(&w->state, SQ_SYNC_GO, __ATOMIC_RELEASE);
	_sq_futex_wake(&w->state, 1);
	if (__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) == 0) {
		_sq_pool_block_begin(true);
		while (__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) == 0)
			_sq_futex_wait(&w->done, 0, NULL);
		_sq_pool_block_end();
	}
	_sq_sync_cont_release(sc);
}

/* Runs func(ctx) on the calling thread as q's work if q allows it now: a
 * root queue always (its work may run on any thread), a serial queue on a
 * root queue when nothing is queued or running (the sync fast path). Then
 * returns true; otherwise does nothing and returns false. For sq_sync, the
 * Swift executor's hops into queue-backed actors, small I/O reads and
 * precise timers' work. */
bool
_sq_queue_try_run_here_f(sq_queue_t q, void *ctx, sq_function_t func)
{
	if (_sq_queue_is_root(q)) {
		_sq_sync_run_here(q, false, ctx, func);
		return true;
	}
	if (q->type != SQ_QUEUE_TYPE_SERIAL ||
			!_sq_queue_is_root(_sq_queue_target(q)) ||
			_sq_frame_find(q) != NULL || !_sq_serial_try_take(q))
		return false;
	struct sq_frame_s frame;
	_sq_frame_push(&frame, q, true);
	SQ_TRACE_SYNC_CALL(q, func, ctx);
	_sq_frame_pop(&frame);
	_sq_serial_give_back(q);
	return true;
}

/* ---- Taking a queue over --------------------------------------------------
 *
 * A sync caller whose serial queue is waiting for a thread (ENQUEUED: its
 * job sits in a run queue; not DRAINING: nobody pops) takes the queue
 * over: it claims DRAINING, runs the jobs queued ahead of its own in FIFO
 * order (another waiting caller's turn hands the queue to that caller, as
 * any drainer does), then its own function, and gives DRAINING back. A
 * pile-up of sync callers thus never needs another thread to move, even
 * when every thread the pool may have is one of them and the queue's job
 * is queued behind more of them.
 *
 * The queue's job stays where it is. When it runs, its drainer claims
 * DRAINING; if a caller holds it, the drainer sets DETACHED instead and
 * returns, and the caller finishes for it when it gives DRAINING back:
 * it gives the queue up as a drainer does (clears ENQUEUED, looks again).
 * Both are CASes on the state word, so exactly one of them has the job.
 *
 * Waiters are woken to take over: whoever gives DRAINING back while
 * keeping ENQUEUED (a caller done with its turn, a drainer whose budget
 * ran out, a wake-up that queues the job while callers wait) finds the
 * first sync continuation in the queue, holding DRAINING so that none is
 * popped meanwhile (pinned by a reference of its own), and moves its
 * waiter from WAITING to RETRY. A caller that finds DRAINING held sets
 * WANTED before it sleeps; a giver-back that sees WANTED but found no
 * continuation (the caller's append was still on its way when it looked)
 * claims DRAINING again and looks again. So a waiting caller always has
 * someone who drains up to its continuation: the holder of DRAINING, or
 * itself.
 */

/* How long a sync caller waits for its queue's job to start before it
 * takes the queue over. */
#define SQ_TAKE_OVER_NS (1 * NSEC_PER_MSEC)
/* The longest interval between a waiting caller's looks at its queue (or
 * at the top of its chain). */
#define SQ_CHAIN_LOOK_MAX_NS (64 * NSEC_PER_MSEC)

static bool
_sq_job_is_sync(struct sq_job_s *job)
{
	return job->kind == SQ_JOB_CONT && (job->flags & SQ_CONT_SYNC);
}

/* Claims DRAINING on a queue whose job waits (ENQUEUED set, nobody
 * popping); false when it is held or the queue is not waiting. */
bool
_sq_drain_claim(struct sq_queue_s *q)
{
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_SEQ_CST);
	while ((s & SQ_STATE_ENQUEUED) && !(s & SQ_STATE_DRAINING)) {
		if (__atomic_compare_exchange_n(&q->state, &s,
				s | SQ_STATE_DRAINING, false, __ATOMIC_SEQ_CST,
				__ATOMIC_SEQ_CST))
			return true;
	}
	return false;
}

/* The queue's job runs: claim DRAINING for its drain, or hand the job to
 * the caller that holds it (DETACHED) and return false. */
bool
_sq_drain_start(struct sq_queue_s *q)
{
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_SEQ_CST);
	for (;;) {
		uint64_t want = (s & SQ_STATE_DRAINING) ?
				s | SQ_STATE_DETACHED : s | SQ_STATE_DRAINING;
		SQ_CHAOS_POINT();
		if (__atomic_compare_exchange_n(&q->state, &s, want, false,
				__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			return !(s & SQ_STATE_DRAINING);
	}
}

/* The first sync continuation queued on q, pinned (a reference of our
 * own), or NULL. The caller holds DRAINING, so nothing is popped while we
 * walk; appends in progress end the walk (their callers look for
 * themselves after appending). */
static struct sq_sync_cont_s *
_sq_sync_first_waiter(struct sq_queue_s *q)
{
	struct sq_job_s *job = __atomic_load_n(&q->stashed, __ATOMIC_ACQUIRE);
	struct cds_wfcq_node *n;
	if (job != NULL && _sq_job_is_sync(job))
		goto found;
	/* Acquire: each link's store is a release by its appender. */
	for (n = __atomic_load_n(&q->head.node.next, __ATOMIC_ACQUIRE);
			n != NULL; n = __atomic_load_n(&n->next,
			__ATOMIC_ACQUIRE)) {
		job = (struct sq_job_s *)n;
		if (_sq_job_is_sync(job))
			goto found;
	}
	return NULL;
found:;
	struct sq_sync_cont_s *sc = (struct sq_sync_cont_s *)job;
	__atomic_add_fetch(&sc->owners, 1, __ATOMIC_RELAXED);
	return sc;
}

/* Gives DRAINING back (see above). Keeps ENQUEUED: the queue's job still
 * waits in a run queue; unless it was DETACHED to us, and then the queue
 * is given up as its drainer would (q may be gone after). */
void
_sq_drain_release(struct sq_queue_s *q)
{
	for (;;) {
		struct sq_sync_cont_s *first = NULL;
		if (__atomic_load_n(&q->sync_waiters, __ATOMIC_SEQ_CST) != 0)
			first = _sq_sync_first_waiter(q);
		SQ_CHAOS_POINT();
		uint64_t s = __atomic_load_n(&q->state, __ATOMIC_SEQ_CST);
		uint64_t clear;
		do {
			clear = SQ_STATE_DRAINING | SQ_STATE_DETACHED |
					SQ_STATE_WANTED;
			if (s & SQ_STATE_DETACHED)
				clear |= SQ_STATE_ENQUEUED;
		} while (!__atomic_compare_exchange_n(&q->state, &s, s & ~clear,
				false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
		if (s & SQ_STATE_DETACHED) {
			/* The job's drainer left it to us: give the queue up
			 * and look again, as _sq_queue_relinquish does (the
			 * wake-up wakes a waiter); drop its reference. */
			if (first != NULL)
				_sq_sync_cont_release(first);
			_sq_queue_wakeup(q);
			_sq_release_internal(q);
			return;
		}
		if (first != NULL) {
			uint32_t waiting = SQ_SYNC_WAITING;
			/* Seq-cst: after our release of DRAINING, which the
			 * woken caller's claim must see. */
			if (__atomic_compare_exchange_n(&first->waiter.state,
					&waiting, SQ_SYNC_RETRY, false,
					__ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
				SQ_TRACE_RELEASE(SQ_SYNC_WAIT_KIND(first), q,
						first);
				_sq_futex_wake(&first->waiter.state, 1);
			}
			_sq_sync_cont_release(first);
			return;
		}
		/* A caller wanted the queue, and its continuation was not
		 * linked yet when we looked: look again. */
		if (!(s & SQ_STATE_WANTED) || !_sq_drain_claim(q))
			return;
	}
}

/* The serial queue at the top of q's chain (the one on a root queue: q
 * itself for a serial queue on a root queue) if every queue in the chain
 * is serial; NULL otherwise. */
static struct sq_queue_s *
_sq_sync_chain_top(struct sq_queue_s *q)
{
	struct sq_queue_s *x = q;
	for (int depth = 0; depth < SQ_MAX_TARGET_DEPTH; depth++) {
		if (x->type != SQ_QUEUE_TYPE_SERIAL)
			return NULL;
		struct sq_queue_s *t = _sq_queue_target(x);
		if (_sq_queue_is_root(t))
			return x;
		x = t;
	}
	return NULL;
}

/* A waiting caller takes over `top`, its queue or the top of its queue's
 * chain, when top's job waits for a thread, and drains it until its own
 * continuation has run (popped here, or in a nested drain of its queue:
 * _sq_sync_handoff runs it in place). A caller of top itself that finds
 * DRAINING held sets WANTED (its holder wakes a waiter); a caller further
 * down the chain is not in top where the holder looks, and looks again on
 * its own. Returns whether its function ran. */
static bool
_sq_sync_take_over(struct sq_queue_s *top, struct sq_sync_cont_s *sc)
{
	bool wake_me = sc->cont.queue == top;
	uint64_t s = __atomic_load_n(&top->state, __ATOMIC_SEQ_CST);
	for (;;) {
		if (!(s & SQ_STATE_ENQUEUED) || (s & (SQ_STATE_INACTIVE |
				SQ_STATE_SUSPEND_MASK)))
			return false; /* whoever wakes it up wakes a waiter */
		uint64_t want = !(s & SQ_STATE_DRAINING) ?
				s | SQ_STATE_DRAINING : wake_me ?
				s | SQ_STATE_WANTED : s;
		if (want == s)
			return false;
		if (__atomic_compare_exchange_n(&top->state, &s, want, false,
				__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
			if (s & SQ_STATE_DRAINING)
				return false; /* its holder wakes a waiter */
			break;
		}
	}
	SQ_CHAOS_POINT();
	/* The caller's wait ends here: from now on it drains the queue. */
	if (sc->traced) {
		SQ_TRACE_WAIT_END(SQ_SYNC_WAIT_KIND(sc), sc->cont.queue, sc);
		sc->traced = false;
	}
	struct sq_sync_cont_s *outer = _sq_sync_own;
	_sq_sync_own = sc;
	struct sq_frame_s frame;
	uint32_t pops = __atomic_load_n(&top->pops, __ATOMIC_RELAXED);
	_sq_drain_phase(top, SQ_DRAIN_LOOP);
	_sq_frame_push(&frame, top, true);
	/* Acquire: our function ran on this thread; the load only says
	 * when to stop. */
	while (__atomic_load_n(&sc->waiter.state, __ATOMIC_ACQUIRE) !=
			SQ_SYNC_DONE && _sq_drain_may_pop(top)) {
		struct sq_job_s *job = _sq_queue_next(top);
		if (job == NULL)
			break;
		_sq_drain_run(top, job, &pops);
	}
	_sq_drain_phase(top, SQ_DRAIN_IDLE);
	_sq_frame_pop(&frame);
	_sq_sync_own = outer;
	/* top lives on: our continuation's caller (us) still refers to it,
	 * or to a queue that targets it, until _sq_sync returns. */
	_sq_drain_release(top);
	return __atomic_load_n(&sc->waiter.state, __ATOMIC_ACQUIRE) ==
			SQ_SYNC_DONE;
}

/* Waits for the caller's turn on q; takes over q, or the top of its chain
 * of serial queues, when its job waits for a thread. The first look comes
 * after SQ_TAKE_OVER_NS (at once when nobody would take the job soon),
 * then on each RETRY and at doubling intervals up to
 * SQ_CHAIN_LOOK_MAX_NS. Returns SQ_SYNC_GO (run now, the drainer waits) or
 * SQ_SYNC_DONE (run: by the drainer, or by us). */
static uint32_t
_sq_sync_wait(struct sq_queue_s *q, struct sq_sync_cont_s *sc)
{
	uint32_t st;
	bool blocked = false;
	struct sq_queue_s *top = _sq_sync_chain_top(q);
	uint64_t look_wait = SQ_TAKE_OVER_NS;
	bool retried = false; /* a RETRY came after the first look */
	/* Not at once: a job queued a moment ago is usually about to start
	 * on a worker, and the caller would run work that was not its own
	 * while a worker went idle. At once, though, when no worker is idle
	 * or searching, or the job waits in this thread's own slot or ring:
	 * nobody would take it soon (at width 1, every sync behind a
	 * hand-off of the caller's waited the whole 1 ms). */
	uint64_t take_at = 0;
	if (top != NULL) {
		take_at = _sq_monotonic_ns();
		/* A caller of a higher class than the queue's raises it
		 * (queue.c, "Overrides") and takes it over at once: the work
		 * ahead of it runs on its thread, at its class. */
		int mine = _sq_thread_root();
		if (mine < _sq_queue_class(q))
			_sq_queue_raise(q, mine);
		else if (!_sq_pool_holds(&top->job))
			take_at += SQ_TAKE_OVER_NS;
	}
	for (;;) {
		st = __atomic_load_n(&sc->waiter.state, __ATOMIC_ACQUIRE);
		if (st == SQ_SYNC_GO || st == SQ_SYNC_DONE)
			break;
		if (st == SQ_SYNC_RETRY) {
			/* Seq-cst: before our look at the queue's state, so
			 * a later giver-back's RETRY finds us WAITING. */
			__atomic_compare_exchange_n(&sc->waiter.state, &st,
					SQ_SYNC_WAITING, false, __ATOMIC_SEQ_CST,
					__ATOMIC_ACQUIRE);
			/* Look now, unless our first 1 ms is not over. */
			retried = look_wait != SQ_TAKE_OVER_NS;
			continue;
		}
		if (take_at != 0 && (retried || _sq_monotonic_ns() >= take_at)) {
			retried = false;
			if (_sq_sync_take_over(top, sc)) {
				st = SQ_SYNC_DONE;
				break;
			}
			/* Look again later in any case: a RETRY wakes us
			 * sooner (a caller whose queue is a chain's is not in
			 * the top queue where a giver-back looks, and the
			 * chaos build found a schedule where a single queue's
			 * caller slept with its queue's job waiting and no
			 * RETRY coming). */
			look_wait = look_wait * 2 > SQ_CHAIN_LOOK_MAX_NS ?
					SQ_CHAIN_LOOK_MAX_NS : look_wait * 2;
			take_at = _sq_monotonic_ns() + look_wait;
		}
		if (!blocked) {
			/* The watchdog looks for wait cycles: say what we
			 * wait for. */
			if (_sq_watching())
				_sq_watch_wait_begin(q);
			_sq_pool_block_begin(true);
			blocked = true;
		}
		/* A wait slice covers the time asleep until the queue is
		 * handed over or taken over (not a take-over's drain). */
		if (!sc->traced) {
			SQ_TRACE_WAIT_BEGIN(SQ_SYNC_WAIT_KIND(sc), q, sc);
			sc->traced = true;
		}
		if (take_at != 0) {
			(void)_sq_futex_wait_until(&sc->waiter.state,
					SQ_SYNC_WAITING, (sq_time_t)take_at);
			continue;
		}
		_sq_futex_wait(&sc->waiter.state, SQ_SYNC_WAITING, NULL);
	}
	if (sc->traced) {
		SQ_TRACE_WAIT_END(SQ_SYNC_WAIT_KIND(sc), q, sc);
		sc->traced = false;
	}
	if (blocked) {
		_sq_pool_block_end();
		if (_sq_watching())
			_sq_watch_wait_end();
	}
	return st;
}

static void
_sq_sync(const char *call, struct sq_queue_s *q, void *ctx,
		sq_function_t func, bool barrier)
{
	_SQ_REQUIRE_FUNCTION(call, func);
	_sq_queue_validate(call, q);
	/* The common cases: a root queue, or a serial queue on a root queue
	 * that is idle (taken, frames: just q). */
	if (_sq_queue_try_run_here_f(q, ctx, func))
		return;
	_sq_sync_check_deadlock(call, q, barrier);
	if (q->type != SQ_QUEUE_TYPE_CONCURRENT)
		barrier = false;

	struct sq_queue_s *taken[SQ_MAX_TARGET_DEPTH];
	bool as_barrier[SQ_MAX_TARGET_DEPTH];
	int n = _sq_sync_try_take(q, barrier, taken, as_barrier);
	if (n >= 0) {
		_sq_sync_run_here(q, barrier, ctx, func);
		_sq_sync_give_back(taken, as_barrier, n);
		return;
	}

	struct sq_sync_cont_s *sc = malloc(sizeof(*sc));
	if (sc == NULL)
		_sq_client_crash(call, "out of memory");
	sc->cont.job.kind = SQ_JOB_CONT;
	sc->cont.job.flags = SQ_CONT_SYNC | (barrier ? SQ_CONT_BARRIER : 0);
	sc->cont.job.trace_flow = 0;
	sc->cont.func = func;
	sc->cont.ctx = ctx;
	sc->cont.queue = q;
	sc->cont.data = NULL;
	sc->waiter.state = SQ_SYNC_WAITING;
	sc->waiter.done = 0;
	sc->owners = 2;
	sc->barrier = barrier;
	sc->traced = false;
	if (barrier)
		__atomic_add_fetch(&_sq_concurrent(q)->barriers,
				1, __ATOMIC_SEQ_CST);
	/* A serial queue on a root queue can be taken over by its waiting
	 * callers ("Taking a queue over"). Counted before the push: see
	 * _sq_queue_wakeup. */
	bool may_take = q->type == SQ_QUEUE_TYPE_SERIAL &&
			_sq_queue_is_root(_sq_queue_target(q));
	if (may_take)
		__atomic_add_fetch(&q->sync_waiters, 1, __ATOMIC_SEQ_CST);
	_sq_queue_push(q, &sc->cont.job);

	uint32_t st = _sq_sync_wait(q, sc);
	if (may_take)
		__atomic_sub_fetch(&q->sync_waiters, 1, __ATOMIC_RELAXED);
	if (st == SQ_SYNC_GO) {
		_sq_sync_run_here(q, barrier, ctx, func);
		/* Release: the drainer and the tasks after us see our writes. */
		__atomic_store_n(&sc->waiter.done, 1, __ATOMIC_RELEASE);
		_sq_futex_wake(&sc->waiter.done, 1);
	}
	_sq_sync_cont_release(sc);
}

void
sq_sync_f(sq_queue_t queue, void *context, sq_function_t function)
{
	_sq_sync("sq_sync", queue, context, function, false);
}

void
sq_barrier_sync_f(sq_queue_t queue, void *context, sq_function_t function)
{
	_sq_sync("sq_barrier_sync", queue, context, function, true);
}

/* Used by sq_apply_f and sq_apply_range_f (`call`) on serial and concurrent
 * queues: the same rules and messages. */
SQ_INTERNAL void _sq_sync_for_apply(const char *call, struct sq_queue_s *q,
		void *ctx, sq_function_t func);

void
_sq_sync_for_apply(const char *call, struct sq_queue_s *q, void *ctx,
		sq_function_t func)
{
	_sq_sync(call, q, ctx, func, false);
}

