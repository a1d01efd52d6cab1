/*
 * redundancy.c - make bench-redundancy's client (scripts/bench-redundancy
 * starts etcd and the servers).  Public API for the cluster; the coding
 * figures call client-lib/stripe.c directly, and ISA-L beside it.
 *
 *   redundancy PLAIN_URL RED_URL KILL_PIDS [-r ROUNDS] [-m MIB]
 *   redundancy -F NAME -m MIB RED_URL     the repair step's named region
 *   redundancy -V NAME URL                its bytes checked after the repair
 *   redundancy -c                         the coding figures alone
 *
 * PLAIN_URL is the cluster without redundancy, RED_URL the same with
 * "?redundancy=4+2"; KILL_PIDS two rmemd pids ("p1,p2") killed (-9) before
 * the degraded step.  Prints one JSON object per line:
 *  - memory: used bytes across the cluster for a region of MIB MiB on each
 *    client, and their ratio to the bytes asked;
 *  - healthy: plain against redundant, alternated round by round: 1 MiB
 *    reads and writes (MB/s), one call at a time and 16 posted in flight
 *    (rmem_post_read/_write, rmem_poll; with the client's CPU time per
 *    MiB), 4 KiB reads at random page offsets (p50, p99 ns);
 *  - degraded: two servers killed; 4 KiB read p50 per data piece (chunk
 *    column), and the worst column's against the healthy p50;
 *  - coding: ns per MiB to encode 4+2 parity, to add a 4 KiB delta, and to
 *    rebuild one or two lost pieces, each beside ISA-L's own call (below);
 *  - with -F: the named region made and filled with a pattern (MB/s), then
 *    closed; with -V: every byte of it read and compared (MiB wrong).
 * A benchmark: it asserts nothing; exit 1 when a step cannot run.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <isa-l/erasure_code.h>
#include <rmem.h>

#include "stripe.h"

#define MiB (1ull << 20)
#define PAGE 4096u
#define K 4u

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t pct(int64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp64);
	return v[(size_t)((double)(n - 1) * p)];
}

static rmem_client *connect_to(const char *url)
{
	struct rmem_opts o;
	rmem_client *c = NULL;
	int rc;

	rmem_opts_init(&o, sizeof o);
	o.resume_ms = 300; /* a killed server is read around after this */
	rc = rmem_connect(url, &o, &c);
	if (rc)
		fprintf(stderr, "redundancy: rmem_connect(%s): %s\n", url, rmem_strerror(rc));
	return c;
}

static uint64_t used(rmem_client *c)
{
	struct rmem_stats st;

	return rmem_stats(c, &st) == 0 ? st.used_bytes : 0;
}

/* MB/s of n 1 MiB transfers (reads, or writes) spread over the region. */
static double bulk(rmem_client *c, const struct rmem_region *r, unsigned char *buf, bool write,
		   unsigned n)
{
	int64_t t0 = now_ns();

	for (unsigned i = 0; i < n; i++) {
		uint64_t off = (uint64_t)(i % (r->length / MiB)) * MiB;
		int rc = write ? rmem_write(c, r, off, buf, MiB) : rmem_read(c, r, off, buf, MiB);

		if (rc) {
			fprintf(stderr, "redundancy: 1 MiB %s: %s\n", write ? "write" : "read",
				rmem_strerror(rc));
			return -1;
		}
	}
	return (double)n * MiB / 1e6 / ((double)(now_ns() - t0) / 1e9);
}

#define DEPTH 16

static int64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* MB/s of n 1 MiB transfers posted, DEPTH in flight (bufs: DEPTH MiB);
 * *cpu_us: this process's CPU time per MiB, in us. */
static double bulk_posted(rmem_client *c, const struct rmem_region *r, unsigned char *bufs,
			  bool write, unsigned n, double *cpu_us)
{
	uint64_t slots = r->length / MiB;
	unsigned posted = 0, done = 0;
	int64_t t0 = now_ns(), c0 = cpu_ns();

	while (done < n) {
		struct rmem_completion cq[DEPTH];
		int got;

		for (; posted < n && posted - done < DEPTH; posted++) {
			unsigned b = posted % DEPTH;
			uint64_t off = (uint64_t)(posted % slots) * MiB;
			int rc = write ? rmem_post_write(c, r, off, bufs + (size_t)b * MiB, MiB, b) :
					 rmem_post_read(c, r, off, bufs + (size_t)b * MiB, MiB, b);

			if (rc) {
				fprintf(stderr, "redundancy: posted 1 MiB %s: %s\n",
					write ? "write" : "read", rmem_strerror(rc));
				return -1;
			}
		}
		got = rmem_poll(c, cq, DEPTH, 10000);
		if (got <= 0) {
			fprintf(stderr, "redundancy: rmem_poll: %s\n", got ? rmem_strerror(got) : "none");
			return -1;
		}
		for (int i = 0; i < got; i++)
			if (cq[i].status) {
				fprintf(stderr, "redundancy: posted 1 MiB: %s\n",
					rmem_strerror(cq[i].status));
				return -1;
			}
		done += (unsigned)got;
	}
	*cpu_us = (double)(cpu_ns() - c0) / 1e3 / n;
	return (double)n * MiB / 1e6 / ((double)(now_ns() - t0) / 1e9);
}

/* n 4 KiB reads at random pages (column col of the stripe when col >= 0),
 * each timed into lat. */
static int pages(rmem_client *c, const struct rmem_region *r, int col, unsigned n, int64_t *lat)
{
	unsigned char buf[PAGE];
	uint64_t npages = r->length / PAGE;

	for (unsigned i = 0; i < n; i++) {
		uint64_t p = (uint64_t)rand() % npages;
		int64_t t0;
		int rc;

		if (col >= 0)
			p = p / K * K + (uint64_t)col;
		t0 = now_ns();
		rc = rmem_read(c, r, p * PAGE, buf, PAGE);
		lat[i] = now_ns() - t0;
		if (rc) {
			fprintf(stderr, "redundancy: 4 KiB read: %s\n", rmem_strerror(rc));
			return -1;
		}
	}
	return 0;
}

/* ---- coding: stripe.c against ISA-L called directly -------------------------------- */

/* What is timed: stripe.c's call (ours) or ISA-L's own, the way its
 * erasure_code_perf times it (tables made once, outside the loop). */
enum cop { ENCODE, DELTA, REBUILD1, REBUILD2 };

#define SEG (256u * 1024) /* REDUND_SEG: a write's, a repair's piece bytes at once */
#define NPASS 9

static unsigned char cbuf[6][SEG];

struct isal {
	unsigned char enc_tbls[32 * 4 * 2];
	unsigned char dec1_tbls[32 * 4 * 1], dec2_tbls[32 * 4 * 2];
};

/* ISA-L's decode tables for want[] from the pieces have[] of 4+2, as
 * erasure_code_perf makes them: the survivors' rows inverted, each wanted
 * row times the inverse. */
static void isal_decode_tables(const unsigned char *m, const unsigned *have, const unsigned *want,
			       unsigned nwant, unsigned char *tbls)
{
	unsigned char sub[16], inv[16], dec[2 * 4];

	for (unsigned i = 0; i < K; i++)
		memcpy(sub + i * K, m + have[i] * K, K);
	gf_invert_matrix(sub, inv, K);
	for (unsigned w = 0; w < nwant; w++)
		for (unsigned col = 0; col < K; col++) {
			unsigned char acc = 0;

			for (unsigned t = 0; t < K; t++)
				acc ^= gf_mul(m[want[w] * K + t], inv[t * K + col]);
			dec[w * K + col] = acc;
		}
	ec_init_tables(K, (int)nwant, dec, tbls);
}

/* ns per MiB of data (of the K data pieces; of the delta for DELTA) for
 * op over len bytes per piece, ours or ISA-L's, one pass. */
static int64_t coding_pass(const struct stripe_code *code, const struct isal *is, enum cop op,
			   bool ours, size_t len)
{
	unsigned char *ptr[6], *in[4], *out[2];
	unsigned have[4] = { 2, 3, 4, 5 }, want[2] = { 0, 1 };
	size_t per = SEG / len, calls = (16 * MiB) / (len * (op == DELTA ? 1 : K)), bytes;
	int64_t t0 = now_ns();

	for (size_t c = 0; c < calls; c++) {
		size_t at = (c % per) * len;

		for (unsigned i = 0; i < 6; i++)
			ptr[i] = cbuf[i] + at;
		for (unsigned i = 0; i < 4; i++)
			in[i] = cbuf[have[i]] + at;
		out[0] = ptr[0];
		out[1] = ptr[1];
		switch (op) {
		case ENCODE:
			if (ours)
				stripe_encode(code, len, ptr, ptr + K);
			else
				ec_encode_data((int)len, K, 2, (unsigned char *)is->enc_tbls, ptr, ptr + K);
			break;
		case DELTA:
			if (ours)
				stripe_delta(code, len, c % K, ptr[c % K], ptr + K);
			else
				ec_encode_data_update((int)len, K, 2, (int)(c % K),
						      (unsigned char *)is->enc_tbls, ptr[c % K], ptr + K);
			break;
		case REBUILD1:
		case REBUILD2:
			if (ours)
				stripe_rebuild(code, len, have, in, want, op == REBUILD1 ? 1 : 2, out);
			else
				ec_encode_data((int)len, K, op == REBUILD1 ? 1 : 2,
					       (unsigned char *)(op == REBUILD1 ? is->dec1_tbls :
										  is->dec2_tbls),
					       in, out);
			break;
		}
	}
	bytes = calls * len * (op == DELTA ? 1 : K);
	return (now_ns() - t0) * (int64_t)MiB / (int64_t)bytes;
}

/*
 * The coding figures: stripe.c's encode, 4 KiB delta and rebuilds of one
 * and two pieces, each beside ISA-L's ec_encode_data (or
 * ec_encode_data_update) called directly with tables made once, for 4+2 at
 * two lengths per piece: 256 KiB (a write's or a repair's segment) and
 * 4 KiB (the chunk: a page read around, a partial write).  Ours and
 * ISA-L's alternate pass by pass; each is the fastest of NPASS passes
 * (CPU work that does not vary: a shared host only adds to it).
 */
static void coding(void)
{
	static const char *names[] = { "encode", "delta", "rebuild1", "rebuild2" };
	static const size_t lens[] = { SEG, STRIPE_CHUNK };
	unsigned want1[1] = { 0 }, want2[2] = { 0, 1 }, have[4] = { 2, 3, 4, 5 };
	struct stripe_code code;
	struct isal is;

	stripe_code_init(&code, K, 2);
	/* ISA-L's own: the same Cauchy matrix, as its example makes it. */
	{
		unsigned char m[6 * 4];

		gf_gen_cauchy1_matrix(m, 6, K);
		ec_init_tables(K, 2, m + K * K, is.enc_tbls);
		isal_decode_tables(m, have, want1, 1, is.dec1_tbls);
		isal_decode_tables(m, have, want2, 2, is.dec2_tbls);
	}
	for (unsigned i = 0; i < 6; i++)
		for (size_t b = 0; b < SEG; b++)
			cbuf[i][b] = (unsigned char)rand();
	for (unsigned l = 0; l < 2; l++)
		for (unsigned op = ENCODE; op <= REBUILD2; op++) {
			int64_t o[NPASS], s[NPASS], om, sm;

			if (op == DELTA && lens[l] != STRIPE_CHUNK)
				continue; /* a partial write's delta is chunk-sized */
			for (unsigned p = 0; p < NPASS; p++) {
				o[p] = coding_pass(&code, &is, op, true, lens[l]);
				s[p] = coding_pass(&code, &is, op, false, lens[l]);
			}
			om = pct(o, NPASS, 0.0);
			sm = pct(s, NPASS, 0.0);
			printf("{\"step\":\"coding\",\"code\":\"4+2\",\"op\":\"%s\",\"piece_bytes\":%zu,"
			       "\"ns_per_mib\":%" PRId64 ",\"isal_ns_per_mib\":%" PRId64
			       ",\"ratio\":%.3f}\n", names[op], lens[l], om, sm, (double)om / (double)sm);
		}
	fflush(stdout);
}

/* ---- the repair step's region: a named one, filled, then checked --------------------- */

/* The pattern: each 8-byte word its own offset, mixed with a constant. */
static void pattern(unsigned char *buf, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = (off + i) ^ 0x9e3779b97f4a7c15ull;

		memcpy(buf + i, &w, 8);
	}
}

/* Creates name (mib MiB) on url, writes the pattern over it, closes it
 * (its writer key goes, so rmemd's repair agent may open it). */
static int named_fill(const char *url, const char *name, unsigned mib)
{
	rmem_client *c = connect_to(url);
	unsigned char *buf = malloc(MiB);
	struct rmem_region r;
	int64_t t0;
	int rc = c && buf ? 0 : -ENOMEM;

	if (!rc)
		rc = rmem_create(c, name, (uint64_t)mib * MiB, 0, &r);
	t0 = now_ns();
	for (uint64_t off = 0; !rc && off < (uint64_t)mib * MiB; off += MiB) {
		pattern(buf, off, MiB);
		rc = rmem_write(c, &r, off, buf, MiB);
	}
	if (!rc) {
		printf("{\"step\":\"repair_fill\",\"bytes\":%llu,\"write_mbs\":%.1f}\n",
		       (unsigned long long)mib * MiB,
		       (double)mib * MiB / 1e6 / ((double)(now_ns() - t0) / 1e9));
		rc = rmem_free(c, &r);
	}
	if (rc)
		fprintf(stderr, "redundancy: %s: %s\n", name, rmem_strerror(rc));
	if (c)
		rmem_close(c);
	free(buf);
	return rc ? 1 : 0;
}

/* Opens name on url to read, and compares every byte with the pattern:
 * whether the rebuilt piece holds what the lost one did. */
static int named_check(const char *url, const char *name)
{
	rmem_client *c = connect_to(url);
	unsigned char *buf = malloc(MiB), *want = malloc(MiB);
	struct rmem_region r;
	uint64_t bad = 0;
	int64_t t0;
	int rc = c && buf && want ? 0 : -ENOMEM;

	if (!rc)
		rc = rmem_open(c, name, RMEM_READ, &r);
	t0 = now_ns();
	for (uint64_t off = 0; !rc && off < r.length; off += MiB) {
		size_t len = r.length - off < MiB ? (size_t)(r.length - off) : MiB;

		rc = rmem_read(c, &r, off, buf, len);
		pattern(want, off, len);
		bad += !rc && memcmp(buf, want, len) != 0;
	}
	if (!rc) {
		printf("{\"step\":\"repair_check\",\"bytes\":%" PRIu64 ",\"bad_mib\":%" PRIu64
		       ",\"read_mbs\":%.1f}\n", r.length, bad,
		       (double)r.length / 1e6 / ((double)(now_ns() - t0) / 1e9));
		(void)rmem_free(c, &r);
	}
	if (rc)
		fprintf(stderr, "redundancy: %s: %s\n", name, rmem_strerror(rc));
	if (c)
		rmem_close(c);
	free(buf);
	free(want);
	return rc || bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	unsigned rounds = 5, mib = 16, nbulk = 64, npages = 2000;
	rmem_client *plain, *red;
	struct rmem_region rp, rr;
	unsigned char *buf;
	uint64_t u0, u1, u2;
	int64_t *lat;
	double pr[16], rrd[16], pw[16], rw[16], pr16[16], rr16[16], pw16[16], rw16[16];
	double cpr, crr, cpw, crw; /* client CPU us per MiB, 16 in flight */
	unsigned char *bufs;
	int64_t pp50[16], rp50[16], pp99[16], rp99[16];
	const char *fill = NULL, *check = NULL;
	bool only_coding = false;
	int opt;

	while ((opt = getopt(argc, argv, "r:m:F:V:c")) != -1) {
		if (opt == 'r')
			rounds = (unsigned)atoi(optarg);
		else if (opt == 'm')
			mib = (unsigned)atoi(optarg);
		else if (opt == 'F')
			fill = optarg;
		else if (opt == 'V')
			check = optarg;
		else if (opt == 'c')
			only_coding = true;
		else
			return 1;
	}
	if (only_coding) {
		srand(21);
		coding();
		return 0;
	}
	if ((fill || check) && argc - optind == 1)
		return fill ? named_fill(argv[optind], fill, mib) : named_check(argv[optind], check);
	if (argc - optind != 3 || rounds < 1 || rounds > 16 || mib < 4) {
		fprintf(stderr, "usage: redundancy PLAIN_URL RED_URL PID1,PID2 [-r R] [-m MIB]\n"
				"       redundancy -F NAME -m MIB RED_URL | -V NAME RED_URL | -c\n");
		return 1;
	}
	srand(21);
	coding();
	plain = connect_to(argv[optind]);
	red = connect_to(argv[optind + 1]);
	buf = malloc(MiB);
	lat = calloc(npages, sizeof(*lat));
	bufs = malloc(DEPTH * MiB);
	if (!plain || !red || !buf || !lat || !bufs)
		return 1;
	memset(buf, 0x5a, MiB);
	memset(bufs, 0x3c, DEPTH * MiB);
	u0 = used(plain);
	if (rmem_alloc(plain, (uint64_t)mib * MiB, 0, &rp))
		return 1;
	u1 = used(plain);
	if (rmem_alloc(red, (uint64_t)mib * MiB, 0, &rr))
		return 1;
	u2 = used(plain);
	printf("{\"step\":\"memory\",\"bytes\":%llu,\"plain_used\":%" PRIu64 ",\"redundant_used\":%"
	       PRIu64 ",\"ratio\":%.4f}\n", (unsigned long long)mib * MiB, u1 - u0, u2 - u1,
	       (double)(u2 - u1) / (double)((uint64_t)mib * MiB));
	/* Every byte written once, so reads read something. */
	if (bulk(plain, &rp, buf, true, mib) < 0 || bulk(red, &rr, buf, true, mib) < 0)
		return 1;
	for (unsigned r = 0; r < rounds; r++) {
		pr[r] = bulk(plain, &rp, buf, false, nbulk);
		rrd[r] = bulk(red, &rr, buf, false, nbulk);
		pw[r] = bulk(plain, &rp, buf, true, nbulk / 2);
		rw[r] = bulk(red, &rr, buf, true, nbulk / 2);
		pr16[r] = bulk_posted(plain, &rp, bufs, false, nbulk, &cpr);
		rr16[r] = bulk_posted(red, &rr, bufs, false, nbulk, &crr);
		pw16[r] = bulk_posted(plain, &rp, bufs, true, nbulk / 2, &cpw);
		rw16[r] = bulk_posted(red, &rr, bufs, true, nbulk / 2, &crw);
		if (pr[r] < 0 || rrd[r] < 0 || pw[r] < 0 || rw[r] < 0 || pr16[r] < 0 ||
		    rr16[r] < 0 || pw16[r] < 0 || rw16[r] < 0 ||
		    pages(plain, &rp, -1, npages, lat))
			return 1;
		pp50[r] = pct(lat, npages, 0.5);
		pp99[r] = pct(lat, npages, 0.99);
		if (pages(red, &rr, -1, npages, lat))
			return 1;
		rp50[r] = pct(lat, npages, 0.5);
		rp99[r] = pct(lat, npages, 0.99);
		printf("{\"step\":\"healthy\",\"round\":%u,\"plain_read_mbs\":%.1f,\"red_read_mbs\":%.1f,"
		       "\"plain_write_mbs\":%.1f,\"red_write_mbs\":%.1f,"
		       "\"plain_read16_mbs\":%.1f,\"red_read16_mbs\":%.1f,"
		       "\"plain_write16_mbs\":%.1f,\"red_write16_mbs\":%.1f,"
		       "\"plain_read16_cpu_us_per_mib\":%.0f,\"red_read16_cpu_us_per_mib\":%.0f,"
		       "\"plain_write16_cpu_us_per_mib\":%.0f,\"red_write16_cpu_us_per_mib\":%.0f,"
		       "\"plain_4k_p50_ns\":%" PRId64
		       ",\"red_4k_p50_ns\":%" PRId64 ",\"plain_4k_p99_ns\":%" PRId64
		       ",\"red_4k_p99_ns\":%" PRId64 "}\n", r, pr[r], rrd[r], pw[r], rw[r], pr16[r],
		       rr16[r], pw16[r], rw16[r], cpr, crr, cpw, crw, pp50[r],
		       rp50[r], pp99[r], rp99[r]);
	}
	fflush(stdout);
	/* Degraded: two servers die; a few reads first notice it (each lost
	 * server costs resume_ms once), then each column timed. */
	{
		char *pids = strdup(argv[optind + 2]), *save = NULL;

		for (char *t = strtok_r(pids, ",", &save); t; t = strtok_r(NULL, ",", &save))
			kill((pid_t)atol(t), SIGKILL);
		free(pids);
	}
	for (unsigned col = 0; col < K; col++)
		if (pages(red, &rr, (int)col, 10, lat))
			return 1;
	for (unsigned col = 0; col < K; col++) {
		if (pages(red, &rr, (int)col, npages, lat))
			return 1;
		printf("{\"step\":\"degraded\",\"column\":%u,\"red_4k_p50_ns\":%" PRId64
		       ",\"red_4k_p99_ns\":%" PRId64 "}\n", col, pct(lat, npages, 0.5),
		       pct(lat, npages, 0.99));
	}
	{
		double t0 = (double)now_ns(), mbs = bulk(red, &rr, buf, false, nbulk);

		(void)t0;
		printf("{\"step\":\"degraded_bulk\",\"red_read_mbs\":%.1f}\n", mbs);
	}
	rmem_close(red);
	rmem_close(plain);
	free(lat);
	free(buf);
	free(bufs);
	return 0;
}
