// SwiftQueues benchmarks — oneTBB's side of the parallel-loop rows
// (bench_loops.c): tbb::parallel_for over a blocked_range with the default
// (auto) partitioner and the same bodies (loops_body.h).
//
//   tbb_loops trivial|body   prints the median ns per iteration
//
// Built by Benchmarks/Makefile when oneTBB (libtbb-dev) is installed.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../loops_body.h"

int
main(int argc, char **argv)
{
	bool trivial = argc == 2 && std::strcmp(argv[1], "trivial") == 0;
	bool body = argc == 2 && std::strcmp(argv[1], "body") == 0;
	if (!trivial && !body) {
		std::fprintf(stderr, "usage: tbb_loops trivial|body\n");
		return 2;
	}
	size_t n = trivial ? LOOP_TRIVIAL_N : LOOP_BODY_N;
	std::vector<uint8_t> out(n);
	uint8_t *p = out.data();
	auto run = [&] {
		tbb::parallel_for(tbb::blocked_range<size_t>(0, n),
				[=](const tbb::blocked_range<size_t> &r) {
			if (trivial)
				loop_trivial(p, r.begin(), r.end());
			else
				loop_body(p, r.begin(), r.end());
		});
	};
	run();
	double ns[LOOP_RUNS];
	for (int i = 0; i < LOOP_RUNS; i++) {
		auto t0 = std::chrono::steady_clock::now();
		run();
		auto t1 = std::chrono::steady_clock::now();
		ns[i] = std::chrono::duration<double, std::nano>(t1 - t0).count() /
				(double)n;
	}
	std::sort(ns, ns + LOOP_RUNS);
	// The stores must not be dropped.
	uint64_t check = 0;
	for (size_t i = 0; i < n; i += 4096)
		check += p[i];
	std::printf("%.4f\n%llu\n", ns[LOOP_RUNS / 2],
			(unsigned long long)check);
	return 0;
}
