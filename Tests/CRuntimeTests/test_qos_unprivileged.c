/*
 * The QoS classes' CPU and I/O priorities in a process that may not lower
 * a thread's nice value (no CAP_SYS_NICE, RLIMIT_NICE 0): a worker that
 * runs work below DEFAULT takes that class's nice value and keeps it, so
 * it must never run higher work again, and work of the higher classes
 * must still find a thread at the program's value at once.
 *
 * Every scenario runs in a child process (the width is read when the pool
 * starts) at SQ_WORKERS = 1, 2, 4, 8, 16, again at 4, 2 and 1 with a thread
 * cap of the width, and at 4 beside two busy-loop processes; a hang is a failure (the
 * child's alarm). Each job records the nice value, the policy and the I/O
 * priority of the thread it ran on:
 *   - BACKGROUND jobs at the program's value + 10 and the idle I/O
 *     priority, UTILITY jobs at + 4, everything else at the program's
 *     value and the default I/O priority;
 *   - USER_INTERACTIVE and USER_INITIATED jobs on a 0.1 ms time slice
 *     (where the kernel has custom slices), no other;
 *   - jobs of every class, queued from jobs of every class (a thread a
 *     bound worker starts must not inherit its class), all run;
 *   - with a background batch holding every worker, DEFAULT work queued
 *     meanwhile ends before the batch does (also at the thread cap, where
 *     a bound worker gives its thread back for it).
 */
#define _GNU_SOURCE
#include "sqtest.h"
#include "nice_helpers.h"

#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define NCLASS 5
static const sq_qos_class_t classes[NCLASS] = {
	SQ_QOS_CLASS_USER_INTERACTIVE, SQ_QOS_CLASS_USER_INITIATED,
	SQ_QOS_CLASS_DEFAULT, SQ_QOS_CLASS_UTILITY, SQ_QOS_CLASS_BACKGROUND,
};
static const int nice_offsets[NCLASS] = { 0, 0, 0, 4, 10 };

/* Shared with the parent. */
struct shared {
	atomic_long ran[NCLASS];
	atomic_long wrong_nice[NCLASS];
	atomic_long wrong_io[NCLASS];
	atomic_long wrong_policy[NCLASS];
	atomic_long short_slice[NCLASS]; /* jobs on a 0.1 ms slice */
	atomic_long default_before_batch; /* DEFAULT jobs ended before the batch */
	atomic_long default_total;
	atomic_int batch_done;
	int base_nice;
	int expected_nice[NCLASS];
};
static struct shared *sh;

static void
spin_ns(uint64_t ns)
{
	uint64_t start = sqt_now_ns();
	while (sqt_now_ns() - start < ns)
		;
}

static void
note(int c)
{
	if (sqt_thread_nice() != sh->expected_nice[c])
		atomic_fetch_add(&sh->wrong_nice[c], 1);
	if (sqt_thread_io_idle() != (c == 4))
		atomic_fetch_add(&sh->wrong_io[c], 1);
	if (sched_getscheduler(0) != SCHED_OTHER)
		atomic_fetch_add(&sh->wrong_policy[c], 1);
	if (sqt_thread_slice_ns() == 100000)
		atomic_fetch_add(&sh->short_slice[c], 1);
	atomic_fetch_add(&sh->ran[c], 1);
}

struct job {
	int c;
	int child; /* class of a job it queues, or -1 */
	sq_group_t group;
};

static void job_fn(void *ctx);

static void
submit(sq_group_t group, int c, int child)
{
	struct job *j = malloc(sizeof(*j));
	j->c = c;
	j->child = child;
	j->group = group;
	sq_group_async_f(group, sq_get_global_queue(classes[c], 0), j, job_fn);
}

static void
job_fn(void *ctx)
{
	struct job *j = ctx;
	note(j->c);
	spin_ns(100 * 1000);
	if (j->child >= 0)
		submit(j->group, j->child, -1);
	free(j);
}

/* Jobs of every class, each queuing one of every class in turn. */
static void
scenario_classes(void)
{
	sq_group_t g = sq_group_create();
	for (int round = 0; round < 8; round++)
		for (int c = 0; c < NCLASS; c++)
			for (int k = 0; k < NCLASS; k++)
				submit(g, c, (k + round) % NCLASS);
	sq_group_wait(g, SQ_TIME_FOREVER);
	sq_release(g);
}

static void
batch_fn(void *ctx)
{
	note(4);
	spin_ns(40 * 1000 * 1000);
}

static void
default_fn(void *ctx)
{
	note(2);
	if (!atomic_load(&sh->batch_done))
		atomic_fetch_add(&sh->default_before_batch, 1);
}

/* A background batch of 4 x 40 ms per worker; DEFAULT work queued once
 * it runs must not wait for it (at least 160 ms of batch). */
static void
scenario_batch(int width)
{
	sq_group_t batch = sq_group_create(), g = sq_group_create();
	sq_queue_t bg = sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0);
	for (int i = 0; i < 4 * width; i++)
		sq_group_async_f(batch, bg, NULL, batch_fn);
	usleep(20 * 1000);
	sq_queue_t def = sq_get_global_queue(SQ_QOS_CLASS_DEFAULT, 0);
	for (int i = 0; i < 8; i++) {
		atomic_fetch_add(&sh->default_total, 1);
		sq_group_async_f(g, def, NULL, default_fn);
		usleep(2 * 1000);
	}
	sq_group_wait(g, SQ_TIME_FOREVER);
	sq_group_wait(batch, SQ_TIME_FOREVER);
	atomic_store(&sh->batch_done, 1);
	sq_release(batch);
	sq_release(g);
}

static bool
run_one(int width, int max_threads, bool contention)
{
	memset(sh, 0, sizeof(*sh));
	pid_t busy[2] = { 0, 0 };
	if (contention) {
		busy[0] = sqt_start_busy_loop(120);
		busy[1] = sqt_start_busy_loop(120);
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(30);
		if (!sqt_drop_nice_privilege())
			_exit(77);
		sh->base_nice = sqt_thread_nice();
		for (int c = 0; c < NCLASS; c++) {
			int n = sh->base_nice + nice_offsets[c];
			sh->expected_nice[c] = n > 19 ? 19 : n;
		}
		char v[16];
		snprintf(v, sizeof(v), "%d", width);
		setenv("SQ_WORKERS", v, 1);
		if (max_threads > 0) {
			snprintf(v, sizeof(v), "%d", max_threads);
			setenv("SQ_MAX_THREADS", v, 1);
		}
		scenario_classes();
		scenario_batch(width);
		_exit(0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	sqt_stop_busy_loop(busy[0]);
	sqt_stop_busy_loop(busy[1]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return false;
	long wrong = 0;
	for (int c = 0; c < NCLASS; c++)
		wrong += atomic_load(&sh->wrong_nice[c]) +
				atomic_load(&sh->wrong_io[c]) +
				atomic_load(&sh->wrong_policy[c]);
	printf("SQ_WORKERS=%-2d cap %-3d%s ran %ld/%ld/%ld/%ld/%ld, wrong "
			"nice %ld/%ld/%ld/%ld/%ld io %ld/%ld/%ld/%ld/%ld, "
			"DEFAULT before the batch %ld of %ld\n", width,
			max_threads, contention ? " busy" : "     ",
			atomic_load(&sh->ran[0]), atomic_load(&sh->ran[1]),
			atomic_load(&sh->ran[2]), atomic_load(&sh->ran[3]),
			atomic_load(&sh->ran[4]),
			atomic_load(&sh->wrong_nice[0]),
			atomic_load(&sh->wrong_nice[1]),
			atomic_load(&sh->wrong_nice[2]),
			atomic_load(&sh->wrong_nice[3]),
			atomic_load(&sh->wrong_nice[4]),
			atomic_load(&sh->wrong_io[0]),
			atomic_load(&sh->wrong_io[1]),
			atomic_load(&sh->wrong_io[2]),
			atomic_load(&sh->wrong_io[3]),
			atomic_load(&sh->wrong_io[4]),
			atomic_load(&sh->default_before_batch),
			atomic_load(&sh->default_total));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* 8 rounds x 5 classes x 5 jobs, each queuing one more. */
	long total = 0;
	for (int c = 0; c < NCLASS; c++)
		total += atomic_load(&sh->ran[c]);
	CHECK_EQ(total, 8 * NCLASS * NCLASS * 2 + 4 * width + 8);
	CHECK_EQ(wrong, 0);
	/* The classes above DEFAULT on a short slice, where the kernel has
	 * custom slices (6.12 and later): every such job, and no other. */
	if (sqt_kernel_at_least(6, 12)) {
		CHECK_EQ(atomic_load(&sh->short_slice[0]),
				atomic_load(&sh->ran[0]));
		CHECK_EQ(atomic_load(&sh->short_slice[1]),
				atomic_load(&sh->ran[1]));
		for (int c = 2; c < NCLASS; c++)
			CHECK_EQ(atomic_load(&sh->short_slice[c]), 0);
	}
	CHECK_EQ(atomic_load(&sh->default_before_batch),
			atomic_load(&sh->default_total));
	return true;
}

int
main(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	/* SQT_ONLY=width,cap: that run alone (to replay one). */
	const char *only = getenv("SQT_ONLY");
	if (only != NULL) {
		const char *comma = strchr(only, ',');
		run_one(atoi(only), comma ? atoi(comma + 1) : 0, false);
		return sqt_finish("test_qos_unprivileged");
	}
	static const int widths[] = { 1, 2, 4, 8, 16 };
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
		if (!run_one(widths[i], 0, false)) {
			printf("test_qos_unprivileged: this machine cannot "
					"drop the right to lower nice values\n");
			CHECK(0);
			return sqt_finish("test_qos_unprivileged");
		}
	}
	run_one(4, 4, false);
	run_one(2, 2, false);
	run_one(1, 1, false);
	run_one(4, 0, true);
	return sqt_finish("test_qos_unprivileged");
}
