/*
 * SwiftQueues — vnode sources: file-system events through inotify.
 *
 * The process has one inotify descriptor, opened by the first vnode source
 * and watched by the event loop from the first registration on. A source
 * watches its descriptor through /proc/self/fd, so a file renamed or
 * unlinked after the source was made is still the one watched. Several
 * sources on one inode share inotify's single watch: its mask is the union
 * of what they need, narrowed when one goes.
 *
 * The watches are added by sq_source_create, on the caller's thread, so
 * that running out of them (inotify's per-user limit, ENOSPC) is that
 * call's error like running out of descriptors, not a source that never
 * fires. From then on the source is on the list, whose union keeps the
 * watch; it leaves the list when the loop unregisters it (its cancel) or,
 * never activated, when it is destroyed. The list and the watches are
 * under one lock, taken by sq_source_create, the loop thread (events,
 * unregistering) and a source's destruction. Events reach only sources the
 * loop has registered (activated, not cancelled).
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
static struct event *_sq_inotify_ev;  /* the loop thread's */
/* Under _sq_vnode_lock: the sources holding a watch (see the top). */
static struct sq_source_s *_sq_vnode_sources;
static pthread_mutex_t _sq_vnode_lock = PTHREAD_MUTEX_INITIALIZER;

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
		pthread_mutex_lock(&_sq_vnode_lock);
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;
			for (struct sq_source_s *s = _sq_vnode_sources; s;
					s = s->next_in_list) {
				uintptr_t flags = 0;
				/* Made, not yet activated: nothing to tell. */
				if (!s->registered)
					continue;
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
		pthread_mutex_unlock(&_sq_vnode_lock);
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

/* The path of a source's descriptor, by which it is watched. */
static void
_sq_vnode_fd_path(const struct sq_source_s *s, char *path, size_t size)
{
	snprintf(path, size, "/proc/self/fd/%d", (int)s->handle);
}

/* Watches the parent of a watched directory (see SQ_VNODE_PARENT_MASK).
 * Returns 0, or the errno of the watch. Lock held. */
static int
_sq_vnode_watch_parent(struct sq_source_s *s)
{
	char link[64], path[4096];
	_sq_vnode_fd_path(s, link, sizeof(link));
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return 0; /* no path to a parent: nothing to watch */
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	if (slash == NULL)
		return 0;
	if (slash == path)
		slash[1] = '\0'; /* the parent is "/" */
	else
		*slash = '\0';
	s->parent_wd = inotify_add_watch(_sq_inotify_fd, path,
			SQ_VNODE_PARENT_MASK | IN_MASK_ADD);
	return s->parent_wd < 0 ? errno : 0;
}

/* Drops (or narrows) watch `wd` after a source left the list. A watch
 * that a source still watches its inode through is narrowed through that
 * source's descriptor; one that is only a parent's keeps its mask (what
 * it sends beyond the union is dropped by the callback). Lock held. */
static void
_sq_vnode_release_watch(int wd)
{
	if (wd < 0)
		return;
	uint32_t rest = _sq_vnode_union_mask(wd);
	if (rest == 0) {
		inotify_rm_watch(_sq_inotify_fd, wd);
		return;
	}
	for (struct sq_source_s *s = _sq_vnode_sources; s; s = s->next_in_list) {
		/* Only through a descriptor still open on that inode (one of
		 * a source never activated may have been closed and reused). */
		struct stat st;
		if (s->wd == wd && fstat((int)s->handle, &st) == 0 &&
				st.st_dev == s->dev && st.st_ino == s->ino) {
			char path[64];
			_sq_vnode_fd_path(s, path, sizeof(path));
			(void)inotify_add_watch(_sq_inotify_fd, path, rest);
			return;
		}
	}
}

/* Takes s off the list, if on it, and gives back what only it needed.
 * Lock held. */
static void
_sq_vnode_leave(struct sq_source_s *s)
{
	struct sq_source_s **link = &_sq_vnode_sources;
	while (*link && *link != s)
		link = &(*link)->next_in_list;
	if (*link == NULL)
		return; /* never on it, or left already */
	*link = s->next_in_list;
	s->next_in_list = NULL;
	_sq_vnode_release_watch(s->wd);
	_sq_vnode_release_watch(s->parent_wd);
	s->wd = -1;
	s->parent_wd = -1;
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
	pthread_mutex_lock(&_sq_vnode_lock);
	if (_sq_inotify_fd < 0) {
		int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (fd < 0)
			err = errno;
		else
			__atomic_store_n(&_sq_inotify_fd, fd, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&_sq_vnode_lock);
	return err;
}

int
_sq_vnode_watch(struct sq_source_s *s, bool is_dir)
{
	/* The inotify descriptor is open: sq_source_create opened it before
	 * the event loop's start. */
	int err = 0;
	char path[64];
	_sq_vnode_fd_path(s, path, sizeof(path));
	pthread_mutex_lock(&_sq_vnode_lock);
	s->wd = inotify_add_watch(_sq_inotify_fd, path,
			_sq_vnode_inotify_mask(s->mask) | IN_MASK_ADD);
	if (s->wd < 0)
		err = errno; /* ENOSPC: the per-user limit of watches */
	else if ((s->mask & SQ_VNODE_DELETE) && is_dir)
		err = _sq_vnode_watch_parent(s);
	/* On the list even when a watch failed, so that leaving it gives
	 * back the one that did not. */
	s->next_in_list = _sq_vnode_sources;
	_sq_vnode_sources = s;
	if (err != 0)
		_sq_vnode_leave(s);
	pthread_mutex_unlock(&_sq_vnode_lock);
	return err;
}

void
_sq_vnode_register(struct sq_source_s *s)
{
	/* The loop watches the inotify descriptor from its first vnode
	 * source on. */
	if (_sq_inotify_ev == NULL) {
		_sq_inotify_ev = event_new(_sq_loop_base(), _sq_inotify_fd,
				EV_READ | EV_PERSIST, _sq_inotify_cb, NULL);
		if (_sq_inotify_ev)
			event_add(_sq_inotify_ev, NULL);
	}
	/* The figures events are told against (the callback's, on this
	 * thread). */
	struct stat st;
	if (fstat((int)s->handle, &st) == 0) {
		s->last_size = st.st_size;
		s->last_nlink = st.st_nlink;
	}
}

void
_sq_vnode_unwatch(struct sq_source_s *s)
{
	pthread_mutex_lock(&_sq_vnode_lock);
	_sq_vnode_leave(s);
	pthread_mutex_unlock(&_sq_vnode_lock);
}

void
_sq_vnode_atfork_child(void)
{
	if (_sq_inotify_fd >= 0)
		close(_sq_inotify_fd);
	_sq_inotify_fd = -1;
	_sq_inotify_ev = NULL; /* the parent's base's, dropped with it */
	_sq_vnode_sources = NULL;
	pthread_mutex_init(&_sq_vnode_lock, NULL);
}
