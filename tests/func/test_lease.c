/*
 * test_lease.c - leases and per-connection limits: a frozen client loses its
 * session and its memory, an idle one keeps both (the library's keepalive),
 * silent and half-sent connections are dropped, and a client that pipelines
 * without reading costs the daemon bounded memory.  Nobody else notices.
 *
 * Deadlines are short here (lease_ms, frame_ms) so that the test is quick;
 * every wait is a generous multiple of them, and no assertion is on time.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

/* Over RDMA the test runs in an emulated VM, many times slower: there the
 * deadlines are longer, so that they still mean "silent", not "slow". */
static int lease_ms = 600;
static int frame_ms = 300;
#define MAX_CLIENTS 16
#define WAIT_MS (10 * lease_ms)
#define KiB 1024ull
#define MiB (1024ull * 1024)

/* ---- helpers ---------------------------------------------------------------- */

/* Alloc, write, read back, compare, free: 0 or the first error. */
static int round_trip(rmem_client *c, size_t len, uint64_t seed)
{
	uint8_t *src = malloc(len), *dst = malloc(len);
	struct rmem_region r;
	int rc = src && dst ? 0 : -ENOMEM, frc;

	rc = rc ? rc : rmem_alloc(c, len, 0, &r);
	if (rc == 0) {
		fill_random(src, len, seed);
		rc = rmem_write(c, &r, 0, src, len);
		rc = rc ? rc : rmem_read(c, &r, 0, dst, len);
		if (rc == 0 && memcmp(src, dst, len) != 0)
			rc = -EILSEQ;
		frc = rmem_free(c, &r);
		rc = rc ? rc : frc;
	}
	free(src);
	free(dst);
	return rc;
}

/* A fresh client does a full round trip: 0 or the first error. */
static int other_client_served(const struct rmemd *d, uint64_t seed)
{
	rmem_client *c = NULL;
	int rc = client_connect(d->tcp_ep, 10000, &c);

	rc = rc ? rc : round_trip(c, 256 * KiB, seed);
	rmem_close(c);
	return rc;
}

/* Waits until the daemon's log contains needle. */
static bool log_wait(const struct rmemd *d, const char *needle, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

	while (!rmemd_log_contains(d, needle)) {
		if (now_ms() >= deadline)
			return false;
		sleep_ms(20);
	}
	return true;
}

/* ---- an idle client keeps its lease ------------------------------------------- */

static void idle_client_kept(const struct rmemd *d, rmem_client *mon)
{
	enum { LEN = 64 * 1024 };
	uint8_t *src = malloc(LEN), *dst = malloc(LEN);
	struct rmem_stats st = { 0 };
	struct rmem_region r;
	rmem_client *c = NULL;
	int rc = src && dst ? client_connect(d->tcp_ep, 10000, &c) : -ENOMEM;

	if (rc == 0)
		rc = rmem_alloc(c, LEN, 0, &r);
	if (rc == 0) {
		fill_random(src, LEN, 7);
		rc = rmem_write(c, &r, 0, src, LEN);
	}
	ok(rc == 0, "a client allocates and writes 64 KiB (%d)", rc);
	/* No call at all for four leases: only the library speaks meanwhile. */
	sleep_ms(4 * lease_ms);
	rc = rc ? rc : rmem_stats(mon, &st);
	ok(rc == 0 && st.regions == 1 && st.used_bytes >= LEN,
	   "after 4 leases without a call its region is still there (regions %llu, used %llu)",
	   (unsigned long long)st.regions, (unsigned long long)st.used_bytes);
	ok(!rmemd_log_contains(d, "lease expired"), "the daemon expired no lease");
	rc = rc ? rc : rmem_read(c, &r, 0, dst, LEN);
	ok(rc == 0 && memcmp(src, dst, LEN) == 0, "and its data reads back (%d)", rc);
	rc = rc ? rc : rmem_free(c, &r);
	ok(rc == 0, "and frees (%d)", rc);
	rmem_close(c);
	free(src);
	free(dst);
}

/* ---- a busy client keeps its lease too ----------------------------------------- */

struct poller {
	rmem_client *c;
	atomic_bool stop;
	int err;       /* the first error of rmem_poll */
	uint64_t polls;
};

static void *poll_loop(void *arg)
{
	struct poller *p = arg;
	struct rmem_completion comp;

	while (!atomic_load(&p->stop)) {
		int n = rmem_poll(p->c, &comp, 1, 0);

		if (n < 0 && !p->err)
			p->err = n;
		p->polls++;
	}
	return NULL;
}

/*
 * One thread spins in rmem_poll() while another reads 64 bytes again and
 * again (over RDMA those reads never touch the daemon's connection): the
 * client's lock is hardly ever free, and still the keepalive gets its turn.
 */
static void busy_client_kept(const struct rmemd *d, rmem_client *mon)
{
	struct poller p = { .c = NULL };
	struct rmem_stats st = { 0 };
	struct rmem_region r;
	pthread_t t;
	uint64_t reads = 0, until;
	uint8_t buf[64];
	int rc = client_connect(d->tcp_ep, 10000, &p.c);

	rc = rc ? rc : rmem_alloc(p.c, 4096, 0, &r);
	rc = rc ? rc : rmem_write(p.c, &r, 0, "busy", 4);
	rc = rc ? rc : -pthread_create(&t, NULL, poll_loop, &p);
	if (!ok(rc == 0, "a client with a thread spinning in rmem_poll (%d)", rc)) {
		rmem_close(p.c);
		return;
	}
	until = now_ms() + 4 * lease_ms;
	while (rc == 0 && now_ms() < until) {
		rc = rmem_read(p.c, &r, 0, buf, sizeof buf);
		reads++;
	}
	atomic_store(&p.stop, true);
	pthread_join(t, NULL);
	ok(rc == 0 && p.err == 0 && memcmp(buf, "busy", 4) == 0,
	   "reads for 4 leases in a loop, %llu reads and %llu polls (%d, %d)",
	   (unsigned long long)reads, (unsigned long long)p.polls, rc, p.err);
	rc = rmem_stats(mon, &st);
	ok(rc == 0 && st.regions == 1 && !rmemd_log_contains(d, "lease expired"),
	   "its session and region live on (regions %llu) (%d)",
	   (unsigned long long)st.regions, rc);
	rc = rmem_free(p.c, &r);
	ok(rc == 0, "and it frees its region (%d)", rc);
	rmem_close(p.c);
}

/* ---- a frozen client loses its session ------------------------------------------ */

struct frozen {
	const char *endpoint;
	int go_fd;  /* the child reads one byte here once it has been continued */
};

struct frozen_report {
	int setup;  /* connect + alloc + write */
	int after;  /* the first call after SIGCONT */
	int later;  /* a second one */
};

/* The frozen child, in a process of its own (exec'ed: verbs and fork do not
 * mix).  Reports to wfd after its setup and after it has been continued. */
static int frozen_main(const char *endpoint, int wfd, int go_fd)
{
	struct frozen_report rep = { 0 };
	uint8_t buf[4096], go;
	struct rmem_region r;
	rmem_client *c = NULL;

	rep.setup = client_connect(endpoint, 10000, &c);
	if (rep.setup == 0)
		rep.setup = rmem_alloc(c, 1 * MiB, 0, &r);
	if (rep.setup == 0) {
		fill_random(buf, sizeof buf, 11);
		rep.setup = rmem_write(c, &r, 0, buf, sizeof buf);
	}
	if (write(wfd, &rep, sizeof rep) != sizeof rep)
		return 2;
	/* Stopped and continued in here by the parent. */
	if (read(go_fd, &go, 1) != 1)
		return 3;
	if (rep.setup == 0) {
		rep.after = rmem_read(c, &r, 0, buf, sizeof buf);
		rep.later = rmem_alloc(c, 4096, 0, &r);
	}
	rmem_close(c);
	return write(wfd, &rep, sizeof rep) == sizeof rep ? 0 : 2;
}

static int frozen_exec(int wfd, void *arg)
{
	const struct frozen *fz = arg;
	char out[16], in[16];
	int keep = dup(wfd); /* without close-on-exec */

	snprintf(out, sizeof out, "%d", keep);
	snprintf(in, sizeof in, "%d", fz->go_fd);
	execl("/proc/self/exe", "test_lease", "--frozen", fz->endpoint, out, in, (char *)NULL);
	return 127;
}

static bool child_stopped(pid_t pid)
{
	int status;

	return waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status);
}

static void frozen_client(const struct rmemd *d, rmem_client *mon)
{
	struct frozen_report rep = { -EIO, -EIO, -EIO };
	struct frozen fz = { .endpoint = d->tcp_ep };
	struct rmem_stats st = { 0 };
	struct child ch = { .pid = 0 };
	int go[2], rc;

	rc = pipe(go) < 0 ? -errno : 0;
	fz.go_fd = rc ? -1 : go[0];
	rc = rc ? rc : child_spawn(&ch, frozen_exec, &fz);
	if (rc == 0 && read(ch.rfd, &rep, sizeof rep) != sizeof rep)
		rc = -EIO;
	rc = rc ? rc : rep.setup;
	ok(rc == 0, "a child client allocates 1 MiB and writes it (%d)", rc);
	if (rc) {
		skip(5, "no child client");
		goto out;
	}
	rc = stats_wait(mon, 1 * MiB, 1, WAIT_MS, &st);
	ok(rc == 0, "the daemon holds its region (used %llu)", (unsigned long long)st.used_bytes);

	kill(ch.pid, SIGSTOP);
	ok(child_stopped(ch.pid), "the child is stopped with SIGSTOP");
	rc = stats_wait(mon, 0, 0, WAIT_MS, &st);
	ok(rc == 0, "within %d ms its region is back: used %llu, regions %llu (%d)", WAIT_MS,
	   (unsigned long long)st.used_bytes, (unsigned long long)st.regions, rc);
	ok(log_wait(d, "lease expired", WAIT_MS), "the daemon logs the lease's expiry");

	if (write(go[1], "g", 1) != 1)
		diag("cannot tell the child to go on: %s", strerror(errno));
	kill(ch.pid, SIGCONT);
	if (read(ch.rfd, &rep, sizeof rep) != sizeof rep)
		rep.after = rep.later = -EIO;
	ok(rep.after == -ECONNRESET && rep.later == -ECONNRESET,
	   "continued, its next calls return -ECONNRESET (%d: %s, then %d)", rep.after,
	   rmem_strerror(rep.after), rep.later);
out:
	if (ch.pid > 0)
		child_end(&ch, SIGKILL);
	if (fz.go_fd >= 0) {
		close(go[0]);
		close(go[1]);
	}
}

/* ---- silent and half-sent connections --------------------------------------- */

static void silent_connections(const struct rmemd *d)
{
	int quiet = raw_connect_tcp(d->port);
	int hello = raw_session(d, false);
	int rc;

	ok(quiet >= 0 && hello >= 0, "one connection says nothing, another HELLO only (%d, %d)",
	   quiet, hello);
	rc = quiet >= 0 ? raw_wait_closed(quiet, WAIT_MS) : quiet;
	ok(rc == 0, "the silent one is closed once its lease runs out (%d)", rc);
	rc = hello >= 0 ? raw_wait_closed(hello, WAIT_MS) : hello;
	ok(rc == 0, "the HELLO-only one too (%d)", rc);
	close_fd(quiet);
	close_fd(hello);
}

/*
 * WRITE data that comes after the daemon has started waiting for the rest:
 * it waits under SO_RCVLOWAT (conn.c), so these bytes stay in the socket
 * without waking it.  The peer has stalled all the same, and must still be
 * dropped; bytes sitting below the mark are not ours to read.
 */
static void late_write_data(const struct rmemd *d, uint8_t *f, size_t len)
{
	int late = raw_session(d, false);
	int rc;

	raw_hdr(f, PROTO_VERSION, PROTO_OP_WRITE, 0, (uint32_t)(PROTO_IO_REQ_LEN + MiB), 2);
	proto_put_u64(f + PROTO_HDR_LEN, 12345);
	rc = late >= 0 ? raw_send(late, f, len) : late;
	sleep_ms(200);
	rc = rc ? rc : raw_send(late, f + PROTO_HDR_LEN + PROTO_IO_REQ_LEN, 4096);
	ok(rc == 0, "a WRITE's header and 4 KiB, then 4 KiB more after 200 ms (%d)", rc);
	rc = late >= 0 ? raw_wait_closed(late, WAIT_MS) : late;
	ok(rc == 0, "the late data does not keep the stalled WRITE alive (%d)", rc);
	close_fd(late);
}

static void partial_frames(const struct rmemd *d)
{
	uint8_t f[PROTO_HDR_LEN + PROTO_IO_REQ_LEN + 4096] = { 0 };
	int half = raw_session(d, false), body = raw_session(d, false), wdata = raw_session(d, false);
	int rc;

	/* Half a header. */
	raw_hdr(f, PROTO_VERSION, PROTO_OP_PING, 0, 0, 2);
	rc = half >= 0 ? raw_send(half, f, PROTO_HDR_LEN / 2) : half;
	/* A header promising an ALLOC's 16 bytes, and 3 of them. */
	raw_hdr(f, PROTO_VERSION, PROTO_OP_ALLOC, 0, PROTO_ALLOC_REQ_LEN, 2);
	rc = rc ? rc : body >= 0 ? raw_send(body, f, PROTO_HDR_LEN + 3) : body;
	/* A WRITE of 1 MiB with 4 KiB of its data (to no region: it is refused
	 * once its data is in, so the daemon must wait for all of it). */
	raw_hdr(f, PROTO_VERSION, PROTO_OP_WRITE, 0, (uint32_t)(PROTO_IO_REQ_LEN + MiB), 2);
	proto_put_u64(f + PROTO_HDR_LEN, 12345);
	rc = rc ? rc : wdata >= 0 ? raw_send(wdata, f, sizeof f) : wdata;
	ok(rc == 0, "three connections stop in a header, in a payload and in WRITE data (%d)",
	   rc);

	rc = other_client_served(d, 21);
	ok(rc == 0, "meanwhile another client is served (%d)", rc);
	rc = half >= 0 ? raw_wait_closed(half, WAIT_MS) : half;
	ok(rc == 0, "the half header is dropped after frame_timeout_ms (%d)", rc);
	rc = body >= 0 ? raw_wait_closed(body, WAIT_MS) : body;
	ok(rc == 0, "the short payload too (%d)", rc);
	rc = wdata >= 0 ? raw_wait_closed(wdata, WAIT_MS) : wdata;
	ok(rc == 0, "and the stalled WRITE data (%d)", rc);
	ok(rmemd_log_contains(d, "partial frame stalled"), "the daemon says why");
	late_write_data(d, f, sizeof f);
	close_fd(half);
	close_fd(body);
	close_fd(wdata);
}

static void oversized_frame(const struct rmemd *d)
{
	uint8_t f[PROTO_HDR_LEN];
	struct raw_reply r;
	int fd = raw_session(d, false);
	int rc;

	raw_hdr(f, PROTO_VERSION, PROTO_OP_PING, 0, PROTO_MAX_CTL + 1, 3);
	rc = fd >= 0 ? raw_send(fd, f, sizeof f) : fd;
	rc = rc ? rc : raw_recv_reply(fd, &r, PROTO_MAX_CTL, WAIT_MS);
	if (rc == 0) {
		ok(r.opcode == PROTO_OP_ERROR && r.status == EMSGSIZE,
		   "a control frame longer than the codec allows: ERROR EMSGSIZE (op %u, %d)",
		   r.opcode, r.status);
		raw_reply_release(&r);
	} else {
		ok(0, "a control frame longer than the codec allows is answered (%d)", rc);
	}
	rc = fd >= 0 ? raw_wait_closed(fd, WAIT_MS) : fd;
	ok(rc == 0, "and the connection is closed (%d)", rc);
	close_fd(fd);
}

/* ---- pipelining without reading ------------------------------------------------ */

/* Encodes a READ of len bytes at offset 0 of region (id, key). */
static void put_read(uint8_t *f, uint64_t req_id, uint64_t id, uint32_t key, uint32_t len)
{
	raw_hdr(f, PROTO_VERSION, PROTO_OP_READ, 0, PROTO_IO_REQ_LEN, req_id);
	proto_put_u64(f + PROTO_HDR_LEN, id);
	proto_put_u64(f + PROTO_HDR_LEN + 8, 0);
	proto_put_u32(f + PROTO_HDR_LEN + 16, key);
	proto_put_u32(f + PROTO_HDR_LEN + 20, len);
}

/*
 * Sends READs of 1 KiB of region (id, key) without reading a reply, until
 * the socket stays full for a while (the daemon has stopped reading us) or
 * total bytes have gone.  Returns the bytes sent.
 */
static uint64_t flood(int fd, uint64_t id, uint32_t key, uint64_t total)
{
	enum { BATCH = 256, FRAME = PROTO_HDR_LEN + PROTO_IO_REQ_LEN };
	static uint8_t batch[BATCH * FRAME];
	uint64_t sent = 0, req_id = 100, full_since = 0;
	size_t at = sizeof batch;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (sent < total) {
		ssize_t n;

		if (at == sizeof batch) {
			for (int i = 0; i < BATCH; i++)
				put_read(batch + (size_t)i * FRAME, req_id++, id, key, 1024);
			at = 0;
		}
		n = send(fd, batch + at, sizeof batch - at, MSG_NOSIGNAL);
		if (n > 0) {
			at += (size_t)n;
			sent += (uint64_t)n;
			full_since = 0;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break;
		if (!full_since)
			full_since = now_ms();
		else if (now_ms() - full_since > 300)
			break;
		sleep_ms(5);
	}
	return sent;
}

static void pipeliner(const struct rmemd *d, rmem_client *mon)
{
	const uint64_t total = 256 * MiB;
	uint64_t rss0 = 0, rss1 = 0, sent;
	struct raw_reply r;
	struct rmem_stats st;
	uint8_t f[PROTO_HDR_LEN + PROTO_ALLOC_REQ_LEN] = { 0 };
	uint64_t id = 0;
	uint32_t key = 0;
	int fd = raw_session(d, false);
	int rc;

	raw_hdr(f, PROTO_VERSION, PROTO_OP_ALLOC, 0, PROTO_ALLOC_REQ_LEN, 2);
	proto_put_u64(f + PROTO_HDR_LEN, 4096);
	rc = fd >= 0 ? raw_call(fd, PROTO_OP_ALLOC, 2, f + PROTO_HDR_LEN, PROTO_ALLOC_REQ_LEN,
				&r, PROTO_MAX_CTL, WAIT_MS) : fd;
	if (rc == 0) {
		if (r.status == 0 && r.length == PROTO_ALLOC_REP_LEN) {
			id = proto_get_u64(r.payload + 8);
			key = proto_get_u32(r.payload + 32);
		} else {
			rc = -EPROTO;
		}
		raw_reply_release(&r);
	}
	rc = rc ? rc : proc_status_kb(d->pid, "VmRSS:", &rss0);
	ok(rc == 0, "a raw client allocates 4 KiB (rmemd RSS %llu KiB) (%d)",
	   (unsigned long long)rss0, rc);
	if (rc) {
		skip(4, "no raw client");
		goto out;
	}
	sent = flood(fd, id, key, total);
	ok(sent < total, "it pipelines READs of 1 KiB without reading: the daemon stops "
	   "taking them after %llu KiB of requests", (unsigned long long)(sent / KiB));
	rc = proc_status_kb(d->pid, "VmRSS:", &rss1);
	ok(rc == 0 && rss1 < rss0 + 64 * 1024,
	   "rmemd's RSS grows by %lld KiB, not by the replies it was asked for (%llu MiB)",
	   (long long)rss1 - (long long)rss0,
	   (unsigned long long)(sent / (PROTO_HDR_LEN + PROTO_IO_REQ_LEN) / 1024));
	rc = other_client_served(d, 31);
	ok(rc == 0, "meanwhile another client is served (%d)", rc);
out:
	close_fd(fd);
	rc = stats_wait(mon, 0, 0, WAIT_MS, &st);
	ok(rc == 0, "once it hangs up, its region is back (used %llu) (%d)",
	   (unsigned long long)st.used_bytes, rc);
}

/* ---- fork ---------------------------------------------------------------------- */

static int close_inherited(int wfd, void *arg)
{
	(void)wfd;
	rmem_close(arg);
	return 0;
}

/* A child of fork() has no keepalive thread: closing the client it inherited
 * must neither wait for one nor end the parent's session. */
static void forked_close(rmem_client *mon)
{
	struct child ch;
	int rc = child_spawn(&ch, close_inherited, mon);

	rc = rc ? rc : child_end(&ch, 0);
	ok(rc == 0, "a forked child closes the client it inherited and exits (%d)", rc);
	sleep_ms(2 * lease_ms);
	rc = round_trip(mon, 4096, 51);
	ok(rc == 0, "the parent's client lives on, keepalive and all (%d)", rc);
}

/* ---- max_clients ------------------------------------------------------------- */

static void full_house(const struct rmemd *d, rmem_client *mon)
{
	rmem_client *cs[MAX_CLIENTS + 1] = { NULL };
	struct rmem_stats st = { 0 };
	int n = 0, rc = 0;

	/* The monitor client holds one slot; the daemon may still be ending
	 * the sessions of clients closed a moment ago. */
	for (int i = 0; i < 250 && rmem_stats(mon, &st) == 0 && st.clients > 1; i++)
		sleep_ms(20);
	for (int i = 0; i < MAX_CLIENTS; i++) {
		rc = client_connect(d->tcp_ep, 10000, &cs[i]);
		if (rc)
			break;
		n++;
	}
	ok(n == MAX_CLIENTS - 1 && rc == -EUSERS,
	   "past limits.max_clients (%d) a client is refused with -EUSERS (%d clients, %d: %s)",
	   MAX_CLIENTS, n, rc, rmem_strerror(rc));
	ok(rmemd_log_contains(d, "limits.max_clients"), "the daemon logs the refusal");
	for (int i = 0; i <= MAX_CLIENTS; i++)
		rmem_close(cs[i]);
}

int main(int argc, char **argv)
{
	struct rmemd d;
	rmem_client *mon = NULL;
	char limits[256];
	int rc;

	if (argc == 5 && strcmp(argv[1], "--frozen") == 0)
		return frozen_main(argv[2], (int)strtol(argv[3], NULL, 10),
				   (int)strtol(argv[4], NULL, 10));

	if (harness_rdma()) {
		lease_ms = 2000;
		frame_ms = 1000;
	}
	snprintf(limits, sizeof limits, "limits = { max_clients = %d; lease_timeout_ms = %d; "
		 "frame_timeout_ms = %d; conn_max_requests = 64; conn_max_buffered = \"64K\"; };",
		 MAX_CLIENTS, lease_ms, frame_ms);
	rc = rmemd_start(&d, "64M", limits);
	if (rc == -ENOENT)
		tap_skip_all("no rmemd in $RMEM_BUILD");
	if (!ok(rc == 0, "rmemd starts with a %d ms lease (%d)", lease_ms, rc))
		return tap_done();
	/* The monitor, on the Unix socket, stays idle for long stretches too. */
	rc = client_connect(d.unix_ep, 10000, &mon);
	if (!ok(rc == 0, "a monitor client connects (%d)", rc)) {
		rmemd_stop(&d);
		rmemd_cleanup(&d);
		return tap_done();
	}

	idle_client_kept(&d, mon);
	busy_client_kept(&d, mon);
	frozen_client(&d, mon);
	silent_connections(&d);
	partial_frames(&d);
	oversized_frame(&d);
	pipeliner(&d, mon);
	full_house(&d, mon);
	forked_close(mon);

	rc = round_trip(mon, 4096, 41);
	if (!ok(rc == 0, "the monitor, idle all along, still has its session (%d)", rc))
		rmemd_log_tail(&d, 80);
	rmem_close(mon);
	return harness_finish(&d);
}
