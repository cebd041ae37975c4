/*
 * The check functions libdispatch's test programs call (their harness's
 * interface), implemented by SwiftQueues in harness.c: each check prints
 * PASS or FAIL with its description, test_stop() prints the
 * "<name>: N passed, M failed" line Tests/CRuntimeTests/run.sh reads and
 * exits non-zero after any failure.
 */
#ifndef SQ_COMPAT_BSDTESTS_H
#define SQ_COMPAT_BSDTESTS_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

static inline const char *
__BASENAME__(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}
#define __SOURCE_FILE__ __BASENAME__(__FILE__)

#ifdef __cplusplus
extern "C" {
#endif

void test_start(const char *desc);
void test_stop(void) __attribute__((__noreturn__));
void test_stop_after_delay(void *delay) __attribute__((__noreturn__));

void _test_ptr_null(const char *file, long line, const char *desc,
		const void *ptr);
#define test_ptr_null(a, b) _test_ptr_null(__SOURCE_FILE__, __LINE__, a, b)
void _test_ptr_notnull(const char *file, long line, const char *desc,
		const void *ptr);
#define test_ptr_notnull(a, b) \
	_test_ptr_notnull(__SOURCE_FILE__, __LINE__, a, b)
void _test_ptr_not(const char *file, long line, const char *desc,
		const void *actual, const void *expected);
#define test_ptr_not(a, b, c) \
	_test_ptr_not(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_ptr(const char *file, long line, const char *desc,
		const void *actual, const void *expected);
#define test_ptr(a, b, c) _test_ptr(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_uint32(const char *file, long line, const char *desc,
		uint32_t actual, uint32_t expected);
#define test_uint32(a, b, c) _test_uint32(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_int32(const char *file, long line, const char *desc,
		int32_t actual, int32_t expected);
#define test_int32(a, b, c) _test_int32(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_long(const char *file, long line, const char *desc,
		long actual, long expected);
#define test_long(a, b, c) _test_long(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_uint64(const char *file, long line, const char *desc,
		uint64_t actual, uint64_t expected);
#define test_uint64(a, b, c) _test_uint64(__SOURCE_FILE__, __LINE__, a, b, c)
#define test_int64(a, b, c) _test_uint64(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_sizet(const char *file, long line, const char *desc,
		size_t actual, size_t expected);
#define test_sizet(a, b, c) _test_sizet(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_sizet_less_than(const char *file, long line, const char *desc,
		size_t actual, size_t max_expected);
#define test_sizet_less_than(a, b, c) \
	_test_sizet_less_than(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_sizet_less_than_or_equal(const char *file, long line,
		const char *desc, size_t actual, size_t max_expected);
#define test_sizet_less_than_or_equal(a, b, c) \
	_test_sizet_less_than_or_equal(__SOURCE_FILE__, __LINE__, a, b, c)
/* The check's description is a printf format and its arguments. */
void _test_int32_format(const char *file, long line, int32_t actual,
		int32_t expected, const char *format, ...)
		__attribute__((__format__(__printf__, 5, 6)));
#define test_int32_format(actual, expected, ...) \
	_test_int32_format(__SOURCE_FILE__, __LINE__, actual, expected, \
			__VA_ARGS__)
void _test_long_less_than(const char *file, long line, const char *desc,
		long actual, long max_expected);
#define test_long_less_than(a, b, c) \
	_test_long_less_than(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_long_less_than_or_equal(const char *file, long line,
		const char *desc, long actual, long max_expected);
#define test_long_less_than_or_equal(a, b, c) \
	_test_long_less_than_or_equal(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_long_greater_than_or_equal(const char *file, long line,
		const char *desc, long actual, long expected_min);
#define test_long_greater_than_or_equal(a, b, c) \
	_test_long_greater_than_or_equal(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_double_less_than_or_equal(const char *file, long line,
		const char *desc, double val, double max_expected);
#define test_double_less_than_or_equal(d, v, m) \
	_test_double_less_than_or_equal(__SOURCE_FILE__, __LINE__, d, v, m)
void _test_double_less_than(const char *file, long line, const char *desc,
		double val, double max_expected);
#define test_double_less_than(d, v, m) \
	_test_double_less_than(__SOURCE_FILE__, __LINE__, d, v, m)
void _test_double_equal(const char *file, long line, const char *desc,
		double val, double expected);
#define test_double_equal(d, v, m) \
	_test_double_equal(__SOURCE_FILE__, __LINE__, d, v, m)
void _test_errno(const char *file, long line, const char *desc,
		long actual, long expected);
#define test_errno(a, b, c) _test_errno(__SOURCE_FILE__, __LINE__, a, b, c)
void _test_skip(const char *file, long line, const char *desc);
#define test_skip(m) _test_skip(__SOURCE_FILE__, __LINE__, m)
#define test_skip2(m) _test_skip("", 0, m)

#ifdef __cplusplus
}
#endif

#endif /* SQ_COMPAT_BSDTESTS_H */
