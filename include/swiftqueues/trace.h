/*!
 * \defgroup swiftqueues_trace Recording a trace
 * \ingroup swiftqueues
 *
 * Recording a trace of what ran where (a SwiftQueues
 * addition; libdispatch has no counterpart on Linux).
 *
 * A trace is written in Chrome's JSON trace event format, which Perfetto
 * UI (ui.perfetto.dev, or an offline build) and chrome://tracing open: a
 * track per thread (workers, the main thread, the event loop, I/O threads,
 * the pool monitor), a slice for every task named by its queue's label
 * with its function's name, arrows from where work was submitted to where
 * it ran, wake-ups, parks and thread starts, and counters for the pool and
 * each queue's depth. docs/OBSERVABILITY.md tells how to record, open and
 * read one.
 *
 * Recording writes fixed-size records into a ring per thread (2 MiB by
 * default, SQ_TRACE_BUFFER_KB to change it): memory stays bounded and, on a
 * long recording, the newest events are kept (the trace says how many were
 * dropped). The JSON is written when the recording stops: sq_trace_stop, or
 * the process's exit.
 *
 * From the start of a process, without changing it: SQ_TRACE=\<path\> in the
 * environment ("%p" in the path is replaced by the process id, so programs
 * that start copies of themselves write one file each). A fork() child
 * records nothing unless it calls sq_trace_start itself.
 *
 * \par Errors
 * sq_trace_start returns -1 with errno EINVAL for a NULL or empty path and
 * EBUSY while a recording runs; sq_trace_stop EINVAL when nothing is being
 * recorded; errors of opening or writing the file come as they are.
 * @{
 */
#ifndef SWIFTQUEUES_TRACE_H
#define SWIFTQUEUES_TRACE_H

#include <swiftqueues/base.h>

#include <stdbool.h>

SQ_BEGIN_DECLS

/*!
 * Starts recording a trace, to be written to `path` ("%p": the process id)
 * when the recording stops. The file is created (or truncated) now, so an
 * unwritable path fails here. Returns 0, or -1 with errno set: EINVAL for a
 * NULL or empty path, EBUSY when a recording is already running (SQ_TRACE
 * starts one), or the error of opening the file. Any thread.
 * \param path where the trace goes; "%p" stands for the process id.
 * \return 0, or -1 with errno set.
 */
SQ_EXPORT SQ_NOTHROW
int
sq_trace_start(const char *SQ_NULLABLE path);

/*!
 * Stops the recording and writes the trace. Returns 0, or -1 with errno
 * set: EINVAL when nothing is being recorded, or the error of writing the
 * file. A process that exits while recording writes its trace at exit.
 * \return 0, or -1 with errno set.
 */
SQ_EXPORT SQ_NOTHROW
int
sq_trace_stop(void);

/*! Whether a trace is being recorded now.
 *  \return true while a recording runs (sq_trace_start or SQ_TRACE). */
SQ_EXPORT SQ_NOTHROW
bool
sq_trace_recording(void);

SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_TRACE_H */
