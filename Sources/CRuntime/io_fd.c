/*
 * SwiftQueues — I/O channels: descriptor entries, open-file slots, setup.
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
 * Each sharer holds a count on the entry from its creation (or, for a
 * path channel, its open) until it is done; the last one lets the sources
 * go, restores the flags, closes a file the entry opened and schedules
 * every sharer's cleanup handler (io_deliver.c). Channels made from a
 * path open their file only with a slot of the global open-file limit
 * (_sq_io_slots); without one their operations stay in the wait list, and
 * the channel waits in a FIFO line until a slot is given back (no thread
 * blocks).
 */
#include "io_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* ---- The table of descriptor entries --------------------------------- */

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
struct sq_io_fd_s *
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
void
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
bool
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
bool
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


/*
 * The sharers are gone and so are the sources: hand the descriptor back
 * and schedule every waiting cleanup. If a new channel came to the entry
 * meanwhile (refs > 0 again), the entry stays for it, flags and all.
 */
void
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
void
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
void
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
bool
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


/* ---- fork ------------------------------------------------------------------ */

/*
 * fork() child (io.c's _sq_io_atfork_child): the descriptor table and the
 * slots start afresh. The parent's entries belong to channels the child
 * cannot use; one of them may hold operations that wait for data and will
 * never run here, and a child's sq_read on the same descriptor would queue
 * behind them. The entries are forgotten, not freed (their queues may be
 * mid-drain by a thread the child does not have).
 */
void
_sq_io_fds_atfork_child(void)
{
	pthread_mutex_init(&_sq_io_fds.lock, NULL);
	memset(_sq_io_fds.bucket, 0, sizeof(_sq_io_fds.bucket));
	pthread_mutex_init(&_sq_io_slots.lock, NULL);
	_sq_io_slots.init = false;
	_sq_io_slots.free = 0;
	_sq_io_slots.head = _sq_io_slots.tail = NULL;
}
