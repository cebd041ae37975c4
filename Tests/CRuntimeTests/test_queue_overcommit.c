/*
 * Overcommit global queues (sq_get_global_queue with SQ_QUEUE_OVERCOMMIT):
 * libdispatch's `overcommit` test, renamed, and what the flag means.
 *
 * libdispatch's test: 32 serial queues target the overcommit global queue;
 * each runs one task that counts itself and then spins for ever, except
 * the last to start, which ends the test. That needs 32 threads at once,
 * whatever the pool's width: each job queued on an overcommit queue gets a
 * worker of its own. (Here the tasks spin until the test is over, and the
 * run is a child process with an alarm: a stall is a failure.) Also at
 * SQ_WORKERS=1, and with a thread cap of 8, where 8 spin at once and the
 * rest run once they are let go (a refused thread is no failure).
 */
#define _GNU_SOURCE
#include "sqtest.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define QUEUES 32

struct shared {
	atomic_int started;
	atomic_int peak;     /* most tasks spinning at once */
	atomic_int running;
	atomic_int release;  /* the spinners may end */
	atomic_int finished;
};
static struct shared *sh;

static void
spinner(void *ctx)
{
	int n = atomic_fetch_add(&sh->started, 1) + 1;
	int r = atomic_fetch_add(&sh->running, 1) + 1;
	int p = atomic_load(&sh->peak);
	while (r > p && !atomic_compare_exchange_weak(&sh->peak, &p, r)) {
	}
	if (n != QUEUES)
		while (!atomic_load(&sh->release))
			sched_yield();
	atomic_fetch_sub(&sh->running, 1);
	atomic_fetch_add(&sh->finished, 1);
}

static void
child(int width, int cap)
{
	char v[16];
	snprintf(v, sizeof(v), "%d", width);
	setenv("SQ_WORKERS", v, 1);
	if (cap > 0) {
		snprintf(v, sizeof(v), "%d", cap);
		setenv("SQ_MAX_THREADS", v, 1);
	}
	sq_queue_t oc = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT,
			SQ_QUEUE_OVERCOMMIT);
	sq_queue_t q[QUEUES];
	for (int i = 0; i < QUEUES; i++) {
		char label[32];
		snprintf(label, sizeof(label), "overcommit.%d", i);
		q[i] = sq_queue_create(label, SQ_QUEUE_SERIAL);
		sq_set_target_queue(q[i], oc);
		sq_async_f(q[i], NULL, spinner);
	}
	if (cap > 0) {
		/* The cap holds: no more spinners than threads, then the rest
		 * once they are let go. */
		uint64_t until = sqt_now_ns() + 500 * 1000000ull;
		while (sqt_now_ns() < until)
			usleep(10 * 1000);
		atomic_store(&sh->release, 1);
	}
	uint64_t deadline = sqt_now_ns() + 20 * 1000000000ull;
	while (atomic_load(&sh->started) < QUEUES &&
			sqt_now_ns() < deadline)
		usleep(1000);
	atomic_store(&sh->release, 1);
	while (atomic_load(&sh->finished) < QUEUES && sqt_now_ns() < deadline)
		usleep(1000);
	for (int i = 0; i < QUEUES; i++)
		sq_release(q[i]);
	_exit(atomic_load(&sh->finished) == QUEUES ? 0 : 1);
}

static void
run(int width, int cap)
{
	memset(sh, 0, sizeof(*sh));
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(30);
		child(width, cap);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	printf("SQ_WORKERS=%d cap %d: %d of %d started, at most %d spinning "
			"at once\n", width, cap, atomic_load(&sh->started),
			QUEUES, atomic_load(&sh->peak));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(atomic_load(&sh->finished), QUEUES);
	if (cap == 0)
		CHECK_EQ(atomic_load(&sh->peak), QUEUES);
	else
		CHECK(atomic_load(&sh->peak) <= cap);
}

static void
test_queues(void)
{
	for (int c = 0; c < 5; c++) {
		static const intptr_t ids[] = {
			SQ_QOS_CLASS_USER_INTERACTIVE,
			SQ_QOS_CLASS_USER_INITIATED, SQ_QOS_CLASS_DEFAULT,
			SQ_QOS_CLASS_UTILITY, SQ_QOS_CLASS_BACKGROUND,
		};
		sq_queue_t plain = sq_get_global_queue(ids[c], 0);
		sq_queue_t oc = sq_get_global_queue(ids[c],
				SQ_QUEUE_OVERCOMMIT);
		CHECK(oc != NULL && oc != plain);
		CHECK(oc == sq_get_global_queue(ids[c], SQ_QUEUE_OVERCOMMIT));
		CHECK_EQ(sq_queue_get_qos_class(oc, NULL),
				sq_queue_get_qos_class(plain, NULL));
		const char *label = sq_queue_get_label(oc);
		CHECK(strstr(label, ".overcommit") != NULL);
	}
	CHECK(sq_get_global_queue(SQ_QUEUE_PRIORITY_HIGH, SQ_QUEUE_OVERCOMMIT)
			== sq_get_global_queue(SQ_QOS_CLASS_USER_INITIATED,
			SQ_QUEUE_OVERCOMMIT));
}

int
main(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	run(2, 0);
	run(1, 0);
	run(4, 8);
	test_queues();
	return sqt_finish("test_queue_overcommit");
}
