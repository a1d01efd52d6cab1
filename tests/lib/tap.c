/*
 * tap.c - see tap.h.  stdout is flushed after every line: the tests fork
 * children and run daemons, and an unflushed line would be printed twice.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tap.h"

int tap_run, tap_failed;

static void end_line(void)
{
	putchar('\n');
	fflush(stdout);
}

int ok(int cond, const char *fmt, ...)
{
	va_list ap;

	tap_run++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	end_line();
	return cond;
}

int todo(int cond, const char *why, const char *fmt, ...)
{
	va_list ap;

	/* Never counted as failed: the runner reads the TODO. */
	printf("%sok %d - ", cond ? "" : "not ", ++tap_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" # TODO %s", why);
	end_line();
	return cond;
}

void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	end_line();
}

void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++)
		printf("ok %d # SKIP %s\n", ++tap_run, why);
	fflush(stdout);
}

void tap_skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	fflush(stdout);
	exit(77);
}

int tap_done(void)
{
	printf("1..%d\n", tap_run);
	if (tap_failed)
		diag("%d of %d assertions failed", tap_failed, tap_run);
	fflush(stdout);
	return tap_failed ? 1 : 0;
}
