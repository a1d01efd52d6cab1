/*
 * etcd_endpoints.c - see etcd_endpoints.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "etcd_endpoints.h"

static bool host_char(char c, bool v6)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_' || (v6 && (c == ':' || c == '%'));
}

/* One "scheme://HOST:PORT[/]" of len bytes at s. */
static int check_one(const char *s, size_t len, size_t idx, char *why, size_t why_len)
{
	const char *p, *end = s + len, *host;
	unsigned port = 0;
	size_t digits = 0;

	if (len >= 7 && !strncmp(s, "http://", 7))
		p = s + 7;
	else if (len >= 8 && !strncmp(s, "https://", 8))
		p = s + 8;
	else
		goto bad_scheme;
	if (end > p && end[-1] == '/')
		end--;
	host = p;
	if (p < end && *p == '[') {
		for (p++; p < end && host_char(*p, true); p++)
			;
		if (p == host + 1 || p >= end || *p != ']')
			goto bad_host;
		p++;
	} else {
		for (; p < end && host_char(*p, false); p++)
			;
		if (p == host)
			goto bad_host;
	}
	if (p >= end || *p != ':')
		goto bad_port;
	for (p++; p < end && *p >= '0' && *p <= '9' && digits < 6; p++, digits++)
		port = port * 10 + (unsigned)(*p - '0');
	if (p != end || !digits || port < 1 || port > 65535)
		goto bad_port;
	if (len >= ETCD_ENDPOINT_MAX) {
		snprintf(why, why_len, "endpoint %zu is longer than %d characters", idx + 1,
			 ETCD_ENDPOINT_MAX - 1);
		return -EINVAL;
	}
	return 0;
bad_scheme:
	snprintf(why, why_len, "endpoint %zu does not start with http:// or https://", idx + 1);
	return -EINVAL;
bad_host:
	snprintf(why, why_len, "endpoint %zu has a bad host (a name, an IPv4 address or [IPv6])",
		 idx + 1);
	return -EINVAL;
bad_port:
	snprintf(why, why_len, "endpoint %zu does not end in :PORT (1 to 65535)", idx + 1);
	return -EINVAL;
}

int etcd_endpoints_parse(const char *list, struct etcd_endpoints *out, char *why,
			 size_t why_len)
{
	struct etcd_endpoints tmp;
	const char *s = list;
	size_t n = 0;
	int rc;

	memset(&tmp, 0, sizeof tmp);
	if (!list || !*list) {
		snprintf(why, why_len, "no endpoint (example: \"http://127.0.0.1:2379\")");
		return -EINVAL;
	}
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);

		if (n == ETCD_MAX_ENDPOINTS) {
			snprintf(why, why_len, "more than %d endpoints", ETCD_MAX_ENDPOINTS);
			return -EINVAL;
		}
		rc = check_one(s, len, n, why, why_len);
		if (rc < 0)
			return rc;
		if (len && s[len - 1] == '/')
			len--;
		memcpy(tmp.url[n], s, len);
		tmp.url[n][len] = '\0';
		n++;
		if (!comma)
			break;
		s = comma + 1;
	}
	tmp.n = n;
	if (out)
		*out = tmp;
	return 0;
}

bool etcd_tls_any(const struct etcd_tls *tls)
{
	return tls && (tls->ca[0] || tls->cert[0] || tls->key[0]);
}

int etcd_tls_check(const struct etcd_endpoints *e, const struct etcd_tls *tls, char *why,
		   size_t why_len)
{
	if (!etcd_tls_any(tls))
		return 0;
	if (!tls->cert[0] != !tls->key[0]) {
		snprintf(why, why_len, "%s is set without %s (a client certificate needs its key)",
			 tls->cert[0] ? "etcd_cert" : "etcd_key",
			 tls->cert[0] ? "etcd_key" : "etcd_cert");
		return -EINVAL;
	}
	for (size_t i = 0; i < e->n; i++) {
		if (strncmp(e->url[i], "https://", 8)) {
			snprintf(why, why_len, "endpoint %zu (%s) is not https://, and %s is set: "
				 "TLS files need https:// endpoints (never plain HTTP)", i + 1,
				 e->url[i], tls->ca[0] ? "etcd_ca" : "etcd_cert");
			return -EINVAL;
		}
	}
	return 0;
}
