/*
 * fork(): the child starts with a fresh runtime.
 *
 * Every child mode runs twice: first while the parent has used queues only
 * (workers started, no event loop), then while the parent has a SIGTERM
 * signal source, a repeating precise timer (250 us, leeway 0), a read
 * source, a pending sq_after and a stream I/O channel. In each, children:
 *   - that never touch the runtime: three SIGTERMs kill them (the default
 *     action is back), and the parent's SIGTERM source counts none;
 *   - use global and serial queues (sq_async_f, sq_sync_f), a serial queue
 *     made in the parent, sq_after, a timer, a signal source (SIGUSR1 to
 *     itself), a read source, sq_read / sq_write on a pipe and sq_read of a
 *     regular file (the I/O threads), an I/O channel, the main queue;
 *   - use a source or channel made in the parent: the process stops with a
 *     "SwiftQueues:" message (and sq_release of them is allowed).
 * Each child must finish within seconds: a hang is killed and fails.
 *
 * Under ThreadSanitizer, a child that starts threads after a multi-threaded
 * fork needs die_after_fork=0 (set below): TSan does not support it in
 * general, but the child here starts from one thread with every runtime
 * structure reset, which is the case it can follow.
 */
#include "queue_helpers.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#if SQT_TSAN
const char *__tsan_default_options(void);
const char *
__tsan_default_options(void)
{
	return "die_after_fork=0";
}
#endif

#define MS 1000000ull

static sem_t child_sem;

static void
post_sem(void *ctx)
{
	sem_post(ctx);
}

/* ---- child modes: each returns 0 on success -------------------------------- */

static int
mode_global_async(void)
{
	for (int i = 0; i < 10; i++)
		sq_async_f(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
				&child_sem, post_sem);
	for (int i = 0; i < 10; i++)
		if (!sqt_sem_wait_ms(&child_sem, 5000))
			return 10;
	return 0;
}

static sq_queue_t parent_serial; /* made in the parent, idle at fork */

static atomic_int serial_seen;

static void
serial_step(void *ctx)
{
	atomic_fetch_add(&serial_seen, 1);
}

static int
mode_serial(void)
{
	sq_queue_t q = sq_queue_create("child.serial", NULL);
	for (int i = 0; i < 100; i++)
		sq_async_f(q, NULL, serial_step);
	sq_async_f(q, &child_sem, post_sem);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 20;
	sq_sync_f(q, NULL, serial_step);
	sq_release(q);
	if (atomic_load(&serial_seen) != 101)
		return 21;
	/* The parent's serial queue, idle at the fork, works as a queue. */
	sq_async_f(parent_serial, NULL, serial_step);
	sq_async_f(parent_serial, &child_sem, post_sem);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 22;
	return atomic_load(&serial_seen) == 102 ? 0 : 23;
}

static int
mode_after(void)
{
	uint64_t t0 = sqt_now_ns();
	sq_after_f(sq_time(SQ_TIME_NOW, 20 * MS),
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
			&child_sem, post_sem);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 30;
	return sqt_now_ns() - t0 >= 20 * MS ? 0 : 31;
}

static atomic_int timer_fires;

static void
timer_tick(void *ctx)
{
	if (atomic_fetch_add(&timer_fires, 1) == 4)
		sem_post(&child_sem);
}

static int
mode_timer(void)
{
	sq_source_t t = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, NULL);
	sq_source_set_event_handler_f(t, timer_tick);
	sq_source_set_timer(t, SQ_TIME_NOW, 10 * MS, 0);
	sq_activate(t);
	bool ok = sqt_sem_wait_ms(&child_sem, 5000);
	sq_source_cancel(t);
	sq_release(t);
	return ok ? 0 : 40;
}

static atomic_ulong child_usr1;

static void
usr1_handler(void *ctx)
{
	atomic_fetch_add(&child_usr1, sq_source_get_data(ctx));
	sem_post(&child_sem);
}

static void
pipe_readable(void *ctx)
{
	sem_post(&child_sem);
}

static int
mode_sources(void)
{
	sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGUSR1, 0,
			NULL);
	sq_set_context(s, s);
	sq_source_set_event_handler_f(s, usr1_handler);
	sq_activate(s);
	sqt_sleep_ms(50); /* registered */
	/* Blocked here, so the runtime's signal thread takes it. (Under
	 * TSan it must: after a multi-threaded fork TSan stops running the
	 * forking thread's interceptors, so a signal handler deferred on it
	 * would never run.) */
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	kill(getpid(), SIGUSR1);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 50;
	if (atomic_load(&child_usr1) != 1)
		return 51;
	sq_source_cancel(s);
	sq_release(s);

	int fds[2];
	if (pipe(fds) != 0)
		return 52;
	sq_source_t r = sq_source_create(SQ_SOURCE_TYPE_READ,
			(uintptr_t)fds[0], 0, NULL);
	sq_source_set_event_handler_f(r, pipe_readable);
	sq_activate(r);
	if (write(fds[1], "x", 1) != 1)
		return 53;
	bool ok = sqt_sem_wait_ms(&child_sem, 5000);
	sq_source_set_cancel_handler_f(r, post_sem);
	sq_set_context(r, &child_sem);
	sq_source_cancel(r);
	sq_release(r);
	/* Closed once the loop has let go of the descriptor. */
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 55;
	close(fds[0]);
	close(fds[1]);
	return ok ? 0 : 54;
}

static atomic_size_t read_size;

static void
read_done(void *ctx, sq_data_t data, int error)
{
	atomic_store(&read_size, error ? 0 : sq_data_get_size(data));
	sem_post(&child_sem);
}

static void
write_done(void *ctx, sq_data_t unwritten, int error)
{
	if (unwritten == NULL && error == 0)
		sem_post(&child_sem);
}

static atomic_size_t channel_bytes;
static atomic_int channel_done;

static void
channel_read(void *ctx, bool done, sq_data_t data, int error)
{
	if (data)
		atomic_fetch_add(&channel_bytes, sq_data_get_size(data));
	if (done) {
		atomic_store(&channel_done, error == 0 ? 1 : -1);
		sem_post(&child_sem);
	}
}

static int
mode_io(void)
{
	int fds[2];
	if (pipe(fds) != 0)
		return 60;
	sq_queue_t q = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_data_t d = sq_data_create_f("hello fork", 10, NULL,
			SQ_DATA_DESTRUCTOR_DEFAULT);
	sq_write_f(fds[1], d, q, NULL, write_done);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 61;
	close(fds[1]);
	sq_read_f(fds[0], SIZE_MAX, q, NULL, read_done);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 62;
	close(fds[0]);
	if (atomic_load(&read_size) != 10)
		return 63;

	/* A regular file: read on the I/O threads. */
	char path[] = "/tmp/sq_fork_XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, "0123456789abcdef", 16) != 16 ||
			lseek(fd, 0, SEEK_SET) != 0)
		return 68;
	unlink(path);
	sq_read_f(fd, SIZE_MAX, q, NULL, read_done);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 69;
	close(fd);
	if (atomic_load(&read_size) != 16)
		return 70;

	/* A channel over a pipe. */
	atomic_store(&channel_bytes, 0);
	atomic_store(&channel_done, 0);
	if (pipe(fds) != 0)
		return 64;
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fds[0], q, NULL, NULL);
	sq_io_read_f(ch, 0, SIZE_MAX, q, NULL, channel_read);
	if (write(fds[1], "0123456789", 10) != 10)
		return 65;
	close(fds[1]);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 66;
	sq_io_close(ch, 0);
	sq_release(ch);
	sq_release(d);
	return atomic_load(&channel_done) == 1 &&
			atomic_load(&channel_bytes) == 10 ? 0 : 67;
}

static atomic_int main_ran;

static void
on_main(void *ctx)
{
	atomic_store(&main_ran, 1);
}

static void
to_main(void *ctx)
{
	sq_async_f(sq_get_main_queue(), NULL, on_main);
}

static bool
main_done(void *ctx)
{
	return atomic_load(&main_ran) != 0;
}

static int
mode_main_queue(void)
{
	/* The child's main thread is the one that forked; its main queue
	 * has an eventfd of its own, not the parent's. */
	sq_async_f(sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0), NULL,
			to_main);
	if (!sq_main_queue_run_until(sq_time(SQ_TIME_NOW,
			5 * (int64_t)NSEC_PER_SEC), main_done, NULL))
		return 90;
	return 0;
}

/* ---- the parent's objects -------------------------------------------------- */

struct parent_objs {
	bool active;
	sq_source_t term, timer, reader;
	sq_io_t channel;
	int pipe_fds[2], chan_fds[2];
	atomic_ulong terms;
};

static struct parent_objs P;

static void
term_handler(void *ctx)
{
	atomic_fetch_add(&P.terms, sq_source_get_data(P.term));
}

static void
noop(void *ctx)
{
}

static void
noop_io(void *ctx, bool done, sq_data_t data, int error)
{
}

static void
parent_sources_start(void)
{
	P.term = sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGTERM, 0, NULL);
	sq_source_set_event_handler_f(P.term, term_handler);
	sq_source_set_registration_handler_f(P.term, post_sem);
	sq_set_context(P.term, &child_sem);
	sq_activate(P.term);
	CHECK(sqt_sem_wait_ms(&child_sem, 5000));
	sq_set_context(P.term, NULL);

	P.timer = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, NULL);
	sq_source_set_event_handler_f(P.timer, noop);
	/* Every 250 us with no leeway: the precise timers' on-time runner
	 * is busy through most forks (a child must not inherit it). */
	sq_source_set_timer(P.timer, SQ_TIME_NOW, 250 * 1000, 0);
	sq_activate(P.timer);

	CHECK(pipe(P.pipe_fds) == 0);
	P.reader = sq_source_create(SQ_SOURCE_TYPE_READ,
			(uintptr_t)P.pipe_fds[0], 0, NULL);
	sq_source_set_event_handler_f(P.reader, noop);
	sq_activate(P.reader);

	CHECK(pipe(P.chan_fds) == 0);
	P.channel = sq_io_create_f(SQ_IO_STREAM, P.chan_fds[0], NULL, NULL,
			NULL);
	sq_io_read_f(P.channel, 0, SIZE_MAX,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
			NULL, noop_io);

	/* Pending at every fork below: must not fire in a child. */
	sq_after_f(sq_time(SQ_TIME_NOW, 3600 * (int64_t)NSEC_PER_SEC),
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
			NULL, noop);
	sqt_sleep_ms(30);
	P.active = true;
}

static void
parent_sources_stop(void)
{
	sq_source_set_cancel_handler_f(P.reader, post_sem);
	sq_set_context(P.reader, &child_sem);
	sq_source_cancel(P.term);
	sq_source_cancel(P.timer);
	sq_source_cancel(P.reader);
	sq_release(P.term);
	sq_release(P.timer);
	sq_release(P.reader);
	sq_io_close(P.channel, SQ_IO_STOP);
	sq_release(P.channel);
	close(P.chan_fds[1]);
	CHECK(sqt_sem_wait_ms(&child_sem, 5000)); /* the reader let go */
	close(P.pipe_fds[0]);
	close(P.pipe_fds[1]);
	P.active = false;
}

static int
mode_parent_source(void)
{
	sq_source_cancel(P.timer);
	return 80; /* not reached */
}

static int
mode_parent_channel(void)
{
	sq_io_read_f(P.channel, 0, 1,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
			NULL, noop_io);
	return 81; /* not reached */
}

/* The parent's channel waits for data on chan_fds[0] at the fork. The
 * child puts a pipe of its own at that number (the parent still reads
 * the old one); its sq_read of the number gets an entry of its own: it
 * must not queue behind the parent's read, which never runs here. */
static int
mode_parent_descriptor(void)
{
	int fds[2];
	if (pipe(fds) != 0 || dup2(fds[0], P.chan_fds[0]) < 0)
		return 85;
	close(fds[0]);
	if (write(fds[1], "hello", 5) != 5)
		return 82;
	atomic_store(&read_size, 0);
	sq_read_f(P.chan_fds[0], 5,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0),
			NULL, read_done);
	if (!sqt_sem_wait_ms(&child_sem, 5000))
		return 83;
	return atomic_load(&read_size) == 5 ? 0 : 84;
}

static int
mode_release_parent_objects(void)
{
	/* Dropping what the child inherited is allowed: nothing happens. */
	sq_release(P.term);
	sq_release(P.channel);
	return mode_global_async();
}

/* ---- running a child -------------------------------------------------------- */

/* Waits for `pid` up to `ms`; kills it (and fails) if it is still running. */
static int
wait_child(pid_t pid, unsigned ms, bool *hung)
{
	int status = 0;
	uint64_t end = sqt_now_ns() + (uint64_t)ms * MS;
	*hung = false;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (sqt_now_ns() > end) {
			*hung = true;
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		sqt_sleep_ms(2);
	}
	return status;
}

static void
run_mode(const char *name, int (*mode)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		sem_init(&child_sem, 0, 0);
		_exit(mode());
	}
	bool hung;
	int status = wait_child(pid, SQT_SCALE(10000, 30000), &hung);
	bool ok = !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	if (!ok)
		fprintf(stderr, "child %s (parent sources: %s): %s %d\n", name,
				P.active ? "yes" : "no",
				hung ? "hung" : "status", status);
	CHECK(ok);
}

/* A child that uses a parent's object must abort with the message; the
 * alarm turns a hang into a failure (SIGALRM, not SIGABRT). */
static void
crash_child(void *mode)
{
	alarm(SQT_SCALE(10, 30));
	_exit(((int (*)(void))mode)());
}

/* A child that never touches the runtime dies of SIGTERM, and the
 * parent's SIGTERM source (if any) sees none of it. */
static void
run_untouched_child(void)
{
	int ready[2];
	CHECK(pipe(ready) == 0);
	unsigned long before = atomic_load(&P.terms);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		for (int i = 0; i < 500; i++)
			sqt_sleep_ms(10); /* 5 s, then "survived" */
		_exit(3);
	}
	close(ready[1]);
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	for (int i = 0; i < 3; i++) {
		kill(pid, SIGTERM);
		sqt_sleep_ms(5);
	}
	bool hung;
	int status = wait_child(pid, 10000, &hung);
	bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
	if (!killed)
		fprintf(stderr, "untouched child (parent sources: %s): "
				"status %d\n", P.active ? "yes" : "no", status);
	CHECK(killed);
	sqt_sleep_ms(50);
	CHECK_EQ(atomic_load(&P.terms), before);
}

static void
run_all_modes(void)
{
	run_untouched_child();
	run_mode("global async", mode_global_async);
	run_mode("serial", mode_serial);
	run_mode("sq_after", mode_after);
	run_mode("timer", mode_timer);
	run_mode("sources", mode_sources);
	run_mode("io", mode_io);
	run_mode("main queue", mode_main_queue);
}

int
main(void)
{
	sem_init(&child_sem, 0, 0);
	/* Queues only: workers exist, the event loop does not. */
	parent_serial = sq_queue_create("parent.serial", NULL);
	sq_sync_f(parent_serial, NULL, noop);
	CHECK_EQ(mode_global_async(), 0);
	run_all_modes();
	/* I/O threads running in the parent at the next forks, and a main
	 * queue eventfd the children must not share. */
	CHECK_EQ(mode_io(), 0);
	CHECK_EQ(mode_main_queue(), 0);

	/* Sources, a timer, a channel, a pending sq_after in the parent. */
	parent_sources_start();
	run_all_modes();
	CHECK_CRASH(crash_child, (void *)mode_parent_source,
			"SwiftQueues: sq_source_cancel: source '' was made "
			"before fork(): it cannot be used in the child");
	CHECK_CRASH(crash_child, (void *)mode_parent_channel,
			"SwiftQueues: sq_io_read: I/O channel '' was made "
			"before fork()");
	run_mode("parent's descriptor", mode_parent_descriptor);
	run_mode("release parent objects", mode_release_parent_objects);
	/* The parent's runtime is untouched by all of that. */
	CHECK_EQ(mode_global_async(), 0);
	CHECK_EQ(atomic_load(&P.terms), 0);
	kill(getpid(), SIGTERM);
	uint64_t end = sqt_now_ns() + 5000 * MS;
	while (atomic_load(&P.terms) == 0 && sqt_now_ns() < end)
		sqt_sleep_ms(2);
	CHECK_EQ(atomic_load(&P.terms), 1);
	parent_sources_stop();
	sq_release(parent_serial);
	return sqt_finish("test_fork");
}
