/*
 * router_url.c - "etcd://H:P[,H:P...]/NAME" taken apart: the etcd
 * endpoints as common/etcd_endpoints.h writes them, the cluster's name, and
 * the parameters, "?claim_ttl=S&redundancy=K+R" (librmem(7), CLUSTER).
 * Pure string work.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router.h"
#include "router_int.h"
#include "etcd_endpoints.h"
#include "stripe.h"

/* A cluster's name as rmemd.conf's cluster.name takes it. */
static int name_ok(const char *s, size_t len)
{
	if (len == 0)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
			return 0;
	}
	return 1;
}

/* A decimal number of len bytes at v in [min, max]: 0 and *out, or
 * -EINVAL. */
static int parse_num(const char *v, size_t len, unsigned long min, unsigned long max,
		     unsigned *out)
{
	char num[12], *end;
	unsigned long n;

	if (len == 0 || len >= sizeof num || *v < '0' || *v > '9')
		return -EINVAL;
	memcpy(num, v, len);
	num[len] = '\0';
	n = strtoul(num, &end, 10);
	if (*end || n < min || n > max)
		return -EINVAL;
	*out = (unsigned)n;
	return 0;
}

/* "redundancy=K+R" (stripe.h's form). */
static int parse_red(const char *v, size_t len, unsigned *k, unsigned *r)
{
	char val[8];

	if (len >= sizeof val)
		return -EINVAL;
	memcpy(val, v, len);
	val[len] = '\0';
	return stripe_parse(val, k, r);
}

/* The parameters, "&" between them, each at most once: "claim_ttl=S",
 * "redundancy=K+R", "repair_grace_ms=MS".  0, or -EINVAL for any other, or
 * a repeated one. */
static int parse_query(const char *q, unsigned *ttl_s, unsigned *red_k, unsigned *red_r,
		       unsigned *grace_ms)
{
	bool ttl_seen = false, red_seen = false, grace_seen = false;

	for (;;) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);
		int err = -EINVAL;

		if (len > strlen("claim_ttl=") && !strncmp(q, "claim_ttl=", strlen("claim_ttl=")) &&
		    !ttl_seen) {
			ttl_seen = true;
			/* "claim_ttl=S", 1..CLUSTER_CLAIM_TTL_MAX_S */
			err = parse_num(q + strlen("claim_ttl="), len - strlen("claim_ttl="), 1,
					CLUSTER_CLAIM_TTL_MAX_S, ttl_s);
		} else if (len > strlen("redundancy=") &&
			   !strncmp(q, "redundancy=", strlen("redundancy=")) && !red_seen) {
			red_seen = true;
			err = parse_red(q + strlen("redundancy="), len - strlen("redundancy="), red_k,
					red_r);
		} else if (len > strlen("repair_grace_ms=") &&
			   !strncmp(q, "repair_grace_ms=", strlen("repair_grace_ms=")) && !grace_seen) {
			grace_seen = true;
			err = parse_num(q + strlen("repair_grace_ms="),
					len - strlen("repair_grace_ms="), 0, CLUSTER_REPAIR_GRACE_MAX_MS,
					grace_ms);
		}
		if (err)
			return err;
		if (!amp)
			return 0;
		q = amp + 1;
	}
}

int router_url_parse(const char *url, char *list, size_t list_len, char *name,
		      size_t name_len, unsigned *claim_ttl_s, unsigned *red_k, unsigned *red_r,
		      unsigned *grace_ms)
{
	const char *hosts, *slash, *p, *query;
	size_t hlen, nlen, out = 0;
	char why[128];

	*claim_ttl_s = CLUSTER_CLAIM_TTL_S;
	*red_k = *red_r = 0;
	*grace_ms = CLUSTER_REPAIR_GRACE_MS;
	if (!url || strncmp(url, CLUSTER_SCHEME, strlen(CLUSTER_SCHEME)))
		return -EINVAL;
	hosts = url + strlen(CLUSTER_SCHEME);
	query = strchr(hosts, '?');
	if (query && parse_query(query + 1, claim_ttl_s, red_k, red_r, grace_ms) < 0)
		return -EINVAL;
	slash = memchr(hosts, '/', query ? (size_t)(query - hosts) : strlen(hosts));
	hlen = slash ? (size_t)(slash - hosts) : query ? (size_t)(query - hosts) : strlen(hosts);
	if (slash) {
		nlen = query ? (size_t)(query - slash - 1) : strlen(slash + 1);
		if (!name_ok(slash + 1, nlen) || nlen >= name_len)
			return -EINVAL;
		memcpy(name, slash + 1, nlen);
		name[nlen] = '\0';
	} else {
		if (name_len < sizeof("rmem"))
			return -EINVAL;
		memcpy(name, "rmem", sizeof("rmem"));
	}
	if (hlen == 0)
		return -EINVAL;
	/* Each HOST:PORT becomes http://HOST:PORT. */
	for (p = hosts; p < hosts + hlen;) {
		const char *comma = memchr(p, ',', (size_t)(hosts + hlen - p));
		size_t one = comma ? (size_t)(comma - p) : (size_t)(hosts + hlen - p);
		int n;

		if (one == 0)
			return -EINVAL;
		n = snprintf(list + out, list_len - out, "%shttp://%.*s", out ? "," : "", (int)one, p);
		if (n < 0 || (size_t)n >= list_len - out)
			return -EINVAL;
		out += (size_t)n;
		p += one + (comma ? 1 : 0);
		if (comma && p == hosts + hlen)
			return -EINVAL;
	}
	return etcd_endpoints_parse(list, NULL, why, sizeof why) < 0 ? -EINVAL : 0;
}
