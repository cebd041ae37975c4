/*
 * SwiftQueues as Swift concurrency's global executor (see
 * include/swiftqueues/executor.h and docs/ARCHITECTURE.md).
 *
 * The concurrency runtime exports one pointer variable per hook; when set,
 * its entry points (swift_task_enqueueGlobal, ...) call the hook instead of
 * their built-in implementation, passing that implementation as a last
 * argument. We reference the variables, and the runtime's job runner, as
 * weak symbols: the C library links and runs without Swift, and
 * sq_swift_executor_install simply returns false there.
 *
 * Calling convention: hooks are called with Swift's convention (swiftcall).
 * clang spells it; GCC, which builds the C library with the Makefile, does
 * not. For these signatures (at most eight integer/pointer arguments, no
 * context, no error, results of at most two words) swiftcall passes and
 * returns exactly like the C convention on x86-64 and AArch64, the only
 * targets the hooks are installed on.
 */
#include "internal.h"
#include "queue_internal.h"
#include "event_internal.h"
#include "trace_internal.h"

#include <swiftqueues/executor.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__has_attribute)
#if __has_attribute(swiftcall)
#define SQ_SWIFTCC __attribute__((swiftcall))
#endif
#endif
#ifndef SQ_SWIFTCC
#define SQ_SWIFTCC
#endif

#if defined(__x86_64__) || defined(__aarch64__)
#define SQ_SWIFT_HOOKS_SUPPORTED 1
#else
#define SQ_SWIFT_HOOKS_SUPPORTED 0
#endif

/* ---- The runtime's side (libswift_Concurrency) --------------------------- */

typedef struct {
	void *identity;
	uintptr_t implementation;
} sq_executor_ref_s;

/* The runtime's Job: flags at offset 32 on 64-bit (metadata, refcount,
 * two scheduler-private words); bits 8-15 are the priority. */
struct sq_swift_job_s {
	void *metadata;
	uintptr_t refcounts;
	void *scheduler_private[2];
	uint32_t flags;
};

typedef SQ_SWIFTCC void (*sq_enqueue_orig_t)(void *job);
typedef SQ_SWIFTCC void (*sq_enqueue_hook_t)(void *job, sq_enqueue_orig_t o);
typedef SQ_SWIFTCC void (*sq_delay_orig_t)(unsigned long long, void *);
typedef SQ_SWIFTCC void (*sq_delay_hook_t)(unsigned long long delay,
		void *job, sq_delay_orig_t o);
typedef SQ_SWIFTCC void (*sq_deadline_orig_t)(long long, long long,
		long long, long long, int, void *);
typedef SQ_SWIFTCC void (*sq_deadline_hook_t)(long long sec, long long nsec,
		long long tsec, long long tnsec, int clock, void *job,
		sq_deadline_orig_t o);
typedef SQ_SWIFTCC sq_executor_ref_s (*sq_getmain_orig_t)(void);
typedef SQ_SWIFTCC sq_executor_ref_s (*sq_getmain_hook_t)(sq_getmain_orig_t o);
typedef SQ_SWIFTCC bool (*sq_ismain_orig_t)(void *, uintptr_t);
typedef SQ_SWIFTCC bool (*sq_ismain_hook_t)(void *identity,
		uintptr_t implementation, sq_ismain_orig_t o);
typedef SQ_SWIFTCC void (*sq_drain_orig_t)(void);
typedef SQ_SWIFTCC void (*sq_drain_override_t)(sq_drain_orig_t o);
typedef SQ_SWIFTCC void (*sq_drain_hook_t)(sq_drain_orig_t o,
		sq_drain_override_t c);

extern sq_enqueue_hook_t swift_task_enqueueGlobal_hook __attribute__((weak));
extern sq_delay_hook_t swift_task_enqueueGlobalWithDelay_hook
		__attribute__((weak));
extern sq_deadline_hook_t swift_task_enqueueGlobalWithDeadline_hook
		__attribute__((weak));
extern sq_enqueue_hook_t swift_task_enqueueMainExecutor_hook
		__attribute__((weak));
extern sq_getmain_hook_t swift_task_getMainExecutor_hook
		__attribute__((weak));
extern sq_ismain_hook_t swift_task_isMainExecutor_hook __attribute__((weak));
extern sq_drain_hook_t swift_task_asyncMainDrainQueue_hook
		__attribute__((weak));
/* The runtime's job runner (the executor reference is two words, passed
 * as two integer arguments in either convention). */
extern SQ_SWIFTCC void swift_job_run(void *job, sq_executor_ref_s executor)
		__attribute__((weak));
extern SQ_SWIFTCC void *swift_task_getCurrent(void) __attribute__((weak));
/* The job's task id (a job that is not a task: its 32-bit job id). */
extern SQ_SWIFTCC uint64_t swift_task_getJobTaskId(void *job)
		__attribute__((weak));

/* ---- State ---------------------------------------------------------------- */

static sq_executor_ref_s _sq_main_executor;
static bool _sq_installed;
static sq_spinlock_t _sq_install_lock = SQ_SPINLOCK_INIT;
/* Under the install lock: a job reached Swift's default executor before
 * any install (see "Watching the default executor" below), and why the
 * last install was refused. */
static bool _sq_default_used;
static const char *_sq_refusal;

/* ---- Running jobs, and hops run in place ----------------------------------
 *
 * A task that hops from the pool into an actor on a serial queue enqueues
 * itself on the queue and gives up its thread; with plain submission the
 * queue's drain goes through the pool (another thread, usually woken) and
 * the way back too: two hand-offs per call. Instead, when the job enqueued
 * is the very job this thread is running (the task is leaving), the
 * submission is deferred to the moment that job returns, and then, if the
 * queue is idle, its job runs right here as the queue's work (the sync fast
 * path, so the queue's isolation holds). The task's hop back to the pool is
 * deferred the same way and runs here next. Only the leaving task's own job
 * is ever deferred, so nothing waits behind work still running. Every
 * SQ_HOP_BUDGET hops a chain of them looks for work waiting for this
 * worker (in its next-job slot, its ring or a root queue) and, if there
 * is any, is cut to let it through.
 */

#define SQ_HOP_BUDGET 256

struct sq_deferred_s {
	void *job;          /* NULL: nothing deferred */
	sq_queue_t queue;   /* NULL: back to the pool (generic executor) */
	sq_function_t func;
};

/* Per thread; only the owning thread reads or writes them. */
static SQ_TLS void *_sq_running_job;   /* the job our runner is in */
static SQ_TLS bool _sq_running_in_place; /* ... and it was a deferred hop */
static SQ_TLS struct sq_deferred_s _sq_deferred;

static void _sq_swift_run_on_pool(void *job);

static void
_sq_run_deferred(void)
{
	for (int budget = SQ_HOP_BUDGET; _sq_deferred.job != NULL; budget--) {
		struct sq_deferred_s d = _sq_deferred;
		_sq_deferred.job = NULL;
		if (budget == 0) {
			if (_sq_pool_work_waiting()) {
				if (d.queue != NULL)
					sq_async_f(d.queue, d.job, d.func);
				else
					_sq_swift_run_on_pool(d.job);
				return;
			}
			/* Nothing waits for this worker: go on. Cutting the
			 * chain would hand the task to the ring, where an
			 * idle worker spinning for work takes it, and the
			 * task's memory moves to the other core. */
			budget = SQ_HOP_BUDGET;
		}
		_sq_running_job = d.job;
		_sq_running_in_place = true;
		bool ran = true;
		if (d.queue == NULL) {
			SQ_TRACE_SWIFT_JOB_BEGIN(d.job);
			swift_job_run(d.job, (sq_executor_ref_s){ NULL, 0 });
			SQ_TRACE_SWIFT_JOB_END(d.job);
		} else
			ran = _sq_queue_try_run_here_f(d.queue, d.job, d.func);
		_sq_running_job = NULL;
		_sq_running_in_place = false;
		if (!ran)
			sq_async_f(d.queue, d.job, d.func);
	}
}

void
sq_swift_job_run_generic(void *job)
{
	/* Saved and restored in case a job ever runs another one nested
	 * (nothing in the runtime does today): what the inner job deferred
	 * runs when it returns, not when the outer one does. */
	void *outer = _sq_running_job;
	bool outer_in_place = _sq_running_in_place;
	_sq_running_job = job;
	_sq_running_in_place = false;
	SQ_TRACE_SWIFT_JOB_BEGIN(job);
	swift_job_run(job, (sq_executor_ref_s){ NULL, 0 });
	SQ_TRACE_SWIFT_JOB_END(job);
	_sq_running_job = NULL;
	_sq_run_deferred();
	_sq_running_job = outer;
	_sq_running_in_place = outer_in_place;
}

bool
sq_swift_defer_async_f(sq_queue_t queue, void *job, sq_function_t func)
{
	if (job != _sq_running_job || _sq_deferred.job != NULL)
		return false;
	_sq_deferred = (struct sq_deferred_s){ job, queue, func };
	return true;
}

static void
_sq_swift_run_main(void *job)
{
	SQ_TRACE_SWIFT_JOB_BEGIN(job);
	swift_job_run(job, _sq_main_executor);
	SQ_TRACE_SWIFT_JOB_END(job);
}

/* Job priority (Swift's TaskPriority raw value, libdispatch's QoS class
 * values) -> root queue index: userInteractive (0x21) and above
 * USER_INTERACTIVE, userInitiated / high USER_INITIATED, medium and
 * unspecified DEFAULT, utility / low UTILITY, background BACKGROUND. */
static int
_sq_swift_root_index(void *job)
{
	unsigned p = (((struct sq_swift_job_s *)job)->flags >> 8) & 0xff;
	if (p >= 0x21)
		return SQ_ROOT_INTERACTIVE;
	if (p >= 0x19)
		return SQ_ROOT_HIGH;
	if (p >= 0x15 || p == 0)
		return SQ_ROOT_DEFAULT;
	if (p >= 0x11)
		return SQ_ROOT_LOW;
	return SQ_ROOT_BACKGROUND;
}

void
_sq_swift_job_info(void *job, uint64_t *task_id, unsigned *priority)
{
	*task_id = swift_task_getJobTaskId != NULL
			? swift_task_getJobTaskId(job) : 0;
	*priority = (((struct sq_swift_job_s *)job)->flags >> 8) & 0xff;
}

static sq_queue_t
_sq_swift_root_for(void *job)
{
	return &_sq_root_queues[_sq_swift_root_index(job)];
}

/* ---- Hooks ---------------------------------------------------------------- */

static void
_sq_swift_run_on_pool(void *job)
{
	sq_async_f(_sq_swift_root_for(job), job, sq_swift_job_run_generic);
}

/* A job enqueued from a worker goes to that worker's next-job slot (see
 * pool_slot.c): a task's child, a resumed continuation or a task hopping back
 * from an actor runs on this thread as soon as the current job returns,
 * rather than on the idle worker spinning for work, which takes it only if
 * the current job goes on for a while. */
void
sq_swift_enqueue_task_job(void *job, sq_function_t func)
{
	_sq_root_async_next_f(_sq_swift_root_index(job), job, func);
}

static SQ_SWIFTCC void
_sq_hook_enqueue_global(void *job, sq_enqueue_orig_t orig)
{
	(void)orig;
	/* A task coming back from a queue actor we ran in place: continue it
	 * here once the actor's job returns. */
	if (_sq_running_in_place && job == _sq_running_job &&
			_sq_deferred.job == NULL) {
		_sq_deferred = (struct sq_deferred_s){ job, NULL, NULL };
		return;
	}
	_sq_root_async_next_f(_sq_swift_root_index(job), job,
			sq_swift_job_run_generic);
}

static SQ_SWIFTCC void
_sq_hook_enqueue_delay(unsigned long long delay, void *job, sq_delay_orig_t o)
{
	(void)o;
	sq_time_t when = delay > INT64_MAX ? SQ_TIME_FOREVER
			: sq_time(SQ_TIME_NOW, (int64_t)delay);
	sq_after_f(when, _sq_swift_root_for(job), job,
			sq_swift_job_run_generic);
}

static int64_t
_sq_clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static SQ_SWIFTCC void
_sq_hook_enqueue_deadline(long long sec, long long nsec, long long tsec,
		long long tnsec, int clock, void *job, sq_deadline_orig_t o)
{
	(void)o;
	/* Swift's clocks on Linux: continuous (1) is CLOCK_BOOTTIME,
	 * suspending (2) CLOCK_MONOTONIC, which sq_time also counts. */
	clockid_t id = clock == 1 ? CLOCK_BOOTTIME : CLOCK_MONOTONIC;
	int64_t deadline;
	if (__builtin_mul_overflow((int64_t)sec, (int64_t)1000000000, &deadline)
			|| __builtin_add_overflow(deadline, (int64_t)nsec,
					&deadline))
		deadline = INT64_MAX;
	int64_t delay = deadline == INT64_MAX ? INT64_MAX
			: deadline - _sq_clock_ns(id);
	sq_time_t when = delay <= 0 ? SQ_TIME_NOW
			: delay == INT64_MAX ? SQ_TIME_FOREVER
			: sq_time(SQ_TIME_NOW, delay);
	/* A negative tolerance means none was given. */
	uint64_t leeway = 0;
	if (tsec >= 0 && tnsec >= 0) {
		int64_t l;
		if (__builtin_mul_overflow((int64_t)tsec, (int64_t)1000000000,
				&l) || __builtin_add_overflow(l, (int64_t)tnsec, &l))
			l = INT64_MAX;
		leeway = (uint64_t)l;
	}
	sq_after_leeway_f(when, leeway, _sq_swift_root_for(job), job,
			sq_swift_job_run_generic);
}

static SQ_SWIFTCC void
_sq_hook_enqueue_main(void *job, sq_enqueue_orig_t orig)
{
	(void)orig;
	sq_async_f(sq_get_main_queue(), job, _sq_swift_run_main);
}

static SQ_SWIFTCC sq_executor_ref_s
_sq_hook_get_main(sq_getmain_orig_t orig)
{
	(void)orig;
	return _sq_main_executor;
}

static SQ_SWIFTCC bool
_sq_hook_is_main(void *identity, uintptr_t implementation, sq_ismain_orig_t o)
{
	(void)implementation;
	(void)o;
	return identity == _sq_main_executor.identity;
}

static SQ_SWIFTCC void
_sq_hook_async_main_drain(sq_drain_orig_t orig, sq_drain_override_t c)
{
	(void)orig;
	(void)c;
	sq_main();
}

/* ---- Watching the default executor ---------------------------------------
 *
 * An install after a task has run on Swift's default executor would leave
 * jobs behind there (main-actor jobs on Dispatch's main queue, which
 * nothing here drains), so it is refused; from inside a task that is easy
 * to see (swift_task_getCurrent), from the main thread afterwards it is
 * not. So, as the library loads, the four enqueue hooks are set to
 * watchers that note the first job and pass it on to the runtime's own
 * implementation (the `orig` argument every hook receives). The first job
 * removes the watchers again: a process that never installs pays one
 * locked look on its first enqueue, then nothing. A job a watcher sees
 * after an install (it read the hook just before) goes to our hook.
 */

static SQ_SWIFTCC void _sq_watch_enqueue_global(void *, sq_enqueue_orig_t);
static SQ_SWIFTCC void _sq_watch_enqueue_main(void *, sq_enqueue_orig_t);
static SQ_SWIFTCC void _sq_watch_enqueue_delay(unsigned long long, void *,
		sq_delay_orig_t);
static SQ_SWIFTCC void _sq_watch_enqueue_deadline(long long, long long,
		long long, long long, int, void *, sq_deadline_orig_t);

/* Replaces a watcher by NULL (only a watcher: someone may have set their
 * own hook since). */
#define SQ_UNWATCH(hook, watcher)                                              \
	do {                                                                   \
		__typeof__(hook) expected = (watcher);                         \
		__atomic_compare_exchange_n(&(hook), &expected, NULL, false,   \
				__ATOMIC_RELEASE, __ATOMIC_RELAXED);           \
	} while (0)

/* Notes the first job on the default executor; returns whether SwiftQueues
 * was installed meanwhile (then the job is ours to run). */
static bool
_sq_watch_job(void)
{
	sq_spinlock_lock(&_sq_install_lock);
	bool installed = _sq_installed;
	if (!installed && !_sq_default_used) {
		_sq_default_used = true;
		SQ_UNWATCH(swift_task_enqueueGlobal_hook, _sq_watch_enqueue_global);
		SQ_UNWATCH(swift_task_enqueueMainExecutor_hook,
				_sq_watch_enqueue_main);
		SQ_UNWATCH(swift_task_enqueueGlobalWithDelay_hook,
				_sq_watch_enqueue_delay);
		SQ_UNWATCH(swift_task_enqueueGlobalWithDeadline_hook,
				_sq_watch_enqueue_deadline);
	}
	sq_spinlock_unlock(&_sq_install_lock);
	return installed;
}

static SQ_SWIFTCC void
_sq_watch_enqueue_global(void *job, sq_enqueue_orig_t orig)
{
	if (_sq_watch_job())
		_sq_hook_enqueue_global(job, orig);
	else
		orig(job);
}

static SQ_SWIFTCC void
_sq_watch_enqueue_main(void *job, sq_enqueue_orig_t orig)
{
	if (_sq_watch_job())
		_sq_hook_enqueue_main(job, orig);
	else
		orig(job);
}

static SQ_SWIFTCC void
_sq_watch_enqueue_delay(unsigned long long delay, void *job,
		sq_delay_orig_t orig)
{
	if (_sq_watch_job())
		_sq_hook_enqueue_delay(delay, job, orig);
	else
		orig(delay, job);
}

static SQ_SWIFTCC void
_sq_watch_enqueue_deadline(long long sec, long long nsec, long long tsec,
		long long tnsec, int clock, void *job, sq_deadline_orig_t orig)
{
	if (_sq_watch_job())
		_sq_hook_enqueue_deadline(sec, nsec, tsec, tnsec, clock, job,
				orig);
	else
		orig(sec, nsec, tsec, tnsec, clock, job);
}

/* Whether the runtime has every hook and entry point we use. */
static bool
_sq_swift_hooks_present(void)
{
	return SQ_SWIFT_HOOKS_SUPPORTED
			&& &swift_task_enqueueGlobal_hook != NULL
			&& &swift_task_enqueueGlobalWithDelay_hook != NULL
			&& &swift_task_enqueueGlobalWithDeadline_hook != NULL
			&& &swift_task_enqueueMainExecutor_hook != NULL
			&& &swift_task_getMainExecutor_hook != NULL
			&& &swift_task_isMainExecutor_hook != NULL
			&& &swift_task_asyncMainDrainQueue_hook != NULL
			&& swift_job_run != NULL && swift_task_getCurrent != NULL;
}

/* Sets the watchers, as the library loads, where no hook is set yet. */
static void
_sq_watch_default_executor(void)
{
	if (!_sq_swift_hooks_present())
		return;
	sq_spinlock_lock(&_sq_install_lock);
	if (!_sq_installed && !_sq_default_used
			&& swift_task_enqueueGlobal_hook == NULL
			&& swift_task_enqueueMainExecutor_hook == NULL
			&& swift_task_enqueueGlobalWithDelay_hook == NULL
			&& swift_task_enqueueGlobalWithDeadline_hook == NULL) {
		/* Release: a thread that calls a watcher sees the state
		 * above (the runtime reads hooks with plain loads). */
		__atomic_store_n(&swift_task_enqueueGlobalWithDelay_hook,
				_sq_watch_enqueue_delay, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_enqueueGlobalWithDeadline_hook,
				_sq_watch_enqueue_deadline, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_enqueueMainExecutor_hook,
				_sq_watch_enqueue_main, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_enqueueGlobal_hook,
				_sq_watch_enqueue_global, __ATOMIC_RELEASE);
	}
	sq_spinlock_unlock(&_sq_install_lock);
}

/* ---- Installation --------------------------------------------------------- */

bool
sq_swift_executor_installed(void)
{
	return __atomic_load_n(&_sq_installed, __ATOMIC_ACQUIRE);
}

const char *
sq_swift_executor_refusal(void)
{
	sq_spinlock_lock(&_sq_install_lock);
	const char *reason = _sq_refusal;
	sq_spinlock_unlock(&_sq_install_lock);
	return reason;
}

/* Whether `hook` is unset, or set only by our watcher. */
#define SQ_HOOK_FREE(hook, watcher) ((hook) == NULL || (hook) == (watcher))

bool
sq_swift_executor_install(sq_swift_executor_ref_t main_executor)
{
	if (!_sq_swift_hooks_present() || main_executor.identity == NULL) {
		sq_spinlock_lock(&_sq_install_lock);
		_sq_refusal = "this process's Swift concurrency runtime has no "
				"executor hooks SwiftQueues can use";
		sq_spinlock_unlock(&_sq_install_lock);
		return false;
	}
	sq_spinlock_lock(&_sq_install_lock);
	bool ok = _sq_installed;
	if (ok) {
		/* A second call: nothing to do. */
	} else if (swift_task_getCurrent() != NULL) {
		_sq_refusal = "called from inside a task, which already runs on "
				"Swift's default executor (an async main, or a "
				"main.swift with top-level await, runs in one)";
	} else if (_sq_default_used) {
		_sq_refusal = "a task has already run on Swift's default "
				"executor (jobs left there would be stranded)";
	} else if (!SQ_HOOK_FREE(swift_task_enqueueGlobal_hook,
				_sq_watch_enqueue_global)
			|| !SQ_HOOK_FREE(swift_task_enqueueGlobalWithDelay_hook,
				_sq_watch_enqueue_delay)
			|| !SQ_HOOK_FREE(swift_task_enqueueGlobalWithDeadline_hook,
				_sq_watch_enqueue_deadline)
			|| !SQ_HOOK_FREE(swift_task_enqueueMainExecutor_hook,
				_sq_watch_enqueue_main)
			|| swift_task_getMainExecutor_hook != NULL
			|| swift_task_isMainExecutor_hook != NULL
			|| swift_task_asyncMainDrainQueue_hook != NULL) {
		_sq_refusal = "another library has already set Swift "
				"concurrency's executor hooks";
	} else {
		_sq_main_executor = (sq_executor_ref_s){
			main_executor.identity, main_executor.implementation };
		/* Release stores: a thread that sees a hook also sees the main
		 * executor it returns. The runtime reads hooks with plain loads,
		 * which is why installing must come before the first task. */
		__atomic_store_n(&swift_task_getMainExecutor_hook,
				_sq_hook_get_main, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_isMainExecutor_hook,
				_sq_hook_is_main, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_enqueueMainExecutor_hook,
				_sq_hook_enqueue_main, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_asyncMainDrainQueue_hook,
				_sq_hook_async_main_drain, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_enqueueGlobalWithDelay_hook,
				_sq_hook_enqueue_delay, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_enqueueGlobalWithDeadline_hook,
				_sq_hook_enqueue_deadline, __ATOMIC_RELEASE);
		__atomic_store_n(&swift_task_enqueueGlobal_hook,
				_sq_hook_enqueue_global, __ATOMIC_RELEASE);
		__atomic_store_n(&_sq_installed, true, __ATOMIC_RELEASE);
		_sq_refusal = NULL;
		ok = true;
	}
	sq_spinlock_unlock(&_sq_install_lock);
	return ok;
}

/* WorkQueue.installAsGlobalExecutor(), from the Swift module. */
extern void _sq_swift_install_from_environment(void) __attribute__((weak));

/* SWIFTQUEUES_GLOBAL_EXECUTOR=1 installs the executor as the program loads,
 * before any main runs: the one way to have an async main (or a test
 * runner) start on SwiftQueues without code changes. Otherwise the
 * default executor is watched until its first job, so that a later
 * install can tell whether it comes too late. */
__attribute__((constructor)) static void
_sq_swift_executor_from_environment(void)
{
	const char *value = getenv("SWIFTQUEUES_GLOBAL_EXECUTOR");
	if (value != NULL && strcmp(value, "1") == 0
			&& _sq_swift_install_from_environment != NULL)
		_sq_swift_install_from_environment();
	else
		_sq_watch_default_executor();
}
