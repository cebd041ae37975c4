/*
 * libdispatch's test-program interface (dispatch_test_start,
 * dispatch_test_current, test_group_wait), implemented in harness.c over
 * the compatibility headers.
 */
#ifndef SQ_COMPAT_DISPATCH_TEST_H
#define SQ_COMPAT_DISPATCH_TEST_H

#include <stdbool.h>
#include <dispatch/dispatch.h>
#include <generic_unix_port.h>

#define test_group_wait(g) do { \
	if (dispatch_group_wait(g, dispatch_time(DISPATCH_TIME_NOW, \
			25ull * NSEC_PER_SEC))) { \
		test_long("group wait timed out", 1, 0); \
		test_stop(); \
	} } while (0)

#ifdef __cplusplus
extern "C" {
#endif

void dispatch_test_start(const char *desc);
void _dispatch_test_current(const char *file, long line, const char *desc,
		dispatch_queue_t expected);
#define dispatch_test_current(a, b) \
	_dispatch_test_current(__SOURCE_FILE__, __LINE__, a, b)

#ifdef __cplusplus
}
#endif

#endif /* SQ_COMPAT_DISPATCH_TEST_H */
