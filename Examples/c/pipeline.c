/*
 * A small pipeline that uses most of SwiftQueues at once, and the program
 * `make trace-demo` records (docs/OBSERVABILITY.md shows its trace):
 *
 *   - a random-access I/O channel reads a 2 MiB file in 256 KiB pieces
 *     (the reads run on the I/O threads, the pieces arrive on a serial
 *     queue, "com.example.pipeline.reader");
 *   - each piece is counted on a concurrent queue ("...workers") as a
 *     member of a group, and each count is added up on a serial queue
 *     ("...totals");
 *   - a repeating timer source reports progress on the totals queue, and
 *     an sq_after_f says when the program has run 5 ms;
 *   - the group's notification, on the main queue, prints the result and
 *     ends the program, which the main thread runs with
 *     sq_main_queue_run_until.
 */
#define _GNU_SOURCE
#include <swiftqueues.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_SIZE (2u << 20)
#define PIECE (256u << 10)

static sq_queue_t reader, workers, totals;
static sq_group_t counting;
static sq_source_t progress;
static char path[] = "/tmp/sq-pipeline-XXXXXX";
static uint64_t words, pieces; /* on the totals queue */
static volatile int32_t done;

struct piece {
	sq_data_t data;
	uint64_t words;
};

static bool
count_region(void *ctx, sq_data_t region, size_t offset, const void *buffer,
		size_t size)
{
	struct piece *p = ctx;
	const char *s = buffer;
	for (size_t i = 0; i < size; i++)
		if (s[i] == ' ' || s[i] == '\n')
			p->words++;
	return true;
}

static void
add_count(void *ctx)
{
	struct piece *p = ctx;
	words += p->words;
	pieces++;
	free(p);
}

static void
count_piece(void *ctx)
{
	struct piece *p = ctx;
	sq_data_apply_f(p->data, p, count_region);
	sq_release(p->data);
	sq_async_f(totals, p, add_count);
}

static void
piece_read(void *ctx, bool finished, sq_data_t data, int error)
{
	if (error != 0) {
		fprintf(stderr, "pipeline: read: %s\n", strerror(error));
		exit(1);
	}
	if (data != NULL && sq_data_get_size(data) > 0) {
		struct piece *p = calloc(1, sizeof(*p));
		p->data = data;
		sq_retain(data);
		sq_group_async_f(counting, workers, p, count_piece);
	}
	if (finished)
		sq_group_leave(counting); /* the read's own membership */
}

static void
report(void *ctx)
{
	printf("progress: %llu pieces, %llu words\n",
			(unsigned long long)pieces, (unsigned long long)words);
}

static void
five_ms(void *ctx)
{
	printf("5 ms have passed\n");
}

static void
finish(void *ctx)
{
	sq_sync_f(totals, NULL, report);
	sq_source_cancel(progress);
	printf("counted %llu words in %llu pieces\n",
			(unsigned long long)words, (unsigned long long)pieces);
	sq_atomic_store32(&done, 1);
}

static bool
is_done(void *ctx)
{
	return sq_atomic_load32(&done) != 0;
}

static void
channel_closed(void *ctx, int error)
{
	close((int)(intptr_t)ctx);
}

int
main(void)
{
	/* The input: FILE_SIZE bytes of eight-letter words. */
	int fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	unlink(path);
	static char text[FILE_SIZE];
	for (size_t i = 0; i < FILE_SIZE; i++)
		text[i] = i % 9 == 8 ? ' ' : (char)('a' + i % 26);
	if (write(fd, text, FILE_SIZE) != (ssize_t)FILE_SIZE ||
			lseek(fd, 0, SEEK_SET) != 0) {
		perror("write");
		return 1;
	}

	reader = sq_queue_create("com.example.pipeline.reader", NULL);
	workers = sq_queue_create("com.example.pipeline.workers",
			SQ_QUEUE_CONCURRENT);
	totals = sq_queue_create("com.example.pipeline.totals", NULL);
	counting = sq_group_create();

	progress = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, totals);
	sq_source_set_event_handler_f(progress, report);
	sq_source_set_timer(progress, sq_time(SQ_TIME_NOW, 2 * NSEC_PER_MSEC),
			2 * NSEC_PER_MSEC, NSEC_PER_MSEC / 2);
	sq_resume(progress);
	sq_after_f(sq_time(SQ_TIME_NOW, 5 * NSEC_PER_MSEC), totals, NULL,
			five_ms);

	sq_io_t channel = sq_io_create_f(SQ_IO_RANDOM, fd, reader,
			(void *)(intptr_t)fd, channel_closed);
	sq_io_set_high_water(channel, PIECE);
	sq_io_set_low_water(channel, PIECE);
	sq_group_enter(counting);
	sq_io_read_f(channel, 0, SIZE_MAX, reader, NULL, piece_read);
	sq_group_notify_f(counting, sq_get_main_queue(), NULL, finish);

	bool ok = sq_main_queue_run_until(sq_time(SQ_TIME_NOW,
			10 * NSEC_PER_SEC), is_done, NULL);
	sq_io_close(channel, 0);
	sq_release(channel);
	return ok && words == FILE_SIZE / 9 ? 0 : 1;
}
