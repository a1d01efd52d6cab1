/*
 * endpoint.h - parses the endpoint strings rmem_connect() accepts.
 *
 * Pure: no I/O, no allocation, no name resolution.  The grammar:
 *
 *   HOST:PORT            stream (TCP)
 *   tcp://HOST:PORT      stream (TCP), said explicitly
 *   tls://HOST:PORT      stream (TCP) under TLS 1.3
 *   rdma://HOST:PORT     RDMA
 *   unix:PATH            stream over a Unix socket
 *
 * A TCP endpoint may end in "?PARAMS", '&' between them: tls=1 (TLS, as
 * tls:// says), tls_ca=PATH (the CA the daemon's certificate must verify
 * against; default the system's), tls_cert=PATH and tls_key=PATH (a client
 * certificate, both or neither), tls_name=NAME (the name the daemon's
 * certificate must be made out to; default HOST).  Values are "%XX"
 * decoded (urldecode.h).  Each at most once, and the tls_* ones only with
 * TLS: nothing that asks for TLS ever means clear text.
 *
 * HOST is a name (letters, digits, '-', '_', dots between non-empty labels),
 * a dotted IPv4 address, or an IPv6 address in brackets, optionally with a
 * zone ("[fe80::1%eth0]").  PORT is 1..65535 in decimal without sign or
 * leading zeros.  PATH is any non-empty string short enough for sun_path.
 */
#ifndef RMEM_ENDPOINT_H
#define RMEM_ENDPOINT_H

#include <stdbool.h>
#include <stdint.h>

enum endpoint_kind {
	ENDPOINT_TCP,
	ENDPOINT_RDMA,
	ENDPOINT_UNIX,
};

/* sizeof(((struct sockaddr_un *)0)->sun_path) on Linux; endpoint.c checks it. */
#define ENDPOINT_PATH_MAX 108
/* A DNS name is at most 253 characters; an IPv6 literal with zone is shorter. */
#define ENDPOINT_HOST_MAX 254

#define ENDPOINT_TLS_MAX 256        /* a TLS file's path or the name, NUL included */

struct endpoint {
	enum endpoint_kind kind;
	bool explicit_scheme;          /* "tcp://", "tls://" or "rdma://" was written */
	bool tls;                      /* tls:// or ?tls=1 */
	char tls_ca[ENDPOINT_TLS_MAX]; /* "" when not given, and so on */
	char tls_cert[ENDPOINT_TLS_MAX];
	char tls_key[ENDPOINT_TLS_MAX];
	char tls_name[ENDPOINT_TLS_MAX];
	char host[ENDPOINT_HOST_MAX];  /* brackets removed; NUL-terminated */
	char port[6];                  /* decimal, for getaddrinfo() */
	uint16_t port_num;
	char path[ENDPOINT_PATH_MAX];  /* NUL-terminated; kind == ENDPOINT_UNIX */
};

/* Returns 0 and fills *ep, or -EINVAL (ep is then unspecified). */
int endpoint_parse(const char *s, struct endpoint *ep);

#endif /* RMEM_ENDPOINT_H */
