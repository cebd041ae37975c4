/*
 * Channels meeting a hostile outside world: a closed descriptor, a read on
 * a write-only one, peers that close or reset early, a path that does not
 * open, SQ_IO_STOP. The handler sees the error (a read that ends with one
 * gets NULL data, as libdispatch's header promises), nothing already read
 * is lost, the cleanup handler runs once, and nothing crashes. Also sq_read
 * / sq_write and barriers.
 */
#include "io_helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static sq_queue_t q;

static void
test_closed_fd(void)
{
	/* A number nothing uses (a freshly closed one could be reused by the
	 * runtime's own descriptors before the channel looks at it). */
	int fd = 4000;
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF);
	struct cleanup c;
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fd, q, &c, on_cleanup);
	CHECK(ch != NULL);
	struct result r, w;
	result_init(&r);
	result_init(&w);
	sq_io_read_f(ch, 0, SIZE_MAX, q, &r, on_io);
	sq_data_t d = sq_data_create_f("abc", 3, NULL, NULL);
	sq_io_write_f(ch, 0, d, q, &w, on_io);
	CHECK(wait_result(&r));
	CHECK(wait_result(&w));
	CHECK_EQ(r.error, EBADF);
	CHECK_EQ(r.done_calls, 1);
	CHECK_EQ(r.size, 0);
	CHECK_EQ(w.error, EBADF);
	CHECK_EQ(w.size, 3); /* the unwritten data comes back */
	sq_release(ch);
	cleanup_check(&c, EBADF);
	sq_release(d);
	result_free(&r);
	result_free(&w);
}

static void
test_write_only(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	struct cleanup c;
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fds[1], q, &c, on_cleanup);
	struct result r;
	result_init(&r);
	sq_io_read_f(ch, 0, 100, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, EBADF);
	CHECK_EQ(r.done_calls, 1);
	sq_io_close(ch, 0);
	sq_release(ch);
	cleanup_check(&c, 0);
	close(fds[0]);
	close(fds[1]);
	result_free(&r);
}

/* Writing to a socket / pipe whose reader is gone: EPIPE, no SIGPIPE. */
static void
test_epipe(bool use_pipe)
{
	int fds[2];
	if (use_pipe)
		CHECK_EQ(pipe(fds), 0);
	else
		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
	close(fds[0]);
	struct cleanup c;
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fds[1], q, &c, on_cleanup);
	size_t size = 1 << 20;
	char *buf = calloc(1, size);
	sq_data_t d = sq_data_create_f(buf, size, NULL, SQ_DATA_DESTRUCTOR_FREE);
	struct result w;
	result_init(&w);
	sq_io_write_f(ch, 0, d, q, &w, on_io);
	CHECK(wait_result(&w));
	CHECK_EQ(w.error, EPIPE);
	CHECK_EQ(w.calls, 1);
	CHECK_EQ(w.size, size); /* nothing was written: all comes back */
	sq_io_close(ch, 0);
	sq_release(ch);
	cleanup_check(&c, 0);
	close(fds[1]);
	sq_release(d);
	result_free(&w);
}

/* The peer sends a little and closes before the read is satisfied: the
 * bytes are delivered, then done at end of file. */
static void
test_short_peer(void)
{
	int sv[2];
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct cleanup c;
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, sv[0], q, &c, on_cleanup);
	struct result r;
	result_init(&r);
	sq_io_read_f(ch, 0, 1000, q, &r, on_io);
	usleep(10000);
	CHECK_EQ(write(sv[1], "0123456789", 10), 10);
	usleep(10000);
	close(sv[1]);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(r.size, 10);
	/* A second read after end of file ends at once. */
	struct result r2;
	result_init(&r2);
	sq_io_read_f(ch, 0, SIZE_MAX, q, &r2, on_io);
	CHECK(wait_result(&r2));
	CHECK_EQ(r2.error, 0);
	CHECK_EQ(r2.size, 0);
	sq_release(ch);
	cleanup_check(&c, 0);
	close(sv[0]);
	result_free(&r);
	result_free(&r2);
}

/* A TCP peer that resets: what was read stays read, then ECONNRESET. */
static void
test_reset(void)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t alen = sizeof(a);
	CHECK_EQ(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(listen(lfd, 4), 0);
	getsockname(lfd, (struct sockaddr *)&a, &alen);
	int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_EQ(connect(cfd, (struct sockaddr *)&a, sizeof(a)), 0);
	int sfd = accept(lfd, NULL, NULL);
	CHECK(sfd >= 0);
	struct cleanup c;
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, sfd, q, &c, on_cleanup);
	struct result r;
	result_init(&r);
	sq_io_read_f(ch, 0, 5, q, &r, on_io);
	CHECK_EQ(write(cfd, "hello", 5), 5);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(r.size, 5);
	const void *p;
	size_t n;
	sq_data_t m = sq_data_create_map(r.data, &p, &n);
	CHECK(n == 5 && memcmp(p, "hello", 5) == 0);
	sq_release(m);
	/* Reset: linger 0, then close. */
	struct linger lg = { 1, 0 };
	setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(cfd);
	struct result r2;
	result_init(&r2);
	sq_io_read_f(ch, 0, SIZE_MAX, q, &r2, on_io);
	CHECK(wait_result(&r2));
	CHECK_EQ(r2.error, ECONNRESET);
	CHECK_EQ(r2.done_calls, 1);
	sq_release(ch);
	cleanup_check(&c, 0);
	close(sfd);
	close(lfd);
	result_free(&r);
	result_free(&r2);
}

/* SQ_IO_STOP ends a read that waits; later operations are cancelled. */
static void
test_stop(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	struct cleanup c;
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fds[0], q, &c, on_cleanup);
	struct result r, r2;
	result_init(&r);
	result_init(&r2);
	sq_io_read_f(ch, 0, SIZE_MAX, q, &r, on_io);
	CHECK_EQ(write(fds[1], "abc", 3), 3);
	usleep(20000);
	sq_io_close(ch, SQ_IO_STOP);
	sq_io_read_f(ch, 0, SIZE_MAX, q, &r2, on_io);
	CHECK(wait_result(&r));
	CHECK(wait_result(&r2));
	CHECK_EQ(r.error, ECANCELED);
	CHECK_EQ(r.size, 3); /* kept what it read, in a call before */
	CHECK_EQ(r.calls, 2);
	CHECK(r.null_data); /* done with an error: NULL, as libdispatch */
	CHECK_EQ(r2.error, ECANCELED);
	CHECK_EQ(r2.calls, 1); /* issued after the close: one call, */
	CHECK(r2.null_data);   /* NULL data, not an empty object */
	sq_release(ch);
	cleanup_check(&c, 0);
	close(fds[0]);
	close(fds[1]);
	result_free(&r);
	result_free(&r2);
}

static void
test_bad_create(void)
{
	errno = 0;
	CHECK(sq_io_create_f(7, 0, q, NULL, NULL) == NULL);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK(sq_io_create_with_path_f(SQ_IO_RANDOM, "relative", O_RDONLY, 0,
			q, NULL, NULL) == NULL);
	CHECK_EQ(errno, EINVAL);

	struct cleanup c;
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_with_path_f(SQ_IO_RANDOM,
			"/nonexistent/swiftqueues", O_RDONLY, 0, q, &c,
			on_cleanup);
	CHECK(ch != NULL);
	CHECK_EQ(sq_io_get_descriptor(ch), -1);
	struct result r;
	result_init(&r);
	sq_io_read_f(ch, 0, 10, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, ENOENT);
	sq_release(ch);
	cleanup_check(&c, ENOENT);
	result_free(&r);

	/* A random-access channel over a pipe cannot seek. */
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	cleanup_init(&c);
	ch = sq_io_create_f(SQ_IO_RANDOM, fds[0], q, &c, on_cleanup);
	result_init(&r);
	sq_io_read_f(ch, 0, 10, q, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, ESPIPE);
	sq_release(ch);
	cleanup_check(&c, ESPIPE);
	result_free(&r);
	close(fds[0]);
	close(fds[1]);
}

/* ---- sq_read / sq_write ------------------------------------------------- */

struct simple {
	sq_data_t data;
	int error;
	bool null;
	int calls;
	sq_semaphore_t sem;
};

static void
on_simple(void *ctx, sq_data_t data, int error)
{
	struct simple *s = ctx;
	s->calls++;
	s->null = data == NULL;
	if (data) {
		sq_retain(data);
		s->data = data;
	}
	s->error = error;
	sq_semaphore_signal(s->sem);
}

static void
test_read_write(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	struct simple w = { .sem = sq_semaphore_create(0) };
	struct simple r = { .sem = sq_semaphore_create(0) };
	size_t size = 300000; /* more than a pipe holds */
	char *buf = malloc(size);
	for (size_t i = 0; i < size; i++)
		buf[i] = (char)(i * 7);
	sq_data_t d = sq_data_create_f(buf, size, NULL, SQ_DATA_DESTRUCTOR_FREE);
	sq_write_f(fds[1], d, q, &w, on_simple);
	/* On a pipe, each sq_read ends with what is there when the pipe
	 * would block (as libdispatch): read until all came. */
	sq_data_t all = sq_data_empty;
	int reads = 0;
	while (sq_data_get_size(all) < size && reads++ < 1000) {
		r.data = NULL;
		sq_read_f(fds[0], size - sq_data_get_size(all), q, &r,
				on_simple);
		CHECK(sq_semaphore_wait(r.sem, sq_time(SQ_TIME_NOW,
				10 * NSEC_PER_SEC)) == 0);
		CHECK_EQ(r.error, 0);
		if (r.data == NULL)
			break;
		sq_data_t next = sq_data_create_concat(all, r.data);
		sq_release(all);
		sq_release(r.data);
		all = next;
	}
	r.calls = 1;
	CHECK(sq_semaphore_wait(w.sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0);
	CHECK(w.null);
	CHECK_EQ(w.error, 0);
	CHECK_EQ(sq_data_get_size(all), size);
	const void *p;
	sq_data_t m = sq_data_create_map(all, &p, NULL);
	CHECK(sq_data_get_size(all) == size && memcmp(p, buf, size) == 0);
	sq_release(m);
	sq_release(all);
	/* The descriptors are ours again, blocking as they were. */
	CHECK_EQ(fcntl(fds[0], F_GETFL) & O_NONBLOCK, 0);
	CHECK_EQ(fcntl(fds[1], F_GETFL) & O_NONBLOCK, 0);
	close(fds[1]);
	/* sq_read to end of file on an empty, closed pipe. */
	r.data = NULL;
	sq_read_f(fds[0], SIZE_MAX, q, &r, on_simple);
	CHECK(sq_semaphore_wait(r.sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0);
	CHECK(r.data != NULL && sq_data_get_size(r.data) == 0);
	CHECK_EQ(r.calls, 2);
	CHECK_EQ(w.calls, 1);
	close(fds[0]);
	sq_release(d);
	sq_release(w.sem);
	sq_release(r.sem);
	if (r.data)
		sq_release(r.data);
}

/* ---- barriers ------------------------------------------------------------ */

struct barrier_state {
	int reader;
	sq_io_t ch;
	int fd_seen;
	int queued_bytes;
	sq_semaphore_t sem;
};

static void
on_barrier(void *ctx)
{
	struct barrier_state *b = ctx;
	b->fd_seen = sq_io_get_descriptor(b->ch);
	ioctl(b->reader, FIONREAD, &b->queued_bytes);
	sq_semaphore_signal(b->sem);
}

static void
test_barrier(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fds[1], q, NULL, NULL);
	struct result w[3];
	for (int i = 0; i < 3; i++) {
		result_init(&w[i]);
		sq_data_t d = sq_data_create_f("0123456789", 10, NULL, NULL);
		sq_io_write_f(ch, 0, d, q, &w[i], on_io);
		sq_release(d);
	}
	struct barrier_state b = { fds[0], ch, -1, 0, sq_semaphore_create(0) };
	sq_io_barrier_f(ch, &b, on_barrier);
	CHECK(sq_semaphore_wait(b.sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0);
	CHECK_EQ(b.fd_seen, fds[1]);
	CHECK_EQ(b.queued_bytes, 30); /* every write before it finished */
	for (int i = 0; i < 3; i++) {
		CHECK(wait_result(&w[i]));
		result_free(&w[i]);
	}
	sq_io_close(ch, 0);
	sq_release(ch);
	sq_release(b.sem);
	usleep(20000);
	close(fds[0]);
	close(fds[1]);
}

int
main(void)
{
	q = sq_queue_create("test.io.errors", NULL);
	test_closed_fd();
	test_write_only();
	test_epipe(false);
	test_epipe(true);
	test_short_peer();
	test_reset();
	test_stop();
	test_bad_create();
	test_read_write();
	test_barrier();
	sq_release(q);
	return sqt_finish("test_io_errors");
}
