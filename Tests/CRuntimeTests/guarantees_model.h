/*
 * The guarantee checker's model (test_guarantees.c): what a program built
 * from the queue API may observe, and the checks every task, handler and
 * notification makes when it runs.
 *
 * - Exclusion. Each queue of a program has a hold word: shared holders
 *   count in its low bits, an exclusive holder adds GQ_EXCL. A task holds
 *   its own queue exclusively (serial queue, or a barrier) or shared
 *   (concurrent queue), and every queue up its target chain exclusively if
 *   that queue is serial, shared if concurrent. Taking a hold that
 *   conflicts with one already there is a violation: two tasks of a serial
 *   hierarchy at once, or a barrier with anything else on its queue.
 * - Order. Submissions from one thread (the program's driver, or one task:
 *   a "stream") to one queue are stamped in the order they are made. On a
 *   serial queue they start in that order; on a concurrent queue a barrier
 *   starts once every earlier counted task of its stream has finished, and
 *   a task starts once every earlier barrier of its stream has finished.
 *   Only one stream's order is checked: two submissions from different
 *   threads are ordered only through something the runtime does not see.
 * - Completion. `outstanding` counts every call the program expects (a
 *   task, a handler's last call, a cleanup, a notification); each one ends
 *   by taking one off. A program is over when it reaches 0; a program that
 *   makes no progress (no call starts or ends) for GQ_STALL_SECONDS has
 *   failed: with the pool's safety net off, a lost wake-up shows so.
 *
 * The first failure's message is kept with the program's seed; the child
 * process prints it with the width and the command line that replays it.
 */
#ifndef SQTEST_GUARANTEES_MODEL_H
#define SQTEST_GUARANTEES_MODEL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define GQ_MAX_QUEUES 16
#define GQ_EXCL (1 << 20)
#define GQ_STALL_SECONDS 30

/* ---- Random numbers ------------------------------------------------------ */

static inline uint64_t
gq_mix(uint64_t x)
{
	/* splitmix64's finaliser */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct gq_rng {
	uint64_t s;
};

static inline uint32_t
gq_rnd(struct gq_rng *r, uint32_t bound)
{
	r->s = gq_mix(r->s);
	return bound ? (uint32_t)((r->s >> 32) % bound) : 0;
}

static inline bool
gq_chance(struct gq_rng *r, unsigned percent)
{
	return gq_rnd(r, 100) < percent;
}

/* ---- Queues, streams, the program ------------------------------------------ */

enum gq_kind {
	GQ_SERIAL,
	GQ_CONCURRENT,
	GQ_GLOBAL,
	GQ_MAIN,
};

struct gq_queue {
	sq_queue_t q;
	enum gq_kind kind;
	int parent;         /* the target in the model: an index, or -1 */
	bool inner;         /* tasks may sync onto it: it targets a global
	                     * queue and is never suspended */
	bool suspendable;   /* the driver may suspend it: nobody syncs onto
	                     * it or anything below it */
	atomic_int hold;
	bool inactive;      /* driver only: not activated yet */
	int suspended;      /* driver only: its suspend count */
	int suspend_epoch;  /* driver only: suspends so far */
	atomic_int resumed_epoch; /* the last suspend whose resume began */
	char label[24];
};

/* One thread's submissions (see the file comment). Only the owner writes
 * the submission counts; the tasks update the rest. */
struct gq_stream {
	struct gq_stream *next; /* the program's list, for freeing */
	uint32_t id;
	uint32_t seq[GQ_MAX_QUEUES];
	uint32_t counted[GQ_MAX_QUEUES];  /* non-barrier tasks sure to run */
	uint32_t barriers[GQ_MAX_QUEUES];
	atomic_uint last_started[GQ_MAX_QUEUES];
	atomic_uint counted_done[GQ_MAX_QUEUES];
	atomic_uint barriers_done[GQ_MAX_QUEUES];
};

struct gq_prog {
	uint64_t seed;
	int width;
	struct gq_rng rng;           /* the driver's */
	int nqueues;
	struct gq_queue queues[GQ_MAX_QUEUES];
	struct gq_stream driver;
	_Atomic(struct gq_stream *) streams;
	atomic_uint next_stream_id;
	atomic_long outstanding;
	atomic_ulong progress;
	atomic_int failures;
	char failure[2048];      /* the first failure's text */
	/* counters for the summary */
	atomic_ulong tasks_run;
	atomic_ulong handler_calls;
	atomic_ulong io_bytes;
	atomic_ulong races;          /* drain-end races staged */
	atomic_ulong live_programs;  /* liveness programs (guarantees_liveness.h) */
	atomic_ulong live_jobs;      /* and their jobs that ran */
	atomic_ulong prio_programs;  /* precedence programs (guarantees_priority.h) */
	atomic_ulong prio_tasks;     /* and their tasks that ran */
};

/* The driver adds queues while tasks pick among them: an entry is filled,
 * then published (release); tasks read the count with acquire. */
static inline int
gq_nqueues(struct gq_prog *p)
{
	return __atomic_load_n(&p->nqueues, __ATOMIC_ACQUIRE);
}

static inline void
gq_publish_queue(struct gq_prog *p)
{
	__atomic_store_n(&p->nqueues, p->nqueues + 1, __ATOMIC_RELEASE);
}

static inline void
gq_progress(struct gq_prog *p)
{
	atomic_fetch_add_explicit(&p->progress, 1, memory_order_relaxed);
}

/* One expected call more / one done. The done is a call's last touch of
 * anything the program owns. */
static inline void
gq_expect(struct gq_prog *p, long n)
{
	atomic_fetch_add(&p->outstanding, n);
}

static inline void
gq_done(struct gq_prog *p)
{
	gq_progress(p);
	atomic_fetch_sub(&p->outstanding, 1);
}

/* Records a violation (the first one's text is kept). */
__attribute__((format(printf, 2, 3)))
static void
gq_fail(struct gq_prog *p, const char *fmt, ...)
{
	if (atomic_fetch_add(&p->failures, 1) != 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->failure, sizeof(p->failure), fmt, ap);
	va_end(ap);
}

#define GQ_CHECK(p, cond, ...)                                                 \
	do {                                                                   \
		if (!(cond))                                                   \
			gq_fail((p), __VA_ARGS__);                             \
	} while (0)

static inline const char *
gq_label(struct gq_prog *p, int qi)
{
	return qi < 0 ? "global" : p->queues[qi].label;
}

/* A new stream for a task that submits (freed with the program). */
static struct gq_stream *
gq_stream_new(struct gq_prog *p)
{
	struct gq_stream *s = calloc(1, sizeof(*s));
	if (s == NULL)
		abort();
	s->id = atomic_fetch_add(&p->next_stream_id, 1);
	struct gq_stream *head = atomic_load(&p->streams);
	do {
		s->next = head;
	} while (!atomic_compare_exchange_weak(&p->streams, &head, s));
	return s;
}

/* ---- Exclusion --------------------------------------------------------------- */

/* Takes the holds of a task of queue `qi` (exclusive on it if `excl`),
 * recording a violation if one conflicts (the holds are taken anyway:
 * gq_leave gives them back). */
static bool
gq_enter(struct gq_prog *p, int qi, bool excl, const char *what)
{
	bool ok = true;
	for (int x = qi; x >= 0; x = p->queues[x].parent) {
		struct gq_queue *q = &p->queues[x];
		if (q->kind == GQ_GLOBAL)
			break;
		bool e = x == qi ? excl : q->kind != GQ_CONCURRENT;
		int old = atomic_fetch_add(&q->hold, e ? GQ_EXCL : 1);
		if (e ? old != 0 : (old & ~(GQ_EXCL - 1)) != 0) {
			gq_fail(p, "%s on '%s': queue '%s' held (%s %d) when it "
					"started (%s)", what, gq_label(p, qi),
					q->label, old >= GQ_EXCL ? "exclusively,"
					: "shared by", old >= GQ_EXCL ? old / GQ_EXCL
					: old, e ? "needs it alone" : "shares it");
			ok = false;
		}
	}
	return ok;
}

static void
gq_leave(struct gq_prog *p, int qi, bool excl)
{
	for (int x = qi; x >= 0; x = p->queues[x].parent) {
		struct gq_queue *q = &p->queues[x];
		if (q->kind == GQ_GLOBAL)
			break;
		bool e = x == qi ? excl : q->kind != GQ_CONCURRENT;
		atomic_fetch_sub(&q->hold, e ? GQ_EXCL : 1);
	}
}

/* Whether a task of `qi` holds its queue exclusively. */
static inline bool
gq_exclusive(struct gq_prog *p, int qi, bool barrier)
{
	return qi >= 0 && (p->queues[qi].kind != GQ_CONCURRENT || barrier);
}

/* ---- Order ------------------------------------------------------------------- */

/* The stamp a submission carries. */
struct gq_stamp {
	struct gq_stream *stream; /* NULL: not ordered (after, handlers) */
	uint32_t seq;
	uint32_t counted_before;
	uint32_t barriers_before;
	bool counted;             /* sure to run (not a work item) */
	bool barrier;
	int resume_epoch;         /* the queue's suspend it waits for, or 0 */
};

/* Stamps a submission of `s` to queue `qi` (by the stream's owner). */
static void
gq_stamp(struct gq_prog *p, struct gq_stamp *st, struct gq_stream *s, int qi,
		bool barrier, bool counted)
{
	memset(st, 0, sizeof(*st));
	if (qi < 0 || s == NULL)
		return;
	struct gq_queue *q = &p->queues[qi];
	st->stream = s;
	st->seq = ++s->seq[qi];
	st->counted_before = s->counted[qi];
	st->barriers_before = s->barriers[qi];
	st->barrier = barrier && q->kind == GQ_CONCURRENT;
	st->counted = counted;
	if (st->barrier)
		s->barriers[qi]++;
	else if (counted)
		s->counted[qi]++;
	/* Only the driver suspends, and only its own submissions are known
	 * to come after the suspend. */
	if (s == &p->driver && q->suspended > 0)
		st->resume_epoch = q->suspend_epoch;
}

/* Whether a concurrent queue runs its tasks one at a time, in order: a
 * serial queue up its chain runs them as its own. */
static bool
gq_serialised(struct gq_prog *p, int qi)
{
	for (int x = p->queues[qi].parent; x >= 0; x = p->queues[x].parent)
		if (p->queues[x].kind == GQ_SERIAL)
			return true;
	return false;
}

/* The order checks of a task starting on `qi`. */
static void
gq_order_start(struct gq_prog *p, int qi, const struct gq_stamp *st,
		const char *what)
{
	if (qi < 0)
		return;
	struct gq_queue *q = &p->queues[qi];
	if (st->resume_epoch != 0)
		GQ_CHECK(p, atomic_load(&q->resumed_epoch) >= st->resume_epoch,
				"%s on '%s' started while the queue was suspended "
				"(submitted after suspend %d, not resumed)", what,
				q->label, st->resume_epoch);
	struct gq_stream *s = st->stream;
	if (s == NULL)
		return;
	if (q->kind == GQ_SERIAL || q->kind == GQ_MAIN || gq_serialised(p, qi)) {
		unsigned old = atomic_exchange(&s->last_started[qi], st->seq);
		GQ_CHECK(p, old < st->seq, "FIFO: %s #%u of stream %u on serial "
				"queue '%s' started after #%u of the same stream",
				what, st->seq, s->id, q->label, old);
		return;
	}
	unsigned bdone = atomic_load(&s->barriers_done[qi]);
	GQ_CHECK(p, bdone >= st->barriers_before, "barrier order: %s #%u of "
			"stream %u on '%s' started before the stream's earlier "
			"barrier finished (%u of %u done)", what, st->seq, s->id,
			q->label, bdone, st->barriers_before);
	if (st->barrier) {
		unsigned cdone = atomic_load(&s->counted_done[qi]);
		GQ_CHECK(p, cdone >= st->counted_before, "barrier order: "
				"barrier #%u of stream %u on '%s' started before "
				"the stream's earlier tasks finished (%u of %u)",
				st->seq, s->id, q->label, cdone,
				st->counted_before);
	}
}

static void
gq_order_end(struct gq_prog *p, int qi, const struct gq_stamp *st)
{
	struct gq_stream *s = st->stream;
	if (qi < 0 || s == NULL || p->queues[qi].kind != GQ_CONCURRENT)
		return;
	if (st->barrier)
		atomic_fetch_add(&s->barriers_done[qi], 1);
	else if (st->counted)
		atomic_fetch_add(&s->counted_done[qi], 1);
}

/* ---- Time ---------------------------------------------------------------------- */

static inline uint64_t
gq_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void
gq_spin(unsigned turns)
{
	for (volatile unsigned i = 0; i < turns; i++) {
	}
}

#endif /* SQTEST_GUARANTEES_MODEL_H */
