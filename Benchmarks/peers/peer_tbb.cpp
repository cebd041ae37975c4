/*
 * SwiftQueues benchmarks — the oneTBB peer program (peer.h lists the
 * scenarios and the output).
 *
 *   fan-out     tbb::task_group::run of an empty lambda, N times, then wait
 *   fib-wait    a node runs both children in its own task_group and waits
 *               for it inside its task (TBB's waiting thread runs other
 *               tasks meanwhile, as SwiftQueues' does)
 *   fib-notify  one task_group for the whole tree; a node counts its
 *               children down atomically and the child that finishes last
 *               runs the node's sum (continuation passing); one wait at
 *               the root
 *   ping-pong   one tbb::task_arena; a hop enqueues the next hop into it
 *               (TBB has no serial queue; one message in flight is serial)
 */
#include "peer.h"

#include <atomic>
#include <semaphore.h>

#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

static double
fanout(size_t n)
{
	tbb::task_group tg;
	uint64_t t0 = peer_now_ns();
	for (size_t i = 0; i < n; i++)
		tg.run([] {});
	tg.wait();
	return (double)(peer_now_ns() - t0) / (double)n;
}

static uint64_t
wnode(unsigned n, unsigned cutoff)
{
	if (n <= cutoff)
		return peer_fib_serial(n);
	uint64_t a = 0, b = 0;
	tbb::task_group tg;
	tg.run([&] { a = wnode(n - 1, cutoff); });
	tg.run([&] { b = wnode(n - 2, cutoff); });
	tg.wait();
	return a + b;
}

static uint64_t
fib_wait(unsigned cutoff)
{
	uint64_t r = 0;
	tbb::task_group tg;
	tg.run([&] { r = wnode(PEER_FIB_N, cutoff); });
	tg.wait();
	return r;
}

struct cnode {
	unsigned n;
	unsigned cutoff;
	uint64_t result;
	cnode *parent;
	cnode *children; // two, above the cutoff
	std::atomic<int> pending;
};

static tbb::task_group *cgroup;

static void
cnode_complete(cnode *c)
{
	// acq_rel: the child that counts down last sees the other child's
	// result.
	while (c->parent != nullptr &&
			c->parent->pending.fetch_sub(1,
			std::memory_order_acq_rel) == 1) {
		c = c->parent;
		c->result = c->children[0].result + c->children[1].result;
		delete[] c->children;
	}
}

static void
cnode_run(cnode *c)
{
	if (c->n <= c->cutoff) {
		c->result = peer_fib_serial(c->n);
		cnode_complete(c);
		return;
	}
	c->children = new cnode[2];
	c->pending.store(2, std::memory_order_relaxed);
	for (int i = 0; i < 2; i++) {
		cnode *k = &c->children[i];
		k->n = c->n - 1 - (unsigned)i;
		k->cutoff = c->cutoff;
		k->parent = c;
		cgroup->run([k] { cnode_run(k); });
	}
}

static uint64_t
fib_notify(unsigned cutoff)
{
	tbb::task_group tg;
	cgroup = &tg;
	cnode root{};
	root.n = PEER_FIB_N;
	root.cutoff = cutoff;
	tg.run([&root] { cnode_run(&root); });
	tg.wait();
	return root.result;
}

static tbb::task_arena *arena;
static size_t pp_left;
static sem_t pp_done;

static void
hop()
{
	if (--pp_left == 0)
		sem_post(&pp_done);
	else
		arena->enqueue(hop);
}

static double
pingpong(size_t hops)
{
	tbb::task_arena a;
	arena = &a;
	sem_init(&pp_done, 0, 0);
	pp_left = 10000; // warm-up
	a.enqueue(hop);
	while (sem_wait(&pp_done) != 0) {
	}
	pp_left = hops;
	uint64_t t0 = peer_now_ns();
	a.enqueue(hop);
	while (sem_wait(&pp_done) != 0) {
	}
	return (double)(peer_now_ns() - t0) / (double)hops;
}

int
main(int argc, char **argv)
{
	if (argc != 3)
		return peer_usage(argv[0]);
	unsigned long arg = strtoul(argv[2], nullptr, 10);
	if (strcmp(argv[1], "fanout") == 0 && arg > 0)
		peer_report(fanout(arg));
	else if (strcmp(argv[1], "fib-wait") == 0)
		peer_report(peer_fib_median(fib_wait, (unsigned)arg));
	else if (strcmp(argv[1], "fib-notify") == 0)
		peer_report(peer_fib_median(fib_notify, (unsigned)arg));
	else if (strcmp(argv[1], "pingpong") == 0 && arg > 0)
		peer_report(pingpong(arg));
	else
		return peer_usage(argv[0]);
	return 0;
}
