/*
 * Out of descriptors (RLIMIT_NOFILE): every call that needs one fails in a
 * way the program sees, and the process goes on; queued work still runs;
 * once descriptors are free the same calls succeed. Each scenario runs in a
 * child with a low limit and every descriptor taken:
 *
 *   - cold: before the runtime's first use. Read, signal, file-system and
 *     process sources fail with EMFILE (the event loop cannot start: before,
 *     libevent's fatal path ended the process with exit status 1), and so
 *     does a stream channel's read that has to wait (in its handler, with
 *     NULL data); timers, data sources and sq_after wait for the loop and
 *     fire once descriptors are back; sq_main_queue_fd fails with EMFILE
 *     while the main queue itself works; no libevent line on stderr.
 *   - stepwise: descriptors given back one at a time before the first
 *     source: the loop starts exactly when its six are there, and a failed
 *     start holds no descriptor but its own wake-up eventfd.
 *   - warm: with the loop running, a process source, the first signal and
 *     file-system sources and a path channel's open fail with EMFILE (the
 *     channel's handler gets it), while timers, sq_after, new descriptor
 *     sources and a source made before keep working.
 */
#include "limit_helpers.h"

#include <stdatomic.h>

#define LIMIT 128

static int fillers[LIMIT];
static int nfillers;
static char tmp_path[] = "/tmp/sq-limit-XXXXXX";

/* Lowers the limit and takes every descriptor left. */
static void
fill_descriptors(void)
{
	struct rlimit rl = { LIMIT, LIMIT };
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		perror("setrlimit");
		_exit(2);
	}
	nfillers = 0;
	int fd;
	while ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		fillers[nfillers++] = fd;
	CHECK_EQ(errno, EMFILE);
}

static void
free_descriptors(void)
{
	while (nfillers > 0)
		close(fillers[--nfillers]);
}

/* A child process that exits once told (a byte on its gate). */
static pid_t
spawn_waiter(int *gate)
{
	int p[2];
	if (pipe(p) != 0)
		_exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(p[1]);
		while (read(p[0], &c, 1) < 0 && errno == EINTR) {
		}
		_exit(0);
	}
	close(p[0]);
	*gate = p[1];
	return pid;
}

/* ---- handlers ----------------------------------------------------------- */

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

static atomic_int main_ran;

static void
on_main(void *ctx)
{
	atomic_store(&main_ran, 1);
}

static bool
main_ran_yet(void *ctx)
{
	return atomic_load(&main_ran) != 0;
}

/* A source with a registration, an event and a cancel semaphore. */
struct watched {
	sq_source_t src;
	sq_semaphore_t reg, event, cancelled;
};

static void
watched_reg(void *ctx)
{
	sq_semaphore_signal(((struct watched *)ctx)->reg);
}

static void
watched_event(void *ctx)
{
	sq_semaphore_signal(((struct watched *)ctx)->event);
}

static void
watched_cancel(void *ctx)
{
	sq_semaphore_signal(((struct watched *)ctx)->cancelled);
}

static bool
watch(struct watched *w, sq_source_type_t type, uintptr_t handle,
		uintptr_t mask)
{
	errno = 0;
	w->src = sq_source_create(type, handle, mask, NULL);
	if (w->src == NULL)
		return false;
	w->reg = sq_semaphore_create(0);
	w->event = sq_semaphore_create(0);
	w->cancelled = sq_semaphore_create(0);
	sq_set_context(w->src, w);
	sq_source_set_registration_handler_f(w->src, watched_reg);
	sq_source_set_event_handler_f(w->src, watched_event);
	sq_source_set_cancel_handler_f(w->src, watched_cancel);
	sq_activate(w->src);
	return true;
}

/* Cancels the source and waits for its cancel handler, which runs after
 * its last event handler (a read source whose data stays unread keeps
 * delivering until then). */
static void
unwatch(struct watched *w)
{
	sq_source_cancel(w->src);
	CHECK(sem_wait_ms(w->cancelled, 10000));
	sq_release(w->src);
	sq_release(w->reg);
	sq_release(w->event);
	sq_release(w->cancelled);
}

/* Creating a source of `type` fails with `err`. */
static void
check_refused(sq_source_type_t type, uintptr_t handle, uintptr_t mask,
		int err)
{
	errno = 0;
	sq_source_t s = sq_source_create(type, handle, mask, NULL);
	CHECK(s == NULL);
	CHECK_EQ(errno, err);
	if (s)
		sq_release(s);
}

/* The timer / after pair that must wait for the loop. */
struct waiting {
	sq_source_t timer;
	sq_semaphore_t fired, after;
};

static void
waiting_start(struct waiting *w)
{
	w->fired = sq_semaphore_create(0);
	w->after = sq_semaphore_create(0);
	errno = 0;
	w->timer = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, NULL);
	CHECK(w->timer != NULL);
	if (w->timer) {
		sq_set_context(w->timer, w->fired);
		sq_source_set_event_handler_f(w->timer, signal_sem);
		sq_source_set_timer(w->timer, sq_time(SQ_TIME_NOW, 10 * MS),
				SQ_TIME_FOREVER, 0);
		sq_activate(w->timer);
	}
	sq_after_f(sq_time(SQ_TIME_NOW, 20 * MS), sq_get_global_queue(0, 0),
			w->after, signal_sem);
}

static void
waiting_end(struct waiting *w)
{
	if (w->timer) {
		sq_source_cancel(w->timer);
		sq_release(w->timer);
	}
	settle();
	sq_release(w->fired);
	sq_release(w->after);
}

/* Queued work runs without a descriptor: 100 jobs and a group wait. */
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

struct io_result {
	sq_semaphore_t done;
	int error;
	size_t bytes;
	bool null_at_end;
};

static void
io_handler(void *ctx, bool done, sq_data_t data, int error)
{
	struct io_result *r = ctx;
	if (data)
		r->bytes += sq_data_get_size(data);
	if (done) {
		r->error = error;
		r->null_at_end = data == NULL;
		sq_semaphore_signal(r->done);
	}
}

/* Reads up to `length` bytes from a channel; returns the error. */
static int
read_channel(sq_io_t ch, size_t length, size_t *bytes, bool *null_at_end)
{
	struct io_result r = { sq_semaphore_create(0), -1, 0, false };
	sq_io_read_f(ch, 0, length, sq_get_global_queue(0, 0), &r,
			io_handler);
	CHECK(sem_wait_ms(r.done, 10000));
	sq_release(r.done);
	*bytes = r.bytes;
	if (null_at_end)
		*null_at_end = r.null_at_end;
	return r.error;
}

/* ---- cold: no descriptor before the runtime's first use ------------------ */

static void
cold(void)
{
	int p[2], sp[2];
	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(pipe(sp), 0);
	int file = mkstemp(tmp_path);
	CHECK(file >= 0);
	int gate;
	pid_t child = spawn_waiter(&gate);

	fill_descriptors();
	check_refused(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0, EMFILE);
	/* A stream channel's read that has to wait needs a source: the
	 * handler gets EMFILE (and NULL data). */
	sq_io_t stream = sq_io_create_f(SQ_IO_STREAM, sp[0], NULL, NULL, NULL);
	size_t got = 0;
	bool null_at_end = false;
	CHECK_EQ(read_channel(stream, 1, &got, &null_at_end), EMFILE);
	CHECK(null_at_end);
	check_refused(SQ_SOURCE_TYPE_WRITE, (uintptr_t)p[1], 0, EMFILE);
	check_refused(SQ_SOURCE_TYPE_SIGNAL, SIGUSR1, 0, EMFILE);
	check_refused(SQ_SOURCE_TYPE_VNODE, (uintptr_t)file, SQ_VNODE_WRITE,
			EMFILE);
	check_refused(SQ_SOURCE_TYPE_PROC, (uintptr_t)child, SQ_PROC_EXIT,
			EMFILE);
	check_work_runs();

	/* Timers, data sources and afters are made, and wait. */
	struct waiting w;
	waiting_start(&w);
	sq_source_t data = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0,
			NULL);
	CHECK(data != NULL);
	sq_semaphore_t data_sem = sq_semaphore_create(0);
	if (data) {
		sq_set_context(data, data_sem);
		sq_source_set_event_handler_f(data, signal_sem);
		sq_activate(data);
		sq_source_merge_data(data, 3);
	}

	/* The main queue needs no descriptor; its eventfd does. */
	errno = 0;
	CHECK_EQ(sq_main_queue_fd(), -1);
	CHECK_EQ(errno, EMFILE);
	sq_async_f(sq_get_main_queue(), NULL, on_main);
	CHECK(sq_main_queue_run_until(sq_time(SQ_TIME_NOW, 10000 * MS),
			main_ran_yet, NULL));

	/* Nothing fires without the loop (the check is meaningful). */
	sqt_sleep_ms(200);
	CHECK(!sem_wait_ms(w.fired, 0));
	CHECK(!sem_wait_ms(w.after, 0));
	CHECK_EQ(sq_main_queue_fd(), -1);
	check_refused(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0, EMFILE);

	/* Descriptors back: the loop starts on the monitor's retry, what
	 * waited fires, and the same calls succeed. */
	free_descriptors();
	CHECK(sem_wait_ms(w.fired, 10000));
	CHECK(sem_wait_ms(w.after, 10000));
	CHECK(sem_wait_ms(data_sem, 10000));
	CHECK(sq_main_queue_fd() >= 0);
	CHECK_EQ(write(sp[1], "z", 1), 1);
	CHECK_EQ(read_channel(stream, 1, &got, NULL), 0);
	CHECK_EQ(got, 1);
	sq_io_close(stream, 0);
	sq_release(stream);

	struct watched rd, sig, vn, proc;
	CHECK(watch(&rd, SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0));
	CHECK(sem_wait_ms(rd.reg, 10000));
	CHECK_EQ(write(p[1], "x", 1), 1);
	CHECK(sem_wait_ms(rd.event, 10000));
	CHECK(watch(&sig, SQ_SOURCE_TYPE_SIGNAL, SIGUSR1, 0));
	CHECK(sem_wait_ms(sig.reg, 10000));
	kill(getpid(), SIGUSR1);
	CHECK(sem_wait_ms(sig.event, 10000));
	CHECK(watch(&vn, SQ_SOURCE_TYPE_VNODE, (uintptr_t)file,
			SQ_VNODE_WRITE));
	CHECK(sem_wait_ms(vn.reg, 10000));
	CHECK_EQ(write(file, "y", 1), 1);
	CHECK(sem_wait_ms(vn.event, 10000));
	CHECK(watch(&proc, SQ_SOURCE_TYPE_PROC, (uintptr_t)child,
			SQ_PROC_EXIT));
	CHECK(sem_wait_ms(proc.reg, 10000));
	close(gate);
	CHECK(sem_wait_ms(proc.event, 10000));
	waitpid(child, NULL, 0);

	unwatch(&rd);
	unwatch(&sig);
	unwatch(&vn);
	unwatch(&proc);
	waiting_end(&w);
	if (data) {
		sq_source_cancel(data);
		sq_release(data);
	}
	unlink(tmp_path);
}

/* ---- stepwise: descriptors back one at a time ----------------------------- */

static void
stepwise(void)
{
	int p[2];
	CHECK_EQ(pipe(p), 0);
	fill_descriptors();
	int full = sqt_open_fds();
	/* The loop needs its wake-up eventfd, then five for libevent's base
	 * (epoll, timerfd, a pipe, an eventfd); a failed start keeps the
	 * eventfd and nothing else. */
	for (int given = 0; given <= 6; given++) {
		if (given > 0)
			close(fillers[--nfillers]);
		errno = 0;
		sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_READ,
				(uintptr_t)p[0], 0, NULL);
		if (given < 6) {
			CHECK(s == NULL);
			CHECK_EQ(errno, EMFILE);
			CHECK_EQ(sqt_open_fds(), full - (given > 0 ? given - 1
					: 0));
		} else {
			CHECK(s != NULL);
		}
		if (s)
			sq_release(s);
	}
	free_descriptors();
	struct watched rd;
	CHECK(watch(&rd, SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0));
	CHECK(sem_wait_ms(rd.reg, 10000));
	CHECK_EQ(write(p[1], "x", 1), 1);
	CHECK(sem_wait_ms(rd.event, 10000));
	unwatch(&rd);
}

/* ---- warm: the loop runs, then descriptors run out ----------------------- */

/* Reads the temporary file through a path channel; returns the error. */
static int
read_path(size_t *bytes)
{
	sq_io_t ch = sq_io_create_with_path_f(SQ_IO_STREAM, tmp_path,
			O_RDONLY, 0, NULL, NULL, NULL);
	CHECK(ch != NULL);
	if (ch == NULL)
		return -1;
	bool null_at_end = false;
	int err = read_channel(ch, SIZE_MAX, bytes, &null_at_end);
	if (err != 0)
		CHECK(null_at_end); /* an error ends a read with NULL data */
	sq_io_close(ch, 0);
	sq_release(ch);
	return err;
}

static void
warm(void)
{
	int p[2], q[2];
	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(pipe(q), 0);
	int file = mkstemp(tmp_path);
	CHECK(file >= 0);
	CHECK_EQ(write(file, "hello", 5), 5);
	int gate;
	pid_t child = spawn_waiter(&gate);
	struct watched before;
	CHECK(watch(&before, SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0));
	CHECK(sem_wait_ms(before.reg, 10000));

	fill_descriptors();
	check_refused(SQ_SOURCE_TYPE_PROC, (uintptr_t)child, SQ_PROC_EXIT,
			EMFILE);
	check_refused(SQ_SOURCE_TYPE_SIGNAL, SIGUSR2, 0, EMFILE);
	check_refused(SQ_SOURCE_TYPE_VNODE, (uintptr_t)file, SQ_VNODE_WRITE,
			EMFILE);
	size_t bytes = 0;
	CHECK_EQ(read_path(&bytes), EMFILE);
	CHECK_EQ(bytes, 0);
	errno = 0;
	CHECK_EQ(sq_main_queue_fd(), -1);
	CHECK_EQ(errno, EMFILE);
	check_work_runs();

	/* What needs only the loop works: timers, afters, a new source on
	 * a descriptor the program has, the source made before. */
	struct waiting w;
	waiting_start(&w);
	CHECK(sem_wait_ms(w.fired, 10000));
	CHECK(sem_wait_ms(w.after, 10000));
	struct watched rd;
	CHECK(watch(&rd, SQ_SOURCE_TYPE_READ, (uintptr_t)q[0], 0));
	CHECK(sem_wait_ms(rd.reg, 10000));
	CHECK_EQ(write(q[1], "x", 1), 1);
	CHECK(sem_wait_ms(rd.event, 10000));
	CHECK_EQ(write(p[1], "x", 1), 1);
	CHECK(sem_wait_ms(before.event, 10000));

	/* Descriptors back: the same calls succeed. */
	free_descriptors();
	struct watched sig, vn, proc;
	CHECK(watch(&sig, SQ_SOURCE_TYPE_SIGNAL, SIGUSR2, 0));
	CHECK(sem_wait_ms(sig.reg, 10000));
	kill(getpid(), SIGUSR2);
	CHECK(sem_wait_ms(sig.event, 10000));
	CHECK(watch(&vn, SQ_SOURCE_TYPE_VNODE, (uintptr_t)file,
			SQ_VNODE_WRITE));
	CHECK(sem_wait_ms(vn.reg, 10000));
	CHECK(watch(&proc, SQ_SOURCE_TYPE_PROC, (uintptr_t)child,
			SQ_PROC_EXIT));
	CHECK(sem_wait_ms(proc.reg, 10000));
	close(gate);
	CHECK(sem_wait_ms(proc.event, 10000));
	waitpid(child, NULL, 0);
	CHECK_EQ(read_path(&bytes), 0);
	CHECK_EQ(bytes, 5);
	CHECK(sq_main_queue_fd() >= 0);

	unwatch(&before);
	unwatch(&rd);
	unwatch(&sig);
	unwatch(&vn);
	unwatch(&proc);
	waiting_end(&w);
	unlink(tmp_path);
}

int
main(void)
{
	sqt_run_child("cold", cold, NULL);
	sqt_run_child("stepwise", stepwise, NULL);
	sqt_run_child("warm", warm, NULL);
	return sqt_finish("test_limit_nofile");
}
