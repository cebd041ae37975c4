/*
 * The guarantee checker's I/O scenarios (included by test_guarantees.c).
 *
 * Every byte a program writes or reads belongs to a numbered byte stream
 * whose content is a function of (stream, offset), so a handler checks
 * what it gets without a copy of what was sent. Scenarios:
 *   pipe        a stream channel pair on a pipe: writes in order, reads in
 *               order (water marks, intervals at random), the writer
 *               released at once (its cleanup closes the write end, so the
 *               reader sees end of file); sometimes the reader asks for
 *               more than is written and is stopped (SQ_IO_STOP) once the
 *               writes are done: its reads may end with ECANCELED, with
 *               what they delivered still in order.
 *   file reads  1-4 random-access channels on one file (on a descriptor or
 *               a path), 1-3 reads each at random offsets, sometimes an
 *               interval or water marks, the channel released (an
 *               implicit close, no STOP) or closed right after issuing its
 *               reads: every read delivers its whole range. Often the
 *               reads are issued as a drain-end race on the channel's
 *               queue: a barrier raises a flag and spins, the driver waits
 *               for it, then reads and releases.
 *   file writes writes to disjoint ranges of a zeroed file in two batches,
 *               sometimes with an I/O barrier between them that checks
 *               (pread) the first batch is in the file and the second not
 *               yet; the cleanup handler checks the whole file.
 *   read/write  sq_write of a buffer to a pipe, and a chain of sq_read calls
 *               reading it back to end of file.
 * A channel's cleanup handler checks that every operation's last call has
 * returned and no handler call is running, and that it runs once.
 */
#ifndef SQTEST_GUARANTEES_IO_H
#define SQTEST_GUARANTEES_IO_H

/* The byte at `off` of stream `id`. */
static inline uint8_t
gq_byte(uint32_t id, uint64_t off)
{
	uint64_t x = gq_mix(((uint64_t)id << 40) ^ (off >> 3));
	return (uint8_t)(x >> ((off & 7) * 8));
}

static void
gq_fill(uint8_t *buf, size_t n, uint32_t id, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = gq_byte(id, off + i);
}

struct gq_match {
	uint32_t id;
	uint64_t base;
	uint64_t bad;    /* the first wrong offset, or UINT64_MAX */
};

static bool
gq_match_region(void *ctx, sq_data_t region, size_t offset,
		const void *buffer, size_t size)
{
	(void)region;
	struct gq_match *m = ctx;
	const uint8_t *b = buffer;
	for (size_t i = 0; i < size; i++) {
		if (b[i] != gq_byte(m->id, m->base + offset + i)) {
			m->bad = m->base + offset + i;
			return false;
		}
	}
	return true;
}

/* Whether `data` is stream `id` from `base` on; the first wrong offset
 * goes to *bad. */
static bool
gq_data_matches(sq_data_t data, uint32_t id, uint64_t base, uint64_t *bad)
{
	struct gq_match m = { id, base, UINT64_MAX };
	sq_data_apply_f(data, &m, gq_match_region);
	*bad = m.bad;
	return m.bad == UINT64_MAX;
}

static sq_data_t
gq_data_make(uint32_t id, uint64_t off, size_t n)
{
	uint8_t *buf = malloc(n ? n : 1);
	if (buf == NULL)
		abort();
	gq_fill(buf, n, id, off);
	sq_data_t d = sq_data_create_f(buf, n, NULL, SQ_DATA_DESTRUCTOR_DEFAULT);
	free(buf);
	return d;
}

/* ---- Channels and operations ---------------------------------------------- */

#define GQ_MAX_OPS 8

struct gq_chan;

struct gq_op {
	struct gq_chan *c;
	int index;
	bool write;
	uint64_t start;      /* the stream offset of its first byte */
	size_t length;       /* reads: wanted (SIZE_MAX: to the end); writes:
	                      * the size */
	size_t expect;       /* reads: bytes due if it ends without error */
	size_t got;          /* reads: delivered; writes: last unwritten */
	atomic_int in_call;
	bool done;
	int qi;              /* its handler queue */
	struct gq_chan *stop_after; /* writes: stop this channel when done */
	atomic_int *done_flag;      /* raised after its last call */
};

struct gq_chan {
	struct gq_prog *p;
	sq_io_t ch;
	const char *what;
	uint32_t id;         /* its byte stream */
	int fd;              /* closed by the cleanup handler (-1: none) */
	int nops;
	struct gq_op ops[GQ_MAX_OPS];
	size_t high;         /* 0: not set */
	size_t low;
	bool interval;
	atomic_int refs;     /* the cleanup handler, and each operation until
	                      * its last call: the last one frees c */
	atomic_int ops_done;
	atomic_int in_calls;
	atomic_int cleaned;
	atomic_int stop;     /* a STOP close was requested (set before it) */
	bool short_ok;       /* reads may end early at end of file: its
	                      * writer is closed once it is done, which may
	                      * come before the stop */
	atomic_int stop_votes; /* the stopped reader: its last write's
	                      * handler and the driver, once every read is
	                      * issued; the second one stops it */
	/* file writes: checked by the cleanup handler */
	uint64_t file_size;
	uint64_t wstart[GQ_MAX_OPS], wlen[GQ_MAX_OPS];
	int nw;
	atomic_int *cleaned_flag; /* raised by the cleanup handler */
	char path[96];       /* unlinked by the cleanup handler */
	atomic_int *file_users; /* shared by the channels of one file */
};

static struct gq_chan *
gq_chan_new(struct gq_prog *p, const char *what, uint32_t id)
{
	struct gq_chan *c = calloc(1, sizeof(*c));
	if (c == NULL)
		abort();
	c->p = p;
	c->what = what;
	c->id = id;
	c->fd = -1;
	atomic_init(&c->refs, 1);
	return c;
}

static void
gq_chan_put(struct gq_chan *c)
{
	if (atomic_fetch_sub(&c->refs, 1) == 1)
		free(c);
}

/* The stopped reader: stopped (SQ_IO_STOP) and released once its writer is
 * done and the driver has issued every read (an operation issued after a
 * close is not ordered before the cleanup handler). */
static void
gq_stop_vote(struct gq_chan *r)
{
	if (atomic_fetch_sub(&r->stop_votes, 1) != 1)
		return;
	sq_io_t ch = r->ch; /* r is freed by the cleanup handler */
	atomic_store(&r->stop, 1);
	sq_io_close(ch, SQ_IO_STOP);
	sq_release(ch);
}

static void
gq_io_handler(void *ctx, bool done, sq_data_t data, int error)
{
	struct gq_op *op = ctx;
	struct gq_chan *c = op->c;
	struct gq_prog *p = c->p;
	gq_progress(p);
	atomic_fetch_add_explicit(&p->handler_calls, 1, memory_order_relaxed);
	atomic_fetch_add(&c->in_calls, 1);
	GQ_CHECK(p, atomic_fetch_add(&op->in_call, 1) == 0, "%s: handler "
			"calls of one operation overlap", c->what);
	GQ_CHECK(p, !op->done, "%s: %s %d: a call after its last one",
			c->what, op->write ? "write" : "read", op->index);
#if GQ_CLEANUP_AFTER_HANDLERS
	GQ_CHECK(p, !atomic_load(&c->cleaned), "%s: handler call after the "
			"cleanup handler", c->what);
#endif
	size_t size = data ? sq_data_get_size(data) : 0;
	if (!op->write) {
		uint64_t bad;
		if (data && !gq_data_matches(data, c->id, op->start + op->got,
				&bad))
			gq_fail(p, "%s: read %d: wrong byte at stream offset "
					"%" PRIu64 " (delivered from %" PRIu64 ")",
					c->what, op->index, bad,
					op->start + op->got);
		op->got += size;
		atomic_fetch_add_explicit(&p->io_bytes, size,
				memory_order_relaxed);
		GQ_CHECK(p, op->got <= op->expect || op->expect == SIZE_MAX,
				"%s: read %d: %zu bytes delivered, %zu due",
				c->what, op->index, op->got, op->expect);
		if (c->high && data)
			GQ_CHECK(p, size <= c->high, "%s: read %d: a call with "
					"%zu bytes, high water %zu", c->what,
					op->index, size, c->high);
		if (done) {
			/* (a stopped reader may also have met end of
			 * file first) */
			if (error == 0)
				GQ_CHECK(p, op->got == op->expect ||
						op->expect == SIZE_MAX ||
						c->short_ok || atomic_load(&c->stop),
						"%s: read %d "
						"done with %zu of %zu bytes", c->what,
						op->index, op->got, op->expect);
			else if (error == ECANCELED)
				GQ_CHECK(p, atomic_load(&c->stop), "%s: read %d "
						"ended with ECANCELED after %zu of %zu "
						"bytes, and the program never "
						"stopped the channel", c->what,
						op->index, op->got, op->expect);
			else
				gq_fail(p, "%s: read %d: error %d (%s)",
						c->what, op->index, error,
						strerror(error));
		} else {
			/* (libdispatch also reports a stop in the call
			 * that delivers what was read before it) */
			GQ_CHECK(p, error == 0 || (error == ECANCELED &&
					atomic_load(&c->stop)), "%s: read %d: "
					"error %d in a call that is not the last",
					c->what, op->index, error);
		}
	} else {
		/* data: what is left to write */
		if (!done) {
			GQ_CHECK(p, data != NULL && size < op->got, "%s: write "
					"%d: progress call with %zu bytes left "
					"(%zu before)", c->what, op->index, size,
					op->got);
			op->got = size;
		} else if (error == 0) {
			GQ_CHECK(p, size == 0, "%s: write %d done with %zu "
					"bytes unwritten", c->what, op->index, size);
		} else if (error == ECANCELED) {
			GQ_CHECK(p, atomic_load(&c->stop), "%s: write %d ended "
					"with ECANCELED, and the program never "
					"stopped the channel", c->what, op->index);
		} else {
			gq_fail(p, "%s: write %d: error %d (%s)", c->what,
					op->index, error, strerror(error));
		}
		if (done && error == 0)
			atomic_fetch_add_explicit(&p->io_bytes, op->length,
					memory_order_relaxed);
	}
	struct gq_chan *stop = done && error == 0 ? op->stop_after : NULL;
	if (stop)
		gq_stop_vote(stop); /* the writes are done */
	atomic_int *done_flag = done ? op->done_flag : NULL;
	op->done = done;
	atomic_fetch_sub(&op->in_call, 1);
	if (done)
		atomic_fetch_add(&c->ops_done, 1);
	atomic_fetch_sub(&c->in_calls, 1);
	if (done) {
		gq_chan_put(c); /* the last touch of c and op */
		gq_done(p);
	}
	if (done_flag)
		atomic_store(done_flag, 1);
}

/* Checks a written file against the channel's writes (zeros elsewhere). */
static void
gq_check_file(struct gq_chan *c, int fd)
{
	struct gq_prog *p = c->p;
	uint8_t *buf = malloc(c->file_size ? c->file_size : 1);
	ssize_t n = pread(fd, buf, c->file_size, 0);
	GQ_CHECK(p, n == (ssize_t)c->file_size, "%s: file is %zd bytes, "
			"not %" PRIu64, c->what, n, c->file_size);
	for (uint64_t off = 0; n > 0 && off < (uint64_t)n; off++) {
		uint8_t want = 0;
		for (int i = 0; i < c->nw; i++)
			if (off >= c->wstart[i] && off < c->wstart[i] +
					c->wlen[i])
				want = gq_byte(c->id, off);
		if (buf[off] != want) {
			gq_fail(p, "%s: file byte %" PRIu64 " is %u, not %u",
					c->what, off, buf[off], want);
			break;
		}
	}
	free(buf);
}

static void
gq_io_cleanup(void *ctx, int error)
{
	struct gq_chan *c = ctx;
	struct gq_prog *p = c->p;
	gq_progress(p);
	GQ_CHECK(p, atomic_fetch_add(&c->cleaned, 1) == 0, "%s: cleanup "
			"handler twice", c->what);
#if GQ_CLEANUP_AFTER_HANDLERS
	GQ_CHECK(p, atomic_load(&c->in_calls) == 0, "%s: cleanup handler "
			"while a handler call runs", c->what);
	GQ_CHECK(p, atomic_load(&c->ops_done) == c->nops, "%s: cleanup "
			"handler after %d of its %d operations' last calls",
			c->what, atomic_load(&c->ops_done), c->nops);
#endif
	GQ_CHECK(p, error == 0, "%s: cleanup handler with error %d (%s)",
			c->what, error, strerror(error));
	if (c->nw > 0 && c->fd >= 0)
		gq_check_file(c, c->fd);
	if (c->fd >= 0)
		close(c->fd);
	if (c->file_users && atomic_fetch_sub(c->file_users, 1) == 1) {
		unlink(c->path);
		free(c->file_users);
	}
	atomic_int *flag = c->cleaned_flag;
	gq_chan_put(c);
	gq_done(p);
	if (flag)
		atomic_store(flag, 1);
}

/* Issues operation `i` of c (set up by the caller). */
static void
gq_issue(struct gq_prog *p, struct gq_chan *c, int i, off_t offset,
		sq_data_t data)
{
	struct gq_op *op = &c->ops[i];
	op->c = c;
	op->index = i;
	atomic_fetch_add(&c->refs, 1);
	gq_expect(p, 1);
	sq_queue_t q = gq_q(p, op->qi, &p->rng);
	if (op->write) {
		op->got = op->length;
		sq_io_write_f(c->ch, offset, data, q, op, gq_io_handler);
	} else {
		sq_io_read_f(c->ch, offset, op->length, q, op, gq_io_handler);
	}
}

/* Random water marks and interval for a reading channel. */
static void
gq_chan_options(struct gq_prog *p, struct gq_chan *c)
{
	if (gq_chance(&p->rng, 30)) {
		c->high = 1 + gq_rnd(&p->rng, gq_chance(&p->rng, 50) ? 512
				: 65536);
		sq_io_set_high_water(c->ch, c->high);
	}
	if (gq_chance(&p->rng, 30)) {
		c->low = 1 + gq_rnd(&p->rng, c->high ? (uint32_t)c->high
				: 65536);
		sq_io_set_low_water(c->ch, c->low);
	}
	if (gq_chance(&p->rng, 40)) {
		c->interval = true;
		sq_io_set_interval(c->ch, (50 + gq_rnd(&p->rng, 2000)) * 1000ull,
				gq_chance(&p->rng, 30) ? SQ_IO_STRICT_INTERVAL : 0);
	}
}

static uint32_t
gq_stream_id(struct gq_prog *p)
{
	return atomic_fetch_add(&p->next_stream_id, 1) + 0x1000;
}

/* ---- pipe ----------------------------------------------------------------------- */

static size_t
gq_io_size(struct gq_prog *p)
{
	switch (gq_rnd(&p->rng, 4)) {
	case 0:
		return 1 + gq_rnd(&p->rng, 64);
	case 1:
		return 1 + gq_rnd(&p->rng, 4096);
	case 2:
		return 1 + gq_rnd(&p->rng, 65536);
	default:
		return 1 + gq_rnd(&p->rng, 300000);
	}
}

/* Splits `total` into n > 0 parts of at least 1 byte (n <= total). */
static int
gq_split(struct gq_prog *p, size_t total, int max, size_t *parts)
{
	int n = 1 + (int)gq_rnd(&p->rng, (uint32_t)max);
	if ((size_t)n > total)
		n = (int)total;
	size_t left = total;
	for (int i = 0; i < n - 1; i++) {
		size_t room = left - (size_t)(n - 1 - i);
		parts[i] = 1 + gq_rnd(&p->rng, (uint32_t)(room < 2 ? 1 :
				room / 2 + 1));
		left -= parts[i];
	}
	parts[n - 1] = left;
	return n;
}

static void
op_pipe(struct gq_prog *p)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		gq_fail(p, "pipe: %s", strerror(errno));
		return;
	}
	uint32_t id = gq_stream_id(p);
	size_t total = gq_io_size(p);
	bool stop = gq_chance(&p->rng, 20);
	size_t extra = stop ? 1 + gq_rnd(&p->rng, 1000) : 0;
	struct gq_chan *w = gq_chan_new(p, "pipe writer", id);
	struct gq_chan *r = gq_chan_new(p, stop ? "pipe reader (stopped)" :
			"pipe reader", id);
	w->fd = fds[1];
	r->fd = fds[0];
	r->short_ok = stop;
	gq_expect(p, 2); /* the cleanups */
	w->ch = sq_io_create_f(SQ_IO_STREAM, fds[1], gq_q(p,
			gq_pick_queue(p, &p->rng, true), &p->rng), w,
			gq_io_cleanup);
	r->ch = sq_io_create_f(SQ_IO_STREAM, fds[0], gq_q(p,
			gq_pick_queue(p, &p->rng, true), &p->rng), r,
			gq_io_cleanup);
	if (w->ch == NULL || r->ch == NULL) {
		gq_fail(p, "sq_io_create on a pipe: %s", strerror(errno));
		return;
	}
	gq_chan_options(p, r);
	atomic_init(&r->stop_votes, 2);

	size_t parts[GQ_MAX_OPS];
	/* the reads first, sometimes: they wait for the writes */
	bool reads_first = gq_chance(&p->rng, 50);
	for (int pass = 0; pass < 2; pass++) {
		bool reading = (pass == 0) == reads_first;
		if (reading) {
			int n = gq_split(p, total + extra, GQ_MAX_OPS, parts);
			uint64_t at = 0;
			r->nops = n;
			for (int i = 0; i < n; i++) {
				struct gq_op *op = &r->ops[i];
				op->start = at;
				op->length = parts[i];
				op->expect = parts[i];
				/* the last one to end of file, sometimes */
				if (i == n - 1 && !stop && gq_chance(&p->rng, 40))
					op->length = SIZE_MAX;
				op->qi = gq_pick_queue(p, &p->rng, true);
				at += parts[i];
				gq_issue(p, r, i, 0, NULL);
			}
		} else {
			int n = gq_split(p, total, GQ_MAX_OPS, parts);
			uint64_t at = 0;
			w->nops = n;
			for (int i = 0; i < n; i++) {
				struct gq_op *op = &w->ops[i];
				op->write = true;
				op->start = at;
				op->length = parts[i];
				op->qi = gq_pick_queue(p, &p->rng, true);
				if (stop && i == n - 1)
					op->stop_after = r;
				sq_data_t d = gq_data_make(id, at, parts[i]);
				gq_issue(p, w, i, 0, d);
				sq_release(d);
				at += parts[i];
			}
		}
	}
	/* Released at once: an implicit close, after the operations. */
	sq_release(w->ch);
	if (stop)
		gq_stop_vote(r);
	else
		sq_release(r->ch);
}

/* ---- file reads --------------------------------------------------------------- */

/* Makes a file of `size` bytes of stream `id`; its path in `path`. */
static bool
gq_make_file(struct gq_prog *p, char *path, size_t pathlen, uint32_t id,
		size_t size, bool zeros)
{
	static atomic_uint serial;
	snprintf(path, pathlen, "%s/f%u", gq_tmpdir,
			atomic_fetch_add(&serial, 1));
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0) {
		gq_fail(p, "open %s: %s", path, strerror(errno));
		return false;
	}
	bool ok = true;
	if (zeros) {
		ok = ftruncate(fd, (off_t)size) == 0;
	} else if (size > 0) {
		uint8_t *buf = malloc(size);
		gq_fill(buf, size, id, 0);
		ok = write(fd, buf, size) == (ssize_t)size;
		free(buf);
	}
	close(fd);
	if (!ok)
		gq_fail(p, "writing %s: %s", path, strerror(errno));
	return ok;
}

struct gq_io_signal {
	atomic_int flag;
	unsigned tail_spin;
};

static void
gq_io_barrier_signal(void *ctx)
{
	struct gq_io_signal *s = ctx;
	unsigned spin = s->tail_spin;
	atomic_store(&s->flag, 1); /* `s` may be gone from here on */
	gq_spin(spin);
}

static void
op_file_read(struct gq_prog *p)
{
	uint32_t id = gq_stream_id(p);
	size_t size = gq_chance(&p->rng, 10) ? 0 : gq_io_size(p);
	atomic_int *users = malloc(sizeof(*users));
	int nch = 1 + (int)gq_rnd(&p->rng, 4);
	atomic_init(users, nch);
	char path[96];
	if (!gq_make_file(p, path, sizeof(path), id, size, false)) {
		free(users);
		return;
	}
	for (int k = 0; k < nch; k++) {
		struct gq_chan *c = gq_chan_new(p, "file reader", id);
		snprintf(c->path, sizeof(c->path), "%s", path);
		c->file_users = users;
		sq_queue_t cq = gq_q(p, gq_pick_queue(p, &p->rng, true),
				&p->rng);
		gq_expect(p, 1); /* the cleanup */
		if (gq_chance(&p->rng, 50)) {
			c->fd = open(path, O_RDONLY | O_CLOEXEC);
			c->ch = c->fd < 0 ? NULL : sq_io_create_f(SQ_IO_RANDOM,
					c->fd, cq, c, gq_io_cleanup);
		} else {
			c->what = "file reader (path)";
			c->ch = sq_io_create_with_path_f(SQ_IO_RANDOM, path,
					O_RDONLY, 0, cq, c, gq_io_cleanup);
		}
		if (c->ch == NULL) {
			gq_fail(p, "sq_io_create on a file: %s",
					strerror(errno));
			return;
		}
		gq_chan_options(p, c);
		/* Everything decided first: in a race the reads and the end
		 * go out as soon as the signal is seen. */
		bool race = gq_chance(&p->rng, 40);
		c->nops = race && gq_chance(&p->rng, 70) ? 1 :
				1 + (int)gq_rnd(&p->rng, 3);
		sq_queue_t hq[GQ_MAX_OPS];
		for (int i = 0; i < c->nops; i++) {
			struct gq_op *op = &c->ops[i];
			uint64_t off = gq_chance(&p->rng, 50) ? 0 :
					gq_rnd(&p->rng, (uint32_t)size + 100);
			op->c = c;
			op->index = i;
			op->start = off;
			op->length = gq_chance(&p->rng, 50) ? SIZE_MAX :
					1 + gq_rnd(&p->rng, (uint32_t)size + 10);
			uint64_t avail = off < size ? size - off : 0;
			op->expect = op->length < avail ? op->length : avail;
			op->qi = gq_pick_queue(p, &p->rng, true);
			hq[i] = gq_q(p, op->qi, &p->rng);
		}
		int end = (int)gq_rnd(&p->rng, 10);
		/* (the cleanup handler may free c once the channel is
		 * closed) */
		sq_io_t ch = c->ch;
		if (end == 1)
			atomic_store(&c->stop, 1);
		atomic_fetch_add(&c->refs, c->nops);
		gq_expect(p, c->nops);
		if (race) {
			/* the reads and the end as a drain-end race on the
			 * channel's queue */
			struct gq_io_signal sig;
			atomic_init(&sig.flag, 0);
			sig.tail_spin = gq_rnd(&p->rng, 1000);
			gq_settle(p);
			sq_io_barrier_f(ch, &sig, gq_io_barrier_signal);
			if (!gq_wait_signal(p, &sig.flag))
				return;
			atomic_fetch_add_explicit(&p->races, 1,
					memory_order_relaxed);
		}
		for (int i = 0; i < c->nops; i++)
			sq_io_read_f(ch, (off_t)c->ops[i].start, c->ops[i].length,
					hq[i], &c->ops[i], gq_io_handler);
		switch (end) {
		case 0:
			sq_io_close(ch, 0);
			sq_release(ch);
			break;
		case 1:
			sq_io_close(ch, SQ_IO_STOP);
			sq_release(ch);
			break;
		default:
			sq_release(ch);
			break;
		}
	}
}

/*
 * Channel races: 16-48 rounds in a row of the pattern a release must keep
 * in order, on a small file: a random-access channel (with an interval,
 * sometimes), a barrier that signals from the channel's queue, then a read
 * of the whole file and the channel's release (an implicit close, no
 * STOP) right after the signal. The read must deliver the whole file.
 */
static void
op_channel_race(struct gq_prog *p)
{
	uint32_t id = gq_stream_id(p);
	size_t size = 1 + gq_rnd(&p->rng, 4096);
	char path[96];
	if (!gq_make_file(p, path, sizeof(path), id, size, false))
		return;
	int rounds = 16 + (int)gq_rnd(&p->rng, 33);
	atomic_int *users = malloc(sizeof(*users));
	atomic_init(users, rounds);
	gq_settle(p);
	int made = 0;
	for (int r = 0; r < rounds && atomic_load(&p->failures) == 0; r++) {
		made++;
		struct gq_chan *c = gq_chan_new(p, "file reader (release "
				"race)", id);
		atomic_int read_done;
		atomic_init(&read_done, 0);
		c->fd = open(path, O_RDONLY | O_CLOEXEC);
		snprintf(c->path, sizeof(c->path), "%s", path);
		c->file_users = users;
		struct gq_op *op = &c->ops[0];
		op->c = c;
		op->done_flag = &read_done;
		op->length = SIZE_MAX;
		op->expect = size;
		/* the default global queue: the round spins for its
		 * handler, which must not wait for low-priority workers */
		sq_queue_t dflt = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT,
				0);
		op->qi = -1;
		c->nops = 1;
		sq_queue_t hq = dflt;
		atomic_fetch_add(&c->refs, 1);
		gq_expect(p, 2); /* the read and the cleanup */
		sq_io_t ch = c->fd < 0 ? NULL : sq_io_create_f(SQ_IO_RANDOM,
				c->fd, dflt, c, gq_io_cleanup);
		if (ch == NULL) {
			gq_fail(p, "sq_io_create on a file: %s",
					strerror(errno));
			break;
		}
		c->ch = ch;
		if (gq_chance(&p->rng, 50))
			sq_io_set_interval(ch, 1000000, 0);
		struct gq_io_signal sig;
		atomic_init(&sig.flag, 0);
		sig.tail_spin = gq_rnd(&p->rng, 150);
		sq_io_barrier_f(ch, &sig, gq_io_barrier_signal);
		if (!gq_wait_signal(p, &sig.flag))
			break;
		sq_io_read_f(ch, 0, SIZE_MAX, hq, op, gq_io_handler);
		sq_release(ch);
		atomic_fetch_add_explicit(&p->races, 1, memory_order_relaxed);
		/* one read at a time (the cleanups go on meanwhile) */
		if (!gq_wait_signal(p, &read_done))
			break;
	}
	/* the last channel's cleanup unlinks the file; rounds not made
	 * (after a failure) are no users */
	int left = rounds - made;
	if (left > 0 && atomic_fetch_sub(users, left) == left) {
		unlink(path);
		free(users);
	}
}

/* ---- file writes --------------------------------------------------------------- */

struct gq_barrier_check {
	struct gq_chan *c;
	int before;          /* writes issued before the barrier */
	int fd;
	atomic_int ran;
};

static void
gq_io_barrier_check(void *ctx)
{
	struct gq_barrier_check *b = ctx;
	struct gq_chan *c = b->c;
	struct gq_prog *p = c->p;
	gq_progress(p);
	for (int i = 0; i < c->nw; i++) {
		uint8_t *buf = malloc(c->wlen[i]);
		ssize_t n = pread(b->fd, buf, c->wlen[i], (off_t)c->wstart[i]);
		bool before = i < b->before;
		bool ok = n == (ssize_t)c->wlen[i];
		for (uint64_t k = 0; ok && k < c->wlen[i]; k++)
			ok = buf[k] == (before ? gq_byte(c->id, c->wstart[i] + k)
					: 0);
		if (!ok && before)
			gq_fail(p, "%s: I/O barrier ran before write %d (issued "
					"before it) was in the file", c->what, i);
		else if (!ok && !before)
			gq_fail(p, "%s: write %d (issued after an I/O barrier) "
					"started before the barrier ran", c->what, i);
		free(buf);
	}
	close(b->fd);
	atomic_store(&b->ran, 1);
	free(b);
	gq_done(p);
}

static void
op_file_write(struct gq_prog *p)
{
	uint32_t id = gq_stream_id(p);
	struct gq_chan *c = gq_chan_new(p, "file writer", id);
	c->file_size = 4096 + gq_rnd(&p->rng, 200000);
	if (!gq_make_file(p, c->path, sizeof(c->path), id, c->file_size,
			true)) {
		free(c);
		return;
	}
	c->file_users = malloc(sizeof(*c->file_users));
	atomic_init(c->file_users, 1);
	c->fd = open(c->path, O_RDWR | O_CLOEXEC);
	gq_expect(p, 1); /* the cleanup */
	c->ch = c->fd < 0 ? NULL : sq_io_create_f(SQ_IO_RANDOM, c->fd,
			gq_q(p, gq_pick_queue(p, &p->rng, true), &p->rng), c,
			gq_io_cleanup);
	if (c->ch == NULL) {
		gq_fail(p, "sq_io_create on a file: %s", strerror(errno));
		return;
	}
	/* disjoint ranges, in a random order of the file */
	int n = 2 + (int)gq_rnd(&p->rng, GQ_MAX_OPS - 2);
	uint64_t slot = c->file_size / (uint64_t)n;
	for (int i = 0; i < n; i++) {
		uint64_t at = (uint64_t)i * slot + gq_rnd(&p->rng,
				(uint32_t)(slot / 2));
		c->wstart[i] = at;
		c->wlen[i] = 1 + gq_rnd(&p->rng, (uint32_t)(slot / 2));
	}
	for (int i = n - 1; i > 0; i--) {
		int j = (int)gq_rnd(&p->rng, (uint32_t)i + 1);
		uint64_t s = c->wstart[i], l = c->wlen[i];
		c->wstart[i] = c->wstart[j];
		c->wlen[i] = c->wlen[j];
		c->wstart[j] = s;
		c->wlen[j] = l;
	}
	c->nw = n;
	c->nops = n;
	int barrier_at = gq_chance(&p->rng, 50) ? 1 + (int)gq_rnd(&p->rng,
			(uint32_t)n - 1) : -1;
	for (int i = 0; i < n; i++) {
		if (i == barrier_at) {
			struct gq_barrier_check *b = calloc(1, sizeof(*b));
			b->c = c;
			b->before = i;
			b->fd = open(c->path, O_RDONLY | O_CLOEXEC);
			gq_expect(p, 1);
			sq_io_barrier_f(c->ch, b, gq_io_barrier_check);
		}
		struct gq_op *op = &c->ops[i];
		op->write = true;
		op->start = c->wstart[i];
		op->length = c->wlen[i];
		op->qi = gq_pick_queue(p, &p->rng, true);
		sq_data_t d = gq_data_make(id, c->wstart[i], c->wlen[i]);
		gq_issue(p, c, i, (off_t)c->wstart[i], d);
		sq_release(d);
	}
	sq_release(c->ch);
}

/* ---- sq_read / sq_write ------------------------------------------------------- */

struct gq_rw {
	struct gq_prog *p;
	uint32_t id;
	int fds[2];
	size_t total;
	size_t got;
	int reads;
	int qi;
	uint64_t seed;
};

static void gq_rw_read(void *ctx, sq_data_t data, int error);

static void
gq_rw_next(struct gq_rw *rw)
{
	struct gq_rng r = { gq_mix(rw->seed + (uint64_t)rw->reads++) };
	size_t len = 1 + gq_rnd(&r, (uint32_t)rw->total * 2);
	sq_read_f(rw->fds[0], len, gq_q(rw->p, rw->qi, &r), rw, gq_rw_read);
}

static void
gq_rw_read(void *ctx, sq_data_t data, int error)
{
	struct gq_rw *rw = ctx;
	struct gq_prog *p = rw->p;
	gq_progress(p);
	atomic_fetch_add_explicit(&p->handler_calls, 1, memory_order_relaxed);
	GQ_CHECK(p, error == 0, "sq_read: error %d (%s)", error,
			strerror(error));
	size_t size = data ? sq_data_get_size(data) : 0;
	uint64_t bad;
	if (data && !gq_data_matches(data, rw->id, rw->got, &bad))
		gq_fail(p, "sq_read: wrong byte at stream offset %" PRIu64,
				bad);
	rw->got += size;
	atomic_fetch_add_explicit(&p->io_bytes, size, memory_order_relaxed);
	GQ_CHECK(p, rw->got <= rw->total, "sq_read: %zu bytes of %zu",
			rw->got, rw->total);
	if (size == 0 || error != 0 || rw->got > rw->total) {
		GQ_CHECK(p, error != 0 || rw->got == rw->total, "sq_read: end "
				"of file after %zu of %zu bytes", rw->got,
				rw->total);
		close(rw->fds[0]);
		free(rw);
		gq_done(p);
		return;
	}
	gq_rw_next(rw); /* until end of file */
}

/* The writer's side has its own context: the reader frees `rw` at end of
 * file, which the writer's close causes (an order through the kernel). */
struct gq_rw_writer {
	struct gq_prog *p;
	int fd;
};

static void
gq_rw_written(void *ctx, sq_data_t unwritten, int error)
{
	struct gq_rw_writer *wr = ctx;
	struct gq_prog *p = wr->p;
	gq_progress(p);
	atomic_fetch_add_explicit(&p->handler_calls, 1, memory_order_relaxed);
	GQ_CHECK(p, error == 0, "sq_write: error %d (%s)", error,
			strerror(error));
	GQ_CHECK(p, unwritten == NULL || sq_data_get_size(unwritten) == 0,
			"sq_write: %zu bytes unwritten", unwritten ?
			sq_data_get_size(unwritten) : 0);
	close(wr->fd); /* end of file for the reader */
	free(wr);
	gq_done(p);
}

static void
op_read_write(struct gq_prog *p)
{
	struct gq_rw *rw = calloc(1, sizeof(*rw));
	rw->p = p;
	if (pipe2(rw->fds, O_CLOEXEC) != 0) {
		gq_fail(p, "pipe: %s", strerror(errno));
		free(rw);
		return;
	}
	rw->id = gq_stream_id(p);
	rw->total = gq_io_size(p);
	rw->qi = gq_pick_queue(p, &p->rng, true);
	rw->seed = gq_mix(p->rng.s);
	sq_data_t d = gq_data_make(rw->id, 0, rw->total);
	gq_expect(p, 2);
	struct gq_rw_writer *wr = malloc(sizeof(*wr));
	wr->p = p;
	wr->fd = rw->fds[1];
	sq_write_f(wr->fd, d, gq_q(p, gq_pick_queue(p, &p->rng, true),
			&p->rng), wr, gq_rw_written);
	sq_release(d);
	gq_rw_next(rw);
}

#endif /* SQTEST_GUARANTEES_IO_H */
