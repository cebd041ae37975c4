/*!
 * \defgroup swiftqueues_once Run a function exactly once
 * \ingroup swiftqueues
 *
 * Run a function exactly once (dispatch_once renamed).
 *
 * The predicate must be zero-initialised static or global storage (or
 * memory that outlives every caller). The first caller runs the function;
 * callers that arrive while it runs wait for it; every later call is a
 * single acquire load that sees the function's effects.
 *
 * \par Misuse
 * A NULL function, or a call on the same predicate from inside the
 * function (it could never finish), stops the process ("SwiftQueues:
 * sq_once_f: ...").
 * @{
 */
#ifndef SWIFTQUEUES_ONCE_H
#define SWIFTQUEUES_ONCE_H

#include <swiftqueues/base.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! The predicate of sq_once: zero-initialised static or global storage. */
typedef intptr_t sq_once_t;

/* The predicate's value once the function has returned. */
#define _SQ_ONCE_DONE (~(intptr_t)0)

/* Runs the function or waits for the thread that does; see sq_once_f. */
SQ_EXPORT SQ_NONNULL(1) SQ_NOTHROW
void
_sq_once_f_slow(sq_once_t *predicate, void *SQ_NULLABLE context,
		sq_function_t function);

/*!
 * Calls `function(context)` once for the life of `predicate`, however many
 * threads race here (dispatch_once_f). A NULL function stops the process
 * ("SwiftQueues: sq_once_f: ..."), as does a call on the same predicate
 * from inside the function ("... recursive call on the predicate whose
 * function is running").
 * \param predicate zero-initialised storage that outlives every caller.
 * \param context passed to `function`.
 * \param function the initialiser.
 */
SQ_INLINE SQ_NONNULL(1) void
sq_once_f(sq_once_t *predicate, void *SQ_NULLABLE context,
		sq_function_t function)
{
	/* Acquire pairs with the release store after the function ran. */
	if (SQ_LIKELY(__atomic_load_n(predicate, __ATOMIC_ACQUIRE)
			== _SQ_ONCE_DONE)) {
		return;
	}
	_sq_once_f_slow(predicate, context, function);
}

#ifdef __BLOCKS__
/*! The block form of sq_once_f (dispatch_once): the block is called, not
 *  copied.
 *  \param predicate as for sq_once_f.
 *  \param block the initialiser. */
SQ_INLINE SQ_NONNULL_ALL void
sq_once(sq_once_t *predicate, sq_block_t block)
{
	sq_once_f(predicate, (void *)block, _sq_call_block);
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_ONCE_H */
