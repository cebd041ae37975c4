/*
 * SwiftQueues benchmarks — what every peer program shares (C and C++).
 *
 * A peer program runs one scenario once, in a fresh process, and prints
 * one line: "<figure> <peak RSS in KiB>". bench_peers.c starts one per
 * round and side. The scenarios, the same shape in every program:
 *
 *   fanout N        N empty tasks submitted from one thread, then one wait
 *                   for all of them; figure: ns per task
 *   fib-wait C      fork-join fib(27): every node above n = C spawns both
 *                   children as tasks and waits for them inside its own
 *                   task; nodes at or below C compute serially;
 *                   figure: ns per fib(27) (median of PEER_FIB_REPS)
 *   fib-notify C    the same tree without waiting inside tasks: a node's
 *                   sum runs as a continuation once both children are done
 *   pingpong N      one message bounces N times between two serial
 *                   contexts; figure: ns per hop
 */
#ifndef SQ_BENCH_PEER_H
#define SQ_BENCH_PEER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define PEER_FIB_N 27
#ifndef PEER_FIB_REPS
#define PEER_FIB_REPS 15
#endif
#define PEER_FIB_WARMUP 3

static inline uint64_t
peer_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The serial leaf: kept out of line and at the start of a 64-byte line,
 * so every program runs the same code at the same place (see
 * loops_body.h). */
static __attribute__((noinline, aligned(64))) uint64_t
peer_fib_serial(unsigned n)
{
	return n < 2 ? n : peer_fib_serial(n - 1) + peer_fib_serial(n - 2);
}

/* fib(27) = 196418, the check every fork-join run must pass. */
#define PEER_FIB_EXPECTED 196418u

static inline long
peer_peak_rss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static inline int
peer_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Runs fib(27) through `run` (which returns the sum) WARMUP + REPS times
 * and returns the median ns of the counted runs; a wrong sum exits. */
static inline double
peer_fib_median(uint64_t (*run)(unsigned cutoff), unsigned cutoff)
{
	uint64_t t[PEER_FIB_REPS];
	int i;
	for (i = 0; i < PEER_FIB_WARMUP + PEER_FIB_REPS; i++) {
		uint64_t t0 = peer_now_ns();
		uint64_t sum = run(cutoff);
		uint64_t dt = peer_now_ns() - t0;
		if (sum != PEER_FIB_EXPECTED) {
			fprintf(stderr, "peer: fib(%d) = %llu, want %u\n",
					PEER_FIB_N, (unsigned long long)sum,
					PEER_FIB_EXPECTED);
			exit(1);
		}
		if (i >= PEER_FIB_WARMUP)
			t[i - PEER_FIB_WARMUP] = dt;
	}
	qsort(t, PEER_FIB_REPS, sizeof(t[0]), peer_cmp_u64);
	return (double)t[PEER_FIB_REPS / 2];
}

static inline void
peer_report(double figure)
{
	printf("%.3f %ld\n", figure, peer_peak_rss_kb());
}

static inline int
peer_usage(const char *prog)
{
	fprintf(stderr, "usage: %s fanout N | fib-wait CUTOFF | "
			"fib-notify CUTOFF | pingpong N\n", prog);
	return 2;
}

#endif /* SQ_BENCH_PEER_H */
