/*
 * fi_rma.c - the libfabric peer of rmem-perf: one-sided fi_write / fi_read
 * over libfabric's tcp provider (FI_EP_MSG), delivery-complete, with -q
 * operations in flight.  Debian ships no fabtests, so scripts/bench-tcp
 * builds this instead.  A benchmark: it prints figures and asserts nothing.
 *
 *   fi_rma -s [-p PORT] [-m BYTES] [--wait] [HOST]        server
 *   fi_rma [-p PORT] [--op write|read] [--bw|--lat] [--size BYTES]
 *          [-n ITERS] [-D SECONDS] [-q DEPTH] [--server-pid PID] [--json] HOST
 *                                                          client
 *
 * The server registers one buffer and passes its address, key and length to
 * the client in the accept data; the client then reads or writes it without
 * the server's application code seeing any operation.  The tcp provider
 * progresses data only when asked (fi_tcp(7)), so the server spins on its
 * completion queue while a client is connected, as fabtests do; --wait
 * blocks in fi_eq_sread instead and leaves progress to the provider.
 *
 * Output: a line like perftest's, or with --json one object shaped like
 * rmem-perf's: {"tool":"fi_rma","op":...,"lat_us":{"p50":..},"cpu":{..}}, CPU
 * per MiB (bandwidth) or per operation of this client and, with
 * --server-pid, of a local server, over the timed part (cpustat.h).
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpustat.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define FI_RMA_API FI_VERSION(1, 9)
#define DEFAULT_PORT "7479"
#define DEFAULT_SERVER_BYTES (64u << 20)
#define CQ_BATCH 16
#define EQ_CHECK_EVERY 4096
#define CQ_WAIT_MS 100
#define MAX_FAILURES 16

/* What the server tells the client in its accept data, little-endian. */
struct remote_buf {
	uint64_t addr;
	uint64_t key;
	uint64_t len;
};

struct opts {
	bool server;
	bool wait;
	bool json;
	bool write;
	bool lat;
	const char *host;
	const char *port;
	size_t size;
	size_t server_bytes;
	unsigned int depth;
	uint64_t iters;
	double seconds;
	int server_pid;     /* --server-pid: whose CPU to count too, 0 = none */
};

struct fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
};

struct conn {
	struct fid_ep *ep;
	struct fid_cq *cq;
};

struct mem {
	void *buf;
	size_t len;
	struct fid_mr *mr;
};

/* One operation in flight: its local slot and when it was posted.  The
 * provider may use ctx (FI_CONTEXT mode): it comes first, so a completion's
 * op_context is the slot. */
struct slot {
	struct fi_context ctx;
	unsigned int index;
	uint64_t posted_ns;
};

struct samples {
	uint64_t *ns;
	size_t count;
	size_t cap;
};

struct result {
	uint64_t ops;
	double seconds;
	struct cpustat self, server;  /* over the timed part */
	struct samples lat;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fi_fail(const char *call, int rc)
{
	fprintf(stderr, "fi_rma: %s: %s\n", call, fi_strerror(rc < 0 ? -rc : rc));
}

static struct fi_info *hints_new(void)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints)
		return NULL;
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_RMA;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup("tcp");
	if (!hints->fabric_attr->prov_name) {
		fi_freeinfo(hints);
		return NULL;
	}
	return hints;
}

static void fab_close(struct fab *f)
{
	if (f->eq)
		fi_close(&f->eq->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	if (f->info)
		fi_freeinfo(f->info);
	memset(f, 0, sizeof(*f));
}

/* The fabric, domain and event queue for HOST:PORT (FI_SOURCE: to listen on). */
static int fab_open(struct fab *f, const struct opts *o, uint64_t flags)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_info *hints = hints_new();
	int rc;

	memset(f, 0, sizeof(*f));
	if (!hints)
		return -ENOMEM;
	rc = fi_getinfo(FI_RMA_API, o->host, o->port, flags, hints, &f->info);
	fi_freeinfo(hints);
	if (rc) {
		fi_fail("fi_getinfo (provider tcp, FI_EP_MSG, FI_RMA)", rc);
		f->info = NULL;
		return rc;
	}
	rc = fi_fabric(f->info->fabric_attr, &f->fabric, NULL);
	if (rc) {
		fi_fail("fi_fabric", rc);
		goto fail;
	}
	rc = fi_eq_open(f->fabric, &eq_attr, &f->eq, NULL);
	if (rc) {
		fi_fail("fi_eq_open", rc);
		goto fail;
	}
	rc = fi_domain(f->fabric, f->info, &f->domain, NULL);
	if (rc) {
		fi_fail("fi_domain", rc);
		goto fail;
	}
	return 0;
fail:
	fab_close(f);
	return rc;
}

static void mem_close(struct mem *m)
{
	if (m->mr)
		fi_close(&m->mr->fid);
	free(m->buf);
	memset(m, 0, sizeof(*m));
}

static int mem_open(struct mem *m, struct fid_domain *domain, size_t len, uint64_t access)
{
	int rc;

	memset(m, 0, sizeof(*m));
	if (posix_memalign(&m->buf, 4096, len))
		return -ENOMEM;
	memset(m->buf, 0x5a, len);
	m->len = len;
	rc = fi_mr_reg(domain, m->buf, len, access, 0, 0, 0, &m->mr, NULL);
	if (rc) {
		fi_fail("fi_mr_reg", rc);
		m->mr = NULL;
		mem_close(m);
	}
	return rc;
}

static void conn_close(struct conn *c)
{
	if (c->ep)
		fi_close(&c->ep->fid);
	if (c->cq)
		fi_close(&c->cq->fid);
	memset(c, 0, sizeof(*c));
}

/* An enabled endpoint for INFO (the server's connection request or the
 * client's getinfo answer) with its own completion queue. */
static int conn_open(struct conn *c, struct fab *f, struct fi_info *info, bool wait)
{
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_CONTEXT,
		.wait_obj = wait ? FI_WAIT_UNSPEC : FI_WAIT_NONE,
		.size = info->tx_attr->size,
	};
	int rc;

	memset(c, 0, sizeof(*c));
	rc = fi_cq_open(f->domain, &cq_attr, &c->cq, NULL);
	if (rc) {
		fi_fail("fi_cq_open", rc);
		goto fail;
	}
	rc = fi_endpoint(f->domain, info, &c->ep, NULL);
	if (rc) {
		fi_fail("fi_endpoint", rc);
		goto fail;
	}
	rc = fi_ep_bind(c->ep, &f->eq->fid, 0);
	if (!rc)
		rc = fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!rc)
		rc = fi_enable(c->ep);
	if (rc) {
		fi_fail("fi_ep_bind/fi_enable", rc);
		goto fail;
	}
	return 0;
fail:
	conn_close(c);
	return rc;
}

/* Waits for EVENT on the event queue; DATA, if given, receives the
 * connection data that came with it. */
static int eq_wait(struct fid_eq *eq, uint32_t want, struct fi_info **info, void *data,
		   size_t data_len)
{
	union {
		struct fi_eq_cm_entry cm;
		unsigned char raw[sizeof(struct fi_eq_cm_entry) + 256];
	} entry;
	uint32_t event;
	ssize_t n;

	n = fi_eq_sread(eq, &event, &entry, sizeof(entry), -1, 0);
	if (n == -FI_EAVAIL) {
		struct fi_eq_err_entry err = { 0 };

		fi_eq_readerr(eq, &err, 0);
		fprintf(stderr, "fi_rma: connection: %s\n", fi_strerror(err.err));
		return err.err ? -err.err : -ECONNREFUSED;
	}
	if (n < 0) {
		fi_fail("fi_eq_sread", (int)n);
		return (int)n;
	}
	if (event != want) {
		fprintf(stderr, "fi_rma: event %u, expected %u\n", event, want);
		if (entry.cm.info)
			fi_freeinfo(entry.cm.info);
		return -EPROTO;
	}
	if (info)
		*info = entry.cm.info;
	if (data) {
		if ((size_t)n < sizeof(entry.cm) + data_len) {
			fprintf(stderr, "fi_rma: short connection data\n");
			return -EPROTO;
		}
		memcpy(data, entry.raw + sizeof(entry.cm), data_len);
	}
	return 0;
}

/* Keeps the provider's data progress going until the client disconnects. */
static int serve_until_shutdown(struct fab *f, struct conn *c, bool wait)
{
	struct fi_cq_entry entries[CQ_BATCH];
	struct fi_eq_cm_entry cm;
	uint32_t event;
	unsigned long spins = 0;
	ssize_t n;

	for (;;) {
		if (wait)
			n = fi_cq_sread(c->cq, entries, CQ_BATCH, NULL, CQ_WAIT_MS);
		else
			n = fi_cq_read(c->cq, entries, CQ_BATCH);
		if (n < 0 && n != -FI_EAGAIN) {
			fi_fail("fi_cq_read (server)", (int)n);
			return (int)n;
		}
		if (!wait && ++spins % EQ_CHECK_EVERY)
			continue;
		n = fi_eq_read(f->eq, &event, &cm, sizeof(cm), 0);
		if (n == -FI_EAGAIN)
			continue;
		if (n < 0) {
			struct fi_eq_err_entry err = { 0 };

			fi_eq_readerr(f->eq, &err, 0);
			return 0;
		}
		if (event == FI_SHUTDOWN)
			return 0;
		/* Clients come one at a time; another one waits for its turn in vain. */
		if (event == FI_CONNREQ && cm.info)
			fi_freeinfo(cm.info);
	}
}

static int serve_one(struct fab *f, const struct mem *m, const struct opts *o)
{
	struct remote_buf rb = {
		.addr = htole64((f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
					(uint64_t)(uintptr_t)m->buf : 0),
		.key = htole64(fi_mr_key(m->mr)),
		.len = htole64(m->len),
	};
	struct fi_info *req = NULL;
	struct conn c;
	int rc;

	rc = eq_wait(f->eq, FI_CONNREQ, &req, NULL, 0);
	if (rc)
		return rc;
	rc = conn_open(&c, f, req, o->wait);
	fi_freeinfo(req);
	if (rc)
		return rc;
	rc = fi_accept(c.ep, &rb, sizeof(rb));
	if (rc)
		fi_fail("fi_accept", rc);
	else
		rc = eq_wait(f->eq, FI_CONNECTED, NULL, NULL, 0);
	if (!rc)
		rc = serve_until_shutdown(f, &c, o->wait);
	conn_close(&c);
	return rc;
}

/* Serves one client after another until killed. */
static int server_main(const struct opts *o)
{
	struct fid_pep *pep = NULL;
	unsigned int failures = 0;
	struct fab f;
	struct mem m;
	int rc;

	rc = fab_open(&f, o, FI_SOURCE);
	if (rc)
		return 1;
	rc = mem_open(&m, f.domain, o->server_bytes, FI_REMOTE_READ | FI_REMOTE_WRITE);
	if (rc)
		goto out_fab;
	rc = fi_passive_ep(f.fabric, f.info, &pep, NULL);
	if (!rc)
		rc = fi_pep_bind(pep, &f.eq->fid, 0);
	if (!rc)
		rc = fi_listen(pep);
	if (rc) {
		fi_fail("fi_passive_ep/fi_listen", rc);
		goto out_pep;
	}
	fprintf(stderr, "fi_rma: listening on %s:%s, %zu bytes registered\n",
		o->host, o->port, m.len);
	/* A client that failed or died is no reason to stop serving the next. */
	while (failures < MAX_FAILURES) {
		rc = serve_one(&f, &m, o);
		failures = rc ? failures + 1 : 0;
	}
	fprintf(stderr, "fi_rma: %u connections in a row failed, giving up\n", failures);
out_pep:
	if (pep)
		fi_close(&pep->fid);
	mem_close(&m);
out_fab:
	fab_close(&f);
	return rc ? 1 : 0;
}

static int samples_add(struct samples *s, uint64_t ns)
{
	if (s->count == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		uint64_t *p = realloc(s->ns, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->ns = p;
		s->cap = cap;
	}
	s->ns[s->count++] = ns;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static double percentile_us(const struct samples *s, double p)
{
	size_t i;

	if (!s->count)
		return 0;
	i = (size_t)(p * (double)(s->count - 1) + 0.5);
	return (double)s->ns[i] / 1e3;
}

struct client {
	struct fab f;
	struct conn c;
	struct mem local;
	struct remote_buf remote;
	struct slot *slots;
	unsigned int *free_slots;
	unsigned int nfree;
};

/* Posts one delivery-complete RMA of LEN bytes between slot S and ADDR. */
static int post_rma(struct client *cl, bool write, struct slot *s, size_t len, uint64_t addr)
{
	struct iovec iov = {
		.iov_base = (char *)cl->local.buf + (size_t)s->index * len,
		.iov_len = len,
	};
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = cl->remote.key };
	void *desc = fi_mr_desc(cl->local.mr);
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.context = &s->ctx,
	};
	/* Delivery-complete: a write completes once it is in the target's
	 * memory, as rmem_write returns only after the daemon stored it. */
	uint64_t flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;

	s->posted_ns = now_ns();
	if (write)
		return (int)fi_writemsg(cl->c.ep, &msg, flags);
	return (int)fi_readmsg(cl->c.ep, &msg, flags);
}

static int cq_error(struct fid_cq *cq)
{
	struct fi_cq_err_entry err = { 0 };

	fi_cq_readerr(cq, &err, 0);
	fprintf(stderr, "fi_rma: operation failed: %s\n", fi_strerror(err.err));
	return err.err ? -err.err : -EIO;
}

/* Posts until DEPTH are in flight or LIMIT operations have been posted;
 * operation number SEQ goes to the SEQ-th SIZE-byte slot of the server's
 * buffer, round robin. */
static int post_some(struct client *cl, const struct opts *o, uint64_t *seq, uint64_t limit)
{
	uint64_t remote_slots = cl->remote.len / o->size;
	int rc;

	while (cl->nfree && *seq < limit) {
		struct slot *s = &cl->slots[cl->free_slots[cl->nfree - 1]];
		uint64_t addr = cl->remote.addr + (*seq % remote_slots) * o->size;

		rc = post_rma(cl, o->write, s, o->size, addr);
		if (rc == -FI_EAGAIN)
			return 0;
		if (rc) {
			fi_fail(o->write ? "fi_writemsg" : "fi_readmsg", rc);
			return rc;
		}
		cl->nfree--;
		(*seq)++;
	}
	return 0;
}

/* Reaps completions; records their latency when RES is given. */
static int reap(struct client *cl, struct result *res, uint64_t *done)
{
	struct fi_cq_entry entries[CQ_BATCH];
	ssize_t n, i;
	uint64_t t;
	int rc;

	n = fi_cq_read(cl->c.cq, entries, CQ_BATCH);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL)
		return cq_error(cl->c.cq);
	if (n < 0) {
		fi_fail("fi_cq_read", (int)n);
		return (int)n;
	}
	t = now_ns();
	for (i = 0; i < n; i++) {
		struct slot *s = entries[i].op_context;

		cl->free_slots[cl->nfree++] = s->index;
		(*done)++;
		if (res) {
			rc = samples_add(&res->lat, t - s->posted_ns);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Keeps DEPTH operations in flight for ITERS operations or SECONDS. */
static int run_ops(struct client *cl, const struct opts *o, uint64_t iters, double seconds,
		   struct result *res)
{
	struct cpustat server0 = cpustat_pid(res ? o->server_pid : 0), self0 = cpustat_self();
	uint64_t posted = 0, done = 0, t0 = now_ns(), deadline;
	uint64_t limit = iters ? iters : UINT64_MAX;
	int rc = 0;

	deadline = t0 + (uint64_t)(seconds * 1e9);
	while (!rc && (posted < limit || cl->nfree < o->depth)) {
		rc = post_some(cl, o, &posted, limit);
		if (!rc)
			rc = reap(cl, res, &done);
		if (!iters && now_ns() >= deadline)
			limit = posted;
	}
	if (res) {
		res->ops = done;
		res->seconds = (double)(now_ns() - t0) / 1e9;
		res->self = cpustat_delta(self0, cpustat_self());
		res->server = cpustat_delta(server0, cpustat_pid(o->server_pid));
	}
	return rc;
}

/* One write then one read of the same bytes: the figures are worth nothing
 * if the data did not move. */
static int verify(struct client *cl, const struct opts *o)
{
	struct slot *s = &cl->slots[cl->free_slots[cl->nfree - 1]];
	unsigned char *buf = (unsigned char *)cl->local.buf + (size_t)s->index * o->size;
	uint64_t done = 0;
	size_t i;
	int rc;

	for (i = 0; i < o->size; i++)
		buf[i] = (unsigned char)(i * 7 + 13);
	for (int pass = 0; pass < 2; pass++) {
		rc = post_rma(cl, pass == 0, s, o->size, cl->remote.addr);
		if (rc)
			return rc;
		cl->nfree--;
		while (!rc && cl->nfree < o->depth)
			rc = reap(cl, NULL, &done);
		if (rc)
			return rc;
		if (pass == 0)
			memset(buf, 0, o->size);
	}
	for (i = 0; i < o->size; i++) {
		if (buf[i] != (unsigned char)(i * 7 + 13)) {
			fprintf(stderr, "fi_rma: byte %zu read back differs from what was written\n",
				i);
			return -EIO;
		}
	}
	return 0;
}

static void client_close(struct client *cl)
{
	free(cl->slots);
	free(cl->free_slots);
	conn_close(&cl->c);
	mem_close(&cl->local);
	fab_close(&cl->f);
}

static int client_open(struct client *cl, const struct opts *o)
{
	unsigned int i;
	int rc;

	memset(cl, 0, sizeof(*cl));
	rc = fab_open(&cl->f, o, 0);
	if (rc)
		return rc;
	if (o->depth > cl->f.info->tx_attr->size) {
		fprintf(stderr, "fi_rma: depth %u > provider tx size %zu\n", o->depth,
			cl->f.info->tx_attr->size);
		rc = -EINVAL;
		goto fail;
	}
	cl->slots = calloc(o->depth, sizeof(*cl->slots));
	cl->free_slots = calloc(o->depth, sizeof(*cl->free_slots));
	if (!cl->slots || !cl->free_slots) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < o->depth; i++) {
		cl->slots[i].index = i;
		cl->free_slots[i] = i;
	}
	cl->nfree = o->depth;
	rc = mem_open(&cl->local, cl->f.domain, o->size * o->depth, FI_READ | FI_WRITE);
	if (rc)
		goto fail;
	rc = conn_open(&cl->c, &cl->f, cl->f.info, false);
	if (rc)
		goto fail;
	rc = fi_connect(cl->c.ep, cl->f.info->dest_addr, NULL, 0);
	if (rc) {
		fi_fail("fi_connect", rc);
		goto fail;
	}
	rc = eq_wait(cl->f.eq, FI_CONNECTED, NULL, &cl->remote, sizeof(cl->remote));
	if (rc)
		goto fail;
	cl->remote.addr = le64toh(cl->remote.addr);
	cl->remote.key = le64toh(cl->remote.key);
	cl->remote.len = le64toh(cl->remote.len);
	if (cl->remote.len < o->size) {
		fprintf(stderr, "fi_rma: server buffer %" PRIu64 " < size %zu\n",
			cl->remote.len, o->size);
		rc = -EINVAL;
		goto fail;
	}
	return 0;
fail:
	client_close(cl);
	return rc;
}

/* As rmem-perf's "cpu" object: microseconds per MiB (bandwidth) or per
 * operation (latency); the server's only when measured. */
static void print_cpu(const struct opts *o, const struct result *res)
{
	double units = o->lat ? (double)res->ops : (double)res->ops * (double)o->size / (1 << 20);
	double secs = res->seconds > 0 ? res->seconds : 1e-9;

	if (res->self.cpu_s < 0 || units <= 0)
		return;
	printf(",\"cpu\":{\"per\":\"%s\",\"client_s\":%.6f,\"client_us\":%.3f,"
	       "\"client_util\":%.4f,\"client_switches\":%.3f", o->lat ? "op" : "MiB",
	       res->self.cpu_s, res->self.cpu_s * 1e6 / units, res->self.cpu_s / secs,
	       res->self.switches / units);
	if (res->server.cpu_s >= 0)
		printf(",\"daemon_s\":%.6f,\"daemon_us\":%.3f,\"daemon_util\":%.4f,"
		       "\"daemon_switches\":%.3f", res->server.cpu_s,
		       res->server.cpu_s * 1e6 / units, res->server.cpu_s / secs,
		       res->server.switches / units);
	printf("}");
}

static void report(const struct opts *o, struct result *res)
{
	double mbps = (double)res->ops * (double)o->size / res->seconds / 1e6;
	double mps = (double)res->ops / res->seconds;
	double p50, p99, max;

	qsort(res->lat.ns, res->lat.count, sizeof(*res->lat.ns), cmp_u64);
	p50 = percentile_us(&res->lat, 0.50);
	p99 = percentile_us(&res->lat, 0.99);
	max = percentile_us(&res->lat, 1.0);
	if (o->json) {
		printf("{\"tool\":\"fi_rma\",\"op\":\"%s\",\"mode\":\"%s\",\"transport\":\"tcp\","
		       "\"size\":%zu,\"depth\":%u,\"iters\":%" PRIu64 ",\"seconds\":%.3f,"
		       "\"mb_per_s\":%.3f,\"msg_per_s\":%.0f,"
		       "\"lat_us\":{\"p50\":%.2f,\"p99\":%.2f,\"max\":%.2f}",
		       o->write ? "write" : "read", o->lat ? "lat" : "bw", o->size, o->depth,
		       res->ops, res->seconds, mbps, mps, p50, p99, max);
		print_cpu(o, res);
		printf("}\n");
		return;
	}
	printf("%-6s %-3s %10s %6s %12s %10s %12s %9s %9s %9s\n", "op", "mode", "bytes", "depth",
	       "iters", "MB/s", "msg/s", "p50 us", "p99 us", "max us");
	printf("%-6s %-3s %10zu %6u %12" PRIu64 " %10.1f %12.0f %9.2f %9.2f %9.2f\n",
	       o->write ? "write" : "read", o->lat ? "lat" : "bw", o->size, o->depth, res->ops,
	       mbps, mps, p50, p99, max);
}

static int client_main(const struct opts *o)
{
	struct result res = { 0 };
	struct client cl;
	int rc;

	rc = client_open(&cl, o);
	if (rc)
		return 1;
	/* Warm the connection and both sides' caches, untimed. */
	rc = run_ops(&cl, o, 8 * (uint64_t)o->depth, 0, NULL);
	if (!rc)
		rc = run_ops(&cl, o, o->iters, o->seconds, &res);
	if (!rc)
		rc = verify(&cl, o);
	if (!rc)
		report(o, &res);
	free(res.lat.ns);
	fi_shutdown(cl.c.ep, 0);
	client_close(&cl);
	return rc ? 1 : 0;
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	if (*end && strchr("kKmMgG", *end)) {
		v <<= *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : 30;
		end++;
	}
	if (*end || !v)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fi_rma -s [-p PORT] [-m BYTES] [--wait] [HOST]\n"
		"       fi_rma [-p PORT] [--op write|read] [--bw|--lat] [--size BYTES]\n"
		"              [-n ITERS] [-D SECONDS] [-q DEPTH] [--server-pid PID] [--json] HOST\n");
}

enum { OPT_OP = 256, OPT_BW, OPT_LAT, OPT_SIZE, OPT_JSON, OPT_WAIT, OPT_SPID };

static const struct option long_opts[] = {
	{ "server", no_argument, NULL, 's' },
	{ "port", required_argument, NULL, 'p' },
	{ "server-bytes", required_argument, NULL, 'm' },
	{ "op", required_argument, NULL, OPT_OP },
	{ "bw", no_argument, NULL, OPT_BW },
	{ "lat", no_argument, NULL, OPT_LAT },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "wait", no_argument, NULL, OPT_WAIT },
	{ "server-pid", required_argument, NULL, OPT_SPID },
	{ NULL, 0, NULL, 0 },
};

static int parse_number(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return (errno || end == s || *end || *out <= 0) ? -EINVAL : 0;
}

static int parse_opt(struct opts *o, int c, const char *arg)
{
	size_t v;
	double d;

	switch (c) {
	case 's':
		o->server = true;
		return 0;
	case 'p':
		o->port = arg;
		return 0;
	case 'm':
		return parse_size(arg, &o->server_bytes);
	case OPT_OP:
		if (strcmp(arg, "write") && strcmp(arg, "read"))
			return -EINVAL;
		o->write = !strcmp(arg, "write");
		return 0;
	case OPT_BW:
		o->lat = false;
		return 0;
	case OPT_LAT:
		o->lat = true;
		return 0;
	case OPT_SIZE:
		return parse_size(arg, &o->size);
	case OPT_JSON:
		o->json = true;
		return 0;
	case OPT_SPID:
		if (parse_number(arg, &d) < 0 || d > 2147483647.0)
			return -EINVAL;
		o->server_pid = (int)d;
		return 0;
	case OPT_WAIT:
		o->wait = true;
		return 0;
	case 'n':
		if (parse_size(arg, &v))
			return -EINVAL;
		o->iters = v;
		return 0;
	case 'D':
		if (parse_number(arg, &d))
			return -EINVAL;
		o->seconds = d;
		return 0;
	case 'q':
		if (parse_size(arg, &v) || v > 4096)
			return -EINVAL;
		o->depth = (unsigned int)v;
		return 0;
	default:
		return -EINVAL;
	}
}

static int parse_args(struct opts *o, int argc, char **argv)
{
	int c;

	*o = (struct opts){
		.write = true,
		.host = "127.0.0.1",
		.port = DEFAULT_PORT,
		.size = 65536,
		.server_bytes = DEFAULT_SERVER_BYTES,
		.seconds = 2,
	};
	while ((c = getopt_long(argc, argv, "sp:m:n:D:q:", long_opts, NULL)) != -1) {
		if (parse_opt(o, c, optarg))
			return -EINVAL;
	}
	if (optind < argc)
		o->host = argv[optind++];
	else if (!o->server)
		return -EINVAL;
	if (optind < argc)
		return -EINVAL;
	if (!o->depth || o->lat)
		o->depth = o->lat ? 1 : 16;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;

	if (parse_args(&o, argc, argv)) {
		usage();
		return 2;
	}
	return o.server ? server_main(&o) : client_main(&o);
}
