/*
 * Groups in storage the program owns (sq_group_init / sq_group_destroy):
 * every group call works on them, a fork-join tree with one on each task's
 * stack adds up, destroy waits until the last leave is out of the storage,
 * the storage can be used again, and the misuse reports.
 */
#include "wait_helpers.h"

static void
test_empty(void)
{
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	CHECK(g != NULL);
	CHECK_EQ(sq_group_wait(g, SQ_TIME_NOW), 0);
	CHECK_EQ(sq_group_wait(g, SQ_TIME_FOREVER), 0);
	sq_group_destroy(g);
}

/* fib(18) with a group per node on the node's own stack, waiting in the
 * task: the sum and the number of nodes must come out exact. */
enum { FIB_N = 18, FIB_CUTOFF = 8 };
static int32_t fib_nodes;
static int32_t fib_bad_waits; /* counted here: CHECK is for the main thread */

struct fib_node {
	unsigned n;
	uint64_t result;
};

static uint64_t
fib_serial(unsigned n)
{
	return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2);
}

static void
fib_task(void *ctx)
{
	struct fib_node *node = ctx;
	__atomic_add_fetch(&fib_nodes, 1, __ATOMIC_RELAXED);
	if (node->n <= FIB_CUTOFF) {
		node->result = fib_serial(node->n);
		return;
	}
	struct fib_node a = { node->n - 1, 0 }, b = { node->n - 2, 0 };
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	sq_group_async_f(g, global_queue(), &a, fib_task);
	sq_group_async_f(g, global_queue(), &b, fib_task);
	if (sq_group_wait(g, SQ_TIME_FOREVER) != 0)
		__atomic_add_fetch(&fib_bad_waits, 1, __ATOMIC_RELAXED);
	sq_group_destroy(g);
	node->result = a.result + b.result;
}

/* Nodes of the tree above: count(n) = 1 (n <= cutoff), else 1 + both. */
static int32_t
fib_node_count(unsigned n)
{
	return n <= FIB_CUTOFF ? 1
			: 1 + fib_node_count(n - 1) + fib_node_count(n - 2);
}

static void
run_fib_root(void *ctx)
{
	fib_task(ctx);
}

static void
test_fork_join(void)
{
	for (int round = 0; round < 20; round++) {
		struct fib_node root = { FIB_N, 0 };
		__atomic_store_n(&fib_nodes, 0, __ATOMIC_RELAXED);
		sq_group_storage_t storage;
		sq_group_t g = sq_group_init(&storage);
		/* The root on a worker: the waits inside run on the pool. */
		sq_group_async_f(g, global_queue(), &root, run_fib_root);
		CHECK_EQ(sq_group_wait(g, in_ms(60000)), 0);
		sq_group_destroy(g);
		CHECK_EQ(root.result, 2584);
		CHECK_EQ(load32(&fib_nodes), fib_node_count(FIB_N));
	}
	CHECK_EQ(load32(&fib_bad_waits), 0);
}

/* Notify and enter/leave, then the same storage made into a new group. */
static int32_t notified;

static void
count_notify(void *ctx)
{
	__atomic_add_fetch(&notified, 1, __ATOMIC_SEQ_CST);
	sq_semaphore_signal(ctx);
}

static void
leave_task(void *ctx)
{
	sq_group_leave(ctx);
}

static void
test_notify_and_reuse(void)
{
	sq_semaphore_t done = sq_semaphore_create(0);
	sq_group_storage_t storage;
	for (int round = 0; round < 3; round++) {
		sq_group_t g = sq_group_init(&storage);
		CHECK(g == (sq_group_t)(void *)&storage);
		sq_group_enter(g);
		sq_group_notify_f(g, global_queue(), done, count_notify);
		sq_async_f(global_queue(), g, leave_task);
		CHECK_EQ(sq_semaphore_wait(done, in_ms(10000)), 0);
		CHECK_EQ(sq_group_wait(g, SQ_TIME_NOW), 0);
		sq_group_destroy(g);
	}
	CHECK_EQ(load32(&notified), 3);
	sq_release(done);
}

/*
 * The destroy that follows a wait must not return while the last leave is
 * still inside the group (detaching notifications, every other round): the
 * storage is overwritten right after it, and a runtime write into it
 * afterwards shows as a changed byte.
 */
enum { RACE_ROUNDS = 3000 };

static void
nothing(void *ctx)
{
	(void)ctx;
}

static void
test_destroy_waits_for_last_leave(void)
{
	sq_group_storage_t storage;
	int damaged = 0;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		sq_group_t g = sq_group_init(&storage);
		sq_group_enter(g);
		if (i % 2)
			sq_group_notify_f(g, global_queue(), NULL, nothing);
		sq_async_f(global_queue(), g, leave_task);
		CHECK_EQ(sq_group_wait(g, in_ms(10000)), 0);
		sq_group_destroy(g);
		memset(&storage, 0x5a, sizeof(storage));
		/* Give a straggler time to write. */
		if (i % 64 == 0)
			sched_yield();
		const unsigned char *p = (const unsigned char *)&storage;
		for (size_t k = 0; k < sizeof(storage); k++)
			if (p[k] != 0x5a) {
				damaged++;
				break;
			}
	}
	CHECK_EQ(damaged, 0);
}

/* A finalizer set on the group runs in destroy, before it returns. */
static int32_t finalized;

static void
count_finalize(void *ctx)
{
	__atomic_add_fetch(&finalized, (int32_t)(intptr_t)ctx,
			__ATOMIC_SEQ_CST);
}

static void
test_finalizer(void)
{
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	sq_set_context(g, (void *)(intptr_t)7);
	sq_set_finalizer_f(g, count_finalize);
	sq_retain(g); /* a retain balanced before destroy is fine */
	sq_release(g);
	sq_group_destroy(g);
	CHECK_EQ(load32(&finalized), 7);
}

/* ---- misuse, each in a child process ---- */

static void
destroy_with_member(void *unused)
{
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	sq_group_enter(g);
	sq_group_destroy(g);
}

static sq_group_t waited_group;

static void *
wait_forever(void *unused)
{
	sq_group_wait(waited_group, SQ_TIME_FOREVER);
	return NULL;
}

static void
destroy_with_waiter(void *unused)
{
	static sq_group_storage_t storage;
	waited_group = sq_group_init(&storage);
	sq_group_enter(waited_group);
	pthread_t t;
	pthread_create(&t, NULL, wait_forever, NULL);
	/* Until the waiter sleeps (a generous margin). */
	msleep(200);
	sq_group_destroy(waited_group);
}

static void
destroy_retained(void *unused)
{
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	sq_retain(g);
	sq_group_destroy(g);
}

static void
release_storage_group(void *unused)
{
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	sq_release(g);
}

static void
destroy_created_group(void *unused)
{
	sq_group_destroy(sq_group_create());
}

static void
use_after_destroy(void *unused)
{
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	sq_group_destroy(g);
	sq_group_enter(g);
}

static void
destroy_twice(void *unused)
{
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	sq_group_destroy(g);
	sq_group_destroy(g);
}

static void
init_null(void *unused)
{
	sq_group_t g = sq_group_init(NULL);
	(void)g;
}

static void
test_misuse(void)
{
	CHECK_CRASH(destroy_with_member, NULL,
			"SwiftQueues: sq_group_destroy: the group is not "
			"empty (1 member not done)");
	CHECK_CRASH(destroy_with_waiter, NULL,
			"SwiftQueues: sq_group_destroy: the group is not "
			"empty (1 member not done) and a thread waits on it");
	CHECK_CRASH(destroy_retained, NULL,
			"SwiftQueues: sq_group_destroy: the program still "
			"holds 1 sq_retain of the group");
	CHECK_CRASH(release_storage_group, NULL,
			"SwiftQueues: sq_release: the group lives in the "
			"program's storage (sq_group_init): end it with "
			"sq_group_destroy");
	CHECK_CRASH(destroy_created_group, NULL,
			"SwiftQueues: sq_group_destroy: the group was made by "
			"sq_group_create: release it with sq_release");
	CHECK_CRASH(use_after_destroy, NULL,
			"SwiftQueues: sq_group_enter: use of an object that "
			"was released and destroyed");
	CHECK_CRASH(destroy_twice, NULL,
			"SwiftQueues: sq_group_destroy: use of an object that "
			"was released and destroyed");
	CHECK_CRASH(init_null, NULL,
			"SwiftQueues: sq_group_init: storage is NULL");
}

int
main(void)
{
	/* Misuse first: its children fork from a process with no pool
	 * threads yet (ThreadSanitizer cannot start threads in a child
	 * forked from a threaded process). */
	test_empty();
	test_misuse();
	test_fork_join();
	test_notify_and_reuse();
	test_destroy_waits_for_last_leave();
	test_finalizer();
	return sqt_finish("group_storage");
}
