/* Apple's target macros, as libdispatch's test programs read them on
 * Linux: no Apple target. */
#ifndef SQ_COMPAT_TARGETCONDITIONALS_H
#define SQ_COMPAT_TARGETCONDITIONALS_H
#define TARGET_OS_MAC 0
#define TARGET_OS_OSX 0
#define TARGET_OS_IPHONE 0
#define TARGET_OS_EMBEDDED 0
#define TARGET_OS_SIMULATOR 0
#define TARGET_OS_WIN32 0
#endif
