/*
 * Vnode (file-system) sources, through inotify: MonitorNameChangesToFile
 * (two renames seen, the source keeps watching; the context string is freed
 * and the fd closed by the cancel handler), renames coalescing while the
 * source is suspended, WRITE / EXTEND on writes, ATTRIB on chmod, LINK on a
 * new hard link, DELETE on unlink, a "watch folder" example (WRITE when a
 * file is created in the directory, DELETE when it is removed), and
 * creation errors (EBADF on a closed fd, EINVAL on bad masks); the mask
 * bits are source.h's SQ_VNODE_*.
 *
 * Ordering trick: inotify reports the events of all watches of one
 * instance in one queue, in order, and the runtime reads them in order. So
 * when a witness source sees a later event, every earlier event has been
 * merged into the other sources: no sleeping and hoping.
 */
#include "source_helpers.h"

#include <fcntl.h>
#include <sys/stat.h>

static char tmpdir[] = "/tmp/sqt-vnode-XXXXXX";

static void
path_of(char *buf, const char *name)
{
	snprintf(buf, 256, "%s/%s", tmpdir, name);
}

static void
touch(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(path);
		exit(2);
	}
	if (content)
		(void)!write(fd, content, strlen(content));
	close(fd);
}

/* ---- a recording vnode source ------------------------------------------------------ */

#define MAX_CALLS 32

struct vn {
	sq_source_t src;
	int fd;
	atomic_int calls, cancels, after_cancel, closes;
	atomic_ulong ored, last;
	unsigned long data[MAX_CALLS];
	sq_semaphore_t reg, each, cancel_sem;
	char *name; /* context string (MonitorNameChangesToFile) */
};

static void
vn_registered(void *ctx)
{
	sq_semaphore_signal(((struct vn *)ctx)->reg);
}

static void
vn_handler(void *ctx)
{
	struct vn *v = ctx;
	if (atomic_load(&v->cancels))
		atomic_fetch_add(&v->after_cancel, 1);
	unsigned long d = sq_source_get_data(v->src);
	int n = atomic_load(&v->calls);
	if (n < MAX_CALLS)
		v->data[n] = d;
	atomic_fetch_or(&v->ored, d);
	atomic_store(&v->last, d);
	atomic_store(&v->calls, n + 1);
	sq_semaphore_signal(v->each);
}

static void
vn_cancel(void *ctx)
{
	struct vn *v = ctx;
	free(v->name); /* the context data is freed here */
	v->name = NULL;
	/* Counts successful closes: the fd was open, and is no more. */
	if (close(v->fd) == 0)
		atomic_fetch_add(&v->closes, 1);
	atomic_fetch_add(&v->cancels, 1);
	sq_semaphore_signal(v->cancel_sem);
}

static struct vn *
vn_open(const char *path, uintptr_t mask, int flags)
{
	struct vn *v = calloc(1, sizeof(*v));
	v->fd = open(path, flags);
	if (v->fd < 0) {
		perror(path);
		exit(2);
	}
	v->reg = sq_semaphore_create(0);
	v->each = sq_semaphore_create(0);
	v->cancel_sem = sq_semaphore_create(0);
	v->src = sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)v->fd, mask,
			global_queue());
	if (v->src == NULL) {
		fprintf(stderr, "vnode source on %s: %s\n", path,
				strerror(errno));
		exit(2);
	}
	v->name = strdup(path);
	sq_set_context(v->src, v);
	sq_source_set_registration_handler_f(v->src, vn_registered);
	sq_source_set_event_handler_f(v->src, vn_handler);
	sq_source_set_cancel_handler_f(v->src, vn_cancel);
	sq_resume(v->src);
	CHECK(sem_wait_ms(v->reg, 10000));
	return v;
}

/* Waits until some call has reported all of `bits` (OR over the calls
 * since `since_calls`). */
static bool
vn_wait_bits(struct vn *v, unsigned long bits, int since_calls)
{
	uint64_t deadline = sqt_now_ns() + 10000 * MS;
	for (;;) {
		unsigned long seen = 0;
		int n = atomic_load(&v->calls);
		for (int i = since_calls; i < n && i < MAX_CALLS; i++)
			seen |= v->data[i];
		if ((seen & bits) == bits)
			return true;
		if (sqt_now_ns() > deadline)
			return false;
		sem_wait_ms(v->each, 100);
	}
}

static unsigned long
vn_bits_since(struct vn *v, int since_calls)
{
	unsigned long seen = 0;
	int n = atomic_load(&v->calls);
	for (int i = since_calls; i < n && i < MAX_CALLS; i++)
		seen |= v->data[i];
	return seen;
}

static void
vn_free(struct vn *v)
{
	sq_source_cancel(v->src);
	CHECK(sem_wait_ms(v->cancel_sem, 10000));
	settle();
	CHECK_EQ(atomic_load(&v->cancels), 1);
	CHECK_EQ(atomic_load(&v->closes), 1);
	CHECK_EQ(atomic_load(&v->after_cancel), 0);
	CHECK(v->name == NULL);
	sq_release(v->src);
	settle();
	sq_release(v->reg);
	sq_release(v->each);
	sq_release(v->cancel_sem);
	free(v);
}

/* ---- MonitorNameChangesToFile ----------------------------------------------------- */

static void
test_rename_twice(void)
{
	char a[256], b[256], c[256];
	path_of(a, "a");
	path_of(b, "b");
	path_of(c, "c");
	touch(a, "data");
	struct vn *v = vn_open(a, SQ_VNODE_RENAME | SQ_VNODE_WRITE, O_RDONLY);
	CHECK(strcmp(v->name, a) == 0);
	CHECK_EQ(sq_source_get_handle(v->src), v->fd);
	CHECK_EQ(sq_source_get_mask(v->src), SQ_VNODE_RENAME | SQ_VNODE_WRITE);

	CHECK_EQ(rename(a, b), 0);
	CHECK(vn_wait_bits(v, SQ_VNODE_RENAME, 0));
	int after_first = atomic_load(&v->calls);
	CHECK_EQ(rename(b, c), 0);
	CHECK(vn_wait_bits(v, SQ_VNODE_RENAME, after_first));
	CHECK(atomic_load(&v->calls) >= 2);
	CHECK(strcmp(v->name, a) == 0); /* the original name, as given */

	/* Still watching the same file under its new name. */
	int before = atomic_load(&v->calls);
	int wfd = open(c, O_WRONLY | O_APPEND);
	(void)!write(wfd, "more", 4);
	close(wfd);
	CHECK(vn_wait_bits(v, SQ_VNODE_WRITE, before));
	vn_free(v);
	unlink(c);
}

/* ---- renames coalesce while suspended -------------------------------------------- */

static void
test_coalesce_while_suspended(void)
{
	char a[256], b[256], c[256], d[256], w[256];
	path_of(a, "sa");
	path_of(b, "sb");
	path_of(c, "sc");
	path_of(d, "sd");
	path_of(w, "witness");
	touch(a, NULL);
	touch(w, NULL);
	struct vn *v = vn_open(a, SQ_VNODE_RENAME, O_RDONLY);
	struct vn *witness = vn_open(w, SQ_VNODE_ATTRIB, O_RDONLY);
	sq_suspend(v->src);
	CHECK_EQ(rename(a, b), 0);
	CHECK_EQ(rename(b, c), 0);
	CHECK_EQ(rename(c, d), 0);
	/* Once the witness hears this, the renames have been merged. */
	CHECK_EQ(chmod(w, 0600), 0);
	CHECK(vn_wait_bits(witness, SQ_VNODE_ATTRIB, 0));
	CHECK_EQ(atomic_load(&v->calls), 0);
	sq_resume(v->src);
	CHECK(sem_wait_ms(v->each, 10000));
	settle();
	/* Exactly one call: the last change. */
	CHECK_EQ(atomic_load(&v->calls), 1);
	CHECK_EQ(v->data[0], SQ_VNODE_RENAME);
	vn_free(v);
	vn_free(witness);
	unlink(d);
	unlink(w);
}

/* ---- write / extend / attrib / link / delete on a file --------------------------- */

static void
test_file_events(void)
{
	char f[256], l[256];
	path_of(f, "events");
	path_of(l, "events-link");
	touch(f, "0123456789");
	const uintptr_t all = SQ_VNODE_DELETE | SQ_VNODE_WRITE |
			SQ_VNODE_EXTEND | SQ_VNODE_ATTRIB | SQ_VNODE_LINK |
			SQ_VNODE_RENAME | SQ_VNODE_REVOKE;
	struct vn *v = vn_open(f, all, O_RDONLY);

	/* Append: WRITE and EXTEND. */
	int n0 = atomic_load(&v->calls);
	int wfd = open(f, O_WRONLY | O_APPEND);
	(void)!write(wfd, "abc", 3);
	close(wfd);
	CHECK(vn_wait_bits(v, SQ_VNODE_WRITE | SQ_VNODE_EXTEND, n0));
	CHECK_EQ(vn_bits_since(v, n0) & (SQ_VNODE_DELETE | SQ_VNODE_RENAME),
			0);

	/* Overwrite in place: WRITE, no EXTEND. Waiting for a witness
	 * event after it makes sure nothing else is still on its way. */
	settle();
	int n1 = atomic_load(&v->calls);
	wfd = open(f, O_WRONLY);
	(void)!pwrite(wfd, "XY", 2, 0);
	close(wfd);
	CHECK(vn_wait_bits(v, SQ_VNODE_WRITE, n1));
	settle();
	CHECK_EQ(vn_bits_since(v, n1) & SQ_VNODE_EXTEND, 0);

	/* chmod: ATTRIB. */
	int n2 = atomic_load(&v->calls);
	CHECK_EQ(chmod(f, 0600), 0);
	CHECK(vn_wait_bits(v, SQ_VNODE_ATTRIB, n2));

	/* A hard link: LINK (and ATTRIB). */
	int n3 = atomic_load(&v->calls);
	CHECK_EQ(link(f, l), 0);
	CHECK(vn_wait_bits(v, SQ_VNODE_LINK, n3));
	CHECK_EQ(vn_bits_since(v, n3) & SQ_VNODE_DELETE, 0);

	/* Unlink both names: DELETE, though our fd keeps the inode. */
	int n4 = atomic_load(&v->calls);
	CHECK_EQ(unlink(l), 0);
	CHECK_EQ(unlink(f), 0);
	CHECK(vn_wait_bits(v, SQ_VNODE_DELETE, n4));
	vn_free(v);
}

/* Only the bits asked for are reported. */
static void
test_mask_limits_events(void)
{
	char f[256], w[256];
	path_of(f, "masked");
	path_of(w, "masked-witness");
	touch(f, "x");
	touch(w, NULL);
	struct vn *v = vn_open(f, SQ_VNODE_ATTRIB, O_RDONLY);
	struct vn *witness = vn_open(w, SQ_VNODE_ATTRIB, O_RDONLY);
	int wfd = open(f, O_WRONLY | O_APPEND);
	(void)!write(wfd, "more", 4);
	close(wfd);
	CHECK_EQ(chmod(w, 0600), 0);
	CHECK(vn_wait_bits(witness, SQ_VNODE_ATTRIB, 0));
	CHECK_EQ(atomic_load(&v->calls), 0);
	CHECK_EQ(chmod(f, 0600), 0);
	CHECK(vn_wait_bits(v, SQ_VNODE_ATTRIB, 0));
	CHECK_EQ(atomic_load(&v->ored), SQ_VNODE_ATTRIB);
	vn_free(v);
	vn_free(witness);
	unlink(f);
	unlink(w);
}

/* ---- watch a folder: files created and removed ------------------------------------- */

static atomic_int dir_changed, dir_deleted;

static void
watch_folder_handler(void *ctx)
{
	struct vn *v = ctx;
	unsigned long const data = sq_source_get_data(v->src);
	if (data & SQ_VNODE_WRITE)
		atomic_fetch_add(&dir_changed, 1);   /* "The directory changed." */
	if (data & SQ_VNODE_DELETE)
		atomic_fetch_add(&dir_deleted, 1);   /* "...has been deleted." */
	vn_handler(ctx);
}

static void
test_watch_folder(void)
{
	char dir[256], file[300];
	path_of(dir, "folder");
	CHECK_EQ(mkdir(dir, 0755), 0);
	snprintf(file, sizeof(file), "%s/new-file", dir);
	struct vn *v = vn_open(dir, SQ_VNODE_WRITE | SQ_VNODE_DELETE,
			O_RDONLY | O_DIRECTORY);
	sq_source_set_event_handler_f(v->src, watch_folder_handler);

	touch(file, "hello");
	CHECK(vn_wait_bits(v, SQ_VNODE_WRITE, 0));
	CHECK(atomic_load(&dir_changed) >= 1);
	CHECK_EQ(atomic_load(&dir_deleted), 0);

	int n = atomic_load(&v->calls);
	CHECK_EQ(unlink(file), 0);
	CHECK_EQ(rmdir(dir), 0);
	bool deleted = vn_wait_bits(v, SQ_VNODE_DELETE, n);
	if (!deleted)
		fprintf(stderr, "watch folder: rmdir of a watched directory "
				"not reported as DELETE (bits since: %#lx)\n",
				vn_bits_since(v, n));
	CHECK(deleted);
	CHECK(atomic_load(&dir_deleted) == (deleted ? 1 : 0));
	vn_free(v);
}

/* ---- creation errors ------------------------------------------------------------ */

static void
test_bad_input(void)
{
	char f[256];
	path_of(f, "bad");
	touch(f, NULL);
	int fd = open(f, O_RDONLY);
	close(fd);
	/* The path is gone, and so is the fd: EBADF. */
	unlink(f);
	errno = 0;
	CHECK(sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)fd,
			SQ_VNODE_DELETE, NULL) == NULL);
	CHECK_EQ(errno, EBADF);
	errno = 0;
	CHECK(sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)-1,
			SQ_VNODE_DELETE, NULL) == NULL);
	CHECK_EQ(errno, EBADF);

	/* The watch-folder example's message when the open fails. */
	const char *missing = "/nonexistent";
	errno = 0;
	int mfd = open(missing, O_RDONLY);
	int err = errno;
	CHECK_EQ(mfd, -1);
	char buffer[80], line[200];
	/* GNU strerror_r: the message is the return value. */
	const char *msg = strerror_r(err, buffer, sizeof(buffer));
	snprintf(line, sizeof(line), "Unable to open \"%s\": %s (%d)", missing,
			msg, err);
	CHECK(strcmp(line, "Unable to open \"/nonexistent\": No such file or "
			"directory (2)") == 0);

	/* Masks: none, or unknown bits. */
	touch(f, NULL);
	fd = open(f, O_RDONLY);
	errno = 0;
	CHECK(sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)fd, 0, NULL)
			== NULL);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK(sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)fd, 0x1000,
			NULL) == NULL);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK(sq_source_create(SQ_SOURCE_TYPE_VNODE, (uintptr_t)fd,
			SQ_VNODE_WRITE | 0x80, NULL) == NULL);
	CHECK_EQ(errno, EINVAL);
	close(fd);
	unlink(f);
}

int
main(void)
{
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	test_rename_twice();
	test_coalesce_while_suspended();
	test_file_events();
	test_mask_limits_events();
	test_watch_folder();
	test_bad_input();
	rmdir(tmpdir);
	return sqt_finish("test_source_vnode");
}
