/*
 * SwiftQueues — the worker pool by QoS class: precedence (which waiting
 * job a worker takes), room for a higher class (a worker beyond the width
 * when every worker runs lower work), and the classes' CPU priorities.
 * The run queues and the worker loop that call these are in pool.c;
 * pool_internal.h holds what they share.
 */
#include "pool_internal.h"

#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The classes' nice values, relative to the program's. User-interactive
 * at Linux's highest: a caller that runs a raised queue's work itself keeps
 * 98.9% of a CPU shared with a default-class hog (96.6% at -15). */
#define SQ_INTERACTIVE_NICE (-20)
#define SQ_INITIATED_NICE (-4)
#define SQ_UTILITY_NICE 4
#define SQ_BACKGROUND_NICE 10

static sq_once_t _sq_nice_probe_once;

static bool _sq_spawner_ensure(void);

/* ---- Precedence ----------------------------------------------------------
 *
 * A worker takes the highest-class job that waits where it may take it:
 * root queues, its own ring, other workers' rings. A root queue is one
 * class. A ring holds one class at a time: its owner sets `ring_root`
 * when it pushes to an empty ring, and moves the ring's entries to their
 * root queues before it pushes a job of another class (_sq_pool_push),
 * so a look at `ring_root` tells another worker what a ring holds.
 * `ring_mask` sums the rings up: bit r is set by whoever pushes a root-r
 * job to a ring (a load first, so the common case writes nothing), and
 * cleared by a worker that looked for root-r work in the rings and found
 * none; it then looks once more and sets the bit back if a ring has some
 * (the pusher's store of its tail and load of the mask, and the
 * clearer's clear and load of the tails, are seq-cst: one sees the
 * other). A stale bit costs a look; a missed one only lets a lower job
 * go first once, since the rings are looked at after the roots in any
 * case. The owner's next-job slot yields too: a slot job of a lower
 * class than queued work goes to the normal path first, and a job of a
 * higher class than the worker's own never goes to its slot.
 *
 * Aging: one take in 16 starts with LOW (UTILITY) and one in 64 with
 * BACKGROUND, so they advance even under a flood of higher work.
 */

bool
_sq_pool_higher_waiting(void)
{
	/* A bound worker yields too: it then leaves the pool, making room
	 * for a worker that may run that work (pool.c, "Bound workers"). */
	struct sq_worker_s *w = _sq_self;
	return w != NULL && w->root > 0 && _sq_best_waiting(w->root) < w->root;
}

/* Whether any ring but self's holds root r's jobs. Seq-cst loads: after
 * the clear of the mask bit (see above). */
static bool
_sq_rings_hold(struct sq_worker_s *self, int r)
{
	int32_t slots = __atomic_load_n(&_sq_pool.slots, __ATOMIC_SEQ_CST);
	for (int32_t i = 0; i < slots; i++) {
		struct sq_worker_s *v = &_sq_pool.workers[i];
		if (v != self && __atomic_load_n(&v->ring_root,
				__ATOMIC_SEQ_CST) == r &&
				!_sq_ring_empty(&v->ring))
			return true;
	}
	return false;
}

/* A job of class r: from its root queue, else from a ring that holds it
 * (when the mask says one may). */
static struct sq_job_s *
_sq_take_root(struct sq_worker_s *self, int r, int *root)
{
	struct sq_job_s *job = _sq_root_pop(r);
	if (job) {
		*root = r;
		return job;
	}
	if (!(__atomic_load_n(&_sq_pool.ring_mask, __ATOMIC_RELAXED) &
			(1u << r)) || self == NULL)
		return NULL;
	if ((job = _sq_steal(self, r, root)))
		return job;
	/* None found: clear the bit, then look again (see above). Our own
	 * ring does not count: the caller looks at it itself. */
	__atomic_fetch_and(&_sq_pool.ring_mask, ~(1u << r), __ATOMIC_SEQ_CST);
	if (_sq_rings_hold(self, r) || (!_sq_ring_empty(&self->ring) &&
			self->ring_root == r))
		_sq_ring_mask_set(r);
	return _sq_steal(self, r, root);
}

/* A job from class r's overcommit run queue. */
static struct sq_job_s *
_sq_take_overcommit(int r, int *root)
{
	struct sq_job_s *job = _sq_root_pop(SQ_ROOT_COUNT + r);
	if (job)
		*root = r;
	return job;
}

static bool _sq_aging_may_take(const struct sq_worker_s *self, int stop,
		int r);

/* Aging's turn for take number c: one take in 16 starts with UTILITY, one
 * in 64 with BACKGROUND (-1: none). */
static inline int
_sq_aging_first(uint32_t c)
{
	return c % 64 == 63 ? SQ_ROOT_BACKGROUND : c % 16 == 15 ? SQ_ROOT_LOW :
			-1;
}

/* _sq_take_by_class with aging's turn `first` (-1: none). */
static struct sq_job_s *
_sq_take_by_class_turn(struct sq_worker_s *self, int stop, int *root,
		int first)
{
	/* A bound worker takes only the classes its thread may run. */
	int top = self != NULL ? self->bound : 0;
	struct sq_job_s *job;
	if (first >= top && _sq_aging_may_take(self, stop, first) &&
			(job = _sq_take_root(self, first, root)))
		return job;
	int own = self != NULL && !_sq_ring_empty(&self->ring) ?
			self->ring_root : SQ_ROOT_COUNT;
	for (int r = top; r < SQ_ROOT_COUNT; r++) {
		if ((job = _sq_take_overcommit(r, root)))
			return job;
		if (r >= stop)
			continue;
		if (r == own) {
			uintptr_t entry = _sq_ring_pop(&self->ring);
			if (entry)
				return _sq_entry_job(entry, root);
		}
		if ((job = _sq_take_root(self, r, root)))
			return job;
	}
	return NULL;
}

/* Takes by class, highest first, with aging; self's own ring counts as
 * its `ring_root` class (NULL self: roots only). Only classes above
 * `stop` (_sq_take_stop), but overcommit jobs of any class. */
struct sq_job_s *
_sq_take_by_class(struct sq_worker_s *self, int stop, int *root)
{
	struct sq_job_s *job = _sq_take_by_class_turn(self, stop, root,
			_sq_aging_first(__atomic_load_n(&_sq_pool.pop_counter,
			__ATOMIC_RELAXED)));
	/* Turns count takes, not looks: idle workers' empty looks would
	 * hand aging most of the turns (a class nobody runs then started
	 * one job in two while higher work waited at the width). Relaxed:
	 * a turn is a share, not an order. */
	if (job != NULL)
		__atomic_fetch_add(&_sq_pool.pop_counter, 1, __ATOMIC_RELAXED);
	return job;
}

/* Aging for a worker about to take from its own ring (which
 * _sq_take_by_class's turns do not see), by its own look count, when the
 * turn's class is below the ring's. A worker that resubmits its own work
 * keeps its ring full; without this, a class below it waited for as long
 * as it went on. */
struct sq_job_s *
_sq_take_aged(struct sq_worker_s *self, int stop, int own, int *root)
{
	int first = _sq_aging_first(self->tick);
	if (first <= own || first < self->bound ||
			!_sq_aging_may_take(self, stop, first))
		return NULL;
	return _sq_take_root(self, first, root);
}

/* A job from another worker's ring: one that holds class r's jobs, or
 * any (r == SQ_ROOT_COUNT). Starts at a different worker each look. */
struct sq_job_s *
_sq_steal(struct sq_worker_s *self, int r, int *root)
{
	uint32_t slots = (uint32_t)__atomic_load_n(&_sq_pool.slots,
			__ATOMIC_ACQUIRE);
	uint32_t start = self->tick * 2654435761u;
	for (uint32_t k = 0; k < slots; k++) {
		struct sq_worker_s *v = &_sq_pool.workers[(start + k) % slots];
		if (v == self || (r < SQ_ROOT_COUNT && (__atomic_load_n(
				&v->ring_root, __ATOMIC_RELAXED) != r ||
				_sq_ring_empty(&v->ring))) ||
				__atomic_load_n(&v->slot_state,
				__ATOMIC_ACQUIRE) != SQ_SLOT_LIVE)
			continue;
		uintptr_t entry = _sq_ring_pop(&v->ring);
		if (entry)
			return _sq_entry_job(entry, root);
	}
	return NULL;
}

/* A job from another worker's ring that holds a class above `stop`. */
struct sq_job_s *
_sq_steal_above(struct sq_worker_s *self, int stop, int *root)
{
	if (stop >= SQ_ROOT_COUNT)
		return _sq_steal(self, SQ_ROOT_COUNT, root);
	for (int r = 0; r < stop; r++) {
		struct sq_job_s *job = _sq_steal(self, r, root);
		if (job)
			return job;
	}
	return NULL;
}

/* ---- Taking within the width --------------------------------------------
 *
 * Work below DEFAULT keeps to the width: a worker starts a UTILITY or
 * BACKGROUND job only while fewer than `width` other workers run jobs of
 * its class or a higher one (not counting blocked ones, which run
 * nothing); aging's turns also go to a class that nobody runs, so that no
 * class starves. Workers beyond the width started for a higher class ("Room
 * for a higher class") thus do not go on with a background batch: done
 * with their work, they park, and are idle, a wake-up away, when the next
 * higher job comes. Without the rule, a worker started for a request
 * went on with the batch's jobs, and the batch ran on up to all of its
 * jobs' worth of threads, each taking its share of the CPUs from the
 * requests. DEFAULT and above keep the pool's old way, where an idle
 * worker beyond the width takes what waits: workers that block out of
 * the runtime's sight are common there (a test runner's tests sleep, a
 * handshake on a POSIX semaphore), the counts would take them for
 * running, and the monitor sees them only after a few milliseconds (a
 * timer's handler waited more than a second behind them in the Swift
 * suite with SwiftQueues as the global executor, under a stricter rule).
 *
 * Exempt: a worker's own next-job slot (the chain its last job handed
 * on), what waits behind a blocked worker (pool_block.c), what a waiting
 * job runs itself, and the overcommit run queues (their jobs get a thread
 * beyond the width by definition).
 *
 * Wake-ups: a job no worker may start is left to those running: each of
 * them looks again when its job ends. A worker that stops running counts
 * itself out of `busy` (seq-cst) and then looks at the queues before it
 * parks (_sq_pool_has_takeable); a submitter enqueues and then reads the
 * counts (_sq_pool_notify_root): one sees the other. A running worker
 * that blocks where the runtime sees it (an announced wait) counts in
 * `nblocked` and gets another worker going at once; blocking only the
 * monitor sees (a sleep in a task) is marked by it, and it then wakes an
 * idle worker, which may now take the job (pool_monitor.c).
 */

/* The first class whose jobs `self` (NULL: a submitter) may not start:
 * the first class below DEFAULT at which `width` other workers, not
 * blocked, run that class or a higher one; SQ_ROOT_COUNT when none.
 * Seq-cst loads (see above). The blocked ones are subtracted from the
 * top: a hint that errs towards taking. */
int
_sq_take_stop(const struct sq_worker_s *self)
{
	int32_t running = -__atomic_load_n(&_sq_pool.nblocked,
			__ATOMIC_SEQ_CST);
	int counted = self != NULL ? self->busy_root : SQ_ROOT_COUNT;
	for (int r = 0; r < SQ_ROOT_COUNT; r++) {
		running += __atomic_load_n(&_sq_pool.busy[r],
				__ATOMIC_SEQ_CST) - (r == counted);
		if (r > SQ_ROOT_DEFAULT && running >= _sq_pool.width)
			return r;
	}
	return SQ_ROOT_COUNT;
}

/* Whether aging's turn may start a job of class r: it is open, or nobody
 * else runs it. Closed or not, a class nobody runs gets aging's turns, so
 * it never starves behind higher work on every worker (it waited for as
 * long as that work lasted); a class that has a runner waits for it. */
static bool
_sq_aging_may_take(const struct sq_worker_s *self, int stop, int r)
{
	if (r < stop)
		return true;
	int32_t here = __atomic_load_n(&_sq_pool.busy[r], __ATOMIC_SEQ_CST);
	return here - (self != NULL && self->busy_root == r) <= 0;
}

/* Whether work waits that `self` (NULL: any looker) may take: an
 * overcommit job, a job in a next-job slot (unless a guard watches the
 * slots) or behind a blocked worker (_sq_blocked_may_take), or a job of a
 * class above _sq_take_stop in a root queue or a ring. A parking worker's
 * last look; seq-cst loads after its seq-cst count-out and its leaving
 * the searchers. */
bool
_sq_pool_has_takeable(const struct sq_worker_s *self)
{
	int stop = _sq_take_stop(self);
	for (int r = 0; r < SQ_ROOT_COUNT; r++) {
		struct sq_root_rq_s *oc = &_sq_pool.roots[SQ_ROOT_COUNT + r];
		if (!cds_wfcq_empty(&oc->head, &oc->tail) || (r < stop &&
				!cds_wfcq_empty(&_sq_pool.roots[r].head,
				&_sq_pool.roots[r].tail)))
			return true;
	}
	bool slots = __atomic_load_n(&_sq_pool.guard, __ATOMIC_SEQ_CST) ==
			NULL;
	int32_t n = __atomic_load_n(&_sq_pool.slots, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++) {
		struct sq_worker_s *w = &_sq_pool.workers[i];
		if (__atomic_load_n(&w->slot_state, __ATOMIC_ACQUIRE) !=
				SQ_SLOT_LIVE)
			continue;
		bool blocked = __atomic_load_n(&w->blocked,
				__ATOMIC_SEQ_CST) != 0;
		if (slots || blocked) {
			uintptr_t e = __atomic_load_n(&w->next,
					__ATOMIC_SEQ_CST);
			if (e != 0 && (slots || _sq_blocked_may_take((int)(e &
					SQ_RING_ROOT_MASK))))
				return true;
		}
		if (!_sq_ring_empty(&w->ring)) {
			int r = __atomic_load_n(&w->ring_root, __ATOMIC_SEQ_CST);
			if (r < stop || (blocked && _sq_blocked_may_take(r)))
				return true;
		}
	}
	return false;
}

/* ---- Room for a higher class -------------------------------------------
 *
 * Precedence orders waiting work; it cannot stop a job that runs. When
 * every worker runs lower work and a job of class r arrives, r would wait
 * for the end of a lower job. So the width is counted per class: while
 * fewer than `width` workers run work of class r or higher and some run
 * lower work, a job of class r may start a worker beyond the width (up to
 * the thread cap). The system's scheduler then runs it first: workers of
 * the lower classes run at a lower CPU priority (_sq_worker_set_class_nice).
 * The extra worker retires after idling, like any worker beyond the
 * width.
 */

/* Whether a job of class r may start a worker beyond the width (relaxed
 * counts: a hint; a wrong guess costs a thread or a wait for a job's
 * end, as before this rule). */
bool
_sq_pool_class_room(int r)
{
	if (r >= SQ_ROOT_BACKGROUND)
		return false;
	int32_t high = 0, low = 0;
	for (int i = 0; i < SQ_ROOT_COUNT; i++) {
		int32_t n = __atomic_load_n(&_sq_pool.busy[i],
				__ATOMIC_RELAXED);
		if (i <= r)
			high += n;
		else
			low += n;
	}
	return low > 0 && high < _sq_pool.width &&
			__atomic_load_n(&_sq_pool.live, __ATOMIC_RELAXED) <
			_sq_pool.max_threads;
}

/* ---- CPU priorities ------------------------------------------------------ */

/* A class's nice value, relative to the program's: GCD's scheduling
 * tiers on Darwin put the classes above DEFAULT ahead of it and the ones
 * below after it. Below the program's value only where the process may
 * (the probe below); the program's own otherwise. */
static const int _sq_class_nice_offsets[SQ_ROOT_COUNT] = {
	SQ_INTERACTIVE_NICE, SQ_INITIATED_NICE, 0, SQ_UTILITY_NICE,
	SQ_BACKGROUND_NICE,
};

static int
_sq_class_nice(int root)
{
	int offset = _sq_class_nice_offsets[root];
	if (offset < 0 && !_sq_pool.nice_raise)
		offset = 0;
	int nice = _sq_pool.base_nice + offset;
	return nice > 19 ? 19 : nice < -20 ? -20 : nice;
}

static int
_sq_background_nice(void)
{
	return _sq_class_nice(SQ_ROOT_BACKGROUND);
}

static void *
_sq_nice_probe_thread(void *unused)
{
	/* A thread of its own, since a refused way back would leave it
	 * niced for good. Lowering the nice value needs CAP_SYS_NICE (in
	 * the initial user namespace) or a high enough RLIMIT_NICE; trying
	 * is the only sure test. Upwards first: a thread that lowered its
	 * own priority to try could wait long for a CPU before it came back
	 * (under SCHED_IDLE, hundreds of milliseconds on a busy machine),
	 * and the worker that asked waits for it. One step above the
	 * program's value allows the way back from any lower one, and from
	 * SCHED_IDLE (a nice value within RLIMIT_NICE's range). */
	id_t tid = (id_t)gettid();
	int base = _sq_pool.base_nice;
	bool ok;
	if (base > -20)
		ok = setpriority(PRIO_PROCESS, tid, base - 1) == 0 &&
				setpriority(PRIO_PROCESS, tid, base) == 0;
	else
		ok = setpriority(PRIO_PROCESS, tid, _sq_background_nice()) ==
				0 && setpriority(PRIO_PROCESS, tid, base) == 0;
	/* And whether it may go as far as the highest class's value. */
	int high = base + SQ_INTERACTIVE_NICE;
	_sq_pool.nice_raise = ok && high >= -20 &&
			setpriority(PRIO_PROCESS, tid, high) == 0 &&
			setpriority(PRIO_PROCESS, tid, base) == 0;
	_sq_pool.sched_idle_ok = ok;
	return ok ? (void *)1 : NULL;
}

static void
_sq_nice_probe(void *unused)
{
	pthread_t thread;
	void *result = NULL;
	/* No thread to spare: BACKGROUND work is simply not niced. */
	if (pthread_create(&thread, NULL, _sq_nice_probe_thread, NULL) == 0)
		pthread_join(thread, &result);
	_sq_pool.nice_reversible = result != NULL;
}

/* Whether workers may nice themselves for BACKGROUND work: only if they
 * can come back. Otherwise a worker that ran one BACKGROUND job would run
 * everything after it at nice 10, at a tenth of a contended CPU's share:
 * with SQ_WORKERS=1 the whole program. */
static bool
_sq_nice_reversible(void)
{
	sq_once_f(&_sq_nice_probe_once, NULL, _sq_nice_probe);
	return _sq_pool.nice_reversible;
}

/* BACKGROUND work at the idle I/O priority: its reads and writes get the
 * disk only when no one else wants it. Any thread may move itself between
 * the idle class and the default (IOPRIO_CLASS_NONE: derived from the
 * nice value), privileged or not, so this follows each job's class. */
#define SQ_IOPRIO_CLASS_SHIFT 13
#define SQ_IOPRIO_CLASS_IDLE 3
#define SQ_IOPRIO_WHO_PROCESS 1

static bool
_sq_set_io_idle(pid_t tid, bool idle)
{
	int prio = idle ? SQ_IOPRIO_CLASS_IDLE << SQ_IOPRIO_CLASS_SHIFT : 0;
	return syscall(SYS_ioprio_set, SQ_IOPRIO_WHO_PROCESS, (int)tid,
			prio) == 0;
}

bool
_sq_thread_io_idle(void)
{
	long prio = syscall(SYS_ioprio_get, SQ_IOPRIO_WHO_PROCESS, 0);
	return prio >= 0 &&
			(prio >> SQ_IOPRIO_CLASS_SHIFT) == SQ_IOPRIO_CLASS_IDLE;
}

static void
_sq_worker_set_class_io(struct sq_worker_s *w, int root)
{
	bool idle = root == SQ_ROOT_BACKGROUND;
	if (idle != w->io_idle && _sq_set_io_idle(w->tid, idle))
		w->io_idle = idle;
}

/* The classes above DEFAULT ask the scheduler for a short time slice
 * (Linux 6.12 and later: sched_attr's sched_runtime for SCHED_OTHER, which
 * any thread may set and take back). A woken thread with a shorter slice
 * than the running one preempts it at once instead of waiting for the
 * end of the running one's slice: a request's task does not wait a slice
 * of background work for its CPU. Older kernels take and ignore it. */
#define SQ_SHORT_SLICE_NS 100000u

struct sq_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
};

static bool _sq_short_slice_refused;

/* Whether the calling thread runs on the short slice (a thread may inherit
 * its creator's). */
bool
_sq_thread_short_slice(void)
{
	struct sq_sched_attr attr;
	memset(&attr, 0, sizeof(attr));
	return syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) == 0 &&
			attr.sched_runtime == SQ_SHORT_SLICE_NS;
}

static void
_sq_worker_set_class_slice(struct sq_worker_s *w, int root)
{
	bool short_slice = root < SQ_ROOT_DEFAULT && _sq_pool.short_slice;
	if (short_slice == w->short_slice || w->sched_idle ||
			__atomic_load_n(&_sq_short_slice_refused,
			__ATOMIC_RELAXED))
		return;
	struct sq_sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = SCHED_OTHER,
		.sched_nice = w->nice,
		.sched_runtime = short_slice ? SQ_SHORT_SLICE_NS : 0,
	};
	if (syscall(SYS_sched_setattr, (int)w->tid, &attr, 0) == 0)
		w->short_slice = short_slice;
	else if (errno == ENOSYS || errno == E2BIG)
		__atomic_store_n(&_sq_short_slice_refused, true,
				__ATOMIC_RELAXED);
}

/* Each class at its own CPU priority (_sq_class_nice) when the process
 * may go back and forth (see _sq_nice_reversible). Otherwise a thread may
 * still lower its own priority, once: a worker about to run work of a
 * class below DEFAULT takes that class's nice value and is bound to it
 * from then on (`bound`): it takes only work of that class or lower, and
 * leaves the pool once none is left (pool.c, _sq_worker_main), while
 * workers at the program's value run everything else. The probe runs
 * before the first look at the class's value (it fills in `nice_raise`). */
void
_sq_worker_set_class_nice(struct sq_worker_s *w, int root)
{
	_sq_worker_set_class_io(w, root);
	if (w->nice == _sq_pool.base_nice && !w->sched_idle &&
			!w->short_slice && root == SQ_ROOT_DEFAULT)
		return;
	bool reversible = _sq_nice_reversible();
	int nice;
	if (reversible)
		nice = _sq_class_nice(root);
	else if (root > SQ_ROOT_DEFAULT && root > w->bound &&
			_sq_spawner_ensure())
		nice = _sq_class_nice(root);
	else
		nice = w->nice; /* DEFAULT and above: as it is */
	if (nice != w->nice && setpriority(PRIO_PROCESS, (id_t)w->tid,
			nice) == 0) {
		w->nice = nice;
		if (!reversible)
			w->bound = (uint8_t)root;
	}
	/* With SQ_BACKGROUND_IDLE=1, BACKGROUND also under SCHED_IDLE where
	 * the process may come back from it, or where its thread is bound to
	 * BACKGROUND: the scheduler then gives it
	 * only what nothing else wants (a weight of 3 against a nice-0
	 * thread's 1024), and preempts it at once for anything else. Not by
	 * default: work that a higher class waits for without an override
	 * (a semaphore, a Swift task awaited at a higher priority, which
	 * Swift's runtime on Linux does not report) then starves while the
	 * higher classes keep the CPUs busy: 0.9-1.9 s instead of 34-67 ms
	 * for 20 ms of such work in the Swift inversion row. */
	bool idle = root == SQ_ROOT_BACKGROUND && _sq_pool.background_idle &&
			(reversible ? _sq_pool.sched_idle_ok :
			w->bound == SQ_ROOT_BACKGROUND);
	if (idle != w->sched_idle && (reversible || idle)) {
		struct sched_param param = { 0 };
		if (sched_setscheduler(w->tid, idle ? SCHED_IDLE : SCHED_OTHER,
				&param) == 0) {
			w->sched_idle = idle;
			w->short_slice = false; /* the default slice again */
		}
	}
	_sq_worker_set_class_slice(w, root);
}

/* A worker that ran lower work at a higher nice value, about to look for
 * its next job while higher work waits, takes that class's value first:
 * looking and taking at the low value, it could wait for a CPU for
 * milliseconds holding a higher job (a concurrent queue's drain, whose
 * tasks nobody else sees meanwhile). */
void
_sq_worker_before_look(struct sq_worker_s *w)
{
	if (SQ_LIKELY(w->nice <= _sq_pool.base_nice) || w->root == 0 ||
			w->bound != 0)
		return;
	int best = _sq_best_waiting(w->root);
	if (best < w->root)
		_sq_worker_set_class_nice(w, best);
}

/* Whether a bound worker should give its thread back although work of its
 * classes waits: higher work waits, which it may not run. Taking more of
 * its own would keep a CPU's share from that work (a nice value of 4 is
 * still 40% of a contended CPU against the program's), and at the cap
 * the thread the higher work needs. */
bool
_sq_worker_bound_should_leave(struct sq_worker_s *w)
{
	return _sq_best_waiting(w->bound) < w->bound;
}

/* ---- Threads at the program's priority ----------------------------------
 *
 * A new thread inherits its creator's nice value, scheduling policy and
 * I/O priority. A worker running lower work that starts a thread (another
 * worker, the monitor, the event loop's manager, an I/O thread) must not
 * hand its class on. Where the process may go back and forth, the creator
 * takes the program's values for the creation. Where it may not, a bound
 * worker asks the spawner: a thread started at the program's values (by
 * the first worker about to bind itself, before it does) that creates
 * threads for it. The spawner answers in microseconds, and is asked only
 * by bound workers. (A worker running higher work starts threads at its
 * own values: a worker started for that work gets a CPU sooner, and parks
 * at the program's.)
 */

struct sq_spawn_request {
	const pthread_attr_t *attr;
	void *(*main)(void *);
	void *arg;
	int err;
	bool done;
};

static pthread_mutex_t _sq_spawner_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t _sq_spawner_cond = PTHREAD_COND_INITIALIZER;
static struct sq_spawn_request *_sq_spawner_request; /* under the lock */
static bool _sq_spawner_running;                     /* under the lock */

static void *
_sq_spawner_main(void *unused)
{
	pthread_setname_np(pthread_self(), "sq.spawner");
	pthread_mutex_lock(&_sq_spawner_lock);
	for (;;) {
		while (_sq_spawner_request == NULL || _sq_spawner_request->done)
			pthread_cond_wait(&_sq_spawner_cond, &_sq_spawner_lock);
		struct sq_spawn_request *req = _sq_spawner_request;
		pthread_mutex_unlock(&_sq_spawner_lock);
		int err = _sq_thread_create_here(req->attr, req->main,
				req->arg);
		pthread_mutex_lock(&_sq_spawner_lock);
		req->err = err;
		req->done = true;
		pthread_cond_broadcast(&_sq_spawner_cond);
	}
	return NULL;
}

/* Whether the spawner runs, starting it if not (from a thread at the
 * program's values: the caller, not yet bound). A refused thread is
 * tried again at the next binding. */
static bool
_sq_spawner_ensure(void)
{
	if (__atomic_load_n(&_sq_spawner_running, __ATOMIC_ACQUIRE))
		return true;
	pthread_mutex_lock(&_sq_spawner_lock);
	if (!_sq_spawner_running && _sq_thread_create_here(
			&_sq_pool.thread_attr, _sq_spawner_main, NULL) == 0)
		__atomic_store_n(&_sq_spawner_running, true, __ATOMIC_RELEASE);
	bool running = _sq_spawner_running;
	pthread_mutex_unlock(&_sq_spawner_lock);
	return running;
}

int
_sq_thread_create_at_base(struct sq_worker_s *w, const pthread_attr_t *attr,
		void *(*main)(void *), void *arg)
{
	if (!_sq_pool.nice_reversible) {
		if (!__atomic_load_n(&_sq_spawner_running, __ATOMIC_ACQUIRE))
			return _sq_thread_create_here(attr, main, arg);
		struct sq_spawn_request req = {
			.attr = attr, .main = main, .arg = arg,
		};
		pthread_mutex_lock(&_sq_spawner_lock);
		/* One request at a time: its requester takes it out. */
		while (_sq_spawner_request != NULL)
			pthread_cond_wait(&_sq_spawner_cond,
					&_sq_spawner_lock);
		_sq_spawner_request = &req;
		pthread_cond_broadcast(&_sq_spawner_cond);
		while (!req.done)
			pthread_cond_wait(&_sq_spawner_cond,
					&_sq_spawner_lock);
		_sq_spawner_request = NULL;
		pthread_cond_broadcast(&_sq_spawner_cond);
		pthread_mutex_unlock(&_sq_spawner_lock);
		return req.err;
	}
	/* Reversible: the program's values for the creation, then back. */
	struct sched_param param = { 0 };
	if (w->nice > _sq_pool.base_nice)
		setpriority(PRIO_PROCESS, (id_t)w->tid, _sq_pool.base_nice);
	if (w->sched_idle)
		sched_setscheduler(w->tid, SCHED_OTHER, &param);
	if (w->io_idle)
		_sq_set_io_idle(w->tid, false);
	int err = _sq_thread_create_here(attr, main, arg);
	if (w->nice > _sq_pool.base_nice)
		setpriority(PRIO_PROCESS, (id_t)w->tid, w->nice);
	if (w->sched_idle)
		sched_setscheduler(w->tid, SCHED_IDLE, &param);
	if (w->io_idle)
		_sq_set_io_idle(w->tid, true);
	return err;
}

void
_sq_pool_class_atfork_child(void)
{
	/* The spawner did not come along; its lock may have been held. */
	pthread_mutex_init(&_sq_spawner_lock, NULL);
	pthread_cond_init(&_sq_spawner_cond, NULL);
	_sq_spawner_request = NULL;
	_sq_spawner_running = false;
	_sq_nice_probe_once = 0;
}

/* ---- The calling thread's class ----------------------------------------- */

int
_sq_thread_root(void)
{
	struct sq_worker_s *w = _sq_self;
	return w != NULL ? w->root : SQ_ROOT_DEFAULT;
}

sq_qos_class_t
sq_qos_class_self(void)
{
	return _sq_root_qos(_sq_thread_root());
}
