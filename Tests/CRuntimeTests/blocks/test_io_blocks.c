/*
 * The block forms of data and I/O (clang -fblocks): sq_data_apply,
 * sq_data_create with a block destructor and with the DEFAULT, FREE and
 * MUNMAP markers (libdispatch's dispatch_data_create, renamed),
 * sq_io_create[_with_path|_with_io], sq_io_read, sq_io_write,
 * sq_io_barrier, sq_read, sq_write.
 */
#include "sqtest.h"

#include <fcntl.h>
#include <sys/mman.h>

static bool
wait_sem(sq_semaphore_t s)
{
	return sq_semaphore_wait(s, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0;
}

int
main(void)
{
	sq_queue_t q = sq_queue_create("test.io.blocks", NULL);
	sq_semaphore_t sem = sq_semaphore_create(0);

	/* Data: a block destructor, apply with a block. */
	static const char hello[] = "Hello ", world[] = "World";
	__block int destructed = 0;
	sq_data_t a = sq_data_create(hello, 6, q, ^{
		destructed++;
		sq_semaphore_signal(sem);
	});
	sq_data_t b = sq_data_create(world, 5, NULL,
			SQ_DATA_DESTRUCTOR_DEFAULT);
	sq_data_t c = sq_data_create_concat(a, b);
	__block int regions = 0;
	__block bool shared = false;
	CHECK(sq_data_apply(c, ^bool(sq_data_t r, size_t off, const void *p,
			size_t n) {
		if (regions++ == 0)
			shared = p == hello && off == 0 && n == 6;
		return true;
	}));
	CHECK_EQ(regions, 2);
	CHECK(shared);
	CHECK(!sq_data_apply(c, ^bool(sq_data_t r, size_t off, const void *p,
			size_t n) { return false; }));
	sq_release(a);
	sq_release(b);
	sq_release(c);
	CHECK(wait_sem(sem));
	CHECK_EQ(destructed, 1);

	/* The markers, block-typed here: FREE takes the malloc'd buffer
	 * (ASan's leak check sees it freed), MUNMAP the mapping, DEFAULT
	 * copies (the copy outlives the caller's buffer). */
	char *heap = malloc(4);
	memcpy(heap, "heap", 4);
	sq_data_t f = sq_data_create(heap, 4, NULL, SQ_DATA_DESTRUCTOR_FREE);
	const void *fp = NULL;
	size_t fn = 0;
	sq_data_t fm = sq_data_create_map(f, &fp, &fn);
	CHECK(fp == heap && fn == 4);
	sq_release(fm);
	sq_release(f);
	void *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE |
			MAP_ANONYMOUS, -1, 0);
	CHECK(map != MAP_FAILED);
	sq_data_t m = sq_data_create(map, 4096, NULL,
			SQ_DATA_DESTRUCTOR_MUNMAP);
	CHECK_EQ(sq_data_get_size(m), 4096);
	sq_release(m);
	char stack_bytes[3] = { 'a', 'b', 'c' };
	sq_data_t copy = sq_data_create(stack_bytes, 3, NULL,
			SQ_DATA_DESTRUCTOR_DEFAULT);
	const void *cp = NULL;
	sq_data_t cm = sq_data_create_map(copy, &cp, NULL);
	CHECK(cp != stack_bytes && memcmp(cp, "abc", 3) == 0);
	sq_release(cm);
	sq_release(copy);

	/* A channel on a pipe: write, barrier, read, cleanup. */
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	__block int cleanups = 0;
	sq_io_t w = sq_io_create(SQ_IO_STREAM, fds[1], q, ^(int error) {
		cleanups++;
		CHECK_EQ(error, 0);
		sq_semaphore_signal(sem);
	});
	sq_io_t r = sq_io_create(SQ_IO_STREAM, fds[0], q, NULL);
	sq_data_t d = sq_data_create("0123456789", 10, NULL, NULL);
	__block int wrote = 0;
	sq_io_write(w, 0, d, q, ^(bool done, sq_data_t left, int error) {
		wrote += done && left == NULL && error == 0;
	});
	__block bool barrier_ran = false;
	int wfd = fds[1];
	sq_io_barrier(w, ^{
		barrier_ran = sq_io_get_descriptor(w) == wfd;
		sq_semaphore_signal(sem);
	});
	CHECK(wait_sem(sem));
	CHECK(barrier_ran);
	__block size_t got = 0;
	sq_io_read(r, 0, 10, q, ^(bool done, sq_data_t data, int error) {
		got += sq_data_get_size(data);
		if (done)
			sq_semaphore_signal(sem);
	});
	CHECK(wait_sem(sem));
	CHECK_EQ(got, 10);
	sq_io_close(w, 0);
	sq_release(w);
	CHECK(wait_sem(sem));
	CHECK_EQ(cleanups, 1);
	CHECK_EQ(wrote, 1);
	sq_release(r);

	/* sq_write / sq_read. */
	__block int simple = 0;
	sq_write(fds[1], d, q, ^(sq_data_t left, int error) {
		simple += left == NULL && error == 0;
		sq_semaphore_signal(sem);
	});
	CHECK(wait_sem(sem));
	close(fds[1]);
	sq_read(fds[0], SIZE_MAX, q, ^(sq_data_t data, int error) {
		simple += sq_data_get_size(data) == 10 && error == 0;
		sq_semaphore_signal(sem);
	});
	CHECK(wait_sem(sem));
	CHECK_EQ(simple, 2);
	close(fds[0]);

	/* sq_io_create_with_io with block cleanups: a second channel over
	 * the first one's pipe; both cleanups run once, when both are done. */
	int sfd[2];
	CHECK_EQ(pipe(sfd), 0);
	__block int shared_cleanups = 0;
	sq_io_t s1 = sq_io_create(SQ_IO_STREAM, sfd[0], q, ^(int error) {
		shared_cleanups += error == 0;
		sq_semaphore_signal(sem);
	});
	sq_io_t s2 = sq_io_create_with_io(SQ_IO_STREAM, s1, q, ^(int error) {
		shared_cleanups += error == 0;
		sq_semaphore_signal(sem);
	});
	sq_io_t s3 = sq_io_create_with_io(SQ_IO_STREAM, s1, q, NULL);
	CHECK(s2 != NULL && s3 != NULL);
	__block size_t shared_got = 0;
	sq_io_read(s2, 0, 3, q, ^(bool done, sq_data_t data, int error) {
		shared_got += sq_data_get_size(data);
		if (done)
			sq_semaphore_signal(sem);
	});
	CHECK_EQ(write(sfd[1], "abc", 3), 3);
	CHECK(wait_sem(sem));
	CHECK_EQ(shared_got, 3);
	sq_release(s1);
	sq_release(s2);
	sq_release(s3);
	CHECK(wait_sem(sem));
	CHECK(wait_sem(sem));
	CHECK_EQ(shared_cleanups, 2);
	close(sfd[0]);
	close(sfd[1]);

	/* A path channel with a block cleanup: ENOENT reaches both. */
	__block int path_error = -1;
	sq_io_t p = sq_io_create_with_path(SQ_IO_RANDOM, "/nonexistent/sq",
			O_RDONLY, 0, q, ^(int error) {
		path_error = error;
		sq_semaphore_signal(sem);
	});
	__block int read_error = -1;
	sq_io_read(p, 0, 1, q, ^(bool done, sq_data_t data, int error) {
		if (done)
			read_error = error;
	});
	sq_release(p);
	CHECK(wait_sem(sem));
	CHECK_EQ(path_error, ENOENT);
	CHECK_EQ(read_error, ENOENT);

	sq_release(d);
	sq_release(sem);
	sq_release(q);
	return sqt_finish("io_blocks");
}
