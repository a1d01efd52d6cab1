/*
 * router.c - the cluster router's connect and close, and the calls on one
 * region: alloc (placement, the next server on -ENOMEM), free, reads,
 * writes, atomics; and those made on every server: kept buffers, stats.
 * Posted calls are router_poll.c's, names router_names.c's.
 *
 * A region's calls go to the client of the server its handle names
 * (reserved[0]); the single-server client does the rest, resuming across a
 * restart of its server as it does alone.  When that client has lost its
 * server for good, or the server's key left etcd, the call is -EHOSTDOWN at
 * once: it never waits for a server known to be gone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router.h"
#include "router_int.h"
#include "etcd_client.h"
#include "etcd_url.h"
#include "single.h"
#include "stripe.h"

static char *dup_or_null(const char *s, int *err)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*err = -ENOMEM;
	return d;
}

/* One TLS file of the options into the URL's (field, ETCD_TLS_PATH_MAX
 * bytes): the same path when both name one.  0 or -EINVAL. */
static int merge_path(char *field, const char *opt)
{
	if (!opt || !opt[0])
		return 0;
	if (strlen(opt) >= ETCD_TLS_PATH_MAX || (field[0] && strcmp(field, opt)))
		return -EINVAL;
	snprintf(field, ETCD_TLS_PATH_MAX, "%s", opt);
	return 0;
}

/* The options' etcd_ca, etcd_cert, etcd_key with the URL's (the etcd
 * client checks the pairs and the https:// endpoints); the members'
 * clients never see them (etcd is the router's). */
static int merge_tls(struct router *cl, struct rmem_opts *d)
{
	int err = merge_path(cl->etcd_tls.ca, d->etcd_ca);

	if (!err)
		err = merge_path(cl->etcd_tls.cert, d->etcd_cert);
	if (!err)
		err = merge_path(cl->etcd_tls.key, d->etcd_key);
	d->etcd_ca = d->etcd_cert = d->etcd_key = NULL;
	/* TLS asked for with etcd://: never plain HTTP instead. */
	if (!err && etcd_tls_any(&cl->etcd_tls) && strncmp(cl->etcd_list, "https://", 8))
		err = -EINVAL;
	return err;
}

/* The options every member's client is opened with: the caller's, copied
 * (the caller's strings may go once rmem_connect returns). */
static int keep_opts(struct router *cl, const struct rmem_opts *o)
{
	struct rmem_opts d;
	int err = 0;

	rmem_opts_init(&d, sizeof d);
	if (o) {
		if (o->size < offsetof(struct rmem_opts, transport))
			return -EINVAL;
		/* Only what the caller's struct has; the rest keeps defaults. */
		memcpy(&d, o, o->size < sizeof d ? o->size : sizeof d);
		d.size = sizeof d;
	}
	if (d.transport && strcmp(d.transport, "auto") && strcmp(d.transport, "tcp") &&
	    strcmp(d.transport, "rdma"))
		return -EINVAL;
	if (!d.tenant != !d.secret_file)
		return -EINVAL;
	/* Redundancy is the router's: the URL's and the options' must agree;
	 * the members' clients never see it (one server cannot hold it). */
	if (d.redundancy && d.redundancy[0]) {
		unsigned k, r;

		if (stripe_parse(d.redundancy, &k, &r))
			return -EINVAL;
		if (cl->red_k && (cl->red_k != k || cl->red_r != r))
			return -EINVAL;
		cl->red_k = k;
		cl->red_r = r;
	}
	d.redundancy = NULL;
	err = merge_tls(cl, &d);
	if (err)
		return err;
	cl->transport = dup_or_null(d.transport, &err);
	cl->tenant = dup_or_null(d.tenant, &err);
	cl->secret_file = dup_or_null(d.secret_file, &err);
	d.transport = cl->transport;
	d.tenant = cl->tenant;
	d.secret_file = cl->secret_file;
	cl->opts = d;
	return err;
}

int router_connect(const char *url, const struct rmem_opts *o, struct router **out)
{
	struct router *cl = calloc(1, sizeof(*cl));
	struct etcd_url u;
	char why[160];
	int err;

	*out = NULL;
	if (!cl)
		return -ENOMEM;
	pthread_mutex_init(&cl->mu, NULL);
	pthread_mutex_init(&cl->names_mu, NULL);
	pthread_mutex_init(&cl->reg_mu, NULL);
	err = router_url_parse(url, &u, &cl->claim_ttl_s, &cl->red_k, &cl->red_r,
			       &cl->repair_grace_ms);
	if (!err) {
		_Static_assert(sizeof cl->etcd_list == sizeof u.list, "the URL's list fits");
		_Static_assert(sizeof cl->name == sizeof u.name, "the URL's name fits");
		memcpy(cl->etcd_list, u.list, sizeof cl->etcd_list);
		memcpy(cl->name, u.name, sizeof cl->name);
		cl->etcd_tls = u.tls;
		err = keep_opts(cl, o);
	}
	if (!err)
		err = members_init(cl);
	if (!err)
		err = etcd_client_new(cl->etcd_list, &cl->etcd_tls, CLUSTER_ETCD_TIMEOUT_MS,
				      &cl->names_etcd, why, sizeof why);
	/* A name's call is a request like any: it may take the application's
	 * timeout_ms while etcd elects a leader or is slow, not just one try of
	 * each member (a slow call is not a death). */
	if (!err && cl->opts.timeout_ms > 0)
		etcd_client_set_patience(cl->names_etcd, (unsigned)cl->opts.timeout_ms);
	if (!err)
		err = watch_start(cl, CLUSTER_ETCD_TIMEOUT_MS);
	if (err) {
		router_close(cl);
		return err;
	}
	*out = cl;
	return 0;
}

unsigned router_enter(struct router *cl)
{
	return members_enter(cl);
}

void router_leave(struct router *cl, unsigned epoch)
{
	members_leave(cl, epoch);
}

void router_close(struct router *cl)
{
	if (!cl)
		return;
	/* The watch feeds the table: it stops first. */
	watch_stop(cl->watch);
	watch_stop(cl->names_watch);
	redund_fini(cl);
	members_fini(cl);
	etcd_client_free(cl->names_etcd);
	rpost_fini(cl);
	free(cl->pend);
	free(cl->transport);
	free(cl->tenant);
	free(cl->secret_file);
	pthread_mutex_destroy(&cl->reg_mu);
	pthread_mutex_destroy(&cl->names_mu);
	pthread_mutex_destroy(&cl->mu);
	free(cl);
}

/* "rdma" once a connected server's data goes on RDMA, else what the
 * options ask ("rdma" never falls back; "auto" and "tcp" say "tcp"). */
const char *router_transport(struct router *cl)
{
	rmem_client *c[CLUSTER_MAX_SERVERS];
	size_t n = members_connected(cl, c, NULL, CLUSTER_MAX_SERVERS);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(single_transport(c[i]), "rdma"))
			return "rdma";
	return cl->transport && !strcmp(cl->transport, "rdma") ? "rdma" : "tcp";
}

/* ---- alloc: placement ------------------------------------------------------------ */

int router_alloc(struct router *cl, uint64_t size, uint32_t flags, struct rmem_region *out)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	int err = -EHOSTDOWN, last = 0;
	uint32_t slot;

	if (!out || size == 0 || flags != 0)
		return -EINVAL;
	if (cl->red_k)
		return redund_alloc(cl, size, out);
	/* Each server at most once: -ENOMEM (or a server lost) moves on to
	 * the next choice; the last real answer is the call's. */
	while (members_pick(cl, size, tried, &slot) == 0) {
		rmem_client *c;

		tried[slot / 64] |= 1ull << (slot % 64);
		err = members_client(cl, slot, &c);
		if (!err)
			err = members_err(cl, slot, single_alloc(c, size, flags, out));
		members_placed(cl, slot, size, err);
		if (!err) {
			members_tag(out, slot);
			return 0;
		}
		if (!members_refused_room(err) && err != -EHOSTDOWN)
			return err;
		last = err;
	}
	return last ? last : err;
}

/* The client of the server r names: 0 and *c, *slot, or an error. */
static int region_client(struct router *cl, const struct rmem_region *r, rmem_client **c,
			 uint32_t *slot)
{
	int err = members_slot_of(cl, r, slot);

	return err ? err : members_client(cl, *slot, c);
}

int router_free(struct router *cl, const struct rmem_region *r)
{
	rmem_client *c;
	uint32_t slot;
	int err;

	if (redund_is(r))
		return redund_free(cl, r);
	err = region_client(cl, r, &c, &slot);
	if (!err)
		err = members_err(cl, slot, single_free(c, r));
	if (!err)
		members_placed(cl, slot, r->length, 1);
	return err;
}

int router_write(struct router *cl, const struct rmem_region *r, uint64_t off,
		  const void *buf, size_t len)
{
	rmem_client *c;
	uint32_t slot;
	int err;

	if (redund_is(r))
		return redund_write(cl, r, off, buf, len);
	err = region_client(cl, r, &c, &slot);

	return err ? err : members_err(cl, slot, single_write(c, r, off, buf, len));
}

int router_read(struct router *cl, const struct rmem_region *r, uint64_t off, void *buf,
		 size_t len)
{
	rmem_client *c;
	uint32_t slot;
	int err;

	if (redund_is(r))
		return redund_read(cl, r, off, buf, len);
	err = region_client(cl, r, &c, &slot);

	return err ? err : members_err(cl, slot, single_read(c, r, off, buf, len));
}

int router_cas(struct router *cl, const struct rmem_region *r, uint64_t off, uint64_t expect,
		uint64_t desired, uint64_t *old)
{
	rmem_client *c;
	uint32_t slot;
	int err;

	/* Not exact across a server's death: "Redundancy", atomics. */
	if (redund_is(r))
		return -EOPNOTSUPP;
	err = region_client(cl, r, &c, &slot);

	return err ? err : members_err(cl, slot, single_cas(c, r, off, expect, desired, old));
}

int router_faa(struct router *cl, const struct rmem_region *r, uint64_t off, uint64_t add,
		uint64_t *old)
{
	rmem_client *c;
	uint32_t slot;
	int err;

	/* Not exact across a server's death: "Redundancy", atomics. */
	if (redund_is(r))
		return -EOPNOTSUPP;
	err = region_client(cl, r, &c, &slot);

	return err ? err : members_err(cl, slot, single_faa(c, r, off, add, old));
}

int router_repair(struct router *cl, const struct rmem_region *r)
{
	return redund_is(r) ? redund_repair(cl, r) : -EINVAL;
}

/* ---- calls on every server ------------------------------------------------------- */

/* Kept here and on every server connected now; members_client registers
 * them on servers connected later. */
int router_register_buf(struct router *cl, void *buf, size_t len)
{
	rmem_client *c[CLUSTER_MAX_SERVERS];
	size_t n, i;
	int err = 0;

	if (!buf || len == 0)
		return -EINVAL;
	pthread_mutex_lock(&cl->reg_mu);
	for (i = 0; i < cl->nbufs && !err; i++)
		if ((char *)buf < (char *)cl->bufs[i].buf + cl->bufs[i].len &&
		    (char *)cl->bufs[i].buf < (char *)buf + len)
			err = -EINVAL;
	if (!err && cl->nbufs == CLUSTER_MAX_BUFS)
		err = -ENOSPC;
	n = err ? 0 : members_connected(cl, c, NULL, CLUSTER_MAX_SERVERS);
	for (i = 0; i < n && !err; i++)
		err = single_register_buf(c[i], buf, len);
	if (err) {
		/* Undo where it was done (a lost server's -ECONNRESET too). */
		while (i-- > 0)
			single_unregister_buf(c[i], buf);
	} else {
		cl->bufs[cl->nbufs].buf = buf;
		cl->bufs[cl->nbufs].len = len;
		cl->nbufs++;
	}
	pthread_mutex_unlock(&cl->reg_mu);
	return err;
}

int router_unregister_buf(struct router *cl, void *buf)
{
	rmem_client *c[CLUSTER_MAX_SERVERS];
	size_t n, i;
	int err = -ENOENT;

	if (!buf)
		return -EINVAL;
	pthread_mutex_lock(&cl->reg_mu);
	for (i = 0; i < cl->nbufs; i++)
		if (cl->bufs[i].buf == buf)
			break;
	if (i < cl->nbufs) {
		n = members_connected(cl, c, NULL, CLUSTER_MAX_SERVERS);
		err = 0;
		for (size_t j = 0; j < n; j++) {
			int rc = single_unregister_buf(c[j], buf);

			if (rc == -EBUSY)
				err = rc;
		}
		if (!err) {
			cl->bufs[i] = cl->bufs[cl->nbufs - 1];
			cl->nbufs--;
		}
	}
	pthread_mutex_unlock(&cl->reg_mu);
	return err;
}

/*
 * Summed over every server present (connected now if it was not), as one
 * pool: largest_free is the largest of any one server, key_mode the first
 * server's.  Servers that cannot be reached are left out; with none
 * reachable the call fails (-EHOSTDOWN).
 */
int router_stats(struct router *cl, struct rmem_stats *out)
{
	size_t n;
	bool any = false;
	int err = -EHOSTDOWN;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&cl->mu);
	n = cl->nmembers;
	pthread_mutex_unlock(&cl->mu);
	for (uint32_t slot = 0; slot < n; slot++) {
		struct rmem_stats s;
		rmem_client *c;
		int rc = members_client(cl, slot, &c);

		if (!rc)
			rc = members_err(cl, slot, single_stats(c, &s));
		if (rc) {
			if (rc != -EHOSTDOWN)
				err = rc;
			continue;
		}
		out->pool_bytes += s.pool_bytes;
		out->used_bytes += s.used_bytes;
		out->free_bytes += s.free_bytes;
		if (s.largest_free > out->largest_free)
			out->largest_free = s.largest_free;
		out->regions += s.regions;
		out->clients += s.clients;
		out->peak_used += s.peak_used;
		out->allocs += s.allocs;
		out->frees += s.frees;
		out->state_slots_used += s.state_slots_used;
		out->state_slots_total += s.state_slots_total;
		if (!any)
			out->key_mode = s.key_mode;
		any = true;
	}
	pthread_mutex_lock(&cl->mu);
	out->degraded_reads = cl->degraded_reads;
	out->parity_updates = cl->parity_updates;
	out->repaired_bytes = cl->repaired_bytes;
	pthread_mutex_unlock(&cl->mu);
	return any ? 0 : err;
}
