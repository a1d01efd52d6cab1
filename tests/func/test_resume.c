/*
 * test_resume.c - clients that resume after a daemon restart (librmem(7),
 * RESUME; docs/protocol.md 7.13).
 *
 * rmemd runs under the one emulated systemd fd store (tests/lib/
 * daemon.h: it keeps what FDSTORE=1 hands it, and rmemd_restart() starts
 * the next rmemd with it as LISTEN_FDS, as systemd does).  Clients hold
 * anonymous regions and named handles with patterns, over TCP as a tenant
 * and over the Unix socket; rmemd is restarted with SIGTERM and SIGKILL.
 * Checked:
 *   - the clients resume by themselves, and every byte verifies through the
 *     application's unchanged struct rmem_region values; writes after the
 *     resume land and another client sees them; new allocations work;
 *   - reads and writes posted while the daemon was stopped and then killed
 *     complete with 0 after the resume, and their bytes are there;
 *   - an atomic in flight when the daemon dies ends with -ECONNABORTED
 *     (outcome unknown), and rmem_strerror() says so;
 *   - a client with resume_ms = 0 is broken as before (-ECONNRESET);
 *   - the raw protocol: a wrong resume token is EACCES, the right one works;
 *   - a wrong tenant secret at the resume, a daemon that restarts without
 *     its store (nothing to resume: ENOENT) and a daemon gone for longer
 *     than resume_ms all end in -ECONNRESET, within resume_ms;
 *   - rmem_close while the keepalive thread is half way through a resume
 *     (connected again, waiting on an answer that does not come) returns
 *     at once: keepalive_stop cuts the resume short without touching the
 *     engine's fd, which the resume replaces (a race ThreadSanitizer saw:
 *     tests/func/test_tsan.sh).
 * The client-visible pause (from the kill to the first read that succeeds)
 * is printed as a TAP comment; nothing asserts on it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define NANON 3
#define READY_MS 60000
#define NMANY 150
/* The clients' bound: generous, since an idle client's keepalive may start
 * resuming as soon as the daemon dies, and a restart takes seconds under
 * the test VM's emulation (8 to 10 s seen there). */
static uint64_t bound_ms = 8000;
#define RESUME_MS ((int)bound_ms)

/* ---- the daemon and its fd store (tests/lib/daemon.h) ------------------------ */

/* Ends the daemon at once (a stopped one too); the store keeps what it has. */
static void daemon_kill(struct rmemd *d)
{
	if (d->pid > 0)
		rmemd_kill(d);
}

/* Ends the daemon with sig (unless it is gone already) and starts it again
 * from the store: 0 or a negative errno. */
static int daemon_restart(struct rmemd *d, int sig)
{
	return rmemd_restart(d, sig, READY_MS);
}

/* Empties the store, as if systemd had lost it: the next start is fresh. */
static void store_forget(struct rmemd *d)
{
	rmemd_store_drop(d);
}

/* ---- clients and their regions ---------------------------------------------------- */

struct held {
	const char *what;
	rmem_client *c;
	struct rmem_region r;
	uint64_t seed;
};

static uint64_t sizes[NANON] = { 4 * KiB, 1 * MiB + 17, 3 * MiB };

static int fill_region(const struct held *h)
{
	uint8_t *buf = malloc(h->r.length);
	int rc;

	if (!buf)
		return -ENOMEM;
	fill_random(buf, h->r.length, h->seed);
	rc = rmem_write(h->c, &h->r, 0, buf, h->r.length);
	free(buf);
	return rc;
}

/* 0 when every byte of h is its pattern, -EILSEQ when one is not, or the
 * read's error. */
static int check_region(const struct held *h)
{
	uint8_t *want = malloc(h->r.length), *got = malloc(h->r.length);
	int rc = want && got ? 0 : -ENOMEM;

	if (!rc)
		rc = rmem_read(h->c, &h->r, 0, got, h->r.length);
	if (!rc) {
		fill_random(want, h->r.length, h->seed);
		if (memcmp(want, got, h->r.length) != 0) {
			diag("%s: first difference at byte %lld", h->what,
			     first_diff(want, got, h->r.length));
			rc = -EILSEQ;
		}
	}
	free(want);
	free(got);
	return rc;
}

/* Every held region verifies: the count of those that do. */
static int check_all(struct held *hs, int n, const char *when)
{
	int good = 0;

	for (int i = 0; i < n; i++) {
		int rc = check_region(&hs[i]);

		if (rc)
			diag("%s: %s: %d (%s)", when, hs[i].what, rc, rmem_strerror(rc));
		good += rc == 0;
	}
	return good;
}

static int connect_opts(const char *ep, const char *tenant, const char *key, int resume_ms,
			rmem_client **out)
{
	struct rmem_opts o;

	rmem_opts_init(&o, sizeof o);
	o.tenant = tenant;
	o.secret_file = key;
	o.resume_ms = resume_ms;
	return rmem_connect(ep, &o, out);
}

/* ---- tenants' keys -------------------------------------------------------------- */

static char keydir[] = "/tmp/test_resume.XXXXXX";
static struct harness_key keys[] = {
	{ .name = "a.key", .secret = "tenant A resumes, 0123456789", .mode = 0600 },
	{ .name = "a-client.key", .secret = "tenant A resumes, 0123456789", .mode = 0600 },
	{ .name = "b.key", .secret = "tenant B, another secret 42", .mode = 0600 },
};
#define NKEYS (sizeof keys / sizeof keys[0])
static const char *const key_daemon = keys[0].path, *const key_client = keys[1].path;
static const char *const key_b = keys[2].path;

/* ---- the sections ------------------------------------------------------------------ */

struct world {
	struct rmemd d;
	rmem_client *a, *a2, *u, *z;
	struct held h[9];
	int nh;
	struct rmem_region atom;
	struct rmem_region many[NMANY];   /* small regions: the key map grows */
	int raw_fd;                       /* a raw session over the Unix socket */
	uint64_t raw_id;
	uint8_t raw_token[PROTO_RESUME_TOKEN_LEN];
};

static int hold_anon(struct world *w, rmem_client *c, const char *what, uint64_t size,
		     uint64_t seed)
{
	struct held *h = &w->h[w->nh];
	int rc = rmem_alloc(c, size, 0, &h->r);

	h->what = what;
	h->c = c;
	h->seed = seed;
	if (!rc)
		rc = fill_region(h);
	if (!rc)
		w->nh++;
	return rc;
}

static int hold_named(struct world *w, rmem_client *c, const char *what, const char *name,
		      uint64_t size, uint32_t access, uint64_t seed)
{
	struct held *h = &w->h[w->nh];
	int rc = size ? rmem_create(c, name, size, 0, &h->r) : rmem_open(c, name, access, &h->r);

	h->what = what;
	h->c = c;
	h->seed = seed;
	if (!rc && size)
		rc = fill_region(h);
	if (!rc)
		w->nh++;
	return rc;
}

/* HELLO with RESUMABLE on a raw Unix connection: the session's id and token. */
static int raw_resumable(struct world *w)
{
	struct proto_hello_req req = { .client_version = PROTO_VERSION,
				       .features = PROTO_HELLO_F_RESUMABLE };
	uint8_t buf[PROTO_HELLO_REQ_LEN];
	struct proto_hello_rep hr;
	struct raw_reply rep = { 0 };
	int status = -1, rc;

	w->raw_fd = raw_connect_unix(w->d.admin_path);
	if (w->raw_fd < 0)
		return w->raw_fd;
	rc = raw_call(w->raw_fd, PROTO_OP_HELLO, 1, buf, (uint32_t)proto_hello_req_encode(buf, &req),
		      &rep, 256, 10000);
	if (!rc && proto_hello_rep_decode(rep.payload, rep.length, &status, &hr) < 0)
		rc = -EPROTO;
	if (!rc && (status || !hr.resumable))
		rc = status ? -status : -EPROTO;
	if (!rc) {
		w->raw_id = hr.session_id;
		memcpy(w->raw_token, hr.resume_token, sizeof w->raw_token);
	}
	raw_reply_release(&rep);
	return rc;
}

/* RESUME of the raw session on a new Unix connection: the wire status (0,
 * or a positive errno), or a negative errno. */
static int raw_resume(struct world *w, bool wrong_token)
{
	struct proto_resume_req req = { .session_id = w->raw_id,
					.client_version = PROTO_VERSION };
	uint8_t buf[PROTO_RESUME_REQ_LEN];
	struct raw_reply rep = { 0 };
	int fd = raw_connect_unix(w->d.admin_path), rc;

	if (fd < 0)
		return fd;
	memcpy(req.resume_token, w->raw_token, sizeof req.resume_token);
	if (wrong_token)
		req.resume_token[7] ^= 0x40;
	rc = raw_call(fd, PROTO_OP_RESUME, 1, buf, (uint32_t)proto_resume_req_encode(buf, &req),
		      &rep, 256, 10000);
	if (!rc)
		rc = rep.status;
	if (!rc && rep.length != PROTO_HELLO_REP_RESUME_LEN)
		rc = -EPROTO;
	raw_reply_release(&rep);
	close(fd);
	return rc;
}

static bool setup(struct world *w)
{
	int rc;

	rc = connect_opts(w->d.tcp_ep, "A", key_client, RESUME_MS, &w->a);
	if (!rc)
		rc = connect_opts(w->d.tcp_ep, "A", key_daemon, RESUME_MS, &w->a2);
	if (!rc)
		rc = connect_opts(w->d.unix_ep, NULL, NULL, RESUME_MS, &w->u);
	if (!rc)
		rc = connect_opts(w->d.unix_ep, NULL, NULL, 0, &w->z);
	if (!ok(rc == 0, "four clients connect: tenant A twice over %s, two over unix (%d)",
		harness_transport(), rc))
		return false;
	rc = hold_anon(w, w->a, "A anon 4K", sizes[0], 1);
	if (!rc)
		rc = hold_anon(w, w->a, "A anon 1M+17", sizes[1], 2);
	if (!rc)
		rc = hold_anon(w, w->a, "A anon 3M", sizes[2], 3);
	if (!rc)
		rc = hold_named(w, w->a, "A's named resume/shared", "resume/shared", 512 * KiB, 0, 4);
	if (!rc)
		rc = hold_named(w, w->a2, "A2's handle of resume/shared", "resume/shared", 0,
				RMEM_READ | RMEM_WRITE, 4);
	if (!rc)
		rc = hold_anon(w, w->u, "U anon 64K", 64 * KiB, 5);
	if (!rc)
		rc = hold_named(w, w->u, "U's named resume/u", "resume/u", 128 * KiB, 0, 6);
	if (!rc)
		rc = hold_named(w, w->u, "U's read-only handle of resume/u", "resume/u", 0,
				RMEM_READ, 6);
	if (!rc)
		rc = hold_anon(w, w->a, "A anon 256K (posted writes)", 256 * KiB, 7);
	if (!rc)
		rc = rmem_alloc(w->a, 4096, 0, &w->atom);
	if (!rc)
		rc = rmem_faa(w->a, &w->atom, 0, 5, NULL);
	if (!ok(rc == 0, "they hold %d regions and handles with patterns, and an atomic word (%d)",
		w->nh, rc))
		return false;
	for (int i = 0; i < NMANY && !rc; i++) {
		uint64_t v = 1000 + i;

		rc = rmem_alloc(w->a, 64, 0, &w->many[i]);
		if (!rc)
			rc = rmem_write(w->a, &w->many[i], 0, &v, sizeof v);
	}
	ok(rc == 0, "A holds %d small regions more, each with its number (%d)", NMANY, rc);
	rc = raw_resumable(w);
	ok(rc == 0, "a raw session asks HELLO for its resume token (%d)", rc);
	return ok(check_all(w->h, w->nh, "before") == w->nh, "every byte verifies before");
}

/* The first read that succeeds after t0: the client-visible pause. */
static const char *pool_size = "64M";

static void report_pause(const char *what, uint64_t t0, int rc)
{
	diag("client-visible pause after %s, pool %s: %llu ms (from the kill to the first "
	     "read that succeeded, %d)", what, pool_size, (unsigned long long)(now_ms() - t0), rc);
}

static void restart_term(struct world *w)
{
	uint8_t word[8];
	uint64_t t0 = now_ms();
	struct rmem_region fresh;
	int rc;

	rc = daemon_restart(&w->d, SIGTERM);
	ok(rc == 0, "SIGTERM: rmemd comes back from the store (%d)", rc);
	rc = rmem_read(w->a, &w->h[0].r, 0, word, sizeof word);
	report_pause("SIGTERM", t0, rc);
	ok(rc == 0, "SIGTERM: client A's next read resumes by itself (%d)", rc);
	ok(strcmp(rmem_transport(w->a), harness_transport()) == 0,
	   "SIGTERM: and A is on %s still (%s)", harness_transport(), rmem_transport(w->a));
	ok(check_all(w->h, w->nh, "SIGTERM") == w->nh,
	   "SIGTERM: every byte of %d regions and handles verifies through the unchanged values",
	   w->nh);
	rc = rmem_stats(w->z, &(struct rmem_stats){ 0 });
	ok(rc == -ECONNRESET, "SIGTERM: the client with resume_ms = 0 is broken as before (%d)",
	   rc);

	w->h[3].seed = w->h[4].seed = 40;
	rc = fill_region(&w->h[3]);
	ok(rc == 0 && check_region(&w->h[4]) == 0,
	   "SIGTERM: A writes its named region after the resume, A2's handle reads it (%d)", rc);
	w->h[1].seed = 20;
	rc = fill_region(&w->h[1]);
	ok(rc == 0 && check_region(&w->h[1]) == 0, "SIGTERM: a write after the resume lands (%d)",
	   rc);
	rc = rmem_write(w->u, &w->h[7].r, 0, "x", 1);
	ok(rc == -EACCES, "SIGTERM: the read-only handle still refuses a write (%d)", rc);
	rc = rmem_alloc(w->a, 8 * KiB, 0, &fresh);
	if (!rc)
		rc = rmem_write(w->a, &fresh, 0, "fresh", 5);
	if (!rc)
		rc = rmem_read(w->a, &fresh, 0, word, 5);
	if (!rc)
		rc = memcmp(word, "fresh", 5) ? -EILSEQ : rmem_free(w->a, &fresh);
	ok(rc == 0, "SIGTERM: a region allocated after the resume works and is freed (%d)", rc);

	for (int i = 0, err = 0; i < NMANY && !err; i++) {
		uint64_t v = 0;

		err = rmem_read(w->a, &w->many[i], 0, &v, sizeof v);
		if (!err && v != 1000u + (unsigned)i)
			err = -EILSEQ;
		if (err || i == NMANY - 1)
			ok(err == 0, "SIGTERM: all %d small regions read their numbers, each with "
			   "its new key (%d at %d)", NMANY, err, i);
	}
	rc = raw_resume(w, true);
	ok(rc == EACCES, "SIGTERM: RESUME of the raw session with a wrong token: EACCES (%d)", rc);
	rc = raw_resume(w, false);
	ok(rc == 0, "SIGTERM: with its token: resumed (%d)", rc);
}

/* Posted reads and writes to a stopped daemon, which is then killed. */
static void restart_kill_posted(struct world *w)
{
	struct held *h = &w->h[8];
	struct rmem_completion out[8];
	uint8_t *src = malloc(h->r.length), rbuf[4096], want[4096];
	int posted = 0, got = 0, good = 0, rc;
	uint64_t t0;

	if (!src) {
		ok(0, "SIGKILL: memory");
		return;
	}
	fill_random(src, h->r.length, 80);
	t0 = now_ms();
	/* Stopped, the daemon reads no request; on RDMA the NIC would still
	 * serve the queue pair, so there the daemon is killed first and the
	 * work requests go to a queue pair nobody answers. */
	if (client_on_rdma(w->a))
		daemon_kill(&w->d);
	else
		kill(w->d.pid, SIGSTOP);
	for (int i = 0; i < 4; i++)
		posted += rmem_post_write(w->a, &h->r, i * (h->r.length / 4),
					  src + i * (h->r.length / 4), h->r.length / 4,
					  100 + i) == 0;
	posted += rmem_post_read(w->a, &w->h[0].r, 0, rbuf, sizeof rbuf, 200) == 0;
	ok(posted == 5, "SIGKILL: 4 writes and a read posted to the stopped daemon (%d)", posted);
	sleep_ms(100);
	rc = daemon_restart(&w->d, SIGKILL);
	ok(rc == 0, "SIGKILL: rmemd comes back from the store (%d)", rc);
	for (int tries = 0; got < 5 && tries < 20; tries++) {
		rc = rmem_poll(w->a, out + got, 8 - got, 1000);
		if (rc < 0)
			break;
		got += rc;
	}
	report_pause("SIGKILL", t0, rc < 0 ? rc : 0);
	for (int i = 0; i < got; i++) {
		if (out[i].status)
			diag("SIGKILL: completion %llu: %d", (unsigned long long)out[i].cookie,
			     out[i].status);
		good += out[i].status == 0;
	}
	ok(got == 5 && good == 5, "SIGKILL: all 5 complete with 0 after the resume (%d, %d)", got,
	   good);
	fill_random(want, sizeof want, w->h[0].seed);
	ok(memcmp(rbuf, want, sizeof rbuf) == 0, "SIGKILL: the posted read brought the right bytes");
	h->seed = 80;
	ok(check_all(w->h, w->nh, "SIGKILL") == w->nh,
	   "SIGKILL: every byte verifies, the posted writes' included");
	free(src);
}

struct faa_call {
	rmem_client *c;
	const struct rmem_region *r;
	int rc;
};

static void *faa_thread(void *arg)
{
	struct faa_call *f = arg;

	f->rc = rmem_faa(f->c, f->r, 0, 1, NULL);
	return NULL;
}

static void atomic_in_flight(struct world *w)
{
	struct faa_call f = { .c = w->a, .r = &w->atom, .rc = 1 };
	bool on_rdma = client_on_rdma(w->a);
	pthread_t t;
	uint64_t v = 0, old = 0;
	int rc;

	/* Its new key first (the first use after a resume asks REKEY): so
	 * that the FAA itself is what waits for the stopped daemon. */
	rc = rmem_read(w->a, &w->atom, 0, &v, sizeof v);
	ok(rc == 0 && v == 5, "atomic: the word reads 5 (%d, %llu)", rc, (unsigned long long)v);
	/* On the stream the FAA waits for a stopped daemon, which is then
	 * killed.  On RDMA the NIC, not the daemon, does atomics, so stopping
	 * the daemon holds nothing: there the FAA goes to the queue pair of a
	 * daemon already killed, which can never answer it. */
	if (!on_rdma)
		kill(w->d.pid, SIGSTOP);
	else
		daemon_kill(&w->d);
	if (pthread_create(&t, NULL, faa_thread, &f) != 0) {
		ok(0, "atomic: thread");
		return;
	}
	sleep_ms(300);
	rc = daemon_restart(&w->d, SIGKILL);
	ok(rc == 0, "atomic: rmemd comes back from the store (%d)", rc);
	pthread_join(t, NULL);
	ok(f.rc == -ECONNABORTED, "atomic: the FAA in flight ends with -ECONNABORTED (%d: %s)",
	   f.rc, rmem_strerror(f.rc));
	ok(strstr(rmem_strerror(-ECONNABORTED), "outcome unknown") != NULL,
	   "atomic: rmem_strerror says the outcome is unknown");
	rc = rmem_read(w->a, &w->atom, 0, &v, sizeof v);
	ok(rc == 0 && (v == 5 || v == 6), "atomic: the word reads 5 or 6 (%d, %llu)", rc,
	   (unsigned long long)v);
	rc = rmem_faa(w->a, &w->atom, 0, 10, &old);
	ok(rc == 0 && old == v, "atomic: the next FAA works, and is not doubled (%d, %llu)", rc,
	   (unsigned long long)old);
}

/* A's copy of the tenant secret is wrong at the resume: refused, for good;
 * A2 (right secret) resumes. */
static void wrong_secret(struct world *w)
{
	uint64_t t0;
	int rc;

	write_file(key_client, "tenant A resumes, 012345678X", 0600);
	rc = daemon_restart(&w->d, SIGKILL);
	ok(rc == 0, "secret: rmemd comes back from the store (%d)", rc);
	t0 = now_ms();
	rc = rmem_stats(w->a, &(struct rmem_stats){ 0 });
	ok(rc == -ECONNRESET && now_ms() - t0 < bound_ms,
	   "secret: A, whose secret is now wrong, is refused at once: -ECONNRESET (%d, %llu ms)",
	   rc, (unsigned long long)(now_ms() - t0));
	rc = rmem_read(w->a, &w->h[0].r, 0, (uint8_t[8]){ 0 }, 8);
	ok(rc == -ECONNRESET, "secret: and stays broken (%d)", rc);
	ok(check_region(&w->h[4]) == 0, "secret: A2, same tenant, right secret, resumes and reads");
}

/* A restart that finds nothing in the store: RESUME is ENOENT. */
static void fresh_start(struct world *w)
{
	uint64_t t0;
	int rc;

	daemon_kill(&w->d);
	store_forget(&w->d);
	rc = daemon_restart(&w->d, SIGKILL);
	ok(rc == 0, "fresh: rmemd starts with an empty store (%d)", rc);
	t0 = now_ms();
	rc = check_region(&w->h[5]);
	ok(rc == -ECONNRESET && now_ms() - t0 < bound_ms,
	   "fresh: U finds nothing to resume: -ECONNRESET at once (%d, %llu ms)", rc,
	   (unsigned long long)(now_ms() - t0));
}

/* The daemon does not come back: the client gives up after resume_ms. */
static void gone(struct world *w)
{
	rmem_client *g = NULL;
	uint64_t t0, took;
	int rc = connect_opts(w->d.unix_ep, NULL, NULL, 1000, &g);

	if (!ok(rc == 0, "gone: a client with resume_ms = 1000 connects (%d)", rc))
		return;
	daemon_kill(&w->d);
	t0 = now_ms();
	rc = rmem_stats(g, &(struct rmem_stats){ 0 });
	took = now_ms() - t0;
	ok(rc == -ECONNRESET && took >= 900 && took < 1000 + 4000,
	   "gone: with no daemon it tries for resume_ms, then -ECONNRESET (%d after %llu ms)", rc,
	   (unsigned long long)took);
	rmem_close(g);
	/* From the store: g's session comes back detached and nobody resumes
	 * it; the final stop must still be clean (no leak under ASan). */
	rc = daemon_restart(&w->d, SIGKILL);
	ok(rc == 0, "gone: rmemd starts again (%d)", rc);
}

/* How many TCP connections of this host to 127.0.0.1:port are in state st
 * (/proc/net/tcp: 1 established, 8 close-wait). */
static int tcp_count(uint16_t port, unsigned st)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	char line[256];
	unsigned rport, s;
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		n += sscanf(line, " %*u: %*x:%*x %*x:%x %x", &rport, &s) == 2 && rport == port &&
		     s == st;
	fclose(f);
	return n;
}

/* A listener on the daemon's address and port that never answers: the
 * daemon's place, taken while it is gone (-1 when the fd store still holds
 * rmemd's own: that one is as silent).  The address is the daemon's own,
 * not the loopback: over rdma it is the VM's RDMA address. */
static int silent_listener(const char *host, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1;

	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 8) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * rmem_close while the keepalive thread resumes: its daemon (one of its
 * own, so that the client is the only one on its port) is gone, and the
 * thread has dialed again, put the new stream in place of the old
 * (eng_reopen closes the old one: no close-wait connection is left) and
 * waits for an answer that does not come.  keepalive_stop used to read
 * the engine's fd without the client's lock to shut it down: a data race
 * with eng_reopen (ThreadSanitizer, tests/func/test_tsan.sh), and at worst
 * a shutdown(2) of a descriptor number already closed and reused.
 */
static void close_resuming(void)
{
	struct rmemd d = { 0 };
	rmem_client *g = NULL;
	uint64_t t0, took;
	int rc = rmemd_start(&d, "16M", NULL), lfd = -1;
	bool in = false;

	if (!ok(rc == 0, "close: a second rmemd starts (%d)", rc))
		goto out;
	rc = connect_opts(d.tcp_ep, NULL, NULL, RESUME_MS, &g);
	if (!ok(rc == 0, "close: a client with resume_ms = %d connects to it over %s (%d)",
		RESUME_MS, harness_transport(), rc))
		goto out;
	rmemd_kill(&d);
	lfd = silent_listener(d.addr, d.port);
	ok(lfd >= 0, "close: a silent listener takes %s (%d)", d.host_port, lfd);
	/* Its keepalive finds the stream broken within a third of the lease
	 * (10 s), dials again and swaps the streams. */
	t0 = now_ms();
	while (!(in = tcp_count(d.port, 1) >= 1 && tcp_count(d.port, 8) == 0) &&
	       now_ms() - t0 < 20000)
		usleep(10 * 1000);
	ok(in, "close: its keepalive has dialed again and waits in the resume (%llu ms)",
	   (unsigned long long)(now_ms() - t0));
	t0 = now_ms();
	rmem_close(g);
	g = NULL;
	took = now_ms() - t0;
	ok(took < 2000, "close: rmem_close cuts the resume short (%llu ms, resume_ms %d)",
	   (unsigned long long)took, RESUME_MS);
out:
	rmem_close(g);
	close_fd(lfd);
	rmemd_cleanup(&d);
}

int main(void)
{
	struct world w = { .raw_fd = -1 };
	/* RMEM_RESUME_POOL=1G measures the pause with a larger pool. */
	const char *pool = getenv("RMEM_RESUME_POOL") ? getenv("RMEM_RESUME_POOL") : "64M";
	char extra[512];
	int rc, n;

	pool_size = pool;
	if (harness_rdma())
		bound_ms = 30000;
	if (harness_keys_make(keydir, keys, NKEYS) < 0)
		tap_skip_all("cannot write the tenants' keys");
	snprintf(extra, sizeof extra,
		 "tenants = ( { name = \"A\"; secret_file = \"%s\"; },\n"
		 "            { name = \"B\"; secret_file = \"%s\"; } );", key_daemon, key_b);
	/* The harness writes the config and picks the ports; the daemon is
	 * then started again under the store. */
	rc = rmemd_start(&w.d, pool, extra);
	if (rc == -ENOENT) {
		harness_keys_remove(keydir, keys, NKEYS);
		tap_skip_all("no rmemd in $RMEM_BUILD");
	}
	if (!ok(rc == 0, "rmemd starts (%d)", rc))
		goto out;
	n = rmemd_store_count(&w.d);
	ok(n >= 2, "it puts its pools and state into the fd store (%d fds)", n);
	if (rc || !setup(&w))
		goto out;
	restart_term(&w);
	restart_kill_posted(&w);
	atomic_in_flight(&w);
	wrong_secret(&w);
	fresh_start(&w);
	gone(&w);
	close_resuming();
	rc = rmemd_stop(&w.d);
	ok(rc == 0, "rmemd exits 0 on SIGTERM (%d)", rc);
out:
	rmem_close(w.a);
	rmem_close(w.a2);
	rmem_close(w.u);
	rmem_close(w.z);
	close_fd(w.raw_fd);
	rmemd_cleanup(&w.d);
	harness_keys_remove(keydir, keys, NKEYS);
	return tap_done();
}
