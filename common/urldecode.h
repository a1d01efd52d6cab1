/*
 * urldecode.h - a URL parameter's value, "%XX" standing for the byte XX, as
 * both URL parsers (etcd_url.c, endpoint.c) take file paths and names.
 * Pure.
 */
#ifndef RMEM_COMMON_URLDECODE_H
#define RMEM_COMMON_URLDECODE_H

#include <stddef.h>

/* len bytes at v, decoded, into out (cap bytes, NUL included).  0, or
 * -EINVAL: empty, a bad "%XX", a NUL byte, or too long. */
int url_decode(const char *v, size_t len, char *out, size_t cap);

#endif /* RMEM_COMMON_URLDECODE_H */
