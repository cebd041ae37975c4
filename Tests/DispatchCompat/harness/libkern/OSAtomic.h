/* Apple's <libkern/OSAtomic.h> as libdispatch's test programs use it: the
 * counters in generic_unix_port.h. */
#ifndef SQ_COMPAT_LIBKERN_OSATOMIC_H
#define SQ_COMPAT_LIBKERN_OSATOMIC_H
#include <generic_unix_port.h>
#endif
