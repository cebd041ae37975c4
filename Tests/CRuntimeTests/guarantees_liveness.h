/*
 * The guarantee checker's liveness family (test_guarantees.c): random
 * programs that mix blocking shapes, checked for "every submitted job
 * runs": no job stranded behind a blocked thread, no hang.
 *
 * A liveness program (one seed in 8; see gq_seed_is_live) makes its own
 * queues: two busy serial queues, a target chain (serial "inner" ->
 * serial "outer" -> a global queue) with a serial "leaf" queue, two
 * concurrent queues, two serial hand-off queues and two idle serial
 * queues, all on global queues of random priorities. The driver then
 * launches 2-6 random shapes, back to back or a little apart, so that
 * they overlap:
 *   - pile-up: 1-6 busy tasks (sleep 50-500 us or spin up to 1 ms) on a
 *     busy serial queue, and 4-40 items on the concurrent and global
 *     queues that each sq_sync_f onto it, more than the thread cap
 *     (SQ_MAX_THREADS as low as 4) at once; the busy tasks go before the
 *     callers or after them (then the queue's job waits behind them);
 *   - chain sync: busy tasks on "outer", "inner" and "leaf", 4-28 items on
 *     global and concurrent queues that sync onto "inner" (and so hold
 *     "outer"), some onto "outer" itself; an inner body may sync on to
 *     "leaf";
 *   - semaphore: 1-3 pairs, an item that waits (forever) on a semaphore
 *     and an item that signals it, submitted in either order, or by the
 *     waiter itself just before its wait; the signaller sometimes on an
 *     idle serial queue (from a worker: its next-job slot);
 *   - fork-join: an item that submits 2-3 children to global queues in a
 *     group and waits for it (forever), 1-3 levels deep (up to 40 items);
 *     the children at the waiter's own priority, or (mixed) at any;
 *   - work item wait: an item that submits 1-3 work items and waits for
 *     each (forever), newest or oldest first: to global queues at its own
 *     priority, at any, to a concurrent queue, or to an idle serial queue;
 *   - hand-off: a chain of 20-200 sq_async_f hops between two serial
 *     queues, started by the driver or by an item that then computes for
 *     1-20 ms, while 1-3 other items compute (spin) 1-20 ms;
 *   - sleepers: 2-12 items that usleep 50-500 us.
 * Items of every shape sleep 50-500 us first, one in four. Every item
 * counts itself once when it has done its part (the count is the last
 * thing it touches); the program knows its expected count in advance
 * (fork-join trees and hop chains are sized by the driver). The driver
 * never blocks in the runtime: it waits by polling (gq_wait), so a
 * program whose count stops short fails after GQ_STALL_SECONDS without
 * progress, or GQ_LIVE_DEADLINE_S in all, with the tally of each shape,
 * the jobs that never started or are stuck inside (a wait, a sync), and
 * the line that replays it (SQT_SEED=... SQ_WORKERS=w SQ_MAX_THREADS=c).
 * Along the way: nothing runs twice, a sync returns after its function, a
 * wait after what it waited for, the tasks of a serial queue (and of the
 * chain, "inner" holding "outer") never overlap, and the pool never has
 * more threads than its cap.
 *
 * What a program may ask of the pool is bounded by what the runtime
 * promises with the thread cap (docs/ARCHITECTURE.md, "Blocked workers",
 * "Waiting helps"): a sync caller never needs a free thread (callers of a
 * queue whose job waits for a thread take it over), and a wait forever
 * for a group or a work item runs, on the waiter's thread, what it waits
 * for while that is the newest entry its task pushed on its worker's ring
 * (members queued on global queues at its own priority; work items waited
 * for newest first). Any other wait (a semaphore; members at other
 * priorities, on a concurrent or a serial queue; work items waited for
 * oldest first) holds a thread that only another thread's job can
 * release. Those "dependent waits" are budgeted:
 * at most cap - 2 of them (8 at most) per program, so that a thread is
 * always left for the jobs they wait for; past the cap, the runtime
 * promises nothing ("Blocking tasks share the queues' cap"). Under
 * libdispatch, which has neither the take-over nor the help, every group
 * and work item wait is a dependent one (GQ_WAIT_HELPS), and
 * guarantees_dispatch.h says what it leaves out.
 *
 * SQT_OPS="liveness" runs only this family; SQT_OPS="liveness pile-up,
 * liveness semaphore" only those shapes (names in gq_lv_names); SQT_OPS
 * without a liveness name leaves the family out. A width written W:C in
 * SQT_GUARANTEE_WIDTHS runs SQ_WORKERS=W SQ_MAX_THREADS=C with this family
 * only. SQT_LIVE_SABOTAGE (gq_lv_sabotage) checks the checks.
 */
#ifndef SQTEST_GUARANTEES_LIVENESS_H
#define SQTEST_GUARANTEES_LIVENESS_H

/* A liveness program that has not finished after this long fails (the
 * stall rule, GQ_STALL_SECONDS without progress, usually comes first). */
#define GQ_LIVE_DEADLINE_S 90
/* Dependent waits per program, at most (see above). */
#define GQ_LIVE_MAX_DEPENDENT 8

enum {
	LV_PILEUP,
	LV_CHAIN,
	LV_SEMAPHORE,
	LV_FORK_JOIN,
	LV_WORKITEM,
	LV_HANDOFF,
	LV_SLEEP,
	LV_SHAPES,
};

static const char *const gq_lv_names[LV_SHAPES] = {
	"pile-up", "chain sync", "semaphore", "fork-join", "work item wait",
	"hand-off", "sleepers",
};

static const unsigned gq_lv_weights[LV_SHAPES] = {
	[LV_PILEUP] = 4, [LV_CHAIN] = 3, [LV_SEMAPHORE] = 3,
	[LV_FORK_JOIN] = 3, [LV_WORKITEM] = 2, [LV_HANDOFF] = 3,
	[LV_SLEEP] = 1,
};

/* The shapes in play (SQT_OPS; the backend's skips), set by gq_choose_ops,
 * the backend's skips that apply, and the dependent waits a program may
 * make at most. */
static unsigned gq_lv_mix[LV_SHAPES];
static unsigned gq_lv_skipped;
static int gq_lv_dependent_max = GQ_LIVE_MAX_DEPENDENT;

/* Says (once, in a child) what the backend leaves out. */
static void
gq_live_note(void)
{
	if (gq_lv_skipped == 0 && gq_lv_dependent_max >= GQ_LIVE_MAX_DEPENDENT)
		return;
	char names[160] = "";
	size_t n = 0;
	for (int i = 0; i < LV_SHAPES; i++)
		if (gq_lv_skipped & (1u << i))
			n += (size_t)snprintf(names + n, sizeof(names) - n,
					"%s\"liveness %s\"", n ? ", " : "",
					gq_lv_names[i]);
	if (gq_lv_skipped)
		printf("  %s: liveness shapes %s skipped (%s; SQT_OPS naming "
				"one runs it)\n", GQ_BACKEND, names,
				GQ_LIVE_SKIP_WHY);
	if (gq_lv_dependent_max < GQ_LIVE_MAX_DEPENDENT)
		printf("  %s: %d dependent wait(s) a liveness program, at most "
				"(group and work item waits hold their thread; "
				"SQT_OPS naming \"liveness fork-join\" or "
				"\"liveness work item wait\": %d)\n", GQ_BACKEND,
				gq_lv_dependent_max, GQ_LIVE_MAX_DEPENDENT);
	fflush(stdout);
}

/* A serial queue of the program, with its hold word: its tasks (and those
 * of a queue targeting it) must never overlap. */
struct gq_lv_queue {
	sq_queue_t q;
	struct gq_lv_queue *parent; /* a serial queue it targets, or NULL */
	atomic_int hold;
	const char *label;
};

struct gq_live;

struct gq_lv_item {
	struct gq_lv_item *all;  /* the program's list, for freeing */
	struct gq_live *L;
	int shape;
	const char *what;
	atomic_int started;      /* for a failure's account */
	atomic_int runs;
	unsigned sleep_us;       /* slept first (0: none) */
	unsigned work_us;        /* then slept (sleep) or spun for */
	bool sleep;
	struct gq_lv_queue *holds; /* a busy task or body: held while it runs */
	/* a sync caller: onto this queue, running `body` */
	struct gq_lv_queue *sync_q;
	struct gq_lv_item *body;
	/* a body that syncs on to another queue (the chain's leaf) */
	struct gq_lv_queue *inner_q;
	struct gq_lv_item *inner;
	/* semaphores: the waiter submits `partner` (its signaler) itself */
	sq_semaphore_t sem;
	struct gq_lv_item *partner;
	sq_queue_t partner_q;
	/* fork-join and work item waits: the priority it runs at (an index
	 * of gq_lv_prio) and whether its members go to other priorities */
	int prio;
	bool mixed;
	/* fork-join */
	int depth, fanout;
	struct gq_lv_item *parent;
	atomic_int children_done;
	/* work item waits: `nitems` items on `wq`, waited for newest first
	 * or not */
	int nitems;
	sq_queue_t wq;
	bool newest_first;
	/* hand-offs: hop `hop` of `hops` on hq[hop % 2]; a kicker starts
	 * `first` */
	int hop, hops;
	struct gq_lv_queue *hq[2];
	struct gq_lv_item *first;
	uint64_t seed;           /* its own random choices */
};

struct gq_live {
	struct gq_prog *p;
	atomic_long ran;
	long expected;           /* driver only, complete before the wait */
	atomic_long shape_ran[LV_SHAPES];
	long shape_expected[LV_SHAPES];
	int cap;                 /* the thread cap */
	int dependent;           /* dependent waits left */
	uint64_t deadline;
	_Atomic(struct gq_lv_item *) items;
	struct gq_lv_queue busy[2], outer, inner, leaf, hop[2];
	/* idle serial queues: a submission from a worker to one lands in
	 * the worker's next-job slot (semaphore signallers, work items) */
	struct gq_lv_queue idle[2];
	sq_queue_t conc[2];
	int conc_prio[2];
	sq_semaphore_t sems[GQ_LIVE_MAX_DEPENDENT];
	int nsems;
	unsigned shapes_run;     /* bit per shape launched */
	unsigned peak_threads;   /* the pool's live threads, at most */
};

/* ---- Items ------------------------------------------------------------------------ */

static const long gq_lv_prio[4] = {
	SQ_QUEUE_PRIORITY_HIGH, SQ_QUEUE_PRIORITY_DEFAULT,
	SQ_QUEUE_PRIORITY_LOW, SQ_QUEUE_PRIORITY_BACKGROUND,
};

static sq_queue_t
gq_lv_global(int prio)
{
	return sq_get_global_queue(gq_lv_prio[prio], 0);
}

/* The priority of a group's or work item's member: the waiter's own, or
 * (mixed) any. */
static int
gq_lv_member_prio(struct gq_lv_item *it, struct gq_rng *r)
{
	return it->mixed ? (int)gq_rnd(r, 4) : it->prio;
}

static struct gq_lv_item *
gq_lv_new(struct gq_live *L, int shape, const char *what, uint64_t seed)
{
	struct gq_lv_item *it = calloc(1, sizeof(*it));
	if (it == NULL)
		abort();
	it->L = L;
	it->shape = shape;
	it->what = what;
	it->seed = seed;
	struct gq_lv_item *head = atomic_load(&L->items);
	do {
		it->all = head;
	} while (!atomic_compare_exchange_weak(&L->items, &head, it));
	return it;
}

/* Counted in advance by the driver. */
static void
gq_lv_expect(struct gq_live *L, int shape, long n)
{
	L->expected += n;
	L->shape_expected[shape] += n;
	gq_expect(L->p, n); /* the stall message's "calls outstanding" */
}

/* An item's own random sleep first (one in four) and work. */
static void
gq_lv_dress(struct gq_lv_item *it, struct gq_rng *r, unsigned max_work_us)
{
	if (gq_chance(r, 25))
		it->sleep_us = 50 + gq_rnd(r, 451);
	if (max_work_us) {
		it->sleep = gq_chance(r, 40);
		it->work_us = it->sleep ? 50 + gq_rnd(r, 451)
				: gq_rnd(r, max_work_us + 1);
	}
}

static void
gq_lv_spin_us(unsigned us)
{
	uint64_t until = gq_now() + (uint64_t)us * 1000;
	while (gq_now() < until)
		gq_spin(50);
}

static void
gq_lv_work(struct gq_lv_item *it)
{
	if (it->work_us == 0)
		return;
	if (it->sleep)
		usleep(it->work_us);
	else
		gq_lv_spin_us(it->work_us);
}

static void
gq_lv_start(struct gq_lv_item *it)
{
	atomic_store_explicit(&it->started, 1, memory_order_relaxed);
	gq_progress(it->L->p);
	if (it->sleep_us)
		usleep(it->sleep_us);
}

/* The item's last touch of anything the program owns. */
static void
gq_lv_count(struct gq_lv_item *it)
{
	struct gq_live *L = it->L;
	struct gq_prog *p = L->p;
	GQ_CHECK(p, atomic_fetch_add(&it->runs, 1) == 0, "liveness %s: %s "
			"ran twice", gq_lv_names[it->shape], it->what);
	atomic_fetch_add(&L->shape_ran[it->shape], 1);
	atomic_fetch_add_explicit(&p->live_jobs, 1, memory_order_relaxed);
	gq_done(p);
	atomic_fetch_add(&L->ran, 1);
}

static void
gq_lv_hold(struct gq_live *L, struct gq_lv_item *it)
{
	for (struct gq_lv_queue *q = it->holds; q; q = q->parent) {
		int old = atomic_fetch_add(&q->hold, 1);
		GQ_CHECK(L->p, old == 0, "liveness %s: %s on serial queue '%s' "
				"started while another task held '%s'",
				gq_lv_names[it->shape], it->what, it->holds->label,
				q->label);
	}
}

static void
gq_lv_unhold(struct gq_lv_item *it)
{
	for (struct gq_lv_queue *q = it->holds; q; q = q->parent)
		atomic_fetch_sub(&q->hold, 1);
}

/* A busy task on a serial queue, a sleeper, a spinner. */
static void
gq_lv_plain_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	gq_lv_start(it);
	gq_lv_hold(it->L, it);
	gq_lv_work(it);
	gq_lv_unhold(it);
	gq_lv_count(it);
}

/* A sync's function, on the queue synced onto; may sync on further. */
static void
gq_lv_body_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	atomic_store_explicit(&it->started, 1, memory_order_relaxed);
	gq_progress(it->L->p);
	gq_lv_hold(it->L, it);
	if (it->inner) {
		sq_sync_f(it->inner_q->q, it->inner, gq_lv_body_fn);
		GQ_CHECK(it->L->p, atomic_load(&it->inner->runs) == 1, "liveness "
				"%s: sync onto '%s' (nested, from '%s') returned "
				"before its function ran", gq_lv_names[it->shape],
				it->inner_q->label, it->holds->label);
	}
	gq_lv_work(it);
	gq_lv_unhold(it);
	gq_lv_count(it);
}

static void
gq_lv_caller_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	gq_lv_start(it);
	sq_sync_f(it->sync_q->q, it->body, gq_lv_body_fn);
	GQ_CHECK(it->L->p, atomic_load(&it->body->runs) == 1, "liveness %s: "
			"sync onto '%s' returned before its function ran",
			gq_lv_names[it->shape], it->sync_q->label);
	gq_lv_count(it);
}

static void
gq_lv_signal_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	gq_lv_start(it);
	sq_semaphore_signal(it->sem);
	gq_lv_count(it);
}

static void
gq_lv_wait_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	gq_lv_start(it);
	if (it->partner)
		sq_async_f(it->partner_q, it->partner, gq_lv_signal_fn);
	intptr_t r = sq_semaphore_wait(it->sem, SQ_TIME_FOREVER);
	GQ_CHECK(it->L->p, r == 0, "liveness semaphore: a wait forever "
			"returned %ld", (long)r);
	gq_lv_count(it);
}

static void
gq_lv_fork_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	struct gq_live *L = it->L;
	gq_lv_start(it);
	if (it->depth > 0) {
		struct gq_rng r = { it->seed };
		sq_group_t g = sq_group_create();
		for (int i = 0; i < it->fanout; i++) {
			struct gq_lv_item *c = gq_lv_new(L, LV_FORK_JOIN,
					it->depth > 1 ? "fork-join node" :
					"fork-join leaf", gq_mix(r.s + (uint64_t)i));
			c->depth = it->depth - 1;
			c->fanout = it->fanout;
			c->parent = it;
			c->mixed = it->mixed;
			c->prio = gq_lv_member_prio(it, &r);
			gq_lv_dress(c, &r, c->depth ? 0 : 300);
			sq_group_async_f(g, gq_lv_global(c->prio), c,
					gq_lv_fork_fn);
		}
		intptr_t w = sq_group_wait(g, SQ_TIME_FOREVER);
		int done = atomic_load(&it->children_done);
		GQ_CHECK(L->p, w == 0 && done == it->fanout, "liveness "
				"fork-join: a group wait (forever) returned %ld "
				"with %d of its %d members finished", (long)w, done,
				it->fanout);
		sq_release(g);
	} else {
		gq_lv_work(it);
	}
	if (it->parent)
		atomic_fetch_add(&it->parent->children_done, 1);
	gq_lv_count(it);
}

static void
gq_lv_wi_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	gq_lv_start(it);
	gq_lv_work(it);
	atomic_store(&it->children_done, 1); /* its waiter looks */
	gq_lv_count(it);
}

static void
gq_lv_wi_waiter_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	struct gq_live *L = it->L;
	gq_lv_start(it);
	struct gq_rng r = { it->seed };
	sq_workitem_t items[3];
	struct gq_lv_item *fns[3];
	for (int i = 0; i < it->nitems; i++) {
		fns[i] = gq_lv_new(L, LV_WORKITEM, "work item",
				gq_mix(r.s + (uint64_t)i));
		gq_lv_dress(fns[i], &r, 300);
		items[i] = sq_workitem_create_f(0, fns[i], gq_lv_wi_fn);
		sq_async_workitem(it->wq ? it->wq : gq_lv_global(
				gq_lv_member_prio(it, &r)), items[i]);
	}
	for (int k = 0; k < it->nitems; k++) {
		int i = it->newest_first ? it->nitems - 1 - k : k;
		intptr_t w = sq_workitem_wait(items[i], SQ_TIME_FOREVER);
		GQ_CHECK(L->p, w == 0 && atomic_load(&fns[i]->children_done),
				"liveness work item wait: a wait (forever) "
				"returned %ld before the item's function finished",
				(long)w);
	}
	for (int i = 0; i < it->nitems; i++)
		gq_item_release(items[i]);
	gq_lv_count(it);
}

static void
gq_lv_hop_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	struct gq_live *L = it->L;
	atomic_store_explicit(&it->started, 1, memory_order_relaxed);
	gq_progress(L->p);
	gq_lv_hold(L, it);
	gq_spin(it->work_us);
	gq_lv_unhold(it);
	if (it->hop + 1 < it->hops) {
		struct gq_lv_queue *nq = it->hq[(it->hop + 1) % 2];
		struct gq_lv_item *n = gq_lv_new(L, LV_HANDOFF, "hop",
				gq_mix(it->seed));
		n->hop = it->hop + 1;
		n->hops = it->hops;
		n->hq[0] = it->hq[0];
		n->hq[1] = it->hq[1];
		n->holds = nq;
		n->work_us = (unsigned)(it->seed & 255); /* spin turns */
		sq_async_f(nq->q, n, gq_lv_hop_fn);
	}
	gq_lv_count(it);
}

/* Starts the hop chain from a worker (its first hop lands in this
 * worker's next-job slot), then computes. */
static void
gq_lv_kicker_fn(void *ctx)
{
	struct gq_lv_item *it = ctx;
	gq_lv_start(it);
	sq_async_f(it->first->holds->q, it->first, gq_lv_hop_fn);
	gq_lv_work(it);
	gq_lv_count(it);
}

/* ---- The shapes (launched by the driver) -------------------------------------------- */

/* A global queue or one of the program's concurrent queues; its
 * priority in *prio. */
static sq_queue_t
gq_lv_pool_queue_at(struct gq_live *L, struct gq_rng *r, int *prio)
{
	int k = (int)gq_rnd(r, 4);
	if (k < 2) {
		*prio = L->conc_prio[k];
		return L->conc[k];
	}
	*prio = (int)gq_rnd(r, 4);
	return gq_lv_global(*prio);
}

static sq_queue_t
gq_lv_pool_queue(struct gq_live *L, struct gq_rng *r)
{
	int prio;
	return gq_lv_pool_queue_at(L, r, &prio);
}

/* Dependent waits: up to `want` of what is left. */
static int
gq_lv_take_dependent(struct gq_live *L, int want)
{
	int n = want < L->dependent ? want : L->dependent;
	L->dependent -= n;
	return n;
}

static void
gq_lv_busy(struct gq_live *L, int shape, struct gq_lv_queue *q, int n,
		struct gq_rng *r)
{
	for (int i = 0; i < n; i++) {
		struct gq_lv_item *b = gq_lv_new(L, shape, "busy task",
				gq_mix(r->s + 11));
		b->holds = q;
		gq_lv_dress(b, r, 1000);
		gq_lv_expect(L, shape, 1);
		sq_async_f(q->q, b, gq_lv_plain_fn);
	}
}

/* A sync caller onto `q` (its body maybe nested onto `inner_q`), on a
 * global or concurrent queue. */
static void
gq_lv_caller(struct gq_live *L, int shape, struct gq_lv_queue *q,
		struct gq_lv_queue *inner_q, struct gq_rng *r)
{
	struct gq_lv_item *c = gq_lv_new(L, shape, "sync caller",
			gq_mix(r->s + 13));
	struct gq_lv_item *b = gq_lv_new(L, shape, "sync body",
			gq_mix(r->s + 17));
	gq_lv_dress(c, r, 0);
	b->holds = q;
	b->work_us = gq_rnd(r, 60);
	if (gq_chance(r, 25)) {
		b->sleep = true;
		b->work_us = 50 + gq_rnd(r, 201);
	}
	c->sync_q = q;
	c->body = b;
	long n = 2;
	if (inner_q) {
		struct gq_lv_item *in = gq_lv_new(L, shape, "nested sync body",
				gq_mix(r->s + 19));
		in->holds = inner_q;
		in->work_us = gq_rnd(r, 40);
		b->inner_q = inner_q;
		b->inner = in;
		n++;
	}
	gq_lv_expect(L, shape, n);
	sq_async_f(gq_lv_pool_queue(L, r), c, gq_lv_caller_fn);
}

static void
gq_lv_pileup(struct gq_live *L, struct gq_rng *r)
{
	struct gq_lv_queue *q = &L->busy[gq_rnd(r, 2)];
	int busy = 1 + (int)gq_rnd(r, 6);
	int callers = 4 + (int)gq_rnd(r, 37);
	bool busy_first = gq_chance(r, 70);
	if (busy_first)
		gq_lv_busy(L, LV_PILEUP, q, busy, r);
	for (int i = 0; i < callers; i++) {
		gq_lv_caller(L, LV_PILEUP, q, NULL, r);
		if (i == callers / 2 && gq_chance(r, 50))
			gq_lv_busy(L, LV_PILEUP, q, 1, r); /* more, meanwhile */
	}
	if (!busy_first)
		gq_lv_busy(L, LV_PILEUP, q, busy, r);
}

static void
gq_lv_chain(struct gq_live *L, struct gq_rng *r)
{
	gq_lv_busy(L, LV_CHAIN, &L->outer, 1 + (int)gq_rnd(r, 3), r);
	if (gq_chance(r, 50))
		gq_lv_busy(L, LV_CHAIN, &L->inner, 1 + (int)gq_rnd(r, 3), r);
	if (gq_chance(r, 30))
		gq_lv_busy(L, LV_CHAIN, &L->leaf, 1 + (int)gq_rnd(r, 2), r);
	int callers = 4 + (int)gq_rnd(r, 25);
	for (int i = 0; i < callers; i++) {
		bool outer = gq_chance(r, 20);
		gq_lv_caller(L, LV_CHAIN, outer ? &L->outer : &L->inner,
				!outer && gq_chance(r, 35) ? &L->leaf : NULL, r);
	}
}

static void
gq_lv_semaphore(struct gq_live *L, struct gq_rng *r)
{
	int pairs = gq_lv_take_dependent(L, 1 + (int)gq_rnd(r, 3));
	for (int i = 0; i < pairs; i++) {
		sq_semaphore_t s = sq_semaphore_create(0);
		L->sems[L->nsems++] = s;
		struct gq_lv_item *w = gq_lv_new(L, LV_SEMAPHORE,
				"semaphore waiter", gq_mix(r->s + 23));
		struct gq_lv_item *g = gq_lv_new(L, LV_SEMAPHORE,
				"semaphore signaller", gq_mix(r->s + 29));
		w->sem = g->sem = s;
		gq_lv_dress(w, r, 0);
		gq_lv_dress(g, r, 0);
		gq_lv_expect(L, LV_SEMAPHORE, 2);
		int how = (int)gq_rnd(r, 3);
		sq_queue_t wq = gq_lv_pool_queue(L, r);
		/* the signaller maybe on an idle serial queue: from the
		 * waiter, it sits in the waiter's next-job slot */
		sq_queue_t sq = gq_chance(r, 30) ? L->idle[gq_rnd(r, 2)].q :
				gq_lv_pool_queue(L, r);
		if (how == 0) { /* waiter first */
			sq_async_f(wq, w, gq_lv_wait_fn);
			sq_async_f(sq, g, gq_lv_signal_fn);
		} else if (how == 1) {
			sq_async_f(sq, g, gq_lv_signal_fn);
			sq_async_f(wq, w, gq_lv_wait_fn);
		} else { /* the waiter submits its signaller, then waits */
			w->partner = g;
			w->partner_q = sq;
			sq_async_f(wq, w, gq_lv_wait_fn);
		}
	}
}

/* Nodes of a tree `depth` levels below its root, `fanout` children each. */
static long
gq_lv_tree_nodes(int depth, int fanout, long *internal)
{
	long level = 1, all = 0;
	*internal = 0;
	for (int d = 0; d <= depth; d++) {
		all += level;
		if (d < depth)
			*internal += level;
		level *= fanout;
	}
	return all;
}

static void
gq_lv_fork_join(struct gq_live *L, struct gq_rng *r)
{
	int depth = 1 + (int)gq_rnd(r, 3);
	int fanout = 2 + (int)gq_rnd(r, 2);
	long internal, nodes = gq_lv_tree_nodes(depth, fanout, &internal);
	/* Mixed: children on global queues of any priority. A waiting
	 * node runs only the children queued at its own priority itself
	 * (they are the ones on its worker's ring), so there every waiting
	 * node may hold a thread, as everywhere on libdispatch. */
	bool mixed = gq_chance(r, 30);
	if (!GQ_WAIT_HELPS || mixed) {
		/* fit the budget */
		int d = depth;
		long in = internal, all = nodes;
		while (d > 1 && in > L->dependent)
			all = gq_lv_tree_nodes(--d, fanout, &in);
		if (in <= L->dependent) {
			depth = d;
			nodes = all;
			internal = in;
			L->dependent -= (int)internal;
		} else if (GQ_WAIT_HELPS) {
			mixed = false;
		} else {
			return;
		}
	}
	struct gq_lv_item *root = gq_lv_new(L, LV_FORK_JOIN, mixed ?
			"fork-join root (mixed priorities)" : "fork-join root",
			gq_mix(r->s + 31));
	root->depth = depth;
	root->fanout = fanout;
	root->mixed = mixed;
	gq_lv_dress(root, r, 0);
	gq_lv_expect(L, LV_FORK_JOIN, nodes);
	/* never a serial queue: a waiter holding one does not help */
	sq_queue_t q = gq_lv_pool_queue_at(L, r, &root->prio);
	sq_async_f(q, root, gq_lv_fork_fn);
}

static void
gq_lv_workitem(struct gq_live *L, struct gq_rng *r)
{
	int waiters = 1 + (int)gq_rnd(r, 3);
	for (int i = 0; i < waiters; i++) {
		/* The waiter runs an item itself only when the item's job
		 * is the newest entry of its worker's ring: on a global queue
		 * at its own priority, waited for newest first (or alone).
		 * Items on a concurrent queue (what is queued is the queue's
		 * job, not the item), on an idle serial queue (the item in
		 * the waiter's next-job slot), at other priorities, or waited
		 * for oldest first: the wait holds its thread (see
		 * gq_lv_fork_join). */
		int how = (int)gq_rnd(r, 10); /* 0-1, 2-3, 4-5: see below */
		bool conc = how < 2, serial = how >= 2 && how < 4;
		bool mixed = how >= 4 && how < 6;
		int nitems = 1 + (int)gq_rnd(r, 3);
		bool newest_first = nitems == 1 || gq_chance(r, 50);
		if ((conc || serial || mixed || !newest_first ||
				!GQ_WAIT_HELPS) && gq_lv_take_dependent(L, 1) == 0) {
			if (!GQ_WAIT_HELPS)
				return;
			conc = serial = mixed = false;
			newest_first = true;
		}
		struct gq_lv_item *w = gq_lv_new(L, LV_WORKITEM, conc ?
				"work item waiter (concurrent queue)" : serial ?
				"work item waiter (idle serial queue)" : mixed ?
				"work item waiter (mixed priorities)" :
				!newest_first ? "work item waiter (oldest first)" :
				"work item waiter", gq_mix(r->s + 37));
		w->nitems = nitems;
		w->newest_first = newest_first;
		w->wq = conc ? L->conc[gq_rnd(r, 2)] : serial ?
				L->idle[gq_rnd(r, 2)].q : NULL;
		w->mixed = mixed;
		gq_lv_dress(w, r, 0);
		gq_lv_expect(L, LV_WORKITEM, 1 + w->nitems);
		sq_queue_t q = gq_lv_pool_queue_at(L, r, &w->prio);
		sq_async_f(q, w, gq_lv_wi_waiter_fn);
	}
}

static void
gq_lv_handoff(struct gq_live *L, struct gq_rng *r)
{
	int hops = 20 + (int)gq_rnd(r, 181);
	struct gq_lv_item *h = gq_lv_new(L, LV_HANDOFF, "hop",
			gq_mix(r->s + 41));
	h->hops = hops;
	h->hq[0] = &L->hop[0];
	h->hq[1] = &L->hop[1];
	h->holds = &L->hop[0];
	gq_lv_expect(L, LV_HANDOFF, hops);
	int spinners = 1 + (int)gq_rnd(r, 3);
	for (int i = 0; i < spinners; i++) {
		struct gq_lv_item *s = gq_lv_new(L, LV_HANDOFF, "spinner",
				gq_mix(r->s + 43));
		s->work_us = 1000 + gq_rnd(r, 19001);
		gq_lv_expect(L, LV_HANDOFF, 1);
		sq_async_f(gq_global(r), s, gq_lv_plain_fn);
	}
	if (gq_chance(r, 60)) {
		struct gq_lv_item *k = gq_lv_new(L, LV_HANDOFF, "hand-off "
				"kicker", gq_mix(r->s + 47));
		k->first = h;
		k->work_us = 1000 + gq_rnd(r, 19001);
		gq_lv_expect(L, LV_HANDOFF, 1);
		sq_async_f(gq_global(r), k, gq_lv_kicker_fn);
	} else {
		sq_async_f(h->holds->q, h, gq_lv_hop_fn);
	}
}

static void
gq_lv_sleepers(struct gq_live *L, struct gq_rng *r)
{
	int n = 2 + (int)gq_rnd(r, 11);
	for (int i = 0; i < n; i++) {
		struct gq_lv_item *s = gq_lv_new(L, LV_SLEEP, "sleeper",
				gq_mix(r->s + 53));
		s->sleep = true;
		s->work_us = 50 + gq_rnd(r, 451);
		gq_lv_expect(L, LV_SLEEP, 1);
		int k = (int)gq_rnd(r, 5);
		if (k == 4) {
			s->holds = &L->busy[gq_rnd(r, 2)];
			sq_async_f(s->holds->q, s, gq_lv_plain_fn);
		} else {
			sq_async_f(gq_lv_pool_queue(L, r), s, gq_lv_plain_fn);
		}
	}
}

/* ---- Checking the checks ------------------------------------------------------------- */

/*
 * SQT_LIVE_SABOTAGE=hang|lose|twice: every liveness program then fails.
 *   hang   one semaphore waiter per thread of the cap, queued ahead of
 *          their signallers on one global queue: every thread waits, no
 *          signaller runs (a stall, after GQ_STALL_SECONDS);
 *   lose   one job more is expected than is submitted (a stall);
 *   twice  one sleeper is submitted twice (runs twice; one job too many).
 */
static void
gq_lv_sabotage(struct gq_live *L, struct gq_rng *r)
{
	const char *how = getenv("SQT_LIVE_SABOTAGE");
	if (how == NULL || *how == '\0')
		return;
	if (strcmp(how, "hang") == 0) {
		int n = L->cap < 64 ? L->cap : 64;
		struct gq_lv_item *w[64], *g[64];
		for (int i = 0; i < n; i++) {
			/* leaked: the program fails */
			sq_semaphore_t s = sq_semaphore_create(0);
			w[i] = gq_lv_new(L, LV_SEMAPHORE, "semaphore waiter "
					"(sabotage)", 0);
			g[i] = gq_lv_new(L, LV_SEMAPHORE, "semaphore signaller "
					"(sabotage)", 0);
			w[i]->sem = g[i]->sem = s;
			gq_lv_expect(L, LV_SEMAPHORE, 2);
		}
		sq_queue_t q = gq_lv_global(1);
		for (int i = 0; i < n; i++)
			sq_async_f(q, w[i], gq_lv_wait_fn);
		for (int i = 0; i < n; i++)
			sq_async_f(q, g[i], gq_lv_signal_fn);
	} else if (strcmp(how, "lose") == 0) {
		gq_lv_expect(L, LV_SLEEP, 1);
	} else if (strcmp(how, "twice") == 0) {
		struct gq_lv_item *s = gq_lv_new(L, LV_SLEEP, "sleeper "
				"(sabotage)", 0);
		s->sleep = true;
		s->work_us = 100;
		gq_lv_expect(L, LV_SLEEP, 1);
		sq_async_f(gq_global(r), s, gq_lv_plain_fn);
		sq_async_f(gq_global(r), s, gq_lv_plain_fn);
	}
}

/* ---- The program ------------------------------------------------------------------ */

static void
gq_lv_queue(struct gq_lv_queue *q, const char *label, struct gq_lv_queue
		*parent, struct gq_rng *r)
{
	q->label = label;
	q->parent = parent;
	atomic_init(&q->hold, 0);
	q->q = sq_queue_create_with_target(label, SQ_QUEUE_SERIAL, parent ?
			parent->q : gq_global(r));
}

static bool
gq_lv_finished(void *ctx)
{
	struct gq_live *L = ctx;
#if GQ_HAS_WIDTH
	unsigned live = gq_pool_live();
	if (live > L->peak_threads)
		L->peak_threads = live;
#endif
	return atomic_load(&L->ran) >= L->expected || gq_now() > L->deadline;
}

/* The shapes' tally, for a failure's message. */
static void
gq_lv_tally(struct gq_live *L, char *buf, size_t size)
{
	size_t n = 0;
	buf[0] = '\0';
	for (int s = 0; s < LV_SHAPES && n < size; s++) {
		long e = L->shape_expected[s];
		long ran = atomic_load(&L->shape_ran[s]);
		if (e == 0 && ran == 0)
			continue;
		n += (size_t)snprintf(buf + n, size - n, "%s%s %ld/%ld", n ?
				", " : "", gq_lv_names[s], ran, e);
	}
}

/* The jobs that did not finish, by kind: "never started" (stranded in a
 * queue) or "started" (stuck inside: a wait, a sync). */
static void
gq_lv_stuck(struct gq_live *L, char *buf, size_t size)
{
	struct {
		const char *what;
		int shape;
		int started, waiting;
	} k[24];
	int nk = 0;
	for (struct gq_lv_item *it = atomic_load(&L->items); it; it = it->all) {
		if (atomic_load(&it->runs) != 0)
			continue;
		int j;
		for (j = 0; j < nk; j++)
			if (k[j].what == it->what && k[j].shape == it->shape)
				break;
		if (j == nk) {
			if (nk == 24)
				continue;
			k[nk].what = it->what;
			k[nk].shape = it->shape;
			k[nk].started = k[nk].waiting = 0;
			nk++;
		}
		if (atomic_load(&it->started))
			k[j].started++;
		else
			k[j].waiting++;
	}
	size_t n = 0;
	buf[0] = '\0';
	for (int j = 0; j < nk && n < size; j++) {
		char a[40] = "", b[40] = "";
		if (k[j].waiting)
			snprintf(a, sizeof(a), "%d never started", k[j].waiting);
		if (k[j].started)
			snprintf(b, sizeof(b), "%d stuck inside", k[j].started);
		n += (size_t)snprintf(buf + n, size - n, "%s%s (%s): %s%s%s",
				j ? "; " : "", k[j].what, gq_lv_names[k[j].shape],
				a, *a && *b ? ", " : "", b);
	}
	if (nk == 0)
		snprintf(buf, size, "none submitted");
}

static int
gq_lv_pick(struct gq_rng *r)
{
	unsigned total = 0;
	for (int i = 0; i < LV_SHAPES; i++)
		total += gq_lv_mix[i];
	if (total == 0)
		return -1;
	unsigned x = gq_rnd(r, total);
	int s = 0;
	while (x >= gq_lv_mix[s])
		x -= gq_lv_mix[s++];
	return s;
}

/* Runs a liveness program (p is set up: seed, rng); false if it failed. */
static bool
gq_live_program(struct gq_prog *p)
{
	struct gq_rng *r = &p->rng;
	struct gq_live *L = calloc(1, sizeof(*L));
	if (L == NULL)
		abort();
	L->p = p;
	L->cap = gq_thread_cap();
	L->dependent = L->cap - 2;
	if (L->dependent > gq_lv_dependent_max)
		L->dependent = gq_lv_dependent_max;
	if (L->dependent < 0)
		L->dependent = 0;
	atomic_fetch_add_explicit(&p->live_programs, 1, memory_order_relaxed);
	gq_lv_queue(&L->busy[0], "busy0", NULL, r);
	gq_lv_queue(&L->busy[1], "busy1", NULL, r);
	gq_lv_queue(&L->outer, "outer", NULL, r);
	gq_lv_queue(&L->inner, "inner", &L->outer, r);
	gq_lv_queue(&L->leaf, "leaf", NULL, r);
	gq_lv_queue(&L->hop[0], "hop0", NULL, r);
	gq_lv_queue(&L->hop[1], "hop1", NULL, r);
	gq_lv_queue(&L->idle[0], "idle0", NULL, r);
	gq_lv_queue(&L->idle[1], "idle1", NULL, r);
	for (int i = 0; i < 2; i++) {
		L->conc_prio[i] = (int)gq_rnd(r, 4);
		L->conc[i] = sq_queue_create_with_target(i ? "conc1" : "conc0",
				SQ_QUEUE_CONCURRENT, gq_lv_global(L->conc_prio[i]));
	}
	uint64_t t0 = gq_now();
	L->deadline = t0 + (uint64_t)GQ_LIVE_DEADLINE_S * 1000000000ull;
	gq_lv_sabotage(L, r);
	int nshapes = 2 + (int)gq_rnd(r, 5);
	for (int i = 0; i < nshapes; i++) {
		int s = gq_lv_pick(r);
		if (s < 0)
			break;
		GQ_TRACE("liveness shape %s\n", gq_lv_names[s]);
		L->shapes_run |= 1u << s;
		switch (s) {
		case LV_PILEUP: gq_lv_pileup(L, r); break;
		case LV_CHAIN: gq_lv_chain(L, r); break;
		case LV_SEMAPHORE: gq_lv_semaphore(L, r); break;
		case LV_FORK_JOIN: gq_lv_fork_join(L, r); break;
		case LV_WORKITEM: gq_lv_workitem(L, r); break;
		case LV_HANDOFF: gq_lv_handoff(L, r); break;
		case LV_SLEEP: gq_lv_sleepers(L, r); break;
		}
		if (gq_chance(r, 30))
			usleep(gq_rnd(r, 3000));
	}
	bool waited = gq_wait(p, gq_lv_finished, L, "the liveness program's "
			"jobs");
	long ran = atomic_load(&L->ran);
	char tally[512];
	gq_lv_tally(L, tally, sizeof(tally));
	if (waited && ran < L->expected)
		gq_fail(p, "liveness: %ld of %ld jobs ran in %d s (the "
				"deadline)", ran, L->expected, GQ_LIVE_DEADLINE_S);
	GQ_CHECK(p, ran <= L->expected, "liveness: %ld jobs ran, %ld "
			"submitted", ran, L->expected);
#if GQ_HAS_WIDTH
	GQ_CHECK(p, L->peak_threads <= (unsigned)L->cap, "liveness: the pool "
			"had %u threads, above its cap of %d", L->peak_threads,
			L->cap);
#endif
	if (atomic_load(&p->failures) != 0) {
		/* Which shapes fell short; the program is left as it is
		 * (threads may still be inside its jobs). A job's failure
		 * may be still writing its text: a moment first. */
		usleep(2000);
		char stuck[1024];
		gq_lv_stuck(L, stuck, sizeof(stuck));
		size_t n = strlen(p->failure);
		snprintf(p->failure + n, sizeof(p->failure) - n, "; liveness "
				"program, %ld of %ld jobs ran (thread cap %d, "
				"%.1f s): %s; unfinished: %s", ran, L->expected,
				L->cap, (double)(gq_now() - t0) / 1e9, tally, stuck);
		return false;
	}
	for (int i = 0; i < 2; i++)
		sq_release(L->conc[i]);
	struct gq_lv_queue *qs[] = { &L->busy[0], &L->busy[1], &L->inner,
		&L->outer, &L->leaf, &L->hop[0], &L->hop[1], &L->idle[0],
		&L->idle[1] };
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		sq_release(qs[i]->q);
	for (int i = 0; i < L->nsems; i++)
		sq_release(L->sems[i]);
	struct gq_lv_item *it = atomic_load(&L->items);
	while (it) {
		struct gq_lv_item *next = it->all;
		free(it);
		it = next;
	}
	free(L);
	return true;
}

#endif /* SQTEST_GUARANTEES_LIVENESS_H */
