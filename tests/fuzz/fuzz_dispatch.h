/*
 * fuzz_dispatch.h - what fuzz_dispatch.c and the seed writer agree on: the
 * input format and the "random" numbers the daemon draws while fuzzed.
 *
 * An input is one mode byte, then the bytes a client sends on one connection:
 *   bit 7 of the mode   the client is a TCP peer (no admin rights); else it
 *                       comes through the Unix socket as root (admin)
 *   bits 0-6            how many bytes go out per write(), 0: all at once;
 *                       the daemon runs its loop between writes, so frames
 *                       arrive cut at every place
 * An input of odd length ends as the daemon's timer would end it, past the
 * frame timeout and then past the lease (conn_check_deadlines()), before the
 * client closes; one of even length ends with the client closing.
 *
 * getrandom() is replaced in the fuzzed process by a fixed stream, so region
 * keys can be written into seeds (and found by the fuzzer's comparison
 * tracing): every call fills its buffer with the same little-endian words,
 * word i being FUZZ_RANDOM_WORD(i).  region.c takes its keys from the end of a
 * 1024-word batch, so the n-th region of an input (n from 0) has key
 * FUZZ_REGION_KEY(n); its id is n + 1, as every input gets a new region table.
 * The session is number 1 of its input, and the server nonce of AUTH_BEGIN
 * is the first 32 bytes of the stream, so a seed can carry a valid AUTH.
 *
 * The server has one tenant, FUZZ_TENANT, whose quota and region limit a
 * seed can reach; a TCP client must authenticate as it before HELLO, a Unix
 * client may stay anonymous.
 */
#ifndef RMEM_FUZZ_DISPATCH_H
#define RMEM_FUZZ_DISPATCH_H

#include <stdint.h>

#define FUZZ_MODE_TCP       0x80u
#define FUZZ_MODE_CHUNK(m)  ((m) & 0x7fu)

#define FUZZ_RANDOM_WORD(i) (0x6b000000u | ((uint32_t)(i) & 0xffffu))
#define FUZZ_KEY_BATCH      1024u
#define FUZZ_REGION_KEY(n)  FUZZ_RANDOM_WORD(FUZZ_KEY_BATCH - 1u - (uint32_t)(n))

#define FUZZ_TENANT             "fuzz"
#define FUZZ_TENANT_SECRET      "fuzz-dispatch-tenant-secret-0001"
#define FUZZ_TENANT_QUOTA       (256u << 10)
#define FUZZ_TENANT_MAX_REGIONS 8u

#endif /* RMEM_FUZZ_DISPATCH_H */
