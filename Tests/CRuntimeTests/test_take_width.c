/*
 * Taking within the width: a worker starts a UTILITY or BACKGROUND job
 * only while fewer than `width` other workers, not blocked, run jobs of
 * its class or a higher one. The checker: a BACKGROUND batch saturates the pool while
 * USER_INITIATED requests keep arriving, each of which may start a worker
 * beyond the width ("room for a higher class"); the batch must not run
 * on more threads than the width, and every request and batch job must
 * finish. The counts are read without a lock, so workers that look
 * at the same moment may each take one: the bound allows one more, and a
 * quarter of the width more at larger widths. Without the rule a worker
 * started for a request went on with batch jobs, and the batch ran on
 * 4 x width threads, every batch job at once.
 *
 * Then the rule's escape: every worker of the width blocks where the
 * runtime cannot see it (a POSIX semaphore) until a job queued behind
 * them posts it; the blocked ones stop counting once seen (by a worker
 * that parks, or the monitor), so the job runs, with the safety net off.
 *
 * Last, no class starves: DEFAULT jobs keep every worker of the width
 * busy, resubmitting themselves, and a UTILITY and a BACKGROUND job, each
 * of a class nobody runs, must start while they go on (within 4 s; the
 * hogs go on for 8): aging's turns go to a class that nobody runs, closed
 * or not, also from a worker about to take from its own ring.
 *
 * And what waits behind a blocked worker waits for higher work like any
 * job: a BACKGROUND job queues 24 BACKGROUND children on its worker's
 * ring and 64 UTILITY jobs (2 ms each) on their root queue, then blocks
 * in a semaphore wait the runtime sees, with idle workers beyond the
 * width at hand. The children may go to other workers (the blocked
 * worker's ring is theirs to take, beyond the width), but not while the
 * UTILITY jobs wait: at most 4 children (racy hints, aging's turns)
 * start while more UTILITY jobs have not started than the pool has
 * threads (each may have taken one and not started it yet). Without the
 * class check, idle workers took the children at once, ahead of the
 * UTILITY jobs held at the width.
 *
 * Each width runs in a child process with an alarm: a stall is a failure;
 * width 4 runs again beside two busy-loop processes.
 * SQT_ONLY=<width> runs one width.
 */
#define _GNU_SOURCE
#include "sqtest.h"
#include "queue_helpers.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

struct shared {
	atomic_int batch_running;
	atomic_int batch_peak;
	atomic_int batch_done;
	atomic_int batch_stop;
	atomic_int batch_live; /* batch jobs queued or running */
	atomic_int requests_done;
	atomic_int blocked_done;
	atomic_int hogs_stop;
	atomic_int hogs_live;
	atomic_llong low_started[2]; /* ns from submission; 0: not yet */
	sem_t gate;
	int failures;
};
static struct shared *sh;
static sq_queue_t batch_q;

static void
spin_ns(uint64_t ns)
{
	uint64_t end = sqt_now_ns() + ns;
	while (sqt_now_ns() < end) {
	}
}

static void
batch_job(void *ctx)
{
	int r = atomic_fetch_add(&sh->batch_running, 1) + 1;
	int p = atomic_load(&sh->batch_peak);
	while (r > p && !atomic_compare_exchange_weak(&sh->batch_peak, &p, r)) {
	}
	spin_ns(3 * NSEC_PER_MSEC);
	atomic_fetch_sub(&sh->batch_running, 1);
	atomic_fetch_add(&sh->batch_done, 1);
	if (!atomic_load(&sh->batch_stop))
		sq_async_f(batch_q, NULL, batch_job); /* resubmitted */
	else
		atomic_fetch_sub(&sh->batch_live, 1);
}

static void
request(void *ctx)
{
	spin_ns(50 * NSEC_PER_USEC);
	atomic_fetch_add(&sh->requests_done, 1);
}

static void
blocked_job(void *ctx)
{
	sem_wait(&sh->gate);
	atomic_fetch_add(&sh->blocked_done, 1);
}

static sq_queue_t hog_q;
static uint64_t low_submitted;

static void
hog_job(void *ctx)
{
	spin_ns(5 * NSEC_PER_MSEC);
	if (!atomic_load(&sh->hogs_stop))
		sq_async_f(hog_q, NULL, hog_job);
	else
		atomic_fetch_sub(&sh->hogs_live, 1);
}

static void
low_job(void *ctx)
{
	int i = (int)(intptr_t)ctx;
	long long waited = (long long)(sqt_now_ns() - low_submitted);
	atomic_store(&sh->low_started[i], waited > 0 ? waited : 1);
}

static void
opener(void *ctx)
{
	int n = (int)(intptr_t)ctx;
	for (int i = 0; i < n; i++)
		sem_post(&sh->gate);
}

/* What waits behind a blocked worker: each child notes how many UTILITY
 * jobs had not started yet when it started. */
#define BEHIND_KIDS 24
#define BEHIND_UTIL 64
static atomic_int behind_util_started, behind_kids_done, behind_let_go;
static int behind_unstarted[BEHIND_KIDS];
static sq_semaphore_t behind_sem;

static void
behind_util(void *ctx)
{
	atomic_fetch_add(&behind_util_started, 1);
	spin_ns(2 * NSEC_PER_MSEC);
}

static void
behind_kid(void *ctx)
{
	behind_unstarted[(intptr_t)ctx] = BEHIND_UTIL -
			atomic_load(&behind_util_started);
	atomic_fetch_add(&behind_kids_done, 1);
}

static void
behind_blocker(void *ctx)
{
	sq_queue_t util = sq_get_global_queue(SQ_QOS_CLASS_UTILITY, 0);
	sq_queue_t bg = sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0);
	for (intptr_t i = 0; i < BEHIND_UTIL; i++)
		sq_async_f(util, NULL, behind_util);
	for (intptr_t i = 0; i < BEHIND_KIDS; i++)
		sq_async_f(bg, (void *)i, behind_kid); /* this worker's ring */
	sq_semaphore_wait(behind_sem, SQ_TIME_FOREVER);
	atomic_store(&behind_let_go, 1);
}

static void
idle_maker(void *ctx)
{
	sqt_sleep_us(20000);
}

static void
child(int width)
{
	sqt_failed = 0; /* the parent's count came along with fork */
	char v[16];
	snprintf(v, sizeof(v), "%d", width);
	setenv("SQ_WORKERS", v, 1);
	setenv("SQ_MONITOR_NET", "0", 1);

	/* The batch and the requests. */
	batch_q = sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0);
	sq_queue_t req_q = sq_get_global_queue(SQ_QOS_CLASS_USER_INITIATED, 0);
	int jobs = 4 * width;
	atomic_store(&sh->batch_live, jobs);
	for (int i = 0; i < jobs; i++)
		sq_async_f(batch_q, NULL, batch_job);
	int requests = 200;
	for (int i = 0; i < requests; i++) {
		sq_async_f(req_q, NULL, request);
		sqt_sleep_us(1000);
	}
	atomic_store(&sh->batch_stop, 1);
	uint64_t t0 = sqt_now_ns();
	while ((atomic_load(&sh->requests_done) < requests ||
			atomic_load(&sh->batch_live) > 0) &&
			sqt_now_ns() - t0 < 20 * NSEC_PER_SEC)
		sqt_sleep_us(1000);
	printf("width %d: batch peak %d threads, %d batch jobs, "
			"%d requests\n", width, atomic_load(&sh->batch_peak),
			atomic_load(&sh->batch_done),
			atomic_load(&sh->requests_done));
	CHECK_EQ(atomic_load(&sh->requests_done), requests);
	CHECK_EQ(atomic_load(&sh->batch_live), 0);
	CHECK(atomic_load(&sh->batch_done) >= jobs);
	CHECK(atomic_load(&sh->batch_peak) <= width + 1 + width / 4);

	/* Every worker of the width blocked out of the runtime's sight; the
	 * job that lets them go is queued behind them. BACKGROUND keeps to
	 * the width always, DEFAULT while higher work is in play. */
	static const struct {
		sq_qos_class_t qos;
		const char *name;
	} classes[] = {
		{ SQ_QOS_CLASS_DEFAULT, "default" },
		{ SQ_QOS_CLASS_BACKGROUND, "background" },
	};
	sem_init(&sh->gate, 1, 0);
	for (int c = 0; c < 2; c++) {
		atomic_store(&sh->blocked_done, 0);
		sq_queue_t q = sq_get_global_queue(classes[c].qos, 0);
		for (int i = 0; i < width; i++)
			sq_async_f(q, NULL, blocked_job);
		sqt_sleep_us(20000); /* they have started and block */
		sq_async_f(q, (void *)(intptr_t)width, opener);
		t0 = sqt_now_ns();
		while (atomic_load(&sh->blocked_done) < width &&
				sqt_now_ns() - t0 < 20 * NSEC_PER_SEC)
			sqt_sleep_us(1000);
		printf("width %d: %d blocked %s jobs let go in %.1f ms\n",
				width, atomic_load(&sh->blocked_done),
				classes[c].name, sqt_ms_since(t0));
		CHECK_EQ(atomic_load(&sh->blocked_done), width);
	}

	/* No class starves beside DEFAULT work on every worker. */
	hog_q = sq_get_global_queue(SQ_QOS_CLASS_DEFAULT, 0);
	atomic_store(&sh->hogs_live, 2 * width);
	for (int i = 0; i < 2 * width; i++)
		sq_async_f(hog_q, NULL, hog_job);
	sqt_sleep_us(50000);
	low_submitted = sqt_now_ns();
	sq_async_f(sq_get_global_queue(SQ_QOS_CLASS_UTILITY, 0),
			(void *)(intptr_t)0, low_job);
	sq_async_f(sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0),
			(void *)(intptr_t)1, low_job);
	t0 = sqt_now_ns();
	while ((atomic_load(&sh->low_started[0]) == 0 ||
			atomic_load(&sh->low_started[1]) == 0) &&
			sqt_now_ns() - t0 < 8 * NSEC_PER_SEC)
		sqt_sleep_us(1000);
	atomic_store(&sh->hogs_stop, 1);
	long long ut = atomic_load(&sh->low_started[0]);
	long long bg = atomic_load(&sh->low_started[1]);
	printf("width %d: beside DEFAULT on every worker, utility started "
			"after %.1f ms, background after %.1f ms\n", width,
			ut ? ut / 1e6 : -1.0, bg ? bg / 1e6 : -1.0);
	CHECK(ut > 0 && ut < 4 * (long long)NSEC_PER_SEC);
	CHECK(bg > 0 && bg < 4 * (long long)NSEC_PER_SEC);
	t0 = sqt_now_ns();
	while (atomic_load(&sh->hogs_live) > 0 &&
			sqt_now_ns() - t0 < 20 * NSEC_PER_SEC)
		sqt_sleep_us(1000);
	CHECK_EQ(atomic_load(&sh->hogs_live), 0);

	/* What waits behind a blocked worker waits for higher work. Idle
	 * workers first: overcommit jobs get a thread each. */
	sq_queue_t oc = sq_get_global_queue(SQ_QOS_CLASS_DEFAULT,
			SQ_QUEUE_OVERCOMMIT);
	for (int i = 0; i < width + 4; i++)
		sq_async_f(oc, NULL, idle_maker);
	sqt_sleep_us(60000);
	behind_sem = sq_semaphore_create(0);
	sq_async_f(sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0), NULL,
			behind_blocker);
	t0 = sqt_now_ns();
	while (atomic_load(&behind_util_started) < BEHIND_UTIL &&
			sqt_now_ns() - t0 < 20 * NSEC_PER_SEC)
		sqt_sleep_us(1000);
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	sqt_sleep_us(5000);
	sq_semaphore_signal(behind_sem);
	while ((atomic_load(&behind_kids_done) < BEHIND_KIDS ||
			!atomic_load(&behind_let_go)) &&
			sqt_now_ns() - t0 < 20 * NSEC_PER_SEC)
		sqt_sleep_us(1000);
	CHECK(atomic_load(&behind_let_go));
	CHECK_EQ(atomic_load(&behind_util_started), BEHIND_UTIL);
	CHECK_EQ(atomic_load(&behind_kids_done), BEHIND_KIDS);
	/* A thread may have taken a UTILITY job and not started it yet
	 * (preempted in between): one per live thread is not early. */
	int early = 0, most = 0;
	for (int i = 0; i < BEHIND_KIDS; i++) {
		early += behind_unstarted[i] > (int)st.live;
		if (behind_unstarted[i] > most)
			most = behind_unstarted[i];
	}
	printf("width %d: behind a blocked worker, %d of %d background "
			"jobs started while more utility jobs waited than the "
			"%u threads hold (at most %d of %d waited)\n", width,
			early, BEHIND_KIDS, st.live, most, BEHIND_UTIL);
	CHECK(early <= 4);
	sq_release(behind_sem);
	sh->failures = sqt_failed;
	fflush(stdout);
	_exit(0);
}

static void
run_width(int width)
{
	memset(sh, 0, sizeof(*sh));
	sh->failures = -1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(60);
		child(width);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status))
		printf("width %d: child stopped (signal %d): a stall\n", width,
				WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	CHECK_EQ(sh->failures, 0);
}

int
main(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	const char *only = getenv("SQT_ONLY");
	static const int widths[] = { 1, 2, 4, 8 };
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
		if (only == NULL || atoi(only) == widths[i])
			run_width(widths[i]);
	/* Width 4 again beside two busy loops: preemption at any point. */
	if (only == NULL) {
		pid_t a = sqt_start_busy_loop(60), b = sqt_start_busy_loop(60);
		printf("beside two busy loops:\n");
		run_width(4);
		sqt_stop_busy_loop(a);
		sqt_stop_busy_loop(b);
	}
	return sqt_finish("test_take_width");
}
