/*
 * Operations on one descriptor run in the order they were issued, whatever
 * channel or convenience call issued them; sq_read on a stream delivers
 * what is there when the descriptor would block; a channel's cleanup
 * handler never overlaps one of its handler calls.
 */
#include "io_helpers.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#if SQT_SANITIZED
#define ORDER_RUNS 10
#define MANY_CHANNELS 1000
#else
#define ORDER_RUNS 100
#define MANY_CHANNELS 5000
#endif

#define CHUNKS 320
#define CHUNK 32

static bool
wait_sem(sq_semaphore_t s, int seconds)
{
	return sq_semaphore_wait(s, sq_time(SQ_TIME_NOW,
			(int64_t)seconds * (int64_t)NSEC_PER_SEC)) == 0;
}

static char tmpdir[64];

static void
make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sqt-order-XXXXXX");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		exit(1);
	}
}

/* ---- 320 ordered writes, then 320 ordered reads ------------------------ */

struct order {
	sq_semaphore_t sem;
	int errors;
	int bad_reads;
	int next;          /* reads: the index of the next handler call */
};

static void
wrote(void *ctx, sq_data_t unwritten, int error)
{
	struct order *o = ctx;
	if (error != 0 || unwritten != NULL)
		__atomic_add_fetch(&o->errors, 1, __ATOMIC_RELAXED);
	sq_semaphore_signal(o->sem);
}

/* Read handlers run on one serial queue, so `next` needs no atomics. */
static void
read_one(void *ctx, sq_data_t data, int error)
{
	struct order *o = ctx;
	if (error != 0 || sq_data_get_size(data) != CHUNK ||
			!data_is_pattern(data, (size_t)o->next * CHUNK))
		o->bad_reads++;
	o->next++;
	sq_semaphore_signal(o->sem);
}

/* Writes 320 chunks to wfd with sq_write, then reads them back from rfd
 * with sq_read (after the writes, and `before_reads`, for a file). Returns
 * the bad reads. */
static int
order_run(int wfd, int rfd, sq_queue_t q, void (*before_reads)(int),
		int *errors)
{
	static uint8_t buf[CHUNKS * CHUNK];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pat(i);
	struct order o = { .sem = sq_semaphore_create(0) };
	for (int i = 0; i < CHUNKS; i++) {
		sq_data_t d = sq_data_create_f(buf + i * CHUNK, CHUNK, NULL,
				SQ_DATA_DESTRUCTOR_DEFAULT);
		sq_write_f(wfd, d, q, &o, wrote);
		sq_release(d);
	}
	int got = 0, want = CHUNKS;
	if (before_reads) {
		/* A file: every write lands before the rewind. */
		for (int i = 0; i < CHUNKS && wait_sem(o.sem, 20); i++)
			got++;
		CHECK_EQ(got, CHUNKS);
		before_reads(rfd);
	} else {
		/* A stream: a socket may take fewer than all the writes
		 * until the reads drain it. */
		want += CHUNKS;
	}
	for (int i = 0; i < CHUNKS; i++)
		sq_read_f(rfd, CHUNK, q, &o, read_one);
	got = 0;
	for (int i = 0; i < want && wait_sem(o.sem, 20); i++)
		got++;
	CHECK_EQ(got, want);
	sq_release(o.sem);
	*errors += o.errors;
	return o.bad_reads;
}

static void
rewind_fd(int fd)
{
	lseek(fd, 0, SEEK_SET);
}

static int
file_misplaced(int fd)
{
	uint8_t back[CHUNKS * CHUNK];
	ssize_t n = pread(fd, back, sizeof(back), 0);
	if (n != (ssize_t)sizeof(back))
		return CHUNKS;
	int bad = 0;
	for (int i = 0; i < CHUNKS; i++)
		for (int j = 0; j < CHUNK; j++)
			if (back[i * CHUNK + j] != pat((size_t)i * CHUNK + j)) {
				bad++;
				break;
			}
	return bad;
}

static void
test_order_file(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/ordered", tmpdir);
	sq_queue_t q = sq_queue_create("test.io.order", NULL);
	int misplaced = 0, bad_reads = 0, errors = 0;
	for (int run = 0; run < ORDER_RUNS; run++) {
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		CHECK(fd >= 0);
		bad_reads += order_run(fd, fd, q, rewind_fd, &errors);
		misplaced += file_misplaced(fd);
		close(fd);
	}
	unlink(path);
	sq_release(q);
	CHECK_EQ(misplaced, 0);
	CHECK_EQ(bad_reads, 0);
	CHECK_EQ(errors, 0);
}

static void
test_order_stream(bool socket)
{
	sq_queue_t q = sq_queue_create("test.io.order", NULL);
	int bad_reads = 0, errors = 0, nonblock_left = 0;
	for (int run = 0; run < ORDER_RUNS; run++) {
		int fds[2];
		if (socket)
			CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
		else
			CHECK_EQ(pipe(fds), 0);
		/* 10 KiB: fits in the buffer, so every write completes. */
		bad_reads += order_run(socket ? fds[1] : fds[1], fds[0], q,
				NULL, &errors);
		/* Restored by the last user, once every call is done. */
		usleep(1000);
		if ((fcntl(fds[0], F_GETFL) & O_NONBLOCK) ||
				(fcntl(fds[1], F_GETFL) & O_NONBLOCK))
			nonblock_left++;
		close(fds[0]);
		close(fds[1]);
	}
	sq_release(q);
	CHECK_EQ(bad_reads, 0);
	CHECK_EQ(errors, 0);
	CHECK_EQ(nonblock_left, 0);
}

/* Two channels made with sq_io_create on one descriptor share it: their
 * reads run in issue order, and the flags come back once both are done. */
struct two {
	sq_semaphore_t sem;
	int order[4];
	int n;
	int cleanups;
};

struct two_op {
	struct two *t;
	int id;
};

static void
two_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct two_op *op = ctx;
	if (!done)
		return;
	const void *p;
	size_t n;
	sq_data_t m = sq_data_create_map(data, &p, &n);
	/* Each read takes 4 bytes: "0000", "1111", ... in order. */
	int which = n == 4 ? ((const char *)p)[0] - '0' : -1;
	sq_release(m);
	op->t->order[op->t->n++] = which * 10 + op->id;
	sq_semaphore_signal(op->t->sem);
}

static void
two_cleanup(void *ctx, int error)
{
	struct two *t = ctx;
	__atomic_add_fetch(&t->cleanups, 1, __ATOMIC_SEQ_CST);
	sq_semaphore_signal(t->sem);
}

static void
test_two_channels(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	CHECK(write(fds[1], "0000111122223333", 16) == 16);
	sq_queue_t q = sq_queue_create("test.io.two", NULL);
	struct two t = { .sem = sq_semaphore_create(0) };
	sq_io_t a = sq_io_create_f(SQ_IO_STREAM, fds[0], q, &t, two_cleanup);
	sq_io_t b = sq_io_create_f(SQ_IO_STREAM, fds[0], q, &t, two_cleanup);
	struct two_op ops[4] = { { &t, 0 }, { &t, 1 }, { &t, 2 }, { &t, 3 } };
	for (int i = 0; i < 4; i++)
		sq_io_read_f(i % 2 ? b : a, 0, 4, q, &ops[i], two_read);
	for (int i = 0; i < 4; i++)
		CHECK(wait_sem(t.sem, 10));
	for (int i = 0; i < 4; i++)
		CHECK_EQ(t.order[i], i * 10 + i);
	sq_io_close(a, 0);
	sq_release(a);
	/* `b` still uses it: still non-blocking. */
	usleep(20000);
	CHECK(fcntl(fds[0], F_GETFL) & O_NONBLOCK);
	sq_io_close(b, 0);
	sq_release(b);
	CHECK(wait_sem(t.sem, 10));
	CHECK(wait_sem(t.sem, 10));
	CHECK_EQ(__atomic_load_n(&t.cleanups, __ATOMIC_SEQ_CST), 2);
	CHECK(!(fcntl(fds[0], F_GETFL) & O_NONBLOCK));
	close(fds[0]);
	close(fds[1]);
	sq_release(q);
	sq_release(t.sem);
}

/* An operation issued after the cleanup ran fails with ECANCELED and does
 * not run the cleanup again (nor free the channel under the program). */
static int late_cleanups;
static int late_error;

static void
late_cleanup(void *ctx, int error)
{
	__atomic_add_fetch(&late_cleanups, 1, __ATOMIC_SEQ_CST);
	sq_semaphore_signal(ctx);
}

static void
late_read(void *ctx, bool done, sq_data_t data, int error)
{
	if (done) {
		late_error = error;
		sq_semaphore_signal(ctx);
	}
}

static void
test_after_cleanup(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	sq_queue_t q = sq_queue_create("test.io.late", NULL);
	sq_semaphore_t sem = sq_semaphore_create(0);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, fds[0], q, sem,
			late_cleanup);
	sq_io_close(ch, SQ_IO_STOP);
	CHECK(wait_sem(sem, 10));
	for (int i = 0; i < 3; i++) {
		sq_io_read_f(ch, 0, 10, q, sem, late_read);
		CHECK(wait_sem(sem, 10));
		CHECK_EQ(late_error, ECANCELED);
	}
	usleep(20000);
	CHECK_EQ(__atomic_load_n(&late_cleanups, __ATOMIC_SEQ_CST), 1);
	sq_release(ch);
	close(fds[0]);
	close(fds[1]);
	sq_release(sem);
	sq_release(q);
}

/* ---- B: a partial read with the writer still open --------------------- */

struct partial {
	sq_semaphore_t sem;
	size_t size;
	int error;
	int calls;
};

static void
partial_read(void *ctx, sq_data_t data, int error)
{
	struct partial *p = ctx;
	p->size = sq_data_get_size(data);
	p->error = error;
	p->calls++;
	sq_semaphore_signal(p->sem);
}

static void
test_partial(bool socket)
{
	int fds[2];
	if (socket)
		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
	else
		CHECK_EQ(pipe(fds), 0);
	sq_queue_t q = sq_queue_create("test.io.partial", NULL);
	struct partial p = { .sem = sq_semaphore_create(0) };
	char msg[32];
	memset(msg, 'x', sizeof(msg));
	/* Already there when the read starts. */
	CHECK(write(fds[1], msg, sizeof(msg)) == (ssize_t)sizeof(msg));
	sq_read_f(fds[0], 4096, q, &p, partial_read);
	CHECK(wait_sem(p.sem, 5));
	CHECK_EQ(p.size, 32);
	CHECK_EQ(p.error, 0);
	/* Nothing there yet: the read waits for the first bytes only. */
	sq_read_f(fds[0], 4096, q, &p, partial_read);
	usleep(20000);
	CHECK_EQ(p.calls, 1);
	CHECK(write(fds[1], msg, 10) == 10);
	CHECK(wait_sem(p.sem, 5));
	CHECK_EQ(p.size, 10);
	CHECK_EQ(p.error, 0);
	/* The reply of a request/response exchange on the same socket. */
	if (socket) {
		CHECK(write(fds[0], "pong", 4) == 4);
		char r[8];
		CHECK_EQ(read(fds[1], r, sizeof(r)), 4);
	}
	close(fds[0]);
	close(fds[1]);
	sq_release(q);
	sq_release(p.sem);
}

/* ---- C: no cleanup overlaps a handler call ------------------------------ */

#define NFILES 40

static size_t file_size[NFILES];

struct many {
	int busy;          /* handler calls running */
	int done_returned; /* the done call has returned */
	size_t bytes;
	int file;
	bool bad_data;
	int error;
};

static int overlaps, missing, bad_data, cleanups;
static sq_semaphore_t many_sem;

static bool
many_region(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	struct many *m = ctx;
	const uint8_t *p = buf;
	for (size_t i = 0; i < size; i++)
		if (p[i] != pat(m->bytes + i + (size_t)m->file))
			m->bad_data = true;
	m->bytes += size;
	return true;
}

static void
many_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct many *m = ctx;
	__atomic_add_fetch(&m->busy, 1, __ATOMIC_SEQ_CST);
	if (data)
		sq_data_apply_f(data, m, many_region);
	if (done)
		m->error = error;
	/* Widen the window a cleanup could slip into. */
	for (volatile int i = 0; i < 200; i++)
		;
	__atomic_sub_fetch(&m->busy, 1, __ATOMIC_SEQ_CST);
	if (done)
		__atomic_store_n(&m->done_returned, 1, __ATOMIC_SEQ_CST);
}

static void
many_cleanup(void *ctx, int error)
{
	struct many *m = ctx;
	if (__atomic_load_n(&m->busy, __ATOMIC_SEQ_CST) != 0 ||
			!__atomic_load_n(&m->done_returned, __ATOMIC_SEQ_CST))
		__atomic_add_fetch(&overlaps, 1, __ATOMIC_SEQ_CST);
	else if (m->bytes != file_size[m->file] || m->error != 0)
		__atomic_add_fetch(&missing, 1, __ATOMIC_SEQ_CST);
	else if (m->bad_data)
		__atomic_add_fetch(&bad_data, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&cleanups, 1, __ATOMIC_SEQ_CST);
	free(m);
	sq_semaphore_signal(many_sem);
}

/* NFILES files of assorted sizes (a third past 64 KiB) named
 * <tmpdir>/<prefix><n>, file n holding pat(i + n). */
static void
make_files(char paths[NFILES][128], const char *prefix)
{
	for (int f = 0; f < NFILES; f++) {
		snprintf(paths[f], sizeof(paths[f]), "%s/%s%d", tmpdir, prefix,
				f);
		file_size[f] = (size_t)f * 997 + (f % 3 == 0 ? 70000 : 1);
		uint8_t *b = malloc(file_size[f]);
		for (size_t i = 0; i < file_size[f]; i++)
			b[i] = pat(i + (size_t)f);
		int fd = open(paths[f], O_WRONLY | O_CREAT | O_TRUNC, 0600);
		CHECK(write(fd, b, file_size[f]) == (ssize_t)file_size[f]);
		close(fd);
		free(b);
	}
}

static void
test_many_channels(void)
{
	char paths[NFILES][128];
	make_files(paths, "f");
	many_sem = sq_semaphore_create(0);
	sq_queue_t cq = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	for (int i = 0; i < MANY_CHANNELS; i++) {
		struct many *m = calloc(1, sizeof(*m));
		m->file = i % NFILES;
		sq_io_t ch = sq_io_create_with_path_f(SQ_IO_STREAM,
				paths[m->file], O_RDONLY, 0, cq, m, many_cleanup);
		/* Several handler calls per file. */
		sq_io_set_high_water(ch, 4096);
		sq_io_read_f(ch, 0, SIZE_MAX, cq, m, many_read);
		sq_release(ch);
	}
	int got = 0;
	for (int i = 0; i < MANY_CHANNELS && wait_sem(many_sem, 30); i++)
		got++;
	CHECK_EQ(got, MANY_CHANNELS);
	CHECK_EQ(overlaps, 0);
	CHECK_EQ(missing, 0);
	CHECK_EQ(bad_data, 0);
	sq_release(many_sem);
	for (int f = 0; f < NFILES; f++)
		unlink(paths[f]);
}

/* The same through descriptors: every sq_read of many files on a
 * concurrent queue gets its whole file. */
struct whole {
	int file;
	int fd;
};

static int whole_bad;

static void
whole_read(void *ctx, sq_data_t data, int error)
{
	struct whole *w = ctx;
	struct many m = { .file = w->file };
	sq_data_apply_f(data, &m, many_region);
	if (error != 0 || m.bytes != file_size[w->file] || m.bad_data)
		__atomic_add_fetch(&whole_bad, 1, __ATOMIC_SEQ_CST);
	close(w->fd);
	free(w);
	sq_semaphore_signal(many_sem);
}

static void
test_many_reads(void)
{
	char paths[NFILES][128];
	make_files(paths, "g");
	many_sem = sq_semaphore_create(0);
	sq_queue_t cq = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	int n = MANY_CHANNELS / 5;
	for (int i = 0; i < n; i++) {
		struct whole *w = malloc(sizeof(*w));
		w->file = i % NFILES;
		w->fd = open(paths[w->file], O_RDONLY);
		sq_read_f(w->fd, SIZE_MAX, cq, w, whole_read);
	}
	int got = 0;
	for (int i = 0; i < n && wait_sem(many_sem, 30); i++)
		got++;
	CHECK_EQ(got, n);
	CHECK_EQ(whole_bad, 0);
	sq_release(many_sem);
	for (int f = 0; f < NFILES; f++)
		unlink(paths[f]);
}

int
main(void)
{
	make_tmpdir();
	test_order_file();
	test_order_stream(false);
	test_order_stream(true);
	test_two_channels();
	test_after_cleanup();
	test_partial(true);
	test_partial(false);
	test_many_channels();
	test_many_reads();
	rmdir(tmpdir);
	return sqt_finish("test_io_order");
}
