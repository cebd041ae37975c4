/*
 * SwiftQueues — Grand Central Dispatch rebuilt for Linux.
 *
 * The one header C programs include:
 *     #include <swiftqueues.h>
 *     cc prog.c $(pkg-config --cflags --libs swiftqueues)
 *
 * The API is libdispatch's, renamed dispatch_ -> sq_ and DISPATCH_ -> SQ_.
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
