/*
 * tap.h - the TAP producer of rmem's C tests.  tests/run-tests counts the
 * "ok" / "not ok" lines of every test program and prints the summary line.
 *
 *   ok(cond, "what was checked %d", x);   one assertion, one TAP line
 *   todo(cond, "why", "what %d", x);       a check known to fail here: TODO
 *   skip(n, "why");                        n assertions that could not run
 *   diag("text %d", x);                    a "# " comment line
 *   return tap_done();                     prints the plan; exit 1 on failure
 *
 * A program that has nothing to run (no RDMA device...) calls
 * tap_skip_all("why") and exits 77; the runner counts it as skipped, never as
 * passed.  Every line is flushed at once, so that a child forked later does
 * not print it again.  Not thread-safe: assertions come from one thread.
 */
#ifndef RMEM_TESTS_TAP_H
#define RMEM_TESTS_TAP_H

/* Included as before, when tap.h was header-only: tests count on them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Assertions so far, and how many of them failed. */
extern int tap_run, tap_failed;

/* Prints "ok N - ..." or "not ok N - ..."; returns cond. */
__attribute__((format(printf, 2, 3)))
int ok(int cond, const char *fmt, ...);

/*
 * A check known to fail on this platform, documented: printed as a TAP TODO
 * (counted as skipped by tests/run-tests, never as a failure); returns cond.
 */
__attribute__((format(printf, 3, 4)))
int todo(int cond, const char *why, const char *fmt, ...);

/* A comment line: "# " and the text. */
__attribute__((format(printf, 1, 2)))
void diag(const char *fmt, ...);

/* n assertions that could not run, each "ok N # SKIP why". */
void skip(int n, const char *why);

/* "1..0 # SKIP why", then exit(77). */
__attribute__((noreturn))
void tap_skip_all(const char *why);

/* Prints the plan; 1 when an assertion failed, else 0 (main's return). */
int tap_done(void);

#endif /* RMEM_TESTS_TAP_H */
