/*
 * cluster.h - the cluster router: what every public call does on a client
 * made from "etcd://HOST:PORT[,HOST:PORT...]/NAME" (librmem(7), CLUSTER).
 *
 * The router keeps the server set of cluster NAME from etcd (a watch on
 * /rmem/NAME/servers/, cluster_watch.c), connects to member servers lazily
 * (each an ordinary single-server client, single.h), places allocations by
 * free bytes (cluster_members.c), keeps names in etcd (cluster_names.c) and
 * sends each region's calls to the server its handle names
 * (struct rmem_region's reserved[0], CLUSTER_REGION_TAG).  It calls only
 * downward: the single-server calls, libetcd (common/etcd_client.h,
 * common/cluster_rec.h, common/cluster_name.h).
 *
 * Same arguments, results and thread rules as rmem.h's calls; the
 * differences (rmem_connect(3), librmem(7)): -EHOSTDOWN for a region whose
 * server is gone, -EOPNOTSUPP for the admin listings of one daemon (pools,
 * regions, clients, unlink_ns); rmem_names lists the cluster's names.
 */
#ifndef RMEM_CLUSTER_H
#define RMEM_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "rmem.h"

#define CLUSTER_SCHEME "etcd://"

struct cluster;

int cluster_connect(const char *url, const struct rmem_opts *o, struct cluster **out);
void cluster_close(struct cluster *cl);
/* Around each call below (api.c): see members_enter in cluster_int.h. */
unsigned cluster_enter(struct cluster *cl);
void cluster_leave(struct cluster *cl, unsigned epoch);
const char *cluster_transport(struct cluster *cl);

int cluster_alloc(struct cluster *cl, uint64_t size, uint32_t flags, struct rmem_region *out);
int cluster_free(struct cluster *cl, const struct rmem_region *r);
int cluster_write(struct cluster *cl, const struct rmem_region *r, uint64_t off,
		  const void *buf, size_t len);
int cluster_read(struct cluster *cl, const struct rmem_region *r, uint64_t off, void *buf,
		 size_t len);
int cluster_cas(struct cluster *cl, const struct rmem_region *r, uint64_t off, uint64_t expect,
		uint64_t desired, uint64_t *old);
int cluster_faa(struct cluster *cl, const struct rmem_region *r, uint64_t off, uint64_t add,
		uint64_t *old);
int cluster_register_buf(struct cluster *cl, void *buf, size_t len);
int cluster_unregister_buf(struct cluster *cl, void *buf);
int cluster_stats(struct cluster *cl, struct rmem_stats *out);

/* cluster_poll.c */
int cluster_post_read(struct cluster *cl, const struct rmem_region *r, uint64_t off, void *buf,
		      size_t len, uint64_t cookie);
int cluster_post_write(struct cluster *cl, const struct rmem_region *r, uint64_t off,
		       const void *buf, size_t len, uint64_t cookie);
int cluster_post_alloc(struct cluster *cl, uint64_t size, uint32_t flags,
		       struct rmem_region *out, uint64_t cookie);
int cluster_post_free(struct cluster *cl, const struct rmem_region *r, uint64_t cookie);
int cluster_poll(struct cluster *cl, struct rmem_completion *out, int max, int timeout_ms);

/* cluster_names.c */
int cluster_create(struct cluster *cl, const char *name, uint64_t size, uint32_t flags,
		   struct rmem_region *out);
int cluster_open(struct cluster *cl, const char *name, uint32_t access, struct rmem_region *out);
int cluster_unlink(struct cluster *cl, const char *name, uint32_t flags);
/* The cluster's names from etcd, every tenant's, in order of creation:
 * id is the key's create_revision (page with it); length the size asked;
 * age_ms, handles and flags 0 (the servers know those, etcd does not). */
int cluster_names(struct cluster *cl, uint64_t after, struct rmem_name_info *out, size_t max);

#endif /* RMEM_CLUSTER_H */
