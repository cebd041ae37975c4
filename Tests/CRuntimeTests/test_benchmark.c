/*
 * sq_benchmark_f: mean ns per call, loop overhead removed.
 */
#include "sqtest.h"

/* Busy-waits about `ns` nanoseconds. */
static void
busy_ns(void *context)
{
	uint64_t ns = *(uint64_t *)context;
	uint64_t end = sqt_now_ns() + ns;
	while (sqt_now_ns() < end)
		;
}

static void
empty(void *context)
{
}

static void
null_function(void *unused)
{
	(void)sq_benchmark_f(10, NULL, (sq_function_t)unused);
}

int
main(void)
{
	uint64_t ns = 20000;
	uint64_t mean = sq_benchmark_f(200, &ns, busy_ns);
	printf("20 us busy wait: %" PRIu64 " ns per call\n", mean);
	CHECK(mean >= 15000);
	CHECK(mean < 1000000); /* generous: a loaded machine stretches it */

	uint64_t nothing = sq_benchmark_f(1000000, NULL, empty);
	printf("empty function: %" PRIu64 " ns per call\n", nothing);
	CHECK(nothing < 100);

	CHECK_EQ(sq_benchmark_f(0, &ns, busy_ns), 0);
	CHECK_CRASH(null_function, NULL,
			"SwiftQueues: sq_benchmark_f: function pointer is NULL");
	return sqt_finish("benchmark");
}
