/*
 * nic_dev.c - the device side of rmemd's RDMA: bring-up (rdma_cm event
 * channel, the device that owns listen.rdma's address, key mode, protection
 * domain, the pools' registration in window mode, completion channel, the
 * fds in the loop), the device's async events, and tear-down.  See nic.h.
 *
 * One device serves everything: the one librdmacm hands to listen.rdma's
 * address (or the one named in rdma.device).  Its protection domain, the pool
 * registrations (window mode), the completion channel and the rdma_cm event
 * channel live as long as the daemon.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "nic_int.h"
#include "proto.h"
#include "server.h"

#define LISTEN_BACKLOG 128
/* Soft-RoCE (rxe) reports this vendor id (drivers/infiniband/sw/rxe). */
#define RXE_VENDOR_ID  0xffffffu

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* The device's own reports: a queue pair that broke ends its session. */
static void on_async_event(evutil_socket_t fd, short what, void *arg)
{
	struct nic *rd = arg;
	struct ibv_async_event ev;

	(void)fd;
	(void)what;
	while (ibv_get_async_event(rd->ctx, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR: {
			struct nic_peer *p = ev.element.qp->qp_context;

			if (!p->stopped)
				nic_peer_end(p, ibv_event_type_str(ev.event_type));
			break;
		}
		case IBV_EVENT_COMM_EST:
			break; /* rdma_cm reports ESTABLISHED */
		default:
			log_notice("RDMA device %s: %s", rd->devname,
				   ibv_event_type_str(ev.event_type));
			break;
		}
		ibv_ack_async_event(&ev);
	}
}
/* ---- bring-up and tear-down --------------------------------------------------- */

/*
 * "auto": the device of listen.rdma's address, else the first one; a name
 * must be one librdmacm knows.
 */
static int pick_device(struct nic *rd, const char *want)
{
	int n = 0;

	rd->devices = rdma_get_devices(&n);
	if (!rd->devices || n == 0) {
		log_notice("no RDMA device: serving TCP only (HELLO says rdma_port 0)");
		return -ENODEV;
	}
	if (!strcmp(want, "auto")) {
		rd->ctx = rd->listen_id->verbs ? rd->listen_id->verbs : rd->devices[0];
	} else {
		for (int i = 0; i < n; i++)
			if (!strcmp(ibv_get_device_name(rd->devices[i]->device), want))
				rd->ctx = rd->devices[i];
		if (!rd->ctx) {
			log_warn("rdma.device = \"%s\": no such RDMA device; serving TCP only",
				 want);
			return -ENODEV;
		}
		if (rd->listen_id->verbs && rd->listen_id->verbs != rd->ctx) {
			log_warn("listen.rdma = \"%s\" is on device %s, not rdma.device \"%s\"; "
				 "serving TCP only", rd->srv->cfg.listen_rdma,
				 ibv_get_device_name(rd->listen_id->verbs->device), want);
			return -EINVAL;
		}
	}
	snprintf(rd->devname, sizeof rd->devname, "%s", ibv_get_device_name(rd->ctx->device));
	return 0;
}

/* rdma.keys against what the device can do; logs the choice and why. */
static int pick_key_mode(struct nic *rd, const struct ibv_device_attr *a)
{
	const unsigned type2 = IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	bool windows = (a->device_cap_flags & type2) != 0;
	/* Linux 6.1's rxe binds type 2 windows but checks an access only against
	 * the MR under the window: its bounds are not enforced. */
	bool bounds = windows && a->vendor_id != RXE_VENDOR_ID;

	switch (rd->srv->cfg.rdma_keys) {
	case CONFIG_KEYS_AUTO:
		rd->mode = bounds ? PROTO_KEYS_WINDOW : PROTO_KEYS_REGION_MR;
		log_notice("rdma.keys = auto: %s (%s)", nic_mode_name(rd->mode),
			   bounds ? "the device enforces type 2 window bounds" :
			   windows ? "Soft-RoCE does not enforce window bounds" :
			   "the device has no type 2 memory windows");
		return 0;
	case CONFIG_KEYS_WINDOW:
		if (!windows) {
			log_warn("rdma.keys = window: device %s has no type 2 memory windows; "
				 "serving TCP only", rd->devname);
			return -EOPNOTSUPP;
		}
		if (!bounds)
			log_warn("rdma.keys = window on Soft-RoCE: windows are tied to their "
				 "queue pair but their bounds are not checked, so a client "
				 "reaches the whole pool through any of its windows: for tests "
				 "only");
		rd->mode = PROTO_KEYS_WINDOW;
		return 0;
	case CONFIG_KEYS_REGION_MR:
		rd->mode = PROTO_KEYS_REGION_MR;
		return 0;
	}
	return -EINVAL;
}

/*
 * Window mode: each pool is registered once.  The MR gets no remote rights
 * of its own, only MW_BIND (and LOCAL_WRITE, which windows with remote write
 * need): its rkey, which every queue pair of the shared domain could use,
 * must open nothing; only the windows bound on a client's own queue pair do.
 */
static int register_pools(struct nic *rd)
{
	struct server *srv = rd->srv;

	for (uint32_t i = 0; i < srv->npools; i++) {
		struct pool *pl = &srv->pools[i];
		int64_t t0 = clock_mono_ms();

		rd->pool_mr[i] = ibv_reg_mr(rd->pd, pl->base, pl->size,
					    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
		/* Before READY, and it faults in every page the MR pins: the
		 * log says what it cost (docs/architecture.md, restart). */
		if (rd->pool_mr[i])
			log_info("pool %s: registered with %s in %lld ms", pl->name, rd->devname,
				 (long long)(clock_mono_ms() - t0));
		if (!rd->pool_mr[i]) {
			int err = errno;

			log_warn("pool %s: ibv_reg_mr of %llu bytes: %s; serving TCP only",
				 pl->name, (unsigned long long)pl->size, strerror(err));
			return -err;
		}
	}
	return 0;
}

static int watch(struct nic *rd, struct event **ev, int fd, event_callback_fn fn)
{
	int rc = set_nonblock(fd);

	if (rc < 0) {
		log_warn("fcntl(O_NONBLOCK): %s", strerror(-rc));
		return rc;
	}
	*ev = event_new(rd->srv->base, fd, EV_READ | EV_PERSIST, fn, rd);
	if (!*ev || event_add(*ev, NULL) < 0) {
		log_warn("cannot watch an RDMA fd");
		return -ENOMEM;
	}
	return 0;
}

static int nic_up(struct nic *rd)
{
	struct ibv_device_attr attr;
	int rc, err;

	rd->cm_channel = rdma_create_event_channel();
	if (!rd->cm_channel) {
		log_notice("no RDMA here (rdma_create_event_channel: %s): serving TCP only "
			   "(HELLO says rdma_port 0)", strerror(errno));
		return -ENODEV;
	}
	if (rdma_create_id(rd->cm_channel, &rd->listen_id, rd, RDMA_PS_TCP)) {
		err = errno;
		log_warn("rdma_create_id: %s; serving TCP only", strerror(err));
		return -err;
	}
	rc = nic_bind_listener(rd);
	if (rc < 0)
		return rc;
	rc = pick_device(rd, rd->srv->cfg.rdma_device);
	if (rc < 0)
		return rc;
	rc = ibv_query_device(rd->ctx, &attr);
	if (rc) {
		log_warn("%s: ibv_query_device: %s; serving TCP only", rd->devname, strerror(rc));
		return -rc;
	}
	rd->max_rd_atom = nic_min_u8((unsigned)attr.max_qp_rd_atom, 255);
	rd->max_init_rd_atom = nic_min_u8((unsigned)attr.max_qp_init_rd_atom, 255);
	rd->access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	if (attr.atomic_cap != IBV_ATOMIC_NONE)
		rd->access |= IBV_ACCESS_REMOTE_ATOMIC;
	rc = pick_key_mode(rd, &attr);
	if (rc < 0)
		return rc;
	rd->pd = ibv_alloc_pd(rd->ctx);
	if (!rd->pd) {
		err = errno;
		log_warn("%s: ibv_alloc_pd: %s; serving TCP only", rd->devname, strerror(err));
		return -err;
	}
	if (rd->mode == PROTO_KEYS_WINDOW) {
		rc = register_pools(rd);
		if (rc < 0)
			return rc;
	}
	rd->comp_channel = ibv_create_comp_channel(rd->ctx);
	if (!rd->comp_channel) {
		err = errno;
		log_warn("%s: ibv_create_comp_channel: %s; serving TCP only", rd->devname,
			 strerror(err));
		return -err;
	}
	rc = watch(rd, &rd->ev_cm, rd->cm_channel->fd, nic_on_cm_channel);
	if (rc == 0)
		rc = watch(rd, &rd->ev_comp, rd->comp_channel->fd, nic_on_comp_event);
	if (rc == 0)
		rc = watch(rd, &rd->ev_async, rd->ctx->async_fd, on_async_event);
	if (rc < 0)
		return rc;
	if (rdma_listen(rd->listen_id, LISTEN_BACKLOG)) {
		err = errno;
		log_warn("rdma_listen(%s): %s; serving TCP only", rd->srv->cfg.listen_rdma,
			 strerror(err));
		return -err;
	}
	rd->port = ntohs(rdma_get_src_port(rd->listen_id));
	return 0;
}

static void nic_teardown(struct nic *rd)
{
	int rc;

	if (rd->ev_cm)
		event_free(rd->ev_cm);
	if (rd->ev_comp)
		event_free(rd->ev_comp);
	if (rd->ev_async)
		event_free(rd->ev_async);
	if (rd->listen_id && rdma_destroy_id(rd->listen_id))
		log_err("rdma_destroy_id(listener): %s", strerror(errno));
	for (uint32_t i = 0; i < CONFIG_MAX_POOLS; i++) {
		rc = rd->pool_mr[i] ? ibv_dereg_mr(rd->pool_mr[i]) : 0;
		if (rc)
			log_err("ibv_dereg_mr(pool %u): %s", i, strerror(rc));
	}
	rc = rd->comp_channel ? ibv_destroy_comp_channel(rd->comp_channel) : 0;
	if (rc)
		log_err("ibv_destroy_comp_channel: %s", strerror(rc));
	rc = rd->pd ? ibv_dealloc_pd(rd->pd) : 0;
	if (rc)
		log_err("ibv_dealloc_pd: %s", strerror(rc));
	if (rd->cm_channel)
		rdma_destroy_event_channel(rd->cm_channel);
	if (rd->devices)
		rdma_free_devices(rd->devices);
	free(rd);
}

/* What sessions call on their queue pairs (keys.h). */
static const struct key_ops nic_key_ops = {
	.key_new = nic_key_new,
	.key_drop = nic_key_drop,
	.peer_stop = nic_peer_stop,
	.peer_destroy = nic_peer_destroy,
};

/* rdma.required's one line: the cause by errno, and what to check. */
static void required_why(int err, char *why, size_t len)
{
	const char *cause =
		err == EACCES || err == EPERM ? "permission denied opening /dev/infiniband" :
		err == ENODEV || err == ENOENT || err == ENOSYS ? "no RDMA device that rmemd may open" :
		strerror(err);

	snprintf(why, len,
		 "rdma.required is on but RDMA cannot come up: %s; check the device "
		 "(`rdma link`, `ibv_devices`), listen.rdma and rdma.device, and that "
		 "rmemd.service's DeviceAllow= lists /dev/infiniband/rdma_cm and "
		 "/dev/infiniband/uverbs* (rmemd(8), \"RDMA\")", cause);
}

int nic_probe(const struct config *cfg, char *why, size_t len)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0, err = ENODEV;

	if (!cfg->rdma_required)
		return 0;
	if (!cfg->listen_rdma[0]) {
		snprintf(why, len, "rdma.required is on but listen.rdma is \"\" (RDMA off)");
		return -EINVAL;
	}
	list = ibv_get_device_list(&n);
	if (!list && errno)
		err = errno;
	for (int i = 0; list && i < n && !ctx; i++) {
		if (strcmp(cfg->rdma_device, "auto") &&
		    strcmp(ibv_get_device_name(list[i]), cfg->rdma_device))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			err = errno ? errno : ENODEV;
	}
	if (ctx)
		ibv_close_device(ctx);
	if (list)
		ibv_free_device_list(list);
	if (ctx)
		return 0;
	required_why(err, why, len);
	return -err;
}

int nic_open(struct server *srv, const struct nic_events *ev)
{
	struct nic *rd;
	char why[512];
	int rc;

	srv->nic = NULL;
	srv->keys = NULL;
	srv->nic_port = 0;
	srv->key_mode = PROTO_KEYS_NONE;
	if (!srv->cfg.listen_rdma[0]) {
		if (nic_probe(&srv->cfg, why, sizeof why) < 0) {
			log_err("%s", why);
			return -EINVAL;
		}
		log_notice("listen.rdma = \"\": RDMA off, serving TCP only");
		return 0;
	}
	rd = calloc(1, sizeof *rd);
	if (!rd)
		return -ENOMEM;
	rd->srv = srv;
	rd->counters = &srv->counters;
	rd->listen_addr = srv->cfg.listen_rdma;
	rd->ev = *ev;
	rc = nic_up(rd);
	if (rc < 0) {
		nic_teardown(rd);
		if (!srv->cfg.rdma_required)
			return 0;
		required_why(-rc, why, sizeof why);
		log_err("%s", why);
		return -ENODEV;
	}
	srv->nic = rd;
	srv->keys = &nic_key_ops;
	srv->nic_port = rd->port;
	srv->key_mode = rd->mode;
	log_notice("RDMA: device %s, rdma_cm port %u (listen.rdma %s), keys %s",
		   rd->devname, rd->port, srv->cfg.listen_rdma, nic_mode_name(rd->mode));
	return 0;
}

void nic_close(struct server *srv)
{
	if (!srv->nic)
		return;
	nic_teardown(srv->nic);
	srv->nic = NULL;
	srv->keys = NULL;
	srv->nic_port = 0;
	srv->key_mode = PROTO_KEYS_NONE;
}

const char *nic_mode_name(uint8_t mode)
{
	return mode == PROTO_KEYS_WINDOW ? "window" :
	       mode == PROTO_KEYS_REGION_MR ? "region-mr" : "none";
}
