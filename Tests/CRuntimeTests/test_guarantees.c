/*
 * The guarantee checker: random programs built from the queue API, each
 * checking, as it runs, every guarantee the documentation promises.
 *
 * A program (one seed) makes a few serial and concurrent queues in a random
 * target forest, plus "inner" queues that tasks may sync onto, and issues
 * 30-90 random operations from its driver thread: async, sync, barrier
 * async and sync, apply, suspend and resume, queues made inactive and
 * retargeted before activation, groups (async, enter / leave, notify,
 * wait), work items (run, cancelled before they could start, cancelled
 * while they race, performed in place, notified, waited for), after,
 * timer and data sources, and I/O channels on pipes and files
 * (guarantees_io.h). Tasks themselves submit, sync onto inner queues, run
 * async-then-sync pairs, apply, leave groups and merge source data. The
 * checks (guarantees_model.h, and each scenario's own):
 *   - FIFO per serial queue, also through target chains and from tasks;
 *   - no two tasks of a serial hierarchy at once, barriers alone on their
 *     queue, tasks and barriers of one stream in order on a concurrent one;
 *   - nothing submitted to a suspended queue starts before its resume;
 *   - every task runs exactly once; a work item cancelled before it could
 *     start never runs, its notification comes after its function, and
 *     waiting for it returns;
 *   - a group's notification and wait come after every member registered
 *     before them;
 *   - an after's work never runs before its deadline, nor a timer's fire
 *     (the k-th fire not before start + (k - 1) * interval);
 *   - data sources add up (or OR, or keep the last value) exactly; a
 *     source's handlers never overlap; its registration handler comes
 *     first and its cancel handler after its last event handler;
 *   - every byte of every I/O operation arrives, in order, once; an
 *     operation ends with ECANCELED only when the program stopped its
 *     channel; a channel's cleanup handler runs once, after its last
 *     handler call (guarantees_io.h).
 * The generator favours the patterns that expose a runtime's narrow
 * windows: short tasks, async-then-sync from one thread, a channel
 * released right after its read, and "drain-end races", where the driver
 * waits (spinning) for a short task to signal at its very end, from inside
 * a drain, and at once submits A and runs B (sync, barrier sync, apply) on
 * the same queue, or on a fresh queue below it. The task spins 0-800 loop
 * turns after its signal, so A falls anywhere in the drainer's last steps;
 * the driver first waits for the program to be quiet, and races a few
 * times in a row. The channel races do the same with an I/O barrier that
 * signals from the channel's queue, then a read and the release; suspend
 * races suspend a queue while it drains a few short tasks and submit a task
 * that must wait for the resume.
 *
 * One seed in 8 makes a liveness program instead (guarantees_liveness.h):
 * random blocking shapes (sync pile-ups on busy serial queues, nested syncs
 * through a target chain, semaphore, group and work item waits, sleeps,
 * spins beside a chain of hand-offs), checked for "every submitted job
 * runs".
 *
 * One seed in 8 of the others makes a precedence program
 * (guarantees_priority.h): the pool saturated with lower-class work in
 * random shapes (global queues, concurrent queues, serial queues and
 * chains on either), then higher-class work submitted, checked for "once
 * higher work is runnable, few lower tasks start before it" (the family's
 * comment states the bound).
 *
 * Running it. With no arguments, one child process per pool width
 * (SQ_WORKERS = 1, 2, 3, 4, 8, 16, then 2:4, 4:4 and 8:16, or
 * SQT_GUARANTEE_WIDTHS; W:C is SQ_WORKERS=W with the thread cap
 * SQ_MAX_THREADS=C, and runs the liveness family only) with the pool's
 * safety net off (SQ_MONITOR_NET=0), each running programs for SQT_SECONDS
 * (default 3; twice that under a sanitizer), or SQT_PROGRAMS of them; with
 * both kinds of width in the list, a W:C width gets a third of that and
 * the plain widths give up as much between them, so that the pass takes
 * as long as the plain widths alone. A program that makes no progress for
 * GQ_STALL_SECONDS fails: a lost wake-up is a failure, not a delay.
 * SOAK_SECONDS=n runs the widths in turn, with fresh seeds, for n seconds
 * (`make test-soak`). The master seed is printed (SQT_MASTER=0x...
 * replays a pass); a failure
 * prints its program's seed and width: SQT_SEED=0x... SQ_WORKERS=w replays
 * that program (SQT_REPEAT times; SQT_TRACE=1 prints the driver's steps;
 * the line also sets SQ_MAX_THREADS and SQT_OPS when they were set).
 * For a diagnosis, SQT_OPS="pipe,file reads" runs only the operations
 * named (as in gq_op_names), SQT_OPS="liveness" only the liveness family
 * ("liveness pile-up" one of its shapes, gq_lv_names), SQT_OPS="priority"
 * only the precedence family, and
 * SQT_KEEP_GOING=1 reports every failed program and goes on. Built with
 * -DGQ_DISPATCH, the same checker runs on the toolchain's libdispatch
 * (`make test-guarantees-dispatch`; it leaves out the liveness shapes
 * that only its monitor's pace lets through, and the precedence family,
 * which it fails: guarantees_dispatch.h).
 */
#define _GNU_SOURCE
#include "guarantees_backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guarantees_model.h"

extern char **environ;

#if defined(__SANITIZE_THREAD__)
#define GQ_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GQ_TSAN 1
#endif
#endif
#ifndef GQ_TSAN
#define GQ_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GQ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GQ_ASAN 1
#endif
#endif
#ifndef GQ_ASAN
#define GQ_ASAN 0
#endif

static const char *gq_tmpdir; /* the child's scratch directory */
static bool gq_trace;          /* SQT_TRACE=1: the driver's steps on stderr */

#define GQ_TRACE(...)                                                          \
	do {                                                                   \
		if (gq_trace)                                                  \
			fprintf(stderr, __VA_ARGS__);                          \
	} while (0)

/* ---- Tasks ------------------------------------------------------------------ */

enum gq_nest {
	NEST_NONE,
	NEST_ASYNC,      /* 1-3 children to random queues */
	NEST_SYNC,       /* sync onto an inner queue */
	NEST_ASYNC_SYNC, /* async then sync onto one inner queue */
	NEST_APPLY,      /* apply on an inner or global queue */
	NEST_MERGE,      /* merge into a data source */
	NEST_MAIN,       /* async to the main queue */
	NEST_COUNT,
};

struct gq_dsrc;

/* A group and what the driver registered in it. */
struct gq_group {
	sq_group_t g;
	struct gq_prog *p;
	atomic_int registered; /* members the driver has added */
	atomic_int done;       /* members finished */
};

struct gq_task {
	struct gq_prog *p;
	int qi;                  /* its queue; -1 a global queue */
	const char *what;
	struct gq_stamp st;
	uint64_t not_before;     /* after: its deadline (0: none) */
	atomic_int runs;
	atomic_int finished;
	_Atomic uint64_t iterations; /* apply: the indices that ran */
	int nest;
	int depth;
	uint64_t seed;
	unsigned spin;
	atomic_int *flag;        /* drain-end race: raised last of all */
	unsigned tail_spin;      /* ... then this many turns */
	atomic_int *done_flag;   /* raised at the end */
	atomic_int *follows;     /* apply: raised before any iteration may
	                          * start (a task queued just before) */
	struct gq_group *group;  /* a member: counted done at the end */
	sq_group_t leave;        /* entered for it: left at the end */
	bool keep;               /* freed by someone else (work items) */
	bool expected;           /* one of `outstanding` */
};

static void gq_task_fn(void *ctx);
static void gq_nested(struct gq_task *t);

static struct gq_task *
gq_task_new(struct gq_prog *p, int qi, const char *what)
{
	struct gq_task *t = calloc(1, sizeof(*t));
	if (t == NULL)
		abort();
	t->p = p;
	t->qi = qi;
	t->what = what;
	t->expected = true;
	return t;
}

/* A random global queue. */
static sq_queue_t
gq_global(struct gq_rng *r)
{
	static const long prios[] = {
		SQ_QUEUE_PRIORITY_HIGH, SQ_QUEUE_PRIORITY_DEFAULT,
		SQ_QUEUE_PRIORITY_LOW, SQ_QUEUE_PRIORITY_BACKGROUND,
	};
	return sq_get_global_queue(prios[gq_rnd(r, 4)], 0);
}

static inline sq_queue_t
gq_q(struct gq_prog *p, int qi, struct gq_rng *r)
{
	return qi < 0 ? gq_global(r) : p->queues[qi].q;
}

static void
gq_task_fn(void *ctx)
{
	struct gq_task *t = ctx;
	struct gq_prog *p = t->p;
	gq_progress(p);
	GQ_CHECK(p, atomic_fetch_add(&t->runs, 1) == 0, "%s on '%s' ran "
			"twice", t->what, gq_label(p, t->qi));
	if (t->not_before != 0) {
		uint64_t now = gq_now();
		GQ_CHECK(p, now >= t->not_before, "%s on '%s' ran %.1f us "
				"before its deadline", t->what, gq_label(p, t->qi),
				(double)(t->not_before - now) / 1e3);
	}
	bool excl = gq_exclusive(p, t->qi, t->st.barrier);
	gq_order_start(p, t->qi, &t->st, t->what);
	gq_enter(p, t->qi, excl, t->what);
	gq_spin(t->spin);
	if (t->nest != NEST_NONE)
		gq_nested(t);
	gq_leave(p, t->qi, excl);
	gq_order_end(p, t->qi, &t->st);
	atomic_fetch_add_explicit(&p->tasks_run, 1, memory_order_relaxed);
	struct gq_group *g = t->group;
	sq_group_t leave = t->leave;
	atomic_int *done_flag = t->done_flag;
	atomic_int *signal = t->flag;
	unsigned tail_spin = t->tail_spin;
	bool expected = t->expected;
	if (t->keep)
		atomic_store(&t->finished, 1); /* its owner frees it */
	else
		free(t);
	if (g != NULL)
		atomic_fetch_add(&g->done, 1);
	if (done_flag)
		atomic_store(done_flag, 1);
	if (leave)
		sq_group_leave(leave);
	if (expected)
		gq_done(p);
	if (signal) {
		/* a drain-end race: the last thing before the drainer goes
		 * on, but for a short spin */
		atomic_store(signal, 1);
		gq_spin(tail_spin);
	}
}

/* ---- Groups ------------------------------------------------------------------- */

struct gq_notify {
	struct gq_group *grp;
	int expected;
	int qi;
};

static void
gq_group_notified(void *ctx)
{
	struct gq_notify *n = ctx;
	struct gq_prog *p = n->grp->p;
	gq_progress(p);
	int done = atomic_load(&n->grp->done);
	GQ_CHECK(p, done >= n->expected, "group notify on '%s' ran with %d "
			"of the %d members registered before it finished",
			gq_label(p, n->qi), done, n->expected);
	free(n);
	gq_done(p);
}

/* ---- Data sources --------------------------------------------------------------- */

enum { DS_ADD, DS_OR, DS_REPLACE };

struct gq_dsrc {
	struct gq_prog *p;
	sq_source_t s;
	int type;
	int qi;
	atomic_ulong merged;     /* ADD: the sum, OR: the union, REPLACE: the
	                          * last value, updated before each merge */
	atomic_ulong delivered;  /* the same over the handler's data */
	atomic_int in_handler;
	atomic_int cancelled;    /* the cancel handler ran */
	atomic_int suspended;    /* driver: suspend count */
	struct gq_dsrc *next;
};

static void
gq_dsrc_merge(struct gq_dsrc *d, unsigned long v)
{
	if (d->type == DS_ADD)
		atomic_fetch_add(&d->merged, v);
	else if (d->type == DS_OR)
		atomic_fetch_or(&d->merged, v);
	else
		atomic_store(&d->merged, v);
	sq_source_merge_data(d->s, v);
}

static void
gq_dsrc_event(void *ctx)
{
	struct gq_dsrc *d = ctx;
	struct gq_prog *p = d->p;
	gq_progress(p);
	atomic_fetch_add_explicit(&p->handler_calls, 1, memory_order_relaxed);
	GQ_CHECK(p, atomic_fetch_add(&d->in_handler, 1) == 0, "data source "
			"on '%s': event handlers overlap", gq_label(p, d->qi));
	GQ_CHECK(p, !atomic_load(&d->cancelled), "data source on '%s': event "
			"handler after the cancel handler", gq_label(p, d->qi));
	unsigned long v = sq_source_get_data(d->s);
	unsigned long merged = atomic_load(&d->merged);
	unsigned long seen = atomic_load(&d->delivered);
	GQ_CHECK(p, v != 0, "data source on '%s': handler called with 0",
			gq_label(p, d->qi));
	if (d->type == DS_ADD) {
		GQ_CHECK(p, seen + v <= merged, "data source ADD on '%s': %lu "
				"delivered, only %lu merged", gq_label(p, d->qi),
				seen + v, merged);
		atomic_store(&d->delivered, seen + v);
	} else if (d->type == DS_OR) {
		GQ_CHECK(p, (v & ~merged) == 0, "data source OR on '%s': bits "
				"%#lx delivered, never merged", gq_label(p, d->qi),
				v & ~merged);
		atomic_store(&d->delivered, seen | v);
	} else {
		GQ_CHECK(p, v > seen && v <= merged, "data source REPLACE on "
				"'%s': %lu delivered after %lu (last merged %lu)",
				gq_label(p, d->qi), v, seen, merged);
		atomic_store(&d->delivered, v);
	}
	atomic_fetch_sub(&d->in_handler, 1);
}

static void
gq_dsrc_cancelled(void *ctx)
{
	struct gq_dsrc *d = ctx;
	struct gq_prog *p = d->p;
	gq_progress(p);
	GQ_CHECK(p, atomic_load(&d->in_handler) == 0, "data source on '%s': "
			"cancel handler while an event handler runs",
			gq_label(p, d->qi));
	GQ_CHECK(p, atomic_load(&d->delivered) == atomic_load(&d->merged),
			"data source on '%s': %lu delivered of %lu merged",
			gq_label(p, d->qi), (unsigned long)atomic_load(
			&d->delivered), (unsigned long)atomic_load(&d->merged));
	GQ_CHECK(p, atomic_fetch_add(&d->cancelled, 1) == 0, "data source on "
			"'%s': cancel handler twice", gq_label(p, d->qi));
	gq_done(p);
}

/* ---- Timer sources --------------------------------------------------------------- */

struct gq_timer {
	struct gq_prog *p;
	sq_source_t s;
	int qi;
	uint64_t first;          /* earliest time of the first fire */
	uint64_t interval;       /* 0: one-shot */
	atomic_long fires;
	atomic_int in_handler;
	atomic_int registered;   /* the registration handler ran */
	bool has_registration;
	atomic_int cancelled;
	struct gq_timer *next;
};

static void
gq_timer_registered(void *ctx)
{
	struct gq_timer *tm = ctx;
	gq_progress(tm->p);
	GQ_CHECK(tm->p, atomic_load(&tm->fires) == 0, "timer on '%s': "
			"registration handler after an event handler",
			gq_label(tm->p, tm->qi));
	atomic_store(&tm->registered, 1);
}

static void
gq_timer_event(void *ctx)
{
	struct gq_timer *tm = ctx;
	struct gq_prog *p = tm->p;
	gq_progress(p);
	atomic_fetch_add_explicit(&p->handler_calls, 1, memory_order_relaxed);
	uint64_t now = gq_now();
	GQ_CHECK(p, atomic_fetch_add(&tm->in_handler, 1) == 0, "timer on "
			"'%s': event handlers overlap", gq_label(p, tm->qi));
	GQ_CHECK(p, !atomic_load(&tm->cancelled), "timer on '%s': event "
			"handler after the cancel handler", gq_label(p, tm->qi));
	if (tm->has_registration)
		GQ_CHECK(p, atomic_load(&tm->registered), "timer on '%s': "
				"event handler before the registration handler",
				gq_label(p, tm->qi));
	long n = (long)sq_source_get_data(tm->s);
	GQ_CHECK(p, n >= 1, "timer on '%s': handler with %ld fires",
			gq_label(p, tm->qi), n);
	long total = atomic_fetch_add(&tm->fires, n) + n;
	uint64_t due = tm->first + (uint64_t)(total - 1) * tm->interval;
	GQ_CHECK(p, now >= due, "timer on '%s': fire %ld handled %.1f us "
			"before its time", gq_label(p, tm->qi), total,
			(double)(due - now) / 1e3);
	if (tm->interval == 0)
		GQ_CHECK(p, total == 1, "one-shot timer on '%s' fired %ld "
				"times", gq_label(p, tm->qi), total);
	atomic_fetch_sub(&tm->in_handler, 1);
}

static void
gq_timer_cancelled(void *ctx)
{
	struct gq_timer *tm = ctx;
	struct gq_prog *p = tm->p;
	gq_progress(p);
	GQ_CHECK(p, atomic_load(&tm->in_handler) == 0, "timer on '%s': "
			"cancel handler while an event handler runs",
			gq_label(p, tm->qi));
	GQ_CHECK(p, atomic_fetch_add(&tm->cancelled, 1) == 0, "timer on "
			"'%s': cancel handler twice", gq_label(p, tm->qi));
	gq_done(p);
}

/* ---- Work items ------------------------------------------------------------------ */

enum {
	WI_RUN,             /* submitted: runs once */
	WI_CANCEL_FIRST,    /* cancelled, then submitted: never runs */
	WI_CANCEL_WAITING,  /* submitted to a suspended queue, cancelled,
	                     * resumed: never runs */
	WI_CANCEL_RACE,     /* cancelled at some point: runs at most once */
	WI_AFTER_CANCEL,    /* sq_after_workitem far ahead, cancelled */
	WI_PERFORM,         /* performed on the driver's thread */
	WI_MODES,
};

struct gq_item {
	struct gq_task *t;       /* the function's context */
	sq_workitem_t item;
	int mode;
	bool must_not_run;
};

static void
gq_item_notified(void *ctx)
{
	struct gq_item *it = ctx;
	struct gq_prog *p = it->t->p;
	gq_progress(p);
	int runs = atomic_load(&it->t->runs);
	if (it->must_not_run)
		GQ_CHECK(p, runs == 0, "work item cancelled before it could "
				"start ran (mode %d, queue '%s')", it->mode,
				gq_label(p, it->t->qi));
	if (runs != 0)
		GQ_CHECK(p, atomic_load(&it->t->finished), "work item "
				"notification ran before its function returned "
				"(queue '%s')", gq_label(p, it->t->qi));
	gq_item_release(it->item);
	free(it->t);
	free(it);
	gq_done(p);
}

/* ---- The program's objects ----------------------------------------------------- */

struct gq_world {
	struct gq_group groups[3];
	int ngroups;
	_Atomic(struct gq_dsrc *) dsrcs; /* tasks read it (merges) */
	struct gq_timer *timers;
	int inactive[4];         /* queues left inactive: activated at the end */
	int ninactive;
};

static struct gq_world gq_w;

/* ---- Nested actions (inside a task) ---------------------------------------------- */

/* An inner queue a task on `qi` may sync onto without deadlock: inner
 * queues target global queues, and one on an inner queue syncs only onto
 * a later one. -1 if none. */
static int
gq_pick_inner(struct gq_prog *p, int qi, struct gq_rng *r)
{
	int cand[GQ_MAX_QUEUES], n = 0;
	bool from_inner = qi >= 0 && p->queues[qi].inner;
	int nq = gq_nqueues(p);
	for (int i = 0; i < nq; i++)
		if (p->queues[i].inner && (!from_inner || i > qi))
			cand[n++] = i;
	return n ? cand[gq_rnd(r, (uint32_t)n)] : -1;
}

/* A random queue of the program, or -1 (global); no main queue unless
 * `main_ok`. */
static int
gq_pick_queue(struct gq_prog *p, struct gq_rng *r, bool main_ok)
{
	int nq = gq_nqueues(p);
	for (;;) {
		int i = (int)gq_rnd(r, (uint32_t)nq + 1) - 1;
		if (i < 0 || p->queues[i].kind != GQ_MAIN || main_ok)
			return i;
	}
}

static struct gq_task *
gq_child(struct gq_task *parent, int qi, const char *what, struct gq_rng *r)
{
	struct gq_task *c = gq_task_new(parent->p, qi, what);
	c->depth = parent->depth + 1;
	c->seed = gq_mix(parent->seed + gq_rnd(r, 1u << 30));
	c->spin = gq_chance(r, 30) ? gq_rnd(r, 2000) : 0;
	if (c->depth < 2 && gq_chance(r, 25))
		c->nest = (int)gq_rnd(r, NEST_COUNT);
	return c;
}

static void
gq_apply_iter(void *ctx, size_t i)
{
	struct gq_task *t = ctx;
	struct gq_prog *p = t->p;
	gq_progress(p);
	/* Each index once (at most 64 of them). */
	uint64_t bit = 1ull << i;
	uint64_t old = atomic_fetch_or(&t->iterations, bit);
	GQ_CHECK(p, (old & bit) == 0, "apply on '%s': iteration %zu twice",
			gq_label(p, t->qi), i);
	if (t->follows)
		GQ_CHECK(p, atomic_load(t->follows), "apply on '%s': an "
				"iteration started before the task queued just "
				"before the apply had finished", gq_label(p, t->qi));
	bool excl = gq_exclusive(p, t->qi, false);
	gq_enter(p, t->qi, excl, "apply iteration");
	gq_spin(t->spin);
	gq_leave(p, t->qi, excl);
}

/* apply(n) on `qi` with a holder task; checks every index ran once. */
static void
gq_apply_after(struct gq_prog *p, int qi, unsigned n, struct gq_rng *r,
		atomic_int *follows)
{
	struct gq_task *t = gq_task_new(p, qi, "apply");
	t->spin = gq_rnd(r, 500);
	t->follows = follows;
	sq_apply_f(n, gq_q(p, qi, r), t, gq_apply_iter);
	uint64_t all = n >= 64 ? ~0ull : (1ull << n) - 1;
	uint64_t got = atomic_load(&t->iterations);
	GQ_CHECK(p, got == all, "apply(%u) on '%s' returned with iterations "
			"%#" PRIx64 " of %#" PRIx64 " done", n, gq_label(p, qi), got,
			all);
	free(t);
}

static void
gq_apply(struct gq_prog *p, int qi, unsigned n, struct gq_rng *r)
{
	gq_apply_after(p, qi, n, r, NULL);
}

static struct gq_stream *
gq_task_stream(struct gq_task *t, struct gq_stream **s)
{
	if (*s == NULL)
		*s = gq_stream_new(t->p);
	return *s;
}

static void
gq_nested(struct gq_task *t)
{
	struct gq_prog *p = t->p;
	struct gq_rng r = { t->seed };
	struct gq_stream *s = NULL;
	switch (t->nest) {
	case NEST_ASYNC: {
		int n = 1 + (int)gq_rnd(&r, 3);
		for (int i = 0; i < n; i++) {
			int qi = gq_pick_queue(p, &r, true);
			bool barrier = qi >= 0 &&
					p->queues[qi].kind == GQ_CONCURRENT &&
					gq_chance(&r, 30);
			struct gq_task *c = gq_child(t, qi, barrier ?
					"nested barrier async" : "nested async", &r);
			gq_stamp(p, &c->st, gq_task_stream(t, &s), qi, barrier,
					true);
			gq_expect(p, 1);
			if (barrier)
				sq_barrier_async_f(p->queues[qi].q, c,
						gq_task_fn);
			else
				sq_async_f(gq_q(p, qi, &r), c, gq_task_fn);
		}
		break;
	}
	case NEST_SYNC:
	case NEST_ASYNC_SYNC: {
		int qi = gq_pick_inner(p, t->qi, &r);
		if (qi < 0)
			break;
		sq_queue_t q = p->queues[qi].q;
		if (t->nest == NEST_ASYNC_SYNC) {
			struct gq_task *a = gq_child(t, qi, "nested async "
					"before a sync", &r);
			a->nest = NEST_NONE;
			gq_stamp(p, &a->st, gq_task_stream(t, &s), qi, false,
					true);
			gq_expect(p, 1);
			sq_async_f(q, a, gq_task_fn);
		}
		bool barrier = p->queues[qi].kind == GQ_CONCURRENT &&
				gq_chance(&r, 40);
		struct gq_task *c = gq_child(t, qi, barrier ?
				"nested barrier sync" : "nested sync", &r);
		if (c->nest == NEST_SYNC || c->nest == NEST_ASYNC_SYNC)
			c->nest = NEST_NONE;
		gq_stamp(p, &c->st, gq_task_stream(t, &s), qi, barrier, true);
		gq_expect(p, 1);
		if (barrier)
			sq_barrier_sync_f(q, c, gq_task_fn);
		else
			sq_sync_f(q, c, gq_task_fn);
		break;
	}
	case NEST_APPLY: {
		int qi = gq_chance(&r, 50) ? gq_pick_inner(p, t->qi, &r) : -1;
		gq_apply(p, qi, 1 + gq_rnd(&r, 12), &r);
		break;
	}
	case NEST_MERGE: {
		struct gq_dsrc *d = atomic_load(&gq_w.dsrcs);
		for (; d; d = d->next)
			if (d->type != DS_REPLACE)
				break;
		if (d)
			gq_dsrc_merge(d, d->type == DS_ADD ? 1 + gq_rnd(&r, 9)
					: 1ul << gq_rnd(&r, 20));
		break;
	}
	case NEST_MAIN: {
		int mi = -1;
		int nq = gq_nqueues(p);
		for (int i = 0; i < nq; i++)
			if (p->queues[i].kind == GQ_MAIN)
				mi = i;
		if (mi < 0)
			break;
		struct gq_task *c = gq_child(t, mi, "nested async to main", &r);
		gq_stamp(p, &c->st, gq_task_stream(t, &s), mi, false, true);
		gq_expect(p, 1);
		sq_async_f(p->queues[mi].q, c, gq_task_fn);
		break;
	}
	default:
		break;
	}
}

/* ---- The driver ------------------------------------------------------------------ */

/* Whether the driver may block on queue `qi` now: nothing up its chain is
 * suspended (a global queue never is). */
static bool
gq_runnable(struct gq_prog *p, int qi)
{
	for (int x = qi; x >= 0; x = p->queues[x].parent)
		if (p->queues[x].suspended > 0 || p->queues[x].inactive)
			return false;
	return true;
}

static bool
gq_any_suspended(struct gq_prog *p)
{
	for (int i = 0; i < p->nqueues; i++)
		if (p->queues[i].suspended > 0 || p->queues[i].inactive)
			return true;
	return false;
}

/* Waits (draining the main queue) until cond(ctx); false after
 * GQ_STALL_SECONDS without progress. */
static bool
gq_wait(struct gq_prog *p, bool (*cond)(void *), void *ctx, const char *what)
{
	unsigned long last = atomic_load(&p->progress);
	uint64_t since = gq_now();
	unsigned step = 20;
	bool main = false;
	for (int i = 0; i < p->nqueues; i++)
		main |= p->queues[i].kind == GQ_MAIN;
	while (!cond(ctx)) {
		if (main) {
			gq_main_run(step, cond, ctx);
		} else {
			struct timespec ts = { 0, (long)step * 1000 };
			nanosleep(&ts, NULL);
		}
		if (step < 2000)
			step *= 2;
		unsigned long now_progress = atomic_load(&p->progress);
		if (now_progress != last) {
			last = now_progress;
			since = gq_now();
			step = 20;
		} else if (gq_now() - since >
				(uint64_t)GQ_STALL_SECONDS * 1000000000ull) {
			gq_fail(p, "stalled: no progress for %d s while waiting "
					"for %s (%ld calls outstanding)",
					GQ_STALL_SECONDS, what,
					atomic_load(&p->outstanding));
			return false;
		}
	}
	return true;
}

static bool
gq_flag_up(void *ctx)
{
	return atomic_load((atomic_int *)ctx) != 0;
}

/* Waits for a drain-end signal: spinning first, since the point is to
 * act within a few hundred nanoseconds of it. */
static bool
gq_wait_signal(struct gq_prog *p, atomic_int *flag)
{
	uint64_t until = gq_now() + 200000;
	while (!atomic_load_explicit(flag, memory_order_acquire)) {
		if (gq_now() > until)
			return gq_wait(p, gq_flag_up, flag, "a drain-end signal");
	}
	return true;
}

static struct gq_task *
gq_driver_task(struct gq_prog *p, int qi, const char *what, bool barrier)
{
	struct gq_task *t = gq_task_new(p, qi, what);
	t->seed = gq_mix(p->rng.s + 1);
	gq_rnd(&p->rng, 1);
	t->spin = gq_chance(&p->rng, 25) ? gq_rnd(&p->rng, 3000) : 0;
	if (gq_chance(&p->rng, 30))
		t->nest = 1 + (int)gq_rnd(&p->rng, NEST_COUNT - 1);
	gq_stamp(p, &t->st, &p->driver, qi, barrier, true);
	return t;
}

static void
op_async(struct gq_prog *p)
{
	int qi = gq_pick_queue(p, &p->rng, true);
	bool barrier = qi >= 0 && p->queues[qi].kind == GQ_CONCURRENT &&
			gq_chance(&p->rng, 35);
	struct gq_task *t = gq_driver_task(p, qi, barrier ? "barrier async" :
			"async", barrier);
	gq_expect(p, 1);
	if (barrier)
		sq_barrier_async_f(p->queues[qi].q, t, gq_task_fn);
	else
		sq_async_f(gq_q(p, qi, &p->rng), t, gq_task_fn);
}

/* A queue the driver may sync onto now (never the main queue: the
 * driver is the main thread, whose sync onto it libdispatch refuses). */
static int
gq_pick_sync_queue(struct gq_prog *p)
{
	for (int tries = 0; tries < 8; tries++) {
		int qi = gq_pick_queue(p, &p->rng, false);
		if (gq_runnable(p, qi))
			return qi;
	}
	return -1;
}

static void
op_sync(struct gq_prog *p)
{
	int qi = gq_pick_sync_queue(p);
	bool barrier = qi >= 0 && p->queues[qi].kind == GQ_CONCURRENT &&
			gq_chance(&p->rng, 40);
	/* Often an async just before it, from the same thread: the pair
	 * whose order a sync fast path must keep. */
	if (qi >= 0 && gq_chance(&p->rng, 50)) {
		bool ab = p->queues[qi].kind == GQ_CONCURRENT &&
				gq_chance(&p->rng, 30);
		struct gq_task *a = gq_driver_task(p, qi, ab ?
				"barrier async before a sync" :
				"async before a sync", ab);
		gq_expect(p, 1);
		if (ab)
			sq_barrier_async_f(p->queues[qi].q, a, gq_task_fn);
		else
			sq_async_f(p->queues[qi].q, a, gq_task_fn);
	}
	struct gq_task *t = gq_driver_task(p, qi, barrier ? "barrier sync" :
			"sync", barrier);
	atomic_int done;
	atomic_init(&done, 0);
	t->done_flag = &done;
	gq_expect(p, 1);
	if (barrier)
		sq_barrier_sync_f(p->queues[qi].q, t, gq_task_fn);
	else
		sq_sync_f(gq_q(p, qi, &p->rng), t, gq_task_fn);
	GQ_CHECK(p, atomic_load(&done), "sync on '%s' returned before its "
			"function finished", gq_label(p, qi));
}

/*
 * The drain-end race: a short task X on a queue raises a flag and spins;
 * the driver waits for the flag, then submits A to the queue and runs B
 * (sync, barrier sync or apply) on it, or on a fresh serial queue that
 * targets it (idle, so its job goes to the queue after A). B must start
 * after A has finished when the queue is serial or either one is a
 * barrier. On the same queue the driver's stamps check that as well
 * (A's FIFO check fails when it runs after B); B checks it itself too.
 */
static void
gq_tail_race(struct gq_prog *p, int qi)
{
	struct gq_queue *q = &p->queues[qi];
	/* Everything is decided and made before X is submitted: once X has
	 * signalled, A and B go out at once. */
	bool below = gq_chance(&p->rng, 25);
	bool a_barrier = q->kind == GQ_CONCURRENT && gq_chance(&p->rng, 40);
	int how = (int)gq_rnd(&p->rng, 3); /* sync, barrier sync, apply */
	bool b_barrier = how == 1 && q->kind == GQ_CONCURRENT && !below;
	bool apply = how == 2 && !below;
	GQ_TRACE("  race: X and A%s on '%s', %s on %s\n", a_barrier ?
			" (barrier)" : "", q->label, apply ? "apply" : b_barrier ?
			"barrier sync" : "sync", below ? "a queue below it" : "it");
	/* B's queue, made now, is idle */
	sq_queue_t bq = below ? sq_queue_create_with_target("below", NULL,
			q->q) : q->q;
	atomic_int flag, a_done;
	atomic_init(&flag, 0);
	atomic_init(&a_done, 0);
	struct gq_task *x = gq_driver_task(p, qi, "drain-end signal", false);
	x->nest = NEST_NONE;
	x->spin = 0;
	x->flag = &flag;
	/* (measured: a spin of 0-800 turns after the signal, and none on
	 * the driver's side, lands A in the drainer's last steps most
	 * often) */
	x->tail_spin = gq_rnd(&p->rng, 800);
	struct gq_task *a = gq_driver_task(p, qi, a_barrier ?
			"barrier async (drain-end race)" :
			"async (drain-end race)", a_barrier);
	a->nest = NEST_NONE;
	a->spin = 0;
	a->done_flag = &a_done;
	/* below: B holds q as any task of a serial queue on q does, and is
	 * ordered against A by A's flag only */
	struct gq_task *b = NULL;
	if (!apply) {
		b = below ? gq_task_new(p, qi, "sync on a queue below "
				"(drain-end race)") : gq_driver_task(p, qi,
				b_barrier ? "barrier sync (drain-end race)" :
				"sync (drain-end race)", b_barrier);
		b->nest = NEST_NONE;
		b->spin = 0;
	}
	unsigned apply_n = 1 + gq_rnd(&p->rng, 3);
	gq_expect(p, b ? 3 : 2);
	sq_async_f(q->q, x, gq_task_fn);
	if (!gq_wait_signal(p, &flag)) {
		if (below)
			sq_release(bq);
		return;
	}
	if (a_barrier)
		sq_barrier_async_f(q->q, a, gq_task_fn);
	else
		sq_async_f(q->q, a, gq_task_fn);
	if (apply)
		gq_apply_after(p, qi, apply_n, &p->rng, q->kind == GQ_SERIAL ||
				a_barrier ? &a_done : NULL);
	else if (b_barrier)
		sq_barrier_sync_f(bq, b, gq_task_fn);
	else
		sq_sync_f(bq, b, gq_task_fn);
	atomic_fetch_add_explicit(&p->races, 1, memory_order_relaxed);
	if (!apply && (q->kind == GQ_SERIAL || a_barrier || b_barrier))
		GQ_CHECK(p, atomic_load(&a_done), "%s on '%s'%s returned "
				"before the %s submitted to it just before had "
				"finished", b_barrier ? "barrier sync" : "sync",
				q->label, below ? " (through a queue below it)" : "",
				a_barrier ? "barrier" : "task");
	if (below)
		sq_release(bq);
	/* A must stay alive until it has run (its flag is on our stack). */
	gq_wait(p, gq_flag_up, &a_done, "the raced task");
}

/* Waits (up to 2 ms) for the program to be quiet for 50 us: the races
 * below are decided within a few hundred nanoseconds, and work running
 * elsewhere on a small machine would only blur them. */
static void
gq_settle(struct gq_prog *p)
{
	uint64_t start = gq_now(), quiet = start;
	unsigned long last = atomic_load(&p->progress);
	for (;;) {
		uint64_t now = gq_now();
		unsigned long cur = atomic_load(&p->progress);
		if (cur != last) {
			last = cur;
			quiet = now;
		} else if (now - quiet > 50000) {
			return;
		}
		if (now - start > 2000000)
			return;
	}
}

/* A few drain-end races in a row on one queue. */
static void
op_tail_race(struct gq_prog *p)
{
	/* a queue with nothing suspended up its chain, not main */
	int qi = -1;
	for (int tries = 0; tries < 8 && qi < 0; tries++) {
		int i = (int)gq_rnd(&p->rng, (uint32_t)p->nqueues);
		if (p->queues[i].kind != GQ_MAIN && gq_runnable(p, i))
			qi = i;
	}
	if (qi < 0)
		return;
	gq_settle(p);
	int rounds = 1 + (int)gq_rnd(&p->rng, 8);
	for (int i = 0; i < rounds && atomic_load(&p->failures) == 0; i++)
		gq_tail_race(p, qi);
}

#include "guarantees_io.h"

static void
op_apply(struct gq_prog *p)
{
	int qi = gq_pick_sync_queue(p);
	gq_apply(p, qi, 1 + gq_rnd(&p->rng, 40), &p->rng);
}

/* Suspends a queue the driver may suspend; tasks submitted to it from now
 * on carry the suspend's epoch. */
static void
op_suspend(struct gq_prog *p)
{
	int qi = (int)gq_rnd(&p->rng, (uint32_t)p->nqueues);
	struct gq_queue *q = &p->queues[qi];
	if (!q->suspendable || q->suspended >= 2)
		return;
	sq_suspend(q->q);
	q->suspended++;
	q->suspend_epoch++;
}

static void
gq_resume(struct gq_queue *q)
{
	if (--q->suspended == 0)
		atomic_store(&q->resumed_epoch, q->suspend_epoch);
	sq_resume(q->q);
}

/* Suspend races: 16-48 rounds on one queue of a few short tasks, a short
 * spin, a suspend and a task that must wait for the resume that follows:
 * the suspend falls anywhere in the drain of the short tasks. */
static void
op_suspend_race(struct gq_prog *p)
{
	int qi = (int)gq_rnd(&p->rng, (uint32_t)p->nqueues);
	struct gq_queue *q = &p->queues[qi];
	if (!q->suspendable || q->suspended > 0 || !gq_runnable(p, qi))
		return;
	gq_settle(p);
	int rounds = 16 + (int)gq_rnd(&p->rng, 33);
	for (int r = 0; r < rounds; r++) {
		int n = 1 + (int)gq_rnd(&p->rng, 8);
		for (int i = 0; i < n; i++) {
			struct gq_task *t = gq_driver_task(p, qi, "async before "
					"a suspend", false);
			t->nest = NEST_NONE;
			t->spin = gq_rnd(&p->rng, 300);
			gq_expect(p, 1);
			sq_async_f(q->q, t, gq_task_fn);
		}
		/* made first: the suspend and the submission go out back to
		 * back */
		struct gq_task *t = gq_driver_task(p, qi, "async after a suspend",
				false);
		atomic_int done;
		atomic_init(&done, 0);
		t->nest = NEST_NONE;
		t->spin = 0;
		t->done_flag = &done;
		gq_expect(p, 1);
		t->st.resume_epoch = q->suspend_epoch + 1; /* the one below */
		unsigned spin = gq_rnd(&p->rng, 3000);
		gq_spin(spin);
		sq_suspend(q->q);
		sq_async_f(q->q, t, gq_task_fn);
		q->suspended++;
		q->suspend_epoch++;
		gq_spin(2000);
		gq_resume(q);
		atomic_fetch_add_explicit(&p->races, 1, memory_order_relaxed);
		/* the next round starts on an idle queue */
		if (!gq_wait_signal(p, &done))
			return;
	}
}

static void
op_resume(struct gq_prog *p)
{
	for (int i = 0; i < p->nqueues; i++) {
		int qi = (int)((i + gq_rnd(&p->rng, (uint32_t)p->nqueues)) %
				(unsigned)p->nqueues);
		if (p->queues[qi].suspended > 0) {
			gq_resume(&p->queues[qi]);
			return;
		}
	}
}

/*
 * A queue made inactive, given tasks, retargeted, then activated: its
 * tasks run under the new target only. Its slot in the model is a new
 * queue index, so the exclusion checks know its chain from the start.
 */
static void
op_inactive(struct gq_prog *p)
{
	if (p->nqueues >= GQ_MAX_QUEUES || gq_w.ninactive >= 4)
		return;
	int qi = p->nqueues;
	struct gq_queue *q = &p->queues[qi];
	memset(q, 0, sizeof(*q));
	bool conc = gq_chance(&p->rng, 30);
	q->kind = conc ? GQ_CONCURRENT : GQ_SERIAL;
	/* the final target: an existing serial or concurrent queue, or a
	 * global one; never an inner or main queue */
	int parent = -1;
	for (int tries = 0; tries < 4; tries++) {
		int c = (int)gq_rnd(&p->rng, (uint32_t)qi);
		if (p->queues[c].kind != GQ_MAIN && !p->queues[c].inner) {
			parent = c;
			break;
		}
	}
	q->parent = parent;
	q->suspendable = false;
	snprintf(q->label, sizeof(q->label), "inactive%d", qi);
	q->q = sq_queue_create(q->label, conc ? SQ_QUEUE_CONCURRENT_INACTIVE
			: SQ_QUEUE_SERIAL_INACTIVE);
	gq_publish_queue(p);
	int n = 1 + (int)gq_rnd(&p->rng, 5);
	for (int i = 0; i < n; i++) {
		bool barrier = conc && gq_chance(&p->rng, 30);
		struct gq_task *t = gq_driver_task(p, qi, barrier ?
				"barrier async (inactive queue)" :
				"async (inactive queue)", barrier);
		gq_expect(p, 1);
		if (barrier)
			sq_barrier_async_f(q->q, t, gq_task_fn);
		else
			sq_async_f(q->q, t, gq_task_fn);
	}
	sq_set_target_queue(q->q, parent < 0 ? gq_global(&p->rng)
			: p->queues[parent].q);
	if (gq_chance(&p->rng, 70)) {
		sq_activate(q->q);
	} else {
		q->inactive = true; /* activated at the end */
		gq_w.inactive[gq_w.ninactive++] = qi;
	}
}

static struct gq_group *
gq_pick_group(struct gq_prog *p)
{
	if (gq_w.ngroups < 3 && (gq_w.ngroups == 0 || gq_chance(&p->rng, 30))) {
		struct gq_group *g = &gq_w.groups[gq_w.ngroups++];
		g->g = sq_group_create();
		g->p = p;
		atomic_init(&g->registered, 0);
		atomic_init(&g->done, 0);
		return g;
	}
	return &gq_w.groups[gq_rnd(&p->rng, (uint32_t)gq_w.ngroups)];
}

/* A group's members are never on the main queue: the driver, the main
 * thread, may block in sq_group_wait. */
static int
gq_pick_member_queue(struct gq_prog *p)
{
	return gq_pick_queue(p, &p->rng, false);
}

static void
op_group(struct gq_prog *p)
{
	struct gq_group *g = gq_pick_group(p);
	int n = 1 + (int)gq_rnd(&p->rng, 4);
	for (int i = 0; i < n; i++) {
		int qi = gq_pick_member_queue(p);
		struct gq_task *t = gq_driver_task(p, qi, "group member",
				false);
		t->group = g;
		atomic_fetch_add(&g->registered, 1);
		gq_expect(p, 1);
		if (gq_chance(&p->rng, 50)) {
			sq_group_async_f(g->g, gq_q(p, qi, &p->rng), t,
					gq_task_fn);
		} else {
			/* enter here, leave at the end of the task */
			sq_group_enter(g->g);
			t->leave = g->g;
			sq_async_f(gq_q(p, qi, &p->rng), t, gq_task_fn);
		}
	}
	int what = (int)gq_rnd(&p->rng, 4);
	if (what == 0 || what == 1) {
		struct gq_notify *nt = malloc(sizeof(*nt));
		nt->grp = g;
		nt->expected = atomic_load(&g->registered);
		nt->qi = gq_pick_queue(p, &p->rng, true);
		gq_expect(p, 1);
		sq_group_notify_f(g->g, gq_q(p, nt->qi, &p->rng), nt,
				gq_group_notified);
	} else if (what == 2 && !gq_any_suspended(p)) {
		int expected = atomic_load(&g->registered);
		intptr_t r = sq_group_wait(g->g, sq_time(SQ_TIME_NOW,
				(int64_t)GQ_STALL_SECONDS * 1000000000));
		GQ_CHECK(p, r == 0, "group wait timed out after %d s",
				GQ_STALL_SECONDS);
		int done = atomic_load(&g->done);
		GQ_CHECK(p, r != 0 || done >= expected, "group wait returned "
				"with %d of %d members finished", done, expected);
	} else {
		int expected = atomic_load(&g->registered);
		if (sq_group_wait(g->g, SQ_TIME_NOW) == 0) {
			int done = atomic_load(&g->done);
			GQ_CHECK(p, done >= expected, "group wait (now) "
					"returned 0 with %d of %d members "
					"finished", done, expected);
		}
	}
}

static void
op_workitem(struct gq_prog *p)
{
	struct gq_item *it = calloc(1, sizeof(*it));
	it->mode = (int)gq_rnd(&p->rng, WI_MODES);
	int qi = gq_pick_member_queue(p);
	if (it->mode == WI_CANCEL_WAITING && (qi < 0 ||
			!p->queues[qi].suspendable))
		it->mode = WI_CANCEL_FIRST;
	bool barrier = it->mode == WI_RUN && qi >= 0 &&
			p->queues[qi].kind == GQ_CONCURRENT &&
			gq_chance(&p->rng, 40);
	if (it->mode == WI_PERFORM)
		qi = -1;
	struct gq_task *t = gq_driver_task(p, qi, barrier ?
			"barrier work item" : "work item", barrier);
	/* only a work item sure to run counts for the barrier order */
	if (it->mode != WI_RUN) {
		/* restamp as not counted: undo the count just taken */
		if (qi >= 0 && !t->st.barrier)
			p->driver.counted[qi]--;
		t->st.counted = false;
	}
	t->keep = true;
	t->expected = false;
	it->t = t;
	it->item = sq_workitem_create_f(barrier ? SQ_WORKITEM_BARRIER : 0,
			t, gq_task_fn);
	it->must_not_run = it->mode == WI_CANCEL_FIRST ||
			it->mode == WI_CANCEL_WAITING ||
			it->mode == WI_AFTER_CANCEL;
	/* The driver's own reference: the notification may free `it`, `t`
	 * and their reference as soon as the item is done. */
	sq_workitem_t item = it->item;
	gq_item_retain(item);
	int mode = it->mode;
	bool must_not_run = it->must_not_run;
	atomic_int performed;
	atomic_init(&performed, 0);
	if (mode == WI_PERFORM)
		t->done_flag = &performed;
	gq_expect(p, 1); /* the notification */
	sq_workitem_notify_f(item, gq_q(p, gq_pick_queue(p, &p->rng, true),
			&p->rng), it, gq_item_notified);
	sq_queue_t q = gq_q(p, qi, &p->rng);
	switch (mode) {
	case WI_RUN:
		sq_async_workitem(q, item);
		break;
	case WI_CANCEL_FIRST:
		sq_workitem_cancel(item);
		sq_async_workitem(q, item);
		break;
	case WI_CANCEL_WAITING: {
		struct gq_queue *gqq = &p->queues[qi];
		sq_suspend(gqq->q);
		gqq->suspended++;
		gqq->suspend_epoch++;
		t->st.resume_epoch = gqq->suspend_epoch;
		sq_async_workitem(q, item);
		sq_workitem_cancel(item);
		gq_resume(gqq);
		break;
	}
	case WI_CANCEL_RACE:
		sq_async_workitem(q, item);
		gq_spin(gq_rnd(&p->rng, 3000));
		sq_workitem_cancel(item);
		break;
	case WI_AFTER_CANCEL:
		/* libdispatch finishes a cancelled item only when its
		 * execution is attempted (docs/MIGRATION.md): then the
		 * deadline is near, so the notification comes */
		sq_after_workitem(sq_time(SQ_TIME_NOW, GQ_CANCEL_AT_ONCE ?
				60 * 1000000000ll : 200 * 1000000ll), q, item);
		sq_workitem_cancel(item);
		break;
	case WI_PERFORM:
		sq_workitem_perform(item);
		GQ_CHECK(p, atomic_load(&performed), "work item perform "
				"returned before its function finished");
		break;
	}
	/* Waiting for it: when it is sure to end without the main thread
	 * and without a resume the driver has yet to make. */
	if (gq_chance(&p->rng, 30) && (mode == WI_PERFORM ||
			(must_not_run && GQ_CANCEL_AT_ONCE) ||
			(gq_runnable(p, qi) && !gq_any_suspended(p) &&
			mode != WI_AFTER_CANCEL))) {
		intptr_t r = sq_workitem_wait(item, sq_time(SQ_TIME_NOW,
				(int64_t)GQ_STALL_SECONDS * 1000000000));
		GQ_CHECK(p, r == 0, "work item wait timed out after %d s",
				GQ_STALL_SECONDS);
	}
	gq_item_release(item);
}

static void
op_after(struct gq_prog *p)
{
	int qi = gq_pick_queue(p, &p->rng, true);
	struct gq_task *t = gq_task_new(p, qi, "after");
	t->seed = gq_mix(p->rng.s + 7);
	if (gq_chance(&p->rng, 20))
		t->nest = 1 + (int)gq_rnd(&p->rng, NEST_COUNT - 1);
	int64_t delay = gq_chance(&p->rng, 20) ? 0
			: (int64_t)gq_rnd(&p->rng, 3000) * 1000;
	uint64_t before = gq_now();
	t->not_before = before + (uint64_t)delay;
	gq_expect(p, 1);
	sq_after_f(sq_time(SQ_TIME_NOW, delay), gq_q(p, qi, &p->rng), t,
			gq_task_fn);
}

static void
op_timer(struct gq_prog *p)
{
	struct gq_timer *tm = calloc(1, sizeof(*tm));
	tm->p = p;
	tm->qi = gq_pick_queue(p, &p->rng, true);
	bool strict = gq_chance(&p->rng, 30);
	tm->s = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, strict ?
			SQ_TIMER_STRICT : 0, gq_q(p, tm->qi, &p->rng));
	sq_set_context(tm->s, tm);
	sq_source_set_event_handler_f(tm->s, gq_timer_event);
	sq_source_set_cancel_handler_f(tm->s, gq_timer_cancelled);
	if (gq_chance(&p->rng, 40)) {
		tm->has_registration = true;
		sq_source_set_registration_handler_f(tm->s,
				gq_timer_registered);
	}
	uint64_t delay = gq_rnd(&p->rng, 2000) * 1000ull;
	tm->interval = gq_chance(&p->rng, 30) ? 0
			: (200 + gq_rnd(&p->rng, 1800)) * 1000ull;
	uint64_t leeway = gq_chance(&p->rng, 50) ? 0
			: gq_rnd(&p->rng, 500) * 1000ull;
	tm->first = gq_now() + delay;
	sq_source_set_timer(tm->s, sq_time(SQ_TIME_NOW, (int64_t)delay),
			tm->interval ? tm->interval : SQ_TIME_FOREVER, leeway);
	gq_expect(p, 1); /* the cancel handler */
	sq_activate(tm->s);
	tm->next = gq_w.timers;
	gq_w.timers = tm;
}

static void
op_data_source(struct gq_prog *p)
{
	struct gq_dsrc *d = calloc(1, sizeof(*d));
	d->p = p;
	d->type = (int)gq_rnd(&p->rng, 3);
	d->qi = gq_pick_queue(p, &p->rng, true);
	sq_source_type_t types[] = { SQ_SOURCE_TYPE_DATA_ADD,
		SQ_SOURCE_TYPE_DATA_OR, SQ_SOURCE_TYPE_DATA_REPLACE };
	d->s = sq_source_create(types[d->type], 0, d->type == DS_OR ?
			~0ul : 0, gq_q(p, d->qi, &p->rng));
	sq_set_context(d->s, d);
	sq_source_set_event_handler_f(d->s, gq_dsrc_event);
	sq_source_set_cancel_handler_f(d->s, gq_dsrc_cancelled);
	gq_expect(p, 1); /* the cancel handler */
	if (gq_chance(&p->rng, 20)) {
		/* merged before activation: delivered once active */
		gq_dsrc_merge(d, 1 + gq_rnd(&p->rng, 5));
	}
	sq_activate(d->s);
	d->next = atomic_load(&gq_w.dsrcs);
	atomic_store(&gq_w.dsrcs, d); /* published whole */
}

/* Merges into the program's data sources from the driver, sometimes with
 * the source suspended for a while. */
static void
op_merge(struct gq_prog *p)
{
	unsigned long last_replace = 0;
	for (struct gq_dsrc *d = atomic_load(&gq_w.dsrcs); d; d = d->next) {
		if (!gq_chance(&p->rng, 60))
			continue;
		if (gq_chance(&p->rng, 15) && atomic_load(&d->suspended) == 0) {
			sq_suspend(d->s);
			atomic_store(&d->suspended, 1);
		}
		int n = 1 + (int)gq_rnd(&p->rng, 6);
		for (int i = 0; i < n; i++) {
			unsigned long v;
			if (d->type == DS_ADD)
				v = 1 + gq_rnd(&p->rng, 1000);
			else if (d->type == DS_OR)
				v = 1ul << gq_rnd(&p->rng, 40);
			else
				v = (last_replace = atomic_load(&d->merged) +
						1 + gq_rnd(&p->rng, 3));
			gq_dsrc_merge(d, v);
			if (gq_chance(&p->rng, 30))
				gq_spin(gq_rnd(&p->rng, 2000));
		}
		if (atomic_load(&d->suspended) && gq_chance(&p->rng, 50)) {
			atomic_store(&d->suspended, 0);
			sq_resume(d->s);
		}
	}
	(void)last_replace;
}

static void
op_main(struct gq_prog *p)
{
	for (int i = 0; i < p->nqueues; i++) {
		if (p->queues[i].kind != GQ_MAIN)
			continue;
		int n = 1 + (int)gq_rnd(&p->rng, 3);
		for (int k = 0; k < n; k++) {
			struct gq_task *t = gq_driver_task(p, i, "async to main",
					false);
			gq_expect(p, 1);
			sq_async_f(p->queues[i].q, t, gq_task_fn);
		}
	}
}

#include "guarantees_liveness.h"
#include "guarantees_priority.h"

/* ---- Programs --------------------------------------------------------------------- */

static void
gq_setup(struct gq_prog *p)
{
	struct gq_rng *r = &p->rng;
	int nreg = 1 + (int)gq_rnd(r, 5);
	int ninner = 1 + (int)gq_rnd(r, 2);
	bool main = gq_chance(r, 50);
	__atomic_store_n(&p->nqueues, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < nreg; i++) {
		struct gq_queue *q = &p->queues[p->nqueues];
		memset(q, 0, sizeof(*q));
		q->kind = gq_chance(r, 65) ? GQ_SERIAL : GQ_CONCURRENT;
		q->parent = i > 0 && gq_chance(r, 55) ? (int)gq_rnd(r,
				(uint32_t)i) : -1;
		q->suspendable = true;
		snprintf(q->label, sizeof(q->label), "%s%d", q->kind ==
				GQ_SERIAL ? "serial" : "concurrent", i);
		q->q = sq_queue_create_with_target(q->label, q->kind ==
				GQ_SERIAL ? SQ_QUEUE_SERIAL : SQ_QUEUE_CONCURRENT,
				q->parent < 0 ? gq_global(r) :
				p->queues[q->parent].q);
		GQ_TRACE("queue %s -> %s\n", q->label, q->parent < 0 ? "global"
				: p->queues[q->parent].label);
		gq_publish_queue(p);
	}
	for (int i = 0; i < ninner; i++) {
		struct gq_queue *q = &p->queues[p->nqueues];
		memset(q, 0, sizeof(*q));
		q->kind = gq_chance(r, 60) ? GQ_SERIAL : GQ_CONCURRENT;
		q->parent = -1;
		q->inner = true;
		snprintf(q->label, sizeof(q->label), "inner%d", i);
		q->q = sq_queue_create_with_target(q->label, q->kind ==
				GQ_SERIAL ? SQ_QUEUE_SERIAL : SQ_QUEUE_CONCURRENT,
				gq_global(r));
		gq_publish_queue(p);
	}
	if (main) {
		struct gq_queue *q = &p->queues[p->nqueues];
		memset(q, 0, sizeof(*q));
		q->kind = GQ_MAIN;
		q->parent = -1;
		snprintf(q->label, sizeof(q->label), "main");
		q->q = sq_get_main_queue();
		gq_publish_queue(p);
	}
}

enum {
	OP_ASYNC, OP_SYNC, OP_TAIL_RACE, OP_APPLY, OP_SUSPEND, OP_RESUME,
	OP_SUSPEND_RACE,
	OP_INACTIVE, OP_GROUP, OP_WORKITEM, OP_AFTER, OP_TIMER, OP_DATA_SOURCE,
	OP_MERGE, OP_PIPE, OP_FILE_READ, OP_CHANNEL_RACE, OP_FILE_WRITE,
	OP_READ_WRITE, OP_MAIN, OP_COUNT,
};

static const unsigned gq_weights[OP_COUNT] = {
	[OP_ASYNC] = 20, [OP_SYNC] = 10, [OP_TAIL_RACE] = 14, [OP_APPLY] = 3,
	[OP_SUSPEND] = 3, [OP_RESUME] = 4, [OP_SUSPEND_RACE] = 3,
	[OP_INACTIVE] = 2, [OP_GROUP] = 5,
	[OP_WORKITEM] = 6, [OP_AFTER] = 4, [OP_TIMER] = 1,
	[OP_DATA_SOURCE] = 1, [OP_MERGE] = 4, [OP_PIPE] = 3,
	[OP_FILE_READ] = 5, [OP_CHANNEL_RACE] = 3, [OP_FILE_WRITE] = 2, [OP_READ_WRITE] = 2,
	[OP_MAIN] = 2,
};

static const char *const gq_op_names[OP_COUNT] = {
	"async", "sync", "drain-end race", "apply", "suspend", "resume",
	"suspend race",
	"inactive queue", "group", "work item", "after", "timer",
	"data source", "merge", "pipe", "file reads", "channel race",
	"file writes",
	"sq_read/sq_write", "main",
};

/* SQT_OPS="pipe,file reads": only these operations (a focus for a
 * diagnosis; the default is every one). "liveness" names the liveness
 * family (all its shapes), "liveness pile-up" one of its shapes
 * (gq_lv_names); without either, SQT_OPS leaves the family out, and with
 * only those, the other operations. "priority" names the precedence
 * family (guarantees_priority.h) the same way. */
static unsigned gq_mix_weights[OP_COUNT];
static bool gq_regular_on;     /* programs of the operations above */
static bool gq_live_on;        /* liveness programs */

static void
gq_choose_ops(void)
{
	const char *only = getenv("SQT_OPS");
	bool all = only == NULL || *only == '\0';
	char buf[512];
	snprintf(buf, sizeof(buf), ",%s,", all ? "" : only);
	char name[80];
	gq_regular_on = all;
	for (int i = 0; i < OP_COUNT; i++) {
		gq_mix_weights[i] = gq_weights[i];
		snprintf(name, sizeof(name), ",%s,", gq_op_names[i]);
		if (!all && strstr(buf, name) == NULL)
			gq_mix_weights[i] = 0;
		gq_regular_on |= gq_mix_weights[i] != 0;
	}
	bool live_all = all || strstr(buf, ",liveness,") != NULL;
	bool named = false;
	for (int i = 0; i < LV_SHAPES; i++) {
		snprintf(name, sizeof(name), ",liveness %s,", gq_lv_names[i]);
		gq_lv_mix[i] = strstr(buf, name) ? gq_lv_weights[i] : 0;
		named |= gq_lv_mix[i] != 0;
	}
	gq_live_on = false;
	gq_lv_skipped = 0;
	for (int i = 0; i < LV_SHAPES; i++) {
		if (live_all && !named) {
			gq_lv_mix[i] = gq_lv_weights[i];
			/* the backend's skips, unless named */
			if (GQ_LIVE_SKIP & (1u << i)) {
				gq_lv_mix[i] = 0;
				gq_lv_skipped |= 1u << i;
			}
		}
		gq_live_on |= gq_lv_mix[i] != 0;
	}
	gq_lv_dependent_max = named && (gq_lv_mix[LV_FORK_JOIN] ||
			gq_lv_mix[LV_WORKITEM]) ? GQ_LIVE_MAX_DEPENDENT
			: GQ_LIVE_DEPENDENT_CAP;
	/* the precedence family: named, or all (unless the backend skips
	 * it by default) */
	bool prio_named = strstr(buf, ",priority,") != NULL;
	gq_prio_on = prio_named || (all && !GQ_PRIO_SKIP);
	gq_prio_skipped = all && GQ_PRIO_SKIP;
	/* SQT_OPS naming nothing known: empty programs, as before */
	if (!gq_regular_on && !gq_live_on && !gq_prio_on)
		gq_regular_on = true;
	/* a child with a thread cap (W:C) runs the liveness family only */
	const char *family = getenv("SQT_GQ_FAMILY");
	if (family && strcmp(family, "liveness") == 0 && gq_live_on) {
		gq_regular_on = false;
		gq_prio_on = false;
		gq_prio_skipped = false;
	}
}

/* Whether the program of `seed` is a liveness program: one seed in 8. The
 * seed alone says, so that SQT_SEED replays either kind. */
static bool
gq_seed_is_live(uint64_t seed)
{
	return (gq_mix(seed ^ 0x6c6976656e657373ull) & 7) == 0;
}

/* Whether the program of `seed` is a precedence program: one seed in 8 of
 * those that are not liveness programs. */
static bool
gq_seed_is_prio(uint64_t seed)
{
	return !gq_seed_is_live(seed) &&
			(gq_mix(seed ^ 0x7072696f72697479ull) & 7) == 0;
}

/* Whether this child runs the program of `seed` (see gq_choose_ops). */
static bool
gq_seed_wanted(uint64_t seed)
{
	return gq_seed_is_live(seed) ? gq_live_on : gq_seed_is_prio(seed) ?
			gq_prio_on : gq_regular_on;
}

static void
gq_op(struct gq_prog *p)
{
	unsigned total = 0;
	for (int i = 0; i < OP_COUNT; i++)
		total += gq_mix_weights[i];
	if (total == 0)
		return;
	unsigned x = gq_rnd(&p->rng, total);
	int op = 0;
	while (x >= gq_mix_weights[op])
		x -= gq_mix_weights[op++];
	GQ_TRACE("op %s\n", gq_op_names[op]);
	switch (op) {
	case OP_ASYNC: op_async(p); break;
	case OP_SYNC: op_sync(p); break;
	case OP_TAIL_RACE: op_tail_race(p); break;
	case OP_APPLY: op_apply(p); break;
	case OP_SUSPEND: op_suspend(p); break;
	case OP_RESUME: op_resume(p); break;
	case OP_SUSPEND_RACE: op_suspend_race(p); break;
	case OP_INACTIVE: op_inactive(p); break;
	case OP_GROUP: op_group(p); break;
	case OP_WORKITEM: op_workitem(p); break;
	case OP_AFTER: op_after(p); break;
	case OP_TIMER: op_timer(p); break;
	case OP_DATA_SOURCE: op_data_source(p); break;
	case OP_MERGE: op_merge(p); break;
	case OP_PIPE: op_pipe(p); break;
	case OP_FILE_READ: op_file_read(p); break;
	case OP_CHANNEL_RACE: op_channel_race(p); break;
	case OP_FILE_WRITE: op_file_write(p); break;
	case OP_READ_WRITE: op_read_write(p); break;
	case OP_MAIN: op_main(p); break;
	}
}

struct gq_until {
	struct gq_prog *p;
	long outstanding;
};

static bool
gq_outstanding_at_most(void *ctx)
{
	struct gq_until *u = ctx;
	return atomic_load(&u->p->outstanding) <= u->outstanding;
}

static bool
gq_dsrc_complete(void *ctx)
{
	struct gq_dsrc *d = ctx;
	return atomic_load(&d->delivered) == atomic_load(&d->merged);
}

static bool
gq_timer_fired(void *ctx)
{
	struct gq_timer *tm = ctx;
	return atomic_load(&tm->fires) >= (tm->interval ? 2 : 1);
}

/* Ends a program: everything resumed and activated, every task done, each
 * source fully delivered and then cancelled, every cleanup run; then
 * everything released. */
static void
gq_finish(struct gq_prog *p)
{
	for (int i = 0; i < p->nqueues; i++)
		while (p->queues[i].suspended > 0)
			gq_resume(&p->queues[i]);
	for (int i = 0; i < gq_w.ninactive; i++) {
		p->queues[gq_w.inactive[i]].inactive = false;
		sq_activate(p->queues[gq_w.inactive[i]].q);
	}
	long sources = 0;
	for (struct gq_dsrc *d = atomic_load(&gq_w.dsrcs); d; d = d->next) {
		sources++;
		if (atomic_load(&d->suspended))
			sq_resume(d->s);
	}
	for (struct gq_timer *tm = gq_w.timers; tm; tm = tm->next)
		sources++;
	/* every task, handler and cleanup but the cancel handlers */
	struct gq_until u = { p, sources };
	if (!gq_wait(p, gq_outstanding_at_most, &u, "the program's work"))
		return;
	for (struct gq_dsrc *d = atomic_load(&gq_w.dsrcs); d; d = d->next) {
		if (!gq_wait(p, gq_dsrc_complete, d, "a data source's data"))
			return;
		sq_source_cancel(d->s);
	}
	for (struct gq_timer *tm = gq_w.timers; tm; tm = tm->next) {
		if (!gq_wait(p, gq_timer_fired, tm, "a timer's fires"))
			return;
		sq_source_cancel(tm->s);
	}
	u.outstanding = 0;
	if (!gq_wait(p, gq_outstanding_at_most, &u, "the cancel handlers"))
		return;
	while (atomic_load(&gq_w.dsrcs)) {
		struct gq_dsrc *d = atomic_load(&gq_w.dsrcs);
		atomic_store(&gq_w.dsrcs, d->next);
		sq_release(d->s);
		free(d);
	}
	while (gq_w.timers) {
		struct gq_timer *tm = gq_w.timers;
		gq_w.timers = tm->next;
		sq_release(tm->s);
		free(tm);
	}
	for (int i = 0; i < gq_w.ngroups; i++)
		sq_release(gq_w.groups[i].g);
	for (int i = 0; i < p->nqueues; i++)
		if (p->queues[i].kind != GQ_MAIN)
			sq_release(p->queues[i].q);
	struct gq_stream *s = atomic_exchange(&p->streams, NULL);
	while (s) {
		struct gq_stream *next = s->next;
		free(s);
		s = next;
	}
	memset(&gq_w, 0, sizeof(gq_w));
}

/* Runs the program of `seed`; false if it failed (the failure is in p). */
static bool
gq_program(struct gq_prog *p, uint64_t seed)
{
	unsigned long tasks = atomic_load(&p->tasks_run);
	unsigned long calls = atomic_load(&p->handler_calls);
	unsigned long bytes = atomic_load(&p->io_bytes);
	unsigned long races = atomic_load(&p->races);
	unsigned long live_programs = atomic_load(&p->live_programs);
	unsigned long live_jobs = atomic_load(&p->live_jobs);
	unsigned long prio_programs = atomic_load(&p->prio_programs);
	unsigned long prio_tasks = atomic_load(&p->prio_tasks);
	int width = p->width;
	memset(p, 0, sizeof(*p));
	atomic_init(&p->tasks_run, tasks);
	atomic_init(&p->handler_calls, calls);
	atomic_init(&p->io_bytes, bytes);
	atomic_init(&p->races, races);
	atomic_init(&p->live_programs, live_programs);
	atomic_init(&p->live_jobs, live_jobs);
	atomic_init(&p->prio_programs, prio_programs);
	atomic_init(&p->prio_tasks, prio_tasks);
	p->width = width;
	p->seed = seed;
	p->rng.s = seed;
	if (gq_seed_is_live(seed))
		return gq_live_program(p);
	if (gq_seed_is_prio(seed))
		return gq_prio_program(p);
	p->driver.id = 0;
	atomic_init(&p->next_stream_id, 1);
	gq_setup(p);
	int nops = 30 + (int)gq_rnd(&p->rng, 60);
	for (int i = 0; i < nops && atomic_load(&p->failures) == 0; i++)
		gq_op(p);
	gq_finish(p);
	return atomic_load(&p->failures) == 0;
}

/* ---- The child: programs at one width ------------------------------------------- */

static uint64_t
gq_env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static struct gq_prog gq_the_prog;

static void
gq_remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d != NULL) {
		struct dirent *e;
		char path[4096];
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

/* A crash (the runtime's abort on misuse, a fault) still names the
 * program: async-signal-safe formatting of its seed. */
static char gq_crash_note[160];

static void
gq_on_crash(int sig)
{
	ssize_t n = write(STDERR_FILENO, gq_crash_note, strlen(gq_crash_note));
	(void)n;
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
gq_note_program(uint64_t seed, const char *width)
{
	static const char hex[] = "0123456789abcdef";
	char s[17];
	for (int i = 0; i < 16; i++)
		s[i] = hex[(seed >> (60 - 4 * i)) & 0xf];
	s[16] = '\0';
	snprintf(gq_crash_note, sizeof(gq_crash_note), "FAIL (%s, width %s): "
			"crashed in the program of seed 0x%s\n", GQ_BACKEND,
			width, s);
}

static int
gq_child_main(void)
{
	struct gq_prog *p = &gq_the_prog;
	const char *wenv = getenv("SQ_WORKERS");
	const char *cap = getenv("SQ_MAX_THREADS");
	const char *ops = getenv("SQT_OPS");
	p->width = wenv ? atoi(wenv) : 0;
	/* the width as messages give it: "2", "2 cap 4" */
	char wlabel[64];
	snprintf(wlabel, sizeof(wlabel), "%s%s%s", wenv ? wenv : "default",
			cap && *cap ? " cap " : "", cap && *cap ? cap : "");
	const char *w = wlabel;
	/* what the replay line sets besides the seed */
	const char *sab = getenv("SQT_LIVE_SABOTAGE");
	const char *psab = getenv("SQT_PRIO_SABOTAGE");
	const char *pstrict = getenv("SQT_PRIO_STRICT");
	char renv[512];
	snprintf(renv, sizeof(renv), "%s%s%s%s%s%s%s%s%s%s%s%s%s", wenv ?
			" SQ_WORKERS=" : "", wenv ? wenv : "", cap && *cap ?
			" SQ_MAX_THREADS=" : "", cap && *cap ? cap : "", ops &&
			*ops ? " SQT_OPS=\"" : "", ops && *ops ? ops : "", ops &&
			*ops ? "\"" : "", sab && *sab ? " SQT_LIVE_SABOTAGE=" : "",
			sab && *sab ? sab : "", psab && *psab ?
			" SQT_PRIO_SABOTAGE=" : "", psab && *psab ? psab : "",
			pstrict && *pstrict ? " SQT_PRIO_STRICT=" : "", pstrict &&
			*pstrict ? pstrict : "");
	uint64_t master = gq_env_u64("SQT_GQ_MASTER", 1);
	uint64_t replay = gq_env_u64("SQT_GQ_REPLAY", 0);
	gq_trace = gq_env_u64("SQT_TRACE", 0) != 0;
	/* SQT_KEEP_GOING=1: report every failed program and go on (to count
	 * them; a stalled one still costs GQ_STALL_SECONDS) */
	bool keep_going = gq_env_u64("SQT_KEEP_GOING", 0) != 0;
	unsigned long failures = 0;
	gq_choose_ops();
	if (gq_live_on)
		gq_live_note();
	gq_prio_note();
	unsigned long programs = replay ? gq_env_u64("SQT_REPEAT", 1)
			: gq_env_u64("SQT_PROGRAMS", ~0ul);
	const char *secs_env = getenv("SQT_GQ_SECONDS");
	double seconds = secs_env ? strtod(secs_env, NULL) : 0;
	char dir[] = "/tmp/sqt-guarantees-XXXXXX";
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	gq_tmpdir = dir;
	signal(SIGABRT, gq_on_crash);
	signal(SIGSEGV, gq_on_crash);
	signal(SIGBUS, gq_on_crash);
	uint64_t t0 = gq_now();
	unsigned long i;
	uint64_t k = 0; /* seeds drawn (some are another family's) */
	for (i = 0; i < programs; i++) {
		if (seconds > 0 && (double)(gq_now() - t0) / 1e9 > seconds)
			break;
		uint64_t seed = replay;
		while (!replay && !gq_seed_wanted(seed = gq_mix(master + k++)))
			;
		gq_note_program(seed, w);
		if (!gq_program(p, seed) && keep_going) {
			/* a diagnostic mode: count the failures, go on (a failed
			 * liveness program's jobs may still run, into the next
			 * programs) */
			fprintf(stderr, "FAIL (%s, width %s): %s (seed 0x%016"
					PRIx64 ")\n", GQ_BACKEND, w, p->failure, seed);
			failures++;
			if (gq_seed_is_live(seed)) {
				/* its blocked threads would fail the next
				 * programs too */
				fprintf(stderr, "  (width %s: a failed liveness "
						"program's threads stay blocked: no more "
						"programs here)\n", w);
				i++;
				break;
			}
		} else if (atomic_load(&p->failures) != 0) {
			char self[4096];
			ssize_t n = readlink("/proc/self/exe", self,
					sizeof(self) - 1);
			self[n > 0 ? n : 0] = '\0';
			fprintf(stderr, "FAIL (%s, width %s): %s\n"
					"  program %lu, seed 0x%016" PRIx64 "; "
					"replay: SQT_SEED=0x%016" PRIx64 "%s %s\n",
					GQ_BACKEND, w, p->failure, i, seed, seed, renv,
					self);
			fflush(NULL);
			gq_remove_dir(dir);
			_exit(1);
		}
	}
	double secs = (double)(gq_now() - t0) / 1e9;
	printf("  %s width %-7s %5lu programs in %5.1f s: %lu tasks, %lu "
			"handler calls, %lu I/O bytes, %lu drain-end races; "
			"%lu liveness programs, %lu jobs\n",
			GQ_BACKEND, w, i, secs,
			(unsigned long)atomic_load(&p->tasks_run),
			(unsigned long)atomic_load(&p->handler_calls),
			(unsigned long)atomic_load(&p->io_bytes),
			(unsigned long)atomic_load(&p->races),
			(unsigned long)atomic_load(&p->live_programs),
			(unsigned long)atomic_load(&p->live_jobs));
	gq_prio_summary(w);
	int status = failures ? 1 : 0;
	if (failures)
		printf("  %lu programs failed\n", failures);
#if GQ_HAS_WIDTH
	unsigned long long net = gq_net_firings();
	if (net != 0) {
		fprintf(stderr, "FAIL (width %s): the pool's safety net fired "
				"%llu times\n", w, net);
		status = 1;
	}
#endif
	/* the files are gone with their channels (and with a failed
	 * program's, here) */
	gq_remove_dir(dir);
	fflush(NULL);
	_exit(status);
}

/* ---- The parent: a child per width -------------------------------------------------- */

/* SQ_MAX_THREADS as the parent found it: the children of plain widths
 * get it back (a replay's cap comes from there). */
static const char *gq_cap_env;

/* Runs a child at `width` (0: the runtime's default), with the thread cap
 * `cap` and the liveness family only if cap > 0; true if it passed. */
static bool
gq_run_child(int width, int cap, uint64_t master, uint64_t replay,
		double seconds)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return false;
	self[n] = '\0';
	char wbuf[16], mbuf[32], rbuf[32], sbuf[32];
	setenv("SQT_GQ_CHILD", "1", 1);
	if (width > 0) {
		snprintf(wbuf, sizeof(wbuf), "%d", width);
		setenv("SQ_WORKERS", wbuf, 1);
	}
	char cbuf[16];
	if (cap > 0) {
		snprintf(cbuf, sizeof(cbuf), "%d", cap);
		setenv("SQ_MAX_THREADS", cbuf, 1);
		setenv("SQT_GQ_FAMILY", "liveness", 1);
	} else {
		if (gq_cap_env)
			setenv("SQ_MAX_THREADS", gq_cap_env, 1);
		else
			unsetenv("SQ_MAX_THREADS");
		unsetenv("SQT_GQ_FAMILY");
	}
	setenv("SQ_MONITOR_NET", "0", 1);
	snprintf(mbuf, sizeof(mbuf), "0x%" PRIx64, master);
	setenv("SQT_GQ_MASTER", mbuf, 1);
	snprintf(rbuf, sizeof(rbuf), "0x%" PRIx64, replay);
	setenv("SQT_GQ_REPLAY", rbuf, 1);
	snprintf(sbuf, sizeof(sbuf), "%.3f", seconds);
	setenv("SQT_GQ_SECONDS", sbuf, 1);
	char *argv[] = { self, NULL };
	pid_t pid;
	fflush(NULL);
	if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
		return false;
	/* a stall fails by itself after GQ_STALL_SECONDS; this is for a
	 * child that cannot even report */
	uint64_t limit = (uint64_t)(seconds + 4 * GQ_STALL_SECONDS + 120);
	uint64_t deadline = gq_now() + limit * 1000000000ull;
	int status = 0;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (gq_now() > deadline) {
			fprintf(stderr, "FAIL width %d cap %d: hung for %" PRIu64
					" s, killed\n", width, cap, limit);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return false;
		}
		struct timespec ts = { 0, 20 * 1000000 };
		nanosleep(&ts, NULL);
	}
	if (WIFSIGNALED(status))
		fprintf(stderr, "FAIL width %d cap %d: child killed by signal "
				"%d\n", width, cap, WTERMSIG(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int
main(void)
{
	if (getenv("SQT_GQ_CHILD"))
		return gq_child_main();
	int passed = 0, failed = 0;
	uint64_t replay = gq_env_u64("SQT_SEED", 0);
	uint64_t master = gq_env_u64("SQT_MASTER", 0);
	if (master == 0)
		master = gq_mix(gq_now() ^ ((uint64_t)getpid() << 32));
	double soak = (double)gq_env_u64("SOAK_SECONDS", 0);
	double seconds = (double)gq_env_u64("SQT_SECONDS", 3);
	if (GQ_TSAN || GQ_ASAN)
		seconds *= 2; /* fewer programs still, at this speed */
	char list[128];
	const char *wl = getenv("SQT_GUARANTEE_WIDTHS");
	const char *workers = getenv("SQ_WORKERS");
	snprintf(list, sizeof(list), "%s", wl && *wl ? wl : replay && workers ?
			workers : "1 2 3 4 8 16 2:4 4:4 8:16");
	if (!GQ_HAS_WIDTH)
		snprintf(list, sizeof(list), "0");
	const char *cap_env = getenv("SQ_MAX_THREADS");
	gq_cap_env = cap_env && *cap_env ? strdup(cap_env) : NULL;
	gq_choose_ops(); /* which families run (no runtime call) */
	/* The time budget: widths written W:C (a thread cap, the liveness
	 * family only) take a third of SQT_SECONDS each, from the plain
	 * widths' share, so that the pass takes as long as the plain widths
	 * alone did. */
	int nplain = 0, ncap = 0;
	{
		char buf[128];
		snprintf(buf, sizeof(buf), "%s", list);
		for (char *tok = strtok(buf, " ,"); tok;
				tok = strtok(NULL, " ,")) {
			if (strchr(tok, ':'))
				ncap += gq_live_on;
			else
				nplain++;
		}
	}
	double cap_seconds = seconds, plain_seconds = seconds;
	if (nplain > 0 && ncap > 0) {
		cap_seconds = seconds / 3;
		plain_seconds = seconds - ncap * cap_seconds / nplain;
		if (plain_seconds < seconds / 4)
			plain_seconds = seconds / 4;
	}
	if (replay)
		printf("guarantee checker (%s): replaying seed 0x%016" PRIx64
				"\n", GQ_BACKEND, replay);
	else
		printf("guarantee checker (%s): master seed 0x%016" PRIx64
				" (SQT_MASTER replays this pass)\n", GQ_BACKEND,
				master);
	fflush(stdout);
	uint64_t t0 = gq_now();
	unsigned round = 0;
	do {
		char buf[128];
		snprintf(buf, sizeof(buf), "%s", list);
		for (char *tok = strtok(buf, " ,"); tok;
				tok = strtok(NULL, " ,")) {
			int width = atoi(tok);
			char *colon = strchr(tok, ':');
			int cap = colon ? atoi(colon + 1) : 0;
			if (colon && (cap <= 0 || !gq_live_on || (replay &&
					!gq_seed_is_live(replay)))) {
				printf("  width %s: skipped (%s)\n", tok, cap <= 0 ?
						"no thread cap after ':'" : !gq_live_on ?
						"SQT_OPS leaves the liveness family out" :
						"the seed's program is not a liveness "
						"program");
				continue;
			}
			int nwidths = nplain + ncap > 0 ? nplain + ncap : 1;
			double secs = soak > 0 ? (soak < 600 ? soak / nwidths :
					100) : cap ? cap_seconds : plain_seconds;
			bool ok = gq_run_child(width, cap, gq_mix(master + round *
					1000003u + (unsigned)width +
					(unsigned)cap * 65537u), replay, secs);
			if (ok)
				passed++;
			else
				failed++;
			if (soak > 0 && (double)(gq_now() - t0) / 1e9 >= soak)
				break;
		}
		round++;
	} while (soak > 0 && (double)(gq_now() - t0) / 1e9 < soak &&
			failed == 0);
	printf("guarantee checker: %.1f s\n", (double)(gq_now() - t0) / 1e9);
	printf("test_guarantees: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
