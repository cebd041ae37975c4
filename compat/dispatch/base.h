/*
 * SwiftQueues' <dispatch/base.h>: libdispatch's attribute and declaration
 * macros, for programs and headers that use them in their own
 * declarations. Part of the libdispatch source-compatibility headers
 * (see dispatch.h).
 */
#ifndef SWIFTQUEUES_COMPAT_DISPATCH_BASE_H
#define SWIFTQUEUES_COMPAT_DISPATCH_BASE_H

#include <swiftqueues/base.h>

#ifndef __has_attribute
#define __has_attribute(x) 0
#endif

#define DISPATCH_NORETURN __attribute__((__noreturn__))
#define DISPATCH_NOTHROW __attribute__((__nothrow__))
#define DISPATCH_NONNULL1 __attribute__((__nonnull__(1)))
#define DISPATCH_NONNULL2 __attribute__((__nonnull__(2)))
#define DISPATCH_NONNULL3 __attribute__((__nonnull__(3)))
#define DISPATCH_NONNULL4 __attribute__((__nonnull__(4)))
#define DISPATCH_NONNULL5 __attribute__((__nonnull__(5)))
#define DISPATCH_NONNULL6 __attribute__((__nonnull__(6)))
#define DISPATCH_NONNULL7 __attribute__((__nonnull__(7)))
#define DISPATCH_NONNULL_ALL __attribute__((__nonnull__))
#define DISPATCH_SENTINEL __attribute__((__sentinel__))
#define DISPATCH_PURE __attribute__((__pure__))
#define DISPATCH_CONST __attribute__((__const__))
#define DISPATCH_WARN_RESULT __attribute__((__warn_unused_result__))
#define DISPATCH_MALLOC __attribute__((__malloc__))
#define DISPATCH_ALWAYS_INLINE __attribute__((__always_inline__))
#define DISPATCH_UNAVAILABLE __attribute__((__unavailable__))
#define DISPATCH_UNAVAILABLE_MSG(msg) __attribute__((__unavailable__(msg)))
#define DISPATCH_LINUX_UNAVAILABLE() __attribute__((__unavailable__))
#define DISPATCH_FREEBSD_UNAVAILABLE()
#define DISPATCH_EXPORT extern __attribute__((__visibility__("default")))
#define DISPATCH_EXTERN extern
#define DISPATCH_INLINE static __inline__
#define DISPATCH_EXPECT(x, v) __builtin_expect((x), (v))
#define DISPATCH_COLD __attribute__((__cold__))
#define DISPATCH_NOT_TAIL_CALLED
#define DISPATCH_NOESCAPE SQ_NOESCAPE
#define DISPATCH_RETURNS_RETAINED
#define DISPATCH_RETURNS_RETAINED_BLOCK
#define DISPATCH_TRANSPARENT_UNION
#define DISPATCH_ASSUME_NONNULL_BEGIN SQ_ASSUME_NONNULL_BEGIN
#define DISPATCH_ASSUME_NONNULL_END SQ_ASSUME_NONNULL_END
#define DISPATCH_COMPILER_CAN_ASSUME(expr) ((void)(expr))
#if __has_attribute(fallthrough)
#define DISPATCH_FALLTHROUGH __attribute__((__fallthrough__))
#else
#define DISPATCH_FALLTHROUGH
#endif
#define DISPATCH_SWIFT_NAME(name)
#define DISPATCH_SWIFT_UNAVAILABLE(msg)
#define DISPATCH_SWIFT3_UNAVAILABLE(msg)
#define DISPATCH_SWIFT3_OVERLAY 0
#define DISPATCH_REFINED_FOR_SWIFT
#define DISPATCH_ENUM(name, type, ...) \
	typedef enum : type { __VA_ARGS__ } name##_t
#define DISPATCH_ENUM_API_AVAILABLE(...)
#define DISPATCH_ENUM_API_DEPRECATED(...)
#define DISPATCH_ENUM_API_DEPRECATED_WITH_REPLACEMENT(...)
#define DISPATCH_APPLY_AUTO_AVAILABLE 1
#define DISPATCH_APPLY_QUEUE_ARG_NULLABILITY SQ_NULLABLE
#define dispatch_compiler_barrier() __asm__ __volatile__("" ::: "memory")

/* Availability annotations of Apple's headers, empty here as in
 * libdispatch's own Linux headers. */
#ifndef API_AVAILABLE
#define API_AVAILABLE(...)
#endif
#ifndef API_DEPRECATED
#define API_DEPRECATED(...)
#endif
#ifndef API_UNAVAILABLE
#define API_UNAVAILABLE(...)
#endif
#ifndef API_DEPRECATED_WITH_REPLACEMENT
#define API_DEPRECATED_WITH_REPLACEMENT(...)
#endif

#endif /* SWIFTQUEUES_COMPAT_DISPATCH_BASE_H */
