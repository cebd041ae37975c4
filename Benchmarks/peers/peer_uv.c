/*
 * SwiftQueues benchmarks — the libuv peer program (peer.h lists the
 * scenarios and the output). libuv's pool runs work; its loop thread
 * submits and runs the completions.
 *
 *   fan-out     uv_queue_work of an empty work callback, N times from the
 *               loop thread, then uv_run until every completion ran (each
 *               request is malloc'd and freed in its completion)
 *   fib-notify  leaves are uv_queue_work requests; a completion adds the
 *               leaf's result to its parent on the loop thread, and the
 *               completion that finishes a node's last child runs the
 *               node's sum (continuation passing); inner nodes spawn their
 *               children on the loop thread
 *   ping-pong   two threads, each running a loop with a uv_async_t; a hop
 *               is uv_async_send to the other loop
 * fib-wait has no libuv form: a work callback cannot wait for other work
 * (the pool is 4 threads by default and would deadlock).
 */
#define _GNU_SOURCE
#include "peer.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <uv.h>

static void
fail(const char *what, int err)
{
	fprintf(stderr, "peer_uv: %s: %s\n", what, uv_strerror(err));
	exit(1);
}

/* ---- fan-out ------------------------------------------------------------- */

static size_t fan_done;

static void
work_empty(uv_work_t *req)
{
	(void)req;
}

static void
after_free(uv_work_t *req, int status)
{
	(void)status;
	fan_done++;
	free(req);
}

static double
fanout(size_t n)
{
	uv_loop_t *loop = uv_default_loop();
	uint64_t t0 = peer_now_ns();
	for (size_t i = 0; i < n; i++) {
		uv_work_t *req = malloc(sizeof(*req));
		if (req == NULL)
			fail("malloc", UV_ENOMEM);
		int err = uv_queue_work(loop, req, work_empty, after_free);
		if (err != 0)
			fail("uv_queue_work", err);
	}
	uv_run(loop, UV_RUN_DEFAULT);
	uint64_t dt = peer_now_ns() - t0;
	if (fan_done != n) {
		fprintf(stderr, "peer_uv: %zu of %zu completions\n", fan_done, n);
		exit(1);
	}
	return (double)dt / (double)n;
}

/* ---- fork-join fib, continuations ---------------------------------------- */

struct cnode {
	uv_work_t req; /* leaves only */
	unsigned n;
	unsigned cutoff;
	unsigned pending;
	uint64_t result;
	struct cnode *parent;
	struct cnode *children;
};

static void
leaf_work(uv_work_t *req)
{
	struct cnode *c = (struct cnode *)req;
	c->result = peer_fib_serial(c->n);
}

/* On the loop thread: no atomics needed. */
static void
cnode_complete(struct cnode *c)
{
	while (c->parent != NULL && --c->parent->pending == 0) {
		c = c->parent;
		c->result = c->children[0].result + c->children[1].result;
		free(c->children);
	}
}

static void
leaf_after(uv_work_t *req, int status)
{
	(void)status;
	cnode_complete((struct cnode *)req);
}

static void
cnode_spawn(uv_loop_t *loop, struct cnode *c)
{
	if (c->n <= c->cutoff) {
		int err = uv_queue_work(loop, &c->req, leaf_work, leaf_after);
		if (err != 0)
			fail("uv_queue_work", err);
		return;
	}
	c->children = malloc(2 * sizeof(struct cnode)); /* as the other sides */
	if (c->children == NULL)
		fail("malloc", UV_ENOMEM);
	c->pending = 2;
	for (int i = 0; i < 2; i++) {
		struct cnode *k = &c->children[i];
		k->n = c->n - 1 - (unsigned)i;
		k->cutoff = c->cutoff;
		k->parent = c;
		cnode_spawn(loop, k);
	}
}

static uint64_t
fib_notify(unsigned cutoff)
{
	uv_loop_t *loop = uv_default_loop();
	struct cnode root;
	memset(&root, 0, sizeof(root));
	root.n = PEER_FIB_N;
	root.cutoff = cutoff;
	cnode_spawn(loop, &root);
	uv_run(loop, UV_RUN_DEFAULT);
	return root.result;
}

/* ---- ping-pong ----------------------------------------------------------- */

struct side {
	uv_loop_t loop;
	uv_async_t async;
	struct side *other;
	pthread_t thread;
};

static struct side sides[2];
static size_t pp_left, pp_hops;
static atomic_bool pp_stop;
static uint64_t pp_t0;
static sem_t pp_done;

static void
hop(uv_async_t *a)
{
	struct side *s = a->data;
	if (atomic_load(&pp_stop)) {
		uv_close((uv_handle_t *)a, NULL);
		return;
	}
	if (pp_left == pp_hops)
		pp_t0 = peer_now_ns(); /* the warm-up hops are over */
	if (--pp_left == 0) {
		atomic_store(&pp_stop, true);
		uv_close((uv_handle_t *)a, NULL);
		uv_async_send(&s->other->async);
		sem_post(&pp_done);
		return;
	}
	uv_async_send(&s->other->async);
}

static void *
side_main(void *arg)
{
	struct side *s = arg;
	uv_run(&s->loop, UV_RUN_DEFAULT);
	return NULL;
}

static double
pingpong(size_t hops)
{
	int i, err;
	pp_hops = hops;
	pp_left = hops + 1000; /* 1,000 warm-up hops */
	sem_init(&pp_done, 0, 0);
	for (i = 0; i < 2; i++) {
		struct side *s = &sides[i];
		s->other = &sides[1 - i];
		if ((err = uv_loop_init(&s->loop)) != 0)
			fail("uv_loop_init", err);
		if ((err = uv_async_init(&s->loop, &s->async, hop)) != 0)
			fail("uv_async_init", err);
		s->async.data = s;
	}
	for (i = 0; i < 2; i++)
		pthread_create(&sides[i].thread, NULL, side_main, &sides[i]);
	uv_async_send(&sides[0].async);
	while (sem_wait(&pp_done) != 0) {
	}
	uint64_t dt = peer_now_ns() - pp_t0;
	for (i = 0; i < 2; i++)
		pthread_join(sides[i].thread, NULL);
	return (double)dt / (double)hops;
}

int
main(int argc, char **argv)
{
	if (argc != 3)
		return peer_usage(argv[0]);
	unsigned long arg = strtoul(argv[2], NULL, 10);
	if (strcmp(argv[1], "fanout") == 0 && arg > 0)
		peer_report(fanout(arg));
	else if (strcmp(argv[1], "fib-notify") == 0)
		peer_report(peer_fib_median(fib_notify, (unsigned)arg));
	else if (strcmp(argv[1], "pingpong") == 0 && arg > 0)
		peer_report(pingpong(arg));
	else
		return peer_usage(argv[0]);
	return 0;
}
