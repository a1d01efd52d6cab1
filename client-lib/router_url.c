/*
 * router_url.c - "etcd://H:P[,H:P...]/NAME" taken apart: the etcd
 * endpoints as common/etcd_endpoints.h writes them, the cluster's name, and
 * the one parameter, "?claim_ttl=S" (librmem(7), CLUSTER).
 * Pure string work.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router.h"
#include "router_int.h"
#include "etcd_endpoints.h"

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

/* "claim_ttl=S" (the only parameter): 0 and *ttl_s, or -EINVAL. */
static int parse_query(const char *q, unsigned *ttl_s)
{
	const char *v = q + strlen("claim_ttl=");
	char *end;
	unsigned long n;

	if (strncmp(q, "claim_ttl=", strlen("claim_ttl=")) || *v < '0' || *v > '9')
		return -EINVAL;
	n = strtoul(v, &end, 10);
	if (*end || n < 1 || n > CLUSTER_CLAIM_TTL_MAX_S)
		return -EINVAL;
	*ttl_s = (unsigned)n;
	return 0;
}

int router_url_parse(const char *url, char *list, size_t list_len, char *name,
		      size_t name_len, unsigned *claim_ttl_s)
{
	const char *hosts, *slash, *p, *query;
	size_t hlen, nlen, out = 0;
	char why[128];

	*claim_ttl_s = CLUSTER_CLAIM_TTL_S;
	if (!url || strncmp(url, CLUSTER_SCHEME, strlen(CLUSTER_SCHEME)))
		return -EINVAL;
	hosts = url + strlen(CLUSTER_SCHEME);
	query = strchr(hosts, '?');
	if (query && parse_query(query + 1, claim_ttl_s) < 0)
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
