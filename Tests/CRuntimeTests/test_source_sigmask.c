/*
 * Signal sources whatever the program's signal masks:
 *   - SIGUSR1 blocked in every thread before the first runtime call (as a
 *     daemon that handles signals on one thread does): 100 of 100 counted;
 *   - SIGUSR2 blocked by the main thread after the runtime started;
 *   - SIGUSR1 sent with kill() from another process;
 *   - 300 queued real-time signals (blocked everywhere) counted exactly;
 *   - after the last cancel the signal is blocked on the runtime's threads
 *     again, so a program that blocked it keeps it pending;
 *   - the disposition from before the first source comes back on the last
 *     cancel only if it is still the runtime's: a handler the program
 *     installed in between stays.
 */
#include "queue_helpers.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

struct sig {
	sq_source_t src;
	atomic_ulong count;
	sem_t reg;
};

static void
sig_handler(void *ctx)
{
	struct sig *s = ctx;
	atomic_fetch_add(&s->count, sq_source_get_data(s->src));
}

static void
sig_registered(void *ctx)
{
	sem_post(&((struct sig *)ctx)->reg);
}

static struct sig *
sig_new(int signo)
{
	struct sig *s = calloc(1, sizeof(*s));
	sem_init(&s->reg, 0, 0);
	s->src = sq_source_create(SQ_SOURCE_TYPE_SIGNAL, (uintptr_t)signo, 0,
			sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0));
	if (s->src == NULL) {
		perror("sq_source_create");
		exit(2);
	}
	sq_set_context(s->src, s);
	sq_source_set_event_handler_f(s->src, sig_handler);
	sq_source_set_registration_handler_f(s->src, sig_registered);
	sq_activate(s->src);
	CHECK(sqt_sem_wait_ms(&s->reg, 5000));
	return s;
}

static void
sig_free(struct sig *s)
{
	sq_source_cancel(s->src);
	sq_release(s->src);
	sqt_sleep_ms(50); /* the loop lets go; a queued handler finishes */
	sem_destroy(&s->reg);
	free(s);
}

/* Waits until s has counted `n` deliveries. */
static bool
wait_count(struct sig *s, unsigned long n, unsigned ms)
{
	uint64_t end = sqt_now_ns() + (uint64_t)ms * 1000000ull;
	while (atomic_load(&s->count) < n) {
		if (sqt_now_ns() > end)
			return false;
		sqt_sleep_us(200);
	}
	return true;
}

/* Sends `n` signals one at a time, each after the previous was counted
 * (standard signals do not queue). */
static unsigned long
send_counted(struct sig *s, int signo, int n)
{
	unsigned long base = atomic_load(&s->count);
	for (int i = 0; i < n; i++) {
		kill(getpid(), signo);
		if (!wait_count(s, base + (unsigned long)i + 1, 3000))
			break;
	}
	return atomic_load(&s->count) - base;
}

static bool
blocked_here(int signo)
{
	sigset_t cur;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	return sigismember(&cur, signo);
}

/* ---- a worker's own mask ------------------------------------------------------ */

/* A task's thread blocks the program's signals and leaves faults and
 * SIGPROF deliverable (Swift's crash handler pauses every thread with one
 * of SIGUSR1, SIGUSR2 and SIGPROF to print its backtrace). */
static sigset_t task_mask;

static void
read_task_mask(void *done)
{
	pthread_sigmask(SIG_BLOCK, NULL, &task_mask);
	sem_post(done);
}

static void
test_worker_mask(void)
{
	sem_t done;
	sem_init(&done, 0, 0);
	sq_async_f(sq_get_global_queue(0, 0), &done, read_task_mask);
	CHECK(sqt_sem_wait_ms(&done, 10000));
	CHECK(sigismember(&task_mask, SIGINT));
	CHECK(sigismember(&task_mask, SIGTERM));
	CHECK(sigismember(&task_mask, SIGUSR2));
	CHECK(!sigismember(&task_mask, SIGPROF));
	CHECK(!sigismember(&task_mask, SIGSEGV));
	sem_destroy(&done);
}

/* ---- blocked everywhere before the first call ------------------------------ */

static void
test_blocked_before_first_call(void)
{
	/* main() blocked SIGUSR1 before touching the runtime, so every
	 * runtime thread inherited the block. */
	struct sig *s = sig_new(SIGUSR1);
	CHECK_EQ(send_counted(s, SIGUSR1, 100), 100);
	CHECK(blocked_here(SIGUSR1)); /* the runtime left our mask alone */
	sig_free(s);
}

/* ---- blocked after the runtime started ------------------------------------- */

static void
test_blocked_after_start(void)
{
	CHECK(!blocked_here(SIGUSR2));
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	struct sig *s = sig_new(SIGUSR2);
	CHECK_EQ(send_counted(s, SIGUSR2, 50), 50);
	sig_free(s);
}

/* ---- from another process ----------------------------------------------------- */

static void
test_kill_from_other_process(void)
{
	struct sig *s = sig_new(SIGUSR1);
	int go[2], done[2];
	if (pipe(go) != 0 || pipe(done) != 0) {
		perror("pipe");
		exit(2);
	}
	enum { ROUNDS = 20 };
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		/* Only kill, read, write: nothing of the runtime. */
		pid_t parent = getppid();
		char c;
		for (int i = 0; i < ROUNDS; i++) {
			if (read(go[0], &c, 1) != 1)
				_exit(3);
			kill(parent, SIGUSR1);
		}
		_exit(0);
	}
	int counted = 0;
	for (int i = 0; i < ROUNDS; i++) {
		unsigned long before = atomic_load(&s->count);
		if (write(go[1], "x", 1) != 1)
			break;
		if (!wait_count(s, before + 1, 3000))
			break;
		counted++;
	}
	CHECK_EQ(counted, ROUNDS);
	close(go[1]);
	int status = 0;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(go[0]);
	close(done[0]);
	close(done[1]);
	sig_free(s);
}

/* ---- real-time signals, counted exactly ------------------------------------- */

static void
test_realtime_exact(void)
{
	int signo = SIGRTMIN + 3;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, signo);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	struct sig *s = sig_new(signo);
	enum { N = 300 };
	union sigval v = { .sival_int = 0 };
	int sent = 0;
	for (int i = 0; i < N; i++)
		if (sigqueue(getpid(), signo, v) == 0)
			sent++;
	CHECK_EQ(sent, N);
	CHECK(wait_count(s, N, 5000));
	sqt_sleep_ms(100);
	CHECK_EQ(atomic_load(&s->count), N);
	sig_free(s);
}

/* ---- after the last cancel: blocked again, so it stays pending ------------- */

static void
test_blocked_again_after_cancel(void)
{
	/* SIGUSR1 is blocked in this thread and its disposition is the
	 * default (terminate). With the source gone, a SIGUSR1 must wait
	 * as pending, not kill the process through a runtime thread. */
	struct sig *s = sig_new(SIGUSR1);
	sig_free(s);
	struct sigaction cur;
	sigaction(SIGUSR1, NULL, &cur);
	CHECK(cur.sa_handler == SIG_DFL);
	kill(getpid(), SIGUSR1);
	sqt_sleep_ms(50);
	sigset_t pending;
	sigpending(&pending);
	CHECK(sigismember(&pending, SIGUSR1));
	/* Take it, so it never reaches the default action. */
	sigset_t one;
	sigemptyset(&one);
	sigaddset(&one, SIGUSR1);
	struct timespec zero = { 0, 0 };
	CHECK_EQ(sigtimedwait(&one, NULL, &zero), SIGUSR1);
}

/* ---- the disposition comes back only if it is still the runtime's ------------ */

static atomic_int first_handler_calls, second_handler_calls;

static void
first_handler(int signo)
{
	atomic_fetch_add(&first_handler_calls, 1);
}

static void
second_handler(int signo)
{
	atomic_fetch_add(&second_handler_calls, 1);
}

static void
install(int signo, void (*fn)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sigaction(signo, &sa, NULL);
}

static void (*current(int signo))(int)
{
	struct sigaction cur;
	sigaction(signo, NULL, &cur);
	return cur.sa_handler;
}

static void
test_restore_only_if_ours(void)
{
	int signo = SIGWINCH;
	/* Untouched in between: the program's first handler comes back. */
	install(signo, first_handler);
	struct sig *s = sig_new(signo);
	CHECK(current(signo) != first_handler);
	sig_free(s);
	CHECK(current(signo) == first_handler);

	/* The program installs its own handler while a source is active:
	 * the last cancel leaves it in place. */
	s = sig_new(signo);
	install(signo, second_handler);
	sig_free(s);
	CHECK(current(signo) == second_handler);
	raise(signo);
	CHECK_EQ(atomic_load(&second_handler_calls), 1);
	CHECK_EQ(atomic_load(&first_handler_calls), 0);
	install(signo, SIG_DFL);
}

int
main(void)
{
	/* Before the first runtime call: SIGUSR1 blocked, as a daemon does
	 * to take signals on one thread of its choosing. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	test_blocked_before_first_call();
	test_blocked_after_start();
	test_kill_from_other_process();
	test_realtime_exact();
	test_blocked_again_after_cancel();
	test_restore_only_if_ours();
	test_worker_mask();
	return sqt_finish("test_source_sigmask");
}
