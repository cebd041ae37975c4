/*
 * The block forms of the queue, group, work item and source API
 * (clang -fblocks): each wrapper copies, runs and releases its block.
 */
#include "sqtest.h"

int
main(void)
{
	sq_queue_t q = sq_queue_create("com.example.blocks", NULL);
	sq_queue_t c = sq_queue_create("com.example.blocks.c",
			SQ_QUEUE_CONCURRENT);
	__block int counter = 0;

	for (int i = 0; i < 100; i++)
		sq_async(q, ^{ counter++; });
	sq_sync(q, ^{ counter += 1000; });
	CHECK_EQ(counter, 1100);

	__block int inside = 0, overlap = 0;
	for (int i = 0; i < 50; i++) {
		sq_async(c, ^{ usleep(100); });
		if (i % 10 == 0)
			sq_barrier_async(c, ^{
				if (sq_atomic_inc32((volatile int32_t *)&inside) != 1)
					overlap++;
				sq_atomic_dec32((volatile int32_t *)&inside);
			});
	}
	sq_barrier_sync(c, ^{ counter = -1; });
	CHECK_EQ(counter, -1);
	CHECK_EQ(overlap, 0);

	__block volatile int64_t sum = 0;
	sq_apply(1000, SQ_APPLY_AUTO, ^(size_t i) {
		sq_atomic_add64(&sum, (int64_t)i);
	});
	CHECK_EQ(sum, 499500);

	sq_group_t g = sq_group_create();
	__block volatile int32_t members = 0;
	for (int i = 0; i < 10; i++)
		sq_group_async(g, c, ^{ sq_atomic_inc32(&members); });
	sq_semaphore_t notified = sq_semaphore_create(0);
	sq_group_notify(g, q, ^{ sq_semaphore_signal(notified); });
	CHECK_EQ(sq_semaphore_wait(notified, sq_time(SQ_TIME_NOW,
			10 * (int64_t)NSEC_PER_SEC)), 0);
	CHECK_EQ(members, 10);

	__block volatile int32_t item_runs = 0;
	sq_workitem_t item = sq_workitem_create(0, ^{
		sq_atomic_inc32(&item_runs);
	});
	sq_workitem_t skipped = sq_workitem_create(0, ^{
		sq_atomic_inc32(&item_runs);
	});
	sq_workitem_cancel(skipped);
	sq_async_workitem(q, item);
	sq_async_workitem(q, skipped);
	CHECK_EQ(sq_workitem_wait(item, SQ_TIME_FOREVER), 0);
	sq_sync(q, ^{});
	CHECK_EQ(item_runs, 1);
	sq_release(item);
	sq_release(skipped);

	uint64_t start = sqt_now_ns();
	__block uint64_t fired_at = 0;
	sq_after(sq_time(SQ_TIME_NOW, 20 * (int64_t)NSEC_PER_MSEC), q, ^{
		fired_at = sqt_now_ns();
		sq_semaphore_signal(notified);
	});
	CHECK_EQ(sq_semaphore_wait(notified, sq_time(SQ_TIME_NOW,
			10 * (int64_t)NSEC_PER_SEC)), 0);
	CHECK(fired_at >= start + 20 * NSEC_PER_MSEC);

	sq_source_t data = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, q);
	__block uintptr_t seen = 0;
	sq_source_set_event_handler(data, ^{
		seen += sq_source_get_data(data);
		if (seen == 6)
			sq_source_cancel(data);
	});
	sq_source_set_cancel_handler(data, ^{ sq_semaphore_signal(notified); });
	sq_source_merge_data(data, 1);
	sq_source_merge_data(data, 2);
	sq_source_merge_data(data, 3);
	sq_activate(data);
	CHECK_EQ(sq_semaphore_wait(notified, sq_time(SQ_TIME_NOW,
			10 * (int64_t)NSEC_PER_SEC)), 0);
	CHECK_EQ(seen, 6);

	sq_release(data);
	sq_release(notified);
	sq_release(g);
	sq_release(q);
	sq_release(c);
	return sqt_finish("blocks_queue");
}
