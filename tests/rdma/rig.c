/*
 * rig.c - see rig.h.  The same start sequence as tests/func/harness.c (which
 * cannot be told to listen elsewhere than 127.0.0.1), cut to what the RDMA
 * tests need.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rig.h"

#define READY_TIMEOUT_MS 60000
#define STOP_TIMEOUT_MS  30000
#define START_ATTEMPTS   3

__attribute__((format(printf, 1, 2)))
static void note(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A TCP port on addr that nothing listens on right now; 0 on failure.
 * rdma_cm ports (RDMA_PS_TCP) are another space, but a number free for TCP
 * is as good a guess as any for them. */
static uint16_t free_port(const char *addr)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	struct addrinfo *ai;
	uint16_t port = 0;
	int fd;

	if (getaddrinfo(addr, "0", &hints, &ai) != 0)
		return 0;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
	    getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
		char serv[16];

		if (getnameinfo((struct sockaddr *)&ss, len, NULL, 0, serv, sizeof serv,
				NI_NUMERICSERV) == 0) {
			char *end;
			unsigned long v = strtoul(serv, &end, 10);

			if (*end == '\0' && v > 0 && v < 65536)
				port = (uint16_t)v;
		}
	}
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return port;
}

/* "HOST:PORT" with IPv6 in brackets, as rmemd.conf wants it. */
static void hostport(char *out, size_t len, const char *addr, uint16_t port)
{
	bool v6 = strchr(addr, ':') != NULL;

	snprintf(out, len, "%s%s%s:%u", v6 ? "[" : "", addr, v6 ? "]" : "", port);
}

static int write_config(const struct rig *d, const char *rdma_group, const char *pool_size)
{
	char tcp[96], rdma[96] = "";
	FILE *f = fopen(d->conf_path, "w");
	int rc = 0;

	if (!f)
		return -errno;
	hostport(tcp, sizeof tcp, d->addr, d->tcp_port);
	if (rdma_group)
		hostport(rdma, sizeof rdma, d->addr, d->rdma_port);
	fprintf(f, "# written by tests/rdma/rig.c\n");
	fprintf(f, "listen = { tcp = \"%s\"; rdma = \"%s\"; admin = \"%s\"; };\n", tcp, rdma,
		d->admin_path);
	fprintf(f, "pools = ( { name = \"default\"; size = \"%s\"; hugepages = \"off\"; "
		"alignment = 64; } );\n", pool_size);
	fprintf(f, "limits = { max_clients = 64; lease_timeout_ms = 60000; };\n");
	fprintf(f, "log = { level = \"debug\"; };\n");
	if (rdma_group)
		fprintf(f, "rdma = { %s };\n", rdma_group);
	if (d->extra)
		fprintf(f, "%s\n", d->extra);
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

static int open_notify(struct rig *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	memcpy(sa.sun_path, d->notify_path, strlen(d->notify_path) + 1);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	d->notify_fd = fd;
	return 0;
}

static const char *build_dir(void)
{
	const char *b = getenv("RMEM_BUILD");

	return b && *b ? b : "build";
}

static int spawn(struct rig *d)
{
	char exe[256];
	pid_t parent = getpid();
	pid_t pid;

	snprintf(exe, sizeof exe, "%s/rmemd", build_dir());
	if (access(exe, X_OK) < 0) {
		note("%s: %s", exe, strerror(errno));
		return -ENOENT;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int log = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
		if (log < 0 || null < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 ||
		    dup2(log, 2) < 0)
			_exit(126);
		setenv("NOTIFY_SOCKET", d->notify_path, 1);
		execl(exe, "rmemd", "-c", d->conf_path, (char *)NULL);
		_exit(127);
	}
	d->pid = pid;
	return 0;
}

static bool got_ready(struct rig *d)
{
	char buf[4096];
	ssize_t n;

	while ((n = recv(d->notify_fd, buf, sizeof buf - 1, MSG_DONTWAIT)) > 0) {
		buf[n] = '\0';
		for (char *line = buf; line; ) {
			char *nl = strchr(line, '\n');

			if (nl)
				*nl = '\0';
			if (strcmp(line, "READY=1") == 0)
				return true;
			line = nl ? nl + 1 : NULL;
		}
	}
	return false;
}

static void kill_and_reap(struct rig *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL);
	while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
		;
	d->pid = 0;
}

static int wait_ready(struct rig *d)
{
	uint64_t deadline = ms_now() + READY_TIMEOUT_MS;

	for (;;) {
		struct pollfd pfd = { .fd = d->notify_fd, .events = POLLIN };
		int status;

		if (got_ready(d))
			return 0;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = 0;
			note("rmemd ended before READY=1 (%s %d)",
			     WIFEXITED(status) ? "exit" : "signal",
			     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			return -ECHILD;
		}
		if (ms_now() >= deadline) {
			note("rmemd sent no READY=1 within %d ms", READY_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		poll(&pfd, 1, 50);
	}
}

static int try_start(struct rig *d, const char *rdma_group, const char *pool_size)
{
	int rc;

	d->tcp_port = free_port(d->addr);
	d->rdma_port = rdma_group ? free_port(d->addr) : 0;
	if (!d->tcp_port || (rdma_group && (!d->rdma_port || d->rdma_port == d->tcp_port)))
		return -EADDRNOTAVAIL;
	rc = write_config(d, rdma_group, pool_size);
	if (rc == 0)
		rc = spawn(d);
	if (rc == 0)
		rc = wait_ready(d);
	if (rc < 0)
		kill_and_reap(d);
	return rc;
}

int rig_start(struct rig *d, const char *addr, const char *rdma_group, const char *pool_size)
{
	return rig_start_extra(d, addr, rdma_group, pool_size, NULL);
}

int rig_start_extra(struct rig *d, const char *addr, const char *rdma_group,
		    const char *pool_size, const char *extra)
{
	int rc = -EADDRNOTAVAIL;

	memset(d, 0, sizeof *d);
	d->notify_fd = -1;
	d->extra = extra;
	if (strlen(addr) >= sizeof d->addr)
		return -ENAMETOOLONG;
	memcpy(d->addr, addr, strlen(addr) + 1);
	memcpy(d->dir, "/tmp/rmemr.XXXXXX", sizeof "/tmp/rmemr.XXXXXX");
	if (!mkdtemp(d->dir)) {
		rc = -errno;
		d->dir[0] = '\0';
		return rc;
	}
	snprintf(d->conf_path, sizeof d->conf_path, "%s/rmemd.conf", d->dir);
	snprintf(d->log_path, sizeof d->log_path, "%s/rmemd.log", d->dir);
	snprintf(d->admin_path, sizeof d->admin_path, "%s/rmemd.sock", d->dir);
	snprintf(d->notify_path, sizeof d->notify_path, "%s/notify.sock", d->dir);
	rc = open_notify(d);
	for (int attempt = 1; rc == 0; attempt++) {
		rc = try_start(d, rdma_group, pool_size);
		if (rc == 0)
			return 0;
		/* A port probed free may have been taken before rmemd bound it. */
		if (rc != -ECHILD || attempt == START_ATTEMPTS || !rig_log_contains(d, "in use") ||
		    truncate(d->log_path, 0) < 0)
			break;
		note("a port was taken, trying others");
		rc = 0;
	}
	note("could not start %s/rmemd: %s", build_dir(),
	     rc == -ECHILD ? "it exited" : strerror(-rc));
	rig_log_tail(d, 40);
	rig_cleanup(d);
	return rc;
}

int rig_stop(struct rig *d)
{
	uint64_t deadline = ms_now() + STOP_TIMEOUT_MS;
	int status = 0, result;

	if (d->pid <= 0)
		return -ECHILD;
	kill(d->pid, SIGTERM);
	for (;;) {
		pid_t r = waitpid(d->pid, &status, WNOHANG);

		if (r == d->pid)
			break;
		if (r < 0 && errno != EINTR) {
			d->pid = 0;
			return -errno;
		}
		if (ms_now() >= deadline) {
			note("rmemd did not stop within %d ms of SIGTERM", STOP_TIMEOUT_MS);
			kill_and_reap(d);
			rig_log_tail(d, 40);
			return -ETIMEDOUT;
		}
		nap_ms(10);
	}
	d->pid = 0;
	if (WIFEXITED(status))
		result = WEXITSTATUS(status);
	else
		result = 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 127);
	if (result != 0) {
		note("rmemd ended with status %d", result);
		rig_log_tail(d, 60);
	}
	return result;
}

void rig_cleanup(struct rig *d)
{
	DIR *dir;
	struct dirent *e;

	kill_and_reap(d);
	if (d->notify_fd >= 0)
		close(d->notify_fd);
	d->notify_fd = -1;
	if (!d->dir[0])
		return;
	dir = opendir(d->dir);
	if (dir) {
		while ((e = readdir(dir)) != NULL) {
			char path[512];

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(path, sizeof path, "%s/%s", d->dir, e->d_name);
			unlink(path);
		}
		closedir(dir);
	}
	rmdir(d->dir);
	d->dir[0] = '\0';
}

/* The whole log, NUL-terminated, or NULL.  Free it. */
static char *read_log(const struct rig *d, size_t *len)
{
	FILE *f = fopen(d->log_path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	if (!f)
		return NULL;
	do {
		if (cap - n < 4096) {
			char *nb = realloc(buf, cap + 65536);

			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
			cap += 65536;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
	} while (got > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

bool rig_log_contains(const struct rig *d, const char *needle)
{
	size_t len = 0;
	char *log = read_log(d, &len);
	bool found = log && memmem(log, len, needle, strlen(needle)) != NULL;

	free(log);
	return found;
}

void rig_log_tail(const struct rig *d, int lines)
{
	size_t len = 0;
	char *log = read_log(d, &len);
	char *p;

	if (!log) {
		note("(no daemon log at %s)", d->log_path);
		return;
	}
	p = log + len;
	if (p > log && p[-1] == '\n')
		p--;
	while (p > log && lines > 0) {
		p--;
		if (*p == '\n')
			lines--;
	}
	if (*p == '\n')
		p++;
	note("---- last lines of %s ----", d->log_path);
	while (*p) {
		char *nl = strchr(p, '\n');

		if (nl)
			*nl = '\0';
		note("rmemd: %s", p);
		if (!nl)
			break;
		p = nl + 1;
	}
	free(log);
}
