/*
 * SwiftQueues benchmarks — the harness interface.
 *
 * A scenario measures one operation two ways: with SwiftQueues ("ours") and
 * with the toolchain's libdispatch or, where libdispatch has no counterpart,
 * with a plain baseline ("theirs"). The harness runs the two sides
 * alternately (A B A B ...) for a number of rounds, takes the median ns/op
 * of each side and reports the ratio ours / theirs (lower is better).
 *
 * Adding scenarios:
 *   - write a run function per side, `void fn(size_t ops)`, that performs
 *     `ops` operations; the harness times the whole call unless the function
 *     calls bench_timer_restart() / bench_timer_stop() around the part that
 *     counts (to leave out thread start-up, say);
 *   - list them in a bench_scenario_t table that ends with an all-zero entry,
 *     in a bench_<area>.c file (the Makefile builds every bench_*.c);
 *   - declare the table below and add it to `bench_areas` in harness.c.
 */
#ifndef SQ_BENCH_HARNESS_H
#define SQ_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

/* Performs `ops` operations of one side of a scenario. */
typedef void (*bench_fn)(size_t ops);

typedef struct bench_scenario_s {
	const char *name;         /* unique; shown in the table and the JSON */
	size_t ops;               /* operations per run; ns/op = time / ops */
	bench_fn ours;            /* the SwiftQueues side */
	bench_fn theirs;          /* libdispatch, or the baseline */
	const char *theirs_label; /* "libdispatch", or what the baseline is */
	double target;            /* ours/theirs must be <= target; 0: none;
	                             negative: ours - theirs (an added cost)
	                             must be <= -target ns/op */
	void (*setup)(void);      /* optional: once, before the first run */
	void (*teardown)(void);   /* optional: once, after the last run */
} bench_scenario_t;

/* The scenario tables, one per bench_<area>.c. */
extern const bench_scenario_t bench_primitives[];
extern const bench_scenario_t bench_queues[];
extern const bench_scenario_t bench_io[];
extern const bench_scenario_t bench_sources[];
extern const bench_scenario_t bench_pool[];
extern const bench_scenario_t bench_trace[];
extern const bench_scenario_t bench_timers[];
extern const bench_scenario_t bench_qos[];
extern const bench_scenario_t bench_loops[];
extern const bench_scenario_t bench_peers[];

/* bench_pool.c's child processes: main() runs this instead of the table
 * when BENCH_POOL_CHILD is set, and returns its exit status. */
int bench_pool_child(const char *mode);

/* bench_queues.c's child processes (a pool width of their own): main() runs
 * this instead of the table when BENCH_QUEUES_CHILD is set. */
int bench_queues_child(const char *mode);

/* bench_loops.c's child processes (one side of one loop row): main() runs
 * this instead of the table when BENCH_LOOPS_CHILD is set. */
int bench_loops_child(const char *mode);

/* From a scenario's setup: run at most `rounds` counted rounds of it (for
 * scenarios whose run lasts seconds). */
void bench_limit_rounds(unsigned rounds);

/* Restarts the clock of the current run: what came before does not count.
 * Call these two from the thread the harness called the run function on. */
void bench_timer_restart(void);

/* Stops the clock of the current run: what comes after does not count. */
void bench_timer_stop(void);

/*
 * Runs fn(arg, i) on `nthreads` threads at once (i = 0 .. nthreads - 1; the
 * calling thread is number 0). Only the time from the moment every thread is
 * ready until the last one returns counts.
 */
void bench_parallel(unsigned nthreads, void (*fn)(void *arg, unsigned i),
		void *arg);

/* Reports a broken scenario (a wrong result, a failed call) and exits. */
void bench_fail(const char *fmt, ...)
		__attribute__((format(printf, 1, 2), noreturn));

/* Waits on a POSIX semaphore (a sem_t *) for at most `ms`; past that, fails
 * the run with "<what>: timed out". */
void bench_sem_wait(void *sem, unsigned ms, const char *what);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_mono_ns(void);

/* For scenarios that measure something other than time per op (a
 * latency, a CPU time, a count): puts `value` x `ops` nanoseconds on the
 * clock of the current run (restart, wait that long, stop), so the table
 * and results.json carry `value` as the ns/op figure. */
void bench_report_value(double value, size_t ops);

/* The same without the clock: the current run's figure is `value`, exactly
 * (what a preemption of a bench_report_value wait would add is left out;
 * for figures computed once, in a scenario's setup). */
void bench_report_exact(double value);

/* Where results go so the compiler cannot drop the work that made them. */
extern volatile uint64_t bench_sink;

/* Keeps the compiler from merging, hoisting or deleting loop iterations. */
#define bench_clobber() __asm__ __volatile__("" ::: "memory")

#endif /* SQ_BENCH_HARNESS_H */
