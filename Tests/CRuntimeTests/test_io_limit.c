/*
 * The global limit on files opened by path channels (they open lazily, and a
 * global semaphore limits the open files). With SQ_IO_MAX_OPEN_FILES=4 (set
 * before the first use): 16 path channels reading 16 files at once never have
 * more than 4 of them open, and every read is byte-exact; operations waiting
 * for a slot wait asynchronously (workers keep running other work) and get
 * the slots in FIFO order; closing a channel gives its slot back, also when
 * it never got one (SQ_IO_STOP, release while waiting, a failed open). In a
 * child process without the variable, the default is half the RLIMIT_NOFILE
 * soft limit.
 */
#include "io_helpers.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define LIMIT 4
#define FILES 16
#define FILE_BYTES ((size_t)SQT_SCALE(2 << 20, 512 << 10))

static char prefix[256];

static char *
file_path(int i)
{
	char *p;
	if (asprintf(&p, "%s%d", prefix, i) < 0)
		exit(2);
	return p;
}

static void
make_file(int i, size_t size)
{
	char *path = file_path(i);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	uint8_t *b = malloc(size);
	for (size_t k = 0; k < size; k++)
		b[k] = pattern_byte((size_t)i, k);
	if (fd < 0 || write(fd, b, size) != (ssize_t)size)
		exit(2);
	free(b);
	close(fd);
	free(path);
}

/* Descriptors of this process open on one of the test files. */
static int
open_test_files(void)
{
	return fds_open_on(prefix, true);
}

/* Waits (up to 10 s) until no test file is open; returns how many are. */
static int
wait_all_closed(void)
{
	int n = open_test_files();
	for (int i = 0; i < 1000 && n != 0; i++) {
		sqt_sleep_ms(10);
		n = open_test_files();
	}
	return n;
}

static atomic_int max_open;

/* How many test files were open at one moment. A listing of
 * /proc/self/fd is not a snapshot: one file may be read before it closes
 * and the next after it opens. So the descriptors are listed twice and
 * only those the same in both count: each file opens once, so every such
 * one was open between the two listings. */
static int
open_at_once(void)
{
	struct fd_list *a = malloc(2 * sizeof(*a));
	if (a == NULL)
		exit(2);
	struct fd_list *b = &a[1];
	fds_list_on(a, prefix, true);
	fds_list_on(b, prefix, true);
	int n = 0;
	for (int i = 0; i < a->n; i++)
		for (int k = 0; k < b->n; k++)
			if (a->fd[i] == b->fd[k] &&
					strcmp(a->target[i], b->target[k]) == 0) {
				n++;
				break;
			}
	free(a);
	return n;
}

static void
sample(void)
{
	sqt_atomic_max(&max_open, open_at_once());
}

/* ---- 16 channels, 4 slots ------------------------------------------------ */

struct reader {
	int file;
	sq_io_t ch;
	size_t pos;
	bool ok;
	int error;
	int calls;
	atomic_int finished;
};

static atomic_int readers_done;

static void
on_chunk(void *ctx, bool done, sq_data_t data, int error)
{
	struct reader *r = ctx;
	sample();
	r->calls++;
	const void *p;
	size_t n;
	sq_data_t m = sq_data_create_map(data, &p, &n);
	for (size_t i = 0; i < n && r->ok; i++)
		r->ok = ((const uint8_t *)p)[i] == pattern_byte((size_t)r->file, r->pos + i);
	sq_release(m);
	r->pos += n;
	if (done) {
		r->error = error;
		sq_io_close(r->ch, 0); /* gives the slot to the next one */
		sq_release(r->ch);
		atomic_store(&r->finished, 1);
		atomic_fetch_add(&readers_done, 1);
	}
}

/* Samples the open test files in the background too. */
static atomic_bool monitor_stop;

static void *
monitor(void *arg)
{
	while (!atomic_load(&monitor_stop)) {
		sample();
		sqt_sleep_us(500);
	}
	return NULL;
}

static void
test_many(void)
{
	static struct reader rs[FILES];
	sq_queue_t g = sq_get_global_queue(0, 0);
	atomic_store(&max_open, 0);
	pthread_t t;
	pthread_create(&t, NULL, monitor, NULL);
	uint64_t t0 = sqt_now_ns();
	for (int i = 0; i < FILES; i++) {
		rs[i].file = i;
		rs[i].ok = true;
		char *path = file_path(i);
		rs[i].ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path,
				O_RDONLY, 0, g, NULL, NULL);
		free(path);
		sq_io_set_high_water(rs[i].ch, 128 * 1024);
		/* A serial queue per reader: its calls are in order. */
		sq_queue_t q = sq_queue_create("test.io.limit.reader", NULL);
		sq_io_read_f(rs[i].ch, 0, SIZE_MAX, q, &rs[i], on_chunk);
		sq_release(q);
	}
	CHECK(sqt_wait_int(&readers_done, FILES, 60000));
	double ms = sqt_ms_since(t0);
	atomic_store(&monitor_stop, true);
	pthread_join(t, NULL);
	int bad = 0;
	for (int i = 0; i < FILES; i++)
		if (!rs[i].ok || rs[i].pos != FILE_BYTES || rs[i].error != 0)
			bad++;
	CHECK_EQ(bad, 0);
	printf("%d path channels, limit %d: at most %d files open at once, "
			"%.0f ms\n", FILES, LIMIT, atomic_load(&max_open), ms);
	CHECK(atomic_load(&max_open) <= LIMIT);
	CHECK(atomic_load(&max_open) >= 1);
	/* Every file is closed once the channels are. */
	CHECK_EQ(wait_all_closed(), 0);
}

/* ---- Waiting: asynchronous, FIFO; slots come back -------------------------- */

struct one {
	atomic_int done;
	int error;
	size_t size;
	atomic_int order; /* 1-based completion rank */
};

static atomic_int rank;

static void
on_one(void *ctx, bool done, sq_data_t data, int error)
{
	struct one *o = ctx;
	if (data != NULL) /* NULL when the read ends with an error */
		o->size += sq_data_get_size(data);
	if (done) {
		o->error = error;
		atomic_store(&o->order, atomic_fetch_add(&rank, 1) + 1);
		atomic_store(&o->done, 1);
	}
}

static sq_io_t
path_channel(int file, struct cleanup *c)
{
	char *path = file_path(file);
	sq_io_t ch = sq_io_create_with_path_f(SQ_IO_STREAM, path, O_RDONLY,
			0, NULL, c, c ? on_cleanup : NULL);
	free(path);
	return ch;
}

static void
count_task(void *ctx)
{
	atomic_fetch_add((atomic_int *)ctx, 1);
}

static void
test_fifo(sq_queue_t q)
{
	sq_io_t held[LIMIT];
	struct one hr[LIMIT];
	memset(hr, 0, sizeof(hr));
	for (int i = 0; i < LIMIT; i++) {
		held[i] = path_channel(i, NULL);
		sq_io_read_f(held[i], 0, 10, q, &hr[i], on_one);
	}
	for (int i = 0; i < LIMIT; i++)
		CHECK(sqt_wait_int(&hr[i].done, 1, 10000));
	CHECK_EQ(open_test_files(), LIMIT);

	/* Three more: they wait for a slot, in line in the order they
	 * asked (each channel asks from its own queue: space them out). */
	enum { W = 3 };
	sq_io_t wch[W];
	struct one wr[W];
	memset(wr, 0, sizeof(wr));
	atomic_store(&rank, 0);
	for (int i = 0; i < W; i++) {
		wch[i] = path_channel(LIMIT + i, NULL);
		sq_io_read_f(wch[i], 0, 10, q, &wr[i], on_one);
		sqt_sleep_ms(50);
	}
	/* Waiting blocks no worker: other work still runs, on every queue,
	 * and the channels holding slots still do I/O. */
	static atomic_int ran;
	sq_queue_t s = sq_queue_create("test.io.limit.other", NULL);
	for (int i = 0; i < 200; i++) {
		sq_async_f(sq_get_global_queue(0, 0), &ran, count_task);
		sq_async_f(s, &ran, count_task);
	}
	CHECK(sqt_wait_int(&ran, 400, 10000));
	sq_release(s);
	struct one more = { 0 };
	sq_io_read_f(held[0], 0, 100, q, &more, on_one);
	CHECK(sqt_wait_int(&more.done, 1, 10000));
	CHECK_EQ(more.size, 100);
	sqt_sleep_ms(100);
	for (int i = 0; i < W; i++)
		CHECK_EQ(atomic_load(&wr[i].done), 0);
	CHECK_EQ(open_test_files(), LIMIT);

	/* Closing one gives its slot to the first waiting, and only it. */
	atomic_store(&rank, 0);
	sq_release(held[0]);
	CHECK(sqt_wait_int(&wr[0].done, 1, 10000));
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&wr[1].done), 0);
	CHECK_EQ(atomic_load(&wr[2].done), 0);
	sq_io_close(held[1], 0);
	sq_release(held[1]);
	CHECK(sqt_wait_int(&wr[1].done, 1, 10000));
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&wr[2].done), 0);
	sq_release(wch[0]);
	CHECK(sqt_wait_int(&wr[2].done, 1, 10000));
	for (int i = 0; i < W; i++) {
		CHECK_EQ(atomic_load(&wr[i].order), i + 1);
		CHECK_EQ(wr[i].error, 0);
		CHECK_EQ(wr[i].size, 10);
	}
	CHECK(open_test_files() <= LIMIT);
	sq_release(held[2]);
	sq_release(held[3]);
	sq_release(wch[1]);
	sq_release(wch[2]);
	CHECK_EQ(wait_all_closed(), 0);
}

/* Channels that never got their slot give nothing back twice and lose
 * nothing: stopped while waiting (ECANCELED), released while waiting (its
 * read still runs, later), failing to open (ENOENT). */
static void
test_edges(sq_queue_t q)
{
	sq_io_t held[LIMIT];
	struct one hr[LIMIT];
	memset(hr, 0, sizeof(hr));
	for (int i = 0; i < LIMIT; i++) {
		held[i] = path_channel(i, NULL);
		sq_io_read_f(held[i], 0, 1, q, &hr[i], on_one);
	}
	for (int i = 0; i < LIMIT; i++)
		CHECK(sqt_wait_int(&hr[i].done, 1, 10000));

	struct cleanup cs = { 0 }, cr = { 0 };
	struct one stopped = { 0 }, released = { 0 };
	sq_io_t st = path_channel(5, &cs);
	sq_io_read_f(st, 0, 10, q, &stopped, on_one);
	sqt_sleep_ms(30);
	sq_io_t rl = path_channel(6, &cr);
	sq_io_read_f(rl, 0, 10, q, &released, on_one);
	sqt_sleep_ms(50);
	sq_io_close(st, SQ_IO_STOP);
	sq_release(st);
	sq_release(rl); /* closes, but its read was issued first */
	CHECK(sqt_wait_int(&stopped.done, 1, 10000));
	CHECK_EQ(stopped.error, ECANCELED);
	CHECK(sqt_wait_int(&cs.runs, 1, 10000));
	CHECK_EQ(cs.error, 0);
	sqt_sleep_ms(50);
	CHECK_EQ(atomic_load(&released.done), 0);
	CHECK_EQ(atomic_load(&cr.runs), 0);

	/* Open failures take a slot only for the attempt. */
	struct cleanup cf[8];
	struct one failed[8];
	memset(cf, 0, sizeof(cf));
	memset(failed, 0, sizeof(failed));
	for (int i = 0; i < 8; i++) {
		sq_io_t f = sq_io_create_with_path_f(SQ_IO_STREAM,
				"/nonexistent/sq-limit", O_RDONLY, 0, NULL,
				&cf[i], on_cleanup);
		sq_io_read_f(f, 0, 1, q, &failed[i], on_one);
		sq_release(f);
	}

	/* Free the held slots: the released channel's read runs, then the
	 * failing ones; their slots all come back. */
	for (int i = 0; i < LIMIT; i++)
		sq_release(held[i]);
	CHECK(sqt_wait_int(&released.done, 1, 10000));
	CHECK_EQ(released.error, 0);
	CHECK_EQ(released.size, 10);
	CHECK(sqt_wait_int(&cr.runs, 1, 10000));
	for (int i = 0; i < 8; i++) {
		CHECK(sqt_wait_int(&failed[i].done, 1, 10000));
		CHECK_EQ(failed[i].error, ENOENT);
		CHECK(sqt_wait_int(&cf[i].runs, 1, 10000));
		CHECK_EQ(cf[i].error, ENOENT);
	}
	sqt_sleep_ms(20);
	CHECK_EQ(atomic_load(&cs.runs), 1);
	CHECK_EQ(atomic_load(&cr.runs), 1);

	/* All LIMIT slots are free again: LIMIT channels open at once. */
	struct one again[LIMIT];
	memset(again, 0, sizeof(again));
	sq_io_t ch[LIMIT];
	for (int i = 0; i < LIMIT; i++) {
		ch[i] = path_channel(8 + i, NULL);
		sq_io_read_f(ch[i], 0, 10, q, &again[i], on_one);
	}
	for (int i = 0; i < LIMIT; i++) {
		CHECK(sqt_wait_int(&again[i].done, 1, 10000));
		CHECK_EQ(again[i].error, 0);
	}
	CHECK_EQ(open_test_files(), LIMIT);
	for (int i = 0; i < LIMIT; i++)
		sq_release(ch[i]);
	CHECK_EQ(wait_all_closed(), 0);
}

/* ---- The default: RLIMIT_NOFILE / 2 (in a child process) ------------------- */

#define DEFAULT_RLIMIT 100
#define DEFAULT_CHANNELS 56

static int
default_limit_child(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = DEFAULT_RLIMIT;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 100;
	unsetenv("SQ_IO_MAX_OPEN_FILES");
	sq_queue_t q = sq_queue_create("test.io.limit.default", NULL);
	static sq_io_t ch[DEFAULT_CHANNELS];
	static struct one r[DEFAULT_CHANNELS];
	for (int i = 0; i < DEFAULT_CHANNELS; i++) {
		ch[i] = path_channel(i % FILES, NULL);
		sq_io_read_f(ch[i], 0, 1, q, &r[i], on_one);
	}
	/* Which ones get the slots depends on the order their queues asked:
	 * count them. */
	int fails = 0;
	int want = DEFAULT_RLIMIT / 2;
	int done = 0;
	for (int k = 0; k < 1000 && done < want; k++) {
		sqt_sleep_ms(10);
		done = 0;
		for (int i = 0; i < DEFAULT_CHANNELS; i++)
			done += atomic_load(&r[i].done);
	}
	sqt_sleep_ms(100);
	done = 0;
	for (int i = 0; i < DEFAULT_CHANNELS; i++)
		done += atomic_load(&r[i].done);
	if (done != want)
		fails += 1;
	if (open_test_files() != want)
		fails += 2;
	for (int i = 0; i < DEFAULT_CHANNELS; i++)
		sq_release(ch[i]);
	for (int i = 0; i < DEFAULT_CHANNELS; i++)
		if (!sqt_wait_int(&r[i].done, 1, 10000))
			fails |= 4;
	sq_release(q);
	return fails;
}

static void
test_default(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		_exit(default_limit_child());
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status));
	/* 1: not exactly RLIMIT_NOFILE / 2 got a slot; 2: not that many
	 * files open; 4: the others did not finish once slots came back. */
	CHECK_EQ(WEXITSTATUS(status), 0);
}

int
main(void)
{
	const char *dir = getenv("TMPDIR");
	snprintf(prefix, sizeof(prefix), "%s/sqtest-io-limit-%d-",
			dir ? dir : "/tmp", (int)getpid());
	for (int i = 0; i < FILES; i++)
		make_file(i, FILE_BYTES);

	/* Before anything uses the runtime: the child starts fresh. */
	test_default();

	setenv("SQ_IO_MAX_OPEN_FILES", "4", 1);
	test_many();
	sq_queue_t q = sq_queue_create("test.io.limit", NULL);
	test_fifo(q);
	test_edges(q);
	sq_release(q);

	for (int i = 0; i < FILES; i++) {
		char *path = file_path(i);
		unlink(path);
		free(path);
	}
	return sqt_finish("test_io_limit");
}
