/*
 * The lower-level GCD patterns: an isolation queue (concurrent reads, a
 * barrier for writes), a singleton made with dispatch_once, an existing
 * callback API wrapped in a group with enter / leave, a timer source, a
 * data source coalescing events, dispatch_after on the main queue and
 * the program ending from a main-queue task.
 */
#include <dispatch/dispatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int passed, failed;
#define EXPECT(cond) do { \
	if (cond) passed++; \
	else { failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

/* A dictionary-like store: readers in parallel, writers alone. */
struct store {
	dispatch_queue_t isolation;
	int values[16];
	int writing;
};

static struct store *
shared_store(void)
{
	static dispatch_once_t once;
	static struct store *store;
	dispatch_once(&once, ^{
		store = calloc(1, sizeof(*store));
		store->isolation = dispatch_queue_create("com.example.store",
				DISPATCH_QUEUE_CONCURRENT);
	});
	return store;
}

/* An asynchronous API with a callback, as a program already has. */
static void
fetch(int key, void (^callback)(int value))
{
	dispatch_async(dispatch_get_global_queue(QOS_CLASS_USER_INITIATED, 0), ^{
		usleep(1000);
		callback(key * key);
	});
}

static void
finish(void *unused)
{
	(void)unused;
	printf("isolation: %d passed, %d failed\n", passed, failed);
	exit(failed != 0);
}

int
main(void)
{
	struct store *s = shared_store();
	EXPECT(s == shared_store());
	__block int torn = 0;
	dispatch_group_t group = dispatch_group_create();
	for (int i = 0; i < 200; i++) {
		if (i % 20 == 0) {
			dispatch_barrier_async(s->isolation, ^{
				s->writing = 1;
				for (int k = 0; k < 16; k++)
					s->values[k] = i;
				usleep(200);
				s->writing = 0;
			});
		}
		dispatch_group_async(group, s->isolation, ^{
			int first = s->values[0];
			for (int k = 1; k < 16; k++)
				if (s->values[k] != first)
					__atomic_store_n(&torn, 1, __ATOMIC_RELAXED);
			if (s->writing)
				__atomic_store_n(&torn, 1, __ATOMIC_RELAXED);
		});
	}
	EXPECT(dispatch_group_wait(group, dispatch_time(DISPATCH_TIME_NOW,
			20 * NSEC_PER_SEC)) == 0);
	EXPECT(torn == 0);

	/* Wrapping the callback API: enter before, leave in the callback. */
	__block int sum = 0;
	dispatch_queue_t sums = dispatch_queue_create("com.example.sums", NULL);
	for (int key = 1; key <= 10; key++) {
		dispatch_group_enter(group);
		fetch(key, ^(int value) {
			dispatch_async(sums, ^{
				sum += value;
				dispatch_group_leave(group);
			});
		});
	}
	dispatch_group_wait(group, DISPATCH_TIME_FOREVER);
	EXPECT(sum == 385);

	/* A data source coalescing merges into one handler call or a few. */
	dispatch_source_t adds = dispatch_source_create(DISPATCH_SOURCE_TYPE_DATA_ADD,
			0, 0, sums);
	__block unsigned long total = 0;
	dispatch_source_set_event_handler(adds, ^{
		total += dispatch_source_get_data(adds);
	});
	dispatch_suspend(sums);
	dispatch_activate(adds);
	for (int i = 0; i < 100; i++)
		dispatch_source_merge_data(adds, 2);
	dispatch_resume(sums);
	for (int i = 0; i < 500 && __atomic_load_n(&total, __ATOMIC_RELAXED) != 200; i++)
		usleep(10000);
	dispatch_sync(sums, ^{ });
	EXPECT(total == 200);
	dispatch_source_cancel(adds);
	EXPECT(dispatch_source_testcancel(adds) != 0);
	dispatch_release(adds);

	/* A repeating timer, cancelled after five ticks. */
	dispatch_source_t timer = dispatch_source_create(DISPATCH_SOURCE_TYPE_TIMER,
			0, 0, dispatch_get_main_queue());
	__block int ticks = 0;
	dispatch_time_t start = dispatch_time(DISPATCH_TIME_NOW, 0);
	dispatch_source_set_timer(timer, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_MSEC),
			10 * NSEC_PER_MSEC, NSEC_PER_MSEC);
	dispatch_source_set_event_handler(timer, ^{
		if (++ticks == 5)
			dispatch_source_cancel(timer);
	});
	dispatch_source_set_cancel_handler(timer, ^{
		EXPECT(ticks == 5);
		dispatch_release(timer);
		/* Later than 30 ms after the start, on the main queue. */
		dispatch_after(dispatch_time(DISPATCH_TIME_NOW, 30 * NSEC_PER_MSEC),
				dispatch_get_main_queue(), ^{
			EXPECT(dispatch_time(DISPATCH_TIME_NOW, 0) - start >= 80 * NSEC_PER_MSEC);
			dispatch_async_f(dispatch_get_main_queue(), NULL, finish);
		});
	});
	dispatch_resume(timer);
	dispatch_release(sums);
	dispatch_release(group);
	dispatch_main();
}
