/*
 * etcd_url.c - see etcd_url.h.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "etcd_url.h"
#include "urldecode.h"

bool etcd_url_is(const char *url)
{
	return url && (!strncmp(url, ETCD_URL_SCHEME, strlen(ETCD_URL_SCHEME)) ||
		       !strncmp(url, ETCD_URL_SCHEME_TLS, strlen(ETCD_URL_SCHEME_TLS)));
}

/* A cluster's name as rmemd.conf's cluster.name takes it. */
static bool name_ok(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
			return false;
	}
	return true;
}

static const struct {
	const char *key;
	size_t offset;
} tls_params[] = {
	{ "etcd_ca=", offsetof(struct etcd_tls, ca) },
	{ "etcd_cert=", offsetof(struct etcd_tls, cert) },
	{ "etcd_key=", offsetof(struct etcd_tls, key) },
};

#define NPARAMS (sizeof tls_params / sizeof tls_params[0])

/* The parameters, "&" between them. */
static int parse_query(const char *q, struct etcd_url *u, etcd_url_param_fn other, void *arg,
		       char *why, size_t why_len)
{
	for (;;) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q), i;

		for (i = 0; i < NPARAMS; i++) {
			size_t klen = strlen(tls_params[i].key);
			char *field = (char *)&u->tls + tls_params[i].offset;

			if (len < klen || strncmp(q, tls_params[i].key, klen))
				continue;
			if (field[0]) {
				snprintf(why, why_len, "%.*s is given twice", (int)klen - 1, q);
				return -EINVAL;
			}
			if (url_decode(q + klen, len - klen, field, ETCD_TLS_PATH_MAX) < 0) {
				snprintf(why, why_len, "%.*s: not a path (at most %d bytes; %%XX for "
					 "a byte)", (int)klen - 1, q, ETCD_TLS_PATH_MAX - 1);
				return -EINVAL;
			}
			break;
		}
		if (i == NPARAMS && (!other || other(arg, q, len) < 0)) {
			snprintf(why, why_len, "unknown or bad parameter '%.*s'", (int)len, q);
			return -EINVAL;
		}
		if (!amp)
			return 0;
		q = amp + 1;
	}
}

int etcd_url_parse(const char *url, struct etcd_url *u, etcd_url_param_fn other, void *arg,
		   char *why, size_t why_len)
{
	const char *hosts, *slash, *p, *query, *scheme;
	struct etcd_endpoints e;
	size_t hlen, nlen, out = 0;
	int rc;

	memset(u, 0, sizeof *u);
	if (!url || !etcd_url_is(url)) {
		snprintf(why, why_len, "not an etcd:// or etcds:// URL");
		return -EINVAL;
	}
	scheme = url[4] == 's' ? "https://" : "http://";
	hosts = strstr(url, "://") + 3;
	query = strchr(hosts, '?');
	if (query) {
		rc = parse_query(query + 1, u, other, arg, why, why_len);
		if (rc < 0)
			return rc;
	}
	slash = memchr(hosts, '/', query ? (size_t)(query - hosts) : strlen(hosts));
	hlen = slash ? (size_t)(slash - hosts) : query ? (size_t)(query - hosts) : strlen(hosts);
	if (slash) {
		nlen = query ? (size_t)(query - slash - 1) : strlen(slash + 1);
		if (!name_ok(slash + 1, nlen) || nlen >= sizeof u->name) {
			snprintf(why, why_len, "the cluster's name is 1 to %d characters of A-Z a-z "
				 "0-9 _ . -", ETCD_URL_NAME_MAX - 1);
			return -EINVAL;
		}
		memcpy(u->name, slash + 1, nlen);
		u->name[nlen] = '\0';
	} else {
		snprintf(u->name, sizeof u->name, "rmem");
	}
	if (hlen == 0) {
		snprintf(why, why_len, "no HOST:PORT");
		return -EINVAL;
	}
	/* Each HOST:PORT becomes http://HOST:PORT (etcds://: https://). */
	for (p = hosts; p < hosts + hlen;) {
		const char *comma = memchr(p, ',', (size_t)(hosts + hlen - p));
		size_t one = comma ? (size_t)(comma - p) : (size_t)(hosts + hlen - p);
		int n;

		if (one == 0 || (comma && comma + 1 == hosts + hlen)) {
			snprintf(why, why_len, "an empty HOST:PORT");
			return -EINVAL;
		}
		n = snprintf(u->list + out, sizeof u->list - out, "%s%s%.*s", out ? "," : "",
			     scheme, (int)one, p);
		if (n < 0 || (size_t)n >= sizeof u->list - out) {
			snprintf(why, why_len, "more than %d endpoints", ETCD_MAX_ENDPOINTS);
			return -EINVAL;
		}
		out += (size_t)n;
		p += one + (comma ? 1 : 0);
	}
	rc = etcd_endpoints_parse(u->list, &e, why, why_len);
	if (rc == 0 && etcd_tls_any(&u->tls) && strcmp(scheme, "https://")) {
		snprintf(why, why_len, "etcd_ca, etcd_cert and etcd_key need etcds:// (etcd over "
			 "TLS); etcd:// is plain HTTP");
		return -EINVAL;
	}
	return rc < 0 ? rc : etcd_tls_check(&e, &u->tls, why, why_len);
}

/* A path's bytes, those etcd_url_parse would misread as "%XX". */
static int encode(const char *s, char *out, size_t len, size_t *at)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int n;

		if (c == '%' || c == '&' || c <= ' ' || c >= 0x7f)
			n = snprintf(out + *at, len - *at, "%%%02X", c);
		else
			n = snprintf(out + *at, len - *at, "%c", c);
		if (n < 0 || (size_t)n >= len - *at)
			return -ENAMETOOLONG;
		*at += (size_t)n;
	}
	return 0;
}

int etcd_url_tls_query(const struct etcd_tls *tls, char *out, size_t len)
{
	size_t at = 0;

	if (len == 0)
		return -ENAMETOOLONG;
	out[0] = '\0';
	for (size_t i = 0; i < NPARAMS; i++) {
		const char *field = (const char *)tls + tls_params[i].offset;
		int n;

		if (!field[0])
			continue;
		n = snprintf(out + at, len - at, "&%s", tls_params[i].key);
		if (n < 0 || (size_t)n >= len - at)
			return -ENAMETOOLONG;
		at += (size_t)n;
		if (encode(field, out, len, &at) < 0)
			return -ENAMETOOLONG;
	}
	return 0;
}
