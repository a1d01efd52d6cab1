/*
 * rmem-perf.h - what the two halves of rmem-perf share: the options
 * (rmem-perf.c parses them and prints results) and the measurement loops
 * (rmem-perf-run.c).
 */
#ifndef RMEM_PERF_H
#define RMEM_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rmem.h>

enum perf_op {
	OP_WRITE,
	OP_READ,
	OP_CAS,
	OP_FAA,
	OP_ALLOC,
	OP_NAMES,  /* rmem-perf-names.c: named regions beside alloc+free */
};

struct perf_cfg {
	enum perf_op op;
	bool lat;          /* --lat, else --bw */
	uint64_t iters;    /* operations measured; ignored when seconds > 0 */
	double seconds;    /* -D: measure for this long instead */
	uint32_t depth;    /* operations in flight */
	int daemon_pid;    /* --daemon-pid: whose CPU time to count too, 0 = none */
};

/* What one measurement found.  lat_ns holds one entry per operation timed
 * (count of them), sorted once the run ends. */
struct perf_result {
	uint64_t ops;      /* operations completed in the timed part */
	double seconds;
	/* CPU time over the timed part, as perftest --cpu_util counts it: this
	 * process's (CLOCK_PROCESS_CPUTIME_ID, every thread), and the daemon's
	 * (the sum of its threads' run time in /proc/PID/task/TID/schedstat);
	 * < 0 when not measured. */
	double client_cpu_s, daemon_cpu_s;
	/* How often each was scheduled in over the timed part (context
	 * switches: getrusage, schedstat's third field): mostly wake-ups. */
	double client_switches, daemon_switches;
	uint64_t *lat_ns;
	uint64_t lat_count, lat_cap;
};

/* Appends one latency sample (ns, negative taken as 0): 0 or -ENOMEM. */
int perf_result_add(struct perf_result *res, int64_t ns);

/*
 * Measures cfg's operation of size bytes on client c (warm-up first).  For
 * transfers and atomics r is a region of at least size (cfg->depth * size
 * when r_slots is cfg->depth; with r_slots 1 every operation uses offset 0),
 * and buf a local buffer of cfg->depth * size bytes.  For OP_ALLOC one
 * operation is one request, an alloc or a free of size bytes.
 * On failure *what names the call that failed.  0 or a negative errno.
 */
int perf_run(rmem_client *c, const struct perf_cfg *cfg, const struct rmem_region *r,
	     uint32_t r_slots, uint8_t *buf, size_t size, struct perf_result *res,
	     const char **what);

/* --op names: the requests timed, and the sequences they make up. */
enum perf_name_req {
	NREQ_ALLOC, NREQ_FREE,
	NREQ_CREATE, NREQ_UNLINK, NREQ_FREE_CREATED,
	NREQ_OPEN, NREQ_FREE_OPENED,
	NSEQ_ALLOC, NSEQ_CREATE, NSEQ_OPEN,
	NREQ_COUNT
};
extern const char *const perf_name_req_names[NREQ_COUNT];

/*
 * Times, one request in flight, cfg->iters iterations (or cfg->seconds) of
 * alloc+free, create+unlink+free and open+free of size bytes on c, into
 * res[] (zeroed by the caller, each sorted at the end).  A warm-up runs
 * first.  On failure *what names the call that failed.  0 or a negative
 * errno.
 */
int perf_names_run(rmem_client *c, const struct perf_cfg *cfg, size_t size,
		   struct perf_result res[NREQ_COUNT], const char **what);

void perf_result_free(struct perf_result *res);

/* The latency at quantile q (0..1) of a finished run, in microseconds. */
double perf_lat_us(const struct perf_result *res, double q);

#endif /* RMEM_PERF_H */
