/*
 * A service with a deliberate stall, for finding it in a trace
 * (`make trace-demo` records it and runs `sq-trace-report` on the trace;
 * docs/OBSERVABILITY.md walks through the answer):
 *
 *   - a serial queue, "com.example.cache", guards a cache;
 *   - a repeating timer source on that queue rebuilds the cache every
 *     300 ms, and the rebuild (refresh_cache) holds the queue for 120 ms;
 *   - requests arrive every 5 ms on a concurrent queue,
 *     "com.example.requests", as members of a group; each one
 *     (handle_request) looks the cache up with sq_sync_f, which waits
 *     while a rebuild holds the queue;
 *   - the main thread waits for the requests with sq_group_wait.
 *
 * Most requests take microseconds; those that arrive during a rebuild
 * take up to 120 ms, all of it waiting for the cache queue.
 */
#include <swiftqueues.h>

#include <stdio.h>
#include <time.h>

#define REQUESTS 200
#define REQUEST_EVERY_MS 5
#define REFRESH_EVERY_MS 300
#define REFRESH_MS 120

static sq_queue_t cache, requests;
static sq_group_t in_flight;
static long lookups, refreshes; /* on the cache queue */

/* Keeps the thread busy (not asleep) for `ms`, as real work would. */
static void
busy_for_ms(long ms)
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) * 1000 +
			(now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

static void
refresh_cache(void *context)
{
	(void)context;
	busy_for_ms(REFRESH_MS); /* the stall: the queue is held meanwhile */
	refreshes++;
}

static void
lookup(void *context)
{
	(void)context;
	lookups++;
}

static void
handle_request(void *context)
{
	(void)context;
	sq_sync_f(cache, NULL, lookup);
}

int
main(void)
{
	cache = sq_queue_create("com.example.cache", SQ_QUEUE_SERIAL);
	requests = sq_queue_create("com.example.requests",
			SQ_QUEUE_CONCURRENT);
	in_flight = sq_group_create();

	sq_source_t refresher = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0,
			cache);
	sq_source_set_timer(refresher, sq_time(SQ_TIME_NOW, 50 *
			NSEC_PER_MSEC), REFRESH_EVERY_MS * NSEC_PER_MSEC,
			NSEC_PER_MSEC);
	sq_source_set_event_handler_f(refresher, refresh_cache);
	sq_resume(refresher);

	for (int i = 0; i < REQUESTS; i++) {
		sq_group_async_f(in_flight, requests, NULL, handle_request);
		struct timespec pause = { 0, REQUEST_EVERY_MS * 1000000L };
		nanosleep(&pause, NULL);
	}
	sq_group_wait(in_flight, SQ_TIME_FOREVER);

	sq_source_cancel(refresher);
	sq_sync_f(cache, NULL, lookup); /* after the last refresh */
	printf("%ld requests served, %ld cache refreshes\n", lookups - 1,
			refreshes);
	sq_release(refresher);
	sq_release(in_flight);
	sq_release(requests);
	sq_release(cache);
	return 0;
}
