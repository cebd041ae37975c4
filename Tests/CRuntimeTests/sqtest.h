/*
 * A minimal test harness for the C tests: checks count, failures print
 * where and what, and each program ends with "<name>: N passed, N failed".
 * Compiled against the exported header only.
 */
#ifndef SQTEST_H
#define SQTEST_H

#define _GNU_SOURCE
#include <swiftqueues.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int sqt_passed, sqt_failed;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (cond) {                                                    \
			sqt_passed++;                                          \
		} else {                                                       \
			sqt_failed++;                                          \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__,          \
					__LINE__, #cond);                      \
		}                                                              \
	} while (0)

#define CHECK_EQ(actual, expected)                                             \
	do {                                                                   \
		long long _a = (long long)(actual);                            \
		long long _e = (long long)(expected);                          \
		if (_a == _e) {                                                \
			sqt_passed++;                                          \
		} else {                                                       \
			sqt_failed++;                                          \
			fprintf(stderr, "FAIL %s:%d: %s == %s: got %lld, "     \
					"expected %lld\n", __FILE__, __LINE__, \
					#actual, #expected, _a, _e);           \
		}                                                              \
	} while (0)

/* A CPU-bound process beside the test (contention: preemption at the
 * wrong moment, which a quiet machine hides). It dies with the test or
 * after `seconds`; the test ends it with sqt_stop_busy_loop. */
static inline pid_t
sqt_start_busy_loop(unsigned seconds)
{
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(3);
		alarm(seconds);
		volatile unsigned long spin = 0;
		for (;;)
			spin++;
	}
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	return pid;
}

/* Ends a busy loop by its process id (0: none). */
static inline void
sqt_stop_busy_loop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

static inline int
sqt_finish(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, sqt_passed, sqt_failed);
	return sqt_failed ? 1 : 0;
}

static inline uint64_t
sqt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t
sqt_thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Runs fn(ctx) in a child process and checks that the child dies of SIGABRT
 * after writing a stderr line that contains `message`.
 */
static inline void
sqt_expect_crash_impl(const char *file, int line, void (*fn)(void *),
		void *ctx, const char *message)
{
	int fds[2];
	if (pipe(fds) != 0) {
		perror("pipe");
		exit(2);
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		/* No core files for the expected abort. */
		signal(SIGABRT, SIG_DFL);
		fn(ctx);
		_exit(0);
	}
	close(fds[1]);
	char out[1024];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(out) - 1 &&
			(n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
	bool said = strstr(out, message) != NULL;
	if (aborted && said) {
		sqt_passed++;
	} else {
		sqt_failed++;
		fprintf(stderr, "FAIL %s:%d: expected abort with \"%s\"; "
				"status %d, stderr \"%s\"\n", file, line,
				message, status, out);
	}
}

#define CHECK_CRASH(fn, ctx, message)                                          \
	sqt_expect_crash_impl(__FILE__, __LINE__, fn, ctx, message)

/* Starts `count` threads running fn(arg_i) and joins them. */
static inline void
sqt_run_threads(int count, void *(*fn)(void *), void *args, size_t arg_size)
{
	pthread_t threads[64];
	for (int i = 0; i < count; i++) {
		void *arg = args ? (char *)args + (size_t)i * arg_size : NULL;
		if (pthread_create(&threads[i], NULL, fn, arg) != 0) {
			perror("pthread_create");
			exit(2);
		}
	}
	for (int i = 0; i < count; i++)
		pthread_join(threads[i], NULL);
}

#endif /* SQTEST_H */
