/*
 * Hops between serial queues stay on the worker (the next-job slot,
 * docs/ARCHITECTURE.md "The worker pool"), in a child process per pool
 * width (SQ_WORKERS = 1, 2):
 *
 *   - a ping-pong of 20,000 hops between two serial queues: at least 90%
 *     of the hops are taken from the slot by the worker that made them
 *     (about all of them on a quiet machine), and the pool wakes no worker
 *     per hop;
 *   - a chain of hops that runs until a task submitted to a global queue
 *     stops it: the chain does not starve that task (at width 1 the one
 *     worker must take it between hops: past 32 slot jobs in a row, queued
 *     work goes first), for each of the four priorities;
 *   - an sq_after handler that hops to an idle serial queue: the hop runs on
 *     the handler's own thread (the precise timers' runner hands its
 *     worker over to it) in most of 50 tries.
 */
#include "queue_helpers.h"

#include <limits.h>
#include <spawn.h>

extern char **environ;

/* Hidden in the shared library, linked statically here. */
void _sq_debug_pool_handoffs(uint64_t *handoffs, uint64_t *guard_takes,
		uint64_t *guard_naps);

/* ---- ping-pong ------------------------------------------------------------- */

static struct {
	sq_queue_t a, b;
	atomic_long left;
	atomic_bool stop;
	bool until_stopped;
	sem_t done;
} pp;

static void hop_b(void *arg);

static void
hop_a(void *arg)
{
	long left = atomic_fetch_sub(&pp.left, 1) - 1;
	if (left <= 0 || (pp.until_stopped && atomic_load(&pp.stop))) {
		sem_post(&pp.done);
		return;
	}
	sq_async_f(pp.b, NULL, hop_b);
}

static void
hop_b(void *arg)
{
	long left = atomic_fetch_sub(&pp.left, 1) - 1;
	if (left <= 0 || (pp.until_stopped && atomic_load(&pp.stop))) {
		sem_post(&pp.done);
		return;
	}
	sq_async_f(pp.a, NULL, hop_a);
}

static void
test_hops_stay(void)
{
	/* Warm up: the pool's workers exist and have settled. */
	atomic_store(&pp.left, 1000);
	pp.until_stopped = false;
	sq_async_f(pp.a, NULL, hop_a);
	CHECK(sqt_sem_wait_ms(&pp.done, 10000));

	uint64_t h0, t0, n0, h1, t1, n1;
	sq_pool_stats_t s0, s1;
	sq_pool_stats(&s0);
	_sq_debug_pool_handoffs(&h0, &t0, &n0);
	atomic_store(&pp.left, 20000);
	sq_async_f(pp.a, NULL, hop_a);
	CHECK(sqt_sem_wait_ms(&pp.done, 20000));
	_sq_debug_pool_handoffs(&h1, &t1, &n1);
	sq_pool_stats(&s1);
	uint64_t handoffs = h1 - h0, wakeups = s1.wakeups - s0.wakeups;
	printf("  20,000 hops: %llu taken from the slot by their worker, %llu "
			"by the guard; %llu wake-ups\n",
			(unsigned long long)handoffs,
			(unsigned long long)(t1 - t0),
			(unsigned long long)wakeups);
	CHECK(handoffs >= 18000);
	CHECK(wakeups <= 2000);
}

/* ---- the chain does not starve other work ---------------------------------- */

static atomic_int stopper_ran;

static void
stopper(void *arg)
{
	atomic_fetch_add(&stopper_ran, 1);
	atomic_store(&pp.stop, true);
}

static void
test_no_starvation(void)
{
	static const long prios[] = {
		SQ_QUEUE_PRIORITY_HIGH, SQ_QUEUE_PRIORITY_DEFAULT,
		SQ_QUEUE_PRIORITY_LOW, SQ_QUEUE_PRIORITY_BACKGROUND,
	};
	for (int i = 0; i < 4; i++) {
		atomic_store(&pp.left, LONG_MAX);
		atomic_store(&pp.stop, false);
		atomic_store(&stopper_ran, 0);
		pp.until_stopped = true;
		sq_async_f(pp.a, NULL, hop_a);
		/* The chain is going: 20 ms and 100 hops (a loaded machine
		 * can take longer to give its worker a CPU). */
		sqt_sleep_ms(20);
		for (int ms = 0; ms < 10000 && LONG_MAX -
				atomic_load(&pp.left) < 100; ms++)
			sqt_sleep_ms(1);
		long before = LONG_MAX - atomic_load(&pp.left);
		sq_async_f(sq_get_global_queue(prios[i], 0), NULL, stopper);
		bool ended = sqt_sem_wait_ms(&pp.done, 10000);
		CHECK(ended);
		CHECK_EQ(atomic_load(&stopper_ran), 1);
		long hops = LONG_MAX - atomic_load(&pp.left);
		printf("  priority %ld: stopped after %ld hops (%ld before the "
				"stopper was submitted)\n", prios[i], hops,
				before);
		CHECK(before > 0);
		if (!ended)
			break;
	}
	pp.until_stopped = false;
}

/* ---- an after's handler hops ------------------------------------------------ */

static struct {
	pid_t handler_tid, hop_tid;
	sem_t done;
} ah;

static void
after_hop(void *arg)
{
	ah.hop_tid = gettid();
	sem_post(&ah.done);
}

static void
after_handler(void *arg)
{
	ah.handler_tid = gettid();
	sq_async_f(pp.b, NULL, after_hop);
}

static void
test_after_handler_hop(void)
{
	int same = 0, tries = 50;
	sem_init(&ah.done, 0, 0);
	for (int i = 0; i < tries; i++) {
		sq_after_f(sq_time(SQ_TIME_NOW, 2000000), pp.a, NULL,
				after_handler);
		CHECK(sqt_sem_wait_ms(&ah.done, 10000));
		same += ah.handler_tid == ah.hop_tid;
		sqt_sleep_ms(3);
	}
	printf("  after handler -> hop on the same thread: %d of %d\n", same,
			tries);
	CHECK(same >= tries * 4 / 5);
	sem_destroy(&ah.done);
}

/* ---- child and parent ------------------------------------------------------- */

static int
run_child(void)
{
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	printf("width %u:\n", st.width);
	pp.a = sq_queue_create("handoff.a", NULL);
	pp.b = sq_queue_create("handoff.b", NULL);
	sem_init(&pp.done, 0, 0);
	/* Starvation first: at width 1 nothing has blocked yet, so the
	 * monitor has added no second worker that could hide it. */
	test_no_starvation();
	test_hops_stay();
	test_after_handler_hop();
	fflush(stdout);
	_exit(sqt_failed ? 1 : 0);
}

static bool
run_width(int width)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return false;
	self[n] = '\0';
	char w[16];
	snprintf(w, sizeof(w), "%d", width);
	setenv("SQT_HANDOFF_CHILD", "1", 1);
	setenv("SQ_WORKERS", w, 1);
	char *argv[] = { self, NULL };
	pid_t pid;
	if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
		return false;
	int status = 0;
	uint64_t deadline = sqt_now_ns() + 300ull * 1000000000ull;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (sqt_now_ns() > deadline) {
			fprintf(stderr, "width %d: hung, killed\n", width);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return false;
		}
		sqt_sleep_ms(20);
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int
main(void)
{
	if (getenv("SQT_HANDOFF_CHILD"))
		return run_child();
	for (int width = 1; width <= 2; width++) {
		bool ok = run_width(width);
		if (!ok)
			fprintf(stderr, "FAIL width %d\n", width);
		CHECK(ok);
	}
	return sqt_finish("test_pool_handoff");
}
