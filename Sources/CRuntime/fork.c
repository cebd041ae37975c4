/*
 * SwiftQueues — fork() support.
 *
 * Only the thread that called fork() exists in the child: the workers, the
 * pool monitor, the manager (event loop), the signal watcher and the I/O
 * threads are gone, and whatever they held (locks, queued jobs, the
 * libevent base and its epoll set, which the child shares with the parent)
 * must not be touched. The child handler, registered with pthread_atfork
 * when the library loads, gives the child a fresh runtime instead:
 *
 *   - every signal disposition the runtime installed goes back to the
 *     program's own (unless the program replaced ours in the meantime);
 *   - the pool, the event loop, the source tables, the I/O thread pool,
 *     the watchdog and the main queue's eventfd are reset to "never
 *     started"; the next call that needs them starts them, in the child,
 *     from scratch. Descriptors the runtime had open are closed where the
 *     runtime knows them (libevent's own are close-on-exec);
 *   - the process generation goes up, so sources and I/O channels made
 *     before fork() (their registrations and threads live in the parent)
 *     stop the process with a "SwiftQueues:" message when used, and
 *     sq_retain / sq_release on them do nothing.
 *
 * Nothing is done before fork() or in the parent: the child never reads
 * state another thread was changing, it resets it.
 */
#include "event_internal.h"
#include "trace_internal.h"
#include "introspect_internal.h"

#include <pthread.h>

uint32_t _sq_fork_generation = 1;

static void
_sq_atfork_child(void)
{
	/* Nothing is recorded in the child (the parent writes its trace). */
	_sq_trace_atfork_child();
	/* Signals first: from here on the child behaves as if the library
	 * were not there until it calls it. */
	_sq_signals_atfork_child();
	_sq_sources_atfork_child();
	_sq_loop_atfork_child();
	_sq_io_atfork_child();
	_sq_main_queue_atfork_child();
	_sq_pool_atfork_child();
	_sq_watchdog_atfork_child();
	_sq_introspect_atfork_child();
	/* Single-threaded now: a plain store. */
	_sq_fork_generation++;
}

__attribute__((constructor)) static void
_sq_fork_register(void)
{
	pthread_atfork(NULL, NULL, _sq_atfork_child);
}
