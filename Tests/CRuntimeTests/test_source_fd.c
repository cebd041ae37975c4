/*
 * Read and write sources: a pipe read byte-exact while a writer thread
 * pushes 1 MiB, EOF delivered once, the cancel handler closing the fd once;
 * ProcessContentsOfFile on a regular file (get_data = bytes remaining) and
 * on a socketpair; a reader whose data was stolen keeps its queue moving;
 * WriteDataToFile; a write source firing at once; a TCP server on loopback
 * accepting 100 connections (a listening source, one read source per
 * connection); a read and a write source on one descriptor (libdispatch
 * io_muxed); cancel while a handler runs; a descriptor closed and its
 * number reused under a live source (one registration per fd). After
 * libdispatch's dispatch_read and dispatch_io_muxed tests.
 */
#include "source_helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

static void
set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static unsigned char
pattern(size_t i)
{
	return (unsigned char)((i * 7u + i / 251u) & 0xffu);
}

static char tmpdir[] = "/tmp/sqt-fd-XXXXXX";

static void
tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* ---- hello on a pipe; the cancel handler closes --------------------------------- */

struct hello {
	sq_source_t src;
	int fd;
	atomic_ulong data;
	atomic_ulong handle;
	atomic_int calls, closes, on_queue, after_cancel;
	char buf[64];
	sq_semaphore_t each, cancel_sem;
};

static void
hello_handler(void *ctx)
{
	struct hello *h = ctx;
	if (atomic_load(&h->closes))
		atomic_fetch_add(&h->after_cancel, 1);
	atomic_store(&h->data, sq_source_get_data(h->src));
	atomic_store(&h->handle, sq_source_get_handle(h->src));
	if (strcmp(sq_queue_get_label(SQ_CURRENT_QUEUE_LABEL), "fd.hello") == 0)
		atomic_fetch_add(&h->on_queue, 1);
	ssize_t n = read(h->fd, h->buf, sizeof(h->buf) - 1);
	if (n > 0)
		h->buf[n] = '\0';
	atomic_fetch_add(&h->calls, 1);
	sq_semaphore_signal(h->each);
}

static void
hello_cancel(void *ctx)
{
	struct hello *h = ctx;
	/* Counts successful closes: the fd was open, and is no more. */
	if (close(h->fd) == 0)
		atomic_fetch_add(&h->closes, 1);
	sq_semaphore_signal(h->cancel_sem);
}

static void
test_pipe_hello(void)
{
	int p[2];
	CHECK_EQ(pipe(p), 0);
	set_nonblock(p[0]);
	sq_queue_t q = sq_queue_create("fd.hello", NULL);
	struct hello h;
	memset(&h, 0, sizeof(h));
	h.fd = p[0];
	h.each = sq_semaphore_create(0);
	h.cancel_sem = sq_semaphore_create(0);
	h.src = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0, q);
	CHECK(h.src != NULL);
	sq_set_context(h.src, &h);
	sq_source_set_event_handler_f(h.src, hello_handler);
	sq_source_set_cancel_handler_f(h.src, hello_cancel);
	sq_activate(h.src);
	CHECK_EQ(write(p[1], "hello", 5), 5);
	CHECK(sem_wait_ms(h.each, 10000));
	CHECK(atomic_load(&h.data) >= 5);
	CHECK_EQ(atomic_load(&h.handle), p[0]);
	CHECK_EQ(atomic_load(&h.on_queue), 1);
	CHECK(strcmp(h.buf, "hello") == 0);
	CHECK_EQ(sq_source_get_handle(h.src), p[0]);

	sq_source_cancel(h.src);
	CHECK(sem_wait_ms(h.cancel_sem, 10000));
	/* The descriptor is closed once, by the cancel handler (its close()
	 * succeeded: counted in `closes`). Checking with fcntl afterwards
	 * would race with runtime threads reusing the number. */
	settle();
	CHECK_EQ(atomic_load(&h.closes), 1);
	CHECK_EQ(atomic_load(&h.after_cancel), 0);
	CHECK_EQ(atomic_load(&h.calls), 1);
	sq_release(h.src);
	close(p[1]);
	sq_release(q);
	settle();
	sq_release(h.each);
	sq_release(h.cancel_sem);
}

/* ---- 1 MiB through a pipe, writer thread, EOF -------------------------------------- */

#define BIG (1u << 20)

struct big {
	sq_source_t src;
	int fd;
	size_t total;
	size_t mismatches;
	int calls, eof_calls, eagain, data_zero_but_bytes, data_but_eof;
	atomic_int closes, after_cancel;
	unsigned char buf[65536];
	sq_semaphore_t cancel_sem;
};

static void
big_handler(void *ctx)
{
	struct big *b = ctx;
	if (atomic_load(&b->closes))
		atomic_fetch_add(&b->after_cancel, 1);
	b->calls++;
	size_t d = sq_source_get_data(b->src);
	size_t want = d == 0 ? 1 : d < sizeof(b->buf) ? d : sizeof(b->buf);
	ssize_t n = read(b->fd, b->buf, want);
	if (n > 0) {
		if (d == 0)
			b->data_zero_but_bytes++;
		for (ssize_t i = 0; i < n; i++)
			if (b->buf[i] != pattern(b->total + (size_t)i))
				b->mismatches++;
		b->total += (size_t)n;
	} else if (n == 0) {
		if (d != 0)
			b->data_but_eof++;
		b->eof_calls++;
		sq_source_cancel(b->src);
	} else if (errno == EAGAIN) {
		b->eagain++;
	}
}

static void
big_cancel(void *ctx)
{
	struct big *b = ctx;
	/* Counts successful closes: the fd was open, and is no more. */
	if (close(b->fd) == 0)
		atomic_fetch_add(&b->closes, 1);
	sq_semaphore_signal(b->cancel_sem);
}

static void *
big_writer(void *arg)
{
	int fd = *(int *)arg;
	static unsigned char chunk[8192];
	size_t off = 0;
	unsigned seed = 1;
	while (off < BIG) {
		size_t len = 1 + rand_r(&seed) % sizeof(chunk);
		if (len > BIG - off)
			len = BIG - off;
		for (size_t i = 0; i < len; i++)
			chunk[i] = pattern(off + i);
		ssize_t n = write(fd, chunk, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		off += (size_t)n;
	}
	close(fd);
	return NULL;
}

static void
test_pipe_1mib(void)
{
	int p[2];
	CHECK_EQ(pipe(p), 0);
	set_nonblock(p[0]);
	sq_queue_t q = sq_queue_create("fd.big", NULL);
	struct big *b = calloc(1, sizeof(*b));
	b->fd = p[0];
	b->cancel_sem = sq_semaphore_create(0);
	b->src = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0, q);
	CHECK(b->src != NULL);
	sq_set_context(b->src, b);
	sq_source_set_event_handler_f(b->src, big_handler);
	sq_source_set_cancel_handler_f(b->src, big_cancel);
	sq_activate(b->src);
	pthread_t writer;
	pthread_create(&writer, NULL, big_writer, &p[1]);
	CHECK(sem_wait_ms(b->cancel_sem, 20000));
	pthread_join(writer, NULL);
	settle();
	/* Ordered by the cancel handler's semaphore. */
	CHECK_EQ(b->total, BIG);
	CHECK_EQ(b->mismatches, 0);
	CHECK_EQ(b->eof_calls, 1);
	CHECK_EQ(b->data_zero_but_bytes, 0);
	CHECK_EQ(b->data_but_eof, 0);
	CHECK_EQ(atomic_load(&b->closes), 1);
	CHECK_EQ(atomic_load(&b->after_cancel), 0);
	CHECK(b->calls >= 2);
	sq_release(b->src);
	sq_release(q);
	settle();
	sq_release(b->cancel_sem);
	free(b);
}

/* ---- ProcessContentsOfFile on a regular file ------------------------------------ */

struct file_reader {
	sq_source_t src;
	int fd;
	size_t size;
	unsigned char *got;
	size_t total;
	int calls, wrong_estimate, eof_calls;
	bool cancel_at_eof; /* false: cancel when total == size */
	atomic_int closes, after_cancel;
	sq_semaphore_t cancel_sem;
};

/* MyProcessFileData: append; done when the whole file is in. */
static bool
process_file_data(struct file_reader *r, const void *buf, ssize_t n)
{
	if (n > 0) {
		memcpy(r->got + r->total, buf, (size_t)n);
		r->total += (size_t)n;
	}
	if (r->cancel_at_eof)
		return n == 0;
	return r->total == r->size;
}

static void
file_handler(void *ctx)
{
	struct file_reader *r = ctx;
	if (atomic_load(&r->closes))
		atomic_fetch_add(&r->after_cancel, 1);
	r->calls++;
	size_t d = sq_source_get_data(r->src);
	/* The regular-file estimate is exact: the bytes remaining. */
	if (d != r->size - r->total)
		r->wrong_estimate++;
	if (d == 0)
		r->eof_calls++;
	size_t estimated = d + 1;
	char *buffer = malloc(estimated);
	ssize_t actual = read(r->fd, buffer, estimated);
	bool done = process_file_data(r, buffer, actual);
	free(buffer);
	if (done)
		sq_source_cancel(r->src);
}

static void
file_cancel(void *ctx)
{
	struct file_reader *r = ctx;
	/* Counts successful closes: the fd was open, and is no more. */
	if (close(r->fd) == 0)
		atomic_fetch_add(&r->closes, 1);
	sq_semaphore_signal(r->cancel_sem);
}

static void
write_file(const char *path, const unsigned char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(fd);
}

static void
process_contents_of_file(size_t size, bool cancel_at_eof)
{
	char path[128];
	tmp_path(path, sizeof(path), "contents");
	unsigned char *data = malloc(size);
	unsigned seed = 42;
	for (size_t i = 0; i < size; i++)
		data[i] = (unsigned char)rand_r(&seed);
	write_file(path, data, size);

	struct file_reader *r = calloc(1, sizeof(*r));
	r->size = size;
	r->got = malloc(size + 1);
	r->cancel_at_eof = cancel_at_eof;
	r->cancel_sem = sq_semaphore_create(0);
	r->fd = open(path, O_RDONLY);
	CHECK(r->fd >= 0);
	fcntl(r->fd, F_SETFL, O_NONBLOCK);
	r->src = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)r->fd, 0,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));
	CHECK(r->src != NULL);
	sq_set_context(r->src, r);
	sq_source_set_event_handler_f(r->src, file_handler);
	sq_source_set_cancel_handler_f(r->src, file_cancel);
	sq_resume(r->src);
	CHECK(sem_wait_ms(r->cancel_sem, 20000));
	settle();
	CHECK_EQ(r->total, size);
	CHECK(memcmp(r->got, data, size) == 0);
	CHECK_EQ(r->wrong_estimate, 0);
	CHECK_EQ(r->eof_calls, cancel_at_eof ? 1 : 0);
	CHECK_EQ(atomic_load(&r->closes), 1);
	CHECK_EQ(atomic_load(&r->after_cancel), 0);
	sq_release(r->src);
	settle();
	sq_release(r->cancel_sem);
	free(r->got);
	free(r);
	free(data);
	unlink(path);
}

/* ---- a socketpair whose peer writes 3 chunks, then closes ----------------------- */

struct sock_reader {
	sq_source_t src;
	int fd;
	char got[64];
	size_t total;
	int eof_calls, zero_data_calls;
	atomic_int closes;
	sq_semaphore_t cancel_sem;
};

static void
sock_handler(void *ctx)
{
	struct sock_reader *r = ctx;
	if (sq_source_get_data(r->src) == 0)
		r->zero_data_calls++;
	for (;;) {
		ssize_t n = read(r->fd, r->got + r->total,
				sizeof(r->got) - 1 - r->total);
		if (n > 0) {
			r->total += (size_t)n;
			continue;
		}
		if (n == 0) {
			r->eof_calls++;
			sq_source_cancel(r->src);
		}
		break;
	}
}

static void
sock_cancel(void *ctx)
{
	struct sock_reader *r = ctx;
	/* Counts successful closes: the fd was open, and is no more. */
	if (close(r->fd) == 0)
		atomic_fetch_add(&r->closes, 1);
	sq_semaphore_signal(r->cancel_sem);
}

static void *
three_chunks(void *arg)
{
	int fd = *(int *)arg;
	const char *chunks[3] = { "one", "two", "three" };
	for (int i = 0; i < 3; i++) {
		sqt_sleep_ms(20);
		if (write(fd, chunks[i], strlen(chunks[i])) < 0)
			break;
	}
	sqt_sleep_ms(20);
	close(fd);
	return NULL;
}

static void
test_socketpair_chunks(void)
{
	int sv[2];
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	set_nonblock(sv[0]);
	struct sock_reader r;
	memset(&r, 0, sizeof(r));
	r.fd = sv[0];
	r.cancel_sem = sq_semaphore_create(0);
	sq_queue_t q = sq_queue_create("fd.socketpair", NULL);
	r.src = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)sv[0], 0, q);
	CHECK(r.src != NULL);
	sq_set_context(r.src, &r);
	sq_source_set_event_handler_f(r.src, sock_handler);
	sq_source_set_cancel_handler_f(r.src, sock_cancel);
	sq_activate(r.src);
	pthread_t peer;
	pthread_create(&peer, NULL, three_chunks, &sv[1]);
	CHECK(sem_wait_ms(r.cancel_sem, 10000));
	pthread_join(peer, NULL);
	r.got[r.total] = '\0';
	CHECK(strcmp(r.got, "onetwothree") == 0);
	CHECK_EQ(r.eof_calls, 1);
	CHECK_EQ(atomic_load(&r.closes), 1);
	sq_release(r.src);
	sq_release(q);
	settle();
	sq_release(r.cancel_sem);
}

/* ---- a stolen read keeps the queue moving ----------------------------------------- */

struct steal {
	sq_source_t src;
	int fd;
	atomic_int calls, eagain, bytes;
	sq_semaphore_t each, gate, after, cancelled;
};

static void
steal_handler(void *ctx)
{
	struct steal *s = ctx;
	char buf[64];
	ssize_t n = read(s->fd, buf, sizeof(buf));
	if (n < 0 && errno == EAGAIN)
		atomic_fetch_add(&s->eagain, 1);
	else if (n > 0)
		atomic_fetch_add(&s->bytes, (int)n);
	atomic_fetch_add(&s->calls, 1);
	sq_semaphore_signal(s->each);
}

static void
steal_cancel(void *ctx)
{
	sq_semaphore_signal(((struct steal *)ctx)->cancelled);
}

static void
steal_blocker(void *ctx)
{
	struct steal *s = ctx;
	sem_wait_ms(s->gate, 10000);
}

static void
steal_after(void *ctx)
{
	struct steal *s = ctx;
	sq_semaphore_signal(s->after);
}

static void
test_stolen_read(void)
{
	int p[2];
	CHECK_EQ(pipe(p), 0);
	set_nonblock(p[0]);
	sq_queue_t q = sq_queue_create("fd.steal", NULL);
	struct steal s;
	memset(&s, 0, sizeof(s));
	s.fd = p[0];
	s.each = sq_semaphore_create(0);
	s.gate = sq_semaphore_create(0);
	s.after = sq_semaphore_create(0);
	s.cancelled = sq_semaphore_create(0);
	s.src = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0, q);
	sq_set_context(s.src, &s);
	sq_source_set_event_handler_f(s.src, steal_handler);
	sq_source_set_cancel_handler_f(s.src, steal_cancel);
	sq_activate(s.src);
	settle();
	/* The queue is busy; the event's handler job waits behind it. */
	sq_async_f(q, &s, steal_blocker);
	CHECK_EQ(write(p[1], "0123456789", 10), 10);
	settle();
	char buf[16];
	CHECK_EQ(read(p[0], buf, sizeof(buf)), 10); /* another reader */
	sq_async_f(q, &s, steal_after);
	sq_semaphore_signal(s.gate);
	/* The queue moves on: the task behind the handler runs. */
	CHECK(sem_wait_ms(s.after, 10000));
	/* If the handler ran, its read found nothing (EAGAIN). */
	CHECK_EQ(atomic_load(&s.bytes), 0);
	CHECK_EQ(atomic_load(&s.eagain), atomic_load(&s.calls));
	/* And the source still watches: new data is delivered. */
	int before = atomic_load(&s.calls);
	CHECK_EQ(write(p[1], "abc", 3), 3);
	bool delivered = false;
	for (int i = 0; i < 4 && !delivered; i++) {
		if (!sem_wait_ms(s.each, 500))
			break;
		delivered = atomic_load(&s.bytes) == 3;
	}
	if (!delivered)
		fprintf(stderr, "stolen read: calls %d -> %d, bytes %d: data "
				"written after the steal was not delivered\n",
				before, atomic_load(&s.calls),
				atomic_load(&s.bytes));
	CHECK(delivered);
	sq_source_cancel(s.src);
	/* Close only once the source has let go (its cancel handler). */
	CHECK(sem_wait_ms(s.cancelled, 10000));
	sq_release(s.src);
	sq_release(q);
	settle();
	close(p[0]);
	close(p[1]);
	sq_release(s.each);
	sq_release(s.gate);
	sq_release(s.after);
	sq_release(s.cancelled);
}

/* ---- WriteDataToFile; a write source fires at once ---------------------------------- */

struct writer {
	sq_source_t src;
	int fd;
	atomic_int calls, closes;
	atomic_ulong data;
	ssize_t wrote;
	uint64_t when;
	sq_semaphore_t cancel_sem;
};

static void
write_handler(void *ctx)
{
	struct writer *w = ctx;
	w->when = sqt_now_ns();
	atomic_store(&w->data, sq_source_get_data(w->src));
	size_t size = 4096; /* MyGetDataSize */
	unsigned char *buffer = malloc(size);
	for (size_t i = 0; i < size; i++)  /* MyGetData */
		buffer[i] = pattern(i);
	w->wrote = write(w->fd, buffer, size);
	free(buffer);
	atomic_fetch_add(&w->calls, 1);
	sq_source_cancel(w->src);
}

static void
write_cancel(void *ctx)
{
	struct writer *w = ctx;
	/* Counts successful closes: the fd was open, and is no more. */
	if (close(w->fd) == 0)
		atomic_fetch_add(&w->closes, 1);
	sq_semaphore_signal(w->cancel_sem);
}

static void
run_writer(int fd, uint64_t *latency)
{
	struct writer w;
	memset(&w, 0, sizeof(w));
	w.fd = fd;
	w.cancel_sem = sq_semaphore_create(0);
	w.src = sq_source_create(SQ_SOURCE_TYPE_WRITE, (uintptr_t)fd, 0,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));
	CHECK(w.src != NULL);
	sq_set_context(w.src, &w);
	sq_source_set_event_handler_f(w.src, write_handler);
	sq_source_set_cancel_handler_f(w.src, write_cancel);
	uint64_t start = sqt_now_ns();
	sq_resume(w.src);
	CHECK(sem_wait_ms(w.cancel_sem, 10000));
	settle();
	CHECK_EQ(atomic_load(&w.calls), 1);
	CHECK_EQ(w.wrote, 4096);
	CHECK(atomic_load(&w.data) > 0);
	CHECK_EQ(atomic_load(&w.closes), 1);
	if (latency)
		*latency = w.when - start;
	sq_release(w.src);
	settle();
	sq_release(w.cancel_sem);
}

static void
test_write_data_to_file(void)
{
	char path[128];
	tmp_path(path, sizeof(path), "written");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, S_IRUSR | S_IWUSR);
	CHECK(fd >= 0);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	run_writer(fd, NULL);
	unsigned char buf[8192];
	int rfd = open(path, O_RDONLY);
	ssize_t n = read(rfd, buf, sizeof(buf));
	close(rfd);
	CHECK_EQ(n, 4096);
	int bad = 0;
	for (ssize_t i = 0; i < n; i++)
		bad += buf[i] != pattern((size_t)i);
	CHECK_EQ(bad, 0);
	unlink(path);

	/* Pipe variant: a fresh pipe is writable at once. */
	int p[2];
	CHECK_EQ(pipe(p), 0);
	set_nonblock(p[1]);
	uint64_t latency = 0;
	run_writer(p[1], &latency);
	CHECK(latency < 500 * MS);
	n = read(p[0], buf, sizeof(buf));
	CHECK_EQ(n, 4096);
	CHECK(buf[100] == pattern(100));
	close(p[0]);
}

/* ---- TCP on loopback: accept 100 connections -------------------------------------- */

#define NCONN 100

struct server {
	sq_queue_t isolation; /* accepts and connection reads, serialised */
	sq_source_t listener;
	int lfd;
	int accepted;        /* on `isolation` only */
	atomic_int bytes, conn_closes, listen_closes, zero_data;
	sq_semaphore_t all_done, listen_cancelled;
};

struct conn {
	struct server *srv;
	sq_source_t src;
	int fd;
};

static void
conn_read(void *ctx)
{
	struct conn *c = ctx;
	char buf[16];
	for (;;) {
		ssize_t n = read(c->fd, buf, sizeof(buf));
		if (n > 0) {
			atomic_fetch_add(&c->srv->bytes, (int)n);
			continue;
		}
		if (n == 0)
			sq_source_cancel(c->src);
		break;
	}
}

static void
conn_cancel(void *ctx)
{
	struct conn *c = ctx;
	close(c->fd);
	int n = atomic_fetch_add(&c->srv->conn_closes, 1) + 1;
	if (n == NCONN)
		sq_semaphore_signal(c->srv->all_done);
	sq_release(c->src);
	free(c);
}

static void
accept_connections(void *ctx)
{
	struct server *s = ctx;
	if (sq_source_get_data(s->listener) == 0)
		atomic_fetch_add(&s->zero_data, 1);
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK);
		if (fd < 0)
			break;
		s->accepted++;
		struct conn *c = calloc(1, sizeof(*c));
		c->srv = s;
		c->fd = fd;
		c->src = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)fd,
				0, s->isolation);
		sq_set_context(c->src, c);
		sq_source_set_event_handler_f(c->src, conn_read);
		sq_source_set_cancel_handler_f(c->src, conn_cancel);
		sq_activate(c->src);
	}
}

static void
listener_cancel(void *ctx)
{
	struct server *s = ctx;
	/* Counts successful closes: the fd was open, and is no more. */
	if (close(s->lfd) == 0)
		atomic_fetch_add(&s->listen_closes, 1);
	sq_semaphore_signal(s->listen_cancelled);
}

static void *
clients(void *arg)
{
	uint16_t port = *(uint16_t *)arg;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < NCONN; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			(void)!write(fd, "x", 1);
		close(fd);
	}
	return NULL;
}

struct accepted_query {
	struct server *srv;
	int accepted;
};

static void
get_accepted(void *ctx)
{
	struct accepted_query *aq = ctx;
	aq->accepted = aq->srv->accepted;
}

static void
test_tcp_accept_100(void)
{
	struct server s;
	memset(&s, 0, sizeof(s));
	s.all_done = sq_semaphore_create(0);
	s.listen_cancelled = sq_semaphore_create(0);
	s.isolation = sq_queue_create("fd.server", NULL);
	sq_set_context(s.isolation, &s);
	s.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK_EQ(bind(s.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(listen(s.lfd, 128), 0);
	socklen_t len = sizeof(a);
	getsockname(s.lfd, (struct sockaddr *)&a, &len);
	s.listener = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)s.lfd, 0,
			s.isolation);
	CHECK(s.listener != NULL);
	sq_set_context(s.listener, &s);
	sq_source_set_event_handler_f(s.listener, accept_connections);
	sq_source_set_cancel_handler_f(s.listener, listener_cancel);
	sq_resume(s.listener);

	pthread_t t;
	uint16_t port = a.sin_port;
	pthread_create(&t, NULL, clients, &port);
	pthread_join(t, NULL);
	CHECK(sem_wait_ms(s.all_done, 20000));
	struct accepted_query aq = { &s, 0 };
	sq_sync_f(s.isolation, &aq, get_accepted);
	CHECK_EQ(aq.accepted, NCONN);
	CHECK_EQ(atomic_load(&s.bytes), NCONN);
	CHECK_EQ(atomic_load(&s.conn_closes), NCONN);
	/* A listening socket's "readable bytes" is unknown: positive. */
	CHECK_EQ(atomic_load(&s.zero_data), 0);

	sq_source_cancel(s.listener);
	CHECK(sem_wait_ms(s.listen_cancelled, 10000));
	CHECK_EQ(atomic_load(&s.listen_closes), 1);
	sq_release(s.listener);
	sq_release(s.isolation);
	settle();
	sq_release(s.all_done);
	sq_release(s.listen_cancelled);
}

/* ---- io_muxed: a read and a write source on one descriptor -------------------------- */

struct muxed {
	sq_source_t rd, wr;
	int fd;
	atomic_int reads, writes;
	sq_group_t cancelled;
};

static void
mux_read(void *ctx)
{
	struct muxed *m = ctx;
	char buf[64];
	(void)!read(m->fd, buf, sizeof(buf));
	atomic_fetch_add(&m->reads, 1);
	sq_source_cancel(m->rd);
}

static void
mux_write(void *ctx)
{
	struct muxed *m = ctx;
	atomic_fetch_add(&m->writes, 1);
	sq_source_cancel(m->wr);
}

static void
mux_cancel(void *ctx)
{
	struct muxed *m = ctx;
	sq_group_leave(m->cancelled);
}

static void
muxed_on(int fd, int peer)
{
	struct muxed m;
	memset(&m, 0, sizeof(m));
	m.fd = fd;
	m.cancelled = sq_group_create();
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	m.rd = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)fd, 0, g);
	m.wr = sq_source_create(SQ_SOURCE_TYPE_WRITE, (uintptr_t)fd, 0, g);
	CHECK(m.rd != NULL && m.wr != NULL);
	sq_source_t both[2] = { m.rd, m.wr };
	for (int i = 0; i < 2; i++) {
		sq_set_context(both[i], &m);
		sq_source_set_cancel_handler_f(both[i], mux_cancel);
		sq_group_enter(m.cancelled);
	}
	sq_source_set_event_handler_f(m.rd, mux_read);
	sq_source_set_event_handler_f(m.wr, mux_write);
	sq_activate(m.rd);
	sq_activate(m.wr);
	if (peer >= 0) {
		/* The write side fires first; data comes later. */
		sqt_sleep_ms(50);
		CHECK_EQ(write(peer, "ping", 4), 4);
	}
	CHECK_EQ(sq_group_wait(m.cancelled, sq_time(SQ_TIME_NOW,
			(int64_t)20000 * (int64_t)MS)), 0);
	CHECK_EQ(atomic_load(&m.reads), 1);
	CHECK_EQ(atomic_load(&m.writes), 1);
	sq_release(m.rd);
	sq_release(m.wr);
	settle();
	sq_release(m.cancelled);
}

static void
test_io_muxed(void)
{
	/* A regular file (always ready). */
	char path[128];
	tmp_path(path, sizeof(path), "muxed");
	write_file(path, (const unsigned char *)"some bytes", 10);
	int fd = open(path, O_RDWR | O_NONBLOCK);
	muxed_on(fd, -1);
	close(fd);
	unlink(path);

	/* A loopback TCP connection. */
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(lfd, (struct sockaddr *)&a, sizeof(a));
	listen(lfd, 4);
	socklen_t len = sizeof(a);
	getsockname(lfd, (struct sockaddr *)&a, &len);
	int cfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_EQ(connect(cfd, (struct sockaddr *)&a, sizeof(a)), 0);
	int sfd = accept(lfd, NULL, NULL);
	CHECK(sfd >= 0);
	set_nonblock(cfd);
	muxed_on(cfd, sfd);
	close(cfd);
	close(sfd);
	close(lfd);
}

/* ---- cancel while the handler runs --------------------------------------------------- */

struct inflight {
	sq_source_t src;
	int fd;
	atomic_int calls, cancel_calls;
	uint64_t handler_end, cancel_start;
	sq_semaphore_t started, cancel_sem;
};

static void
inflight_handler(void *ctx)
{
	struct inflight *f = ctx;
	atomic_fetch_add(&f->calls, 1);
	sq_semaphore_signal(f->started);
	sqt_sleep_ms(100);
	char buf[64];
	(void)!read(f->fd, buf, sizeof(buf));
	f->handler_end = sqt_now_ns();
}

static void
inflight_cancel(void *ctx)
{
	struct inflight *f = ctx;
	f->cancel_start = sqt_now_ns();
	atomic_fetch_add(&f->cancel_calls, 1);
	sq_semaphore_signal(f->cancel_sem);
}

static void
test_cancel_in_flight(void)
{
	int p[2];
	CHECK_EQ(pipe(p), 0);
	set_nonblock(p[0]);
	struct inflight f;
	memset(&f, 0, sizeof(f));
	f.fd = p[0];
	f.started = sq_semaphore_create(0);
	f.cancel_sem = sq_semaphore_create(0);
	f.src = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)p[0], 0,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));
	sq_set_context(f.src, &f);
	sq_source_set_event_handler_f(f.src, inflight_handler);
	sq_source_set_cancel_handler_f(f.src, inflight_cancel);
	sq_activate(f.src);
	CHECK_EQ(write(p[1], "abc", 3), 3);
	CHECK(sem_wait_ms(f.started, 10000));
	sq_source_cancel(f.src);
	CHECK(sq_source_testcancel(f.src) != 0);
	sq_source_cancel(f.src); /* a second cancel is harmless */
	CHECK_EQ(write(p[1], "more", 4), 4);
	CHECK(sem_wait_ms(f.cancel_sem, 10000));
	settle();
	CHECK_EQ(atomic_load(&f.calls), 1);
	CHECK_EQ(atomic_load(&f.cancel_calls), 1);
	CHECK(f.cancel_start >= f.handler_end);
	sq_release(f.src);
	close(p[0]);
	close(p[1]);
	settle();
	sq_release(f.started);
	sq_release(f.cancel_sem);
}

/* ---- a descriptor closed, and its number reused, under a live source ------------------ */

struct reuse {
	sq_source_t src;
	int fd;
	atomic_int calls, bytes;
	char last[8];
	sq_semaphore_t reg, each, cancelled;
};

static void
reuse_cancel(void *ctx)
{
	sq_semaphore_signal(((struct reuse *)ctx)->cancelled);
}

static void
reuse_registered(void *ctx)
{
	sq_semaphore_signal(((struct reuse *)ctx)->reg);
}

static void
reuse_handler(void *ctx)
{
	struct reuse *r = ctx;
	char buf[8];
	ssize_t n = read(r->fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		memcpy(r->last, buf, (size_t)n + 1);
		atomic_fetch_add(&r->bytes, (int)n);
	}
	atomic_fetch_add(&r->calls, 1);
	sq_semaphore_signal(r->each);
}

static void
reuse_start(struct reuse *r, int fd)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->reg = sq_semaphore_create(0);
	r->each = sq_semaphore_create(0);
	r->cancelled = sq_semaphore_create(0);
	r->src = sq_source_create(SQ_SOURCE_TYPE_READ, (uintptr_t)fd, 0,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));
	CHECK(r->src != NULL);
	sq_set_context(r->src, r);
	sq_source_set_registration_handler_f(r->src, reuse_registered);
	sq_source_set_event_handler_f(r->src, reuse_handler);
	sq_source_set_cancel_handler_f(r->src, reuse_cancel);
	sq_activate(r->src);
	CHECK(sem_wait_ms(r->reg, 10000));
}

static bool
reuse_wait_bytes(struct reuse *r, int bytes)
{
	for (int i = 0; i < 4; i++) {
		if (atomic_load(&r->bytes) >= bytes)
			return true;
		sem_wait_ms(r->each, 250);
	}
	return atomic_load(&r->bytes) >= bytes;
}

static void
test_fd_closed_and_reused(void)
{
	int p1[2], p2[2];
	CHECK_EQ(pipe(p1), 0);
	set_nonblock(p1[0]);
	struct reuse first, second;
	reuse_start(&first, p1[0]);
	int number = p1[0];
	/* The program closes the descriptor without cancelling first. */
	close(p1[0]);
	close(p1[1]);
	/* The lowest free number comes back, unless a runtime thread took
	 * it meanwhile (it reads /proc now and then): then try again. No
	 * dup2 onto the number: that could close someone else's file. */
	bool reused = false;
	for (int i = 0; i < 100 && !reused; i++) {
		CHECK_EQ(pipe(p2), 0);
		reused = p2[0] == number;
		if (!reused) {
			close(p2[0]);
			close(p2[1]);
			sqt_sleep_ms(1);
		}
	}
	if (!reused) {
		fprintf(stderr, "fd reuse: could not get fd %d back; skipped\n",
				number);
		sq_source_cancel(first.src);
		CHECK(sem_wait_ms(first.cancelled, 10000));
		sq_release(first.src);
		settle();
		sq_release(first.reg);
		sq_release(first.each);
		sq_release(first.cancelled);
		return;
	}
	set_nonblock(p2[0]);
	reuse_start(&second, p2[0]);
	CHECK_EQ(write(p2[1], "x", 1), 1);
	bool got = reuse_wait_bytes(&second, 1);
	if (!got)
		fprintf(stderr, "fd reuse: the new source on fd %d got no "
				"event (first: %d calls, second: %d)\n",
				number, atomic_load(&first.calls),
				atomic_load(&second.calls));
	CHECK(got);
	/* The old source does not take the new file's data. */
	CHECK_EQ(atomic_load(&first.bytes), 0);

	/* Cancelling the stale source leaves the new one working. */
	sq_source_cancel(first.src);
	CHECK(sem_wait_ms(first.cancelled, 10000));
	sq_release(first.src);
	CHECK_EQ(write(p2[1], "y", 1), 1);
	CHECK(reuse_wait_bytes(&second, got ? 2 : 1));
	CHECK_EQ(atomic_load(&first.bytes), 0);

	sq_source_cancel(second.src);
	CHECK(sem_wait_ms(second.cancelled, 10000));
	sq_release(second.src);
	close(p2[0]);
	close(p2[1]);
	settle();
	sq_release(first.reg);
	sq_release(first.each);
	sq_release(first.cancelled);
	sq_release(second.reg);
	sq_release(second.each);
	sq_release(second.cancelled);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	test_pipe_hello();
	test_pipe_1mib();
	process_contents_of_file(BIG, false);
	process_contents_of_file(100000, true);
	test_socketpair_chunks();
	test_write_data_to_file();
	test_tcp_accept_100();
	test_io_muxed();
	test_cancel_in_flight();
	test_stolen_read();
	test_fd_closed_and_reused();
	rmdir(tmpdir);
	return sqt_finish("test_source_fd");
}
