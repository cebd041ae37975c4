/*
 * SwiftQueues — sq_benchmark_f.
 */
#include "internal.h"

static void
_sq_benchmark_empty(void *context)
{
	(void)context;
}

uint64_t
sq_benchmark_f(size_t count, void *context, sq_function_t function)
{
	_SQ_REQUIRE_FUNCTION("sq_benchmark_f", function);
	if (count == 0)
		return 0;

	/* Both loops make the same indirect call through a volatile pointer,
	 * so the compiler cannot specialise one of them away. */
	sq_function_t volatile call = function;
	uint64_t start = _sq_monotonic_ns();
	for (size_t i = 0; i < count; i++)
		call(context);
	uint64_t total = _sq_monotonic_ns() - start;

	sq_function_t volatile empty = _sq_benchmark_empty;
	start = _sq_monotonic_ns();
	for (size_t i = 0; i < count; i++)
		empty(context);
	uint64_t overhead = _sq_monotonic_ns() - start;

	if (total <= overhead)
		return 0;
	return (total - overhead + count / 2) / count;
}
