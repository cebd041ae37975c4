/*
 * SwiftQueues — dispatch sources.
 *
 * A source has two sides:
 *   - the loop side (manager thread only): the libevent event, timer entry,
 *     signal or inotify registration. When the event fires it folds the
 *     event into the atomic `pending` word (add, or, replace) and calls
 *     _sq_source_wakeup.
 *   - the delivery side: _sq_source_wakeup queues one handler job on the
 *     target queue unless one is already queued or running (SQ_SRC_QUEUED),
 *     or the source is suspended. The job takes `pending` (exchange with 0),
 *     runs the event handler with that data, then clears SQ_SRC_QUEUED and
 *     looks again. So events coalesce and a handler never overlaps itself,
 *     even on a concurrent queue.
 * Cancellation sets SQ_SRC_CANCELLED and asks the loop to let go; once it
 * has (SQ_SRC_UNREGISTERED), the next handler job runs the cancel handler,
 * after any event handler, exactly once.
 *
 * Descriptor sources are edge-triggered and persistent in libevent terms
 * (EV_ET | EV_PERSIST): the loop reports readiness once per change and
 * never needs re-arming, so a busy descriptor costs the manager thread
 * nothing between handler runs. Level-triggered delivery is rebuilt on the
 * delivery side: after the handler runs, the job polls the descriptor and,
 * if it is still ready, delivers again. A read source that reports zero
 * readable bytes at end of file (or hang-up) is delivered once, then never
 * again; zero bytes without end of file (another reader took them) is not
 * delivered at all.
 */
#include "event_internal.h"
#include "trace_internal.h"

#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#define SQ_VNODE_ALL (SQ_VNODE_DELETE | SQ_VNODE_WRITE | SQ_VNODE_EXTEND | \
		SQ_VNODE_ATTRIB | SQ_VNODE_LINK | SQ_VNODE_RENAME |        \
		SQ_VNODE_REVOKE)
#define SQ_PROC_ALL (SQ_PROC_EXIT | SQ_PROC_FORK | SQ_PROC_EXEC | \
		SQ_PROC_SIGNAL)

const struct sq_source_type_s _sq_source_type_data_add = {
	SQ_SOURCE_DATA_ADD, "data-add", 0 };
const struct sq_source_type_s _sq_source_type_data_or = {
	SQ_SOURCE_DATA_OR, "data-or", UINTPTR_MAX };
const struct sq_source_type_s _sq_source_type_data_replace = {
	SQ_SOURCE_DATA_REPLACE, "data-replace", 0 };
const struct sq_source_type_s _sq_source_type_read = {
	SQ_SOURCE_READ, "read", 0 };
const struct sq_source_type_s _sq_source_type_write = {
	SQ_SOURCE_WRITE, "write", 0 };
const struct sq_source_type_s _sq_source_type_signal = {
	SQ_SOURCE_SIGNAL, "signal", 0 };
const struct sq_source_type_s _sq_source_type_timer = {
	SQ_SOURCE_TIMER, "timer", SQ_TIMER_STRICT };
const struct sq_source_type_s _sq_source_type_proc = {
	SQ_SOURCE_PROC, "process", SQ_PROC_ALL };
const struct sq_source_type_s _sq_source_type_vnode = {
	SQ_SOURCE_VNODE, "vnode", SQ_VNODE_ALL };

static void _sq_source_dispose(struct sq_object_s *object);
static void _sq_source_suspend(struct sq_object_s *object);
static void _sq_source_resume(struct sq_object_s *object);
static void _sq_source_activate(struct sq_object_s *object);
static void _sq_source_set_target(struct sq_object_s *object,
		struct sq_queue_s *target);

static const struct sq_vtable_s _sq_source_vtable = {
	.kind = "source",
	.dispose = _sq_source_dispose,
	.suspend = _sq_source_suspend,
	.resume = _sq_source_resume,
	.activate = _sq_source_activate,
	.set_target = _sq_source_set_target,
	.fork_bound = true,
	.debug = _sq_source_debug,
};

static inline struct sq_source_s *
_sq_source_check(const char *call, sq_source_t source)
{
	_sq_object_validate(call, source);
	struct sq_source_s *s = (struct sq_source_s *)source;
	if (SQ_UNLIKELY(s->obj.vtable != &_sq_source_vtable))
		_sq_client_crash(call, "object is a %s, not a source",
				s->obj.vtable->kind);
	if (SQ_UNLIKELY(__atomic_load_n(&s->obj.xref, __ATOMIC_RELAXED) <= 0))
		_sq_client_crash(call, "%s source was already released",
				s->type->name);
	return s;
}

static inline uint64_t
_sq_source_state(struct sq_source_s *s)
{
	return __atomic_load_n(&s->state, __ATOMIC_SEQ_CST);
}

/* Asks the loop to run `bits` for s; holds s alive until it has. */
static void
_sq_source_post(struct sq_source_s *s, uint32_t bits)
{
	if (__atomic_fetch_or(&s->cmd_bits, bits, __ATOMIC_SEQ_CST) == 0) {
		_sq_retain_internal(s);
		_sq_loop_post(&s->node);
	}
}

/* ---- Delivery ------------------------------------------------------------ */

static void _sq_source_invoke(void *ctx);
static void _sq_source_replace_handler(struct sq_source_s *s, int kind,
		sq_function_t func, void *ctx, sq_function_t destructor);

/* Whether a handler job has something to do. */
static bool
_sq_source_has_work(struct sq_source_s *s, uint64_t st)
{
	if ((st & SQ_SRC_CANCELLED) && (st & SQ_SRC_UNREGISTERED) &&
			!(st & SQ_SRC_CANCEL_DONE))
		return true;
	if (st & SQ_SRC_CANCELLED)
		return false;
	if ((st & SQ_SRC_REGISTERED) && !(st & SQ_SRC_REG_DONE))
		return true;
	return __atomic_load_n(&s->pending, __ATOMIC_SEQ_CST) != 0;
}

/* Queues the handler job once, unless suspended or already queued;
 * `here`: or runs it on this thread if its queue allows. */
static void
_sq_source_wakeup_maybe_here(struct sq_source_s *s, bool here)
{
	uint64_t st = _sq_source_state(s);
	for (;;) {
		if (st & (SQ_SRC_QUEUED | SQ_SRC_INACTIVE | SQ_SRC_SUSPEND_MASK))
			return;
		if (!_sq_source_has_work(s, st))
			return;
		if (__atomic_compare_exchange_n(&s->state, &st,
				st | SQ_SRC_QUEUED, false, __ATOMIC_SEQ_CST,
				__ATOMIC_SEQ_CST))
			break;
	}
	_sq_retain_internal(s); /* the job's reference */
	sq_queue_t target = __atomic_load_n(&s->obj.target, __ATOMIC_ACQUIRE);
	/* On a worker with nothing else to do (a timer's on-time entry), a
	 * root or idle serial target's handler runs right here: no hand-off. */
	if (here && _sq_queue_try_run_here_f(target, s, _sq_source_invoke))
		return;
	sq_async_f(target, s, _sq_source_invoke);
}

static void
_sq_source_wakeup(struct sq_source_s *s)
{
	_sq_source_wakeup_maybe_here(s, false);
}

/* Takes a reference on a handler (under the lock) so it can run while
 * another thread replaces it. */
static struct sq_source_handler_s *
_sq_source_handler_get(struct sq_source_s *s, int kind)
{
	sq_spinlock_lock(&s->handler_lock);
	struct sq_source_handler_s *h = s->handlers[kind];
	if (h)
		h->refs++;
	sq_spinlock_unlock(&s->handler_lock);
	return h;
}

static void
_sq_source_handler_put(struct sq_source_s *s, struct sq_source_handler_s *h)
{
	sq_spinlock_lock(&s->handler_lock);
	bool last = --h->refs == 0;
	sq_spinlock_unlock(&s->handler_lock);
	if (last) {
		if (h->destructor)
			h->destructor(h->ctx);
		free(h);
	}
}

static SQ_NOINLINE void
_sq_source_call_observed(struct sq_source_s *s, int kind,
		struct sq_source_handler_s *h, void *ctx)
{
	SQ_OBS_HANDLER_BEGIN(s, (unsigned)kind, h->func);
	h->func(ctx);
	SQ_OBS_HANDLER_END(s);
}

static void
_sq_source_call(struct sq_source_s *s, int kind)
{
	struct sq_source_handler_s *h = _sq_source_handler_get(s, kind);
	if (h == NULL)
		return;
	void *ctx = h->ctx ? h->ctx : __atomic_load_n(&s->obj.context,
			__ATOMIC_ACQUIRE);
	/* One look at the trace points' word for both ends; the observed
	 * call is out of line, so the plain one keeps no more registers. */
	if (SQ_OBSERVED())
		_sq_source_call_observed(s, kind, h, ctx);
	else
		h->func(ctx);
	_sq_source_handler_put(s, h);
}

/* Bytes readable on a descriptor, or -1 when the kernel cannot say
 * (listening sockets, ...). */
static long
_sq_fd_readable(int fd)
{
	int n = 0;
	if (ioctl(fd, FIONREAD, &n) == 0)
		return n;
	return -1;
}

/* The data a read / write source reports, computed at delivery. */
static uintptr_t
_sq_fd_data(struct sq_source_s *s, bool *eof)
{
	int fd = (int)s->handle;
	*eof = false;
	if (s->type->kind == SQ_SOURCE_WRITE) {
		int space = 0;
		socklen_t len = sizeof(space);
		if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &space, &len) == 0 &&
				space > 0) {
			int queued = 0;
			if (ioctl(fd, TIOCOUTQ, &queued) == 0 && queued < space)
				return (uintptr_t)(space - queued);
			return (uintptr_t)space;
		}
		return 65536; /* pipes, files, ttys: "writable" */
	}
	if (__atomic_load_n(&s->always_ready, __ATOMIC_ACQUIRE)) {
		struct stat st;
		off_t pos = lseek(fd, 0, SEEK_CUR);
		if (fstat(fd, &st) == 0 && pos >= 0) {
			*eof = st.st_size <= pos;
			return *eof ? 0 : (uintptr_t)(st.st_size - pos);
		}
		return 1;
	}
	long n = _sq_fd_readable(fd);
	if (n < 0)
		return 1; /* readable, size unknown (e.g. connections) */
	if (n == 0) {
		/* Nothing to read: end of file or hang-up if the descriptor
		 * still polls readable; otherwise another reader took the
		 * data since the event, and we keep watching. */
		struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLRDHUP };
		*eof = poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN |
				POLLHUP | POLLRDHUP | POLLERR));
	}
	return (uintptr_t)n;
}

/* Whether the descriptor still names the file the source was made for. */
static bool
_sq_fd_same(struct sq_source_s *s)
{
	struct stat st;
	if (fstat((int)s->handle, &st) != 0)
		return false;
	return st.st_dev == s->dev && st.st_ino == s->ino;
}

/*
 * After a descriptor source's handler: the loop only reports edges, so if
 * the descriptor is still ready (the handler left data, or more came), the
 * next delivery is queued from here. pending is cleared first (seq_cst, the
 * merge's order): readiness that arrives after the poll below makes a new
 * edge, whose merge the loop does after this store, so nothing is lost; an
 * edge merged before the store stands for readiness the poll still sees.
 */
static void
_sq_source_recheck(struct sq_source_s *s)
{
	bool read = s->type->kind == SQ_SOURCE_READ;
	struct pollfd pfd = {
		.fd = (int)s->handle,
		.events = read ? (POLLIN | POLLRDHUP) : POLLOUT,
	};
	__atomic_store_n(&s->pending, 0, __ATOMIC_SEQ_CST);
	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (pfd.events | POLLHUP |
			POLLERR)))
		__atomic_or_fetch(&s->pending, 1, __ATOMIC_SEQ_CST);
	/* The caller's job clears SQ_SRC_QUEUED and looks at pending. */
}

static void
_sq_source_invoke(void *ctx)
{
	struct sq_source_s *s = ctx;
	uint64_t st = _sq_source_state(s);

	if ((st & SQ_SRC_REGISTERED) && !(st & (SQ_SRC_REG_DONE |
			SQ_SRC_CANCELLED))) {
		__atomic_fetch_or(&s->state, SQ_SRC_REG_DONE, __ATOMIC_SEQ_CST);
		_sq_source_call(s, 2);
		st = _sq_source_state(s);
	}

	if (!(st & (SQ_SRC_CANCELLED | SQ_SRC_SUSPEND_MASK))) {
		/* Acquire-release: we see what the merger / loop wrote before
		 * its merge. */
		uintptr_t d = __atomic_exchange_n(&s->pending, 0,
				__ATOMIC_ACQ_REL);
		if (d != 0) {
			enum sq_source_kind k = s->type->kind;
			bool deliver = true, fd = false, eof = false;
			bool always = false;
			if (k == SQ_SOURCE_READ || k == SQ_SOURCE_WRITE) {
				fd = true;
				always = __atomic_load_n(&s->always_ready,
						__ATOMIC_ACQUIRE);
				/* Handler jobs of one source never overlap:
				 * fd_eof needs no atomics. */
				deliver = !s->fd_eof &&
						(always || _sq_fd_same(s));
				if (deliver)
					d = _sq_fd_data(s, &eof);
				if (deliver && d == 0 && !eof &&
						k == SQ_SOURCE_READ)
					deliver = false; /* taken by another
							    reader */
				if (eof)
					s->fd_eof = true;
			}
			if (deliver) {
				__atomic_store_n(&s->data, d, __ATOMIC_RELAXED);
				_sq_source_call(s, 0);
			}
			if (fd && !s->fd_eof && !(_sq_source_state(s) &
					SQ_SRC_CANCELLED)) {
				if (always) /* a regular file: ready again */
					__atomic_or_fetch(&s->pending, 1,
							__ATOMIC_SEQ_CST);
				else
					_sq_source_recheck(s);
			}
		}
	}

	st = _sq_source_state(s);
	if ((st & SQ_SRC_CANCELLED) && (st & SQ_SRC_UNREGISTERED) &&
			!(st & (SQ_SRC_CANCEL_DONE | SQ_SRC_SUSPEND_MASK))) {
		__atomic_fetch_or(&s->state, SQ_SRC_CANCEL_DONE,
				__ATOMIC_SEQ_CST);
		_sq_source_call(s, 1);
		/* Handlers may capture the source (a cycle); let them go. */
		for (int kind = 0; kind < 3; kind++)
			_sq_source_replace_handler(s, kind, NULL, NULL, NULL);
	}

	/* Let the next event in, then look again (the mirror of a merge:
	 * change pending, then look at QUEUED). */
	__atomic_and_fetch(&s->state, ~SQ_SRC_QUEUED, __ATOMIC_SEQ_CST);
	_sq_source_wakeup(s);
	_sq_release_internal(s);
}

/* Folds an event into the pending word. */
SQ_INLINE void
_sq_source_fold(struct sq_source_s *s, uintptr_t value)
{
	switch (s->type->kind) {
	case SQ_SOURCE_DATA_ADD:
	case SQ_SOURCE_SIGNAL:
	case SQ_SOURCE_TIMER:
		__atomic_add_fetch(&s->pending, value, __ATOMIC_SEQ_CST);
		break;
	case SQ_SOURCE_DATA_REPLACE:
		__atomic_store_n(&s->pending, value, __ATOMIC_SEQ_CST);
		break;
	default:
		__atomic_or_fetch(&s->pending, value, __ATOMIC_SEQ_CST);
		break;
	}
}

static SQ_NOINLINE void
_sq_source_merge_observed(struct sq_source_s *s, uintptr_t value)
{
	SQ_OBS_EVENT_BEGIN(s, value);
	_sq_source_fold(s, value);
	_sq_source_wakeup(s);
	SQ_OBS_EVENT_END();
}

/* Folds an event into the pending word and wakes the delivery (any
 * thread). One look at the trace points' word for both ends of the
 * event's slice. */
void
_sq_source_merge(struct sq_source_s *s, uintptr_t value)
{
	if (SQ_OBSERVED()) {
		_sq_source_merge_observed(s, value);
		return;
	}
	_sq_source_fold(s, value);
	_sq_source_wakeup(s);
}

/* ---- Loop side: descriptors, processes -------------------------------- */

static void
_sq_source_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sq_source_s *s = arg;
	if (s->type->kind == SQ_SOURCE_PROC)
		_sq_source_merge(s, SQ_PROC_EXIT);
	else
		_sq_source_merge(s, 1);
}

/*
 * Descriptor sources by descriptor number (loop thread). A program may close
 * a descriptor without cancelling its source, and the number may come back
 * for a new file with its own source. libevent counts watchers per number,
 * so the stale watch would keep the new file out of epoll: when a source
 * registers a number whose other watchers were made for a different file,
 * those stale watchers are dropped first.
 */
static struct sq_source_s **_sq_fd_sources;
static int _sq_fd_sources_cap;

static void
_sq_fd_track(struct sq_source_s *s)
{
	int fd = (int)s->handle;
	if (fd >= _sq_fd_sources_cap) {
		int cap = _sq_fd_sources_cap ? _sq_fd_sources_cap : 64;
		while (cap <= fd)
			cap *= 2;
		void *grown = realloc(_sq_fd_sources, (size_t)cap *
				sizeof(*_sq_fd_sources));
		if (grown == NULL)
			_sq_client_crash("sq_source_create", "out of memory");
		_sq_fd_sources = grown;
		memset(_sq_fd_sources + _sq_fd_sources_cap, 0,
				(size_t)(cap - _sq_fd_sources_cap) *
				sizeof(*_sq_fd_sources));
		_sq_fd_sources_cap = cap;
	}
	for (struct sq_source_s *t = _sq_fd_sources[fd]; t; t = t->next_in_list) {
		if (t->ev && (t->dev != s->dev || t->ino != s->ino)) {
			event_free(t->ev);
			t->ev = NULL;
			t->stale = true;
		}
	}
	s->next_in_list = _sq_fd_sources[fd];
	_sq_fd_sources[fd] = s;
	s->tracked = true;
}

static void
_sq_fd_untrack(struct sq_source_s *s)
{
	int fd = (int)s->handle;
	if (fd >= _sq_fd_sources_cap)
		return;
	struct sq_source_s **link = &_sq_fd_sources[fd];
	while (*link && *link != s)
		link = &(*link)->next_in_list;
	if (*link)
		*link = s->next_in_list;
}

static int
_sq_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* ---- Loop side: signals ------------------------------------------------
 *
 * The runtime's own handler, not libevent's: it counts the delivery in a
 * per-signal counter and kicks the loop's eventfd (both async-signal-safe);
 * the loop adds the counts to every source for the number. One handler run
 * per delivery, so queued real-time signals are counted exactly.
 *
 * Delivery does not depend on the program's masks: a watcher thread, started
 * with the first signal source with every signal blocked, unblocks exactly
 * the numbers that have a source and sleeps in poll(). A signal the program
 * blocks in all its threads still has that one thread to go to. A thread
 * that leaves it unblocked may take it instead; the handler is the same
 * wherever it runs. (The manager itself keeps every asynchronous signal
 * blocked, so the workers it starts do too.)
 *
 * The first source for a number installs the handler and keeps the old
 * disposition; the last one gone puts that back, but only if the current
 * one is still ours (a handler the program installed in between stays).
 */
static struct {
	struct sq_source_s *sources;
	struct sigaction old; /* the disposition before the first source */
	bool installed;
} _sq_signals[NSIG];

/* Written by the handler on any thread, taken by the loop. seq_cst: the
 * count is added before the flag is raised, and the loop lowers the flag
 * before it takes the counts, so a delivery is either taken by this drain
 * or raises the flag (and kicks the eventfd) for the next one. */
static uint64_t _sq_signal_counts[NSIG];
static uint32_t _sq_signal_raised;

static void
_sq_signal_handler(int signo)
{
	int saved = errno;
	if (signo > 0 && signo < NSIG) {
		__atomic_add_fetch(&_sq_signal_counts[signo], 1,
				__ATOMIC_SEQ_CST);
		__atomic_store_n(&_sq_signal_raised, 1, __ATOMIC_SEQ_CST);
		_sq_loop_kick();
		SQ_TRACE_SIGNAL(signo);
		/* SQ_SNAPSHOT_SIGNAL: straight to the watchdog's thread, so a
		 * snapshot needs no other thread of ours to be free. */
		if (signo == __atomic_load_n(&_sq_snapshot_signo,
				__ATOMIC_RELAXED))
			_sq_watchdog_signal();
	}
	errno = saved;
}

void
_sq_signals_drain(void)
{
	if (__atomic_exchange_n(&_sq_signal_raised, 0, __ATOMIC_SEQ_CST) == 0)
		return;
	for (int signo = 1; signo < NSIG; signo++) {
		if (__atomic_load_n(&_sq_signal_counts[signo],
				__ATOMIC_RELAXED) == 0)
			continue;
		uint64_t n = __atomic_exchange_n(&_sq_signal_counts[signo], 0,
				__ATOMIC_SEQ_CST);
		for (struct sq_source_s *s = _sq_signals[signo].sources; s;
				s = s->next_in_list)
			_sq_source_merge(s, (uintptr_t)n);
	}
}

/* The watcher thread. The loop thread asks for a new set of watched
 * numbers (`want`, bit signo - 1) and waits until the watcher has applied
 * it (`done` reaches the request's generation), so when a last source
 * goes, the number is blocked again before the old disposition returns. */
static struct {
	int fd;          /* eventfd: a new request */
	uint64_t want;   /* written by the loop before bumping `asked` */
	uint32_t asked;  /* request generation (loop thread) */
	uint32_t done;   /* applied generation, futex word */
	bool started;
} _sq_sigwatch = { .fd = -1 };

static void *
_sq_sigwatch_main(void *unused)
{
	pthread_setname_np(pthread_self(), "sq.signals");
	_sq_trace_set_role(SQ_ROLE_SIGNALS, 0);
	for (;;) {
		/* A ring for the handler to record into, when recording. */
		if (SQ_OBSERVED())
			_sq_trace_attach_here();
		/* Acquire: `want` as written before `asked` was bumped. */
		uint32_t gen = __atomic_load_n(&_sq_sigwatch.asked,
				__ATOMIC_ACQUIRE);
		uint64_t want = __atomic_load_n(&_sq_sigwatch.want,
				__ATOMIC_RELAXED);
		sigset_t set;
		sigfillset(&set);
		sigdelset(&set, SIGPROF); /* as every thread of ours */
		for (int signo = 1; signo < NSIG && signo <= 64; signo++)
			if (want & (1ull << (signo - 1)))
				sigdelset(&set, signo);
		pthread_sigmask(SIG_SETMASK, &set, NULL);
		__atomic_store_n(&_sq_sigwatch.done, gen, __ATOMIC_RELEASE);
		_sq_futex_wake(&_sq_sigwatch.done, 1);
		/* Signals land here (poll returns EINTR); requests come
		 * through the eventfd. */
		struct pollfd pfd = { .fd = _sq_sigwatch.fd, .events = POLLIN };
		if (poll(&pfd, 1, -1) == 1) {
			uint64_t n;
			ssize_t r = read(_sq_sigwatch.fd, &n, sizeof(n));
			(void)r;
		}
	}
	return NULL;
}

/* Serialises starting the watcher and opening the inotify descriptor, which
 * sq_source_create does on the caller's thread so that a failure is the
 * caller's error. */
static pthread_mutex_t _sq_source_start_lock = PTHREAD_MUTEX_INITIALIZER;

/* Starts the watcher thread and its eventfd unless they run already.
 * Returns 0 or the errno (EMFILE, ENFILE: the eventfd; EAGAIN: the
 * thread). */
static int
_sq_sigwatch_start(void)
{
	/* Acquire: pairs with the release below (the descriptor, the
	 * thread). */
	if (__atomic_load_n(&_sq_sigwatch.started, __ATOMIC_ACQUIRE))
		return 0;
	int err = 0;
	pthread_mutex_lock(&_sq_source_start_lock);
	if (!_sq_sigwatch.started) {
		if (_sq_sigwatch.fd < 0) {
			_sq_sigwatch.fd = eventfd(0, EFD_CLOEXEC |
					EFD_NONBLOCK);
			if (_sq_sigwatch.fd < 0)
				err = errno;
		}
		/* Every asynchronous signal blocked (_sq_thread_start):
		 * the watcher unblocks the watched ones itself. */
		if (err == 0)
			err = _sq_thread_start(_sq_sigwatch_main, NULL, 0);
		if (err == 0)
			__atomic_store_n(&_sq_sigwatch.started, true,
					__ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&_sq_source_start_lock);
	return err;
}

/* Watches (on) or stops watching `signo` on the watcher thread, and waits
 * until it has. Loop thread; the watcher was started when the source was
 * made. */
static void
_sq_sigwatch_set(int signo, bool on)
{
	if (signo > 64)
		return;
	uint64_t bit = 1ull << (signo - 1);
	uint64_t want = _sq_sigwatch.want;
	__atomic_store_n(&_sq_sigwatch.want, on ? want | bit : want & ~bit,
			__ATOMIC_RELAXED);
	/* Release: the watcher that sees the new generation sees `want`. */
	uint32_t gen = _sq_sigwatch.asked + 1;
	__atomic_store_n(&_sq_sigwatch.asked, gen, __ATOMIC_RELEASE);
	uint64_t one = 1;
	ssize_t w = write(_sq_sigwatch.fd, &one, sizeof(one));
	(void)w;
	for (;;) {
		uint32_t done = __atomic_load_n(&_sq_sigwatch.done,
				__ATOMIC_ACQUIRE);
		if ((int32_t)(done - gen) >= 0)
			break;
		_sq_futex_wait(&_sq_sigwatch.done, done, NULL);
	}
}

/* Whether `signo`'s disposition is still the runtime's handler. */
static bool
_sq_signal_is_ours(int signo)
{
	struct sigaction cur;
	if (sigaction(signo, NULL, &cur) != 0)
		return false;
	return !(cur.sa_flags & SA_SIGINFO) &&
			cur.sa_handler == _sq_signal_handler;
}

static void
_sq_signal_register(struct sq_source_s *s)
{
	int signo = (int)s->handle;
	if (!_sq_signals[signo].installed) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = _sq_signal_handler;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		/* Deliveries before the first source are not counted. */
		__atomic_store_n(&_sq_signal_counts[signo], 0,
				__ATOMIC_SEQ_CST);
		if (sigaction(signo, &sa, &_sq_signals[signo].old) == 0) {
			_sq_signals[signo].installed = true;
			/* Handler first, then unblock: a pending signal
			 * comes in through it. */
			_sq_sigwatch_set(signo, true);
		}
	}
	s->next_in_list = _sq_signals[signo].sources;
	_sq_signals[signo].sources = s;
}

static void
_sq_signal_unregister(struct sq_source_s *s)
{
	int signo = (int)s->handle;
	struct sq_source_s **link = &_sq_signals[signo].sources;
	while (*link && *link != s)
		link = &(*link)->next_in_list;
	if (*link)
		*link = s->next_in_list;
	if (_sq_signals[signo].sources == NULL &&
			_sq_signals[signo].installed) {
		/* Blocked on the watcher first: from now on the signal
		 * goes where the program's masks send it, as before. */
		_sq_sigwatch_set(signo, false);
		if (_sq_signal_is_ours(signo))
			sigaction(signo, &_sq_signals[signo].old, NULL);
		_sq_signals[signo].installed = false;
	}
}

/* Child side of fork (fork.c): the program's dispositions come back for
 * every signal the runtime caught; the parent's sources stay unusable, so
 * the lists are simply forgotten. */
void
_sq_signals_atfork_child(void)
{
	for (int signo = 1; signo < NSIG; signo++) {
		if (_sq_signals[signo].installed && _sq_signal_is_ours(signo))
			sigaction(signo, &_sq_signals[signo].old, NULL);
		_sq_signals[signo].installed = false;
		_sq_signals[signo].sources = NULL;
		_sq_signal_counts[signo] = 0;
	}
	_sq_signal_raised = 0;
	/* The watcher thread is not in the child; its eventfd is. */
	if (_sq_sigwatch.fd >= 0)
		close(_sq_sigwatch.fd);
	_sq_sigwatch.fd = -1;
	_sq_sigwatch.want = 0;
	_sq_sigwatch.asked = _sq_sigwatch.done = 0;
	_sq_sigwatch.started = false;
}

void
_sq_sources_atfork_child(void)
{
	free(_sq_fd_sources);
	_sq_fd_sources = NULL;
	_sq_fd_sources_cap = 0;
	_sq_vnode_atfork_child();
	pthread_mutex_init(&_sq_source_start_lock, NULL);
}

/* ---- Loop side: timers ------------------------------------------------- */

/* A tick fired early, merged at its deadline (event.c, "Precise
 * wake-ups"). One allocation per early tick: a timer whose interval is
 * below the margin can have two in flight. */
struct sq_source_tick_s {
	struct sq_ontime_s ontime;
	struct sq_source_s *source;
	uintptr_t fires;
};

static void
_sq_source_tick_on_time(struct sq_ontime_s *e)
{
	struct sq_source_tick_s *tick = caa_container_of(e,
			struct sq_source_tick_s, ontime);
	struct sq_source_s *s = tick->source;
	__atomic_add_fetch(&s->pending, tick->fires, __ATOMIC_SEQ_CST);
	free(tick);
	_sq_source_wakeup_maybe_here(s, true);
	_sq_release_internal(s);
}

static void
_sq_source_timer_fire(struct sq_timer_s *t, uint64_t now, bool early)
{
	struct sq_source_s *s = caa_container_of(t, struct sq_source_s, timer);
	uint64_t fires = 1;
	sq_spinlock_lock(&s->timer_lock);
	uint64_t interval = s->timer_interval;
	uint64_t leeway = s->timer_leeway;
	sq_spinlock_unlock(&s->timer_lock);
	if (interval != SQ_TIME_FOREVER && interval != 0) {
		/* Fires missed while we were late count too; the schedule
		 * stays anchored at start + k * interval (no drift). */
		uint64_t late = now - t->deadline;
		uint64_t missed = late / interval;
		fires += missed;
		uint64_t next = t->deadline + (missed + 1) * interval;
		if (next < t->deadline) /* overflow: stop */
			next = UINT64_MAX;
		if (next != UINT64_MAX) {
			t->deadline = next;
			t->latest = next + leeway < next ? UINT64_MAX
					: next + leeway;
			_sq_timer_schedule(t);
		}
	}
	if (!early) {
		_sq_source_merge(s, (uintptr_t)fires);
		return;
	}
	/* Fired ahead (`now` is the deadline): merged when due. The
	 * reference keeps the source for the entry. */
	struct sq_source_tick_s *tick = malloc(sizeof(*tick));
	if (tick == NULL)
		_sq_client_crash("sq_source_set_timer", "out of memory");
	tick->ontime.due = now;
	tick->ontime.run = _sq_source_tick_on_time;
	tick->source = s;
	tick->fires = (uintptr_t)fires;
	_sq_retain_internal(s);
	_sq_ontime_post(&tick->ontime);
}

/* Loads the schedule given by sq_source_set_timer into the heap entry. */
static void
_sq_source_timer_apply(struct sq_source_s *s)
{
	sq_spinlock_lock(&s->timer_lock);
	uint64_t start = s->timer_start;
	uint64_t leeway = s->timer_leeway;
	sq_spinlock_unlock(&s->timer_lock);
	_sq_timer_unschedule(&s->timer);
	if (start == SQ_TIME_FOREVER)
		return;
	if (start == SQ_TIME_NOW)
		start = _sq_monotonic_ns();
	else if (start == SQ_WALLTIME_NOW)
		start = SQ_TIME_WALL_FLAG | _sq_wall_ns();
	s->timer.clock = (start & SQ_TIME_WALL_FLAG) ? SQ_CLOCK_WALL
			: SQ_CLOCK_MONOTONIC;
	s->timer.deadline = start & ~SQ_TIME_WALL_FLAG;
	s->timer.latest = s->timer.deadline + leeway < s->timer.deadline
			? UINT64_MAX : s->timer.deadline + leeway;
	_sq_timer_schedule(&s->timer);
}

/* ---- Loop side: commands ---------------------------------------------- */

static void
_sq_source_register(struct sq_source_s *s)
{
	switch (s->type->kind) {
	case SQ_SOURCE_READ:
	case SQ_SOURCE_WRITE:
		if (!s->always_ready) {
			short what = s->type->kind == SQ_SOURCE_READ ? EV_READ
					: EV_WRITE;
			_sq_fd_track(s);
			s->ev = event_new(_sq_loop_base(), (int)s->handle,
					what | EV_ET | EV_PERSIST,
					_sq_source_event_cb, s);
			/* A descriptor epoll refuses is always ready. */
			if (s->ev == NULL || event_add(s->ev, NULL) != 0) {
				if (s->ev)
					event_free(s->ev);
				s->ev = NULL;
				__atomic_store_n(&s->always_ready, true,
						__ATOMIC_RELEASE);
			}
		}
		if (s->always_ready)
			_sq_source_merge(s, 1);
		break;
	case SQ_SOURCE_PROC:
		if (s->pidfd < 0) {
			/* No such process (reaped, or never was): it has
			 * exited, as far as anyone can tell. */
			_sq_source_merge(s, SQ_PROC_EXIT);
			break;
		}
		s->ev = event_new(_sq_loop_base(), s->pidfd, EV_READ,
				_sq_source_event_cb, s);
		if (s->ev)
			event_add(s->ev, NULL);
		break;
	case SQ_SOURCE_SIGNAL:
		_sq_signal_register(s);
		break;
	case SQ_SOURCE_VNODE:
		_sq_vnode_register(s);
		break;
	case SQ_SOURCE_TIMER:
		_sq_source_timer_apply(s);
		break;
	default:
		break; /* data sources need no watching */
	}
	s->registered = true;
}

static void
_sq_source_unregister(struct sq_source_s *s)
{
	if (s->ev) {
		event_free(s->ev); /* deletes it first */
		s->ev = NULL;
	}
	switch (s->type->kind) {
	case SQ_SOURCE_READ:
	case SQ_SOURCE_WRITE:
		if (s->tracked)
			_sq_fd_untrack(s);
		s->tracked = false;
		break;
	case SQ_SOURCE_SIGNAL:
		_sq_signal_unregister(s);
		break;
	case SQ_SOURCE_VNODE:
		_sq_vnode_unwatch(s);
		break;
	case SQ_SOURCE_TIMER:
		_sq_timer_unschedule(&s->timer);
		break;
	case SQ_SOURCE_PROC:
		if (s->pidfd >= 0)
			close(s->pidfd);
		s->pidfd = -1;
		break;
	default:
		break;
	}
	s->registered = false;
}

void
_sq_source_run_commands(struct sq_source_s *s)
{
	uint32_t bits = __atomic_exchange_n(&s->cmd_bits, 0, __ATOMIC_SEQ_CST);
	bool cancelled = _sq_source_state(s) & SQ_SRC_CANCELLED;

	if ((bits & SQ_CMD_REGISTER) && !cancelled && !s->registered) {
		/* The loop's pointer keeps s alive until unregistered. */
		_sq_retain_internal(s);
		_sq_source_register(s);
		__atomic_fetch_or(&s->state, SQ_SRC_REGISTERED,
				__ATOMIC_SEQ_CST);
		_sq_source_wakeup(s);
	}
	if ((bits & SQ_CMD_REGISTER) && s->type->kind == SQ_SOURCE_SIGNAL) {
		/* Release: the activating thread, once it sees this, sees
		 * the handler installed (the sigaction came before). */
		__atomic_store_n(&s->activated, 1, __ATOMIC_RELEASE);
		_sq_futex_wake(&s->activated, INT32_MAX);
	}
	if ((bits & SQ_CMD_TIMER) && !cancelled && s->registered)
		_sq_source_timer_apply(s);
	if (bits & SQ_CMD_CANCEL) {
		bool was_registered = s->registered;
		if (was_registered)
			_sq_source_unregister(s);
		__atomic_fetch_or(&s->state, SQ_SRC_UNREGISTERED,
				__ATOMIC_SEQ_CST);
		_sq_source_wakeup(s);
		if (was_registered)
			_sq_release_internal(s);
	}
	_sq_release_internal(s); /* the posting's reference */
}

/* ---- Creation and the object ----------------------------------------- */

static bool
_sq_signal_allowed(uintptr_t signo)
{
	if (signo == 0 || signo >= NSIG)
		return false;
	switch (signo) {
	case SIGKILL:
	case SIGSTOP:
	case SIGILL:
	case SIGBUS:
	case SIGSEGV:
	case SIGFPE:
		return false;
	default:
		return true;
	}
}

sq_source_t
sq_source_create(sq_source_type_t type, uintptr_t handle, uintptr_t mask,
		sq_queue_t queue)
{
	if (type != SQ_SOURCE_TYPE_DATA_ADD && type != SQ_SOURCE_TYPE_DATA_OR &&
			type != SQ_SOURCE_TYPE_DATA_REPLACE &&
			type != SQ_SOURCE_TYPE_READ &&
			type != SQ_SOURCE_TYPE_WRITE &&
			type != SQ_SOURCE_TYPE_SIGNAL &&
			type != SQ_SOURCE_TYPE_TIMER &&
			type != SQ_SOURCE_TYPE_PROC &&
			type != SQ_SOURCE_TYPE_VNODE) {
		errno = EINVAL;
		return NULL;
	}
	if (mask & ~type->valid_mask) {
		errno = EINVAL;
		return NULL;
	}
	if (queue == NULL)
		queue = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
	else
		_sq_object_validate("sq_source_create", queue);

	int pidfd = -1, err = 0;
	struct stat st;
	bool regular = false;
	switch (type->kind) {
	case SQ_SOURCE_READ:
	case SQ_SOURCE_WRITE:
	case SQ_SOURCE_VNODE:
		if (handle > INT32_MAX || fstat((int)handle, &st) != 0) {
			errno = EBADF;
			return NULL;
		}
		regular = S_ISREG(st.st_mode) && type->kind != SQ_SOURCE_VNODE;
		if (type->kind == SQ_SOURCE_VNODE && mask == 0) {
			errno = EINVAL;
			return NULL;
		}
		if (type->kind == SQ_SOURCE_VNODE)
			err = _sq_inotify_open();
		break;
	case SQ_SOURCE_SIGNAL:
		if (!_sq_signal_allowed(handle)) {
			errno = EINVAL;
			return NULL;
		}
		err = _sq_sigwatch_start();
		break;
	case SQ_SOURCE_PROC:
		if (mask & ~SQ_PROC_EXIT) {
			errno = ENOTSUP;
			return NULL;
		}
		if (mask == 0) {
			errno = EINVAL;
			return NULL;
		}
		/* A pid that is not there (reaped, or never was) gets a
		 * source that delivers SQ_PROC_EXIT at once, as Darwin's
		 * libdispatch does for any pid its registration fails
		 * with ESRCH. */
		if (handle == 0 || handle > INT32_MAX)
			break;
		pidfd = _sq_pidfd_open((pid_t)handle);
		if (pidfd < 0 && errno != ESRCH)
			err = errno; /* EMFILE, ENFILE, ENOMEM */
		else if (pidfd >= 0)
			fcntl(pidfd, F_SETFD, FD_CLOEXEC);
		break;
	default:
		break;
	}
	/* Timers and data sources need nothing but the loop; when it cannot
	 * start they wait for it, as sq_after does (the Swift TimerSource
	 * and DataSource cannot fail). The others fail here, with the errno
	 * of what is missing, where a bad handle already fails. */
	bool needs_only_loop = type->kind == SQ_SOURCE_TIMER ||
			type->kind <= SQ_SOURCE_DATA_REPLACE;
	bool loop_waits = false;
	if (err == 0) {
		int loop_err = _sq_loop_start();
		if (loop_err != 0 && needs_only_loop)
			loop_waits = true;
		else
			err = loop_err;
	}
	if (err != 0) {
		if (pidfd >= 0)
			close(pidfd);
		errno = err;
		return NULL;
	}
	if (loop_waits)
		_sq_pool_retry_later(_sq_loop_retry);

	struct sq_source_s *s = _sq_object_alloc(&_sq_source_vtable,
			sizeof(*s));
	s->type = type;
	s->handle = handle;
	s->mask = mask;
	s->state = SQ_SRC_INACTIVE;
	s->node.kind = SQ_LOOP_SOURCE;
	s->pidfd = pidfd;
	s->wd = -1;
	s->parent_wd = -1;
	s->always_ready = regular;
	if (type->kind == SQ_SOURCE_READ || type->kind == SQ_SOURCE_WRITE ||
			type->kind == SQ_SOURCE_VNODE) {
		s->dev = st.st_dev;
		s->ino = st.st_ino;
	}
	if (type->kind == SQ_SOURCE_VNODE) {
		err = _sq_vnode_watch(s, S_ISDIR(st.st_mode));
		if (err != 0) {
			_sq_object_free(&s->obj);
			errno = err;
			return NULL;
		}
	}
	_sq_timer_init(&s->timer, _sq_source_timer_fire);
	s->timer_start = SQ_TIME_FOREVER;
	s->timer_interval = SQ_TIME_FOREVER;
	_sq_retain_internal(queue);
	s->obj.target = queue;
	_sq_introspect_register(&s->obj);
	return s;
}

static void
_sq_source_dispose(struct sq_object_s *object)
{
	struct sq_source_s *s = (struct sq_source_s *)object;
	for (int kind = 0; kind < 3; kind++) {
		struct sq_source_handler_s *h = s->handlers[kind];
		if (h && --h->refs == 0) {
			if (h->destructor)
				h->destructor(h->ctx);
			free(h);
		}
	}
	if (s->pidfd >= 0)
		close(s->pidfd);
	if (s->type->kind == SQ_SOURCE_VNODE)
		_sq_vnode_unwatch(s); /* never activated: its watch goes */
	struct sq_queue_s *target = s->obj.target;
	_sq_object_free(&s->obj);
	_sq_release_internal(target);
}

static void
_sq_source_activate(struct sq_object_s *object)
{
	struct sq_source_s *s = (struct sq_source_s *)object;
	uint64_t old = __atomic_fetch_and(&s->state, ~SQ_SRC_INACTIVE,
			__ATOMIC_SEQ_CST);
	if (old & SQ_SRC_INACTIVE) {
		_sq_source_post(s, SQ_CMD_REGISTER);
		_sq_source_wakeup(s);
		/* A signal source is armed when activation returns: the
		 * runtime's handler is installed and the watcher unblocks
		 * the number, so a signal raised right after it reaches the
		 * source instead of its default action (which, for most
		 * signals, ends the process). One round trip to the loop
		 * thread, which never activates a source itself. */
		if (s->type->kind == SQ_SOURCE_SIGNAL) {
			/* Acquire: pairs with the loop's release. */
			while (__atomic_load_n(&s->activated,
					__ATOMIC_ACQUIRE) == 0)
				_sq_futex_wait(&s->activated, 0, NULL);
		}
	}
}

static void
_sq_source_suspend(struct sq_object_s *object)
{
	struct sq_source_s *s = (struct sq_source_s *)object;
	__atomic_add_fetch(&s->state, SQ_SRC_SUSPEND_ONE, __ATOMIC_SEQ_CST);
}

static void
_sq_source_resume(struct sq_object_s *object)
{
	struct sq_source_s *s = (struct sq_source_s *)object;
	uint64_t st = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
	for (;;) {
		if ((st & SQ_SRC_SUSPEND_MASK) == 0) {
			if (st & SQ_SRC_INACTIVE) {
				_sq_source_activate(object);
				return;
			}
			_sq_client_crash("sq_resume", "over-resume of %s "
					"source", s->type->name);
		}
		if (__atomic_compare_exchange_n(&s->state, &st,
				st - SQ_SRC_SUSPEND_ONE, false,
				__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			break;
	}
	_sq_source_wakeup(s);
}

static void
_sq_source_set_target(struct sq_object_s *object, struct sq_queue_s *target)
{
	/* Later handler jobs go to the new queue. */
	_sq_retain_internal(target);
	struct sq_queue_s *old = __atomic_exchange_n(&object->target, target,
			__ATOMIC_ACQ_REL);
	_sq_release_internal(old);
}

/* ---- Public calls -------------------------------------------------------- */

static void
_sq_source_replace_handler(struct sq_source_s *s, int kind,
		sq_function_t func, void *ctx, sq_function_t destructor)
{
	struct sq_source_handler_s *h = NULL;
	if (func != NULL) {
		h = malloc(sizeof(*h));
		if (h == NULL)
			_sq_client_crash("sq_source_set_event_handler",
					"out of memory");
		h->func = func;
		h->ctx = ctx;
		h->destructor = destructor;
		h->refs = 1;
	}
	sq_spinlock_lock(&s->handler_lock);
	struct sq_source_handler_s *old = s->handlers[kind];
	s->handlers[kind] = h;
	sq_spinlock_unlock(&s->handler_lock);
	if (old)
		_sq_source_handler_put(s, old);
}

void
_sq_source_set_handler(sq_source_t source, int kind, sq_function_t func,
		void *ctx, sq_function_t destructor)
{
	struct sq_source_s *s = _sq_source_check("sq_source_set_event_handler",
			source);
	if (kind < 0 || kind > 2)
		_sq_client_crash("sq_source_set_event_handler", "bad handler "
				"kind %d", kind);
	_sq_source_replace_handler(s, kind, func, ctx, destructor);
}

void
sq_source_set_event_handler_f(sq_source_t source, sq_function_t handler)
{
	_sq_source_replace_handler(_sq_source_check(
			"sq_source_set_event_handler_f", source), 0, handler,
			NULL, NULL);
}

void
sq_source_set_cancel_handler_f(sq_source_t source, sq_function_t handler)
{
	_sq_source_replace_handler(_sq_source_check(
			"sq_source_set_cancel_handler_f", source), 1, handler,
			NULL, NULL);
}

void
sq_source_set_registration_handler_f(sq_source_t source,
		sq_function_t handler)
{
	_sq_source_replace_handler(_sq_source_check(
			"sq_source_set_registration_handler_f", source), 2,
			handler, NULL, NULL);
}

void
sq_source_cancel(sq_source_t source)
{
	struct sq_source_s *s = _sq_source_check("sq_source_cancel", source);
	uint64_t old = __atomic_fetch_or(&s->state, SQ_SRC_CANCELLED,
			__ATOMIC_SEQ_CST);
	if (!(old & SQ_SRC_CANCELLED))
		_sq_source_post(s, SQ_CMD_CANCEL);
}

intptr_t
sq_source_testcancel(sq_source_t source)
{
	struct sq_source_s *s = _sq_source_check("sq_source_testcancel",
			source);
	return (_sq_source_state(s) & SQ_SRC_CANCELLED) != 0;
}

uintptr_t
sq_source_get_handle(sq_source_t source)
{
	struct sq_source_s *s = _sq_source_check("sq_source_get_handle",
			source);
	if (s->type->kind == SQ_SOURCE_TIMER || s->type->kind <=
			SQ_SOURCE_DATA_REPLACE)
		return 0;
	return s->handle;
}

uintptr_t
sq_source_get_mask(sq_source_t source)
{
	return _sq_source_check("sq_source_get_mask", source)->mask;
}

uintptr_t
sq_source_get_data(sq_source_t source)
{
	struct sq_source_s *s = _sq_source_check("sq_source_get_data", source);
	return __atomic_load_n(&s->data, __ATOMIC_RELAXED);
}

void
sq_source_merge_data(sq_source_t source, uintptr_t value)
{
	struct sq_source_s *s = _sq_source_check("sq_source_merge_data",
			source);
	enum sq_source_kind k = s->type->kind;
	if (k != SQ_SOURCE_DATA_ADD && k != SQ_SOURCE_DATA_OR &&
			k != SQ_SOURCE_DATA_REPLACE)
		return;
	if (_sq_source_state(s) & SQ_SRC_CANCELLED)
		return;
	if (k == SQ_SOURCE_DATA_OR && s->mask != 0)
		value &= s->mask;
	if (value == 0 && k != SQ_SOURCE_DATA_REPLACE)
		return;
	_sq_source_merge(s, value);
}

void
sq_source_set_timer(sq_source_t source, sq_time_t start, uint64_t interval,
		uint64_t leeway)
{
	struct sq_source_s *s = _sq_source_check("sq_source_set_timer", source);
	if (s->type->kind != SQ_SOURCE_TIMER)
		_sq_client_crash("sq_source_set_timer", "%s source is not a "
				"timer", s->type->name);
	if (interval == 0)
		interval = 1; /* as libdispatch: a zero interval means "asap" */
	/* The leeway policy (source.h): capped, at most half an interval,
	 * none for STRICT. */
	if (leeway > SQ_TIMER_LEEWAY_MAX)
		leeway = SQ_TIMER_LEEWAY_MAX;
	if (interval != SQ_TIME_FOREVER && leeway > interval / 2)
		leeway = interval / 2;
	if (s->mask & SQ_TIMER_STRICT)
		leeway = 0;
	sq_spinlock_lock(&s->timer_lock);
	s->timer_start = start;
	s->timer_interval = interval;
	s->timer_leeway = leeway;
	sq_spinlock_unlock(&s->timer_lock);
	_sq_source_post(s, SQ_CMD_TIMER);
}
