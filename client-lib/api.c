/*
 * api.c - the public calls that take a client: each hands it to the
 * single-server code (single.h) or, for a client rmem_connect() made from an
 * etcd:// endpoint, to the cluster router (cluster.h).  Nothing else here:
 * the two sides never call each other, and the router uses the single-server
 * calls on its members' own clients, downward.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cluster.h"
#include "single.h"

#define CL(c) ((c) && (c)->cluster)

/* A call on a cluster, counted (members_enter): clients it replaced are
 * closed once no call may be inside them. */
#define CLUSTER_CALL(c, call)                                                      \
	__extension__({                                                            \
		unsigned epoch_ = cluster_enter((c)->cluster);                     \
		int rc_ = (call);                                                  \
		cluster_leave((c)->cluster, epoch_);                               \
		rc_;                                                               \
	})

int rmem_connect(const char *endpoint, const struct rmem_opts *o, rmem_client **out)
{
	struct rmem_client *c;
	struct cluster *cl;
	int err;

	if (!endpoint || !out || strncmp(endpoint, CLUSTER_SCHEME, strlen(CLUSTER_SCHEME)))
		return single_connect(endpoint, o, out);
	*out = NULL;
	err = cluster_connect(endpoint, o, &cl);
	if (err)
		return err;
	/* The handle the application holds: a client whose only field in
	 * use is the router's. */
	c = calloc(1, sizeof(*c));
	if (!c) {
		cluster_close(cl);
		return -ENOMEM;
	}
	c->cluster = cl;
	*out = c;
	return 0;
}

void rmem_close(rmem_client *c)
{
	if (CL(c)) {
		cluster_close(c->cluster);
		free(c);
		return;
	}
	single_close(c);
}

const char *rmem_transport(const rmem_client *c)
{
	return CL(c) ? cluster_transport(c->cluster) : single_transport(c);
}

int rmem_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_alloc(c->cluster, size, flags, out)) :
		       single_alloc(c, size, flags, out);
}

int rmem_free(rmem_client *c, const struct rmem_region *r)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_free(c->cluster, r)) : single_free(c, r);
}

int rmem_write(rmem_client *c, const struct rmem_region *r, uint64_t off, const void *buf,
	       size_t len)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_write(c->cluster, r, off, buf, len)) :
		       single_write(c, r, off, buf, len);
}

int rmem_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf, size_t len)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_read(c->cluster, r, off, buf, len)) :
		       single_read(c, r, off, buf, len);
}

int rmem_cas(rmem_client *c, const struct rmem_region *r, uint64_t off, uint64_t expect,
	     uint64_t desired, uint64_t *old)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_cas(c->cluster, r, off, expect, desired, old)) :
		       single_cas(c, r, off, expect, desired, old);
}

int rmem_faa(rmem_client *c, const struct rmem_region *r, uint64_t off, uint64_t add,
	     uint64_t *old)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_faa(c->cluster, r, off, add, old)) :
		       single_faa(c, r, off, add, old);
}

int rmem_post_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf,
		   size_t len, uint64_t cookie)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_post_read(c->cluster, r, off, buf, len, cookie)) :
		       single_post_read(c, r, off, buf, len, cookie);
}

int rmem_post_write(rmem_client *c, const struct rmem_region *r, uint64_t off, const void *buf,
		    size_t len, uint64_t cookie)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_post_write(c->cluster, r, off, buf, len, cookie)) :
		       single_post_write(c, r, off, buf, len, cookie);
}

int rmem_post_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out,
		    uint64_t cookie)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_post_alloc(c->cluster, size, flags, out, cookie)) :
		       single_post_alloc(c, size, flags, out, cookie);
}

int rmem_post_free(rmem_client *c, const struct rmem_region *r, uint64_t cookie)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_post_free(c->cluster, r, cookie)) :
		       single_post_free(c, r, cookie);
}

int rmem_poll(rmem_client *c, struct rmem_completion *out, int max, int timeout_ms)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_poll(c->cluster, out, max, timeout_ms)) :
		       single_poll(c, out, max, timeout_ms);
}

/* A cluster client waits on many servers' streams: no one descriptor (yet). */
int rmem_fd(rmem_client *c)
{
	if (!c)
		return -EINVAL;
	return CL(c) ? -EOPNOTSUPP : single_fd(c);
}

int rmem_register_buf(rmem_client *c, void *buf, size_t len)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_register_buf(c->cluster, buf, len)) :
		       single_register_buf(c, buf, len);
}

int rmem_unregister_buf(rmem_client *c, void *buf)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_unregister_buf(c->cluster, buf)) :
		       single_unregister_buf(c, buf);
}

int rmem_stats(rmem_client *c, struct rmem_stats *out)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_stats(c->cluster, out)) : single_stats(c, out);
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
	return CL(c) ? CLUSTER_CALL(c, cluster_create(c->cluster, name, size, flags, out)) :
		       single_create(c, name, size, flags, out);
}

int rmem_open(rmem_client *c, const char *name, uint32_t access, struct rmem_region *out)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_open(c->cluster, name, access, out)) :
		       single_open(c, name, access, out);
}

int rmem_unlink(rmem_client *c, const char *name)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_unlink(c->cluster, name, 0)) :
		       single_unlink(c, name);
}

int rmem_unlink2(rmem_client *c, const char *name, uint32_t flags)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_unlink(c->cluster, name, flags)) :
		       single_unlink2(c, name, flags);
}

int rmem_unlink_ns(rmem_client *c, const char *tenant, const char *name, uint32_t flags)
{
	return CL(c) ? -EOPNOTSUPP : single_unlink_ns(c, tenant, name, flags);
}

int rmem_names(rmem_client *c, uint64_t after, struct rmem_name_info *out, size_t max)
{
	return CL(c) ? CLUSTER_CALL(c, cluster_names(c->cluster, after, out, max)) :
		       single_names(c, after, out, max);
}
