/*
 * SwiftQueues — the worker pool's monitor: blocking compensation, the
 * safety net and retries.
 *
 * One monitor thread starts with the first worker. While every worker is
 * busy and work waits, it looks every few milliseconds at workers that
 * started no job since its last look: those that /proc says are not
 * runnable are blocked, and it starts workers to replace them, up to
 * SQ_MAX_THREADS. It also wakes an idle worker if work waits and nobody
 * makes progress (the safety net, a guard against a broken wake-up), and
 * calls the functions waiting to be retried (_sq_pool_retry_later). With
 * no saturation and nothing to retry, it sleeps until kicked. The workers
 * and the rest of the pool are in pool.c; pool_internal.h holds what they
 * share.
 */
#include "pool_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

/* Monitor ticks without any worker progress, while work waits, a worker is
 * idle and none searches, after which the safety net wakes one (see
 * _sq_monitor_main): 50 ms. Not less: a worker between pushing itself on
 * the idle list and its last look at the queues counts as idle, and a
 * loaded machine can leave it descheduled for milliseconds. */
#define SQ_STALL_TICKS 25
/* The same while a worker counts as searching (it may be woken but not yet
 * running): 100 ms. */
#define SQ_STALL_TICKS_SEARCHING 50
#define SQ_MONITOR_INTERVAL_NS (2 * NSEC_PER_MSEC)
/* With more workers than this, ticks come every SQ_MONITOR_INTERVAL_NS
 * per this many workers, and every SQ_MONITOR_CAPPED_NS at most (and at
 * the thread cap). */
#define SQ_MONITOR_WORKERS_PER_TICK 32
#define SQ_MONITOR_CAPPED_NS (20 * NSEC_PER_MSEC)
/* /proc looks at stuck workers per tick, at most (each costs an open, a
 * read and a close, about 10 us). */
#define SQ_PROC_LOOKS 4
/* A worker waiting for its turn on a queue in sq_sync counts as blocked
 * only once it has waited this long: callers of a busy serial queue queue
 * up by the thousand for moments each, and more threads would only queue
 * up too; a queue held this long (a long task on it, a drainer that
 * waits) gets other work going. */
#define SQ_SYNC_WAIT_COUNT_NS (20 * NSEC_PER_MSEC)
/* After a kick whose saturation has passed, the monitor naps this long
 * before deciding to sleep until the next kick; kicked again during the
 * nap (bursts that saturate the pool for moments), it naps twice as long
 * each time up to the maximum, and back to the minimum once work has
 * waited through a tick. A nap delays only the first look at a new
 * saturation; each nap's wake-up costs about 20 us of CPU on a VM, which
 * is why the maximum is not lower. */
#define SQ_MONITOR_NAP_NS (5 * NSEC_PER_MSEC)
#define SQ_MONITOR_NAP_MAX_NS (50 * NSEC_PER_MSEC)
/* How often the monitor calls what waits to be retried
 * (_sq_pool_retry_later). */
#define SQ_RETRY_INTERVAL_NS (10 * NSEC_PER_MSEC)

/* ---- Blocking compensation -------------------------------------------- */

/* Whether the worker's thread is runnable ('R') according to /proc. Opened
 * per look (only for workers that seem stuck, only while the pool is
 * saturated) so the pool keeps no descriptors open. */
static bool
_sq_worker_runnable(struct sq_worker_s *w)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat",
			(int)__atomic_load_n(&w->tid, __ATOMIC_RELAXED));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p == NULL || p[1] == '\0' || p[2] == 'R';
}

/* A worker found nothing it may take while work waits (pool_class.c,
 * "Taking within the width"): the running workers that hold that work
 * back may be blocked where the runtime cannot see it (a POSIX semaphore
 * in a task). Those that /proc says are asleep, and that are not asleep
 * for a spin lock or parked, are marked blocked now, as the monitor would
 * at its next tick (which unmarks one it then finds running again).
 * Returns whether it marked any. At most SQ_PROC_LOOKS looks. */
bool
_sq_pool_mark_sleeping_runners(struct sq_worker_s *self)
{
	bool marked = false;
	int looks = 0;
	int32_t slots = __atomic_load_n(&_sq_pool.slots, __ATOMIC_ACQUIRE);
	for (int i = 0; i < slots && looks < SQ_PROC_LOOKS; i++) {
		struct sq_worker_s *w = &_sq_pool.workers[i];
		if (w == self || __atomic_load_n(&w->slot_state,
				__ATOMIC_ACQUIRE) != SQ_SLOT_LIVE ||
				__atomic_load_n(&w->busy_root,
				__ATOMIC_RELAXED) >= SQ_ROOT_COUNT ||
				__atomic_load_n(&w->blocked, __ATOMIC_RELAXED) ||
				__atomic_load_n(&w->parked, __ATOMIC_RELAXED))
			continue;
		looks++;
		if (_sq_worker_runnable(w) || __atomic_load_n(&w->lock_sleep,
				__ATOMIC_RELAXED) || __atomic_load_n(&w->parked,
				__ATOMIC_RELAXED))
			continue;
		/* Seq-cst mark, then the look at `parked`, as the monitor's. */
		_sq_worker_mark_blocked(w, SQ_BLOCKED_SEEN);
		if (__atomic_load_n(&w->parked, __ATOMIC_SEQ_CST))
			_sq_worker_unmark_blocked(w, SQ_BLOCKED_SEEN);
		else
			marked = true;
	}
	return marked;
}

/* Jobs finished by all live workers so far. */
uint64_t
_sq_pool_jobs_total(void)
{
	uint64_t total = 0;
	int32_t slots = __atomic_load_n(&_sq_pool.slots, __ATOMIC_ACQUIRE);
	for (int i = 0; i < slots; i++)
		total += __atomic_load_n(&_sq_pool.workers[i].jobs,
				__ATOMIC_RELAXED);
	return total;
}

/* SQ_DEBUG_NET=1: what the pool looked like when the net fired, on
 * stderr (a debugging aid; the figures are read without locks). */
static void
_sq_pool_net_report(void)
{
	fprintf(stderr, "SwiftQueues: safety net fired: live %d, idle %d, "
			"searching %d, spinning %d, root queues %s\n",
			__atomic_load_n(&_sq_pool.live, __ATOMIC_RELAXED),
			__atomic_load_n(&_sq_pool.nidle, __ATOMIC_RELAXED),
			__atomic_load_n(&_sq_pool.searching, __ATOMIC_RELAXED),
			__atomic_load_n(&_sq_pool.spinning, __ATOMIC_RELAXED),
			_sq_roots_empty() ? "empty" : "not empty");
	int32_t slots = __atomic_load_n(&_sq_pool.slots, __ATOMIC_ACQUIRE);
	for (int i = 0; i < slots; i++) {
		struct sq_worker_s *x = &_sq_pool.workers[i];
		fprintf(stderr, "  worker %d: %s, parked %u, ring %u, "
				"jobs %llu\n", i,
				__atomic_load_n(&x->slot_state,
					__ATOMIC_RELAXED) ? "live" : "free",
				__atomic_load_n(&x->parked, __ATOMIC_RELAXED),
				__atomic_load_n(&x->ring.tail,
					__ATOMIC_RELAXED) -
				__atomic_load_n(&x->ring.head,
					__ATOMIC_RELAXED),
				(unsigned long long)__atomic_load_n(&x->jobs,
					__ATOMIC_RELAXED));
	}
}

/* The safety net: wakes one idle worker as a searcher, whatever
 * `searching` says. */
static void
_sq_pool_net_fire(void)
{
	__atomic_add_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
	struct sq_worker_s *w = _sq_idle_pop();
	if (w == NULL) {
		__atomic_sub_fetch(&_sq_pool.searching, 1, __ATOMIC_SEQ_CST);
		return;
	}
	__atomic_add_fetch(&_sq_pool.net_firings, 1, __ATOMIC_RELAXED);
	SQ_POOL_EVENT(SQ_TRACE_NET, w, 0);
	if (_sq_pool.net_debug)
		_sq_pool_net_report();
	_sq_worker_wake(w);
}

/* Calls what waits to be retried (_sq_pool_retry_later), at most every
 * SQ_RETRY_INTERVAL_NS; drops what succeeded. Returns whether anything is
 * still waiting. Monitor thread. */
static bool
_sq_pool_run_retries(void)
{
	bool waiting = false;
	uint64_t now = _sq_monotonic_ns();
	bool due = now >= _sq_pool.retry_at;
	for (int i = 0; i < SQ_RETRY_SLOTS; i++) {
		bool (*fn)(void) = __atomic_load_n(&_sq_pool.retry[i],
				__ATOMIC_ACQUIRE);
		if (fn == NULL)
			continue;
		if (due && fn())
			__atomic_compare_exchange_n(&_sq_pool.retry[i], &fn, NULL,
					false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		else
			waiting = true;
	}
	if (due)
		_sq_pool.retry_at = now + SQ_RETRY_INTERVAL_NS;
	return waiting;
}

static void *
_sq_monitor_main(void *unused)
{
	static uint64_t last_jobs[SQ_POOL_MAX_THREADS];
	uint32_t proc_turn = 0; /* where the next /proc looks start */
	uint64_t last_total = 0;
	int pending_ticks = 0, stalled_ticks = 0;
	uint64_t nap_ns = SQ_MONITOR_NAP_NS;
	pthread_setname_np(pthread_self(), "sq.monitor");
	_sq_trace_set_role(SQ_ROLE_MONITOR, 0);

	for (;;) {
		bool retrying = _sq_pool_run_retries();
		if (!_sq_pool_has_work()) {
			pending_ticks = 0;
			stalled_ticks = 0;
			/* Kicked since the last look (the pool was saturated
			 * a moment ago): nap, then look again. Kicks during a
			 * nap cost the kicker no system call, so a pool that
			 * saturates in bursts wakes the monitor once per nap,
			 * not once per burst. */
			if (__atomic_exchange_n(&_sq_pool.monitor_kick, 0,
					__ATOMIC_SEQ_CST)) {
				struct timespec nap = { 0, (long)nap_ns };
				nanosleep(&nap, NULL);
				if (nap_ns < SQ_MONITOR_NAP_MAX_NS)
					nap_ns *= 2;
				continue;
			}
			nap_ns = SQ_MONITOR_NAP_NS;
			if (retrying) {
				struct timespec nap = { 0,
					(long)SQ_RETRY_INTERVAL_NS };
				nanosleep(&nap, NULL);
				continue;
			}
			/* Sleep until kicked. Dekker with the kicker: we
			 * store `monitor_deep` then load the kick; it stores
			 * the kick then loads `monitor_deep` (all seq-cst),
			 * so one of us sees the other. (A retry request
			 * kicks after it stores its function.) */
			__atomic_store_n(&_sq_pool.monitor_deep, 1,
					__ATOMIC_SEQ_CST);
			if (!_sq_pool_has_work() && !_sq_pool_run_retries())
				_sq_futex_wait(&_sq_pool.monitor_kick, 0, NULL);
			__atomic_store_n(&_sq_pool.monitor_deep, 0,
					__ATOMIC_SEQ_CST);
			continue;
		}
		/* A tick looks at every worker's counters: with many
		 * workers it comes less often, so that its cost per second
		 * stays flat (at the thread cap, where it could add nobody,
		 * it only keeps the safety net). */
		int32_t nlive = __atomic_load_n(&_sq_pool.live,
				__ATOMIC_RELAXED);
		uint64_t every = nlive >= _sq_pool.max_threads ?
				SQ_MONITOR_CAPPED_NS : SQ_MONITOR_INTERVAL_NS *
				(uint64_t)(nlive > SQ_MONITOR_WORKERS_PER_TICK ?
				nlive / SQ_MONITOR_WORKERS_PER_TICK : 1);
		if (every > SQ_MONITOR_CAPPED_NS)
			every = SQ_MONITOR_CAPPED_NS;
		struct timespec tick = { 0, (long)every };
		nanosleep(&tick, NULL);

		if (!_sq_pool_has_work()) {
			pending_ticks = 0;
			stalled_ticks = 0;
			continue;
		}
		/* Work has waited a tick: the next saturation after this one
		 * gets a short nap again. (Work seen by one look only, a
		 * burst in progress, leaves the nap as long as it was.) */
		nap_ns = SQ_MONITOR_NAP_NS;
		SQ_TRACE_POOL(SQ_TRACE_COUNTERS, 0, 0,
				__atomic_load_n(&_sq_pool.live, __ATOMIC_RELAXED),
				__atomic_load_n(&_sq_pool.nidle, __ATOMIC_RELAXED),
				__atomic_load_n(&_sq_pool.searching,
					__ATOMIC_RELAXED));
		/* Safety net (SQ_MONITOR_NET=0 turns it off): work waits, a
		 * worker is idle, and no worker started a job for a few
		 * ticks. The wake-up protocol never leaves that state
		 * standing; if a bug did, the work would wait milliseconds,
		 * not forever, and net_firings counts it. */
		uint64_t total = _sq_pool_jobs_total();
		if (total != last_total) {
			last_total = total;
			stalled_ticks = 0;
		} else if (_sq_pool.net_enabled &&
				__atomic_load_n(&_sq_pool.nidle, __ATOMIC_SEQ_CST) &&
				_sq_pool_has_takeable(NULL)) {
			/* With nobody searching, that is the invariant broken.
			 * A counted searcher may just not have been scheduled
			 * yet on a loaded machine: give it much longer. */
			int limit = __atomic_load_n(&_sq_pool.searching,
					__ATOMIC_SEQ_CST) == 0 ? SQ_STALL_TICKS
					: SQ_STALL_TICKS_SEARCHING;
			if (++stalled_ticks >= limit) {
				stalled_ticks = 0;
				_sq_pool_net_fire();
			}
		}
		/* Work waits while workers are idle and none searches: idle
		 * ones declined it (pool_class.c, "Taking within the width").
		 * The running ones are looked at as when every worker is
		 * busy; those found blocked no longer count, and an idle
		 * worker is woken to take their place. */
		bool idle = __atomic_load_n(&_sq_pool.nidle, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&_sq_pool.searching, __ATOMIC_SEQ_CST)) {
			pending_ticks = 0;
			continue;
		}
		/* Workers that made no progress since the last tick and are
		 * not runnable are blocked (sleeping, waiting on I/O). A
		 * worker in one of the runtime's waits said so itself
		 * (SQ_BLOCKED_WAIT): no /proc look. The others are looked at
		 * in /proc, at most SQ_PROC_LOOKS a tick, taking turns, so
		 * the cost does not grow with the number of threads; none at
		 * the thread cap, where no worker can be added. */
		int busy = 0, blocked = 0, looks = 0;
		bool marked = false;
		uint64_t now = _sq_monotonic_ns();
		bool capped = __atomic_load_n(&_sq_pool.live,
				__ATOMIC_RELAXED) >= _sq_pool.max_threads;
		int32_t slots = __atomic_load_n(&_sq_pool.slots,
				__ATOMIC_ACQUIRE);
		for (int k = 0; k < slots; k++) {
			int i = (int)((proc_turn + (uint32_t)k) %
					(uint32_t)slots);
			struct sq_worker_s *w = &_sq_pool.workers[i];
			if (__atomic_load_n(&w->slot_state, __ATOMIC_ACQUIRE) !=
					SQ_SLOT_LIVE)
				continue;
			uint64_t jobs = __atomic_load_n(&w->jobs,
					__ATOMIC_RELAXED);
			uint32_t marks = __atomic_load_n(&w->blocked,
					__ATOMIC_RELAXED);
			busy++;
			bool stuck = jobs == last_jobs[i];
			last_jobs[i] = jobs;
			if (marks & SQ_BLOCKED_WAIT) {
				/* Blocked, and for a tick at least. */
				blocked += stuck;
				continue;
			}
			if (marks & SQ_BLOCKED_SYNC) {
				/* A sync caller: blocked once its wait has
				 * lasted (see SQ_SYNC_WAIT_COUNT_NS). */
				blocked += stuck && now - __atomic_load_n(
						&w->blocked_at, __ATOMIC_RELAXED) >=
						SQ_SYNC_WAIT_COUNT_NS;
				continue;
			}
			if (!stuck) {
				if (marks & SQ_BLOCKED_SEEN)
					_sq_worker_unmark_blocked(w,
							SQ_BLOCKED_SEEN);
				continue;
			}
			if (capped || looks == SQ_PROC_LOOKS) {
				/* No look this tick: as last seen. */
				blocked += (marks & SQ_BLOCKED_SEEN) != 0;
				continue;
			}
			if (looks++ == 0)
				proc_turn = (uint32_t)i + 1;
			/* Not blocked either: a worker asleep for a spin lock
			 * waits for its holder, which runs (a preempted holder
			 * of the root queue's lock while the submitter has the
			 * CPU), and another thread would only add to the
			 * contention; a worker that has parked since the look
			 * at `nidle` above. Both flags are set before the
			 * thread sleeps, so they are read after /proc says it
			 * sleeps. */
			if (!_sq_worker_runnable(w) &&
					!__atomic_load_n(&w->lock_sleep,
						__ATOMIC_RELAXED) &&
					!__atomic_load_n(&w->parked,
						__ATOMIC_RELAXED)) {
				blocked++;
				if (marks & SQ_BLOCKED_SEEN)
					continue;
				/* Its queued jobs go to other workers first,
				 * as an announced wait's do. Seq-cst mark,
				 * then look at `parked`: a worker that parked
				 * meanwhile may have missed the mark. */
				_sq_worker_mark_blocked(w, SQ_BLOCKED_SEEN);
				if (__atomic_load_n(&w->parked,
						__ATOMIC_SEQ_CST))
					_sq_worker_unmark_blocked(w,
							SQ_BLOCKED_SEEN);
				else
					marked = true;
			} else if (marks & SQ_BLOCKED_SEEN) {
				/* Running again, in the same long job. */
				_sq_worker_unmark_blocked(w, SQ_BLOCKED_SEEN);
			}
		}
		/* A worker found blocked makes room (its mark, seq-cst,
		 * then this look): an idle worker takes its place at once. */
		if (marked && idle && _sq_pool_has_takeable(NULL)) {
			_sq_pool_notify();
			continue;
		}
		if (++pending_ticks < 2)
			continue;
		/* A worker that parked or went searching during the scan is
		 * not blocked; the next tick looks again. */
		if (__atomic_load_n(&_sq_pool.searching, __ATOMIC_SEQ_CST))
			continue;
		if (__atomic_load_n(&_sq_pool.nidle, __ATOMIC_SEQ_CST))
			continue;
		int runnable = busy - blocked;
		for (int add = _sq_pool.width - runnable; add > 0; add--) {
			/* Counted as a searcher before it starts (a new
			 * worker begins by searching). */
			__atomic_add_fetch(&_sq_pool.searching, 1,
					__ATOMIC_SEQ_CST);
			if (!_sq_pool_spawn()) {
				__atomic_sub_fetch(&_sq_pool.searching, 1,
						__ATOMIC_SEQ_CST);
				break;
			}
			__atomic_add_fetch(&_sq_pool.compensated, 1,
					__ATOMIC_RELAXED);
		}
	}
	return NULL;
}

/* Starts the monitor if it is not running, unless a refused thread's pause
 * is not over. Called after each new worker, on kicks and by retry
 * requests: with room for a single thread, the pool runs without a monitor
 * (no blocking compensation) until it can have one. */
void
_sq_monitor_ensure(void)
{
	if (__atomic_load_n(&_sq_pool.monitor_state, __ATOMIC_ACQUIRE) ==
			SQ_MONITOR_RUNNING)
		return;
	if (_sq_monotonic_ns() < __atomic_load_n(&_sq_pool.monitor_retry_at,
			__ATOMIC_RELAXED))
		return;
	uint32_t none = SQ_MONITOR_NONE;
	if (!__atomic_compare_exchange_n(&_sq_pool.monitor_state, &none,
			SQ_MONITOR_STARTING, false, __ATOMIC_ACQ_REL,
			__ATOMIC_RELAXED))
		return;
	if (_sq_thread_create(&_sq_pool.thread_attr, _sq_monitor_main,
			NULL) != 0) {
		__atomic_store_n(&_sq_pool.monitor_retry_at, _sq_monotonic_ns() +
				SQ_MONITOR_RETRY_NS, __ATOMIC_RELAXED);
		__atomic_store_n(&_sq_pool.monitor_state, SQ_MONITOR_NONE,
				__ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&_sq_pool.monitor_running, true, __ATOMIC_RELEASE);
	__atomic_store_n(&_sq_pool.monitor_state, SQ_MONITOR_RUNNING,
			__ATOMIC_RELEASE);
}

/* Every worker is busy: the monitor should look whether they are blocked.
 * A system call only when it is in its deep sleep. */
void
_sq_monitor_kick(void)
{
	/* Already kicked: the monitor has yet to take that kick (it takes it
	 * before it sleeps, and its futex wait returns at once while the
	 * word is 1), so this one adds nothing. A plain read keeps bursts of
	 * saturated submissions from writing the line. */
	if (__atomic_load_n(&_sq_pool.monitor_kick, __ATOMIC_RELAXED) != 0)
		return;
	if (SQ_UNLIKELY(__atomic_load_n(&_sq_pool.monitor_state,
			__ATOMIC_RELAXED) != SQ_MONITOR_RUNNING))
		_sq_monitor_ensure();
	if (__atomic_exchange_n(&_sq_pool.monitor_kick, 1, __ATOMIC_SEQ_CST)
			== 0 && __atomic_load_n(&_sq_pool.monitor_deep,
			__ATOMIC_SEQ_CST))
		_sq_futex_wake(&_sq_pool.monitor_kick, 1);
}
