/*
 * Random-access channels: a 256 MiB file read at eight offsets at once and
 * written back, chunk by chunk and without copying, through a second
 * channel (byte-exact), while an sq_apply keeps the compute workers busy
 * and finishing; a read by path at an offset; 10,000 path channels that
 * open nothing until used; a stream channel on a file.
 */
#include "queue_helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#if SQT_SANITIZED
#define FILE_BYTES ((size_t)16 << 20)
#define PATH_CHANNELS 2000
#else
#define FILE_BYTES ((size_t)256 << 20)
#define PATH_CHANNELS 10000
#endif
#define READERS 8

#define K 0x9E3779B97F4A7C15ull

/* Byte `o` of the pattern: 64-bit words (o / 8) * K, little-endian. */
static inline uint8_t
pat(size_t o)
{
	return (uint8_t)(((uint64_t)(o >> 3) * K) >> ((o & 7) * 8));
}

static bool
check_bytes(const void *buf, size_t from, size_t n)
{
	const uint8_t *p = buf;
	size_t i = 0;
	while (i < n && ((from + i) & 7)) {
		if (p[i] != pat(from + i))
			return false;
		i++;
	}
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		if (w != (uint64_t)((from + i) >> 3) * K)
			return false;
	}
	for (; i < n; i++)
		if (p[i] != pat(from + i))
			return false;
	return true;
}

static char *
temp_path(const char *name)
{
	char *p;
	const char *dir = getenv("TMPDIR");
	if (asprintf(&p, "%s/sqtest-io-%d-%s", dir ? dir : "/tmp",
			(int)getpid(), name) < 0)
		exit(2);
	return p;
}

static void
write_pattern_file(const char *path, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	size_t chunk = 1 << 20;
	uint64_t *buf = malloc(chunk);
	for (size_t off = 0; off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		for (size_t i = 0; i < chunk / 8; i++)
			buf[i] = (uint64_t)((off >> 3) + i) * K;
		CHECK_EQ(write(fd, buf, n), (ssize_t)n);
	}
	free(buf);
	close(fd);
}

static int
count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* ---- The big read + write back ------------------------------------------- */

struct big {
	sq_io_t out;
	sq_queue_t q;
	sq_group_t group;
	int bad_reads;
	int bad_writes;
	size_t bytes_read;
	int inflight;
};

struct reader {
	struct big *big;
	size_t offset; /* where this read started */
	size_t pos;    /* bytes delivered so far */
	size_t length;
	bool ok;
	int error;
};

static void
written(void *ctx, bool done, sq_data_t data, int error)
{
	struct big *b = ctx;
	if (!done)
		return; /* progress: the rest is still being written */
	if (data != NULL || error != 0)
		__atomic_add_fetch(&b->bad_writes, 1, __ATOMIC_SEQ_CST);
	sq_group_leave(b->group);
}

static bool
check_region(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	struct reader *r = ctx;
	if (!check_bytes(buf, r->offset + r->pos + offset, size))
		r->ok = false;
	return r->ok;
}

static void
read_chunk(void *ctx, bool done, sq_data_t data, int error)
{
	struct reader *r = ctx;
	struct big *b = r->big;
	size_t n = sq_data_get_size(data);
	if (n > 0) {
		sq_data_apply_f(data, r, check_region);
		/* Write the very same regions back, at the same place. */
		sq_group_enter(b->group);
		sq_io_write_f(b->out, (off_t)(r->offset + r->pos), data, b->q,
				b, written);
		r->pos += n;
		__atomic_add_fetch(&b->bytes_read, n, __ATOMIC_SEQ_CST);
	}
	if (done) {
		r->error = error;
		if (error != 0 || r->pos != r->length || !r->ok)
			__atomic_add_fetch(&b->bad_reads, 1, __ATOMIC_SEQ_CST);
		__atomic_sub_fetch(&b->inflight, 1, __ATOMIC_SEQ_CST);
		sq_group_leave(b->group);
	}
}

/* The compute side: apply rounds keep finishing while the I/O runs. */
static int apply_stop;
static uint64_t apply_rounds;

static void
spin_iteration(void *ctx, size_t i)
{
	volatile uint64_t x = i;
	for (int k = 0; k < 200; k++)
		x = x * 6364136223846793005ull + 1;
}

static void *
apply_loop(void *arg)
{
	while (!__atomic_load_n(&apply_stop, __ATOMIC_SEQ_CST)) {
		sq_apply_f(256, sq_get_global_queue(0, 0), NULL,
				spin_iteration);
		__atomic_add_fetch(&apply_rounds, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void
signal_sem(void *ctx)
{
	sq_semaphore_signal(ctx);
}

static void
test_big(void)
{
	char *in_path = temp_path("in");
	char *out_path = temp_path("out");
	write_pattern_file(in_path, FILE_BYTES);

	struct big b = { 0 };
	b.q = sq_get_global_queue(0, 0);
	b.group = sq_group_create();
	int in_fd = open(in_path, O_RDONLY | O_CLOEXEC);
	sq_io_t in = sq_io_create_f(SQ_IO_RANDOM, in_fd, NULL, NULL, NULL);
	b.out = sq_io_create_with_path_f(SQ_IO_RANDOM, out_path,
			O_WRONLY | O_CREAT | O_TRUNC, 0600, NULL, NULL, NULL);
	CHECK(in != NULL && b.out != NULL);

	pthread_t t;
	pthread_create(&t, NULL, apply_loop, NULL);
	uint64_t rounds0 = __atomic_load_n(&apply_rounds, __ATOMIC_SEQ_CST);
	uint64_t t0 = sqt_now_ns();
	struct reader readers[READERS];
	size_t part = FILE_BYTES / READERS;
	for (int i = 0; i < READERS; i++) {
		readers[i] = (struct reader){ &b, (size_t)i * part, 0, part,
				true, 0 };
		sq_group_enter(b.group);
		__atomic_add_fetch(&b.inflight, 1, __ATOMIC_SEQ_CST);
		/* The last one reads to end of file. */
		sq_io_read_f(in, (off_t)readers[i].offset,
				i == READERS - 1 ? SIZE_MAX : part, b.q,
				&readers[i], read_chunk);
	}
	CHECK_EQ(sq_group_wait(b.group, sq_time(SQ_TIME_NOW,
			120 * NSEC_PER_SEC)), 0);
	uint64_t t1 = sqt_now_ns();
	uint64_t rounds = __atomic_load_n(&apply_rounds, __ATOMIC_SEQ_CST) -
			rounds0;
	__atomic_store_n(&apply_stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
	CHECK(rounds >= 2); /* the workers kept computing */
	CHECK_EQ(b.bad_reads, 0);
	CHECK_EQ(b.bad_writes, 0);
	CHECK_EQ(b.bytes_read, FILE_BYTES);
	printf("file: %zu MiB read + written back in %.1f ms; %llu apply "
			"rounds meanwhile\n", FILE_BYTES >> 20,
			(double)(t1 - t0) / 1e6, (unsigned long long)rounds);

	/* The barrier runs once every write has finished: fsync there. */
	sq_semaphore_t s = sq_semaphore_create(0);
	sq_io_barrier_f(b.out, s, signal_sem);
	CHECK_EQ(sq_semaphore_wait(s, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)), 0);
	CHECK(sq_io_get_descriptor(b.out) >= 0);
	sq_release(s);
	sq_io_close(in, 0);
	sq_release(in);
	sq_release(b.out);
	usleep(50000);

	/* Byte-exact copy. */
	int fd = open(out_path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	fstat(fd, &st);
	CHECK_EQ(st.st_size, (off_t)FILE_BYTES);
	size_t chunk = 1 << 20;
	char *buf = malloc(chunk);
	bool same = true;
	for (size_t off = 0; off < FILE_BYTES && same; off += chunk) {
		ssize_t n = pread(fd, buf, chunk, (off_t)off);
		same = n == (ssize_t)chunk && check_bytes(buf, off, chunk);
	}
	CHECK(same);
	free(buf);
	close(fd);
	close(in_fd);
	unlink(in_path);
	unlink(out_path);
	free(in_path);
	free(out_path);
	sq_release(b.group);
}

/* ---- path channels and a stream channel on a file -------------------------- */

struct one {
	sq_data_t data;
	int error;
	int done;
	sq_semaphore_t sem;
};

static void
on_one(void *ctx, bool done, sq_data_t data, int error)
{
	struct one *o = ctx;
	sq_data_t all = sq_data_create_concat(o->data, data);
	sq_release(o->data);
	o->data = all;
	if (done) {
		o->done++;
		o->error = error;
		sq_semaphore_signal(o->sem);
	}
}

static bool
check_data(sq_data_t d, size_t from)
{
	const void *p;
	size_t n;
	sq_data_t m = sq_data_create_map(d, &p, &n);
	bool ok = check_bytes(p, from, n);
	sq_release(m);
	return ok;
}

static int path_cleanups;

static void
path_cleanup(void *ctx, int error)
{
	__atomic_add_fetch(&path_cleanups, 1, __ATOMIC_SEQ_CST);
}

static void
test_path(void)
{
	char *path = temp_path("small");
	write_pattern_file(path, 1 << 20);
	sq_queue_t q = sq_queue_create("test.io.path", NULL);

	/* A read by path at an offset. */
	struct one o = { sq_data_empty, -1, 0, sq_semaphore_create(0) };
	sq_io_t ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path, O_RDONLY, 0,
			q, NULL, NULL);
	sq_io_read_f(ch, 4096, 8192, q, &o, on_one);
	CHECK_EQ(sq_semaphore_wait(o.sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)), 0);
	CHECK_EQ(o.done, 1);
	CHECK_EQ(o.error, 0);
	CHECK_EQ(sq_data_get_size(o.data), 8192);
	CHECK(check_data(o.data, 4096));
	sq_release(o.data);
	sq_release(ch);

	/* A read running past the end stops there. */
	o.data = sq_data_empty;
	o.done = 0;
	ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path, O_RDONLY, 0, q,
			NULL, NULL);
	sq_io_read_f(ch, (1 << 20) - 100, 1000, q, &o, on_one);
	CHECK_EQ(sq_semaphore_wait(o.sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)), 0);
	CHECK_EQ(sq_data_get_size(o.data), 100);
	CHECK(check_data(o.data, (1 << 20) - 100));
	sq_release(o.data);
	sq_release(ch);

	/* A stream channel on a file reads on from the file position. */
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	lseek(fd, 1000, SEEK_SET);
	o.data = sq_data_empty;
	o.done = 0;
	ch = sq_io_create_f(SQ_IO_STREAM, fd, q, NULL, NULL);
	sq_io_read_f(ch, 0, 5000, q, &o, on_one);
	sq_io_read_f(ch, 0, SIZE_MAX, q, &o, on_one);
	CHECK_EQ(sq_semaphore_wait(o.sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)), 0);
	CHECK_EQ(sq_semaphore_wait(o.sem, sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC)), 0);
	CHECK_EQ(o.done, 2);
	CHECK_EQ(sq_data_get_size(o.data), (1 << 20) - 1000);
	CHECK(check_data(o.data, 1000));
	sq_release(o.data);
	sq_release(ch);
	usleep(20000);
	close(fd);

	/* Path channels hold no descriptor until used. */
	int before = count_fds();
	sq_io_t *chans = malloc(PATH_CHANNELS * sizeof(*chans));
	for (int i = 0; i < PATH_CHANNELS; i++)
		chans[i] = sq_io_create_with_path_f(SQ_IO_RANDOM, path,
				O_RDONLY, 0, q, NULL, path_cleanup);
	CHECK_EQ(count_fds(), before);
	for (int i = 0; i < PATH_CHANNELS; i++)
		sq_release(chans[i]);
	for (int i = 0; i < 10000 && __atomic_load_n(&path_cleanups,
			__ATOMIC_SEQ_CST) < PATH_CHANNELS; i++)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&path_cleanups, __ATOMIC_SEQ_CST),
			PATH_CHANNELS);
	CHECK_EQ(count_fds(), before);
	free(chans);

	sq_release(o.sem);
	sq_release(q);
	unlink(path);
	free(path);
}

int
main(void)
{
	test_path();
	test_big();
	return sqt_finish("test_io_file");
}
