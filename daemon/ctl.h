/*
 * ctl.h - what each request of rmemd does.  A handler gets the request and
 * fills a reply; it never touches the connection.  The caller (conn.c) sends
 * the reply and acts on its outcome: that keeps calls going one way, conn.c
 * -> ctl.c -> session.c, as chrony's cmdmon.c does with its handlers.
 *
 * Which requests a session may send before HELLO, and which need admin
 * rights, are columns of ctl.c's handler table, checked in one place
 * (ctl.c's permitted(), through ctl_admit and ctl_dispatch), for every
 * opcode, WRITE included.
 */
#ifndef RMEMD_CTL_H
#define RMEMD_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct server;
struct session;
struct range_hold;

/* What the connection does with a reply.  None of these is an error. */
enum ctl_outcome {
	CTL_REPLY,           /* send it; serve the next request */
	CTL_REPLY_AND_CLOSE, /* send an ERROR frame with status, then close */
	CTL_WAIT,            /* nothing to send yet: serve this same request
				again at wait_until_ns (an ALLOC that only the
				quarantine stands in the way of) */
};

struct ctl_req {
	struct session *s;
	int fd;                 /* the connection's socket: HELLO checks its peer */
	const struct proto_hdr *h;
	const uint8_t *payload;
	size_t len;
	bool may_wait;          /* CTL_WAIT allowed (false once the wait is over) */
	/* READ: where the range's hold goes (session.h, struct range_hold),
	 * taken when the reply carries data; the caller releases it once
	 * those bytes are out.  NULL: none. */
	struct range_hold *hold;
};

struct ctl_reply {
	enum ctl_outcome outcome;
	/* 0 or a negative errno.  Negative: a status-only reply (or the ERROR
	 * frame's status).  0: payload[0..len) when len > 0, else data[0..data_len)
	 * (READ: pool memory, sent by reference), else a status-only reply. */
	int status;
	size_t len;
	const uint8_t *data;
	size_t data_len;
	uint64_t wait_until_ns; /* CTL_WAIT: when to try again (clock_mono_ns) */
	char why[160];          /* CTL_REPLY_AND_CLOSE: for the log */
	uint8_t payload[PROTO_MAX_CTL];
};

/*
 * Whether session s may send a request with this opcode now (at its header,
 * before its payload is read): CTL_REPLY when it may, else
 * CTL_REPLY_AND_CLOSE with rep->status and rep->why filled.
 */
enum ctl_outcome ctl_admit(const struct session *s, uint16_t opcode, struct ctl_reply *rep);

/* Serves one complete control request (not WRITE, whose data conn.c
 * streams).  Fills *rep and returns rep->outcome. */
enum ctl_outcome ctl_dispatch(struct server *srv, const struct ctl_req *req, struct ctl_reply *rep);

#endif /* RMEMD_CTL_H */
