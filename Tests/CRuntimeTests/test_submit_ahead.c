/*
 * A thread that submits far ahead of the workers: the runtime holds it
 * back (it waits for the workers to give continuations back instead of
 * allocating more), and that back-pressure must never stall a program
 * whose workers wait for the submitter. Each case runs in a child
 * process with an alarm: a stall is a failure.
 *
 *   lock       the submitter holds a mutex every task takes, submits
 *              1M tasks, then lets the mutex go;
 *   posix sem  every task waits on a POSIX semaphore (a wait the runtime
 *              cannot see) that the submitter posts only after it has
 *              submitted all 1M;
 *   sq sem     the same with an sq_semaphore (a wait the runtime sees:
 *              it starts more workers, which block too);
 *   slow       every task sleeps 200 us until all are submitted: the
 *              workers give continuations back, but slowly (a wait that
 *              ends with a batch still counts against the bound);
 *   memory     1M short tasks (about 1 us) from one thread: the peak
 *              memory stays far below what 1M pending tasks take
 *              (48 MB), because the submitter does not run that far
 *              ahead (without the back-pressure it grows by about 40 MB
 *              on 2 CPUs).
 * In every case no task runs on the submitting thread, and every task
 * runs. The waits are bounded in total: submitting the 1M tasks while
 * every worker is blocked must take seconds at most, not a wait per
 * allocation (a bound per call alone would add over a minute).
 */
#define _GNU_SOURCE
#include "sqtest.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <sys/resource.h>

#define TASKS 1000000
/* Submitting TASKS while no worker moves: the runtime's waits add 50 ms
 * (200 ms at the very most); a loaded machine gets a wide margin. A wait
 * bounded per call only would add 50 ms per 64 tasks past the first
 * 32,768: over ten minutes (the alarm ends it). */
#define SUBMIT_LIMIT_NS (10ull * 1000000000ull)

static pthread_t submitter;
static atomic_long ran;
static atomic_long ran_on_submitter;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t posix_sem;
static sq_semaphore_t sq_sem;

static void
note_thread(void)
{
	if (pthread_equal(pthread_self(), submitter))
		atomic_fetch_add(&ran_on_submitter, 1);
	atomic_fetch_add(&ran, 1);
}

static void
task_lock(void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&lock);
	note_thread();
	pthread_mutex_unlock(&lock);
}

static void
task_posix_sem(void *ctx)
{
	(void)ctx;
	while (sem_wait(&posix_sem) != 0) {
	}
	note_thread();
}

static void
task_sq_sem(void *ctx)
{
	(void)ctx;
	sq_semaphore_wait(sq_sem, SQ_TIME_FOREVER);
	note_thread();
}

static void
task_empty(void *ctx)
{
	(void)ctx;
	note_thread();
}

/* About a microsecond: the submitter, ten times faster, gets far ahead. */
static void
task_short(void *ctx)
{
	(void)ctx;
	for (volatile int i = 0; i < 300; i++) {
	}
	note_thread();
}

/* 200 us while `slow` is set: the workers crawl (a batch of
 * continuations back every few milliseconds, each wait for one shorter
 * than a time-out), but they do move. */
static atomic_bool slow;

static void
task_slow(void *ctx)
{
	(void)ctx;
	if (atomic_load(&slow))
		usleep(200);
	note_thread();
}

enum scenario { LOCK, POSIX_SEM, SQ_SEM, SLOW, MEMORY };

static long
peak_rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* The child's whole run: submits TASKS the scenario's way, releases the
 * workers, waits for all. */
static void
scenario_run(enum scenario s)
{
	sq_queue_t q = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_group_t g = sq_group_create();
	sq_function_t task = s == LOCK ? task_lock : s == POSIX_SEM
			? task_posix_sem : s == SQ_SEM ? task_sq_sem : s == SLOW
			? task_slow : task_short;
	submitter = pthread_self();
	sem_init(&posix_sem, 0, 0);
	sq_sem = sq_semaphore_create(0);

	/* Warm: the workers exist and the first allocations are made. */
	for (int i = 0; i < 1000; i++)
		sq_group_async_f(g, q, NULL, task_empty);
	sq_group_wait(g, SQ_TIME_FOREVER);
	atomic_store(&ran, 0);
	long rss_before = peak_rss_kib();

	if (s == LOCK)
		pthread_mutex_lock(&lock);
	atomic_store(&slow, s == SLOW);
	uint64_t t0 = sqt_now_ns();
	for (long i = 0; i < TASKS; i++)
		sq_group_async_f(g, q, NULL, task);
	uint64_t submit_ns = sqt_now_ns() - t0;
	if (s == LOCK)
		pthread_mutex_unlock(&lock);
	atomic_store(&slow, false);
	for (long i = 0; s == POSIX_SEM && i < TASKS; i++)
		sem_post(&posix_sem);
	for (long i = 0; s == SQ_SEM && i < TASKS; i++)
		sq_semaphore_signal(sq_sem);
	sq_group_wait(g, SQ_TIME_FOREVER);
	long rss_after = peak_rss_kib();

	printf("  submitted %d in %.1f ms, peak RSS +%ld KiB\n", TASKS,
			(double)submit_ns / 1e6, rss_after - rss_before);
	CHECK(submit_ns < SUBMIT_LIMIT_NS);
	CHECK_EQ(atomic_load(&ran), TASKS);
	CHECK_EQ(atomic_load(&ran_on_submitter), 0);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
	/* 1M pending tasks would take 48 MB; held back, 1.5. (Sanitizers
	 * add memory of their own per allocation: not checked there.) */
	if (s == MEMORY)
		CHECK(rss_after - rss_before < 12 * 1024);
#endif
	sq_release(g);
	sq_release(sq_sem);
}

static void
scenario(const char *name, enum scenario s)
{
	printf("%s:\n", name);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		sqt_failed = 0; /* the parent's count came along with fork */
		alarm(120);
		scenario_run(s);
		fflush(NULL);
		_exit(sqt_failed ? 1 : 0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		printf("  child stopped (signal %d): a stall\n",
				WTERMSIG(status));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int
main(void)
{
	scenario("lock held by the submitter", LOCK);
	scenario("POSIX semaphore posted after submitting", POSIX_SEM);
	scenario("sq_semaphore signalled after submitting", SQ_SEM);
	scenario("slow tasks (200 us each while submitting)", SLOW);
	scenario("fan-out memory", MEMORY);
	return sqt_finish("test_submit_ahead");
}
