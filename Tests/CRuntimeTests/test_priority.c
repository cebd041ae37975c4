/*
 * Priority precedence across pool widths: libdispatch's `priority` test in
 * its two forms, with all five QoS classes.
 *
 * 64 CPU-bound blocks of about 1 ms are queued for each class; the run
 * stops once half of all blocks have finished. Work of a higher class must
 * go first:
 *   - libdispatch's checks: USER_INITIATED (HIGH) finishes at least as many
 *     blocks as UTILITY (LOW), BACKGROUND at most as many as DEFAULT;
 *   - ours, tighter: each class finishes at least as many as the class two
 *     below it, and UTILITY plus BACKGROUND finish at most
 *     `total / 8 + 4` (the aging share: one take in 16 starts with
 *     UTILITY, one in 64 with BACKGROUND; and a little slack), plus the
 *     width in the "target" form (blocks started before any higher one
 *     was queued).
 *
 * Forms: "global" submits to the global queues; "target" (libdispatch's
 * USE_SET_TARGET_QUEUE) submits to concurrent queues created suspended and
 * targeting each global queue, then resumes them lowest class first (the
 * concurrent queues forward their tasks to the roots from a worker).
 * "serial" makes every class a set of 8 serial queues on its global queue
 * (a queue's jobs reach the root one drain at a time).
 *
 * In the "global" and "serial" forms every worker is held by a spinning
 * gate task of the highest class while the global queues' blocks are
 * queued (the serial queues' go to them, suspended, before) and the
 * queues resumed, so that what runs first is the pool's choice and not
 * the order of submission (a chaos build submits slowly). The submitting
 * thread takes the gates' nice value meanwhile, or 16 of them would keep
 * it from a CPU past the alarm. The "target"
 * form keeps libdispatch's shape: the queues are resumed, lowest class
 * first, with the pool free, so the background queue's drainer forwards
 * its blocks first.
 *
 * Each run is a child process at SQ_WORKERS = 1, 2, 4, 8, 16 (SQT_PRIO_WIDTHS
 * overrides), and width 4 again beside two busy-loop processes; the whole
 * matrix twice, the second time without the right to lower nice values.
 * A hang is a failure (the child's alarm).
 */
#define _GNU_SOURCE
#include "sqtest.h"
#include "nice_helpers.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/prctl.h>

#define NCLASS 5
#define BLOCKS 64
#define TOTAL (NCLASS * BLOCKS / 2)
#define SPIN_NS 1000000L

static const char *const names[NCLASS] = {
	"BACKGROUND", "UTILITY", "DEFAULT", "USER_INITIATED",
	"USER_INTERACTIVE",
};
static const sq_qos_class_t classes[NCLASS] = {
	SQ_QOS_CLASS_BACKGROUND, SQ_QOS_CLASS_UTILITY, SQ_QOS_CLASS_DEFAULT,
	SQ_QOS_CLASS_USER_INITIATED, SQ_QOS_CLASS_USER_INTERACTIVE,
};

enum form { FORM_GLOBAL, FORM_TARGET, FORM_SERIAL };
static const char *const form_names[] = { "global", "target", "serial" };

struct result {
	atomic_long counts[NCLASS];
	atomic_long left;
	atomic_int done;
	atomic_int finished;
	atomic_int gates; /* gate tasks running */
	atomic_int go;    /* every block is queued: the gates open */
	atomic_int stuck; /* 1: the child waits for the parent's gdb; 2: done */
};

static struct result *res;

static uint64_t
thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
cpubusy(void *ctx)
{
	if (atomic_load(&res->done))
		return;
	uint64_t end = thread_cpu_ns() + SPIN_NS;
	while (thread_cpu_ns() < end)
		if (atomic_load_explicit(&res->done, memory_order_relaxed))
			return;
	long left = atomic_fetch_sub(&res->left, 1) - 1;
	if (left >= 0) {
		atomic_fetch_add(&res->counts[(intptr_t)ctx], 1);
		if (left == 0) {
			atomic_store(&res->done, 1);
			atomic_store(&res->finished, 1);
		}
	}
}

/* Holds a worker (spinning: runnable, so nobody compensates for it) until
 * every block is queued. */
static void
gate(void *ctx)
{
	atomic_fetch_add(&res->gates, 1);
	while (!atomic_load(&res->go))
		;
}

/* A child that has waited 45 s (its alarm is at 60) says what it waited
 * for; with SQT_PRIO_GDB set the parent then prints its threads' stacks
 * (from outside: a fork here would run the runtime's fork handlers).
 * Then the pool's snapshot, and exit 3. */
static void
child_stuck(const char *what)
{
	fprintf(stderr, "test_priority: child stuck waiting for %s: gates %d, "
			"go %d, left %ld\n", what, atomic_load(&res->gates),
			atomic_load(&res->go), atomic_load(&res->left));
	if (getenv("SQT_PRIO_GDB")) {
		atomic_store(&res->stuck, 1);
		for (int i = 0; i < 60000 && atomic_load(&res->stuck) == 1;
				i++)
			usleep(1000);
	}
	char *text = sq_snapshot_text();
	if (text)
		fputs(text, stderr);
	_exit(3);
}

static void
submit_blocks(sq_queue_t q[NCLASS][8], int nq)
{
	for (int i = 0; i < NCLASS; i++)
		for (int b = 0; b < BLOCKS; b++)
			sq_async_f(q[i][b % nq], (void *)(intptr_t)i, cpubusy);
}

static void
child_run(enum form form, int width)
{
	sq_queue_t q[NCLASS][8];
	int nq = form == FORM_SERIAL ? 8 : 1;
	atomic_store(&res->left, TOTAL);
	/* The queues' blocks first, while they are suspended; then every
	 * worker is held by a gate of the highest class while the global
	 * queues' blocks are queued and the queues resumed: what runs first
	 * is then the pool's choice, not the order of submission (a chaos
	 * build submits slowly). */
	for (int i = 0; i < NCLASS; i++) {
		sq_queue_t root = sq_get_global_queue(classes[i], 0);
		for (int k = 0; k < nq; k++) {
			if (form == FORM_GLOBAL) {
				q[i][k] = root;
				continue;
			}
			q[i][k] = sq_queue_create(names[i], form == FORM_TARGET
					? SQ_QUEUE_CONCURRENT : SQ_QUEUE_SERIAL);
			sq_suspend(q[i][k]);
			sq_set_target_queue(q[i][k], root);
		}
	}
	if (form != FORM_GLOBAL)
		submit_blocks(q, nq);
	sq_queue_t top = sq_get_global_queue(SQ_QOS_CLASS_USER_INTERACTIVE, 0);
	int gates = form == FORM_TARGET ? 0 : width;
	for (int i = 0; i < gates; i++)
		sq_async_f(top, NULL, gate);
	uint64_t deadline = sqt_now_ns() + 45000000000ull;
	while (atomic_load(&res->gates) < gates) {
		if (sqt_now_ns() > deadline)
			child_stuck("the gates to start");
		usleep(1000);
	}
	/* The gates spin at the highest class's nice value (-20 where the
	 * process may lower it): this thread, at the program's, would get
	 * a CPU for about a millisecond a second beside 16 of them, and its
	 * submissions would take longer than the alarm allows. It takes
	 * their value while they hold the workers (no worker is started
	 * meanwhile, so none inherits it). */
	int nice = getpriority(PRIO_PROCESS, 0);
	if (gates > 0)
		(void)setpriority(PRIO_PROCESS, 0, -20);
	if (form == FORM_GLOBAL)
		submit_blocks(q, nq);
	else
		for (int i = 0; i < NCLASS; i++)
			for (int k = 0; k < nq; k++) {
				sq_resume(q[i][k]);
				sq_release(q[i][k]);
			}
	/* The queues' resumptions reach the pool (lowest class first, as
	 * in libdispatch's test) before the gates open. */
	usleep(20000);
	(void)setpriority(PRIO_PROCESS, 0, nice);
	atomic_store(&res->go, 1);
	while (!atomic_load(&res->finished)) {
		if (sqt_now_ns() > deadline)
			child_stuck("the blocks to run");
		usleep(1000);
	}
	_exit(0);
}

static void
run_one(enum form form, int width, bool contention, bool unprivileged)
{
	memset(res, 0, sizeof(*res));
	pid_t busy[2] = { 0, 0 };
	if (contention) {
		busy[0] = sqt_start_busy_loop(120);
		busy[1] = sqt_start_busy_loop(120);
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		if (unprivileged && !sqt_drop_nice_privilege())
			_exit(4);
		char w[16];
		snprintf(w, sizeof(w), "%d", width);
		setenv("SQ_WORKERS", w, 1);
		child_run(form, width);
	}
	int status = 0;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (atomic_load(&res->stuck) == 1) {
			char cmd[128];
			snprintf(cmd, sizeof(cmd), "gdb -p %d -batch -ex "
					"'thread apply all bt' 1>&2", (int)pid);
			if (system(cmd) != 0)
				fprintf(stderr, "test_priority: gdb failed\n");
			atomic_store(&res->stuck, 2);
		}
		usleep(10000);
	}
	sqt_stop_busy_loop(busy[0]);
	sqt_stop_busy_loop(busy[1]);

	long c[NCLASS], sum = 0;
	for (int i = 0; i < NCLASS; i++)
		sum += c[i] = atomic_load(&res->counts[i]);
	/* The target form resumes its queues with the pool free: up to
	 * `width` lower blocks may start before any higher one is queued. */
	long low = c[0] + c[1], bound = TOTAL / 8 + 4 +
			(form == FORM_TARGET ? width : 0);
	bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
			sum == TOTAL && c[3] >= c[1] && c[0] <= c[2] &&
			c[4] >= c[2] && c[2] >= c[0] && low <= bound;
	printf("%-6s SQ_WORKERS=%-2d%s%s BG %2ld UT %2ld DEF %2ld UIN %2ld "
			"UI %2ld (low %ld, bound %ld)%s\n", form_names[form],
			width, contention ? " busy" : "     ",
			unprivileged ? " unprivileged" : "", c[0], c[1], c[2],
			c[3], c[4], low, bound, ok ? "" : "  FAIL");
	if (!WIFEXITED(status))
		printf("  the child ended by signal %d\n", WIFSIGNALED(status)
				? WTERMSIG(status) : -1);
	else if (WEXITSTATUS(status) != 0)
		printf("  the child exited %d\n", WEXITSTATUS(status));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(sum, TOTAL);
	CHECK(c[3] >= c[1]); /* libdispatch: high priority precedence */
	CHECK(c[0] <= c[2]); /* libdispatch: background priority precedence */
	CHECK(c[4] >= c[2]);
	CHECK(low <= bound);
}

int
main(void)
{
	res = mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED)
		return 2;
	int widths[16], nw = 0;
	const char *env = getenv("SQT_PRIO_WIDTHS");
	for (const char *p = env ? env : "1,2,4,8,16"; *p && nw < 16;) {
		widths[nw++] = atoi(p);
		p = strchr(p, ',');
		if (!p)
			break;
		p++;
	}
	/* Privileged (this machine's tests run as root) and not: a process
	 * that may not lower a thread's nice value binds workers to the
	 * lower classes (pool_class.c), which must not change the order. */
	for (int u = 0; u < 2; u++) {
		for (int f = FORM_GLOBAL; f <= FORM_SERIAL; f++) {
			for (int i = 0; i < nw; i++)
				run_one((enum form)f, widths[i], false, u);
			run_one((enum form)f, 4, true, u);
		}
	}
	return sqt_finish("test_priority");
}
