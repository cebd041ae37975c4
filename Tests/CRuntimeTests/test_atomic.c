/*
 * Atomic counters, compare-and-swap, bit operations, lock-free lazy
 * initialisation.
 */
#include "sqtest.h"

#define THREADS 4
#define INCREMENTS 1000000

static volatile int64_t counter64;
static volatile int64_t relaxed64;
static volatile int32_t counter32;

static void *
increment_worker(void *arg)
{
	for (int i = 0; i < INCREMENTS; i++) {
		sq_atomic_inc64(&counter64);
		sq_atomic_inc64_relaxed(&relaxed64);
		sq_atomic_add32(&counter32, 1);
	}
	return NULL;
}

static void
test_counters_add_up(void)
{
	sqt_run_threads(THREADS, increment_worker, NULL, 0);
	CHECK_EQ(sq_atomic_load64(&counter64), (int64_t)THREADS * INCREMENTS);
	CHECK_EQ(sq_atomic_load64(&relaxed64), (int64_t)THREADS * INCREMENTS);
	CHECK_EQ(sq_atomic_load32(&counter32), THREADS * INCREMENTS);
}

static void
test_return_values(void)
{
	volatile int64_t v = 10;
	CHECK_EQ(sq_atomic_inc64(&v), 11);
	CHECK_EQ(sq_atomic_dec64(&v), 10);
	CHECK_EQ(sq_atomic_add64(&v, -15), -5);
	CHECK_EQ(sq_atomic_add64_relaxed(&v, 5), 0);
	CHECK_EQ(sq_atomic_dec64_relaxed(&v), -1);
	sq_atomic_store64(&v, INT64_MAX - 1);
	CHECK_EQ(sq_atomic_inc64(&v), INT64_MAX);
	sq_atomic_store64_relaxed(&v, 7);
	CHECK_EQ(sq_atomic_load64_relaxed(&v), 7);

	volatile int32_t w = 0;
	CHECK_EQ(sq_atomic_dec32(&w), -1);
	CHECK_EQ(sq_atomic_inc32_relaxed(&w), 0);

	CHECK(sq_atomic_cas64(&v, 7, 8));
	CHECK_EQ(v, 8);
	CHECK(!sq_atomic_cas64(&v, 7, 9));
	CHECK_EQ(v, 8);
	CHECK(sq_atomic_cas32_relaxed(&w, 0, 42));
	CHECK(!sq_atomic_cas32(&w, 0, 43));
	CHECK_EQ(w, 42);
}

static void
test_bit_operations(void)
{
	volatile uint32_t bits = 0;
	CHECK_EQ(sq_atomic_or32(&bits, 0x0f), 0x0f);
	CHECK_EQ(sq_atomic_and32(&bits, 0x3c), 0x0c);
	CHECK_EQ(sq_atomic_xor32(&bits, 0xff), 0xf3);
	CHECK_EQ(sq_atomic_xor32_relaxed(&bits, 0xff), 0x0c);

	volatile uint64_t word = 0;
	CHECK(!sq_atomic_test_and_set_bit64(&word, 63));
	CHECK(sq_atomic_test_and_set_bit64(&word, 63));
	CHECK_EQ(word, (long long)(1ull << 63));
	CHECK(!sq_atomic_test_and_set_bit64_relaxed(&word, 0));
	CHECK(sq_atomic_test_and_clear_bit64(&word, 0));
	CHECK(!sq_atomic_test_and_clear_bit64(&word, 0));
	CHECK(sq_atomic_test_and_clear_bit64_relaxed(&word, 63));
	CHECK_EQ(word, 0);
	CHECK_EQ(sq_atomic_or64(&word, 1ull << 40), (long long)(1ull << 40));
	CHECK_EQ(sq_atomic_and64(&word, 0), 0);

	volatile uint32_t small = 0;
	CHECK(!sq_atomic_test_and_set_bit32(&small, 5));
	CHECK_EQ(small, 32);
	CHECK(sq_atomic_test_and_clear_bit32(&small, 5));
	CHECK_EQ(small, 0);
}

/* Every thread sets every bit; exactly one setter per bit sees it clear. */
static volatile uint64_t shared_bits;
static volatile int64_t first_setters;

static void *
bit_worker(void *arg)
{
	for (unsigned bit = 0; bit < 64; bit++) {
		if (!sq_atomic_test_and_set_bit64(&shared_bits, bit))
			sq_atomic_inc64(&first_setters);
	}
	return NULL;
}

static void
test_concurrent_bits(void)
{
	sqt_run_threads(THREADS, bit_worker, NULL, 0);
	CHECK_EQ(shared_bits, (long long)UINT64_MAX);
	CHECK_EQ(first_setters, 64);
}

/*
 * Lock-free lazy initialisation: each racer callocs a buffer and tries to
 * install it with a barrier CAS; exactly one wins, the losers free theirs,
 * and everybody returns the winner's buffer.
 */
#define RACERS 8
#define ROUNDS 300

static void *volatile shared_buffer;
static pthread_barrier_t start_line;
static volatile int64_t winners, losers_freed;
static void *seen[RACERS];

static void *
shared_buffer_get(void)
{
	void *buffer = sq_atomic_load_ptr(&shared_buffer);
	if (buffer == NULL) {
		void *fresh = calloc(1, 1024);
		if (sq_atomic_cas_ptr(&shared_buffer, NULL, fresh)) {
			sq_atomic_inc64(&winners);
		} else {
			free(fresh);
			sq_atomic_inc64(&losers_freed);
		}
		buffer = sq_atomic_load_ptr(&shared_buffer);
	}
	return buffer;
}

static void *
racer(void *arg)
{
	int index = *(int *)arg;
	pthread_barrier_wait(&start_line);
	seen[index] = shared_buffer_get();
	return NULL;
}

static void
test_lazy_init_race(void)
{
	int indices[RACERS];
	bool all_same = true, one_winner = true;
	for (int i = 0; i < RACERS; i++)
		indices[i] = i;
	pthread_barrier_init(&start_line, NULL, RACERS);
	for (int round = 0; round < ROUNDS; round++) {
		shared_buffer = NULL;
		winners = 0;
		losers_freed = 0;
		sqt_run_threads(RACERS, racer, indices, sizeof(int));
		for (int i = 0; i < RACERS; i++)
			all_same &= seen[i] == shared_buffer && seen[i] != NULL;
		/* Racers that came late saw the buffer and allocated nothing. */
		one_winner &= winners == 1 && losers_freed <= RACERS - 1;
		free(shared_buffer);
	}
	pthread_barrier_destroy(&start_line);
	CHECK(all_same);
	CHECK(one_winner);
}

static void
test_pointer_operations(void)
{
	int a, b;
	void *volatile p = NULL;
	CHECK(sq_atomic_cas_ptr_relaxed(&p, NULL, &a));
	CHECK(!sq_atomic_cas_ptr(&p, NULL, &b));
	CHECK(sq_atomic_exchange_ptr(&p, &b) == &a);
	sq_atomic_barrier();
	CHECK(sq_atomic_load_ptr(&p) == &b);
	sq_atomic_store_ptr(&p, NULL);
	CHECK(p == NULL);
}

int
main(void)
{
	test_return_values();
	test_bit_operations();
	test_pointer_operations();
	test_counters_add_up();
	test_concurrent_bits();
	test_lazy_init_race();
	return sqt_finish("atomic");
}
