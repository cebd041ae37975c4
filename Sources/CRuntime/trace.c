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
 * of a process that is recording) stops the recording, and trace_write.c
 * reads every ring and writes the JSON. There is no background flush: the
 * rings are bounded, so memory does not grow however long a trace runs,
 * and flushing while threads record would race their writes into the
 * rings it reads and put the writer's own work into the trace.
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
#include <fcntl.h>
#include <limits.h>
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

void
_sq_trace_note(unsigned kind, const char *text, size_t len)
{
	(void)kind;
	(void)text;
	(void)len;
}

/* Without the trace writer's symbol tables: exported names only. */
void
_sq_symbol_name(const void *func, char *out, size_t size)
{
	Dl_info info;
	if (func != NULL && dladdr(func, &info) != 0 && info.dli_sname != NULL)
		snprintf(out, size, "%s", info.dli_sname);
	else
		snprintf(out, size, "%p", func);
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
SQ_SEMAPHORE(wait__start)
SQ_SEMAPHORE(wait__end)
SQ_SEMAPHORE(release)
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
/* Records ahead of the one being written whose line is fetched for
 * writing: past the cache's size, a ring's lines are cold. */
#define SQ_TRACE_PREFETCH 16

/* ---- Records and rings ----------------------------------------------------- */

/* The recording in progress, by number: each start takes the next, so a
 * ring tagged with an older number is stale. 0: not recording. */
static uint32_t _sq_trace_epoch;
SQ_TLS int _sq_trace_role;
SQ_TLS int _sq_trace_role_index;

SQ_TLS uint32_t _sq_trace_inherited;
SQ_TLS uint8_t _sq_trace_kind;
/* The calling thread's ring; a thread without one points at this empty
 * ring, whose epoch is never recorded, so the hot path needs no NULL
 * test. */
#define SQ_TRACE_NO_EPOCH UINT32_MAX
static struct sq_trace_buf_s _sq_trace_none = {
	.epoch = SQ_TRACE_NO_EPOCH,
};
static SQ_TLS struct sq_trace_buf_s *_sq_trace_self = &_sq_trace_none;

static struct {
	pthread_mutex_t lock;   /* start, stop, the registry */
	struct sq_trace_buf_s *bufs;
	bool recording;
	uint32_t epochs;        /* the last recording number given */
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

/* Whether timestamps are raw TSC readings (set before the first recording,
 * read relaxed: the epoch's release store publishes it). */
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

/* Gives the calling thread a ring for `epoch` (its own one again, reset,
 * or a new one). NULL when the recording has stopped meanwhile or memory
 * ran out. */
static SQ_NOINLINE struct sq_trace_buf_s *
_sq_trace_attach(uint32_t epoch)
{
	if (epoch == 0)
		return NULL;
	struct sq_trace_buf_s *b = _sq_trace_self;
	if (b == &_sq_trace_none)
		b = NULL;
	pthread_mutex_lock(&_sq_trace.lock);
	if (__atomic_load_n(&_sq_trace_epoch, __ATOMIC_ACQUIRE) != epoch) {
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
		/* Lines of its own: the owner stores its count in it at
		 * every record, and a neighbour's records next to it in the
		 * same line would move the line between CPUs each time. */
		b = aligned_alloc(2 * SQ_CACHELINE, sizeof(*b));
		if (b == NULL) {
			pthread_mutex_unlock(&_sq_trace.lock);
			return NULL;
		}
		memset(b, 0, sizeof(*b));
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
	/* The count first, then the epoch (release): a writer that sees
	 * the epoch sees the count from it on. */
	__atomic_store_n(&b->head, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->epoch, epoch, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&_sq_trace.lock);
	return b;
}

/* The calling thread's ring for the current epoch, NULL when not
 * recording. Acquire: the epoch's state (clock choice, ring size) as
 * start set it. One compare on the way: only a ring of the current
 * epoch has that epoch's number. */
static inline struct sq_trace_buf_s *
_sq_trace_ring(void)
{
	uint32_t epoch = __atomic_load_n(&_sq_trace_epoch, __ATOMIC_ACQUIRE);
	struct sq_trace_buf_s *b = _sq_trace_self;
	if (SQ_UNLIKELY(b->epoch != epoch))
		b = _sq_trace_attach(epoch);
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

/* Records one event. The usual case (a ring of this epoch, the TSC)
 * calls nothing, so the entry points need no stack frame; the rest is a
 * tail call. */
static inline void
_sq_trace_put(uint64_t word, uint64_t a, uint64_t x)
{
#if defined(__x86_64__)
	uint32_t epoch = __atomic_load_n(&_sq_trace_epoch, __ATOMIC_ACQUIRE);
	struct sq_trace_buf_s *b = _sq_trace_self;
	if (SQ_LIKELY(b->epoch == epoch &&
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

/* A text's number in the table (0 when memory ran out): queue labels,
 * and the texts of notes (a watchdog reports each stall once, so they
 * stay few). */
static uint32_t
_sq_trace_intern_text(const char *text)
{
	uint32_t h = _sq_trace_hash(text), id = 0;
	sq_spinlock_lock(&_sq_trace_labels.lock);
	if (_sq_trace_labels_grow()) {
		uint32_t mask = _sq_trace_labels.index_cap - 1;
		for (;; h++) {
			uint32_t x = _sq_trace_labels.index[h & mask];
			if (x == 0) {
				char *copy = strdup(text);
				if (copy != NULL) {
					id = ++_sq_trace_labels.count;
					_sq_trace_labels.names[id - 1] = copy;
					_sq_trace_labels.index[h & mask] = id;
				}
				break;
			}
			if (strcmp(_sq_trace_labels.names[x - 1], text) == 0) {
				id = x;
				break;
			}
		}
	}
	sq_spinlock_unlock(&_sq_trace_labels.lock);
	return id;
}

static SQ_NOINLINE uint32_t
_sq_trace_intern(struct sq_queue_s *q)
{
	uint32_t id = _sq_trace_intern_text(_sq_object_label(q));
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

uint64_t
_sq_trace_queue_key_of(struct sq_queue_s *q)
{
	return _sq_trace_queue_key(q);
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
	uint32_t epoch = __atomic_load_n(&_sq_trace_epoch, __ATOMIC_ACQUIRE);
	struct sq_trace_buf_s *b = _sq_trace_self;
	uint32_t label = __atomic_load_n(&q->trace_label, __ATOMIC_RELAXED);
	if (SQ_LIKELY(b->epoch == epoch && label != 0 &&
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

/* A task's or sync call's begin carries the class it runs at (1 + the
 * root index; the writer names it). */
static SQ_NOINLINE void
_sq_trace_begin_slow(unsigned slice, uint32_t flow, struct sq_queue_s *q,
		const void *func)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, slice,
			(unsigned)_sq_thread_root() + 1, flow),
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
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, slice,
			(unsigned)_sq_thread_root() + 1, flow),
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
	_sq_task_run(func, ctx);
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

/* Handlers and events keep the source's address in a (the writer finds
 * its description) and a small number in the flow field, which they use
 * for no arrow: the source kind, the handle (an I/O handler: the
 * descriptor in a, no source). */
static void
_sq_trace_handler_begin(unsigned source_kind, unsigned handler,
		const void *func, uintptr_t source)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, SQ_TRACE_HANDLER, handler,
			source_kind), source, (uintptr_t)func);
}

static void
_sq_trace_event_begin(unsigned source_kind, uintptr_t handle, uintptr_t data,
		uintptr_t source)
{
	_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, SQ_TRACE_EVENT,
			source_kind, (uint32_t)handle), source, data);
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
	uint32_t epoch = __atomic_load_n(&_sq_trace_epoch, __ATOMIC_ACQUIRE);
	struct sq_trace_buf_s *b = _sq_trace_self;
	if (epoch != 0 && b->epoch == epoch)
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
		_sq_task_run(func, ctx);
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
		uintptr_t handle, unsigned handler, const void *func,
		const void *source)
{
	SQ_PROBE4(handler__start, type_name, handle, handler, func);
	if (SQ_RECORDING())
		_sq_trace_handler_begin(source_kind, handler, func, source ?
				(uintptr_t)source : handle);
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
		uintptr_t handle, uintptr_t data, const void *source)
{
	SQ_PROBE3(source__event, type_name, handle, data);
	if (SQ_RECORDING())
		_sq_trace_event_begin(source_kind, handle, data,
				(uintptr_t)source);
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
_sq_obs_raise(struct sq_queue_s *q, int root)
{
	if (SQ_RECORDING())
		_sq_trace_instant(SQ_TRACE_RAISE, _sq_trace_queue_key(q),
				(uint64_t)root);
}

void
_sq_obs_wait_begin(unsigned kind, struct sq_queue_s *q, const void *object)
{
	SQ_PROBE3(wait__start, kind, q ? q->obj.label : NULL, object);
	if (SQ_RECORDING())
		_sq_trace_put(_sq_trace_word(SQ_REC_BEGIN, SQ_TRACE_WAIT, kind,
				0), _sq_trace_queue_key(q), (uintptr_t)object);
}

void
_sq_obs_wait_end(unsigned kind, struct sq_queue_s *q, const void *object)
{
	SQ_PROBE2(wait__end, kind, object);
	/* The end repeats the wait's queue and object: the writer pairs
	 * releases with wait ends, and counts sync waits in the depth. */
	if (SQ_RECORDING())
		_sq_trace_put(_sq_trace_word(SQ_REC_END, SQ_TRACE_WAIT, kind,
				0), _sq_trace_queue_key(q), (uintptr_t)object);
}

void
_sq_obs_release(unsigned kind, struct sq_queue_s *q, const void *object)
{
	SQ_PROBE2(release, kind, object);
	if (!SQ_RECORDING())
		return;
	struct sq_trace_buf_s *b = _sq_trace_ring();
	if (b == NULL)
		return;
	_sq_trace_append(b, _sq_trace_clock(), _sq_trace_word(SQ_REC_RELEASE,
			0, kind, _sq_trace_new_flow(b)), _sq_trace_queue_key(q),
			(uintptr_t)object);
}

void
_sq_trace_meta_record(const struct sq_trace_meta_s *m)
{
	if (!SQ_RECORDING())
		return;
	if (!m->source) {
		_sq_trace_put(_sq_trace_word(SQ_REC_META, SQ_META_QUEUE,
				m->kind, (uint32_t)m->width), m->key, m->target);
		return;
	}
	_sq_trace_put(_sq_trace_word(SQ_REC_META, SQ_META_SOURCE, m->kind,
			(uint32_t)m->handle), m->key, m->target);
	_sq_trace_put(_sq_trace_word(SQ_REC_META, SQ_META_HANDLER, 0, 0),
			m->key, m->handler);
	if (m->interval != 0 || m->leeway != 0) {
		_sq_trace_put(_sq_trace_word(SQ_REC_META, SQ_META_INTERVAL, 0,
				0), m->key, m->interval);
		_sq_trace_put(_sq_trace_word(SQ_REC_META, SQ_META_LEEWAY, 0,
				0), m->key, m->leeway);
	}
}

void
_sq_trace_note(unsigned kind, const char *text, size_t len)
{
	if (!SQ_RECORDING())
		return;
	char line[512];
	if (len >= sizeof(line))
		len = sizeof(line) - 1;
	memcpy(line, text, len);
	line[len] = '\0';
	uint32_t id = _sq_trace_intern_text(line);
	if (id != 0)
		_sq_trace_instant(SQ_TRACE_NOTE, id, kind);
}

void
_sq_obs_signal(int signo)
{
	SQ_PROBE1(signal, signo);
	if (SQ_RECORDING())
		_sq_trace_signal(signo);
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
	if (++_sq_trace.epochs >= SQ_TRACE_NO_EPOCH)
		_sq_trace.epochs = 1;
	_sq_trace.recording = true;
	/* Release: a thread that sees the epoch sees the state above.
	 * Then the points' word: they start calling the recorder. */
	__atomic_store_n(&_sq_trace_epoch, _sq_trace.epochs,
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
	uint32_t epoch = _sq_trace.epochs;
	/* Seq-cst: every record begun after this sees the recording off;
	 * at most one per thread was begun before (see the file comment). */
	__atomic_store_n(&_sq_observe.half.recording, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&_sq_trace_epoch, 0, __ATOMIC_SEQ_CST);
	_sq_trace.recording = false;
	uint64_t end_raw, end_ns;
	_sq_trace_clock_pair(&end_raw, &end_ns);
	/* The live queues and sources, described once (their labels are
	 * interned here, so before the table is copied). */
	struct sq_trace_meta_s *meta = NULL;
	size_t nmeta = _sq_introspect_trace_meta(&meta);
	/* A copy of the label table's pointers (a late record may still
	 * add a label and move the table; the texts never move). */
	sq_spinlock_lock(&_sq_trace_labels.lock);
	uint32_t nlabels = _sq_trace_labels.count;
	char **labels = malloc((nlabels + 1) * sizeof(*labels));
	if (labels != NULL && nlabels > 0)
		memcpy(labels, _sq_trace_labels.names,
				nlabels * sizeof(*labels));
	sq_spinlock_unlock(&_sq_trace_labels.lock);
	struct sq_trace_json_s out = {
		.fd = _sq_trace.fd,
		.bufs = _sq_trace.bufs,
		.epoch = epoch,
		.raw0 = _sq_trace.raw0,
		.ns0 = _sq_trace.ns0,
		.end_raw = end_raw,
		.end_ns = end_ns,
		.labels = labels,
		.nlabels = labels != NULL ? nlabels : 0,
		.meta = meta,
		.nmeta = nmeta,
	};
	int err = _sq_trace_write_json(&out);
	free(labels);
	free(meta);
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
	return __atomic_load_n(&_sq_trace_epoch, __ATOMIC_ACQUIRE) != 0;
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
	_sq_trace_epoch = 0;
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
