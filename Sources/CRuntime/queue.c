/*
 * SwiftQueues — serial, concurrent, global and main queues: creation,
 * the state machine, submission, draining, sync, labels and the current
 * queue. The worker pool that runs root-queue jobs is pool.c; sq_apply_f
 * is apply.c; the main thread's side is main.c; continuations and their
 * per-thread cache are continuation.c; queue-specific data is
 * queue_specific.c.
 *
 * A serial queue is a wfcqueue of jobs plus one state word. The submission
 * that finds the queue empty sets ENQUEUED and pushes the queue itself onto
 * its target (a root queue, or another queue's tasks); whoever runs that job
 * is the queue's only drainer. The drainer runs up to a budget of tasks,
 * then puts the queue back at the end of its target, so one busy queue
 * cannot starve the others. When the queue runs dry the drainer clears
 * ENQUEUED and looks once more: a task that arrived in between is seen
 * either by the submitter (ENQUEUED clear: it wakes the queue) or by the
 * drainer's second look — both sides use sequentially consistent operations
 * so at least one of them sees the other.
 *
 * A concurrent queue drains the same way, but instead of running a task it
 * forwards it to its target and counts it as running; a barrier is held
 * back until nothing runs, then runs on the drainer's thread, alone.
 */
#include "queue_internal.h"
#include "trace_internal.h"

#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQ_DRAIN_BUDGET 64u
#define SQ_CONCURRENT_DRAIN_BUDGET 256u

SQ_TLS struct sq_frame_s *_sq_current_frame;

static void _sq_queue_dispose(struct sq_object_s *object);
static void _sq_queue_suspend(struct sq_object_s *object);
static void _sq_queue_resume(struct sq_object_s *object);
static void _sq_queue_activate(struct sq_object_s *object);
static void _sq_queue_set_target(struct sq_object_s *object,
		struct sq_queue_s *target);
static void _sq_queue_last_external_release(struct sq_object_s *object);

static const struct sq_vtable_s _sq_queue_vtable = {
	.kind = "queue",
	.dispose = _sq_queue_dispose,
	.suspend = _sq_queue_suspend,
	.resume = _sq_queue_resume,
	.activate = _sq_queue_activate,
	.set_target = _sq_queue_set_target,
	.last_external_release = _sq_queue_last_external_release,
	.debug = _sq_queue_debug,
};

/* Global and main queues: immortal, not suspendable, not retargetable. */
static const struct sq_vtable_s _sq_static_queue_vtable = {
	.kind = "queue",
	.debug = _sq_queue_debug,
};

#define SQ_STATIC_QUEUE(t, index, name)                                        \
	{                                                                      \
		.obj = {                                                       \
			.vtable = &_sq_static_queue_vtable,                    \
			.xref = SQ_REF_IMMORTAL,                               \
			.ref = SQ_REF_IMMORTAL,                                \
			.label = (char *)(name),                               \
		},                                                             \
		.job = { .kind = SQ_JOB_QUEUE },                               \
		.type = (t),                                                   \
		.root_index = (index),                                         \
		.qos_root = (index),                                           \
		.override_root = SQ_ROOT_NONE,                                 \
	}

/* The five root queues, then their overcommit twins (same class and run
 * queue; a job queued through one gets a worker of its own). */
struct sq_queue_s _sq_root_queues[2 * SQ_ROOT_COUNT] = {
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_INTERACTIVE,
			"com.swiftqueues.root.user-interactive"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_HIGH,
			"com.swiftqueues.root.high"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_DEFAULT,
			"com.swiftqueues.root.default"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_LOW,
			"com.swiftqueues.root.low"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_BACKGROUND,
			"com.swiftqueues.root.background"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_INTERACTIVE,
			"com.swiftqueues.root.user-interactive.overcommit"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_HIGH,
			"com.swiftqueues.root.high.overcommit"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_DEFAULT,
			"com.swiftqueues.root.default.overcommit"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_LOW,
			"com.swiftqueues.root.low.overcommit"),
	SQ_STATIC_QUEUE(SQ_QUEUE_TYPE_ROOT, SQ_ROOT_BACKGROUND,
			"com.swiftqueues.root.background.overcommit"),
};

/* The main queue has tasks of its own: its wfcqueue starts empty (the
 * tail pointing at the head), set up statically. */
struct sq_queue_s _sq_main_queue = {
	.obj = {
		.vtable = &_sq_static_queue_vtable,
		.xref = SQ_REF_IMMORTAL,
		.ref = SQ_REF_IMMORTAL,
		.label = (char *)"com.swiftqueues.main-thread",
		.target = &_sq_root_queues[SQ_ROOT_DEFAULT],
	},
	.job = { .kind = SQ_JOB_QUEUE },
	.type = SQ_QUEUE_TYPE_MAIN,
	.root_index = SQ_ROOT_DEFAULT,
	.qos_root = SQ_ROOT_NONE,
	.override_root = SQ_ROOT_NONE,
	.tail = { .p = &_sq_main_queue.head.node },
};

struct sq_queue_attr_s {
	bool concurrent;
	bool inactive;
	uint8_t qos_root; /* SQ_ROOT_NONE, or the class's root index */
	int8_t relpri;
};

struct sq_queue_attr_s _sq_queue_attr_concurrent = { true, false,
		SQ_ROOT_NONE, 0 };
struct sq_queue_attr_s _sq_queue_attr_serial_inactive = { false, true,
		SQ_ROOT_NONE, 0 };
struct sq_queue_attr_s _sq_queue_attr_concurrent_inactive = { true, true,
		SQ_ROOT_NONE, 0 };

/* Attributes with a QoS class are constants too, as in libdispatch: one
 * per combination, filled in once on first use. Index: concurrent,
 * inactive, root, -relpri. */
#define SQ_RELPRI_COUNT (1 - SQ_QOS_MIN_RELATIVE_PRIORITY)
static struct sq_queue_attr_s
		_sq_queue_attr_qos[2][2][SQ_ROOT_COUNT][SQ_RELPRI_COUNT];

static sq_once_t _sq_queue_attr_once;

static void
_sq_queue_attr_fill(void *unused)
{
	for (int c = 0; c < 2; c++)
		for (int i = 0; i < 2; i++)
			for (int r = 0; r < SQ_ROOT_COUNT; r++)
				for (int p = 0; p < SQ_RELPRI_COUNT; p++)
					_sq_queue_attr_qos[c][i][r][p] =
						(struct sq_queue_attr_s){
						c != 0, i != 0, (uint8_t)r,
						(int8_t)-p };
}

static sq_queue_attr_t
_sq_queue_attr_get(bool concurrent, bool inactive, int root, int relpri)
{
	if (root == SQ_ROOT_NONE) {
		if (concurrent)
			return inactive ? SQ_QUEUE_CONCURRENT_INACTIVE
					: SQ_QUEUE_CONCURRENT;
		return inactive ? SQ_QUEUE_SERIAL_INACTIVE : SQ_QUEUE_SERIAL;
	}
	sq_once_f(&_sq_queue_attr_once, NULL, _sq_queue_attr_fill);
	return &_sq_queue_attr_qos[concurrent][inactive][root][-relpri];
}

/* ---- QoS classes ------------------------------------------------------ */

const char *const _sq_root_qos_names[SQ_ROOT_COUNT] = {
	"user-interactive", "user-initiated", "default", "utility",
	"background",
};

static const unsigned _sq_root_qos_classes[SQ_ROOT_COUNT] = {
	SQ_QOS_CLASS_USER_INTERACTIVE, SQ_QOS_CLASS_USER_INITIATED,
	SQ_QOS_CLASS_DEFAULT, SQ_QOS_CLASS_UTILITY, SQ_QOS_CLASS_BACKGROUND,
};

int
_sq_qos_root(unsigned qos_class)
{
	for (int i = 0; i < SQ_ROOT_COUNT; i++)
		if (_sq_root_qos_classes[i] == qos_class)
			return i;
	return -1;
}

unsigned
_sq_root_qos(int root)
{
	return root >= 0 && root < SQ_ROOT_COUNT ? _sq_root_qos_classes[root]
			: SQ_QOS_CLASS_UNSPECIFIED;
}

sq_queue_attr_t
sq_queue_attr_make_with_qos_class(sq_queue_attr_t attr,
		sq_qos_class_t qos_class, int relative_priority)
{
	int root = qos_class == SQ_QOS_CLASS_UNSPECIFIED ? SQ_ROOT_NONE
			: _sq_qos_root(qos_class);
	if (root < 0 || relative_priority > 0 ||
			relative_priority < SQ_QOS_MIN_RELATIVE_PRIORITY)
		return NULL;
	if (root == SQ_ROOT_NONE)
		relative_priority = 0;
	return _sq_queue_attr_get(attr && attr->concurrent,
			attr && attr->inactive, root, relative_priority);
}

sq_queue_attr_t
sq_queue_attr_make_with_autorelease_frequency(sq_queue_attr_t attr,
		sq_autorelease_frequency_t frequency)
{
	/* No autorelease pools on Linux: every frequency runs tasks alike,
	 * so the attribute itself serves (an unknown one is ignored). */
	(void)frequency;
	return attr;
}

sq_qos_class_t
sq_queue_get_qos_class(sq_queue_t queue, int *relative_priority_ptr)
{
	_sq_queue_validate("sq_queue_get_qos_class", queue);
	if (relative_priority_ptr != NULL)
		*relative_priority_ptr = queue->qos_root == SQ_ROOT_NONE ? 0
				: queue->qos_relpri;
	return queue->qos_root == SQ_ROOT_NONE ? SQ_QOS_CLASS_UNSPECIFIED
			: _sq_root_qos(queue->qos_root);
}

bool
_sq_object_is_queue(const struct sq_object_s *o)
{
	return o->vtable == &_sq_queue_vtable;
}

/* Where a queue goes when given no target: its class's global queue, or
 * the default one. */
struct sq_queue_s *
_sq_queue_default_target(struct sq_queue_s *q)
{
	if (q->type != SQ_QUEUE_TYPE_ROOT && q->qos_root != SQ_ROOT_NONE)
		return &_sq_root_queues[q->qos_root];
	return &_sq_root_queues[SQ_ROOT_DEFAULT];
}

static uint32_t _sq_queue_serial_counter;

static inline struct sq_cont_s *
_sq_cont_make(struct sq_queue_s *q, void *ctx, sq_function_t func,
		uint32_t flags)
{
	struct sq_cont_s *c = _sq_cont_alloc();
	c->job.kind = SQ_JOB_CONT;
	c->job.flags = flags;
	c->func = func;
	c->ctx = ctx;
	c->queue = q;
	c->data = NULL;
	return c;
}

/* ---- Lookups ----------------------------------------------------------- */

static inline struct sq_queue_s *
_sq_default_root(void)
{
	return &_sq_root_queues[SQ_ROOT_DEFAULT];
}


struct sq_queue_s *
_sq_queue_root_of(struct sq_queue_s *q)
{
	while (!_sq_queue_is_root(q)) {
		if (q->type == SQ_QUEUE_TYPE_MAIN)
			return _sq_default_root();
		q = _sq_queue_target(q);
	}
	return q;
}

void
_sq_queue_validate(const char *call, struct sq_queue_s *q)
{
	_sq_object_validate(call, q);
	if (SQ_UNLIKELY(q->obj.vtable != &_sq_queue_vtable &&
			q->obj.vtable != &_sq_static_queue_vtable))
		_sq_client_crash(call, "object is a %s, not a queue",
				q->obj.vtable->kind);
}

/* ---- Creation and destruction ----------------------------------------- */

sq_queue_attr_t
sq_queue_attr_make_initially_inactive(sq_queue_attr_t attr)
{
	if (attr == NULL)
		return SQ_QUEUE_SERIAL_INACTIVE;
	return _sq_queue_attr_get(attr->concurrent, true, attr->qos_root,
			attr->relpri);
}

sq_queue_t
sq_queue_create(const char *label, sq_queue_attr_t attr)
{
	return sq_queue_create_with_target(label, attr, NULL);
}

/* ---- Labels in read-only memory ------------------------------------------
 *
 * A label in the program's own read-only segments (a string literal in the
 * executable) is kept by pointer, as libdispatch keeps labels in immutable
 * memory on Darwin: nothing can change it and it is never unmapped. Any
 * other label (the heap, the stack, a shared library, which dlclose may
 * unmap) is copied into the queue's allocation. The executable's segments
 * are read once. */
#define SQ_LABEL_RANGES 4

static struct {
	uintptr_t start[SQ_LABEL_RANGES];
	uintptr_t end[SQ_LABEL_RANGES];
	unsigned count;
} _sq_label_ranges;
static bool _sq_label_ranges_ready;
static pthread_once_t _sq_label_ranges_once = PTHREAD_ONCE_INIT;

/* The executable's read-only loadable segments, the adjacent ones merged
 * into one range (the space between two is unmapped, so no label lies
 * there; a writable segment ends a range). */
static int
_sq_label_ranges_add(struct dl_phdr_info *info, size_t size, void *unused)
{
	(void)size;
	(void)unused;
	bool open = false;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		if (ph->p_flags & PF_W) {
			open = false;
			continue;
		}
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		uintptr_t end = start + ph->p_memsz;
		unsigned n = _sq_label_ranges.count;
		if (open && start >= _sq_label_ranges.end[n - 1]) {
			_sq_label_ranges.end[n - 1] = end;
		} else if (n < SQ_LABEL_RANGES) {
			_sq_label_ranges.start[n] = start;
			_sq_label_ranges.end[n] = end;
			_sq_label_ranges.count = n + 1;
			open = true;
		}
	}
	return 1; /* the first object is the executable: only that one */
}

static void
_sq_label_ranges_read(void)
{
	dl_iterate_phdr(_sq_label_ranges_add, NULL);
	/* Release: whoever sees the flag sees the ranges. */
	__atomic_store_n(&_sq_label_ranges_ready, true, __ATOMIC_RELEASE);
}

static bool
_sq_label_is_immutable(const char *label, size_t size)
{
	if (SQ_UNLIKELY(!__atomic_load_n(&_sq_label_ranges_ready,
			__ATOMIC_ACQUIRE)))
		pthread_once(&_sq_label_ranges_once, _sq_label_ranges_read);
	uintptr_t a = (uintptr_t)label;
	for (unsigned i = 0; i < _sq_label_ranges.count; i++)
		if (a >= _sq_label_ranges.start[i] &&
				a + size <= _sq_label_ranges.end[i])
			return true;
	return false;
}

sq_queue_t
sq_queue_create_with_target(const char *label, sq_queue_attr_t attr,
		sq_queue_t target)
{
	/* A concurrent queue's own fields follow the queue; then the label's
	 * copy, if it needs one, in the same allocation: one malloc, and no
	 * chunk of its own to round up. */
	bool concurrent = attr && attr->concurrent;
	size_t size = concurrent ? sizeof(struct sq_concurrent_s)
			: sizeof(struct sq_queue_s);
	size_t label_size = label != NULL ? strlen(label) + 1 : 0;
	bool copy = label != NULL && !_sq_label_is_immutable(label,
			label_size);
	struct sq_queue_s *q = _sq_object_alloc(&_sq_queue_vtable,
			size + (copy ? label_size : 0));
	q->job.kind = SQ_JOB_QUEUE;
	q->type = concurrent ? SQ_QUEUE_TYPE_CONCURRENT : SQ_QUEUE_TYPE_SERIAL;
	q->state = (attr && attr->inactive) ? SQ_STATE_INACTIVE : 0;
	q->serial_num = __atomic_add_fetch(&_sq_queue_serial_counter, 1,
			__ATOMIC_RELAXED);
	q->qos_root = attr ? attr->qos_root : SQ_ROOT_NONE;
	q->qos_relpri = attr ? attr->relpri : 0;
	q->override_root = SQ_ROOT_NONE;
	if (copy)
		q->obj.label = memcpy((char *)q + size, label, label_size);
	else
		q->obj.label = (char *)label;
	__cds_wfcq_init(&q->head, &q->tail);

	if (target == NULL)
		target = _sq_queue_default_target(q);
	else
		_sq_queue_validate("sq_queue_create_with_target", target);
	_sq_retain_internal(target);
	q->obj.target = target;
	_sq_introspect_register(&q->obj);
	return q;
}

static void
_sq_queue_last_external_release(struct sq_object_s *object)
{
	struct sq_queue_s *q = (struct sq_queue_s *)object;
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE);
	/* Its pending tasks could never run: a programming error. */
	if (s & SQ_STATE_SUSPEND_MASK)
		_sq_client_crash("sq_release", "release of suspended queue "
				"'%s'", _sq_object_label(q));
	if (s & SQ_STATE_INACTIVE)
		_sq_client_crash("sq_release", "release of inactive queue "
				"'%s'", _sq_object_label(q));
}

static void
_sq_queue_dispose(struct sq_object_s *object)
{
	struct sq_queue_s *q = (struct sq_queue_s *)object;
	struct sq_specific_s *sp = q->specifics;
	while (sp) {
		struct sq_specific_s *next = sp->next;
		if (sp->destructor)
			sp->destructor(sp->ctx);
		free(sp);
		sp = next;
	}
	struct sq_queue_s *target = q->obj.target;
	q->obj.label = NULL; /* in the queue's allocation or read-only */
	_sq_object_free(&q->obj);
	_sq_release_internal(target);
}

/* ---- State machine ------------------------------------------------------ */

/* Whether a drainer would find something to do (suspension aside). */
static bool
_sq_queue_has_work(struct sq_queue_s *q)
{
	if (q->type == SQ_QUEUE_TYPE_CONCURRENT &&
			__atomic_load_n(&_sq_concurrent(q)->pending_barrier,
					__ATOMIC_SEQ_CST))
		return __atomic_load_n(&_sq_concurrent(q)->running,
				__ATOMIC_SEQ_CST) == 0;
	return !_sq_queue_is_empty(q);
}

/* Whether a queue made runnable now by the calling thread should go to the
 * worker's next-job slot rather than to its root queue: the thread is a
 * worker, and the queue it is draining (if serial) has nothing more queued,
 * so the worker is likely to be free as soon as the current task returns. */
static bool
_sq_queue_hand_off_here(void)
{
	if (!_sq_pool_can_hand_off())
		return false;
	struct sq_frame_s *f = _sq_current_frame;
	return f == NULL || f->queue->type != SQ_QUEUE_TYPE_SERIAL ||
			_sq_queue_is_empty(f->queue);
}

/* Puts a queue that just became ENQUEUED onto its target. On a root queue,
 * from a worker's task, the queue goes to the worker's next-job slot: a
 * hop from one serial queue to another (a message, an actor's call) then
 * runs on the same worker once the task returns, with no wake-up and no
 * other CPU (pool_slot.c, "Next-job slot"). */
static void
_sq_queue_enqueue_self(struct sq_queue_s *q)
{
	if (q->type == SQ_QUEUE_TYPE_MAIN) {
		_sq_main_queue_wakeup();
		return;
	}
	/* The drainer's reference, dropped when it clears ENQUEUED. */
	_sq_retain_internal(q);
	struct sq_queue_s *t = _sq_queue_target(q);
	if (_sq_queue_is_root(t) && !_sq_root_is_overcommit(t) &&
			_sq_queue_hand_off_here())
		_sq_pool_push_next(_sq_job_root(&q->job, t->root_index),
				&q->job);
	else
		_sq_queue_push(t, &q->job);
}

/* ---- Overrides -----------------------------------------------------------
 *
 * A serial queue whose pending work a thread of a higher class needs (a
 * sync caller, a waiter on a work item queued there, a work item of a
 * higher class queued behind lower work) is raised to that class:
 * `override_root` holds the class, and wherever the queue's job is pushed
 * to a root queue it goes to the raised root instead (_sq_job_root). If
 * the job waits in a lower run queue right now, a stub job on the raised
 * root claims the queue (DRAINING, as a sync caller taking it over does)
 * and drains it there; the job, when it runs later, finds the queue held
 * and leaves it (DETACHED). If a drainer of the lower class holds it, the
 * drainer gives the queue back after its current task and puts the job on
 * the raised root. A queue in a chain raises the queues it targets too.
 *
 * An override ends when the queue runs dry: the drainer that gives the
 * queue up empty resets `override_root` first. Everything queued when the
 * override was made has run by then; work queued later keeps the raise
 * only while the queue has not been empty in between (libdispatch's rule
 * too). Nothing else raises a queue, so no raise outlives the queue's
 * next idle moment.
 */

/* A queue's class as a root index: the highest of its target chain's
 * root and the classes of the queues in the chain (libdispatch: a queue's
 * own class wins over its target's unless that would lower it). */
int
_sq_queue_class(struct sq_queue_s *q)
{
	int r = SQ_ROOT_COUNT;
	for (int depth = 0; depth <= SQ_MAX_TARGET_DEPTH; depth++) {
		if (q->qos_root < r)
			r = q->qos_root;
		if (_sq_queue_is_root(q))
			return q->root_index < r ? q->root_index : r;
		if (q->type == SQ_QUEUE_TYPE_MAIN)
			return SQ_ROOT_DEFAULT < r ? SQ_ROOT_DEFAULT : r;
		q = _sq_queue_target(q);
	}
	return r < SQ_ROOT_COUNT ? r : SQ_ROOT_DEFAULT;
}

int
_sq_job_root(struct sq_job_s *job, int root)
{
	int r = SQ_ROOT_NONE;
	if (job->kind == SQ_JOB_QUEUE) {
		struct sq_queue_s *q = caa_container_of(job, struct sq_queue_s,
				job);
		r = __atomic_load_n(&q->override_root, __ATOMIC_RELAXED);
		if (q->qos_root < r)
			r = q->qos_root;
	} else if (job->flags & SQ_CONT_QOS_MASK)
		r = (int)((job->flags & SQ_CONT_QOS_MASK) >>
				SQ_CONT_QOS_SHIFT) - 1;
	return r < root ? r : root;
}

static void _sq_override_run(void *ctx);

/* Puts a stub on root `root` for q if q's job waits in a run queue
 * (seq-cst load: after the raise, so a drainer that has not seen the
 * raise is seen DRAINING here). */
static void
_sq_override_stub(struct sq_queue_s *q, int root)
{
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_SEQ_CST);
	if (!(s & SQ_STATE_ENQUEUED) || (s & (SQ_STATE_DRAINING |
			SQ_STATE_INACTIVE | SQ_STATE_SUSPEND_MASK)))
		return;
	_sq_retain_internal(q);
	struct sq_cont_s *c = _sq_cont_make(&_sq_root_queues[root], q,
			_sq_override_run, 0);
	_sq_pool_push(root, &c->job);
}

/* The stub's work: drain the raised queue here, if it still waits. */
static void
_sq_override_run(void *ctx)
{
	struct sq_queue_s *q = ctx;
	if (_sq_drain_claim(q)) {
		struct sq_frame_s frame;
		uint32_t pops = __atomic_load_n(&q->pops, __ATOMIC_RELAXED);
		_sq_drain_phase(q, SQ_DRAIN_LOOP);
		_sq_frame_push(&frame, q, true);
		for (unsigned ran = 0; ran < SQ_DRAIN_BUDGET &&
				_sq_drain_may_pop(q); ran++) {
			struct sq_job_s *job = _sq_queue_next(q);
			if (job == NULL)
				break;
			_sq_drain_run(q, job, &pops);
		}
		_sq_drain_phase(q, SQ_DRAIN_IDLE);
		_sq_frame_pop(&frame);
		/* Keeps ENQUEUED while the queue's job still waits; gives
		 * the queue up if the job ran meanwhile (DETACHED). */
		_sq_drain_release(q);
		/* Budget spent and still raised: another turn up here. */
		int r = __atomic_load_n(&q->override_root, __ATOMIC_RELAXED);
		if (r != SQ_ROOT_NONE && !_sq_queue_is_empty(q))
			_sq_override_stub(q, r);
	}
	_sq_release_internal(q);
}

void
_sq_queue_raise(struct sq_queue_s *q, int root)
{
	for (int depth = 0; depth <= SQ_MAX_TARGET_DEPTH &&
			q->type == SQ_QUEUE_TYPE_SERIAL; depth++) {
		struct sq_queue_s *t = _sq_queue_target(q);
		int own = _sq_queue_class(q);
		uint8_t cur = __atomic_load_n(&q->override_root,
				__ATOMIC_RELAXED);
		bool raised = false;
		while (root < own && root < cur) {
			if (__atomic_compare_exchange_n(&q->override_root, &cur,
					(uint8_t)root, false, __ATOMIC_SEQ_CST,
					__ATOMIC_RELAXED)) {
				raised = true;
				break;
			}
		}
		if (!raised)
			return;
		SQ_TRACE_QUEUE_RAISE(q, root);
		/* Its job waits in a lower run queue: a stub on the raised
		 * root takes the queue over. */
		if (_sq_queue_is_root(t)) {
			_sq_override_stub(q, root);
			return;
		}
		q = t;
	}
}


/*
 * Makes sure a queue with work and nothing stopping it is on its target.
 * The CAS that sets ENQUEUED is sequentially consistent: it pairs with the
 * drainer's clear-then-look (see the file comment).
 */
void
_sq_queue_wakeup(struct sq_queue_s *q)
{
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_SEQ_CST);
	for (;;) {
		if (s & (SQ_STATE_ENQUEUED | SQ_STATE_INACTIVE |
				SQ_STATE_SUSPEND_MASK))
			return;
		if (!_sq_queue_has_work(q))
			return;
		SQ_CHAOS_POINT();
		if (__atomic_compare_exchange_n(&q->state, &s,
				s | SQ_STATE_ENQUEUED, false, __ATOMIC_SEQ_CST,
				__ATOMIC_SEQ_CST))
			break;
	}
	SQ_CHAOS_POINT();
	/* Sync callers wait in the queue: the first one may take it over
	 * until the job we queue below runs ("Taking a queue over").
	 * Seq-cst, after the CAS: a caller counts itself before it queues
	 * its continuation and looks at the state after, so either we see
	 * it counted or it sees ENQUEUED. */
	if (q->type == SQ_QUEUE_TYPE_SERIAL && __atomic_load_n(
			&q->sync_waiters, __ATOMIC_SEQ_CST) != 0 &&
			_sq_drain_claim(q))
		_sq_drain_release(q);
	_sq_queue_enqueue_self(q);
}

/* The drainer gives the queue up: clear ENQUEUED (and DRAINING, and a
 * waiter's WANTED: the look below wakes the queue up again, and the
 * wake-up wakes a waiter), then look again. */
void
_sq_queue_relinquish(struct sq_queue_s *q)
{
	/* The override ends with the work that needed it ("Overrides"). */
	if (__atomic_load_n(&q->override_root, __ATOMIC_RELAXED) !=
			SQ_ROOT_NONE && _sq_queue_is_empty(q))
		__atomic_store_n(&q->override_root, SQ_ROOT_NONE,
				__ATOMIC_RELAXED);
	SQ_CHAOS_POINT();
	uint64_t s = __atomic_and_fetch(&q->state, ~(SQ_STATE_ENQUEUED |
			SQ_STATE_DRAINING | SQ_STATE_WANTED), __ATOMIC_SEQ_CST);
	SQ_CHAOS_POINT();
	/* The common case, nothing more to do, decided without reloading the
	 * state (concurrent queues also look at their held-back barrier). */
	if (q->type != SQ_QUEUE_TYPE_CONCURRENT && (_sq_queue_is_empty(q) ||
			(s & (SQ_STATE_INACTIVE | SQ_STATE_SUSPEND_MASK))))
		return;
	_sq_queue_wakeup(q);
}

void
_sq_queue_push(struct sq_queue_s *q, struct sq_job_s *job)
{
	if (_sq_queue_is_root(q)) {
		if (SQ_UNLIKELY(_sq_root_is_overcommit(q)))
			_sq_pool_push_overcommit(_sq_job_root(job,
					q->root_index), job);
		else
			_sq_pool_push(_sq_job_root(job, q->root_index), job);
		return;
	}
	/*
	 * wfcqueue's wait-free append, in its two steps: exchange the tail (a
	 * full barrier), then link the old tail to the job. Only the link makes
	 * the job visible to a drainer. When the queue was empty we must wake
	 * it up after the append, but once the job is visible a drainer may
	 * run it, and whatever it triggers may drop the last reference to q
	 * (a chain whose last link makes its owner release the queue) before
	 * we get to q. So that case takes a reference between the two steps,
	 * while nothing can run the job yet, and drops it after the wake-up;
	 * an append to a non-empty queue touches q no more after the link.
	 */
	job->link.next = NULL;
	_sq_tsan_release(job);
	struct cds_wfcq_node *prev = __atomic_exchange_n(&q->tail.p,
			&job->link, __ATOMIC_SEQ_CST);
	bool was_empty = prev == &q->head.node;
	if (was_empty)
		_sq_retain_internal(q);
	SQ_CHAOS_POINT();
	/* Release: the drainer that sees the link sees the job's contents. */
	__atomic_store_n(&prev->next, &job->link, __ATOMIC_RELEASE);
	if (was_empty) {
		SQ_CHAOS_POINT();
		_sq_queue_wakeup(q);
		_sq_release_internal(q);
	}
}

static void
_sq_queue_suspend(struct sq_object_s *object)
{
	struct sq_queue_s *q = (struct sq_queue_s *)object;
	uint64_t s = __atomic_add_fetch(&q->state, SQ_STATE_SUSPEND_ONE,
			__ATOMIC_SEQ_CST);
	if (SQ_UNLIKELY((s & SQ_STATE_SUSPEND_MASK) == 0))
		_sq_client_crash("sq_suspend", "too many suspends of queue "
				"'%s'", _sq_object_label(q));
}

static void
_sq_queue_resume(struct sq_object_s *object)
{
	struct sq_queue_s *q = (struct sq_queue_s *)object;
	uint64_t s = __atomic_load_n(&q->state, __ATOMIC_RELAXED);
	for (;;) {
		if ((s & SQ_STATE_SUSPEND_MASK) == 0) {
			if (s & SQ_STATE_INACTIVE) {
				_sq_queue_activate(object);
				return;
			}
			_sq_client_crash("sq_resume", "over-resume of queue "
					"'%s'", _sq_object_label(q));
		}
		if (__atomic_compare_exchange_n(&q->state, &s,
				s - SQ_STATE_SUSPEND_ONE, false,
				__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			break;
	}
	if (((s - SQ_STATE_SUSPEND_ONE) & SQ_STATE_SUSPEND_MASK) == 0)
		_sq_queue_wakeup(q);
}

static void
_sq_queue_activate(struct sq_object_s *object)
{
	struct sq_queue_s *q = (struct sq_queue_s *)object;
	uint64_t old = __atomic_fetch_and(&q->state, ~SQ_STATE_INACTIVE,
			__ATOMIC_SEQ_CST);
	if (old & SQ_STATE_INACTIVE)
		_sq_queue_wakeup(q);
}

static void
_sq_queue_set_target(struct sq_object_s *object, struct sq_queue_s *target)
{
	struct sq_queue_s *q = (struct sq_queue_s *)object;
	_sq_queue_validate("sq_set_target_queue", target);
	/* A cycle would make every queue in it wait for itself. */
	int depth = 0;
	for (struct sq_queue_s *t = target; !_sq_queue_is_root(t);
			t = _sq_queue_target(t)) {
		if (t == q || ++depth > SQ_MAX_TARGET_DEPTH)
			_sq_client_crash("sq_set_target_queue", "queue '%s' "
					"would target itself through '%s'",
					_sq_object_label(q),
					_sq_object_label(target));
		if (t->type == SQ_QUEUE_TYPE_MAIN)
			break;
	}
	_sq_retain_internal(target);
	/* The next enqueue of q goes to the new target; a drain already
	 * running finishes where it is ("between tasks"). */
	struct sq_queue_s *old = __atomic_exchange_n(&q->obj.target, target,
			__ATOMIC_ACQ_REL);
	_sq_release_internal(old);
}

/* ---- Running jobs ------------------------------------------------------- */

static void _sq_queue_drain_concurrent(struct sq_queue_s *q);

/* Calls a continuation's function with its frame and, after, leaves its
 * group. Inlined twice: plain, and with the trace points and the
 * watchdog's hook for when the points' word is not 0, so that one look at
 * the word chooses, and the plain run has neither in it. */
SQ_INLINE void
_sq_cont_call(struct sq_cont_s *c, struct sq_queue_s *q, uint32_t flags,
		bool observed)
{
	struct sq_frame_s frame;
	bool own_frame = _sq_current_frame == NULL ||
			_sq_current_frame->queue != q;
	if (own_frame) {
		_sq_frame_push(&frame, q, _sq_queue_is_serial(q) ||
				(flags & SQ_CONT_BARRIER));
	}
	sq_function_t func = c->func;
	void *ctx = c->ctx;
	void *group = c->data;
	/* Observed: the watchdog's look is in _sq_task_run, the trace
	 * points are taken only for a probe or a recording. */
	bool traced = observed && SQ_OBSERVED();
	if (traced)
		SQ_OBS_CONT_BEGIN(c);
	_sq_cont_free(c);
	if (observed)
		_sq_task_run(func, ctx);
	else
		SQ_TASK_RUN_UNOBSERVED(func, ctx);
	if (own_frame)
		_sq_frame_pop(&frame);
	if (flags & SQ_CONT_GROUP)
		_sq_group_leave(group);
	if (traced)
		SQ_OBS_TASK_END(q);
}

static SQ_NOINLINE void
_sq_cont_call_observed(struct sq_cont_s *c, struct sq_queue_s *q,
		uint32_t flags)
{
	_sq_cont_call(c, q, flags, true);
}

/* Runs a continuation. It is freed before its function is called. */
static void
_sq_cont_invoke(struct sq_cont_s *c)
{
	uint32_t flags = c->job.flags;
	struct sq_queue_s *q = c->queue;

	if (flags & SQ_CONT_SYNC)
		_sq_sync_handoff(c);
	else if (SQ_OBSERVED_RUN())
		_sq_cont_call_observed(c, q, flags);
	else
		_sq_cont_call(c, q, flags, false);
	if (flags & SQ_CONT_FORWARDED)
		_sq_concurrent_item_done(q);
}

/*
 * One function a serial queue's work may leave for the queue's root, to run
 * on the same thread once the drain is over (_sq_queue_defer_to_root_f):
 * what an async to the root would do when this worker picked it up next,
 * without the push, the pop and a possible wake-up of another worker. Only
 * for a drain started by a worker straight from a root (no frame below it),
 * so that afterwards the thread holds no queue. Thread-local: no ordering.
 */
struct sq_defer_s {
	struct sq_queue_s *queue; /* the queue being drained (identity only) */
	struct sq_queue_s *root;
	void *ctx;
	sq_function_t func;       /* NULL: nothing left */
	uint32_t trace_flow;      /* its flow id in a trace */
};

static SQ_TLS struct sq_defer_s *_sq_defer;

bool
_sq_queue_defer_to_root_f(sq_queue_t root, void *ctx, sq_function_t func)
{
	struct sq_defer_s *d = _sq_defer;
	struct sq_frame_s *f = _sq_current_frame;
	/* Only from the drained queue's own work (its frame alone: not in a
	 * sync to another queue), once per drain, to the root it runs on
	 * (same priority). */
	if (d == NULL || d->func != NULL || f == NULL || f->prev != NULL ||
			f->queue != d->queue || !_sq_queue_is_root(root) ||
			_sq_queue_target(d->queue) != root)
		return false;
	d->root = root;
	d->ctx = ctx;
	d->func = func;
	SQ_TRACE_SUBMIT_ID(d->trace_flow, root, func, d, SQ_SUBMIT_DEFER);
	return true;
}

void
_sq_job_run(struct sq_job_s *job)
{
	if (job->kind == SQ_JOB_CONT) {
		_sq_cont_invoke((struct sq_cont_s *)job);
		return;
	}
	struct sq_queue_s *q = caa_container_of(job, struct sq_queue_s, job);
	if (q->type == SQ_QUEUE_TYPE_CONCURRENT) {
		_sq_queue_drain_concurrent(q);
		return;
	}
	if (_sq_current_frame != NULL || _sq_defer != NULL) {
		(void)_sq_queue_drain(q, SQ_DRAIN_BUDGET);
		return;
	}
	struct sq_defer_s defer = { .queue = q };
	_sq_defer = &defer;
	(void)_sq_queue_drain(q, SQ_DRAIN_BUDGET); /* q may be gone after */
	_sq_defer = NULL;
	if (defer.func != NULL) {
		/* As the root's task: q is given up (or back on the root, its
		 * budget spent), so this thread holds no queue now. */
		struct sq_frame_s frame;
		_sq_frame_push(&frame, defer.root, false);
		SQ_TRACE_TASK_BEGIN(defer.trace_flow, defer.root, defer.func,
				&defer);
		_sq_task_run(defer.func, defer.ctx);
		SQ_TRACE_TASK_END(defer.root);
		_sq_frame_pop(&frame);
	}
}

/* A drainer's look at the state before each pop: false when the queue is
 * suspended or inactive (the drain stops between jobs); while a snapshot
 * counts its jobs (INSPECT), pauses first. The phase (LOOP) is stored
 * before this load: the compiler may not swap them, and the CPU's side is
 * the snapshot's (introspect.c). */
bool
_sq_drain_may_pop(struct sq_queue_s *q)
{
	for (;;) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		uint64_t s = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE);
		if (SQ_LIKELY(!(s & (SQ_STATE_SUSPEND_MASK | SQ_STATE_INACTIVE |
				SQ_STATE_INSPECT))))
			return true;
		if (s & (SQ_STATE_SUSPEND_MASK | SQ_STATE_INACTIVE))
			return false;
		_sq_queue_inspect_pause(q);
	}
}

/* Takes the next job from a queue whose drainer we are: NULL when empty.
 * A producer caught between its two steps is one store away: spin, then
 * yield, never sleep. */
static struct sq_job_s *
_sq_queue_pop(struct sq_queue_s *q)
{
	unsigned attempts = 0;
	for (;;) {
		struct cds_wfcq_node *n = __cds_wfcq_dequeue_nonblocking(
				&q->head, &q->tail);
		if (n != CDS_WFCQ_WOULDBLOCK) {
			if (n != NULL) {
				_sq_tsan_acquire(n);
				/* The job after it, while this one runs: a
				 * drainer behind its producer finds each job
				 * gone from its cache, and the chain lets it
				 * see only one ahead. Relaxed: a hint (NULL,
				 * or a link being stored, fetches nothing
				 * useful and nothing harmful). */
				__builtin_prefetch(__atomic_load_n(&n->next,
						__ATOMIC_RELAXED));
			}
			return (struct sq_job_s *)n;
		}
		if (++attempts < 64)
			_sq_cpu_relax();
		else
			sched_yield();
	}
}

static inline bool
_sq_queue_stopped(struct sq_queue_s *q)
{
	return (__atomic_load_n(&q->state, __ATOMIC_ACQUIRE) &
			(SQ_STATE_SUSPEND_MASK | SQ_STATE_INACTIVE)) != 0;
}

/*
 * The next job for the queue's drainer: NULL when the queue is empty or
 * stopped (suspended, inactive). The caller has read the state before
 * (_sq_drain_may_pop); it is read again after the job is taken: a job appended after sq_suspend returned is seen only
 * with the suspend (the acquire fence after reading its link pairs with the
 * submitter's release of the link, which follows its suspend), so a
 * drainer that read the state just before the suspend does not run it: it
 * stashes it, first in line for the next drain, which starts once the
 * queue is resumed. Without the second look, 1 task in 250 submitted right
 * after a suspend to a queue being drained ran before the resume.
 */
struct sq_job_s *
_sq_queue_next(struct sq_queue_s *q)
{
	/* Relaxed: the stash is ours (only the drainer writes it). */
	struct sq_job_s *job = __atomic_load_n(&q->stashed, __ATOMIC_RELAXED);
	if (job != NULL) {
		__atomic_store_n(&q->stashed, NULL, __ATOMIC_RELAXED);
		return job;
	}
	job = _sq_queue_pop(q);
	if (job == NULL)
		return NULL;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	SQ_CHAOS_POINT();
	if (_sq_queue_stopped(q)) {
		/* Seq-cst, before the drainer clears ENQUEUED (seq-cst):
		 * whoever sees the queue given up sees the stash. */
		__atomic_store_n(&q->stashed, job, __ATOMIC_SEQ_CST);
		return NULL;
	}
	return job;
}

size_t
_sq_queue_drain(struct sq_queue_s *q, unsigned budget)
{
	struct sq_frame_s frame;
	size_t ran = 0;
	/* A sync caller took the queue over while this job waited: the job
	 * is its to finish ("Taking a queue over"). */
	if (q->type == SQ_QUEUE_TYPE_SERIAL && !_sq_drain_start(q))
		return 0;
	uint32_t pops = __atomic_load_n(&q->pops, __ATOMIC_RELAXED);

	_sq_drain_phase(q, SQ_DRAIN_LOOP);
	_sq_frame_push(&frame, q, true);
	for (;;) {
		if (!_sq_drain_may_pop(q))
			break;
		struct sq_job_s *job = _sq_queue_next(q);
		if (job == NULL)
			break;
		_sq_drain_run(q, job, &pops);
		ran++;
		if (budget && (ran >= budget || _sq_pool_higher_waiting() ||
				__atomic_load_n(&q->override_root,
				__ATOMIC_RELAXED) < _sq_thread_root()) &&
				!_sq_queue_is_empty(q)) {
			/* Fairness: back to the end of the target (the main
			 * loop's next turn for the main queue), still
			 * ENQUEUED, with the drainer's reference; and
			 * precedence: work of a higher class than the
			 * queue's waits (pool_class.c, "Precedence"). */
			_sq_drain_phase(q, SQ_DRAIN_IDLE);
			_sq_frame_pop(&frame);
			if (q->type == SQ_QUEUE_TYPE_MAIN) {
				_sq_main_queue_wakeup();
			} else {
				/* Until the job runs again, a sync caller may
				 * take the queue over. */
				if (q->type == SQ_QUEUE_TYPE_SERIAL)
					_sq_drain_release(q);
				_sq_queue_push(_sq_queue_target(q), &q->job);
			}
			return ran;
		}
	}
	_sq_drain_phase(q, SQ_DRAIN_IDLE);
	_sq_frame_pop(&frame);
	_sq_queue_relinquish(q);
	_sq_release_internal(q); /* may destroy q (never the main queue) */
	return ran;
}

/* Runs a queue job held by a concurrent queue (a serial queue targeting a
 * concurrent one): wrapped so the concurrent queue can count it. */
static void
_sq_run_queue_job(void *job)
{
	_sq_job_run(job);
}

static void
_sq_queue_drain_concurrent(struct sq_queue_s *q)
{
	struct sq_queue_s *target = _sq_queue_target(q);
	unsigned budget = SQ_CONCURRENT_DRAIN_BUDGET;
	uint32_t pops = __atomic_load_n(&q->pops, __ATOMIC_RELAXED);

	_sq_drain_phase(q, SQ_DRAIN_LOOP);
	for (;;) {
		if (!_sq_drain_may_pop(q))
			break;

		struct sq_cont_s *c = __atomic_load_n(
				&_sq_concurrent(q)->pending_barrier,
				__ATOMIC_SEQ_CST);
		if (c == NULL) {
			struct sq_job_s *job = _sq_queue_next(q);
			if (job == NULL)
				break;
			_sq_drain_pops(q, ++pops);
			if (job->kind == SQ_JOB_QUEUE) {
				c = _sq_cont_make(q, job, _sq_run_queue_job, 0);
				c->job.trace_flow = 0;
			} else {
				c = (struct sq_cont_s *)job;
			}
		} else {
			__atomic_store_n(&_sq_concurrent(q)->pending_barrier,
					NULL,
					__ATOMIC_SEQ_CST);
		}

		if (c->job.flags & SQ_CONT_BARRIER) {
			/* Publish the held-back barrier, then look at
			 * `running`; _sq_concurrent_item_done does the mirror
			 * image (decrement, then look for a barrier), so the
			 * last task to finish cannot miss it. */
			__atomic_store_n(&_sq_concurrent(q)->pending_barrier, c,
					__ATOMIC_SEQ_CST);
			SQ_CHAOS_POINT();
			if (__atomic_load_n(&_sq_concurrent(q)->running,
					__ATOMIC_SEQ_CST) != 0)
				break;
			__atomic_store_n(&_sq_concurrent(q)->pending_barrier,
					NULL,
					__ATOMIC_SEQ_CST);
			_sq_drain_phase(q, SQ_DRAIN_TASK);
			_sq_cont_invoke(c);
			_sq_drain_phase(q, SQ_DRAIN_LOOP);
			__atomic_sub_fetch(&_sq_concurrent(q)->barriers,
					1, __ATOMIC_SEQ_CST);
			continue;
		}

		/* Start it elsewhere; it holds q alive until it is done. */
		if (c->job.flags & SQ_CONT_FORWARDED) {
			/* Already forwarded by an inner concurrent queue:
			 * wrap it so both queues count it. */
			c = _sq_cont_make(q, c, _sq_run_queue_job, 0);
			c->job.trace_flow = 0;
		}
		c->job.flags |= SQ_CONT_FORWARDED;
		c->queue = q;
		__atomic_add_fetch(&_sq_concurrent(q)->running,
				1, __ATOMIC_SEQ_CST);
		_sq_retain_internal(q);
		_sq_queue_push(target, &c->job);

		if (--budget == 0 && _sq_queue_has_work(q)) {
			_sq_drain_phase(q, SQ_DRAIN_IDLE);
			_sq_queue_push(target, &q->job);
			return;
		}
	}
	_sq_drain_phase(q, SQ_DRAIN_IDLE);
	_sq_queue_relinquish(q);
	_sq_release_internal(q);
}

/* Leaves a concurrent queue: one fewer running task. */
void
_sq_concurrent_leave(struct sq_queue_s *q)
{
	int32_t n = __atomic_sub_fetch(&_sq_concurrent(q)->running,
			1, __ATOMIC_SEQ_CST);
	SQ_CHAOS_POINT();
	if (n == 0 && __atomic_load_n(&_sq_concurrent(q)->pending_barrier,
			__ATOMIC_SEQ_CST))
		_sq_queue_wakeup(q);
}

void
_sq_concurrent_item_done(struct sq_queue_s *q)
{
	_sq_concurrent_leave(q);
	_sq_release_internal(q);
}

/* ---- Submission ---------------------------------------------------------- */

/* Whether a spawn onto q has no start order: on a global queue but an
 * overcommit one (never in a ring). Elsewhere it keeps the queue's order
 * (a concurrent queue forwards its tasks to the pool as they are). */
static inline bool
_sq_spawns(const struct sq_queue_s *q)
{
	return _sq_queue_is_root(q) && !_sq_root_is_overcommit(q);
}

/* Always inlined: each caller's flags are a constant, and the call stays
 * the one submission hop it was before the trace points came. */
SQ_INLINE void
_sq_async(const char *call, struct sq_queue_s *q, void *ctx,
		sq_function_t func, uint32_t flags)
{
	_SQ_REQUIRE_FUNCTION(call, func);
	_sq_queue_validate(call, q);
	if (flags & SQ_CONT_BARRIER) {
		if (q->type == SQ_QUEUE_TYPE_CONCURRENT)
			__atomic_add_fetch(&_sq_concurrent(q)->barriers,
					1, __ATOMIC_SEQ_CST);
		else
			flags &= ~SQ_CONT_BARRIER;
	}
	if ((flags & SQ_CONT_SPAWN) && !_sq_spawns(q))
		flags &= ~SQ_CONT_SPAWN;
	struct sq_cont_s *c = _sq_cont_make(q, ctx, func, flags);
	SQ_TRACE_SUBMIT_PUSH(c, q, (flags & SQ_CONT_BARRIER)
			? SQ_SUBMIT_BARRIER : SQ_SUBMIT_ASYNC);
}

void
_sq_root_async_next_f(int root_index, void *ctx, sq_function_t func)
{
	struct sq_queue_s *q = &_sq_root_queues[root_index];
	struct sq_cont_s *c = _sq_cont_make(q, ctx, func, 0);
	SQ_TRACE_SUBMIT(c, q, SQ_SUBMIT_NEXT);
	_sq_pool_push_next(root_index, &c->job);
}

void
_sq_async_group(struct sq_queue_s *q, void *ctx, sq_function_t func,
		struct sq_group_s *g, bool spawn)
{
	struct sq_cont_s *c = _sq_cont_make(q, ctx, func, SQ_CONT_GROUP |
			(spawn && _sq_spawns(q) ? SQ_CONT_SPAWN : 0));
	c->data = g;
	SQ_TRACE_SUBMIT_PUSH(c, q, SQ_SUBMIT_GROUP);
}

void
_sq_notify_fire(struct sq_notify_s *n)
{
	if (n == NULL)
		return;
	SQ_TRACE_SUBMIT_KIND(SQ_SUBMIT_NOTIFY);
	while (n != NULL) {
		struct sq_notify_s *next = n->next;
		struct sq_queue_s *q = n->queue;
		sq_async_f(q, n->context, n->function);
		_sq_notify_free(n);
		_sq_release_internal(q);
		n = next;
	}
	SQ_TRACE_SUBMIT_KIND(0);
}

void
_sq_async_qos(const char *call, struct sq_queue_s *q, void *ctx,
		sq_function_t func, bool barrier, int root)
{
	uint32_t flags = barrier ? SQ_CONT_BARRIER : 0;
	if (root == SQ_ROOT_NONE) {
		_sq_async(call, q, ctx, func, flags);
		return;
	}
	flags |= (uint32_t)(root + 1) << SQ_CONT_QOS_SHIFT;
	/* Raised before: the submission that wakes the queue up puts its
	 * job on the raised root. And after: a drainer that gave the queue
	 * up empty in between ended that raise. */
	_sq_queue_raise(q, root);
	_sq_async(call, q, ctx, func, flags);
	_sq_queue_raise(q, root);
}

void
sq_async_f(sq_queue_t queue, void *context, sq_function_t function)
{
	_sq_async("sq_async_f", queue, context, function, 0);
}

void
sq_spawn_f(sq_queue_t queue, void *context, sq_function_t function)
{
	_sq_async("sq_spawn_f", queue, context, function, SQ_CONT_SPAWN);
}

void
sq_barrier_async_f(sq_queue_t queue, void *context, sq_function_t function)
{
	_sq_async("sq_barrier_async_f", queue, context, function,
			SQ_CONT_BARRIER);
}

/* ---- Global, main and current queues, labels ------------------------- */

sq_queue_t
sq_get_global_queue(intptr_t priority, uintptr_t flags)
{
	int twin = flags & SQ_QUEUE_OVERCOMMIT ? SQ_ROOT_COUNT : 0;
	int index = priority > 0 && priority <= UINT8_MAX ?
			_sq_qos_root((unsigned)priority) : -1;
	if (index >= 0)
		return &_sq_root_queues[twin + index];
	if (priority > SQ_QUEUE_PRIORITY_DEFAULT)
		index = SQ_ROOT_HIGH;
	else if (priority == SQ_QUEUE_PRIORITY_DEFAULT)
		index = SQ_ROOT_DEFAULT;
	else if (priority > SQ_QUEUE_PRIORITY_BACKGROUND / 2)
		index = SQ_ROOT_LOW; /* nearer to LOW than to BACKGROUND */
	else
		index = SQ_ROOT_BACKGROUND;
	return &_sq_root_queues[twin + index];
}

sq_queue_t
sq_get_main_queue(void)
{
	return &_sq_main_queue;
}

sq_queue_t
sq_get_current_queue(void)
{
	struct sq_frame_s *f = _sq_current_frame;
	return f ? f->queue : _sq_default_root();
}

const char *
sq_queue_get_label(sq_queue_t queue)
{
	if (queue == SQ_CURRENT_QUEUE_LABEL)
		queue = sq_get_current_queue();
	_sq_queue_validate("sq_queue_get_label", queue);
	return _sq_object_label(queue);
}

/* ---- Assertions ---------------------------------------------------------- */

/* The frame through which the calling thread runs q (q itself or a queue
 * that targets it), or NULL. */
static struct sq_frame_s *
_sq_frame_running(struct sq_queue_s *q)
{
	for (struct sq_frame_s *f = _sq_current_frame; f; f = f->prev) {
		for (struct sq_queue_s *x = f->queue;; x = _sq_queue_target(x)) {
			if (x == q)
				return f;
			if (_sq_queue_is_root(x) || x->type == SQ_QUEUE_TYPE_MAIN)
				break;
		}
	}
	return NULL;
}

/* The main queue belongs to the main thread: code there runs on it in
 * every assertion's sense, inside main-queue work or not (top-level code,
 * the start of an async main), as in libdispatch, where the main thread
 * holds the main queue's drain lock for good. */
static inline bool
_sq_main_thread_owns(struct sq_queue_s *q)
{
	return q == &_sq_main_queue && _sq_is_main_thread();
}

void
sq_assert_queue(sq_queue_t queue)
{
	_sq_queue_validate("sq_assert_queue", queue);
	if (_sq_frame_running(queue) == NULL && !_sq_main_thread_owns(queue))
		_sq_client_crash("sq_assert_queue", "not running on queue "
				"'%s'", _sq_object_label(queue));
}

void
sq_assert_queue_barrier(sq_queue_t queue)
{
	_sq_queue_validate("sq_assert_queue_barrier", queue);
	if (_sq_main_thread_owns(queue))
		return; /* serial: running on it is running alone */
	struct sq_frame_s *f = _sq_frame_find(queue);
	if (f == NULL || !f->exclusive)
		_sq_client_crash("sq_assert_queue_barrier", "not running "
				"alone on queue '%s'", _sq_object_label(queue));
}

void
sq_assert_queue_not(sq_queue_t queue)
{
	_sq_queue_validate("sq_assert_queue_not", queue);
	if (_sq_frame_running(queue) != NULL || _sq_main_thread_owns(queue))
		_sq_client_crash("sq_assert_queue_not", "running on queue "
				"'%s'", _sq_object_label(queue));
}
