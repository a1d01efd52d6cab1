/*
 * nic_int.h - what the NIC module's files share, and nothing outside them
 * includes: the device (struct nic), a peer (one attached client: rdma_cm id,
 * queue pair, completion queue, in region-mr mode its own protection domain,
 * and a hash of its regions' keys by region id) and a key.
 *
 * Within the module calls go one way too: nic_dev.c (bring-up, device
 * events) -> nic_conn.c (listener, peers) -> nic_key.c (keys, completions,
 * stopping a peer).
 */
#ifndef RMEMD_NIC_INT_H
#define RMEMD_NIC_INT_H

#include <event2/event.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "hash64.h"
#include "keys.h"
#include "nic.h"

struct counters;

struct nic_key {
	struct hash64_node link; /* in the peer's keys; link.key: region id */
	struct ibv_mw *mw;       /* window mode */
	struct ibv_mr *mr;       /* region-mr mode */
};

struct nic_peer {
	struct nic *rd;
	struct session *s;       /* opaque here: handed back to rd->ev */
	uint64_t sid;            /* its id, for the log */
	struct rdma_cm_id *id;
	struct ibv_pd *pd;       /* rd->pd (window mode) or its own (region-mr) */
	bool own_pd;
	struct ibv_cq *cq;
	bool stopped;            /* disconnected: no remote access any more */
	bool failed;             /* a work request failed: no new keys */
	bool ending;             /* its session was asked to end */
	uint64_t next_wr_id, done_wr_id;
	enum ibv_wc_status done_status;
	struct hash64 keys;      /* struct nic_key by region id */
};

struct nic {
	struct server *srv;               /* nic_dev.c's; nic_conn.c sees only the two below */
	struct counters *counters;        /* srv's: attaches counted (counters.h) */
	const char *listen_addr;          /* srv's listen.rdma */
	struct nic_events ev;             /* the daemon above (nic.h) */
	uint8_t mode;                     /* enum proto_key_mode */
	struct rdma_event_channel *cm_channel;
	struct rdma_cm_id *listen_id;
	struct ibv_context **devices;     /* librdmacm's, so ids and our PD share a context */
	struct ibv_context *ctx;
	char devname[IBV_SYSFS_NAME_MAX];
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp_channel;
	struct ibv_mr *pool_mr[CONFIG_MAX_POOLS];
	struct event *ev_cm, *ev_comp, *ev_async;
	int access;                       /* remote rights of a key */
	uint8_t max_rd_atom, max_init_rd_atom;
	uint16_t port;
};

static inline uint8_t nic_min_u8(unsigned a, unsigned b)
{
	unsigned m = a < b ? a : b;

	return (uint8_t)(m > 255 ? 255 : m);
}

/* nic_key.c: keys (the key_ops of keys.h), completions, stopping a peer. */
int nic_key_new(struct nic_peer *p, uint64_t id, uint32_t pool, uint8_t *addr, uint64_t len,
		uint32_t access, uint32_t *rkey);
enum key_gone nic_key_drop(struct nic_peer *p, uint64_t id);
/* Invalidates and frees k (already out of p's hash). */
enum key_gone nic_key_destroy(struct nic_peer *p, struct nic_key *k);
void nic_peer_stop(struct nic_peer *p);
/* A peer whose client moves its data to TCP because its queue pair broke:
 * when the queue pair is in the error state (or cannot be asked), p makes
 * no new NIC keys from here on (nic_key_new: -ENOTCONN, the region keeps its
 * TCP key) and stays connected (the session lives on).  A healthy queue pair
 * is left alone: its windows keep working, also as TCP keys.  Returns
 * whether p is retired. */
bool nic_peer_retire(struct nic_peer *p);
/* The completion channel's event callback (arg: the struct nic). */
void nic_on_comp_event(evutil_socket_t fd, short what, void *arg);

/* nic_conn.c: the rdma_cm listener and peers. */
int nic_bind_listener(struct nic *rd);
/* The rdma_cm event channel's callback (arg: the struct nic). */
void nic_on_cm_channel(evutil_socket_t fd, short what, void *arg);
void nic_peer_destroy(struct nic_peer *p);
/* Asks the daemon once to end p's session (rd->ev.end). */
void nic_peer_end(struct nic_peer *p, const char *why);

#endif /* RMEMD_NIC_INT_H */
