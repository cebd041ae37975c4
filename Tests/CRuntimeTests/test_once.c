/*
 * sq_once_f: exactly once under a race, waiters see the result, misuse is
 * reported (many callers, one "Executed 1 time(s)").
 */
#include "sqtest.h"

#define RACERS 8

static sq_once_t once_predicate;
static volatile int32_t executions;
static volatile int32_t value_seen_wrong;
static int payload; /* written by the once function, read after sq_once_f */
static pthread_barrier_t start_line;

static void
slow_initialiser(void *context)
{
	sq_atomic_inc32(&executions);
	struct timespec ms = { 0, 20 * 1000000 };
	nanosleep(&ms, NULL); /* make the others wait for us */
	payload = *(int *)context;
}

static void *
racer(void *arg)
{
	static int answer = 42;
	pthread_barrier_wait(&start_line);
	sq_once_f(&once_predicate, &answer, slow_initialiser);
	if (payload != 42)
		sq_atomic_inc32(&value_seen_wrong);
	return NULL;
}

static void
test_race(void)
{
	for (int round = 0; round < 20; round++) {
		once_predicate = 0;
		executions = 0;
		payload = 0;
		pthread_barrier_init(&start_line, NULL, RACERS);
		sqt_run_threads(RACERS, racer, NULL, 0);
		pthread_barrier_destroy(&start_line);
		if (executions != 1)
			break;
	}
	printf("Executed %d time(s)\n", (int)executions);
	CHECK_EQ(executions, 1);
	CHECK_EQ(value_seen_wrong, 0);
}

static int counter;

static void
count_call(void *context)
{
	counter++;
}

static void
test_fast_path(void)
{
	static sq_once_t p;
	for (int i = 0; i < 1000; i++)
		sq_once_f(&p, NULL, count_call);
	CHECK_EQ(counter, 1);
}

static void
null_function(void *unused)
{
	static sq_once_t p;
	sq_once_f(&p, NULL, (sq_function_t)unused);
}

static sq_once_t recursive_predicate;

static void
recurse(void *context)
{
	sq_once_f(&recursive_predicate, NULL, recurse);
}

static void
recursive_once(void *unused)
{
	sq_once_f(&recursive_predicate, NULL, recurse);
}

int
main(void)
{
	test_fast_path();
	test_race();
	CHECK_CRASH(null_function, NULL,
			"SwiftQueues: sq_once_f: function pointer is NULL");
	CHECK_CRASH(recursive_once, NULL,
			"SwiftQueues: sq_once_f: recursive call");
	return sqt_finish("once");
}
