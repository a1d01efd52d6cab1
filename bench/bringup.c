/*
 * bringup.c - how long rmemd takes from exec to READY=1 with one pool of a
 * given size, and from SIGTERM to exit.  A benchmark: it prints figures and
 * asserts nothing.
 *
 * It plays systemd's part: a datagram socket named by NOTIFY_SOCKET receives
 * the daemon's STATUS= and READY=1 messages, each stamped on arrival.  The
 * daemon runs on private paths (no TCP, no RDMA listener, an admin socket in a
 * temporary directory), so runs never collide with anything else.
 *
 *   bringup [-d RMEMD] [-s SIZE] [-H on|off|auto] [-r RUNS] [-T TIMEOUT_S] [--json]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG_MAX 4096
#define MAX_RUNS 15

struct opts {
	const char *rmemd;
	const char *size;
	const char *hugepages;
	int runs;
	double timeout;
	bool json;
};

struct timing {
	double pin_start;	/* "STATUS=pinning pools": config read, pinning begins */
	double ready;		/* READY=1 */
	double stop;		/* SIGTERM to exit */
	int progress_msgs;	/* STATUS= lines seen before READY */
};

struct rig {
	char dir[64];
	char conf[96];
	char sock[96];
	char log[96];
	char admin[96];
	int fd;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void rig_close(struct rig *g)
{
	if (g->fd >= 0)
		close(g->fd);
	g->fd = -1;
	if (!g->dir[0])
		return;
	unlink(g->sock);
	unlink(g->conf);
	unlink(g->log);
	unlink(g->admin);
	rmdir(g->dir);
	g->dir[0] = '\0';
}

static int rig_open(struct rig *g, const struct opts *o)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	FILE *f;
	int rc;

	g->fd = -1;
	snprintf(g->dir, sizeof(g->dir), "/tmp/rmem-bringup.XXXXXX");
	if (!mkdtemp(g->dir)) {
		g->dir[0] = '\0';
		return -errno;
	}
	snprintf(g->conf, sizeof(g->conf), "%s/rmemd.conf", g->dir);
	snprintf(g->sock, sizeof(g->sock), "%s/notify", g->dir);
	snprintf(g->log, sizeof(g->log), "%s/rmemd.log", g->dir);
	snprintf(g->admin, sizeof(g->admin), "%s/rmemd.sock", g->dir);
	f = fopen(g->conf, "we");
	if (!f)
		goto fail;
	fprintf(f, "listen = { tcp = \"\"; rdma = \"\"; admin = \"%s\"; metrics = \"\"; };\n"
		   "pools = ( { name = \"bringup\"; size = \"%s\"; hugepages = \"%s\"; } );\n"
		   "log = { level = \"notice\"; };\n", g->admin, o->size, o->hugepages);
	if (fclose(f))
		goto fail;
	g->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (g->fd < 0)
		goto fail;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g->sock);
	if (bind(g->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	return 0;
fail:
	rc = -errno;
	rig_close(g);
	return rc;
}

static pid_t spawn(const struct rig *g, const struct opts *o)
{
	pid_t pid = fork();

	if (pid == 0) {
		FILE *log = freopen(g->log, "we", stderr);

		(void)log;
		setenv("NOTIFY_SOCKET", g->sock, 1);
		execl(o->rmemd, o->rmemd, "-c", g->conf, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Reads one datagram and notes what it says; 1 once READY=1 came. */
static int on_message(int fd, double t0, struct timing *t)
{
	char msg[MSG_MAX + 1];
	ssize_t n = recv(fd, msg, MSG_MAX, 0);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	msg[n] = '\0';
	if (strstr(msg, "STATUS=pinning") && t->pin_start < 0)
		t->pin_start = now() - t0;
	if (strstr(msg, "STATUS="))
		t->progress_msgs++;
	if (strstr(msg, "READY=1")) {
		t->ready = now() - t0;
		return 1;
	}
	return 0;
}

static void print_log_tail(const struct rig *g)
{
	char line[512];
	FILE *f = fopen(g->log, "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  rmemd: %s", line);
	fclose(f);
}

/* Starts rmemd, waits for READY=1, stops it; -1 figures when it never got ready. */
static int one_run(const struct opts *o, struct timing *t)
{
	struct rig g;
	struct pollfd pfd;
	double t0, deadline, stop0;
	pid_t pid;
	int rc, status;

	*t = (struct timing){ .pin_start = -1, .ready = -1, .stop = -1 };
	if ((rc = rig_open(&g, o)) < 0)
		return rc;
	t0 = now();
	pid = spawn(&g, o);
	if (pid < 0) {
		rc = -errno;
		goto out;
	}
	deadline = t0 + o->timeout;
	pfd = (struct pollfd){ .fd = g.fd, .events = POLLIN };
	rc = 0;
	while (rc == 0 && now() < deadline) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "bringup: rmemd exited before READY=1\n");
			print_log_tail(&g);
			rc = -ECHILD;
			goto out;
		}
		if (poll(&pfd, 1, 100) > 0)
			rc = on_message(g.fd, t0, t);
	}
	if (rc <= 0)
		fprintf(stderr, "bringup: no READY=1 within %.0f s\n", o->timeout);
	stop0 = now();
	kill(pid, SIGTERM);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	t->stop = now() - stop0;
	rc = rc > 0 ? 0 : -ETIMEDOUT;
out:
	rig_close(&g);
	return rc;
}

static int cmp_ready(const void *x, const void *y)
{
	double a = ((const struct timing *)x)->ready, b = ((const struct timing *)y)->ready;

	return (a > b) - (a < b);
}

static void print_result(const struct opts *o, struct timing *runs, int n)
{
	const struct timing *m;

	qsort(runs, (size_t)n, sizeof(runs[0]), cmp_ready);
	m = &runs[n / 2];
	if (o->json) {
		printf("{\"tool\":\"bringup\",\"size\":\"%s\",\"hugepages\":\"%s\",\"runs\":%d,"
		       "\"ready_s\":%.3f,\"ready_min_s\":%.3f,\"ready_max_s\":%.3f,"
		       "\"pin_start_s\":%.3f,\"stop_s\":%.3f,\"status_msgs\":%d}\n",
		       o->size, o->hugepages, n, m->ready, runs[0].ready, runs[n - 1].ready,
		       m->pin_start, m->stop, m->progress_msgs);
		return;
	}
	printf("%-6s %-9s %4d %10.3f %10.3f %10.3f %10.3f %8.3f\n", o->size, o->hugepages, n,
	       m->ready, runs[0].ready, runs[n - 1].ready, m->pin_start, m->stop);
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "header", no_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long v;
	int ch;

	*o = (struct opts){ .rmemd = "build/rmemd", .size = "1G", .hugepages = "off", .runs = 3,
			    .timeout = 300 };
	while ((ch = getopt_long(argc, argv, "d:s:H:r:T:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o->rmemd = optarg;
			break;
		case 's':
			o->size = optarg;
			break;
		case 'H':
			o->hugepages = optarg;
			break;
		case 'r':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || *end || v < 1 || v > MAX_RUNS)
				return -EINVAL;
			o->runs = (int)v;
			break;
		case 'T':
			o->timeout = strtod(optarg, &end);
			if (*end || !(o->timeout > 0))
				return -EINVAL;
			break;
		case 'j':
			o->json = true;
			break;
		case 'P':
			printf("%-6s %-9s %4s %10s %10s %10s %10s %8s\n", "size", "hugepages",
			       "runs", "ready s", "min s", "max s", "pin at s", "stop s");
			exit(0);
		default:
			return -EINVAL;
		}
	}
	/* The size and mode go into a config file verbatim: keep them plain. */
	if (strspn(o->size, "0123456789KMGTPiB") != strlen(o->size) ||
	    strspn(o->hugepages, "onfauto") != strlen(o->hugepages))
		return -EINVAL;
	return optind == argc ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct timing runs[MAX_RUNS];
	struct opts o;
	int rc;

	if (parse_args(argc, argv, &o)) {
		fprintf(stderr, "usage: bringup [-d RMEMD] [-s SIZE] [-H on|off|auto] [-r RUNS] "
				"[-T TIMEOUT_S] [--json] | --header\n");
		return 2;
	}
	for (int i = 0; i < o.runs; i++) {
		rc = one_run(&o, &runs[i]);
		if (rc < 0) {
			fprintf(stderr, "bringup: %s %s run %d: %s\n", o.size, o.hugepages, i + 1,
				strerror(-rc));
			return 1;
		}
	}
	print_result(&o, runs, o.runs);
	return 0;
}
