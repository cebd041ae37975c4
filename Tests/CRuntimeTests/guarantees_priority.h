/*
 * The guarantee checker's precedence family (test_guarantees.c): random
 * programs that saturate the pool with lower-class work, then submit work
 * of higher classes, checked for "higher work goes first".
 *
 * A precedence program (one seed in 8 of those that are not liveness
 * programs; see gq_seed_is_prio) splits the five QoS classes at a random
 * point: the classes below it are the backlog's, the ones above the
 * batch's. For every class in play it builds random shapes, each a place
 * tasks go (a "unit"):
 *   - global: the class's global queue (sq_get_global_queue(class, 0));
 *   - concurrent: a concurrent queue on it;
 *   - serial: a serial queue on it;
 *   - chain: a serial "inner" queue targeting a serial "outer" one on it
 *     (tasks go to either);
 *   - serial on concurrent, chain on concurrent: the same on a concurrent
 *     queue of the class.
 * A queue at the bottom of a shape gets its class one of three ways: an
 * explicit target (the class's global queue), an attribute with the class
 * (sq_queue_attr_make_with_qos_class) and no target, or (DEFAULT) a plain
 * queue with the default target. The driver queues the backlog, 300-800
 * tasks (and 30 more per worker of the pool's width) of 100-400 us of CPU
 * work each, waits (up to 200 ms) until as many run at once as the pool
 * has workers, then queues the batch, 20-100 tasks of 30-300 us (one
 * program in four sprinkles backlog-class tasks into it), with a few short
 * pauses. Once the batch has run, the backlog's tasks that have not
 * started yet return at once.
 *
 * Every task takes a tick from one atomic counter when it starts and when
 * it ends (the program's event order), and records the thread it runs on,
 * the end tick of the previous task that thread ran and, on a serial
 * queue, which task of its serial hierarchy (the bottom serial queue of
 * its chain) ran last before it. The guarantee, checked for EVERY task x
 * once the program is over:
 *
 *   Let ready(x) be the first tick after x was runnable: after the call
 *   that submitted it returned, and, on a serial hierarchy (a serial
 *   queue's task is runnable only at the head), after the hierarchy's
 *   previous task p ended, and not before p's thread started its next task
 *   (the drain goes on with x on that thread, or the drainer gives the
 *   queue up and puts it back on its target before it takes other work;
 *   until then no thread can take x). Let taken(x) be the end tick of the
 *   previous task run by the thread x runs on (x was taken off its queue
 *   after that; ticks between taken(x) and x's start are left out, since
 *   the thread may have been preempted after taking x). Of the n task
 *   starts with ticks in [ready(x), taken(x)), those of tasks of a class
 *   LOWER than x's number at most
 *       T + ceil(n / 8) + 4,
 *   T the number of threads that ran the program's tasks (the width, and
 *   the workers the pool adds beyond it for higher classes).
 *
 * The tolerance: T, since each thread may have taken a lower task just
 * before x became visible and start it after (also when it is preempted in
 * between); n / 8, twice the aging share (one take in 16 starts with
 * UTILITY, one in 64 with BACKGROUND, and a task start may cost two takes:
 * a concurrent queue's drain, then its forwarded task), which also covers
 * the pool's other documented exceptions (every 61st look takes from the
 * root queues only, every 16th a job from a busy worker's next-job slot);
 * 4, slack. A scheduler without precedence (FIFO across classes) starts
 * about n lower tasks in such a window; SQT_PRIO_SABOTAGE shows that the
 * check catches it (below).
 *
 * What is not checked by default: tasks behind a concurrent queue (its
 * own, or a serial queue's or chain's on one). Their queue's drain job is
 * what the pool schedules; a thread that has taken that job holds every
 * task not forwarded yet, and no tick of the program says when it did or
 * when it forwarded them (for the serial case, the drainer that ran the
 * previous task does). SwiftQueues' workers of the lower classes run at
 * a lower CPU priority (nice +4, +10) until they have taken a job: one
 * that takes a concurrent queue's drain job may wait milliseconds for a
 * CPU before it renices and forwards, while lower work goes on starting
 * elsewhere -- about one such window in 12 goes beyond the bound, by
 * hundreds of starts. Those windows are counted in the child's summary
 * line; SQT_PRIO_STRICT=1 checks them too (and fails).
 *
 * Along the way: every task runs exactly once; a serial queue's tasks
 * start in submission order and no two tasks of a serial hierarchy run at
 * once; and (SwiftQueues: GQ_HAS_QOS_SELF) each task sees
 * sq_qos_class_self() equal to its shape's class (no program here raises a
 * queue).
 *
 * SQT_OPS="priority" runs only this family; SQT_OPS without it leaves the
 * family out. A W:C width (the liveness family only) leaves it out too.
 * On libdispatch (guarantees_dispatch.h) the family runs only when SQT_OPS
 * names it: libdispatch on Linux keeps a thread pool per QoS class and
 * leaves the choice between classes to the kernel's scheduler, so lower
 * work goes on starting beside higher work (GQ_PRIO_SKIP_WHY).
 *
 * SQT_PRIO_SABOTAGE=flat|invert checks the check: every queue of a
 * program is built on the DEFAULT global queue (flat: FIFO across the
 * classes the tasks are recorded with), or on the global queue of the
 * mirrored class (invert: BACKGROUND for USER_INTERACTIVE, ...). Either
 * way, precedence programs then fail. SQT_PRIO_STATS=1 prints, per child,
 * the worst window checked; SQT_PRIO_DEBUG=1 prints a failed window's task
 * (and its queue's tasks) on stderr, SQT_PRIO_DEBUG=2 every start around
 * it too.
 */
#ifndef SQTEST_GUARANTEES_PRIORITY_H
#define SQTEST_GUARANTEES_PRIORITY_H

#include <unistd.h>

#define GQ_PR_CLASSES 5
/* The tolerance (see above): T + n / GQ_PR_AGING_DIV (rounded up) +
 * GQ_PR_SLACK. */
#define GQ_PR_AGING_DIV 8
#define GQ_PR_SLACK 4
#define GQ_PR_MAX_UNITS 64
#define GQ_PR_MAX_HIERS 32

/* Highest first: an index, lower is higher. */
static const unsigned gq_pr_qos[GQ_PR_CLASSES] = {
	SQ_QOS_CLASS_USER_INTERACTIVE, SQ_QOS_CLASS_USER_INITIATED,
	SQ_QOS_CLASS_DEFAULT, SQ_QOS_CLASS_UTILITY, SQ_QOS_CLASS_BACKGROUND,
};
static const char *const gq_pr_names[GQ_PR_CLASSES] = {
	"USER_INTERACTIVE", "USER_INITIATED", "DEFAULT", "UTILITY",
	"BACKGROUND",
};

enum {
	PR_GLOBAL,
	PR_CONC,
	PR_SERIAL,
	PR_CHAIN,
	PR_SERIAL_CONC,
	PR_CHAIN_CONC,
	PR_SHAPES,
};

static const char *const gq_pr_shape_names[PR_SHAPES] = {
	"global", "concurrent", "serial", "chain", "serial on concurrent",
	"chain on concurrent",
};

/* Whether this child runs the family (gq_choose_ops), and what the
 * backend leaves out by default. */
static bool gq_prio_on;
static bool gq_prio_skipped;

/* The program's event order: one counter for every start and end, never
 * reset (a thread's last end tick from an earlier program is then simply
 * older than the program). */
static _Atomic uint64_t gq_pr_ticks = 1;
/* The calling thread's last task end tick, and the program it counted
 * itself in. */
static __thread uint64_t gq_pr_thread_end;
static __thread uint64_t gq_pr_thread_prog;
static __thread int gq_pr_thread_num;
static _Atomic uint64_t gq_pr_prog_ids = 1;

/* A serial hierarchy: the bottom serial queue of a chain. */
struct gq_pr_hier {
	atomic_int hold;
	atomic_int last;         /* the task that ran last (-1: none) */
};

struct gq_pr_unit {
	sq_queue_t q;
	bool owned;              /* a queue of the program (released) */
	int cls;                 /* its class (the recorded one) */
	int shape;
	bool via_conc;           /* a concurrent queue between it and its
	                          * global queue (itself included) */
	struct gq_pr_hier *h;    /* serial: its hierarchy */
	atomic_uint last_seq;    /* serial: the last started submission */
	uint32_t seq;            /* driver: submissions so far */
	char label[40];
};

struct gq_prio;

struct gq_pr_task {
	struct gq_prio *P;
	int unit;
	int cls;
	bool batch;
	uint32_t spin_us;
	uint32_t seq;            /* on a serial unit: its submission number */
	uint64_t sub;            /* driver: the tick after its submission */
	uint64_t start, end;     /* its ticks */
	int h_prev;              /* its hierarchy's previous task (-1: none) */
	uint64_t thr_prev_end;   /* its thread's previous end, this program
	                          * (0: none) */
	unsigned self_qos;       /* sq_qos_class_self() at its start */
	int thread;              /* the thread it ran on (its number in the
	                          * program) */
	atomic_int runs;
};

struct gq_prio {
	struct gq_prog *p;
	uint64_t id;
	uint64_t first_tick;
	int split;               /* classes < split: the batch's */
	int nunits;
	struct gq_pr_unit units[GQ_PR_MAX_UNITS];
	int nhiers;
	struct gq_pr_hier hiers[GQ_PR_MAX_HIERS];
	sq_queue_t extra[GQ_PR_MAX_UNITS]; /* concurrent queues under
	                                    * serial shapes */
	int nextra;
	int ntasks;
	struct gq_pr_task *tasks;
	atomic_int running;
	atomic_int peak_running;
	atomic_long finished;
	atomic_long batch_left;
	atomic_int stop;         /* the batch has run: backlog returns */
	atomic_int threads;      /* distinct threads that ran its tasks */
	atomic_int self_mismatch;
	bool saturated;
	const char *sabotage;
};

/* SQT_PRIO_STRICT=1: the windows of tasks behind a concurrent queue are
 * checked too (see the file comment). */
static bool gq_pr_strict;

/* The per-child summary: the windows checked, and those of tasks behind a
 * concurrent queue (unless strict) that are only counted. */
struct gq_pr_window {
	unsigned long windows, overtaken, beyond;
	long worst_over, worst_n, worst_allowed;
	double worst_ratio;
	long worst_tight;        /* lower starts in [ready, start) at worst */
};

static struct {
	unsigned long programs, tasks, unsaturated;
	unsigned long running_at_batch; /* summed over the programs */
	struct gq_pr_window checked, conc;
} gq_pr_stats;

/* ---- Tasks ---------------------------------------------------------------- */

/* A task's work is a loop of so many turns a microsecond (measured once):
 * CPU work, so that with more threads than CPUs a task still costs what it
 * says and the backlog lasts (spinning on the clock, 16 threads on 2 CPUs
 * went through it before the batch came; the thread's CPU clock is a
 * system call, which changed the schedule it was to measure). */
static unsigned gq_pr_turns_per_us;

static void
gq_pr_calibrate(void)
{
	if (gq_pr_turns_per_us)
		return;
	uint64_t best = ~0ull;
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = gq_now();
		gq_spin(200000);
		uint64_t d = gq_now() - t0;
		if (d < best)
			best = d;
	}
	uint64_t per = 200000ull * 1000 / (best ? best : 1);
	gq_pr_turns_per_us = per ? (unsigned)per : 1;
}

static void
gq_pr_spin(struct gq_pr_task *t)
{
	for (uint32_t us = 0; us < t->spin_us; us++) {
		if (!t->batch && atomic_load_explicit(&t->P->stop,
				memory_order_relaxed))
			return;
		gq_spin(gq_pr_turns_per_us);
	}
}

static void
gq_pr_task_fn(void *ctx)
{
	struct gq_pr_task *t = ctx;
	struct gq_prio *P = t->P;
	struct gq_prog *p = P->p;
	struct gq_pr_unit *u = &P->units[t->unit];
	uint64_t s = atomic_fetch_add(&gq_pr_ticks, 1);
	t->start = s;
	if (gq_pr_thread_prog != P->id) {
		gq_pr_thread_prog = P->id;
		gq_pr_thread_end = 0;
		gq_pr_thread_num = atomic_fetch_add(&P->threads, 1);
	}
	t->thread = gq_pr_thread_num;
	t->thr_prev_end = gq_pr_thread_end;
	gq_progress(p);
	GQ_CHECK(p, atomic_fetch_add(&t->runs, 1) == 0, "priority: a task on "
			"'%s' ran twice", u->label);
	int running = atomic_fetch_add(&P->running, 1) + 1;
	int peak = atomic_load_explicit(&P->peak_running, memory_order_relaxed);
	while (running > peak && !atomic_compare_exchange_weak(
			&P->peak_running, &peak, running))
		;
#if GQ_HAS_QOS_SELF
	t->self_qos = sq_qos_class_self();
	if (t->self_qos != gq_pr_qos[t->cls] && !P->sabotage)
		atomic_fetch_add(&P->self_mismatch, 1);
#endif
	if (u->h) {
		int old = atomic_fetch_add(&u->h->hold, 1);
		GQ_CHECK(p, old == 0, "priority: a task on serial queue '%s' "
				"started while another task of its hierarchy ran",
				u->label);
		t->h_prev = atomic_load(&u->h->last);
		unsigned prev = atomic_exchange(&u->last_seq, t->seq);
		GQ_CHECK(p, prev < t->seq, "priority: FIFO: task #%u on serial "
				"queue '%s' started after #%u", t->seq, u->label,
				prev);
	}
	gq_pr_spin(t);
	uint64_t e = atomic_fetch_add(&gq_pr_ticks, 1);
	t->end = e;
	gq_pr_thread_end = e;
	if (u->h) {
		atomic_store(&u->h->last, (int)(t - P->tasks));
		atomic_fetch_sub(&u->h->hold, 1);
	}
	atomic_fetch_sub(&P->running, 1);
	if (t->batch && atomic_fetch_sub(&P->batch_left, 1) == 1)
		atomic_store(&P->stop, 1);
	gq_done(p);
	atomic_fetch_add(&P->finished, 1);
}

/* ---- Shapes ----------------------------------------------------------------- */

/* The class a queue is really built on (the sabotage's lie). */
static int
gq_pr_real_class(struct gq_prio *P, int cls)
{
	if (P->sabotage && strcmp(P->sabotage, "flat") == 0)
		return 2; /* DEFAULT */
	if (P->sabotage && strcmp(P->sabotage, "invert") == 0)
		return GQ_PR_CLASSES - 1 - cls;
	return cls;
}

static sq_queue_t
gq_pr_global(struct gq_prio *P, int cls)
{
	return sq_get_global_queue((intptr_t)gq_pr_qos[gq_pr_real_class(P,
			cls)], 0);
}

/* A queue at the bottom of a shape, on class `cls`'s global queue: an
 * explicit target, a class attribute and no target, or (DEFAULT) the
 * default target. */
static sq_queue_t
gq_pr_bottom_queue(struct gq_prio *P, const char *label, bool concurrent,
		int cls, struct gq_rng *r)
{
	sq_queue_attr_t plain = concurrent ? SQ_QUEUE_CONCURRENT :
			SQ_QUEUE_SERIAL;
	int real = gq_pr_real_class(P, cls);
	int how = (int)gq_rnd(r, 3);
	if (how == 1) {
		sq_queue_attr_t a = sq_queue_attr_make_with_qos_class(plain,
				gq_pr_qos[real], -(int)gq_rnd(r, 16));
		return sq_queue_create(label, a);
	}
	if (how == 2 && real == 2)
		return sq_queue_create(label, plain);
	return sq_queue_create_with_target(label, plain, gq_pr_global(P, cls));
}

static int
gq_pr_unit_add(struct gq_prio *P, sq_queue_t q, bool owned, int cls,
		int shape, struct gq_pr_hier *h, const char *what)
{
	static const bool via_conc[PR_SHAPES] = {
		[PR_CONC] = true, [PR_SERIAL_CONC] = true, [PR_CHAIN_CONC] = true,
	};
	if (P->nunits == GQ_PR_MAX_UNITS)
		return -1;
	struct gq_pr_unit *u = &P->units[P->nunits];
	memset(u, 0, sizeof(*u));
	u->q = q;
	u->owned = owned;
	u->cls = cls;
	u->shape = shape;
	u->via_conc = via_conc[shape];
	u->h = h;
	snprintf(u->label, sizeof(u->label), "%s %s #%d", gq_pr_names[cls],
			what, P->nunits);
	return P->nunits++;
}

static struct gq_pr_hier *
gq_pr_hier_new(struct gq_prio *P)
{
	struct gq_pr_hier *h = &P->hiers[P->nhiers++];
	atomic_init(&h->hold, 0);
	atomic_init(&h->last, -1);
	return h;
}

/* The shapes of class `cls`: its global queue always, the others at
 * random (at least one of them). */
static void
gq_pr_shapes(struct gq_prio *P, int cls, struct gq_rng *r)
{
	gq_pr_unit_add(P, gq_pr_global(P, cls), false, cls, PR_GLOBAL,
			NULL, "global queue");
	static const unsigned odds[PR_SHAPES] = {
		[PR_CONC] = 60, [PR_SERIAL] = 70, [PR_CHAIN] = 40,
		[PR_SERIAL_CONC] = 30, [PR_CHAIN_CONC] = 25,
	};
	bool any = false;
	for (int s = PR_CONC; s < PR_SHAPES; s++) {
		if (!gq_chance(r, odds[s]) && !(s == PR_SHAPES - 1 && !any))
			continue;
		if (P->nunits + 2 > GQ_PR_MAX_UNITS ||
				P->nhiers + 1 > GQ_PR_MAX_HIERS)
			return;
		any = true;
		char label[48];
		snprintf(label, sizeof(label), "sqt.prio.%s.%s",
				gq_pr_names[cls], gq_pr_shape_names[s]);
		switch (s) {
		case PR_CONC: {
			sq_queue_t q = gq_pr_bottom_queue(P, label, true, cls, r);
			gq_pr_unit_add(P, q, true, cls, s, NULL,
					"concurrent queue");
			break;
		}
		case PR_SERIAL: {
			sq_queue_t q = gq_pr_bottom_queue(P, label, false, cls, r);
			gq_pr_unit_add(P, q, true, cls, s, gq_pr_hier_new(P),
					"serial queue");
			break;
		}
		case PR_CHAIN:
		case PR_CHAIN_CONC:
		case PR_SERIAL_CONC: {
			sq_queue_t base = NULL;
			if (s != PR_CHAIN) {
				base = gq_pr_bottom_queue(P, label, true, cls, r);
				P->extra[P->nextra++] = base;
			}
			struct gq_pr_hier *h = gq_pr_hier_new(P);
			sq_queue_t outer = base ? sq_queue_create_with_target(
					label, SQ_QUEUE_SERIAL, base) :
					gq_pr_bottom_queue(P, label, false, cls, r);
			if (s == PR_SERIAL_CONC) {
				gq_pr_unit_add(P, outer, true, cls, s, h,
						"serial queue on a concurrent one");
				break;
			}
			sq_queue_t inner = sq_queue_create_with_target(label,
					SQ_QUEUE_SERIAL, outer);
			gq_pr_unit_add(P, outer, true, cls, s, h, s == PR_CHAIN ?
					"chain's outer queue" :
					"chain's outer queue (on a concurrent one)");
			gq_pr_unit_add(P, inner, true, cls, s, h, s == PR_CHAIN ?
					"chain's inner queue" :
					"chain's inner queue (on a concurrent one)");
			break;
		}
		}
	}
}

/* A random unit of a class in [lo, hi]. */
static int
gq_pr_pick_unit(struct gq_prio *P, int lo, int hi, struct gq_rng *r)
{
	int cands[GQ_PR_MAX_UNITS], n = 0;
	for (int i = 0; i < P->nunits; i++)
		if (P->units[i].cls >= lo && P->units[i].cls <= hi)
			cands[n++] = i;
	return n ? cands[gq_rnd(r, (uint32_t)n)] : -1;
}

static void
gq_pr_submit(struct gq_prio *P, int ti)
{
	struct gq_pr_task *t = &P->tasks[ti];
	struct gq_pr_unit *u = &P->units[t->unit];
	if (u->h)
		t->seq = ++u->seq;
	gq_expect(P->p, 1);
	sq_async_f(u->q, t, gq_pr_task_fn);
	t->sub = atomic_load(&gq_pr_ticks);
}

static bool
gq_pr_all_done(void *ctx)
{
	struct gq_prio *P = ctx;
	return atomic_load(&P->finished) >= P->ntasks;
}

static bool
gq_pr_batch_done(void *ctx)
{
	struct gq_prio *P = ctx;
	return atomic_load(&P->batch_left) == 0;
}

/* ---- The check --------------------------------------------------------------- */

static uint64_t *gq_pr_sort_key;

static int
gq_pr_by_start(const void *a, const void *b)
{
	uint64_t x = gq_pr_sort_key[*(const int *)a];
	uint64_t y = gq_pr_sort_key[*(const int *)b];
	return x < y ? -1 : x > y;
}

/* The first index in starts[0..n) whose tick is >= v. */
static int
gq_pr_lower_bound(const uint64_t *starts, int n, uint64_t v)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (starts[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* SQT_PRIO_DEBUG=1: a failed window's starts, on stderr. */
static void
gq_pr_dump(struct gq_prio *P, struct gq_pr_task *x, uint64_t ready,
		uint64_t taken, int a, const int *order, const uint64_t *starts,
		int n)
{
	struct gq_pr_unit *u = &P->units[x->unit];
	struct gq_pr_task *pv = x->h_prev >= 0 ? &P->tasks[x->h_prev] : NULL;
	fprintf(stderr, "window of a %s task on '%s' (thread %d): submitted "
			"%" PRIu64 ", hierarchy's previous task %" PRIu64 "-%"
			PRIu64 " (thread %d), ready %" PRIu64 ", thread's "
			"previous end %" PRIu64 ", start %" PRIu64 ", end %"
			PRIu64 "\n", gq_pr_names[x->cls], u->label, x->thread,
			x->sub, pv ? pv->start : 0, pv ? pv->end : 0, pv ?
			pv->thread : -1, ready, taken, x->start, x->end);
	fprintf(stderr, "  the unit's tasks (submitted, start-end, thread):");
	for (int i = 0; i < P->ntasks; i++)
		if (P->tasks[i].unit == x->unit)
			fprintf(stderr, " %" PRIu64 ":%" PRIu64 "-%" PRIu64 "/t%d",
					P->tasks[i].sub, P->tasks[i].start,
					P->tasks[i].end, P->tasks[i].thread);
	fprintf(stderr, "\n");
	if (getenv("SQT_PRIO_DEBUG")[0] == '1')
		return;
	for (int i = a > 8 ? a - 8 : 0; i < n && starts[i] <= x->start + 4; i++) {
		struct gq_pr_task *t = &P->tasks[order[i]];
		fprintf(stderr, "  %s%" PRIu64 "-%" PRIu64 " thread %2d %-16s %s%s"
				"\n", i < a ? "(before) " : starts[i] >= taken ?
				"(after) " : "", t->start, t->end, t->thread,
				gq_pr_names[t->cls], P->units[t->unit].label,
				t == x ? "   <== this task" : "");
	}
}

static void
gq_pr_check(struct gq_prio *P)
{
	struct gq_prog *p = P->p;
	int n = P->ntasks;
	int *order = malloc(sizeof(int) * (size_t)n);
	uint64_t *key = malloc(sizeof(uint64_t) * (size_t)n);
	uint64_t *starts = malloc(sizeof(uint64_t) * (size_t)n);
	int *pre = calloc((size_t)(n + 1) * GQ_PR_CLASSES, sizeof(int));
	if (!order || !key || !starts || !pre)
		abort();
	for (int i = 0; i < n; i++) {
		order[i] = i;
		key[i] = P->tasks[i].start;
	}
	gq_pr_sort_key = key;
	qsort(order, (size_t)n, sizeof(int), gq_pr_by_start);
	for (int i = 0; i < n; i++) {
		starts[i] = key[order[i]];
		for (int c = 0; c < GQ_PR_CLASSES; c++)
			pre[(i + 1) * GQ_PR_CLASSES + c] = pre[i * GQ_PR_CLASSES
					+ c] + (P->tasks[order[i]].cls == c);
	}
	int T = atomic_load(&P->threads);
	/* each thread's task starts, in order (order[] is by start) */
	int *tstart = calloc((size_t)T + 1, sizeof(int));
	uint64_t *tticks = malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
	if (!tstart || !tticks)
		abort();
	for (int i = 0; i < n; i++)
		tstart[P->tasks[i].thread + 1]++;
	for (int k = 0; k < T; k++)
		tstart[k + 1] += tstart[k];
	{
		int *fill = calloc((size_t)T, sizeof(int));
		if (!fill)
			abort();
		for (int i = 0; i < n; i++) {
			struct gq_pr_task *t = &P->tasks[order[i]];
			tticks[tstart[t->thread] + fill[t->thread]++] = t->start;
		}
		free(fill);
	}
	for (int i = 0; i < n && atomic_load(&p->failures) == 0; i++) {
		struct gq_pr_task *x = &P->tasks[i];
		if (x->cls == GQ_PR_CLASSES - 1)
			continue; /* nothing is lower */
		uint64_t ready = x->sub;
		if (x->h_prev >= 0) {
			/* At the head of its hierarchy once the previous task
			 * ended: run on by the same drain, or visible once that
			 * task's thread has put the queue back, which it does
			 * before it starts anything else. So: not before that
			 * thread's next task (x itself when the drain went
			 * on: no window). */
			struct gq_pr_task *pv = &P->tasks[x->h_prev];
			int lo = tstart[pv->thread];
			int cnt = tstart[pv->thread + 1] - lo;
			int k = gq_pr_lower_bound(tticks + lo, cnt, pv->end);
			uint64_t vis = k < cnt ? tticks[lo + k] : ~0ull;
			if (vis > ready)
				ready = vis;
		}
		/* taken(x): its thread's previous end in this program; none
		 * (a thread fresh to the program): no window */
		uint64_t taken = x->thr_prev_end >= P->first_tick ?
				x->thr_prev_end : 0;
		if (taken <= ready)
			continue;
		int a = gq_pr_lower_bound(starts, n, ready);
		int b = gq_pr_lower_bound(starts, n, taken);
		int c_end = gq_pr_lower_bound(starts, n, x->start);
		long win = b - a, over = 0, tight = 0;
		for (int c = x->cls + 1; c < GQ_PR_CLASSES; c++) {
			over += pre[b * GQ_PR_CLASSES + c] -
					pre[a * GQ_PR_CLASSES + c];
			tight += pre[c_end * GQ_PR_CLASSES + c] -
					pre[a * GQ_PR_CLASSES + c];
		}
		long allowed = T + (win + GQ_PR_AGING_DIV - 1) /
				GQ_PR_AGING_DIV + GQ_PR_SLACK;
		struct gq_pr_unit *u = &P->units[x->unit];
		/* behind a concurrent queue: counted, checked only when
		 * strict (see the file comment) */
		bool checked = !u->via_conc || gq_pr_strict;
		struct gq_pr_window *w = checked ? &gq_pr_stats.checked :
				&gq_pr_stats.conc;
		w->windows++;
		if (over > 0)
			w->overtaken++;
		if (over > allowed)
			w->beyond++;
		double ratio = (double)over / (double)allowed;
		if (ratio > w->worst_ratio) {
			w->worst_ratio = ratio;
			w->worst_over = over;
			w->worst_n = win;
			w->worst_allowed = allowed;
			w->worst_tight = tight;
		}
		if (over <= allowed || !checked)
			continue;
		if (getenv("SQT_PRIO_DEBUG"))
			gq_pr_dump(P, x, ready, taken, a, order, starts, n);
		/* the lower starts in the window, by class */
		char by[160] = "";
		size_t k = 0;
		for (int c = x->cls + 1; c < GQ_PR_CLASSES; c++) {
			int m = pre[b * GQ_PR_CLASSES + c] -
					pre[a * GQ_PR_CLASSES + c];
			if (m)
				k += (size_t)snprintf(by + k, sizeof(by) - k,
						"%s%d %s", k ? ", " : "", m,
						gq_pr_names[c]);
		}
		gq_fail(p, "precedence: a %s task (%s, on '%s') waited while "
				"%ld lower-class tasks started (%s), of %ld starts "
				"in its window; allowed %ld = %d threads + %ld "
				"aging share + %d slack (the split: backlog %s and "
				"below, batch above; %s; %s)", x->batch ? "batch" :
				"backlog", gq_pr_names[x->cls], u->label, over, by,
				win, allowed, T, (win + GQ_PR_AGING_DIV - 1) /
				GQ_PR_AGING_DIV, GQ_PR_SLACK,
				gq_pr_names[P->split], P->saturated ? "the pool "
				"was saturated" : "the pool was NOT saturated",
				P->sabotage ? P->sabotage : "no sabotage");
	}
	free(tstart);
	free(tticks);
	free(order);
	free(key);
	free(starts);
	free(pre);
}

/* ---- The program ------------------------------------------------------------ */

static bool
gq_prio_program(struct gq_prog *p)
{
	struct gq_rng *r = &p->rng;
	struct gq_prio *P = calloc(1, sizeof(*P));
	if (P == NULL)
		abort();
	P->p = p;
	P->id = atomic_fetch_add(&gq_pr_prog_ids, 1);
	gq_pr_calibrate();
	const char *sab = getenv("SQT_PRIO_SABOTAGE");
	P->sabotage = sab && *sab ? sab : NULL;
	const char *strict = getenv("SQT_PRIO_STRICT");
	gq_pr_strict = strict && *strict && *strict != '0';
	atomic_fetch_add_explicit(&p->prio_programs, 1, memory_order_relaxed);
	/* classes [0, split) are the batch's, [split, 5) the backlog's */
	P->split = 1 + (int)gq_rnd(r, GQ_PR_CLASSES - 1);
	for (int c = 0; c < GQ_PR_CLASSES; c++)
		gq_pr_shapes(P, c, r);
	/* as many tasks at once as the pool has threads */
	int want = p->width > 0 ? p->width : (int)sysconf(_SC_NPROCESSORS_ONLN);
	int nlow = 300 + (int)gq_rnd(r, 501) + 30 * want;
	int nhigh = 20 + (int)gq_rnd(r, 81);
	bool sprinkle = gq_chance(r, 25);
	P->ntasks = nlow + nhigh;
	P->tasks = calloc((size_t)P->ntasks, sizeof(*P->tasks));
	if (P->tasks == NULL)
		abort();
	for (int i = 0; i < P->ntasks; i++) {
		struct gq_pr_task *t = &P->tasks[i];
		t->P = P;
		t->batch = i >= nlow;
		bool low = !t->batch || (sprinkle && gq_chance(r, 10));
		t->unit = low ? gq_pr_pick_unit(P, P->split, GQ_PR_CLASSES - 1, r)
				: gq_pr_pick_unit(P, 0, P->split - 1, r);
		t->cls = P->units[t->unit].cls;
		t->spin_us = t->batch ? 30 + gq_rnd(r, 271) : 100 + gq_rnd(r, 301);
		atomic_init(&t->runs, 0);
	}
	atomic_init(&P->batch_left, nhigh);
	GQ_TRACE("priority program: split at %s, %d units, %d backlog, %d "
			"batch%s\n", gq_pr_names[P->split], P->nunits, nlow,
			nhigh, sprinkle ? " (sprinkled)" : "");
	P->first_tick = atomic_load(&gq_pr_ticks);
	/* The backlog. */
	for (int i = 0; i < nlow; i++)
		gq_pr_submit(P, i);
	/* Saturated: as many tasks at once as the pool has threads. */
	uint64_t until = gq_now() + 200 * 1000000ull;
	while (atomic_load(&P->running) < want && gq_now() < until)
		usleep(50);
	int at_batch = atomic_load(&P->running);
	P->saturated = at_batch >= want;
	gq_pr_stats.running_at_batch += (unsigned long)at_batch;
	/* The batch, with a few short pauses. */
	for (int i = nlow; i < P->ntasks; i++) {
		gq_pr_submit(P, i);
		if (gq_chance(r, 5))
			usleep(gq_rnd(r, 200));
	}
	bool ok = gq_wait(p, gq_pr_batch_done, P, "the precedence program's "
			"batch") && gq_wait(p, gq_pr_all_done, P, "the precedence "
			"program's backlog");
	if (ok) {
		for (int i = 0; i < P->ntasks; i++)
			GQ_CHECK(p, atomic_load(&P->tasks[i].runs) == 1, "priority: "
					"a task on '%s' ran %d times",
					P->units[P->tasks[i].unit].label,
					atomic_load(&P->tasks[i].runs));
		int mism = atomic_load(&P->self_mismatch);
		if (mism) {
			for (int i = 0; i < P->ntasks; i++) {
				struct gq_pr_task *t = &P->tasks[i];
				if (t->self_qos == gq_pr_qos[t->cls])
					continue;
				gq_fail(p, "priority: %d tasks saw "
						"sq_qos_class_self() differ from their "
						"queue's class; one on '%s' (%s) saw "
						"0x%x", mism, P->units[t->unit].label,
						gq_pr_names[t->cls], t->self_qos);
				break;
			}
		}
		gq_pr_check(P);
	}
	gq_pr_stats.programs++;
	gq_pr_stats.tasks += (unsigned long)P->ntasks;
	gq_pr_stats.unsaturated += !P->saturated;
	atomic_fetch_add_explicit(&p->prio_tasks, (unsigned long)atomic_load(
			&P->finished), memory_order_relaxed);
	if (!ok || atomic_load(&p->failures) != 0) {
		/* left as it is: threads may still be inside its tasks */
		size_t n = strlen(p->failure);
		snprintf(p->failure + n, sizeof(p->failure) - n, "; precedence "
				"program: %d units, %d backlog and %d batch tasks, "
				"%ld finished, %d threads, %d at once at most",
				P->nunits, nlow, nhigh, atomic_load(&P->finished),
				atomic_load(&P->threads),
				atomic_load(&P->peak_running));
		return false;
	}
	for (int i = 0; i < P->nunits; i++)
		if (P->units[i].owned)
			sq_release(P->units[i].q);
	for (int i = 0; i < P->nextra; i++)
		sq_release(P->extra[i]);
	free(P->tasks);
	free(P);
	return true;
}

/* Per child: the family's tally (and, with SQT_PRIO_STATS=1, the worst
 * window). */
static void
gq_prio_summary(const char *width)
{
	if (gq_pr_stats.programs == 0)
		return;
	struct gq_pr_window *c = &gq_pr_stats.checked, *v = &gq_pr_stats.conc;
	printf("  %s width %-7s precedence: %lu programs, %lu tasks, %lu "
			"windows checked (%lu with lower starts); %lu not "
			"saturated (%.1f tasks running at the batch, on "
			"average)\n", GQ_BACKEND, width, gq_pr_stats.programs,
			gq_pr_stats.tasks, c->windows, c->overtaken,
			gq_pr_stats.unsaturated, (double)
			gq_pr_stats.running_at_batch / (double)
			gq_pr_stats.programs);
	if (v->windows)
		printf("  %s width %-7s precedence: behind a concurrent queue "
				"(not checked; SQT_PRIO_STRICT=1 checks them): %lu "
				"windows, %lu beyond the bound, worst %ld lower "
				"starts of %ld (allowed %ld)\n", GQ_BACKEND, width,
				v->windows, v->beyond, v->worst_over, v->worst_n,
				v->worst_allowed);
	if (getenv("SQT_PRIO_STATS") && *getenv("SQT_PRIO_STATS") != '0')
		printf("  %s width %-7s precedence: worst checked window %ld "
				"lower starts of %ld (allowed %ld; %ld up to the "
				"task's own start)\n", GQ_BACKEND, width,
				c->worst_over, c->worst_n, c->worst_allowed,
				c->worst_tight);
}

/* Says (once, in a child) what the backend leaves out. */
static void
gq_prio_note(void)
{
	if (gq_prio_skipped)
		printf("  %s: the precedence family skipped (%s; SQT_OPS=priority "
				"runs it)\n", GQ_BACKEND, GQ_PRIO_SKIP_WHY);
}

#endif /* SQTEST_GUARANTEES_PRIORITY_H */
