/*
 * Helpers shared by the I/O channel tests (test_io_*.c): what a handler
 * and a cleanup handler saw, bounded waits for them, test files with a
 * known byte pattern, and the descriptors open on them.
 *
 * A handler's calls never overlap (they run on one serial queue) and the
 * test reads the record only after the semaphore the last call signals,
 * whose signal / wait order the writes before it; cleanup counts are atomic
 * because a test also reads them to catch a second, unexpected run.
 */
#ifndef SQTEST_IO_HELPERS_H
#define SQTEST_IO_HELPERS_H

#include "queue_helpers.h"

/* ---- What an operation's handler saw -------------------------------------- */

struct result {
	int calls;
	int done_calls;
	int error;
	size_t size;      /* bytes of every call's data (on_io) */
	sq_data_t data;   /* every call's data, concatenated (on_io) */
	bool null_data;   /* of the last call */
	sq_semaphore_t sem;
};

static inline void
result_init(struct result *r)
{
	memset(r, 0, sizeof(*r));
	r->data = sq_data_empty;
	r->sem = sq_semaphore_create(0);
}

/* Ready for another operation (keeps the semaphore). */
static inline void
result_reset(struct result *r)
{
	sq_release(r->data);
	r->data = sq_data_empty;
	r->calls = r->done_calls = r->error = 0;
	r->size = 0;
}

static inline void
result_free(struct result *r)
{
	sq_release(r->data);
	sq_release(r->sem);
}

/* Replaces `*all` with `*all` followed by `data` (no copy). */
static inline void
data_append(sq_data_t *all, sq_data_t data)
{
	sq_data_t joined = sq_data_create_concat(*all, data);
	sq_release(*all);
	*all = joined;
}

/* A handler that keeps the data of every call: a read's bytes, or what a
 * write reports (progress and, at the end, what was not written). */
static inline void
on_io(void *ctx, bool done, sq_data_t data, int error)
{
	struct result *r = ctx;
	r->calls++;
	r->null_data = data == NULL;
	if (data) {
		r->size += sq_data_get_size(data);
		data_append(&r->data, data);
	}
	if (done) {
		r->done_calls++;
		r->error = error;
		sq_semaphore_signal(r->sem);
	}
}

/* A write handler: progress calls (done = false) are counted, not kept. */
static inline void
on_write(void *ctx, bool done, sq_data_t data, int error)
{
	struct result *r = ctx;
	r->calls++;
	if (!done)
		return;
	r->null_data = data == NULL;
	r->done_calls++;
	r->error = error;
	sq_semaphore_signal(r->sem);
}

/* Waits (up to 10 s) for the operation's last call. */
static inline bool
wait_result(struct result *r)
{
	return sq_semaphore_wait(r->sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0;
}

/* ---- What a cleanup handler saw --------------------------------------------- */

/* Zero-initialised it counts runs; cleanup_init adds a semaphore to wait
 * on, cleanup_closes a descriptor to close, as a program that gets it back
 * would. */
struct cleanup {
	atomic_int runs;
	int error;
	bool close_it;
	int close_fd;
	int close_errno;
	sq_semaphore_t sem; /* NULL: not signalled */
};

static inline void
on_cleanup(void *ctx, int error)
{
	struct cleanup *c = ctx;
	c->error = error;
	if (c->close_it && close(c->close_fd) != 0)
		c->close_errno = errno;
	atomic_fetch_add(&c->runs, 1);
	if (c->sem)
		sq_semaphore_signal(c->sem);
}

static inline void
cleanup_init(struct cleanup *c)
{
	memset(c, 0, sizeof(*c));
	atomic_init(&c->runs, 0);
	c->sem = sq_semaphore_create(0);
}

/* The cleanup handler closes `fd`. */
static inline void
cleanup_closes(struct cleanup *c, int fd)
{
	c->close_it = true;
	c->close_fd = fd;
}

/* Waits for the cleanup, then a little more to catch a second run; checks
 * it ran once, with `error`, and closed its descriptor (if any) cleanly. */
static inline void
cleanup_check(struct cleanup *c, int error)
{
	CHECK(sq_semaphore_wait(c->sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0);
	sqt_sleep_ms(20);
	CHECK_EQ(atomic_load(&c->runs), 1);
	CHECK_EQ(c->error, error);
	CHECK_EQ(c->close_errno, 0);
	sq_release(c->sem);
}

/* ---- Test files and their byte pattern -------------------------------------- */

/* Byte `o` of pattern `seed`: no short period, and different seeds (files)
 * differ, so a byte in the wrong place or from the wrong file shows. */
static inline uint8_t
pattern_byte(size_t seed, size_t o)
{
	return (uint8_t)((o * 131) ^ (o >> 9) ^ (o >> 17) ^ (seed * 37) ^ 0x3c);
}

static inline uint8_t
pat(size_t o)
{
	return pattern_byte(0, o);
}

/* Bytes [from, from + n) of pattern 0, in regions of at most `region`
 * bytes (so the data is not contiguous). */
static inline sq_data_t
pattern_regions(size_t from, size_t n, size_t region)
{
	sq_data_t all = sq_data_empty;
	size_t off = 0;
	do {
		size_t len = n - off < region ? n - off : region;
		uint8_t *b = malloc(len ? len : 1);
		for (size_t i = 0; i < len; i++)
			b[i] = pat(from + off + i);
		sq_data_t d = sq_data_create_f(b, len, NULL,
				SQ_DATA_DESTRUCTOR_FREE);
		data_append(&all, d);
		sq_release(d);
		off += len;
	} while (off < n);
	return all;
}

/* Bytes [from, from + n) of pattern 0, in one region. */
static inline sq_data_t
pattern_data(size_t from, size_t n)
{
	return pattern_regions(from, n, n ? n : 1);
}

/* Whether `d` holds pattern 0 from byte `from` on. */
static inline bool
data_is_pattern(sq_data_t d, size_t from)
{
	const void *p;
	size_t n;
	sq_data_t m = sq_data_create_map(d, &p, &n);
	bool ok = true;
	for (size_t i = 0; i < n && ok; i++)
		ok = ((const uint8_t *)p)[i] == pat(from + i);
	sq_release(m);
	return ok;
}

/* A path in $TMPDIR (or /tmp) named after the test program, the process
 * and `name`; the caller frees it. */
static inline char *
temp_path(const char *name)
{
	char *p;
	const char *dir = getenv("TMPDIR");
	if (asprintf(&p, "%s/sqtest-%s-%d-%s", dir ? dir : "/tmp",
			program_invocation_short_name, (int)getpid(), name) < 0)
		exit(2);
	return p;
}

/* Descriptors of this process and what they are open on: up to 64 kept
 * by fds_list_on, `n` counts them all. */
struct fd_list {
	int n;
	int fd[64];
	char target[64][256];
};

/* Lists into `l` (NULL: only counts) the descriptors open on a path equal
 * to `path`, or starting with it when `prefix`; returns how many. */
static inline int
fds_list_on(struct fd_list *l, const char *path, bool prefix)
{
	int n = 0;
	size_t plen = strlen(path);
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		char link[300], target[4096];
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		ssize_t len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (prefix ? strncmp(target, path, plen) != 0
				: strcmp(target, path) != 0)
			continue;
		if (l != NULL && n < 64) {
			size_t keep = len < 256 ? (size_t)len : 255;
			l->fd[n] = atoi(e->d_name);
			memcpy(l->target[n], target, keep);
			l->target[n][keep] = '\0';
		}
		n++;
	}
	if (d)
		closedir(d);
	if (l != NULL)
		l->n = n < 64 ? n : 64;
	return n;
}

static inline int
fds_open_on(const char *path, bool prefix)
{
	return fds_list_on(NULL, path, prefix);
}

static inline int
fds_on(const char *path)
{
	return fds_open_on(path, false);
}

#endif
