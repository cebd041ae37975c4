/*
 * The QoS API: queue attributes with a class, the class a queue reports,
 * the global queues by class, the class work runs at (sq_qos_class_self),
 * retargeting back to a class's global queue, work items with a class
 * (ENFORCE, INHERIT, ASSIGN_CURRENT, misuse), and an override: a
 * USER_INTERACTIVE task that syncs onto a BACKGROUND serial queue while
 * the pool is flooded with DEFAULT work.
 *
 * The misuse checks fork children first, while this process has no
 * threads. Tasks record what they see in atomics; the main thread checks.
 * Every wait has a timeout; the timing bounds are generous (a loaded
 * 2-CPU machine, SQ_WORKERS up to 8, sanitizers), and the override test
 * prints what it measured (with SQT_QOS_COMPARE=1, also without the
 * override: no caller, and a BACKGROUND caller).
 */
#include "queue_helpers.h"

static const sq_qos_class_t classes[5] = {
	SQ_QOS_CLASS_USER_INTERACTIVE, SQ_QOS_CLASS_USER_INITIATED,
	SQ_QOS_CLASS_DEFAULT, SQ_QOS_CLASS_UTILITY, SQ_QOS_CLASS_BACKGROUND,
};

static const char *
qos_name(sq_qos_class_t c)
{
	switch (c) {
	case SQ_QOS_CLASS_USER_INTERACTIVE: return "USER_INTERACTIVE";
	case SQ_QOS_CLASS_USER_INITIATED: return "USER_INITIATED";
	case SQ_QOS_CLASS_DEFAULT: return "DEFAULT";
	case SQ_QOS_CLASS_UTILITY: return "UTILITY";
	case SQ_QOS_CLASS_BACKGROUND: return "BACKGROUND";
	case SQ_QOS_CLASS_UNSPECIFIED: return "UNSPECIFIED";
	}
	return "?";
}

/* CPU work for `us` microseconds of this thread's CPU time (the clock is
 * read every few microseconds of work, not in a tight loop). */
static void
cpu_spin_us(unsigned us)
{
	uint64_t end = sqt_thread_cpu_ns() + (uint64_t)us * 1000;
	while (sqt_thread_cpu_ns() < end)
		for (volatile int i = 0; i < 2000; i++) {
		}
}

/* ---- misuse (children: before this process has any thread) ------------------ */

static void
nothing(void *ctx)
{
}

static void
item_bad_class(void *ctx)
{
	alarm(10);
	sq_workitem_t it = sq_workitem_create_with_qos_class_f(0,
			(sq_qos_class_t)(uintptr_t)ctx, 0, NULL, nothing);
	(void)it;
}

static void
item_bad_relpri(void *ctx)
{
	alarm(10);
	sq_workitem_t it = sq_workitem_create_with_qos_class_f(0,
			SQ_QOS_CLASS_UTILITY, (int)(intptr_t)ctx, NULL, nothing);
	(void)it;
}

static void
test_misuse(void)
{
	static const char msg[] = "SwiftQueues: "
			"sq_workitem_create_with_qos_class_f:";
	CHECK_CRASH(item_bad_class, (void *)(uintptr_t)0x7, msg);
	CHECK_CRASH(item_bad_class, (void *)(uintptr_t)0x22, msg);
	CHECK_CRASH(item_bad_class, (void *)(uintptr_t)0x15f, msg);
	CHECK_CRASH(item_bad_class, (void *)(uintptr_t)0x7, "0x7 is not a QoS "
			"class");
	CHECK_CRASH(item_bad_relpri, (void *)(intptr_t)1, msg);
	CHECK_CRASH(item_bad_relpri, (void *)(intptr_t)-16, msg);
	CHECK_CRASH(item_bad_relpri, (void *)(intptr_t)-16, "relative "
			"priority -16 is out of range");
}

/* ---- attributes ----------------------------------------------------------- */

static void
test_attributes(void)
{
	/* not a class, a priority out of range: NULL */
	CHECK(sq_queue_attr_make_with_qos_class(NULL, 0x7, 0) == NULL);
	CHECK(sq_queue_attr_make_with_qos_class(SQ_QUEUE_CONCURRENT, 0x22, 0)
			== NULL);
	CHECK(sq_queue_attr_make_with_qos_class(NULL, 0x20, 0) == NULL);
	CHECK(sq_queue_attr_make_with_qos_class(NULL, 0xffffffffu, 0) == NULL);
	CHECK(sq_queue_attr_make_with_qos_class(NULL, SQ_QOS_CLASS_UTILITY, 1)
			== NULL);
	CHECK(sq_queue_attr_make_with_qos_class(SQ_QUEUE_CONCURRENT,
			SQ_QOS_CLASS_UTILITY, -16) == NULL);
	CHECK(sq_queue_attr_make_with_qos_class(NULL, SQ_QOS_CLASS_BACKGROUND,
			-100) == NULL);
	/* the ends of the range are fine, for every class and kind */
	sq_queue_attr_t kinds[4] = { SQ_QUEUE_SERIAL, SQ_QUEUE_CONCURRENT,
		SQ_QUEUE_SERIAL_INACTIVE, SQ_QUEUE_CONCURRENT_INACTIVE };
	for (int k = 0; k < 4; k++)
		for (int c = 0; c < 5; c++) {
			CHECK(sq_queue_attr_make_with_qos_class(kinds[k],
					classes[c], 0) != NULL);
			CHECK(sq_queue_attr_make_with_qos_class(kinds[k],
					classes[c], SQ_QOS_MIN_RELATIVE_PRIORITY)
					!= NULL);
		}
	/* constants, as in libdispatch: the same arguments, the same
	 * attribute */
	CHECK(sq_queue_attr_make_with_qos_class(SQ_QUEUE_CONCURRENT,
			SQ_QOS_CLASS_UTILITY, -3) == sq_queue_attr_make_with_qos_class(
			SQ_QUEUE_CONCURRENT, SQ_QOS_CLASS_UTILITY, -3));
	/* UNSPECIFIED: the attribute without a class */
	CHECK(sq_queue_attr_make_with_qos_class(SQ_QUEUE_CONCURRENT,
			SQ_QOS_CLASS_UNSPECIFIED, 0) == SQ_QUEUE_CONCURRENT);
}

/* ---- what queues report ---------------------------------------------------- */

static void
test_reported_classes(void)
{
	for (int c = 0; c < 5; c++) {
		for (int rp = 0; rp >= SQ_QOS_MIN_RELATIVE_PRIORITY; rp -= 5) {
			sq_queue_t q = sq_queue_create("com.example.qos",
					sq_queue_attr_make_with_qos_class(c & 1 ?
					SQ_QUEUE_CONCURRENT : SQ_QUEUE_SERIAL,
					classes[c], rp));
			int relpri = 99;
			CHECK_EQ(sq_queue_get_qos_class(q, &relpri), classes[c]);
			CHECK_EQ(relpri, rp);
			CHECK_EQ(sq_queue_get_qos_class(q, NULL), classes[c]);
			sq_release(q);
		}
	}
	/* no class: UNSPECIFIED and 0, also with a target of a class */
	int relpri = 99;
	sq_queue_t plain = sq_queue_create("com.example.plain", NULL);
	CHECK_EQ(sq_queue_get_qos_class(plain, &relpri),
			SQ_QOS_CLASS_UNSPECIFIED);
	CHECK_EQ(relpri, 0);
	sq_release(plain);
	plain = sq_queue_create_with_target("com.example.plain",
			SQ_QUEUE_CONCURRENT, sq_get_global_queue(
			SQ_QOS_CLASS_UTILITY, 0));
	relpri = 99;
	CHECK_EQ(sq_queue_get_qos_class(plain, &relpri),
			SQ_QOS_CLASS_UNSPECIFIED);
	CHECK_EQ(relpri, 0);
	sq_release(plain);
	relpri = 99;
	CHECK_EQ(sq_queue_get_qos_class(sq_get_main_queue(), &relpri),
			SQ_QOS_CLASS_UNSPECIFIED);
	CHECK_EQ(relpri, 0);
	/* the global queues: their class */
	for (int c = 0; c < 5; c++) {
		relpri = 99;
		CHECK_EQ(sq_queue_get_qos_class(sq_get_global_queue(classes[c],
				0), &relpri), classes[c]);
		CHECK_EQ(relpri, 0);
	}
	/* by class and by priority: the same queues; USER_INTERACTIVE a
	 * fifth one */
	sq_queue_t ui = sq_get_global_queue(SQ_QOS_CLASS_USER_INTERACTIVE, 0);
	sq_queue_t high = sq_get_global_queue(SQ_QUEUE_PRIORITY_HIGH, 0);
	sq_queue_t dflt = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_queue_t low = sq_get_global_queue(SQ_QUEUE_PRIORITY_LOW, 0);
	sq_queue_t bg = sq_get_global_queue(SQ_QUEUE_PRIORITY_BACKGROUND, 0);
	CHECK(sq_get_global_queue(SQ_QOS_CLASS_USER_INITIATED, 0) == high);
	CHECK(sq_get_global_queue(SQ_QOS_CLASS_DEFAULT, 0) == dflt);
	CHECK(sq_get_global_queue(SQ_QOS_CLASS_UNSPECIFIED, 0) == dflt);
	CHECK(sq_get_global_queue(SQ_QOS_CLASS_UTILITY, 0) == low);
	CHECK(sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0) == bg);
	sq_queue_t five[5] = { ui, high, dflt, low, bg };
	int distinct = 0;
	for (int i = 0; i < 5; i++) {
		bool dup = false;
		for (int j = 0; j < i; j++)
			dup |= five[i] == five[j];
		distinct += !dup;
	}
	CHECK_EQ(distinct, 5);
	CHECK(ui != sq_get_main_queue());
	CHECK_EQ(sq_queue_get_qos_class(high, NULL), SQ_QOS_CLASS_USER_INITIATED);
	CHECK_EQ(sq_queue_get_qos_class(low, NULL), SQ_QOS_CLASS_UTILITY);
	/* inactive variants report their class before activation */
	sq_queue_t iq = sq_queue_create("com.example.inactive",
			sq_queue_attr_make_initially_inactive(
			sq_queue_attr_make_with_qos_class(SQ_QUEUE_CONCURRENT,
			SQ_QOS_CLASS_UTILITY, -4)));
	relpri = 99;
	CHECK_EQ(sq_queue_get_qos_class(iq, &relpri), SQ_QOS_CLASS_UTILITY);
	CHECK_EQ(relpri, -4);
	sq_activate(iq);
	sq_release(iq);
	/* the program's own thread, outside any work */
	CHECK_EQ(sq_qos_class_self(), SQ_QOS_CLASS_DEFAULT);
}

/* ---- the class work runs at -------------------------------------------------- */

struct seen {
	atomic_uint qos;
	atomic_int ran;
};

static void
record_class(void *ctx)
{
	struct seen *s = ctx;
	atomic_store(&s->qos, sq_qos_class_self());
	atomic_fetch_add(&s->ran, 1);
}

/* The class a task on q sees (UNSPECIFIED when it did not run in time:
 * that fails the check too). */
static sq_qos_class_t
class_on(sq_queue_t q)
{
	struct seen s;
	atomic_init(&s.qos, SQ_QOS_CLASS_UNSPECIFIED);
	atomic_init(&s.ran, 0);
	sq_async_f(q, &s, record_class);
	if (!sqt_wait_int(&s.ran, 1, 5000))
		return 0xdead;
	return atomic_load(&s.qos);
}

static void
test_work_class(void)
{
	for (int c = 0; c < 5; c++) {
		sq_queue_t s = sq_queue_create("com.example.serial",
				sq_queue_attr_make_with_qos_class(NULL, classes[c],
				-2));
		sq_queue_t k = sq_queue_create("com.example.concurrent",
				sq_queue_attr_make_with_qos_class(SQ_QUEUE_CONCURRENT,
				classes[c], 0));
		CHECK_EQ(class_on(s), classes[c]);
		CHECK_EQ(class_on(k), classes[c]);
		CHECK_EQ(class_on(sq_get_global_queue(classes[c], 0)), classes[c]);
		/* a plain queue on the class's global queue */
		sq_queue_t t = sq_queue_create_with_target("com.example.plain",
				NULL, sq_get_global_queue(classes[c], 0));
		CHECK_EQ(class_on(t), classes[c]);
		/* a serial queue without a class of its own on one with */
		sq_queue_t inner = sq_queue_create_with_target("com.example.inner",
				NULL, s);
		CHECK_EQ(class_on(inner), classes[c]);
		sq_release(inner);
		sq_release(t);
		sq_release(s);
		sq_release(k);
	}
	sq_queue_t plain = sq_queue_create("com.example.plain", NULL);
	CHECK_EQ(class_on(plain), SQ_QOS_CLASS_DEFAULT);
	sq_release(plain);
}

/* ---- kinds: serial, concurrent, inactive ------------------------------------- */

struct overlap {
	atomic_int now, peak, done;
};

static void
overlap_task(void *ctx)
{
	struct overlap *o = ctx;
	sqt_atomic_max(&o->peak, atomic_fetch_add(&o->now, 1) + 1);
	sqt_sleep_ms(2);
	atomic_fetch_sub(&o->now, 1);
	atomic_fetch_add(&o->done, 1);
}

/* Two tasks that wait (sleeping) for each other: both finish only if they
 * run at the same time (the pool adds a thread for a blocked worker, so
 * this holds at SQ_WORKERS=1 too). */
struct rendezvous {
	atomic_int arrived, met, done;
};

static void
rendezvous_task(void *ctx)
{
	struct rendezvous *r = ctx;
	atomic_fetch_add(&r->arrived, 1);
	uint64_t deadline = sqt_now_ns() + 3000000000ull;
	while (atomic_load(&r->arrived) < 2 && sqt_now_ns() < deadline)
		sqt_sleep_us(200);
	if (atomic_load(&r->arrived) >= 2)
		atomic_fetch_add(&r->met, 1);
	atomic_fetch_add(&r->done, 1);
}

static void
check_concurrent(sq_queue_t q)
{
	struct rendezvous r;
	atomic_init(&r.arrived, 0);
	atomic_init(&r.met, 0);
	atomic_init(&r.done, 0);
	sq_async_f(q, &r, rendezvous_task);
	sq_async_f(q, &r, rendezvous_task);
	CHECK(sqt_wait_int(&r.done, 2, 10000));
	CHECK_EQ(atomic_load(&r.met), 2);
}

static void
check_serial(sq_queue_t q)
{
	struct overlap o;
	atomic_init(&o.now, 0);
	atomic_init(&o.peak, 0);
	atomic_init(&o.done, 0);
	for (int i = 0; i < 6; i++)
		sq_async_f(q, &o, overlap_task);
	CHECK(sqt_wait_int(&o.done, 6, 10000));
	CHECK_EQ(atomic_load(&o.peak), 1);
}

static void
test_kinds(void)
{
	sq_queue_t s = sq_queue_create("com.example.serial",
			sq_queue_attr_make_with_qos_class(SQ_QUEUE_SERIAL,
			SQ_QOS_CLASS_UTILITY, 0));
	check_serial(s);
	sq_release(s);
	sq_queue_t k = sq_queue_create("com.example.concurrent",
			sq_queue_attr_make_with_qos_class(SQ_QUEUE_CONCURRENT,
			SQ_QOS_CLASS_USER_INITIATED, -1));
	check_concurrent(k);
	sq_release(k);
	/* inactive: nothing runs before sq_activate; then the kind and the
	 * class hold */
	sq_queue_attr_t ia[2] = {
		sq_queue_attr_make_with_qos_class(SQ_QUEUE_SERIAL_INACTIVE,
				SQ_QOS_CLASS_BACKGROUND, -7),
		sq_queue_attr_make_initially_inactive(
				sq_queue_attr_make_with_qos_class(
				SQ_QUEUE_CONCURRENT, SQ_QOS_CLASS_UTILITY, 0)),
	};
	sq_qos_class_t ic[2] = { SQ_QOS_CLASS_BACKGROUND, SQ_QOS_CLASS_UTILITY };
	for (int i = 0; i < 2; i++) {
		sq_queue_t q = sq_queue_create("com.example.inactive", ia[i]);
		struct seen seen;
		atomic_init(&seen.qos, SQ_QOS_CLASS_UNSPECIFIED);
		atomic_init(&seen.ran, 0);
		sq_async_f(q, &seen, record_class);
		sqt_sleep_ms(30);
		CHECK_EQ(atomic_load(&seen.ran), 0);
		sq_activate(q);
		CHECK(sqt_wait_int(&seen.ran, 1, 5000));
		CHECK_EQ(atomic_load(&seen.qos), ic[i]);
		if (i == 0)
			check_serial(q);
		else
			check_concurrent(q);
		sq_release(q);
	}
}

/* ---- retargeting ------------------------------------------------------------------ */

static void
test_retarget(void)
{
	sq_queue_t q = sq_queue_create("com.example.retarget",
			sq_queue_attr_make_with_qos_class(NULL, SQ_QOS_CLASS_UTILITY,
			-5));
	CHECK_EQ(class_on(q), SQ_QOS_CLASS_UTILITY);
	sq_set_target_queue(q, sq_get_global_queue(
			SQ_QOS_CLASS_USER_INITIATED, 0));
	CHECK_EQ(class_on(q), SQ_QOS_CLASS_USER_INITIATED);
	/* NULL: back to its class's global queue, not DEFAULT's */
	sq_set_target_queue(q, NULL);
	CHECK_EQ(class_on(q), SQ_QOS_CLASS_UTILITY);
	/* its own class is kept through it all */
	CHECK_EQ(sq_queue_get_qos_class(q, NULL), SQ_QOS_CLASS_UTILITY);
	sq_release(q);
	/* the same for a concurrent queue, from BACKGROUND */
	q = sq_queue_create("com.example.retarget",
			sq_queue_attr_make_with_qos_class(SQ_QUEUE_CONCURRENT,
			SQ_QOS_CLASS_BACKGROUND, 0));
	sq_set_target_queue(q, sq_get_global_queue(
			SQ_QOS_CLASS_USER_INTERACTIVE, 0));
	CHECK_EQ(class_on(q), SQ_QOS_CLASS_USER_INTERACTIVE);
	sq_set_target_queue(q, NULL);
	CHECK_EQ(class_on(q), SQ_QOS_CLASS_BACKGROUND);
	sq_release(q);
	/* a plain queue: NULL is DEFAULT's */
	q = sq_queue_create_with_target("com.example.plain", NULL,
			sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0));
	CHECK_EQ(class_on(q), SQ_QOS_CLASS_BACKGROUND);
	sq_set_target_queue(q, NULL);
	CHECK_EQ(class_on(q), SQ_QOS_CLASS_DEFAULT);
	sq_release(q);
}

/* ---- work items ------------------------------------------------------------------- */

/* The class an item sees when submitted to q. Polled, not waited for: a
 * waiter of a higher class (this thread is DEFAULT) raises the item
 * (sq_workitem_wait's rule), which is not what these checks are about. */
static sq_qos_class_t
item_class_on(sq_queue_t q, sq_workitem_t item, struct seen *s)
{
	sq_async_workitem(q, item);
	bool ran = sqt_wait_int(&s->ran, 1, 5000);
	CHECK(ran);
	/* finished: the wait returns at once, raising nothing */
	CHECK_EQ(sq_workitem_wait(item, SQ_TIME_NOW), 0);
	sq_release(item);
	return ran ? atomic_load(&s->qos) : 0xdead;
}

static sq_qos_class_t
item_on(sq_queue_t q, sq_workitem_flags_t flags, sq_qos_class_t qos)
{
	struct seen s;
	atomic_init(&s.qos, SQ_QOS_CLASS_UNSPECIFIED);
	atomic_init(&s.ran, 0);
	sq_workitem_t item = sq_workitem_create_with_qos_class_f(flags, qos, 0,
			&s, record_class);
	return item_class_on(q, item, &s);
}

/* ASSIGN_CURRENT: created inside a task (at that task's class), then
 * submitted (by the same task) to a BACKGROUND queue, enforced. */
struct assign {
	sq_queue_t target;
	struct seen seen;
	sq_workitem_t item;
	atomic_int made;
};

static void
make_assigned_item(void *ctx)
{
	struct assign *a = ctx;
	a->item = sq_workitem_create_f(SQ_WORKITEM_ASSIGN_CURRENT |
			SQ_WORKITEM_ENFORCE_QOS_CLASS, &a->seen, record_class);
	atomic_store(&a->made, 1);
}

static sq_qos_class_t
assigned_class(sq_queue_t creator, sq_queue_t target)
{
	struct assign a;
	memset(&a, 0, sizeof(a));
	atomic_init(&a.made, 0);
	atomic_init(&a.seen.ran, 0);
	atomic_init(&a.seen.qos, SQ_QOS_CLASS_UNSPECIFIED);
	a.target = target;
	if (creator)
		sq_async_f(creator, &a, make_assigned_item);
	else
		make_assigned_item(&a);
	if (!sqt_wait_int(&a.made, 1, 5000))
		return 0xdead;
	return item_class_on(target, a.item, &a.seen);
}

/* A serial queue on BACKGROUND: a plain one on BACKGROUND's global queue
 * (no class of its own), or one of class BACKGROUND. Fresh for each check:
 * a raise lasts until the queue has run dry, and a queue whose last item
 * just ran may not have yet. */
static sq_queue_t
bg_serial(bool own_class)
{
	return own_class ? sq_queue_create("com.example.bg-class",
			sq_queue_attr_make_with_qos_class(NULL,
			SQ_QOS_CLASS_BACKGROUND, 0)) : sq_queue_create_with_target(
			"com.example.on-bg", NULL, sq_get_global_queue(
			SQ_QOS_CLASS_BACKGROUND, 0));
}

static sq_qos_class_t
item_on_fresh(bool own_class, sq_workitem_flags_t flags, sq_qos_class_t qos)
{
	sq_queue_t q = bg_serial(own_class);
	sq_qos_class_t c = item_on(q, flags, qos);
	sq_release(q);
	return c;
}

static void
test_workitems(void)
{
	sq_queue_t bg_global = sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0);
	sq_queue_t util_global = sq_get_global_queue(SQ_QOS_CLASS_UTILITY, 0);
	/* ENFORCE at USER_INITIATED on a serial queue on BACKGROUND's global
	 * queue (no class of its own), and on a BACKGROUND-class queue: the
	 * item's class. Several times, each on an idle queue: the submission
	 * queues the queue on BACKGROUND's root, then raises it. */
	int wrong[2] = { 0, 0 };
	sq_qos_class_t last[2] = { 0, 0 };
	for (int i = 0; i < 50; i++) {
		last[0] = item_on_fresh(false, SQ_WORKITEM_ENFORCE_QOS_CLASS,
				SQ_QOS_CLASS_USER_INITIATED);
		wrong[0] += last[0] != SQ_QOS_CLASS_USER_INITIATED;
		last[1] = item_on_fresh(true, SQ_WORKITEM_ENFORCE_QOS_CLASS,
				SQ_QOS_CLASS_USER_INITIATED);
		wrong[1] += last[1] != SQ_QOS_CLASS_USER_INITIATED;
	}
	if (wrong[0] || wrong[1])
		fprintf(stderr, "ENFORCE USER_INITIATED item on a BACKGROUND "
				"serial queue: ran at another class %d of 50 times "
				"(plain queue on BACKGROUND's global queue; last "
				"%s), %d of 50 (BACKGROUND-class queue; last %s)\n",
				wrong[0], qos_name(last[0]), wrong[1],
				qos_name(last[1]));
	CHECK_EQ(wrong[0], 0);
	CHECK_EQ(wrong[1], 0);
	/* INHERIT (the default) on a queue with a class of its own: the
	 * queue's class; on one without: the item's (never below the
	 * target's) */
	CHECK_EQ(item_on_fresh(true, SQ_WORKITEM_INHERIT_QOS_CLASS,
			SQ_QOS_CLASS_USER_INITIATED), SQ_QOS_CLASS_BACKGROUND);
	CHECK_EQ(item_on_fresh(true, 0, SQ_QOS_CLASS_USER_INTERACTIVE),
			SQ_QOS_CLASS_BACKGROUND);
	CHECK_EQ(item_on_fresh(false, SQ_WORKITEM_INHERIT_QOS_CLASS,
			SQ_QOS_CLASS_UTILITY), SQ_QOS_CLASS_UTILITY);
	/* a queue of a higher class than the item: the queue's class, even
	 * enforced (the item's class wins only when higher) */
	sq_queue_t ui_class = sq_queue_create("com.example.ui-class",
			sq_queue_attr_make_with_qos_class(NULL,
			SQ_QOS_CLASS_USER_INTERACTIVE, 0));
	CHECK_EQ(item_on(ui_class, SQ_WORKITEM_ENFORCE_QOS_CLASS,
			SQ_QOS_CLASS_BACKGROUND), SQ_QOS_CLASS_USER_INTERACTIVE);
	/* global queues have their own class: without ENFORCE the item runs
	 * at the global queue's, with it at its own */
	CHECK_EQ(item_on(util_global, 0, SQ_QOS_CLASS_USER_INTERACTIVE),
			SQ_QOS_CLASS_UTILITY);
	CHECK_EQ(item_on(bg_global, SQ_WORKITEM_INHERIT_QOS_CLASS,
			SQ_QOS_CLASS_DEFAULT), SQ_QOS_CLASS_BACKGROUND);
	CHECK_EQ(item_on(bg_global, SQ_WORKITEM_ENFORCE_QOS_CLASS,
			SQ_QOS_CLASS_USER_INTERACTIVE),
			SQ_QOS_CLASS_USER_INTERACTIVE);
	/* UNSPECIFIED: an item without a class, even enforced */
	CHECK_EQ(item_on(util_global, SQ_WORKITEM_ENFORCE_QOS_CLASS,
			SQ_QOS_CLASS_UNSPECIFIED), SQ_QOS_CLASS_UTILITY);
	/* ASSIGN_CURRENT: the class of the thread that creates the item */
	sq_queue_t ui_global = sq_get_global_queue(
			SQ_QOS_CLASS_USER_INTERACTIVE, 0);
	CHECK_EQ(assigned_class(ui_global, bg_global),
			SQ_QOS_CLASS_USER_INTERACTIVE);
	CHECK_EQ(assigned_class(ui_class, bg_global),
			SQ_QOS_CLASS_USER_INTERACTIVE);
	CHECK_EQ(assigned_class(util_global, bg_global), SQ_QOS_CLASS_UTILITY);
	CHECK_EQ(assigned_class(NULL, bg_global), SQ_QOS_CLASS_DEFAULT);
	/* without ASSIGN_CURRENT, sq_workitem_create_f gives no class */
	struct seen s;
	atomic_init(&s.qos, SQ_QOS_CLASS_UNSPECIFIED);
	atomic_init(&s.ran, 0);
	CHECK_EQ(item_class_on(bg_global, sq_workitem_create_f(
			SQ_WORKITEM_ENFORCE_QOS_CLASS, &s, record_class), &s),
			SQ_QOS_CLASS_BACKGROUND);
	sq_release(ui_class);
}

/* ---- an override ------------------------------------------------------------------ */

#define OV_TASKS 20
#define OV_TASK_US 2000
#define OV_FLOOD_US 1000

struct override {
	sq_queue_t serial;
	atomic_int stop;          /* the flood ends */
	atomic_int flood_running;
	uint64_t t_queued;        /* the serial queue's tasks queued */
	_Atomic uint64_t sync_begin, sync_end, caller_start;
	atomic_int sync_done;
	atomic_int ran;           /* serial tasks run */
	atomic_int ran_in_body;   /* ... when the sync's function ran */
	_Atomic uint64_t start[OV_TASKS];
	atomic_uint qos[OV_TASKS];
	atomic_uint caller_qos;
	_Atomic uint64_t all_done;
};

struct ov_task {
	struct override *o;
	int i;
};

static void
flood_task(void *ctx)
{
	struct override *o = ctx;
	if (atomic_load(&o->stop)) {
		atomic_fetch_sub(&o->flood_running, 1);
		return;
	}
	cpu_spin_us(OV_FLOOD_US);
	sq_async_f(sq_get_global_queue(SQ_QOS_CLASS_DEFAULT, 0), o, flood_task);
}

static void
serial_task(void *ctx)
{
	struct ov_task *t = ctx;
	struct override *o = t->o;
	atomic_store(&o->start[t->i], sqt_now_ns());
	atomic_store(&o->qos[t->i], sq_qos_class_self());
	cpu_spin_us(OV_TASK_US);
	if (atomic_fetch_add(&o->ran, 1) + 1 == OV_TASKS)
		atomic_store(&o->all_done, sqt_now_ns());
}

static void
sync_body(void *ctx)
{
	struct override *o = ctx;
	atomic_store(&o->ran_in_body, atomic_load(&o->ran));
}

static void
sync_caller(void *ctx)
{
	struct override *o = ctx;
	atomic_store(&o->caller_start, sqt_now_ns());
	atomic_store(&o->caller_qos, sq_qos_class_self());
	atomic_store(&o->sync_begin, sqt_now_ns());
	sq_sync_f(o->serial, o, sync_body);
	atomic_store(&o->sync_end, sqt_now_ns());
	atomic_store(&o->sync_done, 1);
}

/* One run: the flood, the serial queue's tasks, then (caller_qos not
 * UNSPECIFIED) a task of that class that syncs onto the queue. Returns
 * false if it did not finish in time. */
static bool
override_run(struct override *o, sq_qos_class_t caller, int width)
{
	memset(o, 0, sizeof(*o));
	o->serial = sq_queue_create_with_target("com.example.override", NULL,
			sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0));
	/* the flood: more DEFAULT tasks than workers, each 1 ms of CPU,
	 * each queueing the next */
	int nflood = 2 * width + 2;
	atomic_store(&o->flood_running, nflood);
	for (int i = 0; i < nflood; i++)
		sq_async_f(sq_get_global_queue(SQ_QOS_CLASS_DEFAULT, 0), o,
				flood_task);
	sqt_sleep_ms(20);
	struct ov_task tasks[OV_TASKS];
	o->t_queued = sqt_now_ns();
	for (int i = 0; i < OV_TASKS; i++) {
		tasks[i].o = o;
		tasks[i].i = i;
		sq_async_f(o->serial, &tasks[i], serial_task);
	}
	bool ok;
	if (caller != SQ_QOS_CLASS_UNSPECIFIED) {
		sq_async_f(sq_get_global_queue(caller, 0), o, sync_caller);
		ok = sqt_wait_int(&o->sync_done, 1, 20000);
	} else {
		ok = sqt_wait_int(&o->ran, OV_TASKS, 20000);
	}
	atomic_store(&o->stop, 1);
	/* the tasks refer to this frame: let them all finish */
	if (!sqt_wait_int(&o->ran, OV_TASKS, 30000))
		ok = false;
	uint64_t deadline = sqt_now_ns() + 10000000000ull;
	while (atomic_load(&o->flood_running) > 0 && sqt_now_ns() < deadline)
		sqt_sleep_ms(1);
	ok &= atomic_load(&o->flood_running) == 0;
	sq_release(o->serial);
	return ok;
}

static void
test_override(void)
{
	int width = sqt_pool_width();
	static struct override o;
	/* USER_INTERACTIVE caller: it raises the queue and takes it over */
	bool ok = override_run(&o, SQ_QOS_CLASS_USER_INTERACTIVE, width);
	CHECK(ok);
	if (!ok)
		return;
	double sync_ms = (double)(o.sync_end - o.sync_begin) / 1e6;
	double caller_wait_ms = (double)(o.caller_start - o.t_queued) / 1e6;
	CHECK_EQ(atomic_load(&o.caller_qos), SQ_QOS_CLASS_USER_INTERACTIVE);
	/* FIFO: the sync's function after every task queued before it */
	CHECK_EQ(atomic_load(&o.ran_in_body), OV_TASKS);
	/* generous: 20 x 2 ms of CPU, shared with the flood's workers */
	double bound_ms = SQT_SCALE(2000.0, 6000.0);
	CHECK(sync_ms < bound_ms);
	/* the tasks that started after the sync began run raised: at the
	 * caller's class (on its thread, or a raised drain), but for the one
	 * a BACKGROUND drainer may have taken as the raise came */
	int after = 0, raised = 0, other = 0;
	for (int i = 0; i < OV_TASKS; i++) {
		sq_qos_class_t q = atomic_load(&o.qos[i]);
		if (q != SQ_QOS_CLASS_BACKGROUND &&
				q != SQ_QOS_CLASS_USER_INTERACTIVE)
			other++;
		if (atomic_load(&o.start[i]) < o.sync_begin)
			continue;
		after++;
		raised += q == SQ_QOS_CLASS_USER_INTERACTIVE;
	}
	CHECK_EQ(other, 0);
	CHECK(after >= OV_TASKS - 2);
	CHECK(raised >= after - 1);
	printf("override (width %d): USER_INTERACTIVE caller started %.1f ms "
			"after the queue's tasks were queued; its sync took %.1f ms; "
			"%d of the %d tasks started after the sync began, %d of them "
			"at USER_INTERACTIVE\n", width, caller_wait_ms, sync_ms,
			after, OV_TASKS, raised);
	if (after < OV_TASKS - 2 || raised < after - 1 || other) {
		for (int i = 0; i < OV_TASKS; i++)
			fprintf(stderr, "  task %2d: started %+.2f ms from the "
					"sync's start, at %s\n", i, ((double)atomic_load(
					&o.start[i]) - (double)o.sync_begin) / 1e6,
					qos_name(atomic_load(&o.qos[i])));
	}
	/* for comparison, not checked (SQT_QOS_COMPARE=1: a few seconds at
	 * width 8): no caller at all (the queue advances only by the aging
	 * share), and a BACKGROUND caller (no raise; its sync still takes the
	 * queue over, at BACKGROUND's CPU priority) */
	const char *cmp = getenv("SQT_QOS_COMPARE");
	if (cmp == NULL || *cmp == '\0' || *cmp == '0')
		return;
	if (override_run(&o, SQ_QOS_CLASS_UNSPECIFIED, width))
		printf("override (width %d): without a caller, the 20 tasks "
				"took %.1f ms under the flood\n", width,
				(double)(o.all_done - o.t_queued) / 1e6);
	if (override_run(&o, SQ_QOS_CLASS_BACKGROUND, width))
		printf("override (width %d): a BACKGROUND caller started %.1f "
				"ms after the tasks were queued, its sync took %.1f "
				"ms (%.1f ms in all)\n", width, (double)(o.caller_start
				- o.t_queued) / 1e6, (double)(o.sync_end -
				o.sync_begin) / 1e6, (double)(o.sync_end -
				o.t_queued) / 1e6);
}

int
main(void)
{
	test_misuse();
	test_attributes();
	test_reported_classes();
	test_work_class();
	test_kinds();
	test_retarget();
	test_workitems();
	test_override();
	return sqt_finish("test_qos");
}
