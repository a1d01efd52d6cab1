/*
 * etcd_endpoints.h - a list of etcd endpoints as rmemd.conf's cluster.etcd
 * (and later librmem's etcd:// URLs) write it, checked and split.  Pure
 * string work, apart from the client so that the config checker needs no
 * libcurl.
 */
#ifndef RMEM_ETCD_ENDPOINTS_H
#define RMEM_ETCD_ENDPOINTS_H

#include <stdbool.h>
#include <stddef.h>

#define ETCD_MAX_ENDPOINTS 8
#define ETCD_ENDPOINT_MAX  128 /* characters of one endpoint URL, NUL included */

struct etcd_endpoints {
	char url[ETCD_MAX_ENDPOINTS][ETCD_ENDPOINT_MAX]; /* "http://HOST:PORT", no '/' */
	size_t n;
};

/*
 * list: 1..ETCD_MAX_ENDPOINTS comma-separated "http://HOST:PORT" or
 * "https://HOST:PORT" (HOST a name, an IPv4 address or [IPv6]; PORT 1..65535;
 * an optional "/" after it), no spaces.  0 and *out (out may be NULL to only
 * check), or -EINVAL with what is wrong in why.
 */
int etcd_endpoints_parse(const char *list, struct etcd_endpoints *out, char *why,
			 size_t why_len);

/*
 * TLS for https:// endpoints (rmemd.conf's cluster.etcd_ca, etcd_cert,
 * etcd_key; librmem's etcds:// parameters of the same names): the CA file
 * the members' certificates must verify against ("": the system's CAs), and
 * this client's certificate and private key (PEM files; both or neither).
 */
#define ETCD_TLS_PATH_MAX 256
struct etcd_tls {
	char ca[ETCD_TLS_PATH_MAX];
	char cert[ETCD_TLS_PATH_MAX];
	char key[ETCD_TLS_PATH_MAX];
};

/* Any of the three is set (tls may be NULL: none). */
bool etcd_tls_any(const struct etcd_tls *tls);

/*
 * The rules, apart from the files themselves: etcd_cert and etcd_key go
 * together, and with any file set every endpoint of e is https:// (never
 * plain HTTP with TLS asked for).  0, or -EINVAL with what is wrong in why.
 */
int etcd_tls_check(const struct etcd_endpoints *e, const struct etcd_tls *tls, char *why,
		   size_t why_len);

#endif /* RMEM_ETCD_ENDPOINTS_H */
