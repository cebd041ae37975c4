/*
 * SwiftQueues — the worker pool's blocked workers: a worker that blocks in
 * one of the runtime's waits says so, its queued jobs go to other workers,
 * another thread runs in its place; and a worker waiting for a group or a
 * work item runs what it waits for itself when that sits on its own ring.
 * The rest of the pool is in pool.c; pool_internal.h holds what they
 * share.
 */
#include "pool_internal.h"

/* A job queued behind a blocked worker: its next-job slot, then (with
 * `rings`) its ring; of a class that no higher waiting work goes before
 * (_sq_blocked_may_take). NULL when no blocked worker has one. */
struct sq_job_s *
_sq_take_blocked(struct sq_worker_s *self, int *root, bool rings)
{
	uint32_t slots = (uint32_t)__atomic_load_n(&_sq_pool.slots,
			__ATOMIC_ACQUIRE);
	uint32_t start = self->tick * 2654435761u;
	for (uint32_t k = 0; k < slots; k++) {
		struct sq_worker_s *v = &_sq_pool.workers[(start + k) % slots];
		if (v == self || __atomic_load_n(&v->slot_state,
				__ATOMIC_ACQUIRE) != SQ_SLOT_LIVE ||
				__atomic_load_n(&v->blocked, __ATOMIC_ACQUIRE) == 0)
			continue;
		/* The owner (back from its wait) may take it too: the
		 * exchange gives it to one of us. Acquire: the submitter's
		 * writes to the job. */
		uintptr_t e = __atomic_load_n(&v->next, __ATOMIC_RELAXED);
		if (e != 0)
			e = _sq_blocked_may_take((int)(e & SQ_RING_ROOT_MASK)) ?
					__atomic_exchange_n(&v->next, 0,
					__ATOMIC_ACQ_REL) : 0;
		if (e == 0 && rings && !_sq_ring_empty(&v->ring) &&
				_sq_blocked_may_take(__atomic_load_n(
				&v->ring_root, __ATOMIC_RELAXED)))
			e = _sq_ring_pop(&v->ring);
		if (e != 0) {
			return _sq_entry_job(e, root);
		}
	}
	return NULL;
}

/* ---- Blocked workers -----------------------------------------------------
 *
 * A worker's run queues (its ring and next-job slot) belong to the worker
 * slot, not to the thread that happens to be in a job: a thread that blocks
 * hands them on, as Go's scheduler hands a P to another thread when its M
 * blocks in a system call. The runtime's own waits (a sync caller waiting
 * for its turn, a drainer waiting for the sync caller it handed the queue
 * to, semaphores, groups, work items, apply, synchronous I/O) announce
 * themselves before they sleep: the worker sets SQ_BLOCKED_WAIT, `nblocked`
 * counts it, and
 *   - every worker looking for work takes a blocked worker's slot before
 *     the root queues and its ring after them (_sq_take_blocked), so a job
 *     queued behind a blocked thread never waits behind new work of its
 *     class (it still waits for higher classes: _sq_blocked_may_take);
 *   - if work is waiting, another thread runs in the blocked one's place
 *     at once: a searcher if one exists, else an idle worker woken, else a
 *     new worker (up to SQ_MAX_THREADS) when fewer than `width` workers
 *     are running. Submissions count running workers the same way
 *     (`live - nblocked`).
 * Blocking the runtime cannot see (a sleep or a read inside a task) is
 * found by the monitor (pool_monitor.c), which sets SQ_BLOCKED_SEEN on the
 * worker, with the same effect on its queued jobs; the worker clears it
 * when it next takes a job.
 */

void
_sq_worker_mark_blocked(struct sq_worker_s *w, uint32_t bit)
{
	/* Seq-cst: the bit is set before the worker's (or the monitor's)
	 * look at the queues that follows, and a thief's acquire load of it
	 * sees the ring as it was when the worker stopped. */
	uint32_t old = __atomic_fetch_or(&w->blocked, bit, __ATOMIC_SEQ_CST);
	if (old == 0)
		__atomic_add_fetch(&_sq_pool.nblocked, 1, __ATOMIC_SEQ_CST);
}

void
_sq_worker_unmark_blocked(struct sq_worker_s *w, uint32_t bit)
{
	uint32_t old = __atomic_fetch_and(&w->blocked, ~bit, __ATOMIC_SEQ_CST);
	/* Whoever clears the last bit uncounts the worker. */
	if (old == bit)
		__atomic_sub_fetch(&_sq_pool.nblocked, 1, __ATOMIC_SEQ_CST);
}

/* A worker is about to block with work waiting: get another thread
 * running in its place now, rather than at the monitor's next look. */
static void
_sq_pool_compensate(bool sync)
{
	if (__atomic_load_n(&_sq_pool.searching, __ATOMIC_SEQ_CST) != 0) {
		/* A searcher takes blocked workers' jobs first; if it is the
		 * slots' guard in a nap, it must look now. */
		_sq_pool_wake_sleeper();
		return;
	}
	int32_t zero = 0;
	if (!__atomic_compare_exchange_n(&_sq_pool.searching, &zero, 1, false,
			__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return; /* someone else became the searcher */
	struct sq_worker_s *w = _sq_idle_pop();
	if (w) {
		_sq_worker_wake(w);
		return;
	}
	/* A new thread at once while fewer than `width` workers run; for a
	 * sync caller only below the width. Sync callers of a busy serial
	 * queue come and go by the thousand, and a thread for each would
	 * fill the pool to its cap for work that runs one job at a time;
	 * the monitor adds threads for sync waits that last (pool_monitor.c),
	 * and a caller whose queue waits for a thread takes it over
	 * (queue_sync.c). */
	int32_t live = __atomic_load_n(&_sq_pool.live, __ATOMIC_SEQ_CST);
	if ((live < _sq_pool.width || (!sync && _sq_pool_running() <
			_sq_pool.width)) && _sq_pool_spawn()) {
		if (live >= _sq_pool.width)
			__atomic_add_fetch(&_sq_pool.compensated, 1,
					__ATOMIC_RELAXED);
		return;
	}
	/* At the thread cap, or refused a thread: the running workers, the
	 * sync callers' take-over (queue_sync.c) and the monitor go on. */
	__atomic_sub_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
	_sq_monitor_kick();
}

void
_sq_pool_block_begin(bool sync)
{
	struct sq_worker_s *w = _sq_self;
	if (w == NULL || w->block_depth++ != 0)
		return;
	uint32_t bit = sync ? SQ_BLOCKED_SYNC : SQ_BLOCKED_WAIT;
	if (sync)
		__atomic_store_n(&w->blocked_at, _sq_monotonic_ns(),
				__ATOMIC_RELAXED);
	w->block_bit = bit;
	if (!sync)
		__atomic_add_fetch(&_sq_pool.nwaiting, 1, __ATOMIC_SEQ_CST);
	_sq_worker_mark_blocked(w, bit);
	SQ_CHAOS_POINT();
	/* After the mark (seq-cst): a worker that looks for work from now
	 * on takes our queued jobs first. */
	if (_sq_pool_has_work_in(true))
		_sq_pool_compensate(sync);
}

void
_sq_pool_block_end(void)
{
	struct sq_worker_s *w = _sq_self;
	if (w == NULL || --w->block_depth != 0)
		return;
	_sq_worker_unmark_blocked(w, w->block_bit);
	if (w->block_bit == SQ_BLOCKED_WAIT)
		__atomic_sub_fetch(&_sq_pool.nwaiting, 1, __ATOMIC_SEQ_CST);
}

/* Whether nobody is likely to take `job` soon: no worker is idle or
 * searching, or it waits in the calling worker's own next-job slot or ring
 * (racy looks: a hint). */
bool
_sq_pool_holds(struct sq_job_s *job)
{
	if (__atomic_load_n(&_sq_pool.nidle, __ATOMIC_RELAXED) == 0 &&
			__atomic_load_n(&_sq_pool.searching, __ATOMIC_RELAXED)
			== 0)
		return true;
	struct sq_worker_s *w = _sq_self;
	if (w == NULL)
		return false;
	uintptr_t e = __atomic_load_n(&w->next, __ATOMIC_RELAXED);
	if (e != 0 && (struct sq_job_s *)(e & ~SQ_RING_ROOT_MASK) == job)
		return true;
	uint32_t t = w->ring.tail; /* only we write it */
	for (uint32_t h = __atomic_load_n(&w->ring.head, __ATOMIC_ACQUIRE);
			h != t; h++) {
		e = __atomic_load_n(&w->ring.slots[h % SQ_RING_SIZE],
				__ATOMIC_RELAXED);
		if ((struct sq_job_s *)(e & ~SQ_RING_ROOT_MASK) == job)
			return true;
	}
	return false;
}

/* ---- Waiting helps ---------------------------------------------------------
 *
 * A worker that waits forever for a group or a work item first runs, on
 * its own thread, what it waits for that its current job queued on its
 * ring, newest first, while it is not done (oneTBB's waiting thread runs
 * its own tasks the same way): a fork-join tree written the GCD way
 * (each task submits its children to a global queue with
 * sq_group_async_f and waits for its group) then runs depth first on the
 * pool's width, instead of parking a thread per waiting node. Isolation:
 * only the newest entry, and only while it is a continuation of what is
 * waited for (a member of the group, the work item itself: other work,
 * a queue's drain job above all, could need what the waiter holds, and
 * an operation queue's runners are not the caller's to run); only entries
 * its own job pushed (at or after the ring's tail when the job started:
 * its children and theirs); and not at all while the waiter holds a queue
 * alone (a serial queue's task, a barrier), whose work a child might sync
 * onto. Thieves still take from the other end.
 */

bool
_sq_pool_help(bool (*done)(void *), bool (*mine)(const struct sq_cont_s *,
		void *), void *arg)
{
	struct sq_worker_s *w = _sq_self;
	if (w == NULL || _sq_apply_depth != 0)
		return false;
	for (struct sq_frame_s *f = _sq_current_frame; f; f = f->prev)
		if (f->exclusive)
			return false;
	bool helped = false;
	while (!done(arg)) {
		uint32_t run = w->spawn_run;
		uintptr_t e = _sq_ring_pop_tail(&w->ring, w->job_mark);
		w->spawn_run = e != 0 && run != 0 ? run - 1 : 0;
		if (e == 0)
			break;
		struct sq_job_s *job = (struct sq_job_s *)(e & ~SQ_RING_ROOT_MASK);
		if (job->kind != SQ_JOB_CONT ||
				!mine((const struct sq_cont_s *)job, arg)) {
			/* Back where it was (we just freed that entry). */
			(void)_sq_ring_push(&w->ring, e);
			w->spawn_run = run;
			break;
		}
		int root = (int)(e & SQ_RING_ROOT_MASK);
		uint32_t mark = w->job_mark;
		int outer_root = w->root;
		__atomic_store_n(&w->jobs, w->jobs + 1, __ATOMIC_RELAXED);
		_sq_tsan_acquire(job);
		w->root = root;
		w->job_mark = w->ring.tail;
		_sq_job_run(job);
		w->root = outer_root;
		w->job_mark = mark;
		helped = true;
	}
	return helped;
}

