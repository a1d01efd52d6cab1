/*
 * randbytes.h - len bytes from the kernel's random source (getrandom(2)),
 * for the daemon's keys, tokens and nonces.
 */
#ifndef RMEM_COMMON_RANDBYTES_H
#define RMEM_COMMON_RANDBYTES_H

#include <stddef.h>

/* Fills buf, retrying short reads and EINTR: 0, or getrandom's -errno. */
int rand_bytes(void *buf, size_t len);

#endif /* RMEM_COMMON_RANDBYTES_H */
