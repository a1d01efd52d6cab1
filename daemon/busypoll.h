/*
 * busypoll.h - a short, adaptive busy-poll of one connection's socket after
 * its replies went out, so that the next request of a client that sends as
 * soon as it has its answer is served without a wake-up from epoll.
 *
 * Why: on this machine's loopback (a VM, daemon and client on two CPUs) the
 * wake-up of a sleeping rmemd was about half of a request's round trip:
 * 64 B write p50 24 us with rmemd sleeping in epoll_wait, 8.5 us with this
 * spin (the client spinning too, engine.c).  It costs CPU only while it
 * pays: a spin that catches a request refills the connection's credit, one
 * in vain spends it, and without credit only every BUSY_POLL_PROBE-th
 * chance spins (a client on rmemd's own CPU, or one that thinks between
 * requests, would see nothing within the window).  conn.c spins after
 * batches too: a client with 16 allocs in flight sends its next batch
 * within microseconds of our replies (issue 13).
 */
#ifndef RMEMD_BUSYPOLL_H
#define RMEMD_BUSYPOLL_H

#include <stdbool.h>
#include <stdint.h>

#define BUSY_POLL_US     50
#define BUSY_POLL_CREDIT 4
#define BUSY_POLL_PROBE  16
/* Spins that find a request, in one callback, before the connection goes
 * back to the event loop: others wait at most this many rounds (and one
 * more spin of up to BUSY_POLL_US, for the next request to be in before
 * epoll is asked: conn.c). */
#define BUSY_POLL_ROUNDS 16

struct busy_poll {
	uint8_t credit;
	uint8_t probe;
};

/* Calls try(arg) until it returns true (it found input and took it: a
 * nonblocking read itself, so that input costs no extra poll()) or
 * BUSY_POLL_US have passed, when spinning pays now; false at once
 * otherwise.  Whether try succeeded.  Updates bp's credit. */
bool busy_poll_try(struct busy_poll *bp, bool (*try)(void *arg), void *arg);

#endif /* RMEMD_BUSYPOLL_H */
