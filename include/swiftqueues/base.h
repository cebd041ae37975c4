/*
 * SwiftQueues — base definitions shared by every public header.
 *
 * Include <swiftqueues.h>, not this file.
 */
#ifndef SWIFTQUEUES_BASE_H
#define SWIFTQUEUES_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define SQ_BEGIN_DECLS extern "C" {
#define SQ_END_DECLS }
#else
#define SQ_BEGIN_DECLS
#define SQ_END_DECLS
#endif

#define SQ_API_VERSION 20261121

#define SQ_EXPORT extern __attribute__((visibility("default")))
#define SQ_NONNULL_ALL __attribute__((nonnull))
#define SQ_NONNULL(...) __attribute__((nonnull(__VA_ARGS__)))
#define SQ_NOTHROW __attribute__((nothrow))
#define SQ_WARN_RESULT __attribute__((warn_unused_result))
#define SQ_INLINE static inline __attribute__((always_inline))
#if defined(__has_attribute)
#if __has_attribute(noescape)
#define SQ_NOESCAPE __attribute__((noescape))
#endif
#endif
#ifndef SQ_NOESCAPE
#define SQ_NOESCAPE
#endif
#define SQ_LIKELY(x) __builtin_expect(!!(x), 1)
#define SQ_UNLIKELY(x) __builtin_expect(!!(x), 0)

#if defined(__clang__)
#define SQ_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
#define SQ_ASSUME_NONNULL_END _Pragma("clang assume_nonnull end")
#define SQ_NULLABLE _Nullable
#define SQ_NONNULL_PTR _Nonnull
#else
#define SQ_ASSUME_NONNULL_BEGIN
#define SQ_ASSUME_NONNULL_END
#define SQ_NULLABLE
#define SQ_NONNULL_PTR
#endif

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
extern void *_Block_copy(const void *aBlock);
extern void _Block_release(const void *aBlock);

/* Calls a block passed as a context; used by the inline block wrappers. */
SQ_INLINE void
_sq_call_block(void *SQ_NULLABLE block)
{
	((sq_block_t)block)();
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

#endif /* SWIFTQUEUES_BASE_H */
