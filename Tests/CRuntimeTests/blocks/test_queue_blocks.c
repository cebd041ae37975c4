/*
 * The block forms of the queue calls (clang -fblocks): capture semantics
 * and the classic block examples: a block capturing two values and taking
 * a third ("123 456 789"), sync mutating a __block variable, the queue
 * copying the block (captured values are those at submission, and the copy
 * is released after it runs — LeakSanitizer checks that), async then sync,
 * a completion callback (average_async) with blocks, nested async,
 * sq_apply / sq_apply_range / barrier / group block wrappers.
 */
#include "../queue_helpers.h"

#define WAIT_MS 10000

static void
test_block_captures(void)
{
	static char out[64];
	int x = 123, y = 456;
	void (^aBlock)(int) = ^(int z) {
		snprintf(out, sizeof(out), "%d %d %d", x, y, z);
	};
	aBlock(789);
	CHECK(strcmp(out, "123 456 789") == 0);
}

static void
test_sync_mutates(void)
{
	sq_queue_t q = sq_queue_create("com.example.blocks.sync", NULL);
	__block int n = 0;
	sq_sync(q, ^{ n = 42; });
	CHECK_EQ(n, 42);
	sq_barrier_sync(q, ^{ n++; });
	CHECK_EQ(n, 43);
	sq_queue_t c = sq_queue_create("com.example.blocks.c",
			SQ_QUEUE_CONCURRENT);
	sq_sync(c, ^{ n++; });
	sq_barrier_sync(c, ^{ n++; });
	CHECK_EQ(n, 45);
	sq_release(q);
	sq_release(c);
}

static atomic_int copied_seen;
static atomic_int copied_runs;

static void
test_async_copies(void)
{
	sq_queue_t q = sq_queue_create("com.example.blocks.copy", NULL);
	int v = 1;
	sq_suspend(q);
	sq_async(q, ^{
		atomic_store(&copied_seen, v);
		atomic_fetch_add(&copied_runs, 1);
	});
	v = 2; /* the block captured 1 when it was submitted */
	(void)v;
	sq_resume(q);
	CHECK(sqt_wait_int(&copied_runs, 1, WAIT_MS));
	CHECK_EQ(atomic_load(&copied_seen), 1);

	/* A heap block owning malloc'd memory, freed by the block. */
	char *owned = strdup("owned by the block");
	sq_async(q, ^{
		if (strcmp(owned, "owned by the block") == 0)
			atomic_fetch_add(&copied_runs, 1);
		free(owned);
	});
	CHECK(sqt_wait_int(&copied_runs, 2, WAIT_MS));
	sqt_sleep_ms(10);
	CHECK_EQ(atomic_load(&copied_runs), 2);
	sq_release(q);
}

static void
test_four_lines(void)
{
	static atomic_int seq;
	__block int work = -1, more = -1;
	sq_queue_t q = sq_queue_create("com.example.MyCustomQueue", NULL);
	sq_async(q, ^{ work = atomic_fetch_add(&seq, 1); }); /* Do some work here. */
	int maybe = atomic_fetch_add(&seq, 1); /* The first block may or may not have run. */
	sq_sync(q, ^{ more = atomic_fetch_add(&seq, 1); }); /* Do some more work here. */
	int both = atomic_fetch_add(&seq, 1); /* Both blocks have completed. */
	CHECK(work >= 0 && work < more);
	CHECK(more < both);
	CHECK(maybe < more);
	sq_release(q);
}

/* The completion-callback example (average_async) with blocks. */
static int
average(const int *data, size_t len)
{
	int sum = 0;
	for (size_t i = 0; i < len; i++)
		sum += data[i];
	return sum / (int)len;
}

static void
average_async(const int *data, size_t len, sq_queue_t queue,
		void (^block)(int))
{
	/* Retain the queue until the completion has been submitted. */
	sq_retain(queue);
	void (^copy)(int) = _Block_copy((const void *)block);
	sq_async(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0), ^{
		int avg = average(data, len);
		sq_async(queue, ^{
			copy(avg);
			_Block_release((const void *)copy);
		});
		sq_release(queue);
	});
}

static char callback_key;
static atomic_int callback_avg, callback_on_queue, callback_runs;

static void
test_average_async(void)
{
	static const int data[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	static char marker[] = "callback queue";
	sq_queue_t q = sq_queue_create("com.example.blocks.callback", NULL);
	sq_queue_set_specific(q, &callback_key, marker, NULL);
	average_async(data, 10, q, ^(int avg) {
		atomic_store(&callback_avg, avg);
		atomic_store(&callback_on_queue,
				sq_get_specific(&callback_key) == marker);
		atomic_fetch_add(&callback_runs, 1);
	});
	sq_release(q);
	CHECK(sqt_wait_int(&callback_runs, 1, WAIT_MS));
	CHECK_EQ(atomic_load(&callback_avg), 5);
	CHECK_EQ(atomic_load(&callback_on_queue), 1);
}

static atomic_int foo_calls;

static void
test_nested_async(void)
{
	sq_queue_t queueA = sq_queue_create("com.example.queueA", NULL);
	sq_async(queueA, ^{
		sq_async(queueA, ^{ atomic_fetch_add(&foo_calls, 1); });
	});
	CHECK(sqt_wait_int(&foo_calls, 1, WAIT_MS));
	sq_release(queueA);
}

static void
test_apply_and_groups(void)
{
	static atomic_long sum;
	sq_apply(1000, sq_get_global_queue(0, 0), ^(size_t i) {
		atomic_fetch_add(&sum, (long)i);
	});
	CHECK_EQ(atomic_load(&sum), 499500);

	/* Striding by 137, with the remainder loop. */
	static atomic_uchar hits[10000];
	size_t count = 10000, stride = 137;
	sq_apply(count / stride, sq_get_global_queue(0, 0), ^(size_t idx) {
		size_t j = idx * stride;
		size_t j_stop = j + stride;
		do {
			atomic_fetch_add(&hits[j++], 1);
		} while (j < j_stop);
	});
	for (size_t i = count - (count % stride); i < count; i++)
		atomic_fetch_add(&hits[i], 1);
	int once = 1;
	for (size_t i = 0; i < count; i++)
		if (atomic_load(&hits[i]) != 1)
			once = 0;
	CHECK(once);

	/* sq_apply_range: the block loops over its own range; the ranges
	 * cover every index once, and the captured array is the caller's. */
	static atomic_uchar range_hits[100000];
	static atomic_long range_calls;
	atomic_uchar *rh = range_hits;
	sq_apply_range(100000, SQ_APPLY_AUTO, ^(size_t begin, size_t end) {
		atomic_fetch_add(&range_calls, 1);
		for (size_t i = begin; i < end; i++)
			atomic_fetch_add(&rh[i], 1);
	});
	once = 1;
	for (size_t i = 0; i < 100000; i++)
		if (atomic_load(&range_hits[i]) != 1)
			once = 0;
	CHECK(once);
	CHECK(atomic_load(&range_calls) >= 1);

	/* Barrier blocks on a concurrent queue; group blocks. */
	static atomic_int readers, bad, ran;
	sq_queue_t c = sq_queue_create("com.example.blocks.rw",
			SQ_QUEUE_CONCURRENT);
	sq_group_t g = sq_group_create();
	for (int i = 0; i < 50; i++) {
		if (i % 10 == 5) {
			sq_barrier_async(c, ^{
				if (atomic_load(&readers) != 0)
					atomic_fetch_add(&bad, 1);
				atomic_fetch_add(&ran, 1);
			});
		} else {
			sq_group_async(g, c, ^{
				atomic_fetch_add(&readers, 1);
				sqt_sleep_us(100);
				atomic_fetch_sub(&readers, 1);
				atomic_fetch_add(&ran, 1);
			});
		}
	}
	static atomic_int notified;
	sq_group_notify(g, sq_get_global_queue(0, 0), ^{
		atomic_store(&notified, 1);
	});
	CHECK_EQ(sq_group_wait(g, sq_time(SQ_TIME_NOW,
			(int64_t)WAIT_MS * (int64_t)NSEC_PER_MSEC)), 0);
	CHECK(sqt_wait_int(&ran, 50, WAIT_MS));
	CHECK(sqt_wait_int(&notified, 1, WAIT_MS));
	CHECK_EQ(atomic_load(&bad), 0);
	sq_release(g);
	sq_release(c);
}

int
main(void)
{
	test_block_captures();
	test_sync_mutates();
	test_async_copies();
	test_four_lines();
	test_average_async();
	test_nested_async();
	test_apply_and_groups();
	return sqt_finish("test_queue_blocks");
}
