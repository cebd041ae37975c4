/*
 * A program built against the compatibility headers in a process that
 * also loads the system's libdispatch (as any process with Foundation
 * does): the program's dispatch_ calls are SwiftQueues' sq_ functions,
 * libdispatch's own dispatch_ symbols stay libdispatch's, and both
 * libraries run work side by side.
 */
#define _GNU_SOURCE
#include <dispatch/dispatch.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int passed, failed;
#define EXPECT(cond) do { \
	if (cond) passed++; \
	else { failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

/* libdispatch's calls, found by name as Foundation would bind them. */
typedef void *(*global_queue_fn)(long, unsigned long);
typedef void (*async_f_fn)(void *, void *, void (*)(void *));
typedef void *(*sema_create_fn)(long);
typedef long (*sema_signal_fn)(void *);
typedef long (*sema_wait_fn)(void *, uint64_t);

static sema_signal_fn system_signal;
static int system_ran, ours_ran;

static void
system_task(void *sema)
{
	system_ran = 1;
	system_signal(sema);
}

static void
our_task(void *sema)
{
	/* SwiftQueues knows the queue it runs: this is its task. */
	ours_ran = dispatch_get_current_queue() != NULL;
	dispatch_semaphore_signal((dispatch_semaphore_t)sema);
}

int
main(void)
{
	void *sym = dlsym(RTLD_DEFAULT, "dispatch_async_f");
	EXPECT(sym != NULL);                      /* libdispatch is loaded */
	EXPECT(sym != (void *)&dispatch_async_f);  /* ...and is not called */

	Dl_info info;
	EXPECT(dladdr((void *)&dispatch_async_f, &info) != 0 &&
			info.dli_sname != NULL &&
			strcmp(info.dli_sname, "sq_async_f") == 0);
	EXPECT(dladdr(sym, &info) != 0 && strstr(info.dli_fname, "libdispatch") != NULL);

	global_queue_fn system_global = (global_queue_fn)dlsym(RTLD_DEFAULT,
			"dispatch_get_global_queue");
	async_f_fn system_async_f = (async_f_fn)sym;
	sema_create_fn system_sema = (sema_create_fn)dlsym(RTLD_DEFAULT,
			"dispatch_semaphore_create");
	system_signal = (sema_signal_fn)dlsym(RTLD_DEFAULT, "dispatch_semaphore_signal");
	sema_wait_fn system_wait = (sema_wait_fn)dlsym(RTLD_DEFAULT,
			"dispatch_semaphore_wait");
	EXPECT(system_global && system_sema && system_signal && system_wait);
	if (failed)
		goto out;

	void *theirs = system_sema(0);
	dispatch_semaphore_t ours = dispatch_semaphore_create(0);
	system_async_f(system_global(0, 0), theirs, system_task);
	dispatch_async_f(dispatch_get_global_queue(0, 0), ours, our_task);
	EXPECT(system_wait(theirs, dispatch_time(DISPATCH_TIME_NOW, 10 * NSEC_PER_SEC)) == 0);
	EXPECT(dispatch_semaphore_wait(ours, dispatch_time(DISPATCH_TIME_NOW,
			10 * NSEC_PER_SEC)) == 0);
	EXPECT(system_ran == 1);
	EXPECT(ours_ran == 1);
	dispatch_release(ours);
out:
	printf("collision: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
