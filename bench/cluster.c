/*
 * cluster.c - make bench-cluster's client (scripts/bench-cluster starts
 * etcd and the servers).  Public API only: a cluster is an endpoint like
 * any other, "etcd://h1:2379,h2:2379/NAME", given to rmem_connect().
 *
 *   cluster rtt A_ENDPOINT B_ENDPOINT [-r ROUNDS] [-n PAIRS] [-s SIZE]
 *       alloc+free round trips, one at a time, through a client of A and
 *       one of B, alternated A B A B ... for ROUNDS rounds of PAIRS pairs;
 *       every pair is timed.  Prints one JSON object: the median and p99
 *       of each side's pairs (ns) and the ratio B/A of the medians, overall
 *       and per round.
 *   cluster tput ENDPOINT... [-r ROUNDS] [-t SECONDS] [-q INFLIGHT] [-s SIZE]
 *       alloc+free pairs per second with INFLIGHT allocations in flight
 *       (rmem_post_alloc, rmem_post_free as each completes), through one
 *       client per ENDPOINT, the endpoints alternated round by round.  Prints
 *       one JSON object per endpoint: pairs/s of each round and their median.
 *   cluster wait ENDPOINT BYTES [-t SECONDS]
 *       waits until rmem_stats through ENDPOINT says pool_bytes >= BYTES (a
 *       cluster client sums its servers' figures: every server is seen).
 *
 * Exit 0, or 1 with the reason on stderr (a call that failed, a client
 * that cannot be had).  A benchmark: it asserts nothing else.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rmem.h>

#define MAX_ENDPOINTS 8
#define MAX_INFLIGHT  256
#define WARMUP_PAIRS  200

struct opts {
	unsigned rounds, pairs, inflight;
	double secs;
	uint64_t size;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int connect_to(const char *endpoint, rmem_client **c)
{
	struct rmem_opts o;
	int rc;

	rmem_opts_init(&o, sizeof o);
	rc = rmem_connect(endpoint, &o, c);
	if (rc < 0)
		fprintf(stderr, "cluster: rmem_connect %s: %s\n", endpoint, rmem_strerror(rc));
	return rc;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The q quantile (0..1) of n sorted values. */
static int64_t quantile(const int64_t *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);

	return n ? v[i < n ? i : n - 1] : 0;
}

/* n alloc+free pairs, each timed into ns[] (NULL: untimed). */
static int pairs(rmem_client *c, unsigned n, uint64_t size, int64_t *ns, const char *who)
{
	for (unsigned i = 0; i < n; i++) {
		struct rmem_region r;
		int64_t t0 = now_ns();
		int rc = rmem_alloc(c, size, 0, &r);

		if (rc == 0)
			rc = rmem_free(c, &r);
		if (rc < 0) {
			fprintf(stderr, "cluster: alloc+free through %s: %s\n", who, rmem_strerror(rc));
			return rc;
		}
		if (ns)
			ns[i] = now_ns() - t0;
	}
	return 0;
}

static int cmd_rtt(const char *ea, const char *eb, const struct opts *o)
{
	rmem_client *c[2] = { NULL, NULL };
	const char *ep[2] = { ea, eb };
	size_t per = (size_t)o->rounds * o->pairs;
	int64_t *all[2] = { calloc(per, sizeof(int64_t)), calloc(per, sizeof(int64_t)) };
	int64_t *round = calloc(o->pairs, sizeof(int64_t));
	double *ratio = calloc(o->rounds, sizeof(double));
	int64_t med[2];
	int rc = -ENOMEM;

	if (!all[0] || !all[1] || !round || !ratio)
		goto out;
	for (int s = 0; s < 2; s++) {
		rc = connect_to(ep[s], &c[s]);
		/* Warm: connections made (a cluster client's are lazy), caches hot. */
		if (rc == 0)
			rc = pairs(c[s], WARMUP_PAIRS, o->size, NULL, ep[s]);
		if (rc < 0)
			goto out;
	}
	for (unsigned r = 0; r < o->rounds; r++) {
		for (int s = 0; s < 2; s++) {
			int64_t *dst = all[s] + (size_t)r * o->pairs;

			rc = pairs(c[s], o->pairs, o->size, dst, ep[s]);
			if (rc < 0)
				goto out;
			memcpy(round, dst, o->pairs * sizeof(int64_t));
			qsort(round, o->pairs, sizeof(int64_t), cmp_i64);
			med[s] = quantile(round, o->pairs, 0.5);
		}
		ratio[r] = (double)med[1] / (double)med[0];
	}
	printf("{\"bench\":\"rtt\",\"a\":\"%s\",\"b\":\"%s\",\"size\":%" PRIu64 ",\"rounds\":%u,"
	       "\"pairs\":%u", ea, eb, o->size, o->rounds, o->pairs);
	for (int s = 0; s < 2; s++) {
		qsort(all[s], per, sizeof(int64_t), cmp_i64);
		med[s] = quantile(all[s], per, 0.5);
		printf(",\"%s_median_ns\":%" PRId64 ",\"%s_p99_ns\":%" PRId64, s ? "b" : "a", med[s],
		       s ? "b" : "a", quantile(all[s], per, 0.99));
	}
	printf(",\"ratio\":%.4f,\"round_ratios\":[", (double)med[1] / (double)med[0]);
	for (unsigned r = 0; r < o->rounds; r++)
		printf("%s%.4f", r ? "," : "", ratio[r]);
	printf("]}\n");
	rc = 0;
out:
	if (rc == -ENOMEM)
		fprintf(stderr, "cluster: out of memory\n");
	for (int s = 0; s < 2; s++) {
		if (c[s])
			rmem_close(c[s]);
		free(all[s]);
	}
	free(round);
	free(ratio);
	return rc;
}

/*
 * Pairs per second for secs, with inflight allocations in flight: each
 * completed alloc is freed at once and a new alloc posted in its place.
 * Cookies: slot index, with the top bit set for a free.
 */
#define FREE_BIT (UINT64_C(1) << 63)
static int tput_once(rmem_client *c, const struct opts *o, const char *who, double *rate)
{
	struct rmem_region reg[MAX_INFLIGHT];
	struct rmem_completion done[64];
	unsigned busy = 0;
	uint64_t pairs_done = 0;
	int64_t t0 = now_ns(), end = t0 + (int64_t)(o->secs * 1e9), t1;
	bool stopping = false;
	int rc;

	for (unsigned i = 0; i < o->inflight; i++) {
		rc = rmem_post_alloc(c, o->size, 0, &reg[i], i);
		if (rc < 0)
			goto fail;
		busy++;
	}
	while (busy) {
		int n = rmem_poll(c, done, 64, 1000);

		if (n < 0) {
			rc = n;
			goto fail;
		}
		if (!stopping && now_ns() >= end)
			stopping = true;
		for (int k = 0; k < n; k++) {
			uint64_t slot = done[k].cookie & ~FREE_BIT;

			if (done[k].status < 0) {
				rc = done[k].status;
				goto fail;
			}
			if (!(done[k].cookie & FREE_BIT)) {
				rc = rmem_post_free(c, &reg[slot], slot | FREE_BIT);
				if (rc < 0)
					goto fail;
				continue;
			}
			pairs_done++;
			if (stopping) {
				busy--;
				continue;
			}
			rc = rmem_post_alloc(c, o->size, 0, &reg[slot], slot);
			if (rc < 0)
				goto fail;
		}
	}
	t1 = now_ns();
	*rate = (double)pairs_done / ((double)(t1 - t0) / 1e9);
	return 0;
fail:
	fprintf(stderr, "cluster: posted alloc+free through %s: %s\n", who, rmem_strerror(rc));
	return rc;
}

static int cmd_tput(char **ep, int n, const struct opts *o)
{
	rmem_client *c[MAX_ENDPOINTS] = { NULL };
	double rate[MAX_ENDPOINTS][64], sorted[64];
	int rc = 0;

	for (int i = 0; i < n && rc == 0; i++) {
		rc = connect_to(ep[i], &c[i]);
		if (rc == 0)
			rc = pairs(c[i], WARMUP_PAIRS, o->size, NULL, ep[i]);
	}
	for (unsigned r = 0; r < o->rounds && rc == 0; r++)
		for (int i = 0; i < n && rc == 0; i++)
			rc = tput_once(c[i], o, ep[i], &rate[i][r]);
	for (int i = 0; i < n && rc == 0; i++) {
		memcpy(sorted, rate[i], o->rounds * sizeof(double));
		qsort(sorted, o->rounds, sizeof(double), cmp_double);
		printf("{\"bench\":\"tput\",\"endpoint\":\"%s\",\"inflight\":%u,\"size\":%" PRIu64
		       ",\"secs\":%.1f,\"median_pairs_per_s\":%.0f,\"rounds\":[", ep[i], o->inflight,
		       o->size, o->secs, sorted[o->rounds / 2]);
		for (unsigned r = 0; r < o->rounds; r++)
			printf("%s%.0f", r ? "," : "", rate[i][r]);
		printf("]}\n");
	}
	for (int i = 0; i < n; i++)
		if (c[i])
			rmem_close(c[i]);
	return rc;
}

static int cmd_wait(const char *ep, uint64_t bytes, double secs)
{
	rmem_client *c = NULL;
	struct rmem_stats st = { 0 };
	int64_t end = now_ns() + (int64_t)(secs * 1e9);
	int rc = connect_to(ep, &c);

	while (rc == 0) {
		rc = rmem_stats(c, &st);
		if (rc < 0) {
			fprintf(stderr, "cluster: rmem_stats through %s: %s\n", ep, rmem_strerror(rc));
			break;
		}
		if (st.pool_bytes >= bytes)
			break;
		if (now_ns() >= end) {
			fprintf(stderr, "cluster: %s shows %" PRIu64 " pool bytes after %.0f s, not %"
				PRIu64 "\n", ep, st.pool_bytes, secs, bytes);
			rc = -ETIMEDOUT;
			break;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	}
	if (c)
		rmem_close(c);
	return rc;
}

static int usage(void)
{
	fputs("usage: cluster rtt A_ENDPOINT B_ENDPOINT [-r ROUNDS] [-n PAIRS] [-s SIZE]\n"
	      "       cluster tput ENDPOINT... [-r ROUNDS] [-t SECONDS] [-q INFLIGHT] [-s SIZE]\n"
	      "       cluster wait ENDPOINT BYTES [-t SECONDS]\n", stderr);
	return 2;
}

int main(int argc, char **argv)
{
	struct opts o = { .rounds = 6, .pairs = 2000, .inflight = 16, .secs = 2, .size = 4096 };
	const char *cmd;
	int opt;

	if (argc < 2)
		return usage();
	cmd = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "r:n:q:t:s:")) != -1) {
		switch (opt) {
		case 'r': o.rounds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': o.pairs = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'q': o.inflight = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': o.secs = strtod(optarg, NULL); break;
		case 's': o.size = strtoull(optarg, NULL, 10); break;
		default: return usage();
		}
	}
	if (o.rounds < 1 || o.rounds > 64 || o.pairs < 1 || o.inflight < 1 ||
	    o.inflight > MAX_INFLIGHT || o.secs <= 0 || o.size < 1)
		return usage();
	if (!strcmp(cmd, "rtt") && argc - optind == 2)
		return cmd_rtt(argv[optind], argv[optind + 1], &o) < 0;
	if (!strcmp(cmd, "tput") && argc - optind >= 1 && argc - optind <= MAX_ENDPOINTS)
		return cmd_tput(argv + optind, argc - optind, &o) < 0;
	if (!strcmp(cmd, "wait") && argc - optind == 2)
		return cmd_wait(argv[optind], strtoull(argv[optind + 1], NULL, 10), o.secs) < 0;
	return usage();
}
