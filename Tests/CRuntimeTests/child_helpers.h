/*
 * Child processes for tests of what the runtime writes on stderr
 * (sq_debug, SQ_SNAPSHOT_SIGNAL, the watchdog): the child sets its
 * environment before it calls the runtime, the parent reads its stderr
 * until a marker shows up or time runs out, then stops it.
 */
#ifndef CHILD_HELPERS_H
#define CHILD_HELPERS_H

#include "sqtest.h"

#include <fcntl.h>
#include <poll.h>

struct sqt_child {
	pid_t pid;
	int err;      /* the child's stderr */
	int ready;    /* the child writes a byte here when it is ready */
	char out[65536];
	size_t len;
};

/* The child's end of the "ready" pipe (sqt_child_ready writes to it). */
static int sqt_child_ready_fd = -1;

/* Starts fn(ctx) in a child with `env` ("NAME=value" strings, NULL-ended)
 * set first; the child exits 0 when fn returns. */
static inline void
sqt_child_start(struct sqt_child *c, void (*fn)(void *), void *ctx,
		const char *const *env)
{
	int err[2], ready[2];
	if (pipe(err) != 0 || pipe(ready) != 0) {
		perror("pipe");
		exit(2);
	}
	fflush(NULL);
	c->len = 0;
	c->out[0] = '\0';
	c->pid = fork();
	if (c->pid == 0) {
		dup2(err[1], STDERR_FILENO);
		close(err[0]);
		close(err[1]);
		close(ready[0]);
		sqt_child_ready_fd = ready[1];
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		alarm(60); /* never outlives a broken parent for long */
		fn(ctx);
		_exit(0);
	}
	close(err[1]);
	close(ready[1]);
	c->err = err[0];
	c->ready = ready[0];
	fcntl(c->err, F_SETFL, O_NONBLOCK);
}

/* In the child: tells the parent it is ready. */
static inline void
sqt_child_ready(void)
{
	char b = 'r';
	ssize_t n = write(sqt_child_ready_fd, &b, 1);
	(void)n;
}

/* Waits up to timeout_ms for the child's "ready"; false on timeout or
 * exit. */
static inline bool
sqt_child_wait_ready(struct sqt_child *c, int timeout_ms)
{
	struct pollfd p = { .fd = c->ready, .events = POLLIN };
	char b;
	return poll(&p, 1, timeout_ms) == 1 && read(c->ready, &b, 1) == 1;
}

/* Reads the child's stderr until `marker` has appeared `times` times (NULL:
 * until end of file), or timeout_ms passed. Returns whether it did. */
static inline bool
sqt_child_read_until(struct sqt_child *c, const char *marker, int times,
		int timeout_ms)
{
	uint64_t deadline = sqt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		if (marker) {
			int seen = 0;
			for (const char *p = c->out; (p = strstr(p, marker));
					p += strlen(marker))
				seen++;
			if (seen >= times)
				return true;
		}
		uint64_t now = sqt_now_ns();
		if (now >= deadline)
			return false;
		struct pollfd p = { .fd = c->err, .events = POLLIN };
		int wait = (int)((deadline - now) / 1000000u) + 1;
		if (poll(&p, 1, wait) <= 0)
			continue;
		ssize_t n = read(c->err, c->out + c->len,
				sizeof(c->out) - 1 - c->len);
		if (n == 0)
			return marker == NULL;
		if (n < 0)
			continue;
		c->len += (size_t)n;
		c->out[c->len] = '\0';
		if (c->len == sizeof(c->out) - 1)
			return false;
	}
}

/* Stops the child (SIGKILL unless it already exited) and collects it;
 * returns its wait status. */
static inline int
sqt_child_stop(struct sqt_child *c)
{
	int status = 0;
	if (waitpid(c->pid, &status, WNOHANG) == 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &status, 0);
	}
	close(c->err);
	close(c->ready);
	return status;
}

/* A pool of one thread at most, safety net off: start order is then the
 * order the one worker takes jobs (a second thread, the monitor's for a
 * submitter it sees run long under a sanitizer, would race for them). */
static const char *const sqt_one_worker_env[] = { "SQ_WORKERS=1",
	"SQ_MAX_THREADS=1", "SQ_MONITOR_NET=0", NULL };

/* Runs fn(ctx) in a child with `env` to its end (at most timeout_ms),
 * checks that it exited with status 0 and copies its stderr, kept in
 * c->out, to stdout. */
static inline void
sqt_child_run(struct sqt_child *c, void (*fn)(void *), void *ctx,
		const char *const *env, int timeout_ms)
{
	sqt_child_start(c, fn, ctx, env);
	CHECK(sqt_child_read_until(c, NULL, 0, timeout_ms));
	int status = sqt_child_stop(c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fputs(c->out, stdout);
}

/* How many times `needle` occurs in `hay`. */
static inline int
sqt_count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

#endif /* CHILD_HELPERS_H */
