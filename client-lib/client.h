/*
 * client.h - librmem internals: the session behind the opaque rmem_client,
 * and the request engine (engine.c) that every call goes through.
 *
 * Control requests always travel on the stream (TCP, Unix socket).  On an
 * RDMA client (c->rdma set, rdma.c) reads, writes and atomics go on its
 * queue pair instead; posted operations share struct eng_op and the
 * completion queue below either way.
 *
 * Locking: every public call that touches a client holds c->lock from start
 * to end (client_lock/client_unlock), including its waits on the socket.  So
 * all the state below, the engine's included, is only ever used by one
 * thread at a time, and the engine needs no locking of its own.
 */
#ifndef RMEM_CLIENT_H
#define RMEM_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto.h"
#include "rmem.h"

#define CLIENT_DEFAULT_TIMEOUT_MS 10000

/*
 * What may be in flight on one connection (sent and not yet answered).
 * Beyond either bound a sender first receives replies.  64 MiB keeps four
 * 16 MiB chunks in flight, enough for the daemon never to wait for the next
 * request; 64 requests keep small operations streaming.
 */
#define ENG_MAX_FRAMES 64u          /* power of two: the FIFO is a ring */
#define ENG_MAX_BYTES  (64u << 20)  /* WRITE data sent + READ data expected */

/* Replies are received into a small buffer so that many small ones cost one
 * system call; READ data above ENG_COPY_MAX never passes through it, it is
 * received straight into the caller's buffer. */
#define ENG_STAGE_CAP  (16u << 10)
#define ENG_COPY_MAX   4096u

/*
 * One operation: a posted READ/WRITE (async, its own allocation, freed when
 * its completion is queued), or a synchronous call (on its caller's stack).
 * An operation is made of one or more frames; it ends once it is sealed (no
 * more frames will be sent) and every frame sent has been answered.
 */
struct eng_op {
	uint64_t cookie;
	int status;       /* the first error of any frame, else 0 */
	uint32_t frames;  /* frames sent whose reply has not been handled */
	uint32_t sent;    /* frames ever sent (queued) for it */
	uint32_t rx_len;  /* control reply: payload bytes now in c->rx */
	bool async;
	bool sealed;
	bool done;        /* synchronous: ended */
};

/* One request in flight, in the order sent: the daemon answers in this order. */
struct eng_frame {
	struct eng_op *op;
	uint64_t req_id;
	uint8_t *dst;     /* READ: where the data goes */
	uint32_t len;     /* READ: data bytes expected; WRITE: data bytes sent */
	uint16_t opcode;
};

/* Where the receiver is within the reply at the head of the FIFO. */
enum eng_rx_state {
	RX_HDR,      /* the frame header */
	RX_STATUS,   /* WRITE or READ reply: the status */
	RX_DATA,     /* READ reply: the data, into the caller's buffer */
	RX_PAYLOAD,  /* control reply: the payload, into c->rx */
	RX_ERROR,    /* ERROR frame: its status; the stream ends after it */
};

/* Completions of async operations that rmem_poll() has not returned yet. */
struct eng_cq {
	struct rmem_completion *v;
	uint32_t head, count, cap;   /* cap: 0 or a power of two */
};

/* A fair lock: threads get the client in the order they asked for it, so a
 * thread calling in a loop cannot starve another (one spinning on
 * rmem_cas() while the other must release the remote lock, say). */
struct client_lock {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t next_ticket, serving;
	uint32_t waiting;
};

struct rdma_conn;

struct rmem_client {
	struct client_lock lock;
	int fd;
	int timeout_ms;          /* longest wait without progress; <= 0 forever */
	/* Set when the stream state is unknown (timeout, garbage, EOF): every
	 * later call fails with -ECONNRESET without touching the socket. */
	bool broken;
	const char *transport;   /* static string: "tcp", "unix" or "rdma" */
	struct rdma_conn *rdma;  /* the RDMA data path (rdma.c), or NULL */
	uint64_t next_req_id;
	uint64_t session_id;
	uint32_t max_io;         /* min(daemon's max_io, PROTO_MAX_IO), > 0 */

	/* engine.c */
	struct eng_frame fifo[ENG_MAX_FRAMES];
	uint32_t fifo_head, fifo_count;
	uint64_t bytes_in_flight;
	uint32_t async_ops;      /* posted, not yet completed */
	struct eng_cq cq;
	int64_t last_progress_ms;
	enum eng_rx_state rx_state;
	struct proto_hdr rx_hdr;
	uint8_t *rx_dst;         /* where the current part goes */
	size_t rx_left;          /* bytes of the current part still due */
	uint8_t rx_hdr_buf[PROTO_HDR_LEN];
	uint8_t rx_status[PROTO_STATUS_LEN];
	uint32_t stage_start, stage_end;
	uint8_t stage[ENG_STAGE_CAP];
	uint8_t rx[PROTO_MAX_CTL]; /* payload of the last control reply */
};

/* ---- client.c ---------------------------------------------------------------- */

void client_lock(struct rmem_client *c);
void client_unlock(struct rmem_client *c);

/* ---- engine.c ---------------------------------------------------------------- */

/* Readies the engine of a freshly zeroed client. */
void eng_init(struct rmem_client *c);
/* Forgets every operation in flight (their buffers are the callers' again)
 * and frees what the engine holds.  The socket is the caller's. */
void eng_release(struct rmem_client *c);

/* Marks the stream unusable: shuts it down and ends every operation in
 * flight (async ones with -ECONNRESET, synchronous ones with err).
 * Returns err. */
int eng_fail(struct rmem_client *c, int err);

/*
 * Sends one request frame for op: header, then fixed (fixed_len bytes), then
 * data (data_len bytes, WRITE only, straight from the caller's buffer).  For
 * READ, dst and read_len say where the reply's data goes; a control reply
 * goes to c->rx.  First waits, receiving replies, until the frame fits the
 * bounds; while the socket is full it receives replies too, so that it never
 * deadlocks with a daemon that waits for us to read.  0 or a negative errno
 * (the stream is then broken and op has failed).
 */
int eng_send(struct rmem_client *c, struct eng_op *op, uint16_t opcode, const void *fixed,
	     size_t fixed_len, const void *data, uint32_t data_len, void *dst, uint32_t read_len);

/* One frame (or RDMA work request) of op has ended with status: op keeps
 * the first error, and ends once sealed and every frame has ended. */
void eng_op_part_done(struct rmem_client *c, struct eng_op *op, int status);

/* Seals op: no more frames.  An async op whose frames are all answered
 * completes now. */
void eng_seal(struct rmem_client *c, struct eng_op *op);

/* Receives until the synchronous op has ended; returns its status. */
int eng_wait_op(struct rmem_client *c, struct eng_op *op);

/*
 * rmem_poll()'s engine: makes progress for up to timeout_ms (0: none, < 0:
 * no limit) until a completion is queued.  0 (look at c->cq), or a negative
 * errno when the stream broke.
 */
int eng_progress(struct rmem_client *c, int timeout_ms);

/* Makes room in c->cq for one more async operation than are in flight now.
 * 0 or -ENOMEM. */
int eng_cq_reserve(struct rmem_client *c);
/* Moves up to max completions to out; returns how many. */
int eng_cq_take(struct rmem_client *c, struct rmem_completion *out, int max);

/* One control request and its reply: on success the reply payload is in
 * c->rx and its length in *reply_len. */
int eng_call(struct rmem_client *c, uint16_t opcode, const void *payload, size_t len,
	     size_t *reply_len);

#endif /* RMEM_CLIENT_H */
