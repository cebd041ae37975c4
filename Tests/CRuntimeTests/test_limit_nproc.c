/*
 * Out of threads (RLIMIT_NPROC): the pool goes on with the workers it has
 * and tries again later, the event loop and the signal watcher get their
 * threads (an idle worker is given back for them) or fail with EAGAIN
 * where the program sees it, queued work still runs, and once the limit is
 * raised the same calls succeed. The process stops only when no worker at
 * all can be started, with a message that says why.
 *
 * The limit counts every process and thread of the user and is not
 * enforced for root, so each scenario runs in a child that, when the test
 * runs as root, becomes a user id no process has (the count is then this
 * child's threads alone); otherwise it counts the user's threads in /proc.
 * The room a scenario names is the number of threads it may add.
 *
 *   - room 0: the first sq_async_f waits 5 s for a worker, then stops the
 *     process with "cannot start any worker thread" and RLIMIT_NPROC.
 *   - room 1: one worker runs all the work (no monitor: before, the first
 *     sq_async_f aborted with "cannot start the pool monitor thread"); a
 *     read source fails with EAGAIN, a timer and an sq_after wait, a file
 *     is read on the worker for want of an I/O thread; after the limit is
 *     raised they fire and the read source is made.
 *   - room 2: a worker and the monitor; a job that blocks for a job queued
 *     behind it is rescued once the limit is raised (the monitor keeps
 *     trying to add a worker).
 *   - room 3: the pool takes every thread; the first timer gets the
 *     manager thread anyway (before, it aborted with "cannot start the
 *     manager thread"): an idle worker is given back. With one worker
 *     left, a signal source fails with EAGAIN until the limit is raised.
 */
#include "limit_helpers.h"

#include <dirent.h>
#include <grp.h>
#include <sys/stat.h>
#include <stdatomic.h>

/* Threads of real user `uid`, from /proc. */
static int
user_threads(uid_t uid)
{
	DIR *d = opendir("/proc");
	if (d == NULL)
		return -1;
	int total = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[300], line[256];
		snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		unsigned real = (unsigned)-1;
		int threads = 0;
		while (fgets(line, sizeof(line), f)) {
			sscanf(line, "Uid: %u", &real);
			sscanf(line, "Threads: %d", &threads);
		}
		fclose(f);
		if (real == uid)
			total += threads;
	}
	closedir(d);
	return total;
}

static void *
no_op(void *arg)
{
	return arg;
}

/* Becomes an unprivileged user and lets it start `room` more threads.
 * Returns false (and says why) when that cannot be arranged. */
static bool
limit_threads(int room)
{
	/* One thread first: ThreadSanitizer starts a thread of its own with
	 * the process's first one, which must not take the room. (Then a
	 * moment for the kernel to let the finished thread go.) */
	pthread_t t;
	if (pthread_create(&t, NULL, no_op, NULL) == 0)
		pthread_join(t, NULL);
	sqt_sleep_ms(20);
	if (geteuid() == 0) {
		uid_t uid = (uid_t)(2000000000u + (unsigned)getpid() % 100000u);
		if (setgroups(0, NULL) != 0 || setgid(uid) != 0 ||
				setuid(uid) != 0) {
			printf("skipped: needs root or an unprivileged user "
					"(%s)\n", strerror(errno));
			return false;
		}
	}
	int now = user_threads(getuid());
	if (now <= 0) {
		printf("skipped: cannot count this user's threads\n");
		return false;
	}
	struct rlimit rl = { (rlim_t)(now + room), RLIM_INFINITY };
	if (setrlimit(RLIMIT_NPROC, &rl) != 0) {
		rl.rlim_max = (rlim_t)(now + room) + 1000;
		if (setrlimit(RLIMIT_NPROC, &rl) != 0) {
			printf("skipped: setrlimit: %s\n", strerror(errno));
			return false;
		}
	}
	return true;
}

static void
raise_limit(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NPROC, &rl);
	rl.rlim_cur = rl.rlim_max;
	CHECK_EQ(setrlimit(RLIMIT_NPROC, &rl), 0);
}

/* ---- handlers ------------------------------------------------------------ */

static void
signal_sem(void *ctx)
{
	sq_semaphore_signal(ctx);
}

static atomic_int counted;

static void
count_one(void *ctx)
{
	atomic_fetch_add(&counted, 1);
}

static void
nap(void *ctx)
{
	sqt_sleep_ms(50);
	atomic_fetch_add(&counted, 1);
}

/* 100 jobs from this thread all run. */
static void
check_work_runs(void)
{
	atomic_store(&counted, 0);
	sq_group_t g = sq_group_create();
	for (int i = 0; i < 100; i++)
		sq_group_async_f(g, sq_get_global_queue(0, 0), NULL, count_one);
	CHECK_EQ(sq_group_wait(g, sq_time(SQ_TIME_NOW, 10000 * MS)), 0);
	CHECK_EQ(atomic_load(&counted), 100);
	sq_release(g);
}

static sq_source_t
timer_signalling(sq_semaphore_t sem)
{
	sq_source_t t = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, NULL);
	CHECK(t != NULL);
	if (t) {
		sq_set_context(t, sem);
		sq_source_set_event_handler_f(t, signal_sem);
		sq_source_set_timer(t, sq_time(SQ_TIME_NOW, 10 * MS),
				SQ_TIME_FOREVER, 0);
		sq_activate(t);
	}
	return t;
}

static void
drop_source(sq_source_t s)
{
	if (s) {
		sq_source_cancel(s);
		sq_release(s);
	}
}

/* ---- room 0: no worker can ever start ---------------------------------- */

static void
room0(void)
{
	if (!limit_threads(0))
		_exit(0);
	sq_async_f(sq_get_global_queue(0, 0), NULL, count_one);
	sqt_sleep_ms(20000);
	printf("no report after 20 s\n");
}

/* ---- room 1: one worker, nothing else ----------------------------------- */

struct io_result {
	sq_semaphore_t done;
	int error;
	size_t bytes;
};

static void
io_handler(void *ctx, bool done, sq_data_t data, int error)
{
	struct io_result *r = ctx;
	if (data)
		r->bytes += sq_data_get_size(data);
	if (done) {
		r->error = error;
		sq_semaphore_signal(r->done);
	}
}

/* Reads `path` whole through a random-access channel (I/O threads past
 * the first 64 KiB); returns the bytes read, or -1 on an error. */
static long
read_file(const char *path)
{
	struct io_result r = { sq_semaphore_create(0), -1, 0 };
	sq_io_t ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path, O_RDONLY, 0,
			NULL, NULL, NULL);
	sq_io_read_f(ch, 0, SIZE_MAX, sq_get_global_queue(0, 0), &r,
			io_handler);
	CHECK(sem_wait_ms(r.done, 10000));
	sq_io_close(ch, 0);
	sq_release(ch);
	sq_release(r.done);
	return r.error ? -1 : (long)r.bytes;
}

#define FILE_BYTES (1 << 20)

static void
room1(void)
{
	int p[2];
	CHECK_EQ(pipe(p), 0);
	char path[] = "/tmp/sq-nproc-XXXXXX";
	int file = mkstemp(path);
	CHECK(file >= 0);
	CHECK_EQ(ftruncate(file, FILE_BYTES), 0);
	CHECK_EQ(fchmod(file, 0644), 0);
	close(file);
	if (!limit_threads(1))
		return;
	check_work_runs();
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	CHECK_EQ(st.live, 1);
	CHECK(!st.monitor_running);

	errno = 0;
	CHECK(sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0, NULL)
			== NULL);
	CHECK_EQ(errno, EAGAIN);
	sq_semaphore_t fired = sq_semaphore_create(0);
	sq_semaphore_t after = sq_semaphore_create(0);
	sq_source_t timer = timer_signalling(fired);
	sq_after_f(sq_time(SQ_TIME_NOW, 20 * MS), sq_get_global_queue(0, 0),
			after, signal_sem);
	sqt_sleep_ms(200);
	CHECK(!sem_wait_ms(fired, 0));
	CHECK(!sem_wait_ms(after, 0));
	check_work_runs();
	/* No I/O thread either: the file's chunks run on the worker. */
	CHECK_EQ(read_file(path), FILE_BYTES);

	raise_limit();
	CHECK(sem_wait_ms(fired, 10000));
	CHECK(sem_wait_ms(after, 10000));
	sq_pool_stats(&st);
	CHECK(st.monitor_running);
	sq_source_t rd = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0],
			0, NULL);
	CHECK(rd != NULL);
	drop_source(rd);
	drop_source(timer);
	CHECK_EQ(read_file(path), FILE_BYTES);
	unlink(path);
	settle();
	sq_release(fired);
	sq_release(after);
}

/* ---- room 2: a blocked worker is rescued once threads are back ---------- */

static sq_semaphore_t handoff;
static atomic_int waited_ok;

static void
wait_for_partner(void *ctx)
{
	atomic_store(&waited_ok, sq_semaphore_wait(handoff, sq_time(
			SQ_TIME_NOW, 20000 * MS)) == 0);
	sq_semaphore_signal(ctx);
}

static void
room2(void)
{
	if (!limit_threads(2))
		return;
	check_work_runs(); /* a worker, then the monitor */
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	CHECK(st.monitor_running);
	CHECK_EQ(st.live, 1);

	handoff = sq_semaphore_create(0);
	sq_semaphore_t finished = sq_semaphore_create(0);
	sq_queue_t g = sq_get_global_queue(0, 0);
	sq_async_f(g, finished, wait_for_partner);
	sqt_sleep_ms(50);
	sq_async_f(g, handoff, signal_sem); /* behind the blocked one */
	sqt_sleep_ms(300);
	CHECK(!sem_wait_ms(finished, 0)); /* no thread for the partner */
	uint64_t raised = sqt_now_ns();
	raise_limit();
	CHECK(sem_wait_ms(finished, 10000));
	CHECK(atomic_load(&waited_ok));
	printf("rescued %.0f ms after the limit was raised\n",
			sqt_ms_since(raised));
	sq_release(finished);
	sq_release(handoff);
}

/* ---- room 3: the pool takes every thread, the loop still gets one -------- */

static void
room3(void)
{
	if (!limit_threads(3))
		return;
	/* Work that keeps two workers busy for a while: with a width of
	 * two or more the pool takes two workers and the monitor. */
	atomic_store(&counted, 0);
	sq_group_t grp = sq_group_create();
	for (int i = 0; i < 8; i++)
		sq_group_async_f(grp, sq_get_global_queue(0, 0), NULL, nap);
	CHECK_EQ(sq_group_wait(grp, sq_time(SQ_TIME_NOW, 10000 * MS)), 0);
	sq_release(grp);
	sq_pool_stats_t st;
	sq_pool_stats(&st);
	printf("pool before the timer: %u workers, monitor %s\n", st.live,
			st.monitor_running ? "running" : "not running");

	sq_semaphore_t fired = sq_semaphore_create(0);
	sq_source_t timer = timer_signalling(fired);
	CHECK(sem_wait_ms(fired, 10000)); /* without raising the limit */
	sq_pool_stats(&st);
	printf("pool after the timer: %u workers\n", st.live);
	CHECK(st.live >= 1);
	check_work_runs();

	/* One worker left, no thread for the signal watcher. */
	if (st.live == 1) {
		errno = 0;
		CHECK(sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGUSR1, 0, NULL)
				== NULL);
		CHECK_EQ(errno, EAGAIN);
	}
	raise_limit();
	sq_source_t sig = sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGUSR1, 0,
			NULL);
	CHECK(sig != NULL);
	drop_source(sig);
	drop_source(timer);
	settle();
	sq_release(fired);
}

int
main(void)
{
	sqt_run_child("room 1", room1, NULL);
	sqt_run_child("room 2", room2, NULL);
	sqt_run_child("room 3", room3, NULL);
	sqt_run_child("room 0", room0, "SwiftQueues: sq_async_f: cannot start "
			"any worker thread: Resource temporarily unavailable "
			"(this user's process and thread limit, RLIMIT_NPROC");
	return sqt_finish("test_limit_nproc");
}
