/*
 * SwiftQueues — I/O channels: sq_read and sq_write.
 *
 * Each call makes a stream channel on the descriptor (sharing its entry
 * with every other channel on it, so calls on one descriptor run in the
 * order they were made), issues one operation and lets the channel go from
 * its last handler call. The program's handler is called once, from the
 * channel's cleanup handler, when the descriptor is the caller's again.
 */
#include "io_internal.h"

#include <stdlib.h>

/* ---- sq_read / sq_write ----------------------------------------------- */

struct sq_io_simple_s {
	sq_io_t ch;
	void *ctx;
	sq_read_function_t rfn;
	sq_write_function_t wfn;
	sq_data_t data;
	int error;
};

static void
_sq_io_simple_cleanup(void *ctx, int error)
{
	struct sq_io_simple_s *s = ctx;
	/* The descriptor is the caller's again: now tell them. */
	if (s->rfn)
		s->rfn(s->ctx, s->data, s->error ? s->error : error);
	else
		s->wfn(s->ctx, s->data, s->error ? s->error : error);
	if (s->data)
		sq_release(s->data);
	free(s);
}

static void
_sq_io_simple_read(void *ctx, bool done, sq_data_t data, int error)
{
	struct sq_io_simple_s *s = ctx;
	sq_data_t all = sq_data_create_concat(s->data, data);
	sq_release(s->data);
	s->data = all;
	if (done) {
		s->error = error;
		sq_release(s->ch); /* closes; the cleanup reports */
	}
}

static void
_sq_io_simple_write(void *ctx, bool done, sq_data_t data, int error)
{
	struct sq_io_simple_s *s = ctx;
	if (done) {
		s->error = error;
		if (data)
			sq_retain(data);
		s->data = data;
		sq_release(s->ch);
	}
}

static struct sq_io_simple_s *
_sq_io_simple(sq_fd_t fd, sq_queue_t queue, void *ctx)
{
	struct sq_io_simple_s *s = calloc(1, sizeof(*s));
	if (s == NULL)
		_sq_client_crash("sq_read", "out of memory");
	s->ctx = ctx;
	s->ch = sq_io_create_f(SQ_IO_STREAM, fd, queue, s,
			_sq_io_simple_cleanup);
	return s;
}

void
sq_read_f(sq_fd_t fd, size_t length, sq_queue_t queue, void *ctx,
		sq_read_function_t handler)
{
	_SQ_REQUIRE_FUNCTION("sq_read", handler);
	_sq_object_validate("sq_read", queue);
	struct sq_io_simple_s *s = _sq_io_simple(fd, queue, ctx);
	s->rfn = handler;
	s->data = sq_data_empty;
	/* One handler call with everything: the channel gathers (no
	 * delivery before the end), and a stream read ends with what is
	 * there when the descriptor would block. */
	sq_io_set_low_water(s->ch, SIZE_MAX);
	_sq_io_read(s->ch, 0, length, queue, s, _sq_io_simple_read, true);
}

void
sq_write_f(sq_fd_t fd, sq_data_t data, sq_queue_t queue, void *ctx,
		sq_write_function_t handler)
{
	_SQ_REQUIRE_FUNCTION("sq_write", handler);
	_sq_object_validate("sq_write", queue);
	struct sq_io_simple_s *s = _sq_io_simple(fd, queue, ctx);
	s->wfn = handler;
	/* Its handler reports once: spare the progress calls (high water
	 * stays SIZE_MAX, so none is due). */
	sq_io_set_low_water(s->ch, SIZE_MAX);
	sq_io_write_f(s->ch, 0, data, queue, s, _sq_io_simple_write);
}

