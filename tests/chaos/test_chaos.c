/*
 * test_chaos.c - rmemd in a hostile world, under ASan and LeakSanitizer.
 *
 * CLIENTS client processes (client.c) allocate, write, read back and verify,
 * while this driver, at random (seeded: the seed is printed, and
 * RMEM_CHAOS_SEED=N replays the same choices), SIGKILLs clients and starts
 * new ones, freezes others with SIGSTOP past their lease and thaws them
 * (their next call must fail with -ECONNRESET, and they reconnect), and
 * opens garbage connections (garbage.c).  RMEM_CHAOS_SECONDS sets how long
 * (default 25).  Clients also create named regions, which outlive their
 * creator's kill, and adopt each other's (open read-only, verify, unlink),
 * learning the names from a file this driver hands them.  Afterwards the
 * daemon must answer, every surviving client must have read back exactly what
 * it wrote, the driver unlinks the names nobody adopted (and the admin
 * listing then runs empty), used_bytes must come back to 0 once everyone is
 * gone, and rmemd must exit 0 on SIGTERM with no sanitizer report (a leak
 * makes it exit non-zero).
 *
 * Over RDMA (RMEM_TEST_TRANSPORT=rdma, tests/chaos/rdma/test_chaos) the
 * clients' data goes over their queue pairs; garbage stays on the stream.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chaos.h"
#include "harness.h"
#include "tap.h"

#define CLIENTS          8
#define DEFAULT_SECONDS  25
#define LEASE_MS         500
#define FRAME_MS         1000
/* Frozen long enough for the lease to run out and the daemon's timer to see
 * it (it looks every quarter lease). */
#define FROZEN_MIN_MS    (LEASE_MS * 2 + 300)
#define FROZEN_MAX_MS    (LEASE_MS * 4)
#define STALL_MAX_MS     (FRAME_MS * 3)
/* A client younger than this may not have its session yet: frozen then, it
 * would have nothing to lose. */
#define FREEZE_MIN_AGE_MS 1000
#define MAX_STALLED      16
#define REPORT_WAIT_MS   60000
#define NAMES_WAIT_MS    15000
#define NAMES_PAGE       64

#define LIMITS "limits = { max_clients = 64; lease_timeout_ms = 500; frame_timeout_ms = 1000; };"

struct slot {
	struct child ch;
	struct chaos_client_arg arg;
	uint64_t started_at;
	uint64_t thaw_at;        /* frozen until then; 0: running */
	unsigned frozen;         /* times frozen past the lease and thawed */
};

struct stalled {
	int fd;
	uint64_t close_at;
};

struct chaos {
	struct rmemd d;
	struct chaos_target target;
	uint64_t rng;
	int stop_pipe[2];
	struct slot slots[CLIENTS];
	struct stalled stalled[MAX_STALLED];
	unsigned nstalled;
	char names_path[40];     /* the clients' names file (chaos_client_arg) */
	char killed_path[40];    /* the seeds of the clients killed */
	/* figures */
	unsigned started, kills, stops, garbage, garbage_failed, stalls_dropped, died;
	struct chaos_report sum;
	unsigned survivors, frozen_survivors, frozen_unreset;
	/* names recorded in the file, those of clients gone before the end,
	 * and those the driver had to unlink */
	unsigned names_recorded, names_of_gone, names_left, gone_left;
	char *recorded;          /* the names file, "\n" first, to look names up */
};

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (!v || !*v)
		return dflt;
	errno = 0;
	x = strtoull(v, &end, 0);
	if (errno || *end) {
		diag("%s=%s is not a number; using %llu", name, v, (unsigned long long)dflt);
		return dflt;
	}
	return x;
}

/* The daemon must report leaks, and a leak must fail its exit status. */
static void want_leak_checks(void)
{
	const char *old = getenv("ASAN_OPTIONS");
	char opts[1024];

	snprintf(opts, sizeof opts, "%s%sdetect_leaks=1", old && *old ? old : "",
		 old && *old ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
}

/* ---- clients ---------------------------------------------------------------- */

/* Empty files: for the clients to record their names in, and for the
 * driver to record whom it killed. */
static int names_files(struct chaos *x)
{
	int fd;

	snprintf(x->names_path, sizeof x->names_path, "/tmp/rmem-chaos-names.XXXXXX");
	snprintf(x->killed_path, sizeof x->killed_path, "/tmp/rmem-chaos-killed.XXXXXX");
	fd = mkstemp(x->names_path);
	if (fd < 0)
		return -errno;
	close(fd);
	fd = mkstemp(x->killed_path);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* Appends a dead client's seed to the killed file: adopters of its names
 * then know that the names outlived it. */
static void record_killed(struct chaos *x, uint64_t seed)
{
	FILE *f = fopen(x->killed_path, "a");

	if (!f)
		return;
	fprintf(f, "%llu\n", (unsigned long long)seed);
	fclose(f);
}

static int client_body(int wfd, void *arg)
{
	struct chaos_client_arg *a = arg;

	/* Nothing of the driver's but the two pipes: a garbage connection held
	 * open by a client would outlive its closing by the driver. */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != wfd && fd != a->stop_fd)
			close(fd);
	return chaos_client_main(wfd, arg);
}

static int start_client(struct chaos *x, struct slot *s)
{
	int rc;

	s->arg.endpoint = x->d.tcp_ep;
	s->arg.seed = chaos_rand(&x->rng);
	s->arg.stop_fd = x->stop_pipe[0];
	s->arg.names_path = x->names_path;
	s->arg.killed_path = x->killed_path;
	s->started_at = now_ms();
	s->thaw_at = 0;
	s->frozen = 0;
	rc = child_spawn(&s->ch, client_body, &s->arg);
	if (rc == 0)
		x->started++;
	return rc;
}

/* A client that ended by itself during the run crashed or gave up. */
static void reap_dead(struct chaos *x)
{
	for (unsigned i = 0; i < CLIENTS; i++) {
		struct slot *s = &x->slots[i];
		siginfo_t si = { 0 };

		if (s->ch.pid <= 0 ||
		    waitid(P_PID, (id_t)s->ch.pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
		    si.si_pid == 0)
			continue;
		diag("client %d ended by itself: exit status %d", (int)s->ch.pid,
		     child_end(&s->ch, 0));
		x->died++;
		start_client(x, s);
	}
}

static void kill_one(struct chaos *x)
{
	struct slot *s = &x->slots[chaos_rand(&x->rng) % CLIENTS];

	if (s->ch.pid <= 0)
		return;
	child_end(&s->ch, SIGKILL);
	x->kills++;
	record_killed(x, s->arg.seed);
	start_client(x, s);
}

static unsigned frozen_now(const struct chaos *x)
{
	unsigned n = 0;

	for (unsigned i = 0; i < CLIENTS; i++)
		n += x->slots[i].thaw_at != 0;
	return n;
}

static void freeze_one(struct chaos *x)
{
	struct slot *s = &x->slots[chaos_rand(&x->rng) % CLIENTS];

	if (s->ch.pid <= 0 || s->thaw_at || frozen_now(x) >= CLIENTS / 2 ||
	    now_ms() - s->started_at < FREEZE_MIN_AGE_MS)
		return;
	kill(s->ch.pid, SIGSTOP);
	s->thaw_at = now_ms() + chaos_between(&x->rng, FROZEN_MIN_MS, FROZEN_MAX_MS);
	x->stops++;
}

static void thaw_due(struct chaos *x, bool all)
{
	uint64_t now = now_ms();

	for (unsigned i = 0; i < CLIENTS; i++) {
		struct slot *s = &x->slots[i];

		if (s->thaw_at && (all || now >= s->thaw_at)) {
			kill(s->ch.pid, SIGCONT);
			/* Thawed early at the end, its lease may not have run out. */
			if (now >= s->thaw_at)
				s->frozen++;
			s->thaw_at = 0;
		}
	}
}

/* ---- garbage ---------------------------------------------------------------- */

/* A stalled connection the daemon has closed reads EOF (or a reset) at once;
 * what it sent before (an ERROR frame) is drained on the way. */
static bool closed_by_daemon(int fd)
{
	uint8_t buf[4096];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0)
			return false;
	}
}

static void close_stalled(struct chaos *x, bool all)
{
	uint64_t now = now_ms();

	for (unsigned i = 0; i < x->nstalled;) {
		struct stalled *st = &x->stalled[i];

		if (!all && now < st->close_at) {
			i++;
			continue;
		}
		if (closed_by_daemon(st->fd))
			x->stalls_dropped++;
		close(st->fd);
		*st = x->stalled[--x->nstalled];
	}
}

static void open_garbage(struct chaos *x)
{
	enum chaos_garbage_kind kind = (enum chaos_garbage_kind)(chaos_rand(&x->rng) %
								  GARBAGE_KINDS);
	int fd, rc;

	if (kind == GARBAGE_STALLED && x->nstalled == MAX_STALLED)
		kind = GARBAGE_RANDOM;
	rc = chaos_garbage(&x->target, kind, &x->rng, &fd);
	if (rc < 0) {
		x->garbage_failed++;
		diag("garbage connection (kind %d): %s", (int)kind, strerror(-rc));
		return;
	}
	x->garbage++;
	if (fd >= 0)
		x->stalled[x->nstalled++] = (struct stalled){
			.fd = fd, .close_at = now_ms() + chaos_between(&x->rng, FRAME_MS / 2,
								       STALL_MAX_MS) };
}

/* ---- the run ------------------------------------------------------------------ */

static void run_chaos(struct chaos *x, uint64_t seconds)
{
	uint64_t end = now_ms() + seconds * 1000;

	while (now_ms() < end) {
		uint64_t dice = chaos_rand(&x->rng) % 100;

		sleep_ms((int)chaos_between(&x->rng, 40, 200));
		reap_dead(x);
		thaw_due(x, false);
		close_stalled(x, false);
		if (dice < 12)
			kill_one(x);
		else if (dice < 32)
			freeze_one(x);
		else if (dice < 80)
			open_garbage(x);
	}
}

/* The whole report from a client's pipe: 0, -ETIMEDOUT, or -EPIPE when the
 * client closed it first. */
static int read_report(int fd, struct chaos_report *r)
{
	uint64_t deadline = now_ms() + REPORT_WAIT_MS;
	uint8_t *p = (uint8_t *)r;
	size_t left = sizeof *r;

	while (left) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			return -errno;
		n = read(fd, p, left);
		if (n == 0)
			return -EPIPE;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (n > 0) {
			p += n;
			left -= (size_t)n;
		}
	}
	return 0;
}

/* Reads a survivor's report and reaps it. */
static void collect(struct chaos *x, struct slot *s)
{
	struct chaos_report r;
	int rc = read_report(s->ch.rfd, &r);
	int status;

	status = child_end(&s->ch, rc < 0 ? SIGKILL : 0);
	if (rc < 0 || status != 0) {
		diag("a survivor sent no report (%s), exit status %d",
		     rc < 0 ? strerror(-rc) : "ok", status);
		x->died++;
		return;
	}
	x->survivors++;
	x->sum.ops += r.ops;
	x->sum.verified += r.verified;
	x->sum.mismatches += r.mismatches;
	x->sum.foreign += r.foreign;
	x->sum.resets += r.resets;
	x->sum.reconnects += r.reconnects;
	x->sum.connect_fails += r.connect_fails;
	x->sum.enomem += r.enomem;
	x->sum.errors += r.errors;
	x->sum.named_created += r.named_created;
	x->sum.named_adopted += r.named_adopted;
	x->sum.named_orphans += r.named_orphans;
	x->sum.named_unlinked += r.named_unlinked;
	x->sum.named_gone += r.named_gone;
	if (r.errors)
		diag("a client saw %llu errors, the last %s", (unsigned long long)r.errors,
		     strerror(-r.last_error));
	if (s->frozen) {
		x->frozen_survivors++;
		/* Frozen in the middle of a connect, it sees that connect fail. */
		if (!r.resets && !r.connect_fails)
			x->frozen_unreset++;
	}
}

static void finish_clients(struct chaos *x)
{
	thaw_due(x, true);
	close(x->stop_pipe[1]);
	x->stop_pipe[1] = -1;
	for (unsigned i = 0; i < CLIENTS; i++)
		if (x->slots[i].ch.pid > 0)
			collect(x, &x->slots[i]);
	close(x->stop_pipe[0]);
}

/* ---- named regions left behind ------------------------------------------------ */

/* Whether a client still in a slot at the end created name. */
static bool by_survivor(const struct chaos *x, const char *name)
{
	char own[40];

	for (unsigned i = 0; i < CLIENTS; i++) {
		snprintf(own, sizeof own, CHAOS_NAME_PREFIX "%llu/",
			 (unsigned long long)x->slots[i].arg.seed);
		if (strncmp(name, own, strlen(own)) == 0)
			return true;
	}
	return false;
}

/* Reads the names file into x->recorded and counts its lines, and those of
 * clients killed (or dead) before the end. */
static void count_recorded(struct chaos *x)
{
	FILE *f = fopen(x->names_path, "r");
	char line[RMEM_NAME_MAX + 2];
	size_t len = 1, cap = 4096;

	x->recorded = malloc(cap);
	if (!f || !x->recorded) {
		if (f)
			fclose(f);
		return;
	}
	x->recorded[0] = '\n';
	x->recorded[1] = 0;
	while (fgets(line, sizeof line, f)) {
		size_t n = strlen(line);
		char *more = len + n + 1 > cap ? realloc(x->recorded, cap *= 2) : x->recorded;

		if (!more)
			break;
		x->recorded = more;
		memcpy(x->recorded + len, line, n + 1);
		len += n;
		x->names_recorded++;
		x->names_of_gone += !by_survivor(x, line);
	}
	fclose(f);
}

/* Whether name is a whole line of the names file. */
static bool was_recorded(const struct chaos *x, const char *name)
{
	char line[RMEM_NAME_MAX + 3];

	snprintf(line, sizeof line, "\n%s\n", name);
	return x->recorded && strstr(x->recorded, line) != NULL;
}

/* Unlinks every chaos name still there (not yet unlinked): those nobody
 * adopted, and those whose creator died between creating and recording.
 * The count, or a negative errno. */
static int unlink_left(struct chaos *x, rmem_client *admin)
{
	struct rmem_name_info page[NAMES_PAGE];
	uint64_t after = 0;
	int n, rc;

	while ((n = rmem_names(admin, after, page, NAMES_PAGE)) > 0) {
		for (int i = 0; i < n; i++) {
			if (page[i].flags & RMEM_NAME_UNLINKED ||
			    strncmp(page[i].name, CHAOS_NAME_PREFIX, strlen(CHAOS_NAME_PREFIX)))
				continue;
			rc = rmem_unlink(admin, page[i].name);
			if (rc < 0)
				return rc;
			x->names_left++;
			x->gone_left += !by_survivor(x, page[i].name) &&
					was_recorded(x, page[i].name);
		}
		after = page[n - 1].id;
	}
	return n;
}

/* Polls the admin listing until it is empty: every handle is gone once the
 * daemon has seen every client's end. */
static int names_wait_empty(rmem_client *admin, int *last)
{
	struct rmem_name_info info;
	uint64_t deadline = now_ms() + NAMES_WAIT_MS;

	for (;;) {
		*last = rmem_names(admin, 0, &info, 1);
		if (*last <= 0)
			return *last;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		sleep_ms(20);
	}
}

static void check_names(struct chaos *x)
{
	rmem_client *admin = NULL;
	int rc = client_connect(x->d.unix_ep, 10000, &admin), last = 0;

	count_recorded(x);
	ok(x->names_recorded > 0 && x->sum.named_adopted > 0,
	   "clients recorded %u named regions; survivors adopted %llu of them, verified "
	   "through read-only handles", x->names_recorded,
	   (unsigned long long)x->sum.named_adopted);
	ok(x->kills == 0 || x->sum.named_orphans > 0,
	   "%llu of those had a creator killed before the open: named regions outlive "
	   "their creator (%u kills)", (unsigned long long)x->sum.named_orphans, x->kills);
	if (rc)
		admin = NULL;
	rc = admin ? unlink_left(x, admin) : rc;
	ok(rc == 0, "the driver unlinks the %u names left (%s)", x->names_left,
	   rc ? rmem_strerror(rc) : "ok");
	/* A recorded name of a killed creator that is no longer there was
	 * opened, verified and unlinked by another client. */
	ok(x->names_of_gone == 0 || x->gone_left < x->names_of_gone,
	   "of the %u names recorded by clients killed before the end, others adopted "
	   "and unlinked %u", x->names_of_gone, x->names_of_gone - x->gone_left);
	rc = admin ? names_wait_empty(admin, &last) : -ENOTCONN;
	ok(rc == 0, "then the admin listing runs empty (%s, %d names listed)",
	   rc ? rmem_strerror(rc) : "ok", last);
	rmem_close(admin);
	free(x->recorded);
	x->recorded = NULL;
}

static void check_daemon(struct chaos *x)
{
	rmem_client *c = NULL;
	struct rmem_stats st = { 0 };
	uint64_t swept = 0;
	int rc = client_connect(x->d.tcp_ep, 10000, &c);

	ok(rc == 0, "the daemon still accepts a client (%s)", rc ? rmem_strerror(rc) : "ok");
	if (rc)
		c = NULL;
	rc = c ? stats_wait(c, 0, 0, 15000, &st) : -ENOTCONN;
	ok(rc == 0, "used_bytes back to 0 once every client is gone (%llu bytes, %llu regions)",
	   (unsigned long long)st.used_bytes, (unsigned long long)st.regions);
	rmem_close(c);
	c = NULL;
	/* The sweep reads 16 MiB per call: over RDMA in the VM one call can
	 * outlast the 500 ms lease (the keepalive waits for the call), so it
	 * goes over the Unix socket, whose data path renews the lease. */
	rc = client_connect(x->d.unix_ep, 10000, &c);
	if (rc == 0)
		rc = sweep_free_memory(c, &swept);
	else
		c = NULL;
	ok(rc == 0, "all %llu free bytes read zero (%s)", (unsigned long long)swept,
	   rc ? rmem_strerror(rc) : "ok");
	if (rc)
		rmemd_log_tail(&x->d, 20);
	rmem_close(c);
}

static void check_clients(const struct chaos *x)
{
	ok(x->died == 0, "no client died by itself (%u did)", x->died);
	ok(x->survivors > 0, "%u clients survived to report", x->survivors);
	ok(x->sum.mismatches == 0, "every read returned what was written (%llu mismatches)",
	   (unsigned long long)x->sum.mismatches);
	ok(x->sum.foreign == 0, "no client saw bytes that were not its own (%llu times)",
	   (unsigned long long)x->sum.foreign);
	ok(x->sum.errors == 0, "no client saw an error other than -ECONNRESET (%llu)",
	   (unsigned long long)x->sum.errors);
	ok(x->frozen_unreset == 0,
	   "every survivor frozen past its lease got -ECONNRESET and reconnected "
	   "(%u of %u did not)", x->frozen_unreset, x->frozen_survivors);
}

static void print_figures(const struct chaos *x, uint64_t t0)
{
	const struct chaos_report *r = &x->sum;

	diag("clients %u (%u at once), kills %u, stops %u, garbage connections %u "
	     "(%u stalled ones dropped by the daemon, %u could not connect)",
	     x->started, CLIENTS, x->kills, x->stops, x->garbage, x->stalls_dropped,
	     x->garbage_failed);
	diag("survivors %u (%u of them frozen and thawed): %llu calls, %llu bytes verified",
	     x->survivors, x->frozen_survivors, (unsigned long long)r->ops,
	     (unsigned long long)r->verified);
	diag("survivors saw %llu resets, made %llu reconnects (%llu connects failed), "
	     "%llu ENOMEM", (unsigned long long)r->resets, (unsigned long long)r->reconnects,
	     (unsigned long long)r->connect_fails, (unsigned long long)r->enomem);
	diag("named regions: %u recorded (%u by clients gone before the end); survivors "
	     "created %llu, adopted %llu (%llu of killed creators), unlinked %llu, found %llu gone; the driver unlinked "
	     "%u", x->names_recorded, x->names_of_gone, (unsigned long long)r->named_created,
	     (unsigned long long)r->named_adopted, (unsigned long long)r->named_orphans,
	     (unsigned long long)r->named_unlinked,
	     (unsigned long long)r->named_gone, x->names_left);
	diag("duration %.1f s", (double)(now_ms() - t0) / 1000.0);
}

int main(void)
{
	struct chaos *x = calloc(1, sizeof *x);
	uint64_t seed, seconds, t0;
	int rc;

	if (!x)
		tap_skip_all("out of memory");
	seed = env_u64("RMEM_CHAOS_SEED", (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
	seconds = env_u64("RMEM_CHAOS_SECONDS", DEFAULT_SECONDS);
	diag("seed %llu (RMEM_CHAOS_SEED=%llu replays the driver's choices), %llu s, %s",
	     (unsigned long long)seed, (unsigned long long)seed, (unsigned long long)seconds,
	     harness_transport());
	x->rng = seed;
	want_leak_checks();
	if (rmemd_start(&x->d, "64M", LIMITS) < 0)
		tap_skip_all("rmemd did not start");
	x->target.port = x->d.port;
	x->target.admin_path = x->d.admin_path;
	if (pipe(x->stop_pipe) < 0)
		tap_skip_all("pipe failed");
	rc = names_files(x);
	if (rc < 0)
		tap_skip_all("cannot create the names file");
	t0 = now_ms();
	for (unsigned i = 0; i < CLIENTS; i++)
		if (start_client(x, &x->slots[i]) < 0)
			diag("cannot start client %u", i);
	run_chaos(x, seconds);
	finish_clients(x);
	close_stalled(x, true);

	check_clients(x);
	check_names(x);
	check_daemon(x);
	rc = rmemd_stop(&x->d);
	ok(rc == 0, "rmemd exits 0 on SIGTERM (%d)", rc);
	ok(!rmemd_log_contains(&x->d, "Sanitizer") && !rmemd_log_contains(&x->d, "runtime error"),
	   "no sanitizer report in the daemon's log");
	print_figures(x, t0);
	rmemd_cleanup(&x->d);
	unlink(x->names_path);
	unlink(x->killed_path);
	free(x);
	return tap_done();
}
