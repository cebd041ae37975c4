/*
 * SwiftQueues benchmarks — the loop bodies of the parallel-loop rows, shared
 * by bench_loops.c (SwiftQueues, libdispatch) and peers/tbb_loops.cpp
 * (oneTBB) so every side runs the same code.
 *
 *   trivial: out[i] = the top byte of i * 2654435761 (a byte store; GCC's
 *            -O2 keeps it a scalar loop of seven instructions);
 *   body:    a dependent chain of LOOP_BODY_STEPS multiply-adds per index
 *            (about 200 ns here), kept from being vectorized or folded by
 *            an empty asm per step, then a store.
 */
#ifndef SQ_BENCH_LOOPS_BODY_H
#define SQ_BENCH_LOOPS_BODY_H

#include <stddef.h>
#include <stdint.h>

#define LOOP_TRIVIAL_N 10000000u
#define LOOP_BODY_N 1000000u
#define LOOP_BODY_STEPS 150u

/* One index of each body: what the one-call-per-index sides (sq_apply_f,
 * dispatch_apply_f) run, inlined into their function. */
static inline void
loop_trivial_at(uint8_t *out, size_t i)
{
	out[i] = (uint8_t)(((uint32_t)i * 2654435761u) >> 24);
}

static inline void
loop_body_at(uint8_t *out, size_t i)
{
	uint64_t x = i;
	for (unsigned k = 0; k < LOOP_BODY_STEPS; k++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ __volatile__("" : "+r"(x));
	}
	out[i] = (uint8_t)(x >> 56);
}

/* A range of each body: what the range sides (sq_apply_range_f, oneTBB's
 * parallel_for) run. Out of line and at the start of a 64-byte line, so
 * every side runs the same loop at the same place: the trivial body's
 * 22-byte store loop runs at half speed across a line on AMD Zen, and
 * where a loop inlined into each side falls is the linker's luck, which
 * can halve one side. A call per chunk is noise. */
#define LOOP_PLACED __attribute__((noinline, aligned(64)))

static LOOP_PLACED void
loop_trivial(uint8_t *out, size_t begin, size_t end)
{
	for (size_t i = begin; i < end; i++)
		loop_trivial_at(out, i);
}

static LOOP_PLACED void
loop_body(uint8_t *out, size_t begin, size_t end)
{
	for (size_t i = begin; i < end; i++)
		loop_body_at(out, i);
}

/* The figure a child process prints: the median ns per iteration of
 * LOOP_RUNS timed runs, after one untimed run (pages, threads). */
#define LOOP_RUNS 5

#endif /* SQ_BENCH_LOOPS_BODY_H */
