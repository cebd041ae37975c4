/*!
 * \defgroup swiftqueues_base Base definitions
 * \ingroup swiftqueues
 *
 * Base definitions shared by every public header.
 *
 * Include <swiftqueues.h>, not this file.
 * @{
 */
#ifndef SWIFTQUEUES_BASE_H
#define SWIFTQUEUES_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*! \name Attribute and linkage macros
 * The headers' own plumbing, usable by code that wraps SwiftQueues. */
/*! @{ */
#ifdef __cplusplus
/*! Opens extern "C" in C++ (nothing in C); SQ_END_DECLS closes it. */
#define SQ_BEGIN_DECLS extern "C" {
/*! Closes what SQ_BEGIN_DECLS opened. */
#define SQ_END_DECLS }
#else
#define SQ_BEGIN_DECLS
#define SQ_END_DECLS
#endif

/*! The API's version, a date as YYYYMMDD (libdispatch's DISPATCH_API_VERSION). */
#define SQ_API_VERSION 20261121

/*! Marks a declaration the library exports. */
#define SQ_EXPORT extern __attribute__((visibility("default")))
/*! Every pointer argument must not be NULL. */
#define SQ_NONNULL_ALL __attribute__((nonnull))
/*! The pointer arguments at these positions (from 1) must not be NULL. */
#define SQ_NONNULL(...) __attribute__((nonnull(__VA_ARGS__)))
/*! The function throws no C++ exception. */
#define SQ_NOTHROW __attribute__((nothrow))
/*! Ignoring the result is a warning (it is owned, or the only answer). */
#define SQ_WARN_RESULT __attribute__((warn_unused_result))
/*! An inline wrapper defined in the header (the block forms, the atomics). */
#define SQ_INLINE static inline __attribute__((always_inline))
/*! A block argument used only during the call (clang noescape). */
#if defined(__has_attribute)
#if __has_attribute(noescape)
#define SQ_NOESCAPE __attribute__((noescape))
#endif
#endif
#ifndef SQ_NOESCAPE
#define SQ_NOESCAPE
#endif
/*! Branch hint: `x` is usually true. */
#define SQ_LIKELY(x) __builtin_expect(!!(x), 1)
/*! Branch hint: `x` is usually false. */
#define SQ_UNLIKELY(x) __builtin_expect(!!(x), 0)

#if defined(__clang__)
/*! Pointers up to SQ_ASSUME_NONNULL_END are non-null unless marked SQ_NULLABLE (clang). */
#define SQ_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
/*! Ends SQ_ASSUME_NONNULL_BEGIN. */
#define SQ_ASSUME_NONNULL_END _Pragma("clang assume_nonnull end")
/*! A pointer that may be NULL (clang _Nullable; nothing elsewhere). */
#define SQ_NULLABLE _Nullable
/*! A pointer that must not be NULL (clang _Nonnull; nothing elsewhere). */
#define SQ_NONNULL_PTR _Nonnull
#else
#define SQ_ASSUME_NONNULL_BEGIN
#define SQ_ASSUME_NONNULL_END
#define SQ_NULLABLE
#define SQ_NONNULL_PTR
#endif
/*! @} */

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! The function-pointer form of a unit of work: called with its context. */
typedef void (*sq_function_t)(void *SQ_NULLABLE context);

#ifdef __BLOCKS__
/*! The block form of a unit of work (clang -fblocks). */
typedef void (^sq_block_t)(void);

/*
 * The Blocks runtime entry points, declared here instead of including
 * <Block.h>: SwiftPM's clang and Swift's importer define __BLOCKS__ but
 * do not have Block.h on their include path.
 */
/*! \cond */
extern void *_Block_copy(const void *aBlock);
extern void _Block_release(const void *aBlock);
/*! \endcond */

/* Calls a block passed as a context; used by the inline block wrappers. */
SQ_INLINE void
_sq_call_block(void *SQ_NULLABLE block)
{
	((sq_block_t)block)();
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_BASE_H */
