/*
 * log.c - see log.h.  The level is process-wide state of the daemon (never of
 * the library), set once from the config before the loop starts.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

static int log_level = LOG_INFO;

void log_set_level(int level)
{
	log_level = level;
}

int log_get_level(void)
{
	return log_level;
}

/*
 * errno is saved on entry and restored on every way out: a caller may log a
 * failure and then return -errno, and vsnprintf or fprintf may set errno
 * (munge's log.c does the same).
 */
void log_msg(int prio, const char *func, const char *fmt, ...)
{
	int saved_errno = errno;
	char line[1024];
	va_list ap;

	if (prio > log_level) {
		errno = saved_errno;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	/* One fprintf per line so concurrent writers (none today) cannot interleave
	 * inside a line. */
	if (prio >= LOG_INFO)
		fprintf(stderr, "<%d>%s\n", prio, line);
	else
		fprintf(stderr, "<%d>%s: %s\n", prio, func, line);
	errno = saved_errno;
}
