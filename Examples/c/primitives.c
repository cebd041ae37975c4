/*
 * Low-level primitives in SwiftQueues:
 * dispatch_once, a CAS-initialised shared buffer, atomic counters and bits,
 * a spin lock, the lock-free LIFO and FIFO, and dispatch_benchmark.
 */
#include <swiftqueues.h>

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- once: four threads, three calls each, "Executed 1 time(s)" ---- */

static sq_once_t once_token;
static int executions;

static void
execute_once(void *context)
{
	executions++;
}

/* ---- lock-free lazy initialisation: the first compare-and-swap wins ---- */

static void *volatile buffer;

static void *
shared_buffer(void)
{
	void *b = sq_atomic_load_ptr(&buffer);
	if (b == NULL) {
		void *fresh = calloc(1, 1024);
		if (!sq_atomic_cas_ptr(&buffer, NULL, fresh))
			free(fresh); /* lost the race: use the winner's */
		b = sq_atomic_load_ptr(&buffer);
	}
	return b;
}

/* ---- counters and a spin lock shared by four threads ---- */

static volatile int64_t statistics; /* relaxed: only its value matters */
static sq_spinlock_t lock = SQ_SPINLOCK_INIT;
static long guarded;

static void *
worker(void *arg)
{
	for (int i = 0; i < 3; i++)
		sq_once_f(&once_token, NULL, execute_once);
	(void)shared_buffer();
	for (int i = 0; i < 250000; i++) {
		sq_atomic_inc64_relaxed(&statistics);
		sq_spinlock_lock(&lock);
		guarded++;
		sq_spinlock_unlock(&lock);
	}
	return NULL;
}

/* ---- intrusive LIFO and FIFO ---- */

struct job {
	int number;
	sq_lifo_node_t lifo_link;
	sq_fifo_node_t fifo_link;
};

/* ---- sq_benchmark_f: the mean cost of filling a 1,000-int array ---- */

static void
append_thousand(void *context)
{
	int *array = malloc(1000 * sizeof(int));
	for (int i = 0; i < 1000; i++)
		array[i] = i;
	*(volatile int *)context = array[999];
	free(array);
}

int
main(void)
{
	pthread_t threads[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&threads[i], NULL, worker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(threads[i], NULL);
	printf("Executed %d time(s)\n", executions);
	printf("shared buffer %p, installed once by compare-and-swap\n",
			shared_buffer());
	printf("statistics counter %lld, spin-locked counter %ld\n",
			(long long)statistics, guarded);

	volatile uint32_t flags = 0;
	sq_atomic_or32(&flags, 0x5);
	bool was_set = sq_atomic_test_and_set_bit32(&flags, 1);
	printf("flags 0x%x (bit 1 was %s)\n", (unsigned)flags,
			was_set ? "set" : "clear");

	struct job jobs[3] = { { .number = 1 }, { .number = 2 }, { .number = 3 } };
	sq_lifo_t lifo = SQ_LIFO_INIT;
	sq_fifo_t fifo;
	sq_fifo_init(&fifo);
	for (int i = 0; i < 3; i++) {
		sq_lifo_push(&lifo, &jobs[i], offsetof(struct job, lifo_link));
		sq_fifo_enqueue(&fifo, &jobs[i], offsetof(struct job, fifo_link));
	}
	printf("LIFO pops:");
	struct job *j;
	while ((j = sq_lifo_pop(&lifo, offsetof(struct job, lifo_link))))
		printf(" %d", j->number);
	printf("\nFIFO dequeues:");
	while ((j = sq_fifo_dequeue(&fifo, offsetof(struct job, fifo_link))))
		printf(" %d", j->number);
	printf("\n");

	int sink;
	uint64_t ns = sq_benchmark_f(10000, &sink, append_thousand);
	printf("fill a 1000-int array: %llu ns (%.1f ns per element)\n",
			(unsigned long long)ns, ns / 1000.0);
	free(buffer);
	return 0;
}
