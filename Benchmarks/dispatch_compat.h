/*
 * SwiftQueues benchmarks — includes the toolchain's <dispatch/dispatch.h>
 * from a gcc build.
 *
 * The toolchain's headers are written for clang: os/generic_unix_base.h
 * tests __has_feature() and __has_extension(), which gcc before 14 does not
 * know. Without them those tests read as "no", which only drops clang
 * annotations (nullability, Swift names). Blocks stay off under gcc, so
 * scenarios use the _f (function pointer) forms.
 */
#ifndef SQ_BENCH_DISPATCH_COMPAT_H
#define SQ_BENCH_DISPATCH_COMPAT_H

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#ifndef __has_extension
#define __has_extension(x) 0
#endif

#include <dispatch/dispatch.h>

#endif /* SQ_BENCH_DISPATCH_COMPAT_H */
