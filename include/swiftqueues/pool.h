/*!
 * \defgroup swiftqueues_pool Worker pool statistics
 * \ingroup swiftqueues
 *
 * Worker pool statistics, a debugging aid.
 *
 * The figures are a snapshot taken without stopping the pool: each field is
 * read atomically, but the fields are not read at one instant. Use them in
 * tests and diagnostics (is the safety net ever needed? how many threads
 * did blocking compensation add?), not to make scheduling decisions.
 * @{
 */
#ifndef SWIFTQUEUES_POOL_H
#define SWIFTQUEUES_POOL_H

#include <swiftqueues/base.h>

#include <stdbool.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*! The worker pool's figures, filled by sq_pool_stats (see docs/OBSERVABILITY.md). */
typedef struct sq_pool_stats_s {
	uint32_t width;          /*!< workers kept: usable CPUs, or SQ_WORKERS */
	uint32_t max_threads;    /*!< the thread cap: SQ_MAX_THREADS (255) */
	uint32_t live;           /*!< worker threads alive now */
	uint32_t idle;           /*!< workers parked on the idle list now */
	uint32_t searching;      /*!< workers looking for work now */
	uint64_t jobs;           /*!< jobs started by live workers so far */
	uint64_t wakeups;        /*!< idle workers woken by submissions */
	uint64_t spawned;        /*!< worker threads started, ever */
	uint64_t compensated;    /*!< of those, started by the monitor for
	                            blocked workers */
	uint64_t net_firings;    /*!< times the monitor's safety net woke a
	                            worker (work waited, a worker idled, no
	                            progress): 0 unless the wake-up protocol
	                            has a bug */
	bool monitor_running;    /*!< started with the first worker */
	bool net_enabled;        /*!< false with SQ_MONITOR_NET=0 */
} sq_pool_stats_t;

/*! Fills *stats with the pool's current figures (starting the pool if it
 *  has not started). Any thread; no libdispatch counterpart.
 *  \param stats receives the figures. */
SQ_EXPORT SQ_NOTHROW
void
sq_pool_stats(sq_pool_stats_t *stats);

SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_POOL_H */
