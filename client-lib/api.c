/*
 * api.c - the public calls that take a client: each hands it to the
 * single-server code (single.h) or, for a client rmem_connect() made from an
 * etcd:// endpoint, to the cluster router (router.h).  Nothing else here:
 * the two sides never call each other, and the router uses the single-server
 * calls on its members' own clients, downward.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "etcd_url.h"
#include "router.h"
#include "single.h"

#define CL(c) ((c) && (c)->router)

/* A call on a cluster, counted (members_enter): clients it replaced are
 * closed once no call may be inside them. */
#define CLUSTER_CALL(c, call)                                                      \
	__extension__({                                                            \
		unsigned epoch_ = router_enter((c)->router);                     \
		int rc_ = (call);                                                  \
		router_leave((c)->router, epoch_);                               \
		rc_;                                                               \
	})

int rmem_connect(const char *endpoint, const struct rmem_opts *o, rmem_client **out)
{
	struct rmem_client *c;
	struct router *cl;
	int err;

	if (!endpoint || !out || !etcd_url_is(endpoint))
		return single_connect(endpoint, o, out);
	*out = NULL;
	err = router_connect(endpoint, o, &cl);
	if (err)
		return err;
	/* The handle the application holds: a client whose only field in
	 * use is the router's. */
	c = calloc(1, sizeof(*c));
	if (!c) {
		router_close(cl);
		return -ENOMEM;
	}
	c->router = cl;
	*out = c;
	return 0;
}

void rmem_close(rmem_client *c)
{
	if (CL(c)) {
		router_close(c->router);
		free(c);
		return;
	}
	single_close(c);
}

const char *rmem_transport(const rmem_client *c)
{
	return CL(c) ? router_transport(c->router) : single_transport(c);
}

int rmem_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out)
{
	return CL(c) ? CLUSTER_CALL(c, router_alloc(c->router, size, flags, out)) :
		       single_alloc(c, size, flags, out);
}

int rmem_free(rmem_client *c, const struct rmem_region *r)
{
	return CL(c) ? CLUSTER_CALL(c, router_free(c->router, r)) : single_free(c, r);
}

int rmem_write(rmem_client *c, const struct rmem_region *r, uint64_t off, const void *buf,
	       size_t len)
{
	return CL(c) ? CLUSTER_CALL(c, router_write(c->router, r, off, buf, len)) :
		       single_write(c, r, off, buf, len);
}

int rmem_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf, size_t len)
{
	return CL(c) ? CLUSTER_CALL(c, router_read(c->router, r, off, buf, len)) :
		       single_read(c, r, off, buf, len);
}

int rmem_cas(rmem_client *c, const struct rmem_region *r, uint64_t off, uint64_t expect,
	     uint64_t desired, uint64_t *old)
{
	return CL(c) ? CLUSTER_CALL(c, router_cas(c->router, r, off, expect, desired, old)) :
		       single_cas(c, r, off, expect, desired, old);
}

int rmem_faa(rmem_client *c, const struct rmem_region *r, uint64_t off, uint64_t add,
	     uint64_t *old)
{
	return CL(c) ? CLUSTER_CALL(c, router_faa(c->router, r, off, add, old)) :
		       single_faa(c, r, off, add, old);
}

int rmem_post_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf,
		   size_t len, uint64_t cookie)
{
	return CL(c) ? CLUSTER_CALL(c, router_post_read(c->router, r, off, buf, len, cookie)) :
		       single_post_read(c, r, off, buf, len, cookie);
}

int rmem_post_write(rmem_client *c, const struct rmem_region *r, uint64_t off, const void *buf,
		    size_t len, uint64_t cookie)
{
	return CL(c) ? CLUSTER_CALL(c, router_post_write(c->router, r, off, buf, len, cookie)) :
		       single_post_write(c, r, off, buf, len, cookie);
}

int rmem_post_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out,
		    uint64_t cookie)
{
	return CL(c) ? CLUSTER_CALL(c, router_post_alloc(c->router, size, flags, out, cookie)) :
		       single_post_alloc(c, size, flags, out, cookie);
}

int rmem_post_free(rmem_client *c, const struct rmem_region *r, uint64_t cookie)
{
	return CL(c) ? CLUSTER_CALL(c, router_post_free(c->router, r, cookie)) :
		       single_post_free(c, r, cookie);
}

int rmem_poll(rmem_client *c, struct rmem_completion *out, int max, int timeout_ms)
{
	return CL(c) ? CLUSTER_CALL(c, router_poll(c->router, out, max, timeout_ms)) :
		       single_poll(c, out, max, timeout_ms);
}

/* A cluster client waits on many servers' streams: no one descriptor (yet). */
int rmem_repair(rmem_client *c, const struct rmem_region *r)
{
	if (!c || !r)
		return -EINVAL;
	return CL(c) ? CLUSTER_CALL(c, router_repair(c->router, r)) : -EOPNOTSUPP;
}

int rmem_fd(rmem_client *c)
{
	if (!c)
		return -EINVAL;
	return CL(c) ? -EOPNOTSUPP : single_fd(c);
}

int rmem_register_buf(rmem_client *c, void *buf, size_t len)
{
	return CL(c) ? CLUSTER_CALL(c, router_register_buf(c->router, buf, len)) :
		       single_register_buf(c, buf, len);
}

int rmem_unregister_buf(rmem_client *c, void *buf)
{
	return CL(c) ? CLUSTER_CALL(c, router_unregister_buf(c->router, buf)) :
		       single_unregister_buf(c, buf);
}

int rmem_stats(rmem_client *c, struct rmem_stats *out)
{
	return CL(c) ? CLUSTER_CALL(c, router_stats(c->router, out)) : single_stats(c, out);
}

/* The admin listings of one daemon speak to its Unix socket: a cluster
 * client has none (-EOPNOTSUPP).  rmem_names lists the cluster's names. */
int rmem_pools(rmem_client *c, struct rmem_pool_info *out, size_t max)
{
	return CL(c) ? -EOPNOTSUPP : single_pools(c, out, max);
}

int rmem_regions(rmem_client *c, uint64_t after, struct rmem_region_info *out, size_t max)
{
	return CL(c) ? -EOPNOTSUPP : single_regions(c, after, out, max);
}

int rmem_clients(rmem_client *c, uint64_t after, struct rmem_client_info *out, size_t max)
{
	return CL(c) ? -EOPNOTSUPP : single_clients(c, after, out, max);
}

int rmem_create(rmem_client *c, const char *name, uint64_t size, uint32_t flags,
		struct rmem_region *out)
{
	return CL(c) ? CLUSTER_CALL(c, router_create(c->router, name, size, flags, out)) :
		       single_create(c, name, size, flags, out);
}

int rmem_open(rmem_client *c, const char *name, uint32_t access, struct rmem_region *out)
{
	return CL(c) ? CLUSTER_CALL(c, router_open(c->router, name, access, out)) :
		       single_open(c, name, access, out);
}

int rmem_unlink(rmem_client *c, const char *name)
{
	return CL(c) ? CLUSTER_CALL(c, router_unlink(c->router, name, 0)) :
		       single_unlink(c, name);
}

int rmem_unlink2(rmem_client *c, const char *name, uint32_t flags)
{
	return CL(c) ? CLUSTER_CALL(c, router_unlink(c->router, name, flags)) :
		       single_unlink2(c, name, flags);
}

int rmem_unlink_ns(rmem_client *c, const char *tenant, const char *name, uint32_t flags)
{
	return CL(c) ? -EOPNOTSUPP : single_unlink_ns(c, tenant, name, flags);
}

int rmem_names(rmem_client *c, uint64_t after, struct rmem_name_info *out, size_t max)
{
	return CL(c) ? CLUSTER_CALL(c, router_names(c->router, after, out, max)) :
		       single_names(c, after, out, max);
}
