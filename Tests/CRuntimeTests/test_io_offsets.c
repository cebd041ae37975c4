/*
 * Every offset a random-access channel computes is checked. Extreme offsets
 * on a descriptor positioned past 0 end with EOVERFLOW (past OFF_MAX) or
 * EINVAL (negative), never with arithmetic that overflows (the ASan build
 * runs this with UBSan, aborting on any report).
 */
#include "sqtest.h"

#include <fcntl.h>
#include <stdatomic.h>

struct res {
	sq_semaphore_t sem;
	int error;
	size_t bytes;
	int done;
};

static void
on_io(void *ctx, bool done, sq_data_t data, int error)
{
	struct res *r = ctx;
	if (data)
		r->bytes += sq_data_get_size(data);
	if (done) {
		r->error = error;
		r->done++;
		sq_semaphore_signal(r->sem);
	}
}

static bool
wait_res(struct res *r)
{
	return sq_semaphore_wait(r->sem, sq_time(SQ_TIME_NOW,
			10 * (int64_t)NSEC_PER_SEC)) == 0;
}

static void
check_read(sq_io_t ch, sq_queue_t q, off_t offset, int error)
{
	struct res r = { .sem = sq_semaphore_create(0) };
	sq_io_read_f(ch, offset, 100, q, &r, on_io);
	CHECK(wait_res(&r));
	CHECK_EQ(r.error, error);
	CHECK_EQ(r.bytes, 0);
	CHECK_EQ(r.done, 1);
	sq_release(r.sem);
}

static void
check_write(sq_io_t ch, sq_queue_t q, off_t offset, int error)
{
	struct res r = { .sem = sq_semaphore_create(0) };
	sq_data_t d = sq_data_create_f("0123456789", 10, NULL, NULL);
	sq_io_write_f(ch, offset, d, q, &r, on_io);
	sq_release(d);
	CHECK(wait_res(&r));
	CHECK_EQ(r.error, error);
	CHECK_EQ(r.done, 1);
	sq_release(r.sem);
}

int
main(void)
{
	char path[] = "/tmp/sqt-offsets-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "abcdefghijklmnopqrstuvwxyz", 26) == 26);
	lseek(fd, 16, SEEK_SET); /* the channel's offsets start here */
	sq_queue_t q = sq_queue_create("test.io.offsets", NULL);
	sq_io_t ch = sq_io_create_f(SQ_IO_RANDOM, fd, q, NULL, NULL);

	/* Base 16 + these overflows off_t. */
	check_read(ch, q, INT64_MAX, EOVERFLOW);
	check_read(ch, q, INT64_MAX - 15, EOVERFLOW);
	check_write(ch, q, INT64_MAX, EOVERFLOW);
	/* Negative: no such offset. */
	check_read(ch, q, -1, EINVAL);
	check_read(ch, q, INT64_MIN, EINVAL);
	check_write(ch, q, INT64_MIN, EINVAL);
	/* At OFF_MAX exactly: nothing can be read there (end of file)... */
	check_read(ch, q, INT64_MAX - 16, 0);
	/* ... nor written. */
	check_write(ch, q, INT64_MAX - 16, EOVERFLOW);
	/* Ordinary offsets still work after all that. */
	struct res r = { .sem = sq_semaphore_create(0) };
	sq_io_read_f(ch, 2, 100, q, &r, on_io);
	CHECK(wait_res(&r));
	CHECK_EQ(r.error, 0);
	CHECK_EQ(r.bytes, 8); /* "stuvwxyz" */
	sq_release(r.sem);

	sq_io_close(ch, 0);
	sq_release(ch);
	usleep(20000);
	close(fd);
	unlink(path);
	sq_release(q);
	return sqt_finish("test_io_offsets");
}
