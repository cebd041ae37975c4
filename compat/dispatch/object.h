/*
 * SwiftQueues' <dispatch/object.h>: libdispatch's programs include it by this
 * name; the whole compatibility API comes with it (see dispatch.h).
 */
#include <dispatch/dispatch.h>
