/*
 * SwiftQueues' <dispatch/dispatch.h>: libdispatch's C API over SwiftQueues.
 *
 * A program written for libdispatch builds unchanged against SwiftQueues
 * with this folder first on the include path and libswiftqueues instead
 * of libdispatch:
 *
 *     cc prog.c $(pkg-config --cflags --libs swiftqueues-dispatch)
 *
 * (block programs: clang -fblocks and -lBlocksRuntime as well). Every
 * dispatch_ / DISPATCH_ name is a macro or typedef for its sq_ / SQ_
 * counterpart, resolved when the program compiles: the program's calls
 * go to sq_ symbols, so it can share a process with the system's
 * libdispatch (one Foundation loads) without either seeing the other.
 * Objects of the two libraries do not mix.
 *
 * Not provided, as on libdispatch for Linux: the Mach and memory-pressure
 * source types; dispatch_introspection_hook_* (libdispatch's introspection
 * build calls those; sq_snapshot_create and the trace points serve here).
 */
#ifndef SWIFTQUEUES_COMPAT_DISPATCH_H
#define SWIFTQUEUES_COMPAT_DISPATCH_H

#include <sys/types.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* libdispatch's DISPATCH_DEBUG turns the _debug assertions on. */
#if defined(DISPATCH_DEBUG) && !defined(SQ_DEBUG)
#define SQ_DEBUG DISPATCH_DEBUG
#endif

#include <swiftqueues.h>
#include <dispatch/base.h>

/* The libdispatch API level these headers follow. */
#define DISPATCH_API_VERSION 20180109

SQ_BEGIN_DECLS

/* ---- Types ---- */

typedef sq_object_t dispatch_object_t;
typedef sq_function_t dispatch_function_t;
typedef sq_time_t dispatch_time_t;
typedef sq_queue_t dispatch_queue_t;
typedef sq_queue_t dispatch_queue_global_t;
typedef sq_queue_t dispatch_queue_serial_t;
typedef sq_queue_t dispatch_queue_main_t;
typedef sq_queue_t dispatch_queue_concurrent_t;
typedef sq_queue_attr_t dispatch_queue_attr_t;
typedef long dispatch_queue_priority_t;
typedef sq_qos_class_t dispatch_qos_class_t;
typedef sq_autorelease_frequency_t dispatch_autorelease_frequency_t;
typedef sq_group_t dispatch_group_t;
typedef sq_semaphore_t dispatch_semaphore_t;
typedef sq_once_t dispatch_once_t;
typedef sq_source_t dispatch_source_t;
typedef sq_source_type_t dispatch_source_type_t;
typedef unsigned long dispatch_source_proc_flags_t;
typedef unsigned long dispatch_source_vnode_flags_t;
typedef unsigned long dispatch_source_timer_flags_t;
typedef unsigned long dispatch_source_mach_send_flags_t;
typedef unsigned long dispatch_source_memorypressure_flags_t;
typedef sq_data_t dispatch_data_t;
typedef sq_io_t dispatch_io_t;
typedef sq_fd_t dispatch_fd_t;
typedef sq_io_type_t dispatch_io_type_t;
typedef sq_io_close_flags_t dispatch_io_close_flags_t;
typedef sq_io_interval_flags_t dispatch_io_interval_flags_t;
typedef sq_workitem_flags_t dispatch_block_flags_t;
typedef sq_data_format_type_t dispatch_data_format_type_t;
#ifdef __BLOCKS__
typedef sq_block_t dispatch_block_t;
typedef sq_data_applier_t dispatch_data_applier_t;
typedef sq_io_handler_t dispatch_io_handler_t;
#endif

/* ---- Constants ---- */

#define DISPATCH_TIME_NOW SQ_TIME_NOW
#define DISPATCH_TIME_FOREVER SQ_TIME_FOREVER
#define DISPATCH_WALLTIME_NOW SQ_WALLTIME_NOW

#define DISPATCH_QUEUE_SERIAL SQ_QUEUE_SERIAL
#define DISPATCH_QUEUE_CONCURRENT SQ_QUEUE_CONCURRENT
#define DISPATCH_QUEUE_SERIAL_INACTIVE SQ_QUEUE_SERIAL_INACTIVE
#define DISPATCH_QUEUE_CONCURRENT_INACTIVE SQ_QUEUE_CONCURRENT_INACTIVE
#define DISPATCH_QUEUE_SERIAL_WITH_AUTORELEASE_POOL                            \
	sq_queue_attr_make_with_autorelease_frequency(SQ_QUEUE_SERIAL,         \
			SQ_AUTORELEASE_FREQUENCY_WORK_ITEM)
#define DISPATCH_QUEUE_CONCURRENT_WITH_AUTORELEASE_POOL                        \
	sq_queue_attr_make_with_autorelease_frequency(SQ_QUEUE_CONCURRENT,     \
			SQ_AUTORELEASE_FREQUENCY_WORK_ITEM)
#define DISPATCH_AUTORELEASE_FREQUENCY_INHERIT SQ_AUTORELEASE_FREQUENCY_INHERIT
#define DISPATCH_AUTORELEASE_FREQUENCY_WORK_ITEM SQ_AUTORELEASE_FREQUENCY_WORK_ITEM
#define DISPATCH_AUTORELEASE_FREQUENCY_NEVER SQ_AUTORELEASE_FREQUENCY_NEVER
#define DISPATCH_QUEUE_PRIORITY_HIGH SQ_QUEUE_PRIORITY_HIGH
#define DISPATCH_QUEUE_PRIORITY_DEFAULT SQ_QUEUE_PRIORITY_DEFAULT
#define DISPATCH_QUEUE_PRIORITY_LOW SQ_QUEUE_PRIORITY_LOW
#define DISPATCH_QUEUE_PRIORITY_BACKGROUND SQ_QUEUE_PRIORITY_BACKGROUND
#define DISPATCH_TARGET_QUEUE_DEFAULT SQ_TARGET_QUEUE_DEFAULT
#define DISPATCH_CURRENT_QUEUE_LABEL SQ_CURRENT_QUEUE_LABEL
#define DISPATCH_APPLY_AUTO SQ_APPLY_AUTO

/* Apple's qos_class_t names, which GCD programs pass to
 * dispatch_get_global_queue and the attribute calls. */
#ifndef QOS_CLASS_USER_INTERACTIVE
#define QOS_CLASS_USER_INTERACTIVE SQ_QOS_CLASS_USER_INTERACTIVE
#define QOS_CLASS_USER_INITIATED SQ_QOS_CLASS_USER_INITIATED
#define QOS_CLASS_DEFAULT SQ_QOS_CLASS_DEFAULT
#define QOS_CLASS_UTILITY SQ_QOS_CLASS_UTILITY
#define QOS_CLASS_BACKGROUND SQ_QOS_CLASS_BACKGROUND
#define QOS_CLASS_UNSPECIFIED SQ_QOS_CLASS_UNSPECIFIED
#endif
#ifndef QOS_MIN_RELATIVE_PRIORITY
#define QOS_MIN_RELATIVE_PRIORITY SQ_QOS_MIN_RELATIVE_PRIORITY
#endif

#define DISPATCH_BLOCK_BARRIER SQ_BLOCK_BARRIER
#define DISPATCH_BLOCK_DETACHED SQ_BLOCK_DETACHED
#define DISPATCH_BLOCK_ASSIGN_CURRENT SQ_BLOCK_ASSIGN_CURRENT
#define DISPATCH_BLOCK_NO_QOS_CLASS SQ_BLOCK_NO_QOS_CLASS
#define DISPATCH_BLOCK_INHERIT_QOS_CLASS SQ_BLOCK_INHERIT_QOS_CLASS
#define DISPATCH_BLOCK_ENFORCE_QOS_CLASS SQ_BLOCK_ENFORCE_QOS_CLASS

#define DISPATCH_SOURCE_TYPE_DATA_ADD SQ_SOURCE_TYPE_DATA_ADD
#define DISPATCH_SOURCE_TYPE_DATA_OR SQ_SOURCE_TYPE_DATA_OR
#define DISPATCH_SOURCE_TYPE_DATA_REPLACE SQ_SOURCE_TYPE_DATA_REPLACE
#define DISPATCH_SOURCE_TYPE_READ SQ_SOURCE_TYPE_READ
#define DISPATCH_SOURCE_TYPE_WRITE SQ_SOURCE_TYPE_WRITE
#define DISPATCH_SOURCE_TYPE_SIGNAL SQ_SOURCE_TYPE_SIGNAL
#define DISPATCH_SOURCE_TYPE_TIMER SQ_SOURCE_TYPE_TIMER
#define DISPATCH_SOURCE_TYPE_PROC SQ_SOURCE_TYPE_PROC
#define DISPATCH_SOURCE_TYPE_VNODE SQ_SOURCE_TYPE_VNODE
#define DISPATCH_PROC_EXIT SQ_PROC_EXIT
#define DISPATCH_PROC_FORK SQ_PROC_FORK
#define DISPATCH_PROC_EXEC SQ_PROC_EXEC
#define DISPATCH_PROC_SIGNAL SQ_PROC_SIGNAL
#define DISPATCH_VNODE_DELETE SQ_VNODE_DELETE
#define DISPATCH_VNODE_WRITE SQ_VNODE_WRITE
#define DISPATCH_VNODE_EXTEND SQ_VNODE_EXTEND
#define DISPATCH_VNODE_ATTRIB SQ_VNODE_ATTRIB
#define DISPATCH_VNODE_LINK SQ_VNODE_LINK
#define DISPATCH_VNODE_RENAME SQ_VNODE_RENAME
#define DISPATCH_VNODE_REVOKE SQ_VNODE_REVOKE
#define DISPATCH_TIMER_STRICT SQ_TIMER_STRICT

#define DISPATCH_DATA_DESTRUCTOR_DEFAULT SQ_DATA_DESTRUCTOR_DEFAULT
#define DISPATCH_DATA_DESTRUCTOR_FREE SQ_DATA_DESTRUCTOR_FREE
#define DISPATCH_DATA_DESTRUCTOR_MUNMAP SQ_DATA_DESTRUCTOR_MUNMAP
#define dispatch_data_empty sq_data_empty
#define DISPATCH_DATA_FORMAT_TYPE_NONE SQ_DATA_FORMAT_TYPE_NONE
#define DISPATCH_DATA_FORMAT_TYPE_BASE32 SQ_DATA_FORMAT_TYPE_BASE32
#define DISPATCH_DATA_FORMAT_TYPE_BASE32HEX SQ_DATA_FORMAT_TYPE_BASE32HEX
#define DISPATCH_DATA_FORMAT_TYPE_BASE64 SQ_DATA_FORMAT_TYPE_BASE64
#define DISPATCH_DATA_FORMAT_TYPE_UTF8 SQ_DATA_FORMAT_TYPE_UTF8
#define DISPATCH_DATA_FORMAT_TYPE_UTF16LE SQ_DATA_FORMAT_TYPE_UTF16LE
#define DISPATCH_DATA_FORMAT_TYPE_UTF16BE SQ_DATA_FORMAT_TYPE_UTF16BE
#define DISPATCH_DATA_FORMAT_TYPE_UTF_ANY SQ_DATA_FORMAT_TYPE_UTF_ANY

#define DISPATCH_IO_STREAM SQ_IO_STREAM
#define DISPATCH_IO_RANDOM SQ_IO_RANDOM
#define DISPATCH_IO_STOP SQ_IO_STOP
#define DISPATCH_IO_STRICT_INTERVAL SQ_IO_STRICT_INTERVAL

/* ---- Objects ---- */

#define dispatch_retain sq_retain
#define dispatch_release sq_release
#define dispatch_get_context sq_get_context
#define dispatch_set_context sq_set_context
#define dispatch_set_finalizer_f sq_set_finalizer_f
#define dispatch_suspend sq_suspend
#define dispatch_resume sq_resume
#define dispatch_activate sq_activate
#define dispatch_set_target_queue sq_set_target_queue
#define dispatch_debug sq_debug
#define dispatch_debugv sq_debugv

/* The C11 generic calls (include/swiftqueues/generic.h). */
#define dispatch_wait sq_wait
#define dispatch_notify sq_notify
#define dispatch_cancel sq_cancel
#define dispatch_testcancel sq_testcancel

/* ---- Time ---- */

#define dispatch_time sq_time
#define dispatch_walltime sq_walltime

/* ---- Queues ---- */

#define dispatch_get_global_queue sq_get_global_queue
#define dispatch_get_main_queue sq_get_main_queue
#define dispatch_get_current_queue sq_get_current_queue
#define dispatch_queue_create sq_queue_create
#define dispatch_queue_create_with_target sq_queue_create_with_target
#define dispatch_queue_get_label sq_queue_get_label
#define dispatch_queue_attr_make_initially_inactive                            \
	sq_queue_attr_make_initially_inactive
#define dispatch_queue_attr_make_with_qos_class                                \
	sq_queue_attr_make_with_qos_class
#define dispatch_queue_attr_make_with_autorelease_frequency                    \
	sq_queue_attr_make_with_autorelease_frequency
#define dispatch_queue_get_qos_class sq_queue_get_qos_class
#define dispatch_queue_set_specific sq_queue_set_specific
#define dispatch_queue_get_specific sq_queue_get_specific
#define dispatch_get_specific sq_get_specific
#define dispatch_assert_queue sq_assert_queue
#define dispatch_assert_queue_barrier sq_assert_queue_barrier
#define dispatch_assert_queue_not sq_assert_queue_not
#define dispatch_assert_queue_debug sq_assert_queue_debug
#define dispatch_assert_queue_barrier_debug sq_assert_queue_barrier_debug
#define dispatch_assert_queue_not_debug sq_assert_queue_not_debug
#define dispatch_async sq_async
#define dispatch_async_f sq_async_f
#define dispatch_sync sq_sync
#define dispatch_sync_f sq_sync_f
#define dispatch_barrier_async sq_barrier_async
#define dispatch_barrier_async_f sq_barrier_async_f
#define dispatch_barrier_sync sq_barrier_sync
#define dispatch_barrier_sync_f sq_barrier_sync_f
#define dispatch_apply sq_apply
#define dispatch_apply_f sq_apply_f
#define dispatch_after sq_after
#define dispatch_after_f sq_after_f
#define dispatch_main sq_main

/* ---- Blocks as objects ---- */

#define dispatch_block_create sq_block_create
#define dispatch_block_create_with_qos_class sq_block_create_with_qos_class
#define dispatch_block_perform sq_block_perform
#define dispatch_block_wait sq_block_wait
#define dispatch_block_notify sq_block_notify
#define dispatch_block_cancel sq_block_cancel
#define dispatch_block_testcancel sq_block_testcancel

/* ---- Groups, semaphores, once ---- */

#define dispatch_group_create sq_group_create
#define dispatch_group_enter sq_group_enter
#define dispatch_group_leave sq_group_leave
#define dispatch_group_wait sq_group_wait
#define dispatch_group_async sq_group_async
#define dispatch_group_async_f sq_group_async_f
#define dispatch_group_notify sq_group_notify
#define dispatch_group_notify_f sq_group_notify_f
#define dispatch_semaphore_create sq_semaphore_create
#define dispatch_semaphore_wait sq_semaphore_wait
#define dispatch_semaphore_signal sq_semaphore_signal
#define dispatch_once sq_once
#define dispatch_once_f sq_once_f

/* ---- Sources ---- */

#define dispatch_source_create sq_source_create
#define dispatch_source_set_event_handler sq_source_set_event_handler
#define dispatch_source_set_event_handler_f sq_source_set_event_handler_f
#define dispatch_source_set_cancel_handler sq_source_set_cancel_handler
#define dispatch_source_set_cancel_handler_f sq_source_set_cancel_handler_f
#define dispatch_source_set_registration_handler                               \
	sq_source_set_registration_handler
#define dispatch_source_set_registration_handler_f                             \
	sq_source_set_registration_handler_f
#define dispatch_source_cancel sq_source_cancel
#define dispatch_source_testcancel sq_source_testcancel
#define dispatch_source_get_handle sq_source_get_handle
#define dispatch_source_get_mask sq_source_get_mask
#define dispatch_source_get_data sq_source_get_data
#define dispatch_source_merge_data sq_source_merge_data
#define dispatch_source_set_timer sq_source_set_timer

/* ---- Data and I/O ---- */

#define dispatch_data_create sq_data_create
#define dispatch_data_get_size sq_data_get_size
#define dispatch_data_create_map sq_data_create_map
#define dispatch_data_create_concat sq_data_create_concat
#define dispatch_data_create_subrange sq_data_create_subrange
#define dispatch_data_apply sq_data_apply
#define dispatch_data_copy_region sq_data_copy_region
#define dispatch_data_create_with_transform sq_data_create_with_transform
#define dispatch_read sq_read
#define dispatch_write sq_write
#define dispatch_io_create sq_io_create
#define dispatch_io_create_with_path sq_io_create_with_path
#define dispatch_io_create_with_io sq_io_create_with_io
#define dispatch_io_read sq_io_read
#define dispatch_io_write sq_io_write
#define dispatch_io_close sq_io_close
#define dispatch_io_barrier sq_io_barrier
#define dispatch_io_get_descriptor sq_io_get_descriptor
#define dispatch_io_set_high_water sq_io_set_high_water
#define dispatch_io_set_low_water sq_io_set_low_water
#define dispatch_io_set_interval sq_io_set_interval

SQ_END_DECLS

#endif /* SWIFTQUEUES_COMPAT_DISPATCH_H */
