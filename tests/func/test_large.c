/*
 * test_large.c - single rmem_write/rmem_read calls of 64 MiB and 200 MiB,
 * verified byte for byte, while watching that neither the daemon nor the
 * client buffers the transfer: their peak RSS must not grow by anything like
 * the amount moved (the data streams in bounded chunks).
 * With RMEM_TEST_TRANSPORT=rdma (in the test VM) the network endpoint is
 * rdma://: the daemon moves no bytes at all, so its check holds all the more.
 * Freed RDMA-keyed regions count as used until their quarantine ends (about
 * 200 ms): each allocation first waits for the pool to be empty again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define MiB (1024ull * 1024)
#define BIG (200 * MiB)
#define MEDIUM (64 * MiB)
/* What the peak RSS may grow by while 200 MiB flow (a few chunks in flight). */
#define GROWTH_LIMIT_KB (64 * 1024)

static double mib_per_s(uint64_t bytes, uint64_t ms)
{
	return (double)bytes / (double)MiB / ((double)(ms ? ms : 1) / 1000.0);
}

/* One write and one read of len bytes at off, verified. */
static void transfer(rmem_client *c, const char *tr, uint64_t off, uint8_t *src, uint8_t *dst,
		     uint64_t len)
{
	struct rmem_region r;
	struct rmem_stats st;
	uint64_t t0, tw, tr_ms;
	int rc;

	rc = stats_wait(c, 0, 0, 2000, &st);
	rc = rc ? rc : rmem_alloc(c, len + off + 2, 0, &r);
	if (!ok(rc == 0, "%s: alloc %llu MiB + %llu (%d)", tr, (unsigned long long)(len / MiB),
		(unsigned long long)(off + 2), rc)) {
		skip(off ? 6 : 5, "no region");
		return;
	}
	t0 = now_ms();
	rc = rmem_write(c, &r, off, src, len);
	tw = now_ms() - t0;
	ok(rc == 0, "%s: one rmem_write of %llu MiB at offset %llu (%d)", tr,
	   (unsigned long long)(len / MiB), (unsigned long long)off, rc);
	memset(dst, 0x11, len);
	t0 = now_ms();
	rc = rmem_read(c, &r, off, dst, len);
	tr_ms = now_ms() - t0;
	ok(rc == 0 && memcmp(src, dst, len) == 0, "%s: one rmem_read of %llu MiB, equal (%d)", tr,
	   (unsigned long long)(len / MiB), rc);
	diag("%s: %llu MiB written at %.0f MiB/s, read at %.0f MiB/s", tr,
	     (unsigned long long)(len / MiB), mib_per_s(len, tw), mib_per_s(len, tr_ms));

	/* Pieces that straddle the client's chunk boundaries. */
	{
		uint8_t piece[8192];
		uint64_t at = PROTO_MAX_IO - 4096 + 1;
		int bad = 0;

		for (; at + sizeof piece <= len; at += PROTO_MAX_IO) {
			rc = rmem_read(c, &r, off + at, piece, sizeof piece);
			bad += rc != 0 || memcmp(piece, src + at, sizeof piece) != 0;
		}
		ok(bad == 0, "%s: 8 KiB reads across every 16 MiB boundary match (%d bad)", tr,
		   bad);
		if (off) {
			rc = rmem_read(c, &r, 0, piece, off);
			ok(rc == 0 && all_zero(piece, off),
			   "%s: the %llu bytes before the data are zero", tr,
			   (unsigned long long)off);
		}
		rc = rmem_read(c, &r, off + len, piece, 2);
		ok(rc == 0 && all_zero(piece, 2), "%s: the 2 bytes after the data are zero", tr);
	}
	rc = rmem_free(c, &r);
	ok(rc == 0, "%s: free (%d)", tr, rc);
}

static uint64_t hwm_kb(pid_t pid)
{
	uint64_t kb = 0;

	if (proc_status_kb(pid, "VmHWM:", &kb) < 0)
		return 0;
	return kb;
}

static int warm_pool(rmem_client *c, const uint8_t *zeros)
{
	struct rmem_stats st;
	struct rmem_region r;
	int rc = rmem_stats(c, &st);

	if (rc == 0)
		rc = rmem_alloc(c, st.largest_free, 0, &r);
	if (rc < 0)
		return rc;
	for (uint64_t at = 0; at < r.length && rc == 0; at += BIG) {
		uint64_t n = r.length - at < BIG ? r.length - at : BIG;

		rc = rmem_write(c, &r, at, zeros, n);
	}
	if (rc == 0)
		rc = rmem_free(c, &r);
	return rc;
}

/* ss(8)'s word on the established TCP sockets of port: how many there are
 * (*total) and how many use congestion control name.  -1 without ss. */
static int ends_using(uint16_t port, const char *name, int *total)
{
	char cmd[200], line[1024], word[32];
	int n = 0;
	FILE *f;

	*total = 0;
	if (access("/usr/bin/ss", X_OK) && access("/bin/ss", X_OK) && access("/sbin/ss", X_OK) &&
	    access("/usr/sbin/ss", X_OK))
		return -1;
	snprintf(cmd, sizeof cmd, "ss -tinH state established '( sport = :%u or dport = :%u )' "
		 "2>/dev/null", (unsigned)port, (unsigned)port);
	snprintf(word, sizeof word, " %s ", name);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	/* Each socket is an address line, then an indented line of its
	 * details, which starts with the congestion control's name. */
	while (fgets(line, sizeof line, f)) {
		char padded[sizeof line + 2];

		if (line[0] != ' ' && line[0] != '\t')
			continue;
		(*total)++;
		snprintf(padded, sizeof padded, " %s", line);
		for (char *p = padded; *p; p++)
			if (*p == '\t')
				*p = ' ';
		if (strstr(padded, word))
			n++;
	}
	pclose(f);
	return n;
}

static void show_rss(pid_t pid, const char *who)
{
	uint64_t rss = 0, hwm = 0;

	proc_status_kb(pid, "VmRSS:", &rss);
	proc_status_kb(pid, "VmHWM:", &hwm);
	diag("%s: VmRSS %llu KiB, VmHWM %llu KiB", who, (unsigned long long)rss,
	     (unsigned long long)hwm);
}

int main(void)
{
	struct rmemd d;
	rmem_client *tcp = NULL, *unx = NULL;
	uint8_t *src, *dst;
	uint64_t dhwm0, dhwm1, chwm0, chwm1, rss = 0;
	struct rmem_opts o;
	int rc, ends = 0;

	src = malloc(BIG);
	dst = malloc(BIG);
	if (!src || !dst)
		tap_skip_all("cannot allocate 2 x 200 MiB of test buffers");
	/* Touch everything now so the client's peak below is the library's own. */
	fill_random(src, BIG, 2024);
	memset(dst, 0, BIG);

	/* reno on both ends, neither's default (bbr or cubic), so that ss can
	 * tell the option took; reno is in every kernel and always allowed. */
	if (!harness_start(&d, "256M", "tcp = { congestion = \"reno\"; };"))
		return tap_done();
	rmem_opts_init(&o, sizeof o);
	o.timeout_ms = 30000;
	o.tcp_congestion = "reno";
	rc = rmem_connect(d.tcp_ep, &o, &tcp);
	ok(rc == 0 && !strcmp(rmem_transport(tcp), harness_transport()), "connect over %s (%d)",
	   harness_transport(), rc);
	/* Asked over TCP only (the host's run): the test VM's kernel loads no
	 * inet_diag, so ss(8) sees no socket there, and its runs are about
	 * the RDMA data path. */
	rc = strcmp(harness_transport(), "tcp") ? 0 : ends_using(d.port, "reno", &ends);
	if (rc < 0)
		skip(1, "no ss(8) to ask which congestion control the sockets use");
	else if (!strcmp(harness_transport(), "tcp"))
		ok(rc == 2 && ends == 2, "both ends use reno (client's tcp_congestion, daemon's "
		   "tcp.congestion): %d of %d", rc, ends);
	rc = client_connect(d.unix_ep, 30000, &unx);
	ok(rc == 0, "connect over unix (%d)", rc);
	if (!tcp || !unx) {
		rmemd_cleanup(&d);
		tap_skip_all("no connection");
	}

	/* Make the whole pool resident before the baseline: a sanitized rmemd
	 * cannot mlock() it (ASan makes mlock a no-op), so its pages would
	 * otherwise count as growth the first time data lands in them. */
	rc = warm_pool(tcp, dst);
	ok(rc == 0, "warm-up: the whole pool written once (%d)", rc);

	dhwm0 = hwm_kb(d.pid);
	chwm0 = hwm_kb(getpid());
	proc_status_kb(d.pid, "VmRSS:", &rss);
	ok(dhwm0 > 0 && chwm0 > 0, "peak RSS readable: daemon %llu KiB (RSS %llu, pool 256 MiB), "
	   "client %llu KiB", (unsigned long long)dhwm0, (unsigned long long)rss,
	   (unsigned long long)chwm0);

	transfer(tcp, harness_transport(), 0, src, dst, MEDIUM);
	show_rss(d.pid, "daemon");
	transfer(unx, "unix", 0, src, dst, MEDIUM);
	show_rss(d.pid, "daemon");
	transfer(tcp, harness_transport(), 3, src, dst, BIG);
	show_rss(d.pid, "daemon");
	transfer(unx, "unix", 5, src, dst, BIG);
	show_rss(d.pid, "daemon");

	dhwm1 = hwm_kb(d.pid);
	chwm1 = hwm_kb(getpid());
	ok(dhwm1 && dhwm1 - dhwm0 < GROWTH_LIMIT_KB,
	   "daemon peak RSS grew by %lld KiB while 528 MiB went each way (limit %u KiB)",
	   (long long)dhwm1 - (long long)dhwm0, GROWTH_LIMIT_KB);
	ok(chwm1 && chwm1 - chwm0 < GROWTH_LIMIT_KB,
	   "client peak RSS grew by %lld KiB beyond its own buffers (limit %u KiB)",
	   (long long)chwm1 - (long long)chwm0, GROWTH_LIMIT_KB);

	rmem_close(tcp);
	rmem_close(unx);
	free(src);
	free(dst);
	return harness_finish(&d);
}
