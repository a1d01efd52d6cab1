/*
 * keys.h - the seam between sessions and the NIC: the few calls session.c
 * makes on a session's queue pair and its regions' keys.  The NIC module
 * (nic_key.c) registers its table in srv->keys at nic_open; session.c calls
 * through it and never includes nic.h, so sessions (and the requests of
 * ctl.c above them) are unit-tested with a stub table (tests/unit/
 * test_session.c), as SPDK's rdma_provider.h and ibacm's acm_prov.h do.
 *
 * A session has a peer (struct nic_peer, opaque here) once its client has
 * attached a queue pair; only then are these called for it.
 */
#ifndef RMEMD_KEYS_H
#define RMEMD_KEYS_H

#include <stdint.h>

struct nic_peer;

/* What dropping a key leaves behind; decides whether its range may be
 * reused at once (docs/architecture.md, "The quarantine"). */
enum key_gone {
	KEY_NONE,        /* the region had no NIC key (made before the attach) */
	KEY_CONFIRMED,   /* the NIC has confirmed that the key is dead: the MR is
			    deregistered, or the window's invalidation completed */
	KEY_UNCONFIRMED, /* the key is freed but no completion said so (queue
			    pair stopped or failed): its range waits out the
			    quarantine */
};

struct key_ops {
	/*
	 * Makes the NIC key of region id: [addr, addr + len) of pool number
	 * pool, with the remote rights of access (PROTO_ACCESS_READ: RDMA
	 * READ; PROTO_ACCESS_WRITE: RDMA WRITE and atomics; an anonymous
	 * region has both); *rkey is the key for the client.  0,
	 * -ENOTCONN (the queue pair failed or was retired: the session's
	 * data goes over TCP, so the region keeps the random TCP key the
	 * table drew, and *rkey is untouched), -EIO, -ETIMEDOUT, -ENOMEM.
	 */
	int (*key_new)(struct nic_peer *p, uint64_t id, uint32_t pool, uint8_t *addr,
		       uint64_t len, uint32_t access, uint32_t *rkey);
	/* Invalidates and frees the NIC key of region id, if it has one. */
	enum key_gone (*key_drop)(struct nic_peer *p, uint64_t id);
	/* Stops every remote access through p at once (first step of a
	 * session's end). */
	void (*peer_stop)(struct nic_peer *p);
	/* Destroys p; its keys must be dropped first. */
	void (*peer_destroy)(struct nic_peer *p);
};

#endif /* RMEMD_KEYS_H */
