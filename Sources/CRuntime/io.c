/*
 * SwiftQueues — I/O channels.
 *
 * Every channel works on a serial queue, `q` (its own, or its descriptor
 * entry's, below): all of its state below the "q only" line is touched
 * only by work running there (operations posted by the program, source
 * handlers, the interval timer, results coming back from the I/O
 * threads), so it needs no lock.
 *
 * Descriptors. Every channel made on a descriptor (sq_io_create, and
 * sq_read / sq_write, which make one) and every channel made from such a
 * channel (sq_io_create_with_io) shares one entry per descriptor (struct
 * sq_io_fd_s, found in a process-wide table), and with it one serial
 * queue: the entry's `q` is each sharer's `q`. The entry holds what must
 * be per descriptor: the stream read and write lists (one serial path per
 * direction), the list of stream operations on a regular file (one at a
 * time: they share the file position), the READ and WRITE sources and the
 * flags to restore. So operations on a descriptor run in the order they
 * were issued, whichever channel issued them, and the flags are restored
 * once, by the last user.
 *
 * Streams (pipes, sockets, ttys) use one READ and one WRITE source per
 * entry, created on first need and suspended while their direction has
 * nothing to do.
 * A read source reports end of file by delivering once and not re-arming,
 * so once it exists only its handler reads: a direct read could drain the
 * descriptor between an event and its handler, which would then look like
 * end of file and never be re-armed. Writes have no such trap and are
 * tried at once.
 *
 * Regular files (random-access channels, and stream channels that turn out
 * to be files) go to the I/O threads: a small fixed set (SQ_IO_THREADS,
 * default 4), started on first use, doing one pread / pwrite chunk per job
 * and posting the result back to the channel's queue. The first chunk of a
 * small file (SQ_IO_INLINE_MAX) runs on q instead (_sq_io_file_submit).
 *
 * Operations are started in the order they were issued; a barrier waits for
 * every operation before it and holds back those after it. Each operation
 * delivers on a serial queue (the program's, or one made to target it
 * once a second call is due), so the calls of one operation never overlap
 * and arrive in order. Writes
 * report progress as libdispatch does: after a system call, if at least
 * low water bytes went out since the last report (a call moves at most
 * high water bytes minus what is unreported, so no step exceeds high
 * water), or at an interval tick.
 *
 * Each sharer holds a count on the entry from its creation (or, for a
 * path channel, its open) until it is done; the last one lets the sources
 * go, restores the flags, closes a file the entry opened and schedules
 * every sharer's cleanup handler. A cleanup handler runs only after every
 * handler call of every operation of its channel has returned: `calls`
 * counts the queued deliveries plus one for the channel itself, and the
 * one that takes it to zero schedules the cleanup. Channels made
 * from a path open their file only with a slot of the global open-file
 * limit (_sq_io_slots); without one their operations stay in the wait
 * list, and the channel waits in a FIFO line until a slot is given back
 * (no thread blocks).
 */
#include "introspect_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#define SQ_IO_READ_CHUNK (64u * 1024)         /* stream read() size */
#define SQ_IO_FILE_CHUNK (1024u * 1024)       /* pread / pwrite size */
#define SQ_IO_STREAM_BUDGET 16                /* syscalls per handler run */
#define SQ_IO_IOV 64
#define SQ_IO_INLINE_MAX (64u * 1024)         /* file chunks run on q */

enum sq_io_op_kind { SQ_IO_OP_READ, SQ_IO_OP_WRITE, SQ_IO_OP_BARRIER };

struct sq_io_op_s {
	struct sq_io_op_s *next;  /* wait list, or the stream direction list */
	struct sq_io_op_s *pnext; /* the I/O threads' job list */
	struct sq_io_op_s *anext; /* active list */
	struct sq_io_op_s *aprev;
	struct sq_io_s *ch;
	enum sq_io_op_kind kind;
	off_t offset;             /* random access: where the next chunk goes */
	size_t length;            /* reads: bytes still wanted (SIZE_MAX: all) */
	sq_data_t pending;        /* reads: not yet delivered; writes: unwritten */
	size_t undelivered;       /* writes: written since the last report */
	size_t chunk_max;         /* writes on the I/O threads: bytes per call */
	sq_queue_t dq;            /* delivery queue (serial), retained */
	sq_queue_t tq;            /* a concurrent handler queue, retained:
	                           * dq is made on it at the first call that
	                           * is not the last (one call needs none) */
	void *ctx;
	sq_io_handler_function_t handler;
	sq_function_t barrier;
	bool partial;             /* sq_read: done when a stream would block */
	bool inflight;            /* a chunk is on the I/O threads */
	bool stop;                /* cancelled while in flight */
	/* The result of the chunk an I/O thread ran. */
	void *chunk_buf;
	ssize_t chunk_n;
	int chunk_errno;
	bool chunk_eof;           /* a read chunk also saw end of file */
	bool chunked;             /* not the first chunk */
	size_t at_end;            /* reads: bytes from where the first chunk
	                           * starts to the end of the file, if known
	                           * (SIZE_MAX: not known) */
};

struct sq_io_s {
	struct sq_object_s obj;
	sq_io_type_t type;
	sq_queue_t q;
	bool own_q;               /* q was made for it (not an entry's) */
	sq_queue_t cleanup_q;
	void *cleanup_ctx;
	sq_io_cleanup_function_t cleanup;
	char *path;
	bool path_inline;         /* path is in the channel's allocation */
	int oflag;
	mode_t mode;
	int fd_pub;               /* for sq_io_get_descriptor; atomic */
	struct sq_io_s *from;     /* sq_io_create_with_io: until attached */
	bool tabled;              /* on the table's entry for `tfd` */
	int tfd;                  /* (both set at creation, then constant) */
	/* The open-file line (_sq_io_slots.lock). */
	struct sq_io_s *slot_next, *slot_prev;
	bool slot_listed;
	/* Parameters: set from any thread, read on q; relaxed atomics (a
	 * setting takes effect from some later delivery on). */
	size_t low;
	size_t high;
	uint64_t interval;
	unsigned long interval_flags;
	/* Queued handler calls, plus one until the channel is done with its
	 * descriptor; atomic (see the top). */
	size_t calls;
	bool close_posted;        /* a close is on its way to q; atomic */
	/* ---- q only ---- */
	int fd;
	struct sq_io_fd_s *fde;   /* from setup until done with it */
	struct sq_io_s *fde_next; /* the entry's waiting list (its lock) */
	bool setup_done;
	bool slot_wait;           /* in the open-file line */
	bool slot_held;           /* got a slot, file not open yet */
	bool is_file;             /* regular file: the I/O threads */
	bool is_sock;
	bool can_read, can_write;
	bool pumping, pump_again; /* _sq_io_pump is running */
	off_t base;
	size_t size_hint;         /* a regular file's size at setup, + 1 */
	size_t file_size;         /* a file it opened itself, not yet read or
	                           * written: its size (SIZE_MAX: not so) */
	int err;                  /* the channel's error (setup, EBADF) */
	bool closed;              /* later operations fail (ECANCELED) */
	bool stopped;             /* SQ_IO_STOP: waiting ones fail too */
	bool cleaning;            /* sources being let go */
	bool cleaned;             /* cleanup handler scheduled */
	bool calls_closed;        /* its own count dropped: `calls` is done */
	struct sq_io_op_s *wait_head, *wait_tail;
	struct sq_io_op_s *active; /* started, not finished */
	size_t nactive;
	sq_source_t timer;
	int sources_live;         /* the timer's cancel handler is owed */
	uint64_t timer_interval;  /* what `timer` was armed with */
};


/*
 * A descriptor and what the channels using it share (see the top). `refs`
 * and the table links are guarded by _sq_io_fds.lock; everything else is
 * touched only on `q`, the queue of every sharer.
 */
struct sq_io_fd_s {
	int fd;
	int refs;                 /* sharers not yet done (the table lock;
	                           * q only for an own entry: one sharer) */
	bool own;                 /* opened from a path: close, give the slot */
	bool listed;              /* in the table (the table lock) */
	struct sq_io_fd_s *hnext; /* the table's chain (the table lock) */
	sq_queue_t q;             /* every sharer's queue; retained */
	/* ---- q only ---- */
	bool nonblock_set;        /* we added O_NONBLOCK: restore orig_flags */
	int orig_flags;
	bool closing;             /* no sharer left: sources going */
	bool reading, writing;    /* _sq_io_stream_read / _write running */
	bool inline_busy;         /* a file chunk is running on q */
	bool rd_eof;              /* a stream read saw end of file */
	struct sq_io_s *waiters;  /* done; their cleanup waits for the rest */
	struct sq_io_op_s *rd_head, *rd_tail; /* stream reads, in order */
	struct sq_io_op_s *wr_head, *wr_tail; /* stream writes */
	struct sq_io_op_s *file_head, *file_tail; /* stream ops on a file */
	sq_source_t rs, ws;
	bool rs_on, ws_on;
	int sources_live;         /* sources whose cancel handler is owed */
};

/* The table of shared entries, by descriptor. */
#define SQ_IO_FD_BUCKETS 64
static struct {
	pthread_mutex_t lock;
	struct sq_io_fd_s *bucket[SQ_IO_FD_BUCKETS];
} _sq_io_fds = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static struct sq_io_fd_s *
_sq_io_fd_alloc(int fd, bool own, sq_queue_t q)
{
	struct sq_io_fd_s *e = calloc(1, sizeof(*e));
	if (e == NULL)
		_sq_client_crash("sq_io", "out of memory");
	e->fd = fd;
	e->refs = 1;
	e->own = own;
	e->q = q;
	return e;
}

/* The shared entry of `fd`, made if there is none, with a count taken. */
static struct sq_io_fd_s *
_sq_io_fd_get(int fd)
{
	unsigned h = (unsigned)fd % SQ_IO_FD_BUCKETS;
	pthread_mutex_lock(&_sq_io_fds.lock);
	struct sq_io_fd_s *e = _sq_io_fds.bucket[h];
	while (e != NULL && e->fd != fd)
		e = e->hnext;
	if (e != NULL) {
		e->refs++;
	} else {
		e = _sq_io_fd_alloc(fd, false,
				sq_queue_create("com.swiftqueues.io", NULL));
		e->listed = true;
		e->hnext = _sq_io_fds.bucket[h];
		_sq_io_fds.bucket[h] = e;
	}
	pthread_mutex_unlock(&_sq_io_fds.lock);
	return e;
}

static void
_sq_io_fd_unlist(struct sq_io_fd_s *e)
{
	struct sq_io_fd_s **pp = &_sq_io_fds.bucket[(unsigned)e->fd %
			SQ_IO_FD_BUCKETS];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	e->listed = false;
}

static void _sq_io_pump(struct sq_io_s *ch);
static void _sq_io_cleanup_run(void *ctx);
static void _sq_io_stream_read(struct sq_io_fd_s *e);
static void _sq_io_stream_write(struct sq_io_fd_s *e);
static void _sq_io_file_submit(struct sq_io_op_s *op);
static void _sq_io_maybe_cleanup(struct sq_io_s *ch);
static void _sq_io_pump_once(struct sq_io_s *ch);

/* ---- The channel object ------------------------------------------------ */

/*
 * Queues of channels that are gone, for the next channels that need a queue
 * of their own (path channels above all: one per file): a queue is only a
 * place in line, and making one (an aligned allocation, the label copied)
 * and freeing it again costs more than taking one from here. A queue comes
 * back only as it was made: nobody else holds it, not suspended, and it
 * cannot be made otherwise (it never leaves io.c). It may still be
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

/* ---- Open-file slots ----------------------------------------------------- */

/*
 * The global limit on files opened by path channels: `free` slots, and a
 * FIFO line of channels waiting for one. A slot given back goes straight to
 * the first channel in line (posted to its queue), so `free` is 0 whenever
 * the line is not empty. The lock is held for a few instructions only.
 */
static struct {
	pthread_mutex_t lock;
	bool init;
	long free;
	struct sq_io_s *head, *tail;
} _sq_io_slots = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

/* SQ_IO_MAX_OPEN_FILES if it is a positive number, else half the soft
 * RLIMIT_NOFILE (getdtablesize() / 2). */
static long
_sq_io_slots_limit(void)
{
	const char *env = getenv("SQ_IO_MAX_OPEN_FILES");
	if (env != NULL && *env != '\0') {
		char *end;
		long n = strtol(env, &end, 10);
		if (*end == '\0' && n > 0)
			return n;
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 512;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > (rlim_t)INT32_MAX)
		return INT32_MAX;
	long n = (long)(rl.rlim_cur / 2);
	return n > 0 ? n : 1;
}

static void _sq_io_slot_granted(void *ctx);

/* Takes a slot for `ch` (q), or puts it in line: true if it got one. */
static bool
_sq_io_slot_get(struct sq_io_s *ch)
{
	pthread_mutex_lock(&_sq_io_slots.lock);
	if (!_sq_io_slots.init) {
		_sq_io_slots.free = _sq_io_slots_limit(); /* read once */
		_sq_io_slots.init = true;
	}
	bool got = _sq_io_slots.free > 0;
	if (got) {
		_sq_io_slots.free--;
	} else {
		_sq_retain_internal(ch); /* the line's; goes to the grant */
		ch->slot_next = NULL;
		ch->slot_prev = _sq_io_slots.tail;
		if (_sq_io_slots.tail)
			_sq_io_slots.tail->slot_next = ch;
		else
			_sq_io_slots.head = ch;
		_sq_io_slots.tail = ch;
		ch->slot_listed = true;
	}
	pthread_mutex_unlock(&_sq_io_slots.lock);
	return got;
}

static void
_sq_io_slot_unlink(struct sq_io_s *ch)
{
	if (ch->slot_prev)
		ch->slot_prev->slot_next = ch->slot_next;
	else
		_sq_io_slots.head = ch->slot_next;
	if (ch->slot_next)
		ch->slot_next->slot_prev = ch->slot_prev;
	else
		_sq_io_slots.tail = ch->slot_prev;
	ch->slot_listed = false;
}

/* Gives a slot back: to the first channel in line, if there is one. */
static void
_sq_io_slot_put(void)
{
	pthread_mutex_lock(&_sq_io_slots.lock);
	struct sq_io_s *next = _sq_io_slots.head;
	if (next)
		_sq_io_slot_unlink(next);
	else
		_sq_io_slots.free++;
	pthread_mutex_unlock(&_sq_io_slots.lock);
	if (next) /* the line's reference goes with it */
		sq_async_f(next->q, next, _sq_io_slot_granted);
}

/* Leaves the line (q). False if a slot is already on its way to `ch`:
 * _sq_io_slot_granted then passes it on. */
static bool
_sq_io_slot_cancel(struct sq_io_s *ch)
{
	pthread_mutex_lock(&_sq_io_slots.lock);
	bool listed = ch->slot_listed;
	if (listed)
		_sq_io_slot_unlink(ch);
	pthread_mutex_unlock(&_sq_io_slots.lock);
	if (listed)
		_sq_release_internal(ch); /* the line's */
	return listed;
}

static void
_sq_io_slot_granted(void *ctx)
{
	struct sq_io_s *ch = ctx;
	ch->slot_wait = false;
	if (ch->cleaned) {
		_sq_io_slot_put(); /* done while in line: pass it on */
	} else {
		ch->slot_held = true;
		_sq_io_pump(ch);
	}
	_sq_release_internal(ch);
}

/* Whether the channel may start its next operation (q): a path channel
 * opens its file only with a slot, and asks for one first. */
static bool
_sq_io_ready(struct sq_io_s *ch)
{
	if (ch->path == NULL || ch->setup_done || ch->stopped ||
			ch->err != 0 || ch->slot_held)
		return true;
	if (ch->slot_wait)
		return false;
	if (_sq_io_slot_get(ch)) {
		ch->slot_held = true;
		return true;
	}
	ch->slot_wait = true; /* _sq_io_slot_granted pumps again */
	return false;
}

/* ---- Descriptors (q) -------------------------------------------------- */

/* Streams need a non-blocking descriptor; its flags are restored when
 * the last sharer is done. */
static void
_sq_io_fd_nonblock(struct sq_io_fd_s *e)
{
	int fl = fcntl(e->fd, F_GETFL);
	if (!e->nonblock_set && fl >= 0 && !(fl & O_NONBLOCK) &&
			fcntl(e->fd, F_SETFL, fl | O_NONBLOCK) == 0) {
		e->nonblock_set = true;
		e->orig_flags = fl;
	}
}

static void _sq_io_cleanup_ready(struct sq_io_s *ch);
static void _sq_io_source_drop(sq_source_t *sp, bool *on);

/*
 * The sharers are gone and so are the sources: hand the descriptor back
 * and schedule every waiting cleanup. If a new channel came to the entry
 * meanwhile (refs > 0 again), the entry stays for it, flags and all.
 */
static void
_sq_io_fd_maybe_final(struct sq_io_fd_s *e)
{
	if (!e->closing || e->sources_live > 0)
		return;
	e->closing = false;
	/* An entry opened from a path is never in the table and has one
	 * sharer, its channel: only the table's entries need the lock. */
	if (!e->own)
		pthread_mutex_lock(&_sq_io_fds.lock);
	bool gone = e->refs == 0;
	if (gone) {
		if (e->listed)
			_sq_io_fd_unlist(e);
		/* Under the lock: an entry made next for this descriptor
		 * sets its flags only after this. */
		if (e->nonblock_set)
			fcntl(e->fd, F_SETFL, e->orig_flags);
	}
	if (!e->own)
		pthread_mutex_unlock(&_sq_io_fds.lock);
	if (gone && e->own) {
		close(e->fd);
		_sq_io_slot_put();
	}
	/* Newest first: reverse, so cleanups run in the order channels
	 * finished. */
	struct sq_io_s *list = NULL, *w = e->waiters;
	e->waiters = NULL;
	while (w) {
		struct sq_io_s *next = w->fde_next;
		w->fde_next = list;
		list = w;
		w = next;
	}
	if (gone) {
		sq_release(e->q);
		free(e);
	}
	while ((w = list) != NULL) {
		list = w->fde_next;
		_sq_io_cleanup_ready(w);
	}
}

/* A sharer lets go of `e` (q). The last one lets the sources go; the
 * descriptor goes back once they have. */
static void
_sq_io_fd_release(struct sq_io_fd_s *e)
{
	bool last;
	if (e->own) {
		last = --e->refs == 0; /* not in the table: q only */
	} else {
		pthread_mutex_lock(&_sq_io_fds.lock);
		last = --e->refs == 0;
		pthread_mutex_unlock(&_sq_io_fds.lock);
	}
	if (!last)
		return;
	e->closing = true;
	_sq_io_source_drop(&e->rs, &e->rs_on);
	_sq_io_source_drop(&e->ws, &e->ws_on);
	_sq_io_fd_maybe_final(e);
}

/* `ch` is done with its descriptor (q; its cleanup reference taken): its
 * cleanup waits until every sharer is. */
static void
_sq_io_fd_detach(struct sq_io_s *ch)
{
	struct sq_io_fd_s *e = ch->fde;
	ch->fde = NULL;
	ch->fde_next = e->waiters;
	e->waiters = ch;
	_sq_io_fd_release(e);
}

/* ---- Setup (q) --------------------------------------------------------- */

/* Opens a path channel's file and learns what the descriptor is. Returns
 * false (with ch->err set) when the channel cannot do I/O. */
static bool
_sq_io_setup(struct sq_io_s *ch)
{
	if (ch->setup_done)
		return ch->err == 0;
	ch->setup_done = true;
	if (ch->err != 0)
		return false; /* from sq_io_create_with_io */
	if (ch->fde == NULL && ch->path != NULL) {
		/* _sq_io_ready got us a slot. */
		int fd;
		do
			fd = open(ch->path, ch->oflag | O_CLOEXEC, ch->mode);
		while (fd < 0 && errno == EINTR);
		ch->slot_held = false;
		if (fd < 0) {
			ch->err = errno;
			_sq_io_slot_put();
			return false;
		}
		/* Its own entry (not in the table), on its own queue; it
		 * takes over the slot. */
		ch->fde = _sq_io_fd_alloc(fd, true, ch->q);
		sq_retain(ch->q);
	}
	int fd = ch->fde ? ch->fde->fd : -1;
	struct stat st;
	/* A file we opened has the flags we opened it with. */
	int fl = fd < 0 ? -1 : ch->fde->own ? ch->oflag : fcntl(fd, F_GETFL);
	if (fl < 0 || fstat(fd, &st) != 0) {
		ch->err = EBADF;
		return false;
	}
	ch->fd = fd;
	__atomic_store_n(&ch->fd_pub, fd, __ATOMIC_RELAXED); /* a value */
	ch->can_read = (fl & O_ACCMODE) != O_WRONLY;
	ch->can_write = (fl & O_ACCMODE) != O_RDONLY;
	ch->is_file = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
	ch->size_hint = S_ISREG(st.st_mode) && st.st_size >= 0 &&
			(uint64_t)st.st_size < SQ_IO_FILE_CHUNK ?
			(size_t)st.st_size + 1 : SQ_IO_FILE_CHUNK;
	/* Opened here, so at position 0 (and base 0). */
	ch->file_size = ch->fde->own && ch->size_hint != SQ_IO_FILE_CHUNK ?
			ch->size_hint - 1 : SIZE_MAX;
	ch->is_sock = S_ISSOCK(st.st_mode);
	if (ch->type == SQ_IO_RANDOM) {
		if (!ch->is_file) {
			ch->err = ESPIPE;
			return false;
		}
		off_t pos = lseek(fd, 0, SEEK_CUR);
		ch->base = pos > 0 ? pos : 0;
	} else if (!ch->is_file) {
		_sq_io_fd_nonblock(ch->fde);
	}
	return true;
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

static void
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
static void
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
static void
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
static void
_sq_io_write_moved(struct sq_io_op_s *op, size_t n)
{
	if (n == 0 || sq_data_get_size(op->pending) == 0)
		return;
	op->undelivered += n;
	_sq_io_write_progress(op, false);
}

/* How many bytes the next write system call of `op` may move: no report
 * step may exceed high water. */
static size_t
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
static void
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
		_sq_io_deliver(op, true, op->pending, error);
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

static void
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

/* Takes the first operation off a list. */
static struct sq_io_op_s *
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
static void
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
			sq_data_t d = sq_data_create(buf, (size_t)n, NULL,
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

struct sq_iov_s {
	struct iovec iov[SQ_IO_IOV];
	int count;
	size_t bytes;
	size_t limit; /* at most this many bytes (>= 1) */
};

static bool
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
static ssize_t
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
static void
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
		_sq_io_file_chunk(op);
		/* Hold the channel's queue across the post: once the result
		 * runs, the channel (and the queue) may go at any moment. */
		sq_queue_t q = op->ch->q;
		sq_retain(q);
		sq_async_f(q, op, _sq_io_file_result);
		sq_release(q);
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
	if (_sq_io_pool.tail)
		_sq_io_pool.tail->pnext = op;
	else
		_sq_io_pool.head = op;
	_sq_io_pool.tail = op;
	bool start = _sq_io_pool.idle == 0 &&
			_sq_io_pool.threads < _sq_io_pool.max;
	if (start) {
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		/* Block every signal in the I/O threads; they inherit it. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (pthread_create(&t, &attr, _sq_io_thread, NULL) == 0)
			_sq_io_pool.threads++;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
	}
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
static void
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
			sq_data_t d = sq_data_create(op->chunk_buf, (size_t)n,
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
		/* Read directly only while no source exists (see the top);
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
static void
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

static void
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

static void
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

/* ---- fork ------------------------------------------------------------------ */

/* fork() child (fork.c): the I/O threads are gone and their locks may have
 * been held; the channels made before fork() are unusable (fork_bound).
 * The thread pool and the open-file slots start afresh. */
void
_sq_io_atfork_child(void)
{
	pthread_mutex_init(&_sq_io_pool.lock, NULL);
	pthread_cond_init(&_sq_io_pool.cond, NULL);
	_sq_io_pool.head = _sq_io_pool.tail = NULL;
	_sq_io_pool.threads = _sq_io_pool.idle = 0;
	pthread_mutex_init(&_sq_io_slots.lock, NULL);
	/* The parent's channel queues may be in the middle of a drain by a
	 * thread the child does not have: forget them (not freed). */
	pthread_mutex_init(&_sq_io_queues.lock, NULL);
	_sq_io_queues.count = 0;
	_sq_io_slots.init = false;
	_sq_io_slots.free = 0;
	_sq_io_slots.head = _sq_io_slots.tail = NULL;
}
