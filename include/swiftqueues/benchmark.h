/*!
 * \defgroup swiftqueues_benchmark Micro-benchmark helper
 * \ingroup swiftqueues
 *
 * Micro-benchmark helper (libdispatch's dispatch_benchmark,
 * made public).
 *
 * Runs a function `count` times on the calling thread and returns the mean
 * nanoseconds per call on CLOCK_MONOTONIC, less the measured cost of the
 * calling loop itself (an empty function called the same way). Returns 0
 * when count is 0. For profiling and tuning, not for production paths.
 * @{
 */
#ifndef SWIFTQUEUES_BENCHMARK_H
#define SWIFTQUEUES_BENCHMARK_H

#include <swiftqueues/base.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! Mean ns per `function(context)` call over `count` calls. */
SQ_EXPORT SQ_NOTHROW
uint64_t
sq_benchmark_f(size_t count, void *SQ_NULLABLE context, sq_function_t function);

#ifdef __BLOCKS__
/*! The block form of sq_benchmark_f. */
SQ_INLINE SQ_NONNULL_ALL uint64_t
sq_benchmark(size_t count, sq_block_t block)
{
	return sq_benchmark_f(count, (void *)block, _sq_call_block);
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_BENCHMARK_H */
