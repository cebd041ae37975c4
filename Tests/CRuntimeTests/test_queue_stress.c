/*
 * Stress: 1,000 queues (900 serial, 100 concurrent) and 2,000,000 tasks
 * (200,000 under TSan / ASan) from 4 producer threads while a chaos thread
 * suspends, resumes and retargets queues at random (among 4 serial and 2
 * concurrent hub queues and the default global queue). Nothing is lost or
 * run twice (a per-task counter, all == 1, and a total), a serial queue
 * never runs two tasks at once and keeps each producer's order, and every
 * queue's finalizer runs once after the final release.
 */
#include "queue_helpers.h"

#define LEAVES 1000
#define CONCURRENT_LEAVES 100 /* leaves [0, 100) are concurrent */
#define SERIAL_HUBS 4
#define CONCURRENT_HUBS 2
#define PRODUCERS 4
#define TASKS SQT_SCALE(2000000, 200000)
#define MAX_SUSPENDED 50

struct task_info {
	uint32_t leaf;
	uint16_t producer;
	uint32_t seq; /* per (leaf, producer) */
};

struct leaf {
	sq_queue_t q;
	atomic_int inside;
	int32_t last[PRODUCERS]; /* touched only by the leaf's tasks (serial) */
	int suspended;           /* chaos thread only */
};

static struct {
	struct leaf leaves[LEAVES];
	sq_queue_t hubs[SERIAL_HUBS + CONCURRENT_HUBS];
	int hub_suspended[SERIAL_HUBS + CONCURRENT_HUBS];
	struct task_info *info;
	atomic_uchar *hits;
	atomic_long done;
	atomic_long overlaps;
	atomic_long order_errors;
	atomic_bool producers_done;
	atomic_long suspends, retargets;
	atomic_int finalized;
} st;

static void
stress_task(void *ctx)
{
	uint32_t id = (uint32_t)(uintptr_t)ctx;
	const struct task_info *t = &st.info[id];
	struct leaf *l = &st.leaves[t->leaf];
	bool serial = t->leaf >= CONCURRENT_LEAVES;
	if (serial) {
		if (atomic_fetch_add_explicit(&l->inside, 1,
				memory_order_relaxed) != 0)
			atomic_fetch_add(&st.overlaps, 1);
		if ((int32_t)t->seq != l->last[t->producer] + 1)
			atomic_fetch_add(&st.order_errors, 1);
		l->last[t->producer] = (int32_t)t->seq;
	}
	atomic_fetch_add_explicit(&st.hits[id], 1, memory_order_relaxed);
	if (serial)
		atomic_fetch_sub_explicit(&l->inside, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&st.done, 1, memory_order_release);
}

/* xorshift, one state per thread */
static uint32_t
rnd(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static void *
producer(void *arg)
{
	uint16_t p = (uint16_t)(uintptr_t)arg;
	uint32_t seed = 0x9e3779b9u * (p + 1);
	static uint32_t seqs[PRODUCERS][LEAVES]; /* row p: this thread only */
	uint32_t first = (uint32_t)((uint64_t)TASKS * p / PRODUCERS);
	uint32_t last = (uint32_t)((uint64_t)TASKS * (p + 1) / PRODUCERS);
	for (uint32_t id = first; id < last; id++) {
		uint32_t leaf = rnd(&seed) % LEAVES;
		st.info[id].leaf = leaf;
		st.info[id].producer = p;
		st.info[id].seq = seqs[p][leaf]++;
		sq_async_f(st.leaves[leaf].q, (void *)(uintptr_t)id,
				stress_task);
	}
	return NULL;
}

static sq_queue_t
random_target(uint32_t *seed)
{
	uint32_t k = rnd(seed) % (SERIAL_HUBS + CONCURRENT_HUBS + 1);
	return k < SERIAL_HUBS + CONCURRENT_HUBS ? st.hubs[k] : NULL;
}

static void *
chaos(void *arg)
{
	uint32_t seed = 12345;
	int suspended = 0;
	uint64_t give_up = sqt_now_ns() + 60000000000ull;
	while ((!atomic_load(&st.producers_done) ||
			atomic_load(&st.done) < (long)TASKS * 9 / 10) &&
			sqt_now_ns() < give_up) {
		for (int burst = 0; burst < 8; burst++) {
			struct leaf *l = &st.leaves[rnd(&seed) % LEAVES];
			switch (rnd(&seed) % 8) {
			case 0:
			case 1:
				if (!l->suspended && suspended < MAX_SUSPENDED) {
					sq_suspend(l->q);
					l->suspended = 1;
					suspended++;
					atomic_fetch_add(&st.suspends, 1);
				}
				break;
			case 2:
			case 3:
				if (l->suspended) {
					sq_resume(l->q);
					l->suspended = 0;
					suspended--;
				}
				break;
			case 4:
			case 5:
				sq_set_target_queue(l->q, random_target(&seed));
				atomic_fetch_add(&st.retargets, 1);
				break;
			case 6: {
				/* a hub, suspended and resumed a little later */
				int h = (int)(rnd(&seed) %
						(SERIAL_HUBS + CONCURRENT_HUBS));
				if (st.hub_suspended[h]) {
					sq_resume(st.hubs[h]);
					st.hub_suspended[h] = 0;
				} else {
					sq_suspend(st.hubs[h]);
					st.hub_suspended[h] = 1;
				}
				break;
			}
			default:
				/* suspend twice, resume twice: counted */
				sq_suspend(l->q);
				sq_suspend(l->q);
				sq_resume(l->q);
				sq_resume(l->q);
				break;
			}
		}
		sqt_sleep_us(20);
	}
	/* Let everything run. */
	for (int i = 0; i < LEAVES; i++)
		if (st.leaves[i].suspended) {
			sq_resume(st.leaves[i].q);
			st.leaves[i].suspended = 0;
		}
	for (int h = 0; h < SERIAL_HUBS + CONCURRENT_HUBS; h++)
		if (st.hub_suspended[h]) {
			sq_resume(st.hubs[h]);
			st.hub_suspended[h] = 0;
		}
	return NULL;
}

static void
leaf_finalizer(void *ctx)
{
	atomic_fetch_add(&st.finalized, 1);
}

int
main(void)
{
	uint64_t start = sqt_now_ns();
	st.info = calloc(TASKS, sizeof(*st.info));
	st.hits = calloc(TASKS, sizeof(*st.hits));
	if (st.info == NULL || st.hits == NULL) {
		perror("calloc");
		return 2;
	}
	char label[64];
	for (int h = 0; h < SERIAL_HUBS + CONCURRENT_HUBS; h++) {
		snprintf(label, sizeof(label), "stress.hub.%d", h);
		st.hubs[h] = sq_queue_create(label, h < SERIAL_HUBS ? NULL
				: SQ_QUEUE_CONCURRENT);
	}
	uint32_t seed = 777;
	for (int i = 0; i < LEAVES; i++) {
		snprintf(label, sizeof(label), "stress.leaf.%d", i);
		struct leaf *l = &st.leaves[i];
		l->q = sq_queue_create_with_target(label,
				i < CONCURRENT_LEAVES ? SQ_QUEUE_CONCURRENT : NULL,
				random_target(&seed));
		for (int p = 0; p < PRODUCERS; p++)
			l->last[p] = -1;
		sq_set_context(l->q, l);
		sq_set_finalizer_f(l->q, leaf_finalizer);
	}

	pthread_t producers[PRODUCERS], chaos_thread;
	pthread_create(&chaos_thread, NULL, chaos, NULL);
	for (int p = 0; p < PRODUCERS; p++)
		pthread_create(&producers[p], NULL, producer,
				(void *)(uintptr_t)p);
	for (int p = 0; p < PRODUCERS; p++)
		pthread_join(producers[p], NULL);
	atomic_store(&st.producers_done, true);
	double submit_ms = sqt_ms_since(start);
	pthread_join(chaos_thread, NULL);

	bool finished = sqt_wait_atleast(&st.done, TASKS, 60000);
	CHECK(finished);
	double run_ms = sqt_ms_since(start);
	sqt_sleep_ms(20); /* a task run twice would show up here */
	CHECK_EQ(atomic_load(&st.done), TASKS);
	long not_once = 0;
	for (long i = 0; i < TASKS; i++)
		if (atomic_load_explicit(&st.hits[i], memory_order_relaxed) != 1)
			not_once++;
	CHECK_EQ(not_once, 0);
	CHECK_EQ(atomic_load(&st.overlaps), 0);
	CHECK_EQ(atomic_load(&st.order_errors), 0);
	printf("stress: %d tasks on %d queues, %ld suspends, %ld retargets: "
			"submitted in %.0f ms, all ran in %.0f ms\n", TASKS,
			LEAVES, atomic_load(&st.suspends),
			atomic_load(&st.retargets), submit_ms, run_ms);

	for (int i = 0; i < LEAVES; i++)
		sq_release(st.leaves[i].q);
	CHECK(sqt_wait_int(&st.finalized, LEAVES, 20000));
	for (int h = 0; h < SERIAL_HUBS + CONCURRENT_HUBS; h++)
		sq_release(st.hubs[h]);
	sqt_sleep_ms(20);
	CHECK_EQ(atomic_load(&st.finalized), LEAVES);
	free(st.info);
	free(st.hits);
	return sqt_finish("test_queue_stress");
}
