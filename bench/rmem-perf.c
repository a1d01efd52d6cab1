/*
 * rmem-perf.c - librmem's benchmark, shaped like perftest's ib_write_bw:
 * options, the region and buffers, and the output (a table, or one JSON
 * object per size).  The loops are in rmem-perf-run.c; see rmem-perf(1).
 *
 * The JSON keys are read by the bench scripts: change them only with them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmem-perf.h"

#define DEFAULT_ENDPOINT "127.0.0.1:7470"
#define DEFAULT_SIZE     65536u
#define DEFAULT_ITERS_BW  5000u
#define DEFAULT_ITERS_LAT 10000u
#define DEFAULT_ITERS_ALLOC 100000u
#define DEFAULT_ITERS_NAMES 10000u
#define DEFAULT_DEPTH_BW 16u
#define MAX_DEPTH        4096u
#define SWEEP_MIN        8u
#define SWEEP_MAX        (8u << 20)

struct options {
	const char *endpoint;
	const char *transport; /* NULL: auto */
	const char *cc;        /* --cc: the client's congestion control, NULL: the system's */
	struct perf_cfg cfg;
	size_t size;
	bool sweep;
	bool json;
	bool depth_given;
};

static const char *const op_names[] = {
	[OP_WRITE] = "write", [OP_READ] = "read", [OP_CAS] = "cas", [OP_FAA] = "faa",
	[OP_ALLOC] = "alloc", [OP_NAMES] = "names",
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("rmem-perf: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void usage(FILE *f)
{
	fputs("usage: rmem-perf [-e ENDPOINT] [-t rdma|tcp] [--op write|read|cas|faa|alloc|names]\n"
	      "                 [--bw|--lat] [-s SIZE | -a] [-n ITERS] [-D SECONDS]\n"
	      "                 [-q DEPTH] [--daemon-pid PID] [--cc NAME] [--json]\n"
	      "  -e, --endpoint   daemon endpoint (default " DEFAULT_ENDPOINT ")\n"
	      "  -t, --transport  rdma or tcp (default: auto)\n"
	      "  -o, --op         write (default), read, cas, faa, alloc, names\n"
	      "      --bw         bandwidth: MB/s and msg/s (default)\n"
	      "      --lat        latency: p50, p99, max in usec\n"
	      "  -s, --size       bytes per operation: 64, 4K, 1M (default 65536)\n"
	      "  -a, --all        sweep sizes 8 B .. 8 MiB in powers of two\n"
	      "  -n, --iters      operations per size (default 5000 bw, 10000 lat,\n"
	      "                   100000 alloc requests, 10000 names iterations)\n"
	      "  -D, --duration   measure for SECONDS instead of ITERS operations\n"
	      "  -q, --depth      operations in flight (default 16 bw, 1 lat)\n"
	      "      --daemon-pid count this local daemon's CPU time too\n"
	      "      --cc NAME    TCP congestion control of the client (rmem_opts.tcp_congestion)\n"
	      "      --json       one JSON object per size\n"
	      "  CPU: the client's (and with --daemon-pid the daemon's) CPU time over the\n"
	      "  timed part, in microseconds per MiB moved (bandwidth) or per operation.\n", f);
}

/* "64", "4K", "1M", "2G": powers of 1024. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end || v == 0 || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static uint64_t parse_count(const char *s, const char *what, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v == 0 || v > max)
		die("%s: '%s' is not a whole number in [1, %" PRIu64 "]", what, s, max);
	return v;
}

static enum perf_op parse_op(const char *s)
{
	for (size_t i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++)
		if (strcmp(s, op_names[i]) == 0)
			return (enum perf_op)i;
	die("--op: '%s' is none of write, read, cas, faa, alloc, names", s);
}

static void parse_args(int argc, char **argv, struct options *o)
{
	enum { OPT_BW = 256, OPT_LAT, OPT_JSON, OPT_DPID, OPT_CC };
	static const struct option longs[] = {
		{ "endpoint", required_argument, NULL, 'e' },
		{ "transport", required_argument, NULL, 't' },
		{ "op", required_argument, NULL, 'o' },
		{ "bw", no_argument, NULL, OPT_BW },
		{ "lat", no_argument, NULL, OPT_LAT },
		{ "size", required_argument, NULL, 's' },
		{ "all", no_argument, NULL, 'a' },
		{ "iters", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'D' },
		{ "depth", required_argument, NULL, 'q' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "daemon-pid", required_argument, NULL, OPT_DPID },
		{ "cc", required_argument, NULL, OPT_CC },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool size_given = false;
	uint64_t size;
	char *end;
	int ch;

	*o = (struct options){ .endpoint = DEFAULT_ENDPOINT, .size = DEFAULT_SIZE };
	while ((ch = getopt_long(argc, argv, "e:t:o:s:an:D:q:h", longs, NULL)) != -1) {
		switch (ch) {
		case 'e': o->endpoint = optarg; break;
		case 't':
			if (strcmp(optarg, "rdma") && strcmp(optarg, "tcp"))
				die("-t: '%s' is neither rdma nor tcp", optarg);
			o->transport = optarg;
			break;
		case 'o': o->cfg.op = parse_op(optarg); break;
		case OPT_BW: o->cfg.lat = false; break;
		case OPT_LAT: o->cfg.lat = true; break;
		case 's':
			if (parse_size(optarg, &size) < 0 || size > SIZE_MAX / MAX_DEPTH)
				die("-s: '%s' is not a size such as 64, 4K or 1M", optarg);
			o->size = (size_t)size;
			size_given = true;
			break;
		case 'a': o->sweep = true; break;
		case 'n': o->cfg.iters = parse_count(optarg, "-n", UINT64_MAX); break;
		case 'D':
			errno = 0;
			o->cfg.seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->cfg.seconds > 0))
				die("-D: '%s' is not a positive number of seconds", optarg);
			break;
		case 'q':
			o->cfg.depth = (uint32_t)parse_count(optarg, "-q", MAX_DEPTH);
			o->depth_given = true;
			break;
		case OPT_JSON: o->json = true; break;
		case OPT_CC: o->cc = optarg; break;
		case OPT_DPID:
			o->cfg.daemon_pid = (int)parse_count(optarg, "--daemon-pid", INT32_MAX);
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(1);
		}
	}
	if (optind < argc)
		die("unexpected argument '%s' (see --help)", argv[optind]);
	if (o->sweep && size_given)
		die("-s and -a exclude each other");
}

/* Fills in what depends on other options. */
static void settle(struct options *o)
{
	struct perf_cfg *cfg = &o->cfg;
	bool atomic = cfg->op == OP_CAS || cfg->op == OP_FAA;

	if (!o->depth_given)
		cfg->depth = cfg->lat ? 1 : DEFAULT_DEPTH_BW;
	if (atomic) {
		/* rmem_cas/rmem_faa have no posted form. */
		if (o->depth_given && cfg->depth > 1)
			die("--op %s is synchronous: -q must be 1", op_names[cfg->op]);
		cfg->depth = 1;
		o->size = 8;
		o->sweep = false;
	}
	if (cfg->op == OP_NAMES) {
		/* Round trips of one request each: there is no posted create. */
		if (o->depth_given && cfg->depth > 1)
			die("--op names is synchronous: -q must be 1");
		if (o->sweep)
			die("--op names takes one size (-s), not -a");
		cfg->depth = 1;
		cfg->lat = true;
		if (!cfg->iters)
			cfg->iters = DEFAULT_ITERS_NAMES;
	}
	if (!cfg->iters)
		cfg->iters = cfg->op == OP_ALLOC ? DEFAULT_ITERS_ALLOC :
			     cfg->lat ? DEFAULT_ITERS_LAT : DEFAULT_ITERS_BW;
}

static rmem_client *connect_or_die(const struct options *o)
{
	struct rmem_opts opts;
	rmem_client *c;
	int err;

	rmem_opts_init(&opts, sizeof(opts));
	if (o->transport)
		opts.transport = o->transport;
	opts.tcp_congestion = o->cc;
	err = rmem_connect(o->endpoint, &opts, &c);
	if (err)
		die("cannot connect to %s%s%s: %s", o->endpoint, o->transport ? " over " : "",
		    o->transport ? o->transport : "", rmem_strerror(err));
	/* The library never falls back on its own; say so if it ever did. */
	if (o->transport && strcmp(rmem_transport(c), o->transport) != 0)
		die("asked for %s, the client uses %s", o->transport, rmem_transport(c));
	return c;
}

/* ---- output ------------------------------------------------------------------ */

static void print_header(const struct options *o, rmem_client *c)
{
	const struct perf_cfg *cfg = &o->cfg;
	const char *rule = "---------------------------------------------------------------"
			   "------------------------";

	printf("%s\n", rule);
	printf("                    rmem %s %s test\n", op_names[cfg->op],
	       cfg->lat ? "latency" : "bandwidth");
	printf(" Endpoint        : %s\n", o->endpoint);
	printf(" Transport       : %s\n", rmem_transport(c));
	printf(" Operations      : %s%s\n", op_names[cfg->op],
	       cfg->op == OP_ALLOC ? " (one alloc or free request each)" : "");
	printf(" In flight       : %u\n", cfg->depth);
	if (cfg->seconds > 0)
		printf(" Duration        : %g s per size\n", cfg->seconds);
	else
		printf(" Iterations      : %" PRIu64 " per size\n", cfg->iters);
	printf("%s\n", rule);
	if (cfg->lat || cfg->op == OP_ALLOC)
		printf(" %-10s %-12s %-12s %-12s %-12s %-14s %-14s %s\n", "#bytes",
		       "#iterations", "t_p50[usec]", "t_p99[usec]", "t_max[usec]", "MsgRate[Mpps]",
		       "CPU/op cli[us]", "CPU/op d[us]");
	else
		printf(" %-10s %-12s %-20s %-14s %-15s %s\n", "#bytes", "#iterations",
		       "BW average[MB/sec]", "MsgRate[Mpps]", "CPU/MiB cli[us]", "CPU/MiB d[us]");
}

static bool has_bw(const struct perf_cfg *cfg)
{
	return !cfg->lat && (cfg->op == OP_WRITE || cfg->op == OP_READ);
}

static bool has_lat(const struct perf_cfg *cfg)
{
	return cfg->lat || cfg->op == OP_ALLOC;
}

/* CPU seconds as microseconds per unit (a MiB moved, or an operation);
 * -1 when not measured. */
static double cpu_per(double cpu_s, double units)
{
	return cpu_s < 0 || units <= 0 ? -1 : cpu_s * 1e6 / units;
}

/* width 0: the last column, unpadded. */
static void print_cpu(double us, int width)
{
	if (us < 0)
		printf(" %-*s", width, "-");
	else
		printf(" %-*.1f", width, us);
}

static void print_result(const struct options *o, rmem_client *c, size_t size,
			 const struct perf_result *res)
{
	const struct perf_cfg *cfg = &o->cfg;
	double secs = res->seconds > 0 ? res->seconds : 1e-9;
	double msg = (double)res->ops / secs;
	double mb = msg * (double)size / 1e6;
	double units = has_bw(cfg) ? (double)res->ops * (double)size / (1 << 20) : (double)res->ops;
	double cli = cpu_per(res->client_cpu_s, units), dmn = cpu_per(res->daemon_cpu_s, units);

	if (!o->json) {
		if (has_lat(cfg))
			printf(" %-10zu %-12" PRIu64 " %-12.2f %-12.2f %-12.2f %-13.6f", size,
			       res->ops, perf_lat_us(res, 0.5), perf_lat_us(res, 0.99),
			       perf_lat_us(res, 1.0), msg / 1e6);
		else
			printf(" %-10zu %-12" PRIu64 " %-20.2f %-14.6f", size, res->ops,
			       has_bw(cfg) ? mb : 0.0, msg / 1e6);
		print_cpu(cli, has_lat(cfg) ? 14 : 15);
		print_cpu(dmn, 0);
		printf("\n");
		fflush(stdout);
		return;
	}
	printf("{\"tool\":\"rmem-perf\",\"op\":\"%s\",\"mode\":\"%s\",\"transport\":\"%s\","
	       "\"size\":%zu,\"depth\":%u,\"iters\":%" PRIu64 ",\"seconds\":%.6f",
	       op_names[cfg->op], cfg->lat ? "lat" : "bw", rmem_transport(c), size, cfg->depth,
	       res->ops, res->seconds);
	if (has_bw(cfg))
		printf(",\"mb_per_s\":%.2f", mb);
	printf(",\"msg_per_s\":%.1f", msg);
	if (has_lat(cfg))
		printf(",\"lat_us\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f}",
		       perf_lat_us(res, 0.5), perf_lat_us(res, 0.99), perf_lat_us(res, 1.0));
	/* perftest --cpu_util prints utilization; per MiB (or per operation)
	 * compares runs of different speeds. */
	printf(",\"cpu\":{\"per\":\"%s\",\"client_s\":%.6f,\"client_us\":%.3f",
	       has_bw(cfg) ? "MiB" : "op", res->client_cpu_s, cli);
	if (dmn >= 0)
		printf(",\"daemon_s\":%.6f,\"daemon_us\":%.3f", res->daemon_cpu_s, dmn);
	printf(",\"client_util\":%.4f,\"client_switches\":%.3f", res->client_cpu_s / secs,
	       cpu_per(res->client_switches, units) / 1e6);
	if (dmn >= 0)
		printf(",\"daemon_util\":%.4f,\"daemon_switches\":%.3f", res->daemon_cpu_s / secs,
		       cpu_per(res->daemon_switches, units) / 1e6);
	printf("}}\n");
	fflush(stdout);
}

/* ---- one size ---------------------------------------------------------------- */

/*
 * The region: one slot per operation in flight when the pool has room,
 * else one slot that every operation shares (the bytes are not checked).
 * Returns how many slots it holds.
 */
static uint32_t alloc_region(rmem_client *c, const struct options *o, size_t size,
			     struct rmem_region *r)
{
	uint32_t slots = o->cfg.depth;
	int err = rmem_alloc(c, (uint64_t)size * slots, 0, r);

	if (err == -ENOMEM && slots > 1) {
		slots = 1;
		err = rmem_alloc(c, size, 0, r);
	}
	if (err)
		die("rmem_alloc of %zu bytes: %s", size * slots, rmem_strerror(err));
	return slots;
}

static void run_size(const struct options *o, rmem_client *c, size_t size)
{
	struct perf_result res = { 0 };
	struct rmem_region r = { 0 };
	uint32_t slots = 0;
	const char *what = "?";
	uint8_t *buf = NULL;
	int err;

	if (o->cfg.op != OP_ALLOC) {
		slots = alloc_region(c, o, size, &r);
		if (posix_memalign((void **)&buf, 4096, size * o->cfg.depth))
			die("no memory for %zu bytes of buffers", size * o->cfg.depth);
		/* Touched now, so that page faults stay out of the figures. */
		memset(buf, 0x5a, size * o->cfg.depth);
	}
	err = perf_run(c, &o->cfg, &r, slots, buf, size, &res, &what);
	if (err)
		die("%s (size %zu): %s", what, size, rmem_strerror(err));
	print_result(o, c, size, &res);
	perf_result_free(&res);
	if (o->cfg.op != OP_ALLOC) {
		err = rmem_free(c, &r);
		if (err)
			die("rmem_free: %s", rmem_strerror(err));
	}
	free(buf);
}

/* ---- --op names ------------------------------------------------------------- */

/* Ratios: a request's to alloc's, a sequence's to alloc+free's. */
static void print_names(const struct options *o, rmem_client *c,
			const struct perf_result *res)
{
	if (!o->json)
		printf(" %-20s %-11s %-11s %-11s %-11s %-10s %-10s\n", "request", "#count",
		       "t_p50[us]", "t_p99[us]", "t_max[us]", "p50/alloc", "p99/alloc");
	for (int k = 0; k < NREQ_COUNT; k++) {
		const struct perf_result *ref = &res[k < NSEQ_ALLOC ? NREQ_ALLOC : NSEQ_ALLOC];
		double p50 = perf_lat_us(&res[k], 0.5), p99 = perf_lat_us(&res[k], 0.99);
		double r50 = p50 / (perf_lat_us(ref, 0.5) > 0 ? perf_lat_us(ref, 0.5) : 1e-9);
		double r99 = p99 / (perf_lat_us(ref, 0.99) > 0 ? perf_lat_us(ref, 0.99) : 1e-9);

		if (!o->json) {
			printf(" %-20s %-11" PRIu64 " %-11.2f %-11.2f %-11.2f %-10.2f %-10.2f\n",
			       perf_name_req_names[k], res[k].ops, p50, p99,
			       perf_lat_us(&res[k], 1.0), r50, r99);
			continue;
		}
		printf("{\"tool\":\"rmem-perf\",\"op\":\"names\",\"request\":\"%s\","
		       "\"transport\":\"%s\",\"size\":%zu,\"depth\":1,\"iters\":%" PRIu64
		       ",\"lat_us\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f},"
		       "\"vs_alloc\":{\"p50\":%.3f,\"p99\":%.3f}}\n",
		       perf_name_req_names[k], rmem_transport(c), o->size, res[k].ops, p50, p99,
		       perf_lat_us(&res[k], 1.0), r50, r99);
	}
	fflush(stdout);
}

static void run_names(const struct options *o, rmem_client *c)
{
	struct perf_result res[NREQ_COUNT] = { 0 };
	const char *what = "?";
	int err;

	if (!o->json) {
		printf(" rmem named regions beside alloc+free (%s, %s, %zu bytes, one in flight,\n"
		       " %" PRIu64 " iterations; ratios: a request to alloc's, a sequence to"
		       " alloc+free's)\n", o->endpoint, rmem_transport(c), o->size, o->cfg.iters);
		fflush(stdout);
	}
	err = perf_names_run(c, &o->cfg, o->size, res, &what);
	if (err)
		die("%s (size %zu): %s", what, o->size, rmem_strerror(err));
	print_names(o, c, res);
	for (int k = 0; k < NREQ_COUNT; k++)
		perf_result_free(&res[k]);
}

int main(int argc, char **argv)
{
	struct options o;
	rmem_client *c;

	parse_args(argc, argv, &o);
	settle(&o);
	c = connect_or_die(&o);
	if (o.cfg.op == OP_NAMES) {
		run_names(&o, c);
	} else {
		if (!o.json)
			print_header(&o, c);
		if (o.sweep)
			for (size_t size = SWEEP_MIN; size <= SWEEP_MAX; size *= 2)
				run_size(&o, c, size);
		else
			run_size(&o, c, o.size);
	}
	rmem_close(c);
	return 0;
}
