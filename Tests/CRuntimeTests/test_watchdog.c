/*
 * SQ_WATCHDOG_MS, each case in a child process whose stderr is read:
 * a long task on a serial queue is named once (with the work queued
 * behind it), a two-queue sync cycle is named as a wait cycle, work left
 * on the main queue and on a starved global queue is reported, a busy
 * program of short tasks gets no report, a child of fork() is watched
 * again, and the watchdog's thread sleeps
 * while the process is idle (at most one wake-up per period while a task
 * runs). Margins are generous: a loaded two-CPU machine only delays
 * reports, the checks never depend on it being quick.
 */
#include "child_helpers.h"
#include "queue_helpers.h"

#include <dirent.h>
#include <linux/membarrier.h>
#include <stdatomic.h>
#include <sys/syscall.h>

/* The fork case's child starts threads after a multi-threaded fork:
 * ThreadSanitizer can follow it (one thread, every runtime structure
 * reset), but stops such a child unless told not to (as test_fork.c). */
#if SQT_TSAN
const char *__tsan_default_options(void);

const char *
__tsan_default_options(void)
{
	return "die_after_fork=0";
}
#endif

static void
nothing(void *ctx)
{
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

/* Set when a sleep_1500 starts. */
static atomic_bool slow_started;

static void
sleep_1500(void *ctx)
{
	atomic_store(&slow_started, true);
	sleep_ms(1500);
}

/* The number after `prefix` in `text` (-1 if none). */
static long
number_after(const char *text, const char *prefix)
{
	const char *p = strstr(text, prefix);
	return p ? strtol(p + strlen(prefix), NULL, 10) : -1;
}

/* ---- A long task -------------------------------------------------------- */

/* The sync waits behind a worker that holds the queue: it is queued only
 * once sleep_1500 runs there (a caller that finds the queue's job still
 * waiting for a thread after 1 ms runs the queue itself, and a loaded
 * machine can take that long to start the pool's first thread). */
static void
long_task(void *unused)
{
	sq_queue_t q = sq_queue_create("com.example.slow", NULL);
	sq_async_f(q, NULL, sleep_1500);
	while (!atomic_load(&slow_started))
		sleep_ms(1);
	sq_async_f(q, NULL, nothing);
	sq_sync_f(q, NULL, nothing);
	sleep_ms(500);
}

static void
test_long_task(void)
{
	static const char *const env[] = { "SQ_WATCHDOG_MS=200", NULL };
	struct sqt_child c;
	sqt_child_start(&c, long_task, NULL, env);
	CHECK(sqt_child_read_until(&c, NULL, 0, 30000));
	int status = sqt_child_stop(&c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Once per stall, not once per tick. */
	CHECK_EQ(sqt_count(c.out, "SwiftQueues: watchdog: a task on queue "
			"'com.example.slow' has run for "), 1);
	long ms = number_after(c.out, "'com.example.slow' has run for ");
	CHECK(ms >= 200 && ms < 1500);
	CHECK(strstr(c.out, " ms (thread ") != NULL);
	CHECK_EQ(sqt_count(c.out, "SwiftQueues: watchdog: work queued on "
			"serial queue 'com.example.slow' has waited "), 1);
	/* Each report comes with a snapshot that shows the threads. */
	CHECK(sqt_count(c.out, "SwiftQueues: end of snapshot\n") >= 1);
	CHECK(strstr(c.out, "watchdog 200 ms\n") != NULL);
	/* Each thread line names the task it runs, what it waits for and
	 * who holds that; the reports name the function and the holder. */
	CHECK(strstr(c.out, "': running 'com.example.slow': "
			"sleep_1500, holding queue 'com.example.slow' for ")
			!= NULL);
	CHECK(strstr(c.out, "'main thread': not in a task, in sq_sync "
			"waiting for queue 'com.example.slow' for ") != NULL);
	CHECK(strstr(c.out, " ms, held by thread ") != NULL);
	CHECK(strstr(c.out, " running 'com.example.slow': sleep_1500\n")
			!= NULL);
	CHECK(strstr(c.out, " ms (thread ") != NULL &&
			strstr(c.out, ", running sleep_1500)\n") != NULL);
	CHECK(strstr(c.out, " with no job of it starting, held by thread ")
			!= NULL && strstr(c.out, " running sleep_1500 for ")
			!= NULL);
	if (sqt_failed)
		fprintf(stderr, "child's stderr:\n%s", c.out);
}

/* ---- A wait cycle ------------------------------------------------------------ */

static sq_queue_t qa, qb;
static atomic_int arrived;

static void
meet(void)
{
	atomic_fetch_add(&arrived, 1);
	while (atomic_load(&arrived) < 2)
		sleep_ms(1);
	sleep_ms(20);
}

static void
a_syncs_b(void *ctx)
{
	meet();
	sq_sync_f(qb, NULL, nothing);
}

static void
b_syncs_a(void *ctx)
{
	meet();
	sq_sync_f(qa, NULL, nothing);
}

static void
cycle(void *unused)
{
	qa = sq_queue_create("com.example.A", NULL);
	qb = sq_queue_create("com.example.B", NULL);
	sq_async_f(qa, NULL, a_syncs_b);
	sq_async_f(qb, NULL, b_syncs_a);
	for (;;)
		pause();
}

static void
test_cycle(void)
{
	static const char *const env[] = { "SQ_WATCHDOG_MS=200",
			"SQ_WORKERS=2", NULL };
	struct sqt_child c;
	sqt_child_start(&c, cycle, NULL, env);
	CHECK(sqt_child_read_until(&c, "SwiftQueues: end of snapshot\n", 1,
			30000));
	/* A few more ticks: still reported once. */
	sqt_child_read_until(&c, "never", 1, 800);
	sqt_child_stop(&c);
	CHECK_EQ(sqt_count(c.out, "SwiftQueues: watchdog: wait cycle: "
			"thread "), 1);
	CHECK(strstr(c.out, " holds 'com.example.A' and waits for "
			"'com.example.B'") != NULL);
	CHECK(strstr(c.out, " holds 'com.example.B' and waits for "
			"'com.example.A'") != NULL);
	/* One line: "thread X holds 'A' ...; thread Y holds 'B' ...". */
	const char *line = strstr(c.out, "wait cycle: thread ");
	const char *end = line ? strchr(line, '\n') : NULL;
	const char *semi = line ? strstr(line, "'; thread ") : NULL;
	CHECK(line && end && semi && semi < end);
	/* The snapshot's threads: both waiting. */
	CHECK(strstr(c.out, "holding queue 'com.example.A' for ") != NULL);
	CHECK(sqt_count(c.out, "in sq_sync waiting for queue "
			"'com.example.") >= 2);
	if (sqt_failed)
		fprintf(stderr, "child's stderr:\n%s", c.out);
}

/* ---- The main queue, a starved global queue ------------------------------ */

/* The watchdog sleeps (nothing runs), then work is left on the main
 * queue, which starts no task. */
static void
main_left(void *unused)
{
	sleep_ms(600);
	sq_async_f(sq_get_main_queue(), NULL, nothing);
	sleep_ms(1200);
}

static void
starved(void *unused)
{
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_async_f(g, NULL, sleep_1500);
	sleep_ms(100);
	sq_async_f(g, NULL, nothing);
	sleep_ms(1800);
}

/* Runs this program again with "--child <name>": the runtime then starts
 * with the environment already set, as for a program started with it. */
static void
exec_self(void *name)
{
	execl("/proc/self/exe", "test_watchdog", "--child", (char *)name,
			(char *)NULL);
	_exit(5);
}

static void
test_main_and_global(void)
{
	static const char *const env[] = { "SQ_WATCHDOG_MS=200", NULL };
	struct sqt_child c;
	/* Only the main queue is used: the watchdog started when the
	 * library loaded. */
	sqt_child_start(&c, exec_self, "main_left", env);
	CHECK(sqt_child_read_until(&c, NULL, 0, 30000));
	sqt_child_stop(&c);
	CHECK_EQ(sqt_count(c.out, "SwiftQueues: watchdog: work queued on main "
			"queue 'com.swiftqueues.main-thread' has waited "), 1);

	static const char *const env1[] = { "SQ_WATCHDOG_MS=200",
			"SQ_WORKERS=1", "SQ_MAX_THREADS=1", NULL };
	sqt_child_start(&c, starved, NULL, env1);
	CHECK(sqt_child_read_until(&c, NULL, 0, 30000));
	sqt_child_stop(&c);
	CHECK_EQ(sqt_count(c.out, "SwiftQueues: watchdog: work queued on "
			"global queue 'com.swiftqueues.root.default' has waited "),
			1);
	CHECK(strstr(c.out, "while no worker started a job (1 live, 0 idle)")
			!= NULL);
	/* A long task on a global queue holds no serial queue. */
	CHECK(strstr(c.out, "a task on queue") == NULL);
}

/* ---- In a child of fork() ------------------------------------------------------ */

/* Whether every thread of the process but the caller sleeps (state S in
 * /proc/self/task/<tid>/stat). */
static bool
threads_asleep(void)
{
	DIR *d = opendir("/proc/self/task");
	if (d == NULL)
		return true;
	bool asleep = true;
	pid_t self = (pid_t)syscall(SYS_gettid);
	struct dirent *e;
	while (asleep && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == self)
			continue;
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
				e->d_name);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		const char *paren = strrchr(buf, ')');
		if (paren && paren[1] == ' ' && paren[2] != 'S')
			asleep = false;
	}
	closedir(d);
	return asleep;
}

/* Before the fork, every other thread sleeps (the pool's workers, the
 * monitor, the watchdog), three looks in a row. GCC 12's
 * AddressSanitizer takes no lock of its allocator around fork (LLVM's
 * does since version 18): a thread that allocates or frees at that
 * moment, as one does while it starts, leaves a lock of the allocator
 * held in the child, whose new threads then wait on it for ever. glibc's
 * malloc takes its locks around fork and needs no such wait. */
static void
wait_threads_asleep(void)
{
	int quiet = 0;
	for (int i = 0; i < 2000 && quiet < 3; i++) {
		quiet = threads_asleep() ? quiet + 1 : 0;
		sleep_ms(1);
	}
}

/* The watchdog runs (started at load), then the process forks: the child
 * gets a watchdog of its own with its pool. */
static void
forked(void *unused)
{
	sq_queue_t q = sq_queue_create("com.example.before-fork", NULL);
	sq_sync_f(q, NULL, nothing);
	sq_async_f(q, NULL, nothing);
	sq_sync_f(q, NULL, nothing);
	wait_threads_asleep();
	pid_t pid = fork();
	if (pid == 0) {
		sq_queue_t c = sq_queue_create("com.example.forked", NULL);
		sq_async_f(c, NULL, sleep_1500);
		sq_sync_f(c, NULL, nothing);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	fprintf(stderr, "child %d\n", WIFEXITED(status) ?
			WEXITSTATUS(status) : -1);
}

static void
test_fork(void)
{
	static const char *const env[] = { "SQ_WATCHDOG_MS=200", NULL };
	struct sqt_child c;
	sqt_child_start(&c, exec_self, "forked", env);
	CHECK(sqt_child_read_until(&c, NULL, 0, 30000));
	sqt_child_stop(&c);
	CHECK_EQ(sqt_count(c.out, "SwiftQueues: watchdog: a task on queue "
			"'com.example.forked' has run for "), 1);
	CHECK(strstr(c.out, "child 0\n") != NULL);
}

/* ---- Quiet when all is well --------------------------------------------------- */

static void
sleep_1ms(void *ctx)
{
	sleep_ms(1);
}

static void
short_tasks(void *unused)
{
	sq_group_t g = sq_group_create();
	for (int i = 0; i < 4; i++) {
		char label[32];
		snprintf(label, sizeof(label), "com.example.short.%d", i);
		sq_queue_t q = sq_queue_create(label, NULL);
		for (int k = 0; k < 200; k++)
			sq_group_async_f(g, q, NULL, sleep_1ms);
		sq_release(q);
	}
	sq_group_wait(g, SQ_TIME_FOREVER);
	fprintf(stderr, "done\n");
}

static void
test_quiet(void)
{
	static const char *const env[] = { "SQ_WATCHDOG_MS=2000", NULL };
	struct sqt_child c;
	sqt_child_start(&c, short_tasks, NULL, env);
	CHECK(sqt_child_read_until(&c, NULL, 0, 60000));
	int status = sqt_child_stop(&c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(strcmp(c.out, "done\n") == 0);
}

/* ---- Sleeping while idle ------------------------------------------------------ */

/* The watchdog thread's voluntary context switches (its wake-ups), or -1. */
static long
watchdog_switches(void)
{
	DIR *d = opendir("/proc/self/task");
	long result = -1;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
				e->d_name);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		bool ours = fgets(buf, sizeof(buf), f) &&
				strcmp(buf, "sq.watchdog\n") == 0;
		fclose(f);
		if (!ours)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
				e->d_name);
		f = fopen(path, "r");
		while (f && fgets(buf, sizeof(buf), f))
			if (strncmp(buf, "voluntary_ctxt_switches:", 24) == 0)
				result = strtol(buf + 24, NULL, 10);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return result;
}

static void
idle_sleep(void *unused)
{
	sq_queue_t q = sq_queue_create("com.example.idle", NULL);
	sq_async_f(q, NULL, nothing);
	sq_sync_f(q, NULL, nothing);
	sleep_ms(300); /* a tick finds nothing, the thread sleeps */
	long a = watchdog_switches();
	sleep_ms(1000);
	long b = watchdog_switches();
	/* A task of 1 s: ticks every 20 ms, no more. */
	sq_async_f(q, NULL, sleep_1500);
	sleep_ms(200);
	long c = watchdog_switches();
	sleep_ms(1000);
	long d = watchdog_switches();
	sq_sync_f(q, NULL, nothing);
	fprintf(stderr, "idle %ld busy %ld\n", b - a, d - c);
}

static void
test_idle_sleep(void)
{
	long query = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (query < 0 || !(query & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
		printf("watchdog: membarrier(2) refused here: the watchdog "
				"ticks while idle; sleep test skipped\n");
		return;
	}
	static const char *const env[] = { "SQ_WATCHDOG_MS=20", NULL };
	struct sqt_child c;
	sqt_child_start(&c, idle_sleep, NULL, env);
	CHECK(sqt_child_read_until(&c, "busy ", 1, 30000));
	sqt_child_read_until(&c, "\n", 2, 5000);
	sqt_child_stop(&c);
	long idle = number_after(c.out, "idle ");
	long busy = number_after(c.out, "busy ");
	printf("watchdog: wake-ups over 1 s: %ld idle, %ld while a task ran "
			"(period 20 ms)\n", idle, busy);
	CHECK(idle >= 0 && idle <= 2);
	CHECK(busy >= 5 && busy <= 60);
}

/* ---- A bad value ---------------------------------------------------------------- */

static void
plain(void *unused)
{
	sq_queue_t q = sq_queue_create("com.example.plain", NULL);
	sq_sync_f(q, NULL, nothing);
	sq_async_f(q, NULL, nothing);
	sq_sync_f(q, NULL, nothing);
}

static void
test_bad_value(void)
{
	static const char *const env[] = { "SQ_WATCHDOG_MS=soon", NULL };
	struct sqt_child c;
	sqt_child_start(&c, plain, NULL, env);
	CHECK(sqt_child_read_until(&c, NULL, 0, 20000));
	int status = sqt_child_stop(&c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(strcmp(c.out, "SwiftQueues: SQ_WATCHDOG_MS: 'soon' is not a "
			"number of milliseconds from 1 to 3600000: the watchdog "
			"is off\n") == 0);
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		if (strcmp(argv[2], "main_left") == 0)
			main_left(NULL);
		else if (strcmp(argv[2], "forked") == 0)
			forked(NULL);
		return 0;
	}
	test_long_task();
	test_cycle();
	test_main_and_global();
	test_fork();
	test_quiet();
	test_idle_sleep();
	test_bad_value();
	return sqt_finish("watchdog");
}
