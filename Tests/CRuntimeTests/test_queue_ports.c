/*
 * Ports of libdispatch's queue tests (tests/dispatch_*.c), scaled for CI:
 * pingpong (group-based hops between two serial queues), cascade (items
 * flowing through a chain of serial queues, FIFO at every stage), starfish
 * (all-to-all ping / pong between many serial queues): every task on the
 * queue it was sent to, in order, none lost.
 */
#include "queue_helpers.h"

#define WAIT_MS 20000

/* ---- pingpong ---------------------------------------------------------------- */

#define LAPS SQT_SCALE(100000, 20000)

static struct {
	sq_group_t group;
	sq_queue_t ping, pong;
	long counter;         /* handed from hop to hop: one in flight */
	long wrong_queue;     /* touched only by the hop in flight */
	long final_count;
} pp;

static void
pingpong_hop(void *ctx)
{
	sq_queue_t here = ctx;
	if (sq_get_current_queue() != here)
		pp.wrong_queue++;
	if (pp.counter < LAPS) {
		pp.counter++;
		sq_queue_t there = here == pp.ping ? pp.pong : pp.ping;
		sq_group_async_f(pp.group, there, there, pingpong_hop);
	} else {
		pp.final_count = pp.counter;
	}
}

static void
test_pingpong(void)
{
	pp.ping = sq_queue_create("ping", NULL);
	pp.pong = sq_queue_create("pong", NULL);
	pp.group = sq_group_create();
	uint64_t start = sqt_now_ns();
	sq_group_async_f(pp.group, pp.ping, pp.ping, pingpong_hop);
	CHECK_EQ(sq_group_wait(pp.group, sq_time(SQ_TIME_NOW,
			(int64_t)WAIT_MS * (int64_t)NSEC_PER_MSEC)), 0);
	double ms = sqt_ms_since(start);
	CHECK_EQ(pp.final_count, LAPS);
	CHECK_EQ(pp.wrong_queue, 0);
	printf("pingpong: %d hops in %.0f ms (%.0f ns/hop)\n", LAPS, ms,
			ms * 1e6 / LAPS);
	sq_release(pp.group);
	sq_release(pp.ping);
	sq_release(pp.pong);
}

/* ---- cascade ----------------------------------------------------------------- */

#define STAGES 80
#define ITEMS SQT_SCALE(10000, 2000)

static struct {
	sq_queue_t q[STAGES];
	int stage_of[ITEMS];       /* advanced by the item's own chain */
	int last_item[STAGES];     /* touched only on queue q[k] */
	atomic_long misordered;
	atomic_long skipped;
	atomic_int done;
} cas;

static void
cascade_step(void *ctx)
{
	int item = (int)(intptr_t)ctx;
	int k = cas.stage_of[item];
	if (sq_get_current_queue() != cas.q[k])
		atomic_fetch_add(&cas.skipped, 1);
	/* FIFO at every stage: items reach stage k in order 0, 1, 2, ... */
	if (item != cas.last_item[k] + 1)
		atomic_fetch_add(&cas.misordered, 1);
	cas.last_item[k] = item;
	if (k + 1 < STAGES) {
		cas.stage_of[item] = k + 1;
		sq_async_f(cas.q[k + 1], ctx, cascade_step);
	} else {
		atomic_fetch_add(&cas.done, 1);
	}
}

static void
test_cascade(void)
{
	char label[32];
	for (int k = 0; k < STAGES; k++) {
		snprintf(label, sizeof(label), "cascade.%d", k);
		cas.q[k] = sq_queue_create(label, NULL);
		cas.last_item[k] = -1;
	}
	uint64_t start = sqt_now_ns();
	for (int i = 0; i < ITEMS; i++)
		sq_async_f(cas.q[0], (void *)(intptr_t)i, cascade_step);
	CHECK(sqt_wait_int(&cas.done, ITEMS, WAIT_MS));
	double ms = sqt_ms_since(start);
	CHECK_EQ(atomic_load(&cas.misordered), 0);
	CHECK_EQ(atomic_load(&cas.skipped), 0);
	int all_through = 1;
	for (int i = 0; i < ITEMS; i++)
		if (cas.stage_of[i] != STAGES - 1)
			all_through = 0;
	CHECK(all_through);
	printf("cascade: %d items through %d queues in %.0f ms\n", ITEMS,
			STAGES, ms);
	for (int k = 0; k < STAGES; k++)
		sq_release(cas.q[k]);
}

/* ---- starfish ---------------------------------------------------------------- */

#define STAR_QUEUES SQT_SCALE(100, 40)
#define STAR_LAPS 10

struct star_msg {
	int from, to;
};

static struct {
	sq_queue_t q[STAR_QUEUES];
	struct star_msg *msgs;     /* STAR_QUEUES * STAR_QUEUES, diagonal unused */
	atomic_long pongs;
	long expected;
	atomic_long wrong_queue;
	sem_t lap_done;
} sf;

static void
star_pong(void *ctx)
{
	struct star_msg *m = ctx;
	if (sq_get_current_queue() != sf.q[m->from])
		atomic_fetch_add(&sf.wrong_queue, 1);
	if (atomic_fetch_add(&sf.pongs, 1) + 1 == sf.expected)
		sem_post(&sf.lap_done);
}

static void
star_ping(void *ctx)
{
	struct star_msg *m = ctx;
	if (sq_get_current_queue() != sf.q[m->to])
		atomic_fetch_add(&sf.wrong_queue, 1);
	sq_async_f(sf.q[m->from], m, star_pong);
}

static void
star_send_all(void *ctx)
{
	int from = (int)(intptr_t)ctx;
	for (int to = 0; to < STAR_QUEUES; to++) {
		if (to == from)
			continue;
		struct star_msg *m = &sf.msgs[from * STAR_QUEUES + to];
		m->from = from;
		m->to = to;
		sq_async_f(sf.q[to], m, star_ping);
	}
}

static void
test_starfish(void)
{
	char label[32];
	sem_init(&sf.lap_done, 0, 0);
	sf.msgs = calloc((size_t)STAR_QUEUES * STAR_QUEUES, sizeof(*sf.msgs));
	for (int i = 0; i < STAR_QUEUES; i++) {
		snprintf(label, sizeof(label), "starfish.%d", i);
		sf.q[i] = sq_queue_create(label, NULL);
	}
	sf.expected = (long)STAR_QUEUES * (STAR_QUEUES - 1);
	uint64_t start = sqt_now_ns();
	int laps_ok = 0;
	for (int lap = 0; lap < STAR_LAPS; lap++) {
		atomic_store(&sf.pongs, 0);
		for (int i = 0; i < STAR_QUEUES; i++)
			sq_async_f(sf.q[i], (void *)(intptr_t)i, star_send_all);
		if (!sqt_sem_wait_ms(&sf.lap_done, WAIT_MS))
			break;
		laps_ok++;
	}
	double ms = sqt_ms_since(start);
	CHECK_EQ(laps_ok, STAR_LAPS);
	CHECK_EQ(atomic_load(&sf.pongs), sf.expected);
	CHECK_EQ(atomic_load(&sf.wrong_queue), 0);
	printf("starfish: %d queues, %d laps, %.0f ns per message\n",
			STAR_QUEUES, STAR_LAPS,
			ms * 1e6 / ((double)sf.expected * 2 * STAR_LAPS));
	for (int i = 0; i < STAR_QUEUES; i++)
		sq_release(sf.q[i]);
	free(sf.msgs);
	sem_destroy(&sf.lap_done);
}

int
main(void)
{
	test_pingpong();
	test_cascade();
	test_starfish();
	return sqt_finish("test_queue_ports");
}
