/*
 * libdispatch's remaining queue calls: the autorelease-frequency
 * attribute (no pools on Linux: a queue made with it is what the
 * attribute it started from makes: concurrent, inactive, its class) and the _debug assertions, which
 * assert in programs built with SQ_DEBUG (this one) and do nothing else.
 */
#define SQ_DEBUG 1
#include "queue_helpers.h"

static sq_queue_t other;

static void
assert_debug_elsewhere(void *ctx)
{
	(void)ctx;
	sq_assert_queue_debug(other);
}

static void
assert_not_debug_inside(void *ctx)
{
	sq_assert_queue_not_debug((sq_queue_t)ctx);
}

static void
assert_not_debug_here(void *ctx)
{
	sq_sync_f((sq_queue_t)ctx, ctx, assert_not_debug_inside);
}

static void
count_run(void *ctx)
{
	sq_atomic_inc32((volatile int32_t *)ctx);
}

static void
nothing(void *ctx)
{
	(void)ctx;
}

static int fine;

static void
asserts_inside(void *ctx)
{
	sq_queue_t mine = ctx;
	sq_assert_queue_debug(mine);
	sq_assert_queue_barrier_debug(mine);
	sq_assert_queue_not_debug(other);
	fine = 1;
}

int
main(void)
{
	/* Every frequency keeps the attribute: a concurrent queue stays
	 * concurrent, an inactive one inactive, a class its class. */
	sq_autorelease_frequency_t freqs[] = {
		SQ_AUTORELEASE_FREQUENCY_INHERIT,
		SQ_AUTORELEASE_FREQUENCY_WORK_ITEM,
		SQ_AUTORELEASE_FREQUENCY_NEVER,
	};
	for (size_t i = 0; i < 3; i++) {
		CHECK_EQ(sq_queue_attr_make_with_autorelease_frequency(NULL,
				freqs[i]), SQ_QUEUE_SERIAL);
		CHECK(sq_queue_attr_make_with_autorelease_frequency(
				SQ_QUEUE_CONCURRENT, freqs[i]) ==
				SQ_QUEUE_CONCURRENT);
		sq_queue_attr_t a = sq_queue_attr_make_with_qos_class(
				SQ_QUEUE_CONCURRENT_INACTIVE,
				SQ_QOS_CLASS_UTILITY, -3);
		sq_queue_attr_t b =
				sq_queue_attr_make_with_autorelease_frequency(a,
				freqs[i]);
		sq_queue_t q = sq_queue_create("attr", b);
		int rel = 0;
		CHECK_EQ(sq_queue_get_qos_class(q, &rel), SQ_QOS_CLASS_UTILITY);
		CHECK_EQ(rel, -3);
		/* Concurrent and inactive, as the queue's description says;
		 * nothing runs before sq_activate. */
		char text[512];
		sq_object_describe(q, text, sizeof(text));
		CHECK(strstr(text, "kind = concurrent") != NULL);
		CHECK(strstr(text, "inactive = 1") != NULL);
		volatile int32_t ran = 0;
		sq_async_f(q, (void *)&ran, count_run);
		usleep(20000);
		CHECK_EQ(ran, 0);
		sq_activate(q);
		sq_barrier_sync_f(q, NULL, nothing);
		CHECK_EQ(ran, 1);
		sq_release(q);
	}
	/* An unknown frequency leaves the attribute as it is. */
	CHECK(sq_queue_attr_make_with_autorelease_frequency(
			SQ_QUEUE_CONCURRENT, 7) == SQ_QUEUE_CONCURRENT);

	/* The _debug assertions assert under SQ_DEBUG. */
	other = sq_queue_create("com.example.other", NULL);
	sq_queue_t mine = sq_queue_create("com.example.mine", NULL);
	sq_sync_f(mine, mine, asserts_inside);
	CHECK_EQ(fine, 1);
	CHECK_CRASH(assert_debug_elsewhere, NULL,
			"SwiftQueues: sq_assert_queue:");
	CHECK_CRASH(assert_not_debug_here, mine,
			"SwiftQueues: sq_assert_queue_not:");
	sq_release(other);
	sq_release(mine);
	return sqt_finish("queue_attr_extra");
}
