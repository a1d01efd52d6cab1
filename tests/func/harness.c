/*
 * harness.c - see harness.h.  Starts the real rmemd the way systemd would
 * (NOTIFY_SOCKET, READY=1), on paths and a port nobody else uses, so that
 * several test programs may run at once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "harness.h"

#define READY_TIMEOUT_MS 30000
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

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

const char *harness_build_dir(void)
{
	const char *b = getenv("RMEM_BUILD");

	return b && *b ? b : "build";
}

/* ---- the daemon ------------------------------------------------------------ */

static const char *env_or_null(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

bool harness_rdma(void)
{
	const char *t = env_or_null("RMEM_TEST_TRANSPORT");

	return t && !strcmp(t, "rdma");
}

const char *harness_transport(void)
{
	return harness_rdma() ? "rdma" : "tcp";
}

/* 0, or -EINVAL for a transport the harness does not know. */
static int check_transport(void)
{
	const char *t = env_or_null("RMEM_TEST_TRANSPORT");

	if (!t || !strcmp(t, "tcp") || !strcmp(t, "rdma"))
		return 0;
	note("RMEM_TEST_TRANSPORT=%s: not \"tcp\" or \"rdma\"", t);
	return -EINVAL;
}

/* The address the daemon listens on: $RMEM_TEST_HOST (an IPv4 address, e.g.
 * the test VM's RDMA address), the VM's RDMA address over rdma, or the
 * loopback; NULL when rdma is asked for and there is no address. */
static const char *test_host_or_null(void)
{
	const char *h = env_or_null("RMEM_TEST_HOST");

	if (h)
		return h;
	if (harness_rdma())
		return env_or_null("RMEM_VM_RDMA_ADDR");
	return "127.0.0.1";
}

static const char *test_host(void)
{
	const char *h = test_host_or_null();

	return h ? h : "127.0.0.1";
}

/* With RMEM_TEST_RDMA=1 (the default over rdma) the daemon also listens for
 * RDMA attaches on test_host() at a port of its own; else listen.rdma is off. */
static void rdma_listen(char *out, size_t len)
{
	const char *r = env_or_null("RMEM_TEST_RDMA");
	uint16_t port;

	out[0] = '\0';
	if (r ? strcmp(r, "1") != 0 : !harness_rdma())
		return;
	port = free_tcp_port();
	if (port)
		snprintf(out, len, "%s:%u", test_host(), port);
}

static int write_config(const struct rmemd *d, const char *pool_size, const char *extra)
{
	FILE *f = fopen(d->conf_path, "w");
	char rdma[64];
	int rc = 0;

	if (!f)
		return -errno;
	rdma_listen(rdma, sizeof rdma);
	fprintf(f, "# written by tests/func/harness.c\n");
	fprintf(f, "listen = { tcp = \"%s:%u\"; rdma = \"%s\"; admin = \"%s\"; };\n",
		test_host(), d->port, rdma, d->admin_path);
	fprintf(f, "pools = ( { name = \"default\"; size = \"%s\"; hugepages = \"off\"; "
		"alignment = 64; } );\n", pool_size);
	/* A test that sets limits of its own says all of them in extra. */
	if (!extra || !strstr(extra, "limits"))
		fprintf(f, "limits = { max_clients = 64; lease_timeout_ms = 10000; };\n");
	fprintf(f, "log = { level = \"debug\"; };\n");
	if (extra)
		fprintf(f, "%s\n", extra);
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

static void drain_notify(struct rmemd *d)
{
	char buf[4096];
	ssize_t n;

	if (d->notify_fd < 0)
		return;
	while ((n = recv(d->notify_fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
		size_t room = sizeof d->notify_msgs - 1 - d->notify_len;
		size_t take = (size_t)n < room ? (size_t)n : room;

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

static int spawn_daemon(struct rmemd *d)
{
	char exe[256];
	pid_t parent = getpid();
	pid_t pid;

	snprintf(exe, sizeof exe, "%s/rmemd", harness_build_dir());
	if (access(exe, X_OK) < 0)
		return -errno;
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
static int wait_ready(struct rmemd *d)
{
	uint64_t deadline = now_ms() + READY_TIMEOUT_MS;

	for (;;) {
		struct pollfd pfd = { .fd = d->notify_fd, .events = POLLIN };
		int status;
		char what[32];

		if (rmemd_notified(d, "READY=1"))
			return 0;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			note("rmemd ended before READY=1: %s",
			     describe_status(status, what, sizeof what));
			d->pid = 0;
			return -ECHILD;
		}
		if (now_ms() >= deadline) {
			note("rmemd sent no READY=1 within %d ms", READY_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		poll(&pfd, 1, 50);
	}
}

static int kill_and_reap(struct rmemd *d)
{
	int status = 0;

	if (d->pid <= 0)
		return 0;
	kill(d->pid, SIGKILL);
	while (waitpid(d->pid, &status, 0) < 0 && errno == EINTR)
		;
	d->pid = 0;
	return status;
}

static int try_start(struct rmemd *d, const char *pool_size, const char *extra)
{
	int rc;

	d->port = free_tcp_port();
	if (!d->port)
		return -EADDRNOTAVAIL;
	snprintf(d->host_port, sizeof d->host_port, "%s:%u", test_host(), d->port);
	snprintf(d->tcp_ep, sizeof d->tcp_ep, "%s%s", harness_rdma() ? "rdma://" : "",
		 d->host_port);
	rc = write_config(d, pool_size, extra);
	if (rc < 0)
		return rc;
	rc = spawn_daemon(d);
	if (rc < 0)
		return rc;
	rc = wait_ready(d);
	if (rc < 0)
		kill_and_reap(d);
	return rc;
}

int rmemd_start(struct rmemd *d, const char *pool_size, const char *extra)
{
	int rc;

	memset(d, 0, sizeof *d);
	d->notify_fd = -1;
	rc = check_transport();
	if (rc < 0)
		return rc;
	if (!test_host_or_null()) {
		/* A whole program over rdma outside the test VM: nothing to run. */
		printf("1..0 # SKIP RMEM_TEST_TRANSPORT=rdma needs RMEM_VM_RDMA_ADDR "
		       "(the Soft-RoCE VM, tests/vm)\n");
		fflush(stdout);
		exit(77);
	}
	memcpy(d->dir, "/tmp/rmemt.XXXXXX", sizeof "/tmp/rmemt.XXXXXX");
	if (!mkdtemp(d->dir)) {
		rc = -errno;
		note("mkdtemp: %s", strerror(errno));
		d->dir[0] = '\0';
		return rc;
	}
	snprintf(d->conf_path, sizeof d->conf_path, "%s/rmemd.conf", d->dir);
	snprintf(d->log_path, sizeof d->log_path, "%s/rmemd.log", d->dir);
	snprintf(d->admin_path, sizeof d->admin_path, "%s/rmemd.sock", d->dir);
	snprintf(d->notify_path, sizeof d->notify_path, "%s/notify.sock", d->dir);
	snprintf(d->unix_ep, sizeof d->unix_ep, "unix:%s", d->admin_path);
	rc = open_notify_socket(d);
	if (rc < 0) {
		note("notify socket %s: %s", d->notify_path, strerror(-rc));
		rmemd_cleanup(d);
		return rc;
	}
	for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
		rc = try_start(d, pool_size, extra);
		if (rc == 0)
			return 0;
		/* The free port may have been taken between our probe and its bind. */
		if (rc != -ECHILD || !rmemd_log_contains(d, "in use"))
			break;
		note("port %u was taken, trying another", d->port);
		if (truncate(d->log_path, 0) < 0)
			break;
	}
	note("could not start %s/rmemd: %s", harness_build_dir(),
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
			note("rmemd did not stop within %d ms of SIGTERM; killing it",
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
		note("rmemd ended with %s", describe_status(status, what, sizeof what));
		rmemd_log_tail(d, 60);
	}
	return result;
}

void rmemd_cleanup(struct rmemd *d)
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
	size_t len;
	char *log = read_log(d, &len);
	bool found;

	if (!log)
		return false;
	found = memmem(log, len, needle, strlen(needle)) != NULL;
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

int proc_status_kb(pid_t pid, const char *field, uint64_t *kb)
{
	char path[64], *line = NULL;
	size_t cap = 0, flen = strlen(field);
	FILE *f;
	int rc = -ENOENT;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *end;

		if (strncmp(line, field, flen) != 0)
			continue;
		errno = 0;
		*kb = strtoull(line + flen, &end, 10);
		rc = errno || end == line + flen ? -EINVAL : 0;
		break;
	}
	free(line);
	fclose(f);
	return rc;
}

/* ---- clients ------------------------------------------------------------- */

bool client_on_rdma(const rmem_client *c)
{
	return c && !strcmp(rmem_transport(c), "rdma");
}

int client_connect(const char *endpoint, int timeout_ms, rmem_client **out)
{
	struct rmem_opts o;

	rmem_opts_init(&o, sizeof o);
	o.timeout_ms = timeout_ms;
	return rmem_connect(endpoint, &o, out);
}

int stats_wait(rmem_client *c, uint64_t used, uint64_t regions, int timeout_ms,
	       struct rmem_stats *last)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		int rc = rmem_stats(c, last);

		if (rc < 0)
			return rc;
		if (last->used_bytes == used && last->regions == regions)
			return 0;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		sleep_ms(20);
	}
}

#define SWEEP_MAX_REGIONS 64
#define SWEEP_CHUNK (16u << 20)

static int read_zero(rmem_client *c, const struct rmem_region *r, uint8_t *buf)
{
	for (uint64_t at = 0; at < r->length; at += SWEEP_CHUNK) {
		size_t n = r->length - at < SWEEP_CHUNK ? (size_t)(r->length - at) : SWEEP_CHUNK;
		int rc = rmem_read(c, r, at, buf, n);

		if (rc < 0)
			return rc;
		if (!all_zero(buf, n))
			return -EILSEQ;
	}
	return 0;
}

int sweep_free_memory(rmem_client *c, uint64_t *swept)
{
	struct rmem_region *held = calloc(SWEEP_MAX_REGIONS, sizeof *held);
	uint8_t *buf = malloc(SWEEP_CHUNK);
	size_t n = 0;
	int rc = held && buf ? 0 : -ENOMEM;

	*swept = 0;
	while (rc == 0 && n < SWEEP_MAX_REGIONS) {
		struct rmem_stats st;

		rc = rmem_stats(c, &st);
		if (rc < 0 || st.largest_free == 0)
			break;
		rc = rmem_alloc(c, st.largest_free, 0, &held[n]);
		if (rc < 0)
			break;
		*swept += held[n].length;
		rc = read_zero(c, &held[n++], buf);
	}
	for (size_t i = 0; held && i < n; i++) {
		int frc = rmem_free(c, &held[i]);

		if (rc == 0)
			rc = frc;
	}
	free(held);
	free(buf);
	return rc;
}

void fill_random(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t x = seed;

	while (len) {
		/* splitmix64: cheap, and every seed gives a distinct stream */
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);
		size_t n = len < 8 ? len : 8;

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(p, &z, n);
		p += n;
		len -= n;
	}
}

bool all_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

/* ---- raw frames -------------------------------------------------------------- */

static int connect_addr(int domain, const struct sockaddr *sa, socklen_t salen)
{
	int fd = socket(domain, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, sa, salen) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int raw_connect_tcp(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (inet_pton(AF_INET, test_host(), &sa.sin_addr) != 1)
		return -EINVAL;
	return connect_addr(AF_INET, (const struct sockaddr *)&sa, sizeof sa);
}

int raw_connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);

	if (n >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n + 1);
	return connect_addr(AF_UNIX, (const struct sockaddr *)&sa, sizeof sa);
}

static int bound_tcp_socket(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

int raw_listen_tcp(uint16_t *port)
{
	int fd = bound_tcp_socket(port);

	if (fd >= 0 && listen(fd, 16) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int raw_listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	int fd;

	if (n >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 16) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

uint16_t free_tcp_port(void)
{
	uint16_t port = 0;
	int fd = bound_tcp_socket(&port);

	if (fd < 0)
		return 0;
	close(fd);
	return port;
}

int raw_send(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int wait_readable(int fd, uint64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ms();
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)(deadline - now));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

int raw_recv(int fd, void *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	uint8_t *p = buf;

	while (len) {
		ssize_t n;
		int rc = wait_readable(fd, deadline);

		if (rc < 0)
			return rc;
		n = recv(fd, p, len, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET || errno == EPIPE ? -ECONNRESET : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int raw_wait_closed(int fd, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	uint8_t buf[4096];

	for (;;) {
		ssize_t n;
		int rc = wait_readable(fd, deadline);

		if (rc < 0)
			return rc;
		n = recv(fd, buf, sizeof buf, 0);
		if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE)))
			return 0;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

void raw_hdr(uint8_t out[PROTO_HDR_LEN], uint16_t version, uint16_t opcode, uint16_t flags,
	     uint32_t length, uint64_t req_id)
{
	proto_put_u32(out, PROTO_MAGIC);
	proto_put_u16(out + 4, version);
	proto_put_u16(out + 6, opcode);
	proto_put_u16(out + 8, flags);
	proto_put_u16(out + 10, 0);
	proto_put_u32(out + 12, length);
	proto_put_u64(out + 16, req_id);
}

int raw_recv_reply(int fd, struct raw_reply *r, size_t max, int timeout_ms)
{
	uint8_t h[PROTO_HDR_LEN];
	int rc;

	memset(r, 0, sizeof *r);
	rc = raw_recv(fd, h, sizeof h, timeout_ms);
	if (rc < 0)
		return rc;
	r->magic = proto_get_u32(h);
	r->version = proto_get_u16(h + 4);
	r->opcode = proto_get_u16(h + 6);
	r->flags = proto_get_u16(h + 8);
	r->reserved = proto_get_u16(h + 10);
	r->length = proto_get_u32(h + 12);
	r->req_id = proto_get_u64(h + 16);
	if (r->length > max)
		return -EMSGSIZE;
	r->payload = malloc(r->length ? r->length : 1);
	if (!r->payload)
		return -ENOMEM;
	rc = raw_recv(fd, r->payload, r->length, timeout_ms);
	if (rc < 0) {
		raw_reply_release(r);
		return rc;
	}
	if (r->length >= 4)
		r->status = (int32_t)proto_get_u32(r->payload);
	return 0;
}

void raw_reply_release(struct raw_reply *r)
{
	free(r->payload);
	r->payload = NULL;
}

int raw_call(int fd, uint16_t opcode, uint64_t req_id, const void *payload, uint32_t len,
	     struct raw_reply *r, size_t max, int timeout_ms)
{
	uint8_t *frame = malloc(PROTO_HDR_LEN + (size_t)len);
	int rc;

	memset(r, 0, sizeof *r);
	if (!frame)
		return -ENOMEM;
	raw_hdr(frame, PROTO_VERSION, opcode, 0, len, req_id);
	if (len)
		memcpy(frame + PROTO_HDR_LEN, payload, len);
	rc = raw_send(fd, frame, PROTO_HDR_LEN + (size_t)len);
	free(frame);
	if (rc < 0)
		return rc;
	return raw_recv_reply(fd, r, max, timeout_ms);
}

int raw_hello(int fd, uint64_t req_id)
{
	uint8_t p[PROTO_HELLO_REQ_LEN] = { 0 };
	struct raw_reply r;
	int rc;

	proto_put_u32(p, PROTO_VERSION);
	proto_put_u32(p + 8, (uint32_t)getpid());
	rc = raw_call(fd, PROTO_OP_HELLO, req_id, p, sizeof p, &r, PROTO_MAX_CTL, 10000);
	if (rc < 0)
		return rc;
	if (r.magic != PROTO_MAGIC || r.opcode != PROTO_OP_HELLO ||
	    !(r.flags & PROTO_F_RESPONSE) || r.req_id != req_id || r.length < 4)
		rc = -EPROTO;
	else
		rc = r.status;
	raw_reply_release(&r);
	return rc;
}

/* ---- child processes ------------------------------------------------------- */

int child_spawn(struct child *ch, int (*fn)(int wfd, void *arg), void *arg)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fflush(stdout);
	fflush(stderr);
	ch->pid = fork();
	if (ch->pid < 0) {
		int rc = -errno;

		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (ch->pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(fn(p[1], arg) & 0xff);
	}
	close(p[1]);
	ch->rfd = p[0];
	return 0;
}

int child_end(struct child *ch, int sig)
{
	uint64_t deadline = now_ms() + STOP_TIMEOUT_MS;
	int status = 0;

	if (ch->pid <= 0)
		return -ECHILD;
	if (sig > 0)
		kill(ch->pid, sig);
	for (;;) {
		pid_t r = waitpid(ch->pid, &status, WNOHANG);

		if (r == ch->pid)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (now_ms() >= deadline)
			kill(ch->pid, SIGKILL);
		sleep_ms(5);
	}
	ch->pid = 0;
	if (ch->rfd >= 0)
		close(ch->rfd);
	ch->rfd = -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
