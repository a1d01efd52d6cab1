/*
 * tap.h - a tiny TAP producer for rmem's C tests.  tests/run-tests counts the
 * "ok" / "not ok" lines of every test program and prints the summary line.
 *
 *   ok(cond, "what was checked %d", x);   one assertion, one TAP line
 *   skip(n, "why");                        n assertions that could not run
 *   return tap_done();                     prints the plan; exit 1 on failure
 *
 * A program that has nothing to run (no RDMA device...) calls
 * tap_skip_all("why") and exits 77; the runner counts it as skipped, never as
 * passed.
 */
#ifndef RMEM_TESTS_TAP_H
#define RMEM_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_run, tap_failed;

__attribute__((format(printf, 2, 3), unused))
static int ok(int cond, const char *fmt, ...)
{
	va_list ap;

	tap_run++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}

__attribute__((format(printf, 1, 2), unused))
static void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

__attribute__((unused))
static void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++)
		printf("ok %d # SKIP %s\n", ++tap_run, why);
	fflush(stdout);
}

__attribute__((noreturn, unused))
static void tap_skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	fflush(stdout);
	exit(77);
}

__attribute__((unused))
static int tap_done(void)
{
	printf("1..%d\n", tap_run);
	if (tap_failed)
		diag("%d of %d assertions failed", tap_failed, tap_run);
	fflush(stdout);
	return tap_failed ? 1 : 0;
}

#endif /* RMEM_TESTS_TAP_H */
