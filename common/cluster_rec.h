/*
 * cluster_rec.h - the value of a memory server's key in etcd,
 * /rmem/<cluster>/servers/<id>: what rmemd writes about itself and what
 * cluster clients and rmemctl read (docs/architecture.md, "Cluster").
 *
 * JSON, one object: {"id": "...", "tcp": "HOST:PORT", "rdma": "HOST:PORT" or
 * "", "pool_bytes": N, "free_bytes": N, "largest_free": N, "generation": N,
 * "start_time_ms": N, "version": "1.2.0", "draining": 0 or 1, "regions": N}.
 * Numbers are JSON integers (all
 * below 2^63).  A reader ignores fields it does not know (a newer rmemd may
 * add some) and refuses a record that lacks one it needs or has one of the
 * wrong type or out of range.  Pure, like etcd_codec.h.
 */
#ifndef RMEM_CLUSTER_REC_H
#define RMEM_CLUSTER_REC_H

#include <stddef.h>
#include <stdint.h>

#define CLUSTER_ID_MAX   32   /* characters of a server id, NUL included */
#define CLUSTER_ADDR_MAX 128  /* of an advertised HOST:PORT */
#define CLUSTER_VERSION_MAX 32

struct cluster_rec {
	char id[CLUSTER_ID_MAX];          /* [A-Za-z0-9_.-], 1..31 */
	char tcp[CLUSTER_ADDR_MAX];       /* the stream endpoint; never empty */
	char rdma[CLUSTER_ADDR_MAX];      /* the rdma_cm endpoint; "" without RDMA */
	uint64_t pool_bytes;              /* all pools */
	uint64_t free_bytes;              /* not in live regions */
	uint64_t largest_free;            /* longest free range of any pool */
	uint64_t generation;              /* changes when the server's memory was lost */
	uint64_t start_time_ms;           /* Unix time of this process's start */
	char version[CLUSTER_VERSION_MAX];
	/* Since the drain (issue 32): whether an operator drains the server
	 * (/rmem/<cluster>/drain/<id>: it takes no new regions or names), and
	 * how many regions it holds, which rmemctl cluster drain --wait
	 * counts down.  Optional: an older writer's record has neither (0). */
	uint64_t draining;                /* 0 or 1 */
	uint64_t regions;
};

/* 0 and a malloc'd text in *out; -EINVAL for a record that would not
 * decode (bad id, empty tcp, free_bytes > pool_bytes...), -ENOMEM. */
int cluster_rec_encode(const struct cluster_rec *r, char **out);
/* 0, or -EPROTO (anything malformed, as above), -ENOMEM. */
int cluster_rec_decode(const char *text, size_t len, struct cluster_rec *r);

#endif /* RMEM_CLUSTER_REC_H */
