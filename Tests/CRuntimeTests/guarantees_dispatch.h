/*
 * The guarantee checker on the toolchain's libdispatch: the sq_* names the
 * checker uses, mapped onto dispatch_* (SwiftQueues' C API is
 * libdispatch's, renamed). Built with clang -fblocks (`make
 * test-guarantees-dispatch`): the calls that take a function in
 * SwiftQueues and only a block in libdispatch's public header (work items,
 * channels, sq_read / sq_write, data walks) wrap the function in a block.
 * The main queue is drained through the two calls Foundation's run loop
 * uses on Linux.
 */
#ifndef SQTEST_GUARANTEES_DISPATCH_H
#define SQTEST_GUARANTEES_DISPATCH_H

#include <dispatch/dispatch.h>
#include <poll.h>
#include <stdbool.h>

#define GQ_BACKEND "libdispatch"
#define GQ_HAS_WIDTH 0
#define GQ_CANCEL_AT_ONCE 0
#define GQ_CLEANUP_AFTER_HANDLERS 0

typedef dispatch_queue_t sq_queue_t;
typedef dispatch_group_t sq_group_t;
typedef dispatch_source_t sq_source_t;
typedef dispatch_source_type_t sq_source_type_t;
typedef dispatch_io_t sq_io_t;
typedef dispatch_data_t sq_data_t;
typedef dispatch_block_t sq_workitem_t;
typedef dispatch_time_t sq_time_t;
typedef void (*sq_function_t)(void *);
typedef void (*sq_io_handler_function_t)(void *, bool, dispatch_data_t, int);
typedef void (*sq_io_cleanup_function_t)(void *, int);
typedef bool (*sq_data_applier_function_t)(void *, dispatch_data_t, size_t,
		const void *, size_t);

/* ---- objects, queues, groups, time ------------------------------------------ */

#define sq_retain dispatch_retain
#define sq_release dispatch_release
#define sq_set_context dispatch_set_context
#define sq_suspend dispatch_suspend
#define sq_resume dispatch_resume
#define sq_activate dispatch_activate
#define sq_set_target_queue dispatch_set_target_queue

#define SQ_QUEUE_SERIAL DISPATCH_QUEUE_SERIAL
#define SQ_QUEUE_CONCURRENT DISPATCH_QUEUE_CONCURRENT
#define SQ_QUEUE_SERIAL_INACTIVE \
	dispatch_queue_attr_make_initially_inactive(DISPATCH_QUEUE_SERIAL)
#define SQ_QUEUE_CONCURRENT_INACTIVE \
	dispatch_queue_attr_make_initially_inactive(DISPATCH_QUEUE_CONCURRENT)
#define SQ_QUEUE_PRIORITY_HIGH DISPATCH_QUEUE_PRIORITY_HIGH
#define SQ_QUEUE_PRIORITY_DEFAULT DISPATCH_QUEUE_PRIORITY_DEFAULT
#define SQ_QUEUE_PRIORITY_LOW DISPATCH_QUEUE_PRIORITY_LOW
#define SQ_QUEUE_PRIORITY_BACKGROUND DISPATCH_QUEUE_PRIORITY_BACKGROUND

#define sq_queue_create dispatch_queue_create
#define sq_queue_create_with_target dispatch_queue_create_with_target
#define sq_get_global_queue dispatch_get_global_queue
#define sq_get_main_queue dispatch_get_main_queue
#define sq_async_f dispatch_async_f
#define sq_sync_f dispatch_sync_f
#define sq_barrier_async_f dispatch_barrier_async_f
#define sq_barrier_sync_f dispatch_barrier_sync_f
#define sq_apply_f dispatch_apply_f
#define sq_after_f dispatch_after_f

#define sq_group_create dispatch_group_create
#define sq_group_async_f dispatch_group_async_f
#define sq_group_notify_f dispatch_group_notify_f
#define sq_group_enter dispatch_group_enter
#define sq_group_leave dispatch_group_leave
#define sq_group_wait dispatch_group_wait

#define SQ_TIME_NOW DISPATCH_TIME_NOW
#define SQ_TIME_FOREVER DISPATCH_TIME_FOREVER
#define sq_time dispatch_time

/* ---- QoS classes (the precedence family) --------------------------------------- */

/* libdispatch on Linux has no <sys/qos.h>: the classes are the same
 * numbers (QOS_CLASS_*), and there is no qos_class_self(). */
typedef dispatch_queue_attr_t sq_queue_attr_t;
typedef unsigned int sq_qos_class_t;
#define SQ_QOS_CLASS_USER_INTERACTIVE 0x21u
#define SQ_QOS_CLASS_USER_INITIATED 0x19u
#define SQ_QOS_CLASS_DEFAULT 0x15u
#define SQ_QOS_CLASS_UTILITY 0x11u
#define SQ_QOS_CLASS_BACKGROUND 0x09u
#define sq_queue_attr_make_with_qos_class dispatch_queue_attr_make_with_qos_class
#define GQ_HAS_QOS_SELF 0

/*
 * libdispatch on Linux keeps a pool of threads per QoS class (as many as
 * there are CPUs each) and leaves the choice between classes to the
 * kernel's scheduler: with the lower classes' threads busy, their work
 * goes on starting beside higher work, hundreds of tasks in a precedence
 * program's window (guarantees_priority.h). The family runs only when
 * SQT_OPS names it ("priority"), and then fails: a finding, not a
 * regression to hold `make test-guarantees-dispatch` to.
 */
#define GQ_PRIO_SKIP 1
#define GQ_PRIO_SKIP_WHY "libdispatch on Linux has a thread pool per QoS " \
	"class and no precedence between them: lower work goes on starting " \
	"while higher work waits"

/* ---- semaphores (the liveness family) ---------------------------------------- */

typedef dispatch_semaphore_t sq_semaphore_t;
#define sq_semaphore_create dispatch_semaphore_create
#define sq_semaphore_wait dispatch_semaphore_wait
#define sq_semaphore_signal dispatch_semaphore_signal

/* ---- work items: dispatch blocks ------------------------------------------- */

#define SQ_WORKITEM_BARRIER DISPATCH_BLOCK_BARRIER

static inline sq_workitem_t
sq_workitem_create_f(unsigned long flags, void *ctx, sq_function_t fn)
{
	return dispatch_block_create((dispatch_block_flags_t)flags, ^{
		fn(ctx);
	});
}

#define sq_async_workitem dispatch_async
#define sq_workitem_cancel dispatch_block_cancel
#define sq_workitem_wait dispatch_block_wait
#define sq_after_workitem dispatch_after

/* Runs the block itself (dispatch_block_perform would run a new block
 * object, which the item's wait and notify do not follow). */
static inline void
sq_workitem_perform(sq_workitem_t item)
{
	item();
}

static inline void
sq_workitem_notify_f(sq_workitem_t item, sq_queue_t q, void *ctx,
		sq_function_t fn)
{
	dispatch_block_notify(item, q, ^{
		fn(ctx);
	});
}

/* Blocks are not dispatch objects: the Blocks runtime counts them. */
extern void *_Block_copy(const void *block);
extern void _Block_release(const void *block);
#define gq_item_retain(b) ((void)_Block_copy(b))
#define gq_item_release(b) _Block_release(b)

/* ---- sources ------------------------------------------------------------------ */

#define SQ_SOURCE_TYPE_TIMER DISPATCH_SOURCE_TYPE_TIMER
#define SQ_SOURCE_TYPE_DATA_ADD DISPATCH_SOURCE_TYPE_DATA_ADD
#define SQ_SOURCE_TYPE_DATA_OR DISPATCH_SOURCE_TYPE_DATA_OR
#define SQ_SOURCE_TYPE_DATA_REPLACE DISPATCH_SOURCE_TYPE_DATA_REPLACE
#define SQ_TIMER_STRICT DISPATCH_TIMER_STRICT

/* libdispatch refuses a mask on data sources (SwiftQueues limits an OR
 * source's bits to it: the checker passes all bits). */
static inline sq_source_t
sq_source_create(sq_source_type_t type, uintptr_t handle, uintptr_t mask,
		sq_queue_t q)
{
	if (type == DISPATCH_SOURCE_TYPE_DATA_ADD ||
			type == DISPATCH_SOURCE_TYPE_DATA_OR ||
			type == DISPATCH_SOURCE_TYPE_DATA_REPLACE)
		mask = 0;
	return dispatch_source_create(type, handle, mask, q);
}

#define sq_source_set_event_handler_f dispatch_source_set_event_handler_f
#define sq_source_set_cancel_handler_f dispatch_source_set_cancel_handler_f
#define sq_source_set_registration_handler_f \
	dispatch_source_set_registration_handler_f
#define sq_source_cancel dispatch_source_cancel
#define sq_source_get_data dispatch_source_get_data
#define sq_source_merge_data dispatch_source_merge_data
#define sq_source_set_timer dispatch_source_set_timer

/* ---- data ------------------------------------------------------------------------ */

#define SQ_DATA_DESTRUCTOR_DEFAULT DISPATCH_DATA_DESTRUCTOR_DEFAULT
#define sq_data_create dispatch_data_create
/* The markers are all the checker passes: the block form takes them. */
#define sq_data_create_f dispatch_data_create
#define sq_data_get_size dispatch_data_get_size

static inline bool
sq_data_apply_f(sq_data_t data, void *ctx, sq_data_applier_function_t fn)
{
	return dispatch_data_apply(data, ^bool(dispatch_data_t region,
			size_t offset, const void *buffer, size_t size) {
		return fn(ctx, region, offset, buffer, size);
	});
}

/* ---- channels, sq_read / sq_write ----------------------------------------------- */

#define SQ_IO_STREAM DISPATCH_IO_STREAM
#define SQ_IO_RANDOM DISPATCH_IO_RANDOM
#define SQ_IO_STOP DISPATCH_IO_STOP
#define SQ_IO_STRICT_INTERVAL DISPATCH_IO_STRICT_INTERVAL

static inline sq_io_t
sq_io_create_f(unsigned long type, int fd, sq_queue_t q, void *ctx,
		sq_io_cleanup_function_t cleanup)
{
	return dispatch_io_create(type, fd, q, ^(int error) {
		cleanup(ctx, error);
	});
}

static inline sq_io_t
sq_io_create_with_path_f(unsigned long type, const char *path, int oflag,
		mode_t mode, sq_queue_t q, void *ctx,
		sq_io_cleanup_function_t cleanup)
{
	return dispatch_io_create_with_path(type, path, oflag, mode, q,
			^(int error) {
		cleanup(ctx, error);
	});
}

static inline void
sq_io_read_f(sq_io_t ch, off_t offset, size_t length, sq_queue_t q,
		void *ctx, sq_io_handler_function_t handler)
{
	dispatch_io_read(ch, offset, length, q, ^(bool done,
			dispatch_data_t data, int error) {
		handler(ctx, done, data, error);
	});
}

static inline void
sq_io_write_f(sq_io_t ch, off_t offset, sq_data_t data, sq_queue_t q,
		void *ctx, sq_io_handler_function_t handler)
{
	dispatch_io_write(ch, offset, data, q, ^(bool done,
			dispatch_data_t rest, int error) {
		handler(ctx, done, rest, error);
	});
}

static inline void
sq_io_barrier_f(sq_io_t ch, void *ctx, sq_function_t fn)
{
	dispatch_io_barrier(ch, ^{
		fn(ctx);
	});
}

#define sq_io_close dispatch_io_close
#define sq_io_set_high_water dispatch_io_set_high_water
#define sq_io_set_low_water dispatch_io_set_low_water
#define sq_io_set_interval dispatch_io_set_interval

static inline void
sq_read_f(int fd, size_t length, sq_queue_t q, void *ctx,
		void (*handler)(void *, sq_data_t, int))
{
	dispatch_read(fd, length, q, ^(dispatch_data_t data, int error) {
		handler(ctx, data, error);
	});
}

static inline void
sq_write_f(int fd, sq_data_t data, sq_queue_t q, void *ctx,
		void (*handler)(void *, sq_data_t, int))
{
	dispatch_write(fd, data, q, ^(dispatch_data_t rest, int error) {
		handler(ctx, rest, error);
	});
}

/* ---- the liveness family (guarantees_liveness.h) ----------------------------- */

/*
 * libdispatch on Linux keeps as many threads per priority as there are
 * CPUs; past that, its monitor adds one thread a second to a priority
 * whose threads are all blocked (up to DISPATCH_WORKQ_MAX_PTHREAD_COUNT,
 * 255: the cap, which cannot be set). Nothing hangs, but every shape that
 * blocks all the threads of a priority waits for the monitor's tick
 * (measured on 2 CPUs, checker-sized programs):
 *   - sync pile-ups: the busy queue's drain waits for a thread of its
 *     priority while every one of them waits in dispatch_sync; each
 *     hand-off can wait again: 3-10 s a program, and 10-45 s for the
 *     chain syncs (nested, through the target chain), near the family's
 *     deadline. Skipped unless SQT_OPS names them ("liveness pile-up",
 *     "liveness chain sync");
 *   - group and work item waits only sleep (no help): each waiting task
 *     holds a thread, so trees deeper than a level wait for the monitor,
 *     about 2 s a program. Every wait is counted as a dependent one
 *     (GQ_WAIT_HELPS 0), and the family allows one per program
 *     (GQ_LIVE_DEPENDENT_CAP), unless SQT_OPS names "liveness fork-join"
 *     or "liveness work item wait" (then the SwiftQueues budget, 8).
 * The skips are said once per child (gq_live_note).
 */
#define GQ_WAIT_HELPS 0
#define GQ_LIVE_SKIP ((1u << LV_PILEUP) | (1u << LV_CHAIN))
#define GQ_LIVE_DEPENDENT_CAP 1
#define GQ_LIVE_SKIP_WHY "they wait for libdispatch's monitor, which adds " \
	"a thread a second once a priority's threads all block: 3-45 s a " \
	"program"

static inline int
gq_thread_cap(void)
{
	return 255;
}

/* ---- the main queue ------------------------------------------------------------- */

/* What Foundation's run loop calls on Linux (exported, not in the public
 * header): the main queue's eventfd, and the drain. */
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *msg);

static inline void
gq_main_run(unsigned us, bool (*condition)(void *), void *ctx)
{
	if (condition && condition(ctx))
		return;
	struct pollfd pfd = { _dispatch_get_main_queue_handle_4CF(), POLLIN, 0 };
	int ms = (int)((us + 999) / 1000);
	if (poll(&pfd, 1, ms) > 0)
		_dispatch_main_queue_callback_4CF(NULL);
}

#endif /* SQTEST_GUARANTEES_DISPATCH_H */
