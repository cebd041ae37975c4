/*
 * The harness behind bsdtests.h and dispatch_test.h: libdispatch's test
 * programs, built unchanged against the compatibility headers, report
 * through these checks. Every check prints a PASS / FAIL line; test_stop
 * prints the totals and exits with 1 after any failure. A program still
 * running after SQ_COMPAT_TIMEOUT seconds (default 120) fails.
 */
#define _GNU_SOURCE
#include <bsdtests.h>
#include "dispatch_test.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int32_t passed, failed;
static const char *test_name = "test";

static void
report(const char *file, long line, const char *desc, bool ok,
		const char *detail)
{
	__atomic_add_fetch(ok ? &passed : &failed, 1, __ATOMIC_RELAXED);
	if (ok)
		fprintf(stderr, "[PASS] %s (%s:%ld)\n", desc, file, line);
	else
		fprintf(stderr, "[FAIL] %s (%s:%ld): %s\n", desc, file, line,
				detail);
}

static void
timed_out(int sig)
{
	(void)sig;
	static const char msg[] = "[FAIL] timed out (SQ_COMPAT_TIMEOUT)\n";
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	_exit(1);
}

void
test_start(const char *desc)
{
	test_name = program_invocation_short_name;
	fprintf(stderr, "[TEST] %s\n", desc);
	const char *limit = getenv("SQ_COMPAT_TIMEOUT");
	signal(SIGALRM, timed_out);
	alarm(limit ? (unsigned)atoi(limit) : 120u);
}

void
dispatch_test_start(const char *desc)
{
	test_start(desc);
}

void
test_stop(void)
{
	int32_t f = __atomic_load_n(&failed, __ATOMIC_SEQ_CST);
	int32_t p = __atomic_load_n(&passed, __ATOMIC_SEQ_CST);
	/* A program that checked nothing proved nothing. */
	if (p + f == 0)
		f = 1;
	printf("%s: %d passed, %d failed\n", test_name, p, f);
	fflush(NULL);
	exit(f ? 1 : 0);
}

void
test_stop_after_delay(void *delay)
{
	if (delay != NULL)
		sleep((unsigned)(uintptr_t)delay);
	test_stop();
}

#define CHECK_REPORT(ok, fmt, ...) do { \
	char detail[160]; \
	snprintf(detail, sizeof(detail), fmt, __VA_ARGS__); \
	report(file, line, desc, (ok), detail); \
} while (0)

void
_test_ptr_null(const char *file, long line, const char *desc, const void *ptr)
{
	CHECK_REPORT(ptr == NULL, "got %p, expected NULL", ptr);
}

void
_test_ptr_notnull(const char *file, long line, const char *desc,
		const void *ptr)
{
	CHECK_REPORT(ptr != NULL, "got %p, expected non-NULL", ptr);
}

void
_test_ptr_not(const char *file, long line, const char *desc,
		const void *actual, const void *expected)
{
	CHECK_REPORT(actual != expected, "got %p, expected anything else",
			actual);
}

void
_test_ptr(const char *file, long line, const char *desc, const void *actual,
		const void *expected)
{
	CHECK_REPORT(actual == expected, "got %p, expected %p", actual,
			expected);
}

void
_test_uint32(const char *file, long line, const char *desc, uint32_t actual,
		uint32_t expected)
{
	CHECK_REPORT(actual == expected, "got %u, expected %u", actual,
			expected);
}

void
_test_int32(const char *file, long line, const char *desc, int32_t actual,
		int32_t expected)
{
	CHECK_REPORT(actual == expected, "got %d, expected %d", actual,
			expected);
}

void
_test_long(const char *file, long line, const char *desc, long actual,
		long expected)
{
	CHECK_REPORT(actual == expected, "got %ld, expected %ld", actual,
			expected);
}

void
_test_uint64(const char *file, long line, const char *desc, uint64_t actual,
		uint64_t expected)
{
	CHECK_REPORT(actual == expected, "got %llu, expected %llu",
			(unsigned long long)actual,
			(unsigned long long)expected);
}

void
_test_long_less_than(const char *file, long line, const char *desc,
		long actual, long max_expected)
{
	CHECK_REPORT(actual < max_expected, "got %ld, expected < %ld", actual,
			max_expected);
}

void
_test_long_less_than_or_equal(const char *file, long line, const char *desc,
		long actual, long max_expected)
{
	CHECK_REPORT(actual <= max_expected, "got %ld, expected <= %ld",
			actual, max_expected);
}

void
_test_long_greater_than_or_equal(const char *file, long line,
		const char *desc, long actual, long expected_min)
{
	CHECK_REPORT(actual >= expected_min, "got %ld, expected >= %ld",
			actual, expected_min);
}

void
_test_double_less_than_or_equal(const char *file, long line,
		const char *desc, double val, double max_expected)
{
	CHECK_REPORT(val <= max_expected, "got %g, expected <= %g", val,
			max_expected);
}

void
_test_double_less_than(const char *file, long line, const char *desc,
		double val, double max_expected)
{
	CHECK_REPORT(val < max_expected, "got %g, expected < %g", val,
			max_expected);
}

void
_test_double_equal(const char *file, long line, const char *desc, double val,
		double expected)
{
	CHECK_REPORT(fabs(val - expected) < 1e-9, "got %g, expected %g", val,
			expected);
}

void
_test_errno(const char *file, long line, const char *desc, long actual,
		long expected)
{
	CHECK_REPORT(actual == expected, "got %s, expected %s",
			strerror((int)actual), strerror((int)expected));
}

void
_test_skip(const char *file, long line, const char *desc)
{
	fprintf(stderr, "[SKIP] %s (%s:%ld)\n", desc, file, line);
}

void
_dispatch_test_current(const char *file, long line, const char *desc,
		dispatch_queue_t expected)
{
	dispatch_queue_t actual = dispatch_get_current_queue();
	CHECK_REPORT(actual == expected, "on queue \"%s\", expected \"%s\"",
			dispatch_queue_get_label(actual),
			dispatch_queue_get_label(expected));
}
