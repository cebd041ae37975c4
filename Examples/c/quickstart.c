/*
 * The C quick start: build with
 *     cc quickstart.c $(pkg-config --cflags --libs swiftqueues)
 * `make test` builds it against an installed copy to prove the C story.
 */
#include <swiftqueues.h>

#include <pthread.h>
#include <stdio.h>

static volatile int64_t hits;
static sq_spinlock_t lock = SQ_SPINLOCK_INIT;
static long guarded;
static sq_once_t once;

static void
setup(void *context)
{
	printf("set up once by %s\n", (const char *)context);
}

static void *
worker(void *arg)
{
	sq_once_f(&once, arg, setup);
	for (int i = 0; i < 100000; i++) {
		sq_atomic_inc64_relaxed(&hits);
		sq_spinlock_lock(&lock);
		guarded++;
		sq_spinlock_unlock(&lock);
	}
	return NULL;
}

int
main(void)
{
	pthread_t threads[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&threads[i], NULL, worker, "a worker thread");
	for (int i = 0; i < 4; i++)
		pthread_join(threads[i], NULL);
	printf("atomic hits %lld, guarded count %ld\n",
			(long long)sq_atomic_load64(&hits), guarded);
	printf("one second from now: %llu ns on the monotonic clock\n",
			(unsigned long long)sq_time(SQ_TIME_NOW, NSEC_PER_SEC));
	return hits == 400000 && guarded == 400000 ? 0 : 1;
}
