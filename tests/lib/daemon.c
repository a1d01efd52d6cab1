/*
 * daemon.c - see daemon.h.  The one way the tests start rmemd: the
 * functional harness and the RDMA tests differ only in the options.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "raw.h"
#include "tap.h"
#include "util.h"

#define STOP_TIMEOUT_MS  30000
#define START_ATTEMPTS   3

void rmemd_opts_init(struct rmemd_opts *o)
{
	memset(o, 0, sizeof *o);
	o->host = "127.0.0.1";
	o->pool_size = "64M";
	o->lease_timeout_ms = 10000;
	o->ready_timeout_ms = 30000;
	o->ep_scheme = "";
}

const char *rmemd_build_dir(void)
{
	const char *b = getenv("RMEM_BUILD");

	return b && *b ? b : "build";
}

/* "HOST:PORT" with IPv6 in brackets, as rmemd.conf and endpoints want it. */
static void hostport(char *out, size_t len, const char *addr, uint16_t port)
{
	bool v6 = strchr(addr, ':') != NULL;

	snprintf(out, len, "%s%s%s:%u", v6 ? "[" : "", addr, v6 ? "]" : "", port);
}

static int write_config(const struct rmemd *d, const struct rmemd_opts *o)
{
	FILE *f = fopen(d->conf_path, "w");
	char rdma[96] = "";
	int rc = 0;

	if (!f)
		return -errno;
	if (d->rdma_port)
		hostport(rdma, sizeof rdma, d->addr, d->rdma_port);
	fprintf(f, "# written by tests/lib/daemon.c\n");
	fprintf(f, "listen = { tcp = \"%s\"; rdma = \"%s\"; admin = \"%s\"; };\n",
		d->host_port, rdma, d->admin_path);
	fprintf(f, "pools = ( { name = \"default\"; size = \"%s\"; hugepages = \"off\"; "
		"alignment = 64; } );\n", o->pool_size);
	/* A test that sets limits of its own says all of them in extra. */
	if (!o->extra || !strstr(o->extra, "limits"))
		fprintf(f, "limits = { max_clients = 64; lease_timeout_ms = %d; };\n",
			o->lease_timeout_ms);
	fprintf(f, "log = { level = \"debug\"; };\n");
	if (o->rdma_group)
		fprintf(f, "rdma = { %s };\n", o->rdma_group);
	if (o->extra)
		fprintf(f, "%s\n", o->extra);
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* ---- sd_notify ------------------------------------------------------------- */

/* The fd store's side of one datagram: FDSTORE=1 keeps its fds under
 * FDNAME, FDSTOREREMOVE=1 closes every fd of that name; any other fds are
 * closed. */
static void store_take(struct rmemd *d, const char *msg, const int *fds, int nfds)
{
	const char *name = strstr(msg, "FDNAME=");
	char nm[48] = "stored";
	bool keep = strstr(msg, "FDSTORE=1") != NULL;

	if (name) {
		size_t n = strcspn(name + 7, "\n");

		snprintf(nm, sizeof nm, "%.*s", (int)n, name + 7);
	}
	if (strstr(msg, "FDSTOREREMOVE=1")) {
		int k = 0;

		for (int i = 0; i < d->nstore; i++) {
			if (strcmp(d->store_name[i], nm)) {
				d->store_fd[k] = d->store_fd[i];
				memcpy(d->store_name[k++], d->store_name[i], sizeof d->store_name[i]);
			} else {
				close(d->store_fd[i]);
			}
		}
		d->nstore = k;
	}
	for (int i = 0; i < nfds; i++) {
		if (keep && d->nstore < RMEMD_STORE_MAX) {
			d->store_fd[d->nstore] = fds[i];
			memcpy(d->store_name[d->nstore++], nm, sizeof nm);
		} else {
			close(fds[i]);
		}
	}
}

static void drain_notify(struct rmemd *d)
{
	char buf[4096];
	ssize_t n;

	if (d->notify_fd < 0)
		return;
	for (;;) {
		union {
			struct cmsghdr align;
			char space[CMSG_SPACE(sizeof(int) * RMEMD_STORE_MAX)];
		} ctl;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf - 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space,
				     .msg_controllen = sizeof ctl.space };
		int fds[RMEMD_STORE_MAX], nfds = 0;
		size_t room, take;

		n = recvmsg(d->notify_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n <= 0)
			break;
		buf[n] = '\0';
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) &&
			     nfds < RMEMD_STORE_MAX; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
		store_take(d, buf, fds, nfds);
		room = sizeof d->notify_msgs - 1 - d->notify_len;
		take = (size_t)n < room ? (size_t)n : room;
		memcpy(d->notify_msgs + d->notify_len, buf, take);
		d->notify_len += take;
		if (d->notify_len < sizeof d->notify_msgs - 1 &&
		    d->notify_msgs[d->notify_len - 1] != '\n')
			d->notify_msgs[d->notify_len++] = '\n';
		d->notify_msgs[d->notify_len] = '\0';
	}
}

bool rmemd_notified(struct rmemd *d, const char *line)
{
	size_t n = strlen(line);
	const char *p = d->notify_msgs;

	drain_notify(d);
	while ((p = strstr(p, line)) != NULL) {
		bool starts = p == d->notify_msgs || p[-1] == '\n';
		bool ends = p[n] == '\n' || p[n] == '\0';

		if (starts && ends)
			return true;
		p += n;
	}
	return false;
}

static int open_notify_socket(struct rmemd *d)
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

/* ---- the process --------------------------------------------------------------- */

/* In the child: the store's fds from 3 on, and the variables that say so
 * (sd_listen_fds checks LISTEN_PID against its own pid: ours, after exec). */
static int pass_store(struct rmemd *d)
{
	char names[RMEMD_STORE_MAX * 49] = "", num[24];
	int high[RMEMD_STORE_MAX];

	/* Out of the way first: a source may sit where another one goes. */
	for (int i = 0; i < d->nstore; i++) {
		high[i] = fcntl(d->store_fd[i], F_DUPFD, 100);
		if (high[i] < 0)
			return -1;
	}
	for (int i = 0; i < d->nstore; i++) {
		if (dup2(high[i], 3 + i) < 0)
			return -1;
		close(high[i]);
		if (i)
			strcat(names, ":");
		strcat(names, d->store_name[i]);
	}
	snprintf(num, sizeof num, "%d", d->nstore);
	setenv("LISTEN_FDS", num, 1);
	setenv("LISTEN_FDNAMES", names, 1);
	snprintf(num, sizeof num, "%d", (int)getpid());
	setenv("LISTEN_PID", num, 1);
	return 0;
}

static int spawn_daemon(struct rmemd *d)
{
	char exe[256];
	pid_t parent = getpid();
	pid_t pid;

	snprintf(exe, sizeof exe, "%s/rmemd", rmemd_build_dir());
	if (access(exe, X_OK) < 0) {
		int rc = -errno;

		diag("%s: %s", exe, strerror(-rc));
		return rc;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int log = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		/* A test that dies must not leave its daemon behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
		if (log < 0 || null < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 ||
		    dup2(log, 2) < 0)
			_exit(126);
		setenv("NOTIFY_SOCKET", d->notify_path, 1);
		if (d->nstore && pass_store(d) < 0)
			_exit(126);
		execl(exe, "rmemd", "-c", d->conf_path, (char *)NULL);
		_exit(127);
	}
	d->pid = pid;
	return 0;
}

static const char *describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "status 0x%x", (unsigned)status);
	return buf;
}

/* 0 once READY=1 arrived; -ECHILD when the daemon died first; -ETIMEDOUT. */
static int wait_ready(struct rmemd *d, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		struct pollfd pfd = { .fd = d->notify_fd, .events = POLLIN };
		int status;
		char what[32];

		if (rmemd_notified(d, "READY=1"))
			return 0;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			diag("rmemd ended before READY=1: %s",
			     describe_status(status, what, sizeof what));
			d->pid = 0;
			return -ECHILD;
		}
		if (now_ms() >= deadline) {
			diag("rmemd sent no READY=1 within %d ms", timeout_ms);
			return -ETIMEDOUT;
		}
		poll(&pfd, 1, 50);
	}
}

static void kill_and_reap(struct rmemd *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL);
	while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
		;
	d->pid = 0;
}

static int pick_ports(struct rmemd *d, const struct rmemd_opts *o)
{
	d->port = free_port_on(d->addr);
	d->rdma_port = o->listen_rdma ? free_port_on(d->addr) : 0;
	if (!d->port || (o->listen_rdma && (!d->rdma_port || d->rdma_port == d->port)))
		return -EADDRNOTAVAIL;
	hostport(d->host_port, sizeof d->host_port, d->addr, d->port);
	snprintf(d->tcp_ep, sizeof d->tcp_ep, "%s%s", o->ep_scheme, d->host_port);
	return 0;
}

static int try_start(struct rmemd *d, const struct rmemd_opts *o)
{
	int rc = pick_ports(d, o);

	if (rc == 0)
		rc = write_config(d, o);
	if (rc == 0)
		rc = spawn_daemon(d);
	if (rc == 0)
		rc = wait_ready(d, o->ready_timeout_ms);
	if (rc < 0)
		kill_and_reap(d);
	return rc;
}

/* The private directory and the paths in it; 0 or -errno. */
static int make_dir(struct rmemd *d)
{
	memcpy(d->dir, "/tmp/rmemt.XXXXXX", sizeof "/tmp/rmemt.XXXXXX");
	if (!mkdtemp(d->dir)) {
		int rc = -errno;

		diag("mkdtemp: %s", strerror(-rc));
		d->dir[0] = '\0';
		return rc;
	}
	snprintf(d->conf_path, sizeof d->conf_path, "%s/rmemd.conf", d->dir);
	snprintf(d->log_path, sizeof d->log_path, "%s/rmemd.log", d->dir);
	snprintf(d->admin_path, sizeof d->admin_path, "%s/rmemd.sock", d->dir);
	snprintf(d->notify_path, sizeof d->notify_path, "%s/notify.sock", d->dir);
	snprintf(d->unix_ep, sizeof d->unix_ep, "unix:%s", d->admin_path);
	return 0;
}

int rmemd_start_opts(struct rmemd *d, const struct rmemd_opts *o)
{
	int rc;

	memset(d, 0, sizeof *d);
	d->notify_fd = -1;
	if (strlen(o->host) >= sizeof d->addr)
		return -ENAMETOOLONG;
	memcpy(d->addr, o->host, strlen(o->host) + 1);
	rc = make_dir(d);
	if (rc < 0)
		return rc;
	rc = open_notify_socket(d);
	if (rc < 0) {
		diag("notify socket %s: %s", d->notify_path, strerror(-rc));
		rmemd_cleanup(d);
		return rc;
	}
	for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
		rc = try_start(d, o);
		if (rc == 0)
			return 0;
		/* A port probed free may have been taken before rmemd bound it. */
		if (rc != -ECHILD || !rmemd_log_contains(d, "in use"))
			break;
		diag("port %u or %u was taken, trying others", d->port, d->rdma_port);
		if (truncate(d->log_path, 0) < 0)
			break;
	}
	diag("could not start %s/rmemd: %s", rmemd_build_dir(),
	     rc == -ECHILD ? "it exited" : strerror(-rc));
	rmemd_log_tail(d, 40);
	rmemd_cleanup(d);
	return rc;
}

int rmemd_stop(struct rmemd *d)
{
	uint64_t deadline = now_ms() + STOP_TIMEOUT_MS;
	int status = 0, result;
	char what[32];

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
		if (now_ms() >= deadline) {
			diag("rmemd did not stop within %d ms of SIGTERM; killing it",
			     STOP_TIMEOUT_MS);
			kill_and_reap(d);
			drain_notify(d);
			rmemd_log_tail(d, 40);
			return -ETIMEDOUT;
		}
		sleep_ms(10);
	}
	d->pid = 0;
	drain_notify(d);
	if (WIFEXITED(status))
		result = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		result = 128 + WTERMSIG(status);
	else
		result = 255;
	if (result != 0) {
		diag("rmemd ended with %s", describe_status(status, what, sizeof what));
		rmemd_log_tail(d, 60);
	}
	return result;
}

int rmemd_restart(struct rmemd *d, int sig, int ready_timeout_ms)
{
	int rc;

	if (d->pid > 0) {
		kill(d->pid, sig);
		while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
			;
		d->pid = 0;
	}
	drain_notify(d);
	d->notify_len = 0;
	d->notify_msgs[0] = '\0';
	rc = spawn_daemon(d);
	if (rc == 0)
		rc = wait_ready(d, ready_timeout_ms);
	if (rc < 0) {
		rmemd_log_tail(d, 40);
		kill_and_reap(d);
	}
	return rc;
}

void rmemd_cleanup(struct rmemd *d)
{
	DIR *dir;
	struct dirent *e;

	kill_and_reap(d);
	for (int i = 0; i < d->nstore; i++)
		close(d->store_fd[i]);
	d->nstore = 0;
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

/* ---- the log -------------------------------------------------------------------- */

/* The whole log, NUL-terminated; NULL when it cannot be read.  Free it. */
static char *read_log(const struct rmemd *d, size_t *len)
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

bool rmemd_log_contains(const struct rmemd *d, const char *needle)
{
	size_t len = 0;
	char *log = read_log(d, &len);
	bool found = log && memmem(log, len, needle, strlen(needle)) != NULL;

	free(log);
	return found;
}

int rmemd_log_count(const struct rmemd *d, const char *needle)
{
	size_t len, nlen = strlen(needle);
	char *log = read_log(d, &len);
	const char *p, *end;
	int n = 0;

	if (!log)
		return 0;
	end = log + len;
	/* Once per line, wherever in it. */
	for (p = log; (p = memmem(p, (size_t)(end - p), needle, nlen)); n++) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		p = eol ? eol + 1 : end;
	}
	free(log);
	return n;
}

void rmemd_log_tail(const struct rmemd *d, int lines)
{
	size_t len;
	char *log = read_log(d, &len);
	char *p;

	if (!log) {
		diag("(no daemon log at %s)", d->log_path);
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
	diag("---- last lines of %s ----", d->log_path);
	while (*p) {
		char *nl = strchr(p, '\n');

		if (nl)
			*nl = '\0';
		diag("rmemd: %s", p);
		if (!nl)
			break;
		p = nl + 1;
	}
	free(log);
}
