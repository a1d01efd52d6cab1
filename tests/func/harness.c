/*
 * harness.c - see harness.h.  The daemon itself is started by tests/lib
 * (daemon.c); here is only the functional tests' policy of where it listens.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define CHILD_END_TIMEOUT_MS 30000

/* ---- where the daemon listens ---------------------------------------------- */

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

bool harness_tls(void)
{
	const char *t = env_or_null("RMEM_TEST_TRANSPORT");

	return t && !strcmp(t, "tls");
}

const char *harness_transport(void)
{
	const char *kind = env_or_null("RMEM_TEST_TLS_KIND");

	if (harness_tls())
		return kind ? kind : "tls";
	return harness_rdma() ? "rdma" : "tcp";
}

/* 0, or -EINVAL for a transport the harness does not know. */
static int check_transport(void)
{
	const char *t = env_or_null("RMEM_TEST_TRANSPORT");

	if (!t || !strcmp(t, "tcp") || !strcmp(t, "rdma") || !strcmp(t, "tls"))
		return 0;
	diag("RMEM_TEST_TRANSPORT=%s: not \"tcp\", \"rdma\" or \"tls\"", t);
	return -EINVAL;
}

/* Under tls: listen.tls with $RMEM_TEST_TLS_DIR's server certificate
 * (tests/lib/tlscerts.sh), and the endpoint's CA that verifies it. */
static int tls_opts(struct rmemd_opts *o)
{
	static char listen[600], query[320];
	const char *dir = env_or_null("RMEM_TEST_TLS_DIR");

	if (!harness_tls())
		return 0;
	if (!dir) {
		diag("RMEM_TEST_TRANSPORT=tls needs RMEM_TEST_TLS_DIR (tests/func/tls/over-tls)");
		return -EINVAL;
	}
	snprintf(listen, sizeof listen, "%s/server.pem,%s/server.key", dir, dir);
	snprintf(query, sizeof query, "?tls_ca=%s/ca.pem", dir);
	o->listen_tls = listen;
	o->ep_scheme = "tls://";
	o->ep_query = query;
	return 0;
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
static bool rdma_listen(void)
{
	const char *r = env_or_null("RMEM_TEST_RDMA");

	return r ? strcmp(r, "1") == 0 : harness_rdma();
}

int harness_opts(struct rmemd_opts *o, const char *pool_size, const char *extra)
{
	int rc = check_transport();

	if (rc < 0)
		return rc;
	if (!test_host_or_null()) {
		/* A whole program over rdma outside the test VM: nothing to run. */
		tap_skip_all("RMEM_TEST_TRANSPORT=rdma needs RMEM_VM_RDMA_ADDR "
			     "(the Soft-RoCE VM, tests/vm)");
	}
	rmemd_opts_init(o);
	o->host = test_host();
	o->listen_rdma = rdma_listen();
	o->pool_size = pool_size;
	o->extra = extra;
	o->ep_scheme = harness_rdma() ? "rdma://" : "";
	return tls_opts(o);
}

int rmemd_start(struct rmemd *d, const char *pool_size, const char *extra)
{
	struct rmemd_opts o;
	int rc;

	memset(d, 0, sizeof *d);
	d->sup_in = -1;
	rc = harness_opts(&o, pool_size, extra);
	if (rc < 0)
		return rc;
	return rmemd_start_opts(d, &o);
}

bool harness_start(struct rmemd *d, const char *pool_size, const char *extra)
{
	int rc = rmemd_start(d, pool_size, extra);

	if (rc == -ENOENT)
		tap_skip_all("no rmemd in $RMEM_BUILD");
	return ok(rc == 0, "rmemd starts and sends READY=1 (%d)", rc);
}

int harness_finish(struct rmemd *d)
{
	int rc = rmemd_stop(d);

	ok(rc == 0, "rmemd exits 0 on SIGTERM (%d)", rc);
	rmemd_cleanup(d);
	return tap_done();
}

int harness_main(const char *pool_size, const char *extra, void (*fn)(const struct rmemd *d))
{
	struct rmemd d;

	if (!harness_start(&d, pool_size, extra))
		return tap_done();
	fn(&d);
	return harness_finish(&d);
}

void harness_both(const struct rmemd *d, void (*fn)(const char *ep, const char *transport))
{
	fn(d->tcp_ep, harness_transport());
	fn(d->unix_ep, "unix");
}

void close_fd(int fd)
{
	if (fd >= 0)
		close(fd);
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

int client_connect_as(const struct rmemd *d, const char *tenant, const char *key_file,
		      rmem_client **out)
{
	struct rmem_opts o;

	rmem_opts_init(&o, sizeof o);
	o.tenant = tenant;
	o.secret_file = key_file;
	return rmem_connect(d->tcp_ep, &o, out);
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

int alloc_quota_wait(rmem_client *c, uint64_t size, struct rmem_region *r, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	int rc;

	while ((rc = rmem_alloc(c, size, 0, r)) == -EDQUOT && now_ms() < deadline)
		sleep_ms(20);
	return rc;
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

void region_pattern(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

int region_fill(rmem_client *c, const struct rmem_region *r, size_t len, uint64_t seed)
{
	uint8_t *buf = malloc(len);
	int rc = -ENOMEM;

	if (buf) {
		region_pattern(buf, len, seed);
		rc = rmem_write(c, r, 0, buf, len);
	}
	free(buf);
	return rc;
}

int region_check(rmem_client *c, const struct rmem_region *r, size_t len, uint64_t seed)
{
	uint8_t *want = malloc(len), *got = malloc(len);
	int rc = -ENOMEM;

	if (want && got) {
		region_pattern(want, len, seed);
		rc = rmem_read(c, r, 0, got, len);
		if (rc == 0 && memcmp(want, got, len))
			rc = 1;
	}
	free(want);
	free(got);
	return rc;
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

/* ---- raw frames -------------------------------------------------------------- */

int raw_connect_tcp(uint16_t port)
{
	return raw_connect(test_host(), port);
}

int raw_session(const struct rmemd *d, bool over_unix)
{
	int fd = over_unix ? raw_connect_unix(d->admin_path) : raw_connect_tcp(d->port);
	int rc;

	if (fd < 0)
		return fd;
	rc = raw_hello(fd, 1);
	if (rc != 0) {
		close(fd);
		return rc > 0 ? -rc : rc;
	}
	return fd;
}

/* ---- the metrics page ---------------------------------------------------------- */

#define METRICS_PAGE_MAX (1 << 20)

int metrics_request(const struct rmemd *d, const char *method, const char *path, int wait_ms,
		    char **text, int *status)
{
	char req[256];
	size_t len = 0;
	uint64_t deadline = now_ms() + (uint64_t)wait_ms;
	int fd = raw_connect(d->addr, d->metrics_port), n;
	char *t = NULL;

	*text = NULL;
	*status = 0;
	if (fd < 0)
		return fd;
	n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: test\r\n\r\n", method, path);
	t = calloc(1, METRICS_PAGE_MAX + 1);
	if (!t || n < 0 || (size_t)n >= sizeof req || raw_send(fd, req, (size_t)n) < 0)
		goto fail;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t got;

		if (poll(&pfd, 1, ms_left(deadline)) <= 0)
			goto fail;
		got = read(fd, t + len, METRICS_PAGE_MAX - len);
		if (got < 0)
			goto fail;
		if (got == 0)
			break;
		len += (size_t)got;
		if (len == METRICS_PAGE_MAX)
			goto fail;
	}
	close(fd);
	if (sscanf(t, "HTTP/1.%*d %d", status) != 1) {
		free(t);
		return -EBADMSG;
	}
	*text = t;
	return 0;
fail:
	close(fd);
	free(t);
	return -EIO;
}

double metrics_sample(const char *page, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, series, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
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
	uint64_t deadline = now_ms() + CHILD_END_TIMEOUT_MS;
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

int harness_keys_make(char *dir, struct harness_key *keys, size_t n)
{
	if (!mkdtemp(dir))
		return -errno;
	for (size_t i = 0; i < n; i++) {
		snprintf(keys[i].path, sizeof keys[i].path, "%s/%s", dir, keys[i].name);
		if (write_file(keys[i].path, keys[i].secret, keys[i].mode) < 0)
			return -EIO;
	}
	return 0;
}

void harness_keys_remove(const char *dir, const struct harness_key *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		unlink(keys[i].path);
	rmdir(dir);
}

int child_reexec(int wfd, const char *const *args)
{
	char fd[16];
	const char *argv[16];
	size_t n = 0;
	int keep = dup(wfd);	/* without close-on-exec */

	if (keep < 0)
		return 4;
	while (args[n] && n < sizeof argv / sizeof argv[0] - 2) {
		argv[n] = args[n];
		n++;
	}
	snprintf(fd, sizeof fd, "%d", keep);
	argv[n++] = fd;
	argv[n] = NULL;
	/* execv's argv is char *const[] for historical reasons; it does not
	 * write to the strings. */
	execv("/proc/self/exe", (char *const *)argv);
	return 127;
}

int reply_read_data(const struct raw_reply *r, void *out, uint32_t len)
{
	if (r->status == 0 && r->length != PROTO_STATUS_LEN + len)
		return -EBADMSG;
	if (r->status == 0)
		memcpy(out, r->payload + PROTO_STATUS_LEN, len);
	return r->status;
}
