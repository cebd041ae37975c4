/* glibc no longer ships <sys/sysctl.h>; libdispatch's test programs that
 * include it read the CPU count through sysconf on Linux. Empty. */
#ifndef SQ_COMPAT_SYS_SYSCTL_H
#define SQ_COMPAT_SYS_SYSCTL_H
#endif
