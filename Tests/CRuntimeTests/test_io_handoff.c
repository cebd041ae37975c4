/*
 * The short paths of a small read: a read whose only handler call goes to a
 * global queue runs that call on the worker that read the file, once the
 * channel's queue is given up, and a close issued while the channel's queue
 * is idle runs on the closing thread. What must hold either way: the bytes,
 * one done call on the global queue, one cleanup after it, the descriptor
 * closed; a handler may wait for another operation of its own channel; a
 * close from a barrier or right after an operation is still ordered after
 * that operation. A file read whole in one call that returns exactly its
 * size at open is taken as at its end (no read for the end): files whose
 * size says otherwise (/proc, /sys) or that grew are still read to their
 * real end.
 */
#include "io_helpers.h"

#include <fcntl.h>
#include <sys/stat.h>

#define FILES 200

static void
write_file(const char *path, size_t seed, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	uint8_t *b = malloc(size ? size : 1);
	for (size_t i = 0; i < size; i++)
		b[i] = pattern_byte(seed, i);
	CHECK_EQ(write(fd, b, size), (ssize_t)size);
	free(b);
	close(fd);
}

static size_t
file_size(size_t i)
{
	/* 0 bytes, then 1 byte to 40 KiB: empty, tiny and a few pages. */
	return i == 0 ? 0 : 1 + (i * 7919) % (40 * 1024);
}

/* ---- Many small files, closed from their one handler call ---------------- */

struct small {
	size_t seed;
	size_t size;
	sq_io_t ch;
	int calls;
	int error;
	bool on_global;
	bool bytes_ok;
	size_t got;
	atomic_int cleanups;
	bool cleanup_after_handler;
	bool handler_done;        /* written by the handler, read by cleanup */
	sq_semaphore_t sem;       /* shared: one signal per cleanup */
};

static void
small_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct small *s = ctx;
	s->calls++;
	s->on_global = sq_get_current_queue() ==
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	if (data) {
		const void *p;
		size_t n;
		sq_data_t m = sq_data_create_map(data, &p, &n);
		for (size_t i = 0; i < n; i++)
			if (((const uint8_t *)p)[i] !=
					pattern_byte(s->seed, s->got + i))
				s->bytes_ok = false;
		s->got += n;
		sq_release(m);
	}
	if (done) {
		s->error = error;
		/* The release issues the close (no explicit close): it runs
		 * here, on this thread, if the channel's queue is idle. */
		__atomic_store_n(&s->handler_done, true, __ATOMIC_RELEASE);
		sq_release(s->ch);
	}
}

static void
small_cleanup(void *ctx, int error)
{
	struct small *s = ctx;
	/* Acquire: pairs with the handler's release store. */
	s->cleanup_after_handler = __atomic_load_n(&s->handler_done,
			__ATOMIC_ACQUIRE) && error == 0;
	atomic_fetch_add(&s->cleanups, 1);
	sq_semaphore_signal(s->sem);
}

static void
test_small_files(void)
{
	char *dir = temp_path("small");
	CHECK_EQ(mkdir(dir, 0700), 0);
	char *paths[FILES];
	struct small *s = calloc(FILES, sizeof(*s));
	sq_semaphore_t sem = sq_semaphore_create(0);
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	for (size_t i = 0; i < FILES; i++) {
		CHECK(asprintf(&paths[i], "%s/f%zu", dir, i) > 0);
		write_file(paths[i], i, file_size(i));
	}
	for (size_t i = 0; i < FILES; i++) {
		s[i].seed = i;
		s[i].size = file_size(i);
		s[i].bytes_ok = true;
		s[i].sem = sem;
		atomic_init(&s[i].cleanups, 0);
		s[i].ch = sq_io_create_with_path_f(SQ_IO_STREAM, paths[i],
				O_RDONLY, 0, g, &s[i], small_cleanup);
		CHECK(s[i].ch != NULL);
		sq_io_read_f(s[i].ch, 0, SIZE_MAX, g, &s[i], small_read);
	}
	for (size_t i = 0; i < FILES; i++)
		CHECK(sq_semaphore_wait(sem, sq_time(SQ_TIME_NOW,
				10 * NSEC_PER_SEC)) == 0);
	sqt_sleep_ms(20); /* a second cleanup would show */
	int bad = 0;
	for (size_t i = 0; i < FILES; i++) {
		bool ok = s[i].calls == 1 && s[i].error == 0 &&
				s[i].on_global && s[i].bytes_ok &&
				s[i].got == s[i].size &&
				atomic_load(&s[i].cleanups) == 1 &&
				s[i].cleanup_after_handler;
		if (!ok && bad++ == 0)
			printf("file %zu: calls %d error %d on_global %d "
					"bytes_ok %d got %zu of %zu cleanups %d "
					"after %d\n", i, s[i].calls, s[i].error,
					s[i].on_global, s[i].bytes_ok, s[i].got,
					s[i].size, atomic_load(&s[i].cleanups),
					s[i].cleanup_after_handler);
	}
	CHECK_EQ(bad, 0);
	/* Every cleanup ran: no descriptor is left open on the files. */
	CHECK_EQ(fds_open_on(dir, true), 0);
	for (size_t i = 0; i < FILES; i++) {
		unlink(paths[i]);
		free(paths[i]);
	}
	rmdir(dir);
	free(dir);
	free(s);
	sq_release(sem);
}

/* ---- A handler that waits for another read of its channel ----------------- */

#define NESTED_BYTES 5000

struct nested {
	sq_io_t ch;
	struct result inner;
	bool inner_seen;      /* the inner read finished while we waited */
	struct result outer;
};

static void
nested_outer(void *ctx, bool done, sq_data_t data, int error)
{
	struct nested *n = ctx;
	if (!done) {
		on_io(&n->outer, done, data, error);
		return;
	}
	/* The channel's queue must not be held while this runs: the read
	 * issued here needs it to finish. */
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_io_read_f(n->ch, 0, SIZE_MAX, g, &n->inner, on_io);
	n->inner_seen = wait_result(&n->inner);
	on_io(&n->outer, done, data, error);
}

static void
test_handler_waits(void)
{
	char *path = temp_path("nested");
	write_file(path, 0, NESTED_BYTES);
	struct nested n = { 0 };
	result_init(&n.inner);
	result_init(&n.outer);
	struct cleanup c;
	cleanup_init(&c);
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	n.ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path, O_RDONLY, 0, g,
			&c, on_cleanup);
	sq_io_read_f(n.ch, 0, SIZE_MAX, g, &n, nested_outer);
	CHECK(wait_result(&n.outer));
	CHECK(n.inner_seen);
	CHECK_EQ(n.outer.done_calls, 1);
	CHECK_EQ(n.outer.error, 0);
	CHECK_EQ(n.outer.size, NESTED_BYTES);
	CHECK(data_is_pattern(n.outer.data, 0));
	CHECK_EQ(n.inner.done_calls, 1);
	CHECK_EQ(n.inner.error, 0);
	CHECK_EQ(n.inner.size, NESTED_BYTES);
	CHECK(data_is_pattern(n.inner.data, 0));
	sq_io_close(n.ch, 0);
	sq_release(n.ch);
	cleanup_check(&c, 0);
	result_free(&n.inner);
	result_free(&n.outer);
	unlink(path);
	free(path);
}

/* ---- Closes that must wait their turn ----------------------------------- */

struct in_barrier {
	sq_io_t ch;
	int fd_seen;
	sq_semaphore_t ran;
};

static void
close_in_barrier(void *ctx)
{
	struct in_barrier *b = ctx;
	b->fd_seen = sq_io_get_descriptor(b->ch);
	/* On the channel's own queue: the close cannot run here and now. */
	sq_io_close(b->ch, 0);
	sq_semaphore_signal(b->ran);
}

static void
test_close_order(void)
{
	char *path = temp_path("order");
	write_file(path, 0, NESTED_BYTES);
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);

	/* Closed right after a read is issued: the read still finishes
	 * (the close is queued behind it), then the cleanup runs. */
	for (int i = 0; i < 50; i++) {
		struct result r;
		result_init(&r);
		struct cleanup c;
		cleanup_init(&c);
		sq_io_t ch = sq_io_create_with_path_f(SQ_IO_STREAM, path,
				O_RDONLY, 0, g, &c, on_cleanup);
		sq_io_read_f(ch, 0, SIZE_MAX, g, &r, on_io);
		sq_io_close(ch, 0);
		CHECK(wait_result(&r));
		CHECK_EQ(r.error, 0);
		CHECK_EQ(r.size, NESTED_BYTES);
		cleanup_check(&c, 0);
		sq_release(ch);
		result_free(&r);
	}

	/* Closed from a barrier: the read issued before it finishes, one
	 * issued after the barrier ran fails with ECANCELED. */
	struct result before, after;
	result_init(&before);
	result_init(&after);
	struct cleanup c;
	cleanup_init(&c);
	struct in_barrier b = { 0 };
	b.ran = sq_semaphore_create(0);
	b.ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path, O_RDONLY, 0, g,
			&c, on_cleanup);
	sq_io_read_f(b.ch, 0, SIZE_MAX, g, &before, on_io);
	sq_io_barrier_f(b.ch, &b, close_in_barrier);
	CHECK(sq_semaphore_wait(b.ran, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0);
	sq_io_read_f(b.ch, 0, SIZE_MAX, g, &after, on_io);
	CHECK(wait_result(&before));
	CHECK(wait_result(&after));
	CHECK(b.fd_seen >= 0);
	CHECK_EQ(before.error, 0);
	CHECK_EQ(before.size, NESTED_BYTES);
	CHECK_EQ(after.error, ECANCELED);
	CHECK_EQ(after.size, 0);
	cleanup_check(&c, 0);
	sq_release(b.ch);
	sq_release(b.ran);
	result_free(&before);
	result_free(&after);

	/* Closed while idle (on this thread, then): a later read fails with
	 * ECANCELED and the cleanup runs once. */
	struct result r1, r2;
	result_init(&r1);
	result_init(&r2);
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path, O_RDONLY, 0,
			g, &c, on_cleanup);
	sq_io_read_f(ch, 0, SIZE_MAX, g, &r1, on_io);
	CHECK(wait_result(&r1));
	CHECK_EQ(r1.size, NESTED_BYTES);
	sq_io_close(ch, 0);
	sq_io_read_f(ch, 0, SIZE_MAX, g, &r2, on_io);
	CHECK(wait_result(&r2));
	CHECK_EQ(r2.error, ECANCELED);
	cleanup_check(&c, 0);
	CHECK_EQ(fds_open_on(path, false), 0);
	sq_release(ch);
	result_free(&r1);
	result_free(&r2);
	unlink(path);
	free(path);
}

/* ---- The end of a file whose size was known --------------------------- */

/* A path channel's whole read of `path`, as one buffer; NULL on error. */
static sq_data_t
channel_read_all(const char *path, sq_io_type_t type)
{
	struct result r;
	result_init(&r);
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_io_t ch = sq_io_create_with_path_f(type, path, O_RDONLY, 0, g,
			NULL, NULL);
	sq_io_read_f(ch, 0, SIZE_MAX, g, &r, on_io);
	bool ok = wait_result(&r) && r.error == 0 && r.done_calls == 1;
	sq_release(ch);
	sq_data_t d = r.data;
	sq_retain(d);
	result_free(&r);
	if (!ok) {
		sq_release(d);
		return NULL;
	}
	return d;
}

/* The bytes of `path` by plain reads until end of file. */
static size_t
plain_read(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return SIZE_MAX;
	size_t got = 0;
	ssize_t n;
	while (got < cap && (n = read(fd, buf + got, cap - got)) > 0)
		got += (size_t)n;
	close(fd);
	return got;
}

static bool
data_equals(sq_data_t d, const char *bytes, size_t n)
{
	const void *p;
	size_t size;
	sq_data_t m = sq_data_create_map(d, &p, &size);
	bool same = size == n && memcmp(p, bytes, n) == 0;
	sq_release(m);
	return same;
}

static void
test_size_is_not_the_end(void)
{
	/* st_size 0, content not empty. */
	sq_data_t d = channel_read_all("/proc/self/status", SQ_IO_STREAM);
	CHECK(d != NULL);
	if (d) {
		const void *p;
		size_t n;
		sq_data_t m = sq_data_create_map(d, &p, &n);
		CHECK(n > 5 && memcmp(p, "Name:", 5) == 0);
		sq_release(m);
		sq_release(d);
	}
	/* st_size 4096, content shorter: all of it, the same as plain
	 * reads give (a file that does not change while we look). */
	static const char *const sys[] = {
		"/sys/kernel/mm/transparent_hugepage/enabled",
		"/sys/devices/system/cpu/online",
		"/sys/kernel/osrelease",
	};
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++) {
		char want[8192];
		size_t n = plain_read(sys[i], want, sizeof(want));
		if (n == SIZE_MAX)
			continue; /* not on this system */
		for (int k = 0; k < 2; k++) {
			d = channel_read_all(sys[i], k ? SQ_IO_RANDOM
					: SQ_IO_STREAM);
			CHECK(d != NULL && data_equals(d, want, n));
			if (d)
				sq_release(d);
		}
	}

	/* A file appended to between two reads at offset 0 of a random
	 * channel: the second read has every byte, the new ones too. */
	char *path = temp_path("grows");
	write_file(path, 0, NESTED_BYTES);
	sq_queue_t g = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	struct cleanup c;
	cleanup_init(&c);
	sq_io_t ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path, O_RDONLY, 0,
			g, &c, on_cleanup);
	struct result r;
	result_init(&r);
	sq_io_read_f(ch, 0, SIZE_MAX, g, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.size, NESTED_BYTES);
	CHECK(data_is_pattern(r.data, 0));
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	CHECK(fd >= 0);
	uint8_t more[300];
	for (size_t i = 0; i < sizeof(more); i++)
		more[i] = pat(NESTED_BYTES + i);
	CHECK_EQ(write(fd, more, sizeof(more)), (ssize_t)sizeof(more));
	close(fd);
	result_reset(&r);
	sq_io_read_f(ch, 0, SIZE_MAX, g, &r, on_io);
	CHECK(wait_result(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(r.size, NESTED_BYTES + sizeof(more));
	CHECK(data_is_pattern(r.data, 0));
	sq_io_close(ch, 0);
	sq_release(ch);
	cleanup_check(&c, 0);
	result_free(&r);

	/* Written, then read as a stream from where the write left it (a
	 * read-write path channel): the rest of the file, whatever its size
	 * was at open. */
	write_file(path, 0, NESTED_BYTES);
	cleanup_init(&c);
	ch = sq_io_create_with_path_f(SQ_IO_STREAM, path, O_RDWR, 0, g, &c,
			on_cleanup);
	struct result w;
	result_init(&w);
	sq_data_t head = pattern_data(0, 1000);
	sq_io_write_f(ch, 0, head, g, &w, on_write);
	result_init(&r);
	sq_io_read_f(ch, 0, SIZE_MAX, g, &r, on_io);
	CHECK(wait_result(&w));
	CHECK(wait_result(&r));
	CHECK_EQ(w.error, 0);
	CHECK_EQ(r.error, 0);
	CHECK_EQ(r.size, NESTED_BYTES - 1000);
	CHECK(data_is_pattern(r.data, 1000));
	sq_io_close(ch, 0);
	sq_release(ch);
	cleanup_check(&c, 0);
	sq_release(head);
	result_free(&w);
	result_free(&r);
	unlink(path);
	free(path);
}

int
main(void)
{
	test_small_files();
	test_handler_waits();
	test_close_order();
	test_size_is_not_the_end();
	return sqt_finish("test_io_handoff");
}
