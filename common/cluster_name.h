/*
 * cluster_name.h - the value of a cluster-wide name in etcd,
 * /rmem/<cluster>/names/<tenant>/<name>: which server holds the named
 * region, the id the creator's handle had there, its size, and that
 * server's generation when it was made.  Written by librmem's cluster
 * client (client-lib/router_names.c), read by it and by rmemctl.
 *
 * JSON, one object: {"server": "s1", "region": N, "size": N,
 * "generation": N}.  region 0: the name is claimed and its region is being
 * made (the key then lives on the creator's short lease).  Readers ignore
 * fields they do not know.  Pure, like cluster_rec.h.
 */
#ifndef RMEM_CLUSTER_NAME_H
#define RMEM_CLUSTER_NAME_H

#include <stdint.h>

#include "cluster_rec.h"

struct cluster_name {
	char server[CLUSTER_ID_MAX]; /* a server id, as cluster_rec's */
	uint64_t region;             /* 0: being made */
	uint64_t size;
	uint64_t generation;
};

/* 0 and a malloc'd text, -EINVAL (a bad server id, a number >= 2^63), -ENOMEM. */
int cluster_name_encode(const struct cluster_name *n, char **out);
/* 0, or -EPROTO (anything malformed), -ENOMEM. */
int cluster_name_decode(const char *text, size_t len, struct cluster_name *n);

#endif /* RMEM_CLUSTER_NAME_H */
