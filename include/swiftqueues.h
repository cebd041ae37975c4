/*!
 * \defgroup swiftqueues SwiftQueues
 * \brief Grand Central Dispatch rebuilt for Linux: the C API.
 *
 * The one header C programs include:
 * \code
 *     #include <swiftqueues.h>
 *     cc prog.c $(pkg-config --cflags --libs swiftqueues)
 * \endcode
 *
 * The API is libdispatch's, renamed dispatch_ -> sq_ and DISPATCH_ -> SQ_.
 * Every call has a function-pointer form (the _f suffix: a function and a
 * context pointer); the block forms (sq_async, sq_group_notify, ...) are
 * inline wrappers over them, declared when the compiler supports blocks
 * (clang -fblocks, with the Blocks runtime: -lBlocksRuntime).
 *
 * Misuse that libdispatch would crash on (a deadlocking sq_sync, an
 * unbalanced sq_group_leave, a release too many) stops the process with
 * one line on standard error, "SwiftQueues: <call>: <what>".
 *
 * Each family below has its own page; `man sq_async` (any public name)
 * opens the page of its family.
 */
#ifndef SWIFTQUEUES_H
#define SWIFTQUEUES_H

#include <swiftqueues/base.h>
#include <swiftqueues/time.h>
#include <swiftqueues/atomic.h>
#include <swiftqueues/spinlock.h>
#include <swiftqueues/lifo.h>
#include <swiftqueues/once.h>
#include <swiftqueues/benchmark.h>
#include <swiftqueues/object.h>
#include <swiftqueues/queue.h>
#include <swiftqueues/pool.h>
#include <swiftqueues/group.h>
#include <swiftqueues/semaphore.h>
#include <swiftqueues/workitem.h>
#include <swiftqueues/source.h>
#include <swiftqueues/data.h>
#include <swiftqueues/io.h>
#include <swiftqueues/executor.h>
#include <swiftqueues/trace.h>
#include <swiftqueues/introspect.h>
#include <swiftqueues/generic.h>

#endif /* SWIFTQUEUES_H */
