/*
 * Wake-ups in the pool: two serial queues whose tasks wait for each other,
 * round after round, in a fresh process (only the pool's own workers, as a
 * program starts). The second task must reach a worker while the first
 * blocks, so a lost wake-up shows as a round that stalls.
 *
 * This found one (since fixed): a worker that stopped searching and then
 * saw work ran a job as a plain worker, while submitters had counted on it
 * as a searcher to wake the next worker (about 1 round in 400 with a short
 * idle spin). test_pool_matrix.c now covers it at every pool width, with
 * the safety net off. Some rounds first flood the global queue, so workers
 * are in every state when the pair arrives.
 */
#include "queue_helpers.h"

static void
pair_nop(void *arg)
{
}

static void
test_waiting_pairs_never_stall(void)
{
	int rounds = (SQT_TSAN || SQT_ASAN) ? 2000 : 20000, stalled = 0;
	uint64_t t0 = sqt_now_ns();
	for (int i = 0; i < rounds; i++) {
		struct handshake r;
		sem_init(&r.a_to_b, 0, 0);
		sem_init(&r.b_to_a, 0, 0);
		sem_init(&r.done, 0, 0);
		atomic_init(&r.ok, 0);
		sq_queue_t qa = sq_queue_create("pair.a", NULL);
		sq_queue_t qb = sq_queue_create("pair.b", NULL);
		if (i % 3 == 0)
			for (int k = 0; k < 50; k++)
				sq_async_f(sq_get_global_queue(0, 0), NULL,
						pair_nop);
		sq_async_f(qa, &r, handshake_a);
		sq_async_f(qb, &r, handshake_b);
		bool both = sqt_sem_wait_ms(&r.done, 10000) &&
				sqt_sem_wait_ms(&r.done, 10000);
		if (!both || atomic_load(&r.ok) != 2)
			stalled++;
		sq_release(qa);
		sq_release(qb);
		sem_destroy(&r.a_to_b);
		sem_destroy(&r.b_to_a);
		sem_destroy(&r.done);
		if (stalled >= 3)
			break; /* enough to fail; each stall costs 5 s */
	}
	CHECK_EQ(stalled, 0);
	printf("waiting pairs: %d rounds in %.0f ms, %d stalled\n", rounds,
			(double)(sqt_now_ns() - t0) / 1e6, stalled);
}

int
main(void)
{
	test_waiting_pairs_never_stall();
	return sqt_finish("test_queue_wakeups");
}
