/*
 * The main queue: nothing runs until the main thread drains it; tasks run on
 * the main thread, in FIFO order; the eventfd hook, the non-blocking drain,
 * run-until (also woken by a worker's job or sq_main_queue_wakeup for a
 * condition no main-queue task changes); sq_main() in a child process that
 * ends with exit(0) from a task; the calls the main queue ignores (suspend,
 * resume, set_context, retain, release); async to the main queue with a
 * context it frees; sync onto the main queue from another thread; the main
 * queue is the current queue inside its tasks. After libdispatch's api test
 * (async_f to main + dispatch_main).
 *
 * Run as `test_queue_main sq-main-child` it is the child of the sq_main test.
 */
#include "queue_helpers.h"

#include <poll.h>

#define WAIT_MS 10000
#define CHILD_ARG "sq-main-child"

/* ---- a log of main-queue tasks --------------------------------------------- */

static struct {
	int order[64];
	int n;
	int off_main;       /* tasks that ran off the main thread */
	int not_current;    /* tasks where the current queue was not main */
} mlog;

static void
main_task(void *arg)
{
	if (!sqt_on_main_thread())
		mlog.off_main++;
	if (sq_get_current_queue() != sq_get_main_queue())
		mlog.not_current++;
	if (mlog.n < 64)
		mlog.order[mlog.n++] = (int)(intptr_t)arg;
}

static void
reset_log(void)
{
	memset(&mlog, 0, sizeof(mlog));
}

static bool
log_in_order(int expected)
{
	if (mlog.n != expected)
		return false;
	for (int i = 0; i < mlog.n; i++)
		if (mlog.order[i] != i)
			return false;
	return true;
}

static bool
fd_readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* ---- nothing runs without a drain; the fd; the drain ---------------------- */

static void *
submit_from_thread(void *arg)
{
	sq_async_f(sq_get_main_queue(), arg, main_task);
	return NULL;
}

static void
test_not_drained_then_drain(void)
{
	reset_log();
	sq_queue_t mq = sq_get_main_queue();
	int fd = sq_main_queue_fd();
	CHECK(fd >= 0);
	CHECK(!fd_readable(fd));

	sq_async_f(mq, (void *)0, main_task);
	pthread_t t;
	pthread_create(&t, NULL, submit_from_thread, (void *)1);
	pthread_join(t, NULL);
	sq_async_f(mq, (void *)2, main_task);

	sqt_sleep_ms(300); /* not draining: nothing may run */
	CHECK_EQ(mlog.n, 0);
	CHECK(fd_readable(fd));
	CHECK(sq_main_queue_fd() == fd);

	size_t ran = sq_main_queue_drain();
	CHECK_EQ(ran, 3);
	CHECK(log_in_order(3));
	CHECK_EQ(mlog.off_main, 0);
	CHECK_EQ(mlog.not_current, 0);
	CHECK(!fd_readable(fd));
	CHECK_EQ(sq_main_queue_drain(), 0);

	/* Ready again for the next task. */
	sq_async_f(mq, (void *)3, main_task);
	CHECK(fd_readable(fd));
	CHECK_EQ(sq_main_queue_drain(), 1);
	CHECK(!fd_readable(fd));
	CHECK_EQ(mlog.n, 4);
}

/* ---- run_until ------------------------------------------------------------- */

static atomic_int submitted;

static void
slow_submitter(void *arg)
{
	int count = (int)(intptr_t)arg;
	for (int i = 0; i < count; i++) {
		sqt_sleep_ms(5);
		sq_async_f(sq_get_main_queue(), (void *)(intptr_t)i, main_task);
		atomic_fetch_add(&submitted, 1);
	}
}

static bool
log_has(void *ctx)
{
	return mlog.n >= (int)(intptr_t)ctx;
}

static bool
never(void *ctx)
{
	return false;
}

static void
test_run_until(void)
{
	/* Tasks arriving from a worker over time; the condition ends it. */
	reset_log();
	sq_async_f(sq_get_global_queue(0, 0), (void *)(intptr_t)10,
			slow_submitter);
	bool ok = sq_main_queue_run_until(
			sq_time(SQ_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC),
			log_has, (void *)(intptr_t)10);
	CHECK(ok);
	CHECK(log_in_order(10));
	CHECK_EQ(mlog.off_main, 0);
	CHECK_EQ(mlog.not_current, 0);

	/* Already true at the start: returns at once. */
	uint64_t start = sqt_now_ns();
	CHECK(sq_main_queue_run_until(
			sq_time(SQ_TIME_NOW, 5 * (int64_t)NSEC_PER_SEC),
			log_has, (void *)(intptr_t)1));
	CHECK(sqt_ms_since(start) < 1000.0);

	/* Never true: returns false at the deadline, not before. */
	start = sqt_now_ns();
	CHECK(!sq_main_queue_run_until(
			sq_time(SQ_TIME_NOW, 100 * (int64_t)NSEC_PER_MSEC),
			never, NULL));
	double ms = sqt_ms_since(start);
	CHECK(ms >= 95.0);
	CHECK(ms < 5000.0);

	/* NULL condition: runs tasks until the deadline. */
	reset_log();
	atomic_store(&submitted, 0);
	sq_async_f(sq_get_global_queue(0, 0), (void *)(intptr_t)5,
			slow_submitter);
	CHECK(sqt_wait_int(&submitted, 5, WAIT_MS));
	start = sqt_now_ns();
	CHECK(!sq_main_queue_run_until(
			sq_time(SQ_TIME_NOW, 100 * (int64_t)NSEC_PER_MSEC),
			NULL, NULL));
	CHECK(sqt_ms_since(start) >= 95.0);
	CHECK(log_in_order(5));
}

/* ---- run_until wakes for a condition made true elsewhere --------------------
 *
 * Nothing is sent to the main queue: the condition is made true by a job on
 * a worker (the runner is woken when that job returns) or by a thread of
 * our own that calls sq_main_queue_wakeup(). Many rounds, with the flag
 * set at varying moments relative to the runner's look. A lost wake-up
 * shows as a round that lasts until its poll times out at the 5 s
 * deadline (it then sees the flag at its last look).
 */

#define WAKE_ROUNDS 300

static atomic_int wake_flag;

static bool
wake_flag_set(void *ctx)
{
	return atomic_load(&wake_flag) == 1;
}

static void
set_flag_later(void *arg)
{
	/* 0-150 us: before, during and after the runner's first look. */
	uint64_t until = sqt_now_ns() + (uint64_t)(intptr_t)arg;
	while (sqt_now_ns() < until)
		;
	atomic_store_explicit(&wake_flag, 1, memory_order_relaxed);
}

static void *
thread_sets_flag(void *arg)
{
	set_flag_later(arg);
	sq_main_queue_wakeup();
	return NULL;
}

/* One round: true, and well before the 5 s deadline. */
static bool
wake_round(void)
{
	uint64_t start = sqt_now_ns();
	bool met = sq_main_queue_run_until(
			sq_time(SQ_TIME_NOW, 5 * (int64_t)NSEC_PER_SEC),
			wake_flag_set, NULL);
	return met && sqt_ms_since(start) < 4000.0;
}

static void
test_run_until_wakes(void)
{
	int missed = 0;
	for (int i = 0; i < WAKE_ROUNDS && missed == 0; i++) {
		atomic_store(&wake_flag, 0);
		sq_async_f(sq_get_global_queue(0, 0),
				(void *)(intptr_t)((i % 7) * 25000),
				set_flag_later);
		if (!wake_round())
			missed++;
	}
	CHECK_EQ(missed, 0);
	for (int i = 0; i < WAKE_ROUNDS && missed == 0; i++) {
		atomic_store(&wake_flag, 0);
		pthread_t t;
		pthread_create(&t, NULL, thread_sets_flag,
				(void *)(intptr_t)((i % 7) * 25000));
		if (!wake_round())
			missed++;
		pthread_join(t, NULL);
	}
	CHECK_EQ(missed, 0);
	/* The wake-up outside a wait is harmless: the descriptor becomes
	 * readable, and a drain finds nothing to run. */
	sq_main_queue_wakeup();
	CHECK(fd_readable(sq_main_queue_fd()));
	CHECK_EQ(sq_main_queue_drain(), 0);
	CHECK(!fd_readable(sq_main_queue_fd()));
}

/* ---- sync onto the main queue from another thread -------------------------- */

static atomic_int sync_done;
static atomic_int sync_ran;
static atomic_int sync_ran_on_main;

static void
on_main_check(void *arg)
{
	atomic_store(&sync_ran_on_main, sqt_on_main_thread() &&
			sq_get_current_queue() == sq_get_main_queue());
	atomic_store(&sync_ran, 1);
}

static void
sync_to_main(void *arg)
{
	sq_sync_f(sq_get_main_queue(), NULL, on_main_check);
	atomic_store(&sync_done, 1);
}

/* run_until checks its condition after each task, so the condition is
 * one that a main-queue task makes true. */
static bool
sync_task_ran(void *ctx)
{
	return atomic_load(&sync_ran) == 1;
}

static void
test_sync_from_worker(void)
{
	sq_async_f(sq_get_global_queue(0, 0), NULL, sync_to_main);
	CHECK(sq_main_queue_run_until(
			sq_time(SQ_TIME_NOW, 10 * (int64_t)NSEC_PER_SEC),
			sync_task_ran, NULL));
	CHECK_EQ(atomic_load(&sync_ran_on_main), 1);
	CHECK(sqt_wait_int(&sync_done, 1, WAIT_MS)); /* the sync returned */
}

/* ---- suspend / resume / set_context / retain ignored ---------------------- */

static void
test_main_ignores(void)
{
	static int cookie;
	sq_queue_t mq = sq_get_main_queue();
	reset_log();
	sq_suspend(mq);
	sq_async_f(mq, (void *)0, main_task);
	CHECK_EQ(sq_main_queue_drain(), 1); /* not held by the suspend */
	CHECK_EQ(mlog.n, 1);
	sq_resume(mq);
	sq_resume(mq); /* no over-resume on the main queue: ignored */
	sq_set_context(mq, &cookie);
	CHECK(sq_get_context(mq) == NULL);
	for (int i = 0; i < 100; i++) {
		sq_release(mq);
		sq_retain(mq);
		sq_release(mq);
	}
	sq_set_target_queue(mq, sq_get_global_queue(SQ_QUEUE_PRIORITY_HIGH, 0));
	sq_async_f(mq, (void *)1, main_task);
	CHECK_EQ(sq_main_queue_drain(), 1);
	CHECK(log_in_order(2));
	CHECK_EQ(mlog.off_main, 0);
	CHECK(sq_queue_get_label(mq) != NULL);
}

/* ---- async to main with an owned context ----------------------------------- */

struct alert {
	char *title;
	char *message;
	char *cancelButtonTitle;
};

static char alert_text[256];
static int alert_on_main;

static void
displayAlertView(void *paramContext)
{
	struct alert *a = paramContext;
	snprintf(alert_text, sizeof(alert_text), "title=%s message=%s button=%s",
			a->title, a->message, a->cancelButtonTitle);
	alert_on_main = sqt_on_main_thread();
	free(a->title);
	free(a->message);
	free(a->cancelButtonTitle);
	free(a);
}

static void *
alert_from_thread(void *arg)
{
	struct alert *a = malloc(sizeof(*a));
	a->title = strdup("GCD");
	a->message = strdup("GCD is amazing.");
	a->cancelButtonTitle = strdup("OK");
	sq_async_f(sq_get_main_queue(), a, displayAlertView);
	return NULL;
}

static void
test_owned_context(void)
{
	pthread_t t;
	pthread_create(&t, NULL, alert_from_thread, NULL);
	pthread_join(t, NULL);
	CHECK_EQ(sq_main_queue_drain(), 1);
	CHECK(strcmp(alert_text, "title=GCD message=GCD is amazing. button=OK")
			== 0);
	CHECK_EQ(alert_on_main, 1);
}

/* ---- sq_main() in a child, exit(0) from a task ----------------------------- */

static void
child_task(void *arg)
{
	int n = (int)(intptr_t)arg;
	printf("task %d main=%d current=%d\n", n, sqt_on_main_thread() ? 1 : 0,
			sq_get_current_queue() == sq_get_main_queue() ? 1 : 0);
	if (n == 5) {
		printf("exit\n");
		exit(0);
	}
}

static void
child_submit_more(void *arg)
{
	sq_async_f(sq_get_main_queue(), (void *)4, child_task);
	sq_async_f(sq_get_main_queue(), (void *)5, child_task);
}

static void
sq_main_child(void)
{
	for (int i = 1; i <= 3; i++)
		sq_async_f(sq_get_main_queue(), (void *)(intptr_t)i, child_task);
	sq_async_f(sq_get_global_queue(0, 0), NULL, child_submit_more);
	sq_main();
}

static void
test_sq_main_exit(void)
{
	int fds[2];
	if (pipe(fds) != 0) {
		perror("pipe");
		exit(2);
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl("/proc/self/exe", "test_queue_main", CHILD_ARG, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char out[1024];
	size_t len = 0;
	ssize_t n;
	/* A child that hangs in sq_main is killed after 10 s. */
	uint64_t deadline = sqt_now_ns() + 10000000000ull;
	struct pollfd p = { .fd = fds[0], .events = POLLIN };
	for (;;) {
		int left = (int)((deadline - sqt_now_ns()) / 1000000);
		if (left <= 0 || poll(&p, 1, left) <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		n = read(fds[0], out + len, sizeof(out) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len >= sizeof(out) - 1)
			break;
	}
	out[len] = '\0';
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	const char *expected =
		"task 1 main=1 current=1\n"
		"task 2 main=1 current=1\n"
		"task 3 main=1 current=1\n"
		"task 4 main=1 current=1\n"
		"task 5 main=1 current=1\n"
		"exit\n";
	CHECK(strcmp(out, expected) == 0);
	if (strcmp(out, expected) != 0 || !WIFEXITED(status))
		fprintf(stderr, "  sq_main child: status %d, output:\n%s\n",
				status, out);
}

int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], CHILD_ARG) == 0) {
		sq_main_child();
		return 3; /* sq_main never returns */
	}
	test_sq_main_exit(); /* first: fork before this process has threads */
	test_not_drained_then_drain();
	test_run_until();
	test_run_until_wakes();
	test_sync_from_worker();
	test_main_ignores();
	test_owned_context();
	return sqt_finish("test_queue_main");
}
