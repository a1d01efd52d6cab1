/*
 * addr.c - socket addresses as text.
 */
#include "addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

char *addr_format(const struct sockaddr *sa, char *out, size_t outlen)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (!outlen)
		return out;
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		snprintf(out, outlen, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(out, outlen, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(out, outlen, "?");
	}
	return out;
}
