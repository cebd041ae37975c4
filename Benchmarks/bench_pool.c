/*
 * SwiftQueues benchmarks — what the worker pool costs when there is little
 * or no work, against the toolchain's libdispatch:
 *
 *   idle wake-ups    a fresh process uses queues, a repeating timer and
 *                    afters, cancels them, rests 2 s, then counts the context
 *                    switches of all its threads over 3 s
 *                    (/proc/self/task/<tid>/status). Reported per
 *                    10,000 s (the harness clock cannot carry fractions
 *                    of a nanosecond).
 *                    Each side runs in its own child process (the two
 *                    libraries' threads would otherwise be counted
 *                    together); both children run once, at set-up, side by
 *                    side, and every round reports that figure.
 *   burst CPU        1,000 bursts of 10 tasks of 20 us on the default global
 *                    queue, 1 ms asleep between bursts; CPU time (user +
 *                    sys of the whole process, getrusage) per burst. The
 *                    wall time per burst is printed after the table: the
 *                    goal is less CPU at an equal or better wall time.
 *
 * Both rows carry their figure through the harness clock (see
 * bench_report_value in harness.h): the "ns/op" column holds switches per
 * 10,000 s and CPU nanoseconds per burst.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "dispatch_compat.h"

#include <dirent.h>
#include <errno.h>
#include <semaphore.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <swiftqueues.h>

extern char **environ;

#define MS 1000000ull
#define US 1000ull

enum { OURS = 0, THEIRS = 1 };

static void
sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull),
		(long)(ns % 1000000000ull) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

/* ---- idle wake-ups ------------------------------------------------------- */

#define MAX_TASKS 512

struct switch_counts {
	int n;
	long tid[MAX_TASKS];
	uint64_t count[MAX_TASKS];
};

/* Context switches (voluntary + involuntary) of every thread alive now. */
static void
read_switches(struct switch_counts *c)
{
	c->n = 0;
	DIR *d = opendir("/proc/self/task");
	if (d == NULL)
		bench_fail("opendir /proc/self/task: %s", strerror(errno));
	struct dirent *e;
	while ((e = readdir(d)) != NULL && c->n < MAX_TASKS) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], line[256];
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
				e->d_name);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue; /* the thread just exited */
		uint64_t total = 0;
		while (fgets(line, sizeof(line), f)) {
			unsigned long long k;
			if (sscanf(line, "voluntary_ctxt_switches: %llu", &k)
					== 1 ||
					sscanf(line, "nonvoluntary_ctxt_switches: "
					"%llu", &k) == 1)
				total += k;
		}
		fclose(f);
		c->tid[c->n] = atol(e->d_name);
		c->count[c->n++] = total;
	}
	closedir(d);
}

/* Switches between two readings: threads seen twice count their
 * difference, threads born in between count everything (a thread that
 * exited in between is not seen: at most its exit is missed). */
static uint64_t
switches_between(const struct switch_counts *a, const struct switch_counts *b)
{
	uint64_t total = 0;
	for (int i = 0; i < b->n; i++) {
		uint64_t before = 0;
		for (int j = 0; j < a->n; j++)
			if (a->tid[j] == b->tid[i])
				before = a->count[j];
		total += b->count[i] >= before ? b->count[i] - before : 0;
	}
	return total;
}

static atomic_int idle_ticks;
static sem_t idle_sem;

static void
idle_task(void *ctx)
{
	sem_post(&idle_sem);
}

static void
idle_tick(void *ctx)
{
	if (atomic_fetch_add(&idle_ticks, 1) == 9)
		sem_post(&idle_sem);
}

/* Uses queues, a timer and afters, then measures: the child's work. */
static int
idle_child(int side)
{
	sem_init(&idle_sem, 0, 0);
	if (side == OURS) {
		sq_queue_t q = sq_queue_create("bench.idle", NULL);
		for (int i = 0; i < 100; i++) {
			sq_async_f(q, NULL, idle_task);
			sq_async_f(sq_get_global_queue(0, 0), NULL, idle_task);
		}
		for (int i = 0; i < 200; i++)
			sem_wait(&idle_sem);
		sq_source_t t = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, q);
		sq_source_set_event_handler_f(t, idle_tick);
		sq_source_set_timer(t, SQ_TIME_NOW, 10 * MS, 0);
		sq_activate(t);
		sem_wait(&idle_sem);
		sq_source_cancel(t);
		sq_release(t);
		for (int i = 0; i < 5; i++)
			sq_after_f(sq_time(SQ_TIME_NOW, (int64_t)(i + 1) * 2 *
					(int64_t)MS), q, NULL, idle_task);
		for (int i = 0; i < 5; i++)
			sem_wait(&idle_sem);
		sq_release(q);
	} else {
		dispatch_queue_t q = dispatch_queue_create("bench.idle", NULL);
		for (int i = 0; i < 100; i++) {
			dispatch_async_f(q, NULL, idle_task);
			dispatch_async_f(dispatch_get_global_queue(0, 0), NULL,
					idle_task);
		}
		for (int i = 0; i < 200; i++)
			sem_wait(&idle_sem);
		dispatch_source_t t = dispatch_source_create(
				DISPATCH_SOURCE_TYPE_TIMER, 0, 0, q);
		dispatch_source_set_event_handler_f(t, idle_tick);
		dispatch_source_set_timer(t, DISPATCH_TIME_NOW, 10 * MS, 0);
		dispatch_resume(t);
		sem_wait(&idle_sem);
		dispatch_source_cancel(t);
		dispatch_release(t);
		for (int i = 0; i < 5; i++)
			dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW,
					(int64_t)(i + 1) * 2 * (int64_t)MS), q,
					NULL, idle_task);
		for (int i = 0; i < 5; i++)
			sem_wait(&idle_sem);
		dispatch_release(q);
	}
	sleep_ns(2000 * MS);
	static struct switch_counts before, after;
	read_switches(&before);
	sleep_ns(3000 * MS);
	read_switches(&after);
	/* The measuring thread's own sleep is one switch, on both sides. */
	printf("%.3f\n", (double)switches_between(&before, &after) / 3.0);
	return 0;
}

static double idle_per_s[2] = { -1, -1 };

static pid_t
spawn_child(int side, int *out_fd)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		bench_fail("readlink /proc/self/exe");
	self[n] = '\0';
	int fds[2];
	if (pipe(fds) != 0)
		bench_fail("pipe: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	setenv("BENCH_POOL_CHILD", side == OURS ? "idle-ours" : "idle-theirs",
			1);
	char *argv[] = { self, NULL };
	pid_t pid;
	if (posix_spawn(&pid, self, &fa, NULL, argv, environ) != 0)
		bench_fail("posix_spawn: %s", strerror(errno));
	unsetenv("BENCH_POOL_CHILD");
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	*out_fd = fds[0];
	return pid;
}

static double
read_child(pid_t pid, int fd)
{
	char buf[64] = "";
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	int status;
	waitpid(pid, &status, 0);
	if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_fail("idle wake-ups: the child failed");
	buf[n] = '\0';
	return atof(buf);
}

static void
idle_setup(void)
{
	int fd_ours, fd_theirs;
	pid_t ours = spawn_child(OURS, &fd_ours);
	pid_t theirs = spawn_child(THEIRS, &fd_theirs);
	idle_per_s[OURS] = read_child(ours, fd_ours);
	idle_per_s[THEIRS] = read_child(theirs, fd_theirs);
}

static void
idle_ours(size_t ops)
{
	bench_report_value(idle_per_s[OURS] * 1e4, ops);
}

static void
idle_theirs(size_t ops)
{
	bench_report_value(idle_per_s[THEIRS] * 1e4, ops);
}

int
bench_pool_child(const char *mode)
{
	if (strcmp(mode, "idle-ours") == 0)
		return idle_child(OURS);
	if (strcmp(mode, "idle-theirs") == 0)
		return idle_child(THEIRS);
	fprintf(stderr, "unknown BENCH_POOL_CHILD mode '%s'\n", mode);
	return 2;
}

/* ---- burst CPU ------------------------------------------------------------ */

#define BURSTS 1000
#define BURST_TASKS 10

static atomic_int burst_left;
static sem_t burst_done;
static double burst_wall_ns[2][64];
static unsigned burst_runs[2];

static void
burst_task(void *ctx)
{
	uint64_t end = bench_mono_ns() + 20 * US;
	while (bench_mono_ns() < end)
		bench_clobber();
	if (atomic_fetch_sub(&burst_left, 1) == 1)
		sem_post(&burst_done);
}

static uint64_t
cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
			1000000000ull + (uint64_t)(ru.ru_utime.tv_usec +
			ru.ru_stime.tv_usec) * 1000ull;
}

static void
burst_run(int side, size_t ops)
{
	sq_queue_t sq = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	dispatch_queue_t dq = dispatch_get_global_queue(0, 0);
	/* Both pools rest before the clock starts. */
	sleep_ns(20 * MS);
	uint64_t cpu0 = cpu_ns(), wall0 = bench_mono_ns(), asleep = 0;
	for (size_t b = 0; b < ops; b++) {
		atomic_store(&burst_left, BURST_TASKS);
		for (int i = 0; i < BURST_TASKS; i++) {
			if (side == OURS)
				sq_async_f(sq, NULL, burst_task);
			else
				dispatch_async_f(dq, NULL, burst_task);
		}
		sem_wait(&burst_done);
		uint64_t t = bench_mono_ns();
		sleep_ns(1 * MS);
		asleep += bench_mono_ns() - t;
	}
	uint64_t cpu = cpu_ns() - cpu0;
	uint64_t wall = bench_mono_ns() - wall0 - asleep;
	if (burst_runs[side] < 64)
		burst_wall_ns[side][burst_runs[side]++] = (double)wall /
				(double)ops;
	bench_report_value((double)cpu / (double)ops, ops);
}

static void
burst_ours(size_t ops)
{
	burst_run(OURS, ops);
}

static void
burst_theirs(size_t ops)
{
	burst_run(THEIRS, ops);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void
burst_summary(void)
{
	if (burst_runs[OURS] == 0 || burst_runs[THEIRS] == 0)
		return;
	double med[2];
	for (int s = 0; s < 2; s++) {
		qsort(burst_wall_ns[s], burst_runs[s], sizeof(double),
				cmp_double);
		med[s] = burst_wall_ns[s][burst_runs[s] / 2];
	}
	printf("\nBursts of %d x 20 us, wall time per burst (1 ms sleeps "
			"left out), median of %u / %u runs: ours %.1f us, "
			"libdispatch %.1f us, ratio %.2f (goal <= 1.0)\n",
			BURST_TASKS, burst_runs[OURS], burst_runs[THEIRS],
			med[OURS] / 1e3, med[THEIRS] / 1e3,
			med[OURS] / med[THEIRS]);
}

static void
burst_setup(void)
{
	sem_init(&burst_done, 0, 0);
	atexit(burst_summary);
}

const bench_scenario_t bench_pool[] = {
	{ "idle switches per 10,000 s", 1,
	  idle_ours, idle_theirs,
	  "libdispatch", 1.0, idle_setup, NULL },
	{ "burst 10 x 20 us: CPU per burst", BURSTS,
	  burst_ours, burst_theirs,
	  "libdispatch", 1.0, burst_setup, NULL },
	{ NULL, 0, NULL, NULL, NULL, 0, NULL, NULL }
};
