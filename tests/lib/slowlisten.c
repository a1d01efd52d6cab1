/*
 * slowlisten.c - an LD_PRELOAD shim for tests/func/test_hostile_restart.py:
 * every listen() first sleeps RMEM_TEST_LISTEN_DELAY_MS milliseconds.  It
 * stands for a slow bring-up between the restore and the moment clients can
 * reach rmemd (the RDMA registration of a large pool, in the field), which
 * the host has no other cheap way to produce.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

int listen(int fd, int backlog)
{
	static int (*real)(int, int);
	const char *ms = getenv("RMEM_TEST_LISTEN_DELAY_MS");

	if (!real)
		real = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
	if (ms) {
		long v = strtol(ms, NULL, 10);
		struct timespec ts = { .tv_sec = v / 1000, .tv_nsec = (v % 1000) * 1000000L };

		while (v > 0 && nanosleep(&ts, &ts) < 0)
			;
	}
	return real ? real(fd, backlog) : -1;
}
