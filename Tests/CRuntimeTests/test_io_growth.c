/*
 * Growing data piece by piece is linear. Appending N one-byte pieces one at
 * a time with sq_data_create_concat, and a stream channel gathering N reads
 * of 100 bytes, cost per piece within a small constant of the 10x smaller
 * case (a quadratic growth would be 10x). These compare costs, they do not
 * time anything against a clock budget.
 */
#include "queue_helpers.h"

#include <fcntl.h>
#include <sys/socket.h>

#if SQT_SANITIZED
#define APPENDS 20000
#define READ_BYTES (2u << 20)
#else
#define APPENDS 80000
#define READ_BYTES (16u << 20)
#endif

/* Per-piece cost of the big case over the small one: linear is ~1, a
 * quadratic cost is ~10. Generous for a loaded 2-core machine. */
#define MAX_RATIO 4.0

static uint64_t
process_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- concat ---------------------------------------------------------- */

static uint64_t
append_cost(size_t n, bool *ok)
{
	static const char bytes[256];
	uint64_t t0 = sqt_thread_cpu_ns();
	sq_data_t all = sq_data_empty;
	for (size_t i = 0; i < n; i++) {
		sq_data_t one = sq_data_create_f(bytes + (i & 255), 1, NULL,
				SQ_DATA_DESTRUCTOR_DEFAULT);
		sq_data_t next = sq_data_create_concat(all, one);
		sq_release(one);
		sq_release(all);
		all = next;
	}
	uint64_t t = sqt_thread_cpu_ns() - t0;
	*ok = sq_data_get_size(all) == n;
	sq_release(all);
	return t;
}

/* The smallest of a few runs: the least disturbed by other load. */
static uint64_t
min_append_cost(size_t n, bool *ok)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t t = append_cost(n, ok);
		if (t < best)
			best = t;
	}
	return best;
}

static void
test_concat_growth(void)
{
	bool ok_small, ok_big;
	uint64_t small = min_append_cost(APPENDS / 10, &ok_small);
	uint64_t big = min_append_cost(APPENDS, &ok_big);
	CHECK(ok_small && ok_big);
	double ratio = ((double)big / APPENDS) /
			((double)(small ? small : 1) / (APPENDS / 10));
	printf("concat: %d appends %.1f ms, %d appends %.1f ms: per-piece "
			"ratio %.2f\n", APPENDS / 10, small / 1e6, APPENDS,
			big / 1e6, ratio);
	CHECK(ratio <= MAX_RATIO);

	/* Sharing still right: a prefix kept while the chain grows on. */
	sq_data_t a = sq_data_create_f("ab", 2, NULL, NULL);
	sq_data_t b = sq_data_create_f("cd", 2, NULL, NULL);
	sq_data_t ab = sq_data_create_concat(a, b);
	sq_data_t abab = sq_data_create_concat(ab, ab);
	sq_data_t ab_a = sq_data_create_concat(ab, a); /* fork at ab */
	sq_data_t x = sq_data_create_concat(abab, b);
	const void *p;
	size_t n;
	sq_data_t m = sq_data_create_map(ab_a, &p, &n);
	CHECK(n == 6 && memcmp(p, "abcdab", 6) == 0);
	sq_release(m);
	m = sq_data_create_map(x, &p, &n);
	CHECK(n == 10 && memcmp(p, "abcdabcdcd", 10) == 0);
	sq_release(m);
	sq_release(abab);
	/* ab's slots are taken: the next concat gets its own list. */
	sq_data_t y = sq_data_create_concat(ab, b);
	m = sq_data_create_map(y, &p, &n);
	CHECK(n == 6 && memcmp(p, "abcdcd", 6) == 0);
	sq_release(m);
	m = sq_data_create_map(ab, &p, &n);
	CHECK(n == 4 && memcmp(p, "abcd", 4) == 0);
	sq_release(m);
	sq_data_t objs[] = { a, b, ab, ab_a, x, y };
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
		sq_release(objs[i]);
}

/* ---- a stream read gathering small pieces ------------------------------ */

struct gather {
	sq_semaphore_t sem;
	size_t bytes;
	int error;
	bool ok;
};

static bool
gather_region(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	struct gather *g = ctx;
	const uint8_t *p = buf;
	for (size_t i = 0; i < size; i++)
		if (p[i] != (uint8_t)((g->bytes + i) % 251))
			g->ok = false;
	g->bytes += size;
	return true;
}

static void
gather_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct gather *g = ctx;
	if (data)
		sq_data_apply_f(data, g, gather_region);
	if (done) {
		g->error = error;
		sq_semaphore_signal(g->sem);
	}
}

struct writer {
	int fd;
	size_t bytes;
};

/* Blocking writes of 100 bytes: a SOCK_SEQPACKET socket keeps each one a
 * record, so every read gets exactly one 100-byte piece. */
static void *
writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t buf[100];
	for (size_t at = 0; at < w->bytes; at += sizeof(buf)) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)((at + i) % 251);
		if (write(w->fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			break;
	}
	close(w->fd);
	return NULL;
}

static void
cleaned_fn(void *ctx, int error)
{
	sq_semaphore_signal(ctx);
}

static uint64_t
read_cost(size_t bytes, bool *ok)
{
	int sv[2];
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	sq_queue_t q = sq_queue_create("test.io.growth", NULL);
	struct gather g = { .sem = sq_semaphore_create(0), .ok = true };
	uint64_t t0 = process_cpu_ns();
	sq_semaphore_t cleaned = sq_semaphore_create(0);
	sq_io_t ch = sq_io_create_f(SQ_IO_STREAM, sv[0], q, cleaned,
			cleaned_fn);
	/* Gather everything into one delivery: the channel concatenates
	 * each 100-byte piece onto what it holds. */
	sq_io_set_low_water(ch, SIZE_MAX);
	sq_io_read_f(ch, 0, SIZE_MAX, q, &g, gather_read);
	struct writer w = { sv[1], bytes };
	pthread_t t;
	pthread_create(&t, NULL, writer_main, &w);
	CHECK(sq_semaphore_wait(g.sem, sq_time(SQ_TIME_NOW,
			120 * (int64_t)NSEC_PER_SEC)) == 0);
	uint64_t cost = process_cpu_ns() - t0;
	pthread_join(t, NULL);
	sq_io_close(ch, 0);
	sq_release(ch);
	*ok = g.ok && g.error == 0 && g.bytes == bytes;
	/* The descriptor is ours again once the cleanup ran. */
	CHECK(sq_semaphore_wait(cleaned, sq_time(SQ_TIME_NOW,
			10 * (int64_t)NSEC_PER_SEC)) == 0);
	sq_release(cleaned);
	close(sv[0]);
	sq_release(g.sem);
	sq_release(q);
	return cost;
}

static void
test_read_growth(void)
{
	bool ok_small = true, ok_big;
	uint64_t small = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		bool ok;
		uint64_t t = read_cost(READ_BYTES / 1000 * 100, &ok);
		ok_small = ok_small && ok;
		if (t < small)
			small = t;
	}
	uint64_t big = read_cost(READ_BYTES / 100 * 100, &ok_big);
	CHECK(ok_small);
	CHECK(ok_big);
	double ratio = (double)big / (double)(small ? small : 1) / 10.0;
	printf("stream read, 100-byte pieces: %u KiB %.1f ms, %u KiB %.1f ms "
			"of CPU: per-piece ratio %.2f\n", READ_BYTES / 10240,
			small / 1e6, READ_BYTES >> 10, big / 1e6, ratio);
	CHECK(ratio <= MAX_RATIO);
}

int
main(void)
{
	test_concat_growth();
	test_read_growth();
	return sqt_finish("test_io_growth");
}
