/*
 * A worker's ring (pool_internal.h) under its owner and thieves at once:
 * the owner pushes one or two entries at a time and takes them back from
 * the newest end (_sq_ring_pop_tail, Chase-Lev's pop), while three
 * thieves take from the oldest end (_sq_ring_pop) all along. Every entry
 * must be taken exactly once, and the ring must end empty with its head
 * at its tail.
 *
 * The owner's take of the last entry lowers the tail below the head for a
 * moment when a thief took that entry first; a thief that then read the
 * slot at the head took an entry already taken, a lap of the ring ago
 * (the same job ran twice: a group left more times than entered).
 */
#include "sqtest.h"

#include "../../Sources/CRuntime/pool_internal.h"

#include <pthread.h>
#include <stdatomic.h>

#define THIEVES 3
#define ROUNDS_MAX 4000000u
#define SECONDS 2

static struct sq_ring_s ring;
static atomic_uchar *taken; /* per entry id: how often it was taken */
static atomic_bool stop;
static atomic_long stale;   /* ids taken that were not pushed yet */
static atomic_uint pushed;  /* ids 1..pushed are in the ring or taken */

static void
take(uintptr_t e)
{
	uint32_t id = (uint32_t)(e >> 3);
	if (id == 0 || id > atomic_load(&pushed)) {
		atomic_fetch_add(&stale, 1);
		return;
	}
	atomic_fetch_add(&taken[id], 1);
}

static void *
thief(void *arg)
{
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uintptr_t e = _sq_ring_pop(&ring);
		if (e != 0)
			take(e);
	}
	return NULL;
}

int
main(void)
{
	taken = calloc(ROUNDS_MAX * 2 + 2, sizeof(*taken));
	if (taken == NULL)
		return 2;
	pthread_t t[THIEVES];
	for (int i = 0; i < THIEVES; i++)
		pthread_create(&t[i], NULL, thief, NULL);
	uint64_t end = sqt_now_ns() + SECONDS * 1000000000ull;
	uint32_t id = 0, rounds = 0;
	long refused = 0; /* pushes refused: a ring that looks full */
	while (rounds < ROUNDS_MAX && refused == 0 && (rounds % 1024 != 0 ||
			sqt_now_ns() < end)) {
		int n = 1 + (int)(rounds % 3 == 0);
		for (int k = 0; k < n && refused == 0; k++) {
			atomic_store(&pushed, id + 1);
			if (_sq_ring_push(&ring, (uintptr_t)(id + 1) << 3))
				id++;
			else
				refused++;
		}
		uintptr_t e;
		while ((e = _sq_ring_pop_tail(&ring, 0)) != 0)
			take(e);
		rounds++;
	}
	atomic_store(&stop, true);
	for (int i = 0; i < THIEVES; i++)
		pthread_join(t[i], NULL);
	/* What a thief may have left: nothing, the owner emptied it. */
	CHECK_EQ(atomic_load(&ring.head), atomic_load(&ring.tail));
	long twice = 0, never = 0;
	for (uint32_t i = 1; i <= id; i++) {
		unsigned char n = atomic_load(&taken[i]);
		twice += n > 1;
		never += n == 0;
	}
	printf("ring: %u rounds, %u entries; taken twice %ld, never %ld, "
			"taken before they were pushed %ld, pushes refused "
			"%ld\n", rounds, id, twice, never,
			atomic_load(&stale), refused);
	CHECK_EQ(refused, 0);
	CHECK_EQ(twice, 0);
	CHECK_EQ(never, 0);
	CHECK_EQ(atomic_load(&stale), 0);
	free(taken);
	return sqt_finish("test_ring");
}
