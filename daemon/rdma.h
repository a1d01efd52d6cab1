/*
 * rdma.h - rmemd's RDMA side: the device, the pools' registration, the rdma_cm
 * listener, one queue pair per attached client and the NIC keys of its
 * regions.  Every ibv_* and rdma_* call of the daemon is in rdma.c; this
 * header names no verbs type, so session.c, ctl.c and main.c stay verbs-free
 * and can be tested with stubs of these few calls.
 *
 * Everything runs on the event-loop thread.  The rdma_cm event channel, the
 * completion channel and the device's async events are fds in the libevent
 * loop; the only wait outside it is for the completion of a window bind or
 * invalidation (rdma_key_new, rdma_key_drop), bounded by RDMA_WAIT_MS.
 *
 * How a client attaches (docs/architecture.md): it learns (session_id,
 * attach_token, rdma_port) from the HELLO reply, connects an RC queue pair to
 * rdma_port with proto_attach as private data, and rdma.c ties that queue pair
 * to the session (session->rdma) once the token matches.  From then on ALLOC
 * gives regions keys the NIC enforces.
 *
 * Re-attach: a later connect request with the same (session_id,
 * attach_token) replaces the session's queue pair (the client's broke after
 * an error completion, and rxe moved ours to the error state with it).  In
 * region-mr mode the peer keeps its protection domain and MRs, so every key
 * stays valid; the old queue pair and rdma_cm id are destroyed once the new
 * one is accepted.  Window mode refuses a re-attach (its windows are bound to
 * the old queue pair); the client then moves its data to TCP.
 */
#ifndef RMEMD_RDMA_H
#define RMEMD_RDMA_H

#include <stdint.h>

struct server;
struct rdma;       /* the device side of one rmemd: srv->rdma, NULL when RDMA is off */
struct rdma_peer;  /* one attached client: its queue pair and its keys */

/* How long the loop waits for one bind or invalidation to complete. */
#define RDMA_WAIT_MS 2000

/*
 * Brings up RDMA as srv->cfg asks (listen.rdma, rdma.device, rdma.keys) after
 * the pools are open, and sets srv->rdma.  RDMA that cannot come up (listen.rdma
 * is "", no RDMA device, the device cannot do the key mode asked for, any verbs
 * failure) is not an error: it is logged once, srv->rdma stays NULL and rmemd
 * serves TCP only.  Returns 0, or -ENOMEM.
 */
int rdma_open(struct server *srv);
/* Tears down what rdma_open made.  Every peer must be gone already (their
 * sessions destroyed).  Accepts srv->rdma NULL. */
void rdma_close(struct server *srv);

/* The port of the rdma_cm listener for the HELLO reply; 0 when rd is NULL. */
uint16_t rdma_port(const struct rdma *rd);
/* enum proto_key_mode for the HELLO reply; PROTO_KEYS_NONE when rd is NULL. */
uint8_t rdma_key_mode(const struct rdma *rd);
/* The same as a word for logs: "none", "window" or "region-mr". */
const char *rdma_key_mode_name(const struct rdma *rd);

/*
 * Makes the NIC key of region id: [addr, addr + len) of pool number pool.
 * Window mode binds a type 2 memory window on the peer's queue pair and waits
 * for the bind to complete; region-mr mode registers the range in the peer's
 * own protection domain.  *rkey is the key for the client.  -EIO when the
 * peer's queue pair has failed, -ETIMEDOUT, -ENOMEM.
 */
int rdma_key_new(struct rdma_peer *p, uint64_t id, uint32_t pool, uint8_t *addr, uint64_t len,
		 uint32_t *rkey);
/*
 * Invalidates the NIC key of region id and frees it: when this returns the
 * NIC no longer lets anyone use it.  Returns 1 when region id had a NIC key,
 * 0 when it had none (made before the attach: a TCP-only key).
 */
int rdma_key_drop(struct rdma_peer *p, uint64_t id);

/* First step of a session's end: stops every remote access through p at
 * once (disconnects, which moves its queue pair to the error state).
 * Accepts NULL. */
void rdma_peer_stop(struct rdma_peer *p);
/* Destroys p: queue pair, completion queue, protection domain, rdma_cm id.
 * Its keys must be dropped first.  Accepts NULL. */
void rdma_peer_destroy(struct rdma_peer *p);

#endif /* RMEMD_RDMA_H */
