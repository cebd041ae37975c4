/*
 * Liveness: no job is stranded behind a blocked thread.
 *
 * Each scenario runs in a child process of its own (SQ_WORKERS,
 * SQ_MAX_THREADS and SQ_MONITOR_NET set in the child before its first sq_
 * call), watched by the parent, which never calls the runtime: the parent
 * polls the child every 10 ms and reads the child's progress counters from
 * shared memory. A child that makes no progress for SQT_LIVENESS_STALL_S
 * seconds (default 5; 0: off) or runs past the scenario's deadline
 * (SQT_LIVENESS_DEADLINE_S, default 15 s) is killed and the scenario fails
 * with its settings, phase and counters: a hang is a failed check, never a
 * hung test program. The child makes the scenario's own checks (every item
 * done, a right sum) and hands its counts to the parent.
 *
 * Scenarios:
 *   1 cache      N items on the default global queue (a group), each sleeps
 *                200-1000 us, sq_sync_f's a read onto a serial "cache"
 *                queue, then sq_async_f's an increment onto it; the main
 *                thread polls sq_group_wait (1 s) until done or the
 *                deadline, drains "cache" with sq_sync_f; reads == N and
 *                the counter == N.
 *   2 cache-nosleep  the same without the sleep.
 *   3 pileup     SQ_MAX_THREADS 4 and 16: items keep arriving on the global
 *                queue and all sq_sync_f onto one serial queue whose body
 *                sleeps 100 us; every item completes.
 *   4 service    a serial "catalog" queue with a 100 ms timer whose handler
 *                holds it ~60 ms; a serial intake queue hands batches (a
 *                group each, waited for) to a concurrent "workers" queue;
 *                each request sq_sync_f's onto a serial "pricecache", one in
 *                8 (a miss) also onto "catalog", and replies via sq_async_f
 *                onto a serial responder; ~1.5 s at a few hundred
 *                requests/s; every request answered exactly once.
 *   5 fork-join  naive parallel fib: a task above the cutoff submits
 *                fib(n-1) (sq_group_spawn_f) and fib(n-2) (sq_group_async_f)
 *                to the default global queue in a group of its own and
 *                waits for it (SQ_TIME_FOREVER);
 *                fib(22), cutoff 10 (SQT_LIVENESS_FIB="27,12" for the
 *                spec's full size); the sum must be right; reports the peak
 *                of sq_pool_stats().live.
 *   6 slot       a job on a global queue sq_async_f's onto an idle serial
 *                queue S (the job lands in its worker's next-job slot),
 *                then computes for 300 ms, while two serial queues
 *                ping-pong a chain of hand-offs; S's job must start within
 *                100 ms at SQ_WORKERS >= 2 (reported only at 1).
 *
 * Scenarios 1-6 run at SQ_WORKERS = 1, 2, 4, 8, 16 (SQT_LIVENESS_WIDTHS),
 * SQ_MONITOR_NET=0 for half of them (alternating), then each once more at
 * SQ_WORKERS=2 "under CPU contention": two busy-loop processes run beside
 * the scenario's child and are killed (by pid) after it, pass or fail.
 *
 * Environment: SQT_LIVENESS_SCALE (sizes, default 1), SQT_LIVENESS_REPEAT
 * (rounds of the whole matrix, for soak runs; default 1),
 * SQT_LIVENESS_ONLY ("1,4": only those scenarios), SQT_LIVENESS_WIDTHS,
 * SQT_LIVENESS_DEADLINE_S, SQT_LIVENESS_STALL_S, SQT_LIVENESS_FIB
 * ("n,cutoff"), SQT_LIVENESS_CONTENTION=0 (skip the contention pass).
 *
 * SQT_LIVENESS_SABOTAGE=hang|lose|wrong checks the checks: in every scenario
 * one job then blocks forever (hang), one item's effect goes missing (lose:
 * an increment, a body, a reply, a leaf's value, S's job), or one result is
 * off (wrong: a double increment, a duplicate reply, fib off by one, S's
 * start reported 200 ms late). Every scenario must then fail.
 */
#include "queue_helpers.h"

#include <sys/mman.h>
#include <sys/prctl.h>

#define NCTR 6

/* Shared between the parent and the scenario's child (MAP_SHARED). */
struct shared {
	atomic_long ctr[NCTR];  /* the scenario's progress counters */
	atomic_long peak_live;  /* sq_pool_stats().live, the peak seen */
	atomic_int finished;    /* the child wrote its verdict */
	int passed, failed;     /* the child's checks */
	char phase[64];         /* what the child's main thread is doing */
	char info[512];         /* the child's one-line result */
};

static struct shared *sh;

struct scenario {
	int id;
	const char *name;
	void (*run)(void);
	const char *ctr[NCTR];
};

struct config {
	const struct scenario *sc;
	int width;
	int max_threads; /* 0: SQ_MAX_THREADS left as the environment has it */
	bool net;
	bool contention;
};

/* ---- settings ------------------------------------------------------------ */

static double scale = 1.0;
static unsigned deadline_s = 15, stall_s = 5;
static int fib_n = 22, fib_cutoff = 10;

enum { SAB_NONE, SAB_HANG, SAB_LOSE, SAB_WRONG };
static int sabotage;
static atomic_int sabotaged; /* in the child: the sabotage happened once */

/* True once per child, for the sabotage asked for. */
static bool
sabotage_now(int kind)
{
	return sabotage == kind && atomic_exchange(&sabotaged, 1) == 0;
}

static void
hang_forever(void)
{
	for (;;)
		sleep(1000);
}

static int
scaled(int normal)
{
	double n = normal * scale;
	if (SQT_SANITIZED)
		n /= 4;
	return n < 1 ? 1 : (int)n;
}

/* ---- the child's side ------------------------------------------------------ */

static const struct config *cur; /* the child's configuration */
static char cur_desc[256];
static uint64_t child_deadline;

static void
describe(const struct config *c, char *buf, size_t size)
{
	char mt[32] = "";
	if (c->max_threads > 0)
		snprintf(mt, sizeof(mt), " SQ_MAX_THREADS=%d", c->max_threads);
	snprintf(buf, size, "scenario %d (%s) SQ_WORKERS=%d%s SQ_MONITOR_NET=%d%s",
			c->sc->id, c->sc->name, c->width, mt, c->net ? 1 : 0,
			c->contention ? " under CPU contention" : "");
}

/* A check in the child; a failure says which scenario and settings, and
 * what went wrong (fmt: a literal). */
#define CHILD_CHECK(cond, fmt, ...)                                            \
	do {                                                                   \
		if (cond) {                                                    \
			sqt_passed++;                                          \
		} else {                                                       \
			sqt_failed++;                                          \
			fprintf(stderr, "FAIL %s:%d: [%s] " fmt "\n",          \
					__FILE__, __LINE__, cur_desc,          \
					##__VA_ARGS__);                        \
		}                                                              \
	} while (0)

static void
phase(const char *what)
{
	snprintf(sh->phase, sizeof(sh->phase), "%s", what);
}

static void
bump(int i)
{
	atomic_fetch_add_explicit(&sh->ctr[i], 1, memory_order_relaxed);
}

static long
ctr(int i)
{
	return atomic_load(&sh->ctr[i]);
}

static bool
child_past_deadline(void)
{
	return sqt_now_ns() > child_deadline;
}

static void
sample_live(void)
{
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	long old = atomic_load(&sh->peak_live), v = (long)st.live;
	while (v > old && !atomic_compare_exchange_weak(&sh->peak_live, &old, v)) {
	}
}

/* Waits for a group, sq_group_wait'ing `step_ms` at a time, until it empties
 * or the child's deadline passes; samples the pool between waits. */
static bool
wait_group(sq_group_t g, unsigned step_ms)
{
	for (;;) {
		sample_live();
		if (sq_group_wait(g, sq_time(SQ_TIME_NOW,
				(int64_t)step_ms * (int64_t)NSEC_PER_MSEC)) == 0)
			return true;
		if (child_past_deadline())
			return false;
	}
}

/* Waits until counter i reaches target or the child's deadline passes. */
static bool
wait_ctr(int i, long target)
{
	while (ctr(i) < target) {
		if (child_past_deadline())
			return false;
		sqt_sleep_ms(2);
	}
	return true;
}

static void
spin_ns(uint64_t ns)
{
	uint64_t end = sqt_now_ns() + ns;
	while (sqt_now_ns() < end) {
	}
}

static uint32_t
mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

static const char *
pool_summary(void)
{
	static char buf[160];
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	sample_live();
	snprintf(buf, sizeof(buf), "pool: width %u, cap %u, peak live %ld, "
			"spawned %llu (%llu by the monitor), net fired %llu",
			st.width, st.max_threads, atomic_load(&sh->peak_live),
			(unsigned long long)st.spawned,
			(unsigned long long)st.compensated,
			(unsigned long long)st.net_firings);
	return buf;
}

/* ---- 1, 2: cache as queue work -------------------------------------------- */

enum { CA_SUBMITTED, CA_STARTED, CA_READ, CA_INCREMENTED, CA_DONE };

static struct {
	sq_queue_t cache;
	long counter;  /* only on "cache" */
	long max_seen; /* only on "cache" */
	bool sleep;
} ca;

struct cache_item {
	int i;
	long seen;
};

static void
cache_read(void *arg)
{
	struct cache_item *it = arg;
	it->seen = ca.counter;
	if (ca.counter > ca.max_seen)
		ca.max_seen = ca.counter;
	bump(CA_READ);
}

static void
cache_increment(void *arg)
{
	ca.counter += sabotage_now(SAB_WRONG) ? 2 : 1;
	bump(CA_INCREMENTED);
}

static void
cache_final(void *arg)
{
	*(long *)arg = ca.counter;
}

static void
cache_item(void *arg)
{
	struct cache_item *it = arg;
	bump(CA_STARTED);
	if (sabotage_now(SAB_HANG))
		hang_forever();
	if (ca.sleep)
		sqt_sleep_us(200 + mix((uint32_t)it->i) % 801);
	sq_sync_f(ca.cache, it, cache_read);
	if (!sabotage_now(SAB_LOSE))
		sq_async_f(ca.cache, NULL, cache_increment);
	bump(CA_DONE);
}

static void
run_cache(bool sleep)
{
	int n = scaled(3000);
	ca.sleep = sleep;
	ca.cache = sq_queue_create("cache", NULL);
	struct cache_item *items = calloc((size_t)n, sizeof(*items));
	sq_queue_t gq = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_group_t g = sq_group_create();
	phase("submitting");
	for (int i = 0; i < n; i++) {
		items[i].i = i;
		sq_group_async_f(g, gq, &items[i], cache_item);
		bump(CA_SUBMITTED);
	}
	phase("sq_group_wait");
	bool done = wait_group(g, 1000);
	CHILD_CHECK(done, "items not done by the deadline: %ld/%d done, "
			"%ld reads, %ld increments", ctr(CA_DONE), n,
			ctr(CA_READ), ctr(CA_INCREMENTED));
	if (!done)
		return;
	phase("final sq_sync_f onto cache");
	long final = -1;
	sq_sync_f(ca.cache, &final, cache_final);
	CHILD_CHECK(ctr(CA_READ) == n, "%ld reads, expected %d", ctr(CA_READ),
			n);
	CHILD_CHECK(final == n, "counter %ld after the drain, expected %d",
			final, n);
	CHILD_CHECK(ca.max_seen < n, "a read saw %ld, more than %d increments",
			ca.max_seen, n - 1);
	snprintf(sh->info, sizeof(sh->info), "%d items, %ld reads, counter %ld; "
			"%s", n, ctr(CA_READ), final, pool_summary());
}

static void
run_cache_sleep(void)
{
	run_cache(true);
}

static void
run_cache_nosleep(void)
{
	run_cache(false);
}

/* ---- 3: sync pile-up over the cap ------------------------------------------ */

enum { PI_SUBMITTED, PI_STARTED, PI_BODIES, PI_DONE };

static struct {
	sq_queue_t q;
	int inside;     /* only in the serial queue's bodies */
	int violations; /* the same */
} pi;

static void
pile_body(void *arg)
{
	if (pi.inside++ != 0)
		pi.violations++;
	if (sabotage_now(SAB_HANG))
		hang_forever();
	if (sabotage_now(SAB_WRONG))
		pi.violations++;
	sqt_sleep_us(100);
	pi.inside--;
	bump(PI_BODIES);
}

static void
pile_item(void *arg)
{
	bump(PI_STARTED);
	if (!sabotage_now(SAB_LOSE))
		sq_sync_f(pi.q, NULL, pile_body);
	bump(PI_DONE);
}

static void
run_pileup(void)
{
	int n = scaled(2000);
	pi.q = sq_queue_create("pileup", NULL);
	sq_queue_t gq = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_group_t g = sq_group_create();
	phase("submitting (16 items a millisecond)");
	for (int i = 0; i < n; i++) {
		sq_group_async_f(g, gq, NULL, pile_item);
		bump(PI_SUBMITTED);
		if (i % 16 == 15) {
			sample_live();
			sqt_sleep_ms(1);
		}
	}
	phase("sq_group_wait");
	bool done = wait_group(g, 1000);
	CHILD_CHECK(done, "items not done by the deadline: %ld/%d started, "
			"%ld bodies, %ld done", ctr(PI_STARTED), n,
			ctr(PI_BODIES), ctr(PI_DONE));
	if (!done)
		return;
	CHILD_CHECK(ctr(PI_BODIES) == n, "%ld bodies, expected %d",
			ctr(PI_BODIES), n);
	CHILD_CHECK(pi.violations == 0, "%d bodies overlapped on the serial "
			"queue", pi.violations);
	snprintf(sh->info, sizeof(sh->info), "%d items, %ld bodies; %s", n,
			ctr(PI_BODIES), pool_summary());
}

/* ---- 4: service shape ------------------------------------------------------ */

enum { SV_SUBMITTED, SV_STARTED, SV_MISSES, SV_ANSWERED, SV_TICKS,
	SV_BATCHES };

struct request {
	int id;
	uint64_t t_submit;
	long price;
	int answered; /* only on the responder */
};

struct batch {
	struct request *first;
	int count;
};

static struct {
	sq_queue_t catalog, workers, intake, pricecache, responder;
	long cached;       /* only on pricecache */
	long catalog_gen;  /* only on catalog */
	uint64_t max_latency, sum_latency; /* only on the responder */
	int duplicates;    /* only on the responder */
} sv;

static void
catalog_tick(void *arg)
{
	bump(SV_TICKS);
	sv.catalog_gen++;
	spin_ns(30 * NSEC_PER_MSEC); /* holds catalog ~60 ms: half busy, */
	sqt_sleep_ms(30);            /* half asleep */
}

static void
price_lookup(void *arg)
{
	struct request *r = arg;
	r->price = sv.cached + r->id;
	spin_ns(5000);
}

static void
price_store(void *arg)
{
	sv.cached++;
}

static void
catalog_lookup(void *arg)
{
	struct request *r = arg;
	r->price += sv.catalog_gen;
	spin_ns(50000);
}

static void
respond(void *arg)
{
	struct request *r = arg;
	if (r->answered++ != 0)
		sv.duplicates++;
	uint64_t lat = sqt_now_ns() - r->t_submit;
	sv.sum_latency += lat;
	if (lat > sv.max_latency)
		sv.max_latency = lat;
	bump(SV_ANSWERED);
}

static void
handle_request(void *arg)
{
	struct request *r = arg;
	bump(SV_STARTED);
	if (sabotage_now(SAB_HANG))
		hang_forever();
	sq_sync_f(sv.pricecache, r, price_lookup);
	if (r->id % 8 == 0) {
		bump(SV_MISSES);
		sq_sync_f(sv.catalog, r, catalog_lookup);
		sq_sync_f(sv.pricecache, r, price_store);
	}
	if (sabotage_now(SAB_LOSE))
		return;
	sq_async_f(sv.responder, r, respond);
	if (sabotage_now(SAB_WRONG))
		sq_async_f(sv.responder, r, respond);
}

static void
intake_batch(void *arg)
{
	struct batch *b = arg;
	sq_group_t g = sq_group_create();
	for (int k = 0; k < b->count; k++)
		sq_group_async_f(g, sv.workers, &b->first[k], handle_request);
	sq_group_wait(g, SQ_TIME_FOREVER);
	sq_release(g);
	bump(SV_BATCHES);
}

static void
read_responder(void *arg)
{
	uint64_t *out = arg;
	out[0] = sv.max_latency;
	out[1] = sv.sum_latency;
	out[2] = (uint64_t)sv.duplicates;
}

static void
run_service(void)
{
	const int per_batch = scaled(6), period_ms = 20, run_ms = 1500;
	const int nbatches = run_ms / period_ms;
	const int n = per_batch * nbatches;
	struct request *reqs = calloc((size_t)n, sizeof(*reqs));
	struct batch *batches = calloc((size_t)nbatches, sizeof(*batches));
	sv.catalog = sq_queue_create("catalog", NULL);
	sv.workers = sq_queue_create("workers", SQ_QUEUE_CONCURRENT);
	sv.intake = sq_queue_create("intake", NULL);
	sv.pricecache = sq_queue_create("pricecache", NULL);
	sv.responder = sq_queue_create("responder", NULL);
	sq_source_t timer = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0,
			sv.catalog);
	CHILD_CHECK(timer != NULL, "no timer source");
	if (timer == NULL)
		return;
	sq_source_set_event_handler_f(timer, catalog_tick);
	sq_source_set_timer(timer, sq_time(SQ_TIME_NOW, 100 * (int64_t)NSEC_PER_MSEC),
			100 * NSEC_PER_MSEC, NSEC_PER_MSEC);
	sq_activate(timer);

	phase("submitting batches");
	uint64_t t0 = sqt_now_ns();
	for (int b = 0; b < nbatches; b++) {
		uint64_t due = t0 + (uint64_t)b * period_ms * NSEC_PER_MSEC;
		uint64_t now = sqt_now_ns();
		if (due > now)
			sqt_sleep_us((unsigned)((due - now) / 1000));
		batches[b].first = &reqs[b * per_batch];
		batches[b].count = per_batch;
		uint64_t ts = sqt_now_ns();
		for (int k = 0; k < per_batch; k++) {
			reqs[b * per_batch + k].id = b * per_batch + k;
			reqs[b * per_batch + k].t_submit = ts;
		}
		sq_async_f(sv.intake, &batches[b], intake_batch);
		for (int k = 0; k < per_batch; k++)
			bump(SV_SUBMITTED);
		sample_live();
	}
	phase("waiting for the answers");
	bool done = wait_ctr(SV_ANSWERED, n) && wait_ctr(SV_BATCHES, nbatches);
	CHILD_CHECK(done, "not answered by the deadline: %ld/%d started, %ld "
			"answered, %ld/%d batches done, %ld timer ticks",
			ctr(SV_STARTED), n, ctr(SV_ANSWERED), ctr(SV_BATCHES),
			nbatches, ctr(SV_TICKS));
	if (!done)
		return;
	phase("reading the responder (sq_sync_f)");
	uint64_t resp[3];
	sq_sync_f(sv.responder, resp, read_responder);
	int unanswered = 0;
	for (int i = 0; i < n; i++)
		if (reqs[i].answered != 1)
			unanswered++;
	CHILD_CHECK(unanswered == 0 && resp[2] == 0, "%d requests not "
			"answered exactly once (%llu duplicates)", unanswered,
			(unsigned long long)resp[2]);
	/* ~15 ticks in 1.5 s; a catalog starved for most of the run fails. */
	long ticks = ctr(SV_TICKS);
	CHILD_CHECK(ticks >= 5, "the catalog timer fired %ld times in %.0f ms",
			ticks, sqt_ms_since(t0));
	phase("cancelling the timer");
	sq_source_cancel(timer);
	snprintf(sh->info, sizeof(sh->info), "%d requests (%ld misses), %ld "
			"ticks, latency mean %.1f ms max %.1f ms; %s", n,
			ctr(SV_MISSES), ticks,
			(double)resp[1] / n / 1e6, (double)resp[0] / 1e6,
			pool_summary());
}

/* ---- 5: fork-join ---------------------------------------------------------- */

enum { FJ_STARTED, FJ_LEAVES, FJ_WAITING, FJ_JOINED };

struct fib_task {
	int n;
	long result;
};

static sq_queue_t fib_queue;

static long
fib_tasks(int n)
{
	return n > fib_cutoff ? 1 + fib_tasks(n - 1) + fib_tasks(n - 2) : 1;
}

static void
fib_task(void *arg)
{
	struct fib_task *t = arg;
	bump(FJ_STARTED);
	if (t->n <= fib_cutoff) {
		if (sabotage_now(SAB_HANG))
			hang_forever();
		t->result = sqt_fib_serial(t->n);
		if (sabotage_now(SAB_LOSE))
			t->result = 0;
		if (sabotage_now(SAB_WRONG))
			t->result++;
		bump(FJ_LEAVES);
		return;
	}
	struct fib_task a = { t->n - 1, 0 }, b = { t->n - 2, 0 };
	sq_group_t g = sq_group_create();
	/* One child as a fork-join child, one as a plain member: rings
	 * that mix both. */
	sq_group_spawn_f(g, fib_queue, &a, fib_task);
	sq_group_async_f(g, fib_queue, &b, fib_task);
	bump(FJ_WAITING);
	sample_live();
	sq_group_wait(g, SQ_TIME_FOREVER);
	sq_release(g);
	t->result = a.result + b.result;
	bump(FJ_JOINED);
}

static void
run_forkjoin(void)
{
	fib_queue = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	struct fib_task root = { fib_n, 0 };
	long tasks = fib_tasks(fib_n), expected = sqt_fib_expected(fib_n);
	sq_group_t g = sq_group_create();
	uint64_t t0 = sqt_now_ns();
	phase("sq_group_wait for the root");
	sq_group_async_f(g, fib_queue, &root, fib_task);
	bool done = wait_group(g, 10);
	CHILD_CHECK(done, "fib(%d) not done by the deadline: %ld/%ld tasks "
			"started, %ld leaves, %ld waiting, %ld joined", fib_n,
			ctr(FJ_STARTED), tasks, ctr(FJ_LEAVES),
			ctr(FJ_WAITING), ctr(FJ_JOINED));
	if (!done)
		return;
	double ms = sqt_ms_since(t0);
	CHILD_CHECK(root.result == expected, "fib(%d) = %ld, expected %ld",
			fib_n, root.result, expected);
	CHILD_CHECK(ctr(FJ_STARTED) == tasks, "%ld tasks ran, expected %ld",
			ctr(FJ_STARTED), tasks);
	snprintf(sh->info, sizeof(sh->info), "fib(%d) cutoff %d = %ld, %ld "
			"tasks (%ld waited) in %.0f ms; %s", fib_n, fib_cutoff,
			root.result, tasks, ctr(FJ_WAITING), ms,
			pool_summary());
}

/* ---- 6: child behind a computing parent ------------------------------------ */

enum { SL_HOPS, SL_PARENT_STARTED, SL_CHILD_RAN, SL_PARENT_DONE,
	SL_CHAIN_ENDED };

static struct {
	sq_queue_t a, b, s;
	atomic_bool stop;
	atomic_ullong t_submit, t_child;
} sl;

static void hop_b(void *arg);

static void
hop_a(void *arg)
{
	bump(SL_HOPS);
	if (atomic_load_explicit(&sl.stop, memory_order_relaxed))
		bump(SL_CHAIN_ENDED);
	else
		sq_async_f(sl.b, NULL, hop_b);
}

static void
hop_b(void *arg)
{
	bump(SL_HOPS);
	if (atomic_load_explicit(&sl.stop, memory_order_relaxed))
		bump(SL_CHAIN_ENDED);
	else
		sq_async_f(sl.a, NULL, hop_a);
}

static void
slot_child(void *arg)
{
	if (sabotage_now(SAB_HANG))
		hang_forever();
	atomic_store(&sl.t_child, sqt_now_ns() +
			(sabotage_now(SAB_WRONG) ? 200 * NSEC_PER_MSEC : 0));
	bump(SL_CHILD_RAN);
}

static void
slot_parent(void *arg)
{
	bump(SL_PARENT_STARTED);
	atomic_store(&sl.t_submit, sqt_now_ns());
	if (!sabotage_now(SAB_LOSE))
		sq_async_f(sl.s, NULL, slot_child);
	spin_ns(300 * NSEC_PER_MSEC);
	bump(SL_PARENT_DONE);
}

static void
run_slot(void)
{
	sl.a = sq_queue_create("pingpong.a", NULL);
	sl.b = sq_queue_create("pingpong.b", NULL);
	sl.s = sq_queue_create("idle.s", NULL);
	phase("starting the ping-pong chain");
	sq_async_f(sl.a, NULL, hop_a);
	bool chain = wait_ctr(SL_HOPS, 1000);
	CHILD_CHECK(chain, "the ping-pong chain did not get going: %ld hops",
			ctr(SL_HOPS));
	if (!chain)
		return;
	phase("parent computing");
	sq_async_f(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0), NULL,
			slot_parent);
	bool ran = wait_ctr(SL_CHILD_RAN, 1) && wait_ctr(SL_PARENT_DONE, 1);
	long hops_during = ctr(SL_HOPS);
	atomic_store(&sl.stop, true);
	CHILD_CHECK(ran, "by the deadline: parent started %ld, done %ld, "
			"S's job ran %ld", ctr(SL_PARENT_STARTED),
			ctr(SL_PARENT_DONE), ctr(SL_CHILD_RAN));
	if (!ran)
		return;
	phase("stopping the chain");
	bool ended = wait_ctr(SL_CHAIN_ENDED, 1);
	CHILD_CHECK(ended, "the ping-pong chain did not stop");
	double lat = (double)(atomic_load(&sl.t_child) -
			atomic_load(&sl.t_submit)) / 1e6;
	if (cur->width >= 2)
		CHILD_CHECK(lat < 100.0, "S's job started %.1f ms after its "
				"submission (behind a parent computing "
				"300 ms; the target is ~1 ms)", lat);
	snprintf(sh->info, sizeof(sh->info), "S's job started after %.2f ms%s, "
			"%ld hops meanwhile; %s", lat,
			cur->width >= 2 ? "" : " (width 1: reported only)",
			hops_during, pool_summary());
}

/* ---- 7: sync pile-up through a target chain, at the cap ------------------- */

/*
 * Items on a global queue sync twice onto "inner", a serial queue that
 * targets the serial "outer", and write back with an async onto "outer";
 * the pool may have no more threads than its width. When every thread is
 * an item waiting in its second sync, "outer"'s job sits where one of
 * them left it (its next-job slot, or the root queue behind more items):
 * only a caller that takes the chain over moves.
 */

enum { CH_SUBMITTED, CH_STARTED, CH_READ, CH_WRITTEN, CH_DONE };

static struct {
	sq_queue_t outer, inner;
	long counter; /* only on "outer" (and so on "inner") */
} ch;

static void
chain_read(void *arg)
{
	*(long *)arg = ch.counter;
	sqt_sleep_us(50);
	bump(CH_READ);
}

static void
chain_write(void *arg)
{
	ch.counter += sabotage_now(SAB_WRONG) ? 2 : 1;
	bump(CH_WRITTEN);
}

static void
chain_item(void *arg)
{
	long seen;
	bump(CH_STARTED);
	if (sabotage_now(SAB_HANG))
		hang_forever();
	sq_sync_f(ch.inner, &seen, chain_read);
	sq_sync_f(ch.inner, &seen, chain_read);
	if (!sabotage_now(SAB_LOSE))
		sq_async_f(ch.outer, NULL, chain_write);
	bump(CH_DONE);
}

static void
run_chain(void)
{
	int n = scaled(2000);
	ch.outer = sq_queue_create("outer", NULL);
	ch.inner = sq_queue_create_with_target("inner", NULL, ch.outer);
	sq_queue_t gq = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_group_t g = sq_group_create();
	phase("submitting");
	for (int i = 0; i < n; i++) {
		sq_group_async_f(g, gq, NULL, chain_item);
		bump(CH_SUBMITTED);
	}
	phase("sq_group_wait");
	bool done = wait_group(g, 1000);
	CHILD_CHECK(done, "items not done by the deadline: %ld/%d done, "
			"%ld reads, %ld writes", ctr(CH_DONE), n, ctr(CH_READ),
			ctr(CH_WRITTEN));
	if (!done)
		return;
	/* Onto "outer", behind every write: a sync onto "inner" may run
	 * inside a drain of "inner" that was queued on "outer" before the
	 * last writes were (FIFO is per queue, as in libdispatch). */
	phase("final sq_sync_f onto outer");
	long final = -1;
	sq_sync_f(ch.outer, &final, chain_read);
	CHILD_CHECK(ctr(CH_READ) == 2 * n + 1, "%ld reads, expected %d",
			ctr(CH_READ), 2 * n + 1);
	CHILD_CHECK(final == n, "counter %ld after the drain, expected %d",
			final, n);
	snprintf(sh->info, sizeof(sh->info), "%d items, %ld reads, counter "
			"%ld; %s", n, ctr(CH_READ), final, pool_summary());
}

/* ---- the table --------------------------------------------------------------- */

static const struct scenario scenarios[] = {
	{ 1, "cache as queue work", run_cache_sleep,
	  { "submitted", "started", "read", "incremented", "done", NULL } },
	{ 2, "cache, no sleep", run_cache_nosleep,
	  { "submitted", "started", "read", "incremented", "done", NULL } },
	{ 3, "sync pile-up over the cap", run_pileup,
	  { "submitted", "started", "bodies", "done", NULL, NULL } },
	{ 4, "service shape", run_service,
	  { "submitted", "started", "misses", "answered", "timer ticks",
	    "batches done" } },
	{ 5, "fork-join", run_forkjoin,
	  { "started", "leaves", "waiting", "joined", NULL, NULL } },
	{ 6, "child behind a computing parent", run_slot,
	  { "hops", "parent started", "S's job ran", "parent done",
	    "chain ended", NULL } },
	{ 7, "chain pile-up at the cap", run_chain,
	  { "submitted", "started", "read", "written", "done", NULL } },
};
#define NSCENARIOS ((int)(sizeof(scenarios) / sizeof(scenarios[0])))

static pid_t parent_pid;

static void
die_with_parent(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent_pid)
		_exit(3);
}

static void
setenv_int(const char *name, int value)
{
	char v[16];
	snprintf(v, sizeof(v), "%d", value);
	setenv(name, v, 1);
}

static void
child_main(const struct config *c)
{
	die_with_parent();
	alarm(deadline_s + 60); /* a backstop: the parent kills it sooner */
	setenv_int("SQ_WORKERS", c->width);
	setenv("SQ_MONITOR_NET", c->net ? "1" : "0", 1);
	if (c->max_threads > 0)
		setenv_int("SQ_MAX_THREADS", c->max_threads);
	cur = c;
	describe(c, cur_desc, sizeof(cur_desc));
	sqt_passed = sqt_failed = 0;
	child_deadline = sqt_now_ns() + (uint64_t)deadline_s * NSEC_PER_SEC;
	c->sc->run();
	sample_live();
	sh->passed = sqt_passed;
	sh->failed = sqt_failed;
	atomic_store(&sh->finished, 1);
	fflush(stdout);
	fflush(stderr);
	/* Without waiting for anything a failed scenario left behind. */
	_exit(sqt_failed ? 1 : 0);
}

/* ---- the parent's side ------------------------------------------------------ */

static long
progress_sum(void)
{
	long s = 0;
	for (int i = 0; i < NCTR; i++)
		s += atomic_load(&sh->ctr[i]);
	return s;
}

static void
format_counters(const struct scenario *sc, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	for (int i = 0; i < NCTR && sc->ctr[i]; i++) {
		int w = snprintf(buf + len, size - len, "%s%s=%ld",
				i ? " " : "", sc->ctr[i],
				atomic_load(&sh->ctr[i]));
		if (w < 0 || (size_t)w >= size - len)
			break;
		len += (size_t)w;
	}
}

static void
run_config(const struct config *c)
{
	char desc[256], counters[256];
	describe(c, desc, sizeof(desc));
	memset(sh, 0, sizeof(*sh));
	pid_t busy[2] = { 0, 0 };
	if (c->contention) {
		busy[0] = sqt_start_busy_loop(600);
		busy[1] = sqt_start_busy_loop(600);
	}
	fflush(NULL);
	uint64_t t0 = sqt_now_ns();
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0)
		child_main(c);

	/* Watch: poll every 10 ms, kill on the deadline (a little after the
	 * child's own, so that it can report itself) or a stall. */
	uint64_t hard = t0 + ((uint64_t)deadline_s + 3) * NSEC_PER_SEC;
	uint64_t stall = (uint64_t)stall_s * NSEC_PER_SEC;
	uint64_t last_change = t0;
	long last = -1;
	int status = 0;
	const char *killed = NULL;
	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		uint64_t now = sqt_now_ns();
		long p = progress_sum();
		if (p != last) {
			last = p;
			last_change = now;
		}
		if (now > hard)
			killed = "past the deadline";
		else if (stall && now - last_change > stall)
			killed = "no progress";
		if (killed) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		sqt_sleep_ms(10);
	}
	double ms = sqt_ms_since(t0);
	double idle_s = (double)(sqt_now_ns() - last_change) / 1e9;
	if (c->contention) {
		sqt_stop_busy_loop(busy[0]);
		sqt_stop_busy_loop(busy[1]);
	}

	format_counters(c->sc, counters, sizeof(counters));
	bool finished = !killed && atomic_load(&sh->finished);
	const char *verdict;
	/* The parent's checks: the scenario finished in time (not killed, a
	 * verdict written), and the child's exit status agrees with it. */
	if (killed) {
		verdict = "HUNG";
		sqt_failed++;
		fprintf(stderr, "FAIL %s:%d: [%s] %s (nothing moved for %.1f "
				"s; deadline %u s, stall limit %u s): killed "
				"after %.0f ms in phase \"%s\"; progress: %s\n",
				__FILE__, __LINE__, desc, killed, idle_s,
				deadline_s, stall_s, ms, sh->phase, counters);
	} else if (!finished) {
		verdict = "CRASHED";
		sqt_failed++;
		fprintf(stderr, "FAIL %s:%d: [%s] the child ended without a "
				"verdict (%s %d) in phase \"%s\"; progress: "
				"%s\n", __FILE__, __LINE__, desc,
				WIFSIGNALED(status) ? "signal" : "exit status",
				WIFSIGNALED(status) ? WTERMSIG(status) :
						WEXITSTATUS(status),
				sh->phase, counters);
	} else {
		verdict = sh->failed ? "FAILED" : "ok";
		sqt_passed++;
		sqt_passed += sh->passed;
		sqt_failed += sh->failed;
		if (sh->failed)
			fprintf(stderr, "  [%s] %d checks failed, in phase "
					"\"%s\"; progress: %s\n", desc,
					sh->failed, sh->phase, counters);
		if (WIFEXITED(status) &&
				WEXITSTATUS(status) == (sh->failed ? 1 : 0)) {
			sqt_passed++;
		} else {
			sqt_failed++;
			fprintf(stderr, "FAIL %s:%d: [%s] exit status %d "
					"after the verdict\n", __FILE__,
					__LINE__, desc, status);
		}
	}

	char settings[64];
	snprintf(settings, sizeof(settings), "w=%-2d%s net=%s%s", c->width,
			c->max_threads == 4 ? " cap=4 " :
			c->max_threads == 16 ? " cap=16" : "       ",
			c->net ? "on " : "off", c->contention ? " +busy" : "");
	printf("  %d %-31s %-27s %7.0f ms  %-7s %s\n", c->sc->id, c->sc->name,
			settings, ms, verdict,
			finished && sh->info[0] ? sh->info : counters);
	fflush(stdout);
}

static bool
wanted(const char *only, int id)
{
	if (only == NULL || *only == '\0')
		return true;
	for (const char *p = only; *p; p++)
		if (*p >= '0' && *p <= '9' && atoi(p) == id &&
				(p == only || p[-1] < '0' || p[-1] > '9'))
			return true;
	return false;
}

static unsigned
env_unsigned(const char *name, unsigned dflt)
{
	const char *s = getenv(name);
	return s && *s ? (unsigned)strtoul(s, NULL, 10) : dflt;
}

int
main(void)
{
	parent_pid = getpid();
	const char *s = getenv("SQT_LIVENESS_SCALE");
	if (s && atof(s) > 0)
		scale = atof(s);
	deadline_s = env_unsigned("SQT_LIVENESS_DEADLINE_S", SQT_SANITIZED ? 60 : 15);
	stall_s = env_unsigned("SQT_LIVENESS_STALL_S", SQT_SANITIZED ? 20 : 5);
	unsigned repeat = env_unsigned("SQT_LIVENESS_REPEAT", 1);
	bool contention = env_unsigned("SQT_LIVENESS_CONTENTION", 1) != 0;
	const char *only = getenv("SQT_LIVENESS_ONLY");
	if ((s = getenv("SQT_LIVENESS_SABOTAGE")) && *s)
		sabotage = strcmp(s, "hang") == 0 ? SAB_HANG :
				strcmp(s, "lose") == 0 ? SAB_LOSE :
				strcmp(s, "wrong") == 0 ? SAB_WRONG : SAB_NONE;
	if ((s = getenv("SQT_LIVENESS_FIB")) && *s) {
		int n = 0, cut = 0;
		if (sscanf(s, "%d,%d", &n, &cut) == 2 && n > 0 && n < 40 &&
				cut >= 1) {
			fib_n = n;
			fib_cutoff = cut;
		}
	}
	int widths[16], nwidths = 0;
	char buf[128];
	s = getenv("SQT_LIVENESS_WIDTHS");
	snprintf(buf, sizeof(buf), "%s", s && *s ? s : "1 2 4 8 16");
	for (char *tok = strtok(buf, " ,"); tok && nwidths < 16;
			tok = strtok(NULL, " ,"))
		if (atoi(tok) > 0)
			widths[nwidths++] = atoi(tok);

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 2;
	}

	printf("liveness: scale %g, deadline %u s, stall limit %u s, fib(%d) "
			"cutoff %d, %u round%s%s\n", scale, deadline_s, stall_s,
			fib_n, fib_cutoff, repeat, repeat == 1 ? "" : "s",
			sabotage ? ", SABOTAGED (every scenario must fail)" : "");
	uint64_t t0 = sqt_now_ns();
	for (unsigned round = 0; round < repeat; round++) {
		for (int k = 0; k < NSCENARIOS; k++) {
			const struct scenario *sc = &scenarios[k];
			if (!wanted(only, sc->id))
				continue;
			for (int w = 0; w < nwidths; w++) {
				int ncaps = sc->id == 3 ? 2 : 1;
				for (int cap = 0; cap < ncaps; cap++) {
					struct config c = {
						.sc = sc,
						.width = widths[w],
						.max_threads = sc->id == 3 ?
							(cap ? 16 : 4) : sc->id == 7 ?
							widths[w] : 0,
						/* Net off for every other one. */
						.net = (w + sc->id + cap + (int)round) % 2 == 0,
					};
					run_config(&c);
				}
			}
		}
		if (!contention)
			continue;
		for (int k = 0; k < NSCENARIOS; k++) {
			const struct scenario *sc = &scenarios[k];
			if (!wanted(only, sc->id))
				continue;
			struct config c = {
				.sc = sc,
				.width = 2,
				.max_threads = sc->id == 3 ? 4 : sc->id == 7 ?
					2 : 0,
				.net = (sc->id + (int)round) % 2 == 0,
				.contention = true,
			};
			run_config(&c);
		}
	}
	printf("liveness: %.1f s\n", sqt_ms_since(t0) / 1000);
	return sqt_finish("test_liveness");
}
