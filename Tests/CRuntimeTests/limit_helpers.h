/*
 * Helpers for the tests that run the runtime out of descriptors or threads
 * (test_limit_nofile.c, test_limit_nproc.c): each scenario runs in a forked
 * child that has not used the runtime before the fork, so it starts with a
 * fresh one under its own limits. The parent checks that the child ended
 * normally (no exit from inside the runtime, no abort), adds the child's
 * check counts to its own, and checks that nothing else was written to
 * stderr: no libevent "[err]" / "[warn]" line, no "SwiftQueues:" report.
 */
#ifndef SQTEST_LIMIT_HELPERS_H
#define SQTEST_LIMIT_HELPERS_H

#include "source_helpers.h"

#include <fcntl.h>
#include <sys/resource.h>

/* Runs scenario() in a child with a 120 s alarm; the child's output (stdout
 * and stderr) is printed by the parent, indented. `expect` is NULL for a
 * child that must end with exit status 0, or a text its stderr must hold
 * as it dies of SIGABRT. A child that prints "skipped: <why>" and exits
 * with 0 counts as neither passed nor failed. */
static inline void
sqt_run_child(const char *name, void (*scenario)(void), const char *expect)
{
	int out[2];
	if (pipe(out) != 0) {
		perror("pipe");
		exit(2);
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		dup2(out[1], STDOUT_FILENO);
		dup2(out[1], STDERR_FILENO);
		close(out[0]);
		close(out[1]);
		signal(SIGABRT, SIG_DFL);
		alarm(120);
		sqt_passed = sqt_failed = 0;
		scenario();
		printf("%s: %d passed, %d failed\n", name, sqt_passed,
				sqt_failed);
		fflush(NULL);
		/* No atexit handlers (a sanitizer's leak check would need a
		 * thread and descriptors the scenario may have used up). */
		_exit(sqt_failed ? 1 : 0);
	}
	close(out[1]);
	static char text[65536];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(text) - 1 &&
			(n = read(out[0], text + len, sizeof(text) - 1 - len)) > 0)
		len += (size_t)n;
	text[len] = '\0';
	close(out[0]);
	int status = 0;
	waitpid(pid, &status, 0);

	bool said = expect != NULL && strstr(text, expect) != NULL;
	/* A scenario that cannot arrange its limits says "skipped: why" and
	 * exits with 0. */
	bool skipped = strstr(text, "skipped:") != NULL &&
			WIFEXITED(status) && WEXITSTATUS(status) == 0;
	printf("%s:\n", name);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		printf("  %s\n", line);
		int p, f;
		char who[128];
		if (sscanf(line, "%127[^:]: %d passed, %d failed", who, &p, &f)
				== 3 && strcmp(who, name) == 0) {
			sqt_passed += p;
			sqt_failed += f;
		} else if (strstr(line, "[err]") || strstr(line, "[warn]")) {
			sqt_failed++;
			fprintf(stderr, "FAIL %s: libevent wrote to stderr\n",
					name);
		} else if (expect == NULL && strstr(line, "SwiftQueues:")) {
			sqt_failed++;
			fprintf(stderr, "FAIL %s: a report on stderr\n", name);
		}
	}
	if (skipped) {
		/* nothing to check */
	} else if (expect != NULL) {
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && said) {
			sqt_passed++;
		} else {
			sqt_failed++;
			fprintf(stderr, "FAIL %s: expected an abort saying "
					"\"%s\"; status %#x\n", name, expect,
					status);
		}
	} else {
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			sqt_passed++;
		} else {
			sqt_failed++;
			fprintf(stderr, "FAIL %s: child status %#x (%s %d)\n",
					name, status, WIFSIGNALED(status) ?
					"signal" : "exit", WIFSIGNALED(status) ?
					WTERMSIG(status) : WEXITSTATUS(status));
		}
	}
}

/* The child's open descriptors, counted without opening one. */
static inline int
sqt_open_fds(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	int count = 0;
	for (int fd = 0; fd < (int)rl.rlim_cur; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			count++;
	return count;
}

#endif
