/*
 * libdispatch's dispatch_block_* as sq_block_* (clang -fblocks): a block
 * made by sq_block_create is a real block the program calls, copies and
 * submits, that runs its body at most once, and that sq_block_wait /
 * notify / cancel / testcancel find their work item through; the item
 * lives exactly as long as the last copy of the block (the finalizer
 * counts below, ASan in make test-asan). Also the C11 generic calls.
 */
#include "sqtest.h"

#define SECONDS(n) sq_time(SQ_TIME_NOW, (int64_t)(n) * (int64_t)NSEC_PER_SEC)

static volatile int32_t bodies_freed;

/* The finalizer of a work item made by sq_block_create: counts, then
 * releases the user block as the one it replaces would. */
static void
count_and_release(void *ctx)
{
	sq_atomic_inc32(&bodies_freed);
	_Block_release(ctx);
}

static int32_t
freed_count(void)
{
	/* Acquire: pairs with the finalizer's increment (seq_cst). */
	return __atomic_load_n(&bodies_freed, __ATOMIC_ACQUIRE);
}

static void
call_not_ours(void *ctx)
{
	(void)ctx;
	sq_block_t plain = ^{ };
	(void)sq_block_wait(plain, SQ_TIME_NOW);
}

static void
cancel_null(void *ctx)
{
	sq_block_cancel((sq_block_t)ctx);
}

int
main(void)
{
	sq_queue_t q = sq_queue_create("com.example.blockobjects", NULL);
	sq_queue_t c = sq_queue_create("com.example.blockobjects.c",
			SQ_QUEUE_CONCURRENT);

	/* Called directly, several times and through copies: the body runs
	 * once, and a wait returns at once afterwards. */
	__block int runs = 0;
	sq_block_t b = sq_block_create(0, ^{ runs++; });
	CHECK(sq_workitem_from_block((const void *)b) != NULL);
	CHECK_EQ(sq_workitem_from_block((const void *)^{ }), NULL);
	CHECK_EQ(sq_block_wait(b, SQ_TIME_NOW) != 0, 1);
	sq_block_t copy = (sq_block_t)_Block_copy((const void *)b);
	CHECK(copy == b); /* a heap block: copying adds a reference */
	b();
	copy();
	CHECK_EQ(runs, 1);
	CHECK_EQ(sq_block_wait(b, SQ_TIME_NOW), 0);
	_Block_release((const void *)copy);
	_Block_release((const void *)b);

	/* Submitted with sq_async, waited for, notified. */
	sq_semaphore_t gate = sq_semaphore_create(0);
	static int order[3];
	__block int n = 0;
	b = sq_block_create(0, ^{
		sq_semaphore_wait(gate, SQ_TIME_FOREVER);
		order[n++] = 1;
	});
	sq_async(q, b);
	sq_semaphore_t notified = sq_semaphore_create(0);
	sq_block_notify(b, q, ^{
		order[n++] = 2;
		sq_semaphore_signal(notified);
	});
	CHECK(sq_block_wait(b, sq_time(SQ_TIME_NOW, 50 * NSEC_PER_MSEC)) != 0);
	sq_semaphore_signal(gate);
	CHECK_EQ(sq_block_wait(b, SECONDS(10)), 0);
	/* The notification was submitted before the wait returned (as in
	 * libdispatch): a task sent to its queue now runs after it. */
	__block int notified_first = 0;
	sq_sync(q, ^{ notified_first = n == 2; });
	CHECK_EQ(notified_first, 1);
	CHECK_EQ(sq_semaphore_wait(notified, SECONDS(10)), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(order[0], 1);
	CHECK_EQ(order[1], 2);
	_Block_release((const void *)b);

	/* Cancelled before it runs: never runs, waits return, testcancel. */
	runs = 0;
	sq_suspend(q);
	b = sq_block_create(0, ^{ runs++; });
	sq_async(q, b);
	CHECK_EQ(sq_block_testcancel(b), 0);
	sq_block_cancel(b);
	CHECK(sq_block_testcancel(b) != 0);
	CHECK_EQ(sq_block_wait(b, SQ_TIME_NOW), 0);
	sq_resume(q);
	sq_sync(q, ^{ });
	b();
	CHECK_EQ(runs, 0);
	_Block_release((const void *)b);

	/* SQ_BLOCK_BARRIER: submitted with sq_async it runs alone. */
	__block volatile int32_t inside = 0;
	__block int barrier_alone = 0;
	for (int i = 0; i < 20; i++)
		sq_async(c, ^{
			sq_atomic_inc32(&inside);
			usleep(500);
			sq_atomic_dec32(&inside);
		});
	b = sq_block_create(SQ_BLOCK_BARRIER, ^{
		barrier_alone = sq_atomic_inc32(&inside) == 1;
		usleep(2000);
		sq_atomic_dec32(&inside);
	});
	sq_async(c, b);
	for (int i = 0; i < 20; i++)
		sq_async(c, ^{
			sq_atomic_inc32(&inside);
			sq_atomic_dec32(&inside);
		});
	CHECK_EQ(sq_block_wait(b, SECONDS(10)), 0);
	sq_barrier_sync(c, ^{ });
	CHECK_EQ(barrier_alone, 1);
	_Block_release((const void *)b);

	/* With a class; sq_block_perform. */
	__block sq_qos_class_t seen = SQ_QOS_CLASS_UNSPECIFIED;
	b = sq_block_create_with_qos_class(SQ_BLOCK_ENFORCE_QOS_CLASS,
			SQ_QOS_CLASS_USER_INITIATED, 0, ^{
				seen = sq_qos_class_self();
				sq_semaphore_signal(gate);
			});
	sq_async(sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0), b);
	/* Not sq_block_wait: a waiter raises the item to its own class. */
	CHECK_EQ(sq_semaphore_wait(gate, SECONDS(10)), 0);
	CHECK_EQ(seen, SQ_QOS_CLASS_USER_INITIATED);
	_Block_release((const void *)b);
	runs = 0;
	sq_block_perform(0, ^{ runs++; });
	CHECK_EQ(runs, 1);

	/* Lifetime: the user block (and what it captured) goes with the
	 * last copy of the made block, after it ran or not. */
	for (int i = 0; i < 2; i++) {
		/* `inner` is captured by the body of `b`: it goes when that
		 * body's copy goes, and its own item's finalizer counts. */
		sq_block_t inner = sq_block_create(0, ^{ });
		sq_set_finalizer_f(sq_workitem_from_block((const void *)inner),
				count_and_release);
		b = sq_block_create(0, ^{ (void)inner; });
		_Block_release((const void *)inner);
		if (i == 0)
			sq_async(q, b);
		sq_block_t second = (sq_block_t)_Block_copy((const void *)b);
		_Block_release((const void *)b);
		sq_sync(q, ^{ });
		usleep(20000);
		CHECK_EQ(freed_count(), i); /* `second` still holds it */
		_Block_release((const void *)second);
		for (int w = 0; w < 500 && freed_count() != i + 1; w++)
			usleep(10000);
		CHECK_EQ(freed_count(), i + 1);
	}

	/* The C11 generic calls. */
	sq_group_t g = sq_group_create();
	sq_semaphore_t s = sq_semaphore_create(1);
	CHECK_EQ(sq_wait(g, SQ_TIME_NOW), 0);
	CHECK_EQ(sq_wait(s, SQ_TIME_NOW), 0);
	CHECK(sq_wait(s, SQ_TIME_NOW) != 0);
	sq_group_enter(g);
	CHECK(sq_wait(g, SQ_TIME_NOW) != 0);
	__block int group_notified = 0;
	sq_notify(g, q, ^{ group_notified = 1; });
	sq_group_leave(g);
	CHECK_EQ(sq_wait(g, SECONDS(10)), 0);
	b = sq_block_create(0, ^{ });
	CHECK_EQ(sq_testcancel(b), 0);
	sq_cancel(b);
	CHECK(sq_testcancel(b) != 0);
	CHECK_EQ(sq_wait(b, SQ_TIME_NOW), 0);
	__block int block_notified = 0;
	sq_notify(b, q, ^{ block_notified = 1; });
	_Block_release((const void *)b);
	sq_workitem_t item = sq_workitem_create(0, ^{ });
	CHECK_EQ(sq_testcancel(item), 0);
	sq_cancel(item);
	CHECK_EQ(sq_testcancel(item), 1);
	CHECK_EQ(sq_wait(item, SQ_TIME_NOW), 0);
	sq_release(item);
	sq_source_t src = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, q);
	CHECK_EQ(sq_testcancel(src), 0);
	sq_cancel(src);
	CHECK(sq_testcancel(src) != 0);
	sq_release(src);
	sq_sync(q, ^{ });
	CHECK_EQ(group_notified, 1);
	CHECK_EQ(block_notified, 1);

	CHECK_CRASH(call_not_ours, NULL,
			"SwiftQueues: sq_block_wait: the block was not made by "
			"sq_block_create");
	CHECK_CRASH(cancel_null, NULL, /* ctx: the NULL block */
			"SwiftQueues: sq_block_cancel: block is NULL");

	sq_release(g);
	sq_semaphore_signal(s);
	sq_release(s);
	sq_release(gate);
	sq_release(notified);
	sq_release(q);
	sq_release(c);
	return sqt_finish("block_objects");
}
