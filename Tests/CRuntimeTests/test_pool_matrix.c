/*
 * The pool's wake-up protocol at every width: the stress scenarios below run
 * in a child process per pool width (SQ_WORKERS = 1, 2, 3, 4, 8, 16), once
 * with the monitor's safety net off (SQ_MONITOR_NET=0) and once with it on.
 *
 * With the net off, a lost wake-up (a job in a run queue while every worker
 * that could take it sleeps) is a round that never finishes; each round
 * waits at most a few seconds, so the verdict does not depend on timing:
 * the round fails. With the net on, the net must never have fired
 * (sq_pool_stats().net_firings == 0): a firing is a lost wake-up the net
 * papered over.
 *
 * Scenarios, each a number of rounds with random idle gaps (0-2 ms) between
 * them, so workers are spinning, parking or asleep when work arrives:
 *   pairs     the main thread hands one task to each of two serial queues;
 *             the first waits until the second has started
 *   bursts    1-64 tasks from the main thread on a random global queue
 *   chains    50-link chains, each link submitted by the previous one (from
 *             a worker, into its local ring) to a global or serial queue
 *   stealing  a worker submits a waiting pair to its own ring: the first
 *             blocks its worker, so another worker must steal the second
 *   barriers  a concurrent queue with a mix of tasks and barriers; the
 *             barriers check that they run alone
 *   slots     the next-job slot (what Swift tasks use): a worker puts the
 *             second half of a waiting pair in its slot and runs the first
 *             itself, so the second runs only if another worker takes it
 *             from the slot; then 50-link chains through the slots (each
 *             link displacing nothing, or the previous link into the ring)
 *   hops      hand-offs between serial queues, which go to the submitting
 *             worker's next-job slot: ping-pong chains of random length
 *             (up to 30,000 hops; 3,000 in chaos and sanitizer builds),
 *             started from the main thread or by an sq_after handler; in
 *             some one hop blocks after its submission until the next hop
 *             has started (another worker must take it from the slot, after
 *             a chain long enough for the slots' guard to nap), in others
 *             the chain runs until a task submitted to a global queue
 *             stops it (the chain must not starve it)
 *
 * A round's verdict is progress, not speed: under CPU contention a chaos
 * build runs a hop chain 50x slower than on a quiet machine, so a round
 * fails when it has stopped moving for ROUND_TIMEOUT_MS (no round finished,
 * no hop run), and the parent kills a child that has reported no progress
 * for STALL_S seconds (each round reports through a pipe).
 *
 * SQT_MATRIX_SCALE (percent, default 100) scales the rounds; SQT_MATRIX_WIDTHS
 * ("1 2 3 4 8 16") picks the widths. Chaos builds (-DSQ_CHAOS) run the same
 * scenarios with random delays injected into the protocol's steps.
 */
#include "queue_helpers.h"

#include <fcntl.h>
#include <spawn.h>

extern char **environ;

#define ROUND_TIMEOUT_MS 8000u
/* The parent's verdict: a child silent this long is hung. */
#define STALL_S 120u

/* The write end of the progress pipe in the child (-1: none). */
static int progress_fd = -1;

/* One byte to the parent: the child is moving. A full pipe (the parent
 * drains it every 20 ms) loses the byte, which is harmless. */
static void
progress(void)
{
	if (progress_fd >= 0) {
		char b = 0;
		ssize_t n = write(progress_fd, &b, 1);
		(void)n;
	}
}

static unsigned scale_percent = 100;

static int
rounds_of(int normal)
{
	int n = (int)((long)normal * scale_percent / 100);
	if (SQT_TSAN)
		n /= 10;
	else if (SQT_ASAN)
		n /= 4;
	return n < 20 ? 20 : n;
}

/* xorshift; one state per thread (only the main thread uses it). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(uint32_t bound)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % bound);
}

static void
spin_us(unsigned us)
{
	uint64_t end = sqt_now_ns() + (uint64_t)us * 1000u;
	while (sqt_now_ns() < end) {
	}
}

/* An idle gap between rounds: none, a few microseconds (spun, so the
 * pool's spinner is caught at every point of its rounds), or up to 2 ms
 * asleep (workers park). */
static void
idle_gap(void)
{
	progress();
	uint32_t r = rnd(100);
	if (r < 40)
		return;
	if (r < 85)
		spin_us(rnd(60));
	else
		sqt_sleep_us(100 + rnd(1900));
}

static sq_queue_t
random_global(void)
{
	static const long prios[] = {
		SQ_QUEUE_PRIORITY_HIGH, SQ_QUEUE_PRIORITY_DEFAULT,
		SQ_QUEUE_PRIORITY_LOW, SQ_QUEUE_PRIORITY_BACKGROUND,
	};
	return sq_get_global_queue(prios[rnd(4)], 0);
}

static void
report(const char *name, int rounds, int done, uint64_t t0)
{
	printf("  %-9s %6d/%d rounds in %6.0f ms\n", name, done, rounds,
			sqt_ms_since(t0));
	fflush(stdout);
}

/* ---- pairs ---------------------------------------------------------------- */

static void
handshake_init(struct handshake *h)
{
	sem_init(&h->a_to_b, 0, 0);
	sem_init(&h->b_to_a, 0, 0);
	sem_init(&h->done, 0, 0);
	atomic_init(&h->ok, 0);
}

static void
handshake_destroy(struct handshake *h)
{
	sem_destroy(&h->a_to_b);
	sem_destroy(&h->b_to_a);
	sem_destroy(&h->done);
}

/* Both sides finished and met. A stalled round leaves the handshake's
 * tasks possibly still queued: the caller stops the scenario (and leaks
 * the round's memory) rather than free what a late task may touch. */
static bool
handshake_finished(struct handshake *h)
{
	return sqt_sem_wait_ms(&h->done, ROUND_TIMEOUT_MS) &&
			sqt_sem_wait_ms(&h->done, ROUND_TIMEOUT_MS) &&
			atomic_load(&h->ok) == 2;
}

static void
scenario_pairs(void)
{
	int rounds = rounds_of(5000), i;
	uint64_t t0 = sqt_now_ns();
	sq_queue_t qa = sq_queue_create("matrix.pair.a", NULL);
	sq_queue_t qb = sq_queue_create("matrix.pair.b", NULL);
	for (i = 0; i < rounds; i++) {
		struct handshake *h = malloc(sizeof(*h));
		handshake_init(h);
		idle_gap();
		sq_async_f(qa, h, handshake_a);
		sq_async_f(qb, h, handshake_b);
		if (!handshake_finished(h)) {
			fprintf(stderr, "pairs: round %d stalled\n", i);
			break;
		}
		handshake_destroy(h);
		free(h);
	}
	CHECK_EQ(i, rounds);
	report("pairs", rounds, i, t0);
	if (i == rounds) {
		sq_release(qa);
		sq_release(qb);
	}
}

/* ---- bursts --------------------------------------------------------------- */

struct burst {
	atomic_int left;
	sem_t done;
};

static void
burst_task(void *arg)
{
	struct burst *b = arg;
	if (atomic_fetch_sub(&b->left, 1) == 1)
		sem_post(&b->done);
}

static void
scenario_bursts(void)
{
	int rounds = rounds_of(5000), i;
	uint64_t t0 = sqt_now_ns();
	struct burst b;
	sem_init(&b.done, 0, 0);
	for (i = 0; i < rounds; i++) {
		int n = 1 + (int)rnd(64);
		atomic_store(&b.left, n);
		idle_gap();
		sq_queue_t q = random_global();
		for (int k = 0; k < n; k++)
			sq_async_f(q, &b, burst_task);
		if (!sqt_sem_wait_ms(&b.done, ROUND_TIMEOUT_MS)) {
			fprintf(stderr, "bursts: round %d stalled with %d of "
					"%d tasks not run\n", i,
					atomic_load(&b.left), n);
			break;
		}
	}
	CHECK_EQ(i, rounds);
	report("bursts", rounds, i, t0);
	if (i == rounds)
		sem_destroy(&b.done);
}

/* ---- chains --------------------------------------------------------------- */

struct chain {
	sq_queue_t serial;
	atomic_int links;
	sem_t done;
};

static void chain_link(void *arg);

static void
chain_link(void *arg)
{
	struct chain *c = arg;
	int left = atomic_fetch_sub(&c->links, 1) - 1;
	if (left == 0) {
		sem_post(&c->done);
		return;
	}
	/* From a worker: to the global queue it runs (its own ring) or to
	 * a serial queue; a short spin lets idle workers try to steal. */
	if (left % 3 == 0)
		sq_async_f(c->serial, c, chain_link);
	else
		sq_async_f(sq_get_global_queue(0, 0), c, chain_link);
	if (left % 7 == 0)
		spin_us(2);
}

static void
scenario_chains(void)
{
	int rounds = rounds_of(2000), i;
	uint64_t t0 = sqt_now_ns();
	struct chain c;
	c.serial = sq_queue_create("matrix.chain", NULL);
	sem_init(&c.done, 0, 0);
	for (i = 0; i < rounds; i++) {
		atomic_store(&c.links, 50);
		idle_gap();
		sq_async_f(sq_get_global_queue(0, 0), &c, chain_link);
		if (!sqt_sem_wait_ms(&c.done, ROUND_TIMEOUT_MS)) {
			fprintf(stderr, "chains: round %d stalled with %d "
					"links left\n", i,
					atomic_load(&c.links));
			break;
		}
	}
	CHECK_EQ(i, rounds);
	report("chains", rounds, i, t0);
	if (i == rounds) {
		sq_release(c.serial);
		sem_destroy(&c.done);
	}
}

/* ---- stealing ------------------------------------------------------------- */

/* Runs on a worker of the default global queue: both halves of the pair go
 * to that worker's own ring. It takes the first and blocks in it, so the
 * second reaches a thread only if a submission woke another worker that
 * steals it (or, at width 1, the monitor adds one for the blocked worker). */
static void
steal_start(void *arg)
{
	struct handshake *h = arg;
	sq_queue_t q = sq_get_global_queue(0, 0);
	sq_async_f(q, h, handshake_a);
	sq_async_f(q, h, handshake_b);
}

static void
scenario_stealing(void)
{
	int rounds = rounds_of(3000), i;
	uint64_t t0 = sqt_now_ns();
	for (i = 0; i < rounds; i++) {
		struct handshake *h = malloc(sizeof(*h));
		handshake_init(h);
		idle_gap();
		sq_async_f(sq_get_global_queue(0, 0), h, steal_start);
		if (!handshake_finished(h)) {
			fprintf(stderr, "stealing: round %d stalled\n", i);
			break;
		}
		handshake_destroy(h);
		free(h);
	}
	CHECK_EQ(i, rounds);
	report("stealing", rounds, i, t0);
}

/* ---- slots ---------------------------------------------------------------- */

/* Hidden in the shared library, linked statically here. */
void _sq_root_async_next_f(int root_index, void *ctx, sq_function_t func);

/* On a worker: b goes to this worker's next-job slot, then a blocks the
 * worker until b has started, so b must be taken from the slot by another
 * worker (at width 1, one the monitor adds for the blocked worker). */
static atomic_uint slot_round;

static void
slot_steal_start(void *arg)
{
	struct handshake *h = arg;
	int root = (int)(atomic_fetch_add(&slot_round, 1) % 4);
	_sq_root_async_next_f(root, h, handshake_b);
	handshake_a(h);
}

static void
slot_nop(void *arg)
{
}

static void
slot_link(void *arg)
{
	struct chain *c = arg;
	int left = atomic_fetch_sub(&c->links, 1) - 1;
	if (left == 0) {
		sem_post(&c->done);
		return;
	}
	/* One link in four first submits a no-op, which the next link
	 * displaces from the slot into the ring (or a root queue). Roots
	 * vary, so the worker's slot, ring and roots all get used. */
	if (left % 4 == 0)
		_sq_root_async_next_f(left % 3, NULL, slot_nop);
	_sq_root_async_next_f((left / 2) % 4, c, slot_link);
	if (left % 7 == 0)
		spin_us(2);
}

static void
scenario_slots(void)
{
	int rounds = rounds_of(2000), i;
	uint64_t t0 = sqt_now_ns();
	for (i = 0; i < rounds; i++) {
		struct handshake *h = malloc(sizeof(*h));
		handshake_init(h);
		idle_gap();
		sq_async_f(random_global(), h, slot_steal_start);
		if (!handshake_finished(h)) {
			fprintf(stderr, "slots: steal round %d stalled\n", i);
			break;
		}
		handshake_destroy(h);
		free(h);
	}
	CHECK_EQ(i, rounds);
	int chains = rounds_of(2000), j;
	struct chain c;
	sem_init(&c.done, 0, 0);
	for (j = 0; i == rounds && j < chains; j++) {
		atomic_store(&c.links, 50);
		idle_gap();
		sq_async_f(sq_get_global_queue(0, 0), &c, slot_link);
		if (!sqt_sem_wait_ms(&c.done, ROUND_TIMEOUT_MS)) {
			fprintf(stderr, "slots: chain %d stalled with %d "
					"links left\n", j,
					atomic_load(&c.links));
			break;
		}
	}
	CHECK_EQ(j, chains);
	report("slots", rounds + chains, i + j, t0);
	if (j == chains)
		sem_destroy(&c.done);
}

/* ---- hops ----------------------------------------------------------------- */

/* Hidden in the shared library, linked statically here. */
void _sq_debug_pool_handoffs(uint64_t *handoffs, uint64_t *guard_takes,
		uint64_t *guard_naps);

struct hops {
	sq_queue_t a, b;
	atomic_int left;         /* hops still to run */
	int block_at;            /* this hop waits for the next one; -1: none */
	atomic_bool next_started;
	atomic_int blocked_ok;   /* the blocking hop saw the next one start */
	atomic_int blocked_done; /* blocking hops that have stopped waiting */
	atomic_bool stop;        /* set by the stopper task */
	bool until_stopped;      /* the chain runs until stopped */
	sem_t done;
};

static void hop_b(void *arg);

/* One hop: submits the next one to the other queue, which is idle, so the
 * next hop goes to this worker's slot. */
static void
hop_run(struct hops *h, sq_queue_t next, sq_function_t fn)
{
	/* Read before the submission: once the next hop runs, the round may
	 * end and the main thread set up the next one. */
	int block_at = h->block_at;
	int left = atomic_fetch_sub(&h->left, 1) - 1;
	if (left == block_at - 1)
		atomic_store(&h->next_started, true);
	if (left == 0 || (h->until_stopped && atomic_load(&h->stop))) {
		sem_post(&h->done);
		return;
	}
	sq_async_f(next, h, fn);
	if (left == block_at) {
		/* Block this worker: the next hop, in its slot, must be taken
		 * by another one (at width 1, one the monitor adds). */
		uint64_t end = sqt_now_ns() + 5000000000ull;
		while (!atomic_load(&h->next_started) && sqt_now_ns() < end)
			sqt_sleep_us(50);
		if (atomic_load(&h->next_started))
			atomic_fetch_add(&h->blocked_ok, 1);
		atomic_fetch_add(&h->blocked_done, 1);
	}
}

static void
hop_a(void *arg)
{
	struct hops *h = arg;
	hop_run(h, h->b, hop_b);
}

static void
hop_b(void *arg)
{
	struct hops *h = arg;
	hop_run(h, h->a, hop_a);
}

/* Long chains: long enough for the slots' guard to nap at its longest
 * (well over a millisecond of hops); shorter where hops are slow. */
#if defined(SQ_CHAOS) || SQT_SANITIZED
#define HOPS_LONG 3000
#else
#define HOPS_LONG 30000
#endif

static void
hop_stopper(void *arg)
{
	atomic_store(&((struct hops *)arg)->stop, true);
}

static void
hop_nop(void *arg)
{
}

static void
scenario_hops(void)
{
	int rounds = rounds_of(3000), i, blocking = 0, stopped = 0;
	uint64_t t0 = sqt_now_ns();
	uint64_t h0, t0_takes, n0;
	_sq_debug_pool_handoffs(&h0, &t0_takes, &n0);
	/* Static: a task of a stalled round may still touch it. */
	static struct hops h;
	h.a = sq_queue_create("matrix.hop.a", NULL);
	h.b = sq_queue_create("matrix.hop.b", NULL);
	sem_init(&h.done, 0, 0);
	atomic_init(&h.blocked_ok, 0);
	atomic_init(&h.blocked_done, 0);
	for (i = 0; i < rounds; i++) {
		uint32_t kind = rnd(8);
		int len = kind < 2 ? 2 + (int)rnd(HOPS_LONG) : 2 + (int)rnd(300);
		h.until_stopped = kind == 2;
		atomic_store(&h.left, h.until_stopped ? INT32_MAX : len);
		h.block_at = kind < 2 ? 1 + (int)rnd((uint32_t)len - 1) : -1;
		atomic_store(&h.next_started, false);
		atomic_store(&h.stop, false);
		int ok_before = atomic_load(&h.blocked_ok);
		idle_gap();
		if (rnd(4) == 0) {
			/* Started by an after: the first hop runs on the precise
			 * timers' runner; sometimes a second after keeps the
			 * runner going, so the hop must leave its slot. */
			uint64_t delay = 20000 + rnd(300000);
			sq_after_f(sq_time(SQ_TIME_NOW, (int64_t)delay), h.a,
					&h, hop_a);
			if (rnd(2))
				sq_after_f(sq_time(SQ_TIME_NOW, (int64_t)delay +
						30000), sq_get_global_queue(0,
						0), NULL, hop_nop);
		} else {
			sq_async_f(h.a, &h, hop_a);
		}
		if (h.until_stopped) {
			sqt_sleep_us(rnd(2000));
			sq_async_f(random_global(), &h, hop_stopper);
			stopped++;
		}
		/* A chain that is still hopping is not stalled, however slow
		 * (a stopped chain must stop within the timeout: that is the
		 * slots' guard letting the stopper run). */
		int seen = atomic_load(&h.left);
		bool finished;
		while (!(finished = sqt_sem_wait_ms(&h.done, ROUND_TIMEOUT_MS)) &&
				!h.until_stopped && atomic_load(&h.left) != seen) {
			seen = atomic_load(&h.left);
			progress();
		}
		if (!finished) {
			fprintf(stderr, "hops: round %d (%s) stalled with %d "
					"hops left\n", i, h.until_stopped ?
					"until stopped" : h.block_at >= 0 ?
					"blocking" : "plain",
					atomic_load(&h.left));
			break;
		}
		if (h.block_at >= 0) {
			/* The chain may end before the blocked hop has looked. */
			blocking++;
			uint64_t end = sqt_now_ns() + ROUND_TIMEOUT_MS * 1000000ull;
			while (atomic_load(&h.blocked_done) != blocking &&
					sqt_now_ns() < end)
				sqt_sleep_us(50);
			if (atomic_load(&h.blocked_ok) != ok_before + 1) {
				fprintf(stderr, "hops: round %d: the hop after "
						"a blocked one did not start\n",
						i);
				break;
			}
		}
	}
	CHECK_EQ(i, rounds);
	uint64_t h1, t1_takes, n1;
	_sq_debug_pool_handoffs(&h1, &t1_takes, &n1);
	report("hops", rounds, i, t0);
	printf("            %d blocking, %d stopped; %llu hand-offs, %llu "
			"taken by the guard, %llu guard naps\n", blocking,
			stopped, (unsigned long long)(h1 - h0),
			(unsigned long long)(t1_takes - t0_takes),
			(unsigned long long)(n1 - n0));
	/* Every blocked hop's successor was taken from a slot. */
	CHECK(i < rounds || t1_takes - t0_takes >= (uint64_t)blocking);
	if (i == rounds) {
		sq_release(h.a);
		sq_release(h.b);
		sem_destroy(&h.done);
	}
}

/* ---- barriers ------------------------------------------------------------- */

struct barrier_round {
	atomic_int running;    /* plain tasks running now */
	atomic_int finished;   /* items finished */
	atomic_int violations; /* a barrier that did not run alone */
	sem_t done;
};

struct barrier_item {
	struct barrier_round *r;
	int before; /* items submitted before this one */
	bool last;
};

static void
barrier_plain(void *arg)
{
	struct barrier_item *it = arg;
	atomic_fetch_add(&it->r->running, 1);
	if (it->before % 5 == 0)
		spin_us(1);
	atomic_fetch_sub(&it->r->running, 1);
	atomic_fetch_add(&it->r->finished, 1);
}

static void
barrier_barrier(void *arg)
{
	struct barrier_item *it = arg;
	struct barrier_round *r = it->r;
	/* Alone, and after everything submitted before it. */
	if (atomic_load(&r->running) != 0 ||
			atomic_load(&r->finished) != it->before)
		atomic_fetch_add(&r->violations, 1);
	atomic_fetch_add(&r->finished, 1);
	if (it->last)
		sem_post(&r->done);
}

#define BARRIER_ITEMS 24

static void
scenario_barriers(void)
{
	int rounds = rounds_of(2000), i;
	uint64_t t0 = sqt_now_ns();
	sq_queue_t q = sq_queue_create("matrix.barriers", SQ_QUEUE_CONCURRENT);
	struct barrier_round r;
	struct barrier_item items[BARRIER_ITEMS];
	sem_init(&r.done, 0, 0);
	atomic_init(&r.violations, 0);
	for (i = 0; i < rounds; i++) {
		atomic_store(&r.running, 0);
		atomic_store(&r.finished, 0);
		idle_gap();
		for (int k = 0; k < BARRIER_ITEMS; k++) {
			bool last = k == BARRIER_ITEMS - 1;
			items[k] = (struct barrier_item){ &r, k, last };
			if (last || rnd(4) == 0)
				sq_barrier_async_f(q, &items[k],
						barrier_barrier);
			else
				sq_async_f(q, &items[k], barrier_plain);
		}
		if (!sqt_sem_wait_ms(&r.done, ROUND_TIMEOUT_MS)) {
			fprintf(stderr, "barriers: round %d stalled with "
					"%d items finished\n", i,
					atomic_load(&r.finished));
			break;
		}
	}
	CHECK_EQ(i, rounds);
	CHECK_EQ(atomic_load(&r.violations), 0);
	report("barriers", rounds, i, t0);
	if (i == rounds) {
		sq_release(q);
		sem_destroy(&r.done);
	}
}

/* ---- child and parent -------------------------------------------------- */

static int
run_child(void)
{
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	const char *net = getenv("SQ_MONITOR_NET");
	bool net_on = !(net && strcmp(net, "0") == 0);
	printf("width %u, safety net %s%s:\n", st.width, net_on ? "on" : "off",
#ifdef SQ_CHAOS
			" (chaos)"
#else
			""
#endif
	);
	CHECK_EQ(st.net_enabled, net_on);

	scenario_pairs();
	scenario_bursts();
	scenario_chains();
	scenario_stealing();
	scenario_barriers();
	scenario_slots();
	scenario_hops();

	sq_pool_stats(&st);
	/* The monitor started with the first worker. */
	CHECK(st.monitor_running);
	printf("  pool: %u live, %llu wake-ups, %llu spawned (%llu by the "
			"monitor), net fired %llu times\n", st.live,
			(unsigned long long)st.wakeups,
			(unsigned long long)st.spawned,
			(unsigned long long)st.compensated,
			(unsigned long long)st.net_firings);
	CHECK_EQ(st.net_firings, 0);
	fflush(stdout);
	/* Exit without waiting for anything a failed round left behind. */
	_exit(sqt_failed ? 1 : 0);
}

/* Runs this program as a child with the given width and net setting;
 * true if it passed, and never silent for `stall_s` seconds on end. */
static bool
run_width(int width, bool net, unsigned stall_s)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return false;
	self[n] = '\0';
	int fds[2];
	if (pipe2(fds, O_NONBLOCK) != 0)
		return false;
	fcntl(fds[0], F_SETFD, FD_CLOEXEC);
	char w[16], fd[16];
	snprintf(w, sizeof(w), "%d", width);
	snprintf(fd, sizeof(fd), "%d", fds[1]);
	setenv("SQT_MATRIX_CHILD", "1", 1);
	setenv("SQT_MATRIX_PROGRESS_FD", fd, 1);
	setenv("SQ_WORKERS", w, 1);
	setenv("SQ_MONITOR_NET", net ? "1" : "0", 1);
	char *argv[] = { self, NULL };
	pid_t pid;
	int spawned = posix_spawn(&pid, self, NULL, NULL, argv, environ);
	close(fds[1]);
	if (spawned != 0) {
		close(fds[0]);
		return false;
	}
	uint64_t last = sqt_now_ns();
	int status = 0;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		char buf[256];
		if (read(fds[0], buf, sizeof(buf)) > 0)
			last = sqt_now_ns();
		if (sqt_now_ns() - last > (uint64_t)stall_s * 1000000000ull) {
			fprintf(stderr, "width %d: no progress for %u s, "
					"killed\n", width, stall_s);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			close(fds[0]);
			return false;
		}
		sqt_sleep_ms(20);
	}
	close(fds[0]);
	if (WIFSIGNALED(status))
		fprintf(stderr, "width %d: child killed by signal %d\n", width,
				WTERMSIG(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int
main(void)
{
	const char *s = getenv("SQT_MATRIX_SCALE");
	if (s && atoi(s) > 0)
		scale_percent = (unsigned)atoi(s);
	if (getenv("SQT_MATRIX_CHILD")) {
		const char *fd = getenv("SQT_MATRIX_PROGRESS_FD");
		if (fd != NULL)
			progress_fd = atoi(fd);
		return run_child();
	}

	const char *list = getenv("SQT_MATRIX_WIDTHS");
	if (list == NULL || *list == '\0')
		list = "1 2 3 4 8 16";
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", list);
	uint64_t t0 = sqt_now_ns();
	for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,")) {
		int width = atoi(tok);
		if (width < 1)
			continue;
		for (int net = 0; net <= 1; net++) {
			bool ok = run_width(width, net, SQT_TSAN ? 3 * STALL_S : STALL_S);
			if (!ok)
				fprintf(stderr, "FAIL width %d, net %s\n",
						width, net ? "on" : "off");
			CHECK(ok);
		}
	}
	printf("pool matrix: %.1f s\n", sqt_ms_since(t0) / 1000);
	return sqt_finish("test_pool_matrix");
}
