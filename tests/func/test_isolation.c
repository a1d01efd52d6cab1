/*
 * test_isolation.c - one client's regions belong to it alone: others cannot
 * read, write or free them even with the full handle; and when a client dies
 * (SIGKILL) or exits without closing, the daemon takes its regions back while
 * everybody else's stay intact.
 * With RMEM_TEST_TRANSPORT=rdma (in the test VM) the network endpoint is
 * rdma://: the NIC refuses other clients' keys (-EACCES), a transfer of 0
 * bytes checks nothing there, and freed regions count as used until their
 * quarantine ends (about 200 ms), so figures are awaited, not read once.
 */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define MiB (1024ull * 1024)
#define CHILD_REGIONS 3

struct witness {
	rmem_client *c;
	struct rmem_region r;
	uint8_t *bytes;
	uint64_t seed;
};

static int witness_make(struct witness *w, rmem_client *c, uint64_t size, uint64_t seed)
{
	int rc;

	w->c = c;
	w->seed = seed;
	w->bytes = malloc(size);
	if (!w->bytes)
		return -ENOMEM;
	fill_random(w->bytes, size, seed);
	rc = rmem_alloc(c, size, 0, &w->r);
	if (rc == 0)
		rc = rmem_write(c, &w->r, 0, w->bytes, size);
	return rc;
}

/* 0 when the region still holds exactly the witness bytes. */
static int witness_check(const struct witness *w, uint64_t size)
{
	uint8_t *got = malloc(size);
	int rc;

	if (!got)
		return -ENOMEM;
	rc = rmem_read(w->c, &w->r, 0, got, size);
	if (rc == 0 && memcmp(got, w->bytes, size) != 0)
		rc = -EILSEQ;
	free(got);
	return rc;
}

/* Someone else holding the full handle gets nowhere. */
static void trespass(rmem_client *intruder, const char *who, const struct witness *w)
{
	uint8_t buf[256];
	struct rmem_region mixed;
	int rc;

	rc = rmem_read(intruder, &w->r, 0, buf, sizeof buf);
	ok(rc == -EACCES, "%s reads another client's region with its full handle: -EACCES (%d)",
	   who, rc);
	memset(buf, 0x5a, sizeof buf);
	rc = rmem_write(intruder, &w->r, 0, buf, sizeof buf);
	ok(rc == -EACCES, "%s writes it: -EACCES (%d)", who, rc);
	if (client_on_rdma(intruder)) {
		/* librmem(7): on RDMA a 0-byte transfer moves and checks nothing. */
		rc = rmem_write(intruder, &w->r, 0, buf, 0);
		ok(rc == 0, "%s writes 0 bytes to it over RDMA: nothing checked, nothing moved (%d)",
		   who, rc);
	} else {
		rc = rmem_write(intruder, &w->r, 0, buf, 0);
		ok(rc == -EACCES, "%s writes 0 bytes to it: -EACCES (%d)", who, rc);
	}
	rc = rmem_free(intruder, &w->r);
	ok(rc == -EACCES, "%s frees it: -EACCES (%d)", who, rc);
	mixed = w->r;
	mixed.rkey ^= 0xffff;
	rc = rmem_read(intruder, &mixed, 0, buf, sizeof buf);
	ok(rc == -EACCES, "%s reads it with a guessed key: -EACCES (%d)", who, rc);
}

/* ---- a child client ------------------------------------------------------------ */

struct child_job {
	const char *endpoint;
	bool stay;          /* wait to be killed (true) or exit without rmem_close (false) */
};

struct child_report {
	int status;
	struct rmem_region r[CHILD_REGIONS];
};

static const uint64_t child_sizes[CHILD_REGIONS] = { 4 * MiB, MiB + 1, 4096 };

static int child_client(int wfd, void *arg)
{
	const struct child_job *job = arg;
	struct child_report rep = { .status = 0 };
	rmem_client *c = NULL;
	uint8_t *buf = malloc(4 * MiB);

	rep.status = buf ? client_connect(job->endpoint, 5000, &c) : -ENOMEM;
	for (int i = 0; i < CHILD_REGIONS && rep.status == 0; i++) {
		rep.status = rmem_alloc(c, child_sizes[i], 0, &rep.r[i]);
		if (rep.status == 0) {
			fill_random(buf, child_sizes[i], 900 + (uint64_t)i);
			rep.status = rmem_write(c, &rep.r[i], 0, buf, child_sizes[i]);
		}
	}
	if (write(wfd, &rep, sizeof rep) != (ssize_t)sizeof rep)
		return 3;
	free(buf);
	if (rep.status != 0)
		return 2;
	if (job->stay)
		for (;;)
			pause();
	/* Leaves without rmem_close(): the socket closes as the process ends. */
	return 0;
}

/*
 * The child client runs in a fresh exec of this program ("--child"): an
 * RDMA client cannot work in a fork() of a process that used RDMA
 * (librmem(7)).  Its report comes back on the inherited descriptor.
 */
static int exec_child(int wfd, void *arg)
{
	const struct child_job *job = arg;
	const char *const args[] = { "test_isolation", "--child", job->endpoint,
				     job->stay ? "stay" : "exit", NULL };

	return child_reexec(wfd, args);
}

static int child_main(char **argv)
{
	struct child_job job = { .endpoint = argv[2], .stay = !strcmp(argv[3], "stay") };
	char *end;
	long fd;

	errno = 0;
	fd = strtol(argv[4], &end, 10);
	if (errno || *end || fd < 0 || fd > INT32_MAX)
		return 5;
	/* _exit: leaving without rmem_close() is the point, not a leak to report. */
	_exit(child_client((int)fd, &job) & 0xff);
}

static int read_report_bytes(int fd, void *out, size_t len, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint8_t *p = out;
	size_t left = len;

	while (left) {
		ssize_t n;

		if (poll(&pfd, 1, timeout_ms) != 1)
			return -ETIMEDOUT;
		n = read(fd, p, left);
		if (n <= 0)
			return n == 0 ? -EPIPE : -errno;
		p += n;
		left -= (size_t)n;
	}
	return 0;
}

/* Waits until only the survivors' regions count (what the last sweep freed
 * may still be in quarantine). */
static int survivors_only(rmem_client *obs, const struct witness *keep, size_t nkeep,
			  struct rmem_stats *st)
{
	uint64_t used = 0;

	for (size_t i = 0; i < nkeep; i++)
		used += keep[i].r.length;
	return stats_wait(obs, used, nkeep, 2000, st);
}

static void child_dies(rmem_client *obs, const char *endpoint, const char *tr, bool stay,
		       const struct witness *keep, size_t nkeep, const uint64_t *keep_sizes)
{
	struct child_job job = { .endpoint = endpoint, .stay = stay };
	const char *how = stay ? "killed" : "exiting";
	struct rmem_stats before, during, after;
	struct child_report rep;
	struct child ch;
	uint64_t held = 0;
	int rc, end;

	rc = survivors_only(obs, keep, nkeep, &before);
	ok(rc == 0, "%s: stats before the %s child: used %llu regions %llu (%d)", tr, how,
	   (unsigned long long)before.used_bytes, (unsigned long long)before.regions, rc);
	rc = child_spawn(&ch, exec_child, &job);
	if (!ok(rc == 0, "%s: spawn a child client (%d)", tr, rc))
		return;
	rc = read_report_bytes(ch.rfd, &rep, sizeof rep, 20000);
	ok(rc == 0 && rep.status == 0, "%s: %s child allocated and wrote %d regions (%d/%d)", tr,
	   how, CHILD_REGIONS, rc, rc ? 0 : rep.status);
	if (rc != 0 || rep.status != 0) {
		child_end(&ch, SIGKILL);
		return;
	}
	for (int i = 0; i < CHILD_REGIONS; i++)
		held += rep.r[i].length;

	if (stay) {
		uint8_t buf[64];

		rc = rmem_stats(obs, &during);
		ok(rc == 0 && during.used_bytes == before.used_bytes + held &&
		   during.regions == before.regions + CHILD_REGIONS &&
		   during.clients == before.clients + 1,
		   "%s: the child's %llu bytes, %d regions and session show in stats", tr,
		   (unsigned long long)held, CHILD_REGIONS);
		rc = rmem_read(obs, &rep.r[0], 0, buf, sizeof buf);
		ok(rc == -EACCES, "%s: the living child's region is not ours: -EACCES (%d)", tr,
		   rc);
		end = child_end(&ch, SIGKILL);
		ok(end == 128 + SIGKILL, "%s: child killed with SIGKILL (%d)", tr, end);
	} else {
		end = child_end(&ch, 0);
		ok(end == 0, "%s: child exited 0 without rmem_close (%d)", tr, end);
	}

	rc = stats_wait(obs, before.used_bytes, before.regions, 5000, &after);
	ok(rc == 0, "%s: used_bytes back to %llu and regions to %llu (now %llu, %llu) (%d)", tr,
	   (unsigned long long)before.used_bytes, (unsigned long long)before.regions,
	   (unsigned long long)after.used_bytes, (unsigned long long)after.regions, rc);
	ok(after.clients == before.clients, "%s: clients back to %llu (%llu)", tr,
	   (unsigned long long)before.clients, (unsigned long long)after.clients);
	ok(after.frees >= before.frees + CHILD_REGIONS, "%s: frees counts the child's regions",
	   tr);
	for (int i = 0; i < CHILD_REGIONS; i++) {
		uint8_t buf[16];
		/* Over RDMA the NIC refuses the dead key. */
		bool rdma = client_on_rdma(obs);

		rc = rmem_read(obs, &rep.r[i], 0, buf, sizeof buf);
		ok(rc == (rdma ? -EACCES : -ENOENT), "%s: the dead child's region %llu is gone: %s (%d)",
		   tr, (unsigned long long)rep.r[i].id, rdma ? "-EACCES (NIC)" : "-ENOENT", rc);
	}
	for (size_t i = 0; i < nkeep; i++) {
		rc = witness_check(&keep[i], keep_sizes[i]);
		ok(rc == 0, "%s: survivor region %llu still verifies (%d)", tr,
		   (unsigned long long)keep[i].r.id, rc);
	}
	/* What the child wrote must not leak to the next owner: every free byte
	 * of the pool, the child's old ranges among them, reads zero. */
	{
		uint64_t swept = 0;

		rc = sweep_free_memory(obs, &swept);
		ok(rc == 0 && swept == after.free_bytes,
		   "%s: all %llu free bytes, the child's among them, read zero (%d)", tr,
		   (unsigned long long)swept, rc);
	}
}

/* ---- a local user who is neither root nor rmemd's user ------------------------ */

struct stranger_job {
	const char *endpoint;
	struct rmem_region target;   /* somebody else's region */
};

enum { S_CONNECT, S_STATS, S_POOLS, S_REGIONS, S_CLIENTS, S_OWN, S_READ, S_FREE, S_COUNT };

static int stranger(int wfd, void *arg)
{
	const struct stranger_job *job = arg;
	int res[S_COUNT];
	struct rmem_pool_info pools[2];
	struct rmem_region_info regs[2];
	struct rmem_client_info cls[2];
	struct rmem_stats st;
	struct rmem_region own;
	rmem_client *c = NULL;
	uint8_t buf[16];

	for (int i = 0; i < S_COUNT; i++)
		res[i] = -ECANCELED;
	if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
		return 9;
	res[S_CONNECT] = client_connect(job->endpoint, 5000, &c);
	if (res[S_CONNECT] == 0) {
		res[S_STATS] = rmem_stats(c, &st);
		res[S_POOLS] = rmem_pools(c, pools, 2);
		res[S_REGIONS] = rmem_regions(c, 0, regs, 2);
		res[S_CLIENTS] = rmem_clients(c, 0, cls, 2);
		res[S_OWN] = rmem_alloc(c, 4096, 0, &own);
		if (res[S_OWN] == 0)
			res[S_OWN] = rmem_write(c, &own, 0, "mine", 4);
		res[S_READ] = rmem_read(c, &job->target, 0, buf, sizeof buf);
		res[S_FREE] = rmem_free(c, &job->target);
	}
	rmem_close(c);
	return write(wfd, res, sizeof res) == (ssize_t)sizeof res ? 0 : 3;
}

static void untrusted_user(const struct rmemd *d, const struct witness *w, uint64_t size)
{
	struct stranger_job job = { .endpoint = d->unix_ep, .target = w->r };
	int res[S_COUNT];
	struct child ch;
	int rc, end = -1;

	if (geteuid() != 0) {
		skip(7, "needs root to become nobody");
		return;
	}
	/* Let nobody reach the socket inside our private (0700) directory. */
	chmod(d->dir, 0755);
	rc = child_spawn(&ch, stranger, &job);
	if (rc == 0) {
		rc = read_report_bytes(ch.rfd, res, sizeof res, 20000);
		end = child_end(&ch, rc ? SIGKILL : 0);
	}
	ok(rc == 0 && end == 0, "a child running as nobody reports back (%d, exit %d)", rc, end);
	chmod(d->dir, 0700);
	if (rc != 0 || end != 0) {
		skip(6, "no report");
		return;
	}
	ok(res[S_CONNECT] == 0 && res[S_STATS] == 0,
	   "nobody: connects on the Unix socket (%d) and gets stats (%d)", res[S_CONNECT],
	   res[S_STATS]);
	ok(res[S_POOLS] == -EACCES && res[S_REGIONS] == -EACCES && res[S_CLIENTS] == -EACCES,
	   "nobody: admin listings refused with -EACCES (%d %d %d)", res[S_POOLS],
	   res[S_REGIONS], res[S_CLIENTS]);
	ok(res[S_OWN] == 0, "nobody: may allocate and write its own region (%d)", res[S_OWN]);
	ok(res[S_READ] == -EACCES, "nobody: reading root's region is -EACCES (%d)", res[S_READ]);
	ok(res[S_FREE] == -EACCES, "nobody: freeing root's region is -EACCES (%d)", res[S_FREE]);
	ok(witness_check(w, size) == 0, "root's region is intact");
}

int main(int argc, char **argv)
{
	static const uint64_t sizes[3] = { MiB, 3 * MiB + 5, 64 };
	struct rmemd d;
	struct witness w[3];
	rmem_client *a = NULL, *b = NULL, *c = NULL;
	struct rmem_region own;
	struct rmem_stats st, st2;
	uint8_t gone[8];
	const char *net = harness_transport();
	char who[3][16];
	int rc, end;

	if (argc == 5 && !strcmp(argv[1], "--child"))
		return child_main(argv);
	if (!harness_start(&d, "128M", NULL))
		return tap_done();

	rc = client_connect(d.tcp_ep, 10000, &a);
	ok(rc == 0 && !strcmp(rmem_transport(a), net), "client A over %s (%d)", net, rc);
	rc = client_connect(d.unix_ep, 10000, &b);
	ok(rc == 0, "client B over unix (%d)", rc);
	rc = client_connect(d.tcp_ep, 10000, &c);
	ok(rc == 0 && !strcmp(rmem_transport(c), net), "client C over %s (%d)", net, rc);
	if (!a || !b || !c) {
		rmemd_cleanup(&d);
		tap_skip_all("clients could not connect");
	}

	rc = witness_make(&w[0], a, sizes[0], 1);
	ok(rc == 0, "A allocates and fills 1 MiB (%d)", rc);
	rc = witness_make(&w[1], b, sizes[1], 2);
	ok(rc == 0, "B allocates and fills 3 MiB + 5 (%d)", rc);
	rc = witness_make(&w[2], c, sizes[2], 3);
	ok(rc == 0, "C allocates and fills 64 bytes (%d)", rc);

	snprintf(who[0], sizeof who[0], "B (unix)");
	snprintf(who[1], sizeof who[1], "C (%s)", net);
	snprintf(who[2], sizeof who[2], "A (%s)", net);
	trespass(b, who[0], &w[0]);
	trespass(c, who[1], &w[0]);
	trespass(a, who[2], &w[1]);
	rc = rmem_alloc(b, 4096, 0, &own);
	if (rc == 0) {
		struct rmem_region forged = own;
		uint8_t buf[32];

		forged.id = w[0].r.id;
		forged.length = w[0].r.length;
		rc = rmem_read(b, &forged, 0, buf, sizeof buf);
		ok(rc == -EACCES, "B with A's id and its own key: -EACCES (%d)", rc);
		forged = w[0].r;
		forged.rkey = own.rkey;
		rc = rmem_write(b, &forged, 0, buf, sizeof buf);
		ok(rc == -EACCES, "B writing A's region with B's key: -EACCES (%d)", rc);
		rmem_free(b, &own);
	} else {
		skip(2, "B could not allocate");
	}
	for (int i = 0; i < 3; i++) {
		rc = witness_check(&w[i], sizes[i]);
		ok(rc == 0, "region %d is unchanged after the intrusions (%d)", i, rc);
	}

	untrusted_user(&d, &w[0], sizes[0]);
	child_dies(a, d.tcp_ep, net, true, w, 3, sizes);
	child_dies(b, d.unix_ep, "unix", true, w, 3, sizes);
	child_dies(a, d.tcp_ep, net, false, w, 3, sizes);

	/* A closes politely: its region goes, the others stay. */
	rc = survivors_only(b, w, 3, &st);
	rmem_close(a);
	a = NULL;
	rc = rc ? rc : stats_wait(b, st.used_bytes - w[0].r.length, st.regions - 1, 5000, &st2);
	ok(rc == 0, "rmem_close(A) returns A's region to the pool (%d)", rc);
	rc = rmem_read(b, &w[0].r, 0, gone, sizeof gone);
	ok(rc == -ENOENT, "A's region is gone after A closed: -ENOENT (%d)", rc);
	ok(witness_check(&w[1], sizes[1]) == 0 && witness_check(&w[2], sizes[2]) == 0,
	   "B's and C's regions verify after A left");

	rmem_close(b);
	rmem_close(c);
	end = rmemd_stop(&d);
	ok(end == 0, "rmemd exits 0 on SIGTERM (%d)", end);
	for (int i = 0; i < 3; i++)
		free(w[i].bytes);
	rmemd_cleanup(&d);
	return tap_done();
}
