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
 * Cost while no trace is recorded and no tracer is attached: one relaxed
 * load and one branch predicted not taken (the trace), and one nop (the
 * probe: its arguments are asm operands that name registers or memory the
 * values already live in, so no code computes them). -DSQ_NO_TRACE removes
 * both, for measuring that cost. Where <sys/sdt.h> is missing (Debian:
 * systemtap-sdt-dev) the probes are left out and tracing still works.
 *
 * Not installed; the public calls are in <swiftqueues/trace.h>.
 */
#ifndef SWIFTQUEUES_TRACE_INTERNAL_H
#define SWIFTQUEUES_TRACE_INTERNAL_H

#include "queue_internal.h"

/* ---- Probes ------------------------------------------------------------- */

#if !defined(SQ_NO_TRACE) && defined(__has_include)
#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define SQ_HAVE_PROBES 1
#endif
#endif

#ifdef SQ_HAVE_PROBES
#define SQ_PROBE1(name, a) STAP_PROBE1(swiftqueues, name, a)
#define SQ_PROBE2(name, a, b) STAP_PROBE2(swiftqueues, name, a, b)
#define SQ_PROBE3(name, a, b, c) STAP_PROBE3(swiftqueues, name, a, b, c)
#define SQ_PROBE4(name, a, b, c, d) STAP_PROBE4(swiftqueues, name, a, b, c, d)
#define SQ_PROBE5(name, a, b, c, d, e)                                         \
	STAP_PROBE5(swiftqueues, name, a, b, c, d, e)
#else
#define SQ_PROBE1(name, a) ((void)0)
#define SQ_PROBE2(name, a, b) ((void)0)
#define SQ_PROBE3(name, a, b, c) ((void)0)
#define SQ_PROBE4(name, a, b, c, d) ((void)0)
#define SQ_PROBE5(name, a, b, c, d, e) ((void)0)
#endif

/* Probe arguments are integers: pointers go as uintptr_t. */
#define SQ_PROBE_PTR(p) ((uintptr_t)(p))

/* ---- Record kinds --------------------------------------------------------- */

/* Slices (a begin and an end on one thread). */
enum sq_trace_slice {
	SQ_TRACE_TASK = 1,    /* a continuation run by a drainer or worker */
	SQ_TRACE_SYNC,        /* work run on the calling thread (sync, in place) */
	SQ_TRACE_SWIFT_JOB,   /* a Swift job under the installed executor */
	SQ_TRACE_HANDLER,     /* a source's event / cancel / registration handler */
	SQ_TRACE_EVENT,       /* an event folded into a source */
	SQ_TRACE_TIMER,       /* a timer entry firing on the event loop */
	SQ_TRACE_IO,          /* an I/O operation's system call */
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
	SQ_TRACE_WAKE = 1,    /* a: worker woken */
	SQ_TRACE_PARK,        /* the calling worker goes to sleep */
	SQ_TRACE_SPAWN,       /* a: worker started; b: 1 by the monitor */
	SQ_TRACE_NET,         /* a: worker the safety net woke */
	SQ_TRACE_SIGNAL,      /* a: signal number */
};

/* ---- The recorder's entry points (trace.c) --------------------------------
 *
 * Called only while a trace is recorded (behind SQ_TRACING()). */

SQ_INTERNAL extern uint32_t _sq_trace_session; /* 0: not recording */

SQ_INTERNAL uint32_t _sq_trace_submit(struct sq_queue_s *q, const void *func,
		unsigned kind);
SQ_INTERNAL void _sq_trace_begin(unsigned slice, uint32_t flow,
		struct sq_queue_s *q, const void *func);
SQ_INTERNAL void _sq_trace_end(unsigned slice);
SQ_INTERNAL void _sq_trace_swift_job_begin(void *job);
SQ_INTERNAL void _sq_trace_handler_begin(unsigned source_kind,
		unsigned handler, const void *func);
SQ_INTERNAL void _sq_trace_event_begin(unsigned source_kind, uintptr_t handle,
		uintptr_t data);
SQ_INTERNAL void _sq_trace_timer_begin(uint32_t flow, bool after,
		uint64_t late_ns);
SQ_INTERNAL void _sq_trace_io_begin(uint32_t flow, int fd, bool write,
		size_t length);
SQ_INTERNAL void _sq_trace_instant(unsigned kind, uint64_t a, uint64_t b);
SQ_INTERNAL void _sq_trace_pool(int32_t live, int32_t idle,
		int32_t searching);
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
/* From the signal handler: records signal `signo` if this thread is the
 * watcher and has a ring (async-signal-safe). */
SQ_INTERNAL void _sq_trace_signal(int signo);

/* Swift jobs (swift_executor.c): the job's task id and priority. */
SQ_INTERNAL void _sq_swift_job_info(void *job, uint64_t *task_id,
		unsigned *priority);

/* fork() child: nothing recorded, the parent's file and rings forgotten. */
SQ_INTERNAL void _sq_trace_atfork_child(void);

/* ---- The points ------------------------------------------------------------
 *
 * Relaxed load of the session: a thread that sees a new session a little
 * late misses its first events, nothing worse; the recorder's functions
 * load it again with acquire before they touch the session's state. */

#ifndef SQ_NO_TRACE
#define SQ_TRACING()                                                           \
	SQ_UNLIKELY(__atomic_load_n(&_sq_trace_session, __ATOMIC_RELAXED) != 0)
#else
#define SQ_TRACING() 0
#endif

#ifndef SQ_NO_TRACE

/* Continuation c, just made, is submitted to q: sets its flow id. */
#define SQ_TRACE_SUBMIT(c, q, kind)                                            \
	do {                                                                   \
		SQ_PROBE4(submit, SQ_PROBE_PTR((q)->obj.label),                \
				SQ_PROBE_PTR((c)->func), SQ_PROBE_PTR(c),      \
				(kind));                                       \
		(c)->job.trace_flow = SQ_TRACING() ? _sq_trace_submit((q),     \
				(const void *)(c)->func, (kind)) : 0;          \
	} while (0)

/* A submission that is not a continuation (an after, a deferred run):
 * stores its flow id in `var`, kept by the caller. */
#define SQ_TRACE_SUBMIT_ID(var, q, func, key, kind)                            \
	do {                                                                   \
		SQ_PROBE4(submit, SQ_PROBE_PTR((q)->obj.label),                \
				SQ_PROBE_PTR(func), SQ_PROBE_PTR(key),         \
				(kind));                                       \
		(var) = SQ_TRACING() ? _sq_trace_submit((q),                   \
				(const void *)(func), (kind)) : 0;             \
	} while (0)

/* Continuation `key` (flow `flow`) of queue q starts / ended running func. */
#define SQ_TRACE_TASK_BEGIN(flow, q, func, key)                                \
	do {                                                                   \
		SQ_PROBE4(task__start, SQ_PROBE_PTR((q)->obj.label),           \
				SQ_PROBE_PTR(func), SQ_PROBE_PTR(key),         \
				SQ_PROBE_PTR(q));                              \
		if (SQ_TRACING())                                              \
			_sq_trace_begin(SQ_TRACE_TASK, (flow), (q),            \
					(const void *)(func));                 \
	} while (0)

#define SQ_TRACE_TASK_END(q, func, key)                                        \
	do {                                                                   \
		SQ_PROBE4(task__end, SQ_PROBE_PTR((q)->obj.label),             \
				SQ_PROBE_PTR(func), SQ_PROBE_PTR(key),         \
				SQ_PROBE_PTR(q));                              \
		if (SQ_TRACING())                                              \
			_sq_trace_end(SQ_TRACE_TASK);                          \
	} while (0)

/* q's work func runs on the calling thread (sync, in place). */
#define SQ_TRACE_SYNC_BEGIN(q, func)                                           \
	do {                                                                   \
		SQ_PROBE3(sync__start, SQ_PROBE_PTR((q)->obj.label),           \
				SQ_PROBE_PTR(func), SQ_PROBE_PTR(q));          \
		if (SQ_TRACING())                                              \
			_sq_trace_begin(SQ_TRACE_SYNC, 0, (q),                 \
					(const void *)(func));                 \
	} while (0)

#define SQ_TRACE_SYNC_END(q, func)                                             \
	do {                                                                   \
		SQ_PROBE3(sync__end, SQ_PROBE_PTR((q)->obj.label),             \
				SQ_PROBE_PTR(func), SQ_PROBE_PTR(q));          \
		if (SQ_TRACING())                                              \
			_sq_trace_end(SQ_TRACE_SYNC);                          \
	} while (0)

/* A Swift job runs (the job pointer; the task id is read when tracing). */
#define SQ_TRACE_SWIFT_JOB_BEGIN(job)                                          \
	do {                                                                   \
		SQ_PROBE1(swift__job__start, SQ_PROBE_PTR(job));               \
		if (SQ_TRACING())                                              \
			_sq_trace_swift_job_begin(job);                        \
	} while (0)

#define SQ_TRACE_SWIFT_JOB_END(job)                                            \
	do {                                                                   \
		SQ_PROBE1(swift__job__end, SQ_PROBE_PTR(job));                 \
		if (SQ_TRACING())                                              \
			_sq_trace_end(SQ_TRACE_SWIFT_JOB);                     \
	} while (0)

/* A source's handler (0 event, 1 cancel, 2 registration) starts / ends. */
#define SQ_TRACE_HANDLER_BEGIN(s, handler, func)                               \
	do {                                                                   \
		SQ_PROBE4(handler__start, SQ_PROBE_PTR((s)->type->name),       \
				(s)->handle, (handler), SQ_PROBE_PTR(func));   \
		if (SQ_TRACING())                                              \
			_sq_trace_handler_begin((s)->type->kind, (handler),    \
					(const void *)(func));                 \
	} while (0)

#define SQ_TRACE_HANDLER_END(s)                                                \
	do {                                                                   \
		SQ_PROBE2(handler__end, SQ_PROBE_PTR((s)->type->name),         \
				(s)->handle);                                  \
		if (SQ_TRACING())                                              \
			_sq_trace_end(SQ_TRACE_HANDLER);                       \
	} while (0)

/* An event (value) is folded into source s. */
#define SQ_TRACE_EVENT_BEGIN(s, value)                                         \
	do {                                                                   \
		SQ_PROBE3(source__event, SQ_PROBE_PTR((s)->type->name),        \
				(s)->handle, (value));                         \
		if (SQ_TRACING())                                              \
			_sq_trace_event_begin((s)->type->kind, (s)->handle,    \
					(value));                              \
	} while (0)

#define SQ_TRACE_EVENT_END()                                                   \
	do {                                                                   \
		if (SQ_TRACING())                                              \
			_sq_trace_end(SQ_TRACE_EVENT);                         \
	} while (0)

/* Timer entry t fires on the loop (`now` on its clock). */
#define SQ_TRACE_TIMER_BEGIN(t, now, after)                                    \
	do {                                                                   \
		SQ_PROBE3(timer__fire, (t)->deadline, (now), (after));         \
		if (SQ_TRACING())                                              \
			_sq_trace_timer_begin((t)->trace_flow, (after),        \
					(now) > (t)->deadline                  \
					? (now) - (t)->deadline : 0);          \
	} while (0)

#define SQ_TRACE_TIMER_END()                                                   \
	do {                                                                   \
		if (SQ_TRACING())                                              \
			_sq_trace_end(SQ_TRACE_TIMER);                         \
	} while (0)

/* An I/O operation's system call on descriptor fd (flow: its hand-off). */
#define SQ_TRACE_IO_BEGIN(flow, fd, write, length)                             \
	do {                                                                   \
		SQ_PROBE3(io__start, (fd), (write), (length));                 \
		if (SQ_TRACING())                                              \
			_sq_trace_io_begin((flow), (fd), (write), (length));   \
	} while (0)

#define SQ_TRACE_IO_END(fd, result)                                            \
	do {                                                                   \
		SQ_PROBE2(io__end, (fd), (result));                            \
		if (SQ_TRACING())                                              \
			_sq_trace_end(SQ_TRACE_IO);                            \
	} while (0)

/* A signal caught by the runtime's handler (async-signal-safe). */
#define SQ_TRACE_SIGNAL(signo)                                                 \
	do {                                                                   \
		SQ_PROBE1(signal, (signo));                                    \
		if (SQ_TRACING())                                              \
			_sq_trace_signal(signo);                               \
	} while (0)

/* A pool event: probe `probe` with (a, b); in a trace an instant and the
 * pool's counters, read only then. */
#define SQ_TRACE_POOL_INSTANT(probe, kind, a, b, live, idle, searching)       \
	do {                                                                   \
		SQ_PROBE2(probe, (a), (b));                                    \
		if (SQ_TRACING()) {                                            \
			_sq_trace_instant((kind), (a), (b));                   \
			_sq_trace_pool((live), (idle), (searching));           \
		}                                                              \
	} while (0)

/* The next submissions from this thread continue `flow` / are of `kind`:
 * plain thread-local stores, made whether or not a trace is recorded, so
 * none is left set for the next recording. */
#define SQ_TRACE_INHERIT(flow) ((void)(_sq_trace_inherited = (flow)))
#define SQ_TRACE_SUBMIT_KIND(kind) ((void)(_sq_trace_kind = (kind)))

#else /* SQ_NO_TRACE */

#define SQ_TRACE_SUBMIT(c, q, kind) ((void)0)
#define SQ_TRACE_SUBMIT_ID(var, q, func, key, kind) ((var) = 0)
#define SQ_TRACE_TASK_BEGIN(flow, q, func, key) ((void)0)
#define SQ_TRACE_TASK_END(q, func, key) ((void)0)
#define SQ_TRACE_SYNC_BEGIN(q, func) ((void)0)
#define SQ_TRACE_SYNC_END(q, func) ((void)0)
#define SQ_TRACE_SWIFT_JOB_BEGIN(job) ((void)0)
#define SQ_TRACE_SWIFT_JOB_END(job) ((void)0)
#define SQ_TRACE_HANDLER_BEGIN(s, handler, func) ((void)0)
#define SQ_TRACE_HANDLER_END(s) ((void)0)
#define SQ_TRACE_EVENT_BEGIN(s, value) ((void)0)
#define SQ_TRACE_EVENT_END() ((void)0)
#define SQ_TRACE_TIMER_BEGIN(t, now, after) ((void)0)
#define SQ_TRACE_TIMER_END() ((void)0)
#define SQ_TRACE_IO_BEGIN(flow, fd, write, length) ((void)0)
#define SQ_TRACE_IO_END(fd, result) ((void)0)
#define SQ_TRACE_SIGNAL(signo) ((void)0)
#define SQ_TRACE_POOL_INSTANT(probe, kind, a, b, live, idle, searching)       \
	((void)0)
#define SQ_TRACE_INHERIT(flow) ((void)0)
#define SQ_TRACE_SUBMIT_KIND(kind) ((void)0)

#endif /* SQ_NO_TRACE */

#endif /* SWIFTQUEUES_TRACE_INTERNAL_H */
