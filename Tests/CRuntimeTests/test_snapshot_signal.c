/*
 * SQ_SNAPSHOT_SIGNAL: a child process whose workers are all blocked (the
 * pool at its thread cap, every worker in a task that never returns, work
 * queued behind them) still writes a snapshot on stderr when it gets the
 * signal, every time; a program's own source for the same signal still
 * gets it; a bad value is reported.
 */
#include "child_helpers.h"

#include <stdatomic.h>

static void
nothing(void *ctx)
{
}

/* Waits until SQ_SNAPSHOT_SIGNAL is armed: the runtime's own source for
 * it is registered (its handler installed), as a snapshot shows. */
static bool
wait_armed(void)
{
	for (int i = 0; i < 2000; i++) {
		sq_snapshot_t *s = sq_snapshot_create();
		bool armed = false;
		for (size_t k = 0; s && k < s->source_count; k++)
			armed |= s->sources[k].snapshot_signal &&
					s->sources[k].registered;
		sq_snapshot_free(s);
		if (armed)
			return true;
		usleep(5000);
	}
	return false;
}

static int never[2];

static void
block_forever(void *started)
{
	sq_semaphore_signal(started);
	char b;
	ssize_t n = read(never[0], &b, 1);
	(void)n;
}

/* Every worker blocked (SQ_WORKERS=2, SQ_MAX_THREADS=2), work queued
 * behind them and on a global queue, a suspended queue. */
static void
blocked_server(void *unused)
{
	if (pipe(never) != 0)
		_exit(3);
	sq_semaphore_t started = sq_semaphore_create(0);
	for (int i = 0; i < 2; i++) {
		char label[64];
		snprintf(label, sizeof(label), "com.example.blocked.%d", i);
		sq_queue_t q = sq_queue_create(label, NULL);
		sq_async_f(q, started, block_forever);
		for (int k = 0; k <= i; k++)
			sq_async_f(q, NULL, nothing);
	}
	sq_semaphore_wait(started, SQ_TIME_FOREVER);
	sq_semaphore_wait(started, SQ_TIME_FOREVER);
	for (int k = 0; k < 3; k++)
		sq_async_f(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
				NULL, nothing);
	sq_queue_t s = sq_queue_create("com.example.suspended", NULL);
	sq_suspend(s);
	sq_async_f(s, NULL, nothing);
	sq_async_f(s, NULL, nothing);
	if (!wait_armed())
		_exit(4);
	sqt_child_ready();
	for (;;)
		pause();
}

static void
test_all_workers_blocked(void)
{
	static const char *const env[] = { "SQ_WORKERS=2", "SQ_MAX_THREADS=2",
			"SQ_SNAPSHOT_SIGNAL=USR1", NULL };
	struct sqt_child c;
	sqt_child_start(&c, blocked_server, NULL, env);
	bool ready = sqt_child_wait_ready(&c, 20000);
	CHECK(ready);
	if (!ready) {
		sqt_child_stop(&c);
		return;
	}
	kill(c.pid, SIGUSR1);
	CHECK(sqt_child_read_until(&c, "SwiftQueues: end of snapshot\n", 1,
			20000));
	/* Again: the thread serves every signal. */
	kill(c.pid, SIGUSR1);
	CHECK(sqt_child_read_until(&c, "SwiftQueues: end of snapshot\n", 2,
			20000));
	int status = sqt_child_stop(&c);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	CHECK(strncmp(c.out, "SwiftQueues: snapshot of process ", 33) == 0);
	CHECK_EQ(sqt_count(c.out, "SwiftQueues: snapshot of process "), 2);
	CHECK(strstr(c.out, "  pool: width 2, live 2, idle 0, ") != NULL);
	CHECK(strstr(c.out, "thread cap 2,") != NULL);
	CHECK(strstr(c.out, "  queue 'com.example.blocked.0' (serial, target "
			"'com.swiftqueues.root.default'): queued 1, running 1,"
			" waiting ") != NULL);
	CHECK(strstr(c.out, "  queue 'com.example.blocked.1' (serial, target "
			"'com.swiftqueues.root.default'): queued 2, running 1,"
			" waiting ") != NULL);
	CHECK(strstr(c.out, "  queue 'com.swiftqueues.root.default' (global):"
			" queued 3\n") != NULL);
	CHECK(strstr(c.out, "  queue 'com.example.suspended' (serial, target "
			"'com.swiftqueues.root.default'): suspended 1, queued 2,"
			" running 0, waiting ") != NULL);
	char signal_line[64];
	snprintf(signal_line, sizeof(signal_line), "(signal, handle %d, ",
			SIGUSR1);
	CHECK(strstr(c.out, signal_line) != NULL);
	CHECK(strstr(c.out, ", the snapshot signal): suspended 1, registered")
			!= NULL);
	if (sqt_failed)
		fprintf(stderr, "child's stderr:\n%s", c.out);
}

/* The program's own source for the signal gets it too. */
static atomic_int handled;

static void
on_signal(void *ctx)
{
	atomic_fetch_add(&handled, 1);
}

static void
own_source(void *unused)
{
	sq_queue_t q = sq_queue_create("com.example.own", NULL);
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGUSR2, 0, q);
	sq_source_set_event_handler_f(s, on_signal);
	sq_activate(s);
	if (!wait_armed())
		_exit(4);
	sqt_child_ready();
	for (int i = 0; i < 2000 && atomic_load(&handled) == 0; i++)
		usleep(5000);
	fprintf(stderr, "handled %d\n", atomic_load(&handled));
	for (;;)
		pause();
}

static void
test_own_source(void)
{
	static const char *const env[] = { "SQ_SNAPSHOT_SIGNAL=SIGUSR2", NULL };
	struct sqt_child c;
	sqt_child_start(&c, own_source, NULL, env);
	CHECK(sqt_child_wait_ready(&c, 20000));
	kill(c.pid, SIGUSR2);
	CHECK(sqt_child_read_until(&c, "SwiftQueues: end of snapshot\n", 1,
			20000));
	CHECK(sqt_child_read_until(&c, "handled 1\n", 1, 20000));
	sqt_child_stop(&c);
	CHECK_EQ(sqt_count(c.out, "SwiftQueues: end of snapshot\n"), 1);
	CHECK(strstr(c.out, "  source ") != NULL);
	if (sqt_failed)
		fprintf(stderr, "child's stderr:\n%s", c.out);
}

/* Bad values: one line, and the program goes on. */
static void
start_pool(void *unused)
{
	sq_queue_t q = sq_queue_create("com.example.plain", NULL);
	sq_async_f(q, NULL, nothing);
	sq_sync_f(q, NULL, nothing);
	usleep(300000); /* the watchdog's thread arms the signal */
	fprintf(stderr, "done\n");
}

static void
test_bad_values(void)
{
	static const char *const bad_name[] = { "SQ_SNAPSHOT_SIGNAL=NOPE",
			NULL };
	static const char *const kill_sig[] = { "SQ_SNAPSHOT_SIGNAL=KILL",
			NULL };
	static const char *const rt[] = { "SQ_SNAPSHOT_SIGNAL=RTMIN+1", NULL };
	struct sqt_child c;
	sqt_child_start(&c, start_pool, NULL, bad_name);
	CHECK(sqt_child_read_until(&c, NULL, 0, 20000));
	sqt_child_stop(&c);
	CHECK(strcmp(c.out, "SwiftQueues: SQ_SNAPSHOT_SIGNAL: 'NOPE' is not a "
			"signal\ndone\n") == 0);

	sqt_child_start(&c, start_pool, NULL, kill_sig);
	CHECK(sqt_child_read_until(&c, NULL, 0, 20000));
	sqt_child_stop(&c);
	char expect[128];
	snprintf(expect, sizeof(expect), "SwiftQueues: SQ_SNAPSHOT_SIGNAL: "
			"signal %d cannot be watched: %s\n", SIGKILL,
			strerror(EINVAL));
	CHECK(strstr(c.out, expect) != NULL);
	CHECK(strstr(c.out, "done\n") != NULL);

	sqt_child_start(&c, start_pool, NULL, rt);
	CHECK(sqt_child_read_until(&c, NULL, 0, 20000));
	sqt_child_stop(&c);
	CHECK(strcmp(c.out, "done\n") == 0);
}

int
main(void)
{
	test_all_workers_blocked();
	test_own_source();
	test_bad_values();
	return sqt_finish("snapshot_signal");
}
