/*
 * SwiftQueues benchmarks — the peer program for SwiftQueues (built with
 * -DPEER_SQ) and for the toolchain's libdispatch (-DPEER_DISPATCH): one
 * source, so both run exactly the same shapes (peer.h lists them).
 *
 *   fan-out     group_async_f of an empty function on the default global
 *               queue, N times, then group_wait
 *   fib-wait    a node makes a group, submits both children to it and
 *               waits on the group inside its own task (SwiftQueues: the
 *               group is in the node's stack, sq_group_init / _destroy)
 *   fib-notify  a node enters its parent's group before it is submitted;
 *               above the cutoff it submits its children and registers
 *               group_notify_f for its sum, which leaves the parent's
 *               group; the root's sum posts a semaphore (SwiftQueues: the
 *               group is in the node, sq_group_init, ended by the sum with
 *               sq_group_destroy)
 *   The children are submitted as fork-join children where the runtime
 *   has them, as oneTBB's side runs them: sq_group_spawn_f / sq_spawn_f
 *   (no start order, newest first on their worker); libdispatch has only
 *   its FIFO group_async_f / async_f.
 *   ping-pong   two serial queues, async_f to the other one per hop
 *   queues N    N serial queues made (labelled), one empty task submitted
 *               to each as a group member, a wait for all, then all
 *               released; figure: ns per queue for all of that; its peak
 *               RSS is what a million live queues with a task each take
 */
#define _GNU_SOURCE
#include "peer.h"

#include <semaphore.h>
#include <stdbool.h>

#if defined(PEER_SQ)
#include <swiftqueues.h>
#define Q_T sq_queue_t
#define G_T sq_group_t
#define GLOBAL() sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0)
#define QCREATE(l) sq_queue_create(l, NULL)
#define ASYNC sq_async_f
#define GCREATE sq_group_create
#define GASYNC sq_group_async_f
/* Fork-join children: no start order, newest first on their worker. */
#define SPAWN sq_spawn_f
#define GSPAWN sq_group_spawn_f
#define GWAIT(g) sq_group_wait(g, SQ_TIME_FOREVER)
#define GNOTIFY sq_group_notify_f
#define GENTER sq_group_enter
#define GLEAVE sq_group_leave
#define RELEASE sq_release
#elif defined(PEER_DISPATCH)
#include "../dispatch_compat.h"
#define Q_T dispatch_queue_t
#define G_T dispatch_group_t
#define GLOBAL() dispatch_get_global_queue(DISPATCH_QUEUE_PRIORITY_DEFAULT, 0)
#define QCREATE(l) dispatch_queue_create(l, NULL)
#define ASYNC dispatch_async_f
#define GCREATE dispatch_group_create
#define GASYNC dispatch_group_async_f
#define SPAWN dispatch_async_f
#define GSPAWN dispatch_group_async_f
#define GWAIT(g) dispatch_group_wait(g, DISPATCH_TIME_FOREVER)
#define GNOTIFY dispatch_group_notify_f
#define GENTER dispatch_group_enter
#define GLEAVE dispatch_group_leave
#define RELEASE dispatch_release
#else
#error "build with -DPEER_SQ or -DPEER_DISPATCH"
#endif

static Q_T global_q;

/* ---- fan-out ------------------------------------------------------------- */

static void
empty_task(void *ctx)
{
	(void)ctx;
}

static double
fanout(size_t n)
{
	G_T g = GCREATE();
	size_t i;
	uint64_t t0 = peer_now_ns();
	for (i = 0; i < n; i++)
		GASYNC(g, global_q, NULL, empty_task);
	GWAIT(g);
	uint64_t dt = peer_now_ns() - t0;
	RELEASE(g);
	return (double)dt / (double)n;
}

/* ---- fork-join fib, waiting in tasks ------------------------------------- */

struct wnode {
	unsigned n;
	unsigned cutoff;
	uint64_t result;
};

static void
wnode_run(void *ctx)
{
	struct wnode *w = ctx;
	if (w->n <= w->cutoff) {
		w->result = peer_fib_serial(w->n);
		return;
	}
	struct wnode a = { w->n - 1, w->cutoff, 0 };
	struct wnode b = { w->n - 2, w->cutoff, 0 };
#if defined(PEER_SQ)
	sq_group_storage_t storage;
	G_T g = sq_group_init(&storage);
#else
	G_T g = GCREATE();
#endif
	GSPAWN(g, global_q, &a, wnode_run);
	GSPAWN(g, global_q, &b, wnode_run);
	GWAIT(g);
#if defined(PEER_SQ)
	sq_group_destroy(g);
#else
	RELEASE(g);
#endif
	w->result = a.result + b.result;
}

static sem_t root_done;

static void
wroot_run(void *ctx)
{
	wnode_run(ctx);
	sem_post(&root_done);
}

static uint64_t
fib_wait(unsigned cutoff)
{
	struct wnode root = { PEER_FIB_N, cutoff, 0 };
	/* The root runs on a worker too, as it would in a program. */
	ASYNC(global_q, &root, wroot_run);
	while (sem_wait(&root_done) != 0) {
	}
	return root.result;
}

/* ---- fork-join fib, continuations ---------------------------------------- */

struct cnode {
	unsigned n;
	unsigned cutoff;
	uint64_t result;
	G_T parent_group;       /* NULL for the root */
	struct cnode *children; /* two, above the cutoff */
	G_T group;
#if defined(PEER_SQ)
	sq_group_storage_t group_storage;
#endif
};

static void cnode_run(void *ctx);

/* Both children done: the node's sum, then the node leaves its parent. */
static void
cnode_done(void *ctx)
{
	struct cnode *c = ctx;
	c->result = c->children[0].result + c->children[1].result;
	free(c->children);
#if defined(PEER_SQ)
	sq_group_destroy(c->group);
#else
	RELEASE(c->group);
#endif
	if (c->parent_group != NULL)
		GLEAVE(c->parent_group);
	else
		sem_post(&root_done);
}

static void
cnode_run(void *ctx)
{
	struct cnode *c = ctx;
	if (c->n <= c->cutoff) {
		c->result = peer_fib_serial(c->n);
		if (c->parent_group != NULL)
			GLEAVE(c->parent_group);
		else
			sem_post(&root_done);
		return;
	}
#if defined(PEER_SQ)
	c->group = sq_group_init(&c->group_storage);
#else
	c->group = GCREATE();
#endif
	/* malloc, as oneTBB's side gets from new: glibc's calloc has no
	 * per-thread cache, and every child would take the arena lock. The
	 * fields a child reads are set here; the rest it writes first. */
	c->children = malloc(2 * sizeof(struct cnode));
	int i;
	for (i = 0; i < 2; i++) {
		c->children[i].n = c->n - 1 - (unsigned)i;
		c->children[i].cutoff = c->cutoff;
		c->children[i].result = 0;
		c->children[i].parent_group = c->group;
		GENTER(c->group);
		SPAWN(global_q, &c->children[i], cnode_run);
	}
	GNOTIFY(c->group, global_q, c, cnode_done);
}

static uint64_t
fib_notify(unsigned cutoff)
{
	struct cnode root;
	memset(&root, 0, sizeof(root));
	root.n = PEER_FIB_N;
	root.cutoff = cutoff;
	ASYNC(global_q, &root, cnode_run);
	while (sem_wait(&root_done) != 0) {
	}
	return root.result;
}

/* ---- ping-pong ----------------------------------------------------------- */

static struct {
	Q_T a, b;
	size_t left;
} pp;

static void hop_b(void *ctx);

static void
hop_a(void *ctx)
{
	if (--pp.left == 0)
		sem_post(&root_done);
	else
		ASYNC(pp.b, ctx, hop_b);
}

static void
hop_b(void *ctx)
{
	if (--pp.left == 0)
		sem_post(&root_done);
	else
		ASYNC(pp.a, ctx, hop_a);
}

static double
pingpong(size_t hops)
{
	pp.a = QCREATE("peer.ping");
	pp.b = QCREATE("peer.pong");
	pp.left = 10000; /* warm-up */
	ASYNC(pp.a, NULL, hop_a);
	while (sem_wait(&root_done) != 0) {
	}
	pp.left = hops;
	uint64_t t0 = peer_now_ns();
	ASYNC(pp.a, NULL, hop_a);
	while (sem_wait(&root_done) != 0) {
	}
	uint64_t dt = peer_now_ns() - t0;
	RELEASE(pp.a);
	RELEASE(pp.b);
	return (double)dt / (double)hops;
}

/* ---- many serial queues -------------------------------------------------- */

static double
queues(size_t n)
{
	Q_T *q = malloc(n * sizeof(*q));
	if (q == NULL)
		return -1;
	G_T g = GCREATE();
	size_t i;
	uint64_t t0 = peer_now_ns();
	for (i = 0; i < n; i++)
		q[i] = QCREATE("peer.queue");
	for (i = 0; i < n; i++)
		GASYNC(g, q[i], NULL, empty_task);
	GWAIT(g);
	for (i = 0; i < n; i++)
		RELEASE(q[i]);
	uint64_t dt = peer_now_ns() - t0;
	RELEASE(g);
	free(q);
	return (double)dt / (double)n;
}

int
main(int argc, char **argv)
{
	if (argc != 3)
		return peer_usage(argv[0]);
	unsigned long arg = strtoul(argv[2], NULL, 10);
	sem_init(&root_done, 0, 0);
	global_q = GLOBAL();
	if (strcmp(argv[1], "fanout") == 0 && arg > 0) {
		peer_report(fanout(arg));
	} else if (strcmp(argv[1], "fib-wait") == 0) {
		peer_report(peer_fib_median(fib_wait, (unsigned)arg));
	} else if (strcmp(argv[1], "fib-notify") == 0) {
		peer_report(peer_fib_median(fib_notify, (unsigned)arg));
	} else if (strcmp(argv[1], "pingpong") == 0 && arg > 0) {
		peer_report(pingpong(arg));
	} else if (strcmp(argv[1], "queues") == 0 && arg > 0) {
		peer_report(queues(arg));
	} else {
		return peer_usage(argv[0]);
	}
	return 0;
}
