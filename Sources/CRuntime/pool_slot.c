/*
 * SwiftQueues — the worker pool's next-job slots and their guard.
 *
 * Each worker has a one-entry slot (Go's runnext) besides its ring: a job
 * that a running job hands on (a queue it made runnable, a Swift task's
 * child or continuation) waits there and runs on the same thread when the
 * current job returns, with no wake-up. The slots stay run queues for the
 * wake-up invariant: one searcher at a time guards them, and takes a job
 * whose owner has gone on with something long. The worker loop that takes
 * from the slots, and the rest of the pool, are in pool.c;
 * pool_internal.h holds what they share.
 */
#include "pool_internal.h"

/* ---- Next-job slot -------------------------------------------------------
 *
 * Go's runnext, Tokio's LIFO slot. A job submitted with _sq_pool_push_next
 * by a job running on a worker goes to that worker's one-entry slot,
 * displacing the slot's previous job to the normal path: a queue that the
 * job's work made runnable (queue.c, _sq_queue_enqueue_self), and from the
 * Swift executor a task's child, a resumed continuation, a task back from
 * an actor. When the current job returns, the worker takes its slot first:
 * the hand-off stays on one thread, warm in its cache, with no wake-up and
 * no other worker taking it. It is still in a run queue for every other
 * purpose: the push makes sure a searcher exists (waking one only when none
 * does), parking workers see occupied slots in _sq_pool_has_work unless the
 * slots' guard watches them, and the guard takes a slot's job once it has
 * sat there SQ_NEXT_STEAL_NS while its owner ran the same job (the owner is
 * busy with something long; see "Guarding next-job slots"). The owner runs
 * at most SQ_NEXT_STREAK slot jobs in a row while other work is queued:
 * then it runs one of those, and moves its slot's job to its ring first,
 * so a ping-pong pair cannot starve the rest and the pair's next job is
 * not held up behind that work.
 */

#define SQ_NEXT_STEAL_NS (8 * NSEC_PER_USEC)
#define SQ_NEXT_SPIN_NS (2 * NSEC_PER_USEC)

void
_sq_pool_push_next(int root, struct sq_job_s *job)
{
	struct sq_worker_s *w = _sq_self;
	/* A job of a higher class than the worker's own goes where every
	 * worker's class order sees it ("Precedence", pool_class.c): in the slot
	 * it would wait for this worker's job to end. */
	if (w == NULL || root < w->root) {
		_sq_pool_push(root, job);
		return;
	}
	job->link.next = NULL;
	_sq_tsan_release(job); /* after our last plain write to the job */
	/* Seq-cst exchange: publishes the job and is a full barrier before
	 * notify's load of `searching` (the ring push's fence, same pairing). */
	uintptr_t old = __atomic_exchange_n(&w->next,
			(uintptr_t)job | (uintptr_t)root, __ATOMIC_SEQ_CST);
	SQ_CHAOS_POINT();
	if (old != 0)
		_sq_pool_push((int)(old & SQ_RING_ROOT_MASK),
				(struct sq_job_s *)(old & ~SQ_RING_ROOT_MASK));
	/* A searcher, awake or the guard in a nap, covers a slot: it is
	 * looked at within a nap, and the owner takes it first anyway. So
	 * unlike a root or ring job, a hand-off does not wake the guard, and
	 * a chain of them costs one shared load each. */
	else if (__atomic_load_n(&_sq_pool.searching, __ATOMIC_SEQ_CST) == 0)
		_sq_pool_notify();
}

/* Moves the calling worker's slot job, if any, to the normal path (its
 * ring or a root queue), where any worker may take it at once: for work
 * that goes on after a hand-off instead of returning. */
void
_sq_pool_flush_next(void)
{
	struct sq_worker_s *w = _sq_self;
	if (w == NULL || __atomic_load_n(&w->next, __ATOMIC_RELAXED) == 0)
		return;
	/* Acquire: the submitter's writes to the job (its seq-cst store). */
	uintptr_t e = __atomic_exchange_n(&w->next, 0, __ATOMIC_ACQ_REL);
	if (e != 0)
		_sq_pool_push((int)(e & SQ_RING_ROOT_MASK),
				(struct sq_job_s *)(e & ~SQ_RING_ROOT_MASK));
}

bool
_sq_pool_can_hand_off(void)
{
	/* A worker's job, outside an apply (whose chunks go on running
	 * after a submission). */
	return _sq_self != NULL && _sq_apply_depth == 0;
}

/* The owner takes its own slot's job (NULL if empty or stolen). */
struct sq_job_s *
_sq_next_take(struct sq_worker_s *w, int *root)
{
	/* Only the owner stores a job there: a relaxed look that sees none
	 * is right (a thief can only have emptied it). */
	if (__atomic_load_n(&w->next, __ATOMIC_RELAXED) == 0)
		return NULL;
	/* Acquire: the submitter's writes to the job (its release). */
	uintptr_t e = __atomic_exchange_n(&w->next, 0, __ATOMIC_ACQ_REL);
	if (e == 0)
		return NULL;
	return _sq_entry_job(e, root);
}

bool
_sq_pool_work_waiting(void)
{
	struct sq_worker_s *w = _sq_self;
	/* Relaxed: only a hint, nothing read through it. */
	if (w != NULL && (__atomic_load_n(&w->next, __ATOMIC_RELAXED) != 0
			|| !_sq_ring_empty(&w->ring)))
		return true;
	return !_sq_roots_empty();
}

/* ---- Guarding next-job slots ------------------------------------------------
 *
 * A slot's job runs on its owner when the owner's job returns. If that job
 * goes on instead (it blocks, or computes after its hand-off), another
 * worker takes the slot's job: the guard. At most one searcher at a time
 * is the guard (`_sq_pool.guard`, claimed by CAS); other searchers leave
 * the slots to it (_sq_pool_has_work skips guarded slots) and park. The
 * guard takes a job that has sat in its slot SQ_NEXT_STEAL_NS while the
 * owner kept running the same job (its `jobs` count did not move).
 *
 * While hand-offs keep coming (a ping-pong refills a slot every hop) the
 * guard has nothing to do but watch. It watches awake for
 * SQ_GUARD_AWAKE_NS (spinning, then yielding), then naps between looks:
 * SQ_GUARD_NAP_MIN_NS, twice as long after each nap, up to
 * SQ_GUARD_NAP_MAX_NS. Napping it stays counted in `searching`, so
 * hand-offs wake nobody, and it is `_sq_pool.sleeper`, so a job pushed to
 * a root queue or a ring wakes it at once (_sq_pool_notify). A long chain
 * of hand-offs thus costs a few thousand short sleeps a second on one other
 * worker instead of that worker's CPU. The price: a job left in a slot by an
 * owner that then runs long, while the guard naps, is taken after up to
 * two naps (0.5 ms) instead of 8 us.
 *
 * The guard leaves when other work shows up, when it took a job, or when
 * SQ_GUARD_EMPTY_NAPS looks in a row after naps find every slot empty (the
 * hand-offs have ended; in its awake phase, when the slots have stayed
 * empty SQ_NEXT_STEAL_NS). Not at the first empty look: a chain of
 * hand-offs leaves its slot empty while each job runs (about half the time
 * for Swift's task round trips), and a guard that left would be woken again
 * by the owner's next hand-off, a system call on the owner's path and a
 * new awake phase. A guard
 * that leaves clears `guard` before it gives up searching, and giving up
 * looks at the slots again (point 3 of the wake-up invariant).
 */

#define SQ_GUARD_AWAKE_NS (10 * NSEC_PER_USEC)
#define SQ_GUARD_EMPTY_NAPS 4
#define SQ_GUARD_NAP_MIN_NS (16 * NSEC_PER_USEC)
#define SQ_GUARD_NAP_MAX_NS (256 * NSEC_PER_USEC)

/* Whether another worker's slot holds a job (a racy look). */
static bool
_sq_slots_occupied(struct sq_worker_s *self, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct sq_worker_s *v = &_sq_pool.workers[i];
		if (v != self && __atomic_load_n(&v->next, __ATOMIC_RELAXED)
				&& __atomic_load_n(&v->slot_state,
				__ATOMIC_ACQUIRE) == SQ_SLOT_LIVE)
			return true;
	}
	return false;
}

/* The guard naps `ns`, or until a submission to a root queue or a ring
 * wakes it. Returns false when woken so (work to look at). */
static bool
_sq_guard_nap(struct sq_worker_s *self, uint64_t ns)
{
	__atomic_store_n(&self->guard_naps, self->guard_naps + 1,
			__ATOMIC_RELAXED);
	__atomic_store_n(&self->guard_nap, 1, __ATOMIC_RELAXED);
	/* Seq-cst store, then a seq-cst look at the roots and rings: pairs
	 * with a submitter's enqueue, then its load of `sleeper`. */
	__atomic_store_n(&_sq_pool.sleeper, self, __ATOMIC_SEQ_CST);
	SQ_CHAOS_POINT();
	if (!_sq_pool_has_work_in(false)) {
		sq_time_t until = (sq_time_t)(_sq_monotonic_ns() + ns);
		while (__atomic_load_n(&self->guard_nap, __ATOMIC_ACQUIRE) == 1
				&& _sq_futex_wait_until(&self->guard_nap, 1,
				until) != ETIMEDOUT) {
		}
	}
	if (__atomic_exchange_n(&_sq_pool.sleeper, NULL, __ATOMIC_SEQ_CST)
			== self)
		return true;
	/* A submitter took us out of `sleeper` and is about to clear our
	 * word; wait for that store, so that it cannot land on a later nap. */
	for (unsigned i = 0; __atomic_load_n(&self->guard_nap,
			__ATOMIC_ACQUIRE) != 0; i++) {
		if (i < 64)
			_sq_cpu_relax();
		else
			sched_yield();
	}
	return false;
}

/* A searcher that found nothing else guards the others' slots (see above);
 * returns a slot job it took, or NULL (nothing to guard, another guard, or
 * it left: the caller looks again or parks). */
struct sq_job_s *
_sq_next_guard(struct sq_worker_s *self, int *root)
{
	uint32_t n = (uint32_t)__atomic_load_n(&_sq_pool.slots,
			__ATOMIC_ACQUIRE);
	if (!_sq_slots_occupied(self, n))
		return NULL;
	struct sq_worker_s *none = NULL;
	if (!__atomic_compare_exchange_n(&_sq_pool.guard, &none, self, false,
			__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return NULL;
	SQ_CHAOS_POINT();
	/* Per worker: the slot entry and job count last seen, and since when
	 * they have been so. */
	uintptr_t seen[n];
	uint64_t seen_jobs[n], since[n];
	uint64_t start = _sq_monotonic_ns(), quiet_since = start;
	for (uint32_t i = 0; i < n; i++) {
		seen[i] = __atomic_load_n(&_sq_pool.workers[i].next,
				__ATOMIC_RELAXED);
		seen_jobs[i] = __atomic_load_n(&_sq_pool.workers[i].jobs,
				__ATOMIC_RELAXED);
		since[i] = start;
	}
	uint64_t nap = SQ_GUARD_NAP_MIN_NS;
	unsigned empty_naps = 0; /* naps in a row after which all were empty */
	struct sq_job_s *job = NULL;
	for (;;) {
		uint64_t now = _sq_monotonic_ns();
		bool napped = false;
		if (now - start < SQ_NEXT_SPIN_NS) {
			for (int i = 0; i < 16; i++)
				_sq_cpu_relax();
		} else if (now - start < SQ_GUARD_AWAKE_NS) {
			/* On a machine with more runnable threads than CPUs
			 * the owner may be waiting for ours. */
			sched_yield();
		} else {
			if (!_sq_guard_nap(self, nap))
				break; /* woken: work in a root queue or ring */
			napped = true;
			nap = nap * 2 > SQ_GUARD_NAP_MAX_NS ? SQ_GUARD_NAP_MAX_NS
					: nap * 2;
		}
		if (_sq_pool_has_work_in(false))
			break;
		now = _sq_monotonic_ns();
		bool occupied = false;
		for (uint32_t i = 0; i < n; i++) {
			struct sq_worker_s *v = &_sq_pool.workers[i];
			if (v == self || __atomic_load_n(&v->slot_state,
					__ATOMIC_ACQUIRE) != SQ_SLOT_LIVE)
				continue;
			uintptr_t e = __atomic_load_n(&v->next,
					__ATOMIC_RELAXED);
			uint64_t j = __atomic_load_n(&v->jobs, __ATOMIC_RELAXED);
			if (e != seen[i] || j != seen_jobs[i]) {
				seen[i] = e;
				seen_jobs[i] = j;
				since[i] = now;
			}
			if (e == 0)
				continue;
			occupied = true;
			/* Acquire on success: the submitter's writes to the
			 * job (its seq-cst exchange). */
			if (now - since[i] >= SQ_NEXT_STEAL_NS &&
					__atomic_compare_exchange_n(&v->next,
					&e, 0, false, __ATOMIC_ACQ_REL,
					__ATOMIC_RELAXED)) {
				__atomic_store_n(&self->slot_takes,
						self->slot_takes + 1,
						__ATOMIC_RELAXED);
				job = _sq_entry_job(e, root);
				goto out;
			}
		}
		if (occupied) {
			quiet_since = now;
			empty_naps = 0;
		} else if (napped ? ++empty_naps >= SQ_GUARD_EMPTY_NAPS :
				now - quiet_since >= SQ_NEXT_STEAL_NS) {
			break; /* the hand-offs have ended */
		}
	}
out:
	SQ_CHAOS_POINT();
	/* Seq-cst: before this worker gives up searching or runs the job
	 * (both look at the slots afterwards, see _sq_pool_has_work). */
	__atomic_store_n(&_sq_pool.guard, NULL, __ATOMIC_SEQ_CST);
	return job;
}

/* ---- Busy workers' looks -------------------------------------------------
 *
 * The guard is a searcher, and there may be none: while every worker runs
 * (a hand-off chain on one, a long job on the other), a job left in the
 * long job's owner's slot would wait for that job to end. So every worker,
 * however busy, looks at the others' slots now and then: every 16th look
 * for work, at most once per SQ_NEXT_SCAN_NS, it notes the occupied slots
 * it sees (up to SQ_SCAN_CANDIDATES: entry and owner's job count), and at
 * its next look takes a job that is still there under the same job of its
 * owner (Go's schedulers steal a runnext goroutine whose owner runs on the
 * same way). Not just the first occupied slot: a chain of hand-offs on
 * another worker occupies its slot nearly always, with a new entry each
 * time, and would be the only candidate ever noted.
 * A job in a slot therefore waits at most about two scan periods plus
 * sixteen of the looker's jobs while any worker is taking jobs; a chain of
 * hand-offs pays a clock read every 16 hops.
 */

#define SQ_NEXT_SCAN_NS (100 * NSEC_PER_USEC)

struct sq_job_s *
_sq_next_scan(struct sq_worker_s *self, int *root)
{
	uint32_t n = (uint32_t)__atomic_load_n(&_sq_pool.slots,
			__ATOMIC_ACQUIRE);
	if (n < 2)
		return NULL;
	uint64_t now = _sq_monotonic_ns();
	if (now - self->scan_at < SQ_NEXT_SCAN_NS)
		return NULL;
	self->scan_at = now;
	/* A candidate still there, under the same job of its owner, has sat
	 * a whole scan period behind a busy owner: take it. */
	for (uint32_t c = 0; c < self->scan_count; c++) {
		int32_t i = self->scan[c].victim;
		if ((uint32_t)i >= n)
			continue;
		struct sq_worker_s *v = &_sq_pool.workers[i];
		uintptr_t e = self->scan[c].entry;
		/* Acquire on success: the submitter's writes to the job. */
		if (__atomic_load_n(&v->slot_state, __ATOMIC_ACQUIRE) ==
				SQ_SLOT_LIVE && __atomic_load_n(&v->jobs,
				__ATOMIC_RELAXED) == self->scan[c].jobs &&
				__atomic_compare_exchange_n(&v->next, &e, 0,
				false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			self->scan_count = 0;
			__atomic_store_n(&self->slot_takes, self->slot_takes + 1,
					__ATOMIC_RELAXED);
			return _sq_entry_job(e, root);
		}
	}
	/* Note the occupied slots now (up to SQ_SCAN_CANDIDATES, starting
	 * after this worker so that lookers spread), for the next look. A
	 * chain of hand-offs refills its slot every hop, so its entry never
	 * matches twice; a job under a busy owner does. */
	uint32_t count = 0;
	uint32_t start = (uint32_t)(self - _sq_pool.workers) + 1;
	for (uint32_t k = 0; k < n && count < SQ_SCAN_CANDIDATES; k++) {
		uint32_t j = (start + k) % n;
		struct sq_worker_s *v = &_sq_pool.workers[j];
		if (v == self)
			continue;
		uintptr_t e = __atomic_load_n(&v->next, __ATOMIC_RELAXED);
		if (e == 0 || __atomic_load_n(&v->slot_state,
				__ATOMIC_ACQUIRE) != SQ_SLOT_LIVE)
			continue;
		self->scan[count].victim = (int32_t)j;
		self->scan[count].entry = e;
		self->scan[count].jobs = __atomic_load_n(&v->jobs,
				__ATOMIC_RELAXED);
		count++;
	}
	self->scan_count = count;
	return NULL;
}
