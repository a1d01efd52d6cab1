/*
 * slowscrub.c - an LD_PRELOAD shim for tests/func/test_restart.py: every
 * MADV_POPULATE_WRITE that a thread other than rmemd's main thread asks for
 * (the scrub's worker, daemon/scrub.c, before each chunk it zeroes) first
 * sleeps RMEM_TEST_SCRUB_DELAY_MS milliseconds.  The worker then lags
 * behind the clients, so the test meets free bytes the worker has not
 * zeroed yet: the allocation must zero them itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define POPULATE_WRITE 23

long syscall(long number, ...)
{
	static long (*real)(long, ...);
	const char *ms = getenv("RMEM_TEST_SCRUB_DELAY_MS");
	long a[6];
	va_list ap;

	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (ms && number == SYS_madvise && a[2] == POPULATE_WRITE && gettid() != getpid()) {
		long v = strtol(ms, NULL, 10);
		struct timespec ts = { .tv_sec = v / 1000, .tv_nsec = (v % 1000) * 1000000L };

		while (v > 0 && nanosleep(&ts, &ts) < 0)
			;
	}
	return real ? real(number, a[0], a[1], a[2], a[3], a[4], a[5]) : -1;
}
