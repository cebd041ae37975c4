/*
 * Intrusive lock-free LIFO and FIFO: order, emptiness, and 4 producers x 4
 * consumers with every item delivered exactly once.
 */
#include "sqtest.h"

#include <stddef.h>

struct item {
	int producer;
	int seq;
	sq_lifo_node_t lifo_link; /* not first: exercises `offset` */
	sq_fifo_node_t fifo_link;
	volatile int32_t delivered;
};

#define LIFO_OFF offsetof(struct item, lifo_link)
#define FIFO_OFF offsetof(struct item, fifo_link)

static void
test_single_thread_order(void)
{
	struct item items[5];
	sq_lifo_t lifo;
	sq_fifo_t fifo;
	sq_lifo_init(&lifo);
	sq_fifo_init(&fifo);

	CHECK(sq_lifo_empty(&lifo));
	CHECK(sq_fifo_empty(&fifo));
	CHECK(sq_lifo_pop(&lifo, LIFO_OFF) == NULL);
	CHECK(sq_fifo_dequeue(&fifo, FIFO_OFF) == NULL);

	for (int i = 0; i < 5; i++) {
		items[i].seq = i;
		CHECK_EQ(sq_lifo_push(&lifo, &items[i], LIFO_OFF), i == 0);
		CHECK_EQ(sq_fifo_enqueue(&fifo, &items[i], FIFO_OFF), i == 0);
	}
	CHECK(!sq_lifo_empty(&lifo));
	CHECK(!sq_fifo_empty(&fifo));

	bool lifo_order = true, fifo_order = true;
	for (int i = 0; i < 5; i++) {
		struct item *l = sq_lifo_pop(&lifo, LIFO_OFF);
		struct item *f = sq_fifo_dequeue(&fifo, FIFO_OFF);
		lifo_order &= l == &items[4 - i];
		fifo_order &= f == &items[i];
	}
	CHECK(lifo_order);
	CHECK(fifo_order);
	CHECK(sq_lifo_pop(&lifo, LIFO_OFF) == NULL);
	CHECK(sq_fifo_dequeue(&fifo, FIFO_OFF) == NULL);

	/* A static initialiser works for the LIFO. */
	static sq_lifo_t static_lifo = SQ_LIFO_INIT;
	CHECK(sq_lifo_empty(&static_lifo));
	sq_lifo_push(&static_lifo, &items[0], LIFO_OFF);
	CHECK(sq_lifo_pop(&static_lifo, LIFO_OFF) == &items[0]);
}

static void
test_pop_all(void)
{
	struct item items[3];
	sq_lifo_t lifo = SQ_LIFO_INIT;
	CHECK(sq_lifo_pop_all(&lifo) == NULL);
	for (int i = 0; i < 3; i++) {
		items[i].seq = i;
		sq_lifo_push(&lifo, &items[i], LIFO_OFF);
	}
	int expected = 2;
	bool newest_first = true;
	for (sq_lifo_node_t *n = sq_lifo_pop_all(&lifo); n; n = n->_sq_next) {
		struct item *it = (struct item *)((char *)n - LIFO_OFF);
		newest_first &= it->seq == expected--;
	}
	CHECK(newest_first);
	CHECK_EQ(expected, -1);
	CHECK(sq_lifo_empty(&lifo));
}

#define PRODUCERS 4
#define CONSUMERS 4
#define PER_PRODUCER 100000
#define TOTAL (PRODUCERS * PER_PRODUCER)

static struct item *pool;
static sq_lifo_t shared_lifo;
static sq_fifo_t shared_fifo;
static volatile int64_t consumed;
static volatile int32_t duplicates, order_violations;
static bool use_fifo;

static void *
producer(void *arg)
{
	int p = *(int *)arg;
	for (int s = 0; s < PER_PRODUCER; s++) {
		struct item *it = &pool[p * PER_PRODUCER + s];
		/* Plain writes handed to the consumer by the push itself. */
		it->producer = p;
		it->seq = s;
		if (use_fifo)
			sq_fifo_enqueue(&shared_fifo, it, FIFO_OFF);
		else
			sq_lifo_push(&shared_lifo, it, LIFO_OFF);
	}
	return NULL;
}

static void *
consumer(void *arg)
{
	/* The last sequence number this consumer saw from each producer. */
	int last[PRODUCERS];
	for (int p = 0; p < PRODUCERS; p++)
		last[p] = -1;
	while (sq_atomic_load64(&consumed) < TOTAL) {
		struct item *it = use_fifo
				? sq_fifo_dequeue(&shared_fifo, FIFO_OFF)
				: sq_lifo_pop(&shared_lifo, LIFO_OFF);
		if (it == NULL) {
			sched_yield();
			continue;
		}
		if (sq_atomic_inc32(&it->delivered) != 1)
			sq_atomic_inc32(&duplicates);
		if (use_fifo) {
			if (it->seq <= last[it->producer])
				sq_atomic_inc32(&order_violations);
			last[it->producer] = it->seq;
		}
		sq_atomic_inc64(&consumed);
	}
	return NULL;
}

static void *
role(void *arg)
{
	int index = *(int *)arg;
	if (index < PRODUCERS)
		return producer(arg);
	return consumer(arg);
}

static void
run_mpmc(bool fifo)
{
	int indices[PRODUCERS + CONSUMERS];
	pool = calloc(TOTAL, sizeof(*pool));
	for (int i = 0; i < PRODUCERS + CONSUMERS; i++)
		indices[i] = i;
	use_fifo = fifo;
	consumed = 0;
	duplicates = 0;
	order_violations = 0;
	sq_lifo_init(&shared_lifo);
	sq_fifo_init(&shared_fifo);

	sqt_run_threads(PRODUCERS + CONSUMERS, role, indices, sizeof(int));

	int missing = 0;
	for (int i = 0; i < TOTAL; i++)
		missing += pool[i].delivered != 1;
	CHECK_EQ(consumed, TOTAL);
	CHECK_EQ(missing, 0);
	CHECK_EQ(duplicates, 0);
	if (fifo)
		CHECK_EQ(order_violations, 0);
	CHECK(fifo ? sq_fifo_empty(&shared_fifo) : sq_lifo_empty(&shared_lifo));
	free(pool);
}

int
main(void)
{
	test_single_thread_order();
	test_pop_all();
	run_mpmc(false);
	run_mpmc(true);
	return sqt_finish("lifo_fifo");
}
