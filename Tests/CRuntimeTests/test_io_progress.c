/*
 * Write progress, as libdispatch delivers it: while a write runs, its
 * handler is called with done = false and `data` = the bytes still to be
 * written, each time at least low water bytes went out since the previous
 * call (never more than high water between two calls), or at each interval;
 * then once with done = true (data NULL, error 0 when everything was
 * written). A 10 MiB write to a slowly read pipe, a file written through a
 * random-access channel, a strict interval, a write too small to report.
 */
#include "io_helpers.h"

#include <fcntl.h>
#include <sys/stat.h>

#define MIB ((size_t)1 << 20)
#define KIB ((size_t)1 << 10)

#define MAX_CALLS 100000

struct progress {
	size_t total;
	size_t *remaining; /* `data` size of each progress call */
	int calls;         /* progress calls */
	int done_calls;
	int calls_after_done;
	bool done_null;
	int error;
	bool bad_order;    /* a progress call after done, or a NULL one */
	sq_semaphore_t sem;
};

static void
progress_init(struct progress *p, size_t total)
{
	memset(p, 0, sizeof(*p));
	p->total = total;
	p->remaining = calloc(MAX_CALLS, sizeof(size_t));
	p->sem = sq_semaphore_create(0);
}

static void
progress_free(struct progress *p)
{
	free(p->remaining);
	sq_release(p->sem);
}

static void
on_progress(void *ctx, bool done, sq_data_t data, int error)
{
	struct progress *p = ctx;
	if (p->done_calls > 0)
		p->calls_after_done++;
	if (done) {
		p->done_calls++;
		p->done_null = data == NULL;
		p->error = error;
		sq_semaphore_signal(p->sem);
		return;
	}
	if (data == NULL || error != 0) {
		p->bad_order = true;
		return;
	}
	if (p->calls < MAX_CALLS)
		p->remaining[p->calls] = sq_data_get_size(data);
	p->calls++;
}

static bool
wait_sem(sq_semaphore_t s, int seconds)
{
	return sq_semaphore_wait(s, sq_time(SQ_TIME_NOW,
			(int64_t)seconds * (int64_t)NSEC_PER_SEC)) == 0;
}

/* The descriptor is the program's again (and may be closed) only once
 * the cleanup handler ran. */
static void
signal_cleanup(void *ctx, int error)
{
	sq_semaphore_signal(ctx);
}

/* Creates a stream channel over `fd` whose cleanup signals `*cleaned`. */
static sq_io_t
stream_channel(int fd, sq_queue_t q, sq_semaphore_t *cleaned)
{
	*cleaned = sq_semaphore_create(0);
	return sq_io_create_f(SQ_IO_STREAM, fd, q, *cleaned, signal_cleanup);
}

/* Releases the channel and waits for its cleanup. */
static void
release_and_wait(sq_io_t ch, sq_semaphore_t cleaned)
{
	sq_release(ch);
	CHECK(wait_sem(cleaned, 10));
	sq_release(cleaned);
}

/*
 * Checks the calls: one final done call with NULL data and error 0; the
 * remaining sizes strictly decrease; each step (bytes written between two
 * calls) is at least `low` and at most `high`.
 */
static void
check_progress(struct progress *p, size_t low, size_t high, int min_calls)
{
	CHECK_EQ(p->done_calls, 1);
	CHECK_EQ(p->calls_after_done, 0);
	CHECK(!p->bad_order);
	CHECK(p->done_null);
	CHECK_EQ(p->error, 0);
	CHECK(p->calls >= min_calls);
	CHECK(p->calls < MAX_CALLS);
	size_t prev = p->total;
	int decreasing = 0, small = 0, big = 0;
	for (int i = 0; i < p->calls && i < MAX_CALLS; i++) {
		size_t r = p->remaining[i];
		if (r >= prev) {
			decreasing++;
			continue;
		}
		size_t step = prev - r;
		if (step < low)
			small++;
		if (step > high)
			big++;
		prev = r;
	}
	CHECK_EQ(decreasing, 0);
	CHECK_EQ(small, 0);
	CHECK_EQ(big, 0);
	/* Something was still to be written at the last progress call. */
	CHECK(prev > 0);
}

/* ---- The slow reader --------------------------------------------------- */

struct reader {
	int fd;
	size_t chunk;
	unsigned pause_us;
	size_t got;
	bool ok;
};

static void *
slow_reader(void *arg)
{
	struct reader *r = arg;
	uint8_t *buf = malloc(r->chunk);
	r->ok = true;
	for (;;) {
		ssize_t n = read(r->fd, buf, r->chunk);
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && r->ok; i++)
			r->ok = buf[i] == pat(r->got + (size_t)i);
		r->got += (size_t)n;
		if (r->pause_us)
			sqt_sleep_us(r->pause_us);
	}
	free(buf);
	return NULL;
}

/* ---- A 10 MiB write to a slowly read pipe ------------------------------- */

static void
pipe_write(size_t total, size_t low, size_t high, size_t region)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	sq_queue_t q = sq_queue_create("test.io.progress", NULL);
	sq_semaphore_t cleaned;
	sq_io_t ch = stream_channel(fds[1], q, &cleaned);
	sq_io_set_low_water(ch, low);
	if (high != SIZE_MAX)
		sq_io_set_high_water(ch, high);
	struct progress p;
	progress_init(&p, total);
	sq_data_t d = pattern_regions(0, total, region);
	struct reader r = { fds[0], 16 * KIB, SQT_SCALE(100, 50), 0, false };
	pthread_t t;
	pthread_create(&t, NULL, slow_reader, &r);
	uint64_t t0 = sqt_now_ns();
	sq_io_write_f(ch, 0, d, q, &p, on_progress);
	sq_release(d);
	CHECK(wait_sem(p.sem, 120));
	double ms = sqt_ms_since(t0);
	sq_io_close(ch, 0);
	release_and_wait(ch, cleaned);
	close(fds[1]);
	pthread_join(t, NULL);
	printf("write of %zu KiB, low %zu KiB, high %zu KiB: %d progress "
			"calls, %.0f ms\n", total / KIB, low / KIB,
			high == SIZE_MAX ? 0 : high / KIB, p.calls, ms);
	/* The pipe holds 64 KiB: the write went out in many pieces. */
	check_progress(&p, low, high, (int)(total / (high == SIZE_MAX ?
			MIB : high)) / 2);
	CHECK_EQ(r.got, total);
	CHECK(r.ok);
	close(fds[0]);
	progress_free(&p);
	sq_release(q);
}

/* ---- A file through a random-access channel ------------------------------ */

static void
file_write(void)
{
	char *path = temp_path("file");
	size_t total = 3 * MIB + 12345;
	sq_queue_t q = sq_queue_create("test.io.progress.file", NULL);
	sq_io_t ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path,
			O_WRONLY | O_CREAT | O_TRUNC, 0600, q, NULL, NULL);
	sq_io_set_low_water(ch, 100 * KIB);
	sq_io_set_high_water(ch, 300 * KIB);
	struct progress p;
	progress_init(&p, total);
	sq_data_t d = pattern_regions(0, total, 64 * KIB);
	sq_io_write_f(ch, 0, d, q, &p, on_progress);
	sq_release(d);
	CHECK(wait_sem(p.sem, 60));
	/* Each piece is at most 300 KiB: at least 10 calls before the end. */
	check_progress(&p, 100 * KIB, 300 * KIB, 10);
	sq_release(ch);
	sqt_sleep_ms(50);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	CHECK_EQ(fstat(fd, &st), 0);
	CHECK_EQ(st.st_size, (off_t)total);
	uint8_t *buf = malloc(total);
	CHECK_EQ(read(fd, buf, total), (ssize_t)total);
	bool same = true;
	for (size_t i = 0; i < total && same; i++)
		same = buf[i] == pat(i);
	CHECK(same);
	free(buf);
	close(fd);
	unlink(path);
	free(path);
	progress_free(&p);
	sq_release(q);
}

/* ---- A strict interval reports below low water ----------------------------- */

static void
interval_write(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	size_t total = 2 * MIB;
	sq_queue_t q = sq_queue_create("test.io.progress.interval", NULL);
	sq_semaphore_t cleaned;
	sq_io_t ch = stream_channel(fds[1], q, &cleaned);
	sq_io_set_low_water(ch, SIZE_MAX); /* never reached */
	sq_io_set_interval(ch, 2 * NSEC_PER_MSEC, SQ_IO_STRICT_INTERVAL);
	struct progress p;
	progress_init(&p, total);
	sq_data_t d = pattern_regions(0, total, 256 * KIB);
	/* 16 KiB per ms: about 130 ms for 2 MiB. */
	struct reader r = { fds[0], 16 * KIB, 1000, 0, false };
	pthread_t t;
	pthread_create(&t, NULL, slow_reader, &r);
	sq_io_write_f(ch, 0, d, q, &p, on_progress);
	sq_release(d);
	CHECK(wait_sem(p.sem, 60));
	release_and_wait(ch, cleaned);
	close(fds[1]);
	pthread_join(t, NULL);
	printf("strict 2 ms interval: %d progress calls\n", p.calls);
	check_progress(&p, 1, SIZE_MAX, 3);
	CHECK_EQ(r.got, total);
	CHECK(r.ok);
	close(fds[0]);
	progress_free(&p);
	sq_release(q);
}

/* ---- Writes that go out at once report only the end ------------------------- */

static void
small_write(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	sq_queue_t q = sq_queue_create("test.io.progress.small", NULL);
	sq_semaphore_t cleaned;
	sq_io_t ch = stream_channel(fds[1], q, &cleaned);
	struct progress p;
	progress_init(&p, 1000);
	sq_data_t d = pattern_regions(0, 1000, 100);
	sq_io_write_f(ch, 0, d, q, &p, on_progress);
	sq_release(d);
	CHECK(wait_sem(p.sem, 10));
	CHECK_EQ(p.calls, 0);
	CHECK_EQ(p.done_calls, 1);
	CHECK(p.done_null);
	CHECK_EQ(p.error, 0);
	release_and_wait(ch, cleaned);
	close(fds[0]);
	close(fds[1]);
	progress_free(&p);
	sq_release(q);
}

/* ---- A broken pipe mid-write: progress, then the unwritten rest ------------- */

struct broken {
	int calls;
	size_t last_remaining;
	bool done;
	size_t done_size;
	int error;
	int reader_fd;
	sq_semaphore_t sem;
};

static void
on_broken(void *ctx, bool done, sq_data_t data, int error)
{
	struct broken *b = ctx;
	if (!done) {
		b->calls++;
		b->last_remaining = sq_data_get_size(data);
		if (b->calls == 1)
			close(b->reader_fd); /* the reader goes away */
		return;
	}
	b->done = true;
	b->done_size = data ? sq_data_get_size(data) : 0;
	b->error = error;
	sq_semaphore_signal(b->sem);
}

static void
broken_write(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	sq_queue_t q = sq_queue_create("test.io.progress.broken", NULL);
	sq_semaphore_t cleaned;
	sq_io_t ch = stream_channel(fds[1], q, &cleaned);
	size_t total = 4 * MIB;
	struct broken b = { .reader_fd = fds[0], .sem = sq_semaphore_create(0) };
	sq_data_t d = pattern_regions(0, total, MIB);
	sq_io_write_f(ch, 0, d, q, &b, on_broken);
	sq_release(d);
	CHECK(wait_sem(b.sem, 10));
	CHECK(b.calls >= 1);
	CHECK(b.done);
	CHECK_EQ(b.error, EPIPE);
	CHECK(b.done_size > 0 && b.done_size <= b.last_remaining);
	CHECK(b.last_remaining < total);
	release_and_wait(ch, cleaned);
	close(fds[1]);
	sq_release(b.sem);
	sq_release(q);
}

int
main(void)
{
	size_t big = SQT_SCALE(10 * MIB, 4 * MIB);
	pipe_write(big, 64 * KIB, 256 * KIB, 256 * KIB);
	pipe_write(big, 64 * KIB, SIZE_MAX, 1 * MIB);
	pipe_write(1 * MIB, 1, 4 * KIB, 3000);
	file_write();
	interval_write();
	small_write();
	broken_write();
	return sqt_finish("test_io_progress");
}
