/*
 * etcd_url.h - a cluster's URL as librmem and rmemctl take it,
 * "etcd://HOST:PORT[,HOST:PORT...][/NAME][?PARAMS]" (etcds:// for etcd
 * over TLS), taken apart: the etcd endpoints as etcd_endpoints.h writes
 * them, the cluster's name, the TLS files, and the other parameters handed
 * to the caller one by one.  Pure string work, one parser for both.
 */
#ifndef RMEM_ETCD_URL_H
#define RMEM_ETCD_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "etcd_endpoints.h"

#define ETCD_URL_SCHEME     "etcd://"   /* members over http:// */
#define ETCD_URL_SCHEME_TLS "etcds://"  /* members over https:// */
#define ETCD_URL_NAME_MAX   64          /* the cluster's name, NUL included */
#define ETCD_URL_LIST_MAX   (ETCD_MAX_ENDPOINTS * ETCD_ENDPOINT_MAX)

struct etcd_url {
	char list[ETCD_URL_LIST_MAX];  /* "http://H:P,..." or "https://H:P,..." */
	char name[ETCD_URL_NAME_MAX];  /* "rmem" when the URL has no path */
	struct etcd_tls tls;           /* "?etcd_ca=P&etcd_cert=P&etcd_key=P" */
};

/* url starts with etcd:// or etcds://. */
bool etcd_url_is(const char *url);

/* A parameter that is not etcd_ca, etcd_cert or etcd_key: "key=value", len
 * bytes at p (not NUL-terminated).  0 takes it, -EINVAL refuses it. */
typedef int (*etcd_url_param_fn)(void *arg, const char *p, size_t len);

/*
 * url into *u.  Parameters are separated by '&'; each of the TLS ones at
 * most once, its value a path in which "%XX" stands for the byte XX (so a
 * path may hold '&' as "%26"); they need etcds://.  Every other parameter
 * goes to other (NULL: refused).  0, or -EINVAL with why.
 */
int etcd_url_parse(const char *url, struct etcd_url *u, etcd_url_param_fn other, void *arg,
		   char *why, size_t why_len);

/* "&etcd_ca=P&etcd_cert=P&etcd_key=P" for the files tls names (each
 * percent-encoded as etcd_url_parse decodes it) into out.  0, or
 * -ENAMETOOLONG. */
int etcd_url_tls_query(const struct etcd_tls *tls, char *out, size_t len);

#endif /* RMEM_ETCD_URL_H */
