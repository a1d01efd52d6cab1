/*
 * daemon.c - see daemon.h.  rmemd for the C tests, through the one starter
 * (tests/lib/rmemd_start.py): this file turns options into its arguments
 * and calls into command lines; the config, the notify socket, the fd
 * store and the port retries are the starter's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "tap.h"

#define STOP_TIMEOUT_MS  30000
#define STARTER          "tests/lib/rmemd_start.py"
#define MAX_ARGS         40

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

/* ---- talking to the starter ------------------------------------------------------- */

/* The starter's next line into reply (no newline); 0, or -EPIPE when the
 * starter is gone. */
static int read_reply(struct rmemd *d, char *reply, size_t len)
{
	if (!d->sup_out || !fgets(reply, (int)len, d->sup_out))
		return -EPIPE;
	reply[strcspn(reply, "\n")] = '\0';
	return 0;
}

/* Sends cmd and reads the one line that answers it. */
static int call(struct rmemd *d, const char *cmd, char *reply, size_t len)
{
	size_t n = strlen(cmd);

	if (d->sup_in < 0)
		return -EPIPE;
	if (write(d->sup_in, cmd, n) != (ssize_t)n || write(d->sup_in, "\n", 1) != 1)
		return -EPIPE;
	return read_reply(d, reply, len);
}

/* VALUE of " KEY=VALUE" in a ready line, copied into out; 0 or -ENOENT. */
static int field(const char *line, const char *key, char *out, size_t len)
{
	size_t k = strlen(key);
	const char *p = line;

	while ((p = strchr(p, ' ')) != NULL) {
		p++;
		if (!strncmp(p, key, k) && p[k] == '=') {
			size_t n = strcspn(p + k + 1, " ");

			snprintf(out, len, "%.*s", (int)n, p + k + 1);
			return 0;
		}
	}
	out[0] = '\0';
	return -ENOENT;
}

static uint16_t field_port(const char *line, const char *key)
{
	char v[16];

	return field(line, key, v, sizeof v) ? 0 : (uint16_t)strtoul(v, NULL, 10);
}

/* Takes in what a "ready ..." line says; 0, -ECHILD for "failed exit N",
 * -ETIMEDOUT for "failed timeout", -EPROTO for anything else. */
static int take_ready(struct rmemd *d, const char *line, const char *ep_scheme,
		      const char *ep_query)
{
	char pid[16];

	if (strncmp(line, "ready ", 6)) {
		diag("rmemd did not get ready: %s", line);
		if (!strncmp(line, "failed exit", 11))
			return -ECHILD;
		return strncmp(line, "failed timeout", 14) ? -EPROTO : -ETIMEDOUT;
	}
	field(line, "pid", pid, sizeof pid);
	d->pid = (pid_t)strtol(pid, NULL, 10);
	if (ep_scheme) {
		field(line, "conf", d->conf_path, sizeof d->conf_path);
		field(line, "log", d->log_path, sizeof d->log_path);
		field(line, "admin", d->admin_path, sizeof d->admin_path);
		field(line, "notify", d->notify_path, sizeof d->notify_path);
		field(line, "host_port", d->host_port, sizeof d->host_port);
		d->port = field_port(line, "port");
		d->rdma_port = field_port(line, "rdma_port");
		d->metrics_port = field_port(line, "metrics_port");
		snprintf(d->tcp_ep, sizeof d->tcp_ep, "%s%s%s", ep_scheme, d->host_port,
			 ep_query ? ep_query : "");
		snprintf(d->unix_ep, sizeof d->unix_ep, "unix:%s", d->admin_path);
		field(line, "metrics_host_port", d->metrics_host_port,
		      sizeof d->metrics_host_port);
	}
	return d->pid > 0 ? 0 : -EPROTO;
}

/* ---- starting -------------------------------------------------------------------- */

struct argv {
	const char *v[MAX_ARGS + 1];
	char num[4][16];
	int n;
};

static void arg(struct argv *a, const char *s)
{
	if (a->n < MAX_ARGS)
		a->v[a->n++] = s;
}

static void arg_int(struct argv *a, int slot, const char *name, int value)
{
	snprintf(a->num[slot], sizeof a->num[slot], "%d", value);
	arg(a, name);
	arg(a, a->num[slot]);
}

static void build_argv(struct argv *a, const struct rmemd *d, const struct rmemd_opts *o)
{
	memset(a, 0, sizeof *a);
	arg(a, "python3");
	arg(a, STARTER);
	arg(a, "--dir");
	arg(a, d->dir);
	arg(a, "--host");
	arg(a, o->host);
	arg(a, "--pool");
	arg(a, o->pool_size);
	arg_int(a, 0, "--lease-ms", o->lease_timeout_ms);
	arg_int(a, 1, "--ready-ms", o->ready_timeout_ms);
	if (o->listen_rdma)
		arg(a, "--rdma");
	if (o->metrics)
		arg(a, "--metrics");
	if (o->rdma_group) {
		arg(a, "--rdma-group");
		arg(a, o->rdma_group);
	}
	if (o->extra) {
		arg(a, "--extra");
		arg(a, o->extra);
	}
	if (o->listen_tls) {
		arg(a, "--listen-tls");
		arg(a, o->listen_tls);
	}
	a->v[a->n] = NULL;
}

static int spawn_starter(struct rmemd *d, const struct argv *a)
{
	int in[2], out[2];
	pid_t parent = getpid(), pid;

	if (pipe2(in, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(out, O_CLOEXEC) < 0) {
		int rc = -errno;

		close(in[0]);
		close(in[1]);
		return rc;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		int rc = -errno;

		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		return rc;
	}
	if (pid == 0) {
		/* A test that dies must not leave its daemon behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(126);
		execvp(a->v[0], (char *const *)a->v);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	d->sup_pid = pid;
	d->sup_in = in[1];
	d->sup_out = fdopen(out[0], "r");
	if (!d->sup_out) {
		close(out[0]);
		return -ENOMEM;
	}
	return 0;
}

int rmemd_start_opts(struct rmemd *d, const struct rmemd_opts *o)
{
	char exe[256], line[1024];
	struct argv a;
	int rc;

	memset(d, 0, sizeof *d);
	d->sup_in = -1;
	if (strlen(o->host) >= sizeof d->addr)
		return -ENAMETOOLONG;
	memcpy(d->addr, o->host, strlen(o->host) + 1);
	snprintf(exe, sizeof exe, "%s/rmemd", rmemd_build_dir());
	if (access(exe, X_OK) < 0 || access(STARTER, R_OK) < 0) {
		rc = -errno;
		diag("%s or %s: %s", exe, STARTER, strerror(-rc));
		return rc;
	}
	memcpy(d->dir, "/tmp/rmemt.XXXXXX", sizeof "/tmp/rmemt.XXXXXX");
	if (!mkdtemp(d->dir)) {
		rc = -errno;
		diag("mkdtemp: %s", strerror(-rc));
		d->dir[0] = '\0';
		return rc;
	}
	/* The log's path is known before the starter says it: a failed start
	 * leaves its tail to print. */
	snprintf(d->log_path, sizeof d->log_path, "%s/rmemd.log", d->dir);
	build_argv(&a, d, o);
	rc = spawn_starter(d, &a);
	/* The first start needs no command: its answer is the first line. */
	if (rc == 0)
		rc = read_reply(d, line, sizeof line);
	if (rc == 0)
		rc = take_ready(d, line, o->ep_scheme, o->ep_query);
	if (rc == 0)
		return 0;
	diag("could not start %s/rmemd: %s", rmemd_build_dir(),
	     rc == -ECHILD ? "it exited" : strerror(-rc));
	rmemd_log_tail(d, 40);
	rmemd_cleanup(d);
	return rc;
}

/* ---- stopping ----------------------------------------------------------------------- */

static const char *signame(int sig)
{
	switch (sig) {
	case SIGTERM: return "TERM";
	case SIGKILL: return "KILL";
	case SIGINT:  return "INT";
	case SIGQUIT: return "QUIT";
	case SIGHUP:  return "HUP";
	default:      return NULL;
	}
}

/* "exit N" -> N; "timeout" -> -ETIMEDOUT; else -EPROTO. */
static int exit_status(const char *line)
{
	if (!strncmp(line, "exit ", 5))
		return (int)strtol(line + 5, NULL, 10);
	return strcmp(line, "timeout") ? -EPROTO : -ETIMEDOUT;
}

int rmemd_stop(struct rmemd *d)
{
	char cmd[48], line[256];
	int result;

	if (d->pid <= 0)
		return -ECHILD;
	snprintf(cmd, sizeof cmd, "stop TERM %d", STOP_TIMEOUT_MS);
	if (call(d, cmd, line, sizeof line) < 0)
		return -EPIPE;
	d->pid = 0;
	result = exit_status(line);
	if (result == -ETIMEDOUT)
		diag("rmemd did not stop within %d ms of SIGTERM; killed it", STOP_TIMEOUT_MS);
	if (result != 0) {
		diag("rmemd ended with %s", line);
		rmemd_log_tail(d, 60);
	}
	return result;
}

int rmemd_restart(struct rmemd *d, int sig, int ready_timeout_ms)
{
	char cmd[48], line[1024];
	const char *name = signame(sig);
	int rc;

	if (!name)
		return -EINVAL;
	snprintf(cmd, sizeof cmd, "restart %s %d", name, ready_timeout_ms);
	d->pid = 0;
	rc = call(d, cmd, line, sizeof line);
	if (rc == 0)
		rc = take_ready(d, line, NULL, NULL);
	if (rc < 0) {
		rmemd_log_tail(d, 40);
		rmemd_kill(d);
	}
	return rc;
}

void rmemd_kill(struct rmemd *d)
{
	char line[256];

	if (call(d, "stop KILL", line, sizeof line) == 0)
		d->pid = 0;
}

int rmemd_store_count(struct rmemd *d)
{
	char line[1024];
	int rc = call(d, "store", line, sizeof line);

	if (rc < 0)
		return rc;
	return strncmp(line, "store ", 6) ? -EPROTO : (int)strtol(line + 6, NULL, 10);
}

void rmemd_store_drop(struct rmemd *d)
{
	char line[64];

	call(d, "drop", line, sizeof line);
}

bool rmemd_notified(struct rmemd *d, const char *line)
{
	char cmd[256], reply[16];

	snprintf(cmd, sizeof cmd, "notified %s", line);
	return call(d, cmd, reply, sizeof reply) == 0 && !strcmp(reply, "yes");
}

void rmemd_cleanup(struct rmemd *d)
{
	DIR *dir;
	struct dirent *e;

	/* The end of its input is the starter's sign to kill rmemd and go.
	 * (A struct that never started has sup_pid 0 and nothing open.) */
	if (d->sup_pid > 0 && d->sup_in >= 0)
		close(d->sup_in);
	d->sup_in = -1;
	if (d->sup_out)
		fclose(d->sup_out);
	d->sup_out = NULL;
	if (d->sup_pid > 0)
		while (waitpid(d->sup_pid, NULL, 0) < 0 && errno == EINTR)
			;
	d->sup_pid = 0;
	d->pid = 0;
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
