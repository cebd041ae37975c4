/*
 * Stream channels: an HTTP response over a socketpair, a pipe carrying 64 MiB
 * with low water 1 and high water 8 KiB, writes through a channel, and a
 * loopback TCP echo (100 clients, 1 MiB each).
 */
#include "sqtest.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SQT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SQT_SANITIZED 1
#endif
#endif

#ifdef SQT_SANITIZED
#define PIPE_BYTES (8u << 20)
#define ECHO_CLIENTS 20
#define ECHO_BYTES (256u << 10)
#else
#define PIPE_BYTES (64u << 20)
#define ECHO_CLIENTS 100
#define ECHO_BYTES (1u << 20)
#endif

static inline uint8_t
pattern(size_t o)
{
	return (uint8_t)(o ^ (o >> 8) ^ (o >> 16) ^ 0x5a);
}

static void
fill_pattern(uint8_t *p, size_t from, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(from + i);
}

struct verify {
	size_t pos;
	bool ok;
};

static bool
verify_region(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	struct verify *v = ctx;
	const uint8_t *p = buf;
	for (size_t i = 0; i < size; i++) {
		if (p[i] != pattern(v->pos + i)) {
			v->ok = false;
			return false;
		}
	}
	v->pos += size;
	return true;
}

/* Waits for a semaphore with a generous deadline (never hangs a run). */
static bool
wait_sem(sq_semaphore_t s, int seconds)
{
	return sq_semaphore_wait(s, sq_time(SQ_TIME_NOW,
			(int64_t)seconds * (int64_t)NSEC_PER_SEC)) == 0;
}

/* ---- the HTTP response, chunk by chunk --------------------------------- */

static const char *const http_chunks[8] = {
	"HTTP/1.1 200 OK\r\nDate: Mon, 23 May 2005 22:38",
	":34 GMT\r\nServer: Apache/1.3.3.7 (Unix) (Red-H",
	"at/Linux)\r\nLast-Modified: Wed, 08 Jan 2003 23",
	":11:55 GMT\r\nEtag: \"3f80f-1b6-3e1cb03b\"\r\nCon",
	"tent-Type: text/html; charset=UTF-8\r\nContent-",
	"Length: 131\r\nConnection: close\r\n\r\n<html>\r",
	"\n<head>\r\n  <title>An Example Page</title>\r\n",
	"</head>\r\n<body>\r\n  Hello World, this is a ve",
};

struct http_state {
	sq_data_t all;
	int calls;
	int done_calls;
	int last_error;
	int cleanups;
	int cleanup_error;
	sq_semaphore_t done;
	sq_semaphore_t cleaned;
};

static void
http_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct http_state *s = ctx;
	s->calls++;
	CHECK(data != NULL);
	if (data != NULL) {
		sq_data_t all = sq_data_create_concat(s->all, data);
		sq_release(s->all);
		s->all = all;
	}
	if (done) {
		s->done_calls++;
		s->last_error = error;
		sq_semaphore_signal(s->done);
	}
}

static void
http_cleanup(void *ctx, int error)
{
	struct http_state *s = ctx;
	__atomic_add_fetch(&s->cleanups, 1, __ATOMIC_SEQ_CST);
	s->cleanup_error = error;
	sq_semaphore_signal(s->cleaned);
}

static int http_short_writes; /* read after the join */

static void *
http_writer(void *arg)
{
	int fd = *(int *)arg;
	for (int i = 0; i < 8; i++) {
		size_t n = strlen(http_chunks[i]);
		if (write(fd, http_chunks[i], n) != (ssize_t)n)
			http_short_writes++;
		usleep(5000);
	}
	close(fd);
	return NULL;
}

struct crlf {
	int matched;
	size_t found;
};

static bool
crlf_step(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	static const char pat[] = "\r\n\r\n";
	struct crlf *c = ctx;
	const char *p = buf;
	for (size_t i = 0; i < size; i++) {
		c->matched = p[i] == pat[c->matched] ? c->matched + 1
				: p[i] == pat[0];
		if (c->matched == 4) {
			c->found = offset + i - 3;
			return false;
		}
	}
	return true;
}

static void
test_http(void)
{
	int sv[2];
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	sq_queue_t q = sq_queue_create("test.io.http", NULL);
	struct http_state s = { .all = sq_data_empty };
	s.done = sq_semaphore_create(0);
	s.cleaned = sq_semaphore_create(0);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, sv[0], q, &s, http_cleanup);
	CHECK(ch != NULL);
	CHECK_EQ(sq_io_get_descriptor(ch), sv[0]);
	sq_io_set_low_water(ch, 1);
	sq_io_set_interval(ch, 10 * NSEC_PER_MSEC, SQ_IO_STRICT_INTERVAL);
	sq_io_read_f(ch, 0, SIZE_MAX, q, &s, http_read);
	pthread_t t;
	pthread_create(&t, NULL, http_writer, &sv[1]);
	CHECK(wait_sem(s.done, 10));
	pthread_join(t, NULL);
	CHECK_EQ(http_short_writes, 0);
	sq_io_close(ch, 0);
	CHECK(wait_sem(s.cleaned, 10));
	sq_release(ch);
	usleep(20000);

	CHECK_EQ(s.done_calls, 1);
	CHECK_EQ(s.last_error, 0);
	CHECK(s.calls >= 2); /* the interval delivered before the end */
	CHECK_EQ(sq_data_get_size(s.all), 351);
	struct crlf c = { 0, 0 };
	sq_data_apply_f(s.all, &c, crlf_step);
	CHECK_EQ(c.found, 253);
	sq_data_t header = sq_data_create_subrange(s.all, 0, c.found);
	const void *p;
	size_t n;
	sq_data_t map = sq_data_create_map(header, &p, &n);
	char *h = strndup(p, n);
	const char *cl = strstr(h, "Content-Length: ");
	CHECK(cl && atoi(cl + 16) == 131);
	free(h);
	sq_release(map);
	sq_release(header);
	CHECK_EQ(__atomic_load_n(&s.cleanups, __ATOMIC_SEQ_CST), 1);
	CHECK_EQ(s.cleanup_error, 0);
	/* The descriptor is ours again, still open and blocking. */
	CHECK_EQ(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0);
	CHECK_EQ(close(sv[0]), 0);
	sq_release(s.all);
	sq_release(s.done);
	sq_release(s.cleaned);
	sq_release(q);
}

/* ---- A pipe carrying PIPE_BYTES with low 1, high 8 KiB ------------------- */

struct pipe_state {
	struct verify v;
	size_t total;
	size_t calls;
	size_t bad_sizes;
	int error;
	bool done;
	sq_semaphore_t sem;
};

static void
pipe_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct pipe_state *s = ctx;
	size_t n = data ? sq_data_get_size(data) : 0; /* NULL: an error */
	s->calls++;
	if (n > 8192 || (n == 0 && !done))
		s->bad_sizes++;
	if (s->v.ok && data)
		sq_data_apply_f(data, &s->v, verify_region);
	s->total += n;
	if (done) {
		s->error = error;
		s->done = true;
		sq_semaphore_signal(s->sem);
	}
}

static void *
pipe_writer(void *arg)
{
	int fd = *(int *)arg;
	size_t chunk = 1 << 16;
	uint8_t *buf = malloc(chunk);
	for (size_t off = 0; off < PIPE_BYTES; off += chunk) {
		fill_pattern(buf, off, chunk);
		size_t done = 0;
		while (done < chunk) {
			ssize_t n = write(fd, buf + done, chunk - done);
			if (n <= 0)
				break;
			done += (size_t)n;
		}
	}
	free(buf);
	close(fd);
	return NULL;
}

static void
count_cleanup(void *ctx, int error)
{
	__atomic_add_fetch((int *)ctx, 1, __ATOMIC_SEQ_CST);
}

static void
test_pipe(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	sq_queue_t q = sq_queue_create("test.io.pipe", NULL);
	struct pipe_state s = { .v = { 0, true } };
	s.sem = sq_semaphore_create(0);
	int cleanups = 0;
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fds[0], q, &cleanups,
			count_cleanup);
	sq_io_set_low_water(ch, 1);
	sq_io_set_high_water(ch, 8192);
	uint64_t t0 = sqt_now_ns();
	sq_io_read_f(ch, 0, SIZE_MAX, q, &s, pipe_read);
	pthread_t t;
	pthread_create(&t, NULL, pipe_writer, &fds[1]);
	CHECK(wait_sem(s.sem, 60));
	uint64_t t1 = sqt_now_ns();
	pthread_join(t, NULL);
	sq_release(ch); /* the last reference closes the channel */
	for (int i = 0; i < 5000 && __atomic_load_n(&cleanups,
			__ATOMIC_SEQ_CST) == 0; i++)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&cleanups, __ATOMIC_SEQ_CST), 1);
	CHECK_EQ(s.total, PIPE_BYTES);
	CHECK(s.v.ok);
	CHECK_EQ(s.v.pos, PIPE_BYTES);
	CHECK_EQ(s.bad_sizes, 0);
	CHECK_EQ(s.error, 0);
	CHECK(s.calls >= PIPE_BYTES / 8192);
	printf("pipe: %u MiB in %.1f ms (%.0f MB/s), %zu handler calls\n",
			PIPE_BYTES >> 20, (double)(t1 - t0) / 1e6,
			PIPE_BYTES / ((double)(t1 - t0) / 1e3),
			s.calls);
	close(fds[0]);
	sq_release(s.sem);
	sq_release(q);
}

/* ---- Writes through a stream channel -------------------------------------- */

struct write_state {
	int calls;
	int done_calls;
	bool done;
	bool null_data;
	int error;
	sq_semaphore_t sem;
};

/* Progress calls (done = false, the bytes still to write) may come first,
 * as in libdispatch; the last call has done = true. */
static void
write_done(void *ctx, bool done, sq_data_t data, int error)
{
	struct write_state *s = ctx;
	s->calls++;
	s->done = done;
	s->null_data = data == NULL;
	s->error = error;
	if (done) {
		s->done_calls++;
		sq_semaphore_signal(s->sem);
	}
}

struct drain {
	int fd;
	size_t expect;
	size_t got;
	bool ok;
};

static void *
pipe_drainer(void *arg)
{
	struct drain *d = arg;
	uint8_t buf[65536];
	d->ok = true;
	for (;;) {
		ssize_t n = read(d->fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && d->ok; i++)
			d->ok = buf[i] == pattern(d->got + (size_t)i);
		d->got += (size_t)n;
	}
	return NULL;
}

static void
test_write(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	sq_queue_t q = sq_queue_create("test.io.write", NULL);
	int cleanups = 0;
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fds[1], q, &cleanups,
			count_cleanup);
	/* 4 MiB in 64 regions of 64 KiB, plus 5 small writes. */
	sq_data_t all = sq_data_empty;
	size_t size = 0;
	for (int i = 0; i < 64; i++) {
		uint8_t *b = malloc(65536);
		fill_pattern(b, size, 65536);
		sq_data_t d = sq_data_create_f(b, 65536, NULL,
				SQ_DATA_DESTRUCTOR_FREE);
		sq_data_t n = sq_data_create_concat(all, d);
		sq_release(d);
		sq_release(all);
		all = n;
		size += 65536;
	}
	struct write_state ws[6] = { 0 };
	for (int i = 0; i < 6; i++)
		ws[i].sem = sq_semaphore_create(0);
	sq_io_write_f(ch, 0, all, q, &ws[0], write_done);
	for (int i = 1; i < 6; i++) {
		uint8_t b[100];
		fill_pattern(b, size, 100);
		sq_data_t d = sq_data_create_f(b, 100, NULL, NULL);
		sq_io_write_f(ch, 0, d, q, &ws[i], write_done);
		sq_release(d);
		size += 100;
	}
	sq_release(all);
	struct drain dr = { fds[0], size, 0, false };
	pthread_t t;
	pthread_create(&t, NULL, pipe_drainer, &dr);
	for (int i = 0; i < 6; i++) {
		CHECK(wait_sem(ws[i].sem, 20));
		CHECK_EQ(ws[i].done_calls, 1);
		CHECK(ws[i].calls >= 1);
		CHECK(ws[i].done && ws[i].null_data);
		CHECK_EQ(ws[i].error, 0);
		sq_release(ws[i].sem);
	}
	sq_io_close(ch, 0);
	sq_release(ch);
	for (int i = 0; i < 5000 && __atomic_load_n(&cleanups,
			__ATOMIC_SEQ_CST) == 0; i++)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&cleanups, __ATOMIC_SEQ_CST), 1);
	close(fds[1]);
	pthread_join(t, NULL);
	CHECK_EQ(dr.got, size);
	CHECK(dr.ok);
	close(fds[0]);
	sq_release(q);
}

/* ---- TCP echo on loopback ------------------------------------------------- */

struct echo_conn {
	sq_io_t ch;
	sq_queue_t q;
};

static int echo_server_done;

static void
close_fd_cleanup(void *ctx, int error)
{
	close((int)(intptr_t)ctx);
}

static void
echo_server_written(void *ctx, bool done, sq_data_t data, int error)
{
}

static void
echo_server_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct echo_conn *c = ctx;
	if (data != NULL && sq_data_get_size(data) > 0)
		sq_io_write_f(c->ch, 0, data, c->q, c, echo_server_written);
	if (done) {
		sq_io_close(c->ch, 0); /* after the writes issued above */
		sq_release(c->ch);
		sq_release(c->q);
		free(c);
		__atomic_add_fetch(&echo_server_done, 1, __ATOMIC_SEQ_CST);
	}
}

static int echo_listen_fd;

static void
echo_accept(void *ctx)
{
	int lfd = echo_listen_fd;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			break;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct echo_conn *c = malloc(sizeof(*c));
		c->q = sq_queue_create("test.io.echo.conn", NULL);
		c->ch = sq_io_create_f(SQ_IO_STREAM, fd, c->q,
				(void *)(intptr_t)fd, close_fd_cleanup);
		sq_io_read_f(c->ch, 0, SIZE_MAX, c->q, c, echo_server_read);
	}
}

struct echo_client {
	int fd;
	sq_io_t ch;
	struct verify v;
	size_t got;
	bool write_ok;
	int read_error;
	sq_group_t group;
};

static void
echo_client_written(void *ctx, bool done, sq_data_t data, int error)
{
	struct echo_client *c = ctx;
	if (!done)
		return; /* progress: the rest is still being written */
	c->write_ok = data == NULL && error == 0;
	/* -1 once the read side has closed the channel: nothing to do. */
	int fd = sq_io_get_descriptor(c->ch);
	if (fd >= 0)
		shutdown(fd, SHUT_WR);
	sq_release(c->ch); /* the write handler's reference */
}

static void
echo_client_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct echo_client *c = ctx;
	if (c->v.ok)
		sq_data_apply_f(data, &c->v, verify_region);
	c->got += sq_data_get_size(data);
	if (done) {
		c->read_error = error;
		sq_io_close(c->ch, 0);
		sq_release(c->ch);
		sq_group_leave(c->group);
	}
}

static void
signal_cancelled(void *ctx)
{
	sq_semaphore_signal(ctx);
}

static void
test_tcp_echo(void)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t alen = sizeof(a);
	CHECK_EQ(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(listen(lfd, 256), 0);
	CHECK_EQ(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
	sq_queue_t aq = sq_queue_create("test.io.accept", NULL);
	sq_source_t acc = sq_source_create(SQ_SOURCE_TYPE_READ,
			(uintptr_t)lfd, 0, aq);
	echo_listen_fd = lfd;
	sq_source_set_event_handler_f(acc, echo_accept);
	sq_activate(acc);

	/* One payload shared by every client (no copy per client). */
	uint8_t *payload = malloc(ECHO_BYTES);
	fill_pattern(payload, 0, ECHO_BYTES);
	sq_data_t data = sq_data_create_f(payload, ECHO_BYTES, NULL,
			SQ_DATA_DESTRUCTOR_FREE);
	sq_queue_t cq = sq_get_global_queue(0, 0);
	sq_group_t g = sq_group_create();
	struct echo_client *clients = calloc(ECHO_CLIENTS, sizeof(*clients));
	uint64_t t0 = sqt_now_ns();
	for (int i = 0; i < ECHO_CLIENTS; i++) {
		struct echo_client *c = &clients[i];
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK_EQ(connect(c->fd, (struct sockaddr *)&a, sizeof(a)), 0);
		c->v.ok = true;
		c->group = g;
		sq_group_enter(g);
		c->ch = sq_io_create_f(SQ_IO_STREAM, c->fd, cq,
				(void *)(intptr_t)c->fd, close_fd_cleanup);
		/* One reference for each handler: they run on a concurrent
		 * queue, and either may be the last to finish. */
		sq_retain(c->ch);
		sq_retain(c->ch);
		sq_io_write_f(c->ch, 0, data, cq, c, echo_client_written);
		sq_io_read_f(c->ch, 0, ECHO_BYTES, cq, c, echo_client_read);
		sq_release(c->ch);
	}
	CHECK_EQ(sq_group_wait(g, sq_time(SQ_TIME_NOW, 60 * NSEC_PER_SEC)), 0);
	uint64_t t1 = sqt_now_ns();
	int bad = 0;
	for (int i = 0; i < ECHO_CLIENTS; i++) {
		struct echo_client *c = &clients[i];
		if (!c->write_ok || c->got != ECHO_BYTES || !c->v.ok ||
				c->read_error != 0)
			bad++;
	}
	CHECK_EQ(bad, 0);
	for (int i = 0; i < 5000 && __atomic_load_n(&echo_server_done,
			__ATOMIC_SEQ_CST) < ECHO_CLIENTS; i++)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&echo_server_done, __ATOMIC_SEQ_CST),
			ECHO_CLIENTS);
	printf("tcp echo: %d clients x %u KiB in %.1f ms\n", ECHO_CLIENTS,
			ECHO_BYTES >> 10, (double)(t1 - t0) / 1e6);
	/* Close the listening socket only once the source let it go. */
	sq_semaphore_t cancelled = sq_semaphore_create(0);
	sq_set_context(acc, cancelled);
	sq_source_set_cancel_handler_f(acc, signal_cancelled);
	sq_source_cancel(acc);
	CHECK_EQ(sq_semaphore_wait(cancelled, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)), 0);
	sq_release(cancelled);
	sq_release(acc);
	sq_release(data);
	sq_release(g);
	free(clients);
	close(lfd);
	sq_release(aq);
}

int
main(void)
{
	test_http();
	test_pipe();
	test_write();
	test_tcp_echo();
	return sqt_finish("test_io_stream");
}
