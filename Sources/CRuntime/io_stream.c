/*
 * SwiftQueues — I/O channels: stream reads and writes on the event loop.
 *
 * Streams (pipes, sockets, ttys) use one READ and one WRITE source per
 * descriptor entry (io_fd.c), created on first need and suspended while
 * their direction has nothing to do. Each direction works through its
 * entry's list, in order, a bounded number of system calls per run.
 * A read source reports end of file by delivering once and not re-arming,
 * so once it exists only its handler reads: a direct read could drain the
 * descriptor between an event and its handler, which would then look like
 * end of file and never be re-armed. Writes have no such trap and are
 * tried at once.
 */
#include "io_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* ---- Read and write sources (q) ---------------------------------------- */

static void
_sq_io_fd_source_cancelled(void *ctx)
{
	struct sq_io_fd_s *e = ctx;
	e->sources_live--;
	_sq_io_fd_maybe_final(e);
}

/* A READ or WRITE source of the entry: the entry outlives it (it goes
 * only once every cancel handler has run). */
static sq_source_t
_sq_io_fd_source(struct sq_io_fd_s *e, sq_source_type_t type,
		sq_function_t fn)
{
	sq_source_t s = sq_source_create(type, (uintptr_t)e->fd, 0, e->q);
	if (s == NULL)
		return NULL;
	sq_set_context(s, e);
	sq_source_set_event_handler_f(s, fn);
	sq_source_set_cancel_handler_f(s, _sq_io_fd_source_cancelled);
	e->sources_live++;
	return s;
}

static void
_sq_io_rs_event(void *ctx)
{
	struct sq_io_fd_s *e = ctx;
	if (e->rs != NULL)
		_sq_io_stream_read(e);
}

static void
_sq_io_ws_event(void *ctx)
{
	struct sq_io_fd_s *e = ctx;
	if (e->ws != NULL)
		_sq_io_stream_write(e);
}

/* ---- Stream reads (q) --------------------------------------------------- */

static void
_sq_io_stream_read_done(struct sq_io_fd_s *e, int error)
{
	struct sq_io_op_s *op = _sq_io_list_pop(&e->rd_head, &e->rd_tail);
	_sq_io_op_finish(op, error, true);
}

/* Reads for the entry's read list, in order. Finishing an operation may
 * start the next one of its channel, which appends to the list and calls
 * here again: that call returns at once, and this loop goes on with it. */
void
_sq_io_stream_read(struct sq_io_fd_s *e)
{
	if (e->reading)
		return;
	e->reading = true;
	bool wait = false;
	int budget = SQ_IO_STREAM_BUDGET;
	struct sq_io_op_s *op;
	while ((op = e->rd_head) != NULL) {
		if (e->rd_eof && e->rs != NULL) {
			/* The read source will not fire again: end of file for
			 * every later read too (pipes and sockets stay there). */
			_sq_io_stream_read_done(e, 0);
			continue;
		}
		if (budget-- == 0)
			break; /* level-triggered: the source fires again */
		size_t want = op->length < SQ_IO_READ_CHUNK ? op->length
				: SQ_IO_READ_CHUNK;
		char *buf = malloc(want);
		if (buf == NULL)
			_sq_client_crash("sq_io_read", "out of memory");
		ssize_t n = read(e->fd, buf, want);
		if (n > 0) {
			if ((size_t)n < want / 4 && n < 4096) {
				/* Small: keep only what came. */
				char *small = realloc(buf, (size_t)n);
				if (small)
					buf = small;
			}
			sq_data_t d = sq_data_create_f(buf, (size_t)n, NULL,
					SQ_DATA_DESTRUCTOR_FREE);
			/* Amortised O(1): appends to pending's range list. */
			sq_data_t all = sq_data_create_concat(op->pending, d);
			sq_release(d);
			sq_release(op->pending);
			op->pending = all;
			if (op->length != SIZE_MAX)
				op->length -= (size_t)n;
			if (op->length == 0)
				_sq_io_stream_read_done(e, 0);
			else
				_sq_io_read_progress(op, false);
			continue;
		}
		int err = n == 0 ? 0 : errno;
		free(buf);
		if (n == 0) {
			e->rd_eof = true;
			_sq_io_stream_read_done(e, 0);
			continue;
		}
		if (err == EINTR)
			continue;
		if (err == EAGAIN || err == EWOULDBLOCK) {
			if (op->partial && sq_data_get_size(op->pending) > 0) {
				/* sq_read: what is there, as libdispatch. */
				_sq_io_stream_read_done(e, 0);
				continue;
			}
			if (e->rs != NULL && e->rs_on &&
					sq_source_get_data(e->rs) == 0) {
				/* The source took this for end of file and
				 * will not re-arm: make a fresh one. */
				_sq_io_source_drop(&e->rs, &e->rs_on);
			}
			wait = true;
			break;
		}
		if (err == EBADF && op->ch->err == 0)
			op->ch->err = err;
		_sq_io_stream_read_done(e, err);
	}
	if (e->rd_head != NULL && !wait && budget < 0 && e->rs == NULL)
		wait = true; /* first pass, data left: let the source see it */
	if (wait && e->rs == NULL) {
		e->rs = _sq_io_fd_source(e, SQ_SOURCE_TYPE_READ,
				_sq_io_rs_event);
		if (e->rs == NULL) {
			int err = errno;
			while (e->rd_head)
				_sq_io_stream_read_done(e, err);
		} else {
			e->rs_on = true;
			sq_activate(e->rs);
		}
	} else if (e->rs != NULL) {
		_sq_io_source_set(e->rs, &e->rs_on, e->rd_head != NULL);
	}
	e->reading = false;
}

/* ---- Stream writes (q) ------------------------------------------------- */

bool
_sq_io_collect(void *ctx, sq_data_t region, size_t offset, const void *buf,
		size_t size)
{
	struct sq_iov_s *v = ctx;
	size_t take = v->limit - v->bytes;
	if (size < take)
		take = size;
	v->iov[v->count].iov_base = (void *)buf;
	v->iov[v->count].iov_len = take;
	v->count++;
	v->bytes += take;
	return v->count < SQ_IO_IOV && v->bytes < v->limit;
}

/* writev that reports EPIPE instead of raising SIGPIPE. */
ssize_t
_sq_io_writev(int fd, bool is_sock, struct iovec *iov, int count)
{
	if (is_sock) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)count };
		ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (n >= 0 || errno != ENOTSOCK)
			return n;
	}
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	ssize_t n = writev(fd, iov, count);
	int e = errno;
	if (n < 0 && e == EPIPE) {
		/* Take the SIGPIPE this raised (unless one was already
		 * pending before we blocked it: then leave it). */
		sigset_t pend;
		sigpending(&pend);
		if (sigismember(&pend, SIGPIPE) && !sigismember(&old, SIGPIPE)) {
			struct timespec zero = { 0, 0 };
			sigtimedwait(&pipe_set, NULL, &zero);
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return n;
}

static void
_sq_io_stream_write_done(struct sq_io_fd_s *e, int error)
{
	struct sq_io_op_s *op = _sq_io_list_pop(&e->wr_head, &e->wr_tail);
	_sq_io_op_finish(op, error, true);
}

/* Writes the entry's write list, in order (re-entered as reads are). */
void
_sq_io_stream_write(struct sq_io_fd_s *e)
{
	if (e->writing)
		return;
	e->writing = true;
	bool wait = false;
	int budget = SQ_IO_STREAM_BUDGET;
	struct sq_io_op_s *op;
	while ((op = e->wr_head) != NULL) {
		if (sq_data_get_size(op->pending) == 0) {
			_sq_io_stream_write_done(e, 0);
			continue;
		}
		if (budget-- == 0) {
			wait = true; /* the write source fires while writable */
			break;
		}
		struct sq_iov_s v = { .count = 0,
				.limit = _sq_io_write_room(op) };
		sq_data_apply_f(op->pending, &v, _sq_io_collect);
		ssize_t n = _sq_io_writev(e->fd, op->ch->is_sock, v.iov,
				v.count);
		if (n >= 0) {
			sq_data_t rest = sq_data_create_subrange(op->pending,
					(size_t)n, SIZE_MAX);
			sq_release(op->pending);
			op->pending = rest;
			_sq_io_write_moved(op, (size_t)n);
			continue;
		}
		int err = errno;
		if (err == EINTR)
			continue;
		if (err == EAGAIN || err == EWOULDBLOCK) {
			wait = true;
			break;
		}
		if (err == EBADF && op->ch->err == 0)
			op->ch->err = err;
		_sq_io_stream_write_done(e, err);
	}
	if (wait && e->ws == NULL) {
		e->ws = _sq_io_fd_source(e, SQ_SOURCE_TYPE_WRITE,
				_sq_io_ws_event);
		if (e->ws == NULL) {
			int err = errno;
			while (e->wr_head)
				_sq_io_stream_write_done(e, err);
		} else {
			e->ws_on = true;
			sq_activate(e->ws);
		}
	} else if (e->ws != NULL) {
		_sq_io_source_set(e->ws, &e->ws_on, e->wr_head != NULL);
	}
	e->writing = false;
}

