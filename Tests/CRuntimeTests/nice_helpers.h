/*
 * A process without the right to lower a thread's nice value, as most
 * programs run: CAP_SYS_NICE dropped from the calling thread (threads it
 * starts later inherit that) and RLIMIT_NICE at 0. Call before the pool
 * starts. Returns whether lowering is now refused (false: this machine
 * cannot show an unprivileged process).
 */
#ifndef NICE_HELPERS_H
#define NICE_HELPERS_H

#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

static inline bool
sqt_drop_nice_privilege(void)
{
	struct rlimit none = { 0, 0 };
	(void)setrlimit(RLIMIT_NICE, &none);
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0,
	};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) == 0) {
		unsigned bit = 1u << CAP_SYS_NICE; /* in the first word */
		data[0].effective &= ~bit;
		data[0].permitted &= ~bit;
		data[0].inheritable &= ~bit;
		(void)syscall(SYS_capset, &hdr, data);
	}
	id_t tid = (id_t)syscall(SYS_gettid);
	errno = 0;
	int base = getpriority(PRIO_PROCESS, tid);
	if (base <= -20)
		return false;
	if (setpriority(PRIO_PROCESS, tid, base - 1) == 0) {
		(void)setpriority(PRIO_PROCESS, tid, base);
		return false;
	}
	return true;
}

/* The calling thread's nice value. */
static inline int
sqt_thread_nice(void)
{
	return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
}

/* Whether the calling thread is at the idle I/O priority. */
static inline bool
sqt_thread_io_idle(void)
{
	long prio = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0);
	return prio >= 0 && (prio >> 13) == 3 /* IOPRIO_CLASS_IDLE */;
}

/* The calling thread's time slice (sched_attr's sched_runtime; 0 where
 * the kernel does not report one). */
static inline uint64_t
sqt_thread_slice_ns(void)
{
	struct {
		uint32_t size, policy;
		uint64_t flags;
		int32_t nice;
		uint32_t priority;
		uint64_t runtime, deadline, period;
		uint32_t util_min, util_max;
	} attr = { 0 };
	if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) != 0)
		return 0;
	return attr.runtime;
}

/* Whether the running kernel is at least major.minor. */
static inline bool
sqt_kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;
	if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

#endif
