/*
 * SwiftQueues — the trace recorder: SQ_TRACE=<path>, sq_trace_start and
 * sq_trace_stop write Chrome's JSON trace event format, which Perfetto UI
 * and chrome://tracing open. The observation points that feed it are in
 * trace_internal.h.
 *
 * Recording. A thread that reaches a point while a trace is recorded gets a
 * ring of fixed-size binary records (32 bytes: a raw timestamp, a type, a
 * flow id, two words), registered once under the registry lock; after that
 * a record is a few stores into its own ring and a release store of its
 * count: no lock, no atomic read-modify-write. A ring keeps the newest
 * records; when it wraps the oldest go, and the trace says how many.
 * Timestamps are the TSC where the kernel's own clock source is the TSC
 * (about 10 ns to read, against 20-60 ns for clock_gettime on a VM),
 * mapped to CLOCK_MONOTONIC when the trace is written by a reading of both
 * clocks at the start and one at the end; elsewhere CLOCK_MONOTONIC itself.
 *
 * Writing. Nothing is converted while recording: sq_trace_stop (or the exit
 * of a process that is recording) stops the recording, reads every ring and
 * writes the JSON: a track per thread named after its role, a slice per
 * task named by its queue's label with its function's symbol (looked up
 * only now: dladdr, then the module's own symbol table, which also names
 * static functions), flow arrows from each submission to the run it led
 * to, instants, and counters for the pool and each queue's depth (worked
 * out here from the submissions and starts, so recording counts nothing).
 * There is no background flush: the rings are bounded, so memory does not
 * grow however long a trace runs, and flushing while threads record would
 * race their writes into the rings it reads and put the writer's own work
 * into the trace.
 *
 * A thread that passed its "recording?" look just before the stop may
 * still write one record: into the slot after its last counted one, which
 * the writer leaves out when the ring has wrapped (it is then the oldest),
 * so a record is never read while being written. A fork() child records
 * nothing and forgets the parent's rings and file (fork.c).
 */
#include "trace_internal.h"
#include "event_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#ifdef SQ_NO_TRACE

/* The build without observation points (-DSQ_NO_TRACE, for measuring
 * their cost): nothing can be recorded. */
union sq_observe_u _sq_observe;
SQ_TLS int _sq_trace_role;
SQ_TLS int _sq_trace_role_index;
SQ_TLS uint32_t _sq_trace_inherited;
SQ_TLS uint8_t _sq_trace_kind;

int
sq_trace_start(const char *path)
{
	(void)path;
	errno = ENOTSUP;
	return -1;
}

int
sq_trace_stop(void)
{
	errno = EINVAL;
	return -1;
}

bool
sq_trace_recording(void)
{
	return false;
}

void
_sq_trace_atfork_child(void)
{
}

void
_sq_trace_attach_here(void)
{
}

#else /* !SQ_NO_TRACE */

/* ---- Probes ------------------------------------------------------------------
 *
 * USDT probes, each with a semaphore (the kernel counts the tracers
 * attached to a probe there, so a point can tell whether anyone listens),
 * and every probe's semaphore is one and the same 16-bit word: the low
 * half of _sq_observe, in the ".probes" section where tracers look for
 * semaphores. So the one compare every point makes covers all probes and
 * the recording. */

union sq_observe_u _sq_observe __attribute__((section(".probes")));

#if defined(__has_include)
#if __has_include(<sys/sdt.h>)
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#define SQ_HAVE_PROBES 1
#endif
#endif

#ifdef SQ_HAVE_PROBES
#define SQ_SEMAPHORE(name)                                                     \
	extern unsigned short swiftqueues_##name##_semaphore                   \
			__attribute__((alias("_sq_observe"),                   \
			visibility("hidden")));
SQ_SEMAPHORE(submit)
SQ_SEMAPHORE(task__start)
SQ_SEMAPHORE(task__end)
SQ_SEMAPHORE(sync__start)
SQ_SEMAPHORE(sync__end)
SQ_SEMAPHORE(swift__job__start)
SQ_SEMAPHORE(swift__job__end)
SQ_SEMAPHORE(handler__start)
SQ_SEMAPHORE(handler__end)
SQ_SEMAPHORE(source__event)
SQ_SEMAPHORE(timer__fire)
SQ_SEMAPHORE(io__start)
SQ_SEMAPHORE(io__end)
SQ_SEMAPHORE(worker__wake)
SQ_SEMAPHORE(worker__park)
SQ_SEMAPHORE(worker__spawn)
SQ_SEMAPHORE(net__fire)
SQ_SEMAPHORE(signal)
/* Arguments are integers: pointers go as uintptr_t. */
#define SQ_P(x) ((uintptr_t)(x))
#define SQ_PROBE1(name, a) STAP_PROBE1(swiftqueues, name, SQ_P(a))
#define SQ_PROBE2(name, a, b) STAP_PROBE2(swiftqueues, name, SQ_P(a), SQ_P(b))
#define SQ_PROBE3(name, a, b, c)                                               \
	STAP_PROBE3(swiftqueues, name, SQ_P(a), SQ_P(b), SQ_P(c))
#define SQ_PROBE4(name, a, b, c, d)                                            \
	STAP_PROBE4(swiftqueues, name, SQ_P(a), SQ_P(b), SQ_P(c), SQ_P(d))
#else
#define SQ_PROBE1(name, a) ((void)0)
#define SQ_PROBE2(name, a, b) ((void)0)
#define SQ_PROBE3(name, a, b, c) ((void)0)
#define SQ_PROBE4(name, a, b, c, d) ((void)0)
#endif

#define SQ_TRACE_DEFAULT_KB 2048u  /* per thread: 65,536 records */
#define SQ_TRACE_MIN_KB 1u
#define SQ_TRACE_MAX_KB (1u << 20)
#define SQ_TRACE_FLOW_BLOCK 1024u
#define SQ_TRACE_MAX_DEPTH 256
/* Records ahead of the one being written whose line is fetched for
 * writing: past the cache's size, a ring's lines are cold. */
#define SQ_TRACE_PREFETCH 16
/* Queue depth counters: one point per queue per this many ns at most
 * (plus every return to empty), so a million submissions do not make a
 * million counter points. */
#define SQ_TRACE_DEPTH_STEP_NS 20000u

/* ---- Records and rings ----------------------------------------------------- */

enum {
	SQ_REC_BEGIN = 1, /* kind: slice; flow: the run's flow (in) */
	SQ_REC_END,       /* kind: slice */
	SQ_REC_SUBMIT,    /* kind: submit kind; flow: started here (out) */
	SQ_REC_INSTANT,   /* kind: instant kind */
	SQ_REC_POOL,      /* a: live | idle << 16 | searching << 32 */
};

struct sq_trace_rec_s {
	uint64_t t;      /* raw clock */
	union {
		struct {
			uint8_t type;  /* SQ_REC_* */
			uint8_t kind;
			uint16_t small;
			uint32_t flow;
		};
		uint64_t word;         /* the four, stored at once */
	};
	uint64_t a;
	uint64_t b;
};

/* One thread's ring. Written only by its owner; read by the writer of the
 * trace after the recording stopped. */
struct sq_trace_buf_s {
	struct sq_trace_rec_s *recs;
	size_t bytes;          /* the ring's mapping */
	uint64_t mask;         /* records - 1 (a power of two) */
	uint64_t head;         /* records written: release store by the owner */
	uint32_t session;      /* whose records these are: release by the owner */
	uint32_t flow_next;    /* the owner's block of flow ids */
	uint32_t flow_end;
	bool dead;             /* the owner exited (release) */
	pid_t tid;
	int sort;              /* the track's place */
	char name[48];
	struct sq_trace_buf_s *next; /* the registry, under its lock */
};

static uint32_t _sq_trace_session; /* 0: not recording */
SQ_TLS int _sq_trace_role;
SQ_TLS int _sq_trace_role_index;

SQ_TLS uint32_t _sq_trace_inherited;
SQ_TLS uint8_t _sq_trace_kind;
/* The calling thread's ring; a thread without one points at this empty
 * ring, whose session is never recorded, so the hot path needs no NULL
 * test. */
#define SQ_TRACE_NO_SESSION UINT32_MAX
static struct sq_trace_buf_s _sq_trace_none = {
	.session = SQ_TRACE_NO_SESSION,
};
static SQ_TLS struct sq_trace_buf_s *_sq_trace_self = &_sq_trace_none;

static struct {
	pthread_mutex_t lock;   /* start, stop, the registry */
	struct sq_trace_buf_s *bufs;
	bool recording;
	uint32_t sessions;      /* the last session number given */
	int fd;
	char path[PATH_MAX];
	size_t ring_bytes;
	uint64_t raw0, ns0;     /* clock pair at the start */
	uint32_t flow_counter;  /* flow ids handed out in blocks (relaxed) */
	bool exit_handler;
	pthread_key_t key;      /* marks a ring dead at thread exit */
	bool key_made;
} _sq_trace = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
};

/* Whether timestamps are raw TSC readings (set before the first session,
 * read relaxed: the session's release store publishes it). */
static bool _sq_trace_tsc;

static inline uint64_t
_sq_trace_clock(void)
{
#if defined(__x86_64__)
	if (SQ_LIKELY(__atomic_load_n(&_sq_trace_tsc, __ATOMIC_RELAXED)))
		return __rdtsc();
#endif
	return _sq_monotonic_ns();
}

/* The TSC is a good clock here only when the kernel's own clock source is
 * the TSC: it then found it invariant and in step across CPUs. */
static bool
_sq_trace_tsc_usable(void)
{
#if defined(__x86_64__)
	char buf[32] = "";
	int fd = open("/sys/devices/system/clocksource/clocksource0/"
			"current_clocksource", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n >= 3 && strncmp(buf, "tsc", 3) == 0 &&
			(buf[3] == '\n' || buf[3] == '\0');
#else
	return false;
#endif
}

/* A raw reading and CLOCK_MONOTONIC at (about) the same instant: the
 * closest of a few tries. */
static void
_sq_trace_clock_pair(uint64_t *raw, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = _sq_monotonic_ns();
		uint64_t r = _sq_trace_clock();
		uint64_t b = _sq_monotonic_ns();
		if (b - a < best) {
			best = b - a;
			*raw = r;
			*ns = a + (b - a) / 2;
		}
	}
}

static void
_sq_trace_thread_exit(void *value)
{
	struct sq_trace_buf_s *b = value;
	if (_sq_trace_self == b)
		_sq_trace_self = &_sq_trace_none;
	/* Release: the writer that frees it sees the owner's last records. */
	__atomic_store_n(&b->dead, true, __ATOMIC_RELEASE);
}

static void
_sq_trace_name_thread(struct sq_trace_buf_s *b)
{
	static const char *const roles[] = {
		[SQ_ROLE_WORKER] = "sq.worker",
		[SQ_ROLE_MONITOR] = "sq.monitor",
		[SQ_ROLE_MANAGER] = "sq.manager",
		[SQ_ROLE_SIGNALS] = "sq.signals",
		[SQ_ROLE_IO] = "sq.io",
	};
	int role = _sq_trace_role;
	b->tid = gettid();
	switch (role) {
	case SQ_ROLE_WORKER:
	case SQ_ROLE_IO:
		snprintf(b->name, sizeof(b->name), "%s %d", roles[role],
				_sq_trace_role_index);
		b->sort = (role == SQ_ROLE_WORKER ? 100 : 3000) +
				_sq_trace_role_index;
		return;
	case SQ_ROLE_MONITOR:
	case SQ_ROLE_MANAGER:
	case SQ_ROLE_SIGNALS:
		snprintf(b->name, sizeof(b->name), "%s", roles[role]);
		b->sort = 2000 + role;
		return;
	default:
		break;
	}
	if (b->tid == getpid()) {
		snprintf(b->name, sizeof(b->name), "main thread");
		b->sort = 0;
		return;
	}
	char name[16] = "";
	pthread_getname_np(pthread_self(), name, sizeof(name));
	snprintf(b->name, sizeof(b->name), "%s (%d)", name[0] ? name
			: "thread", (int)b->tid);
	b->sort = 5000;
}

/* Gives the calling thread a ring for `session` (its own one again, reset,
 * or a new one). NULL when the recording has stopped meanwhile or memory
 * ran out. */
static SQ_NOINLINE struct sq_trace_buf_s *
_sq_trace_attach(uint32_t session)
{
	if (session == 0)
		return NULL;
	struct sq_trace_buf_s *b = _sq_trace_self;
	if (b == &_sq_trace_none)
		b = NULL;
	pthread_mutex_lock(&_sq_trace.lock);
	if (__atomic_load_n(&_sq_trace_session, __ATOMIC_ACQUIRE) != session) {
		pthread_mutex_unlock(&_sq_trace.lock);
		return NULL;
	}
	size_t bytes = _sq_trace.ring_bytes;
	if (b != NULL && b->bytes != bytes) {
		munmap(b->recs, b->bytes);
		b->recs = NULL;
		b->bytes = 0;
	}
	if (b == NULL) {
		b = calloc(1, sizeof(*b));
		if (b == NULL) {
			pthread_mutex_unlock(&_sq_trace.lock);
			return NULL;
		}
		b->next = _sq_trace.bufs;
		_sq_trace.bufs = b;
		pthread_setspecific(_sq_trace.key, b);
		_sq_trace_self = b;
	}
	if (b->recs == NULL) {
		void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE
				| MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			/* Left on the registry without a ring: the writer
			 * skips it, the next record tries again. */
			pthread_mutex_unlock(&_sq_trace.lock);
			return NULL;
		}
		b->recs = p;
		b->bytes = bytes;
		b->mask = bytes / sizeof(struct sq_trace_rec_s) - 1;
	}
	_sq_trace_name_thread(b);
	/* The count first, then the session (release): a writer that sees
	 * the session sees the count from it on. */
	__atomic_store_n(&b->head, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->session, session, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&_sq_trace.lock);
	return b;
}

/* The calling thread's ring for the current session, NULL when not
 * recording. Acquire: the session's state (clock choice, ring size) as
 * start set it. One compare on the way: only a ring of the current
 * session has that session's number. */
static inline struct sq_trace_buf_s *
_sq_trace_ring(void)
{
	uint32_t session = __atomic_load_n(&_sq_trace_session, __ATOMIC_ACQUIRE);
	struct sq_trace_buf_s *b = _sq_trace_self;
	if (SQ_UNLIKELY(b->session != session))
		b = _sq_trace_attach(session);
	return b;
}

/* A record's type, kind, small and flow as the one word they share. */
static inline uint64_t
_sq_trace_word(unsigned type, unsigned kind, unsigned small, uint32_t flow)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint64_t)type | (uint64_t)kind << 8 | (uint64_t)small << 16 |
			(uint64_t)flow << 32;
#else
	struct sq_trace_rec_s r;
	r.type = (uint8_t)type;
	r.kind = (uint8_t)kind;
	r.small = (uint16_t)small;
	r.flow = flow;
	return r.word;
#endif
}

/* Appends a record taken at raw time t to ring b and counts it. The
 * count's release store: a writer that reads the count sees the record.
 * The line a few records ahead is fetched for writing: past the cache's
 * size a ring's lines are cold. */
static inline void
_sq_trace_append(struct sq_trace_buf_s *b, uint64_t t, uint64_t word,
		uint64_t a, uint64_t x)
{
	uint64_t head = b->head;
	struct sq_trace_rec_s *r = &b->recs[head & b->mask];
	__builtin_prefetch(&b->recs[(head + SQ_TRACE_PREFETCH) & b->mask], 1,
			3);
	r->t = t;
	r->word = word;
	r->a = a;
	r->b = x;
	__atomic_store_n(&b->head, head + 1, __ATOMIC_RELEASE);
}

/* Everything the fast path below leaves: a ring to get, another clock. */
static SQ_NOINLINE void
_sq_trace_put_slow(uint64_t word, uint64_t a, uint64_t x)
{
	struct sq_trace_buf_s *b = _sq_trace_ring();
	if (b != NULL)
		_sq_trace_append(b, _sq_trace_clock(), word, a, x);
}

/* Records one event. The usual case (a ring of this session, the TSC)
 * calls nothing, so the entry points need no stack frame; the rest is a
 * tail call. */
static inline void
_sq_trace_put(uint64_t word, uint64_t a, uint64_t x)
{
#if defined(__x86_64__)
	uint32_t session = __atomic_load_n(&_sq_trace_session, __ATOMIC_ACQUIRE);
	struct sq_trace_buf_s *b = _sq_trace_self;
	if (SQ_LIKELY(b->session == session &&
			__atomic_load_n(&_sq_trace_tsc, __ATOMIC_RELAXED))) {
		_sq_trace_append(b, __rdtsc(), word, a, x);
		return;
	}
#endif
	_sq_trace_put_slow(word, a, x);
}

/* A fresh flow id (never 0) from the thread's block. */
static inline uint32_t
_sq_trace_new_flow(struct sq_trace_buf_s *b)
{
	if (SQ_UNLIKELY(b->flow_next == b->flow_end)) {
		uint32_t base;
		do {
			base = __atomic_fetch_add(&_sq_trace.flow_counter,
					SQ_TRACE_FLOW_BLOCK, __ATOMIC_RELAXED);
		} while (base == 0);
		b->flow_next = base;
		b->flow_end = base + SQ_TRACE_FLOW_BLOCK;
	}
	return b->flow_next++;
}

/* ---- Queue labels ----------------------------------------------------------
 *
 * A queue's label is copied once into a table of distinct labels and the
 * queue keeps the label's number (q->trace_label): records carry numbers,
 * and a queue freed before the trace is written still has its name. */

static struct {
	sq_spinlock_t lock;
	char **names;       /* number - 1 -> label */
	uint32_t count, cap;
	uint32_t *index;    /* open addressing over names, 0: empty */
	uint32_t index_cap; /* a power of two, more than twice count */
} _sq_trace_labels;

static uint32_t
_sq_trace_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* Under the lock. */
static bool
_sq_trace_labels_grow(void)
{
	if (_sq_trace_labels.count == _sq_trace_labels.cap) {
		uint32_t cap = _sq_trace_labels.cap ? _sq_trace_labels.cap * 2
				: 64;
		char **n = realloc(_sq_trace_labels.names, cap * sizeof(*n));
		if (n == NULL)
			return false;
		_sq_trace_labels.names = n;
		_sq_trace_labels.cap = cap;
	}
	if ((_sq_trace_labels.count + 1) * 2 < _sq_trace_labels.index_cap)
		return true;
	uint32_t icap = _sq_trace_labels.index_cap ? _sq_trace_labels.index_cap
			* 2 : 128;
	uint32_t *index = calloc(icap, sizeof(*index));
	if (index == NULL)
		return false;
	for (uint32_t id = 1; id <= _sq_trace_labels.count; id++) {
		uint32_t h = _sq_trace_hash(_sq_trace_labels.names[id - 1]);
		while (index[h & (icap - 1)] != 0)
			h++;
		index[h & (icap - 1)] = id;
	}
	free(_sq_trace_labels.index);
	_sq_trace_labels.index = index;
	_sq_trace_labels.index_cap = icap;
	return true;
}

static SQ_NOINLINE uint32_t
_sq_trace_intern(struct sq_queue_s *q)
{
	const char *label = _sq_object_label(q);
	uint32_t h = _sq_trace_hash(label), id = 0;
	sq_spinlock_lock(&_sq_trace_labels.lock);
	if (_sq_trace_labels_grow()) {
		uint32_t mask = _sq_trace_labels.index_cap - 1;
		for (;; h++) {
			uint32_t x = _sq_trace_labels.index[h & mask];
			if (x == 0) {
				char *copy = strdup(label);
				if (copy != NULL) {
					id = ++_sq_trace_labels.count;
					_sq_trace_labels.names[id - 1] = copy;
					_sq_trace_labels.index[h & mask] = id;
				}
				break;
			}
			if (strcmp(_sq_trace_labels.names[x - 1], label) == 0) {
				id = x;
				break;
			}
		}
	}
	sq_spinlock_unlock(&_sq_trace_labels.lock);
	/* Relaxed: a number, read only to be recorded; racing interns of
	 * one queue find the same number. */
	__atomic_store_n(&q->trace_label, id, __ATOMIC_RELAXED);
	return id;
}

/* A queue as records name it: its label's number and its serial number
 * (0 for the global and main queues, which their labels tell apart). */
static inline uint64_t
_sq_trace_key(uint32_t label, struct sq_queue_s *q)
{
	return (uint64_t)label << 32 | q->serial_num;
}

static inline uint64_t
_sq_trace_queue_key(struct sq_queue_s *q)
{
	if (q == NULL)
		return 0;
	uint32_t id = __atomic_load_n(&q->trace_label, __ATOMIC_RELAXED);
	if (SQ_UNLIKELY(id == 0))
		id = _sq_trace_intern(q);
	return _sq_trace_key(id, q);
}

/* ---- The records of each kind -------------------------------------------- */

static inline void _sq_trace_end(unsigned slice);

static SQ_NOINLINE uint32_t
_sq_trace_submit_slow(struct sq_queue_s *q, const void *func, unsigned kind)
{
	struct sq_trace_buf_s *b = _sq_trace_ring();
	if (b == NULL)
		return 0;
	uint32_t flow = _sq_trace_new_flow(b);
	_sq_trace_append(b, _sq_trace_clock(), _sq_trace_word(SQ_REC_SUBMIT,
			_sq_trace_kind ? _sq_trace_kind : kind, 0, flow),
			_sq_trace_queue_key(q), (uintptr_t)func);
	return flow;
}

static inline uint32_t
_sq_trace_submit(struct sq_queue_s *q, const void *func, unsigned kind)
{
	/* The work of an after, submitted by its timer: the arrow that
	 * started at sq_after_f goes on to the run. */
	uint32_t flow = _sq_trace_inherited;
	if (flow != 0) {
		_sq_trace_inherited = 0;
		return flow;
	}
#if defined(__x86_64__)
	uint32_t session = __atomic_load_n(&_sq_trace_session, __ATOMIC_ACQUIRE);
	struct sq_trace_buf_s *b = _sq_trace_self;
	uint32_t label = __atomic_load_n(&q->trace_label, __ATOMIC_RELAXED);
	if (SQ_LIKELY(b->session == session && label != 0 &&
			b->flow_next != b->flow_end && !_sq_trace_kind &&
			__atomic_load_n(&_sq_trace_tsc, __ATOMIC_RELAXED))) {
		flow = b->flow_next++;
		_sq_trace_append(b, __rdtsc(), _sq_trace_word(SQ_REC_SUBMIT,
				kind, 0, flow), _sq_trace_key(label, q),
				(uintptr_t)func);
		return flow;
	}
#endif
	return _sq_trace_submit_slow(q, func, kind);
}

static SQ_NOINLINE void
_sq_trace_begin_slow(unsigned slice, uint32_t flow, struct sq_queue_s *q,
		const void *func)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, slice, 0, flow),
			_sq_trace_queue_key(q), (uintptr_t)func);
}

static inline void
_sq_trace_begin(unsigned slice, uint32_t flow, struct sq_queue_s *q,
		const void *func)
{
	uint32_t label = __atomic_load_n(&q->trace_label, __ATOMIC_RELAXED);
	if (SQ_UNLIKELY(label == 0)) {
		_sq_trace_begin_slow(slice, flow, q, func);
		return;
	}
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, slice, 0, flow),
			_sq_trace_key(label, q), (uintptr_t)func);
}

static void
_sq_trace_sync_call(struct sq_queue_s *q, sq_function_t func, void *ctx)
{
	/* An after's work run in place by the on-time runner continues the
	 * after's arrow. */
	uint32_t flow = _sq_trace_inherited;
	if (flow != 0)
		_sq_trace_inherited = 0;
	_sq_trace_begin(SQ_TRACE_SYNC, flow, q, (const void *)func);
	func(ctx);
	_sq_trace_end(SQ_TRACE_SYNC);
}

static inline void
_sq_trace_end(unsigned slice)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_END, slice, 0, 0), 0, 0);
}

static void
_sq_trace_swift_job_begin(void *job)
{
	uint64_t id = 0;
	unsigned priority = 0;
	_sq_swift_job_info(job, &id, &priority);
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, SQ_TRACE_SWIFT_JOB,
			priority, 0), id, (uintptr_t)job);
}

static void
_sq_trace_handler_begin(unsigned source_kind, unsigned handler,
		const void *func)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, SQ_TRACE_HANDLER, handler,
			0), source_kind, (uintptr_t)func);
}

static void
_sq_trace_event_begin(unsigned source_kind, uintptr_t handle, uintptr_t data)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, SQ_TRACE_EVENT,
			source_kind, 0), handle, data);
}

static void
_sq_trace_timer_begin(uint32_t flow, bool after, uint64_t late_ns)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, SQ_TRACE_TIMER, after,
			flow), late_ns, 0);
}

static void
_sq_trace_io_begin(uint32_t flow, int fd, bool write, size_t length)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, SQ_TRACE_IO, write, flow),
			(uint64_t)fd, length);
}

static void
_sq_trace_instant(unsigned kind, uint64_t a, uint64_t b)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_INSTANT, kind, 0, 0), a, b);
}

static void
_sq_trace_pool(int32_t live, int32_t idle, int32_t searching)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_POOL, 0, 0, 0),
			(uint64_t)(uint16_t)live |
			(uint64_t)(uint16_t)idle << 16 |
			(uint64_t)(uint16_t)searching << 32, 0);
}

void
_sq_trace_attach_here(void)
{
	(void)_sq_trace_ring();
}

static void
_sq_trace_signal(int signo)
{
	/* Only into a ring the watcher already has: no lock, no allocation.
	 * Nothing else records on that thread, so nothing is interrupted
	 * halfway through a record. */
	if (_sq_trace_role != SQ_ROLE_SIGNALS)
		return;
	uint32_t session = __atomic_load_n(&_sq_trace_session, __ATOMIC_ACQUIRE);
	struct sq_trace_buf_s *b = _sq_trace_self;
	if (session != 0 && b->session == session)
		_sq_trace_append(b, _sq_trace_clock(), _sq_trace_word(
				SQ_REC_INSTANT, SQ_TRACE_SIGNAL, 0, 0),
				(uint64_t)signo, 0);
}

/* ---- What the observation points call -------------------------------------
 *
 * Reached only when the word the points look at is not zero: a tracer has
 * attached a probe, or a trace is being recorded. Each fires its probe (a
 * nop unless a tracer attached it) and records when recording. */

#define SQ_RECORDING()                                                         \
	(__atomic_load_n(&_sq_observe.half.recording, __ATOMIC_RELAXED) != 0)

uint32_t
_sq_obs_submit(struct sq_queue_s *q, const void *func, const void *key,
		unsigned kind)
{
	SQ_PROBE4(submit, q->obj.label, func, key, kind);
	return SQ_RECORDING() ? _sq_trace_submit(q, func, kind) : 0;
}

void
_sq_obs_submit_push(struct sq_cont_s *c, struct sq_queue_s *q, unsigned kind)
{
	SQ_PROBE4(submit, q->obj.label, c->func, c, kind);
	if (SQ_RECORDING())
		c->job.trace_flow = _sq_trace_submit(q, (const void *)c->func,
				kind);
	_sq_queue_push(q, &c->job);
}

void
_sq_obs_task_begin(uint32_t flow, struct sq_queue_s *q, const void *func,
		const void *key)
{
	SQ_PROBE4(task__start, q->obj.label, func, key, q);
	if (SQ_RECORDING())
		_sq_trace_begin(SQ_TRACE_TASK, flow, q, func);
}

void
_sq_obs_cont_begin(struct sq_cont_s *c)
{
	_sq_obs_task_begin(c->job.trace_flow, c->queue, (const void *)c->func,
			c);
}

void
_sq_obs_task_end(struct sq_queue_s *q)
{
	SQ_PROBE2(task__end, q->obj.label, q);
	if (SQ_RECORDING())
		_sq_trace_end(SQ_TRACE_TASK);
}

void
_sq_obs_sync_call(struct sq_queue_s *q, sq_function_t func, void *ctx)
{
	SQ_PROBE3(sync__start, q->obj.label, func, q);
	if (SQ_RECORDING())
		_sq_trace_sync_call(q, func, ctx);
	else
		func(ctx);
	SQ_PROBE2(sync__end, q->obj.label, q);
}

void
_sq_obs_swift_job_begin(void *job)
{
	SQ_PROBE1(swift__job__start, job);
	if (SQ_RECORDING())
		_sq_trace_swift_job_begin(job);
}

void
_sq_obs_swift_job_end(void *job)
{
	SQ_PROBE1(swift__job__end, job);
	if (SQ_RECORDING())
		_sq_trace_end(SQ_TRACE_SWIFT_JOB);
}

void
_sq_obs_handler_begin(unsigned source_kind, const char *type_name,
		uintptr_t handle, unsigned handler, const void *func)
{
	SQ_PROBE4(handler__start, type_name, handle, handler, func);
	if (SQ_RECORDING())
		_sq_trace_handler_begin(source_kind, handler, func);
}

void
_sq_obs_handler_end(const char *type_name, uintptr_t handle)
{
	SQ_PROBE2(handler__end, type_name, handle);
	if (SQ_RECORDING())
		_sq_trace_end(SQ_TRACE_HANDLER);
}

void
_sq_obs_event_begin(unsigned source_kind, const char *type_name,
		uintptr_t handle, uintptr_t data)
{
	SQ_PROBE3(source__event, type_name, handle, data);
	if (SQ_RECORDING())
		_sq_trace_event_begin(source_kind, handle, data);
}

void
_sq_obs_timer_begin(uint32_t flow, bool after, uint64_t deadline,
		uint64_t now)
{
	SQ_PROBE3(timer__fire, deadline, now, after);
	if (SQ_RECORDING())
		_sq_trace_timer_begin(flow, after, now > deadline
				? now - deadline : 0);
}

void
_sq_obs_io_begin(uint32_t flow, int fd, bool write, size_t length)
{
	SQ_PROBE3(io__start, fd, write, length);
	if (SQ_RECORDING())
		_sq_trace_io_begin(flow, fd, write, length);
}

void
_sq_obs_io_end(int fd, ssize_t result)
{
	SQ_PROBE2(io__end, fd, result);
	if (SQ_RECORDING())
		_sq_trace_end(SQ_TRACE_IO);
}

void
_sq_obs_end(unsigned slice)
{
	if (SQ_RECORDING())
		_sq_trace_end(slice);
}

void
_sq_obs_pool(unsigned kind, uint64_t a, uint64_t b, int32_t live,
		int32_t idle, int32_t searching)
{
	switch (kind) {
	case SQ_TRACE_WAKE:
		SQ_PROBE1(worker__wake, a);
		break;
	case SQ_TRACE_PARK:
		SQ_PROBE1(worker__park, a);
		break;
	case SQ_TRACE_SPAWN:
		SQ_PROBE2(worker__spawn, a, b);
		break;
	case SQ_TRACE_NET:
		SQ_PROBE1(net__fire, a);
		break;
	default:
		break;
	}
	if (!SQ_RECORDING())
		return;
	if (kind != SQ_TRACE_COUNTERS)
		_sq_trace_instant(kind, a, b);
	_sq_trace_pool(live, idle, searching);
}

void
_sq_obs_signal(int signo)
{
	SQ_PROBE1(signal, signo);
	if (SQ_RECORDING())
		_sq_trace_signal(signo);
}

/* ---- Symbols ----------------------------------------------------------------
 *
 * A function pointer's name: dladdr finds exported symbols; the module's
 * own symbol table (.symtab, when not stripped) also has static and hidden
 * functions, so a program's `static void work(void *)` gets its name
 * without -rdynamic. Swift names are demangled when the Swift runtime is
 * in the process. Everything here runs only while the trace is written. */

struct sq_sym_s {
	uintptr_t addr;
	uintptr_t size;
	const char *name;
};

struct sq_module_s {
	uintptr_t base;        /* dli_fbase */
	uintptr_t bias;        /* added to a symbol's value */
	void *map;             /* the file, mapped */
	size_t map_len;
	struct sq_sym_s *syms; /* functions, by address */
	size_t count;
	char *path;
	struct sq_module_s *next;
};

extern char *swift_demangle(const char *mangled, size_t length, char *out,
		size_t *out_length, uint32_t flags) __attribute__((weak));

static int
_sq_sym_cmp(const void *x, const void *y)
{
	const struct sq_sym_s *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static void
_sq_module_load(struct sq_module_s *m, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return;
	}
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd,
			0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	m->map = map;
	m->map_len = (size_t)st.st_size;
	const unsigned char *file = map;
	const Elf64_Ehdr *eh = map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
			eh->e_ident[EI_CLASS] != ELFCLASS64 ||
			eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr)
			|| eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr)
			> m->map_len)
		return;
	/* Symbol values are link-time addresses: the load bias is the
	 * mapping's start less the first loaded segment's page. */
	if (eh->e_type == ET_DYN && eh->e_phoff + (size_t)eh->e_phnum *
			sizeof(Elf64_Phdr) <= m->map_len) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh->e_phoff);
		uintptr_t first = 0;
		for (int i = 0; i < eh->e_phnum; i++) {
			if (ph[i].p_type == PT_LOAD) {
				first = ph[i].p_vaddr & ~(uintptr_t)0xfff;
				break;
			}
		}
		m->bias = m->base - first;
	}
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
	const Elf64_Shdr *symtab = NULL;
	for (int pass = 0; pass < 2 && symtab == NULL; pass++)
		for (int i = 0; i < eh->e_shnum; i++)
			if (sh[i].sh_type == (pass == 0 ? SHT_SYMTAB
					: SHT_DYNSYM)) {
				symtab = &sh[i];
				break;
			}
	if (symtab == NULL || symtab->sh_link >= eh->e_shnum ||
			symtab->sh_offset + symtab->sh_size > m->map_len)
		return;
	const Elf64_Shdr *strs = &sh[symtab->sh_link];
	if (strs->sh_offset + strs->sh_size > m->map_len)
		return;
	const Elf64_Sym *sym = (const Elf64_Sym *)(file + symtab->sh_offset);
	size_t n = symtab->sh_size / sizeof(Elf64_Sym);
	m->syms = malloc(n * sizeof(*m->syms) + 1);
	if (m->syms == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC ||
				sym[i].st_shndx == SHN_UNDEF ||
				sym[i].st_value == 0 ||
				sym[i].st_name >= strs->sh_size)
			continue;
		m->syms[m->count++] = (struct sq_sym_s){
			.addr = sym[i].st_value + m->bias,
			.size = sym[i].st_size,
			.name = (const char *)file + strs->sh_offset +
					sym[i].st_name,
		};
	}
	qsort(m->syms, m->count, sizeof(*m->syms), _sq_sym_cmp);
}

/* Where the main program is mapped (its ELF header). */
static int
_sq_main_base_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type == PT_LOAD) {
			*(uintptr_t *)data = info->dlpi_addr +
					(info->dlpi_phdr[i].p_vaddr &
					~(uintptr_t)0xfff);
			break;
		}
	}
	return 1; /* the first object is the program */
}

static struct sq_module_s *
_sq_module_for(struct sq_module_s **modules, const Dl_info *info)
{
	for (struct sq_module_s *m = *modules; m; m = m->next)
		if (m->base == (uintptr_t)info->dli_fbase)
			return m;
	struct sq_module_s *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->base = (uintptr_t)info->dli_fbase;
	/* The main program is read through /proc: the name dladdr gives
	 * it may be relative, or empty. */
	uintptr_t main_base = 0;
	dl_iterate_phdr(_sq_main_base_cb, &main_base);
	const char *path = info->dli_fname;
	if (m->base == main_base || path == NULL || path[0] == '\0')
		path = "/proc/self/exe";
	m->path = strdup(path);
	_sq_module_load(m, path);
	m->next = *modules;
	*modules = m;
	return m;
}

/* The name for one function pointer, malloc'd. */
static char *
_sq_symbolize(struct sq_module_s **modules, uintptr_t addr)
{
	char buf[512];
	Dl_info info;
	if (addr == 0)
		return strdup("");
	if (dladdr((void *)addr, &info) == 0) {
		snprintf(buf, sizeof(buf), "0x%" PRIxPTR, addr);
		return strdup(buf);
	}
	const char *name = NULL;
	uintptr_t offset = 0;
	if (info.dli_sname != NULL && info.dli_saddr != NULL) {
		name = info.dli_sname;
		offset = addr - (uintptr_t)info.dli_saddr;
	} else {
		struct sq_module_s *m = _sq_module_for(modules, &info);
		if (m != NULL && m->count > 0) {
			size_t lo = 0, hi = m->count;
			while (hi - lo > 1) {
				size_t mid = (lo + hi) / 2;
				if (m->syms[mid].addr <= addr)
					lo = mid;
				else
					hi = mid;
			}
			struct sq_sym_s *s = &m->syms[lo];
			if (s->addr <= addr && (addr < s->addr + s->size ||
					(s->size == 0 && addr == s->addr))) {
				name = s->name;
				offset = addr - s->addr;
			}
		}
		if (name == NULL) {
			const char *slash = info.dli_fname ? strrchr(
					info.dli_fname, '/') : NULL;
			snprintf(buf, sizeof(buf), "%s+0x%" PRIxPTR,
					slash ? slash + 1 : "program",
					addr - (uintptr_t)info.dli_fbase);
			return strdup(buf);
		}
	}
	char *demangled = NULL;
	if (swift_demangle != NULL && (strncmp(name, "$s", 2) == 0 ||
			strncmp(name, "_$s", 3) == 0))
		demangled = swift_demangle(name, strlen(name), NULL, NULL, 0);
	if (offset != 0)
		snprintf(buf, sizeof(buf), "%s+0x%" PRIxPTR,
				demangled ? demangled : name, offset);
	else
		snprintf(buf, sizeof(buf), "%s", demangled ? demangled : name);
	free(demangled);
	return strdup(buf);
}

static void
_sq_modules_free(struct sq_module_s *m)
{
	while (m) {
		struct sq_module_s *next = m->next;
		if (m->map)
			munmap(m->map, m->map_len);
		free(m->syms);
		free(m->path);
		free(m);
		m = next;
	}
}

/* ---- Writing: small hash maps ----------------------------------------------- */

/* What the writer knows of one flow id. */
#define SQ_FLOW_OUT 0x1u     /* a submission started it */
#define SQ_FLOW_IN 0x2u      /* a run ended it */
#define SQ_FLOW_STEP 0x4u    /* a timer passed it on */
#define SQ_FLOW_COUNTED 0x8u /* its submission queued work (depth) */

struct sq_flow_s {
	uint32_t id;        /* 0: empty slot */
	uint32_t flags;
	uint64_t out_t, in_t;
	uint64_t queue;     /* the submission's queue key */
	const struct sq_trace_buf_s *in_buf;
	uint64_t in_index;  /* the run that ends it (the earliest) */
};

struct sq_flows_s {
	struct sq_flow_s *slots;
	size_t cap; /* a power of two */
};

static struct sq_flow_s *
_sq_flow_get(struct sq_flows_s *m, uint32_t id)
{
	size_t i = (id * 2654435761u) & (m->cap - 1);
	while (m->slots[i].id != 0 && m->slots[i].id != id)
		i = (i + 1) & (m->cap - 1);
	m->slots[i].id = id;
	return &m->slots[i];
}

static struct sq_flow_s *
_sq_flow_find(const struct sq_flows_s *m, uint32_t id)
{
	size_t i = (id * 2654435761u) & (m->cap - 1);
	while (m->slots[i].id != 0) {
		if (m->slots[i].id == id)
			return &m->slots[i];
		i = (i + 1) & (m->cap - 1);
	}
	return NULL;
}

/* Function pointer -> name. */
struct sq_names_s {
	uintptr_t *keys;
	char **values;
	size_t cap, count;
	struct sq_module_s *modules;
};

static const char *
_sq_name_of(struct sq_names_s *m, uintptr_t addr)
{
	if (m->count * 2 >= m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		uintptr_t *keys = calloc(cap, sizeof(*keys));
		char **values = calloc(cap, sizeof(*values));
		if (keys == NULL || values == NULL) {
			free(keys);
			free(values);
			return "";
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (m->keys[i] == 0)
				continue;
			size_t j = (m->keys[i] * 11400714819323198485ull)
					>> 32 & (cap - 1);
			while (keys[j] != 0)
				j = (j + 1) & (cap - 1);
			keys[j] = m->keys[i];
			values[j] = m->values[i];
		}
		free(m->keys);
		free(m->values);
		m->keys = keys;
		m->values = values;
		m->cap = cap;
	}
	if (addr == 0)
		return "";
	size_t i = (addr * 11400714819323198485ull) >> 32 & (m->cap - 1);
	while (m->keys[i] != 0 && m->keys[i] != addr)
		i = (i + 1) & (m->cap - 1);
	if (m->keys[i] == 0) {
		char *name = _sq_symbolize(&m->modules, addr);
		if (name == NULL)
			return "";
		m->keys[i] = addr;
		m->values[i] = name;
		m->count++;
	}
	return m->values[i];
}

static void
_sq_names_free(struct sq_names_s *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->values[i]);
	free(m->keys);
	free(m->values);
	_sq_modules_free(m->modules);
}

/* ---- Writing: the JSON ------------------------------------------------------ */

struct sq_writer_s {
	FILE *f;
	int pid;
	bool first;
	uint64_t raw0, ns0;  /* clock pair at the start */
	long double scale;   /* ns per raw tick */
	uint64_t end_raw;    /* the stop */
	uint64_t dropped;
	struct sq_names_s names;
	char **labels;       /* label number - 1 -> text (the table's) */
	uint32_t nlabels;
	uint32_t *label_queues; /* distinct queues seen per label number */
};

static uint64_t
_sq_w_ns(const struct sq_writer_s *w, uint64_t raw)
{
	if (raw <= w->raw0)
		return w->ns0;
	return w->ns0 + (uint64_t)((long double)(raw - w->raw0) * w->scale);
}

static void
_sq_w_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Starts an event: {"ph":..,"pid":..,"tid":..,"ts":.. */
static void
_sq_w_event(struct sq_writer_s *w, char ph, pid_t tid, uint64_t raw)
{
	uint64_t ns = _sq_w_ns(w, raw);
	fputs(w->first ? "\n" : ",\n", w->f);
	w->first = false;
	fprintf(w->f, "{\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":%" PRIu64
			".%03u", ph, w->pid, (int)tid, ns / 1000,
			(unsigned)(ns % 1000));
}

static void
_sq_w_dur(struct sq_writer_s *w, uint64_t begin_raw, uint64_t end_raw)
{
	uint64_t b = _sq_w_ns(w, begin_raw), e = _sq_w_ns(w, end_raw);
	uint64_t d = e > b ? e - b : 0;
	fprintf(w->f, ",\"dur\":%" PRIu64 ".%03u", d / 1000,
			(unsigned)(d % 1000));
}

static void
_sq_w_name(struct sq_writer_s *w, const char *prefix, const char *name,
		const char *suffix)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s%s%s", prefix, name, suffix);
	fputs(",\"name\":", w->f);
	_sq_w_string(w->f, buf);
}

/* A queue key's label ("queue #7" for an unlabelled queue; the serial
 * number is added when two queues of the trace share a label). */
static void
_sq_w_queue_name(struct sq_writer_s *w, uint64_t key, char *out, size_t len)
{
	uint32_t id = (uint32_t)(key >> 32), serial = (uint32_t)key;
	const char *label = id && id <= w->nlabels ? w->labels[id - 1] : "";
	if (label[0] == '\0')
		snprintf(out, len, "queue #%u", serial);
	else if (id && id <= w->nlabels && w->label_queues[id - 1] > 1 &&
			serial != 0)
		snprintf(out, len, "%s #%u", label, serial);
	else
		snprintf(out, len, "%s", label);
}

static const char *
_sq_source_kind_name(unsigned kind)
{
	static const char *const names[] = {
		[0] = "I/O",
		[SQ_SOURCE_DATA_ADD] = "data add",
		[SQ_SOURCE_DATA_OR] = "data or",
		[SQ_SOURCE_DATA_REPLACE] = "data replace",
		[SQ_SOURCE_READ] = "read",
		[SQ_SOURCE_WRITE] = "write",
		[SQ_SOURCE_SIGNAL] = "signal",
		[SQ_SOURCE_TIMER] = "timer",
		[SQ_SOURCE_PROC] = "process",
		[SQ_SOURCE_VNODE] = "file system",
	};
	return kind < sizeof(names) / sizeof(names[0]) && names[kind]
			? names[kind] : "source";
}

static const char *
_sq_submit_name(unsigned kind)
{
	static const char *const names[] = {
		[SQ_SUBMIT_ASYNC] = "async",
		[SQ_SUBMIT_BARRIER] = "barrier async",
		[SQ_SUBMIT_GROUP] = "group async",
		[SQ_SUBMIT_NOTIFY] = "notify",
		[SQ_SUBMIT_AFTER] = "after",
		[SQ_SUBMIT_NEXT] = "async (next)",
		[SQ_SUBMIT_DEFER] = "after drain",
		[SQ_SUBMIT_IO] = "I/O",
	};
	return kind < sizeof(names) / sizeof(names[0]) && names[kind]
			? names[kind] : "submit";
}

/* The part of a ring the writer reads: [*lo, *hi). */
static void
_sq_w_range(const struct sq_trace_buf_s *b, uint64_t *lo, uint64_t *hi)
{
	uint64_t head = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);
	uint64_t cap = b->mask + 1;
	*hi = head;
	/* Wrapped: the oldest slot may be taking a late record; leave it. */
	*lo = head > cap - 1 ? head - cap + 1 : 0;
}

static bool
_sq_w_counted(unsigned kind)
{
	return kind == SQ_SUBMIT_ASYNC || kind == SQ_SUBMIT_BARRIER ||
			kind == SQ_SUBMIT_GROUP || kind == SQ_SUBMIT_NOTIFY ||
			kind == SQ_SUBMIT_NEXT;
}

/* Flow arguments for a slice: bind_id with flow_in / flow_out. */
static void
_sq_w_flow(struct sq_writer_s *w, uint32_t id, bool in, bool out)
{
	if (!in && !out)
		return;
	fprintf(w->f, ",\"bind_id\":\"0x%x\"", id);
	if (in)
		fputs(",\"flow_in\":true", w->f);
	if (out)
		fputs(",\"flow_out\":true", w->f);
}

static void
_sq_w_thread(struct sq_writer_s *w, const struct sq_trace_buf_s *b,
		struct sq_flows_s *flows)
{
	uint64_t lo, hi;
	_sq_w_range(b, &lo, &hi);
	if (hi == lo)
		return;
	size_t n = (size_t)(hi - lo);
	/* Each begin's end, found with a stack; 0: none (still running at
	 * the stop, or its end is past a depth we do not follow). */
	uint64_t *ends = calloc(n, sizeof(*ends));
	bool *skip = calloc(n, sizeof(*skip));
	if (ends == NULL || skip == NULL) {
		free(ends);
		free(skip);
		return;
	}
	size_t stack[SQ_TRACE_MAX_DEPTH];
	int depth = 0;
	for (size_t i = 0; i < n; i++) {
		const struct sq_trace_rec_s *r = &b->recs[(lo + i) & b->mask];
		if (r->type == SQ_REC_BEGIN) {
			if (depth < SQ_TRACE_MAX_DEPTH)
				stack[depth] = i;
			else
				skip[i] = true;
			depth++;
		} else if (r->type == SQ_REC_END) {
			if (depth == 0) {
				skip[i] = true; /* its begin was overwritten */
				continue;
			}
			depth--;
			if (depth < SQ_TRACE_MAX_DEPTH)
				ends[stack[depth]] = r->t ? r->t : 1;
		}
	}
	if (lo > 0) {
		const struct sq_trace_rec_s *r = &b->recs[lo & b->mask];
		w->dropped += lo;
		_sq_w_event(w, 'i', b->tid, r->t);
		fputs(",\"s\":\"t\",\"name\":\"trace ring wrapped\",\"cat\":"
				"\"sq.trace\"", w->f);
		fprintf(w->f, ",\"args\":{\"dropped_events\":%" PRIu64 "}}",
				lo);
	}
	char qname[300];
	for (size_t i = 0; i < n; i++) {
		const struct sq_trace_rec_s *r = &b->recs[(lo + i) & b->mask];
		if (skip[i])
			continue;
		switch (r->type) {
		case SQ_REC_BEGIN: {
			uint64_t end = ends[i] ? ends[i] : w->end_raw;
			struct sq_flow_s *fl = r->flow ? _sq_flow_find(flows,
					r->flow) : NULL;
			bool in = false, out = false;
			_sq_w_event(w, 'X', b->tid, r->t);
			_sq_w_dur(w, r->t, end);
			switch (r->kind) {
			case SQ_TRACE_TASK:
			case SQ_TRACE_SYNC:
				_sq_w_queue_name(w, r->a, qname, sizeof(qname));
				_sq_w_name(w, "", qname, "");
				fprintf(w->f, ",\"cat\":\"%s\"", r->kind ==
						SQ_TRACE_TASK ? "task" : "sync");
				fputs(",\"args\":{\"function\":", w->f);
				_sq_w_string(w->f, _sq_name_of(&w->names, r->b));
				fputc('}', w->f);
				in = fl && (fl->flags & (SQ_FLOW_OUT |
						SQ_FLOW_STEP)) && fl->in_buf == b
						&& fl->in_index == lo + i;
				break;
			case SQ_TRACE_SWIFT_JOB:
				fprintf(w->f, ",\"name\":\"Swift task %" PRIu64
						"\",\"cat\":\"swift\",\"args\":"
						"{\"task_id\":%" PRIu64
						",\"priority\":%u}", r->a, r->a,
						(unsigned)r->small);
				break;
			case SQ_TRACE_HANDLER: {
				static const char *const kinds[] = {
					" handler", " cancel handler",
					" registration handler" };
				_sq_w_name(w, _sq_source_kind_name(
						(unsigned)r->a), "", kinds[
						r->small < 3 ? r->small : 0]);
				fputs(",\"cat\":\"handler\",\"args\":"
						"{\"function\":", w->f);
				_sq_w_string(w->f, _sq_name_of(&w->names, r->b));
				fputc('}', w->f);
				break;
			}
			case SQ_TRACE_EVENT:
				_sq_w_name(w, "event: ", _sq_source_kind_name(
						r->small), "");
				fprintf(w->f, ",\"cat\":\"event\",\"args\":"
						"{\"handle\":%" PRIu64 ",\"data\":%"
						PRIu64 "}", r->a, r->b);
				break;
			case SQ_TRACE_TIMER:
				fprintf(w->f, ",\"name\":\"%s\",\"cat\":"
						"\"timer\",\"args\":{\"late_us\":"
						"%" PRIu64 ".%03u}", r->small ?
						"after fires" : "timer fires",
						r->a / 1000,
						(unsigned)(r->a % 1000));
				in = fl && (fl->flags & SQ_FLOW_OUT);
				out = fl && (fl->flags & SQ_FLOW_IN);
				break;
			case SQ_TRACE_IO:
				fprintf(w->f, ",\"name\":\"I/O %s fd %d\","
						"\"cat\":\"io\",\"args\":"
						"{\"length\":%" PRIu64 "}",
						r->small ? "write" : "read",
						(int)r->a, r->b);
				in = fl && (fl->flags & SQ_FLOW_OUT) &&
						fl->in_buf == b &&
						fl->in_index == lo + i;
				break;
			default:
				fputs(",\"name\":\"?\"", w->f);
				break;
			}
			_sq_w_flow(w, r->flow, in, out);
			fputc('}', w->f);
			break;
		}
		case SQ_REC_SUBMIT: {
			struct sq_flow_s *fl = _sq_flow_find(flows, r->flow);
			_sq_w_event(w, 'X', b->tid, r->t);
			fputs(",\"dur\":0", w->f);
			_sq_w_queue_name(w, r->a, qname, sizeof(qname));
			_sq_w_name(w, _sq_submit_name(r->kind), " to ", qname);
			fputs(",\"cat\":\"submit\",\"args\":{\"function\":",
					w->f);
			_sq_w_string(w->f, _sq_name_of(&w->names, r->b));
			fputc('}', w->f);
			_sq_w_flow(w, r->flow, false, fl && (fl->flags &
					(SQ_FLOW_IN | SQ_FLOW_STEP)));
			fputc('}', w->f);
			break;
		}
		case SQ_REC_INSTANT: {
			_sq_w_event(w, 'i', b->tid, r->t);
			fputs(",\"s\":\"t\",\"cat\":\"pool\"", w->f);
			char name[96];
			switch (r->kind) {
			case SQ_TRACE_WAKE:
				snprintf(name, sizeof(name), "wake sq.worker %"
						PRIu64, r->a);
				break;
			case SQ_TRACE_PARK:
				snprintf(name, sizeof(name), "park");
				break;
			case SQ_TRACE_SPAWN:
				snprintf(name, sizeof(name), "spawn sq.worker %"
						PRIu64 "%s", r->a, r->b ?
						" (compensation)" : "");
				break;
			case SQ_TRACE_NET:
				snprintf(name, sizeof(name), "safety net woke "
						"sq.worker %" PRIu64, r->a);
				break;
			case SQ_TRACE_SIGNAL:
				snprintf(name, sizeof(name), "signal %" PRIu64,
						r->a);
				break;
			default:
				snprintf(name, sizeof(name), "instant");
				break;
			}
			_sq_w_name(w, "", name, "");
			fputc('}', w->f);
			break;
		}
		case SQ_REC_POOL:
			_sq_w_event(w, 'C', b->tid, r->t);
			fprintf(w->f, ",\"name\":\"pool\",\"args\":{\"live\":%u,"
					"\"idle\":%u,\"searching\":%u}}",
					(unsigned)(r->a & 0xffff),
					(unsigned)(r->a >> 16 & 0xffff),
					(unsigned)(r->a >> 32 & 0xffff));
			break;
		default:
			break;
		}
	}
	free(ends);
	free(skip);
}

/* Queue depth: +1 at each counted submission, -1 at the run it led to,
 * summed per queue in time order. */
struct sq_depth_ev_s {
	uint64_t t;
	uint64_t queue;
	int delta;
};

static int
_sq_depth_cmp(const void *x, const void *y)
{
	const struct sq_depth_ev_s *a = x, *b = y;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return b->delta - a->delta; /* a submission before its run */
}

struct sq_depth_q_s {
	uint64_t queue;  /* 0: empty slot */
	int64_t depth;
	uint64_t shown_t;   /* the last point written */
	int64_t shown;
	bool pending;       /* a change not written yet */
	uint64_t pending_t;
};

static struct sq_depth_q_s *
_sq_depth_slot(struct sq_depth_q_s *slots, size_t cap, uint64_t queue)
{
	size_t i = (queue * 11400714819323198485ull) >> 32 & (cap - 1);
	while (slots[i].queue != 0 && slots[i].queue != queue)
		i = (i + 1) & (cap - 1);
	slots[i].queue = queue;
	return &slots[i];
}

static void
_sq_w_depth_point(struct sq_writer_s *w, uint64_t queue, uint64_t raw,
		int64_t depth)
{
	char qname[300];
	_sq_w_queue_name(w, queue, qname, sizeof(qname));
	_sq_w_event(w, 'C', w->pid, raw);
	_sq_w_name(w, "depth ", qname, "");
	fprintf(w->f, ",\"args\":{\"queued\":%lld}}", (long long)depth);
}

static void
_sq_w_depths(struct sq_writer_s *w, const struct sq_flows_s *flows)
{
	size_t n = 0;
	for (size_t i = 0; i < flows->cap; i++)
		if (flows->slots[i].id && (flows->slots[i].flags &
				(SQ_FLOW_OUT | SQ_FLOW_COUNTED)) ==
				(SQ_FLOW_OUT | SQ_FLOW_COUNTED))
			n += 2;
	if (n == 0)
		return;
	struct sq_depth_ev_s *ev = malloc(n * sizeof(*ev));
	size_t qcap = 64;
	while (qcap < n)
		qcap *= 2;
	struct sq_depth_q_s *qs = calloc(qcap, sizeof(*qs));
	if (ev == NULL || qs == NULL) {
		free(ev);
		free(qs);
		return;
	}
	n = 0;
	for (size_t i = 0; i < flows->cap; i++) {
		const struct sq_flow_s *f = &flows->slots[i];
		if (!f->id || (f->flags & (SQ_FLOW_OUT | SQ_FLOW_COUNTED)) !=
				(SQ_FLOW_OUT | SQ_FLOW_COUNTED) || f->queue == 0)
			continue;
		ev[n++] = (struct sq_depth_ev_s){ f->out_t, f->queue, 1 };
		if ((f->flags & SQ_FLOW_IN) && f->in_t >= f->out_t)
			ev[n++] = (struct sq_depth_ev_s){ f->in_t, f->queue,
					-1 };
	}
	qsort(ev, n, sizeof(*ev), _sq_depth_cmp);
	uint64_t step = (uint64_t)((long double)SQ_TRACE_DEPTH_STEP_NS /
			w->scale);
	for (size_t i = 0; i < n; i++) {
		struct sq_depth_q_s *q = _sq_depth_slot(qs, qcap, ev[i].queue);
		/* A change held back, then a quiet while: show it first. */
		if (q->pending && ev[i].t - q->pending_t >= step) {
			_sq_w_depth_point(w, q->queue, q->pending_t, q->depth);
			q->shown_t = q->pending_t;
			q->shown = q->depth;
			q->pending = false;
		}
		q->depth += ev[i].delta;
		if (q->depth == 0 || q->shown_t == 0 ||
				ev[i].t - q->shown_t >= step) {
			_sq_w_depth_point(w, q->queue, ev[i].t, q->depth);
			q->shown_t = ev[i].t;
			q->shown = q->depth;
			q->pending = false;
		} else {
			q->pending = true;
			q->pending_t = ev[i].t;
		}
	}
	for (size_t i = 0; i < qcap; i++)
		if (qs[i].queue && qs[i].pending)
			_sq_w_depth_point(w, qs[i].queue, qs[i].pending_t,
					qs[i].depth);
	free(ev);
	free(qs);
}

static void
_sq_w_process_name(struct sq_writer_s *w)
{
	char name[256] = "";
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (n > 0)
			name[n - (name[n - 1] == '\n')] = '\0';
	}
	fputs(w->first ? "\n" : ",\n", w->f);
	w->first = false;
	fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
			"\"process_name\",\"args\":{\"name\":", w->pid, w->pid);
	_sq_w_string(w->f, name[0] ? name : "program");
	fputs("}}", w->f);
}

/* Writes the trace of `session` to the open file; under the lock, not
 * recording. Returns 0 or an errno value. */
static int
_sq_trace_write(uint32_t session, uint64_t end_raw, uint64_t end_ns)
{
	int fd = dup(_sq_trace.fd);
	if (fd < 0)
		return errno;
	FILE *f = fdopen(fd, "w");
	if (f == NULL) {
		int err = errno;
		close(fd);
		return err;
	}
	static char iobuf[1 << 16];
	setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));

	struct sq_writer_s w = {
		.f = f,
		.pid = getpid(),
		.first = true,
		.raw0 = _sq_trace.raw0,
		.ns0 = _sq_trace.ns0,
		.end_raw = end_raw,
	};
	w.scale = end_raw > w.raw0 && end_ns > w.ns0
			? (long double)(end_ns - w.ns0) / (end_raw - w.raw0)
			: 1.0L;
	/* A copy of the label table's pointers (a late record may still
	 * add a label and move the table; the texts never move). */
	sq_spinlock_lock(&_sq_trace_labels.lock);
	w.nlabels = _sq_trace_labels.count;
	w.labels = malloc((w.nlabels + 1) * sizeof(*w.labels));
	if (w.labels != NULL && w.nlabels > 0)
		memcpy(w.labels, _sq_trace_labels.names,
				w.nlabels * sizeof(*w.labels));
	sq_spinlock_unlock(&_sq_trace_labels.lock);
	if (w.labels == NULL)
		w.nlabels = 0;
	w.label_queues = calloc(w.nlabels + 1, sizeof(*w.label_queues));

	/* The session's rings. */
	size_t total = 0;
	for (struct sq_trace_buf_s *b = _sq_trace.bufs; b; b = b->next) {
		if (__atomic_load_n(&b->session, __ATOMIC_ACQUIRE) != session ||
				b->recs == NULL)
			continue;
		uint64_t lo, hi;
		_sq_w_range(b, &lo, &hi);
		total += (size_t)(hi - lo);
	}

	/* Pass 1: the flows (which submissions, timers and runs share an
	 * id), and the queues per label. */
	struct sq_flows_s flows = { NULL, 64 };
	while (flows.cap < total * 2 + 2)
		flows.cap *= 2;
	flows.slots = calloc(flows.cap, sizeof(*flows.slots));
	if (flows.slots == NULL) {
		fclose(f);
		free(w.label_queues);
		free(w.labels);
		return ENOMEM;
	}
	for (struct sq_trace_buf_s *b = _sq_trace.bufs; b; b = b->next) {
		if (b->session != session || b->recs == NULL)
			continue;
		uint64_t lo, hi;
		_sq_w_range(b, &lo, &hi);
		for (uint64_t i = lo; i < hi; i++) {
			const struct sq_trace_rec_s *r = &b->recs[i & b->mask];
			if (r->type == SQ_REC_SUBMIT && r->flow) {
				struct sq_flow_s *fl = _sq_flow_get(&flows,
						r->flow);
				fl->flags |= SQ_FLOW_OUT | (_sq_w_counted(
						r->kind) ? SQ_FLOW_COUNTED : 0);
				fl->out_t = r->t;
				fl->queue = r->a;
			} else if (r->type == SQ_REC_BEGIN && r->flow) {
				struct sq_flow_s *fl = _sq_flow_get(&flows,
						r->flow);
				if (r->kind == SQ_TRACE_TIMER) {
					fl->flags |= SQ_FLOW_STEP;
				} else if (!(fl->flags & SQ_FLOW_IN) ||
						r->t < fl->in_t) {
					fl->flags |= SQ_FLOW_IN;
					fl->in_t = r->t;
					fl->in_buf = b;
					fl->in_index = i;
				}
			}
		}
	}
	/* A run whose submission was before the recording (or lost to a
	 * wrapped ring) ends no arrow; neither does one that comes before
	 * its submission (a stale id in recycled memory). */
	for (size_t i = 0; i < flows.cap; i++) {
		struct sq_flow_s *fl = &flows.slots[i];
		if (fl->id && (fl->flags & SQ_FLOW_IN) && (fl->flags &
				SQ_FLOW_OUT) && fl->in_t < fl->out_t)
			fl->flags &= ~SQ_FLOW_IN;
	}
	/* Labels shared by several queues get the serial number too. */
	if (w.label_queues != NULL) {
		uint64_t *seen = calloc(flows.cap, sizeof(*seen));
		size_t seen_cap = flows.cap;
		for (size_t i = 0; seen && i < flows.cap; i++) {
			uint64_t q = flows.slots[i].queue;
			if (!flows.slots[i].id || q == 0)
				continue;
			size_t j = (q * 11400714819323198485ull) >> 32 &
					(seen_cap - 1);
			while (seen[j] != 0 && seen[j] != q)
				j = (j + 1) & (seen_cap - 1);
			if (seen[j] == 0) {
				seen[j] = q;
				uint32_t id = (uint32_t)(q >> 32);
				if (id && id <= w.nlabels)
					w.label_queues[id - 1]++;
			}
		}
		free(seen);
	}

	fputs("{\"traceEvents\":[", f);
	_sq_w_process_name(&w);
	for (struct sq_trace_buf_s *b = _sq_trace.bufs; b; b = b->next) {
		if (b->session != session || b->recs == NULL)
			continue;
		fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
				"\"thread_name\",\"args\":{\"name\":", w.pid,
				(int)b->tid);
		_sq_w_string(f, b->name);
		fprintf(f, "}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
				"\"thread_sort_index\",\"args\":{\"sort_index\":"
				"%d}}", w.pid, (int)b->tid, b->sort);
	}
	for (struct sq_trace_buf_s *b = _sq_trace.bufs; b; b = b->next)
		if (b->session == session && b->recs != NULL)
			_sq_w_thread(&w, b, &flows);
	_sq_w_depths(&w, &flows);
	fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":"
			"{\"producer\":\"SwiftQueues\",\"clock\":"
			"\"CLOCK_MONOTONIC\",\"dropped_events\":%" PRIu64
			"}}\n", w.dropped);

	free(flows.slots);
	free(w.label_queues);
	free(w.labels);
	_sq_names_free(&w.names);
	int err = 0;
	if (ferror(f))
		err = EIO;
	if (fclose(f) != 0 && err == 0)
		err = errno ? errno : EIO;
	return err;
}

/* ---- Start, stop, exit, fork -------------------------------------------------- */

static void _sq_trace_at_exit(void);

static size_t
_sq_trace_ring_bytes(void)
{
	unsigned kb = SQ_TRACE_DEFAULT_KB;
	const char *v = getenv("SQ_TRACE_BUFFER_KB");
	if (v != NULL && *v != '\0') {
		char *end;
		unsigned long n = strtoul(v, &end, 10);
		if (*end == '\0' && n >= SQ_TRACE_MIN_KB)
			kb = n > SQ_TRACE_MAX_KB ? SQ_TRACE_MAX_KB : (unsigned)n;
	}
	/* A power of two of records. */
	size_t bytes = (size_t)kb * 1024, p = sizeof(struct sq_trace_rec_s);
	while (p * 2 <= bytes)
		p *= 2;
	return p;
}

/* `path` with %p replaced by the process id (one file per process when
 * a traced program starts others). */
static int
_sq_trace_expand(const char *path, char *out, size_t len)
{
	size_t o = 0;
	for (const char *p = path; *p; p++) {
		char num[24];
		const char *add = NULL;
		if (p[0] == '%' && p[1] == 'p') {
			snprintf(num, sizeof(num), "%d", (int)getpid());
			add = num;
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			add = "%";
			p++;
		}
		size_t n = add ? strlen(add) : 1;
		if (o + n >= len)
			return ENAMETOOLONG;
		if (add)
			memcpy(out + o, add, n);
		else
			out[o] = *p;
		o += n;
	}
	out[o] = '\0';
	return 0;
}

int
sq_trace_start(const char *path)
{
	if (path == NULL || *path == '\0') {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&_sq_trace.lock);
	if (_sq_trace.recording) {
		pthread_mutex_unlock(&_sq_trace.lock);
		errno = EBUSY;
		return -1;
	}
	char expanded[PATH_MAX];
	int err = _sq_trace_expand(path, expanded, sizeof(expanded));
	int fd = -1;
	if (err == 0) {
		fd = open(expanded, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0644);
		if (fd < 0)
			err = errno;
	}
	if (err == 0 && !_sq_trace.key_made) {
		err = pthread_key_create(&_sq_trace.key, _sq_trace_thread_exit);
		_sq_trace.key_made = err == 0;
	}
	if (err != 0) {
		if (fd >= 0)
			close(fd);
		pthread_mutex_unlock(&_sq_trace.lock);
		errno = err;
		return -1;
	}
	if (!_sq_trace.exit_handler) {
		atexit(_sq_trace_at_exit);
		_sq_trace.exit_handler = true;
		__atomic_store_n(&_sq_trace_tsc, _sq_trace_tsc_usable(),
				__ATOMIC_RELAXED);
	}
	snprintf(_sq_trace.path, sizeof(_sq_trace.path), "%s", expanded);
	_sq_trace.fd = fd;
	_sq_trace.ring_bytes = _sq_trace_ring_bytes();
	if (_sq_trace.flow_counter == 0)
		_sq_trace.flow_counter = SQ_TRACE_FLOW_BLOCK;
	_sq_trace_clock_pair(&_sq_trace.raw0, &_sq_trace.ns0);
	if (++_sq_trace.sessions >= SQ_TRACE_NO_SESSION)
		_sq_trace.sessions = 1;
	_sq_trace.recording = true;
	/* Release: a thread that sees the session sees the state above.
	 * Then the points' word: they start calling the recorder. */
	__atomic_store_n(&_sq_trace_session, _sq_trace.sessions,
			__ATOMIC_RELEASE);
	__atomic_store_n(&_sq_observe.half.recording, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&_sq_trace.lock);
	return 0;
}

int
sq_trace_stop(void)
{
	pthread_mutex_lock(&_sq_trace.lock);
	if (!_sq_trace.recording) {
		pthread_mutex_unlock(&_sq_trace.lock);
		errno = EINVAL;
		return -1;
	}
	uint32_t session = _sq_trace.sessions;
	/* Seq-cst: every record begun after this sees the recording off;
	 * at most one per thread was begun before (see the file comment). */
	__atomic_store_n(&_sq_observe.half.recording, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&_sq_trace_session, 0, __ATOMIC_SEQ_CST);
	_sq_trace.recording = false;
	uint64_t end_raw, end_ns;
	_sq_trace_clock_pair(&end_raw, &end_ns);
	int err = _sq_trace_write(session, end_raw, end_ns);
	if (close(_sq_trace.fd) != 0 && err == 0)
		err = errno;
	_sq_trace.fd = -1;
	/* The rings of threads that have exited go; the others give their
	 * memory back and are reset by their owners if recording resumes. */
	for (struct sq_trace_buf_s **link = &_sq_trace.bufs; *link;) {
		struct sq_trace_buf_s *b = *link;
		if (b->recs != NULL)
			madvise(b->recs, b->bytes, MADV_DONTNEED);
		if (__atomic_load_n(&b->dead, __ATOMIC_ACQUIRE)) {
			*link = b->next;
			if (b->recs != NULL)
				munmap(b->recs, b->bytes);
			free(b);
		} else {
			link = &b->next;
		}
	}
	pthread_mutex_unlock(&_sq_trace.lock);
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

bool
sq_trace_recording(void)
{
	return __atomic_load_n(&_sq_trace_session, __ATOMIC_ACQUIRE) != 0;
}

static void
_sq_trace_at_exit(void)
{
	if (!sq_trace_recording())
		return;
	char path[PATH_MAX];
	pthread_mutex_lock(&_sq_trace.lock);
	snprintf(path, sizeof(path), "%s", _sq_trace.path);
	pthread_mutex_unlock(&_sq_trace.lock);
	if (sq_trace_stop() != 0)
		fprintf(stderr, "SwiftQueues: sq_trace_stop: cannot write "
				"trace '%s': %s\n", path, strerror(errno));
}

void
_sq_trace_atfork_child(void)
{
	/* Only this thread exists: the rings and the registry are ours to
	 * drop; the file is the parent's. */
	_sq_trace_session = 0;
	_sq_observe.half.recording = 0;
	_sq_trace.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	_sq_trace.recording = false;
	if (_sq_trace.fd >= 0)
		close(_sq_trace.fd);
	_sq_trace.fd = -1;
	struct sq_trace_buf_s *b = _sq_trace.bufs;
	while (b) {
		struct sq_trace_buf_s *next = b->next;
		if (b->recs != NULL)
			munmap(b->recs, b->bytes);
		free(b);
		b = next;
	}
	_sq_trace.bufs = NULL;
	if (_sq_trace.key_made)
		pthread_setspecific(_sq_trace.key, NULL);
	_sq_trace_self = &_sq_trace_none;
	_sq_trace_inherited = 0;
	_sq_trace_kind = 0;
	_sq_trace_labels.lock = (sq_spinlock_t)SQ_SPINLOCK_INIT;
}

/* SQ_TRACE=<path>: record from the start; written at exit. */
__attribute__((constructor)) static void
_sq_trace_from_environment(void)
{
	const char *path = getenv("SQ_TRACE");
	if (path != NULL && *path != '\0' && sq_trace_start(path) != 0)
		fprintf(stderr, "SwiftQueues: SQ_TRACE: cannot record to '%s': "
				"%s\n", path, strerror(errno));
}

#endif /* SQ_NO_TRACE */
