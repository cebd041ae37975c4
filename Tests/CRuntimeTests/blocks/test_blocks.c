/*
 * The block forms (clang -fblocks): sq_once and sq_benchmark.
 */
#include "sqtest.h"

int
main(void)
{
	static sq_once_t predicate;
	__block int runs = 0;
	for (int i = 0; i < 3; i++)
		sq_once(&predicate, ^{ runs++; });
	CHECK_EQ(runs, 1);

	__block volatile uint64_t sink = 0;
	uint64_t ns = sq_benchmark(1000, ^{
		for (int i = 0; i < 100; i++)
			sink += (uint64_t)i;
	});
	printf("100-add loop in a block: %" PRIu64 " ns\n", ns);
	CHECK(ns < 100000);
	CHECK_EQ(sink, 1000ull * 4950);
	CHECK_EQ(sq_benchmark(0, ^{ sink++; }), 0);
	return sqt_finish("blocks");
}
