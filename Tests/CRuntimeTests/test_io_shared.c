/*
 * sq_io_create_with_io: a second channel over the descriptor of a first
 * one (or over its path, for a path channel), with its own type, water
 * marks and cleanup handler. A file written through the first channel is
 * read back through the second; the descriptor is handed back (cleanup
 * handlers) only once both channels are done with it, so a first
 * channel's cleanup that closes the descriptor waits for the second; stream <-> random
 * conversions follow libdispatch (random over a pipe: ESPIPE in the
 * handlers, never a crash); each cleanup handler runs once; misuse (NULL,
 * released channel) stops the process with a message, a closed channel
 * gives ECANCELED.
 */
#include "io_helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

static sq_queue_t q;

/* ---- A file written through one channel, read through another ---------- */

#define FILE_SIZE ((size_t)1 << 20)

static void
test_fd_file(void)
{
	char *path = temp_path("fd");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	struct cleanup ca, cb;
	cleanup_init(&ca);
	cleanup_init(&cb);
	/* The program's usual pattern: the cleanup hands the descriptor back,
	 * and the first channel's cleanup closes it. */
	cleanup_closes(&ca, fd);
	sq_io_t a = sq_io_create_f(SQ_IO_RANDOM, fd, q, &ca, on_cleanup);
	CHECK(a != NULL);
	struct result w;
	result_init(&w);
	sq_data_t d = pattern_data(0, FILE_SIZE);
	sq_io_write_f(a, 0, d, q, &w, on_write);
	sq_release(d);
	CHECK(wait_result(&w));
	CHECK_EQ(w.error, 0);
	CHECK(w.null_data);

	sq_io_t b = sq_io_create_with_io_f(SQ_IO_RANDOM, a, q, &cb,
			on_cleanup);
	CHECK(b != NULL);
	sq_io_set_high_water(b, 64 * 1024); /* its own water marks */
	struct result r;
	result_init(&r);
	sq_io_read_f(b, 0, SIZE_MAX, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(r.done_calls, 1);
	CHECK(r.calls >= (int)(FILE_SIZE / (64 * 1024)));
	CHECK_EQ(sq_data_get_size(r.data), FILE_SIZE);
	CHECK(data_is_pattern(r.data, 0));
	CHECK_EQ(sq_io_get_descriptor(b), fd);
	/* a's water marks did not change: 200,000 bytes in one call. */
	struct result ra;
	result_init(&ra);
	sq_io_read_f(a, 4096, 200000, q, &ra, on_io);
	CHECK(wait_result(&ra));
	CHECK_EQ(ra.calls, 1);
	CHECK_EQ(sq_data_get_size(ra.data), 200000);
	CHECK(data_is_pattern(ra.data, 4096));
	result_free(&ra);

	/* Close the first: its cleanup (which closes the descriptor) waits
	 * while the second still uses the descriptor. */
	sq_io_close(a, 0);
	sq_release(a);
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&ca.runs), 0);
	CHECK_EQ(atomic_load(&cb.runs), 0);
	CHECK(fcntl(fd, F_GETFD) != -1);
	result_reset(&r);
	sq_io_read_f(b, (off_t)(FILE_SIZE - 1000), SIZE_MAX, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(sq_data_get_size(r.data), 1000);
	CHECK(data_is_pattern(r.data, FILE_SIZE - 1000));
	/* And it can still write. */
	d = pattern_data(FILE_SIZE, 5000);
	result_reset(&w);
	sq_io_write_f(b, (off_t)FILE_SIZE, d, q, &w, on_write);
	sq_release(d);
	CHECK(wait_result(&w));
	CHECK_EQ(w.error, 0);

	/* Done with the second: both cleanups run, once each, error 0. */
	sq_release(b);
	cleanup_check(&ca, 0);
	cleanup_check(&cb, 0);
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF);
	struct stat st;
	CHECK_EQ(stat(path, &st), 0);
	CHECK_EQ(st.st_size, (off_t)(FILE_SIZE + 5000));
	result_free(&r);
	result_free(&w);
	unlink(path);
	free(path);
}

/* ---- Stream <-> random ---------------------------------------------------- */

/* A random-access channel cannot be made over a pipe: ESPIPE, in the
 * handlers and the cleanup, and the first channel goes on unharmed. */
static void
test_random_over_pipe(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	struct cleanup ca, cb;
	cleanup_init(&ca);
	cleanup_init(&cb);
	sq_io_t a = sq_io_create_f(SQ_IO_STREAM, fds[0], q, &ca, on_cleanup);
	sq_io_t b = sq_io_create_with_io_f(SQ_IO_RANDOM, a, q, &cb,
			on_cleanup);
	CHECK(b != NULL);
	struct result rb;
	result_init(&rb);
	sq_io_read_f(b, 0, 10, q, &rb, on_io);
	CHECK(wait_result(&rb));
	CHECK_EQ(rb.error, ESPIPE);
	CHECK_EQ(rb.done_calls, 1);
	/* b never had the descriptor: its cleanup does not wait for a. */
	sq_release(b);
	cleanup_check(&cb, ESPIPE);

	struct result ra;
	result_init(&ra);
	sq_io_read_f(a, 0, 5, q, &ra, on_io);
	CHECK_EQ(write(fds[1], "hello", 5), 5);
	CHECK(wait_result(&ra));
	CHECK_EQ(ra.error, 0);
	CHECK_EQ(sq_data_get_size(ra.data), 5);
	CHECK_EQ(atomic_load(&ca.runs), 0);
	sq_release(a);
	cleanup_check(&ca, 0);
	close(fds[0]);
	close(fds[1]);
	result_free(&ra);
	result_free(&rb);
}

/* A stream channel over a random-access one reads on from the file
 * position; a random one over a stream channel on a file works too. */
static void
test_stream_random_file(void)
{
	char *path = temp_path("conv");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	sq_data_t d = pattern_data(0, 100000);
	const void *p;
	size_t n;
	sq_data_t m = sq_data_create_map(d, &p, &n);
	CHECK_EQ(write(fd, p, n), (ssize_t)n);
	sq_release(m);
	sq_release(d);
	lseek(fd, 1000, SEEK_SET);

	struct cleanup ca, cb, cc;
	cleanup_init(&ca);
	cleanup_init(&cb);
	cleanup_init(&cc);
	sq_io_t a = sq_io_create_f(SQ_IO_RANDOM, fd, q, &ca, on_cleanup);
	sq_io_t b = sq_io_create_with_io_f(SQ_IO_STREAM, a, q, &cb,
			on_cleanup);
	struct result r;
	result_init(&r);
	sq_io_read_f(b, 0, 2000, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(sq_data_get_size(r.data), 2000);
	CHECK(data_is_pattern(r.data, 1000));
	/* A file is not made non-blocking. */
	CHECK_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);

	/* Random over the stream channel: offsets are relative to the file
	 * position when it set up (3000 now). */
	sq_io_t c = sq_io_create_with_io_f(SQ_IO_RANDOM, b, q, &cc,
			on_cleanup);
	result_reset(&r);
	sq_io_read_f(c, 500, 100, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(sq_data_get_size(r.data), 100);
	CHECK(data_is_pattern(r.data, 3500));

	sq_io_close(a, 0);
	sq_io_close(c, 0);
	sq_release(a);
	sq_release(c);
	sqt_sleep_ms(50);
	CHECK_EQ(atomic_load(&ca.runs), 0); /* b still holds it */
	CHECK_EQ(atomic_load(&cc.runs), 0);
	sq_release(b);
	cleanup_check(&ca, 0);
	cleanup_check(&cb, 0);
	cleanup_check(&cc, 0);
	close(fd);
	unlink(path);
	free(path);
	result_free(&r);
}

/* Two stream channels on one socket: one writes, the other reads; the
 * descriptor stays non-blocking until both are done, then its flags are
 * restored. */
static void
test_socket_pair(void)
{
	int sv[2];
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct cleanup ca, cb;
	cleanup_init(&ca);
	cleanup_init(&cb);
	sq_io_t a = sq_io_create_f(SQ_IO_STREAM, sv[0], q, &ca, on_cleanup);
	sq_io_t b = sq_io_create_with_io_f(SQ_IO_STREAM, a, NULL, &cb,
			on_cleanup);
	struct result w, r;
	result_init(&w);
	result_init(&r);
	sq_data_t d = sq_data_create_f("ping", 4, NULL, NULL);
	sq_io_write_f(a, 0, d, q, &w, on_write);
	sq_release(d);
	sq_io_read_f(b, 0, 4, q, &r, on_io);
	CHECK(wait_result(&w));
	CHECK_EQ(w.error, 0);
	char buf[8];
	CHECK_EQ(read(sv[1], buf, sizeof(buf)), 4);
	CHECK(memcmp(buf, "ping", 4) == 0);
	CHECK_EQ(write(sv[1], "pong", 4), 4);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(sq_data_get_size(r.data), 4);

	/* a is done; b still reads, so the descriptor stays non-blocking. */
	sq_release(a);
	sqt_sleep_ms(50);
	CHECK_EQ(atomic_load(&ca.runs), 0);
	CHECK(fcntl(sv[0], F_GETFL) & O_NONBLOCK);
	result_reset(&r);
	sq_io_read_f(b, 0, SIZE_MAX, q, &r, on_io);
	CHECK_EQ(write(sv[1], "xyz", 3), 3);
	shutdown(sv[1], SHUT_WR);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(sq_data_get_size(r.data), 3);
	sq_release(b);
	cleanup_check(&ca, 0);
	cleanup_check(&cb, 0);
	CHECK_EQ(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0);
	close(sv[0]);
	close(sv[1]);
	result_free(&w);
	result_free(&r);
}

/* ---- Path channels: the second opens the same path itself ---------------- */

static void
test_path(void)
{
	char *path = temp_path("path");
	struct cleanup ca, cb;
	cleanup_init(&ca);
	cleanup_init(&cb);
	/* O_TRUNC | O_EXCL apply to the first open only: the second channel
	 * must not wipe out (or fail on) the file the first one made. */
	sq_io_t a = sq_io_create_with_path_f(SQ_IO_RANDOM, path,
			O_RDWR | O_CREAT | O_TRUNC | O_EXCL, 0600, q, &ca,
			on_cleanup);
	CHECK(a != NULL);
	sq_io_t b = sq_io_create_with_io_f(SQ_IO_RANDOM, a, q, &cb,
			on_cleanup);
	CHECK(b != NULL);
	CHECK_EQ(fds_on(path), 0); /* lazy, both */
	struct result w, r;
	result_init(&w);
	result_init(&r);
	sq_data_t d = pattern_data(0, 300000);
	sq_io_write_f(a, 0, d, q, &w, on_write);
	sq_release(d);
	CHECK(wait_result(&w));
	CHECK_EQ(w.error, 0);
	CHECK_EQ(fds_on(path), 1);
	sq_io_read_f(b, 0, SIZE_MAX, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(sq_data_get_size(r.data), 300000);
	CHECK(data_is_pattern(r.data, 0));
	CHECK_EQ(fds_on(path), 2); /* each channel has its own descriptor */
	CHECK(sq_io_get_descriptor(b) >= 0);
	CHECK(sq_io_get_descriptor(a) != sq_io_get_descriptor(b));

	/* Closing the first closes its file only; the second reads on. */
	sq_release(a);
	cleanup_check(&ca, 0);
	CHECK_EQ(fds_on(path), 1);
	result_reset(&r);
	sq_io_read_f(b, 299000, SIZE_MAX, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(sq_data_get_size(r.data), 1000);
	CHECK(data_is_pattern(r.data, 299000));
	sq_release(b);
	cleanup_check(&cb, 0);
	CHECK_EQ(fds_on(path), 0);

	/* A path channel whose open failed passes its error on. */
	cleanup_init(&ca);
	cleanup_init(&cb);
	a = sq_io_create_with_path_f(SQ_IO_STREAM, "/nonexistent/sq-shared",
			O_RDONLY, 0, q, &ca, on_cleanup);
	result_reset(&r);
	sq_io_read_f(a, 0, 1, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, ENOENT);
	b = sq_io_create_with_io_f(SQ_IO_STREAM, a, q, &cb, on_cleanup);
	result_reset(&r);
	sq_io_read_f(b, 0, 1, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, ENOENT);
	sq_release(a);
	sq_release(b);
	cleanup_check(&ca, ENOENT);
	cleanup_check(&cb, ENOENT);

	result_free(&w);
	result_free(&r);
	unlink(path);
	free(path);
}

/* ---- Errors and misuse ------------------------------------------------------ */

static void
test_errors(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	sq_io_t a = sq_io_create_f(SQ_IO_STREAM, fds[0], q, NULL, NULL);

	/* An unknown type: NULL, EINVAL (as sq_io_create). */
	errno = 0;
	CHECK(sq_io_create_with_io_f(7, a, q, NULL, NULL) == NULL);
	CHECK_EQ(errno, EINVAL);

	/* From a closed channel: ECANCELED, in the handlers and cleanup. */
	sq_io_close(a, 0);
	struct cleanup cb;
	cleanup_init(&cb);
	sq_io_t b = sq_io_create_with_io_f(SQ_IO_STREAM, a, q, &cb,
			on_cleanup);
	CHECK(b != NULL);
	struct result r;
	result_init(&r);
	sq_io_read_f(b, 0, 10, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, ECANCELED);
	CHECK_EQ(r.done_calls, 1);
	CHECK_EQ(sq_io_get_descriptor(b), -1);
	sq_release(b);
	cleanup_check(&cb, ECANCELED);
	sq_release(a);
	close(fds[0]);
	close(fds[1]);

	/* From a channel whose descriptor is bad: EBADF. */
	CHECK(fcntl(4000, F_GETFD) == -1);
	a = sq_io_create_f(SQ_IO_STREAM, 4000, q, NULL, NULL);
	cleanup_init(&cb);
	b = sq_io_create_with_io_f(SQ_IO_STREAM, a, q, &cb, on_cleanup);
	result_reset(&r);
	sq_io_read_f(b, 0, 10, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, EBADF);
	sq_release(b);
	sq_release(a);
	cleanup_check(&cb, EBADF);

	/* The runtime keeps working. */
	CHECK_EQ(pipe(fds), 0);
	cleanup_init(&cb);
	a = sq_io_create_f(SQ_IO_STREAM, fds[0], q, NULL, NULL);
	b = sq_io_create_with_io_f(SQ_IO_STREAM, a, q, &cb, on_cleanup);
	sq_release(a);
	result_reset(&r);
	sq_io_read_f(b, 0, 3, q, &r, on_io);
	CHECK_EQ(write(fds[1], "abc", 3), 3);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(sq_data_get_size(r.data), 3);
	sq_release(b);
	cleanup_check(&cb, 0); /* then the descriptor may be closed */
	close(fds[0]);
	close(fds[1]);
	result_free(&r);
}

static void
crash_null_channel(void *ctx)
{
	sq_io_t b = sq_io_create_with_io_f(SQ_IO_STREAM, NULL, NULL, NULL,
			NULL);
	(void)b;
}

static void
nothing(void *ctx, bool done, sq_data_t data, int error)
{
}

static void
crash_released_channel(void *ctx)
{
	int fds[2];
	if (pipe(fds) != 0)
		return;
	sq_io_t a = sq_io_create_f(SQ_IO_STREAM, fds[0], NULL, NULL, NULL);
	/* A read that waits keeps the channel alive after the release. */
	sq_io_read_f(a, 0, 10, sq_get_global_queue(0, 0), NULL, nothing);
	sq_release(a);
	sq_io_t b = sq_io_create_with_io_f(SQ_IO_STREAM, a, NULL, NULL, NULL);
	(void)b;
}

static void
test_misuse(void)
{
	CHECK_CRASH(crash_null_channel, NULL,
			"SwiftQueues: sq_io_create_with_io: object is NULL");
	CHECK_CRASH(crash_released_channel, NULL,
			"SwiftQueues: sq_io_create_with_io: I/O channel");
	CHECK_CRASH(crash_released_channel, NULL, "was already released");
}

int
main(void)
{
	q = sq_queue_create("test.io.shared", NULL);
	test_misuse();
	test_fd_file();
	test_random_over_pipe();
	test_stream_random_file();
	test_socket_pair();
	test_path();
	test_errors();
	sq_release(q);
	return sqt_finish("test_io_shared");
}
