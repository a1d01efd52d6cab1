/*
 * addr.h - socket addresses as people read them, for logs and listings.
 */
#ifndef RMEM_COMMON_ADDR_H
#define RMEM_COMMON_ADDR_H

#include <stddef.h>

struct sockaddr;

/* Longest text addr_format() writes: "[" v6 "]:" port, NUL included. */
#define ADDR_TEXT_MAX 56

/*
 * Writes "a.b.c.d:port" for IPv4, "[v6]:port" for IPv6 and "?" for anything
 * else (NULL included) into out, truncated to outlen.  Returns out.
 */
char *addr_format(const struct sockaddr *sa, char *out, size_t outlen);

#endif /* RMEM_COMMON_ADDR_H */
