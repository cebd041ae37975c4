/*
 * SwiftQueues — counting semaphores.
 *
 * Two words:
 *   value    units available; when negative, minus the number of threads
 *            that are (or are about to be) waiting for a unit.
 *   word     the futex word: its low 16 bits count the units handed to
 *            waiters by sq_semaphore_signal and not yet picked up (wake-up
 *            tokens), its high 16 bits the waiters asleep on it (or about
 *            to sleep). At most 65,535 threads wait on one semaphore at once.
 *
 * Uncontended wait and signal are one atomic add each on `value` and make
 * no system call. A waiter that finds no unit takes one of the tokens; a
 * signal that finds waiters adds a token, and wakes one thread only if the
 * word says one sleeps. Tokens are anonymous: whichever waiter takes one
 * owns the unit.
 *
 * Spinning: before it sleeps, a waiter polls the word for a while (an
 * adaptive budget per semaphore, 0 to 20 us: it doubles when a spin or a
 * short sleep ends with a token, halves when a spin finds none). In a
 * hand-off between two threads on two CPUs, a token usually arrives within
 * a few microseconds; catching it spinning saves the waiter's sleep and
 * wake-up and the signaller's system call. Waits that last longer bring
 * the budget to 0 after a few tries. No spinning on a single CPU.
 *
 * Timeouts: a waiter whose deadline passes withdraws its claim by adding
 * one back to `value`, but only while `value` is still negative. If it is
 * not, a signal has already counted this waiter as served and its token is
 * on its way (or already in the word): the waiter then waits for it
 * without a deadline and returns success. So a signal racing a timeout
 * never loses or duplicates a unit. The invariant, between operations:
 *   threads inside the slow path == tokens + max(0, -value)
 *
 * libdispatch sleeps on a POSIX sem_t with a CLOCK_REALTIME deadline; here
 * the futex takes the deadline on the clock the sq_time_t names, so a
 * wall-clock jump cannot stretch a monotonic wait.
 */
#include "internal.h"
#include "trace_internal.h"

#include <stdio.h>

#define SQ_SEM_TOKEN 1u
#define SQ_SEM_TOKENS_MASK 0xffffu
#define SQ_SEM_SLEEPER (1u << 16)
#define SQ_SEM_SPIN_MAX_NS (20 * NSEC_PER_USEC)
#define SQ_SEM_SPIN_MIN_NS (2 * NSEC_PER_USEC)

struct sq_semaphore_s {
	struct sq_object_s object;
	intptr_t value;
	uint32_t word;
	uint32_t spin_ns;    /* the adaptive spin budget (relaxed: a hint) */
	intptr_t created_value;
};

static void
_sq_semaphore_dispose(struct sq_object_s *object)
{
	_sq_object_free(object);
}

static void
_sq_semaphore_last_external_release(struct sq_object_s *object)
{
	struct sq_semaphore_s *s = (struct sq_semaphore_s *)object;
	/* Relaxed: sq_release's acq_rel decrement of the last xref already
	 * ordered us after every balanced wait and signal; only threads
	 * still (wrongly) inside wait race with us, which is what we
	 * report. */
	intptr_t value = __atomic_load_n(&s->value, __ATOMIC_RELAXED);
	uint32_t tokens = __atomic_load_n(&s->word, __ATOMIC_RELAXED) &
			SQ_SEM_TOKENS_MASK;
	if (SQ_LIKELY(value >= s->created_value && tokens == 0))
		return;
	intptr_t waiting = (intptr_t)tokens + (value < 0 ? -value : 0);
	_sq_client_crash("sq_release", "semaphore destroyed while in use "
			"(value %ld, created with %ld, %ld thread(s) waiting)",
			(long)value, (long)s->created_value, (long)waiting);
}

/* sq_debug: the value (negative: minus the waiters) and the initial one. */
static size_t
_sq_semaphore_debug(struct sq_object_s *object, char *buf, size_t size)
{
	struct sq_semaphore_s *s = (struct sq_semaphore_s *)object;
	int n = snprintf(buf, size, "value = %ld, created with = %ld",
			(long)__atomic_load_n(&s->value, __ATOMIC_RELAXED),
			(long)s->created_value);
	return n < 0 ? 0 : (size_t)n;
}

static const struct sq_vtable_s _sq_semaphore_vtable = {
	.kind = "semaphore",
	.debug = _sq_semaphore_debug,
	.dispose = _sq_semaphore_dispose,
	.last_external_release = _sq_semaphore_last_external_release,
};

sq_semaphore_t
sq_semaphore_create(intptr_t value)
{
	if (value < 0) {
		errno = EINVAL;
		return NULL;
	}
	struct sq_semaphore_s *s = _sq_object_alloc(&_sq_semaphore_vtable,
			sizeof(*s));
	s->value = value;
	s->created_value = value;
	s->spin_ns = SQ_SEM_SPIN_MIN_NS;
	return s;
}

/* A wait with a deadline of now: it neither spins nor sleeps. */
static inline bool
_sq_semaphore_is_try(sq_time_t deadline)
{
	return deadline == SQ_TIME_NOW || deadline == SQ_WALLTIME_NOW;
}

/* Takes one wake-up token if there is one. */
static inline bool
_sq_semaphore_take_token(struct sq_semaphore_s *s)
{
	/* Relaxed load: only a hint for the CAS below. */
	uint32_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
	while ((w & SQ_SEM_TOKENS_MASK) != 0) {
		/* Acquire: pairs with the release add in signal, so the
		 * signaller's writes are visible to the new unit owner. */
		if (__atomic_compare_exchange_n(&s->word, &w, w - SQ_SEM_TOKEN,
				true, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

static void
_sq_semaphore_spin_grow(struct sq_semaphore_s *s)
{
	_sq_spin_budget_grow(&s->spin_ns, SQ_SEM_SPIN_MIN_NS,
			SQ_SEM_SPIN_MAX_NS);
}

/* Polls for a token for the adaptive budget (never past a monotonic
 * deadline), when another CPU may be signalling meanwhile. Returns true
 * with a token taken. */
static bool
_sq_semaphore_spin(struct sq_semaphore_s *s, sq_time_t deadline)
{
	uint32_t budget = __atomic_load_n(&s->spin_ns, __ATOMIC_RELAXED);
	if (budget == 0 || _sq_usable_cpus() < 2)
		return false;
	uint64_t end = _sq_monotonic_ns() + budget;
	if (!(deadline & SQ_TIME_WALL_FLAG) && deadline < end)
		end = deadline; /* FOREVER is UINT64_MAX: never below */
	do {
		if (_sq_semaphore_take_token(s)) {
			_sq_semaphore_spin_grow(s);
			return true;
		}
		for (int i = 0; i < 16; i++)
			_sq_cpu_relax();
	} while (_sq_monotonic_ns() < end);
	_sq_spin_budget_shrink(&s->spin_ns, budget, SQ_SEM_SPIN_MIN_NS);
	return false;
}

/* Sleeps until the word changes or the deadline passes (ETIMEDOUT), as
 * a counted sleeper unless a token is already there. */
static int
_sq_semaphore_sleep(struct sq_semaphore_s *s, sq_time_t deadline)
{
	if (_sq_semaphore_is_try(deadline))
		return ETIMEDOUT; /* no sleeper to count */
	uint32_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
	if ((w & SQ_SEM_TOKENS_MASK) != 0)
		return 0;
	/* Seq-cst: counted before the kernel's look at the word. A signal
	 * adds its token before it reads the word's sleepers, so either it
	 * sees us counted and wakes us, or the futex wait sees its token and
	 * returns at once. */
	if (!__atomic_compare_exchange_n(&s->word, &w, w + SQ_SEM_SLEEPER,
			false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return 0; /* the word moved: look again */
	uint64_t slept_at = _sq_monotonic_ns();
	_sq_pool_block_begin(false);
	SQ_TRACE_WAIT_BEGIN(SQ_WAIT_SEMAPHORE, NULL, s);
	int r = _sq_futex_wait_until(&s->word, w + SQ_SEM_SLEEPER, deadline);
	SQ_TRACE_WAIT_END(SQ_WAIT_SEMAPHORE, NULL, s);
	_sq_pool_block_end();
	__atomic_sub_fetch(&s->word, SQ_SEM_SLEEPER, __ATOMIC_RELAXED);
	/* A token within the spin maximum: a spin would have caught it. */
	if (r == 0 && _sq_monotonic_ns() - slept_at < SQ_SEM_SPIN_MAX_NS)
		_sq_semaphore_spin_grow(s);
	return r;
}

SQ_NOINLINE static intptr_t
_sq_semaphore_wait_slow(struct sq_semaphore_s *s, sq_time_t deadline)
{
	if (!_sq_semaphore_is_try(deadline) && _sq_semaphore_spin(s, deadline))
		return 0;
	for (;;) {
		if (_sq_semaphore_take_token(s))
			return 0;
		if (_sq_semaphore_sleep(s, deadline) != ETIMEDOUT)
			continue; /* woken, changed, spurious: re-check */
		/* Timed out (never for FOREVER). A token may have arrived
		 * right at the deadline: prefer it. */
		if (_sq_semaphore_take_token(s))
			return 0;
		/* Withdraw our claim while no signal has counted us yet.
		 * Relaxed: giving a claim back publishes nothing; the CAS
		 * still orders itself in value's modification order. */
		intptr_t v = __atomic_load_n(&s->value, __ATOMIC_RELAXED);
		while (v < 0) {
			if (__atomic_compare_exchange_n(&s->value, &v, v + 1,
					true, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
				return ETIMEDOUT;
		}
		/* A signal counted us: its token is ours. Wait for it. */
		deadline = SQ_TIME_FOREVER;
	}
}

intptr_t
sq_semaphore_wait(sq_semaphore_t semaphore, sq_time_t timeout)
{
	_sq_object_validate("sq_semaphore_wait", semaphore);
	struct sq_semaphore_s *s = semaphore;
	/* Acquire: pairs with signal's release add, so whoever takes a unit
	 * sees what the thread that gave it back wrote (the lock pattern). */
	intptr_t old = __atomic_fetch_sub(&s->value, 1, __ATOMIC_ACQUIRE);
	if (SQ_LIKELY(old > 0))
		return 0;
	return _sq_semaphore_wait_slow(s, timeout);
}

/* A thread waits (or is about to): hand it the unit. Out of line, so that
 * the fast path keeps no register for the trace point here. */
static SQ_NOINLINE intptr_t
_sq_semaphore_signal_slow(struct sq_semaphore_s *s)
{
	/* Seq-cst: the release for the acquire CAS in
	 * _sq_semaphore_take_token, and before the look at the sleepers (see
	 * _sq_semaphore_sleep). The add returns the word, so nothing here
	 * reads the semaphore after publishing the token: a waiter may take
	 * it, return and free the semaphore at once (so the trace's release
	 * comes first). */
	SQ_TRACE_RELEASE(SQ_WAIT_SEMAPHORE, NULL, s);
	uint32_t old_word = __atomic_fetch_add(&s->word, SQ_SEM_TOKEN,
			__ATOMIC_SEQ_CST);
	/* A private FUTEX_WAKE never touches the memory, and at worst
	 * wakes someone spuriously. A spinning waiter needs no wake-up. */
	if (old_word >= SQ_SEM_SLEEPER)
		_sq_futex_wake(&s->word, 1);
	return 1;
}

intptr_t
sq_semaphore_signal(sq_semaphore_t semaphore)
{
	_sq_object_validate("sq_semaphore_signal", semaphore);
	struct sq_semaphore_s *s = semaphore;
	/* Release: publishes our writes to the next owner of the unit. */
	intptr_t old = __atomic_fetch_add(&s->value, 1, __ATOMIC_RELEASE);
	if (SQ_LIKELY(old >= 0))
		return 0;
	return _sq_semaphore_signal_slow(s);
}
