/*
 * SwiftQueues — I/O channels: the I/O threads and file operations.
 *
 * Regular files (random-access channels, and stream channels that turn out
 * to be files) go to the I/O threads: a small fixed set (SQ_IO_THREADS,
 * default 4), started on first use, doing one pread / pwrite chunk per job
 * and posting the result back to the channel's queue (on a worker when no
 * I/O thread can be started). The first chunk of a
 * small file (SQ_IO_INLINE_MAX) runs on q instead (_sq_io_file_submit).
 * Stream operations on a file, from every channel sharing its descriptor,
 * go one at a time, in order: they share the file position.
 */
#include "io_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/uio.h>

/* ---- The I/O threads ---------------------------------------------------- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct sq_io_op_s *head, *tail;
	int threads;
	int idle;
	int max;
} _sq_io_pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static void _sq_io_file_result(void *ctx);

/* One chunk of `op`, on an I/O thread: blocking is fine here. */
static void
_sq_io_file_chunk(struct sq_io_op_s *op)
{
	struct sq_io_s *ch = op->ch;
	bool positional = ch->type == SQ_IO_RANDOM;
	op->chunk_buf = NULL;
	op->chunk_errno = 0;
	/* Checked: where the chunk goes, and how far it may go, must be
	 * offsets (no negative offset, nothing past OFF_MAX). */
	off_t at = 0;
	size_t room = SQ_IO_FILE_CHUNK;
	if (positional) {
		if (op->offset < 0 || __builtin_add_overflow(ch->base,
				op->offset, &at)) {
			op->chunk_n = -1;
			op->chunk_errno = op->offset < 0 ? EINVAL : EOVERFLOW;
			return;
		}
		uint64_t left = (uint64_t)(INT64_MAX - (int64_t)at);
		if (left < room)
			room = (size_t)left;
	}
	if (op->kind == SQ_IO_OP_READ) {
		size_t full = op->length < room ? op->length : room;
		/* The first chunk is sized to the file (its size at setup,
		 * plus one byte to see the end): a small file is read whole,
		 * end of file included, in one job, without a 1 MiB buffer.
		 * If the file has grown since, the buffer grows to a full
		 * chunk below. */
		size_t want = full;
		if (!op->chunked && want > ch->size_hint)
			want = ch->size_hint;
		size_t at_end = op->chunked ? SIZE_MAX : op->at_end;
		op->chunked = true;
		char *buf = malloc(want ? want : 1);
		if (buf == NULL)
			_sq_client_crash("sq_io_read", "out of memory");
		size_t got = 0;
		int err = 0;
		op->chunk_eof = false;
		while (got < want) {
			/* at + got <= at + room <= OFF_MAX: no overflow. */
			ssize_t n = positional ? pread(ch->fd, buf + got,
					want - got, at + (off_t)got)
					: read(ch->fd, buf + got, want - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				err = errno;
				break;
			}
			if (n == 0) {
				op->chunk_eof = true;
				break;
			}
			got += (size_t)n;
			if (got == at_end && got < want) {
				/* Exactly the size the file had at setup, and a
				 * short read: its end, without a read for it
				 * (a file grown since fills the spare byte). */
				op->chunk_eof = true;
				break;
			}
			if (got == want && want < full) {
				char *more = realloc(buf, full);
				if (more == NULL)
					_sq_client_crash("sq_io_read",
							"out of memory");
				buf = more;
				want = full;
			}
		}
		if (got > 0) {
			/* The bytes now; an error comes again next time. */
			op->chunk_n = (ssize_t)got;
			if (got < want / 2) {
				char *small = realloc(buf, got);
				if (small)
					buf = small;
			}
		} else {
			op->chunk_n = err ? -1 : 0;
			op->chunk_errno = err;
			free(buf);
			buf = NULL;
		}
		op->chunk_buf = buf;
	} else {
		op->chunked = true;
		if (room == 0) {
			op->chunk_n = -1;
			op->chunk_errno = EOVERFLOW; /* would end past OFF_MAX */
			return;
		}
		struct sq_iov_s v = { .count = 0, .limit = op->chunk_max < room
				? op->chunk_max : room };
		sq_data_apply_f(op->pending, &v, _sq_io_collect);
		ssize_t n;
		do {
			n = positional ? pwritev(ch->fd, v.iov, v.count, at)
					: _sq_io_writev(ch->fd, ch->is_sock,
					v.iov, v.count);
		} while (n < 0 && errno == EINTR);
		op->chunk_n = n;
		if (n < 0)
			op->chunk_errno = errno;
	}
}

/* Runs one chunk of `op` and posts the result to its channel's queue. */
static void
_sq_io_chunk_job(void *ctx)
{
	struct sq_io_op_s *op = ctx;
	_sq_io_file_chunk(op);
	/* Hold the channel's queue across the post: once the result runs,
	 * the channel (and the queue) may go at any moment. */
	sq_queue_t q = op->ch->q;
	sq_retain(q);
	sq_async_f(q, op, _sq_io_file_result);
	sq_release(q);
}

static void *
_sq_io_thread(void *arg)
{
	pthread_setname_np(pthread_self(), "swiftqueues-io");
	pthread_mutex_lock(&_sq_io_pool.lock);
	for (;;) {
		struct sq_io_op_s *op = _sq_io_pool.head;
		if (op == NULL) {
			/* Idle for 5 s: retire, so an idle process keeps no
			 * I/O threads (the next operation starts one again). */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 5;
			_sq_io_pool.idle++;
			int r = pthread_cond_timedwait(&_sq_io_pool.cond,
					&_sq_io_pool.lock, &until);
			_sq_io_pool.idle--;
			if (r == ETIMEDOUT && _sq_io_pool.head == NULL) {
				_sq_io_pool.threads--;
				break;
			}
			continue;
		}
		_sq_io_pool.head = op->pnext;
		if (_sq_io_pool.head == NULL)
			_sq_io_pool.tail = NULL;
		pthread_mutex_unlock(&_sq_io_pool.lock);
		_sq_io_chunk_job(op);
		pthread_mutex_lock(&_sq_io_pool.lock);
	}
	pthread_mutex_unlock(&_sq_io_pool.lock);
	return NULL;
}

static void
_sq_io_pool_push(struct sq_io_op_s *op)
{
	op->pnext = NULL;
	pthread_mutex_lock(&_sq_io_pool.lock);
	if (_sq_io_pool.max == 0) {
		const char *env = getenv("SQ_IO_THREADS");
		int n = env ? atoi(env) : 4;
		_sq_io_pool.max = n < 1 ? 1 : n > 64 ? 64 : n;
	}
	/* A new thread when none is idle. The system may refuse it (no
	 * thread to spare even after the worker pool gave one back,
	 * _sq_thread_start): with no I/O thread at all, the chunk runs on a
	 * worker instead, where blocking compensation covers the wait; the
	 * next operation asks for a thread again. */
	if (_sq_io_pool.idle == 0 && _sq_io_pool.threads < _sq_io_pool.max) {
		if (_sq_thread_start(_sq_io_thread, NULL, 256 * 1024) == 0) {
			_sq_io_pool.threads++;
		} else if (_sq_io_pool.threads == 0) {
			pthread_mutex_unlock(&_sq_io_pool.lock);
			sq_async_f(sq_get_global_queue(
					SQ_QUEUE_PRIORITY_DEFAULT, 0), op,
					_sq_io_chunk_job);
			return;
		}
	}
	if (_sq_io_pool.tail)
		_sq_io_pool.tail->pnext = op;
	else
		_sq_io_pool.head = op;
	_sq_io_pool.tail = op;
	pthread_cond_signal(&_sq_io_pool.cond);
	pthread_mutex_unlock(&_sq_io_pool.lock);
}

/* ---- File operations (q) ------------------------------------------------ */

/*
 * Sends one chunk of `op` to the I/O threads, or runs it here, on q: the
 * first chunk of a read of a file of at most SQ_IO_INLINE_MAX bytes (its
 * size at setup), or of a write of at most that many, is one page-cache
 * copy, cheaper than the two thread hand-offs to an I/O thread and back;
 * so a small file is read whole, end of file included, with no hop. Not
 * when already running one here (the next operation in a list goes to the
 * I/O threads instead of deepening the stack).
 */
void
_sq_io_file_submit(struct sq_io_op_s *op)
{
	struct sq_io_s *ch = op->ch;
	op->inflight = true;
	if (op->kind == SQ_IO_OP_WRITE) /* the pool's lock publishes it */
		op->chunk_max = _sq_io_write_room(op);
	if (!op->chunked) {
		/* The size is where the end is for a read from position 0:
		 * the first operation of a stream channel, or one at offset
		 * 0 of a random one. Anything else moves the position (or
		 * may change the file) first: not known from then on. */
		op->at_end = op->kind == SQ_IO_OP_READ &&
				(ch->type == SQ_IO_RANDOM ? op->offset == 0 :
				true) ? ch->file_size : SIZE_MAX;
		if (ch->type == SQ_IO_STREAM || op->kind == SQ_IO_OP_WRITE)
			ch->file_size = SIZE_MAX;
	}
	bool small = op->kind == SQ_IO_OP_READ
			? ch->size_hint <= SQ_IO_INLINE_MAX + 1
			: sq_data_get_size(op->pending) <= SQ_IO_INLINE_MAX;
	struct sq_io_fd_s *e = ch->fde;
	if (small && !op->chunked && e != NULL && !e->inline_busy) {
		/* As if pumping: the channel (and so the entry) cannot reach
		 * its cleanup before we are out; pump after, if we were not
		 * pumping already. */
		bool was_pumping = ch->pumping;
		_sq_retain_internal(ch);
		ch->pumping = true;
		e->inline_busy = true;
		_sq_io_file_chunk(op);
		_sq_io_file_result(op);
		e->inline_busy = false;
		ch->pumping = was_pumping;
		if (!was_pumping)
			_sq_io_pump(ch);
		_sq_release_internal(ch);
		return;
	}
	_sq_io_pool_push(op);
}

/* Removes a finished stream-on-file op from the head of its entry's list
 * and sends the next one. */
static void
_sq_io_file_next(struct sq_io_s *ch)
{
	if (ch->type != SQ_IO_STREAM)
		return;
	struct sq_io_fd_s *e = ch->fde;
	(void)_sq_io_list_pop(&e->file_head, &e->file_tail);
	if (e->file_head)
		_sq_io_file_submit(e->file_head);
}

static void
_sq_io_file_result(void *ctx)
{
	struct sq_io_op_s *op = ctx;
	struct sq_io_s *ch = op->ch;
	/* Finishing `op` may drop what was the channel's last reference
	 * (the program released it): hold it until we are done with it. */
	_sq_retain_internal(ch);
	op->inflight = false;
	ssize_t n = op->chunk_n;
	int err = 0;
	bool done = false;
	size_t moved = 0; /* writes */
	if (op->kind == SQ_IO_OP_READ) {
		if (n > 0) {
			sq_data_t d = sq_data_create_f(op->chunk_buf, (size_t)n,
					NULL, SQ_DATA_DESTRUCTOR_FREE);
			sq_data_t all = sq_data_create_concat(op->pending, d);
			sq_release(d);
			sq_release(op->pending);
			op->pending = all;
			if (ch->type == SQ_IO_RANDOM)
				op->offset += n; /* <= OFF_MAX - base */
			if (op->length != SIZE_MAX)
				op->length -= (size_t)n;
			done = op->length == 0 || op->chunk_eof;
		} else {
			done = true;
			err = n < 0 ? op->chunk_errno : 0;
		}
	} else {
		if (n >= 0) {
			sq_data_t rest = sq_data_create_subrange(op->pending,
					(size_t)n, SIZE_MAX);
			sq_release(op->pending);
			op->pending = rest;
			if (ch->type == SQ_IO_RANDOM)
				op->offset += n; /* <= OFF_MAX - base */
			moved = (size_t)n;
			done = sq_data_get_size(rest) == 0;
			if (n == 0 && !done) {
				done = true;
				err = ENOSPC;
			}
		} else {
			done = true;
			err = op->chunk_errno;
		}
	}
	if (err == EBADF && ch->err == 0)
		ch->err = err;
	if (!done && op->stop) {
		done = true;
		err = ECANCELED;
	}
	if (done) {
		_sq_io_file_next(ch);
		_sq_io_op_finish(op, err, true);
	} else {
		if (op->kind == SQ_IO_OP_READ)
			_sq_io_read_progress(op, false);
		else
			_sq_io_write_moved(op, moved);
		_sq_io_file_submit(op);
	}
	_sq_release_internal(ch);
}


/* ---- fork ------------------------------------------------------------------ */

/* fork() child (io.c's _sq_io_atfork_child): the I/O threads are gone and
 * their lock may have been held: the pool starts afresh. */
void
_sq_io_threads_atfork_child(void)
{
	pthread_mutex_init(&_sq_io_pool.lock, NULL);
	pthread_cond_init(&_sq_io_pool.cond, NULL);
	_sq_io_pool.head = _sq_io_pool.tail = NULL;
	_sq_io_pool.threads = _sq_io_pool.idle = 0;
}
