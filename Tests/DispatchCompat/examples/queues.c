/*
 * Dispatch queues as the concurrency guides teach them, in libdispatch's
 * own spelling: a serial queue guarding a resource (FIFO, one at a time),
 * a completion callback delivered on the caller's queue, a loop made
 * concurrent with dispatch_apply, a queue's context freed by its
 * finalizer, suspension, a semaphore bounding a resource, a group
 * waited for, and data turned into base64 text.
 */
#include <dispatch/dispatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int passed, failed;
#define EXPECT(cond) do { \
	if (cond) passed++; \
	else { failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

static void
free_context(void *context)
{
	/* Runs after the last release, with the context. */
	*(int *)context = -1;
}

static void
average_async(const int *values, size_t count, dispatch_queue_t caller,
		void (^completion)(int average))
{
	dispatch_async(dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0), ^{
		long sum = 0;
		for (size_t i = 0; i < count; i++)
			sum += values[i];
		int average = (int)(sum / (long)count);
		dispatch_async(caller, ^{ completion(average); });
	});
}

int
main(void)
{
	/* A serial queue: tasks run one at a time, in the order sent. */
	dispatch_queue_t serial = dispatch_queue_create("com.example.serial", NULL);
	EXPECT(strcmp(dispatch_queue_get_label(serial), "com.example.serial") == 0);
	static int order[100];
	__block int next = 0, inside = 0, overlapped = 0;
	for (int i = 0; i < 100; i++)
		dispatch_async(serial, ^{
			if (inside++ != 0)
				overlapped = 1;
			order[next++] = i;
			inside--;
		});
	__block int seen;
	dispatch_sync(serial, ^{ seen = next; });
	EXPECT(seen == 100);
	EXPECT(overlapped == 0);
	int in_order = 1;
	for (int i = 0; i < 100; i++)
		in_order &= order[i] == i;
	EXPECT(in_order);

	/* A completion block delivered back on the caller's queue. */
	static const int values[] = { 2, 4, 6, 8 };
	dispatch_semaphore_t done = dispatch_semaphore_create(0);
	__block int average = 0;
	__block int on_serial = 0;
	average_async(values, 4, serial, ^(int avg) {
		average = avg;
		on_serial = dispatch_get_current_queue() == serial;
		dispatch_semaphore_signal(done);
	});
	EXPECT(dispatch_semaphore_wait(done, dispatch_time(DISPATCH_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0);
	EXPECT(average == 5);
	EXPECT(on_serial);

	/* Loop iterations run concurrently; every index exactly once. */
	size_t count = 1000;
	int *hits = calloc(count, sizeof(int));
	dispatch_apply(count, dispatch_get_global_queue(QOS_CLASS_UTILITY, 0), ^(size_t i) {
		__atomic_add_fetch(&hits[i], 1, __ATOMIC_RELAXED);
	});
	int once_each = 1;
	for (size_t i = 0; i < count; i++)
		once_each &= hits[i] == 1;
	EXPECT(once_each);
	free(hits);

	/* A queue's context and its clean-up function. */
	static int context_value = 42;
	dispatch_queue_t owned = dispatch_queue_create("com.example.owned", DISPATCH_QUEUE_CONCURRENT);
	dispatch_set_context(owned, &context_value);
	dispatch_set_finalizer_f(owned, free_context);
	EXPECT(dispatch_get_context(owned) == &context_value);
	dispatch_release(owned);
	for (int i = 0; i < 500 && context_value != -1; i++)
		usleep(10000);
	EXPECT(context_value == -1);

	/* Suspended, a queue starts nothing until resumed. */
	__block int ran = 0;
	dispatch_suspend(serial);
	dispatch_async(serial, ^{ ran = 1; });
	usleep(20000);
	EXPECT(ran == 0);
	dispatch_resume(serial);
	dispatch_sync(serial, ^{ });
	EXPECT(ran == 1);

	/* A semaphore bounding a resource: at most 3 users at once. */
	dispatch_semaphore_t slots = dispatch_semaphore_create(3);
	dispatch_group_t group = dispatch_group_create();
	__block int users = 0, most = 0;
	dispatch_queue_t counter = dispatch_queue_create("com.example.counter", NULL);
	for (int i = 0; i < 12; i++)
		dispatch_group_async(group, dispatch_get_global_queue(0, 0), ^{
			dispatch_semaphore_wait(slots, DISPATCH_TIME_FOREVER);
			dispatch_sync(counter, ^{ if (++users > most) most = users; });
			usleep(2000);
			dispatch_sync(counter, ^{ users--; });
			dispatch_semaphore_signal(slots);
		});
	EXPECT(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW,
			20 * NSEC_PER_SEC)) == 0);
	EXPECT(most >= 1 && most <= 3);

	/* Data through a transform: base64 of "foobar". */
	dispatch_data_t raw = dispatch_data_create("foobar", 6, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
	dispatch_data_t b64 = dispatch_data_create_with_transform(raw,
			DISPATCH_DATA_FORMAT_TYPE_NONE, DISPATCH_DATA_FORMAT_TYPE_BASE64);
	const void *text = NULL;
	size_t text_size = 0;
	dispatch_data_t flat = dispatch_data_create_map(b64, &text, &text_size);
	EXPECT(text_size == 8 && memcmp(text, "Zm9vYmFy", 8) == 0);
	dispatch_release(flat);
	dispatch_release(b64);
	dispatch_release(raw);

	dispatch_release(counter);
	dispatch_release(group);
	dispatch_release(slots);
	dispatch_release(done);
	dispatch_release(serial);
	printf("queues: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
