/*
 * Fork-join children: sq_spawn_f and sq_group_spawn_f.
 *
 *   - fork-join trees come out right: fib with notify (sq_spawn_f, one
 *     group per node, the sum in the notification) and with waits
 *     (sq_group_spawn_f into a group in the node's stack), also from a
 *     thread that is not a worker;
 *   - at width 1 (a child process, the safety net off), what the order
 *     promises and what it does not:
 *       a task's spawned children run newest first, mostly (depth first);
 *       a spawned child that spawns itself again and again does not hold
 *       back a plain task queued before it (one look in 8 takes the
 *       oldest entry);
 *       plain tasks queued between spawned ones still start in their
 *       order;
 *       spawned onto a serial queue, children keep the queue's order.
 */
#include "queue_helpers.h"
#include "child_helpers.h"

#define WAIT_MS 20000

/* ---- fork-join trees --------------------------------------------------------- */

#define FIB_CUTOFF 8

/* With notify: the node's sum is its group's notification. */
struct cnode {
	int n;
	long result;
	sq_group_t parent;        /* NULL for the root */
	struct cnode *children;
	sq_group_storage_t storage;
	sq_group_t group;
};

static sq_semaphore_t root_done;
static atomic_long spawned_ran;

static void
cnode_left(struct cnode *c)
{
	if (c->parent != NULL)
		sq_group_leave(c->parent);
	else
		sq_semaphore_signal(root_done);
}

static void
cnode_sum(void *arg)
{
	struct cnode *c = arg;
	c->result = c->children[0].result + c->children[1].result;
	free(c->children);
	sq_group_destroy(c->group);
	cnode_left(c);
}

static void
cnode_run(void *arg)
{
	struct cnode *c = arg;
	atomic_fetch_add(&spawned_ran, 1);
	if (c->n <= FIB_CUTOFF) {
		c->result = sqt_fib_serial(c->n);
		cnode_left(c);
		return;
	}
	c->group = sq_group_init(&c->storage);
	c->children = calloc(2, sizeof(*c->children));
	for (int i = 0; i < 2; i++) {
		c->children[i].n = c->n - 1 - i;
		c->children[i].parent = c->group;
		sq_group_enter(c->group);
		sq_spawn_f(sq_get_global_queue(0, 0), &c->children[i],
				cnode_run);
	}
	sq_group_notify_f(c->group, sq_get_global_queue(0, 0), c, cnode_sum);
}

/* With waits: the node waits for its children in its own task. */
struct wnode {
	int n;
	long result;
};

static void
wnode_run(void *arg)
{
	struct wnode *w = arg;
	atomic_fetch_add(&spawned_ran, 1);
	if (w->n <= FIB_CUTOFF) {
		w->result = sqt_fib_serial(w->n);
		return;
	}
	struct wnode a = { w->n - 1, 0 }, b = { w->n - 2, 0 };
	sq_group_storage_t storage;
	sq_group_t g = sq_group_init(&storage);
	sq_group_spawn_f(g, sq_get_global_queue(0, 0), &a, wnode_run);
	sq_group_spawn_f(g, sq_get_global_queue(0, 0), &b, wnode_run);
	sq_group_wait(g, SQ_TIME_FOREVER);
	sq_group_destroy(g);
	w->result = a.result + b.result;
}

static long
fib_nodes(int n)
{
	return n > FIB_CUTOFF ? 1 + fib_nodes(n - 1) + fib_nodes(n - 2) : 1;
}

static void
test_fork_join(void)
{
	root_done = sq_semaphore_create(0);
	for (int n = 9; n <= 24; n += 5) {
		/* Notify form, started on a worker. */
		atomic_store(&spawned_ran, 0);
		struct cnode root = { .n = n };
		sq_spawn_f(sq_get_global_queue(0, 0), &root, cnode_run);
		CHECK_EQ(sq_semaphore_wait(root_done, sq_time(SQ_TIME_NOW,
				(int64_t)WAIT_MS * 1000000)), 0);
		CHECK_EQ(root.result, sqt_fib_expected(n));
		CHECK_EQ(atomic_load(&spawned_ran), fib_nodes(n));

		/* Wait form, the root spawned from this thread (not a
		 * worker: a plain submission) and waited for here. */
		atomic_store(&spawned_ran, 0);
		struct wnode w = { n, 0 };
		sq_group_t g = sq_group_create();
		sq_group_spawn_f(g, sq_get_global_queue(0, 0), &w, wnode_run);
		CHECK_EQ(sq_group_wait(g, sq_time(SQ_TIME_NOW,
				(int64_t)WAIT_MS * 1000000)), 0);
		sq_release(g);
		CHECK_EQ(w.result, sqt_fib_expected(n));
		CHECK_EQ(atomic_load(&spawned_ran), fib_nodes(n));
	}
	sq_release(root_done);
}

/* ---- order at width 1 --------------------------------------------------------- */

#define ORDER_N 64

static struct {
	sq_queue_t q;
	atomic_int ticket;
	int started[2 * ORDER_N]; /* ticket -> task id */
	sem_t done;
	int expect;               /* tasks before `done` is posted */
	atomic_bool plain_ran;
	atomic_int respawns;
} ord;

static void
ord_task(void *arg)
{
	int t = atomic_fetch_add(&ord.ticket, 1);
	ord.started[t] = (int)(intptr_t)arg;
	if (t == ord.expect - 1)
		sem_post(&ord.done);
}

/* Spawns ORDER_N children (ids 0..ORDER_N-1). */
static void
ord_spawner(void *unused)
{
	for (int k = 0; k < ORDER_N; k++)
		sq_spawn_f(ord.q, (void *)(intptr_t)k, ord_task);
}

/* Alternates: even ids plain, odd ids spawned. */
static void
ord_mixer(void *unused)
{
	for (int k = 0; k < 2 * ORDER_N; k++) {
		if (k % 2 == 0)
			sq_async_f(ord.q, (void *)(intptr_t)k, ord_task);
		else
			sq_spawn_f(ord.q, (void *)(intptr_t)k, ord_task);
	}
}

static void
ord_plain(void *unused)
{
	atomic_store(&ord.plain_ran, true);
	sem_post(&ord.done);
}

/* Spawns itself again until the plain task queued before it has run. */
static void
ord_respawn(void *unused)
{
	if (atomic_load(&ord.plain_ran))
		return;
	if (atomic_fetch_add(&ord.respawns, 1) < 100000)
		sq_spawn_f(ord.q, NULL, ord_respawn);
}

static void
ord_hog_start(void *unused)
{
	sq_async_f(ord.q, NULL, ord_plain);
	sq_spawn_f(ord.q, NULL, ord_respawn);
}

static bool
ord_wait(const char *what)
{
	if (sqt_sem_wait_ms(&ord.done, WAIT_MS))
		return true;
	fprintf(stderr, "%s: stalled at %d\n", what,
			atomic_load(&ord.ticket));
	return false;
}

static void
ord_run(void (*submitter)(void *), int expect)
{
	atomic_store(&ord.ticket, 0);
	ord.expect = expect;
	sq_async_f(ord.q, NULL, submitter);
}

/* In the child; one stderr line per case. */
static void
order_child(void *unused)
{
	sem_init(&ord.done, 0, 0);
	sq_queue_t global = sq_get_global_queue(0, 0);

	/* Newest first, mostly: count the descents. */
	ord.q = global;
	ord_run(ord_spawner, ORDER_N);
	if (ord_wait("spawned")) {
		int descents = 0;
		for (int t = 0; t + 1 < ORDER_N; t++)
			descents += ord.started[t] > ord.started[t + 1];
		fprintf(stderr, "spawned: %d descents of %d\n", descents,
				ORDER_N - 1);
	}

	/* Plain tasks between spawned ones: still in their order. */
	ord_run(ord_mixer, 2 * ORDER_N);
	if (ord_wait("mixed")) {
		int last = -1, bad = 0;
		for (int t = 0; t < 2 * ORDER_N; t++) {
			int id = ord.started[t];
			if (id % 2 != 0)
				continue;
			bad += id < last;
			last = id;
		}
		fprintf(stderr, "mixed: %d plain out of order\n", bad);
	}

	/* A spawn that spawns itself does not hold back older work. */
	atomic_store(&ord.plain_ran, false);
	atomic_store(&ord.respawns, 0);
	sq_async_f(global, NULL, ord_hog_start);
	if (ord_wait("respawn"))
		fprintf(stderr, "respawn: plain ran after %d spawns\n",
				atomic_load(&ord.respawns));

	/* On a serial queue, spawned children keep the queue's order. */
	ord.q = sq_queue_create("spawn.serial", NULL);
	ord_run(ord_spawner, ORDER_N);
	if (ord_wait("serial")) {
		int bad = 0;
		for (int t = 0; t < ORDER_N; t++)
			bad += ord.started[t] != t;
		fprintf(stderr, "serial: %d out of order\n", bad);
	}
}

/* The number after `key` in the child's output; -1 when missing. */
static int
child_number(const char *out, const char *key)
{
	const char *p = strstr(out, key);
	return p ? atoi(p + strlen(key)) : -1;
}

static void
test_order_width1(void)
{
	struct sqt_child c;
	sqt_child_run(&c, order_child, NULL, sqt_one_worker_env, 60000);
	/* Depth first: the first look after the spawner takes the newest,
	 * and only one look in 8 the oldest. */
	CHECK(child_number(c.out, "spawned: ") >= ORDER_N / 2);
	CHECK_EQ(child_number(c.out, "mixed: "), 0);
	int respawns = child_number(c.out, "respawn: plain ran after ");
	CHECK(respawns >= 0 && respawns <= 16);
	CHECK_EQ(child_number(c.out, "serial: "), 0);
}

int
main(void)
{
	/* First: the child is forked before this process starts the pool. */
	test_order_width1();
	test_fork_join();
	return sqt_finish("test_spawn");
}
