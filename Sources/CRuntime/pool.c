/*
 * SwiftQueues — the worker pool: root queues, workers, local run queues,
 * stealing, parking and blocking compensation.
 *
 * - Four root queues (HIGH, DEFAULT, LOW, BACKGROUND), each a liburcu
 *   wfcqueue: any thread appends wait-free; workers take one job at a time
 *   under a small per-root spin lock (wfcqueue consumers must exclude each
 *   other).
 * - Each worker owns a ring of 256 jobs (Go's run queue): the owner appends
 *   without a read-modify-write, the owner and thieves take from the head
 *   with a CAS. A worker's submissions to the root it is running go to its
 *   own ring: hot in its cache, and stealable by idle workers.
 * - Each worker also has a one-entry next-job slot (Go's runnext): a queue
 *   its job made runnable, or a Swift task it handed on, runs there next,
 *   on the same thread, with no wake-up. One searcher guards the slots and
 *   takes a job whose owner has gone on with something long.
 * - A worker looks: its slot, its ring, then the root queues (by priority,
 *   with aging so LOW and BACKGROUND are never starved; every 61st look
 *   starts with the roots for fairness), then the other workers' rings,
 *   then it guards the others' slots; then it parks.
 * - Parking is a futex per worker; idle workers form a list, and a wake-up
 *   takes the one idle longest (see "Idle list"). A submission wakes
 *   a worker only when nobody is searching, and at most one idle worker spins
 *   before sleeping: a burst wakes one thread, which wakes the next only if
 *   it finds work to spare.
 * - Workers are started on demand up to the number of usable CPUs. When
 *   every worker is busy, work is waiting and some workers are blocked (not
 *   runnable in /proc), a monitor thread adds workers within milliseconds,
 *   up to SQ_MAX_THREADS; extra workers retire after 5 idle seconds.
 * - When the system refuses a thread (EAGAIN: RLIMIT_NPROC, memory), the
 *   pool goes on with the workers it has and tries again after a pause;
 *   it gives an idle worker back when the rest of the runtime needs a
 *   thread (_sq_thread_start). Only a pool that cannot start its first
 *   worker at all stops the process, with a message (see "Threads").
 *
 * The wake-up invariant (argued path by path in docs/ARCHITECTURE.md):
 * whenever a job is in a run queue, some worker is searching (counted in
 * `searching`, which includes workers woken or started as searchers), or
 * no worker is idle and every live worker will look again when its job
 * returns (the monitor adds workers for blocked ones). A worker leaves the
 * searcher count only through `_sq_worker_stop_searching` (it found a job:
 * if it was the last searcher it re-checks and wakes another) or through
 * `_sq_worker_park` (it found nothing: it re-checks after leaving, and
 * searches again if anything is there).
 *
 * Taking by class, room for a higher class and the classes' CPU
 * priorities are in pool_class.c; blocked workers and waiting that helps
 * in pool_block.c, the next-job slots and their guard in pool_slot.c, the
 * monitor
 * (blocking compensation, the safety net, retries) in pool_monitor.c;
 * pool_internal.h holds the structures and functions these files share.
 */
#include "pool_internal.h"

#include <sys/prctl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* libdispatch's own cap on Linux: its workqueue lets a root queue's pool
 * grow to DISPATCH_WORKQ_MAX_PTHREAD_COUNT (255) threads when its workers
 * block. 128 tasks blocked at once on 2 CPUs then still finish. */
#define SQ_DEFAULT_MAX_THREADS 255
/* An idle worker spins for work at most this long before parking; the
 * budget adapts between 0 and the maximum (see _sq_worker_park). */
#define SQ_SPIN_MAX_NS (64 * NSEC_PER_USEC)
#define SQ_SPIN_MIN_NS (4 * NSEC_PER_USEC)

/* A worker about to park yields first only within this long of its
 * wake-up (see _sq_worker_park). */
#define SQ_YIELD_WINDOW_NS (50 * NSEC_PER_USEC)
#define SQ_RETIRE_AFTER_NS (5 * NSEC_PER_SEC)
/* After the system refused a thread, no new worker is tried before a pause
 * that doubles from the minimum to the maximum with each refusal (and is
 * back to none after a success); the monitor alike. */
#define SQ_SPAWN_PAUSE_MIN_NS (1 * NSEC_PER_MSEC)
#define SQ_SPAWN_PAUSE_MAX_NS (128 * NSEC_PER_MSEC)
/* With no worker at all, a refused thread makes the submitter wait and try
 * again (libdispatch, in that case, sleeps and retries without end); the
 * process stops after this long. */
#define SQ_FIRST_WORKER_WAIT_NS (5 * NSEC_PER_SEC)

struct sq_pool_s _sq_pool;

static sq_once_t _sq_pool_once;

SQ_TLS struct sq_worker_s *_sq_self;
SQ_TLS int _sq_apply_depth;

static const char *const _sq_root_thread_names[SQ_ROOT_COUNT] = {
	"sq.interactive", "sq.high", "sq.default", "sq.low", "sq.background",
};

/* ---- Sizing ----------------------------------------------------------- */

/* CPUs allowed by the cgroup's CPU quota (v2, then v1), or 0 for none. */
static int
_sq_cgroup_cpus(void)
{
	char buf[128];
	long long quota = -1, period = 0;
	FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
	if (f) {
		if (fgets(buf, sizeof(buf), f) &&
				sscanf(buf, "%lld %lld", &quota, &period) != 2)
			quota = -1; /* "max 100000": no quota */
		fclose(f);
	} else {
		f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r");
		if (f) {
			if (fscanf(f, "%lld", &quota) != 1)
				quota = -1;
			fclose(f);
		}
		f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r");
		if (f) {
			if (fscanf(f, "%lld", &period) != 1)
				period = 0;
			fclose(f);
		}
	}
	if (quota <= 0 || period <= 0)
		return 0;
	return (int)((quota + period - 1) / period);
}

static int
_sq_count_usable_cpus(void)
{
	int cpus = 0;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		cpus = CPU_COUNT(&set);
	if (cpus <= 0)
		cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	int quota = _sq_cgroup_cpus();
	if (quota > 0 && quota < cpus)
		cpus = quota;
	return cpus > 0 ? cpus : 1;
}

int
_sq_usable_cpus(void)
{
	static int cpus; /* 0 until known; racing first calls agree */
	int n = __atomic_load_n(&cpus, __ATOMIC_RELAXED);
	if (SQ_UNLIKELY(n == 0)) {
		n = _sq_count_usable_cpus();
		__atomic_store_n(&cpus, n, __ATOMIC_RELAXED);
	}
	return n;
}

static int
_sq_env_int(const char *name, int fallback, int min, int max)
{
	const char *v = getenv(name);
	if (v == NULL || *v == '\0')
		return fallback;
	char *end;
	long n = strtol(v, &end, 10);
	if (*end != '\0' || n < min)
		return fallback;
	return n > max ? max : (int)n;
}

static void
_sq_pool_init_once(void *unused)
{
	for (int i = 0; i < 2 * SQ_ROOT_COUNT; i++)
		__cds_wfcq_init(&_sq_pool.roots[i].head, &_sq_pool.roots[i].tail);
	_sq_pool.width = _sq_env_int("SQ_WORKERS", _sq_usable_cpus(), 1,
			SQ_POOL_MAX_THREADS);
	int max = _sq_env_int("SQ_MAX_THREADS", SQ_DEFAULT_MAX_THREADS, 1,
			SQ_POOL_MAX_THREADS);
	_sq_pool.max_threads = max < _sq_pool.width ? _sq_pool.width : max;
	_sq_pool.net_enabled = _sq_env_int("SQ_MONITOR_NET", 1, 0, 1) != 0;
	_sq_pool.short_slice = _sq_env_int("SQ_SHORT_SLICE", 1, 0, 1) != 0;
	_sq_pool.background_idle = _sq_env_int("SQ_BACKGROUND_IDLE", 0, 0, 1)
			!= 0;
	_sq_pool.net_debug = _sq_env_int("SQ_DEBUG_NET", 0, 0, 1) != 0;
	_sq_pool.spin_ns = SQ_SPIN_MIN_NS;
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	_sq_pool.base_nice = errno == 0 ? nice : 0;
	pthread_attr_init(&_sq_pool.thread_attr);
	pthread_attr_setdetachstate(&_sq_pool.thread_attr,
			PTHREAD_CREATE_DETACHED);
	/* The monitor starts with the first worker: with room for one thread
	 * only, that one must be a worker. */
	_sq_watchdog_start();
}

void
_sq_pool_init(void)
{
	sq_once_f(&_sq_pool_once, NULL, _sq_pool_init_once);
}

int
_sq_pool_width(void)
{
	_sq_pool_init();
	return _sq_pool.width;
}

/* ---- Root queues ----------------------------------------------------- */

struct sq_job_s *
_sq_root_pop(int index)
{
	struct sq_root_rq_s *rq = &_sq_pool.roots[index];
	if (cds_wfcq_empty(&rq->head, &rq->tail))
		return NULL;
	struct cds_wfcq_node *n;
	unsigned attempts = 0;
	sq_spinlock_lock(&rq->lock);
	for (;;) {
		n = __cds_wfcq_dequeue_nonblocking(&rq->head, &rq->tail);
		if (n != CDS_WFCQ_WOULDBLOCK)
			break;
		/* A producer is between its exchange and its link store. */
		if (++attempts < 64)
			_sq_cpu_relax();
		else
			sched_yield();
	}
	sq_spinlock_unlock(&rq->lock);
	if (n != NULL)
		_sq_tsan_acquire(n);
	return (struct sq_job_s *)n;
}

/* Takes from the roots by class, with aging (no rings). */
static struct sq_job_s *
_sq_roots_pop(struct sq_worker_s *w, int *root)
{
	return _sq_take_by_class(NULL, _sq_take_stop(w), root);
}

bool
_sq_roots_empty(void)
{
	for (int i = 0; i < 2 * SQ_ROOT_COUNT; i++)
		if (!cds_wfcq_empty(&_sq_pool.roots[i].head,
				&_sq_pool.roots[i].tail))
			return false;
	return true;
}

/* Whether any work is in a run queue: a root queue, a ring, or (with
 * `slots`) a next-job slot. */
bool
_sq_pool_has_work_in(bool slots)
{
	if (!_sq_roots_empty())
		return true;
	int32_t n = __atomic_load_n(&_sq_pool.slots, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++) {
		struct sq_worker_s *w = &_sq_pool.workers[i];
		if (__atomic_load_n(&w->slot_state, __ATOMIC_ACQUIRE) ==
				SQ_SLOT_LIVE && (!_sq_ring_empty(&w->ring) ||
				(slots && __atomic_load_n(&w->next,
				__ATOMIC_SEQ_CST))))
			return true;
	}
	return false;
}

/* Whether work is visible that a looking worker must not park past: next-
 * job slots count only while no searcher guards them (a guard looks at
 * them on its own, see pool_slot.c). Seq-cst load of the
 * guard: a guard that leaves clears it, then looks at the slots itself, so
 * either we see it still there or it sees the job we saw. */
bool
_sq_pool_has_work(void)
{
	return _sq_pool_has_work_in(__atomic_load_n(&_sq_pool.guard,
			__ATOMIC_SEQ_CST) == NULL);
}

/* ---- Idle list, waking, spawning ------------------------------------- */

/*
 * Idle workers form a list in parking order. A wake-up takes the worker
 * that has been idle longest while the pool is at most its width, and the
 * most recent one while it has extra workers (left by blocking
 * compensation), so that the others stay idle until they retire.
 *
 * Why the longest idle: the worker that parked last is usually the one
 * that finished a burst's last job and woke the burst's submitter on its
 * own CPU. The kernel places it on that CPU again, where (just preempted
 * there, or having run little) it preempts the submitter before the
 * submitter has queued the rest of its burst; the burst then runs on two
 * CPUs with a migration and an extra wake-up. The longest idle one, like
 * a waiter on libdispatch's semaphore, runs when the submitter blocks.
 */
static void
_sq_idle_push(struct sq_worker_s *w)
{
	sq_spinlock_lock(&_sq_pool.idle_lock);
	w->prev_idle = NULL;
	w->next_idle = _sq_pool.idle;
	if (_sq_pool.idle)
		_sq_pool.idle->prev_idle = w;
	else
		_sq_pool.idle_oldest = w;
	_sq_pool.idle = w;
	w->on_idle_list = true;
	__atomic_add_fetch(&_sq_pool.nidle, 1, __ATOMIC_SEQ_CST);
	sq_spinlock_unlock(&_sq_pool.idle_lock);
}

/* Unlinks w; under the idle lock. */
static void
_sq_idle_unlink(struct sq_worker_s *w)
{
	if (w->prev_idle)
		w->prev_idle->next_idle = w->next_idle;
	else
		_sq_pool.idle = w->next_idle;
	if (w->next_idle)
		w->next_idle->prev_idle = w->prev_idle;
	else
		_sq_pool.idle_oldest = w->prev_idle;
	w->on_idle_list = false;
	__atomic_sub_fetch(&_sq_pool.nidle, 1, __ATOMIC_SEQ_CST);
}

struct sq_worker_s *
_sq_idle_pop(void)
{
	sq_spinlock_lock(&_sq_pool.idle_lock);
	struct sq_worker_s *w = __atomic_load_n(&_sq_pool.live,
			__ATOMIC_RELAXED) > _sq_pool.width ? _sq_pool.idle
			: _sq_pool.idle_oldest;
	if (w)
		_sq_idle_unlink(w);
	sq_spinlock_unlock(&_sq_pool.idle_lock);
	return w;
}

/* Takes w off the idle list if it is still there. */
static bool
_sq_idle_remove(struct sq_worker_s *w)
{
	bool removed = false;
	sq_spinlock_lock(&_sq_pool.idle_lock);
	if (w->on_idle_list) {
		_sq_idle_unlink(w);
		removed = true;
	}
	sq_spinlock_unlock(&_sq_pool.idle_lock);
	return removed;
}

static void *_sq_worker_main(void *arg);

/* Creates a detached thread with every asynchronous signal blocked, as all
 * the runtime's threads are (process-directed signals go to the program's
 * threads or to the signal watcher, never into a task); faults stay
 * deliverable, and SIGPROF as on libdispatch's threads (profilers sample
 * with it; Swift's crash handler pauses threads with it for backtraces).
 * The new thread inherits the mask, ours is restored: 0 or the error. */
int
_sq_thread_create(const pthread_attr_t *attr, void *(*main)(void *),
		void *arg)
{
	/* A thread inherits its creator's nice value, policy and I/O
	 * priority: a worker running lower work starts it at the program's
	 * (pool_class.c). (One running higher work hands its head start
	 * on: a worker started for that work gets a CPU sooner.) */
	struct sq_worker_s *w = _sq_self;
	if (SQ_UNLIKELY(w != NULL && _sq_worker_lowered(w)))
		return _sq_thread_create_at_base(w, attr, main, arg);
	return _sq_thread_create_here(attr, main, arg);
}

int
_sq_thread_create_here(const pthread_attr_t *attr, void *(*main)(void *),
		void *arg)
{
	sigset_t mask, old;
	sigfillset(&mask);
	static const int faults[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP,
		SIGABRT, SIGSYS, SIGPROF };
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigdelset(&mask, faults[i]);
	pthread_sigmask(SIG_SETMASK, &mask, &old);
	pthread_t thread;
	int err = pthread_create(&thread, attr, main, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* The system refused a thread: no new worker is tried for a pause that
 * doubles with each refusal in a row. */
static void
_sq_pool_spawn_refused(void)
{
	uint64_t pause = __atomic_load_n(&_sq_pool.spawn_pause,
			__ATOMIC_RELAXED);
	pause = pause == 0 ? SQ_SPAWN_PAUSE_MIN_NS : pause * 2;
	if (pause > SQ_SPAWN_PAUSE_MAX_NS)
		pause = SQ_SPAWN_PAUSE_MAX_NS;
	__atomic_store_n(&_sq_pool.spawn_pause, pause, __ATOMIC_RELAXED);
	__atomic_store_n(&_sq_pool.spawn_after, _sq_monotonic_ns() + pause,
			__ATOMIC_RELAXED);
}

/*
 * Starts a worker that begins as a searcher (the caller counted it in
 * `searching`). Returns 0; -1 without trying, at the thread cap or during
 * the pause after a refused thread (unless `force`); or pthread_create's
 * error. The pool goes on with the workers it has: a job that a new worker
 * was to take is run by one of them, by a later worker, or by one the
 * monitor adds (the wake-up invariant's second case).
 */
static int
_sq_pool_spawn_err(bool force)
{
	if (!force && __atomic_load_n(&_sq_pool.spawn_pause, __ATOMIC_RELAXED)
			&& _sq_monotonic_ns() < __atomic_load_n(
			&_sq_pool.spawn_after, __ATOMIC_RELAXED))
		return -1;
	struct sq_worker_s *w = NULL;
	sq_spinlock_lock(&_sq_pool.spawn_lock);
	if (__atomic_load_n(&_sq_pool.live, __ATOMIC_RELAXED) <
			_sq_pool.max_threads) {
		for (int i = 0; i < SQ_POOL_MAX_THREADS; i++) {
			if (_sq_pool.workers[i].slot_state == SQ_SLOT_FREE) {
				w = &_sq_pool.workers[i];
				if (i >= _sq_pool.slots)
					__atomic_store_n(&_sq_pool.slots, i + 1,
							__ATOMIC_RELEASE);
				break;
			}
		}
	}
	if (w) {
		w->searching = true;
		/* Atomic: the monitor may still look at the slot's previous
		 * worker's words (a slot is reused once its worker left). */
		__atomic_store_n(&w->parked, 0, __ATOMIC_RELAXED);
		w->leave = false;
		w->root = SQ_ROOT_DEFAULT;
		w->bound = 0;
		w->busy_root = SQ_ROOT_COUNT;
		/* Atomic: a thief may still look at the slot's previous
		 * worker's word (it skips a slot that is not LIVE). */
		__atomic_store_n(&w->blocked, 0, __ATOMIC_RELAXED);
		w->block_depth = w->scan_count = w->spawn_run = 0;
		__atomic_store_n(&w->slot_state, SQ_SLOT_LIVE, __ATOMIC_RELEASE);
		__atomic_add_fetch(&_sq_pool.live, 1, __ATOMIC_SEQ_CST);
	}
	sq_spinlock_unlock(&_sq_pool.spawn_lock);
	if (w == NULL)
		return -1;

	int err = _sq_thread_create(&_sq_pool.thread_attr, _sq_worker_main, w);
	if (err != 0) {
		sq_spinlock_lock(&_sq_pool.spawn_lock);
		__atomic_store_n(&w->slot_state, SQ_SLOT_FREE, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&_sq_pool.live, 1, __ATOMIC_SEQ_CST);
		sq_spinlock_unlock(&_sq_pool.spawn_lock);
		_sq_pool_spawn_refused();
		return err;
	}
	__atomic_add_fetch(&_sq_pool.spawned, 1, __ATOMIC_RELAXED);
	/* Only the monitor starts workers for blocked ones. */
	SQ_POOL_EVENT(SQ_TRACE_SPAWN, w, _sq_trace_role == SQ_ROLE_MONITOR);
	if (__atomic_load_n(&_sq_pool.spawn_pause, __ATOMIC_RELAXED))
		__atomic_store_n(&_sq_pool.spawn_pause, 0, __ATOMIC_RELAXED);
	_sq_monitor_ensure();
	return 0;
}

bool
_sq_pool_spawn(void)
{
	return _sq_pool_spawn_err(false) == 0;
}

/*
 * No worker exists and the system refused the first one: nothing else
 * would ever run the queued work, so the submitter waits here and tries
 * again after a pause that doubles up to SQ_SPAWN_PAUSE_MAX_NS (libdispatch
 * sleeps and retries without end in this case). After
 * SQ_FIRST_WORKER_WAIT_NS the process stops, saying why. The caller holds
 * the claim of a searcher (`searching` 1) for the worker it starts.
 */
static void
_sq_pool_wait_for_first_worker(int err)
{
	uint64_t start = _sq_monotonic_ns();
	uint64_t pause = SQ_SPAWN_PAUSE_MIN_NS;
	while (err == EAGAIN &&
			_sq_monotonic_ns() - start < SQ_FIRST_WORKER_WAIT_NS) {
		struct timespec ts = { (time_t)(pause / NSEC_PER_SEC),
			(long)(pause % NSEC_PER_SEC) };
		nanosleep(&ts, NULL);
		if (__atomic_load_n(&_sq_pool.live, __ATOMIC_SEQ_CST) > 0) {
			/* Someone else started one (it counts itself): leave
			 * the search to it, as a searcher giving up does. */
			__atomic_sub_fetch(&_sq_pool.searching, 1,
					__ATOMIC_SEQ_CST);
			if (_sq_pool_has_work())
				_sq_pool_notify();
			return;
		}
		err = _sq_pool_spawn_err(true);
		if (err == 0)
			return;
		if (err < 0)
			err = EAGAIN;
		if (pause < SQ_SPAWN_PAUSE_MAX_NS)
			pause *= 2;
	}
	struct rlimit rl;
	char limit[96] = "";
	if (err == EAGAIN && getrlimit(RLIMIT_NPROC, &rl) == 0 &&
			rl.rlim_cur != RLIM_INFINITY)
		snprintf(limit, sizeof(limit), " (this user's process and "
				"thread limit, RLIMIT_NPROC, is %llu)",
				(unsigned long long)rl.rlim_cur);
	_sq_client_crash("sq_async_f", "cannot start any worker thread: "
			"%s%s%s", strerror(err), limit, err == EAGAIN ?
			"; retried for 5 s" : "");
}

/* Wakes w, popped off the idle list, as a searcher. */
void
_sq_worker_wake(struct sq_worker_s *w)
{
	w->searching = true;
	__atomic_add_fetch(&_sq_pool.wakeups, 1, __ATOMIC_RELAXED);
	/* Recorded before the futex call, which would otherwise make the
	 * point keep w in a register of its own across it. */
	SQ_POOL_EVENT(SQ_TRACE_WAKE, w, 0);
	SQ_CHAOS_POINT();
	/* Release: the worker sees `searching` before it runs. */
	__atomic_store_n(&w->parked, 0, __ATOMIC_RELEASE);
	_sq_futex_wake(&w->parked, 1);
}

/* Wakes the slots' guard if it naps (pool_slot.c, "Guarding next-job
 * slots"): a job in a root queue or a ring must not wait for its nap. */
void
_sq_pool_wake_sleeper(void)
{
	/* Seq-cst, after the job's enqueue: the guard publishes itself as
	 * the sleeper, then looks at the roots and rings before it sleeps,
	 * so either we see it here or it sees our job. Whoever takes the
	 * sleeper word out (the guard itself when its nap ends) owns the
	 * wake-up. */
	if (__atomic_load_n(&_sq_pool.sleeper, __ATOMIC_SEQ_CST) == NULL)
		return;
	struct sq_worker_s *g = __atomic_exchange_n(&_sq_pool.sleeper, NULL,
			__ATOMIC_SEQ_CST);
	if (g == NULL)
		return;
	SQ_CHAOS_POINT();
	/* Release: pairs with the guard's acquire wait for this store. */
	__atomic_store_n(&g->guard_nap, 0, __ATOMIC_RELEASE);
	_sq_futex_wake(&g->guard_nap, 1);
}

/* Gets one more worker looking for work, unless one already is. */
void
_sq_pool_notify(void)
{
	_sq_pool_notify_root(SQ_ROOT_COUNT);
}

/* The same for a job of class `root` (SQ_ROOT_COUNT: unknown). */
void
_sq_pool_notify_root(int root)
{
	/* Seq-cst load after the job's (full-barrier) enqueue: a searcher
	 * that stops searching looks at the queues after its decrement, so
	 * either we see it counted or it sees our job. A counted searcher
	 * may be the slots' guard in a nap: it must look now. */
	if (__atomic_load_n(&_sq_pool.searching, __ATOMIC_SEQ_CST) != 0) {
		_sq_pool_wake_sleeper();
		return;
	}
	/* No worker may start it now: `width` others run work of its class
	 * or higher, and each looks again when its job ends (pool_class.c,
	 * "Taking within the width"). Seq-cst loads of the counts, after the
	 * enqueue: a worker that stops running counts itself out, then
	 * looks at the queues before it parks. */
	if (root < SQ_ROOT_COUNT && _sq_take_stop(NULL) <= root) {
		_sq_monitor_kick();
		return;
	}
	/* Saturated (the common case in a burst): nobody idle to wake and no
	 * room for a new worker. Seq-cst, after the enqueue: a worker that
	 * parks counts itself in `nidle` before its seq-cst look at the
	 * queues, so either we see it counted (and take the path below) or
	 * it sees our job. This skips the claim of `searching` and the idle
	 * lock, two writes to lines every worker uses. */
	bool room = false;
	if (__atomic_load_n(&_sq_pool.nidle, __ATOMIC_SEQ_CST) == 0 &&
			_sq_pool_running() >= _sq_pool.width &&
			!(room = _sq_pool_class_room(root))) {
		_sq_monitor_kick();
		return;
	}
	SQ_CHAOS_POINT();
	int32_t zero = 0;
	if (!__atomic_compare_exchange_n(&_sq_pool.searching, &zero, 1, false,
			__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return; /* someone else became the searcher */
	SQ_CHAOS_POINT();
	struct sq_worker_s *w = _sq_idle_pop();
	if (w) {
		_sq_worker_wake(w);
		return;
	}
	int32_t live = __atomic_load_n(&_sq_pool.live, __ATOMIC_SEQ_CST);
	if (live == 0 || _sq_pool_running() < _sq_pool.width || room) {
		int err = _sq_pool_spawn_err(live == 0);
		if (err == 0) {
			/* A worker for a higher class is not compensation. */
			if (live >= _sq_pool.width && !room)
				__atomic_add_fetch(&_sq_pool.compensated, 1,
						__ATOMIC_RELAXED);
			return;
		}
		/* No worker at all: nobody would ever look. (A monitor
		 * runs only once a worker has, and workers up to the
		 * width never retire or give their thread back.) */
		if (err > 0 && __atomic_load_n(&_sq_pool.live,
				__ATOMIC_SEQ_CST) == 0 && __atomic_load_n(
				&_sq_pool.monitor_state, __ATOMIC_ACQUIRE) !=
				SQ_MONITOR_RUNNING) {
			_sq_pool_wait_for_first_worker(err);
			return;
		}
	}
	/* No worker is idle: every live one is running a job and looks
	 * again when it returns (a worker on its way to the idle list
	 * re-checks the queues after pushing itself, see _sq_worker_park).
	 * A worker that could not be started is tried again later. */
	__atomic_sub_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
	/* Let the monitor judge whether the busy ones are blocked. */
	_sq_monitor_kick();
}

/* Queues a job on its root queue (no notification). */
static void
_sq_root_push(int r, struct sq_job_s *job)
{
	job->link.next = NULL;
	/* For ThreadSanitizer, which does not see liburcu's atomics: the
	 * taker's acquire (_sq_root_pop) pairs with this, after our write to
	 * the link (a job moved from a ring to a root queue was released by
	 * its first pusher, before that write). */
	_sq_tsan_release(job);
	/* A full barrier (an atomic exchange). */
	cds_wfcq_enqueue(&_sq_pool.roots[r].head, &_sq_pool.roots[r].tail,
			&job->link);
}

/* Moves the entries of w's ring (w is the caller) to their root queues,
 * oldest first, where every worker sees them. */
static void
_sq_ring_flush(struct sq_worker_s *w)
{
	uintptr_t entry;
	w->spawn_run = 0;
	while ((entry = _sq_ring_pop(&w->ring)) != 0) {
		int r;
		struct sq_job_s *job = _sq_entry_job(entry, &r);
		_sq_root_push(r, job);
	}
}

void
_sq_pool_push(int root, struct sq_job_s *job)
{
	_sq_pool_init();
	struct sq_worker_s *w = _sq_self;
	job->link.next = NULL;
	/* Read before the push (and the TSan release) publishes the job. */
	bool spawned = job->kind == SQ_JOB_CONT && (job->flags & SQ_CONT_SPAWN);
	_sq_tsan_release(job); /* after our last plain access to the job */
	/* A ring holds one class at a time ("Precedence", pool_class.c): a
	 * job of another class moves the ring's entries to their root queue
	 * first. Not to the root queue instead: a job waiting for its children
	 * runs them from its own ring (pool_block.c, "Waiting helps"), and
	 * with the thread cap reached nobody else may. */
	if (w != NULL && w->root == root) {
		if (!_sq_ring_empty(&w->ring) && w->ring_root != root)
			_sq_ring_flush(w);
		if (_sq_ring_empty(&w->ring))
			__atomic_store_n(&w->ring_root, (uint8_t)root,
					__ATOMIC_RELAXED);
		else if (w->ring_root != root)
			w = NULL; /* a thief holds the last entry: rare */
	} else {
		w = NULL;
	}
	if (w != NULL &&
			_sq_ring_push(&w->ring, (uintptr_t)job | (uintptr_t)root)) {
		w->spawn_run = spawned ? w->spawn_run + 1 : 0;
		/* Full fence: orders the ring's tail store before the load of
		 * `searching` in notify (pairs with the parking worker's
		 * decrement-then-look), and before the mask's load. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		_sq_ring_mask_set(root);
	} else {
		struct sq_root_rq_s *rq = &_sq_pool.roots[root];
		/* A full barrier (an atomic exchange), same pairing. */
		cds_wfcq_enqueue(&rq->head, &rq->tail, &job->link);
	}
	SQ_CHAOS_POINT();
	_sq_pool_notify_root(root);
}

/* A job from an overcommit root queue (sq_get_global_queue): it gets a
 * looker of its own, whatever else is searching, an idle worker or a new
 * one beyond the width (up to the cap), as libdispatch's overcommit queues
 * start a thread when none is idle. The job goes to its class's overcommit
 * run queue, never a ring or a slot (the worker that queued it may go on
 * running), where a worker takes it whatever the others run (pool_class.c,
 * "Taking within the width"). A new worker beyond the width retires after
 * idling, like any extra one. */
void
_sq_pool_push_overcommit(int root, struct sq_job_s *job)
{
	_sq_pool_init();
	_sq_tsan_release(job); /* after our last plain write to the job */
	_sq_root_push(SQ_ROOT_COUNT + root, job);
	SQ_CHAOS_POINT();
	/* Counted as a searcher first, as _sq_pool_notify_root counts the
	 * worker it wakes or starts (seq-cst, after the enqueue). */
	__atomic_add_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
	struct sq_worker_s *w = _sq_idle_pop();
	if (w != NULL) {
		_sq_worker_wake(w);
		return;
	}
	if (_sq_pool_spawn_err(false) == 0)
		return;
	/* No thread: the ordinary path, which leaves the job to a worker
	 * that looks when its own job ends, and to the monitor. */
	__atomic_sub_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
	_sq_pool_notify();
}

/* ---- Workers ------------------------------------------------------------ */

/* A searching worker found work: if it was the last searcher and more
 * work is waiting, get another worker looking. (Submitters that saw it
 * counted woke nobody; the seq-cst decrement before the look means that
 * either they saw the count drop to 0 and notified, or we see their job.) */
static void
_sq_worker_stop_searching(struct sq_worker_s *w)
{
	SQ_CHAOS_POINT();
	w->searching = false;
	if (__atomic_sub_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST) == 0) {
		SQ_CHAOS_POINT();
		if (_sq_pool_has_takeable(NULL))
			_sq_pool_notify();
	}
}

/* w counts itself as a searcher again: it stopped searching, then saw
 * work that a submitter may have left to it. */
static void
_sq_worker_search_again(struct sq_worker_s *w)
{
	w->searching = true;
	__atomic_add_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
}

/* w stops searching without having found work. Returns true if work is
 * visible after that: w is then a searcher again and must look. */
static bool
_sq_worker_give_up_search(struct sq_worker_s *w)
{
	SQ_CHAOS_POINT(); /* still counted: submitters skip the wake-up */
	w->searching = false;
	__atomic_sub_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
	SQ_CHAOS_POINT();
	/* Seq-cst: after the decrement. A submitter that saw us counted
	 * (and so woke nobody) enqueued before that load: we see its job. */
	if (!_sq_pool_has_takeable(w))
		return false;
	_sq_worker_search_again(w);
	return true;
}

/* A job from the worker's ring, a blocked worker's slot or ring, the root
 * queues or another worker's ring. */
static struct sq_job_s *
_sq_find_queued_work(struct sq_worker_s *w, int *root)
{
	struct sq_job_s *job;
	if (++w->tick % 61 == 0 && (job = _sq_roots_pop(w, root)))
		return job;
	int stop = _sq_take_stop(w); /* "Taking within the width" */
	/* Our own ring first, unless higher work waits elsewhere
	 * ("Precedence", pool_class.c). */
	if (!_sq_ring_empty(&w->ring)) {
		int own = w->ring_root;
		if (own < stop && _sq_best_waiting(own) == own) {
			/* Aging's turns (one look in 16 at most). */
			if (w->tick % 16 == 15 &&
					(job = _sq_take_aged(w, stop, own, root)))
				return job;
			uintptr_t entry = _sq_ring_take_own(w);
			if (entry)
				return _sq_entry_job(entry, root);
		} else if ((job = _sq_take_by_class(w, stop, root))) {
			return job;
		}
	}
	/* What waits behind a blocked thread does not wait for it: the run
	 * queue belongs to the worker slot, not to its thread (Go's P). Its
	 * next-job slot goes before new work (one job: the hand-off it made
	 * last, often a queue it woke up, which callers wait for); its ring
	 * after the roots, before other workers' rings. Not the ring first:
	 * it may hold an endless supply of long jobs (a test runner's tests,
	 * each of which sleeps, all queued from one worker), and a timer's
	 * handler queued on a root waited behind them (Swift's timer tests
	 * with SwiftQueues as the global executor: no fire in 1 s, with the
	 * ring taken first even one look in 8). */
	bool blocked = __atomic_load_n(&_sq_pool.nblocked, __ATOMIC_RELAXED)
			!= 0;
	if (blocked && (job = _sq_take_blocked(w, root, false)))
		return job;
	if ((job = _sq_take_by_class(w, stop, root)))
		return job;
	if (blocked && (job = _sq_take_blocked(w, root, true)))
		return job;
	return _sq_steal_above(w, stop, root);
}

/* The next job for w; `*handoff` tells whether it came from w's own slot. */
static struct sq_job_s *
_sq_find_work(struct sq_worker_s *w, int *root, bool *handoff)
{
	struct sq_job_s *job;
	/* Every 16th look, a job that has sat in another worker's slot
	 * while its owner ran on (pool_slot.c, "Busy workers' looks"):
	 * nobody may be searching, as while every worker runs hand-offs. */
	if ((++w->looks & 15) == 0 && (job = _sq_next_scan(w, root))) {
		*handoff = false;
		return job;
	}
	/* The job our last job handed on first (pool_slot.c), unless it is
	 * of a lower class than work waiting elsewhere: then it goes to the
	 * normal path, where the class order applies ("Precedence",
	 * pool_class.c). */
	uintptr_t slot = __atomic_load_n(&w->next, __ATOMIC_RELAXED);
	if (slot != 0) {
		int r = (int)(slot & SQ_RING_ROOT_MASK);
		if (r != 0 && _sq_best_waiting(r) < r) {
			_sq_pool_flush_next();
			w->next_streak = 0;
		}
	}
	if (w->next_streak < SQ_NEXT_STREAK && (job = _sq_next_take(w, root))) {
		w->next_streak++;
		*handoff = true;
		return job;
	}
	/* Past a streak, other queued work goes first, and the slot's job
	 * moves to the ring, where any worker may take it while we run that
	 * work. With nothing else queued, the chain goes on. */
	bool full = w->next_streak != 0 &&
			__atomic_load_n(&w->next, __ATOMIC_RELAXED) != 0;
	w->next_streak = 0;
	*handoff = false;
	if ((job = _sq_find_queued_work(w, root))) {
		if (full)
			_sq_pool_flush_next();
		return job;
	}
	if ((job = _sq_next_take(w, root))) {
		w->next_streak = 1;
		*handoff = true;
		return job;
	}
	/* Last, the others' slots, as their guard. */
	return _sq_next_guard(w, root);
}

/* ---- Bound workers -------------------------------------------------------
 *
 * In a process that may not lower a thread's nice value again, a worker
 * that ran work of a class below DEFAULT stays at that class's value
 * (`bound`, pool_class.c). It takes only what it may run: its next-job
 * slot (which gets no job of a higher class than the one it runs), its
 * ring, and the root queues and rings of its classes. It never searches
 * or parks, so wake-ups, which go to searchers and idle workers, never go
 * to a thread that may not run the work. When none of its work is left,
 * or higher work waits (which it may not run), it gives its thread back
 * the way an idle extra worker retires, after moving its queued entries
 * to the root queues; a worker at the program's value takes its place
 * when work needs one.
 */

static struct sq_job_s *
_sq_find_bound_work(struct sq_worker_s *w, int *root, bool *handoff)
{
	*handoff = false;
	if (_sq_worker_bound_should_leave(w))
		return NULL;
	struct sq_job_s *job = _sq_next_take(w, root);
	if (job != NULL) {
		if (*root >= w->bound) {
			*handoff = true;
			return job;
		}
		/* Not its class (it cannot be, see above): to the roots. */
		_sq_root_push(*root, job);
	}
	return _sq_take_by_class(w, _sq_take_stop(w), root);
}

/* Gives a bound worker's thread back. Returns false if it must stay (the
 * pool's last worker, with no thread to start in its place): it is then
 * an ordinary worker at its lower CPU priority. */
static bool
_sq_worker_leave_bound(struct sq_worker_s *w)
{
	_sq_worker_count_class(w, SQ_ROOT_COUNT);
	uintptr_t e = __atomic_exchange_n(&w->next, 0, __ATOMIC_ACQ_REL);
	if (e != 0) {
		int r;
		struct sq_job_s *job = _sq_entry_job(e, &r);
		_sq_root_push(r, job);
	}
	_sq_ring_flush(w);
	__atomic_sub_fetch(&_sq_pool.live, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&_sq_pool.live, __ATOMIC_SEQ_CST) == 0) {
		/* The last worker: one in its place first (its slot counts
		 * against the cap no more). A new worker starts as a
		 * searcher: counted here, as _sq_pool_notify_root counts the
		 * one it starts. */
		__atomic_add_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
		if (_sq_pool_spawn_err(true) != 0) {
			__atomic_sub_fetch(&_sq_pool.searching, 1,
					__ATOMIC_SEQ_CST);
			__atomic_add_fetch(&_sq_pool.live, 1, __ATOMIC_SEQ_CST);
			w->bound = 0;
			return false;
		}
	}
	SQ_POOL_EVENT(SQ_TRACE_PARK, w, 0);
	/* Seq-cst, after leaving `live`: a submitter that saw us counted may
	 * have woken nobody; we see its job and pass it on. */
	if (_sq_pool_has_takeable(NULL))
		_sq_pool_notify();
	return true;
}

/* The constant name (a root queue's) this thread was last given by
 * _sq_worker_set_fixed_name (while set, the thread's name), or NULL. */
static SQ_TLS const char *_sq_worker_fixed_name;

/* Names the thread after the queue it runs (first 15 characters); the
 * system call is made only when the name changes. Compared by content: a
 * new queue's label may reuse a freed label's address. */
static void
_sq_worker_set_name(struct sq_worker_s *w, const char *label)
{
	if (strncmp(w->name, label, sizeof(w->name) - 1) == 0)
		return;
	_sq_worker_fixed_name = NULL;
	snprintf(w->name, sizeof(w->name), "%s", label);
	pthread_setname_np(pthread_self(), w->name);
}

/* The same for a name that never changes (a string constant): the pointer
 * identifies the text, so a worker serving one root queue job after job
 * compares one pointer per job, not the name. */
static inline void
_sq_worker_set_fixed_name(struct sq_worker_s *w, const char *name)
{
	if (name == _sq_worker_fixed_name)
		return;
	_sq_worker_set_name(w, name);
	_sq_worker_fixed_name = name;
}

static void
_sq_worker_run(struct sq_worker_s *w, struct sq_job_s *job, int root,
		bool handoff)
{
	__atomic_store_n(&w->jobs, w->jobs + 1, __ATOMIC_RELAXED);
	_sq_tsan_acquire(job);

	/* Counted before the priority system calls: other workers' looks
	 * ("Taking within the width") see it running at once. */
	_sq_worker_count_class(w, root);
	_sq_worker_set_class_nice(w, root);
	w->root = root;
	/* Entries pushed to the ring from here on are this job's (and a
	 * waiting job helps with them, _sq_pool_help). */
	w->job_mark = w->ring.tail;

	/* A hand-off keeps the thread's name: renaming is a system call
	 * (0.3-0.5 us here), more than a whole hop between two queues. */
	if (handoff) {
		__atomic_store_n(&w->handoffs, w->handoffs + 1,
				__ATOMIC_RELAXED);
		_sq_job_run(job);
		return;
	}
	struct sq_queue_s *q;
	if (job->kind == SQ_JOB_QUEUE)
		q = caa_container_of(job, struct sq_queue_s, job);
	else
		q = ((struct sq_cont_s *)job)->queue;
	if (_sq_queue_is_root(q))
		_sq_worker_set_fixed_name(w,
				_sq_root_thread_names[q->root_index]);
	else
		_sq_worker_set_name(w, _sq_object_label(q));

	_sq_job_run(job);
}

/* Work came soon after a worker went idle: spin longer next time. */
static void
_sq_pool_spin_grow(void)
{
	_sq_spin_budget_grow(&_sq_pool.spin_ns, SQ_SPIN_MIN_NS, SQ_SPIN_MAX_NS);
}

/*
 * Called when w found no work. Returns true when w must look again, and
 * then w is always a searcher (counted in `searching`); false when w has
 * retired (it left `live` and the idle list).
 */
static bool
_sq_worker_park(struct sq_worker_s *w)
{
	if (w->searching && _sq_worker_give_up_search(w))
		return true;
	/* Work waits that w may not take: if a worker that holds it back
	 * sleeps where only the monitor would see it, it no longer counts,
	 * and w takes the work now (pool_monitor.c). The counts first. */
	if (_sq_take_stop(w) < SQ_ROOT_COUNT && _sq_pool_has_work_in(true) &&
			!_sq_pool_has_takeable(w) &&
			_sq_pool_mark_sleeping_runners(w) &&
			_sq_pool_has_takeable(w)) {
		if (!w->searching)
			_sq_worker_search_again(w);
		return true;
	}

	/* At most one idle worker spins, counted as a searcher so that
	 * submissions do not wake anyone else meanwhile. The spin budget
	 * adapts: it doubles when a spin finds work or a parked worker is
	 * woken soon after parking (a spin would have caught that work), and
	 * halves, down to no spin at all, when a spin finds nothing. Work
	 * arriving every millisecond or so thus costs no spinning, while
	 * back-to-back hand-offs avoid the futex round trip. */
	uint32_t budget = __atomic_load_n(&_sq_pool.spin_ns, __ATOMIC_RELAXED);
	int32_t zero = 0;
	if (budget != 0 && __atomic_compare_exchange_n(&_sq_pool.spinning,
			&zero, 1, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
		if (!w->searching)
			_sq_worker_search_again(w);
		SQ_CHAOS_POINT();
		bool found = false;
		uint64_t start = _sq_monotonic_ns();
		do {
			if (_sq_pool_has_takeable(w)) {
				found = true;
				break;
			}
			for (int k = 0; k < 16; k++)
				_sq_cpu_relax();
		} while (_sq_monotonic_ns() - start < budget);
		__atomic_store_n(&_sq_pool.spinning, 0, __ATOMIC_SEQ_CST);
		if (found) {
			_sq_pool_spin_grow();
			return true; /* still a searcher */
		}
		_sq_spin_budget_shrink(&_sq_pool.spin_ns, budget,
				SQ_SPIN_MIN_NS);
	}
	/* Not spinning, or the spin found nothing: leave the searchers. */
	if (w->searching && _sq_worker_give_up_search(w))
		return true;

	/* Before sleeping, let a thread this worker preempted run first (a
	 * submitter it was woken by, often on the same CPU): a job it submits
	 * meanwhile is seen by the look after the push below, and costs no
	 * futex round trip. Only shortly after a wake-up: a worker that has
	 * run for longer preempted nobody still submitting, and a yield to
	 * whatever else is runnable here would cost two context switches. */
	if (_sq_monotonic_ns() - w->woken_at < SQ_YIELD_WINDOW_NS)
		sched_yield();
	SQ_CHAOS_POINT();
	/* A lower class's values go before the wait (2.6 ms median from wake
	 * to job behind a background batch otherwise); a higher class's stay:
	 * woken for it again, the worker preempts at once (PRIORITIES.md). */
	if (_sq_worker_lowered(w))
		_sq_worker_set_class_nice(w, SQ_ROOT_DEFAULT);
	/* Before the idle list: a record (the first of a trace takes a lock
	 * and maps a ring) is not time spent counted as idle. */
	SQ_POOL_EVENT(SQ_TRACE_PARK, w, 0);
	w->parked_at = _sq_monotonic_ns();
	/* Seq-cst: the monitor marks a worker it sees asleep, then looks at
	 * `parked`; we store `parked`, then look at the mark (below), so a
	 * mark that lands on a parking worker is taken off by one of us. */
	__atomic_store_n(&w->parked, 1, __ATOMIC_SEQ_CST);
	_sq_idle_push(w);
	if (SQ_UNLIKELY(__atomic_load_n(&w->blocked, __ATOMIC_SEQ_CST) &
			SQ_BLOCKED_SEEN))
		_sq_worker_unmark_blocked(w, SQ_BLOCKED_SEEN);
	SQ_CHAOS_POINT();
	/* Pairs with the submitter's enqueue-then-notify: either its
	 * idle_pop (after our push, by the idle lock) finds us, or our look
	 * here (after the push and this fence) sees its job. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* After the fence, the last job's writes are ordered before this
	 * look at the main runner's flag (main_queue.c). */
	_sq_main_runner_job_done();
	if (_sq_pool_has_takeable(w)) {
		if ((SQ_CHAOS_POINT(), _sq_idle_remove(w))) {
			__atomic_store_n(&w->parked, 0, __ATOMIC_RELAXED);
			_sq_worker_search_again(w);
			return true;
		}
	} else if (_sq_pool_has_work_in(true)) {
		/* Work waits that no idle worker may take: it is the running
		 * workers' (pool_class.c, "Taking within the width"). The
		 * monitor watches them, so that one that blocks where only
		 * it can see makes room; its submitter may have found us
		 * searching and kicked nobody. */
		_sq_monitor_kick();
	}
	/* (If the removal failed, a waker popped us and counted us as a
	 * searcher: the wait below returns at once.) */

	for (;;) {
		int32_t live = __atomic_load_n(&_sq_pool.live, __ATOMIC_RELAXED);
		/* An extra worker wakes to retire; while the pool runs
		 * without its monitor (the system refused it a thread), an
		 * idle worker wakes now and then to start it. */
		bool no_monitor = __atomic_load_n(&_sq_pool.monitor_state,
				__ATOMIC_RELAXED) != SQ_MONITOR_RUNNING;
		uint64_t wake_at = live > _sq_pool.width ? w->parked_at +
				SQ_RETIRE_AFTER_NS : UINT64_MAX;
		if (no_monitor && _sq_monotonic_ns() + SQ_MONITOR_RETRY_NS <
				wake_at)
			wake_at = _sq_monotonic_ns() + SQ_MONITOR_RETRY_NS;
		sq_time_t deadline = wake_at == UINT64_MAX ? SQ_TIME_FOREVER
				: (sq_time_t)wake_at;
		int r = 0;
		/* Acquire: pairs with the waker's release (w->searching). */
		while (__atomic_load_n(&w->parked, __ATOMIC_ACQUIRE) == 1 &&
				r != ETIMEDOUT)
			r = _sq_futex_wait_until(&w->parked, 1, deadline);
		if (__atomic_load_n(&w->parked, __ATOMIC_ACQUIRE) == 0 &&
				__atomic_load_n(&w->leave, __ATOMIC_ACQUIRE)) {
			/* Asked to give the thread back (_sq_pool_give_back
			 * took us off the idle list). As a retiring worker
			 * does: leave `live`, but never the last one (another
			 * give-back or a retirement may have raced this one),
			 * then pass on any work we see, since a submitter
			 * meanwhile may have found nobody. */
			__atomic_store_n(&w->leave, false, __ATOMIC_RELAXED);
			int32_t n = __atomic_load_n(&_sq_pool.live,
					__ATOMIC_RELAXED);
			while (n > 1 && !__atomic_compare_exchange_n(
					&_sq_pool.live, &n, n - 1, false,
					__ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			}
			if (n <= 1) {
				/* The pool's last worker stays: it looks for
				 * work as a searcher and parks again. */
				_sq_worker_search_again(w);
				return true;
			}
			SQ_CHAOS_POINT();
			if (_sq_pool_has_takeable(NULL))
				_sq_pool_notify();
			return false;
		}
		if (__atomic_load_n(&w->parked, __ATOMIC_ACQUIRE) == 0) {
			/* Woken: the waker made us a searcher. */
			w->woken_at = _sq_monotonic_ns();
			if (w->woken_at - w->parked_at < SQ_SPIN_MAX_NS)
				_sq_pool_spin_grow();
			return true;
		}
		if (no_monitor)
			_sq_monitor_ensure();
		/* Idle for a while: retire if we are an extra worker and
		 * nobody is waking us right now. */
		live = __atomic_load_n(&_sq_pool.live, __ATOMIC_RELAXED);
		if (live <= _sq_pool.width || _sq_monotonic_ns() - w->parked_at <
				SQ_RETIRE_AFTER_NS)
			continue;
		if (!_sq_idle_remove(w))
			continue; /* being woken: wait for it */
		SQ_CHAOS_POINT();
		/* Off the idle list: a submitter meanwhile may have found
		 * nobody to wake. Leave only if `live` still says we are an
		 * extra worker, and then pass on any work we can see. */
		if (__atomic_compare_exchange_n(&_sq_pool.live, &live,
				live - 1, false, __ATOMIC_SEQ_CST,
				__ATOMIC_RELAXED)) {
			if (_sq_pool_has_takeable(NULL))
				_sq_pool_notify();
			return false;
		}
		/* `live` changed: look for work as a searcher, then park
		 * again through the checks above. */
		__atomic_store_n(&w->parked, 0, __ATOMIC_RELAXED);
		_sq_worker_search_again(w);
		return true;
	}
}

static void *
_sq_worker_main(void *arg)
{
	struct sq_worker_s *w = arg;
	_sq_self = w;
	_sq_lock_sleep_flag = &w->lock_sleep;
	_sq_trace_set_role(SQ_ROLE_WORKER, (int)(w - _sq_pool.workers));
	/* Relaxed atomic: the monitor reads it for any slot it looks at. */
	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELAXED);
	/* A worker started by a niced one inherits its nice value. */
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)w->tid);
	w->nice = errno == 0 ? nice : _sq_pool.base_nice;
	/* And its scheduling policy. */
	w->sched_idle = sched_getscheduler(0) == SCHED_IDLE;
	w->io_idle = _sq_thread_io_idle();
	w->short_slice = _sq_thread_short_slice();
	w->name[0] = '\0';
	_sq_worker_set_name(w, "sq.worker");
	/* The precise timers' runner sleeps until just before a deadline
	 * (event.c, "Precise wake-ups"): no 50 us of default timer slack. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

	for (;;) {
		int root = SQ_ROOT_DEFAULT;
		bool handoff;
		struct sq_job_s *job;
		if (SQ_UNLIKELY(w->bound != 0)) {
			job = _sq_find_bound_work(w, &root, &handoff);
			if (job == NULL && _sq_worker_leave_bound(w))
				break;
			if (job == NULL)
				continue; /* unbound now: an ordinary worker */
		} else {
			job = _sq_find_work(w, &root, &handoff);
		}
		if (job) {
			SQ_CHAOS_POINT();
			if (w->searching)
				_sq_worker_stop_searching(w);
			_sq_worker_run(w, job, root, handoff);
			/* The job that the monitor saw blocked has ended. */
			if (SQ_UNLIKELY(__atomic_load_n(&w->blocked,
					__ATOMIC_RELAXED) & SQ_BLOCKED_SEEN))
				_sq_worker_unmark_blocked(w, SQ_BLOCKED_SEEN);
			/* The job may have made true what the main thread
			 * waits for in sq_main_queue_run_until. */
			_sq_main_runner_job_done();
			_sq_worker_before_look(w);
			continue;
		}
		_sq_worker_count_class(w, SQ_ROOT_COUNT);
		if (!_sq_worker_park(w))
			break;
	}

	/* Retired: `live` was decremented by the park loop. */
	_sq_self = NULL;
	_sq_lock_sleep_flag = NULL; /* before the slot can be reused */
	sq_spinlock_lock(&_sq_pool.spawn_lock);
	__atomic_store_n(&w->slot_state, SQ_SLOT_FREE, __ATOMIC_RELEASE);
	sq_spinlock_unlock(&_sq_pool.spawn_lock);
	return NULL;
}

/* ---- Threads ------------------------------------------------------------
 *
 * The rest of the runtime needs threads of its own: the event loop's
 * manager, the signal watcher, the I/O threads. When the system refuses
 * one (EAGAIN: the user's RLIMIT_NPROC, or memory for its stack), the
 * pool gives back one idle worker, if it has more than one, so that they
 * get theirs: a pool of fewer workers still runs everything, while a
 * missing manager stops every timer and source. The pool then tries to
 * grow again after its pause, as after any refused thread.
 */

/* Asks one idle worker to leave, if the pool has more than one worker.
 * Returns whether one was asked. */
static bool
_sq_pool_give_back(void)
{
	if (__atomic_load_n(&_sq_pool.live, __ATOMIC_SEQ_CST) <= 1)
		return false;
	sq_spinlock_lock(&_sq_pool.idle_lock);
	struct sq_worker_s *w = __atomic_load_n(&_sq_pool.live,
			__ATOMIC_RELAXED) > 1 ? _sq_pool.idle : NULL;
	if (w)
		_sq_idle_unlink(w);
	sq_spinlock_unlock(&_sq_pool.idle_lock);
	if (w == NULL)
		return false;
	/* Hold new workers off for a moment: the thread is for our caller. */
	_sq_pool_spawn_refused();
	/* Release: the worker reads `leave` after its acquire of `parked`. */
	__atomic_store_n(&w->leave, true, __ATOMIC_RELAXED);
	__atomic_store_n(&w->parked, 0, __ATOMIC_RELEASE);
	_sq_futex_wake(&w->parked, 1);
	return true;
}

int
_sq_thread_start(void *(*main)(void *), void *arg, size_t stack_size)
{
	_sq_pool_init();
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (stack_size)
		pthread_attr_setstacksize(&attr, stack_size);
	int err = _sq_thread_create(&attr, main, arg);
	if (err == EAGAIN && _sq_pool_give_back()) {
		/* The worker's thread is gone a moment after it returns:
		 * try for up to 50 ms. */
		for (int i = 0; i < 50 && err == EAGAIN; i++) {
			struct timespec ms = { 0, (long)NSEC_PER_MSEC };
			nanosleep(&ms, NULL);
			err = _sq_thread_create(&attr, main, arg);
		}
	}
	pthread_attr_destroy(&attr);
	return err;
}

void
_sq_pool_retry_later(bool (*retry)(void))
{
	_sq_pool_init();
	bool listed = false;
	for (int i = 0; i < SQ_RETRY_SLOTS && !listed; i++)
		listed = __atomic_load_n(&_sq_pool.retry[i], __ATOMIC_ACQUIRE)
				== retry;
	for (int i = 0; i < SQ_RETRY_SLOTS && !listed; i++) {
		bool (*none)(void) = NULL;
		listed = __atomic_compare_exchange_n(&_sq_pool.retry[i], &none,
				retry, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	}
	if (!listed)
		_sq_client_crash("_sq_pool_retry_later", "too many kinds of "
				"retries");
	/* Wake the monitor, starting it if need be. The store above comes
	 * before the kick's seq-cst exchange: a monitor going to its deep
	 * sleep either sees the kick or, in its last look, the function. */
	_sq_monitor_ensure();
	_sq_monitor_kick();
}

/* ---- Statistics --------------------------------------------------------- */

void
sq_pool_stats(sq_pool_stats_t *stats)
{
	_sq_pool_init();
	stats->width = (uint32_t)_sq_pool.width;
	stats->max_threads = (uint32_t)_sq_pool.max_threads;
	stats->live = (uint32_t)__atomic_load_n(&_sq_pool.live,
			__ATOMIC_RELAXED);
	stats->idle = (uint32_t)__atomic_load_n(&_sq_pool.nidle,
			__ATOMIC_RELAXED);
	stats->searching = (uint32_t)__atomic_load_n(&_sq_pool.searching,
			__ATOMIC_RELAXED);
	stats->jobs = _sq_pool_jobs_total();
	stats->wakeups = __atomic_load_n(&_sq_pool.wakeups, __ATOMIC_RELAXED);
	stats->spawned = __atomic_load_n(&_sq_pool.spawned, __ATOMIC_RELAXED);
	stats->compensated = __atomic_load_n(&_sq_pool.compensated,
			__ATOMIC_RELAXED);
	stats->net_firings = __atomic_load_n(&_sq_pool.net_firings,
			__ATOMIC_RELAXED);
	stats->monitor_running = __atomic_load_n(&_sq_pool.monitor_running,
			__ATOMIC_ACQUIRE);
	stats->net_enabled = _sq_pool.net_enabled;
}

/* ---- Introspection (introspect.c, watchdog.c) -------------------------- */

size_t
_sq_pool_root_queued(int index, size_t limit)
{
	struct sq_root_rq_s *rq = &_sq_pool.roots[index];
	size_t n = 0;
	/* Under the lock no job is taken, so none is freed while we follow
	 * the links; a job being appended shows as the end (NULL link). */
	sq_spinlock_lock(&rq->lock);
	struct cds_wfcq_node *node = __atomic_load_n(&rq->head.node.next,
			__ATOMIC_ACQUIRE);
	while (node != NULL && n < limit) {
		n++;
		node = __atomic_load_n(&node->next, __ATOMIC_ACQUIRE);
	}
	sq_spinlock_unlock(&rq->lock);
	return n;
}

size_t
_sq_pool_local_queued(void)
{
	size_t n = 0;
	int32_t slots = __atomic_load_n(&_sq_pool.slots, __ATOMIC_ACQUIRE);
	for (int i = 0; i < slots; i++) {
		struct sq_worker_s *w = &_sq_pool.workers[i];
		if (__atomic_load_n(&w->slot_state, __ATOMIC_ACQUIRE) !=
				SQ_SLOT_LIVE)
			continue;
		/* Racy: a thief may move the head past the tail we read. */
		int32_t ring = (int32_t)(__atomic_load_n(&w->ring.tail,
				__ATOMIC_RELAXED) - __atomic_load_n(&w->ring.head,
				__ATOMIC_RELAXED));
		if (ring > 0)
			n += (size_t)ring;
		n += __atomic_load_n(&w->next, __ATOMIC_RELAXED) != 0;
	}
	return n;
}

void
_sq_debug_pool_handoffs(uint64_t *handoffs, uint64_t *guard_takes,
		uint64_t *guard_naps)
{
	uint64_t h = 0, t = 0, n = 0;
	int32_t slots = __atomic_load_n(&_sq_pool.slots, __ATOMIC_ACQUIRE);
	/* Plain reads of counters each worker writes alone: a debugging
	 * figure, possibly a little stale. */
	for (int i = 0; i < slots; i++) {
		struct sq_worker_s *w = &_sq_pool.workers[i];
		h += __atomic_load_n(&w->handoffs, __ATOMIC_RELAXED);
		t += __atomic_load_n(&w->slot_takes, __ATOMIC_RELAXED);
		n += __atomic_load_n(&w->guard_naps, __ATOMIC_RELAXED);
	}
	*handoffs = h;
	*guard_takes = t;
	*guard_naps = n;
}

/* ---- Chaos builds ------------------------------------------------------ */

#ifdef SQ_CHAOS
void
_sq_chaos_point(void)
{
	static SQ_TLS uint64_t state;
	if (state == 0)
		state = ((uint64_t)gettid() << 32) ^ _sq_monotonic_ns() ^ 1;
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	uint32_t r = (uint32_t)(state % 64);
	if (r < 6) {
		sched_yield();
	} else if (r < 12) {
		for (uint32_t i = (uint32_t)(state >> 40) % 512; i > 0; i--)
			_sq_cpu_relax();
	} else if (r == 12) {
		struct timespec ts = { 0, (long)((state >> 20) % 50000) };
		nanosleep(&ts, NULL);
	}
}
#endif

/* ---- fork ------------------------------------------------------------------ */

/* fork() child (fork.c): no worker or monitor thread exists here. The pool
 * goes back to "never started"; jobs that were queued in the parent are
 * dropped (they are the parent's to run). The next submission starts it. */
void
_sq_pool_atfork_child(void)
{
	memset(&_sq_pool, 0, sizeof(_sq_pool));
	_sq_pool_class_atfork_child();
	_sq_pool_once = 0;
	_sq_self = NULL;
	_sq_lock_sleep_flag = NULL;
	_sq_apply_depth = 0;
}
