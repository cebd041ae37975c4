/*!
 * \defgroup swiftqueues_atomic Atomic counters and bit operations
 * \ingroup swiftqueues
 *
 * Atomic counters and bit operations (Apple's OSAtomic
 * functions in portable form).
 *
 * Every operation works on a plain, naturally aligned int32_t / int64_t
 * (uint32_t / uint64_t for the bit operations) that is only ever accessed
 * through these functions.
 *
 * Two forms of each read-modify-write operation:
 *   - the plain name (sq_atomic_add64, ...) is the BARRIER form: sequentially
 *     consistent, a full memory barrier around the operation, like
 *     OSAtomicAdd64Barrier. Use it when the counter publishes or guards other
 *     memory (reference counts, "done" flags, lazy initialisation).
 *   - the _relaxed form (sq_atomic_add64_relaxed, ...) is atomic but orders
 *     nothing else, like OSAtomicAdd64. Use it for statistics counters whose
 *     value alone matters; it is the cheapest form.
 * Loads are acquire and stores release (their _relaxed forms order nothing).
 * Compare-and-swap barrier forms are sequentially consistent whether they
 * succeed or fail.
 *
 * add / inc / dec / or / and / xor return the NEW value; test_and_set_bit and
 * test_and_clear_bit return the bit's OLD value. Bits are numbered from the
 * least significant (bit 0) upwards.
 *
 * All are inline: an increment is one locked instruction, no call.
 * @{
 */
#ifndef SWIFTQUEUES_ATOMIC_H
#define SWIFTQUEUES_ATOMIC_H

#include <swiftqueues/base.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/* Defines the arithmetic operations for one width, in one memory order. */
#define _SQ_ATOMIC_ARITH(bits, suffix, order)                                  \
	SQ_INLINE int##bits##_t                                                \
	sq_atomic_add##bits##suffix(volatile int##bits##_t *p, int##bits##_t d) \
	{                                                                      \
		return __atomic_add_fetch(p, d, order);                        \
	}                                                                      \
	SQ_INLINE int##bits##_t                                                \
	sq_atomic_inc##bits##suffix(volatile int##bits##_t *p)                 \
	{                                                                      \
		return __atomic_add_fetch(p, 1, order);                        \
	}                                                                      \
	SQ_INLINE int##bits##_t                                                \
	sq_atomic_dec##bits##suffix(volatile int##bits##_t *p)                 \
	{                                                                      \
		return __atomic_sub_fetch(p, 1, order);                        \
	}                                                                      \
	SQ_INLINE bool                                                         \
	sq_atomic_cas##bits##suffix(volatile int##bits##_t *p,                 \
			int##bits##_t expected, int##bits##_t desired)         \
	{                                                                      \
		return __atomic_compare_exchange_n(p, &expected, desired,      \
				false, order, order);                          \
	}                                                                      \
	SQ_INLINE uint##bits##_t                                               \
	sq_atomic_or##bits##suffix(volatile uint##bits##_t *p,                 \
			uint##bits##_t mask)                                   \
	{                                                                      \
		return __atomic_or_fetch(p, mask, order);                      \
	}                                                                      \
	SQ_INLINE uint##bits##_t                                               \
	sq_atomic_and##bits##suffix(volatile uint##bits##_t *p,                \
			uint##bits##_t mask)                                   \
	{                                                                      \
		return __atomic_and_fetch(p, mask, order);                     \
	}                                                                      \
	SQ_INLINE uint##bits##_t                                               \
	sq_atomic_xor##bits##suffix(volatile uint##bits##_t *p,                \
			uint##bits##_t mask)                                   \
	{                                                                      \
		return __atomic_xor_fetch(p, mask, order);                     \
	}                                                                      \
	SQ_INLINE bool                                                         \
	sq_atomic_test_and_set_bit##bits##suffix(volatile uint##bits##_t *p,   \
			unsigned bit)                                          \
	{                                                                      \
		uint##bits##_t m = (uint##bits##_t)1 << (bit % bits);          \
		return (__atomic_fetch_or(p, m, order) & m) != 0;              \
	}                                                                      \
	SQ_INLINE bool                                                         \
	sq_atomic_test_and_clear_bit##bits##suffix(volatile uint##bits##_t *p, \
			unsigned bit)                                          \
	{                                                                      \
		uint##bits##_t m = (uint##bits##_t)1 << (bit % bits);          \
		return (__atomic_fetch_and(p, (uint##bits##_t)~m, order) & m)  \
				!= 0;                                          \
	}

/* Defines load and store for one width. */
#define _SQ_ATOMIC_LOADSTORE(bits)                                             \
	SQ_INLINE int##bits##_t                                                \
	sq_atomic_load##bits(const volatile int##bits##_t *p)                  \
	{                                                                      \
		return __atomic_load_n(p, __ATOMIC_ACQUIRE);                   \
	}                                                                      \
	SQ_INLINE int##bits##_t                                                \
	sq_atomic_load##bits##_relaxed(const volatile int##bits##_t *p)        \
	{                                                                      \
		return __atomic_load_n(p, __ATOMIC_RELAXED);                   \
	}                                                                      \
	SQ_INLINE void                                                         \
	sq_atomic_store##bits(volatile int##bits##_t *p, int##bits##_t v)      \
	{                                                                      \
		__atomic_store_n(p, v, __ATOMIC_RELEASE);                      \
	}                                                                      \
	SQ_INLINE void                                                         \
	sq_atomic_store##bits##_relaxed(volatile int##bits##_t *p,             \
			int##bits##_t v)                                       \
	{                                                                      \
		__atomic_store_n(p, v, __ATOMIC_RELAXED);                      \
	}

/*! \name 32-bit read-modify-write, full barrier
 * sq_atomic_add32(p, d), sq_atomic_inc32(p) and sq_atomic_dec32(p) add `d`, 1 or -1 to *p and
 * return the new value. sq_atomic_cas32(p, expected, desired) stores `desired`
 * in *p if *p == `expected` and returns whether it did. sq_atomic_or32,
 * sq_atomic_and32 and sq_atomic_xor32(p, mask) combine *p with `mask` and return the
 * new value. sq_atomic_test_and_set_bit32 and sq_atomic_test_and_clear_bit32(p, bit) set or clear bit `bit`
 * (taken modulo 32, 0 the least significant) and return its old value.
 * Full barrier (sequentially consistent), also when a compare-and-swap fails.
 */
/*! @{ */
_SQ_ATOMIC_ARITH(32, , __ATOMIC_SEQ_CST)
/*! \fn int32_t sq_atomic_add32(volatile int32_t *p, int32_t d)
 *  Adds `d` to *p, full barrier (OSAtomicAdd32Barrier).
 *  \param p the counter.
 *  \param d the amount; may be negative.
 *  \return the new value. */
/*! \fn int32_t sq_atomic_inc32(volatile int32_t *p)
 *  Adds 1 to *p, full barrier (OSAtomicIncrement32Barrier).
 *  \param p the counter.
 *  \return the new value. */
/*! \fn int32_t sq_atomic_dec32(volatile int32_t *p)
 *  Subtracts 1 from *p, full barrier (OSAtomicDecrement32Barrier).
 *  \param p the counter.
 *  \return the new value. */
/*! \fn bool sq_atomic_cas32(volatile int32_t *p, int32_t expected, int32_t desired)
 *  Stores `desired` in *p if *p == `expected`, full barrier whether it succeeds or fails (OSAtomicCompareAndSwap32Barrier).
 *  \param p the variable.
 *  \param expected the value *p must hold.
 *  \param desired the value to store.
 *  \return true if it stored `desired`. */
/*! \fn uint32_t sq_atomic_or32(volatile uint32_t *p, uint32_t mask)
 *  ORs `mask` into *p, full barrier (OSAtomicOr32Barrier).
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn uint32_t sq_atomic_and32(volatile uint32_t *p, uint32_t mask)
 *  ANDs `mask` into *p, full barrier (OSAtomicAnd32Barrier).
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn uint32_t sq_atomic_xor32(volatile uint32_t *p, uint32_t mask)
 *  XORs `mask` into *p, full barrier (OSAtomicXor32Barrier).
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn bool sq_atomic_test_and_set_bit32(volatile uint32_t *p, unsigned bit)
 *  Sets bit `bit` of *p, full barrier.
 *  \param p the bits.
 *  \param bit the bit, from 0 (least significant), taken modulo 32.
 *  \return the bit's old value. */
/*! \fn bool sq_atomic_test_and_clear_bit32(volatile uint32_t *p, unsigned bit)
 *  Clears bit `bit` of *p, full barrier.
 *  \param p the bits.
 *  \param bit the bit, from 0 (least significant), taken modulo 32.
 *  \return the bit's old value. */
/*! @} */
/*! \name 32-bit read-modify-write, relaxed
 * sq_atomic_add32_relaxed(p, d), sq_atomic_inc32_relaxed(p) and sq_atomic_dec32_relaxed(p) add `d`, 1 or -1 to *p and
 * return the new value. sq_atomic_cas32_relaxed(p, expected, desired) stores `desired`
 * in *p if *p == `expected` and returns whether it did. sq_atomic_or32_relaxed,
 * sq_atomic_and32_relaxed and sq_atomic_xor32_relaxed(p, mask) combine *p with `mask` and return the
 * new value. sq_atomic_test_and_set_bit32_relaxed and sq_atomic_test_and_clear_bit32_relaxed(p, bit) set or clear bit `bit`
 * (taken modulo 32, 0 the least significant) and return its old value.
 * Relaxed: atomic, orders nothing else (statistics counters).
 */
/*! @{ */
_SQ_ATOMIC_ARITH(32, _relaxed, __ATOMIC_RELAXED)
/*! \fn int32_t sq_atomic_add32_relaxed(volatile int32_t *p, int32_t d)
 *  Adds `d` to *p, relaxed (OSAtomicAdd32).
 *  \param p the counter.
 *  \param d the amount; may be negative.
 *  \return the new value. */
/*! \fn int32_t sq_atomic_inc32_relaxed(volatile int32_t *p)
 *  Adds 1 to *p, relaxed (OSAtomicIncrement32).
 *  \param p the counter.
 *  \return the new value. */
/*! \fn int32_t sq_atomic_dec32_relaxed(volatile int32_t *p)
 *  Subtracts 1 from *p, relaxed (OSAtomicDecrement32).
 *  \param p the counter.
 *  \return the new value. */
/*! \fn bool sq_atomic_cas32_relaxed(volatile int32_t *p, int32_t expected, int32_t desired)
 *  Stores `desired` in *p if *p == `expected`, relaxed (OSAtomicCompareAndSwap32).
 *  \param p the variable.
 *  \param expected the value *p must hold.
 *  \param desired the value to store.
 *  \return true if it stored `desired`. */
/*! \fn uint32_t sq_atomic_or32_relaxed(volatile uint32_t *p, uint32_t mask)
 *  ORs `mask` into *p, relaxed (OSAtomicOr32).
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn uint32_t sq_atomic_and32_relaxed(volatile uint32_t *p, uint32_t mask)
 *  ANDs `mask` into *p, relaxed (OSAtomicAnd32).
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn uint32_t sq_atomic_xor32_relaxed(volatile uint32_t *p, uint32_t mask)
 *  XORs `mask` into *p, relaxed (OSAtomicXor32).
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn bool sq_atomic_test_and_set_bit32_relaxed(volatile uint32_t *p, unsigned bit)
 *  Sets bit `bit` of *p, relaxed.
 *  \param p the bits.
 *  \param bit the bit, from 0 (least significant), taken modulo 32.
 *  \return the bit's old value. */
/*! \fn bool sq_atomic_test_and_clear_bit32_relaxed(volatile uint32_t *p, unsigned bit)
 *  Clears bit `bit` of *p, relaxed.
 *  \param p the bits.
 *  \param bit the bit, from 0 (least significant), taken modulo 32.
 *  \return the bit's old value. */
/*! @} */
/*! \name 64-bit read-modify-write, full barrier
 * sq_atomic_add64(p, d), sq_atomic_inc64(p) and sq_atomic_dec64(p) add `d`, 1 or -1 to *p and
 * return the new value. sq_atomic_cas64(p, expected, desired) stores `desired`
 * in *p if *p == `expected` and returns whether it did. sq_atomic_or64,
 * sq_atomic_and64 and sq_atomic_xor64(p, mask) combine *p with `mask` and return the
 * new value. sq_atomic_test_and_set_bit64 and sq_atomic_test_and_clear_bit64(p, bit) set or clear bit `bit`
 * (taken modulo 64, 0 the least significant) and return its old value.
 * Full barrier (sequentially consistent), also when a compare-and-swap fails.
 */
/*! @{ */
_SQ_ATOMIC_ARITH(64, , __ATOMIC_SEQ_CST)
/*! \fn int64_t sq_atomic_add64(volatile int64_t *p, int64_t d)
 *  Adds `d` to *p, full barrier (OSAtomicAdd64Barrier).
 *  \param p the counter.
 *  \param d the amount; may be negative.
 *  \return the new value. */
/*! \fn int64_t sq_atomic_inc64(volatile int64_t *p)
 *  Adds 1 to *p, full barrier (OSAtomicIncrement64Barrier).
 *  \param p the counter.
 *  \return the new value. */
/*! \fn int64_t sq_atomic_dec64(volatile int64_t *p)
 *  Subtracts 1 from *p, full barrier (OSAtomicDecrement64Barrier).
 *  \param p the counter.
 *  \return the new value. */
/*! \fn bool sq_atomic_cas64(volatile int64_t *p, int64_t expected, int64_t desired)
 *  Stores `desired` in *p if *p == `expected`, full barrier whether it succeeds or fails (OSAtomicCompareAndSwap64Barrier).
 *  \param p the variable.
 *  \param expected the value *p must hold.
 *  \param desired the value to store.
 *  \return true if it stored `desired`. */
/*! \fn uint64_t sq_atomic_or64(volatile uint64_t *p, uint64_t mask)
 *  ORs `mask` into *p, full barrier.
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn uint64_t sq_atomic_and64(volatile uint64_t *p, uint64_t mask)
 *  ANDs `mask` into *p, full barrier.
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn uint64_t sq_atomic_xor64(volatile uint64_t *p, uint64_t mask)
 *  XORs `mask` into *p, full barrier.
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn bool sq_atomic_test_and_set_bit64(volatile uint64_t *p, unsigned bit)
 *  Sets bit `bit` of *p, full barrier.
 *  \param p the bits.
 *  \param bit the bit, from 0 (least significant), taken modulo 64.
 *  \return the bit's old value. */
/*! \fn bool sq_atomic_test_and_clear_bit64(volatile uint64_t *p, unsigned bit)
 *  Clears bit `bit` of *p, full barrier.
 *  \param p the bits.
 *  \param bit the bit, from 0 (least significant), taken modulo 64.
 *  \return the bit's old value. */
/*! @} */
/*! \name 64-bit read-modify-write, relaxed
 * sq_atomic_add64_relaxed(p, d), sq_atomic_inc64_relaxed(p) and sq_atomic_dec64_relaxed(p) add `d`, 1 or -1 to *p and
 * return the new value. sq_atomic_cas64_relaxed(p, expected, desired) stores `desired`
 * in *p if *p == `expected` and returns whether it did. sq_atomic_or64_relaxed,
 * sq_atomic_and64_relaxed and sq_atomic_xor64_relaxed(p, mask) combine *p with `mask` and return the
 * new value. sq_atomic_test_and_set_bit64_relaxed and sq_atomic_test_and_clear_bit64_relaxed(p, bit) set or clear bit `bit`
 * (taken modulo 64, 0 the least significant) and return its old value.
 * Relaxed: atomic, orders nothing else (statistics counters).
 */
/*! @{ */
_SQ_ATOMIC_ARITH(64, _relaxed, __ATOMIC_RELAXED)
/*! \fn int64_t sq_atomic_add64_relaxed(volatile int64_t *p, int64_t d)
 *  Adds `d` to *p, relaxed (OSAtomicAdd64).
 *  \param p the counter.
 *  \param d the amount; may be negative.
 *  \return the new value. */
/*! \fn int64_t sq_atomic_inc64_relaxed(volatile int64_t *p)
 *  Adds 1 to *p, relaxed (OSAtomicIncrement64).
 *  \param p the counter.
 *  \return the new value. */
/*! \fn int64_t sq_atomic_dec64_relaxed(volatile int64_t *p)
 *  Subtracts 1 from *p, relaxed (OSAtomicDecrement64).
 *  \param p the counter.
 *  \return the new value. */
/*! \fn bool sq_atomic_cas64_relaxed(volatile int64_t *p, int64_t expected, int64_t desired)
 *  Stores `desired` in *p if *p == `expected`, relaxed (OSAtomicCompareAndSwap64).
 *  \param p the variable.
 *  \param expected the value *p must hold.
 *  \param desired the value to store.
 *  \return true if it stored `desired`. */
/*! \fn uint64_t sq_atomic_or64_relaxed(volatile uint64_t *p, uint64_t mask)
 *  ORs `mask` into *p, relaxed.
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn uint64_t sq_atomic_and64_relaxed(volatile uint64_t *p, uint64_t mask)
 *  ANDs `mask` into *p, relaxed.
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn uint64_t sq_atomic_xor64_relaxed(volatile uint64_t *p, uint64_t mask)
 *  XORs `mask` into *p, relaxed.
 *  \param p the bits.
 *  \param mask the mask.
 *  \return the new value. */
/*! \fn bool sq_atomic_test_and_set_bit64_relaxed(volatile uint64_t *p, unsigned bit)
 *  Sets bit `bit` of *p, relaxed.
 *  \param p the bits.
 *  \param bit the bit, from 0 (least significant), taken modulo 64.
 *  \return the bit's old value. */
/*! \fn bool sq_atomic_test_and_clear_bit64_relaxed(volatile uint64_t *p, unsigned bit)
 *  Clears bit `bit` of *p, relaxed.
 *  \param p the bits.
 *  \param bit the bit, from 0 (least significant), taken modulo 64.
 *  \return the bit's old value. */
/*! @} */
/*! \name 32-bit loads and stores
 * sq_atomic_load32(p) reads *p (acquire: later reads see what the storing
 * thread wrote before its release store); sq_atomic_load32_relaxed(p) reads
 * it ordering nothing. sq_atomic_store32(p, v) writes `v` (release: what the
 * thread wrote before is visible to an acquire load that sees `v`);
 * sq_atomic_store32_relaxed(p, v) writes it ordering nothing.
 */
/*! @{ */
_SQ_ATOMIC_LOADSTORE(32)
/*! \fn int32_t sq_atomic_load32(const volatile int32_t *p)
 *  Reads *p (acquire).
 *  \param p the variable.
 *  \return its value. */
/*! \fn int32_t sq_atomic_load32_relaxed(const volatile int32_t *p)
 *  Reads *p, ordering nothing.
 *  \param p the variable.
 *  \return its value. */
/*! \fn void sq_atomic_store32(volatile int32_t *p, int32_t v)
 *  Writes `v` to *p (release).
 *  \param p the variable.
 *  \param v the value. */
/*! \fn void sq_atomic_store32_relaxed(volatile int32_t *p, int32_t v)
 *  Writes `v` to *p, ordering nothing.
 *  \param p the variable.
 *  \param v the value. */
/*! @} */
/*! \name 64-bit loads and stores
 * sq_atomic_load64(p) reads *p (acquire: later reads see what the storing
 * thread wrote before its release store); sq_atomic_load64_relaxed(p) reads
 * it ordering nothing. sq_atomic_store64(p, v) writes `v` (release: what the
 * thread wrote before is visible to an acquire load that sees `v`);
 * sq_atomic_store64_relaxed(p, v) writes it ordering nothing.
 */
/*! @{ */
_SQ_ATOMIC_LOADSTORE(64)
/*! \fn int64_t sq_atomic_load64(const volatile int64_t *p)
 *  Reads *p (acquire).
 *  \param p the variable.
 *  \return its value. */
/*! \fn int64_t sq_atomic_load64_relaxed(const volatile int64_t *p)
 *  Reads *p, ordering nothing.
 *  \param p the variable.
 *  \return its value. */
/*! \fn void sq_atomic_store64(volatile int64_t *p, int64_t v)
 *  Writes `v` to *p (release).
 *  \param p the variable.
 *  \param v the value. */
/*! \fn void sq_atomic_store64_relaxed(volatile int64_t *p, int64_t v)
 *  Writes `v` to *p, ordering nothing.
 *  \param p the variable.
 *  \param v the value. */
/*! @} */

#undef _SQ_ATOMIC_ARITH
#undef _SQ_ATOMIC_LOADSTORE

/* Pointer operations: the counterparts of OSAtomicCompareAndSwapPtrBarrier. */

/*! Reads the pointer at `p` (acquire).
 *  \param p the pointer's address.
 *  \return its value. */
SQ_INLINE void *SQ_NULLABLE
sq_atomic_load_ptr(void *SQ_NULLABLE const volatile *SQ_NONNULL_PTR p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/*! Writes `v` to the pointer at `p` (release).
 *  \param p the pointer's address.
 *  \param v the new value. */
SQ_INLINE void
sq_atomic_store_ptr(void *SQ_NULLABLE volatile *SQ_NONNULL_PTR p, void *SQ_NULLABLE v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/*!
 * Stores `desired` in *p if *p == `expected`; returns whether it did.
 * Full barrier: a thread that loses sees the winner's stores to the object
 * the pointer names (the lazy-initialisation pattern)
 * (OSAtomicCompareAndSwapPtrBarrier).
 * \param p the pointer's address.
 * \param expected the value *p must hold.
 * \param desired the value to store.
 * \return true if it stored `desired`.
 */
SQ_INLINE bool
sq_atomic_cas_ptr(void *SQ_NULLABLE volatile *SQ_NONNULL_PTR p, void *SQ_NULLABLE expected,
		void *SQ_NULLABLE desired)
{
	return __atomic_compare_exchange_n(p, &expected, desired, false,
			__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/*! sq_atomic_cas_ptr without ordering: atomic, orders nothing else
 *  (OSAtomicCompareAndSwapPtr).
 *  \param p the pointer's address.
 *  \param expected the value *p must hold.
 *  \param desired the value to store.
 *  \return true if it stored `desired`. */
SQ_INLINE bool
sq_atomic_cas_ptr_relaxed(void *SQ_NULLABLE volatile *SQ_NONNULL_PTR p,
		void *SQ_NULLABLE expected, void *SQ_NULLABLE desired)
{
	return __atomic_compare_exchange_n(p, &expected, desired, false,
			__ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/*! Stores `v` in *p and returns the previous value (full barrier).
 *  \param p the pointer's address.
 *  \param v the new value.
 *  \return the value *p held before. */
SQ_INLINE void *SQ_NULLABLE
sq_atomic_exchange_ptr(void *SQ_NULLABLE volatile *SQ_NONNULL_PTR p, void *SQ_NULLABLE v)
{
	return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}

/*! A full memory barrier (OSMemoryBarrier). */
SQ_INLINE void
sq_atomic_barrier(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_ATOMIC_H */
