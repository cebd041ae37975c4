/*
 * Dispatch sources in SwiftQueues: a repeating timer ("Time flies."), a
 * SIGHUP source after signal(SIGHUP, SIG_IGN), a process source watching a
 * child exit, a directory watch, and a custom data source — all on one
 * serial queue, with the main thread draining the main queue until
 * everything is done.
 */
#define _GNU_SOURCE
#include <swiftqueues.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static sq_source_t timer, hup, child_watch, folder, adder;
static volatile int32_t finished;
static char dir[] = "/tmp/sq-demo-XXXXXX";

static void
done_one(void)
{
	sq_atomic_inc32(&finished);
}

static void
time_flies(void *ctx)
{
	static int fires;
	printf("Time flies. (fire %d, %lu since the last handler)\n", ++fires,
			(unsigned long)sq_source_get_data(timer));
	if (fires == 3) {
		sq_source_cancel(timer);
		done_one();
	}
}

static void
got_sighup(void *ctx)
{
	printf("SIGHUP received %lu time(s)\n",
			(unsigned long)sq_source_get_data(hup));
	sq_source_cancel(hup);
	done_one();
}

static void
child_quit(void *ctx)
{
	int status = 0;
	pid_t pid = (pid_t)sq_source_get_handle(child_watch);
	waitpid(pid, &status, 0);
	printf("Child quit. (exit status %d)\n", WEXITSTATUS(status));
	sq_source_cancel(child_watch);
	done_one();
}

static void
folder_changed(void *ctx)
{
	unsigned long data = sq_source_get_data(folder);
	if (data & SQ_VNODE_WRITE)
		printf("The directory changed.\n");
	if (data & SQ_VNODE_DELETE) {
		printf("The directory has been deleted.\n");
		sq_source_cancel(folder);
		done_one();
	}
}

static void
close_fd(void *ctx)
{
	close((int)(intptr_t)ctx);
}

static void
added(void *ctx)
{
	printf("data source: %lu merged since the last handler\n",
			(unsigned long)sq_source_get_data(adder));
	sq_source_cancel(adder);
	done_one();
}

static bool
all_done(void *ctx)
{
	return sq_atomic_load32(&finished) == 5;
}

static void
hup_armed(void *ctx)
{
	kill(getpid(), SIGHUP);
}

int
main(void)
{
	sq_queue_t q = sq_queue_create("com.example.demo.sources", NULL);

	timer = sq_source_create(SQ_SOURCE_TYPE_TIMER, 0, 0, q);
	sq_source_set_event_handler_f(timer, time_flies);
	sq_source_set_timer(timer, SQ_TIME_NOW, 100 * NSEC_PER_MSEC,
			10 * NSEC_PER_MSEC);
	sq_resume(timer);

	signal(SIGHUP, SIG_IGN);
	hup = sq_source_create(SQ_SOURCE_TYPE_SIGNAL, SIGHUP, 0, q);
	sq_source_set_event_handler_f(hup, got_sighup);
	sq_source_set_registration_handler_f(hup, hup_armed);
	sq_resume(hup);

	pid_t pid = fork();
	if (pid == 0) {
		usleep(150 * 1000);
		_exit(7);
	}
	child_watch = sq_source_create(SQ_SOURCE_TYPE_PROC, (uintptr_t)pid,
			SQ_PROC_EXIT, q);
	sq_source_set_event_handler_f(child_watch, child_quit);
	sq_resume(child_watch);

	if (mkdtemp(dir) == NULL)
		return 1;
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	folder = sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)fd,
			SQ_VNODE_WRITE | SQ_VNODE_DELETE, q);
	sq_set_context(folder, (void *)(intptr_t)fd);
	sq_source_set_event_handler_f(folder, folder_changed);
	sq_source_set_cancel_handler_f(folder, close_fd);
	sq_resume(folder);

	adder = sq_source_create(SQ_SOURCE_TYPE_DATA_ADD, 0, 0, q);
	sq_source_set_event_handler_f(adder, added);
	for (int i = 1; i <= 10; i++)
		sq_source_merge_data(adder, (uintptr_t)i); /* before activation */
	sq_activate(adder);

	/* Touch the directory, then remove it, a little later. */
	usleep(50 * 1000);
	char file[64];
	snprintf(file, sizeof(file), "%s/hello", dir);
	close(open(file, O_CREAT | O_WRONLY, 0644));
	usleep(50 * 1000);
	unlink(file);
	rmdir(dir);

	bool ok = sq_main_queue_run_until(sq_time(SQ_TIME_NOW,
			5 * (int64_t)NSEC_PER_SEC), all_done, NULL);
	printf(ok ? "all sources done\n" : "timed out\n");
	return ok ? 0 : 1;
}
