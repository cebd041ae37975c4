/*
 * The harness behind bsdtests.h and dispatch_test.h: libdispatch's test
 * programs, built unchanged against the compatibility headers, report
 * through these checks. Every check prints a PASS / FAIL line; test_stop
 * prints the totals and exits with 1 after any failure. A program still
 * running after SQ_COMPAT_TIMEOUT seconds (default 120) fails.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <bsdtests.h>
#include "dispatch_test.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int32_t passed, failed;
static const char *test_name = "test";
static volatile int32_t stopped;

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

/*
 * A program that returns from main or calls exit without test_stop
 * (libdispatch's own harness judges those by their exit status): its
 * exit status is one more check, then the totals as test_stop prints
 * them.
 */
static void
exited(int status, void *arg)
{
	(void)arg;
	if (__atomic_load_n(&stopped, __ATOMIC_SEQ_CST))
		return;
	__atomic_add_fetch(status == 0 ? &passed : &failed, 1,
			__ATOMIC_SEQ_CST);
	fprintf(stderr, "[%s] exit status %d\n", status == 0 ? "PASS" : "FAIL",
			status);
	printf("%s: %d passed, %d failed\n", test_name,
			__atomic_load_n(&passed, __ATOMIC_SEQ_CST),
			__atomic_load_n(&failed, __ATOMIC_SEQ_CST));
	fflush(NULL);
}

void
test_start(const char *desc)
{
	test_name = program_invocation_short_name;
	fprintf(stderr, "[TEST] %s\n", desc ? desc : test_name);
	on_exit(exited, NULL);
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
	/* A program that checks nothing of its own passes by getting here
	 * (libdispatch's harness judges it by its exit status alone). */
	if (p + f == 0) {
		fprintf(stderr, "[PASS] test_stop reached\n");
		p = 1;
	}
	__atomic_store_n(&stopped, 1, __ATOMIC_SEQ_CST);
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
_test_sizet(const char *file, long line, const char *desc, size_t actual,
		size_t expected)
{
	CHECK_REPORT(actual == expected, "got %zu, expected %zu", actual,
			expected);
}

void
_test_sizet_less_than(const char *file, long line, const char *desc,
		size_t actual, size_t max_expected)
{
	CHECK_REPORT(actual < max_expected, "got %zu, expected < %zu", actual,
			max_expected);
}

void
_test_sizet_less_than_or_equal(const char *file, long line, const char *desc,
		size_t actual, size_t max_expected)
{
	CHECK_REPORT(actual <= max_expected, "got %zu, expected <= %zu",
			actual, max_expected);
}

void
_test_int32_format(const char *file, long line, int32_t actual,
		int32_t expected, const char *format, ...)
{
	char desc[160];
	va_list args;
	va_start(args, format);
	vsnprintf(desc, sizeof(desc), format, args);
	va_end(args);
	CHECK_REPORT(actual == expected, "got %d, expected %d", actual,
			expected);
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

bool
dispatch_test_check_evfilt_read_for_fd(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

char *
dispatch_test_get_large_file(void)
{
	const char *dir = getenv("TMPDIR");
	char *path = NULL;
	if (asprintf(&path, "%s/sq_compat_large.XXXXXX", dir ? dir : "/tmp") < 0)
		abort();
	int fd = mkstemp(path);
	if (fd < 0) {
		perror(path);
		abort();
	}
	/* 4 MiB of varied bytes (a linear congruential sequence). */
	static unsigned char chunk[64 * 1024];
	uint32_t x = 12345;
	for (int n = 0; n < 64; n++) {
		for (size_t i = 0; i < sizeof(chunk); i++) {
			x = x * 1103515245u + 12345u;
			chunk[i] = (unsigned char)(x >> 16);
		}
		if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk)) {
			perror(path);
			abort();
		}
	}
	close(fd);
	return path;
}

void
dispatch_test_release_large_file(const char *path)
{
	unlink(path);
}

#ifdef SWIFTQUEUES_COMPAT_DISPATCH_H
#include <dispatch/private.h>

void
_sq_compat_queue_set_width(dispatch_queue_t queue, long width)
{
	(void)queue;
	const char *file = "private.h";
	long line = 0;
	const char *desc = "dispatch_queue_set_width";
	CHECK_REPORT(width == 1, "width %ld: SwiftQueues has no "
			"width-limited queues", width);
}
#endif
