/*
 * SwiftQueues benchmarks — SwiftQueues against its peers: oneTBB and libuv
 * (when their packages were found at build time) and libdispatch, on
 * fan-out, fork-join and ping-pong.
 *
 * Each side of each round is a fresh process: one of the peer programs
 * next to this binary (peers/peer_gcd.c built as peer_sq and peer_dispatch,
 * peers/peer_tbb.cpp, peers/peer_uv.c), run as "<program> <scenario> <n>".
 * It prints "<figure> <peak RSS KiB>" (peers/peer.h); a row reports one of
 * the two. A fresh process gives each side the same start (no pool threads
 * yet, an empty heap), which also makes peak RSS comparable. The harness
 * interleaves the processes (ours, theirs, ours, ...) and takes medians.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FANOUT_TASKS "1000000"

/* Runs one peer program and returns its figure (field 0) or peak RSS in
 * KiB (field 1). */
static double
peer_run(const char *prog, const char *scenario, const char *arg, int field)
{
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		bench_fail("readlink /proc/self/exe");
	exe[len] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash != NULL)
		*slash = '\0';
	char cmd[4096 + 128];
	snprintf(cmd, sizeof(cmd), "'%s/%s' %s %s", exe, prog, scenario, arg);
	FILE *p = popen(cmd, "r");
	if (p == NULL)
		bench_fail("popen: %s", strerror(errno));
	double figure = -1, rss = -1;
	if (fscanf(p, "%lf %lf", &figure, &rss) != 2)
		figure = -1;
	if (pclose(p) != 0 || figure < 0)
		bench_fail("%s %s %s failed", prog, scenario, arg);
	return field == 0 ? figure : rss;
}

/* One side of a row: a bench_fn that runs `prog scenario arg` and reports
 * the chosen field as the run's figure. */
#define PEER_SIDE(fn, prog, scenario, arg, field)                           \
	static void fn(size_t ops)                                          \
	{                                                                   \
		(void)ops;                                                  \
		bench_report_exact(peer_run(prog, scenario, arg, field));   \
	}

#define PEER_SIDES(tag, scenario, arg, field, theirs_prog)                  \
	PEER_SIDE(tag##_ours, "peer_sq", scenario, arg, field)              \
	PEER_SIDE(tag##_theirs, theirs_prog, scenario, arg, field)

/* Against libdispatch, always built. No fib-wait rows: libdispatch parks a
 * thread per waiting node and, on a 2-CPU machine, stops making threads
 * before the tree completes (at cutoff 12 always, at 20 now and then). */
PEER_SIDES(d_fan, "fanout", FANOUT_TASKS, 0, "peer_dispatch")
PEER_SIDES(d_fanrss, "fanout", FANOUT_TASKS, 1, "peer_dispatch")
PEER_SIDES(d_fn12, "fib-notify", "12", 0, "peer_dispatch")
PEER_SIDES(d_fn20, "fib-notify", "20", 0, "peer_dispatch")
PEER_SIDES(d_q, "queues", "1000000", 0, "peer_dispatch")
PEER_SIDES(d_qrss, "queues", "1000000", 1, "peer_dispatch")

#ifdef BENCH_HAVE_TBB
PEER_SIDES(t_fan, "fanout", FANOUT_TASKS, 0, "peer_tbb")
PEER_SIDES(t_fanrss, "fanout", FANOUT_TASKS, 1, "peer_tbb")
PEER_SIDES(t_fw12, "fib-wait", "12", 0, "peer_tbb")
PEER_SIDES(t_fw20, "fib-wait", "20", 0, "peer_tbb")
PEER_SIDES(t_fn12, "fib-notify", "12", 0, "peer_tbb")
PEER_SIDES(t_fn20, "fib-notify", "20", 0, "peer_tbb")
PEER_SIDES(t_pp, "pingpong", "200000", 0, "peer_tbb")
#endif

#ifdef BENCH_HAVE_UV
PEER_SIDES(u_fan, "fanout", FANOUT_TASKS, 0, "peer_uv")
PEER_SIDES(u_fanrss, "fanout", FANOUT_TASKS, 1, "peer_uv")
PEER_SIDES(u_fn12, "fib-notify", "12", 0, "peer_uv")
PEER_SIDES(u_fn20, "fib-notify", "20", 0, "peer_uv")
/* libuv's hop is a wake-up through the kernel: fewer hops, same figure. */
PEER_SIDES(u_pp, "pingpong", "20000", 0, "peer_uv")
#endif

#define ROW(name, tag, label, target) \
	{ name, 1, tag##_ours, tag##_theirs, label, target, NULL, NULL }

/* Fork-join figures are ns per fib(27); the RSS rows' figures are KiB.
 * "1M serial queues": made, a task each, waited for, released (peer_gcd.c);
 * its RSS row's target: no more memory per queue than libdispatch. */
const bench_scenario_t bench_peers[] = {
	ROW("peer fanout 1M ns/task dispatch", d_fan, "libdispatch", 0),
	ROW("peer fanout 1M RSS KiB dispatch", d_fanrss, "libdispatch", 0),
	ROW("peer fib27 notify c12 dispatch", d_fn12, "libdispatch", 0),
	ROW("peer fib27 notify c20 dispatch", d_fn20, "libdispatch", 0),
	ROW("peer 1M serial queues ns/queue", d_q, "libdispatch", 0),
	ROW("peer 1M serial queues RSS KiB", d_qrss, "libdispatch", 1),
#ifdef BENCH_HAVE_TBB
	ROW("peer fanout 1M ns/task tbb", t_fan, "oneTBB task_group", 0),
	ROW("peer fanout 1M RSS KiB tbb", t_fanrss, "oneTBB task_group",
			0),
	ROW("peer fib27 wait c12 tbb", t_fw12, "oneTBB task_group",
			1.5),
	ROW("peer fib27 wait c20 tbb", t_fw20, "oneTBB task_group",
			1.5),
	ROW("peer fib27 notify c12 tbb", t_fn12, "oneTBB task_group",
			1.5),
	ROW("peer fib27 notify c20 tbb", t_fn20, "oneTBB task_group",
			1.5),
	ROW("peer pingpong ns/hop tbb", t_pp, "oneTBB task_arena", 0),
#endif
#ifdef BENCH_HAVE_UV
	ROW("peer fanout 1M ns/task uv", u_fan, "libuv queue_work", 0),
	ROW("peer fanout 1M RSS KiB uv", u_fanrss, "libuv queue_work",
			0),
	ROW("peer fib27 notify c12 uv", u_fn12, "libuv queue_work",
			0),
	ROW("peer fib27 notify c20 uv", u_fn20, "libuv queue_work",
			0),
	ROW("peer pingpong ns/hop uv", u_pp, "libuv async", 0),
#endif
	{ 0 }
};
