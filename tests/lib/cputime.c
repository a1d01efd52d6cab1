/* cputime.c - runs a test program and writes the CPU time it and every process it started used. */
/*
 *   cputime FILE PROGRAM [ARGS...]
 *
 * tests/run-tests runs each program through this, so that its timing table
 * shows CPU seconds beside wall seconds.  A test's daemons (rmemd, etcd,
 * nbdkit) are started in the background and often killed without being
 * waited for; their CPU time would be lost with them.  As a child subreaper
 * (prctl(2), PR_SET_CHILD_SUBREAPER) this process inherits those orphans, so
 * reaping them adds their time to RUSAGE_CHILDREN.  FILE gets one line, the
 * user + system seconds ("12.34"); descendants still running 2 s after
 * PROGRAM ends are not waited for (a test that leaks a daemon is not made
 * to hang here) and are not counted.  Exits with PROGRAM's status, or 128 + the
 * signal that ended it, as a shell would.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	struct rusage ru;
	int status = 0, rc;
	pid_t child, pid;
	FILE *f;

	if (argc < 3) {
		fprintf(stderr, "usage: cputime FILE PROGRAM [ARGS...]\n");
		return 2;
	}
	/* Without it the table loses a column, not the run. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	child = fork();
	if (child < 0) {
		perror("cputime: fork");
		return 2;
	}
	if (child == 0) {
		execvp(argv[2], argv + 2);
		fprintf(stderr, "cputime: %s: %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	for (;;) {
		pid = waitpid(-1, &status, 0);
		if (pid == child)
			break;
		if (pid < 0 && errno != EINTR) {
			perror("cputime: waitpid");
			return 2;
		}
	}
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	/* A test's exit trap kills its daemons without waiting: give those
	 * orphans 2 s to end and be counted.  One still running after that is
	 * a leak, not this program's to wait for. */
	for (int polls = 0; polls < 100;) {
		pid = waitpid(-1, NULL, WNOHANG);
		if (pid > 0)
			continue;
		if (pid < 0 && errno != EINTR)
			break; /* ECHILD: every descendant counted */
		if (pid == 0) {
			struct timespec t = { 0, 20 * 1000 * 1000 };

			nanosleep(&t, NULL);
			polls++;
		}
	}
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
		f = fopen(argv[1], "w");
		if (f) {
			fprintf(f, "%.2f\n", seconds(ru.ru_utime) + seconds(ru.ru_stime));
			fclose(f);
		}
	}
	return rc;
}
