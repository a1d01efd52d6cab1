/*
 * router.h - the cluster router: what every public call does on a client
 * made from "etcd://HOST:PORT[,HOST:PORT...]/NAME" (librmem(7), CLUSTER).
 *
 * The router keeps the server set of cluster NAME from etcd (a watch on
 * /rmem/NAME/servers/, router_watch.c), connects to member servers lazily
 * (each an ordinary single-server client, single.h), places allocations by
 * free bytes (router_members.c), keeps names in etcd (router_names.c) and
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
#ifndef RMEM_ROUTER_H
#define RMEM_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "rmem.h"

struct router;

int router_connect(const char *url, const struct rmem_opts *o, struct router **out);
void router_close(struct router *cl);
/* Around each call below (api.c): see members_enter in router_int.h. */
unsigned router_enter(struct router *cl);
void router_leave(struct router *cl, unsigned epoch);
const char *router_transport(struct router *cl);

int router_alloc(struct router *cl, uint64_t size, uint32_t flags, struct rmem_region *out);
int router_free(struct router *cl, const struct rmem_region *r);
int router_write(struct router *cl, const struct rmem_region *r, uint64_t off,
		  const void *buf, size_t len);
int router_read(struct router *cl, const struct rmem_region *r, uint64_t off, void *buf,
		 size_t len);
int router_cas(struct router *cl, const struct rmem_region *r, uint64_t off, uint64_t expect,
		uint64_t desired, uint64_t *old);
int router_faa(struct router *cl, const struct rmem_region *r, uint64_t off, uint64_t add,
		uint64_t *old);
int router_register_buf(struct router *cl, void *buf, size_t len);
int router_unregister_buf(struct router *cl, void *buf);
int router_stats(struct router *cl, struct rmem_stats *out);
int router_repair(struct router *cl, const struct rmem_region *r);

/* router_poll.c */
int router_post_read(struct router *cl, const struct rmem_region *r, uint64_t off, void *buf,
		      size_t len, uint64_t cookie);
int router_post_write(struct router *cl, const struct rmem_region *r, uint64_t off,
		       const void *buf, size_t len, uint64_t cookie);
int router_post_alloc(struct router *cl, uint64_t size, uint32_t flags,
		       struct rmem_region *out, uint64_t cookie);
int router_post_free(struct router *cl, const struct rmem_region *r, uint64_t cookie);
int router_poll(struct router *cl, struct rmem_completion *out, int max, int timeout_ms);

/* router_names.c */
int router_create(struct router *cl, const char *name, uint64_t size, uint32_t flags,
		   struct rmem_region *out);
int router_open(struct router *cl, const char *name, uint32_t access, struct rmem_region *out);
int router_unlink(struct router *cl, const char *name, uint32_t flags);
/* The cluster's names from etcd, every tenant's, in order of creation:
 * id is the key's create_revision (page with it); length the size asked;
 * age_ms, handles and flags 0 (the servers know those, etcd does not). */
int router_names(struct router *cl, uint64_t after, struct rmem_name_info *out, size_t max);

#endif /* RMEM_ROUTER_H */
