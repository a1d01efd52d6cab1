/*
 * endpoint.c - the endpoint string parser (see endpoint.h for the grammar).
 *
 * Strict on purpose: a typo in an endpoint should fail at once with -EINVAL
 * rather than resolve to something surprising later in getaddrinfo().
 */
#include "endpoint.h"
#include "urldecode.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stddef.h>
#include <string.h>
#include <sys/un.h>

_Static_assert(sizeof(((struct sockaddr_un *)0)->sun_path) == ENDPOINT_PATH_MAX,
	       "ENDPOINT_PATH_MAX must match sun_path");

#define DNS_NAME_MAX  253
#define DNS_LABEL_MAX 63

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool is_alnum(char ch)
{
	return is_digit(ch) || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* Decimal 1..65535, no sign, no leading zero, nothing after it. */
static int parse_port(const char *s, struct endpoint *ep)
{
	size_t len = strlen(s);
	unsigned long value = 0;

	if (len == 0 || len > 5 || s[0] == '0')
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		value = value * 10 + (unsigned long)(s[i] - '0');
	}
	if (value > 65535)
		return -EINVAL;
	ep->port_num = (uint16_t)value;
	memcpy(ep->port, s, len + 1);
	return 0;
}

static bool all_digits_and_dots(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!is_digit(s[i]) && s[i] != '.')
			return false;
	return true;
}

/* A host name: dot-separated labels of letters, digits, '-' and '_', no label
 * empty or starting or ending with '-'; one trailing dot allowed.  Something
 * made only of digits and dots must be a valid dotted IPv4 address. */
static bool valid_name(const char *s, size_t len)
{
	size_t label = 0;

	if (len > 1 && s[len - 1] == '.')
		len--;
	if (len == 0 || len > DNS_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];

		if (ch == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!is_alnum(ch) && ch != '-' && ch != '_')
			return false;
		if (ch == '-' && label == 0)
			return false;
		if (++label > DNS_LABEL_MAX)
			return false;
	}
	if (label == 0 || s[len - 1] == '-')
		return false;
	if (all_digits_and_dots(s, len)) {
		struct in_addr a4;
		char buf[16];

		if (len >= sizeof(buf))
			return false;
		memcpy(buf, s, len);
		buf[len] = '\0';
		return inet_pton(AF_INET, buf, &a4) == 1;
	}
	return true;
}

/* The inside of "[...]": an IPv6 literal, optionally "%zone". */
static bool valid_ipv6(const char *s, size_t len)
{
	char buf[INET6_ADDRSTRLEN];
	const char *zone = memchr(s, '%', len);
	size_t addr_len = zone ? (size_t)(zone - s) : len;
	struct in6_addr a6;

	if (addr_len == 0 || addr_len >= sizeof(buf))
		return false;
	memcpy(buf, s, addr_len);
	buf[addr_len] = '\0';
	if (inet_pton(AF_INET6, buf, &a6) != 1)
		return false;
	if (zone) {
		size_t zone_len = len - addr_len - 1;

		if (zone_len == 0 || zone_len >= IF_NAMESIZE)
			return false;
		for (size_t i = 0; i < zone_len; i++) {
			char ch = zone[1 + i];

			if (!is_alnum(ch) && ch != '-' && ch != '_' && ch != '.')
				return false;
		}
	}
	return true;
}

static const struct {
	const char *key;
	size_t offset;
} tls_params[] = {
	{ "tls_ca=", offsetof(struct endpoint, tls_ca) },
	{ "tls_cert=", offsetof(struct endpoint, tls_cert) },
	{ "tls_key=", offsetof(struct endpoint, tls_key) },
	{ "tls_name=", offsetof(struct endpoint, tls_name) },
};

#define NPARAMS (sizeof tls_params / sizeof tls_params[0])

/* One parameter, len bytes at p. */
static int parse_param(const char *p, size_t len, struct endpoint *ep, bool *tls_param)
{
	if (len == 5 && !strncmp(p, "tls=1", 5)) {
		if (ep->tls && !ep->explicit_scheme)
			return -EINVAL; /* twice */
		ep->tls = true;
		return 0;
	}
	for (size_t i = 0; i < NPARAMS; i++) {
		size_t klen = strlen(tls_params[i].key);
		char *field = (char *)ep + tls_params[i].offset;

		if (len < klen || strncmp(p, tls_params[i].key, klen))
			continue;
		if (field[0])
			return -EINVAL;
		*tls_param = true;
		return url_decode(p + klen, len - klen, field, ENDPOINT_TLS_MAX);
	}
	return -EINVAL;
}

/* "?PARAMS" after a TCP endpoint (endpoint.h). */
static int parse_query(const char *q, struct endpoint *ep)
{
	bool tls_param = false;

	for (;;) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);

		if (parse_param(q, len, ep, &tls_param) < 0)
			return -EINVAL;
		if (!amp)
			break;
		q = amp + 1;
	}
	if (tls_param && !ep->tls)
		return -EINVAL;
	if (!ep->tls_cert[0] != !ep->tls_key[0])
		return -EINVAL;
	return 0;
}

static int parse_host_port(const char *s, struct endpoint *ep)
{
	const char *host = s, *colon;
	size_t host_len;
	bool ok;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		host = s + 1;
		host_len = (size_t)(close - host);
		colon = close + 1;
		ok = valid_ipv6(host, host_len);
	} else {
		colon = strchr(s, ':');
		if (!colon)
			return -EINVAL;
		host_len = (size_t)(colon - s);
		ok = valid_name(host, host_len);
	}
	if (!ok || host_len >= sizeof(ep->host))
		return -EINVAL;
	memcpy(ep->host, host, host_len);
	ep->host[host_len] = '\0';
	return parse_port(colon + 1, ep);
}

static int parse_unix(const char *path, struct endpoint *ep)
{
	size_t len = strnlen(path, sizeof(ep->path));

	/* sun_path needs room for the terminating NUL. */
	if (len == 0 || len >= sizeof(ep->path))
		return -EINVAL;
	memcpy(ep->path, path, len + 1);
	ep->kind = ENDPOINT_UNIX;
	return 0;
}

/* HOST:PORT, and "?PARAMS" after it on TCP. */
static int parse_host_port_query(const char *s, struct endpoint *ep)
{
	char hp[ENDPOINT_HOST_MAX + 8];
	const char *q = strchr(s, '?');
	size_t len = q ? (size_t)(q - s) : strlen(s);
	int err;

	if (!q)
		return parse_host_port(s, ep);
	if (ep->kind != ENDPOINT_TCP || len >= sizeof hp)
		return -EINVAL;
	memcpy(hp, s, len);
	hp[len] = '\0';
	err = parse_host_port(hp, ep);
	return err ? err : parse_query(q + 1, ep);
}

int endpoint_parse(const char *s, struct endpoint *ep)
{
	int err;

	if (!s || !ep)
		return -EINVAL;
	memset(ep, 0, sizeof(*ep));
	if (has_prefix(s, "unix:"))
		return parse_unix(s + strlen("unix:"), ep);
	if (has_prefix(s, "rdma://")) {
		ep->kind = ENDPOINT_RDMA;
		ep->explicit_scheme = true;
		s += strlen("rdma://");
	} else if (has_prefix(s, "tcp://")) {
		ep->kind = ENDPOINT_TCP;
		ep->explicit_scheme = true;
		s += strlen("tcp://");
	} else if (has_prefix(s, "tls://")) {
		ep->kind = ENDPOINT_TCP;
		ep->explicit_scheme = true;
		ep->tls = true;
		s += strlen("tls://");
	} else {
		ep->kind = ENDPOINT_TCP;
	}
	err = parse_host_port_query(s, ep);
	if (err)
		memset(ep, 0, sizeof(*ep));
	return err;
}
