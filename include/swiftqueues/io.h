/*!
 * \defgroup swiftqueues_io I/O channels
 * \ingroup swiftqueues
 *
 * I/O channels (libdispatch's io.h, renamed).
 *
 * A channel owns a file descriptor for the program and runs reads and
 * writes on it asynchronously, handing the bytes over as sq_data_t objects
 * (never copied into one big buffer).
 *
 *   SQ_IO_STREAM  pipes, sockets, ttys: reads and writes happen in order,
 *                 each direction one operation at a time, driven by the
 *                 event loop (the descriptor is made non-blocking; no
 *                 thread ever blocks in read or write).
 *   SQ_IO_RANDOM  regular files: each operation names an offset (relative
 *                 to the file position when the channel opened the file)
 *                 and several may be in flight. Linux cannot poll regular
 *                 files, so these run as pread / pwrite on a small bounded
 *                 set of I/O threads, never on the queues' workers. (A
 *                 stream channel on a regular file uses them too.)
 *
 * Handlers get (done, data, error). A read or write handler may run
 * several times (see the water marks) and runs a last time with done =
 * true; a read of length SIZE_MAX runs to end of file. Errors are never
 * crashes: they arrive as `error` (EBADF, EPIPE, ECONNRESET, ECANCELED
 * after sq_io_close(SQ_IO_STOP), ...), together with whatever was already
 * read.
 * Once the channel is closed (or its last reference released) and its
 * operations are over, the cleanup handler runs once with the channel's
 * error (0, or why the descriptor could not be used); from then on the
 * descriptor belongs to the caller again (the channel restores its flags;
 * a channel made from a path closes the file it opened). The cleanup
 * handler runs only after every call of every handler of the channel's
 * operations has returned, whatever queues they run on.
 *
 * One descriptor, one order. Every channel made on a descriptor (by
 * sq_io_create, by sq_read / sq_write, or by sq_io_create_with_io from
 * such a channel) shares it: operations issued on the descriptor, through
 * any of these channels, are performed in the order they were issued (one
 * serial path per direction on pipes and sockets; one at a time on a
 * regular file read or written as a stream, as they share the file
 * position). The descriptor's flags are changed once (O_NONBLOCK for a
 * stream) and restored once, by the last of them to finish; their
 * cleanup handlers run once that last one is done with it.
 *
 * Open files. Channels made from a path open their file lazily, and at
 * most SQ_IO_MAX_OPEN_FILES of those files are open at once (default: half
 * the RLIMIT_NOFILE soft limit, as getdtablesize() / 2; the environment
 * variable is read once, on first use). A path channel takes a slot when
 * it opens its file and gives it back when it closes it (after
 * sq_io_close or its last release, once its operations are over). While no
 * slot is free, the channel's operations wait, in the order channels asked
 * for a slot; no thread blocks meanwhile. A program that keeps more path
 * channels open than the limit, and waits for another one, waits forever:
 * close the channels it is done with. Descriptors given to sq_io_create
 * do not count.
 *
 * \par Errors
 * Errors of the descriptor reach the handlers, not the caller: EBADF (not
 * open), ENOENT (the path), ESPIPE (a random-access channel over a pipe,
 * socket or terminal), ECANCELED (closed). NULL or a released channel
 * given to sq_io_create_with_io_f stops the process ("SwiftQueues:
 * sq_io_create_with_io: ...").
 * @{
 */
#ifndef SWIFTQUEUES_IO_H
#define SWIFTQUEUES_IO_H

#include <sys/types.h>

#include <swiftqueues/base.h>
#include <swiftqueues/data.h>
#include <swiftqueues/object.h>
#include <swiftqueues/queue.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! A file descriptor. */
typedef int sq_fd_t;
/*! An I/O channel (an object: sq_retain, sq_release). */
typedef struct sq_io_s *sq_io_t;
/*! A channel's type: SQ_IO_STREAM or SQ_IO_RANDOM. */
typedef unsigned long sq_io_type_t;
/*! Flags for sq_io_close: 0 or SQ_IO_STOP. */
typedef unsigned long sq_io_close_flags_t;
/*! Flags for sq_io_set_interval: 0 or SQ_IO_STRICT_INTERVAL. */
typedef unsigned long sq_io_interval_flags_t;

/*! A stream: pipes, sockets, ttys; operations in order, offsets ignored. */
#define SQ_IO_STREAM 0
/*! Random access: regular files; each operation names its offset. */
#define SQ_IO_RANDOM 1

/*! sq_io_close: cancel the operations in progress (ECANCELED). */
#define SQ_IO_STOP 0x1
/*! sq_io_set_interval: deliver at each interval even below low water. */
#define SQ_IO_STRICT_INTERVAL 0x1

/*!
 * An I/O handler. Reads: `data` holds the bytes read since the previous
 * call (sq_data_empty when there are none; never NULL).
 * Writes (as libdispatch): while the write runs, calls with done = false
 * report progress, `data` being the bytes still to be written (so its size
 * strictly decreases from call to call): one each time at least low water
 * bytes went out since the previous call, and never more than high water
 * in between (a write moves at most high water bytes per system call);
 * with an interval set, at each interval instead (if at least low water
 * bytes went out, or any with SQ_IO_STRICT_INTERVAL), or as soon as high
 * water bytes did. Then one last call with done = true: `data` is NULL
 * when everything was written, else the bytes that were not. A write that
 * goes out at once gets only that last call.
 */
typedef void (*sq_io_handler_function_t)(void *SQ_NULLABLE context,
		bool done, sq_data_t SQ_NULLABLE data, int error);

/*! The cleanup handler: called once with the channel's error. */
typedef void (*sq_io_cleanup_function_t)(void *SQ_NULLABLE context,
		int error);

/*!
 * Creates a channel over `fd`, which the channel owns until its cleanup
 * handler runs (set options such as SO_KEEPALIVE before). `cleanup` (may
 * be NULL) runs on `queue` (NULL: the default global queue). Returns NULL
 * with errno EINVAL for an unknown type; a bad descriptor is reported
 * through the handlers (EBADF), not here (dispatch_io_create_f).
 * \param type SQ_IO_STREAM or SQ_IO_RANDOM.
 * \param fd the descriptor; the caller's again once `cleanup` runs.
 * \param queue where `cleanup` runs (NULL: the default global queue).
 * \param context passed to `cleanup`.
 * \param cleanup called once with the channel's error; may be NULL.
 * \return a new channel (the caller owns one reference), or NULL.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_io_t SQ_NULLABLE
sq_io_create_f(sq_io_type_t type, sq_fd_t fd, sq_queue_t SQ_NULLABLE queue,
		void *SQ_NULLABLE context,
		sq_io_cleanup_function_t SQ_NULLABLE cleanup);

/*!
 * Creates a channel over the file at `path` (absolute), opened with
 * open(path, oflag, mode) lazily, on the channel's first operation, so
 * channels that are never used hold no descriptor. An open that fails is
 * reported to the operations and to the cleanup handler
 * (dispatch_io_create_with_path_f). The channel closes the file it opened.
 * \param type SQ_IO_STREAM or SQ_IO_RANDOM.
 * \param path an absolute path; copied.
 * \param oflag open(2) flags.
 * \param mode open(2) mode, for O_CREAT.
 * \param queue where `cleanup` runs (NULL: the default global queue).
 * \param context passed to `cleanup`.
 * \param cleanup called once with the channel's error; may be NULL.
 * \return a new channel (the caller owns one reference), or NULL with
 *         errno EINVAL for an unknown type or a relative path.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_io_t SQ_NULLABLE
sq_io_create_with_path_f(sq_io_type_t type, const char *path, int oflag,
		mode_t mode, sq_queue_t SQ_NULLABLE queue,
		void *SQ_NULLABLE context,
		sq_io_cleanup_function_t SQ_NULLABLE cleanup);

/*!
 * Creates a channel of `type` over the descriptor of `channel` (libdispatch's
 * dispatch_io_create_with_io), with its own water marks, interval, queue
 * and cleanup handler (may be NULL; runs on `queue`, NULL: the default
 * global queue). The two channels share the descriptor: closing one does
 * not end the other, the descriptor's flags are restored only when both
 * are done, and both cleanup handlers run then, once each (so a cleanup
 * that closes the descriptor cannot pull it from under the other channel).
 * A random-access channel's offsets count from the file position when it
 * sets up (its first operation). If `channel` was made from a path, the
 * new channel opens that path itself, lazily, with the same flags except
 * O_TRUNC and O_EXCL (libdispatch opens the path again too, but with
 * exactly the same flags, which would wipe out or refuse the file the first
 * channel made); its descriptor and open-file slot are its own.
 * Errors arrive in the new channel's handlers and cleanup handler, as for
 * sq_io_create: ECANCELED if `channel` was already closed, the error of
 * `channel` if it has one (EBADF, ENOENT, ...), ESPIPE for a random-access
 * channel over a pipe, socket or tty (libdispatch's rule; a stream channel
 * over a random-access one reads and writes at the file position). Returns NULL
 * with errno EINVAL for an unknown type. `channel` must be a live channel
 * the program holds a reference to (NULL or a released one stops the
 * process: "SwiftQueues: sq_io_create_with_io: ... was already released").
 * \param type SQ_IO_STREAM or SQ_IO_RANDOM.
 * \param channel the channel whose descriptor to share.
 * \param queue where `cleanup` runs (NULL: the default global queue).
 * \param context passed to `cleanup`.
 * \param cleanup called once with the new channel's error; may be NULL.
 * \return a new channel (the caller owns one reference), or NULL.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_io_t SQ_NULLABLE
sq_io_create_with_io_f(sq_io_type_t type, sq_io_t channel,
		sq_queue_t SQ_NULLABLE queue, void *SQ_NULLABLE context,
		sq_io_cleanup_function_t SQ_NULLABLE cleanup);

/*!
 * Reads `length` bytes (SIZE_MAX: to end of file) at `offset` (random
 * access; ignored for streams), calling handler(context, ...) on `queue`
 * as the bytes arrive. Calls of one operation never overlap, in order.
 * A random-access offset that is negative ends the operation with EINVAL;
 * one that, added to the channel's starting position, lies past OFF_MAX
 * ends it with EOVERFLOW (as does a write that would end past OFF_MAX)
 * (dispatch_io_read_f). Returns at once.
 * \param channel the channel; retained until the operation is over.
 * \param offset where to read (random access).
 * \param length how many bytes, or SIZE_MAX.
 * \param queue where `handler` runs.
 * \param context passed to `handler`.
 * \param handler see sq_io_handler_function_t; last called with done true.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_io_read_f(sq_io_t channel, off_t offset, size_t length, sq_queue_t queue,
		void *SQ_NULLABLE context, sq_io_handler_function_t handler);

/*!
 * Writes `data` at `offset` (random access; ignored for streams),
 * calling handler(context, ...) on `queue` to report progress and, last,
 * the outcome (dispatch_io_write_f). Returns at once.
 * \param channel the channel; retained until the operation is over.
 * \param offset where to write (random access).
 * \param data the bytes; retained until written.
 * \param queue where `handler` runs.
 * \param context passed to `handler`.
 * \param handler see sq_io_handler_function_t; last called with done true.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_io_write_f(sq_io_t channel, off_t offset, sq_data_t data, sq_queue_t queue,
		void *SQ_NULLABLE context, sq_io_handler_function_t handler);

/*!
 * Closes the channel: operations issued afterwards fail with ECANCELED;
 * those already issued finish, or with SQ_IO_STOP end at once with
 * ECANCELED (keeping what they read). Then the cleanup handler runs
 * (dispatch_io_close). Closing twice does nothing more.
 * \param channel the channel.
 * \param flags 0 or SQ_IO_STOP.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_io_close(sq_io_t channel, sq_io_close_flags_t flags);

/*!
 * Runs barrier(context) on the channel's own queue once every operation
 * issued before it has finished, before any issued after it starts; it may
 * use sq_io_get_descriptor (to fsync, say) (dispatch_io_barrier_f).
 * \param channel the channel.
 * \param context passed to `barrier`.
 * \param barrier the function.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_io_barrier_f(sq_io_t channel, void *SQ_NULLABLE context,
		sq_function_t barrier);

/*! The channel's descriptor (dispatch_io_get_descriptor).
 * \param channel the channel.
 * \return the descriptor, or -1 before a path channel has opened its file
 *         and after the cleanup handler has been scheduled. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_fd_t
sq_io_get_descriptor(sq_io_t channel);

/*! At most this many bytes per read handler call, and written between
 * two write progress calls (default SIZE_MAX) (dispatch_io_set_high_water).
 * \param channel the channel.
 * \param high_water the byte count. */
SQ_EXPORT SQ_NOTHROW
void
sq_io_set_high_water(sq_io_t channel, size_t high_water);

/*! At least this many bytes per read handler call, and written between
 * two write progress calls, unless the operation is done (default 1:
 * deliver whatever arrives, report every step) (dispatch_io_set_low_water).
 * \param channel the channel.
 * \param low_water the byte count. */
SQ_EXPORT SQ_NOTHROW
void
sq_io_set_low_water(sq_io_t channel, size_t low_water);

/*!
 * Read handlers are called every `interval` ns with the bytes gathered in
 * between (if at least low water, or any with SQ_IO_STRICT_INTERVAL)
 * instead of as soon as low water is reached; write progress likewise.
 * 0 turns it off (dispatch_io_set_interval).
 * \param channel the channel.
 * \param interval nanoseconds, or 0.
 * \param flags 0 or SQ_IO_STRICT_INTERVAL.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_io_set_interval(sq_io_t channel, uint64_t interval,
		sq_io_interval_flags_t flags);

/*! Reads up to `length` bytes (SIZE_MAX: to end of file) from `fd` and
 * calls handler(context, data, error) once on `queue`. On a regular file
 * it reads `length` bytes or up to end of file. On a pipe, socket or tty
 * (as libdispatch) it waits for the first bytes, then ends with what it
 * has read as soon as the descriptor would block: a request/response
 * exchange gets the response that is there, not a wait for `length`
 * bytes or end of file; read again for more. `fd` is the caller's again
 * (its flags restored) when the handler runs. Calls on one descriptor
 * are performed in the order they were made. */
typedef void (*sq_read_function_t)(void *SQ_NULLABLE context,
		sq_data_t data, int error);
/*!
 * Reads up to `length` bytes from `fd` (SIZE_MAX: to end of file), then
 * calls handler(context, data, error) once on `queue`: `data` holds what
 * was read (sq_data_empty at end of file), `error` 0 or an errno value.
 * The descriptor is made non-blocking for the read and given back with its
 * flags restored before the handler runs; calls on one descriptor are
 * performed in the order they were made. A bad descriptor arrives as
 * EBADF, never a crash (dispatch_read_f).
 * \param fd the descriptor.
 * \param length how many bytes, or SIZE_MAX.
 * \param queue where `handler` runs.
 * \param context passed to `handler`.
 * \param handler called once.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_read_f(sq_fd_t fd, size_t length, sq_queue_t queue,
		void *SQ_NULLABLE context, sq_read_function_t handler);

/*! Writes `data` to `fd`, then calls handler(context, unwritten, error)
 * once on `queue` (unwritten: NULL when everything was written). Writes
 * (and reads) on one descriptor are performed in the order they were
 * made. */
typedef void (*sq_write_function_t)(void *SQ_NULLABLE context,
		sq_data_t SQ_NULLABLE unwritten, int error);
/*!
 * Writes `data` to `fd`, then calls handler(context, unwritten, error) once
 * on `queue`: `unwritten` is NULL when everything was written, else the
 * part that was not (with `error`, such as EPIPE). The data is retained
 * until then (dispatch_write_f).
 * \param fd the descriptor.
 * \param data the bytes.
 * \param queue where `handler` runs.
 * \param context passed to `handler`.
 * \param handler called once.
 */
SQ_EXPORT SQ_NOTHROW
void
sq_write_f(sq_fd_t fd, sq_data_t data, sq_queue_t queue,
		void *SQ_NULLABLE context, sq_write_function_t handler);

#ifdef __BLOCKS__
/*! A read or write handler: called with (done, data, error), the last time with done true. */
typedef void (^sq_io_handler_t)(bool done, sq_data_t SQ_NULLABLE data,
		int error);

SQ_INLINE void
_sq_io_call_handler_block(void *SQ_NULLABLE block, bool done,
		sq_data_t SQ_NULLABLE data, int error)
{
	((sq_io_handler_t)block)(done, data, error);
	if (done) /* the last call */
		_Block_release(block);
}

SQ_INLINE void
_sq_io_call_cleanup_block(void *SQ_NULLABLE block, int error)
{
	((void (^)(int))block)(error);
	_Block_release(block);
}

/*! sq_io_create_f with a cleanup block (copied; NULL: none; dispatch_io_create).
 *  \param type SQ_IO_STREAM or SQ_IO_RANDOM.
 *  \param fd the descriptor.
 *  \param queue where `cleanup` runs.
 *  \param cleanup the cleanup handler, or NULL.
 *  \return a new channel, or NULL. */
SQ_INLINE sq_io_t SQ_NULLABLE
sq_io_create(sq_io_type_t type, sq_fd_t fd, sq_queue_t SQ_NULLABLE queue,
		void (^SQ_NULLABLE cleanup)(int error))
{
	if (cleanup == NULL)
		return sq_io_create_f(type, fd, queue, NULL, NULL);
	void *b = _Block_copy((const void *)cleanup);
	sq_io_t ch = sq_io_create_f(type, fd, queue, b,
			_sq_io_call_cleanup_block);
	if (ch == NULL)
		_Block_release(b);
	return ch;
}

/*! sq_io_create_with_path_f with a cleanup block (copied; NULL: none;
 *  dispatch_io_create_with_path).
 *  \param type SQ_IO_STREAM or SQ_IO_RANDOM.
 *  \param path an absolute path.
 *  \param oflag open(2) flags.
 *  \param mode open(2) mode.
 *  \param queue where `cleanup` runs.
 *  \param cleanup the cleanup handler, or NULL.
 *  \return a new channel, or NULL. */
SQ_INLINE sq_io_t SQ_NULLABLE
sq_io_create_with_path(sq_io_type_t type, const char *path, int oflag,
		mode_t mode, sq_queue_t SQ_NULLABLE queue,
		void (^SQ_NULLABLE cleanup)(int error))
{
	if (cleanup == NULL)
		return sq_io_create_with_path_f(type, path, oflag, mode, queue,
				NULL, NULL);
	void *b = _Block_copy((const void *)cleanup);
	sq_io_t ch = sq_io_create_with_path_f(type, path, oflag, mode, queue,
			b, _sq_io_call_cleanup_block);
	if (ch == NULL)
		_Block_release(b);
	return ch;
}

/*! sq_io_create_with_io_f with a cleanup block (copied; NULL: none;
 *  dispatch_io_create_with_io).
 *  \param type SQ_IO_STREAM or SQ_IO_RANDOM.
 *  \param channel the channel whose descriptor to share.
 *  \param queue where `cleanup` runs.
 *  \param cleanup the cleanup handler, or NULL.
 *  \return a new channel, or NULL. */
SQ_INLINE sq_io_t SQ_NULLABLE
sq_io_create_with_io(sq_io_type_t type, sq_io_t channel,
		sq_queue_t SQ_NULLABLE queue,
		void (^SQ_NULLABLE cleanup)(int error))
{
	if (cleanup == NULL)
		return sq_io_create_with_io_f(type, channel, queue, NULL,
				NULL);
	void *b = _Block_copy((const void *)cleanup);
	sq_io_t ch = sq_io_create_with_io_f(type, channel, queue, b,
			_sq_io_call_cleanup_block);
	if (ch == NULL)
		_Block_release(b);
	return ch;
}

/*! sq_io_read_f with a handler block (copied, released after its last
 *  call; dispatch_io_read).
 *  \param channel the channel.
 *  \param offset where to read (random access).
 *  \param length how many bytes, or SIZE_MAX.
 *  \param queue where `handler` runs.
 *  \param handler the handler. */
SQ_INLINE void
sq_io_read(sq_io_t channel, off_t offset, size_t length, sq_queue_t queue,
		sq_io_handler_t handler)
{
	sq_io_read_f(channel, offset, length, queue,
			_Block_copy((const void *)handler),
			_sq_io_call_handler_block);
}

/*! sq_io_write_f with a handler block (copied, released after its last
 *  call; dispatch_io_write).
 *  \param channel the channel.
 *  \param offset where to write (random access).
 *  \param data the bytes.
 *  \param queue where `handler` runs.
 *  \param handler the handler. */
SQ_INLINE void
sq_io_write(sq_io_t channel, off_t offset, sq_data_t data, sq_queue_t queue,
		sq_io_handler_t handler)
{
	sq_io_write_f(channel, offset, data, queue,
			_Block_copy((const void *)handler),
			_sq_io_call_handler_block);
}

/*! sq_io_barrier_f with a block (copied, released after it has run;
 *  dispatch_io_barrier).
 *  \param channel the channel.
 *  \param barrier the block. */
SQ_INLINE void
sq_io_barrier(sq_io_t channel, sq_block_t barrier)
{
	sq_io_barrier_f(channel, _Block_copy((const void *)barrier),
			_sq_call_and_release_block);
}

SQ_INLINE void
_sq_io_call_read_block(void *SQ_NULLABLE block, sq_data_t data, int error)
{
	((void (^)(sq_data_t, int))block)(data, error);
	_Block_release(block);
}

SQ_INLINE void
_sq_io_call_write_block(void *SQ_NULLABLE block,
		sq_data_t SQ_NULLABLE data, int error)
{
	((void (^)(sq_data_t SQ_NULLABLE, int))block)(data, error);
	_Block_release(block);
}

/*! sq_read_f with a handler block (copied, released after it has run;
 *  dispatch_read).
 *  \param fd the descriptor.
 *  \param length how many bytes, or SIZE_MAX.
 *  \param queue where `handler` runs.
 *  \param handler called once with the data and an errno value or 0. */
SQ_INLINE void
sq_read(sq_fd_t fd, size_t length, sq_queue_t queue,
		void (^handler)(sq_data_t data, int error))
{
	sq_read_f(fd, length, queue, _Block_copy((const void *)handler),
			_sq_io_call_read_block);
}

/*! sq_write_f with a handler block (copied, released after it has run;
 *  dispatch_write).
 *  \param fd the descriptor.
 *  \param data the bytes.
 *  \param queue where `handler` runs.
 *  \param handler called once with the unwritten part (NULL: none) and an
 *         errno value or 0. */
SQ_INLINE void
sq_write(sq_fd_t fd, sq_data_t data, sq_queue_t queue,
		void (^handler)(sq_data_t SQ_NULLABLE unwritten, int error))
{
	sq_write_f(fd, data, queue, _Block_copy((const void *)handler),
			_sq_io_call_write_block);
}
#endif

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_IO_H */
