/*
 * Out of inotify watches (the per-user limit, fs.inotify.max_user_watches):
 * a file-system source that cannot have its watch is refused by
 * sq_source_create with ENOSPC, instead of a source that never fires, and
 * the watches come back when sources go. The scenario runs in a child in a
 * user namespace of its own, whose limit (/proc/sys/user/
 * max_inotify_watches, counted per namespace) it lowers to a few watches;
 * where user namespaces cannot be made it is skipped with a message.
 *
 * With a limit of 4:
 *   - four sources on four files are made, the fifth is refused (ENOSPC),
 *     the four still deliver; a second source on one of the files shares
 *     its watch and is made;
 *   - a cancelled source gives its watch back: the refused file's source is
 *     made and delivers;
 *   - a source released without ever being activated gives its watch back;
 *   - a directory source for SQ_VNODE_DELETE needs its parent's watch too:
 *     with one watch left it is refused, and the watch it took is given
 *     back (a file's source is made after it).
 */
#include "limit_helpers.h"

#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>

#define WATCHES 4
#define NFILES 6

static char dir[] = "/tmp/sq-inotify-XXXXXX";
static char paths[NFILES][64];
static char subdir[64];

/* Writes `text` to a /proc file; false (with errno) if it cannot. */
static bool
write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = write(fd, text, strlen(text));
	int err = errno;
	close(fd);
	errno = err;
	return n == (ssize_t)strlen(text);
}

/* A user namespace of the child's own, where it is root and the watch
 * limit is `watches`; false (having said why) if one cannot be made. */
static bool
enter_namespace(int watches)
{
	char map[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (unshare(CLONE_NEWUSER) != 0) {
		printf("skipped: unshare(CLONE_NEWUSER): %s\n", strerror(errno));
		return false;
	}
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
	bool ok = write_proc("/proc/self/setgroups", "deny") ||
			errno == ENOENT;
	ok = ok && write_proc("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
	ok = ok && write_proc("/proc/self/gid_map", map);
	snprintf(map, sizeof(map), "%d\n", watches);
	ok = ok && write_proc("/proc/sys/user/max_inotify_watches", map);
	if (!ok) {
		printf("skipped: the namespace's watch limit cannot be set: "
				"%s\n", strerror(errno));
		return false;
	}
	return true;
}

struct watched {
	sq_source_t src;
	int fd;
	sq_semaphore_t registered, event, cancelled;
};

static void
watched_registered(void *ctx)
{
	sq_semaphore_signal(((struct watched *)ctx)->registered);
}

static void
watched_event(void *ctx)
{
	sq_semaphore_signal(((struct watched *)ctx)->event);
}

static void
watched_cancel(void *ctx)
{
	sq_semaphore_signal(((struct watched *)ctx)->cancelled);
}

/* A source for `mask` on `path`, activated unless `activate` is false
 * (and then registered: events from then on are its to deliver); false
 * with errno if sq_source_create refused it. */
static bool
watch(struct watched *w, const char *path, uintptr_t mask, bool activate)
{
	w->fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(w->fd >= 0);
	errno = 0;
	w->src = sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)w->fd, mask,
			NULL);
	if (w->src == NULL) {
		int err = errno;
		close(w->fd);
		errno = err;
		return false;
	}
	w->registered = sq_semaphore_create(0);
	w->event = sq_semaphore_create(0);
	w->cancelled = sq_semaphore_create(0);
	sq_set_context(w->src, w);
	sq_source_set_registration_handler_f(w->src, watched_registered);
	sq_source_set_event_handler_f(w->src, watched_event);
	sq_source_set_cancel_handler_f(w->src, watched_cancel);
	if (activate) {
		sq_activate(w->src);
		CHECK(sem_wait_ms(w->registered, 10000));
	}
	return true;
}

/* Cancels the source, waits for its cancel handler (the loop has let go
 * of it by then), and frees it all. */
static void
unwatch(struct watched *w)
{
	sq_source_cancel(w->src);
	CHECK(sem_wait_ms(w->cancelled, 10000));
	sq_release(w->src);
	sq_release(w->registered);
	sq_release(w->event);
	sq_release(w->cancelled);
	close(w->fd);
}

/* Appends a byte to the file: a SQ_VNODE_WRITE for its sources. */
static void
touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(write(fd, "x", 1) == 1);
	close(fd);
}

static void
refused(const char *path, uintptr_t mask)
{
	struct watched w;
	CHECK(!watch(&w, path, mask, true));
	CHECK_EQ(errno, ENOSPC);
}

static void
scenario(void)
{
	if (!enter_namespace(WATCHES))
		return;
	struct watched w[WATCHES], twin, late, idle, again;

	/* Four watches: four sources; the fifth is refused. */
	for (int i = 0; i < WATCHES; i++)
		CHECK(watch(&w[i], paths[i], SQ_VNODE_WRITE, true));
	refused(paths[WATCHES], SQ_VNODE_WRITE);
	/* A second source on a watched file shares its watch. */
	CHECK(watch(&twin, paths[1], SQ_VNODE_WRITE, true));
	/* Those made still deliver. */
	for (int i = 0; i < WATCHES; i++) {
		touch(paths[i]);
		CHECK(sem_wait_ms(w[i].event, 10000));
	}
	CHECK(sem_wait_ms(twin.event, 10000));

	/* A cancelled source gives its watch back. */
	unwatch(&w[2]);
	CHECK(watch(&late, paths[WATCHES], SQ_VNODE_WRITE, true));
	touch(paths[WATCHES]);
	CHECK(sem_wait_ms(late.event, 10000));
	refused(paths[2], SQ_VNODE_WRITE);

	/* So does one released without ever being activated. */
	unwatch(&w[3]);
	CHECK(watch(&idle, paths[5], SQ_VNODE_WRITE, false));
	refused(paths[3], SQ_VNODE_WRITE);
	sq_release(idle.src);
	sq_release(idle.registered);
	sq_release(idle.event);
	sq_release(idle.cancelled);
	close(idle.fd);
	CHECK(watch(&again, paths[3], SQ_VNODE_WRITE, true));
	touch(paths[3]);
	CHECK(sem_wait_ms(again.event, 10000));

	/* A directory's deletion needs its own watch and its parent's: with
	 * one watch left it is refused, and gives back the one it took. */
	unwatch(&w[0]);
	refused(subdir, SQ_VNODE_DELETE);
	CHECK(watch(&w[0], paths[0], SQ_VNODE_WRITE, true));
	touch(paths[0]);
	CHECK(sem_wait_ms(w[0].event, 10000));

	unwatch(&w[0]);
	unwatch(&w[1]);
	unwatch(&twin);
	unwatch(&late);
	unwatch(&again);
}

int
main(void)
{
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	for (int i = 0; i < NFILES; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/f%d", dir, i);
		int fd = open(paths[i], O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0) {
			perror("open");
			return 2;
		}
		close(fd);
	}
	snprintf(subdir, sizeof(subdir), "%s/d", dir);
	if (mkdir(subdir, 0755) != 0) {
		perror("mkdir");
		return 2;
	}
	sqt_run_child("watches", scenario, NULL);
	for (int i = 0; i < NFILES; i++)
		unlink(paths[i]);
	rmdir(subdir);
	rmdir(dir);
	return sqt_finish("test_limit_inotify");
}
