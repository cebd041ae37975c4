/*
 * SwiftQueues — vnode sources: file-system events through inotify.
 *
 * The process has one inotify descriptor, opened by the first vnode source
 * (sq_source_create, so that running out of descriptors is its error) and
 * watched by the event loop from the first registration on. A source
 * watches its descriptor through /proc/self/fd, so a file renamed or
 * unlinked after the source was made is still the one watched. Several
 * sources on one inode share inotify's single watch: its mask is the union
 * of what they need, narrowed when one goes. Everything but the open runs
 * on the loop thread.
 */
#include "event_internal.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

static int _sq_inotify_fd = -1;
static struct event *_sq_inotify_ev;
static struct sq_source_s *_sq_vnode_sources;
static pthread_mutex_t _sq_inotify_open_lock = PTHREAD_MUTEX_INITIALIZER;

/* The inotify events a vnode mask needs. */
static uint32_t
_sq_vnode_inotify_mask(uintptr_t mask)
{
	uint32_t m = IN_DELETE_SELF | IN_IGNORED;
	if (mask & (SQ_VNODE_WRITE | SQ_VNODE_EXTEND))
		m |= IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
				IN_MOVED_TO | IN_CLOSE_WRITE;
	if (mask & (SQ_VNODE_ATTRIB | SQ_VNODE_LINK | SQ_VNODE_DELETE))
		m |= IN_ATTRIB;
	if (mask & SQ_VNODE_RENAME)
		m |= IN_MOVE_SELF;
	if (mask & SQ_VNODE_REVOKE)
		m |= IN_UNMOUNT;
	return m;
}

/* Translates one inotify event for one source into SQ_VNODE_* flags. */
static uintptr_t
_sq_vnode_flags(struct sq_source_s *s, uint32_t in)
{
	uintptr_t flags = 0;
	struct stat st;
	bool have_stat = fstat((int)s->handle, &st) == 0;
	bool is_dir = have_stat && S_ISDIR(st.st_mode);

	if (in & IN_MODIFY)
		flags |= SQ_VNODE_WRITE;
	if (is_dir && (in & (IN_CREATE | IN_DELETE | IN_MOVED_FROM |
			IN_MOVED_TO)))
		flags |= SQ_VNODE_WRITE;
	if ((in & (IN_MODIFY | IN_CLOSE_WRITE)) && have_stat && !is_dir) {
		if (st.st_size > s->last_size)
			flags |= SQ_VNODE_EXTEND;
		s->last_size = st.st_size;
	}
	if (in & IN_ATTRIB) {
		flags |= SQ_VNODE_ATTRIB;
		if (have_stat && st.st_nlink != s->last_nlink) {
			flags |= SQ_VNODE_LINK;
			s->last_nlink = st.st_nlink;
		}
		/* The source holds the file open, so IN_DELETE_SELF waits
		 * for the last close: an unlink shows as a link count of 0. */
		if (have_stat && st.st_nlink == 0)
			flags |= SQ_VNODE_DELETE;
	}
	if (in & IN_DELETE_SELF)
		flags |= SQ_VNODE_DELETE;
	if (in & IN_MOVE_SELF)
		flags |= SQ_VNODE_RENAME;
	if (in & IN_UNMOUNT)
		flags |= SQ_VNODE_REVOKE;
	return flags & s->mask;
}

/* What a watched directory needs from its parent's watch: removing a
 * directory that someone holds open sends nothing to the directory itself
 * (IN_DELETE_SELF waits for the last close), only IN_DELETE to its parent. */
#define SQ_VNODE_PARENT_MASK (IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR)

static void
_sq_inotify_cb(evutil_socket_t fd, short what, void *arg)
{
	_Alignas(struct inotify_event) char buf[4096];
	for (;;) {
		ssize_t n = read(_sq_inotify_fd, buf, sizeof(buf));
		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;
			for (struct sq_source_s *s = _sq_vnode_sources; s;
					s = s->next_in_list) {
				uintptr_t flags = 0;
				if (s->wd == e->wd)
					flags = _sq_vnode_flags(s, e->mask);
				if (s->parent_wd == e->wd &&
						(e->mask & IN_DELETE)) {
					/* Something in the parent went: is it
					 * us? A removed directory has no links. */
					struct stat st;
					if (fstat((int)s->handle, &st) == 0 &&
							st.st_nlink == 0)
						flags |= SQ_VNODE_DELETE &
								s->mask;
				}
				if (flags)
					_sq_source_merge(s, flags);
			}
			p += sizeof(*e) + e->len;
		}
	}
}

/* The union of what every source needs from watch `wd` (several sources
 * on one inode share inotify's single watch). */
static uint32_t
_sq_vnode_union_mask(int wd)
{
	uint32_t m = 0;
	for (struct sq_source_s *s = _sq_vnode_sources; s; s = s->next_in_list) {
		if (s->wd == wd)
			m |= _sq_vnode_inotify_mask(s->mask);
		if (s->parent_wd == wd)
			m |= SQ_VNODE_PARENT_MASK;
	}
	return m;
}

/* Watches the parent of a watched directory (see SQ_VNODE_PARENT_MASK). */
static void
_sq_vnode_watch_parent(struct sq_source_s *s)
{
	char link[64], path[4096];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", (int)s->handle);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return;
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	if (slash == NULL)
		return;
	if (slash == path)
		slash[1] = '\0'; /* the parent is "/" */
	else
		*slash = '\0';
	s->parent_wd = inotify_add_watch(_sq_inotify_fd, path,
			SQ_VNODE_PARENT_MASK | IN_MASK_ADD);
}

/* Drops (or narrows) watch `wd` after a source stopped using it. */
static void
_sq_vnode_release_watch(int wd, const char *path)
{
	uint32_t rest = _sq_vnode_union_mask(wd);
	if (rest == 0)
		inotify_rm_watch(_sq_inotify_fd, wd);
	else if (path != NULL)
		(void)inotify_add_watch(_sq_inotify_fd, path, rest);
}

/* Opens the process's inotify descriptor unless it is open. Returns 0 or
 * the errno (EMFILE, ENFILE, and inotify's own per-user limit). */
int
_sq_inotify_open(void)
{
	/* Acquire: pairs with the release below. */
	if (__atomic_load_n(&_sq_inotify_fd, __ATOMIC_ACQUIRE) >= 0)
		return 0;
	int err = 0;
	pthread_mutex_lock(&_sq_inotify_open_lock);
	if (_sq_inotify_fd < 0) {
		int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (fd < 0)
			err = errno;
		else
			__atomic_store_n(&_sq_inotify_fd, fd, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&_sq_inotify_open_lock);
	return err;
}

void
_sq_vnode_register(struct sq_source_s *s)
{
	/* The descriptor was opened when the source was made; the loop
	 * watches it from its first vnode source on. */
	if (_sq_inotify_ev == NULL) {
		_sq_inotify_ev = event_new(_sq_loop_base(), _sq_inotify_fd,
				EV_READ | EV_PERSIST, _sq_inotify_cb, NULL);
		if (_sq_inotify_ev)
			event_add(_sq_inotify_ev, NULL);
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", (int)s->handle);
	s->wd = inotify_add_watch(_sq_inotify_fd, path,
			_sq_vnode_inotify_mask(s->mask) | IN_MASK_ADD);
	struct stat st;
	if (fstat((int)s->handle, &st) != 0)
		st.st_mode = 0;
	s->last_size = st.st_size;
	s->last_nlink = st.st_nlink;
	s->next_in_list = _sq_vnode_sources;
	_sq_vnode_sources = s;
	if ((s->mask & SQ_VNODE_DELETE) && S_ISDIR(st.st_mode))
		_sq_vnode_watch_parent(s);
}

void
_sq_vnode_unregister(struct sq_source_s *s)
{
	struct sq_source_s **link = &_sq_vnode_sources;
	while (*link && *link != s)
		link = &(*link)->next_in_list;
	if (*link)
		*link = s->next_in_list;
	if (s->wd >= 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d",
				(int)s->handle);
		_sq_vnode_release_watch(s->wd, path);
	}
	if (s->parent_wd >= 0)
		_sq_vnode_release_watch(s->parent_wd, NULL);
	s->wd = -1;
	s->parent_wd = -1;
}

void
_sq_vnode_atfork_child(void)
{
	if (_sq_inotify_fd >= 0)
		close(_sq_inotify_fd);
	_sq_inotify_fd = -1;
	_sq_inotify_ev = NULL; /* the parent's base's, dropped with it */
	_sq_vnode_sources = NULL;
	pthread_mutex_init(&_sq_inotify_open_lock, NULL);
}
