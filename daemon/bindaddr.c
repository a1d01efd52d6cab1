/*
 * bindaddr.c - see bindaddr.h.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bindaddr.h"
#include "endpoint.h"

int bindaddr_listen(const char *key, const char *addr, int backlog, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	struct endpoint ep;
	int fd, one = 1, rc;

	/* The same grammar as the clients' endpoints (config.c checked it). */
	if (endpoint_parse(addr, &ep) < 0 || ep.kind != ENDPOINT_TCP) {
		snprintf(err, errlen, "%s: \"%s\" is not HOST:PORT", key, addr);
		return -EINVAL;
	}
	rc = getaddrinfo(ep.host, ep.port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "%s: %s: %s", key, addr, gai_strerror(rc));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0) {
			freeaddrinfo(ai);
			return fd;
		}
	}
	rc = -errno;
	snprintf(err, errlen, "%s: %s: %s", key, addr, strerror(errno));
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}
