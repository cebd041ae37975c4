/*
 * sq_debug, sq_debugv and sq_object_describe: libdispatch's upstream test
 * "debug" (tests/dispatch_debug.c) ported by renaming, the text of each
 * kind of object's description, where SQ_LOG sends the lines, and the
 * snprintf rules of the buffer form (truncation, size 0, NULL).
 */
#include "child_helpers.h"

#include <sys/stat.h>

/* ---- libdispatch's test, renamed ------------------------------------------ */

static void
upstream_debug(void *unused)
{
	setenv("SQ_LOG", "stderr", 1);

	sq_queue_t main_q = sq_get_main_queue();
	sq_debug(main_q, "sq_queue_t");

	sq_queue_t default_q = sq_get_global_queue(0, 0);
	sq_debug(default_q, "sq_queue_t");

	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, main_q);
	sq_source_set_timer(s, SQ_TIME_FOREVER, 1000000000ull, 100);
	sq_debug(s, "sq_source_t");

	sq_group_t g = sq_group_create();
	sq_debug(g, "sq_group_t");
}

/* The line of `out` that contains `needle`, copied into line. */
static bool
find_line(const char *out, const char *needle, char *line, size_t size)
{
	const char *p = strstr(out, needle);
	if (p == NULL)
		return false;
	while (p > out && p[-1] != '\n')
		p--;
	const char *end = strchr(p, '\n');
	size_t n = end ? (size_t)(end - p) : strlen(p);
	if (n >= size)
		n = size - 1;
	memcpy(line, p, n);
	line[n] = '\0';
	return true;
}

static void
test_upstream_port(void)
{
	struct sqt_child c;
	sqt_child_start(&c, upstream_debug, NULL, NULL);
	CHECK(sqt_child_read_until(&c, NULL, 0, 20000));
	int status = sqt_child_stop(&c);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(sqt_count(c.out, "\n"), 4);

	char line[1024];
	CHECK(find_line(c.out, "main-thread", line, sizeof(line)));
	CHECK(strncmp(line, "queue[0x", 8) == 0);
	CHECK(strstr(line, "xref = immortal, ref = immortal") != NULL);
	CHECK(strstr(line, "label = 'com.swiftqueues.main-thread', "
			"kind = main") != NULL);
	CHECK(strstr(line, "queued = 0, running = 0 }: sq_queue_t") != NULL);

	CHECK(find_line(c.out, "root.default", line, sizeof(line)));
	CHECK(strstr(line, "kind = global, queued = 0 }: sq_queue_t") != NULL);

	CHECK(find_line(c.out, "sq_source_t", line, sizeof(line)));
	CHECK(strncmp(line, "source[0x", 9) == 0);
	CHECK(strstr(line, "xref = 1, ") != NULL);
	CHECK(strstr(line, "type = timer, handle = 0, mask = 0, target = "
			"'com.swiftqueues.main-thread'") != NULL);
	CHECK(strstr(line, "inactive = 1, cancelled = 0, registered = 0") !=
			NULL);
	CHECK(strstr(line, "timer = { start = forever, interval = 1000000000 "
			"ns, leeway = 100 ns } }: sq_source_t") != NULL);

	CHECK(find_line(c.out, "sq_group_t", line, sizeof(line)));
	CHECK(strncmp(line, "group[0x", 8) == 0);
	CHECK(strstr(line, "= { xref = 1, ref = 1, count = 0, waiters = 0, "
			"notifications = 0, generation = 0 }: sq_group_t")
			!= NULL);
}

/* ---- SQ_LOG ------------------------------------------------------------------ */

static void
log_off(void *unused)
{
	setenv("SQ_LOG", "NO", 1);
	sq_debug(sq_get_main_queue(), "nothing");
	fprintf(stderr, "done\n");
}

static void
log_file(void *unused)
{
	setenv("SQ_LOG", "file", 1);
	sq_debug(NULL, "to the file %d", 7);
	fprintf(stderr, "done\n");
}

static void
test_sq_log(void)
{
	struct sqt_child c;
	sqt_child_start(&c, log_off, NULL, NULL);
	CHECK(sqt_child_read_until(&c, NULL, 0, 20000));
	sqt_child_stop(&c);
	CHECK(strcmp(c.out, "done\n") == 0);

	sqt_child_start(&c, log_file, NULL, NULL);
	pid_t pid = c.pid;
	CHECK(sqt_child_read_until(&c, NULL, 0, 20000));
	sqt_child_stop(&c);
	CHECK(strcmp(c.out, "done\n") == 0);
	char path[64], text[512] = "";
	snprintf(path, sizeof(path), "/var/tmp/swiftqueues.%d.log", (int)pid);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	if (f) {
		size_t n = fread(text, 1, sizeof(text) - 1, f);
		text[n] = '\0';
		fclose(f);
		unlink(path);
	}
	char header[128];
	snprintf(header, sizeof(header), "=== log file opened for test_debug[%d]"
			" at ", (int)pid);
	CHECK(strncmp(text, header, strlen(header)) == 0);
	CHECK(strstr(text, " ===\nNULL: to the file 7\n") != NULL);
}

/* ---- In this process: stderr through a pipe ------------------------------ */

static int saved_stderr = -1, capture_fd = -1;

static void
capture_begin(void)
{
	int p[2];
	if (pipe(p) != 0) {
		perror("pipe");
		exit(2);
	}
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	capture_fd = p[0];
}

static void
capture_end(char *out, size_t size)
{
	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	size_t len = 0;
	ssize_t n;
	while (len < size - 1 && (n = read(capture_fd, out + len,
			size - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(capture_fd);
}

static void
nothing(void *ctx)
{
}

static void
debug_v(sq_object_t o, const char *format, ...)
{
	va_list ap;
	va_start(ap, format);
	sq_debugv(o, format, ap);
	va_end(ap);
}

static sq_semaphore_t gate;

static void
wait_gate(void *ctx)
{
	sq_semaphore_signal(ctx);
	sq_semaphore_wait(gate, SQ_TIME_FOREVER);
}

static void
test_descriptions(void)
{
	char out[8192], line[1024];
	sq_queue_t q = sq_queue_create("com.example.debug.serial", NULL);
	sq_suspend(q);
	for (int i = 0; i < 3; i++)
		sq_async_f(q, NULL, nothing);
	sq_queue_t c = sq_queue_create("com.example.debug.concurrent",
			sq_queue_attr_make_initially_inactive(
			SQ_QUEUE_CONCURRENT));
	sq_queue_t inner = sq_queue_create_with_target(
			"com.example.debug.inner", NULL, q);

	/* A queue whose drainer is inside a task: counted all the same. */
	gate = sq_semaphore_create(0);
	sq_semaphore_t started = sq_semaphore_create(0);
	sq_queue_t busy = sq_queue_create("com.example.debug.busy", NULL);
	sq_async_f(busy, started, wait_gate);
	sq_async_f(busy, NULL, nothing);
	sq_async_f(busy, NULL, nothing);
	sq_semaphore_wait(started, SQ_TIME_FOREVER);

	sq_semaphore_t sem = sq_semaphore_create(5);
	sq_workitem_t item = sq_workitem_create_f(SQ_WORKITEM_BARRIER, NULL,
			nothing);
	sq_data_t d = sq_data_create_f("hello", 5, NULL,
			SQ_DATA_DESTRUCTOR_DEFAULT);
	int p[2];
	CHECK(pipe(p) == 0);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, p[0], NULL, NULL, NULL);

	capture_begin();
	sq_debug(q, "serial %d and %s", 42, "more");
	debug_v(c, "through %s", "sq_debugv");
	sq_debug(inner, "inner");
	sq_debug(busy, "busy");
	sq_debug(sem, "semaphore");
	sq_debug(item, "item");
	sq_debug(d, "data");
	sq_debug(ch, "channel");
	sq_debug(NULL, "null %u", 3u);
	capture_end(out, sizeof(out));

	CHECK_EQ(sqt_count(out, "\n"), 9);
	CHECK(find_line(out, "serial 42", line, sizeof(line)));
	CHECK(strncmp(line, "queue[0x", 8) == 0);
	CHECK(strstr(line, "= { xref = 1, ref = ") != NULL);
	CHECK(strstr(line, "label = 'com.example.debug.serial', kind = "
			"serial, target = 'com.swiftqueues.root.default', "
			"state = 0x0000000100000000, suspended = 1, inactive = 0, "
			"queued = 3, running = 0 }: serial 42 and more") != NULL);
	CHECK(find_line(out, "sq_debugv", line, sizeof(line)));
	CHECK(strstr(line, "kind = concurrent, target = 'com.swiftqueues.root."
			"default', state = 0x0000000000000002, suspended = 0, "
			"inactive = 1, queued = 0, running = 0 }: through "
			"sq_debugv") != NULL);
	CHECK(find_line(out, ": inner", line, sizeof(line)));
	CHECK(strstr(line, "target = 'com.example.debug.serial'") != NULL);
	CHECK(find_line(out, ": busy", line, sizeof(line)));
	CHECK(strstr(line, "queued = 2, running = 1 }") != NULL);
	CHECK(find_line(out, ": semaphore", line, sizeof(line)));
	CHECK(strncmp(line, "semaphore[0x", 12) == 0);
	CHECK(strstr(line, "value = 5, created with = 5 }") != NULL);
	CHECK(find_line(out, ": item", line, sizeof(line)));
	CHECK(strstr(line, "work item[0x") == line);
	CHECK(strstr(line, "started = 0, finished = 0, cancelled = 0, "
			"waiters = 0, notifications = 0, barrier = 1 }") != NULL);
	CHECK(find_line(out, ": data", line, sizeof(line)));
	CHECK(strstr(line, "size = 5, regions = 1 }") != NULL);
	CHECK(find_line(out, ": channel", line, sizeof(line)));
	char expect[128];
	snprintf(expect, sizeof(expect), "type = stream, fd = %d, queue = "
			"'com.swiftqueues.io', closed = 0", p[0]);
	CHECK(strstr(line, expect) != NULL);
	CHECK(strstr(out, "\nNULL: null 3\n") != NULL);

	sq_semaphore_signal(gate);
	sq_resume(q);
	sq_activate(c);
	sq_sync_f(busy, NULL, nothing);
	sq_sync_f(q, NULL, nothing);
	sq_io_close(ch, SQ_IO_STOP);
	sq_release(ch);
	close(p[1]);
	sq_release(inner);
	sq_release(q);
	sq_release(c);
	sq_release(busy);
	sq_release(sem);
	sq_release(started);
	sq_release(item);
	sq_release(d);
}

/* ---- sq_object_describe -------------------------------------------------- */

static void
test_describe_buffer(void)
{
	sq_queue_t q = sq_queue_create("com.example.describe", NULL);
	char full[1024];
	size_t n = sq_object_describe(q, full, sizeof(full));
	CHECK_EQ(n, strlen(full));
	CHECK(strncmp(full, "queue[0x", 8) == 0);
	CHECK(strstr(full, "label = 'com.example.describe'") != NULL);
	CHECK(full[n - 1] == '}');

	/* Cut short: size - 1 characters and a NUL; the full length back. */
	char small[16];
	memset(small, 'x', sizeof(small));
	CHECK_EQ(sq_object_describe(q, small, 10), n);
	CHECK_EQ(strlen(small), 9);
	CHECK(strncmp(small, full, 9) == 0);
	CHECK(small[10] == 'x'); /* nothing written past size */

	char one[1] = { 'x' };
	CHECK_EQ(sq_object_describe(q, one, 1), n);
	CHECK(one[0] == '\0');

	/* Size 0: nothing written, even with a NULL buffer. */
	CHECK_EQ(sq_object_describe(q, NULL, 0), n);
	CHECK_EQ(sq_object_describe(q, small, 0), n);
	CHECK(small[0] == full[0]);

	/* A NULL object. */
	CHECK_EQ(sq_object_describe(NULL, small, sizeof(small)), 4);
	CHECK(strcmp(small, "NULL") == 0);
	CHECK_EQ(sq_object_describe(NULL, small, 3), 4);
	CHECK(strcmp(small, "NU") == 0);

	/* A long label is cut, not overrun. */
	char label[3000];
	memset(label, 'L', sizeof(label) - 1);
	label[sizeof(label) - 1] = '\0';
	sq_queue_t longq = sq_queue_create(label, NULL);
	char big[4096];
	n = sq_object_describe(longq, big, sizeof(big));
	CHECK(n > 3000 && n < sizeof(big));
	CHECK_EQ(strlen(big), n);
	capture_begin();
	sq_debug(longq, "long");
	char out[8192];
	capture_end(out, sizeof(out));
	CHECK(strlen(out) <= 2047);
	CHECK(out[strlen(out) - 1] == '\n');

	sq_release(longq);
	sq_release(q);
}

int
main(void)
{
	/* Children first: they start runtimes of their own. */
	test_upstream_port();
	test_sq_log();
	test_descriptions();
	test_describe_buffer();
	return sqt_finish("debug");
}
