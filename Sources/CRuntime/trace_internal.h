/*
 * SwiftQueues — observation points: the hooks the core calls where work is
 * submitted, starts and ends, where workers wake, park and start, where
 * timers fire, sources get events and I/O runs. Each point feeds two
 * consumers:
 *
 *   - the trace recorder (trace.c), while a trace is being recorded
 *     (SQ_TRACE=<path>, sq_trace_start): a binary record in the calling
 *     thread's ring, turned into Chrome's JSON trace format at the end;
 *   - a USDT probe (<sys/sdt.h>), which perf, bpftrace and SystemTap attach
 *     to in a running process.
 *
 * Every point first compares one word with zero, `_sq_observe`: its low
 * half is the probes' USDT semaphore (the kernel adds one to it for each
 * probe a tracer attaches, and takes it back when the tracer goes), then
 * a byte that is 1 while a trace is recorded and one that is 1 while the
 * watchdog watches tasks (only the points that call a task's function
 * look at that one). Off (no tracer, no recording),
 * a point costs that compare and a jump predicted not taken; the probes,
 * their arguments and the recording are all in functions of trace.c that
 * only that jump reaches. -DSQ_NO_TRACE removes the points, for measuring
 * what they cost. Where <sys/sdt.h> is missing (Debian: systemtap-sdt-dev)
 * the probes are left out and tracing still works.
 *
 * Not installed; the public calls are in <swiftqueues/trace.h>.
 */
#ifndef SWIFTQUEUES_TRACE_INTERNAL_H
#define SWIFTQUEUES_TRACE_INTERNAL_H

#include "queue_internal.h"

/* ---- Record kinds --------------------------------------------------------- */

/* Slices (a begin and an end on one thread). */
enum sq_trace_slice {
	SQ_TRACE_TASK = 1,    /* a continuation run by a drainer or worker */
	SQ_TRACE_SYNC,        /* work run on the calling thread (sync, in place) */
	SQ_TRACE_SWIFT_JOB,   /* a Swift job under the installed executor */
	SQ_TRACE_HANDLER,     /* a source's event / cancel / registration handler,
	                         or an I/O handler (source kind 0) */
	SQ_TRACE_EVENT,       /* an event folded into a source */
	SQ_TRACE_TIMER,       /* a timer entry firing on the event loop */
	SQ_TRACE_IO,          /* an I/O operation's system call */
	SQ_TRACE_WAIT,        /* a thread blocked in a wait (sq_trace_wait) */
};

/* What a blocked thread waits for (a wait slice's and a release's small
 * field). Records: a, the queue's key (sync waits) or 0; b, the object
 * that pairs a release with the wait it ends (the sync continuation, the
 * semaphore, group or work item, the apply, the once predicate). */
enum sq_trace_wait {
	SQ_WAIT_SYNC = 1,     /* sq_sync: the queue, before it is taken */
	SQ_WAIT_BARRIER_SYNC, /* sq_barrier_sync: the same */
	SQ_WAIT_SEMAPHORE,    /* sq_semaphore_wait, asleep */
	SQ_WAIT_GROUP,        /* sq_group_wait, asleep */
	SQ_WAIT_WORKITEM,     /* sq_workitem_wait, asleep */
	SQ_WAIT_APPLY,        /* sq_apply_f's caller, for its helpers' last
	                         iterations */
	SQ_WAIT_ONCE,         /* sq_once_f, while another thread runs it */
};

/* Submissions (where a flow arrow starts). */
enum sq_trace_submit {
	SQ_SUBMIT_ASYNC = 1,
	SQ_SUBMIT_BARRIER,
	SQ_SUBMIT_GROUP,      /* sq_group_async_f */
	SQ_SUBMIT_NOTIFY,     /* a group's or work item's notification */
	SQ_SUBMIT_AFTER,      /* sq_after_f: arrow to the timer, then the work */
	SQ_SUBMIT_NEXT,       /* to the worker's next-job slot (Swift hand-offs) */
	SQ_SUBMIT_DEFER,      /* left to run on this thread after a drain */
	SQ_SUBMIT_IO,         /* an I/O operation handed to an I/O thread */
};

/* Instants. */
enum sq_trace_instant {
	SQ_TRACE_COUNTERS = 0, /* only the pool's counters */
	SQ_TRACE_WAKE,        /* a: worker woken */
	SQ_TRACE_PARK,        /* a: the calling worker, going to sleep */
	SQ_TRACE_SPAWN,       /* a: worker started; b: 1 by the monitor */
	SQ_TRACE_NET,         /* a: worker the safety net woke */
	SQ_TRACE_SIGNAL,      /* a: signal number */
	SQ_TRACE_RAISE,       /* a: queue key; b: the class it was raised to
	                         (root index) */
	SQ_TRACE_NOTE,        /* a: the text's number (the label table); b:
	                         SQ_NOTE_* */
};

/* What a note is (instants with text). */
enum sq_trace_note {
	SQ_NOTE_WATCHDOG = 1, /* a watchdog finding */
};

/* ---- The word every point looks at ----------------------------------------- */

/* The word itself is in queue_internal.h, with the watchdog's byte.
 * SQ_OBSERVED(): a probe is attached or a trace recorded. SQ_OBSERVED_RUN(),
 * at the points where a task's function is called: that, or the watchdog
 * watches, so that the plain path calls the function with no other look
 * (the watchdog's hook is in the observed path). The other points leave
 * the watchdog's byte out, so that it sends no submission down their slow
 * paths.
 *
 * A relaxed look: a point that misses a change by a moment only misses an
 * event or two at the start or end of a recording. The recorder loads the
 * epoch again, with acquire, before it touches a ring. */
/* Probes and recording: the word's low three bytes (x86 is little-endian). */
#define SQ_OBSERVE_NOT_WATCHING 0x00ffffffu
#ifdef SQ_NO_TRACE
#define SQ_OBSERVED() 0
#define SQ_OBSERVED_RUN() 0
#elif defined(__x86_64__) && !defined(SQ_TSAN)
/* One test of memory and a jump (x86 loads are atomic), where the
 * compiler would load, test and jump. */
SQ_INLINE bool
_sq_observed(void)
{
	__asm__ goto("testl %0, %1\n\tjne %l[on]"
			: : "i"(SQ_OBSERVE_NOT_WATCHING), "m"(_sq_observe.word)
			: "cc" : on);
	return false;
on:
	return true;
}
SQ_INLINE bool
_sq_observed_run(void)
{
	__asm__ goto("cmpl $0, %0\n\tjne %l[on]"
			: : "m"(_sq_observe.word) : "cc" : on);
	return false;
on:
	return true;
}
#define SQ_OBSERVED() _sq_observed()
#define SQ_OBSERVED_RUN() _sq_observed_run()
#elif defined(SQ_TSAN)
/* Each part as the atomic it is written as (the kernel's writes to the
 * probes' half are not seen by the sanitizer). */
#define SQ_OBSERVED()                                                          \
	SQ_UNLIKELY((__atomic_load_n(&_sq_observe.half.recording,              \
			__ATOMIC_RELAXED) | __atomic_load_n(                   \
			&_sq_observe.half.probes, __ATOMIC_RELAXED)) != 0)
#define SQ_OBSERVED_RUN()                                                      \
	(SQ_OBSERVED() || SQ_UNLIKELY(__atomic_load_n(                         \
			&_sq_observe.half.watching, __ATOMIC_RELAXED) != 0))
#else
/* The mask as the word holds it, whatever the byte order. */
#define SQ_OBSERVED()                                                          \
	SQ_UNLIKELY((__atomic_load_n(&_sq_observe.word, __ATOMIC_RELAXED) &    \
			((union sq_observe_u){ .half = { 0xffff, 0xff, 0 } })  \
			.word) != 0)
#define SQ_OBSERVED_RUN()                                                      \
	SQ_UNLIKELY(__atomic_load_n(&_sq_observe.word, __ATOMIC_RELAXED) != 0)
#endif

/* ---- What the points call (trace.c), only when observed ------------------- */

SQ_INTERNAL uint32_t _sq_obs_submit(struct sq_queue_s *q, const void *func,
		const void *key, unsigned kind);
SQ_INTERNAL void _sq_obs_submit_push(struct sq_cont_s *c, struct sq_queue_s *q,
		unsigned kind);
SQ_INTERNAL void _sq_obs_task_begin(uint32_t flow, struct sq_queue_s *q,
		const void *func, const void *key);
SQ_INTERNAL void _sq_obs_cont_begin(struct sq_cont_s *c);
SQ_INTERNAL void _sq_obs_task_end(struct sq_queue_s *q);
SQ_INTERNAL void _sq_obs_sync_call(struct sq_queue_s *q, sq_function_t func,
		void *ctx);
SQ_INTERNAL void _sq_obs_swift_job_begin(void *job);
SQ_INTERNAL void _sq_obs_swift_job_end(void *job);
SQ_INTERNAL void _sq_obs_handler_begin(unsigned source_kind,
		const char *type_name, uintptr_t handle, unsigned handler,
		const void *func, const void *source);
SQ_INTERNAL void _sq_obs_handler_end(const char *type_name, uintptr_t handle);
SQ_INTERNAL void _sq_obs_event_begin(unsigned source_kind,
		const char *type_name, uintptr_t handle, uintptr_t data,
		const void *source);
SQ_INTERNAL void _sq_obs_timer_begin(uint32_t flow, bool after,
		uint64_t deadline, uint64_t now);
SQ_INTERNAL void _sq_obs_io_begin(uint32_t flow, int fd, bool write,
		size_t length);
SQ_INTERNAL void _sq_obs_io_end(int fd, ssize_t result);
SQ_INTERNAL void _sq_obs_end(unsigned slice);
SQ_INTERNAL void _sq_obs_pool(unsigned kind, uint64_t a, uint64_t b,
		int32_t live, int32_t idle, int32_t searching);
SQ_INTERNAL void _sq_obs_signal(int signo);
SQ_INTERNAL void _sq_obs_raise(struct sq_queue_s *q, int root);
SQ_INTERNAL void _sq_obs_wait_begin(unsigned kind, struct sq_queue_s *q,
		const void *object);
SQ_INTERNAL void _sq_obs_wait_end(unsigned kind, struct sq_queue_s *q,
		const void *object);
SQ_INTERNAL void _sq_obs_release(unsigned kind, struct sq_queue_s *q,
		const void *object);
/* A line of text as an instant on the calling thread (a watchdog
 * finding), while a trace is recorded. */
SQ_INTERNAL void _sq_trace_note(unsigned kind, const char *text,
		size_t len);

/* The next submission (or in-place run) on this thread continues this
 * flow instead of starting one: an after's work, from its timer. */
SQ_INTERNAL extern SQ_TLS uint32_t _sq_trace_inherited;
/* The kind of this thread's next submissions (0: their own). */
SQ_INTERNAL extern SQ_TLS uint8_t _sq_trace_kind;

/* What a runtime thread is, for its track's name (SQ_ROLE_WORKER, index 3
 * -> "sq.worker 3"); set once at the thread's start, read when it first
 * records. Plain thread-locals: setting them costs two stores. */
enum sq_trace_role {
	SQ_ROLE_NONE = 0,  /* a program thread (the main thread is found) */
	SQ_ROLE_WORKER,
	SQ_ROLE_MONITOR,
	SQ_ROLE_MANAGER,
	SQ_ROLE_SIGNALS,
	SQ_ROLE_IO,
};

SQ_INTERNAL extern SQ_TLS int _sq_trace_role;
SQ_INTERNAL extern SQ_TLS int _sq_trace_role_index;

SQ_INLINE void
_sq_trace_set_role(int role, int index)
{
	_sq_trace_role = role;
	_sq_trace_role_index = index;
}

/* The signal watcher: registers its ring (when recording) so that its
 * handler, which must not allocate, can record the signals it catches. */
SQ_INTERNAL void _sq_trace_attach_here(void);

/* Symbol tables of the modules looked at so far (trace_symbols.c). */
struct sq_module_s;
/* The name for one function pointer, malloc'd (NULL: out of memory);
 * `modules` keeps the tables read, for the next lookups. */
SQ_INTERNAL char *_sq_symbolize(struct sq_module_s **modules, uintptr_t addr);
SQ_INTERNAL void _sq_modules_free(struct sq_module_s *modules);

/* A function's name as traces give it (the symbol, static functions too,
 * Swift names demangled; else module+offset): for snapshots and the
 * watchdog. Slow (reads the module's symbol table): not for hot paths. */
SQ_INTERNAL void _sq_symbol_name(const void *func, char *out, size_t size);

/* Swift jobs (swift_executor.c): the job's task id and priority. */
SQ_INTERNAL void _sq_swift_job_info(void *job, uint64_t *task_id,
		unsigned *priority);

/* fork() child: nothing recorded, the parent's file and rings forgotten. */
SQ_INTERNAL void _sq_trace_atfork_child(void);

/* ---- The recorder's rings (trace.c writes them, trace_write.c reads them) -- */

enum {
	SQ_REC_BEGIN = 1, /* kind: slice; flow: the run's flow (in) */
	SQ_REC_END,       /* kind: slice */
	SQ_REC_SUBMIT,    /* kind: submit kind; flow: started here (out) */
	SQ_REC_INSTANT,   /* kind: instant kind */
	SQ_REC_POOL,      /* a: live | idle << 16 | searching << 32 */
	SQ_REC_RELEASE,   /* small: SQ_WAIT_*; a, b: as a wait's; flow: the
	                     arrow to the wait it ends (the writer pairs them) */
	SQ_REC_META,      /* a queue's or source's description, in parts
	                     (kind: SQ_META_*; a: its key) */
};

enum {
	SQ_META_QUEUE = 1,  /* small: type; flow: width; b: target key */
	SQ_META_SOURCE,     /* small: type kind; flow: handle; b: target key */
	SQ_META_HANDLER,    /* b: the event handler's function */
	SQ_META_INTERVAL,   /* b: a timer's interval, ns */
	SQ_META_LEEWAY,     /* b: a timer's leeway, ns */
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
	uint32_t epoch;        /* whose records these are: release by the owner */
	uint32_t flow_next;    /* the owner's block of flow ids */
	uint32_t flow_end;
	bool dead;             /* the owner exited (release) */
	pid_t tid;
	int sort;              /* the track's place */
	char name[48];
	struct sq_trace_buf_s *next; /* the registry, under its lock */
} __attribute__((aligned(2 * SQ_CACHELINE)));

/* A queue or source alive at the stop, as the trace describes it once. */
struct sq_trace_meta_s {
	bool source;
	uint8_t kind;         /* queue: SQ_QUEUE_TYPE_*; source: type kind */
	uint64_t key;         /* queue: its key; source: its address */
	uint64_t target;      /* the target queue's key */
	int32_t width;        /* queue: concurrent width (0: unlimited) */
	uintptr_t handle;     /* source */
	uintptr_t handler;    /* source: the event handler's function */
	uint64_t interval, leeway; /* timer sources, ns */
};

/* Fills the live queues and sources (introspect.c walks its registry;
 * trace.c gives each its key). Returns the count, or 0 when memory ran
 * out; *out is malloc'd. */
SQ_INTERNAL size_t _sq_introspect_trace_meta(struct sq_trace_meta_s **out);
SQ_INTERNAL uint64_t _sq_trace_queue_key_of(struct sq_queue_s *q);
/* A queue or source that goes away while a trace is recorded leaves its
 * description in the trace (SQ_REC_META records). */
SQ_INTERNAL void _sq_trace_meta_record(const struct sq_trace_meta_s *m);
SQ_INTERNAL void _sq_introspect_trace_gone(struct sq_object_s *o);

/* What trace_write.c needs to write one recording. */
struct sq_trace_json_s {
	int fd;                          /* the trace file (duplicated) */
	const struct sq_trace_buf_s *bufs; /* every ring (the registry) */
	uint32_t epoch;                  /* the recording's rings */
	uint64_t raw0, ns0;              /* raw clock and ns at the start */
	uint64_t end_raw, end_ns;        /* and at the stop */
	char *const *labels;             /* label number - 1 -> text */
	uint32_t nlabels;
	const struct sq_trace_meta_s *meta; /* the live queues and sources */
	size_t nmeta;
};

/* Writes the trace; returns 0 or an errno value. */
SQ_INTERNAL int _sq_trace_write_json(const struct sq_trace_json_s *in);

/* ---- The points -------------------------------------------------------------- */

#ifndef SQ_NO_TRACE

/* Continuation c, just made, is submitted to q: sets its flow id while
 * recording. Otherwise the field keeps what it had (0 in a new one, or an
 * id from an earlier recording, which no submission of this one has: the
 * writer draws no arrow to it), and costs no store. */
#define SQ_TRACE_SUBMIT(c, q, kind)                                            \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			(c)->job.trace_flow = _sq_obs_submit((q),              \
					(const void *)(c)->func, (c), (kind)); \
	} while (0)

/* The same, and then the push of c onto q (_sq_queue_push): when observed
 * trace.c does both, so either way the push is a tail call and nothing is
 * kept across a call for the point. */
#define SQ_TRACE_SUBMIT_PUSH(c, q, kind)                                       \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_submit_push((c), (q), (kind));                 \
		else                                                           \
			_sq_queue_push((q), &(c)->job);                        \
	} while (0)

/* A submission that is not a continuation (an after, a deferred run, an
 * I/O hand-off): stores its flow id in `var`, kept by the caller. */
#define SQ_TRACE_SUBMIT_ID(var, q, func, key, kind)                            \
	((var) = SQ_OBSERVED() ? _sq_obs_submit((q), (const void *)(func),     \
			(key), (kind)) : 0)

/* For code that has looked at SQ_OBSERVED() already (queue.c runs a
 * continuation through a copy of its code made for that case):
 * continuation c starts running (trace.c reads its queue, function and
 * flow), and the run of queue q ended. */
#define SQ_OBS_CONT_BEGIN(c) _sq_obs_cont_begin(c)
#define SQ_OBS_TASK_END(q) _sq_obs_task_end(q)

/* A run that has no continuation (a function left for after a drain)
 * starts; the end takes only what is live after the run anyway. */
#define SQ_TRACE_TASK_BEGIN(flow, q, func, key)                                \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_task_begin((flow), (q), (const void *)(func),  \
					(key));                                \
	} while (0)

#define SQ_TRACE_TASK_END(q)                                                   \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_task_end(q);                                   \
	} while (0)

/* Calls func(ctx) as q's work on the calling thread (sync, in place); when
 * observed, through trace.c, which marks its start and end: one look
 * either way. */
#define SQ_TRACE_SYNC_CALL(q, func, ctx)                                       \
	do {                                                                   \
		if (!SQ_OBSERVED_RUN()) /* the watchdog neither */            \
			(func)(ctx);                                           \
		else if (SQ_OBSERVED())                                        \
			_sq_obs_sync_call((q), (func), (ctx));                 \
		else                                                           \
			_sq_task_run((func), (ctx));                           \
	} while (0)

/* Calls a task's function where SQ_OBSERVED_RUN() was 0 a moment before:
 * the watchdog (whose byte is in that word) was off too, so nothing is
 * looked at again. */
#define SQ_TASK_RUN_UNOBSERVED(func, ctx) ((func)(ctx))

/* A Swift job runs (its task id and priority are read when observed). */
#define SQ_TRACE_SWIFT_JOB_BEGIN(job)                                          \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_swift_job_begin(job);                          \
	} while (0)

#define SQ_TRACE_SWIFT_JOB_END(job)                                            \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_swift_job_end(job);                            \
	} while (0)

/* A source's handler (0 event, 1 cancel, 2 registration) starts / ends.
 * Without a look of their own: the caller looks once for both ends and
 * takes an out-of-line copy when observed (source.c). */
#define SQ_OBS_HANDLER_BEGIN(s, handler, func)                                 \
	_sq_obs_handler_begin((s)->type->kind, (s)->type->name, (s)->handle,   \
			(handler), (const void *)(func), (s))
#define SQ_OBS_HANDLER_END(s) _sq_obs_handler_end((s)->type->name, (s)->handle)

/* An I/O handler function is called for a channel on descriptor fd. */
#define SQ_TRACE_IO_HANDLER_BEGIN(fd, func)                                    \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_handler_begin(0, "I/O", (uintptr_t)(fd), 0,    \
					(const void *)(func), NULL);           \
	} while (0)

#define SQ_TRACE_IO_HANDLER_END(fd)                                            \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_handler_end("I/O", (uintptr_t)(fd));           \
	} while (0)

/* An event (value) is folded into source s: as for a handler, the caller
 * looks once for both ends (source.c). */
#define SQ_OBS_EVENT_BEGIN(s, value)                                           \
	_sq_obs_event_begin((s)->type->kind, (s)->type->name, (s)->handle,     \
			(value), (s))
#define SQ_OBS_EVENT_END() _sq_obs_end(SQ_TRACE_EVENT)

/* Timer entry t fires on the loop (`now` on its clock). */
#define SQ_TRACE_TIMER_BEGIN(t, now, after)                                    \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_timer_begin((t)->trace_flow, (after),          \
					(t)->deadline, (now));                 \
	} while (0)

#define SQ_TRACE_TIMER_END()                                                   \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_end(SQ_TRACE_TIMER);                           \
	} while (0)

/* An I/O operation's system call on descriptor fd (flow: its hand-off). */
#define SQ_TRACE_IO_BEGIN(flow, fd, write, length)                             \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_io_begin((flow), (fd), (write), (length));     \
	} while (0)

#define SQ_TRACE_IO_END(fd, result)                                            \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_io_end((fd), (result));                        \
	} while (0)

/* A pool event (kind, a, b) with the pool's counters, read only then. */
#define SQ_TRACE_POOL(kind, a, b, live, idle, searching)                       \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_pool((kind), (a), (b), (live), (idle),         \
					(searching));                          \
	} while (0)

/* A signal caught by the runtime's handler (async-signal-safe). */
/* Queue q was raised to class `root` (queue.c, "Overrides"). */
#define SQ_TRACE_QUEUE_RAISE(q, root)                                          \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_raise((q), (root));                            \
	} while (0)

#define SQ_TRACE_SIGNAL(signo)                                                 \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_signal(signo);                                 \
	} while (0)

/* The calling thread blocks (only where it really sleeps: a wait that
 * ends at once records nothing) waiting for `object`, for queue q's turn
 * (sync waits; NULL otherwise), and wakes. */
#define SQ_TRACE_WAIT_BEGIN(kind, q, object)                                   \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_wait_begin((kind), (q), (object));             \
	} while (0)

#define SQ_TRACE_WAIT_END(kind, q, object)                                     \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_wait_end((kind), (q), (object));               \
	} while (0)

/* The calling thread ends the waits on `object` (a hand-off of q to its
 * sync caller, a semaphore signal that wakes a sleeper, a group's
 * emptying, a work item's end): the start of the arrow to the wait. */
#define SQ_TRACE_RELEASE(kind, q, object)                                      \
	do {                                                                   \
		if (SQ_OBSERVED())                                             \
			_sq_obs_release((kind), (q), (object));                \
	} while (0)

/* The next submissions from this thread continue `flow` / are of `kind`:
 * plain thread-local stores, made whether or not anything is observed, so
 * none is left set for the next recording. */
#define SQ_TRACE_INHERIT(flow) ((void)(_sq_trace_inherited = (flow)))
#define SQ_TRACE_SUBMIT_KIND(kind) ((void)(_sq_trace_kind = (kind)))

#else /* SQ_NO_TRACE */

#define SQ_TRACE_SUBMIT(c, q, kind) ((void)0)
#define SQ_TRACE_SUBMIT_PUSH(c, q, kind) _sq_queue_push((q), &(c)->job)
#define SQ_TRACE_SUBMIT_ID(var, q, func, key, kind) ((var) = 0)
#define SQ_OBS_CONT_BEGIN(c) ((void)0)
#define SQ_OBS_TASK_END(q) ((void)0)
#define SQ_TRACE_TASK_BEGIN(flow, q, func, key) ((void)0)
#define SQ_TRACE_TASK_END(q) ((void)0)
#define SQ_TRACE_SYNC_CALL(q, func, ctx) _sq_task_run((func), (ctx))
#define SQ_TASK_RUN_UNOBSERVED(func, ctx) _sq_task_run((func), (ctx))
#define SQ_TRACE_SWIFT_JOB_BEGIN(job) ((void)0)
#define SQ_TRACE_SWIFT_JOB_END(job) ((void)0)
#define SQ_OBS_HANDLER_BEGIN(s, handler, func) ((void)0)
#define SQ_OBS_HANDLER_END(s) ((void)0)
#define SQ_TRACE_IO_HANDLER_BEGIN(fd, func) ((void)0)
#define SQ_TRACE_IO_HANDLER_END(fd) ((void)0)
#define SQ_OBS_EVENT_BEGIN(s, value) ((void)0)
#define SQ_OBS_EVENT_END() ((void)0)
#define SQ_TRACE_TIMER_BEGIN(t, now, after) ((void)0)
#define SQ_TRACE_TIMER_END() ((void)0)
#define SQ_TRACE_IO_BEGIN(flow, fd, write, length) ((void)0)
#define SQ_TRACE_IO_END(fd, result) ((void)(fd))
#define SQ_TRACE_POOL(kind, a, b, live, idle, searching) ((void)0)
#define SQ_TRACE_SIGNAL(signo) ((void)0)
#define SQ_TRACE_WAIT_BEGIN(kind, q, object) ((void)0)
#define SQ_TRACE_WAIT_END(kind, q, object) ((void)0)
#define SQ_TRACE_RELEASE(kind, q, object) ((void)0)
#define SQ_TRACE_QUEUE_RAISE(q, root) ((void)0)
#define SQ_TRACE_INHERIT(flow) ((void)0)
#define SQ_TRACE_SUBMIT_KIND(kind) ((void)0)

#endif /* SQ_NO_TRACE */

#endif /* SWIFTQUEUES_TRACE_INTERNAL_H */
