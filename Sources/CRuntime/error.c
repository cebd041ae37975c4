/*
 * SwiftQueues — reporting programmer errors.
 *
 * Misuse that would corrupt state stops the process with one line on stderr
 * naming the call (docs/ARCHITECTURE.md, "Error policy"). The line is written with a
 * single write(2) so concurrent reports never interleave mid-line.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void
_sq_client_crash(const char *call, const char *format, ...)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "SwiftQueues: %s: ", call);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;

	va_list ap;
	va_start(ap, format);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, format, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';

	ssize_t unused = write(STDERR_FILENO, line, len);
	(void)unused;
	abort();
}
