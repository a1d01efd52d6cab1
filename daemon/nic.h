/*
 * nic.h - rmemd's RDMA side, as the rest of the daemon sees it: bring-up and
 * tear-down.  Behind it (nic_dev.c, nic_conn.c, nic_key.c, sharing
 * nic_int.h) are the device, the pools' registration, the rdma_cm listener,
 * one queue pair per attached client and the NIC keys of its regions.
 * Every ibv_* and rdma_* call of the daemon is in those files; this header
 * names no verbs type.
 *
 * The NIC module never calls up.  What it needs of sessions and connections
 * it asks through the events main.c hands to nic_open; what sessions need of
 * it (keys) they reach through the table it registers in srv->keys
 * (keys.h).
 *
 * Everything runs on the event-loop thread.  The rdma_cm event channel, the
 * completion channel and the device's async events are fds in the libevent
 * loop; the only wait outside it is for the completion of a window bind or
 * invalidation (key_new, key_drop), bounded by NIC_WAIT_MS.
 *
 * How a client attaches (docs/architecture.md): it learns (session_id,
 * attach_token, rdma_port) from the HELLO reply, connects an RC queue pair to
 * rdma_port with proto_attach as private data, and nic_conn.c ties that queue
 * pair to the session (events->attached) once events->find accepts the
 * token.  From then on ALLOC gives regions keys the NIC enforces.
 *
 * Re-attach: a later connect request with the same (session_id,
 * attach_token) replaces the session's queue pair (the client's broke after
 * an error completion, and rxe moved ours to the error state with it).  In
 * region-mr mode the peer keeps its protection domain and MRs, so every key
 * stays valid; the old queue pair and rdma_cm id are destroyed once the new
 * one is accepted.  Window mode refuses a re-attach (its windows are bound to
 * the old queue pair); the client then moves its data to TCP.
 */
#ifndef RMEMD_NIC_H
#define RMEMD_NIC_H

#include <stdint.h>

struct server;
struct session;
struct nic_peer;

/* How long the loop waits for one bind or invalidation to complete. */
#define NIC_WAIT_MS 2000

/* What the NIC module asks of the daemon above it; every call comes from
 * the loop thread, in one of the NIC's own event callbacks. */
struct nic_events {
	void *arg;
	/* The session past HELLO with this id whose attach token is token, or
	 * NULL; *current is its queue pair when it has one already. */
	struct session *(*find)(void *arg, uint64_t session_id, uint64_t token,
				struct nic_peer **current);
	/* Who s's client is, for the log ("ADDR:PORT pid=N ..."). */
	const char *(*describe)(void *arg, const struct session *s);
	/* s's queue pair is p from now on (NULL: the accept failed after all). */
	void (*attached)(void *arg, struct session *s, struct nic_peer *p);
	/* Ends s from outside its connection (status a negative errno); its
	 * destruction destroys its peer later, never inside this call. */
	void (*end)(void *arg, struct session *s, int status, const char *why);
};

/*
 * Brings up RDMA as srv->cfg asks (listen.rdma, rdma.device, rdma.keys) after
 * the pools are open, and sets srv->nic, srv->keys, srv->nic_port and
 * srv->key_mode.  RDMA that cannot come up (listen.rdma is "", no RDMA
 * device, the device cannot do the key mode asked for, any verbs failure) is
 * not an error: it is logged once, srv->nic stays NULL and rmemd serves TCP
 * only.  ev is kept (it must outlive the NIC).  Returns 0, or -ENOMEM.
 */
int nic_open(struct server *srv, const struct nic_events *ev);
/*
 * rdma.required (rmemd.conf(5)): with it on, RDMA that cannot come up is
 * fatal: nic_open logs one line naming the cause and the unit settings to
 * check and returns -ENODEV (-EINVAL when listen.rdma is "").  nic_probe
 * is rmemd -t's check of the same without bringing anything up: 0 when
 * rdma.required is off or a device rmemd may open is there, else a
 * negative errno with that line in why.
 */
struct config;
int nic_probe(const struct config *cfg, char *why, size_t len);
/* Tears down what nic_open made.  Every peer must be gone already (their
 * sessions destroyed).  Accepts srv->nic NULL. */
void nic_close(struct server *srv);

/* An enum proto_key_mode as a word for logs: "none", "window", "region-mr". */
const char *nic_mode_name(uint8_t mode);

#endif /* RMEMD_NIC_H */
