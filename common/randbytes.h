/*
 * randbytes.h - len bytes from the kernel's random source (getrandom(2)),
 * for the daemon's keys, tokens and nonces; and a fast stream for choices
 * that need spread, not secrecy.
 */
#ifndef RMEM_COMMON_RANDBYTES_H
#define RMEM_COMMON_RANDBYTES_H

#include <stddef.h>
#include <stdint.h>

/* Fills buf, retrying short reads and EINTR: 0, or getrandom's -errno. */
int rand_bytes(void *buf, size_t len);

/* The next of the xorshift64* stream in *state (never 0): the router's pick
 * of servers, the tests' random models.  Never for a key or a token. */
uint64_t rand_xorshift(uint64_t *state);

#endif /* RMEM_COMMON_RANDBYTES_H */
