/*
 * SwiftQueues benchmarks — parallel loops: sq_apply_range_f against
 * oneTBB's parallel_for, sq_apply_f and libdispatch's dispatch_apply_f, on
 * a trivial body (10M stores) and a ~200 ns body (1M iterations); the
 * bodies are in loops_body.h.
 *
 * Each run of each side is a fresh process (this program again with
 * BENCH_LOOPS_CHILD set, or peers/tbb_loops), so no side's threads, warm
 * caches or spinning workers are left around for the other; the harness
 * interleaves the two sides as usual. A child times LOOP_RUNS loops after an
 * untimed one and prints the median ns per iteration and a checksum of the
 * stores, which the parent checks. The oneTBB rows are built when oneTBB is
 * installed (BENCH_HAVE_TBB, set by the Makefile).
 */
#include "harness.h"
#include "dispatch_compat.h"
#include "loops_body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <swiftqueues.h>

/* ---- the child: one side, one body ----------------------------------------- */

static uint8_t *loop_out;

static void
trivial_range(void *ctx, size_t begin, size_t end)
{
	loop_trivial(loop_out, begin, end);
}

static void
trivial_index(void *ctx, size_t i)
{
	loop_trivial_at(loop_out, i);
}

static void
body_range(void *ctx, size_t begin, size_t end)
{
	loop_body(loop_out, begin, end);
}

static void
body_index(void *ctx, size_t i)
{
	loop_body_at(loop_out, i);
}

static uint64_t
loop_checksum(const uint8_t *out, size_t n)
{
	uint64_t check = 0;
	for (size_t i = 0; i < n; i += 4096)
		check += out[i];
	return check;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* mode: "<range|apply|dispatch>-<trivial|body>". */
int
bench_loops_child(const char *mode)
{
	const char *dash = strchr(mode, '-');
	if (dash == NULL)
		goto bad;
	bool trivial = strcmp(dash + 1, "trivial") == 0;
	if (!trivial && strcmp(dash + 1, "body") != 0)
		goto bad;
	size_t side = (size_t)(dash - mode);
	bool range = strncmp(mode, "range", side) == 0 && side == 5;
	bool apply = strncmp(mode, "apply", side) == 0 && side == 5;
	bool dispatch = strncmp(mode, "dispatch", side) == 0 && side == 8;
	if (!range && !apply && !dispatch)
		goto bad;

	size_t n = trivial ? LOOP_TRIVIAL_N : LOOP_BODY_N;
	loop_out = calloc(n, sizeof(*loop_out));
	if (loop_out == NULL)
		bench_fail("out of memory");
	double ns[LOOP_RUNS + 1];
	for (int r = 0; r <= LOOP_RUNS; r++) {
		uint64_t t0 = bench_mono_ns();
		if (range)
			sq_apply_range_f(n, SQ_APPLY_AUTO, NULL,
					trivial ? trivial_range : body_range);
		else if (apply)
			sq_apply_f(n, SQ_APPLY_AUTO, NULL,
					trivial ? trivial_index : body_index);
		else
			dispatch_apply_f(n, DISPATCH_APPLY_AUTO, NULL,
					trivial ? trivial_index : body_index);
		ns[r] = (double)(bench_mono_ns() - t0) / (double)n;
	}
	/* ns[0] is the untimed warm-up. */
	qsort(ns + 1, LOOP_RUNS, sizeof(double), cmp_double);
	printf("%.4f\n%llu\n", ns[1 + LOOP_RUNS / 2],
			(unsigned long long)loop_checksum(loop_out, n));
	return 0;
bad:
	fprintf(stderr, "bench: bad loops child mode %s\n", mode);
	return 2;
}

/* ---- the parent: one run = one child ---------------------------------------- */

/* The checksum every side's stores must give (computed once per body). */
static uint64_t
expected_checksum(bool trivial)
{
	static uint64_t sums[2];
	static bool known[2];
	if (!known[trivial]) {
		size_t n = trivial ? LOOP_TRIVIAL_N : LOOP_BODY_N;
		uint8_t *out = calloc(n, sizeof(*out));
		if (out == NULL)
			bench_fail("out of memory");
		for (size_t i = 0; i < n; i += 4096) {
			if (trivial)
				loop_trivial(out, i, i + 1);
			else
				loop_body(out, i, i + 1);
		}
		sums[trivial] = loop_checksum(out, n);
		known[trivial] = true;
		free(out);
	}
	return sums[trivial];
}

/* Runs `cmd` (a child printing ns/iteration and a checksum); returns the
 * ns per iteration. */
static double
loops_in_child(const char *cmd, bool trivial)
{
	FILE *p = popen(cmd, "r");
	if (p == NULL)
		bench_fail("popen %s", cmd);
	double ns = -1;
	unsigned long long check = 0;
	if (fscanf(p, "%lf %llu", &ns, &check) != 2)
		ns = -1;
	if (pclose(p) != 0 || ns < 0)
		bench_fail("loop child failed: %s", cmd);
	if (check != expected_checksum(trivial))
		bench_fail("loop child stored wrong values: %s", cmd);
	return ns;
}

static const char *
self_dir(void)
{
	static char dir[4096];
	if (dir[0] == '\0') {
		ssize_t len = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
		if (len <= 0)
			bench_fail("readlink /proc/self/exe");
		dir[len] = '\0';
		char *slash = strrchr(dir, '/');
		if (slash != NULL)
			*slash = '\0';
	}
	return dir;
}

/* This program as the child for `mode`. */
static double
loops_ours(const char *mode, bool trivial)
{
	char cmd[4096 + 128];
	snprintf(cmd, sizeof(cmd), "BENCH_LOOPS_CHILD=%s '%s/bench'", mode,
			self_dir());
	return loops_in_child(cmd, trivial);
}

static void range_trivial(size_t ops)
{ bench_report_exact(loops_ours("range-trivial", true)); }
static void apply_trivial(size_t ops)
{ bench_report_exact(loops_ours("apply-trivial", true)); }
static void dispatch_trivial(size_t ops)
{ bench_report_exact(loops_ours("dispatch-trivial", true)); }
static void range_body(size_t ops)
{ bench_report_exact(loops_ours("range-body", false)); }
static void apply_body(size_t ops)
{ bench_report_exact(loops_ours("apply-body", false)); }
static void dispatch_body(size_t ops)
{ bench_report_exact(loops_ours("dispatch-body", false)); }

#ifdef BENCH_HAVE_TBB
static double
loops_tbb(const char *body, bool trivial)
{
	char cmd[4096 + 128];
	snprintf(cmd, sizeof(cmd), "'%s/tbb_loops' %s", self_dir(), body);
	return loops_in_child(cmd, trivial);
}

static void tbb_trivial(size_t ops)
{ bench_report_exact(loops_tbb("trivial", true)); }
static void tbb_body(size_t ops)
{ bench_report_exact(loops_tbb("body", false)); }
#endif

/* Ours is sq_apply_range_f in every row; theirs is named last. */
const bench_scenario_t bench_loops[] = {
#ifdef BENCH_HAVE_TBB
	{ "loop 10M trivial vs oneTBB", LOOP_TRIVIAL_N,
	  range_trivial, tbb_trivial,
	  "oneTBB", 1.0, NULL, NULL },
#endif
	{ "loop 10M trivial vs sq_apply_f", LOOP_TRIVIAL_N,
	  range_trivial, apply_trivial,
	  "sq_apply_f", 1.0, NULL, NULL },
	{ "loop 10M trivial vs dispatch", LOOP_TRIVIAL_N,
	  range_trivial, dispatch_trivial,
	  "libdispatch", 1.0, NULL, NULL },
#ifdef BENCH_HAVE_TBB
	{ "loop 1M 200ns body vs oneTBB", LOOP_BODY_N,
	  range_body, tbb_body,
	  "oneTBB", 1.0, NULL, NULL },
#endif
	{ "loop 1M 200ns body vs sq_apply_f", LOOP_BODY_N,
	  range_body, apply_body,
	  "sq_apply_f", 1.0, NULL, NULL },
	{ "loop 1M 200ns body vs dispatch", LOOP_BODY_N,
	  range_body, dispatch_body,
	  "libdispatch", 1.0, NULL, NULL },
	{ NULL, 0, NULL, NULL, NULL, 0, NULL, NULL }
};
