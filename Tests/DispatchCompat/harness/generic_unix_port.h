/*
 * What libdispatch's test programs expect from the platform on Linux:
 * mach_absolute_time and its timebase (nanoseconds here), and the
 * OSAtomic counters some of them call.
 */
#ifndef SQ_COMPAT_GENERIC_UNIX_PORT_H
#define SQ_COMPAT_GENERIC_UNIX_PORT_H

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/param.h>
#include <time.h>

struct mach_timebase_info {
	uint32_t numer;
	uint32_t denom;
};
typedef struct mach_timebase_info *mach_timebase_info_t;
typedef struct mach_timebase_info mach_timebase_info_data_t;
typedef int kern_return_t;

static inline uint64_t
mach_absolute_time(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int
mach_timebase_info(mach_timebase_info_t info)
{
	info->numer = 1;
	info->denom = 1;
	return 0;
}

/* Sequentially consistent, as Apple's OSAtomic*Barrier calls. */
static inline int32_t
OSAtomicIncrement32(volatile int32_t *value)
{
	return __atomic_add_fetch(value, 1, __ATOMIC_SEQ_CST);
}

static inline int32_t
OSAtomicDecrement32(volatile int32_t *value)
{
	return __atomic_sub_fetch(value, 1, __ATOMIC_SEQ_CST);
}

#define OSAtomicIncrement32Barrier OSAtomicIncrement32
#define OSAtomicDecrement32Barrier OSAtomicDecrement32

#endif /* SQ_COMPAT_GENERIC_UNIX_PORT_H */
