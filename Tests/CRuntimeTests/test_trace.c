/*
 * Trace files: a known program recorded with sq_trace_start / sq_trace_stop
 * and its JSON checked (named thread tracks, slices named by queue label
 * with their functions, arrows from each submission to its run for async,
 * after, a source's event, a group's notification and an I/O read), the
 * record of dropped events when the ring is tiny, nothing recorded after a
 * stop, a fork() child that records nothing (and can record on its own),
 * SQ_TRACE at start with %p, and the errors of the calls.
 */
#include "queue_helpers.h"
#include "json_helpers.h"
#include "trace_helpers.h"

#include <fcntl.h>
#include <sys/stat.h>

/* The fork test's child starts threads after a multi-threaded fork, from
 * a runtime reset to one thread: a case ThreadSanitizer follows once told
 * to (as in test_fork.c). */
#if SQT_TSAN
const char *__tsan_default_options(void);
const char *
__tsan_default_options(void)
{
	return "die_after_fork=0";
}
#endif

/* The fork test's child ends with exit(), to show that exit does not
 * write the parent's trace; LeakSanitizer would then report the
 * continuations cached by the parent's workers, which have no thread in
 * the child. */
static bool in_fork_child;
#if SQT_ASAN
int __lsan_is_turned_off(void);
int
__lsan_is_turned_off(void)
{
	return in_fork_child;
}
#endif

static char dir[] = "/tmp/sq-trace-XXXXXX";

static void
trace_path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

/* ---- The known program ------------------------------------------------------- */

static sq_semaphore_t finished;
static sq_semaphore_t members_go; /* the group's members wait for it */
static uint64_t after_called_ns; /* CLOCK_MONOTONIC before sq_after_f */

static void
serial_task(void *ctx)
{
	(void)ctx;
}

static void
after_task(void *ctx)
{
	sq_semaphore_signal(finished);
}

static void
source_handler(void *ctx)
{
	sq_semaphore_signal(finished);
}

static void
member_task(void *ctx)
{
	/* Still running when the notification is registered, so that the
	 * last member's leave submits it (a member that ended first would
	 * leave the caller to submit it at once). */
	(void)sq_semaphore_wait(members_go, sq_time(SQ_TIME_NOW,
			30 * NSEC_PER_SEC));
}

static void
notify_task(void *ctx)
{
	sq_semaphore_signal(finished);
}

static void
io_handler(void *ctx, bool done, sq_data_t data, int error)
{
	if (done)
		sq_semaphore_signal(finished);
}

static void
close_fd(void *ctx, int error)
{
	close((int)(intptr_t)ctx);
}

static bool
wait_finished(int count)
{
	for (int i = 0; i < count; i++)
		if (sq_semaphore_wait(finished, sq_time(SQ_TIME_NOW,
				30 * NSEC_PER_SEC)) != 0)
			return false;
	return true;
}

static void
run_known_program(void)
{
	sq_queue_t serial = sq_queue_create("test.trace.serial", NULL);
	sq_queue_t conc = sq_queue_create("test.trace.members",
			SQ_QUEUE_CONCURRENT);
	sq_queue_t nq = sq_queue_create("test.trace.notify", NULL);
	sq_queue_t sq = sq_queue_create("test.trace.source", NULL);
	sq_queue_t ioq = sq_queue_create("test.trace.io", NULL);

	for (int i = 0; i < 3; i++)
		sq_async_f(serial, NULL, serial_task);
	after_called_ns = sqt_now_ns();
	sq_after_f(sq_time(SQ_TIME_NOW, 5 * NSEC_PER_MSEC), serial, NULL,
			after_task);

	sq_source_t src = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, sq);
	sq_source_set_event_handler_f(src, source_handler);
	sq_source_set_registration_handler_f(src, source_handler);
	sq_resume(src);
	/* Registered, and its job over: the event's job is the merge's. */
	CHECK(wait_finished(1));
	sq_sync_f(sq, NULL, serial_task);
	sq_source_merge_data(src, 3);

	sq_group_t g = sq_group_create();
	for (int i = 0; i < 2; i++)
		sq_group_async_f(g, conc, NULL, member_task);
	sq_group_notify_f(g, nq, NULL, notify_task);
	sq_semaphore_signal(members_go);
	sq_semaphore_signal(members_go);

	/* A file bigger than the inline limit: read on an I/O thread. */
	char path[256];
	trace_path(path, sizeof(path), "input");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	static char buf[256 << 10];
	memset(buf, 'x', sizeof(buf));
	CHECK(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
	lseek(fd, 0, SEEK_SET);
	sq_io_t ch = sq_io_create_f(SQ_IO_RANDOM, fd, ioq, (void *)(intptr_t)fd,
			close_fd);
	sq_io_read_f(ch, 0, SIZE_MAX, ioq, NULL, io_handler);

	CHECK(wait_finished(4));
	sq_sync_f(serial, NULL, serial_task);
	sq_io_close(ch, 0);
	sq_release(ch);
	sq_source_cancel(src);
	sq_release(src);
	sq_release(g);
	sq_release(serial);
	sq_release(conc);
	sq_release(nq);
	sq_release(sq);
	sq_release(ioq);
}

static void
test_known_program(void)
{
	char path[256];
	trace_path(path, sizeof(path), "known.json");
	uint64_t start_ns = sqt_now_ns();
	CHECK_EQ(sq_trace_start(path), 0);
	CHECK(sq_trace_recording());
	run_known_program();
	CHECK_EQ(sq_trace_stop(), 0);
	uint64_t stop_ns = sqt_now_ns();
	CHECK(!sq_trace_recording());

	struct trace t;
	CHECK(trace_load(&t, path));
	if (t.events == NULL) {
		trace_free(&t);
		return;
	}
	check_structure(&t);

	/* Every event lies within the recording, on CLOCK_MONOTONIC. */
	int outside = 0;
	for (size_t i = 0; i < t.events->count; i++) {
		struct json *e = t.events->items[i];
		double ts = json_num(e, "ts", -1) * 1000;
		if (json_get(e, "ts") && (ts < (double)start_ns - 2000 ||
				ts + json_num(e, "dur", 0) * 1000 >
				(double)stop_ns + 2000))
			outside++;
	}
	CHECK_EQ(outside, 0);

	/* Named tracks. */
	CHECK(has_thread(&t, "main thread"));
	CHECK(has_thread(&t, "sq.worker 0"));
	CHECK(has_thread(&t, "sq.manager"));
	CHECK(has_thread(&t, "sq.io 0"));

	/* async: three slices named by the label, with the function, each
	 * the end of an arrow from a submission on the main thread. */
	for (int i = 0; i < 3; i++) {
		struct json *s = find_slice(&t, "test.trace.serial",
				"serial_task", i);
		CHECK(s != NULL);
		struct json *from = s ? flow_source(&t, s, false) : NULL;
		CHECK(from != NULL);
		CHECK(from && strcmp(json_str(from, "name"),
				"async to test.trace.serial") == 0);
		CHECK(from && strcmp(thread_name(&t, json_num(from, "tid", 0)),
				"main thread") == 0);
		CHECK(from && json_num(from, "ts", 0) <= json_num(s, "ts", 0));
	}
	/* The sync ran on the main thread, as the queue's work. */
	struct json *sync = find_slice(&t, "test.trace.serial", "serial_task",
			3);
	CHECK(sync && strcmp(json_str(sync, "cat"), "sync") == 0);

	/* after: sq_after_f -> the timer firing on the event loop -> run. */
	struct json *after = find_slice(&t, "test.trace.serial", "after_task",
			0);
	CHECK(after != NULL);
	struct json *fire = after ? flow_source(&t, after, true) : NULL;
	CHECK(fire != NULL);
	CHECK(fire && strcmp(json_str(fire, "name"), "after fires") == 0);
	CHECK(fire && strcmp(thread_name(&t, json_num(fire, "tid", 0)),
			"sq.manager") == 0);
	struct json *call = fire ? flow_source(&t, fire, false) : NULL;
	CHECK(call && strcmp(json_str(call, "name"),
			"after to test.trace.serial") == 0);
	/* Timestamps are CLOCK_MONOTONIC microseconds: the run is the 5 ms
	 * delay after the call (a few us of slack for the clock mapping). */
	CHECK(after && json_num(after, "ts", 0) * 1000 >=
			(double)after_called_ns + 5 * NSEC_PER_MSEC - 20000);

	/* A source's event: the merge (on the main thread), the submission
	 * inside it, the handler job and the handler inside that. (The
	 * source's registration may have queued a job of its own first.) */
	struct json *handler = find_slice(&t, "data add handler",
			"source_handler", 0);
	CHECK(handler != NULL);
	struct json *job = NULL;
	for (int i = 0; handler && !job && find_slice(&t, "test.trace.source",
			NULL, i); i++)
		if (nested_in(handler, find_slice(&t, "test.trace.source",
				NULL, i)))
			job = find_slice(&t, "test.trace.source", NULL, i);
	CHECK(job != NULL);
	struct json *sub = job ? flow_source(&t, job, false) : NULL;
	/* Named by its source's type and queue. */
	struct json *event = find_slice(&t, "event: data add on "
			"test.trace.source", NULL, 0);
	CHECK(event != NULL);
	CHECK(sub && event && nested_in(sub, event));
	CHECK(event && json_num(json_get(event, "args"), "data", 0) == 3);
	CHECK(event && strcmp(thread_name(&t, json_num(event, "tid", 0)),
			"main thread") == 0);

	/* A group's notification: submitted from within the last member. */
	struct json *notified = find_slice(&t, "test.trace.notify",
			"notify_task", 0);
	CHECK(notified != NULL);
	struct json *nsub = notified ? flow_source(&t, notified, false) : NULL;
	CHECK(nsub && strcmp(json_str(nsub, "name"),
			"notify to test.trace.notify") == 0);
	bool in_member = false;
	for (int i = 0; i < 2 && nsub; i++) {
		struct json *m = find_slice(&t, "test.trace.members",
				"member_task", i);
		if (m && nested_in(nsub, m))
			in_member = true;
	}
	CHECK(in_member);

	/* I/O: the chunk handed to an I/O thread, read there, and the
	 * handler's call delivered on the handler queue. */
	char want[64];
	snprintf(want, sizeof(want), "I/O read fd ");
	struct json *io = NULL;
	for (size_t i = 0; i < t.events->count && !io; i++) {
		struct json *e = t.events->items[i];
		if (strncmp(json_str(e, "name"), want, strlen(want)) == 0)
			io = e;
	}
	CHECK(io != NULL);
	CHECK(io && strncmp(thread_name(&t, json_num(io, "tid", 0)), "sq.io",
			5) == 0);
	struct json *iosub = io ? flow_source(&t, io, false) : NULL;
	CHECK(iosub && strncmp(json_str(iosub, "name"), "I/O to ", 7) == 0);
	struct json *called = find_slice(&t, "I/O handler", "io_handler", 0);
	CHECK(called != NULL);
	struct json *delivered = NULL;
	for (int i = 0; called && !delivered && find_slice(&t, "test.trace.io",
			NULL, i); i++)
		if (nested_in(called, find_slice(&t, "test.trace.io", NULL, i)))
			delivered = find_slice(&t, "test.trace.io", NULL, i);
	CHECK(delivered && flow_source(&t, delivered, false) != NULL);

	/* Pool events and counters, queue depth. */
	CHECK(count_named(&t, "C", "pool") > 0);
	CHECK(count_named(&t, "i", "spawn sq.worker") +
			count_named(&t, "i", "wake sq.worker") > 0);
	CHECK(count_named(&t, "C", "depth test.trace.serial") > 0);
	CHECK(json_num(json_get(t.doc, "otherData"), "dropped_events", -1)
			== 0);
	trace_free(&t);
}

/* ---- Phases: nothing outside a recording ------------------------------------- */

static void
run_labelled(const char *label, int n)
{
	sq_queue_t q = sq_queue_create(label, NULL);
	for (int i = 0; i < n; i++)
		sq_async_f(q, NULL, serial_task);
	sq_sync_f(q, NULL, serial_task);
	sq_release(q);
}

static bool
file_has(const char *path, const char *text)
{
	char *s = json_read_file(path);
	bool has = s && strstr(s, text) != NULL;
	free(s);
	return has;
}

static void
test_nothing_after_stop(void)
{
	char one[256], two[256];
	trace_path(one, sizeof(one), "phase1.json");
	trace_path(two, sizeof(two), "phase2.json");
	CHECK_EQ(sq_trace_start(one), 0);
	run_labelled("test.phase.one", 10);
	CHECK_EQ(sq_trace_stop(), 0);
	run_labelled("test.phase.two", 10);
	CHECK_EQ(sq_trace_start(two), 0);
	run_labelled("test.phase.three", 10);
	CHECK_EQ(sq_trace_stop(), 0);
	run_labelled("test.phase.four", 10);

	CHECK(file_has(one, "\"test.phase.one\""));
	CHECK(!file_has(one, "test.phase.two"));
	CHECK(!file_has(one, "test.phase.three"));
	CHECK(file_has(two, "\"test.phase.three\""));
	CHECK(!file_has(two, "test.phase.one"));
	CHECK(!file_has(two, "test.phase.two"));
	CHECK(!file_has(two, "test.phase.four"));
	check_file(two);
}

/* ---- QoS classes and raises ------------------------------------------------ */

static void
hold_task(void *arg)
{
	sq_semaphore_wait(arg, SQ_TIME_FOREVER);
}

static void
raised_caller(void *q)
{
	sq_sync_f(q, NULL, serial_task);
}

/* Each task slice names the class it ran at; a sync caller of a higher
 * class raises the queue it waits on, and the trace shows the raise. */
static void
test_qos(void)
{
	char path[256];
	trace_path(path, sizeof(path), "qos.json");
	CHECK_EQ(sq_trace_start(path), 0);
	sq_queue_t util = sq_queue_create("test.qos.utility",
			sq_queue_attr_make_with_qos_class(NULL,
			SQ_QOS_CLASS_UTILITY, 0));
	/* Waited for with a group: a sync from this (DEFAULT) thread would
	 * raise the queue and run the task here, at DEFAULT. */
	sq_group_t u = sq_group_create();
	sq_group_async_f(u, util, NULL, serial_task);
	CHECK_EQ(sq_group_wait(u, sq_time(SQ_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
	sq_release(u);
	/* A background queue, held by its first task; a USER_INITIATED
	 * task syncs onto it. */
	sq_queue_t bg = sq_queue_create_with_target("test.qos.held", NULL,
			sq_get_global_queue(SQ_QOS_CLASS_BACKGROUND, 0));
	sq_semaphore_t hold = sq_semaphore_create(0);
	sq_async_f(bg, hold, hold_task);
	sq_group_t g = sq_group_create();
	sq_group_async_f(g, sq_get_global_queue(SQ_QOS_CLASS_USER_INITIATED,
			0), bg, raised_caller);
	usleep(20000);
	sq_semaphore_signal(hold);
	CHECK_EQ(sq_group_wait(g, sq_time(SQ_TIME_NOW, 10 * NSEC_PER_SEC)), 0);
	CHECK_EQ(sq_trace_stop(), 0);
	CHECK(file_has(path, "\"qos\":\"utility\""));
	CHECK(file_has(path, "\"qos\":\"user-initiated\""));
	CHECK(file_has(path, "raise test.qos.held"));
	CHECK(file_has(path, "to user-initiated"));
	check_file(path);
	sq_release(g);
	sq_release(hold);
	sq_release(bg);
	sq_release(util);
}

/* ---- A tiny ring ------------------------------------------------------------- */

static void
test_tiny_ring(void)
{
	char path[256];
	trace_path(path, sizeof(path), "tiny.json");
	setenv("SQ_TRACE_BUFFER_KB", "1", 1); /* 32 records per thread */
	CHECK_EQ(sq_trace_start(path), 0);
	unsetenv("SQ_TRACE_BUFFER_KB");
	run_labelled("test.tiny", 500);
	CHECK_EQ(sq_trace_stop(), 0);

	struct trace t;
	CHECK(trace_load(&t, path));
	if (t.events == NULL) {
		trace_free(&t);
		return;
	}
	check_structure(&t);
	double dropped = json_num(json_get(t.doc, "otherData"),
			"dropped_events", 0);
	CHECK(dropped > 400); /* 500 submissions from one thread, 32 kept */
	struct json *wrapped = NULL;
	double said = 0;
	for (size_t i = 0; i < t.events->count; i++) {
		struct json *e = t.events->items[i];
		if (strcmp(json_str(e, "name"), "trace ring wrapped") == 0) {
			wrapped = e;
			said += json_num(json_get(e, "args"), "dropped_events",
					0);
		}
	}
	CHECK(wrapped != NULL);
	CHECK(said == dropped);
	/* The newest events are the ones kept: the last sync is there. */
	CHECK(find_slice(&t, "test.tiny", "serial_task", 0) != NULL);
	trace_free(&t);
}

/* ---- fork --------------------------------------------------------------------- */

static void
test_fork_child(void)
{
	char parent[256], child[256];
	trace_path(parent, sizeof(parent), "parent.json");
	trace_path(child, sizeof(child), "child.json");
	CHECK_EQ(sq_trace_start(parent), 0);
	run_labelled("test.fork.before", 5);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int bad = 0;
		in_fork_child = true;
		if (sq_trace_recording())
			bad |= 1;
		run_labelled("test.fork.child.untraced", 5);
		if (sq_trace_stop() != -1 || errno != EINVAL)
			bad |= 2;
		/* Recording anew in the child works, into its own file. */
		if (sq_trace_start(child) != 0)
			bad |= 4;
		run_labelled("test.fork.child.traced", 5);
		if (sq_trace_stop() != 0)
			bad |= 8;
		/* And exit() must not write the parent's file. */
		exit(bad);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	run_labelled("test.fork.after", 5);
	CHECK_EQ(sq_trace_stop(), 0);

	CHECK(file_has(parent, "\"test.fork.before\""));
	CHECK(file_has(parent, "\"test.fork.after\""));
	CHECK(!file_has(parent, "test.fork.child"));
	CHECK(file_has(child, "\"test.fork.child.traced\""));
	CHECK(!file_has(child, "test.fork.child.untraced"));
	CHECK(!file_has(child, "test.fork.before"));
	check_file(parent);
	check_file(child);
}

/* ---- SQ_TRACE ----------------------------------------------------------------- */

static int
child_under_env(void)
{
	run_labelled("test.env.work", 20);
	return 0; /* the trace is written at exit */
}

static void
test_environment(const char *self)
{
	char pattern[256], expected[256];
	trace_path(pattern, sizeof(pattern), "env-%p.json");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		setenv("SQ_TRACE", pattern, 1);
		execl(self, self, "--env-child", (char *)NULL);
		_exit(127);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(expected, sizeof(expected), "%s/env-%d.json", dir, (int)pid);
	CHECK(file_has(expected, "\"test.env.work\""));
	check_file(expected);
}

/* ---- Errors ------------------------------------------------------------------- */

static void
test_errors(void)
{
	errno = 0;
	CHECK_EQ(sq_trace_start(NULL), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(sq_trace_start(""), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(sq_trace_start("/nonexistent-dir-sq/trace.json"), -1);
	CHECK_EQ(errno, ENOENT);
	CHECK(!sq_trace_recording());
	CHECK_EQ(sq_trace_stop(), -1);
	CHECK_EQ(errno, EINVAL);
	char path[256];
	trace_path(path, sizeof(path), "busy.json");
	CHECK_EQ(sq_trace_start(path), 0);
	CHECK_EQ(sq_trace_start(path), -1);
	CHECK_EQ(errno, EBUSY);
	CHECK_EQ(sq_trace_stop(), 0);
}

int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--env-child") == 0)
		return child_under_env();
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	/* Under SQ_TRACE (the suite run with it set) this process records
	 * from the start; these tests need to start and stop their own. */
	if (sq_trace_recording())
		sq_trace_stop();
	finished = sq_semaphore_create(0);
	members_go = sq_semaphore_create(0);
	test_errors();
	test_known_program();
	test_nothing_after_stop();
	test_qos();
	test_tiny_ring();
	test_fork_child();
	test_environment("/proc/self/exe");
	sq_release(finished);
	/* The traces stay for a look when a check failed. */
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (sqt_failed)
		fprintf(stderr, "test_trace: traces kept in %s\n", dir);
	else if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return sqt_finish("test_trace");
}
