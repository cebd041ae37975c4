/*
 * Dispatch block objects: a block made with dispatch_block_create is
 * called, copied, submitted, waited for, observed and cancelled through
 * the block itself, and through the C11 generic calls.
 */
#include <dispatch/dispatch.h>
#include <Block.h>
#include <stdio.h>
#include <unistd.h>

static int passed, failed;
#define EXPECT(cond) do { \
	if (cond) passed++; \
	else { failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

int
main(void)
{
	dispatch_queue_t queue = dispatch_queue_create("com.example.work", NULL);
	dispatch_queue_t notify = dispatch_queue_create("com.example.notify", NULL);

	/* Submitted, waited for and observed. */
	__block int steps = 0;
	dispatch_block_t work = dispatch_block_create(0, ^{
		usleep(10000);
		steps++;
	});
	dispatch_async(queue, work);
	__block int notified_after = -1;
	dispatch_block_notify(work, notify, ^{ notified_after = steps; });
	EXPECT(dispatch_block_wait(work, dispatch_time(DISPATCH_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0);
	EXPECT(steps == 1);
	dispatch_sync(notify, ^{ });
	EXPECT(notified_after == 1);

	/* A copy is the same block object: it does not run the work again. */
	dispatch_block_t copy = Block_copy(work);
	copy();
	dispatch_sync(queue, copy);
	EXPECT(steps == 1);
	Block_release(copy);
	Block_release(work);

	/* Cancelled while waiting behind a suspended queue: never runs. */
	__block int cancelled_ran = 0;
	dispatch_block_t stale = dispatch_block_create(0, ^{ cancelled_ran = 1; });
	dispatch_suspend(queue);
	dispatch_async(queue, stale);
	dispatch_block_cancel(stale);
	EXPECT(dispatch_block_testcancel(stale) != 0);
	EXPECT(dispatch_block_wait(stale, DISPATCH_TIME_NOW) == 0);
	dispatch_resume(queue);
	dispatch_sync(queue, ^{ });
	EXPECT(cancelled_ran == 0);
	Block_release(stale);

	/* A barrier block on a concurrent queue runs alone. */
	dispatch_queue_t concurrent = dispatch_queue_create("com.example.concurrent",
			DISPATCH_QUEUE_CONCURRENT);
	__block int active = 0;
	__block int barrier_alone = 0;
	for (int i = 0; i < 8; i++)
		dispatch_async(concurrent, ^{
			__atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);
			usleep(2000);
			__atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
		});
	dispatch_block_t barrier = dispatch_block_create(DISPATCH_BLOCK_BARRIER, ^{
		barrier_alone = __atomic_load_n(&active, __ATOMIC_SEQ_CST) == 0;
	});
	dispatch_async(concurrent, barrier);
	EXPECT(dispatch_wait(barrier, DISPATCH_TIME_FOREVER) == 0);
	EXPECT(barrier_alone);
	Block_release(barrier);

	/* With a class, and performed on the spot. */
	__block dispatch_qos_class_t qos = QOS_CLASS_UNSPECIFIED;
	dispatch_block_t classed = dispatch_block_create_with_qos_class(
			DISPATCH_BLOCK_ENFORCE_QOS_CLASS, QOS_CLASS_USER_INITIATED, 0, ^{
		qos = QOS_CLASS_USER_INITIATED;
	});
	classed();
	EXPECT(qos == QOS_CLASS_USER_INITIATED);
	Block_release(classed);
	__block int performed = 0;
	dispatch_block_perform(0, ^{ performed++; });
	EXPECT(performed == 1);

	/* The C11 generic calls pick the call for each type. */
	dispatch_group_t group = dispatch_group_create();
	dispatch_semaphore_t sema = dispatch_semaphore_create(0);
	EXPECT(dispatch_wait(group, DISPATCH_TIME_NOW) == 0);
	EXPECT(dispatch_wait(sema, dispatch_time(DISPATCH_TIME_NOW, NSEC_PER_MSEC)) != 0);
	__block int group_done = 0;
	dispatch_group_async(group, queue, ^{ usleep(1000); });
	dispatch_notify(group, notify, ^{ group_done = 1; });
	dispatch_wait(group, DISPATCH_TIME_FOREVER);
	dispatch_sync(notify, ^{ });
	EXPECT(group_done == 1);
	dispatch_source_t source = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_OR,
			0, 0, queue);
	EXPECT(dispatch_testcancel(source) == 0);
	dispatch_cancel(source);
	EXPECT(dispatch_testcancel(source) != 0);
	dispatch_block_t later = dispatch_block_create(0, ^{ });
	dispatch_cancel(later);
	EXPECT(dispatch_testcancel(later) != 0);
	Block_release(later);

	dispatch_release(source);
	dispatch_release(sema);
	dispatch_release(group);
	dispatch_release(concurrent);
	dispatch_release(notify);
	dispatch_release(queue);
	printf("block_objects: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
