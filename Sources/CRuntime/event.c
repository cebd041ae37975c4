/*
 * SwiftQueues — the manager thread: one libevent event_base, the command
 * queue other threads post to, the timer heaps, and sq_after.
 *
 * The loop starts lazily with the first source or timer. Set-up order
 * follows libevent's rules: evthread_use_pthreads() before anything else,
 * a base with EVENT_BASE_FLAG_PRECISE_TIMER (CLOCK_MONOTONIC and a timerfd
 * instead of millisecond epoll timeouts), run with EVLOOP_NO_EXIT_ON_EMPTY.
 * Nothing but the loop thread touches libevent.
 *
 * Starting can fail for want of descriptors or of a thread; then it is
 * tried again by the next call that needs the loop (and, while an
 * sq_after waits, by the pool's monitor every 10 ms). libevent's messages
 * and its fatal errors come to the runtime, never to stderr or exit().
 */
#include "event_internal.h"
#include "trace_internal.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <errno.h>

static struct {
	struct event_base *base;
	int wake_fd;     /* -1 until made; atomic (see _sq_loop_kick) */
	struct event *wake_ev;
	struct event *timer_ev;
	uint32_t running; /* 1 once the manager thread runs the loop */
	_Alignas(SQ_CACHELINE) struct __cds_wfcq_head head;
	_Alignas(SQ_CACHELINE) struct cds_wfcq_tail tail;
	/* Timer heaps [clock][by deadline = 0, by latest = 1]. */
	struct sq_timer_s **heap[2][2];
	uint32_t heap_count[2];
	uint32_t heap_cap[2];
} _sq_loop = {
	.wake_fd = -1,
	/* The command queue is usable before the loop exists: an sq_after
	 * waits there while the loop cannot start. */
	.head = { .node = { .next = NULL } },
	.tail = { .p = &_sq_loop.head.node },
};

/* Serialises starting the loop (and its retries). */
static pthread_mutex_t _sq_loop_lock = PTHREAD_MUTEX_INITIALIZER;

struct event_base *
_sq_loop_base(void)
{
	return _sq_loop.base;
}

uint64_t
_sq_clock_now(int clock)
{
	return clock == SQ_CLOCK_WALL ? _sq_wall_ns() : _sq_monotonic_ns();
}

/* ---- Timer heaps ----------------------------------------------------------
 *
 * Classic binary min-heaps of pointers; each entry remembers its index in
 * both heaps of its clock so it can be removed in O(log n).
 */

static inline uint64_t
_sq_timer_key(const struct sq_timer_s *t, int which)
{
	return which == 0 ? t->deadline : t->latest;
}

static inline void
_sq_heap_set(int clock, int which, uint32_t i, struct sq_timer_s *t)
{
	_sq_loop.heap[clock][which][i] = t;
	t->heap_index[which] = i;
}

static void
_sq_heap_up(int clock, int which, uint32_t i)
{
	struct sq_timer_s **h = _sq_loop.heap[clock][which];
	struct sq_timer_s *t = h[i];
	uint64_t key = _sq_timer_key(t, which);
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (_sq_timer_key(h[parent], which) <= key)
			break;
		_sq_heap_set(clock, which, i, h[parent]);
		i = parent;
	}
	_sq_heap_set(clock, which, i, t);
}

static void
_sq_heap_down(int clock, int which, uint32_t i)
{
	struct sq_timer_s **h = _sq_loop.heap[clock][which];
	uint32_t n = _sq_loop.heap_count[clock];
	struct sq_timer_s *t = h[i];
	uint64_t key = _sq_timer_key(t, which);
	for (;;) {
		uint32_t child = 2 * i + 1;
		if (child >= n)
			break;
		if (child + 1 < n && _sq_timer_key(h[child + 1], which) <
				_sq_timer_key(h[child], which))
			child++;
		if (_sq_timer_key(h[child], which) >= key)
			break;
		_sq_heap_set(clock, which, i, h[child]);
		i = child;
	}
	_sq_heap_set(clock, which, i, t);
}

/* Removes slot i; the heap's count has already been decremented, so the
 * entry to move into the hole is the one just past the end. */
static void
_sq_heap_remove_at(int clock, int which, uint32_t i)
{
	uint32_t last = _sq_loop.heap_count[clock];
	struct sq_timer_s **h = _sq_loop.heap[clock][which];
	if (i == last)
		return;
	struct sq_timer_s *moved = h[last];
	_sq_heap_set(clock, which, i, moved);
	_sq_heap_down(clock, which, i);
	_sq_heap_up(clock, which, moved->heap_index[which]);
}

void
_sq_timer_init(struct sq_timer_s *t, void (*fire)(struct sq_timer_s *,
		uint64_t, bool))
{
	memset(t, 0, sizeof(*t));
	t->heap_index[0] = t->heap_index[1] = UINT32_MAX;
	t->fire = fire;
}

void
_sq_timer_unschedule(struct sq_timer_s *t)
{
	if (t->heap_index[0] == UINT32_MAX)
		return;
	int c = t->clock;
	_sq_loop.heap_count[c]--;
	_sq_heap_remove_at(c, 0, t->heap_index[0]);
	_sq_heap_remove_at(c, 1, t->heap_index[1]);
	t->heap_index[0] = t->heap_index[1] = UINT32_MAX;
}

void
_sq_timer_schedule(struct sq_timer_s *t)
{
	_sq_timer_unschedule(t);
	int c = t->clock;
	if (_sq_loop.heap_count[c] == _sq_loop.heap_cap[c]) {
		uint32_t cap = _sq_loop.heap_cap[c] ? 2 * _sq_loop.heap_cap[c]
				: 64;
		for (int w = 0; w < 2; w++) {
			void *grown = realloc(_sq_loop.heap[c][w],
					cap * sizeof(struct sq_timer_s *));
			if (grown == NULL)
				_sq_client_crash("sq_source_set_timer",
						"out of memory");
			_sq_loop.heap[c][w] = grown;
		}
		_sq_loop.heap_cap[c] = cap;
	}
	uint32_t i = _sq_loop.heap_count[c]++;
	for (int w = 0; w < 2; w++) {
		_sq_heap_set(c, w, i, t);
		_sq_heap_up(c, w, i);
	}
}

/* The latest deadline on `clock` no later than `limit`, starting the walk
 * at slot i of the deadline heap. A min-heap: a slot past the limit hides
 * its whole subtree, so the walk visits only the entries due by `limit`
 * (the ones the wake-up will fire) and their direct children. */
static uint64_t
_sq_heap_latest_deadline(int clock, uint32_t i, uint64_t limit)
{
	uint32_t n = _sq_loop.heap_count[clock];
	if (i >= n || _sq_loop.heap[clock][0][i]->deadline > limit)
		return 0;
	uint64_t best = _sq_loop.heap[clock][0][i]->deadline;
	uint64_t l = _sq_heap_latest_deadline(clock, 2 * i + 1, limit);
	uint64_t r = _sq_heap_latest_deadline(clock, 2 * i + 2, limit);
	if (l > best)
		best = l;
	return r > best ? r : best;
}

/* Loop passes that fired at least one timer (a debugging figure, used by
 * the tests to see that timers were served by one wake-up). Loop thread
 * writes, anyone reads: relaxed, it orders nothing. */
static uint64_t _sq_timer_wakeups;

uint64_t
_sq_debug_timer_wakeups(void)
{
	return __atomic_load_n(&_sq_timer_wakeups, __ATOMIC_RELAXED);
}

/*
 * Precise wake-ups. A timer whose leeway is below SQ_TIMER_PRECISE_NS
 * (leeway 0, sq_after) would otherwise start late by two thread wake-ups
 * in a row: the loop's (timerfd, then the scheduler) and a worker's
 * (futex). On a VM each costs 10-100 us (median about 20, 99th percentile
 * 50-200). So the loop wakes SQ_TIMER_AHEAD_NS before such a deadline
 * and fires early every timer due by it, and every precise after due
 * within SQ_TIMER_CHAIN_NS (5 ms): the fire function (told `early`) does the
 * loop's part at once (a repeating timer is rescheduled from its
 * deadline) and posts the rest as an "on time" entry. One job at a time,
 * the on-time runner on a worker, takes the entries in deadline order: it
 * sleeps until a margin before the next deadline (a futex with a timeout;
 * workers have 1 ns of timer slack), spins to it, and does what the loop
 * would have done there (submit the after's work, merge the timer source's
 * tick). The wake-ups of the hand-off happen well ahead; one wake-up lies
 * between the deadline and the handler, and the spin is its margin. The
 * loop goes back to sleep at once, and however many precise timers are
 * pending, they hold one worker. Precise afters go ahead up to 5 ms at a
 * time: the loop wakes once per such window, not once per deadline, and
 * never just as the runner spins to a deadline (on a two-CPU machine that
 * wake-up would take the runner's CPU).
 *
 * The margin adapts (_sq_margin_note): it covers the 99th percentile of
 * the lateness this machine's timed wake-ups have shown the runner, and no
 * more; and the spin it costs is held to a CPU budget shared among the
 * deadlines of the last moments. A deadline closer than the margin plus
 * the cost of a wake-up is spun to without sleeping.
 *
 * The work is submitted at its deadline (not early with a "not before"
 * mark), so a serial queue sees it arrive when due and nothing submitted
 * just before is overtaken; it runs on the runner's thread itself when its
 * queue is a root queue or an idle serial one (no hand-off at all). A
 * precise after that the loop fires late (it woke late itself) joins the
 * list as due at once, for the same reason.
 *
 * Work of unknown length must not hold up the entries left. A runner stops
 * being counted while it runs an entry's work, and with two entries or more
 * pending a second runner is kept, a standby: at most two are counted, and
 * only one (holding the `waiter` claim) sleeps to the head's margin and
 * spins to its deadline. The standby looks now and then (1 ms apart,
 * doubling while the waiter keeps time, up to 8 ms), and takes the claim,
 * or an overdue entry, if the waiter is held up (in an earlier entry's long
 * work, or preempted): a deadline behind long work is late by at most that
 * nap. (A standby that woke for every deadline would cost one more
 * wake-up per deadline, more than the whole budget of dense afters.)
 * After short work, the usual case, a runner comes back for the next
 * entry, so deadlines tens of microseconds apart cost no new runner and no
 * wake-up; with nothing listed it lingers SQ_RUNNER_LINGER_NS for the
 * loop's next window.
 */
#define SQ_TIMER_AHEAD_NS (200 * NSEC_PER_USEC)
#define SQ_TIMER_PRECISE_NS (90 * NSEC_PER_USEC)
#define SQ_TIMER_CHAIN_NS (5 * NSEC_PER_MSEC)
/* The standby runner (above) looks 1 ms apart, twice as long after
 * each look that finds the waiter on time, up to 8 ms, and never before
 * the waiter's deadline plus SQ_TIMER_TAKEOVER_NS; a runner with nothing
 * listed lingers 1 ms for the loop's next window. */
#define SQ_TIMER_TAKEOVER_NS (90 * NSEC_PER_USEC)
#define SQ_RUNNER_STANDBY_NS (1 * NSEC_PER_MSEC)
#define SQ_RUNNER_STANDBY_MAX_NS (8 * NSEC_PER_MSEC)
#define SQ_RUNNER_LINGER_NS (1 * NSEC_PER_MSEC)

/*
 * The spin margin. A timed sleep on a VM wakes a few tens of microseconds
 * late, and now and then hundreds; a margin that covers nearly every
 * wake-up costs about that much spin per deadline. Two figures bound it,
 * recomputed every SQ_MARGIN_WINDOW_NS from the runner's own timed sleeps:
 *   - the lateness this machine shows: the second largest of the last
 *     SQ_LATE_SAMPLES wake-ups (the 99.6th percentile), plus
 *     SQ_MARGIN_PAD_NS (more is spin for nothing). Nearly every wake-up
 *     must be covered, not 99%: afters close together are spun to one
 *     after another from one wake-up, so a late wake-up makes the whole
 *     group late;
 *   - a spin allowance per wake-up, on top of their first quartile (the
 *     part of the margin most wake-ups sleep through instead of spinning):
 *     SQ_SPIN_ALLOWANCE_NS up to SQ_SPIN_ALLOWANCE_RATE timed wake-ups a
 *     second, falling with the cube of the rate above that (10 us at
 *     2,000 a second, 3 us at 3,000). The spin per second then falls as
 *     deadlines get denser (8% of a CPU at 1,000 a second, 1% at 3,000),
 *     as the whole cost must to stay within libdispatch's: a wake-up costs
 *     this VM about 12 us of CPU, and libdispatch, merging dense timers
 *     within their implicit leeway, spends about 30 us per timer at 3,000
 *     a second and less beyond.
 * So sparse deadlines (a 1 ms timer, afters in groups) get the whole
 * margin and are on time, while dense ones (thousands a second at random)
 * spin a few microseconds each and are late now and then, at worst by a
 * bare wake-up's lateness. A deadline closer than the margin plus
 * SQ_TIMER_WAKE_COST_NS (about the CPU a sleep and its wake-up cost here)
 * is spun to at once.
 */
#define SQ_LATE_SAMPLES 256
#define SQ_MARGIN_WINDOW_NS (50 * NSEC_PER_MSEC)
#define SQ_MARGIN_PAD_NS (20 * NSEC_PER_USEC)
#define SQ_MARGIN_MIN_NS (2 * NSEC_PER_USEC)
#define SQ_MARGIN_MAX_NS (150 * NSEC_PER_USEC)
#define SQ_MARGIN_START_NS (90 * NSEC_PER_USEC)
#define SQ_SPIN_ALLOWANCE_NS (80.0 * NSEC_PER_USEC)
#define SQ_SPIN_ALLOWANCE_RATE 1000.0
#define SQ_TIMER_WAKE_COST_NS (15 * NSEC_PER_USEC)

static struct {
	sq_spinlock_t lock;
	uint32_t late[SQ_LATE_SAMPLES]; /* ns, most recent wake-ups */
	uint32_t count;                 /* samples held (at most the size) */
	uint32_t next;                  /* where the next one goes */
	uint64_t window_start;
	uint32_t window_wakes;
	uint64_t margin;                /* atomic: the runners read it */
	uint64_t p50, p99;              /* the last computed (p50 is the first
					   quartile, p99 the second largest),
					   for tests */
	uint64_t spun_ns;               /* atomic: time spent spinning */
} _sq_margin = { .margin = SQ_MARGIN_START_NS };

static int
_sq_u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* A runner's timed sleep to `target` ended at `woke` (timed out, not woken
 * by a post): one lateness sample; at the end of a window, the margin. */
static void
_sq_margin_note(uint64_t target, uint64_t woke)
{
	uint64_t late = woke > target ? woke - target : 0;
	sq_spinlock_lock(&_sq_margin.lock);
	_sq_margin.late[_sq_margin.next] = late > UINT32_MAX ? UINT32_MAX
			: (uint32_t)late;
	_sq_margin.next = (_sq_margin.next + 1) % SQ_LATE_SAMPLES;
	if (_sq_margin.count < SQ_LATE_SAMPLES)
		_sq_margin.count++;
	_sq_margin.window_wakes++;
	uint64_t span = woke - _sq_margin.window_start;
	if (_sq_margin.window_start == 0 || woke < _sq_margin.window_start) {
		_sq_margin.window_start = woke;
		_sq_margin.window_wakes = 0;
	} else if (span >= SQ_MARGIN_WINDOW_NS && _sq_margin.count >= 16) {
		uint32_t sorted[SQ_LATE_SAMPLES];
		uint32_t n = _sq_margin.count;
		memcpy(sorted, _sq_margin.late, n * sizeof(uint32_t));
		qsort(sorted, n, sizeof(uint32_t), _sq_u32_cmp);
		uint64_t p50 = sorted[n / 4]; /* the first quartile */
		uint64_t p99 = sorted[n - 2];
		/* The spin a wake-up may cost at this window's rate. */
		double rate = (double)_sq_margin.window_wakes * 1e9 /
				(double)span;
		double share = rate <= SQ_SPIN_ALLOWANCE_RATE ? 1.0 :
				SQ_SPIN_ALLOWANCE_RATE / rate;
		uint64_t allowance = (uint64_t)(SQ_SPIN_ALLOWANCE_NS * share *
				share * share);
		uint64_t m = p99 + SQ_MARGIN_PAD_NS;
		if (p50 + allowance < m)
			m = p50 + allowance;
		if (m < SQ_MARGIN_MIN_NS)
			m = SQ_MARGIN_MIN_NS;
		if (m > SQ_MARGIN_MAX_NS)
			m = SQ_MARGIN_MAX_NS;
		_sq_margin.p50 = p50;
		_sq_margin.p99 = p99;
		/* Relaxed: a hint each runner reads once per look. */
		__atomic_store_n(&_sq_margin.margin, m, __ATOMIC_RELAXED);
		_sq_margin.window_start = woke;
		_sq_margin.window_wakes = 0;
	}
	sq_spinlock_unlock(&_sq_margin.lock);
}

void
_sq_debug_timer_margin(uint64_t *margin, uint64_t *p50, uint64_t *p99,
		uint64_t *spun_ns)
{
	sq_spinlock_lock(&_sq_margin.lock);
	*margin = _sq_margin.margin;
	*p50 = _sq_margin.p50;
	*p99 = _sq_margin.p99;
	sq_spinlock_unlock(&_sq_margin.lock);
	*spun_ns = __atomic_load_n(&_sq_margin.spun_ns, __ATOMIC_RELAXED);
}

static struct {
	sq_spinlock_t lock;
	struct sq_ontime_s *head; /* by deadline */
	struct sq_ontime_s *tail; /* the last entry, or NULL */
	int runners;              /* runner jobs queued or looking for
				     entries (not those running an entry's
				     work): 0-2 */
	uint32_t waiter;          /* 1 while a runner sleeps to the head's
				     margin or spins to its deadline */
	uint32_t seq;             /* futex: bumped when the head changes */
	uint32_t sleepers;        /* runners in (or about to be in) a futex
				     wait on seq */
	uint32_t standby_word;    /* futex the standby naps on (always 0) */
	uint64_t head_due;        /* atomic copy of head->due, or 0 */
	uint64_t second_due;      /* and of head->next->due, or 0 (no second
				     entry) */
} _sq_ontime;

/* Under the lock, after the list changed: publish its first deadlines and
 * let sleeping runners look again. */
static void
_sq_ontime_publish(void)
{
	struct sq_ontime_s *h = _sq_ontime.head;
	__atomic_store_n(&_sq_ontime.head_due, h ? h->due : 0,
			__ATOMIC_RELAXED);
	__atomic_store_n(&_sq_ontime.second_due, h && h->next ? h->next->due
			: 0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&_sq_ontime.seq, 1, __ATOMIC_SEQ_CST);
}

static void _sq_ontime_run(void *unused);

static void
_sq_ontime_start_runner(void)
{
	sq_async_f(&_sq_root_queues[SQ_ROOT_HIGH], NULL, _sq_ontime_run);
}

void
_sq_ontime_post(struct sq_ontime_s *e)
{
	sq_spinlock_lock(&_sq_ontime.lock);
	/* The loop fires in deadline order, so an entry usually goes last:
	 * O(1) then, however many are listed (100,000 afters due together). */
	struct sq_ontime_s **at = &_sq_ontime.head;
	if (_sq_ontime.tail != NULL && _sq_ontime.tail->due <= e->due)
		at = &_sq_ontime.tail->next;
	while (*at != NULL && (*at)->due <= e->due)
		at = &(*at)->next;
	e->next = *at;
	*at = e;
	if (e->next == NULL)
		_sq_ontime.tail = e;
	/* Among the first two: a sleeping runner may have to wake earlier. */
	bool early = _sq_ontime.head == e || _sq_ontime.head->next == e;
	bool start = _sq_ontime.runners == 0;
	if (start)
		__atomic_store_n(&_sq_ontime.runners, 1, __ATOMIC_RELAXED);
	_sq_ontime_publish();
	sq_spinlock_unlock(&_sq_ontime.lock);
	if (start)
		_sq_ontime_start_runner();
	else if (early && __atomic_load_n(&_sq_ontime.sleepers,
			__ATOMIC_SEQ_CST) != 0)
		_sq_futex_wake(&_sq_ontime.seq, 2);
}

/* With two entries or more waiting, a second runner is started ahead of
 * time, so it is awake should the first be held up by an entry's work.
 * The racy look first keeps the lock off a runner's every pass. */
static void
_sq_ontime_start_successor(void)
{
	if (__atomic_load_n(&_sq_ontime.runners, __ATOMIC_RELAXED) != 1 ||
			__atomic_load_n(&_sq_ontime.second_due,
			__ATOMIC_RELAXED) == 0)
		return;
	sq_spinlock_lock(&_sq_ontime.lock);
	bool start = _sq_ontime.runners == 1 && _sq_ontime.head != NULL &&
			_sq_ontime.head->next != NULL;
	if (start)
		__atomic_store_n(&_sq_ontime.runners, 2, __ATOMIC_RELAXED);
	sq_spinlock_unlock(&_sq_ontime.lock);
	if (start)
		_sq_ontime_start_runner();
}

/* A runner's sleep on `seq`, until it changes from `seq_seen` (a post
 * bumps it after changing the list: _sq_ontime_publish) or `until`.
 * Counted in `sleepers` so that a post wakes nobody when no runner sleeps
 * (one system call per after otherwise): the post bumps `seq`, then reads
 * `sleepers`; the runner counts itself, then the futex compares `seq` with
 * what it read before (all seq-cst), so either the post sees the sleeper
 * or the futex sees the new `seq` and returns at once. */
static int
_sq_ontime_sleep(uint32_t seq_seen, uint64_t until)
{
	__atomic_add_fetch(&_sq_ontime.sleepers, 1, __ATOMIC_SEQ_CST);
	int r = _sq_futex_wait_until(&_sq_ontime.seq, seq_seen,
			(sq_time_t)until);
	__atomic_sub_fetch(&_sq_ontime.sleepers, 1, __ATOMIC_RELAXED);
	return r;
}

static void
_sq_ontime_run(void *unused)
{
	(void)unused;
	bool waiter = false;    /* this runner holds the waiter claim */
	uint64_t idle_since = 0;
	uint64_t standby_nap = SQ_RUNNER_STANDBY_NS;
top:
	for (;;) {
		/* Read seq before the deadline: a post after this read bumps
		 * it, so the futex below returns at once instead of
		 * oversleeping a new, earlier entry. */
		uint32_t seq = __atomic_load_n(&_sq_ontime.seq,
				__ATOMIC_SEQ_CST);
		uint64_t due = __atomic_load_n(&_sq_ontime.head_due,
				__ATOMIC_SEQ_CST);
		_sq_ontime_start_successor();
		uint64_t now = _sq_monotonic_ns();
		/* One runner, holding the waiter claim, waits for the head's
		 * deadline (sleeping to the margin, spinning the rest) and
		 * lingers when nothing is listed: two would both wake, and
		 * maybe spin, holding both CPUs of a small machine while the
		 * loop needs one. Acquire/release: the claim orders nothing
		 * but itself. */
		uint32_t free_claim = 0;
		if (!waiter)
			waiter = __atomic_compare_exchange_n(&_sq_ontime.waiter,
					&free_claim, 1, false, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED);
		if (!waiter) {
			/* The standby: it naps on a word of its own (posts do
			 * not wake it), twice as long after each look that
			 * finds the waiter keeping time, and takes an entry
			 * overdue by SQ_TIMER_TAKEOVER_NS (the waiter is held
			 * up: preempted, or in long work, which gives up the
			 * claim, so the next look takes it over). It leaves
			 * when two looks in a row find nothing listed. */
			if (due == 0) {
				if (idle_since != 0)
					goto leave;
				idle_since = now;
			} else {
				idle_since = 0;
			}
			if (due == 0 || now < due + SQ_TIMER_TAKEOVER_NS) {
				uint64_t until = due + SQ_TIMER_TAKEOVER_NS;
				if (due == 0 || until < now + standby_nap)
					until = now + standby_nap;
				_sq_futex_wait_until(&_sq_ontime.standby_word, 0,
						(sq_time_t)until);
				if (standby_nap < SQ_RUNNER_STANDBY_MAX_NS)
					standby_nap *= 2;
				continue;
			}
		} else if (due == 0) {
			/* Nothing listed: linger a moment for the loop's next
			 * window, so dense deadlines start no runner job each. */
			if (idle_since == 0)
				idle_since = now;
			if (now - idle_since < SQ_RUNNER_LINGER_NS) {
				_sq_ontime_sleep(seq, idle_since +
						SQ_RUNNER_LINGER_NS);
				continue;
			}
			goto leave;
		} else if (now < due) {
			idle_since = 0;
			uint64_t margin = __atomic_load_n(&_sq_margin.margin,
					__ATOMIC_RELAXED);
			if (now + margin + SQ_TIMER_WAKE_COST_NS < due) {
				uint64_t target = due - margin;
				if (_sq_ontime_sleep(seq, target) == ETIMEDOUT)
					_sq_margin_note(target,
							_sq_monotonic_ns());
				continue;
			}
			/* Spin to the deadline; a new, earlier head is spun to
			 * instead, and a later one (the standby took this
			 * entry) is looked at again. */
			uint64_t spin_from = now;
			while (now < due) {
				_sq_cpu_relax();
				uint64_t d = __atomic_load_n(
						&_sq_ontime.head_due,
						__ATOMIC_RELAXED);
				if (d != due && (d == 0 || d > due))
					break;
				due = d;
				now = _sq_monotonic_ns();
			}
			/* Relaxed: a figure for tests and benchmarks. */
			__atomic_add_fetch(&_sq_margin.spun_ns, now - spin_from,
					__ATOMIC_RELAXED);
			if (now < due)
				continue;
		}
		idle_since = 0;
		if (waiter) {
			/* Given up before the work, which may be long. */
			__atomic_store_n(&_sq_ontime.waiter, 0,
					__ATOMIC_RELEASE);
			waiter = false;
		}
		sq_spinlock_lock(&_sq_ontime.lock);
		struct sq_ontime_s *e = _sq_ontime.head;
		if (e == NULL) {
			sq_spinlock_unlock(&_sq_ontime.lock);
			continue;
		}
		if (e->due > _sq_monotonic_ns()) {
			sq_spinlock_unlock(&_sq_ontime.lock);
			continue; /* raced with a post: look again */
		}
		standby_nap = SQ_RUNNER_STANDBY_NS; /* taking entries */
		struct sq_ontime_s *next = e->next;
		_sq_ontime.head = next;
		if (next == NULL)
			_sq_ontime.tail = NULL;
		_sq_ontime_publish();
		/* While it runs e's work this runner is not counted; if it
		 * was the only one and entries are left, a new one takes
		 * the role (see above). */
		bool start = next != NULL && _sq_ontime.runners == 1;
		if (!start)
			__atomic_store_n(&_sq_ontime.runners,
					_sq_ontime.runners - 1,
					__ATOMIC_RELAXED);
		sq_spinlock_unlock(&_sq_ontime.lock);
		if (start)
			_sq_ontime_start_runner();
		e->run(e);
		/* Back for the next entry if there is room: after short work
		 * (the usual case) close deadlines cost no new runner. With
		 * nothing listed it lingers, unless work waits for this
		 * worker (a hand-off the work left runs next, here). */
		bool waiting = _sq_pool_work_waiting();
		sq_spinlock_lock(&_sq_ontime.lock);
		bool again = _sq_ontime.runners < 2 &&
				(_sq_ontime.head != NULL || !waiting);
		if (again)
			__atomic_store_n(&_sq_ontime.runners,
					_sq_ontime.runners + 1,
					__ATOMIC_RELAXED);
		sq_spinlock_unlock(&_sq_ontime.lock);
		if (!again)
			return;
		/* Going on to wait for the next deadline: a queue the work
		 * made runnable must not wait in this worker's slot. */
		_sq_pool_flush_next();
	}
leave:
	/* Nothing listed (checked again under the lock). A waiter that
	 * leaves gives up the claim, and wakes a standby napping on its
	 * word: it lingers in its turn, or leaves too. */
	{
		bool was_waiter = waiter;
		if (waiter) {
			__atomic_store_n(&_sq_ontime.waiter, 0,
					__ATOMIC_RELEASE);
			waiter = false;
		}
		sq_spinlock_lock(&_sq_ontime.lock);
		if (_sq_ontime.head != NULL) {
			sq_spinlock_unlock(&_sq_ontime.lock);
			idle_since = 0;
			goto top; /* a post came in: back to work */
		}
		__atomic_store_n(&_sq_ontime.runners, _sq_ontime.runners - 1,
				__ATOMIC_RELAXED);
		bool other = _sq_ontime.runners > 0;
		sq_spinlock_unlock(&_sq_ontime.lock);
		if (was_waiter && other)
			_sq_futex_wake(&_sq_ontime.standby_word, 1);
	}
}

static void _sq_after_fire(struct sq_timer_s *t, uint64_t now, bool early);

/* A timer the on-time list serves: on its clock (monotonic), with less
 * leeway than a plain wake-up is often late by. */
static inline bool
_sq_timer_is_precise(const struct sq_timer_s *t)
{
	return t->clock == SQ_CLOCK_MONOTONIC &&
			t->latest - t->deadline < SQ_TIMER_PRECISE_NS;
}

/* The same, for a one-shot after. */
static inline bool
_sq_timer_is_precise_after(const struct sq_timer_s *t)
{
	return t->fire == _sq_after_fire && _sq_timer_is_precise(t);
}

/* Whether the wake-up at `wake` needs precision: some timer due by it has
 * less than SQ_TIMER_PRECISE_NS of leeway (the earliest `latest` is
 * close), less than a plain wake-up is often late by. */
static inline bool
_sq_wake_is_precise(int clock, uint64_t wake)
{
	return clock == SQ_CLOCK_MONOTONIC &&
			_sq_loop.heap[clock][1][0]->latest - wake <
			SQ_TIMER_PRECISE_NS;
}

/* Fires every timer on `clock` due by `limit`: as due at `now` if its
 * deadline has passed, otherwise early, at its deadline (`limit` is then
 * SQ_TIMER_AHEAD_NS ahead). An early pass also fires the precise afters
 * due within SQ_TIMER_CHAIN_NS, up to the first other timer: the loop
 * then wakes once for all of them, not once per deadline (and never while
 * the runner spins to one of them, whose CPU it would take on a small
 * machine). One-shot afters only: a repeating timer's next tick would be
 * fired ahead again and again. Returns whether any fired. */
static bool
_sq_timers_fire(int clock, uint64_t now, uint64_t limit)
{
	bool any = false;
	uint64_t after_limit = limit > now ? now + SQ_TIMER_CHAIN_NS : limit;
	while (_sq_loop.heap_count[clock] > 0) {
		struct sq_timer_s *t = _sq_loop.heap[clock][0][0];
		if (t->deadline > after_limit || (t->deadline > limit &&
				!_sq_timer_is_precise_after(t)))
			break;
		_sq_timer_unschedule(t);
		bool early = t->deadline > now;
		SQ_TRACE_TIMER_BEGIN(t, now, t->fire == _sq_after_fire);
		t->fire(t, early ? t->deadline : now, early);
		SQ_TRACE_TIMER_END();
		any = true;
	}
	return any;
}

/*
 * Fires every due timer, then sleeps the libevent timer until the next
 * wake-up (the leeway policy of source.h): the latest deadline that is no
 * later than the earliest `latest`. Every timer due by then fires in that
 * one pass, none is later than its leeway allows, and a timer fires after
 * its deadline only when that pass also serves another timer's deadline.
 * Wall-clock timers are re-checked at least every second so a clock step
 * is noticed. A precise wake-up (see above) is taken early; one pass
 * fires early at most once, so a repeating timer whose interval is below
 * the margin is not fired ahead again and again.
 */
static void
_sq_timers_run(void)
{
	bool fired = false, fired_early = false;
	for (;;) {
		uint64_t sleep_ns = UINT64_MAX;
		bool again = false;
		for (int c = 0; c < 2; c++) {
			uint64_t now = _sq_clock_now(c);
			if (_sq_timers_fire(c, now, now))
				fired = true;
			if (_sq_loop.heap_count[c] == 0)
				continue;
			uint64_t latest = _sq_loop.heap[c][1][0]->latest;
			uint64_t wake = _sq_heap_latest_deadline(c, 0, latest);
			uint64_t wait = wake > now ? wake - now : 0;
			if (c == SQ_CLOCK_WALL && wait > NSEC_PER_SEC)
				wait = NSEC_PER_SEC;
			if (_sq_wake_is_precise(c, wake)) {
				if (wait > SQ_TIMER_AHEAD_NS) {
					wait -= SQ_TIMER_AHEAD_NS;
				} else if (!fired_early) {
					/* Fire early what is due within the
					 * margin (the wake-up's timers and any
					 * others): each waits for its own
					 * deadline, and the loop sleeps
					 * through them. */
					_sq_timers_fire(c, now,
							now + SQ_TIMER_AHEAD_NS);
					fired = fired_early = again = true;
					continue;
				}
			}
			if (wait < sleep_ns)
				sleep_ns = wait;
		}
		if (again)
			continue; /* look at the heaps as they are now */
		if (fired)
			__atomic_store_n(&_sq_timer_wakeups,
					_sq_timer_wakeups + 1, __ATOMIC_RELAXED);
		if (sleep_ns == UINT64_MAX) {
			event_del(_sq_loop.timer_ev);
			return;
		}
		/* Rounded up to libevent's microseconds: waking early would
		 * cost a second pass that fires nothing. */
		uint64_t us = sleep_ns / 1000 + (sleep_ns % 1000 != 0);
		struct timeval tv = {
			.tv_sec = (time_t)(us / 1000000),
			.tv_usec = (suseconds_t)(us % 1000000),
		};
		evtimer_add(_sq_loop.timer_ev, &tv);
		return;
	}
}

static void
_sq_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	_sq_timers_run();
}

/* ---- Commands -------------------------------------------------------- */

static void
_sq_loop_drain_commands(void)
{
	for (;;) {
		struct cds_wfcq_node *n = __cds_wfcq_dequeue_nonblocking(
				&_sq_loop.head, &_sq_loop.tail);
		if (n == NULL)
			break;
		if (n == CDS_WFCQ_WOULDBLOCK) {
			/* A poster is between its two steps; it also wrote
			 * (or will write) the eventfd only if the queue was
			 * empty, so retry now rather than wait. */
			sched_yield();
			continue;
		}
		_sq_tsan_acquire(n);
		struct sq_loop_node_s *node = (struct sq_loop_node_s *)n;
		if (node->kind == SQ_LOOP_SOURCE)
			_sq_source_run_commands(caa_container_of(node,
					struct sq_source_s, node));
		else
			_sq_after_schedule(node);
	}
	_sq_timers_run();
}

static void
_sq_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t count;
	ssize_t r = read(_sq_loop.wake_fd, &count, sizeof(count));
	(void)r;
	_sq_signals_drain();
	_sq_loop_drain_commands();
}

void
_sq_loop_kick(void)
{
	/* Acquire, paired with the release that publishes the eventfd. A
	 * poster that finds the command queue empty follows the loop's last
	 * dequeue (liburcu's exchange on the tail is a full barrier), so it
	 * sees the eventfd made before the loop started; before that there
	 * is none, and the loop drains the queue when it starts. */
	int fd = __atomic_load_n(&_sq_loop.wake_fd, __ATOMIC_ACQUIRE);
	if (fd < 0)
		return;
	uint64_t one = 1;
	ssize_t w = write(fd, &one, sizeof(one));
	(void)w;
}

void
_sq_loop_post(struct sq_loop_node_s *node)
{
	node->link.next = NULL;
	_sq_tsan_release(node);
	/* Wait-free append, a full barrier; wake the loop only when the
	 * queue was empty (the loop drains everything each time). */
	if (!cds_wfcq_enqueue(&_sq_loop.head, &_sq_loop.tail, &node->link))
		_sq_loop_kick();
}

/* ---- libevent's messages --------------------------------------------------
 *
 * libevent writes its warnings to stderr and, on an error it deems fatal,
 * calls exit(). Both come here instead. Its warnings are dropped, except
 * while the loop's base is being made: then a warning means the base is
 * not what was asked for (a timerfd refused, a backend missing), and its
 * errno becomes the start's error. The one fatal error making a base can
 * hit, a signal pipe libevent cannot create for want of descriptors, is
 * avoided by checking that enough are free first (_sq_loop_make_base); if
 * another thread takes them in between, the fatal callback jumps back to
 * the start, which fails with the error. Any other fatal error is an
 * internal assertion of libevent's: after its callback returns libevent
 * calls exit(), so the callback stops the process itself, with the
 * message, through the runtime's one-line report.
 */
/* (Plain thread-locals, not SQ_TLS: cold, and too big for the static TLS
 * room a dlopen'ed library may take.) */
static __thread bool _sq_libevent_making_base;
static __thread int _sq_libevent_error; /* errno of a warning meanwhile */
static __thread jmp_buf _sq_libevent_escape;
static __thread char _sq_libevent_last[256];

static void
_sq_libevent_log(int severity, const char *msg)
{
	int err = errno;
	snprintf(_sq_libevent_last, sizeof(_sq_libevent_last), "%s", msg);
	if (_sq_libevent_making_base && severity >= EVENT_LOG_WARN &&
			_sq_libevent_error == 0)
		_sq_libevent_error = err ? err : EMFILE;
}

static void
_sq_libevent_fatal(int code)
{
	if (_sq_libevent_making_base) {
		if (_sq_libevent_error == 0)
			_sq_libevent_error = EMFILE;
		longjmp(_sq_libevent_escape, 1);
	}
	_sq_client_crash("libevent", "fatal error %d: %s", code,
			_sq_libevent_last[0] ? _sq_libevent_last : "(no message)");
}

/* ---- Starting ------------------------------------------------------------ */

static void *
_sq_loop_main(void *unused)
{
	pthread_setname_np(pthread_self(), "sq.manager");
	_sq_trace_set_role(SQ_ROLE_MANAGER, 0);
	/* Commands posted before the loop existed (an sq_after that waited
	 * for it) woke nobody: take them now. */
	_sq_signals_drain();
	_sq_loop_drain_commands();
	/* Runs until the process exits: no loopbreak is ever needed. */
	event_base_loop(_sq_loop.base, EVLOOP_NO_EXIT_ON_EMPTY);
	_sq_client_crash("sq_source_create", "the event loop stopped");
}

/* libevent's base takes five descriptors: epoll, its timerfd, the two ends
 * of its signal pipe and a notification eventfd. */
#define SQ_LIBEVENT_FDS 5

/* Whether `n` descriptors can be had now: takes and gives them back.
 * Returns 0 or the errno (EMFILE, ENFILE). */
static int
_sq_fds_available(int n)
{
	int fds[SQ_LIBEVENT_FDS], got = 0, err = 0;
	while (got < n) {
		int fd = eventfd(0, EFD_CLOEXEC);
		if (fd < 0) {
			err = errno;
			break;
		}
		fds[got++] = fd;
	}
	while (got > 0)
		close(fds[--got]);
	return err;
}

/* Makes the base, its eventfd and events. Under the start lock. Returns 0
 * or the errno; what was made is kept for the next try. */
static int
_sq_loop_make_base(void)
{
	static bool configured;
	if (!configured) {
		if (evthread_use_pthreads() != 0)
			_sq_client_crash("sq_source_create", "libevent has no "
					"pthreads support");
		event_set_log_callback(_sq_libevent_log);
		event_set_fatal_callback(_sq_libevent_fatal);
		configured = true;
	}
	if (_sq_loop.wake_fd < 0) {
		int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fd < 0)
			return errno;
		/* Release: see _sq_loop_kick. */
		__atomic_store_n(&_sq_loop.wake_fd, fd, __ATOMIC_RELEASE);
	}
	int err = _sq_fds_available(SQ_LIBEVENT_FDS);
	if (err != 0)
		return err;
	struct event_config *cfg = event_config_new();
	if (cfg == NULL)
		return ENOMEM;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	/* Without epoll libevent would fall back to poll or select (a base
	 * that works, slower): rather fail, and have it again later. */
	event_config_avoid_method(cfg, "poll");
	event_config_avoid_method(cfg, "select");
	_sq_libevent_error = 0;
	_sq_libevent_making_base = true;
	struct event_base *base = NULL;
	if (setjmp(_sq_libevent_escape) == 0)
		base = event_base_new_with_config(cfg);
	/* After a jump, the half-made base (some memory and one or two
	 * descriptors) is lost: that happens only when another thread takes
	 * the descriptors counted above in the moment before libevent's. */
	_sq_libevent_making_base = false;
	event_config_free(cfg);
	err = _sq_libevent_error;
	if (base != NULL && err != 0) {
		event_base_free(base);
		base = NULL;
	}
	if (base == NULL)
		return err ? err : ENOMEM;
	struct event *wake_ev = event_new(base, _sq_loop.wake_fd,
			EV_READ | EV_PERSIST, _sq_wake_cb, NULL);
	struct event *timer_ev = evtimer_new(base, _sq_timer_cb, NULL);
	if (wake_ev == NULL || timer_ev == NULL ||
			event_add(wake_ev, NULL) != 0) {
		if (wake_ev)
			event_free(wake_ev);
		if (timer_ev)
			event_free(timer_ev);
		event_base_free(base);
		return ENOMEM;
	}
	_sq_loop.wake_ev = wake_ev;
	_sq_loop.timer_ev = timer_ev;
	_sq_loop.base = base;
	return 0;
}

int
_sq_loop_start(void)
{
	/* Acquire: a caller that sees the loop running sees its set-up. */
	if (SQ_LIKELY(__atomic_load_n(&_sq_loop.running, __ATOMIC_ACQUIRE)))
		return 0;
	pthread_mutex_lock(&_sq_loop_lock);
	int err = 0;
	if (!_sq_loop.running) {
		if (_sq_loop.base == NULL)
			err = _sq_loop_make_base();
		/* The manager starts with every asynchronous signal blocked,
		 * whatever the caller's mask (_sq_thread_start); signal
		 * sources unblock exactly their numbers on the watcher
		 * thread (source.c). Faults stay deliverable. */
		if (err == 0)
			err = _sq_thread_start(_sq_loop_main, NULL, 0);
		if (err == 0)
			__atomic_store_n(&_sq_loop.running, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&_sq_loop_lock);
	return err;
}

bool
_sq_loop_retry(void)
{
	return _sq_loop_start() == 0;
}

/* ---- sq_after ------------------------------------------------------------ */

/* One allocation per sq_after: the entry is the command node, the timer
 * and the submission. */
struct sq_after_s {
	struct sq_loop_node_s node;
	struct sq_timer_s timer;
	struct sq_queue_s *queue;
	void *ctx;
	sq_function_t func;
	sq_workitem_t item; /* sq_after_workitem: submitted instead of func */
	struct sq_ontime_s ontime; /* fired early: waiting for its deadline */
};

/* Submits the after's work (and frees the entry). */
static void
_sq_after_submit(struct sq_after_s *a)
{
	/* The arrow from sq_after_f goes on to the work's run. */
	SQ_TRACE_INHERIT(a->timer.trace_flow);
	if (a->item) {
		sq_async_workitem(a->queue, a->item);
		sq_release(a->item);
	} else {
		sq_async_f(a->queue, a->ctx, a->func);
	}
	SQ_TRACE_INHERIT(0);
	_sq_release_internal(a->queue);
	free(a);
}

/* An after fired early, at its deadline (see "Precise wake-ups"). */
static void
_sq_after_on_time(struct sq_ontime_s *e)
{
	struct sq_after_s *a = caa_container_of(e, struct sq_after_s, ontime);
	/* A root queue's work runs here (as that queue's work), and so does
	 * an idle serial queue's, in order: nothing is queued on it. */
	SQ_TRACE_INHERIT(a->timer.trace_flow);
	bool here = a->item == NULL && _sq_queue_try_run_here_f(a->queue,
			a->ctx, a->func);
	SQ_TRACE_INHERIT(0);
	if (here) {
		struct sq_queue_s *q = a->queue;
		free(a);
		_sq_release_internal(q);
		return;
	}
	_sq_after_submit(a);
}

/* Fired early, the after waits on the on-time list for its deadline. A
 * precise one fired late (the loop itself woke late) goes there too, as
 * due now: the runner is often awake for the close deadlines around it
 * and runs the work at once, where a submission would wait for a worker's
 * wake-up. */
static void
_sq_after_fire(struct sq_timer_s *t, uint64_t now, bool early)
{
	struct sq_after_s *a = caa_container_of(t, struct sq_after_s, timer);
	/* (Every early firing is on the monotonic clock, the list's.) */
	if (early || _sq_timer_is_precise(t)) {
		a->ontime.due = now;
		a->ontime.run = _sq_after_on_time;
		_sq_ontime_post(&a->ontime);
	} else {
		_sq_after_submit(a);
	}
}

void
_sq_after_schedule(struct sq_loop_node_s *node)
{
	struct sq_after_s *a = caa_container_of(node, struct sq_after_s, node);
	_sq_timer_schedule(&a->timer);
}

static void
_sq_after(sq_time_t when, uint64_t leeway, sq_queue_t queue, void *ctx,
		sq_function_t func, sq_workitem_t item)
{
	_sq_object_validate(item ? "sq_after_workitem" : "sq_after_f", queue);
	if (when == SQ_TIME_FOREVER) {
		if (item)
			sq_release(item);
		return;
	}
	if (when == SQ_TIME_NOW) {
		if (item) {
			sq_async_workitem(queue, item);
			sq_release(item);
		} else {
			sq_async_f(queue, ctx, func);
		}
		return;
	}
	struct sq_after_s *a = malloc(sizeof(*a));
	if (a == NULL)
		_sq_client_crash("sq_after_f", "out of memory");
	_sq_timer_init(&a->timer, _sq_after_fire);
	if (when == SQ_WALLTIME_NOW)
		when = sq_walltime(NULL, 0);
	a->timer.clock = (when & SQ_TIME_WALL_FLAG) ? SQ_CLOCK_WALL
			: SQ_CLOCK_MONOTONIC;
	a->timer.deadline = when & ~SQ_TIME_WALL_FLAG;
	/* sq_after_f is on time (no leeway); Swift's Task.sleep passes its
	 * tolerance through sq_after_leeway_f. */
	a->timer.latest = a->timer.deadline + leeway < a->timer.deadline
			? UINT64_MAX : a->timer.deadline + leeway;
	a->node.kind = SQ_LOOP_AFTER;
	a->queue = queue;
	a->ctx = ctx;
	a->func = func;
	a->item = item;
	SQ_TRACE_SUBMIT_ID(a->timer.trace_flow, queue, func, a,
			SQ_SUBMIT_AFTER);
	_sq_retain_internal(queue);
	/* Without a loop (no descriptor or thread for it now), the entry
	 * waits in the command queue; the loop takes it when it starts, on
	 * a later call or on the monitor's retry, and a deadline passed by
	 * then fires at once. The work is late, never lost. */
	bool waits = _sq_loop_start() != 0;
	_sq_loop_post(&a->node);
	if (waits)
		_sq_pool_retry_later(_sq_loop_retry);
}

void
sq_after_f(sq_time_t when, sq_queue_t queue, void *ctx, sq_function_t func)
{
	_SQ_REQUIRE_FUNCTION("sq_after_f", func);
	_sq_after(when, 0, queue, ctx, func, NULL);
}

void
sq_after_leeway_f(sq_time_t when, uint64_t leeway, sq_queue_t queue,
		void *ctx, sq_function_t func)
{
	_SQ_REQUIRE_FUNCTION("sq_after_leeway_f", func);
	_sq_after(when, leeway, queue, ctx, func, NULL);
}

void
sq_after_workitem(sq_time_t when, sq_queue_t queue, sq_workitem_t item)
{
	_sq_object_validate("sq_after_workitem", item);
	sq_retain(item);
	_sq_after(when, 0, queue, NULL, NULL, item);
}

/* ---- fork ---------------------------------------------------------------- */

void
_sq_loop_atfork_child(void)
{
	/* The base (and its epoll set, shared with the parent) is dropped,
	 * not freed: freeing would delete the parent's registrations. The
	 * timer entries belong to the parent's sources and sq_after calls;
	 * they do not fire in the child. */
	if (_sq_loop.wake_fd >= 0)
		close(_sq_loop.wake_fd);
	for (int c = 0; c < 2; c++)
		for (int w = 0; w < 2; w++)
			free(_sq_loop.heap[c][w]);
	memset(&_sq_loop, 0, sizeof(_sq_loop));
	__cds_wfcq_init(&_sq_loop.head, &_sq_loop.tail);
	pthread_mutex_init(&_sq_loop_lock, NULL);
	/* The on-time list too: its entries are the parent's timers, and a
	 * runner the parent had counted does not exist here (left counted,
	 * no runner would ever start again). */
	memset(&_sq_ontime, 0, sizeof(_sq_ontime));
	/* The margin's lessons hold in the child; its lock may have been
	 * held by a thread that does not exist here. */
	_sq_margin.lock = (sq_spinlock_t)SQ_SPINLOCK_INIT;
	_sq_loop.wake_fd = -1;
	_sq_timer_wakeups = 0;
}
