/*
 * SwiftQueues — I/O channels: the structures and functions shared by
 * io.c (the channel object and its operations), io_fd.c (descriptor
 * entries, open-file slots, setup), io_deliver.c (handler calls and
 * progress), io_stream.c (stream reads and writes on the event loop),
 * io_file.c (the I/O threads and file operations) and io_convenience.c
 * (sq_read / sq_write). Not installed.
 *
 * Every channel works on a serial queue, `q` (its own, or its descriptor
 * entry's): all of its state below the "q only" line is touched only by
 * work running there (operations posted by the program, source handlers,
 * the interval timer, results coming back from the I/O threads), so it
 * needs no lock. The functions below marked (q) run there.
 */
#ifndef SWIFTQUEUES_IO_INTERNAL_H
#define SWIFTQUEUES_IO_INTERNAL_H

#include "queue_internal.h"

#include <sys/types.h>
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
	 * descriptor; atomic (see io_deliver.c). */
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
 * A descriptor and what the channels using it share (see io_fd.c). `refs`
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

/* A gather list for one writev / pwritev, filled by _sq_io_collect. */
struct sq_iov_s {
	struct iovec iov[SQ_IO_IOV];
	int count;
	size_t bytes;
	size_t limit; /* at most this many bytes (>= 1) */
};


/* ---- io.c ---------------------------------------------------------------- */

/* Starts waiting operations until a barrier must wait (q). */
SQ_INTERNAL void _sq_io_pump(struct sq_io_s *ch);
/* sq_io_read_f; `partial`: done when a stream would block (sq_read). */
SQ_INTERNAL void _sq_io_read(sq_io_t ch, off_t offset, size_t length,
		sq_queue_t queue, void *ctx, sq_io_handler_function_t handler,
		bool partial);
/* Calls the cleanup handler, on the cleanup queue. */
SQ_INTERNAL void _sq_io_cleanup_run(void *ctx);
/* Cancels a source (resuming it if suspended) and forgets it (q). */
SQ_INTERNAL void _sq_io_source_drop(sq_source_t *sp, bool *on);
/* Resumes or suspends a source to match `want` (q). */
SQ_INTERNAL void _sq_io_source_set(sq_source_t s, bool *on, bool want);
/* Takes the first operation off a list. */
SQ_INTERNAL struct sq_io_op_s *_sq_io_list_pop(struct sq_io_op_s **head,
		struct sq_io_op_s **tail);
/* fork() child (fork.c): _sq_io_atfork_child, declared in internal.h. */

/* ---- io_fd.c ------------------------------------------------------------- */

/* The shared entry of `fd`, made if there is none, with a count taken. */
SQ_INTERNAL struct sq_io_fd_s *_sq_io_fd_get(int fd);
/* A sharer lets go of its entry (q). */
SQ_INTERNAL void _sq_io_fd_release(struct sq_io_fd_s *e);
/* `ch` is done with its descriptor (q): its cleanup waits for the rest. */
SQ_INTERNAL void _sq_io_fd_detach(struct sq_io_s *ch);
/* No sharer and no source left: hands the descriptor back (q). */
SQ_INTERNAL void _sq_io_fd_maybe_final(struct sq_io_fd_s *e);
/* Whether the channel may start its next operation (q). */
SQ_INTERNAL bool _sq_io_ready(struct sq_io_s *ch);
/* Gives an open-file slot back. */
SQ_INTERNAL void _sq_io_slot_put(void);
/* Leaves the open-file line (q): false if a slot is on its way. */
SQ_INTERNAL bool _sq_io_slot_cancel(struct sq_io_s *ch);
/* Opens a path channel's file and learns what the descriptor is (q). */
SQ_INTERNAL bool _sq_io_setup(struct sq_io_s *ch);
SQ_INTERNAL void _sq_io_fds_atfork_child(void);

/* ---- io_deliver.c -------------------------------------------------------- */

/* The channel is done with its descriptor: its own count goes. */
SQ_INTERNAL void _sq_io_cleanup_ready(struct sq_io_s *ch);
/* Delivers what a read has gathered, as the water marks allow. */
SQ_INTERNAL void _sq_io_read_progress(struct sq_io_op_s *op, bool tick);
/* Reports a write's progress, as the water marks allow. */
SQ_INTERNAL void _sq_io_write_progress(struct sq_io_op_s *op, bool tick);
/* A write system call moved `n` bytes of `op`. */
SQ_INTERNAL void _sq_io_write_moved(struct sq_io_op_s *op, size_t n);
/* How many bytes the next write system call of `op` may move. */
SQ_INTERNAL size_t _sq_io_write_room(struct sq_io_op_s *op);
/* Ends an operation: one last call with done = true. */
SQ_INTERNAL void _sq_io_op_finish(struct sq_io_op_s *op, int error,
		bool started);

/* ---- io_stream.c --------------------------------------------------------- */

/* Reads for the entry's read list, in order (q). */
SQ_INTERNAL void _sq_io_stream_read(struct sq_io_fd_s *e);
/* Writes the entry's write list, in order (q). */
SQ_INTERNAL void _sq_io_stream_write(struct sq_io_fd_s *e);
/* sq_data_apply_f function: adds a region to a struct sq_iov_s. */
SQ_INTERNAL bool _sq_io_collect(void *ctx, sq_data_t region, size_t offset,
		const void *buf, size_t size);
/* writev that reports EPIPE instead of raising SIGPIPE. */
SQ_INTERNAL ssize_t _sq_io_writev(int fd, bool is_sock, struct iovec *iov,
		int count);

/* ---- io_file.c ----------------------------------------------------------- */

/* Sends one chunk of `op` to the I/O threads, or runs it here (q). */
SQ_INTERNAL void _sq_io_file_submit(struct sq_io_op_s *op);
SQ_INTERNAL void _sq_io_threads_atfork_child(void);

#endif /* SWIFTQUEUES_IO_INTERNAL_H */
