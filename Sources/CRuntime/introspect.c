/*
 * SwiftQueues — looking inside the runtime: the registry of live queues,
 * sources and I/O channels, object descriptions (sq_debug,
 * sq_object_describe), and snapshots of the whole runtime as a structure,
 * as text and as JSON. The watchdog and SQ_SNAPSHOT_SIGNAL are watchdog.c.
 *
 * The registry. Queues, sources and channels are added at the end of
 * their creation and leave when their last internal reference goes, before
 * anything of them is torn down (object.c), both under one mutex; nothing
 * is done per task. While a look holds the mutex, every registered object
 * is whole, and so is any queue a registered object holds a reference to
 * (a target, a channel's queue): that queue's last reference could only go
 * after the holder let it go, and its removal from the registry waits for
 * the mutex. A snapshot copies what it shows under the mutex; to count a
 * queue's jobs it takes a reference of its own (only while the queue is
 * still referenced) and counts after letting the mutex go.
 *
 * Counting a queue's jobs. Jobs are freed as they run, and only the holder
 * of ENQUEUED pops them, so the list may be walked once no pop can start
 * or be under way. The snapshot sets INSPECT in the state word of every
 * queue it counts (one atomic OR each), then walks a queue's list as soon
 * as one of these holds:
 *   (a) ENQUEUED was clear when INSPECT went in, or is seen clear later.
 *       A drainer to come takes ENQUEUED with a read-modify-write of the
 *       same word, after ours, so the state it reads before its first pop
 *       has INSPECT and it pauses; a drainer that cleared ENQUEUED pops
 *       nothing more.
 *   (b) The drain phase (queue_internal.h) is PAUSED: the drainer saw
 *       INSPECT and waits for it to clear.
 *   (c) After one process-wide memory barrier (membarrier(2), issued after
 *       all the ORs), the phase is TASK or IDLE. A drainer stores LOOP
 *       before it reads the state for its next pop; the barrier orders
 *       that store and that read against our OR and our read of the mark
 *       (each running thread passes a full barrier during the call), so
 *       either its read sees INSPECT, or we see LOOP and wait. This is
 *       what lets a queue whose drainer is stuck inside a task be counted.
 *       Without membarrier(2), only (a) and (b) count.
 * A drainer marked LOOP is a few instructions from a pop or a pause; the
 * snapshot waits for it, at most SQ_INSPECT_WAIT_NS for all queues
 * together, and reports a queue it could not count as -1. Clearing INSPECT
 * lets the paused drainers go on. One snapshot counts at a time (a mutex),
 * so one cannot clear another's INSPECT.
 *
 * "Waiting" figures. A queue's look remembers the drain's pop count while
 * jobs are queued, and since when; a later look that finds jobs queued and
 * the count unchanged knows no job of the queue started in between. Looks
 * are taken by every snapshot and by each watchdog tick, so the figure is
 * a lower bound, as precise as the looks are frequent, at no cost to
 * submission.
 */
#include "event_internal.h"
#include "introspect_internal.h"
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <syslog.h>

/* All queues' counts together wait at most this long for drainers that
 * are about to pop. */
#define SQ_INSPECT_WAIT_NS (500 * NSEC_PER_MSEC)
/* A walk stops after this many jobs (queued_capped). */
#define SQ_INSPECT_WALK_MAX 1000000u
/* A description's hook writes at most this much in one go. */
#define SQ_DEBUG_HOOK_SIZE 1024u

/* ---- A growing string ------------------------------------------------- */

static bool
_sq_sb_reserve(struct sq_sb_s *sb, size_t need)
{
	if (sb->fixed || sb->failed)
		return false;
	if (need <= sb->size)
		return true;
	size_t size = sb->size ? sb->size : 256;
	while (size < need)
		size *= 2;
	char *buf = realloc(sb->buf, size);
	if (buf == NULL) {
		sb->failed = true;
		return false;
	}
	sb->buf = buf;
	sb->size = size;
	return true;
}

void
_sq_sb_vprintf(struct sq_sb_s *sb, const char *format, va_list ap)
{
	if (sb->failed)
		return;
	size_t at = sb->len;
	size_t room = at < sb->size ? sb->size - at : 0;
	va_list copy;
	va_copy(copy, ap);
	int n = vsnprintf(room ? sb->buf + at : NULL, room, format, copy);
	va_end(copy);
	if (n < 0)
		return;
	if (!sb->fixed && (size_t)n >= room) {
		if (!_sq_sb_reserve(sb, at + (size_t)n + 1))
			return;
		vsnprintf(sb->buf + at, sb->size - at, format, ap);
	}
	sb->len = at + (size_t)n;
}

void
_sq_sb_printf(struct sq_sb_s *sb, const char *format, ...)
{
	va_list ap;
	va_start(ap, format);
	_sq_sb_vprintf(sb, format, ap);
	va_end(ap);
}

void
_sq_sb_quote(struct sq_sb_s *sb, const char *s)
{
	_sq_sb_printf(sb, "'%s'", s ? s : "");
}

void
_sq_sb_json_string(struct sq_sb_s *sb, const char *s)
{
	if (s == NULL) {
		_sq_sb_printf(sb, "null");
		return;
	}
	_sq_sb_printf(sb, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			_sq_sb_printf(sb, "\\%c", *p);
		else if (*p < 0x20)
			_sq_sb_printf(sb, "\\u%04x", *p);
		else
			_sq_sb_printf(sb, "%c", *p);
	}
	_sq_sb_printf(sb, "\"");
}

/* Appends a hook's text (a description's particular part). */
static void
_sq_sb_hook(struct sq_sb_s *sb, struct sq_object_s *o)
{
	if (sb->failed)
		return;
	if (!sb->fixed && !_sq_sb_reserve(sb, sb->len + SQ_DEBUG_HOOK_SIZE))
		return;
	size_t at = sb->len;
	size_t room = at < sb->size ? sb->size - at : 0;
	size_t n = o->vtable->debug(o, room ? sb->buf + at : NULL, room);
	if (!sb->fixed && n >= room) {
		if (!_sq_sb_reserve(sb, at + n + 1))
			return;
		n = o->vtable->debug(o, sb->buf + at, sb->size - at);
		if (n >= sb->size - at)
			n = sb->size - at - 1; /* changed in between: cut */
	}
	sb->len = at + n;
}

/* ---- The registry --------------------------------------------------------- */

static struct {
	pthread_mutex_t lock;
	struct sq_object_s **objects;
	uint32_t count;
	uint32_t cap;
} _sq_registry = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

void
_sq_introspect_register(struct sq_object_s *o)
{
	pthread_mutex_lock(&_sq_registry.lock);
	if (_sq_registry.count == _sq_registry.cap) {
		/* A new array, published before the old one is freed, so a
		 * fork() in between leaves the child a whole one. */
		uint32_t cap = _sq_registry.cap ? _sq_registry.cap * 2 : 64;
		struct sq_object_s **objects = malloc(cap * sizeof(*objects));
		if (objects == NULL) {
			/* Out of memory: the object is simply not listed. */
			pthread_mutex_unlock(&_sq_registry.lock);
			return;
		}
		struct sq_object_s **old = _sq_registry.objects;
		if (old)
			memcpy(objects, old, _sq_registry.count *
					sizeof(*objects));
		_sq_registry.objects = objects;
		_sq_registry.cap = cap;
		free(old);
	}
	_sq_registry.objects[_sq_registry.count] = o;
	/* Relaxed: reg_slot is read outside the lock only by the object's
	 * last release, which alone can clear it. */
	__atomic_store_n(&o->reg_slot, _sq_registry.count + 1,
			__ATOMIC_RELAXED);
	_sq_registry.count++;
	pthread_mutex_unlock(&_sq_registry.lock);
}

void
_sq_introspect_unregister(struct sq_object_s *o)
{
#ifndef SQ_NO_TRACE
	/* Its description stays in a trace being recorded (its target
	 * still lives: it goes after this). */
	if (sq_trace_recording())
		_sq_introspect_trace_gone(o);
#endif
	pthread_mutex_lock(&_sq_registry.lock);
	uint32_t slot = __atomic_load_n(&o->reg_slot, __ATOMIC_RELAXED);
	if (slot != 0) {
		struct sq_object_s *moved =
				_sq_registry.objects[--_sq_registry.count];
		_sq_registry.objects[slot - 1] = moved;
		__atomic_store_n(&moved->reg_slot, slot, __ATOMIC_RELAXED);
		__atomic_store_n(&o->reg_slot, 0, __ATOMIC_RELAXED);
	}
	_sq_look_drop((struct sq_queue_s *)o); /* a queue's look, if any */
	pthread_mutex_unlock(&_sq_registry.lock);
}

/* An internal reference on a registered object, unless its last one is
 * already gone (it is being destroyed). Registry lock held. */
static bool
_sq_retain_if_alive(struct sq_object_s *o)
{
	if (_sq_object_is_immortal(o))
		return true;
	int32_t ref = __atomic_load_n(&o->ref, __ATOMIC_RELAXED);
	while (ref > 0) {
		/* Relaxed, as _sq_retain_internal. */
		if (__atomic_compare_exchange_n(&o->ref, &ref, ref + 1, true,
				__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

static bool
_sq_queue_is_static(const struct sq_queue_s *q)
{
	return q == &_sq_main_queue || (q >= &_sq_root_queues[0] &&
			q < &_sq_root_queues[2 * SQ_ROOT_COUNT]);
}

bool
_sq_introspect_queue_label(const struct sq_queue_s *q, char *out,
		size_t size)
{
	bool found = _sq_queue_is_static(q);
	pthread_mutex_lock(&_sq_registry.lock);
	for (uint32_t i = 0; !found && i < _sq_registry.count; i++)
		found = _sq_registry.objects[i] == &q->obj;
	if (found)
		snprintf(out, size, "%s", _sq_object_label(q));
	pthread_mutex_unlock(&_sq_registry.lock);
	return found;
}

/* ---- Queues: facts, looks, counting ---------------------------------- */

static const char *
_sq_queue_kind(const struct sq_queue_s *q)
{
	switch (q->type) {
	case SQ_QUEUE_TYPE_ROOT:
		return "global";
	case SQ_QUEUE_TYPE_MAIN:
		return "main";
	case SQ_QUEUE_TYPE_CONCURRENT:
		return "concurrent";
	default:
		return "serial";
	}
}

/* Whether jobs wait in q (racy looks, no job read). */
static bool
_sq_queue_has_queued(struct sq_queue_s *q)
{
	if (q->type == SQ_QUEUE_TYPE_CONCURRENT && __atomic_load_n(
			&_sq_concurrent(q)->pending_barrier,
					__ATOMIC_RELAXED) != NULL)
		return true;
	return __atomic_load_n(&q->stashed, __ATOMIC_RELAXED) != NULL ||
			__atomic_load_n(&q->head.node.next, __ATOMIC_ACQUIRE) != NULL ||
			__atomic_load_n(&q->tail.p, __ATOMIC_ACQUIRE) !=
			&q->head.node;
}

/* Its tasks running now: the holder's mark, and for a concurrent queue
 * the tasks it forwarded. */
static int32_t
_sq_queue_running(struct sq_queue_s *q)
{
	int32_t n = __atomic_load_n(&q->phase, __ATOMIC_ACQUIRE) ==
			SQ_DRAIN_TASK;
	if (q->type == SQ_QUEUE_TYPE_CONCURRENT)
		n += __atomic_load_n(&_sq_concurrent(q)->running,
				__ATOMIC_RELAXED);
	return n;
}

/* One look at q (registry lock held): how long, in ms, its queued work
 * has waited with no job of it starting (-1: nothing queued). */
static int64_t
_sq_queue_look(struct sq_queue_s *q, uint64_t now)
{
	uint32_t count = __atomic_load_n(&q->pops, __ATOMIC_RELAXED);
	if (!_sq_queue_has_queued(q)) {
		_sq_look_drop(q);
		return -1;
	}
	uint32_t now_ms = (uint32_t)(now / NSEC_PER_MSEC);
	bool made;
	struct sq_look_s *l = _sq_look_get(q, &made);
	if (l == NULL)
		return 0; /* no memory for a record: as if it just came */
	if (made || l->count != count) {
		l->since_ms = now_ms;
		l->count = count;
		l->reported = false;
		return 0;
	}
	return (int64_t)(uint32_t)(now_ms - l->since_ms);
}

/* Whether q cannot run now: it or a queue up its chain is suspended or
 * inactive (registry lock held: the chain is alive). */
static bool
_sq_queue_held_up(struct sq_queue_s *q)
{
	for (int depth = 0; q != NULL && !_sq_queue_is_root(q) && depth < 64;
			depth++) {
		uint64_t s = __atomic_load_n(&q->state, __ATOMIC_RELAXED);
		if (s & (SQ_STATE_SUSPEND_MASK | SQ_STATE_INACTIVE))
			return true;
		if (q->type == SQ_QUEUE_TYPE_MAIN)
			break;
		q = __atomic_load_n(&q->obj.target, __ATOMIC_ACQUIRE);
	}
	return false;
}

/* The process-wide barrier of (c) above; false when the kernel refuses. */
static int _sq_membarrier_state; /* 0 unknown, 1 registered, -1 none */

static bool
_sq_membarrier(void)
{
	if (_sq_membarrier_state == 0)
		_sq_membarrier_state = syscall(SYS_membarrier,
				MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)
				== 0 ? 1 : -1;
	if (_sq_membarrier_state < 0)
		return false;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)
			== 0)
		return true;
	_sq_membarrier_state = -1;
	return false;
}

/* One count at a time (see the top); also guards _sq_membarrier_state. */
static pthread_mutex_t _sq_inspect_lock = PTHREAD_MUTEX_INITIALIZER;

/* The jobs in q's list, once no pop can happen (see the top). */
static int64_t
_sq_queue_walk(struct sq_queue_s *q, bool *capped)
{
	size_t n = 0;
	struct cds_wfcq_node *node = __atomic_load_n(&q->head.node.next,
			__ATOMIC_ACQUIRE);
	/* Acquire: the submitter's release store of the link (a job being
	 * appended right now shows as the end: its link is still NULL). */
	while (node != NULL && n < SQ_INSPECT_WALK_MAX) {
		n++;
		node = __atomic_load_n(&node->next, __ATOMIC_ACQUIRE);
	}
	*capped = node != NULL;
	/* A job the drainer took as the queue was suspended, first in line
	 * for the next drain (queue.c, _sq_queue_next). */
	if (__atomic_load_n(&q->stashed, __ATOMIC_ACQUIRE) != NULL)
		n++;
	if (q->type == SQ_QUEUE_TYPE_CONCURRENT && __atomic_load_n(
			&_sq_concurrent(q)->pending_barrier,
					__ATOMIC_SEQ_CST) != NULL)
		n++; /* the barrier held back until the running tasks end */
	return (int64_t)n;
}

/* Counts the jobs of each queue in qs (serial, concurrent or main, each
 * held alive by the caller); -1 where it could not in time. */
static void
_sq_queues_count(struct sq_queue_s **qs, size_t n, int64_t *queued,
		bool *capped)
{
	if (n == 0)
		return;
	pthread_mutex_lock(&_sq_inspect_lock);
	bool need_barrier = false;
	for (size_t i = 0; i < n; i++) {
		/* Seq-cst: (a) needs our OR in the word's order before any
		 * later take of ENQUEUED; it also goes before the barrier. */
		uint64_t old = __atomic_fetch_or(&qs[i]->state,
				SQ_STATE_INSPECT, __ATOMIC_SEQ_CST);
		capped[i] = false;
		queued[i] = (old & SQ_STATE_ENQUEUED) ? -2 : 0; /* -2: not yet */
		need_barrier |= queued[i] == -2;
	}
	bool fenced = need_barrier && _sq_membarrier();
	uint64_t deadline = _sq_monotonic_ns() + SQ_INSPECT_WAIT_NS;
	for (size_t i = 0; i < n; i++) {
		struct sq_queue_s *q = qs[i];
		for (unsigned spins = 0; queued[i] == -2; spins++) {
			/* Acquire: pairs with the holder's release of
			 * ENQUEUED, or its release store of the mark: its
			 * pops happen before our walk. */
			if (!(__atomic_load_n(&q->state, __ATOMIC_ACQUIRE) &
					SQ_STATE_ENQUEUED)) {
				queued[i] = 0;
				break;
			}
			uint8_t phase = __atomic_load_n(&q->phase,
					__ATOMIC_ACQUIRE);
			if (phase == SQ_DRAIN_PAUSED ||
					(fenced && phase != SQ_DRAIN_LOOP)) {
				queued[i] = 0;
				break;
			}
			if (_sq_monotonic_ns() > deadline) {
				queued[i] = -1;
				break;
			}
			if (spins < 64)
				_sq_cpu_relax();
			else
				sched_yield();
		}
		if (queued[i] == 0)
			queued[i] = _sq_queue_walk(q, &capped[i]);
	}
	/* Release: our walk happens before the paused drainers' pops. */
	for (size_t i = 0; i < n; i++)
		__atomic_fetch_and(&qs[i]->state, ~SQ_STATE_INSPECT,
				__ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&_sq_inspect_lock);
}

void
_sq_queue_inspect_pause(struct sq_queue_s *q)
{
	_sq_drain_phase(q, SQ_DRAIN_PAUSED);
	/* Acquire: pairs with the snapshot's clear, after its walk. A walk is
	 * short; after a few looks, sleep between them. */
	for (unsigned i = 0; __atomic_load_n(&q->state, __ATOMIC_ACQUIRE) &
			SQ_STATE_INSPECT; i++) {
		if (i < 64) {
			_sq_cpu_relax();
		} else if (i < 128) {
			sched_yield();
		} else {
			struct timespec nap = { 0, 20 * NSEC_PER_USEC };
			nanosleep(&nap, NULL);
		}
	}
	_sq_drain_phase(q, SQ_DRAIN_LOOP);
}

/* The jobs queued on one queue (sq_debug): the pool's count for a global
 * queue, the protocol above for the others. */
static int64_t
_sq_queue_count_one(struct sq_queue_s *q, bool *capped)
{
	if (_sq_queue_is_root(q)) {
		size_t n = _sq_pool_root_queued(q->root_index,
				SQ_INSPECT_WALK_MAX + 1);
		*capped = n > SQ_INSPECT_WALK_MAX;
		return (int64_t)(*capped ? SQ_INSPECT_WALK_MAX : n);
	}
	int64_t queued;
	_sq_queues_count(&q, 1, &queued, capped);
	return queued;
}

bool
_sq_introspect_scan_waits(uint64_t now, uint64_t threshold,
		struct sq_sb_s *report, const struct sq_watch_holder_s *holders,
		size_t nholders)
{
	bool work = false;
	pthread_mutex_lock(&_sq_registry.lock);
	for (uint32_t i = 0; i <= _sq_registry.count; i++) {
		struct sq_queue_s *q;
		if (i == _sq_registry.count)
			q = &_sq_main_queue;
		else if (_sq_registry.objects[i]->vtable->debug ==
				_sq_queue_debug)
			q = (struct sq_queue_s *)_sq_registry.objects[i];
		else
			continue;
		int64_t waited_ms = _sq_queue_look(q, now);
		if (waited_ms < 0 || _sq_queue_held_up(q))
			continue;
		work = true;
		uint64_t waited = (uint64_t)waited_ms * NSEC_PER_MSEC;
		struct sq_look_s *l = _sq_look_find(q);
		if (waited < threshold || l == NULL || l->reported)
			continue;
		l->reported = true;
		_sq_sb_printf(report, "SwiftQueues: watchdog: work queued on "
				"%s queue ", _sq_queue_kind(q));
		_sq_sb_quote(report, _sq_object_label(q));
		_sq_sb_printf(report, " has waited %llu ms with no job of it "
				"starting", (unsigned long long)(waited /
				NSEC_PER_MSEC));
		/* Who holds it: "held by thread 4242 running refresh_cache
		 * for 130 ms". */
		for (size_t k = 0; k < nholders; k++) {
			if (holders[k].queue != q)
				continue;
			char fn[256];
			_sq_symbol_name(holders[k].func, fn, sizeof(fn));
			_sq_sb_printf(report, ", held by thread %d running %s "
					"for %llu ms", (int)holders[k].tid, fn,
					(unsigned long long)(now >
					holders[k].since ? (now -
					holders[k].since) / NSEC_PER_MSEC : 0));
			break;
		}
		_sq_sb_printf(report, "\n");
	}
	pthread_mutex_unlock(&_sq_registry.lock);
	return work;
}

#ifndef SQ_NO_TRACE

/* One queue's or source's description for a trace (registry lock held:
 * targets are alive). */
static void
_sq_trace_meta_queue(struct sq_trace_meta_s *m, struct sq_queue_s *q)
{
	struct sq_queue_s *t = __atomic_load_n(&q->obj.target,
			__ATOMIC_ACQUIRE);
	*m = (struct sq_trace_meta_s){
		.kind = (uint8_t)q->type,
		.key = _sq_trace_queue_key_of(q),
		.target = t != NULL && t != q ? _sq_trace_queue_key_of(t) : 0,
		.width = _sq_queue_is_serial(q) ||
				q->type == SQ_QUEUE_TYPE_MAIN ? 1 : 0,
	};
}

static void
_sq_trace_meta_source(struct sq_trace_meta_s *m, struct sq_source_s *s)
{
	struct sq_queue_s *t = __atomic_load_n(&s->obj.target,
			__ATOMIC_ACQUIRE);
	*m = (struct sq_trace_meta_s){
		.source = true,
		.kind = (uint8_t)s->type->kind,
		.key = (uintptr_t)s,
		.target = t != NULL ? _sq_trace_queue_key_of(t) : 0,
		.handle = s->handle,
	};
	sq_spinlock_lock(&s->handler_lock);
	if (s->handlers[0] != NULL)
		m->handler = (uintptr_t)s->handlers[0]->func;
	sq_spinlock_unlock(&s->handler_lock);
	if (s->type->kind == SQ_SOURCE_TIMER) {
		sq_spinlock_lock(&s->timer_lock);
		m->interval = s->timer_interval;
		m->leeway = s->timer_leeway;
		sq_spinlock_unlock(&s->timer_lock);
	}
}

size_t
_sq_introspect_trace_meta(struct sq_trace_meta_s **out)
{
	pthread_mutex_lock(&_sq_registry.lock);
	size_t cap = _sq_registry.count + 1 + SQ_ROOT_COUNT, n = 0;
	struct sq_trace_meta_s *m = malloc(cap * sizeof(*m));
	if (m == NULL) {
		pthread_mutex_unlock(&_sq_registry.lock);
		*out = NULL;
		return 0;
	}
	_sq_trace_meta_queue(&m[n++], &_sq_main_queue);
	for (int i = 0; i < SQ_ROOT_COUNT; i++)
		_sq_trace_meta_queue(&m[n++], &_sq_root_queues[i]);
	for (uint32_t i = 0; i < _sq_registry.count; i++) {
		struct sq_object_s *o = _sq_registry.objects[i];
		if (o->vtable->debug == _sq_queue_debug)
			_sq_trace_meta_queue(&m[n++], (struct sq_queue_s *)o);
		else if (o->vtable->debug == _sq_source_debug)
			_sq_trace_meta_source(&m[n++], (struct sq_source_s *)o);
	}
	pthread_mutex_unlock(&_sq_registry.lock);
	*out = m;
	return n;
}

void
_sq_introspect_trace_gone(struct sq_object_s *o)
{
	struct sq_trace_meta_s m;
	if (o->vtable->debug == _sq_queue_debug)
		_sq_trace_meta_queue(&m, (struct sq_queue_s *)o);
	else if (o->vtable->debug == _sq_source_debug)
		_sq_trace_meta_source(&m, (struct sq_source_s *)o);
	else
		return;
	_sq_trace_meta_record(&m);
}
#endif /* SQ_NO_TRACE */

/* ---- Descriptions -------------------------------------------------------- */

/* The label of the queue an object targets, copied under the registry's
 * lock (see the top). */
static void
_sq_target_label(struct sq_object_s *o, char *out, size_t size)
{
	pthread_mutex_lock(&_sq_registry.lock);
	struct sq_queue_s *t = __atomic_load_n(&o->target, __ATOMIC_ACQUIRE);
	snprintf(out, size, "%s", t ? _sq_object_label(t) : "");
	pthread_mutex_unlock(&_sq_registry.lock);
}

size_t
_sq_queue_debug(struct sq_object_s *o, char *buf, size_t size)
{
	struct sq_queue_s *q = (struct sq_queue_s *)o;
	struct sq_sb_s sb = { .buf = buf, .size = size, .fixed = true };
	bool capped;
	int64_t queued = _sq_queue_count_one(q, &capped);
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_RELAXED) &
			~SQ_STATE_INSPECT;
	_sq_sb_printf(&sb, "label = ");
	_sq_sb_quote(&sb, _sq_object_label(q));
	_sq_sb_printf(&sb, ", kind = %s", _sq_queue_kind(q));
	if (q->type == SQ_QUEUE_TYPE_SERIAL ||
			q->type == SQ_QUEUE_TYPE_CONCURRENT) {
		char target[256];
		_sq_target_label(o, target, sizeof(target));
		_sq_sb_printf(&sb, ", target = ");
		_sq_sb_quote(&sb, target);
	}
	if (!_sq_queue_is_root(q))
		_sq_sb_printf(&sb, ", state = 0x%016llx, suspended = %u, "
				"inactive = %d", (unsigned long long)s,
				(unsigned)((s & SQ_STATE_SUSPEND_MASK) >> 32),
				(s & SQ_STATE_INACTIVE) != 0);
	if (queued < 0)
		_sq_sb_printf(&sb, ", queued = unknown");
	else
		_sq_sb_printf(&sb, ", queued = %lld%s", (long long)queued,
				capped ? " or more" : "");
	if (!_sq_queue_is_root(q))
		_sq_sb_printf(&sb, ", running = %d", _sq_queue_running(q));
	return sb.len;
}

static const char *
_sq_source_type_name(const struct sq_source_s *s)
{
	return s->type->name;
}

size_t
_sq_source_debug(struct sq_object_s *o, char *buf, size_t size)
{
	struct sq_source_s *s = (struct sq_source_s *)o;
	struct sq_sb_s sb = { .buf = buf, .size = size, .fixed = true };
	uint64_t st = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
	char target[256];
	_sq_target_label(o, target, sizeof(target));
	_sq_sb_printf(&sb, "type = %s, handle = %#lx, mask = %#lx, target = ",
			_sq_source_type_name(s), (unsigned long)s->handle,
			(unsigned long)s->mask);
	_sq_sb_quote(&sb, target);
	_sq_sb_printf(&sb, ", suspended = %u, inactive = %d, cancelled = %d, "
			"registered = %d, pending = %lu",
			(unsigned)((st & SQ_SRC_SUSPEND_MASK) >> 32),
			(st & SQ_SRC_INACTIVE) != 0,
			(st & SQ_SRC_CANCELLED) != 0,
			(st & SQ_SRC_REGISTERED) != 0,
			(unsigned long)__atomic_load_n(&s->pending,
				__ATOMIC_RELAXED));
	if (s->type->kind == SQ_SOURCE_TIMER) {
		sq_spinlock_lock(&s->timer_lock);
		uint64_t start = s->timer_start, interval = s->timer_interval,
				leeway = s->timer_leeway;
		sq_spinlock_unlock(&s->timer_lock);
		_sq_sb_printf(&sb, ", timer = { start = ");
		if (start == SQ_TIME_FOREVER)
			_sq_sb_printf(&sb, "forever");
		else
			_sq_sb_printf(&sb, "%llu", (unsigned long long)start);
		_sq_sb_printf(&sb, ", interval = %llu ns, leeway = %llu ns }",
				(unsigned long long)interval,
				(unsigned long long)leeway);
	}
	return sb.len;
}

size_t
_sq_io_debug(struct sq_object_s *o, char *buf, size_t size)
{
	struct sq_sb_s sb = { .buf = buf, .size = size, .fixed = true };
	struct sq_io_facts_s f;
	_sq_io_facts(o, &f);
	_sq_sb_printf(&sb, "type = %s, fd = %d", f.type, f.fd);
	if (f.path) {
		_sq_sb_printf(&sb, ", path = ");
		_sq_sb_quote(&sb, f.path);
	}
	_sq_sb_printf(&sb, ", queue = ");
	_sq_sb_quote(&sb, _sq_object_label(f.queue));
	_sq_sb_printf(&sb, ", closed = %d, calls = %llu", f.closed,
			(unsigned long long)f.calls);
	return sb.len;
}

/* "<kind>[<address>] = { xref = .., ref = .., <the kind's part> }" */
static void
_sq_describe(struct sq_sb_s *sb, struct sq_object_s *o)
{
	_sq_sb_printf(sb, "%s[%p] = { ", o->vtable->kind, (void *)o);
	if (_sq_object_is_immortal(o))
		_sq_sb_printf(sb, "xref = immortal, ref = immortal");
	else
		_sq_sb_printf(sb, "xref = %d, ref = %d",
				__atomic_load_n(&o->xref, __ATOMIC_RELAXED),
				__atomic_load_n(&o->ref, __ATOMIC_RELAXED));
	if (o->vtable->debug) {
		_sq_sb_printf(sb, ", ");
		_sq_sb_hook(sb, o);
	}
	_sq_sb_printf(sb, " }");
}

size_t
sq_object_describe(sq_object_t object, char *buf, size_t size)
{
	struct sq_sb_s sb = { .buf = size ? buf : NULL, .size = buf ? size : 0,
			.fixed = true };
	if (sb.size > 0)
		sb.buf[0] = '\0';
	if (object == NULL) {
		_sq_sb_printf(&sb, "NULL");
		return sb.len;
	}
	_sq_object_validate("sq_object_describe", object);
	_sq_describe(&sb, object);
	return sb.len;
}

/* ---- sq_debug's log (SQ_LOG) ------------------------------------------- */

enum { SQ_LOG_STDERR, SQ_LOG_FILE, SQ_LOG_SYSLOG, SQ_LOG_OFF };

static struct {
	sq_once_t once;
	int mode;
	int fd;
} _sq_log;

static void
_sq_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static void
_sq_log_init(void *unused)
{
	const char *e = getenv("SQ_LOG");
	_sq_log.mode = SQ_LOG_STDERR;
	_sq_log.fd = STDERR_FILENO;
	if (e == NULL)
		return;
	if (strcmp(e, "NO") == 0) {
		_sq_log.mode = SQ_LOG_OFF;
	} else if (strcmp(e, "syslog") == 0) {
		_sq_log.mode = SQ_LOG_SYSLOG;
	} else if (strcmp(e, "file") == 0) {
		char path[64];
		snprintf(path, sizeof(path), "/var/tmp/swiftqueues.%d.log",
				(int)getpid());
		int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW |
				O_CLOEXEC, 0666);
		if (fd < 0)
			return; /* stderr, then */
		_sq_log.mode = SQ_LOG_FILE;
		_sq_log.fd = fd;
		struct timeval tv;
		gettimeofday(&tv, NULL);
		char line[256];
		int n = snprintf(line, sizeof(line), "=== log file opened for "
				"%s[%d] at %ld.%06ld ===\n",
				program_invocation_short_name, (int)getpid(),
				(long)tv.tv_sec, (long)tv.tv_usec);
		if (n > 0)
			_sq_write_all(fd, line, (size_t)n < sizeof(line) ?
					(size_t)n : sizeof(line) - 1);
	}
}

void
sq_debugv(sq_object_t object, const char *message, va_list ap)
{
	sq_once_f(&_sq_log.once, NULL, _sq_log_init);
	if (_sq_log.mode == SQ_LOG_OFF)
		return;
	char buf[2048];
	/* One byte kept for the newline. */
	struct sq_sb_s sb = { .buf = buf, .size = sizeof(buf) - 1,
			.fixed = true };
	if (object != NULL) {
		_sq_object_validate("sq_debug", object);
		_sq_describe(&sb, object);
		_sq_sb_printf(&sb, ": ");
	} else {
		_sq_sb_printf(&sb, "NULL: ");
	}
	_sq_sb_vprintf(&sb, message, ap);
	size_t len = sb.len < sizeof(buf) - 2 ? sb.len : sizeof(buf) - 2;
	if (_sq_log.mode == SQ_LOG_SYSLOG) {
		buf[len] = '\0';
		syslog(LOG_NOTICE, "%s", buf);
		return;
	}
	buf[len++] = '\n';
	_sq_write_all(_sq_log.fd, buf, len);
}

void
sq_debug(sq_object_t object, const char *message, ...)
{
	va_list ap;
	va_start(ap, message);
	sq_debugv(object, message, ap);
	va_end(ap);
}

/* ---- Snapshots: collection --------------------------------------------- */

struct sq_snapshot_chunk_s {
	struct sq_snapshot_chunk_s *next;
	size_t used, cap;
	char data[];
};

struct sq_snapshot_build_s {
	sq_snapshot_t pub; /* first: sq_snapshot_free gets this back */
	struct sq_snapshot_chunk_s *chunks;
	bool failed;
	sq_snapshot_queue_t *queues;
	sq_snapshot_source_t *sources;
	sq_snapshot_channel_t *channels;
	sq_snapshot_thread_t *threads;
	size_t queue_cap, source_cap, channel_cap, thread_cap;
};

const char *
_sq_snapshot_strdup(struct sq_snapshot_build_s *b, const char *s)
{
	if (s == NULL)
		return NULL;
	size_t len = strlen(s) + 1;
	struct sq_snapshot_chunk_s *c = b->chunks;
	if (c == NULL || c->cap - c->used < len) {
		size_t cap = len > 4096 ? len : 4096;
		c = malloc(sizeof(*c) + cap);
		if (c == NULL) {
			b->failed = true;
			return "";
		}
		c->used = 0;
		c->cap = cap;
		c->next = b->chunks;
		b->chunks = c;
	}
	char *out = memcpy(c->data + c->used, s, len);
	c->used += len;
	return out;
}

/* A zeroed new entry at the end of a growing array; NULL when memory ran
 * out (the snapshot then fails). */
static void *
_sq_snapshot_append(struct sq_snapshot_build_s *b, void **array,
		size_t *count, size_t *cap, size_t size)
{
	if (b->failed)
		return NULL;
	if (*count == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void *grown = realloc(*array, ncap * size);
		if (grown == NULL) {
			b->failed = true;
			return NULL;
		}
		*array = grown;
		*cap = ncap;
	}
	void *e = (char *)*array + *count * size;
	memset(e, 0, size);
	(*count)++;
	return e;
}

sq_snapshot_thread_t *
_sq_snapshot_add_thread(struct sq_snapshot_build_s *b)
{
	return _sq_snapshot_append(b, (void **)&b->threads,
			&b->pub.thread_count, &b->thread_cap,
			sizeof(sq_snapshot_thread_t));
}

static sq_snapshot_queue_t *
_sq_snapshot_add_queue(struct sq_snapshot_build_s *b)
{
	return _sq_snapshot_append(b, (void **)&b->queues,
			&b->pub.queue_count, &b->queue_cap,
			sizeof(sq_snapshot_queue_t));
}

/* Fills what is read without counting (registry lock held). */
static void
_sq_snapshot_fill_queue(struct sq_snapshot_build_s *b, sq_snapshot_queue_t *e,
		struct sq_queue_s *q, uint64_t now)
{
	e->label = _sq_snapshot_strdup(b, _sq_object_label(q));
	e->address = (uintptr_t)q;
	e->kind = _sq_queue_kind(q);
	if (_sq_queue_is_root(q)) {
		e->running = -1;
		e->waiting_ms = -1;
		return;
	}
	if (q->type != SQ_QUEUE_TYPE_MAIN) {
		struct sq_queue_s *t = __atomic_load_n(&q->obj.target,
				__ATOMIC_ACQUIRE);
		e->target = _sq_snapshot_strdup(b, _sq_object_label(t));
	}
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_RELAXED);
	e->suspend_count = (uint32_t)((s & SQ_STATE_SUSPEND_MASK) >> 32);
	e->inactive = (s & SQ_STATE_INACTIVE) != 0;
	e->running = _sq_queue_running(q);
	e->waiting_ms = _sq_queue_look(q, now);
}

static void
_sq_snapshot_fill_source(struct sq_snapshot_build_s *b,
		struct sq_source_s *s)
{
	sq_snapshot_source_t *e = _sq_snapshot_append(b, (void **)&b->sources,
			&b->pub.source_count, &b->source_cap, sizeof(*e));
	if (e == NULL)
		return;
	uint64_t st = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
	struct sq_queue_s *t = __atomic_load_n(&s->obj.target,
			__ATOMIC_ACQUIRE);
	e->address = (uintptr_t)s;
	e->type = _sq_source_type_name(s);
	e->handle = s->handle;
	e->mask = s->mask;
	e->target = _sq_snapshot_strdup(b, t ? _sq_object_label(t) : "");
	e->suspend_count = (uint32_t)((st & SQ_SRC_SUSPEND_MASK) >> 32);
	e->inactive = (st & SQ_SRC_INACTIVE) != 0;
	e->cancelled = (st & SQ_SRC_CANCELLED) != 0;
	e->registered = (st & SQ_SRC_REGISTERED) != 0;
	e->snapshot_signal = _sq_watchdog_is_snapshot_source(s);
	e->pending = __atomic_load_n(&s->pending, __ATOMIC_RELAXED);
}

static void
_sq_snapshot_fill_channel(struct sq_snapshot_build_s *b,
		struct sq_object_s *o)
{
	sq_snapshot_channel_t *e = _sq_snapshot_append(b,
			(void **)&b->channels, &b->pub.channel_count,
			&b->channel_cap, sizeof(*e));
	if (e == NULL)
		return;
	struct sq_io_facts_s f;
	_sq_io_facts(o, &f);
	e->address = (uintptr_t)o;
	e->type = f.type;
	e->fd = f.fd;
	e->path = _sq_snapshot_strdup(b, f.path);
	e->queue = _sq_snapshot_strdup(b, _sq_object_label(f.queue));
	e->closed = f.closed;
	e->calls = f.calls;
}

/* A queue to count after the registry's lock is let go. */
struct sq_snapshot_pending_s {
	uint32_t serial;
	struct sq_queue_s *q;
	sq_snapshot_queue_t e;
};

static int
_sq_snapshot_pending_cmp(const void *a, const void *b)
{
	const struct sq_snapshot_pending_s *x = a, *y = b;
	return x->serial < y->serial ? -1 : x->serial > y->serial;
}

void
sq_snapshot_free(sq_snapshot_t *snapshot)
{
	if (snapshot == NULL)
		return;
	struct sq_snapshot_build_s *b = (struct sq_snapshot_build_s *)snapshot;
	while (b->chunks) {
		struct sq_snapshot_chunk_s *next = b->chunks->next;
		free(b->chunks);
		b->chunks = next;
	}
	free(b->queues);
	free(b->sources);
	free(b->channels);
	free(b->threads);
	free(b);
}

sq_snapshot_t *
sq_snapshot_create(void)
{
	struct sq_snapshot_build_s *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	sq_pool_stats(&b->pub.pool); /* starts the pool if need be */
	uint64_t now = _sq_coarse_ns();
	b->pub.pid = (int32_t)getpid();
	b->pub.time_ns = _sq_monotonic_ns();
	b->pub.watchdog_ms = _sq_watchdog_ms();
	b->pub.local_jobs = _sq_pool_local_queued();

	/* The main queue first, then the global queues. */
	sq_snapshot_queue_t *main_e = _sq_snapshot_add_queue(b);
	for (int i = 0; i < SQ_ROOT_COUNT; i++) {
		sq_snapshot_queue_t *e = _sq_snapshot_add_queue(b);
		if (e == NULL)
			break;
		struct sq_queue_s *root = &_sq_root_queues[i];
		size_t n = _sq_pool_root_queued(i, SQ_INSPECT_WALK_MAX + 1);
		_sq_snapshot_fill_queue(b, e, root, now);
		e->queued_capped = n > SQ_INSPECT_WALK_MAX;
		e->queued = (int64_t)(e->queued_capped ? SQ_INSPECT_WALK_MAX
				: n);
	}

	struct sq_snapshot_pending_s *pending = NULL;
	size_t npending = 0;
	pthread_mutex_lock(&_sq_registry.lock);
	pending = malloc((_sq_registry.count + 1) * sizeof(*pending));
	if (pending == NULL)
		b->failed = true;
	for (uint32_t i = 0; pending && i <= _sq_registry.count; i++) {
		struct sq_object_s *o = i < _sq_registry.count ?
				_sq_registry.objects[i] : &_sq_main_queue.obj;
		if (o->vtable->debug == _sq_queue_debug) {
			struct sq_queue_s *q = (struct sq_queue_s *)o;
			if (!_sq_retain_if_alive(o))
				continue;
			struct sq_snapshot_pending_s *p = &pending[npending++];
			memset(&p->e, 0, sizeof(p->e));
			/* The main queue sorts first. */
			p->serial = q == &_sq_main_queue ? 0 : q->serial_num;
			p->q = q;
			_sq_snapshot_fill_queue(b, &p->e, q, now);
		} else if (o->vtable->debug == _sq_source_debug) {
			_sq_snapshot_fill_source(b, (struct sq_source_s *)o);
		} else if (o->vtable->debug == _sq_io_debug) {
			_sq_snapshot_fill_channel(b, o);
		}
	}
	pthread_mutex_unlock(&_sq_registry.lock);

	if (npending > 0) {
		qsort(pending, npending, sizeof(*pending),
				_sq_snapshot_pending_cmp);
		struct sq_queue_s **qs = malloc(npending * sizeof(*qs));
		int64_t *queued = malloc(npending * sizeof(*queued));
		bool *capped = malloc(npending * sizeof(*capped));
		if (qs && queued && capped) {
			for (size_t i = 0; i < npending; i++)
				qs[i] = pending[i].q;
			_sq_queues_count(qs, npending, queued, capped);
			for (size_t i = 0; i < npending; i++) {
				pending[i].e.queued = queued[i];
				pending[i].e.queued_capped = capped[i];
			}
		} else {
			b->failed = true;
		}
		free(qs);
		free(queued);
		free(capped);
		/* The main queue, then the others by creation. */
		if (main_e != NULL)
			*main_e = pending[0].e;
		for (size_t i = 1; i < npending; i++) {
			sq_snapshot_queue_t *e = _sq_snapshot_add_queue(b);
			if (e != NULL)
				*e = pending[i].e;
		}
		for (size_t i = 0; i < npending; i++)
			_sq_release_internal(pending[i].q);
	}
	free(pending);

	_sq_watchdog_add_threads(b, now);

	b->pub.queues = b->queues;
	b->pub.sources = b->sources;
	b->pub.channels = b->channels;
	b->pub.threads = b->threads;
	if (b->failed) {
		sq_snapshot_free(&b->pub);
		errno = ENOMEM;
		return NULL;
	}
	return &b->pub;
}

/* ---- Snapshots: text and JSON ------------------------------------------- */

static void
_sq_render_text(struct sq_sb_s *sb, const sq_snapshot_t *s)
{
	_sq_sb_printf(sb, "SwiftQueues: snapshot of process %d at %llu.%03llu "
			"s (monotonic), watchdog ", (int)s->pid,
			(unsigned long long)(s->time_ns / NSEC_PER_SEC),
			(unsigned long long)(s->time_ns % NSEC_PER_SEC /
			NSEC_PER_MSEC));
	if (s->watchdog_ms)
		_sq_sb_printf(sb, "%u ms\n", s->watchdog_ms);
	else
		_sq_sb_printf(sb, "off\n");
	const sq_pool_stats_t *p = &s->pool;
	_sq_sb_printf(sb, "  pool: width %u, live %u, idle %u, searching %u, "
			"thread cap %u, jobs started %llu, wake-ups %llu, "
			"threads started %llu, compensation %llu, safety-net "
			"firings %llu, jobs in worker rings %llu\n", p->width,
			p->live, p->idle, p->searching, p->max_threads,
			(unsigned long long)p->jobs,
			(unsigned long long)p->wakeups,
			(unsigned long long)p->spawned,
			(unsigned long long)p->compensated,
			(unsigned long long)p->net_firings,
			(unsigned long long)s->local_jobs);
	for (size_t i = 0; i < s->queue_count; i++) {
		const sq_snapshot_queue_t *q = &s->queues[i];
		_sq_sb_printf(sb, "  queue ");
		_sq_sb_quote(sb, q->label);
		_sq_sb_printf(sb, " (%s", q->kind);
		if (q->target) {
			_sq_sb_printf(sb, ", target ");
			_sq_sb_quote(sb, q->target);
		}
		_sq_sb_printf(sb, "):");
		if (q->suspend_count)
			_sq_sb_printf(sb, " suspended %u,", q->suspend_count);
		if (q->inactive)
			_sq_sb_printf(sb, " inactive,");
		if (q->queued < 0)
			_sq_sb_printf(sb, " queued unknown");
		else
			_sq_sb_printf(sb, " queued %lld%s",
					(long long)q->queued,
					q->queued_capped ? " or more" : "");
		if (q->running >= 0)
			_sq_sb_printf(sb, ", running %d", q->running);
		if (q->waiting_ms >= 0)
			_sq_sb_printf(sb, ", waiting %lld ms",
					(long long)q->waiting_ms);
		_sq_sb_printf(sb, "\n");
	}
	for (size_t i = 0; i < s->source_count; i++) {
		const sq_snapshot_source_t *e = &s->sources[i];
		_sq_sb_printf(sb, "  source %#lx (%s, handle %lu, mask %#lx, "
				"target ", (unsigned long)e->address, e->type,
				(unsigned long)e->handle,
				(unsigned long)e->mask);
		_sq_sb_quote(sb, e->target);
		_sq_sb_printf(sb, "%s):", e->snapshot_signal ?
				", the snapshot signal" : "");
		if (e->cancelled)
			_sq_sb_printf(sb, " cancelled,");
		if (e->inactive)
			_sq_sb_printf(sb, " inactive,");
		if (e->suspend_count)
			_sq_sb_printf(sb, " suspended %u,", e->suspend_count);
		_sq_sb_printf(sb, " %s, pending %lu\n", e->registered ?
				"registered" : "not registered",
				(unsigned long)e->pending);
	}
	for (size_t i = 0; i < s->channel_count; i++) {
		const sq_snapshot_channel_t *e = &s->channels[i];
		_sq_sb_printf(sb, "  channel %#lx (%s, fd %d, ",
				(unsigned long)e->address, e->type, e->fd);
		if (e->path) {
			_sq_sb_printf(sb, "path ");
			_sq_sb_quote(sb, e->path);
			_sq_sb_printf(sb, ", ");
		}
		_sq_sb_printf(sb, "queue ");
		_sq_sb_quote(sb, e->queue);
		_sq_sb_printf(sb, "): %s, calls %llu\n", e->closed ? "closed"
				: "open", (unsigned long long)e->calls);
	}
	for (size_t i = 0; i < s->thread_count; i++) {
		const sq_snapshot_thread_t *t = &s->threads[i];
		_sq_sb_printf(sb, "  thread %d ", (int)t->tid);
		_sq_sb_quote(sb, t->name);
		/* "running 'com.example.requests': handle_request" */
		if (t->busy && (t->task_queue || t->function)) {
			_sq_sb_printf(sb, ": running ");
			if (t->task_queue) {
				_sq_sb_quote(sb, t->task_queue);
				_sq_sb_printf(sb, ": ");
			}
			_sq_sb_printf(sb, "%s", t->function ? t->function
					: "a task");
		} else {
			_sq_sb_printf(sb, ": %s", t->busy ? "running a task" :
					t->waiting_for ? "not in a task" : "idle");
		}
		if (t->queue) {
			_sq_sb_printf(sb, ", holding queue ");
			_sq_sb_quote(sb, t->queue);
			_sq_sb_printf(sb, " for %lld ms",
					(long long)t->running_ms);
		}
		if (t->waiting_for) {
			_sq_sb_printf(sb, ", in sq_sync waiting for queue ");
			_sq_sb_quote(sb, t->waiting_for);
			_sq_sb_printf(sb, " for %lld ms",
					(long long)t->waiting_ms);
		}
		if (t->holder_tid != 0) {
			_sq_sb_printf(sb, ", held by thread %d",
					(int)t->holder_tid);
			if (t->holder_queue || t->holder_function) {
				_sq_sb_printf(sb, " running ");
				if (t->holder_queue) {
					_sq_sb_quote(sb, t->holder_queue);
					_sq_sb_printf(sb, ": ");
				}
				_sq_sb_printf(sb, "%s", t->holder_function ?
						t->holder_function : "a task");
			}
		}
		_sq_sb_printf(sb, "\n");
	}
	_sq_sb_printf(sb, "SwiftQueues: end of snapshot\n");
}

static void
_sq_json_int(struct sq_sb_s *sb, const char *key, long long v, bool null_if_neg)
{
	if (null_if_neg && v < 0)
		_sq_sb_printf(sb, "\"%s\":null", key);
	else
		_sq_sb_printf(sb, "\"%s\":%lld", key, v);
}

static void
_sq_render_json(struct sq_sb_s *sb, const sq_snapshot_t *s)
{
	const sq_pool_stats_t *p = &s->pool;
	_sq_sb_printf(sb, "{\"pid\":%d,\"time_ns\":%llu,\"watchdog_ms\":%u,"
			"\"pool\":{\"width\":%u,\"max_threads\":%u,\"live\":%u,"
			"\"idle\":%u,\"searching\":%u,\"jobs\":%llu,"
			"\"wakeups\":%llu,\"spawned\":%llu,\"compensated\":%llu,"
			"\"net_firings\":%llu,\"local_jobs\":%llu},"
			"\"queues\":[", (int)s->pid,
			(unsigned long long)s->time_ns, s->watchdog_ms,
			p->width, p->max_threads, p->live, p->idle,
			p->searching, (unsigned long long)p->jobs,
			(unsigned long long)p->wakeups,
			(unsigned long long)p->spawned,
			(unsigned long long)p->compensated,
			(unsigned long long)p->net_firings,
			(unsigned long long)s->local_jobs);
	for (size_t i = 0; i < s->queue_count; i++) {
		const sq_snapshot_queue_t *q = &s->queues[i];
		_sq_sb_printf(sb, "%s{\"label\":", i ? "," : "");
		_sq_sb_json_string(sb, q->label);
		_sq_sb_printf(sb, ",\"address\":\"%#lx\",\"kind\":\"%s\","
				"\"target\":", (unsigned long)q->address,
				q->kind);
		_sq_sb_json_string(sb, q->target);
		_sq_sb_printf(sb, ",\"suspend_count\":%u,\"inactive\":%s,",
				q->suspend_count, q->inactive ? "true"
				: "false");
		_sq_json_int(sb, "queued", q->queued, true);
		_sq_sb_printf(sb, ",\"queued_capped\":%s,", q->queued_capped ?
				"true" : "false");
		_sq_json_int(sb, "running", q->running, true);
		_sq_sb_printf(sb, ",");
		_sq_json_int(sb, "waiting_ms", q->waiting_ms, true);
		_sq_sb_printf(sb, "}");
	}
	_sq_sb_printf(sb, "],\"sources\":[");
	for (size_t i = 0; i < s->source_count; i++) {
		const sq_snapshot_source_t *e = &s->sources[i];
		_sq_sb_printf(sb, "%s{\"address\":\"%#lx\",\"type\":\"%s\","
				"\"handle\":%lu,\"mask\":%lu,\"target\":",
				i ? "," : "", (unsigned long)e->address,
				e->type, (unsigned long)e->handle,
				(unsigned long)e->mask);
		_sq_sb_json_string(sb, e->target);
		_sq_sb_printf(sb, ",\"suspend_count\":%u,\"inactive\":%s,"
				"\"cancelled\":%s,\"registered\":%s,"
				"\"snapshot_signal\":%s,\"pending\":%lu}",
				e->suspend_count, e->inactive ? "true" : "false",
				e->cancelled ? "true" : "false",
				e->registered ? "true" : "false",
				e->snapshot_signal ? "true" : "false",
				(unsigned long)e->pending);
	}
	_sq_sb_printf(sb, "],\"channels\":[");
	for (size_t i = 0; i < s->channel_count; i++) {
		const sq_snapshot_channel_t *e = &s->channels[i];
		_sq_sb_printf(sb, "%s{\"address\":\"%#lx\",\"type\":\"%s\","
				"\"fd\":%d,\"path\":", i ? "," : "",
				(unsigned long)e->address, e->type, e->fd);
		_sq_sb_json_string(sb, e->path);
		_sq_sb_printf(sb, ",\"queue\":");
		_sq_sb_json_string(sb, e->queue);
		_sq_sb_printf(sb, ",\"closed\":%s,\"calls\":%llu}",
				e->closed ? "true" : "false",
				(unsigned long long)e->calls);
	}
	_sq_sb_printf(sb, "],\"threads\":[");
	for (size_t i = 0; i < s->thread_count; i++) {
		const sq_snapshot_thread_t *t = &s->threads[i];
		_sq_sb_printf(sb, "%s{\"tid\":%d,\"name\":", i ? "," : "",
				(int)t->tid);
		_sq_sb_json_string(sb, t->name);
		_sq_sb_printf(sb, ",\"busy\":%s,\"queue\":", t->busy ? "true"
				: "false");
		_sq_sb_json_string(sb, t->queue);
		_sq_sb_printf(sb, ",");
		_sq_json_int(sb, "running_ms", t->running_ms, true);
		_sq_sb_printf(sb, ",\"waiting_for\":");
		_sq_sb_json_string(sb, t->waiting_for);
		_sq_sb_printf(sb, ",");
		_sq_json_int(sb, "waiting_ms", t->waiting_ms, true);
		_sq_sb_printf(sb, ",\"task_queue\":");
		_sq_sb_json_string(sb, t->task_queue);
		_sq_sb_printf(sb, ",\"function\":");
		_sq_sb_json_string(sb, t->function);
		_sq_sb_printf(sb, ",");
		_sq_json_int(sb, "holder_tid", t->holder_tid ? t->holder_tid
				: -1, true);
		_sq_sb_printf(sb, ",\"holder_queue\":");
		_sq_sb_json_string(sb, t->holder_queue);
		_sq_sb_printf(sb, ",\"holder_function\":");
		_sq_sb_json_string(sb, t->holder_function);
		_sq_sb_printf(sb, "}");
	}
	_sq_sb_printf(sb, "]}\n");
}

static char *
_sq_snapshot_render(bool json)
{
	sq_snapshot_t *s = sq_snapshot_create();
	if (s == NULL)
		return NULL;
	struct sq_sb_s sb = { 0 };
	if (json)
		_sq_render_json(&sb, s);
	else
		_sq_render_text(&sb, s);
	sq_snapshot_free(s);
	if (sb.failed || sb.buf == NULL) {
		free(sb.buf);
		errno = ENOMEM;
		return NULL;
	}
	return sb.buf;
}

char *
sq_snapshot_text(void)
{
	return _sq_snapshot_render(false);
}

char *
sq_snapshot_json(void)
{
	return _sq_snapshot_render(true);
}

void
_sq_snapshot_write(int fd)
{
	char *text = sq_snapshot_text();
	if (text == NULL) {
		static const char line[] = "SwiftQueues: snapshot: out of "
				"memory\n";
		_sq_write_all(fd, line, sizeof(line) - 1);
		return;
	}
	_sq_write_all(fd, text, strlen(text));
	free(text);
}

/* ---- fork ------------------------------------------------------------------ */

/* fork() child (fork.c): the registry stays (queues made before fork()
 * are usable in the child); its locks may have been held by a thread that
 * is not here, and so may a count that had set INSPECT, which nobody would
 * clear (single-threaded now: plain accesses). */
void
_sq_introspect_atfork_child(void)
{
	pthread_mutex_init(&_sq_registry.lock, NULL);
	pthread_mutex_init(&_sq_inspect_lock, NULL);
	_sq_membarrier_state = 0;
	_sq_main_queue.state &= ~SQ_STATE_INSPECT;
	for (uint32_t i = 0; i < _sq_registry.count; i++) {
		struct sq_object_s *o = _sq_registry.objects[i];
		if (o->vtable->debug == _sq_queue_debug)
			((struct sq_queue_s *)o)->state &= ~SQ_STATE_INSPECT;
	}
}
