/*
 * rawclient.h - a client of rmemd for the RDMA tests that trusts nobody and
 * checks nothing for the daemon: it speaks the control protocol itself over
 * TCP (tests/lib/raw.h and the codec) and drives libibverbs/librdmacm
 * directly, so that a test can hand the NIC any (addr, rkey) and see what the
 * NIC answers.
 * librmem would refuse most of what these tests must try.
 *
 *   struct rawclient c;
 *   rawclient_init(&c);
 *   rawclient_open(&c, "10.77.0.1", port, 30000);       TCP + HELLO
 *   rawclient_attach(&c, 1 << 20);                        rdma_cm + RC QP
 *   rawclient_alloc(&c, 4096, &reg);
 *   rawclient_rdma(&c, &(struct rawclient_op){ ... }, &status);
 *   rawclient_close(&c);
 *
 * Every int function returns 0 or a negative errno; a control request the
 * daemon refuses returns its status (negative errno).  Not thread-safe: a
 * test that shares one client between threads holds its own lock around
 * rawclient_post() and rawclient_poll().
 */
#ifndef RMEM_TESTS_RAWCLIENT_H
#define RMEM_TESTS_RAWCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "proto.h"

struct rawclient {
	/* control stream */
	int fd;                        /* -1 when closed */
	int timeout_ms;                /* for every control reply and CM event */
	uint64_t next_req_id;
	char host[64];
	struct proto_hello_rep hello;  /* valid after rawclient_open() */

	/* RDMA data path: all NULL until rawclient_attach() */
	struct rdma_event_channel *cm_channel;
	struct rdma_cm_id *cm_id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp_channel;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;                  /* registered local memory, LOCAL_WRITE */
	size_t buf_len;
	bool connected;
	bool cq_armed;
	uint32_t max_msg_sz;           /* of the port: longer transfers are split */
	uint32_t send_depth;           /* WRs that may be in flight on the QP */
	uint64_t next_wr_id;
	char dev_name[IBV_SYSFS_NAME_MAX];

	/* the last rdma_cm event seen, for diagnostics */
	enum rdma_cm_event_type last_event;
	int last_event_status;
};

/* Sets every field to "nothing open".  Call once before anything else. */
void rawclient_init(struct rawclient *c);

/* ---- control, over TCP --------------------------------------------------- */

/* Connects to host:port (numeric IPv4 or IPv6) and says HELLO; c->hello then
 * holds the reply. */
int rawclient_open(struct rawclient *c, const char *host, uint16_t port, int timeout_ms);
/* The same as tenant: AUTH_BEGIN and AUTH with this secret (the daemon's
 * own MAC checked too) before HELLO.  -EACCES when refused. */
int rawclient_open_tenant(struct rawclient *c, const char *host, uint16_t port, int timeout_ms,
			  const char *tenant, const void *secret, size_t secret_len);
/* RESUME (docs/protocol.md 7.13) instead of HELLO on a new stream: takes
 * back session_id with its token (a restored session); c->hello then holds
 * the reply.  The daemon's status (-ENOENT, -EACCES, -EBUSY) on refusal. */
int rawclient_resume(struct rawclient *c, const char *host, uint16_t port, int timeout_ms,
		     uint64_t session_id, const uint8_t token[PROTO_RESUME_TOKEN_LEN]);
/* REKEY: region id's new key and address in *out. */
int rawclient_rekey(struct rawclient *c, uint64_t id, struct proto_region *out);
int rawclient_ping(struct rawclient *c);
int rawclient_alloc(struct rawclient *c, uint64_t size, struct proto_region *out);
int rawclient_free(struct rawclient *c, const struct proto_region *r);
/* READ/WRITE served by the daemon, split into frames of hello.max_io. */
int rawclient_tcp_write(struct rawclient *c, const struct proto_region *r, uint64_t off,
			const void *buf, size_t len);
int rawclient_tcp_read(struct rawclient *c, const struct proto_region *r, uint64_t off,
		       void *buf, size_t len);
int rawclient_stats(struct rawclient *c, struct proto_stats *out);
/* CREATE (size, ALLOC flags), OPEN (flags: PROTO_ACCESS_*) or UNLINK (flags:
 * PROTO_UNLINK_*; out unused) of a named region; the daemon's status. */
int rawclient_name(struct rawclient *c, uint16_t opcode, const char *name, uint64_t size,
		   uint32_t flags, struct proto_region *out);


/* ---- the RDMA data path ------------------------------------------------------ */

/*
 * Connects an RC QP to host:rdma_port with the given private data (any bytes,
 * at most 56: what RC allows), with its own PD, CQ and a registered local
 * buffer of buf_len bytes.  Usable without rawclient_open(), to try bogus
 * attaches.  Returns 0 on ESTABLISHED, -ECONNREFUSED when the peer rejected
 * (RDMA_CM_EVENT_REJECTED), -EHOSTUNREACH (UNREACHABLE, address or route
 * errors), -ECONNABORTED (CONNECT_ERROR), -ETIMEDOUT, or the failed call's
 * error; c->last_event and c->last_event_status say what came.  On failure
 * everything RDMA is released again (rawclient_detach()).
 */
int rawclient_connect_rdma(struct rawclient *c, const char *host, uint16_t rdma_port,
			   const void *private_data, uint8_t private_len, size_t buf_len);
/* rawclient_connect_rdma() with this session's (session_id, attach_token)
 * to hello.rdma_port; -EOPNOTSUPP without trying when rdma_port is 0. */
int rawclient_attach(struct rawclient *c, size_t buf_len);
/* Waits for the next rdma_cm event of the connected client: 0 when it is
 * want, else what it means (as above), -ETIMEDOUT when none came. */
int rawclient_wait_cm_event(struct rawclient *c, enum rdma_cm_event_type want, int timeout_ms);
/* Disconnects and releases every RDMA resource.  Idempotent. */
void rawclient_detach(struct rawclient *c);
/* rawclient_detach() and closes the control stream.  Idempotent. */
void rawclient_close(struct rawclient *c);

enum rawclient_opcode {
	RAWCLIENT_WRITE,   /* local buf -> remote */
	RAWCLIENT_READ,    /* remote -> local buf */
	RAWCLIENT_CAS,     /* 8 bytes; the old remote value lands in local buf */
	RAWCLIENT_FAA,
};

struct rawclient_op {
	enum rawclient_opcode opcode;
	uint64_t remote_addr;
	uint32_t rkey;
	size_t local_off;      /* into c->buf */
	size_t len;            /* WRITE/READ; atomics always move 8 bytes */
	uint64_t compare_add;  /* CAS: expected value; FAA: addend */
	uint64_t swap;         /* CAS: new value */
};

const char *rawclient_opcode_name(enum rawclient_opcode op);

/*
 * Posts one signaled work request (len at most max_msg_sz).  -EINVAL for a
 * local range outside c->buf, -ENOTCONN without a QP, else ibv_post_send's
 * error.
 */
int rawclient_post(struct rawclient *c, const struct rawclient_op *op, uint64_t wr_id);
/*
 * Waits up to timeout_ms for completions (sleeping on the completion
 * channel, never spinning) and returns how many (1..max) landed in wc, or
 * -ETIMEDOUT, or -EIO when polling failed.
 */
int rawclient_poll(struct rawclient *c, struct ibv_wc *wc, int max, int timeout_ms);
/*
 * One operation, split at max_msg_sz into as many work requests as needed,
 * all in flight at once; waits for every completion.  *status is
 * IBV_WC_SUCCESS or the first other status (what follows an error is only
 * flushed).  Returns 0 once every completion arrived, else a negative errno.
 */
int rawclient_rdma(struct rawclient *c, const struct rawclient_op *op,
		   enum ibv_wc_status *status);

#endif /* RMEM_TESTS_RAWCLIENT_H */
