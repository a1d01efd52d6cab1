/*
 * cluster_url.c - "etcd://H:P[,H:P...]/NAME" taken apart: the etcd
 * endpoints as common/etcd_endpoints.h writes them, and the cluster's name.
 * Pure string work.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "cluster_int.h"
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

int cluster_url_parse(const char *url, char *list, size_t list_len, char *name,
		      size_t name_len)
{
	const char *hosts, *slash, *p;
	size_t hlen, nlen, out = 0;
	char why[128];

	if (!url || strncmp(url, CLUSTER_SCHEME, strlen(CLUSTER_SCHEME)))
		return -EINVAL;
	hosts = url + strlen(CLUSTER_SCHEME);
	slash = strchr(hosts, '/');
	hlen = slash ? (size_t)(slash - hosts) : strlen(hosts);
	if (slash) {
		nlen = strlen(slash + 1);
		if (!name_ok(slash + 1, nlen) || nlen >= name_len)
			return -EINVAL;
		memcpy(name, slash + 1, nlen + 1);
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
