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

/*! Mean ns per `function(context)` call over `count` calls, on the calling
 *  thread (dispatch_benchmark_f).
 *  \param count how many calls.
 *  \param context passed to `function`.
 *  \param function the code to time.
 *  \return the mean nanoseconds per call, less the loop's own cost; 0 when
 *          `count` is 0. */
SQ_EXPORT SQ_NOTHROW
uint64_t
sq_benchmark_f(size_t count, void *SQ_NULLABLE context, sq_function_t function);

#ifdef __BLOCKS__
/*! The block form of sq_benchmark_f (dispatch_benchmark); the block is
 *  called, not copied.
 *  \param count how many calls.
 *  \param block the code to time.
 *  \return the mean nanoseconds per call. */
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
