/*
 * SwiftQueues benchmarks — queues, groups, semaphores, apply: the C
 * scenarios of docs/PERFORMANCE.md, each against the toolchain's libdispatch
 * through the same _f (function pointer) calls.
 *
 * Every scenario checks its own result (a count that must add up), so a
 * side that drops work fails the run instead of looking fast.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "dispatch_compat.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include <swiftqueues.h>

#define NOINLINE __attribute__((noinline))

/* ---- shared work functions ------------------------------------------------ */

/* Increments a plain counter: only ever run on a serial queue. */
static NOINLINE void
bump(void *ctx)
{
	(*(uint64_t *)ctx)++;
}

static NOINLINE void
bump_atomic(void *ctx)
{
	atomic_fetch_add_explicit((_Atomic uint64_t *)ctx, 1,
			memory_order_relaxed);
}

static NOINLINE void
empty_apply(void *ctx, size_t i)
{
	bench_clobber();
}

static void
read_u64(void *ctx)
{
	bench_sink = *(uint64_t *)ctx;
}

/* ---- async to a serial queue: enqueue + drain ----------------------------- */

static sq_queue_t sq_serial;
static dispatch_queue_t d_serial;
static uint64_t serial_count; /* touched only on the serial queues */

static void
serial_setup(void)
{
	sq_serial = sq_queue_create("bench.serial", NULL);
	d_serial = dispatch_queue_create("bench.serial", NULL);
}

static void
serial_teardown(void)
{
	sq_release(sq_serial);
	dispatch_release(d_serial);
}

static void
zero_serial(void *ctx)
{
	serial_count = 0;
}

static void
async_serial_ours(size_t ops)
{
	size_t i;
	sq_sync_f(sq_serial, NULL, zero_serial);
	for (i = 0; i < ops; i++)
		sq_async_f(sq_serial, &serial_count, bump);
	sq_sync_f(sq_serial, &serial_count, read_u64); /* the drain */
	if (bench_sink != ops)
		bench_fail("sq serial queue ran %llu of %zu",
				(unsigned long long)bench_sink, ops);
}

static void
async_serial_theirs(size_t ops)
{
	size_t i;
	dispatch_sync_f(d_serial, NULL, zero_serial);
	for (i = 0; i < ops; i++)
		dispatch_async_f(d_serial, &serial_count, bump);
	dispatch_sync_f(d_serial, &serial_count, read_u64);
	if (bench_sink != ops)
		bench_fail("dispatch serial queue ran %llu of %zu",
				(unsigned long long)bench_sink, ops);
}

/* ---- async to the global queue + group wait ------------------------------- */

static _Atomic uint64_t global_count;

static void
async_global_ours(size_t ops)
{
	size_t i;
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_group_t group = sq_group_create();
	atomic_store(&global_count, 0);
	for (i = 0; i < ops; i++)
		sq_group_async_f(group, g, &global_count, bump_atomic);
	sq_group_wait(group, SQ_TIME_FOREVER);
	sq_release(group);
	if (atomic_load(&global_count) != ops)
		bench_fail("sq global queue ran %llu of %zu",
				(unsigned long long)atomic_load(&global_count),
				ops);
}

static void
async_global_theirs(size_t ops)
{
	size_t i;
	dispatch_queue_t g = dispatch_get_global_queue(
			DISPATCH_QUEUE_PRIORITY_DEFAULT, 0);
	dispatch_group_t group = dispatch_group_create();
	atomic_store(&global_count, 0);
	for (i = 0; i < ops; i++)
		dispatch_group_async_f(group, g, &global_count, bump_atomic);
	dispatch_group_wait(group, DISPATCH_TIME_FOREVER);
	dispatch_release(group);
	if (atomic_load(&global_count) != ops)
		bench_fail("dispatch global queue ran %llu of %zu",
				(unsigned long long)atomic_load(&global_count),
				ops);
}

/* ---- sync on an idle serial queue ------------------------------------------ */

static void
sync_idle_ours(size_t ops)
{
	size_t i;
	uint64_t n = 0;
	for (i = 0; i < ops; i++)
		sq_sync_f(sq_serial, &n, bump);
	if (n != ops)
		bench_fail("sq_sync_f ran %llu of %zu", (unsigned long long)n,
				ops);
}

static void
sync_idle_theirs(size_t ops)
{
	size_t i;
	uint64_t n = 0;
	for (i = 0; i < ops; i++)
		dispatch_sync_f(d_serial, &n, bump);
	if (n != ops)
		bench_fail("dispatch_sync_f ran %llu of %zu",
				(unsigned long long)n, ops);
}

/* ---- ping-pong between two serial queues ---------------------------------- */

/*
 * One message bounces between queue A and queue B; an op is one hop. The
 * hop count lives in the message, which only one queue holds at a time.
 * The end is signalled through a POSIX semaphore on both sides.
 */
static struct {
	sq_queue_t sq_a, sq_b;
	dispatch_queue_t d_a, d_b;
	size_t left;
	sem_t done;
} pp;

static void
pingpong_setup(void)
{
	pp.sq_a = sq_queue_create("bench.ping", NULL);
	pp.sq_b = sq_queue_create("bench.pong", NULL);
	pp.d_a = dispatch_queue_create("bench.ping", NULL);
	pp.d_b = dispatch_queue_create("bench.pong", NULL);
	sem_init(&pp.done, 0, 0);
}

static void
pingpong_teardown(void)
{
	sq_release(pp.sq_a);
	sq_release(pp.sq_b);
	dispatch_release(pp.d_a);
	dispatch_release(pp.d_b);
	sem_destroy(&pp.done);
}

static void sq_hop_b(void *ctx);

static void
sq_hop_a(void *ctx)
{
	if (--pp.left == 0)
		sem_post(&pp.done);
	else
		sq_async_f(pp.sq_b, ctx, sq_hop_b);
}

static void
sq_hop_b(void *ctx)
{
	if (--pp.left == 0)
		sem_post(&pp.done);
	else
		sq_async_f(pp.sq_a, ctx, sq_hop_a);
}

static void d_hop_b(void *ctx);

static void
d_hop_a(void *ctx)
{
	if (--pp.left == 0)
		sem_post(&pp.done);
	else
		dispatch_async_f(pp.d_b, ctx, d_hop_b);
}

static void
d_hop_b(void *ctx)
{
	if (--pp.left == 0)
		sem_post(&pp.done);
	else
		dispatch_async_f(pp.d_a, ctx, d_hop_a);
}

static void
wait_done(void)
{
	while (sem_wait(&pp.done) != 0) {
	}
}

static void
pingpong_ours(size_t ops)
{
	pp.left = ops;
	sq_async_f(pp.sq_a, NULL, sq_hop_a);
	wait_done();
}

static void
pingpong_theirs(size_t ops)
{
	pp.left = ops;
	dispatch_async_f(pp.d_a, NULL, d_hop_a);
	wait_done();
}

/*
 * The same at a pool width of 8 and 16 (SQ_WORKERS), to show that a wide
 * pool costs a hop nothing more. The width is read once, when the pool
 * starts, so each run is a child process (this program again, with
 * BENCH_QUEUES_CHILD=pingpong-ours or -theirs and SQ_WORKERS set): it
 * warms up with 10,000 hops, times `ops` hops and prints ns per hop.
 * libdispatch's side runs in the same kind of child, at its own width.
 */
#define PP_WIDTH_ENV "BENCH_PINGPONG_OPS"

int
bench_queues_child(const char *mode)
{
	const char *ops_s = getenv(PP_WIDTH_ENV);
	size_t ops = ops_s ? (size_t)strtoull(ops_s, NULL, 10) : 0;
	bool ours = strcmp(mode, "pingpong-ours") == 0;
	if (ops == 0 || (!ours && strcmp(mode, "pingpong-theirs") != 0)) {
		fprintf(stderr, "bench: bad child mode %s\n", mode);
		return 2;
	}
	pingpong_setup();
	if (ours)
		pingpong_ours(10000);
	else
		pingpong_theirs(10000);
	uint64_t t0 = bench_mono_ns();
	if (ours)
		pingpong_ours(ops);
	else
		pingpong_theirs(ops);
	double ns = (double)(bench_mono_ns() - t0) / (double)ops;
	printf("%.3f\n", ns);
	return 0;
}

static double
pingpong_in_child(const char *side, unsigned width, size_t ops)
{
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		bench_fail("readlink /proc/self/exe");
	exe[len] = '\0';
	char cmd[4096 + 128];
	snprintf(cmd, sizeof(cmd), "BENCH_QUEUES_CHILD=pingpong-%s "
			"SQ_WORKERS=%u %s=%zu '%s'", side, width, PP_WIDTH_ENV,
			ops, exe);
	FILE *p = popen(cmd, "r");
	if (p == NULL)
		bench_fail("popen: %s", strerror(errno));
	double ns = -1;
	if (fscanf(p, "%lf", &ns) != 1)
		ns = -1;
	if (pclose(p) != 0 || ns < 0)
		bench_fail("ping-pong child (%s, width %u) failed", side, width);
	return ns;
}

static void
pingpong8_ours(size_t ops)
{
	bench_report_value(pingpong_in_child("ours", 8, ops), ops);
}

static void
pingpong8_theirs(size_t ops)
{
	bench_report_value(pingpong_in_child("theirs", 8, ops), ops);
}

static void
pingpong16_ours(size_t ops)
{
	bench_report_value(pingpong_in_child("ours", 16, ops), ops);
}

static void
pingpong16_theirs(size_t ops)
{
	bench_report_value(pingpong_in_child("theirs", 16, ops), ops);
}

/* ---- semaphore ping-pong between two threads ------------------------------ */

static struct {
	sq_semaphore_t sq_ping, sq_pong;
	dispatch_semaphore_t d_ping, d_pong;
	size_t ops;
} sp;

static void
sema_setup(void)
{
	sp.sq_ping = sq_semaphore_create(0);
	sp.sq_pong = sq_semaphore_create(0);
	sp.d_ping = dispatch_semaphore_create(0);
	sp.d_pong = dispatch_semaphore_create(0);
}

static void
sema_teardown(void)
{
	sq_release(sp.sq_ping);
	sq_release(sp.sq_pong);
	dispatch_release(sp.d_ping);
	dispatch_release(sp.d_pong);
}

static void
sq_sema_body(void *arg, unsigned i)
{
	size_t n;
	for (n = 0; n < sp.ops; n++) {
		if (i == 0) {
			sq_semaphore_signal(sp.sq_ping);
			sq_semaphore_wait(sp.sq_pong, SQ_TIME_FOREVER);
		} else {
			sq_semaphore_wait(sp.sq_ping, SQ_TIME_FOREVER);
			sq_semaphore_signal(sp.sq_pong);
		}
	}
}

static void
d_sema_body(void *arg, unsigned i)
{
	size_t n;
	for (n = 0; n < sp.ops; n++) {
		if (i == 0) {
			dispatch_semaphore_signal(sp.d_ping);
			dispatch_semaphore_wait(sp.d_pong,
					DISPATCH_TIME_FOREVER);
		} else {
			dispatch_semaphore_wait(sp.d_ping,
					DISPATCH_TIME_FOREVER);
			dispatch_semaphore_signal(sp.d_pong);
		}
	}
}

static void
sema_pingpong_ours(size_t ops)
{
	sp.ops = ops;
	bench_parallel(2, sq_sema_body, NULL);
}

static void
sema_pingpong_theirs(size_t ops)
{
	sp.ops = ops;
	bench_parallel(2, d_sema_body, NULL);
}

/* ---- apply, empty iterations ----------------------------------------------- */

static void
apply_ours(size_t ops)
{
	sq_apply_f(ops, SQ_APPLY_AUTO, NULL, empty_apply);
}

static void
apply_theirs(size_t ops)
{
	dispatch_apply_f(ops, DISPATCH_APPLY_AUTO, NULL, empty_apply);
}

/* ---- group enter + leave --------------------------------------------------- */

static void
group_ours(size_t ops)
{
	size_t i;
	sq_group_t g = sq_group_create();
	for (i = 0; i < ops; i++) {
		sq_group_enter(g);
		sq_group_leave(g);
	}
	if (sq_group_wait(g, SQ_TIME_NOW) != 0)
		bench_fail("sq group not empty");
	sq_release(g);
}

static void
group_theirs(size_t ops)
{
	size_t i;
	dispatch_group_t g = dispatch_group_create();
	for (i = 0; i < ops; i++) {
		dispatch_group_enter(g);
		dispatch_group_leave(g);
	}
	if (dispatch_group_wait(g, DISPATCH_TIME_NOW) != 0)
		bench_fail("dispatch group not empty");
	dispatch_release(g);
}

/* ---- 64 tasks that each block on the global queue: wall time --------------- */

/*
 * The blocking scenario could use 1 s per task; 200 ms keeps `make bench` short and
 * measures the same thing: how fast the pool adds threads when every
 * worker is blocked. An op is one task; ns/op = wall time / 64.
 */
#define BLOCK_MS 200

static _Atomic uint64_t blocked_done;

static NOINLINE void
block_task(void *ctx)
{
	struct timespec ts = { 0, BLOCK_MS * 1000000L };
	while (nanosleep(&ts, &ts) != 0) {
	}
	atomic_fetch_add(&blocked_done, 1);
}

static void
blocking_ours(size_t ops)
{
	size_t i;
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_group_t group = sq_group_create();
	atomic_store(&blocked_done, 0);
	for (i = 0; i < ops; i++)
		sq_group_async_f(group, g, NULL, block_task);
	sq_group_wait(group, SQ_TIME_FOREVER);
	sq_release(group);
	if (atomic_load(&blocked_done) != ops)
		bench_fail("sq: %llu of %zu blocking tasks ran",
				(unsigned long long)atomic_load(&blocked_done),
				ops);
}

static void
blocking_theirs(size_t ops)
{
	size_t i;
	dispatch_queue_t g = dispatch_get_global_queue(
			DISPATCH_QUEUE_PRIORITY_DEFAULT, 0);
	dispatch_group_t group = dispatch_group_create();
	atomic_store(&blocked_done, 0);
	for (i = 0; i < ops; i++)
		dispatch_group_async_f(group, g, NULL, block_task);
	dispatch_group_wait(group, DISPATCH_TIME_FOREVER);
	dispatch_release(group);
	if (atomic_load(&blocked_done) != ops)
		bench_fail("dispatch: %llu of %zu blocking tasks ran",
				(unsigned long long)atomic_load(&blocked_done),
				ops);
}

/* ---- queue create + release ------------------------------------------------ */

static void
create_ours(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++)
		sq_release(sq_queue_create("bench.create", NULL));
}

static void
create_theirs(size_t ops)
{
	size_t i;
	for (i = 0; i < ops; i++)
		dispatch_release(dispatch_queue_create("bench.create", NULL));
}

/* ---- the table -------------------------------------------------------------- */

/*
 * Ops per run are sized for roughly 50-200 ms per run on a 2-core VM. The
 * blocking scenario is the exception: one run is one batch of 64 tasks,
 * at least 200 ms on our side and seconds on a pool that grows slowly.
 */
const bench_scenario_t bench_queues[] = {
	{ "async serial enqueue+drain", 500000,
	  async_serial_ours, async_serial_theirs,
	  "libdispatch", 0.8, serial_setup, serial_teardown },
	{ "async global + group wait", 300000,
	  async_global_ours, async_global_theirs,
	  "libdispatch", 0.8, NULL, NULL },
	{ "sync idle serial queue", 2000000,
	  sync_idle_ours, sync_idle_theirs,
	  "libdispatch", 1.0, serial_setup, serial_teardown },
	{ "ping-pong 2 serial queues", 200000,
	  pingpong_ours, pingpong_theirs,
	  "libdispatch", 0.3, pingpong_setup, pingpong_teardown },
	{ "ping-pong, SQ_WORKERS=8", 200000,
	  pingpong8_ours, pingpong8_theirs,
	  "libdispatch", 0.3, NULL, NULL },
	{ "ping-pong, SQ_WORKERS=16", 200000,
	  pingpong16_ours, pingpong16_theirs,
	  "libdispatch", 0.3, NULL, NULL },
	{ "semaphore ping-pong 2 threads", 30000,
	  sema_pingpong_ours, sema_pingpong_theirs,
	  "libdispatch", 1.0, sema_setup, sema_teardown },
	{ "apply 10M empty iterations", 10000000,
	  apply_ours, apply_theirs,
	  "libdispatch", 1.0, NULL, NULL },
	{ "group enter+leave", 10000000,
	  group_ours, group_theirs,
	  "libdispatch", 0, NULL, NULL },
	{ "64 blocking tasks (200 ms) wall", 64,
	  blocking_ours, blocking_theirs,
	  "libdispatch", 0.2, NULL, NULL },
	{ "queue create+release", 500000,
	  create_ours, create_theirs,
	  "libdispatch", 0, NULL, NULL },
	{ NULL, 0, NULL, NULL, NULL, 0, NULL, NULL }
};
