/*
 * tcp_cc.c - see tcp_cc.h.
 */
#include "tcp_cc.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool tcp_cc_name_ok(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len >= TCP_CC_NAME_MAX)
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
	       len;
}

int tcp_cc_set(int fd, const char *name)
{
	if (!name || !name[0])
		return 0;
	if (!tcp_cc_name_ok(name))
		return -EINVAL;
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) < 0)
		return -errno;
	return 0;
}

int tcp_cc_probe(const char *name)
{
	int fd, rc;

	if (!name || !name[0])
		return 0;
	if (!tcp_cc_name_ok(name))
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = tcp_cc_set(fd, name);
	close(fd);
	return rc;
}
