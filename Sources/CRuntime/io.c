/*
 * SwiftQueues — I/O channels: the channel object and its operations.
 *
 * Every channel works on a serial queue, `q` (its own, or its descriptor
 * entry's: io_fd.c): all of its state below the "q only" line
 * (io_internal.h) is touched only by work running there (operations
 * posted by the program, source handlers, the interval timer, results
 * coming back from the I/O threads), so it needs no lock.
 *
 * This file holds the object (creation, its parameters, a channel made
 * from a channel), the start of its operations, the interval timer, and
 * close. Operations are started in the order they were issued; a barrier
 * waits for every operation before it and holds back those after it. A
 * stream operation joins its descriptor entry's read or write list
 * (io_stream.c), an operation on a regular file goes to the I/O threads
 * (io_file.c); each ends with its last handler call (io_deliver.c). A
 * closed channel lets its timer go, then its descriptor (io_fd.c); its
 * cleanup handler runs after every handler call of its operations
 * (io_deliver.c). sq_read and sq_write are in io_convenience.c.
 */
#include "introspect_internal.h"
#include "io_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void _sq_io_maybe_cleanup(struct sq_io_s *ch);
static void _sq_io_pump_once(struct sq_io_s *ch);

/* ---- The channel object ------------------------------------------------ */

/*
 * Queues of channels that are gone, for the next channels that need a queue
 * of their own (path channels above all: one per file): a queue is only a
 * place in line, and making one (an aligned allocation, the label copied)
 * and freeing it again costs more than taking one from here. A queue comes
 * back only as it was made: nobody else holds it, not suspended, and it
 * cannot be made otherwise (it never leaves the channel code). It may still be
 * finishing the drain that released its channel: the next channel's work
 * then simply runs after it, as on any serial queue. The lock orders the
 * hand-over from the releasing thread to the taking one.
 */
#define SQ_IO_QUEUE_CACHE 64
static struct {
	pthread_mutex_t lock;
	int count;
	sq_queue_t q[SQ_IO_QUEUE_CACHE];
} _sq_io_queues = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static sq_queue_t
_sq_io_queue_get(void)
{
	sq_queue_t q = NULL;
	pthread_mutex_lock(&_sq_io_queues.lock);
	if (_sq_io_queues.count > 0)
		q = _sq_io_queues.q[--_sq_io_queues.count];
	pthread_mutex_unlock(&_sq_io_queues.lock);
	return q != NULL ? q : sq_queue_create("com.swiftqueues.io", NULL);
}

/* Takes over the caller's (the channel's) reference on `q`. */
static void
_sq_io_queue_put(sq_queue_t q)
{
	/* Relaxed: values, not a hand-over (the cache's lock is that). Only
	 * our reference can be left, nobody else ever had one, and only its
	 * channel suspends or resumes it, so neither can be changing (a
	 * drainer may still flip ENQUEUED, which is not looked at); a
	 * suspended queue (a channel from a channel whose attach never
	 * came) is not reused. */
	bool reusable = __atomic_load_n(&q->obj.xref, __ATOMIC_RELAXED) == 1 &&
			!(__atomic_load_n(&q->state, __ATOMIC_RELAXED) &
			(SQ_STATE_SUSPEND_MASK | SQ_STATE_INACTIVE));
	if (reusable) {
		pthread_mutex_lock(&_sq_io_queues.lock);
		reusable = _sq_io_queues.count < SQ_IO_QUEUE_CACHE;
		if (reusable)
			_sq_io_queues.q[_sq_io_queues.count++] = q;
		pthread_mutex_unlock(&_sq_io_queues.lock);
	}
	if (!reusable)
		sq_release(q);
}

static void
_sq_io_dispose(struct sq_object_s *o)
{
	struct sq_io_s *ch = (struct sq_io_s *)o;
	if (ch->own_q)
		_sq_io_queue_put(ch->q);
	else
		sq_release(ch->q);
	if (ch->cleanup_q)
		sq_release(ch->cleanup_q);
	if (!ch->path_inline)
		free(ch->path);
	_sq_object_free(o);
}

static void
_sq_io_close_on_q(void *ctx);

/*
 * Runs a close (`fn`, which releases the reference taken here) on q: on
 * this thread if q is idle, with nothing queued (the sync fast path; the
 * work is short: it never blocks, and the cleanup handler is posted, not
 * called), else posted. A channel that is done with its work, closed from
 * its last handler, so needs no hand-off to q and back. Not from q itself
 * (a barrier), nor while q waits to be resumed: then it is posted, in
 * order after what is queued.
 */
static void
_sq_io_close_post(struct sq_io_s *ch, sq_function_t fn)
{
	_sq_retain_internal(ch);
	if (!_sq_queue_try_run_here_f(ch->q, ch, fn))
		sq_async_f(ch->q, ch, fn);
}

/* The program let go: close (without STOP), as libdispatch does. */
static void
_sq_io_last_external_release(struct sq_object_s *o)
{
	struct sq_io_s *ch = (struct sq_io_s *)o;
	/* Already closed by the program: the close is on its way (posted
	 * before this release, so in order on q); no second one. */
	if (__atomic_exchange_n(&ch->close_posted, true, __ATOMIC_RELAXED))
		return;
	_sq_io_close_post(ch, _sq_io_close_on_q);
}

static const struct sq_vtable_s _sq_io_vtable = {
	.kind = "I/O channel",
	.dispose = _sq_io_dispose,
	.last_external_release = _sq_io_last_external_release,
	.fork_bound = true,
	.debug = _sq_io_debug,
};

/* For snapshots and sq_debug, from any thread: fields set before the
 * channel was registered, and atomics. A path taken over from another
 * channel is written later, on q, so only a path of its own is shown. */
void
_sq_io_facts(struct sq_object_s *o, struct sq_io_facts_s *f)
{
	struct sq_io_s *ch = (struct sq_io_s *)o;
	f->type = ch->type == SQ_IO_RANDOM ? "random" : "stream";
	f->fd = __atomic_load_n(&ch->fd_pub, __ATOMIC_RELAXED);
	f->path = ch->path_inline ? ch->path : NULL;
	f->queue = ch->q;
	f->closed = __atomic_load_n(&ch->close_posted, __ATOMIC_RELAXED);
	/* Handler calls queued or running, plus one for the channel until
	 * it is done with its descriptor (see the top). */
	f->calls = __atomic_load_n(&ch->calls, __ATOMIC_RELAXED);
}

/* A channel working on `q` (retained), or on a queue of its own, with
 * `extra` bytes after it. */
static struct sq_io_s *
_sq_io_alloc(sq_io_type_t type, sq_queue_t queue, void *ctx,
		sq_io_cleanup_function_t cleanup, sq_queue_t q, size_t extra)
{
	struct sq_io_s *ch = _sq_object_alloc(&_sq_io_vtable,
			sizeof(*ch) + extra);
	ch->type = type;
	if (q != NULL) {
		sq_retain(q);
		ch->q = q;
	} else {
		ch->q = _sq_io_queue_get();
		ch->own_q = true;
	}
	ch->calls = 1;
	if (queue == NULL)
		queue = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	sq_retain(queue);
	ch->cleanup_q = queue;
	ch->cleanup_ctx = ctx;
	ch->cleanup = cleanup;
	ch->low = 1;
	ch->high = SIZE_MAX;
	ch->fd = -1;
	ch->fd_pub = -1;
	return ch;
}

sq_io_t
sq_io_create_f(sq_io_type_t type, sq_fd_t fd, sq_queue_t queue, void *ctx,
		sq_io_cleanup_function_t cleanup)
{
	if (type != SQ_IO_STREAM && type != SQ_IO_RANDOM) {
		errno = EINVAL;
		return NULL;
	}
	/* One entry, and one queue, for every channel on `fd`. */
	struct sq_io_fd_s *e = _sq_io_fd_get(fd);
	struct sq_io_s *ch = _sq_io_alloc(type, queue, ctx, cleanup, e->q, 0);
	ch->fde = e;
	ch->fd = fd;
	ch->tabled = true;
	ch->tfd = fd;
	__atomic_store_n(&ch->fd_pub, fd, __ATOMIC_RELAXED); /* no data */
	_sq_introspect_register(&ch->obj);
	return ch;
}

sq_io_t
sq_io_create_with_path_f(sq_io_type_t type, const char *path, int oflag,
		mode_t mode, sq_queue_t queue, void *ctx,
		sq_io_cleanup_function_t cleanup)
{
	if (path == NULL || path[0] != '/' ||
			(type != SQ_IO_STREAM && type != SQ_IO_RANDOM)) {
		errno = EINVAL;
		return NULL;
	}
	/* The path lives right after the channel: one allocation. */
	size_t len = strlen(path) + 1;
	struct sq_io_s *ch = _sq_io_alloc(type, queue, ctx, cleanup, NULL,
			len);
	ch->path = memcpy(ch + 1, path, len);
	ch->path_inline = true;
	ch->oflag = oflag;
	ch->mode = mode;
	_sq_introspect_register(&ch->obj);
	return ch;
}

sq_fd_t
sq_io_get_descriptor(sq_io_t ch)
{
	_sq_object_validate("sq_io_get_descriptor", ch);
	return __atomic_load_n(&ch->fd_pub, __ATOMIC_RELAXED); /* a value */
}

void
sq_io_set_high_water(sq_io_t ch, size_t high)
{
	_sq_object_validate("sq_io_set_high_water", ch);
	if (high == 0)
		high = 1;
	__atomic_store_n(&ch->high, high, __ATOMIC_RELAXED); /* a setting */
}

void
sq_io_set_low_water(sq_io_t ch, size_t low)
{
	_sq_object_validate("sq_io_set_low_water", ch);
	if (low == 0)
		low = 1;
	__atomic_store_n(&ch->low, low, __ATOMIC_RELAXED); /* a setting */
}

static void _sq_io_update_timer(void *ctx);

void
sq_io_set_interval(sq_io_t ch, uint64_t interval, sq_io_interval_flags_t flags)
{
	_sq_object_validate("sq_io_set_interval", ch);
	/* Relaxed: the timer is (re)armed by work posted to q below, and the
	 * post orders these stores before it. */
	__atomic_store_n(&ch->interval_flags, flags, __ATOMIC_RELAXED);
	__atomic_store_n(&ch->interval, interval, __ATOMIC_RELAXED);
	_sq_retain_internal(ch);
	sq_async_f(ch->q, ch, _sq_io_update_timer);
}

/* ---- A channel from a channel -------------------------------------------- */

/*
 * On the first channel's queue, where its state may be read: decides what
 * the new channel works on (libdispatch's rules), then lets its queue run
 * the operations posted meanwhile.
 */
static void
_sq_io_attach(void *ctx)
{
	struct sq_io_s *ch = ctx;
	struct sq_io_s *in = ch->from;
	int err = 0;
	if (in->closed) {
		err = ECANCELED;
	} else if (in->path != NULL) {
		/* Its own descriptor, opened lazily from the same path; a
		 * second O_TRUNC or O_EXCL would wipe out or refuse the file
		 * the first channel made. */
		if (in->setup_done && in->err != 0) {
			err = in->err;
		} else {
			ch->path = strdup(in->path);
			if (ch->path == NULL)
				_sq_client_crash("sq_io_create_with_io",
						"out of memory");
			ch->oflag = in->oflag & ~(O_TRUNC | O_EXCL);
			ch->mode = in->mode;
		}
	} else if (!_sq_io_setup(in)) {
		err = in->err;
	} else if (ch->type == SQ_IO_RANDOM && !in->is_file) {
		err = ESPIPE; /* a pipe, socket or tty cannot seek */
	}
	ch->err = err;
	ch->from = NULL;
	if (err != 0 && ch->fde != NULL) {
		/* It never gets the descriptor: its cleanup need not wait
		 * for the others. */
		struct sq_io_fd_s *e = ch->fde;
		ch->fde = NULL;
		ch->fd = -1;
		__atomic_store_n(&ch->fd_pub, -1, __ATOMIC_RELAXED); /* value */
		_sq_io_fd_release(e);
	}
	bool own_q = ch->q != in->q;
	_sq_release_internal(in);
	/* The resume (a seq_cst update of the queue's state, then the
	 * queue's hand-off to a worker) orders the plain writes above before
	 * the new channel's own work, as any sq_async does. (A channel on a
	 * shared entry runs on this very queue: nothing to resume.) */
	if (own_q)
		sq_resume(ch->q);
	_sq_release_internal(ch);
}

sq_io_t
sq_io_create_with_io_f(sq_io_type_t type, sq_io_t in, sq_queue_t queue,
		void *ctx, sq_io_cleanup_function_t cleanup)
{
	_sq_object_validate("sq_io_create_with_io", in);
	if (in->obj.vtable != &_sq_io_vtable)
		_sq_client_crash("sq_io_create_with_io", "%s '%s' is not an "
				"I/O channel", in->obj.vtable->kind,
				_sq_object_label(in));
	/* A released channel may still be alive (operations pending): using
	 * it is the program's error all the same. Relaxed: a misuse check,
	 * as in _sq_object_validate. */
	if (__atomic_load_n(&in->obj.xref, __ATOMIC_RELAXED) <= 0)
		_sq_client_crash("sq_io_create_with_io", "%s '%s' was already "
				"released", in->obj.vtable->kind,
				_sq_object_label(in));
	if (type != SQ_IO_STREAM && type != SQ_IO_RANDOM) {
		errno = EINVAL;
		return NULL;
	}
	struct sq_io_s *ch;
	if (in->tabled) {
		/* The descriptor's entry: the first channel's while it is
		 * in use, so the same queue, and operations posted to the
		 * new channel run after _sq_io_attach and in issue order with
		 * the first channel's. (A fresh one if the first channel is
		 * done: then the attach finds it closed.) */
		struct sq_io_fd_s *e = _sq_io_fd_get(in->tfd);
		ch = _sq_io_alloc(type, queue, ctx, cleanup, e->q, 0);
		ch->fde = e;
		ch->fd = e->fd;
		ch->tabled = true;
		ch->tfd = e->fd;
		__atomic_store_n(&ch->fd_pub, e->fd, __ATOMIC_RELAXED);
	} else {
		ch = _sq_io_alloc(type, queue, ctx, cleanup, NULL, 0);
	}
	/* Operations wait on its own queue until _sq_io_attach resumes it. */
	if (ch->q != in->q)
		sq_suspend(ch->q);
	_sq_retain_internal(in); /* both released by _sq_io_attach */
	_sq_retain_internal(ch);
	ch->from = in;
	_sq_introspect_register(&ch->obj);
	sq_async_f(in->q, ch, _sq_io_attach);
	return ch;
}

/* ---- Sources (q) --------------------------------------------------------- */

static void
_sq_io_source_cancelled(void *ctx)
{
	struct sq_io_s *ch = ctx;
	ch->sources_live--;
	_sq_io_maybe_cleanup(ch);
	_sq_release_internal(ch);
}

/* The channel's interval timer. */
static sq_source_t
_sq_io_source(struct sq_io_s *ch, sq_source_type_t type, sq_function_t fn)
{
	sq_source_t s = sq_source_create(type, 0, 0, ch->q);
	if (s == NULL)
		return NULL;
	sq_set_context(s, ch);
	sq_source_set_event_handler_f(s, fn);
	sq_source_set_cancel_handler_f(s, _sq_io_source_cancelled);
	_sq_retain_internal(ch); /* released by the cancel handler */
	ch->sources_live++;
	return s;
}

void
_sq_io_source_drop(sq_source_t *sp, bool *on)
{
	sq_source_t s = *sp;
	if (s == NULL)
		return;
	sq_source_cancel(s);
	if (!*on)
		sq_resume(s); /* a suspended source cancels on resume */
	sq_release(s);
	*sp = NULL;
	*on = false;
}

void
_sq_io_source_set(sq_source_t s, bool *on, bool want)
{
	if (want == *on)
		return;
	*on = want;
	if (want)
		sq_resume(s);
	else
		sq_suspend(s);
}

/* ---- Operation lists (q) ------------------------------------------------ */

/* Takes the first operation off a list. */
struct sq_io_op_s *
_sq_io_list_pop(struct sq_io_op_s **head, struct sq_io_op_s **tail)
{
	struct sq_io_op_s *op = *head;
	*head = op->next;
	if (*head == NULL)
		*tail = NULL;
	return op;
}

static void
_sq_io_list_push(struct sq_io_op_s **head, struct sq_io_op_s **tail,
		struct sq_io_op_s *op)
{
	op->next = NULL;
	if (*tail)
		(*tail)->next = op;
	else
		*head = op;
	*tail = op;
}

/* Ends every operation of `ch` in a list with ECANCELED, but the first
 * one if `keep_first` (it is on the I/O threads). */
static void
_sq_io_list_cancel(struct sq_io_op_s **head, struct sq_io_op_s **tail,
		struct sq_io_s *ch, bool keep_first)
{
	struct sq_io_op_s *keep = NULL, *keep_tail = NULL, *gone = NULL;
	struct sq_io_op_s *op = *head;
	bool first = true;
	while (op) {
		struct sq_io_op_s *next = op->next;
		if (op->ch == ch && !(first && keep_first)) {
			op->next = gone;
			gone = op;
		} else {
			_sq_io_list_push(&keep, &keep_tail, op);
		}
		first = false;
		op = next;
	}
	*head = keep;
	*tail = keep_tail;
	/* Newest first: reverse, to end them in issue order. */
	struct sq_io_op_s *order = NULL;
	while (gone) {
		struct sq_io_op_s *next = gone->next;
		gone->next = order;
		order = gone;
		gone = next;
	}
	while ((op = order) != NULL) {
		order = op->next;
		_sq_io_op_finish(op, ECANCELED, true);
	}
}

/* ---- Starting operations (q) ------------------------------------------- */

static void
_sq_io_start(struct sq_io_op_s *op)
{
	struct sq_io_s *ch = op->ch;
	int err = 0;
	if (ch->stopped)
		err = ECANCELED;
	else if (!_sq_io_setup(ch))
		err = ch->err;
	else if (op->kind == SQ_IO_OP_READ && !ch->can_read)
		err = EBADF;
	else if (op->kind == SQ_IO_OP_WRITE && !ch->can_write)
		err = EBADF;
	if (err != 0) {
		_sq_io_op_finish(op, err, false);
		return;
	}
	op->aprev = NULL;
	op->anext = ch->active;
	if (ch->active)
		ch->active->aprev = op;
	ch->active = op;
	ch->nactive++;
	struct sq_io_fd_s *e = ch->fde;
	if (ch->is_file) {
		if (ch->type == SQ_IO_RANDOM) {
			_sq_io_file_submit(op);
		} else {
			/* Stream ops on a file, from every channel on it: one
			 * at a time, in order (they share the position). */
			bool first = e->file_head == NULL;
			_sq_io_list_push(&e->file_head, &e->file_tail, op);
			if (first)
				_sq_io_file_submit(op);
		}
		return;
	}
	if (op->kind == SQ_IO_OP_READ) {
		bool first = e->rd_head == NULL;
		_sq_io_list_push(&e->rd_head, &e->rd_tail, op);
		/* Read directly only while no source exists (io_stream.c);
		 * after end of file the source never fires again. */
		if (first && (e->rs == NULL || e->rd_eof))
			_sq_io_stream_read(e);
		else if (first)
			_sq_io_source_set(e->rs, &e->rs_on, true);
	} else {
		bool first = e->wr_head == NULL;
		_sq_io_list_push(&e->wr_head, &e->wr_tail, op);
		if (first)
			_sq_io_stream_write(e);
	}
}

/* Starts waiting operations until a barrier must wait. Finishing an
 * operation pumps its channel again: a nested call only asks this one to
 * go round once more. */
void
_sq_io_pump(struct sq_io_s *ch)
{
	if (ch->pumping) {
		ch->pump_again = true;
		return;
	}
	ch->pumping = true;
	_sq_retain_internal(ch); /* finishing may drop the last reference */
	do {
		ch->pump_again = false;
		_sq_io_pump_once(ch);
	} while (ch->pump_again);
	ch->pumping = false;
	_sq_io_maybe_cleanup(ch);
	_sq_release_internal(ch);
}

static void
_sq_io_pump_once(struct sq_io_s *ch)
{
	struct sq_io_op_s *op;
	while ((op = ch->wait_head) != NULL) {
		if (op->kind == SQ_IO_OP_BARRIER && ch->nactive > 0)
			break;
		if (!_sq_io_ready(ch))
			break; /* waiting for an open-file slot */
		ch->wait_head = op->next;
		if (ch->wait_head == NULL)
			ch->wait_tail = NULL;
		if (op->kind == SQ_IO_OP_BARRIER) {
			/* The barrier may want the descriptor: open it. */
			if (!ch->stopped)
				(void)_sq_io_setup(ch);
			op->barrier(op->ctx);
			free(op);
			_sq_release_internal(ch);
			continue;
		}
		_sq_io_start(op);
	}
}

static void
_sq_io_enqueue(void *ctx)
{
	struct sq_io_op_s *op = ctx;
	struct sq_io_s *ch = op->ch;
	op->next = NULL;
	if (ch->closed && op->kind != SQ_IO_OP_BARRIER) {
		/* Issued after sq_io_close. */
		_sq_io_op_finish(op, ECANCELED, false);
		return;
	}
	if (op->kind == SQ_IO_OP_READ && op->length == 0) {
		_sq_io_op_finish(op, 0, false); /* nothing to wait for */
		return;
	}
	if (ch->wait_tail)
		ch->wait_tail->next = op;
	else
		ch->wait_head = op;
	ch->wait_tail = op;
	if (ch->wait_head == op) {
		/* The pump may finish `op` and with it the channel's last
		 * reference: hold it. */
		_sq_retain_internal(ch);
		_sq_io_pump(ch);
		_sq_release_internal(ch);
	}
}

static struct sq_io_op_s *
_sq_io_op_new(struct sq_io_s *ch, enum sq_io_op_kind kind, sq_queue_t queue,
		void *ctx)
{
	struct sq_io_op_s *op = calloc(1, sizeof(*op));
	if (op == NULL)
		_sq_client_crash("sq_io", "out of memory");
	op->ch = ch;
	op->kind = kind;
	op->ctx = ctx;
	_sq_retain_internal(ch); /* released by _sq_io_op_free */
	if (kind != SQ_IO_OP_BARRIER) {
		/* Calls of one operation must not overlap: a serial queue,
		 * the program's own when it is one, else one made on it
		 * when a second call is due (see _sq_io_deliver). */
		sq_retain(queue);
		if (_sq_queue_is_serial(queue))
			op->dq = queue;
		else
			op->tq = queue;
	}
	return op;
}

void
_sq_io_read(sq_io_t ch, off_t offset, size_t length, sq_queue_t queue,
		void *ctx, sq_io_handler_function_t handler, bool partial)
{
	_sq_object_validate("sq_io_read", ch);
	_sq_object_validate("sq_io_read", queue);
	_SQ_REQUIRE_FUNCTION("sq_io_read", handler);
	struct sq_io_op_s *op = _sq_io_op_new(ch, SQ_IO_OP_READ, queue, ctx);
	op->handler = handler;
	op->offset = offset;
	op->length = length;
	op->pending = sq_data_empty;
	op->partial = partial;
	sq_async_f(ch->q, op, _sq_io_enqueue);
}

void
sq_io_read_f(sq_io_t ch, off_t offset, size_t length, sq_queue_t queue,
		void *ctx, sq_io_handler_function_t handler)
{
	_sq_io_read(ch, offset, length, queue, ctx, handler, false);
}

void
sq_io_write_f(sq_io_t ch, off_t offset, sq_data_t data, sq_queue_t queue,
		void *ctx, sq_io_handler_function_t handler)
{
	_sq_object_validate("sq_io_write", ch);
	_sq_object_validate("sq_io_write", queue);
	_sq_object_validate("sq_io_write", data);
	_SQ_REQUIRE_FUNCTION("sq_io_write", handler);
	struct sq_io_op_s *op = _sq_io_op_new(ch, SQ_IO_OP_WRITE, queue, ctx);
	op->handler = handler;
	op->offset = offset;
	sq_retain(data);
	op->pending = data;
	sq_async_f(ch->q, op, _sq_io_enqueue);
}

void
sq_io_barrier_f(sq_io_t ch, void *ctx, sq_function_t barrier)
{
	_sq_object_validate("sq_io_barrier", ch);
	_SQ_REQUIRE_FUNCTION("sq_io_barrier", barrier);
	struct sq_io_op_s *op = _sq_io_op_new(ch, SQ_IO_OP_BARRIER, NULL, ctx);
	op->barrier = barrier;
	sq_async_f(ch->q, op, _sq_io_enqueue);
}

/* ---- Interval timer (q) ------------------------------------------------ */

static void
_sq_io_tick(void *ctx)
{
	struct sq_io_s *ch = ctx;
	if (ch->cleaning)
		return;
	for (struct sq_io_op_s *op = ch->active; op; op = op->anext) {
		/* A write on the I/O threads only reads op->pending there:
		 * reporting it (a retain) does not race. */
		if (op->kind == SQ_IO_OP_READ)
			_sq_io_read_progress(op, true);
		else if (op->kind == SQ_IO_OP_WRITE)
			_sq_io_write_progress(op, true);
	}
}

static void
_sq_io_update_timer(void *ctx)
{
	struct sq_io_s *ch = ctx;
	uint64_t interval = __atomic_load_n(&ch->interval, __ATOMIC_RELAXED);
	if (!ch->cleaning && interval != ch->timer_interval) {
		ch->timer_interval = interval;
		if (ch->timer != NULL && interval == 0) {
			bool on = true;
			_sq_io_source_drop(&ch->timer, &on);
		} else if (interval != 0) {
			if (ch->timer == NULL) {
				ch->timer = _sq_io_source(ch,
						SQ_SOURCE_TYPE_TIMER, _sq_io_tick);
				sq_activate(ch->timer);
			}
			sq_source_set_timer(ch->timer,
					sq_time(SQ_TIME_NOW, (int64_t)interval),
					interval, interval / 10);
		}
	}
	_sq_release_internal(ch);
}

/* ---- Close and cleanup (q) --------------------------------------------- */

void
_sq_io_cleanup_run(void *ctx)
{
	struct sq_io_s *ch = ctx;
	if (ch->cleanup)
		ch->cleanup(ch->cleanup_ctx, ch->err);
	_sq_release_internal(ch);
}

static void
_sq_io_maybe_cleanup(struct sq_io_s *ch)
{
	if (!ch->closed || ch->nactive > 0 || ch->wait_head != NULL)
		return;
	if (!ch->cleaning) {
		ch->cleaning = true;
		bool on = true;
		_sq_io_source_drop(&ch->timer, &on);
	}
	if (ch->sources_live > 0 || ch->cleaned)
		return;
	ch->cleaned = true;
	/* A slot it waited for (stopped in line) or never used goes back. */
	if (ch->slot_wait && _sq_io_slot_cancel(ch))
		ch->slot_wait = false;
	if (ch->slot_held) {
		ch->slot_held = false;
		_sq_io_slot_put();
	}
	__atomic_store_n(&ch->fd_pub, -1, __ATOMIC_RELAXED); /* a value */
	_sq_retain_internal(ch); /* released by _sq_io_cleanup_run */
	/* Every source has let go of the descriptor: hand it back, once
	 * every channel sharing it is done too. */
	if (ch->fde != NULL)
		_sq_io_fd_detach(ch);
	else
		_sq_io_cleanup_ready(ch);
}

static void
_sq_io_close_on_q(void *ctx)
{
	struct sq_io_s *ch = ctx;
	ch->closed = true;
	_sq_io_maybe_cleanup(ch);
	_sq_release_internal(ch);
}

static void
_sq_io_stop_on_q(void *ctx)
{
	struct sq_io_s *ch = ctx;
	ch->closed = true;
	ch->stopped = true;
	_sq_retain_internal(ch); /* finishing may drop the last reference */
	ch->pumping = true; /* once, at the end */
	for (struct sq_io_op_s *op = ch->active; op; op = op->anext)
		op->stop = true; /* on the I/O threads: ends when back */
	struct sq_io_fd_s *e = ch->fde;
	if (e != NULL && ch->setup_done) {
		/* Its operations in the entry's lists (other channels' stay):
		 * they end now, but one in flight on a file, which ends when
		 * it comes back. */
		_sq_io_list_cancel(&e->rd_head, &e->rd_tail, ch, false);
		_sq_io_list_cancel(&e->wr_head, &e->wr_tail, ch, false);
		_sq_io_list_cancel(&e->file_head, &e->file_tail, ch,
				e->file_head != NULL && e->file_head->inflight);
		if (e->rs)
			_sq_io_source_set(e->rs, &e->rs_on, e->rd_head != NULL);
		if (e->ws)
			_sq_io_source_set(e->ws, &e->ws_on, e->wr_head != NULL);
	}
	ch->pumping = false;
	_sq_io_pump(ch);
	_sq_release_internal(ch);
	_sq_release_internal(ch);
}

void
sq_io_close(sq_io_t ch, sq_io_close_flags_t flags)
{
	_sq_object_validate("sq_io_close", ch);
	/* Relaxed: only whether a close was posted (see the last release). */
	if (__atomic_exchange_n(&ch->close_posted, true, __ATOMIC_RELAXED) &&
			!(flags & SQ_IO_STOP))
		return; /* closing already: nothing more to do */
	_sq_io_close_post(ch, (flags & SQ_IO_STOP) ? _sq_io_stop_on_q
			: _sq_io_close_on_q);
}

/* ---- fork ------------------------------------------------------------------ */

/* fork() child (fork.c): the I/O threads are gone and their locks may have
 * been held; the channels made before fork() are unusable (fork_bound).
 * The thread pool and the open-file slots start afresh. */
void
_sq_io_atfork_child(void)
{
	_sq_io_threads_atfork_child();
	/* The parent's channel queues may be in the middle of a drain by a
	 * thread the child does not have: forget them (not freed). */
	pthread_mutex_init(&_sq_io_queues.lock, NULL);
	_sq_io_queues.count = 0;
	_sq_io_fds_atfork_child();
}
