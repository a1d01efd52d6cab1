/*
 * router_url.c - "etcd://H:P[,H:P...]/NAME" (etcds:// over TLS) taken
 * apart by common/etcd_url.h, and the router's own parameters,
 * "?claim_ttl=S&redundancy=K+R&repair_grace_ms=MS" (librmem(7), CLUSTER).
 * Pure string work.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router.h"
#include "router_int.h"
#include "etcd_url.h"
#include "stripe.h"

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

struct params {
	unsigned *ttl_s, *red_k, *red_r, *grace_ms;
	bool ttl_seen, red_seen, grace_seen;
};

/* "value" of "key=value" (len bytes at p) when p is that key: its length
 * in *vlen. */
static const char *value_of(const char *p, size_t len, const char *key, size_t *vlen)
{
	size_t klen = strlen(key);

	if (len <= klen || strncmp(p, key, klen))
		return NULL;
	*vlen = len - klen;
	return p + klen;
}

/* One of the router's parameters, each at most once (etcd_url_param_fn). */
static int router_param(void *arg, const char *p, size_t len)
{
	struct params *ps = arg;
	const char *v;
	size_t vlen;

	if ((v = value_of(p, len, "claim_ttl=", &vlen)) && !ps->ttl_seen) {
		ps->ttl_seen = true;
		return parse_num(v, vlen, 1, CLUSTER_CLAIM_TTL_MAX_S, ps->ttl_s);
	}
	if ((v = value_of(p, len, "redundancy=", &vlen)) && !ps->red_seen) {
		ps->red_seen = true;
		return parse_red(v, vlen, ps->red_k, ps->red_r);
	}
	if ((v = value_of(p, len, "repair_grace_ms=", &vlen)) && !ps->grace_seen) {
		ps->grace_seen = true;
		return parse_num(v, vlen, 0, CLUSTER_REPAIR_GRACE_MAX_MS, ps->grace_ms);
	}
	return -EINVAL;
}

int router_url_parse(const char *url, struct etcd_url *u, unsigned *claim_ttl_s,
		     unsigned *red_k, unsigned *red_r, unsigned *grace_ms)
{
	struct params ps = { .ttl_s = claim_ttl_s, .red_k = red_k, .red_r = red_r,
			     .grace_ms = grace_ms };
	char why[160];

	*claim_ttl_s = CLUSTER_CLAIM_TTL_S;
	*red_k = *red_r = 0;
	*grace_ms = CLUSTER_REPAIR_GRACE_MS;
	return etcd_url_parse(url, u, router_param, &ps, why, sizeof why) < 0 ? -EINVAL : 0;
}
