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

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

/* The descriptor calls the programs make through the harness (Windows
 * handles there; plain descriptors here). */
#define dispatch_test_fd_open(path, flags) open((path), (flags))
#define dispatch_test_fd_close(fd) close(fd)
#define dispatch_test_fd_lseek(fd, offset, whence) lseek((fd), (offset), (whence))
#define dispatch_test_fd_read(fd, buf, count) read((fd), (buf), (count))
#define dispatch_test_fd_write(fd, buf, count) write((fd), (buf), (count))
#define dispatch_test_fd_pread(fd, buf, count, offset) \
	pread((fd), (buf), (count), (offset))

#ifdef __cplusplus
extern "C" {
#endif

void dispatch_test_start(const char *desc);
/* Whether poll() reports the descriptor readable (it does for files). */
bool dispatch_test_check_evfilt_read_for_fd(int fd);
/* A temporary file of a few MiB of varied bytes; the caller frees the
 * path after dispatch_test_release_large_file (which unlinks it). */
char *dispatch_test_get_large_file(void);
void dispatch_test_release_large_file(const char *path);
void _dispatch_test_current(const char *file, long line, const char *desc,
		dispatch_queue_t expected);
#define dispatch_test_current(a, b) \
	_dispatch_test_current(__SOURCE_FILE__, __LINE__, a, b)

#ifdef __cplusplus
}
#endif

#endif /* SQ_COMPAT_DISPATCH_TEST_H */
