/*
 * The few names of libdispatch's private interface its test programs use
 * (<dispatch/private.h>, which libdispatch's own test build takes from its
 * source tree): the overcommit flag and dispatch_queue_set_width. Over the
 * compatibility headers the flag is SQ_QUEUE_OVERCOMMIT; SwiftQueues has
 * no width-limited queues, so dispatch_queue_set_width accepts the widths
 * a queue already has (1 on a serial queue) and reports a failed check for
 * any other. Built against libdispatch, both are libdispatch's own.
 */
#ifndef SQ_COMPAT_DISPATCH_PRIVATE_H
#define SQ_COMPAT_DISPATCH_PRIVATE_H

#include <dispatch/dispatch.h>

#ifdef SWIFTQUEUES_COMPAT_DISPATCH_H
#define DISPATCH_QUEUE_OVERCOMMIT SQ_QUEUE_OVERCOMMIT
#define dispatch_queue_set_width(queue, width) \
	_sq_compat_queue_set_width((queue), (width))
#ifdef __cplusplus
extern "C" {
#endif
void _sq_compat_queue_set_width(dispatch_queue_t queue, long width);
#ifdef __cplusplus
}
#endif
#else
#ifndef DISPATCH_QUEUE_OVERCOMMIT
#define DISPATCH_QUEUE_OVERCOMMIT 0x2ull
#endif
#ifdef __cplusplus
extern "C" {
#endif
void dispatch_queue_set_width(dispatch_queue_t queue, long width);
#ifdef __cplusplus
}
#endif
#endif

#endif /* SQ_COMPAT_DISPATCH_PRIVATE_H */
