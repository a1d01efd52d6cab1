/*
 * hostile_cluster.c - a librmem cluster client driven line by line, for
 * tests/func/test_hostile_cluster.sh, which needs a client it can stop
 * (SIGSTOP) inside a call, and one that lives across server restarts;
 * and for tests/func/test_hostile_writer.sh, writers of a redundant region
 * stopped past their claim.  Not a test itself.
 *
 *   hostile_cluster URL
 *
 * reads commands on stdin, one a line, and answers each with one line on
 * stdout (RC is 0 or a negative errno, as the call returned):
 *   create NAME SIZE    rmem_create; the handle becomes the current one   "create RC"
 *   open NAME           rmem_open read+write; becomes the current one     "open RC"
 *   openr NAME          rmem_open read only; becomes the current one      "openr RC"
 *   unlink NAME         rmem_unlink                                       "unlink RC"
 *   write CH            4 KiB of byte CH at 0 of the current handle       "write RC"
 *   pwrite CH LEN       LEN bytes (at most 64 KiB) of byte CH at 0, posted, then
 *                       polled for (up to 20 s)                           "pwrite RC"
 *   read                4 KiB at 0 of the current handle: "read RC CH" (CH the first
 *                       byte read, '-' when the read failed)
 *   loop MS             reads of the current handle for MS ms, 2 ms apart:
 *                       "loop N hostdown H other O" (O: other failures)
 *   stats ENDPOINT      rmem_stats of one server, on a client of its own:
 *                       "stats RC regions R"
 *   self                this process's open descriptors and threads:
 *                       "self fds F threads T"
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rmem.h>

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void loop(rmem_client *c, const struct rmem_region *r, int64_t ms)
{
	static unsigned char buf[4096];
	uint64_t n = 0, down = 0, other = 0;
	int64_t end = now_ms() + ms;

	while (now_ms() < end) {
		int rc = rmem_read(c, r, 0, buf, sizeof buf);

		n++;
		if (rc == -EHOSTDOWN)
			down++;
		else if (rc < 0)
			other++;
		usleep(2000);
	}
	printf("loop %" PRIu64 " hostdown %" PRIu64 " other %" PRIu64 "\n", n, down, other);
}

static void stats(const char *endpoint)
{
	struct rmem_stats st = { 0 };
	rmem_client *s;
	int rc = rmem_connect(endpoint, NULL, &s);

	if (rc == 0) {
		rc = rmem_stats(s, &st);
		rmem_close(s);
	}
	printf("stats %d regions %" PRIu64 "\n", rc, st.regions);
}

/* A posted write's status (its completion's), or the post's error. */
static int post_write(rmem_client *c, const struct rmem_region *r, char ch,
		      unsigned long long len)
{
	static unsigned char big[65536];
	struct rmem_completion done;
	int64_t end = now_ms() + 20000;
	int rc;

	if (len > sizeof big)
		return -EINVAL;
	memset(big, ch, (size_t)len);
	rc = rmem_post_write(c, r, 0, big, (size_t)len, 7);
	while (rc == 0 && now_ms() < end) {
		int n = rmem_poll(c, &done, 1, 100);

		if (n < 0)
			return n;
		if (n == 1)
			return done.status;
	}
	return rc ? rc : -ETIMEDOUT;
}

int main(int argc, char **argv)
{
	static unsigned char buf[4096];
	struct rmem_region r;
	char line[512], cmd[32], arg[256];
	unsigned long long size;
	rmem_client *c;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: hostile_cluster URL\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = rmem_connect(argv[1], NULL, &c);
	if (rc < 0) {
		fprintf(stderr, "connect %s: %s\n", argv[1], rmem_strerror(rc));
		return 1;
	}
	memset(&r, 0, sizeof r);
	while (fgets(line, sizeof line, stdin)) {
		int n = sscanf(line, "%31s %255s %llu", cmd, arg, &size);

		if (n >= 3 && !strcmp(cmd, "create"))
			printf("create %d\n", rmem_create(c, arg, size, 0, &r));
		else if (n >= 2 && !strcmp(cmd, "open"))
			printf("open %d\n", rmem_open(c, arg, RMEM_READ | RMEM_WRITE, &r));
		else if (n >= 2 && !strcmp(cmd, "openr"))
			printf("openr %d\n", rmem_open(c, arg, RMEM_READ, &r));
		else if (n >= 2 && !strcmp(cmd, "unlink"))
			printf("unlink %d\n", rmem_unlink(c, arg));
		else if (n >= 2 && !strcmp(cmd, "write")) {
			memset(buf, arg[0], sizeof buf);
			printf("write %d\n", rmem_write(c, &r, 0, buf, sizeof buf));
		} else if (n >= 3 && !strcmp(cmd, "pwrite")) {
			printf("pwrite %d\n", post_write(c, &r, arg[0], size));
		} else if (n >= 1 && !strcmp(cmd, "read")) {
			rc = rmem_read(c, &r, 0, buf, sizeof buf);
			printf("read %d %c\n", rc, rc == 0 && buf[0] > 0x20 && buf[0] < 0x7f ?
							 buf[0] : '-');
		}
		else if (n >= 2 && !strcmp(cmd, "loop"))
			loop(c, &r, strtoll(arg, NULL, 10));
		else if (n >= 2 && !strcmp(cmd, "stats"))
			stats(arg);
		else if (n >= 1 && !strcmp(cmd, "self"))
			printf("self fds %ld threads %ld\n", count_dir("/proc/self/fd"),
			       count_dir("/proc/self/task"));
		else
			printf("what %s", line);
	}
	rmem_close(c);
	return 0;
}
