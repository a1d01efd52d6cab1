/*
 * single.h - the calls of rmem.h on one rmemd: what every public call does
 * on a client made from a HOST:PORT, tcp://, rdma:// or unix: endpoint.
 *
 * The public entry points (api.c) hand a single-server client to these, and
 * a cluster client (etcd://) to the router (router.h), which uses these on
 * each member server's own client: so the router sits above them and they
 * never know of it.  Same arguments, results and rules as rmem.h's calls of
 * the same names; defined in client.c, io.c, named.c and membuf.c.
 */
#ifndef RMEM_SINGLE_H
#define RMEM_SINGLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>

#include "rmem.h"

int single_connect(const char *endpoint, const struct rmem_opts *o, rmem_client **out);
void single_close(rmem_client *c);
const char *single_transport(const rmem_client *c);
/* Not in rmem.h: how many times c's session was resumed (reclaim.h) so
 * far; 0 for NULL.  Any thread, without c's lock: a call on c that came
 * back through a resume sees it moved once the call has returned. */
uint32_t single_resumes(rmem_client *c);
int single_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out);
int single_free(rmem_client *c, const struct rmem_region *r);
int single_write(rmem_client *c, const struct rmem_region *r, uint64_t off, const void *buf,
		 size_t len);
int single_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf,
		size_t len);
int single_cas(rmem_client *c, const struct rmem_region *r, uint64_t off, uint64_t expect,
	       uint64_t desired, uint64_t *old);
int single_faa(rmem_client *c, const struct rmem_region *r, uint64_t off, uint64_t add,
	       uint64_t *old);
int single_post_read(rmem_client *c, const struct rmem_region *r, uint64_t off, void *buf,
		     size_t len, uint64_t cookie);
int single_post_write(rmem_client *c, const struct rmem_region *r, uint64_t off,
		      const void *buf, size_t len, uint64_t cookie);
/* Not in rmem.h: a posted read whose bytes land in runs of seg bytes,
 * gap bytes apart in buf, the first run seg - phase bytes (datapath.h's
 * spaced READ): a redundant region's data piece straight into the
 * caller's buffer (router_redund_post.c).  As single_post_read, or
 * -EOPNOTSUPP at once on a client whose data goes on RDMA. */
int single_post_read_spaced(rmem_client *c, const struct rmem_region *r, uint64_t off,
			    void *buf, size_t len, uint32_t seg, uint32_t gap, uint32_t phase,
			    uint64_t cookie);
int single_post_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out,
		      uint64_t cookie);
int single_post_free(rmem_client *c, const struct rmem_region *r, uint64_t cookie);
int single_poll(rmem_client *c, struct rmem_completion *out, int max, int timeout_ms);
/* Not in rmem.h: for a caller polling many clients at once (the cluster
 * router), sends c's queued posts and gives the descriptor and events to
 * poll() for until single_poll(c, .., 0) has something to take: 1 with
 * *pfd set, or 0 when c must be looked at or waited on by single_poll()
 * itself (completions queued, RDMA transfers in flight, nothing due, a
 * broken stream).  Defined in io.c. */
int single_wait_fd(rmem_client *c, struct pollfd *pfd);
/* Not in rmem.h: a read or write started on io->c and waited for by
 * single_finish(), for a caller with one transfer on each of many clients
 * (the router's redundant regions: one round trip for all their pieces).
 * io->c stays held between the two, so a caller starting several takes
 * their clients in one fixed order, and finishes every one it started
 * before taking any other lock.  single_start() always leaves io to
 * single_finish(), which gives the outcome as single_read/_write would
 * (without their resume-and-send-again: the caller does that with them). */
struct single_io {
	rmem_client *c;
	const struct rmem_region *r;
	uint64_t off;
	void *buf;
	size_t len;
	int write;
	/* single_start()'s */
	int held, err;
	void *op;
};
void single_start(struct single_io *io);
int single_finish(struct single_io *io);
int single_register_buf(rmem_client *c, void *buf, size_t len);
int single_unregister_buf(rmem_client *c, void *buf);
int single_stats(rmem_client *c, struct rmem_stats *out);
int single_pools(rmem_client *c, struct rmem_pool_info *out, size_t max);
int single_regions(rmem_client *c, uint64_t after, struct rmem_region_info *out, size_t max);
int single_clients(rmem_client *c, uint64_t after, struct rmem_client_info *out, size_t max);
int single_create(rmem_client *c, const char *name, uint64_t size, uint32_t flags,
		  struct rmem_region *out);
/* single_create of a redundant region's piece (PROTO_CREATE_F_PIECE: its
 * server marks it so, and gives back only what is marked); -EINVAL from an
 * rmemd older than the mark. */
int single_create_piece(rmem_client *c, const char *name, uint64_t size, struct rmem_region *out);
int single_open(rmem_client *c, const char *name, uint32_t access, struct rmem_region *out);
/* single_open for writing as the name's one writer (PROTO_ACCESS_EXCL, the
 * router's redundant pieces): every other handle of the name that may write
 * is revoked on the server first.  *fenced: whether any was.  A daemon
 * from before the flag (-EINVAL) is asked again without it: *fenced false,
 * nothing fenced (docs/architecture.md, "Writer rule"). */
int single_open_excl(rmem_client *c, const char *name, uint32_t access, struct rmem_region *out,
		     bool *fenced);
int single_unlink(rmem_client *c, const char *name);
int single_unlink2(rmem_client *c, const char *name, uint32_t flags);
int single_unlink_ns(rmem_client *c, const char *tenant, const char *name, uint32_t flags);
int single_names(rmem_client *c, uint64_t after, struct rmem_name_info *out, size_t max);

#endif /* RMEM_SINGLE_H */
