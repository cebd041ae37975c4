/*
 * SwiftQueues — sq_once_f slow path. The fast path (one acquire load) is
 * inline in include/swiftqueues/once.h.
 *
 * Predicate values:
 *   0                     never run
 *   (tid << 2) | 1        running on thread `tid`
 *   (tid << 2) | 1 | 2    running, and someone sleeps on the futex
 *   ~0 (_SQ_ONCE_DONE)    done
 * Waiters sleep on the predicate's low 32-bit word (tids fit in 30 bits).
 * Keeping the runner's tid lets a recursive call be reported instead of
 * hanging forever.
 */
#include "internal.h"
#include "trace_internal.h"

#define ONCE_RUNNING ((intptr_t)1)
#define ONCE_WAITERS ((intptr_t)2)

/* The predicate's low 32 bits, whatever the byte order. */
static inline uint32_t *
_sq_once_futex_word(sq_once_t *predicate)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return (uint32_t *)(void *)predicate + (sizeof(*predicate) / 4 - 1);
#else
	return (uint32_t *)(void *)predicate;
#endif
}

void
_sq_once_f_slow(sq_once_t *predicate, void *context, sq_function_t function)
{
	_SQ_REQUIRE_FUNCTION("sq_once_f", function);

	intptr_t self = ((intptr_t)gettid() << 2) | ONCE_RUNNING;
	intptr_t expected = 0;
	if (__atomic_compare_exchange_n(predicate, &expected, self, false,
			__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
		function(context);
		/* Release: whoever loads DONE sees everything function wrote. */
		intptr_t prev = __atomic_exchange_n(predicate, _SQ_ONCE_DONE,
				__ATOMIC_RELEASE);
		if (prev & ONCE_WAITERS) {
			SQ_TRACE_RELEASE(SQ_WAIT_ONCE, NULL, predicate);
			_sq_futex_wake(_sq_once_futex_word(predicate), INT_MAX);
		}
		return;
	}

	for (intptr_t v = expected;;
			v = __atomic_load_n(predicate, __ATOMIC_ACQUIRE)) {
		if (v == _SQ_ONCE_DONE)
			return;
		if ((v >> 2) == (self >> 2)) {
			_sq_client_crash("sq_once_f", "recursive call on the "
					"predicate whose function is running");
		}
		if (!(v & ONCE_WAITERS)) {
			/* Announce a sleeper; on failure re-read and retry. */
			if (!__atomic_compare_exchange_n(predicate, &v,
					v | ONCE_WAITERS, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
				continue;
			v |= ONCE_WAITERS;
		}
		SQ_TRACE_WAIT_BEGIN(SQ_WAIT_ONCE, NULL, predicate);
		_sq_futex_wait(_sq_once_futex_word(predicate), (uint32_t)v,
				NULL);
		SQ_TRACE_WAIT_END(SQ_WAIT_ONCE, NULL, predicate);
	}
}
