/*
 * SwiftQueues — I/O channels: handler calls, progress, and the end of an
 * operation.
 *
 * Each operation delivers on a serial queue (the program's, or one made
 * to target it once a second call is due), so the calls of one operation
 * never overlap and arrive in order. Reads deliver what they gathered as
 * the water marks allow. Writes report progress as libdispatch does:
 * after a system call, if at least low water bytes went out since the
 * last report (a call moves at most high water bytes minus what is
 * unreported, so no step exceeds high water), or at an interval tick.
 *
 * A cleanup handler runs only after every handler call of every operation
 * of its channel has returned: `calls` counts the queued deliveries plus
 * one for the channel itself, and the one that takes it to zero schedules
 * the cleanup.
 */
#include "io_internal.h"

#include <stdlib.h>

/* ---- Delivery ---------------------------------------------------------- */

struct sq_io_delivery_s {
	struct sq_io_s *ch;
	sq_io_handler_function_t handler;
	void *ctx;
	sq_data_t data;
	int error;
	bool done;
	bool counted;             /* in ch->calls */
};

/* One of the channel's counted calls is over (a handler call returned, or
 * the channel is done with its descriptor): the last schedules the
 * cleanup handler, which so runs after every handler call. acq_rel: every
 * handler's effects happen before the cleanup. */
static void
_sq_io_call_returned(struct sq_io_s *ch)
{
	if (__atomic_sub_fetch(&ch->calls, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (ch->cleanup != NULL)
		sq_async_f(ch->cleanup_q, ch, _sq_io_cleanup_run);
	else
		_sq_release_internal(ch); /* nothing to call: no hop */
}

void
_sq_io_cleanup_ready(struct sq_io_s *ch)
{
	ch->calls_closed = true;
	_sq_io_call_returned(ch);
}

static void
_sq_io_deliver_run(void *ctx)
{
	struct sq_io_delivery_s *d = ctx;
	struct sq_io_s *ch = d->ch;
	d->handler(d->ctx, d->done, d->data, d->error);
	if (d->data)
		sq_release(d->data);
	bool counted = d->counted;
	free(d);
	if (counted)
		_sq_io_call_returned(ch);
	_sq_release_internal(ch);
}

/* Queues one handler call; takes over the reference on `data`. */
static void
_sq_io_deliver(struct sq_io_op_s *op, bool done, sq_data_t data, int error)
{
	struct sq_io_delivery_s *d = malloc(sizeof(*d));
	if (d == NULL)
		_sq_client_crash("sq_io", "out of memory");
	d->ch = op->ch;
	d->handler = op->handler;
	d->ctx = op->ctx;
	d->data = data;
	d->error = error;
	d->done = done;
	/* Counted while the channel's own count is held (deliveries are
	 * queued on q, as is the drop of that count): the count cannot reach
	 * zero before this one's. Relaxed: the decrements are acq_rel. An
	 * operation issued after the cleanup was scheduled (it fails with
	 * ECANCELED) is not counted: that cleanup is already on its way. */
	d->counted = !op->ch->calls_closed;
	if (d->counted)
		__atomic_add_fetch(&op->ch->calls, 1, __ATOMIC_RELAXED);
	_sq_retain_internal(op->ch); /* released by _sq_io_deliver_run */
	sq_queue_t target = op->dq;
	if (target == NULL) {
		if (done) {
			/* The only call: nothing to overlap. On a global queue
			 * (the one q runs on), it runs on this worker as soon as
			 * q's drain is over: no second hand-off. */
			if (_sq_queue_defer_to_root_f(op->tq, d,
					_sq_io_deliver_run))
				return;
			target = op->tq;
		} else {
			op->dq = sq_queue_create_with_target(
					"com.swiftqueues.io.handler", NULL,
					op->tq);
			target = op->dq;
		}
	}
	sq_async_f(target, d, _sq_io_deliver_run);
}

/* Delivers what a read has gathered, as the water marks allow. */
void
_sq_io_read_progress(struct sq_io_op_s *op, bool tick)
{
	struct sq_io_s *ch = op->ch;
	size_t high = __atomic_load_n(&ch->high, __ATOMIC_RELAXED);
	size_t low = __atomic_load_n(&ch->low, __ATOMIC_RELAXED);
	bool interval = __atomic_load_n(&ch->interval, __ATOMIC_RELAXED) != 0;
	bool strict = __atomic_load_n(&ch->interval_flags, __ATOMIC_RELAXED) &
			SQ_IO_STRICT_INTERVAL;
	size_t size = sq_data_get_size(op->pending);
	while (size >= high) {
		_sq_io_deliver(op, false, sq_data_create_subrange(op->pending,
				0, high), 0);
		sq_data_t rest = sq_data_create_subrange(op->pending, high,
				SIZE_MAX);
		sq_release(op->pending);
		op->pending = rest;
		size -= high;
	}
	if (size == 0)
		return;
	bool go;
	if (interval)
		go = tick && (size >= low || strict);
	else
		go = size >= low;
	if (go) {
		_sq_io_deliver(op, false, op->pending, 0);
		op->pending = sq_data_empty;
	}
}

/*
 * Reports a write's progress, as the water marks allow: the handler gets
 * the bytes still to be written. At once when high water bytes went out
 * since the last report; else at low water, or with an interval only at a
 * tick (at low water, or any amount when strict).
 */
void
_sq_io_write_progress(struct sq_io_op_s *op, bool tick)
{
	struct sq_io_s *ch = op->ch;
	size_t n = op->undelivered;
	if (n == 0)
		return;
	size_t high = __atomic_load_n(&ch->high, __ATOMIC_RELAXED);
	size_t low = __atomic_load_n(&ch->low, __ATOMIC_RELAXED);
	bool interval = __atomic_load_n(&ch->interval, __ATOMIC_RELAXED) != 0;
	bool strict = __atomic_load_n(&ch->interval_flags, __ATOMIC_RELAXED) &
			SQ_IO_STRICT_INTERVAL;
	bool go;
	if (n >= high)
		go = true;
	else if (interval)
		go = tick && (n >= low || strict);
	else
		go = n >= low;
	if (!go)
		return;
	op->undelivered = 0;
	sq_retain(op->pending);
	_sq_io_deliver(op, false, op->pending, 0);
}

/* A write system call moved `n` bytes of `op` (its pending already
 * trimmed): the last one is reported by the final call only. */
void
_sq_io_write_moved(struct sq_io_op_s *op, size_t n)
{
	if (n == 0 || sq_data_get_size(op->pending) == 0)
		return;
	op->undelivered += n;
	_sq_io_write_progress(op, false);
}

/* How many bytes the next write system call of `op` may move: no report
 * step may exceed high water. */
size_t
_sq_io_write_room(struct sq_io_op_s *op)
{
	size_t high = __atomic_load_n(&op->ch->high, __ATOMIC_RELAXED);
	/* high >= 1; undelivered >= high only if high was just lowered. */
	size_t room = high > op->undelivered ? high - op->undelivered : high;
	return room < SQ_IO_FILE_CHUNK ? room : SQ_IO_FILE_CHUNK;
}

static void
_sq_io_active_remove(struct sq_io_op_s *op)
{
	struct sq_io_s *ch = op->ch;
	if (op->aprev)
		op->aprev->anext = op->anext;
	else
		ch->active = op->anext;
	if (op->anext)
		op->anext->aprev = op->aprev;
	ch->nactive--;
}

static void
_sq_io_op_free(struct sq_io_op_s *op)
{
	struct sq_io_s *ch = op->ch;
	if (op->pending)
		sq_release(op->pending);
	if (op->dq)
		sq_release(op->dq);
	if (op->tq)
		sq_release(op->tq);
	free(op);
	_sq_release_internal(ch);
}

/* Ends an operation that was never started (closed channel, setup
 * failure) or that was: one last call with done = true. */
void
_sq_io_op_finish(struct sq_io_op_s *op, int error, bool started)
{
	struct sq_io_s *ch = op->ch;
	if (op->kind == SQ_IO_OP_READ) {
		/* Deliver full high-water pieces first, then the rest. */
		size_t high = __atomic_load_n(&ch->high, __ATOMIC_RELAXED);
		while (sq_data_get_size(op->pending) > high) {
			_sq_io_deliver(op, false, sq_data_create_subrange(
					op->pending, 0, high), 0);
			sq_data_t rest = sq_data_create_subrange(op->pending,
					high, SIZE_MAX);
			sq_release(op->pending);
			op->pending = rest;
		}
		/* An error ends a read with NULL data, as libdispatch's header
		 * promises (a channel closed, a failed open, a read error):
		 * what was gathered before goes out first. Without an error,
		 * done with empty data is the end of the file. */
		sq_data_t last = op->pending;
		if (error != 0) {
			if (sq_data_get_size(last) > 0)
				_sq_io_deliver(op, false, last, 0);
			else
				sq_release(last);
			last = NULL;
		}
		_sq_io_deliver(op, true, last, error);
	} else {
		sq_data_t left = op->pending;
		if (sq_data_get_size(left) == 0) {
			sq_release(left);
			left = NULL;
		}
		_sq_io_deliver(op, true, left, error);
	}
	op->pending = NULL;
	if (started)
		_sq_io_active_remove(op);
	_sq_retain_internal(ch);
	_sq_io_op_free(op);
	if (started)
		_sq_io_pump(ch); /* a barrier may go, or the cleanup */
	_sq_release_internal(ch);
}

