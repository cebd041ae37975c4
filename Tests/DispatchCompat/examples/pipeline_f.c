/*
 * The function-pointer forms, for compilers without blocks (gcc): threads
 * replaced by queues. A producer / consumer pair hands items through a
 * serial queue and a semaphore, a thread join becomes a group wait, and
 * a lock becomes a serial queue's dispatch_sync_f.
 */
#include <dispatch/dispatch.h>
#include <stdio.h>

static int passed, failed;
#define EXPECT(cond) do { \
	if (cond) passed++; \
	else { failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define ITEMS 1000

static struct {
	dispatch_queue_t buffer_queue;  /* guards the ring below */
	dispatch_semaphore_t filled;
	int ring[ITEMS];
	int head, tail;
	long consumed_sum;
	int consumed_in_order;
} pc;

static void
push_item(void *context)
{
	pc.ring[pc.tail++] = (int)(intptr_t)context;
}

static void
pop_item(void *context)
{
	*(int *)context = pc.ring[pc.head++];
}

static void
producer(void *unused)
{
	(void)unused;
	for (int i = 0; i < ITEMS; i++) {
		dispatch_sync_f(pc.buffer_queue, (void *)(intptr_t)i, push_item);
		dispatch_semaphore_signal(pc.filled);
	}
}

static void
consumer(void *unused)
{
	(void)unused;
	pc.consumed_in_order = 1;
	for (int i = 0; i < ITEMS; i++) {
		dispatch_semaphore_wait(pc.filled, DISPATCH_TIME_FOREVER);
		int item;
		dispatch_sync_f(pc.buffer_queue, &item, pop_item);
		pc.consumed_in_order &= item == i;
		pc.consumed_sum += item;
	}
}

static void
square(void *context, size_t i)
{
	((long *)context)[i] = (long)(i * i);
}

int
main(void)
{
	pc.buffer_queue = dispatch_queue_create("com.example.buffer", DISPATCH_QUEUE_SERIAL);
	pc.filled = dispatch_semaphore_create(0);
	dispatch_group_t workers = dispatch_group_create();
	dispatch_queue_t global = dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0);
	dispatch_group_async_f(workers, global, NULL, consumer);
	dispatch_group_async_f(workers, global, NULL, producer);
	/* The join. */
	EXPECT(dispatch_group_wait(workers, dispatch_time(DISPATCH_TIME_NOW,
			30 * NSEC_PER_SEC)) == 0);
	EXPECT(pc.consumed_in_order);
	EXPECT(pc.consumed_sum == (long)ITEMS * (ITEMS - 1) / 2);

	static long squares[256];
	dispatch_apply_f(256, DISPATCH_APPLY_AUTO, squares, square);
	EXPECT(squares[255] == 255L * 255L);

	dispatch_release(workers);
	dispatch_release(pc.filled);
	dispatch_release(pc.buffer_queue);
	printf("pipeline_f: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
