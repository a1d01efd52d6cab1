/*
 * nic_key.c - the NIC keys of a peer's regions (a hash by region id), the
 * completions of the binds and invalidations that make and kill them, and
 * stopping a peer (its queue pair to the error state), which a failed work
 * request does too.  See nic.h and nic_int.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "nic_int.h"
#include "proto.h"

/* ---- the keys of a peer, by region id ------------------------------------- */

static void key_insert(struct nic_peer *p, struct nic_key *k)
{
	hash64_add(&p->keys, &k->link);
}

static struct nic_key *key_take(struct nic_peer *p, uint64_t id)
{
	struct hash64_node *l = hash64_take(&p->keys, id);

	return l ? hash64_entry(l, struct nic_key, link) : NULL;
}


/* ---- completions -------------------------------------------------------------- */

/* Takes every completion of p's queue.  Only one work request is waited for
 * at a time and a send queue completes in order, so the last one seen is the
 * newest. */
static void peer_drain(struct nic_peer *p)
{
	struct ibv_wc wc[4];
	int n;

	while ((n = ibv_poll_cq(p->cq, 4, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			p->done_wr_id = wc[i].wr_id;
			p->done_status = wc[i].status;
			if (wc[i].status != IBV_WC_SUCCESS && !p->stopped && !p->failed) {
				log_warn("client %llu: work request %llu failed: %s",
					 (unsigned long long)p->sid,
					 (unsigned long long)wc[i].wr_id,
					 ibv_wc_status_str(wc[i].status));
				p->failed = true;
			}
		}
	}
	if (n < 0 && !p->failed) {
		log_err("client %llu: ibv_poll_cq failed: %d", (unsigned long long)p->sid, n);
		p->failed = true;
	}
}

/* Reads the completion events that are there (the channel fd is nonblocking). */
static void comp_channel_service(struct nic *rd)
{
	struct ibv_cq *cq;
	void *cq_ctx;

	while (ibv_get_cq_event(rd->comp_channel, &cq, &cq_ctx) == 0) {
		struct nic_peer *p = cq_ctx;
		int rc;

		ibv_ack_cq_events(cq, 1);
		/* Re-arm before draining, so a completion that lands between the
		 * two still raises an event. */
		rc = ibv_req_notify_cq(cq, 0);
		if (rc)
			log_err("client %llu: ibv_req_notify_cq: %s",
				(unsigned long long)p->sid, strerror(rc));
		peer_drain(p);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		log_err("ibv_get_cq_event: %s", strerror(errno));
}

void nic_on_comp_event(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	comp_channel_service(arg);
}

/*
 * Waits, outside the event loop, for work request wr_id of p to complete:
 * the ALLOC or FREE that posted it answers only once the NIC has done it.
 * Other peers' completions met meanwhile are taken as the loop would.
 */
static int peer_wait(struct nic_peer *p, uint64_t wr_id)
{
	struct nic *rd = p->rd;
	uint64_t deadline = (uint64_t)clock_mono_ms() + NIC_WAIT_MS;

	for (;;) {
		struct pollfd pfd = { .fd = rd->comp_channel->fd, .events = POLLIN };
		uint64_t now;
		int n;

		peer_drain(p);
		if (p->done_wr_id == wr_id)
			return p->done_status == IBV_WC_SUCCESS ? 0 : -EIO;
		now = (uint64_t)clock_mono_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)(deadline - now));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			comp_channel_service(rd);
	}
}

/* Posts one signaled work request on p's queue pair and waits for it. */
static int peer_run(struct nic_peer *p, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad = NULL;
	int rc;

	wr->wr_id = ++p->next_wr_id;
	wr->send_flags = IBV_SEND_SIGNALED;
	rc = ibv_post_send(p->id->qp, wr, &bad);
	if (rc) {
		log_err("client %llu: ibv_post_send(%s): %s", (unsigned long long)p->sid, what,
			strerror(rc));
		return -EIO;
	}
	rc = peer_wait(p, wr->wr_id);
	if (rc == -ETIMEDOUT)
		log_err("client %llu: %s did not complete in %d ms", (unsigned long long)p->sid,
			what, NIC_WAIT_MS);
	return rc;
}

/* A queue pair that failed a work request serves no more keys: cut it, and
 * the DISCONNECTED event that follows ends the session. */
static void peer_fail(struct nic_peer *p, const char *why)
{
	if (!p->failed)
		log_warn("client %llu: RDMA failed (%s); disconnecting",
			 (unsigned long long)p->sid, why);
	p->failed = true;
	nic_peer_stop(p);
}


/* ---- keys ------------------------------------------------------------------ */

/* The remote rights of a key of access (keys.h), within what the device
 * grants (rd->access): READ is remote read; WRITE is remote write and, where
 * the device has them, atomics.  Both: rd->access, as for every anonymous
 * region. */
static int remote_rights(const struct nic *rd, uint32_t access)
{
	int rights = 0;

	if (access & PROTO_ACCESS_READ)
		rights |= IBV_ACCESS_REMOTE_READ;
	if (access & PROTO_ACCESS_WRITE)
		rights |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	return rights & rd->access;
}

static int window_new(struct nic_peer *p, struct nic_key *k, uint32_t pool, uint8_t *addr,
		      uint64_t len, int rights, uint32_t *rkey)
{
	struct ibv_send_wr wr = { .opcode = IBV_WR_BIND_MW };
	int rc;

	k->mw = ibv_alloc_mw(p->pd, IBV_MW_TYPE_2);
	if (!k->mw) {
		log_err("client %llu: ibv_alloc_mw: %s", (unsigned long long)p->sid,
			strerror(errno));
		return -ENOMEM;
	}
	wr.bind_mw.mw = k->mw;
	wr.bind_mw.rkey = ibv_inc_rkey(k->mw->rkey);
	wr.bind_mw.bind_info.mr = p->rd->pool_mr[pool];
	wr.bind_mw.bind_info.addr = (uint64_t)(uintptr_t)addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = (unsigned)rights;
	rc = peer_run(p, &wr, "bind");
	if (rc < 0) {
		ibv_dealloc_mw(k->mw); /* also unbinds it, should the bind land late */
		k->mw = NULL;
		peer_fail(p, "memory window bind");
		return rc;
	}
	/* A bind posted as a work request leaves mw->rkey as it was (rxe): keep
	 * it current, or the invalidation and the next bind use a stale key. */
	k->mw->rkey = wr.bind_mw.rkey;
	*rkey = k->mw->rkey;
	return 0;
}

int nic_key_new(struct nic_peer *p, uint64_t id, uint32_t pool, uint8_t *addr, uint64_t len,
		uint32_t access, uint32_t *rkey)
{
	int rights = remote_rights(p->rd, access);
	struct nic_key *k;
	int rc;

	/* No queue pair to bind on or to reach the client through: the region
	 * is served over TCP with the key the table drew for it (keys.h). */
	if (p->failed || p->stopped)
		return -ENOTCONN;
	k = calloc(1, sizeof *k);
	if (!k)
		return -ENOMEM;
	k->link.key = id;
	if (p->rd->mode == PROTO_KEYS_WINDOW) {
		rc = window_new(p, k, pool, addr, len, rights, rkey);
		if (rc < 0)
			goto fail;
	} else {
		/* The pool is pinned already; this only gives the NIC a
		 * translation and a key valid in this client's domain alone.
		 * Local write is what the verbs demand beside remote write and
		 * atomics; a read-only key goes without it. */
		int local = rights & ~IBV_ACCESS_REMOTE_READ ? IBV_ACCESS_LOCAL_WRITE : 0;

		k->mr = ibv_reg_mr(p->pd, addr, len, local | rights);
		if (!k->mr) {
			rc = errno == ENOMEM ? -ENOMEM : -EIO;
			log_err("client %llu: ibv_reg_mr of %llu bytes: %s",
				(unsigned long long)p->sid, (unsigned long long)len,
				strerror(errno));
			goto fail;
		}
		*rkey = k->mr->rkey;
	}
	key_insert(p, k);
	return 0;
fail:
	free(k);
	return rc;
}

/*
 * Whether the NIC confirmed the key's death decides whether its range may be
 * reused at once (keys.h): a completed invalidation of a window, or a
 * deregistered MR, is that confirmation.  A window the invalidation did not
 * reach (queue pair stopped or failed) is unbound by its deallocation, with
 * nothing from the NIC to say when the last access through it ended.
 */
enum key_gone nic_key_destroy(struct nic_peer *p, struct nic_key *k)
{
	enum key_gone gone = KEY_UNCONFIRMED;
	int rc;

	if (k->mw && !p->stopped && !p->failed) {
		struct ibv_send_wr wr = { .opcode = IBV_WR_LOCAL_INV,
					  .invalidate_rkey = k->mw->rkey };

		if (peer_run(p, &wr, "invalidate") < 0)
			peer_fail(p, "memory window invalidation");
		else
			gone = KEY_CONFIRMED;
	}
	if (k->mw) {
		rc = ibv_dealloc_mw(k->mw);
		if (rc) {
			log_err("client %llu: ibv_dealloc_mw: %s", (unsigned long long)p->sid,
				strerror(rc));
			gone = KEY_UNCONFIRMED;
		}
	}
	if (k->mr) {
		rc = ibv_dereg_mr(k->mr);
		if (rc)
			log_err("client %llu: ibv_dereg_mr: %s", (unsigned long long)p->sid,
				strerror(rc));
		else
			gone = KEY_CONFIRMED;
	}
	free(k);
	return gone;
}

enum key_gone nic_key_drop(struct nic_peer *p, uint64_t id)
{
	struct nic_key *k = key_take(p, id);

	return k ? nic_key_destroy(p, k) : KEY_NONE;
}

/* Only a queue pair that is broken already: a re-attach request carries the
 * session's secret token, but a client may ask while its queue pair is
 * fine, and that must cost it nothing.  p->failed makes later keys TCP keys
 * and lets key_drop count on the windows' deallocation (KEY_UNCONFIRMED)
 * rather than on an invalidation that cannot complete. */
bool nic_peer_retire(struct nic_peer *p)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	int rc;

	if (p->failed || p->stopped)
		return true;
	if (p->id->qp) {
		rc = ibv_query_qp(p->id->qp, &attr, IBV_QP_STATE, &init);
		if (rc == 0 && attr.qp_state != IBV_QPS_ERR)
			return false;
		if (rc)
			log_err("client %llu: ibv_query_qp: %s", (unsigned long long)p->sid,
				strerror(rc));
	}
	p->failed = true;
	return true;
}

void nic_peer_stop(struct nic_peer *p)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	int rc;

	if (!p || p->stopped)
		return;
	p->stopped = true;
	if (!p->id->qp)
		return;
	/* The error state is what stops the NIC, whatever the connection's
	 * state; the disconnect tells the client. */
	rc = ibv_modify_qp(p->id->qp, &attr, IBV_QP_STATE);
	if (rc)
		log_err("client %llu: ibv_modify_qp(ERR): %s", (unsigned long long)p->sid,
			strerror(rc));
	if (rdma_disconnect(p->id) && errno != EINVAL)
		log_debug("client %llu: rdma_disconnect: %s", (unsigned long long)p->sid,
			  strerror(errno));
}

