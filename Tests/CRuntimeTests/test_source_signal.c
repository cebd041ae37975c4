/*
 * Signal sources: InstallSignalHandler for SIGHUP after signal(SIG_IGN)
 * (deliveries counted in get_data, coalesced while the target queue is
 * suspended), the registration handler as the "source is live" signal,
 * signals that cannot be watched (EINVAL) with the runtime working
 * afterwards, the program's own sigaction handler and SIG_IGN coming back
 * after the last source is cancelled, two sources on one signal, and, in a
 * child process, the recorded decision for a default-terminating signal: the
 * source catches it (the process survives) and the default action returns
 * after cancel; and, in a child, a signal raised right after sq_activate
 * (or sq_resume of an inactive source) returns reaches the source, never
 * the default action, round after round.
 *
 * The contract is the header's (source.h, SQ_SOURCE_TYPE_SIGNAL): "While
 * a signal source is active the signal is caught ... the previous
 * disposition, SIG_IGN or a program handler, comes back when the last
 * source for that signal is cancelled."
 *
 * The child tests run first, while this process has no runtime threads, so
 * the children start the runtime from scratch.
 */
#include "source_helpers.h"

/* ---- a recording signal source --------------------------------------------------- */

struct sig {
	sq_source_t src;
	atomic_int calls, cancels;
	atomic_ulong data_sum, last_data, handle;
	atomic_int formatted; /* the handler could malloc and printf */
	sq_semaphore_t reg, each, cancel_sem;
};

static void
sig_registered(void *ctx)
{
	sq_semaphore_signal(((struct sig *)ctx)->reg);
}

static void
sig_handler(void *ctx)
{
	struct sig *s = ctx;
	unsigned long d = sq_source_get_data(s->src);
	/* Not a signal handler: anything goes. */
	char *msg = malloc(64);
	if (msg && snprintf(msg, 64, "signal %lu x%lu",
			(unsigned long)sq_source_get_handle(s->src), d) > 0)
		atomic_fetch_add(&s->formatted, 1);
	free(msg);
	atomic_store(&s->last_data, d);
	atomic_store(&s->handle, sq_source_get_handle(s->src));
	atomic_fetch_add(&s->data_sum, d);
	atomic_fetch_add(&s->calls, 1);
	sq_semaphore_signal(s->each);
}

static void
sig_cancelled(void *ctx)
{
	struct sig *s = ctx;
	atomic_fetch_add(&s->cancels, 1);
	sq_semaphore_signal(s->cancel_sem);
}

static struct sig *
sig_new(int signo, sq_queue_t q)
{
	struct sig *s = calloc(1, sizeof(*s));
	s->reg = sq_semaphore_create(0);
	s->each = sq_semaphore_create(0);
	s->cancel_sem = sq_semaphore_create(0);
	s->src = sq_source_create(SQ_SOURCE_TYPE_SIGNAL, (uintptr_t)signo, 0,
			q ? q : global_queue());
	if (s->src == NULL) {
		fprintf(stderr, "signal source %d: %s\n", signo,
				strerror(errno));
		exit(2);
	}
	sq_set_context(s->src, s);
	sq_source_set_registration_handler_f(s->src, sig_registered);
	sq_source_set_event_handler_f(s->src, sig_handler);
	sq_source_set_cancel_handler_f(s->src, sig_cancelled);
	return s;
}

/* Activates and waits until the source is live. */
static bool
sig_start(struct sig *s)
{
	sq_activate(s->src);
	return sem_wait_ms(s->reg, 10000);
}

/* Waits until the handler has seen `total` deliveries in all. */
static bool
sig_wait_total(struct sig *s, unsigned long total)
{
	uint64_t deadline = sqt_now_ns() + 10000 * MS;
	while (atomic_load(&s->data_sum) < total) {
		if (sqt_now_ns() > deadline)
			return false;
		sem_wait_ms(s->each, 100);
	}
	return true;
}

static void
sig_free(struct sig *s)
{
	if (!sq_source_testcancel(s->src))
		sq_source_cancel(s->src);
	CHECK(sem_wait_ms(s->cancel_sem, 10000));
	CHECK_EQ(atomic_load(&s->cancels), 1);
	sq_release(s->src);
	settle();
	sq_release(s->reg);
	sq_release(s->each);
	sq_release(s->cancel_sem);
	free(s);
}

static void
noop(void *ctx)
{
}

static void
small_wait(void)
{
	sqt_sleep_ms(10);
}

/* ---- in a child: SIGTERM is caught, and the default comes back ---------------- */

enum {
	CHILD_NO_REGISTRATION = 10,
	CHILD_NO_EVENT = 11,
	CHILD_NO_CANCEL = 12,
	CHILD_SURVIVED_DEFAULT = 13,
};

static void
sigterm_child(int report_fd)
{
	alarm(10);
	struct sig *s = sig_new(SIGTERM, NULL);
	if (!sig_start(s))
		_exit(CHILD_NO_REGISTRATION);
	kill(getpid(), SIGTERM);
	if (!sig_wait_total(s, 1))
		_exit(CHILD_NO_EVENT);
	/* Survived, and the handler saw it. */
	(void)!write(report_fd, "H", 1);
	sq_source_cancel(s->src);
	if (!sem_wait_ms(s->cancel_sem, 10000))
		_exit(CHILD_NO_CANCEL);
	/* The default action is back: this kills us. */
	kill(getpid(), SIGTERM);
	sqt_sleep_ms(2000);
	_exit(CHILD_SURVIVED_DEFAULT);
}

static void
test_sigterm_in_child(void)
{
	int fds[2];
	CHECK_EQ(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		sigterm_child(fds[1]);
		_exit(1);
	}
	close(fds[1]);
	char c = 0;
	ssize_t n = read(fds[0], &c, 1);
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(c, 'H');
	CHECK(WIFSIGNALED(status));
	if (WIFSIGNALED(status))
		CHECK_EQ(WTERMSIG(status), SIGTERM);
	else
		fprintf(stderr, "sigterm child: exit status %d\n",
				WEXITSTATUS(status));
}

/* ---- raise right after activation: the source is armed when sq_activate returns --- */

#define RAISE_ROUNDS 100

static void
raise_after_activate_child(void)
{
	alarm(60);
	/* Each one ends the process by default (SIGQUIT with a core). */
	static const int signals[] = { SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT,
			SIGVTALRM };
	for (int round = 0; round < RAISE_ROUNDS; round++) {
		int signo = signals[round % 5];
		struct sig *s = sig_new(signo, NULL);
		/* No registration wait: raise at once. Alternate the two
		 * calls that activate a new source. */
		if (round % 2)
			sq_resume(s->src);
		else
			sq_activate(s->src);
		raise(signo);
		if (!sig_wait_total(s, 1))
			_exit(CHILD_NO_EVENT);
		sq_source_cancel(s->src);
		if (!sem_wait_ms(s->cancel_sem, 10000))
			_exit(CHILD_NO_CANCEL);
		/* The last source gone: the default disposition is back
		 * for the next round's new first source. */
		sq_release(s->src);
	}
	_exit(0);
}

static void
test_raise_right_after_activate(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		raise_after_activate_child();
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (WIFSIGNALED(status))
		fprintf(stderr, "raise-after-activate child killed by "
				"signal %d\n", WTERMSIG(status));
	else if (WEXITSTATUS(status) != 0)
		fprintf(stderr, "raise-after-activate child: exit status "
				"%d\n", WEXITSTATUS(status));
}

/* ---- signals that cannot be watched ----------------------------------------------- */

static atomic_int data_calls;
static sq_semaphore_t data_sem;

static void
data_handler(void *ctx)
{
	atomic_fetch_add(&data_calls, 1);
	sq_semaphore_signal(data_sem);
}

static void
test_unsupported_signals(void)
{
	const uintptr_t bad[] = { SIGKILL, SIGSTOP, SIGSEGV, SIGILL, SIGBUS, 0,
		1000, (uintptr_t)NSIG, (uintptr_t)-1 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		sq_source_t s = sq_source_create(SQ_SOURCE_TYPE_SIGNAL, bad[i],
				0, NULL);
		CHECK(s == NULL);
		CHECK_EQ(errno, EINVAL);
		if (s != NULL)
			fprintf(stderr, "signal %lu accepted\n",
					(unsigned long)bad[i]);
	}
	/* A mask is not for signals. */
	errno = 0;
	CHECK(sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGUSR1, 1, NULL) ==
			NULL);
	CHECK_EQ(errno, EINVAL);

	/* The runtime works on. */
	data_sem = sq_semaphore_create(0);
	sq_source_t d = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, NULL);
	sq_source_set_event_handler_f(d, data_handler);
	sq_activate(d);
	sq_source_merge_data(d, 1);
	CHECK(sem_wait_ms(data_sem, 10000));
	CHECK_EQ(atomic_load(&data_calls), 1);
	sq_source_cancel(d);
	sq_release(d);
	settle();
	sq_release(data_sem);
}

/* ---- InstallSignalHandler for SIGHUP ----------------------------------------------- */

static void
test_sighup(void)
{
	signal(SIGHUP, SIG_IGN);
	struct sig *s = sig_new(SIGHUP, NULL);
	CHECK(sig_start(s));
	/* Three deliveries, a little apart: 3 in all, over 1..3 calls. */
	raise(SIGHUP);
	small_wait();
	kill(getpid(), SIGHUP);
	small_wait();
	raise(SIGHUP);
	CHECK(sig_wait_total(s, 3));
	settle();
	CHECK_EQ(atomic_load(&s->data_sum), 3);
	CHECK(atomic_load(&s->calls) >= 1 && atomic_load(&s->calls) <= 3);
	CHECK_EQ(atomic_load(&s->handle), SIGHUP);
	CHECK_EQ(atomic_load(&s->formatted), atomic_load(&s->calls));
	CHECK_EQ(sq_source_get_handle(s->src), SIGHUP);

	/* While the target queue is suspended: one call with data 3. */
	sq_queue_t q = sq_queue_create("signal.suspended", NULL);
	struct sig *t = sig_new(SIGHUP, q);
	CHECK(sig_start(t));
	/* The job that ran the registration handler may still be finishing
	 * on q (it would take a signal that comes now); let it end. */
	sq_sync_f(q, NULL, noop);
	sq_suspend(q);
	for (int i = 0; i < 3; i++) {
		raise(SIGHUP);
		small_wait();
	}
	/* The first source sees them as they come: our witness that all
	 * three reached the loop. */
	CHECK(sig_wait_total(s, 6));
	settle();
	CHECK_EQ(atomic_load(&t->calls), 0);
	sq_resume(q);
	CHECK(sig_wait_total(t, 3));
	settle();
	CHECK_EQ(atomic_load(&t->calls), 1);
	CHECK_EQ(atomic_load(&t->last_data), 3);

	sig_free(t);
	sig_free(s);
	sq_release(q);

	/* SIG_IGN is back. */
	struct sigaction old;
	sigaction(SIGHUP, NULL, &old);
	CHECK(old.sa_handler == SIG_IGN);
	raise(SIGHUP); /* and harmless */
}

/* ---- the program's own handler comes back ----------------------------------------- */

static atomic_int program_handler_calls;

static void
program_handler(int signo)
{
	atomic_fetch_add(&program_handler_calls, 1);
}

static void
test_program_handler_restored(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = program_handler;
	sigemptyset(&sa.sa_mask);
	CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	raise(SIGUSR1);
	CHECK_EQ(atomic_load(&program_handler_calls), 1);

	struct sig *s = sig_new(SIGUSR1, NULL);
	CHECK(sig_start(s));
	raise(SIGUSR1);
	CHECK(sig_wait_total(s, 1));
	/* Cancel, and wait for the cancel handler: by then the source has
	 * let go of the signal. */
	sq_source_cancel(s->src);
	CHECK(sem_wait_ms(s->cancel_sem, 10000));
	sq_semaphore_signal(s->cancel_sem); /* for sig_free */
	int before = atomic_load(&program_handler_calls);
	struct sigaction now;
	sigaction(SIGUSR1, NULL, &now);
	CHECK(now.sa_handler == program_handler);
	raise(SIGUSR1);
	CHECK_EQ(atomic_load(&program_handler_calls), before + 1);
	settle();
	CHECK_EQ(atomic_load(&s->data_sum), 1);
	sig_free(s);
}

/* ---- two sources on one signal --------------------------------------------------- */

static void *
kill_self_usr2(void *arg)
{
	kill(getpid(), SIGUSR2);
	return NULL;
}

static void
test_two_sources_one_signal(void)
{
	signal(SIGUSR2, SIG_IGN);
	struct sig *a = sig_new(SIGUSR2, NULL);
	struct sig *b = sig_new(SIGUSR2, NULL);
	CHECK(sig_start(a));
	CHECK(sig_start(b));
	/* From another thread: whichever thread takes it, both see it. */
	sqt_run_threads(1, kill_self_usr2, NULL, 0);
	CHECK(sig_wait_total(a, 1));
	CHECK(sig_wait_total(b, 1));

	/* Cancel one; the other still sees the signal. */
	sig_free(a);
	raise(SIGUSR2);
	CHECK(sig_wait_total(b, 2));
	sig_free(b);
	struct sigaction old;
	sigaction(SIGUSR2, NULL, &old);
	CHECK(old.sa_handler == SIG_IGN);
}

int
main(void)
{
	test_sigterm_in_child(); /* before this process starts the runtime */
	test_raise_right_after_activate();
	test_unsupported_signals();
	test_sighup();
	test_program_handler_restored();
	test_two_sources_one_signal();
	return sqt_finish("test_source_signal");
}
