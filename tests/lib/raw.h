/*
 * raw.h - the tests' one raw wire client: sockets, frames and the codec of
 * common/proto.h, with nothing of librmem, so that a test can send what
 * librmem never would (bad magic, torn frames, other tenants' keys) and see
 * exactly what rmemd answers.
 *
 * Frames in (hiredis' redisReaderFeed / redisReaderGetReply is the model):
 *
 *   struct raw_reader rd;
 *   raw_reader_init(&rd, PROTO_MAX_CTL);
 *   raw_reader_feed(&rd, bytes, n);              any cut, any number of times
 *   while (raw_reader_take(&rd, &f) == 1) {      one whole frame each
 *           ... f.opcode, f.status, f.payload ...
 *           raw_reply_release(&f);
 *   }
 *   raw_reader_fini(&rd);
 *
 * The reader does no I/O and checks nothing but the length: a test sees the
 * magic, version and flags the daemon sent.  raw_recv_reply() reads one frame
 * from a socket, no byte beyond it.  Frames out: raw_hdr() (any header),
 * raw_send_frame() and raw_out_frame() (a request as a client builds it).
 *
 * Every int function returns 0 (or an fd) or a negative errno.
 */
#ifndef RMEM_TESTS_RAW_H
#define RMEM_TESTS_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* ---- sockets ----------------------------------------------------------------- */

/* A TCP connection to host (numeric IPv4 or IPv6) at port. */
int raw_connect(const char *host, uint16_t port);
int raw_connect_unix(const char *path);
/* A listener (backlog 16) on 127.0.0.1, port chosen by the kernel. */
int raw_listen_tcp(uint16_t *port);
int raw_listen_unix(const char *path);
/* A TCP port on host (numeric) where nothing listens right now; 0 on failure.
 * rdma_cm ports are another space, but a number free for TCP is as good a
 * guess as any for them. */
uint16_t free_port_on(const char *host);
/* The same on 127.0.0.1. */
uint16_t free_tcp_port(void);

/* Sends all of buf (MSG_NOSIGNAL). */
int raw_send(int fd, const void *buf, size_t len);
/* Receives exactly len bytes.  0, -ETIMEDOUT, -ECONNRESET (EOF or reset). */
int raw_recv(int fd, void *buf, size_t len, int timeout_ms);
/* Reads and drops whatever comes until EOF: 0 on EOF or reset, -ETIMEDOUT. */
int raw_wait_closed(int fd, int timeout_ms);

/* ---- frames out ------------------------------------------------------------------ */

/* Encodes a header with the given fields (magic always PROTO_MAGIC). */
void raw_hdr(uint8_t out[PROTO_HDR_LEN], uint16_t version, uint16_t opcode, uint16_t flags,
	     uint32_t length, uint64_t req_id);
/* One request frame: header, then fixed and data (either may be empty). */
int raw_send_frame(int fd, uint16_t opcode, uint64_t req_id, const void *fixed,
		   size_t fixed_len, const void *data, size_t data_len);

/* Frames gathered in memory (a whole conversation, e.g. a fuzz seed). */
struct raw_out {
	uint8_t *buf;       /* malloc'ed */
	size_t len, cap;
	int err;            /* -ENOMEM once growing failed; later appends do nothing */
};
void raw_out_init(struct raw_out *o);
void raw_out_fini(struct raw_out *o);
void raw_out_put(struct raw_out *o, const void *p, size_t n);
/* A request header (PROTO_VERSION, no flags) and its payload. */
void raw_out_frame(struct raw_out *o, uint16_t opcode, uint64_t req_id, const void *payload,
		   size_t len);

/* ---- frames in ------------------------------------------------------------------- */

struct raw_reply {
	uint8_t hdr[PROTO_HDR_LEN]; /* the header as it came */
	uint32_t magic;
	uint16_t version, opcode, flags, reserved;
	uint32_t length;
	uint64_t req_id;
	int32_t status;      /* first 4 payload bytes as on the wire (positive errno) */
	uint8_t *payload;    /* malloc'ed, length bytes; raw_reply_release() frees it */
};
void raw_reply_release(struct raw_reply *r);

struct raw_reader {
	struct raw_out in;   /* bytes fed and not yet taken */
	size_t max;          /* the longest payload accepted */
};
void raw_reader_init(struct raw_reader *rd, size_t max_payload);
void raw_reader_fini(struct raw_reader *rd);
/* Appends n bytes.  0 or -ENOMEM. */
int raw_reader_feed(struct raw_reader *rd, const void *p, size_t n);
/* 1 and the next whole frame in *f; 0 when more bytes are needed; -EMSGSIZE
 * (header fields in *f, no payload) when its payload is longer than max. */
int raw_reader_take(struct raw_reader *rd, struct raw_reply *f);
/* How many more bytes the next frame needs (at least 1). */
size_t raw_reader_want(const struct raw_reader *rd);

/* Receives one frame (a payload of at most max bytes), no byte beyond it.
 * 0, -ETIMEDOUT, -ECONNRESET, -EMSGSIZE (payload above max). */
int raw_recv_reply(int fd, struct raw_reply *r, size_t max, int timeout_ms);

/* ---- requests ---------------------------------------------------------------------- */

/* Sends one request frame with a payload and returns its reply in *r. */
int raw_call(int fd, uint16_t opcode, uint64_t req_id, const void *payload, uint32_t len,
	     struct raw_reply *r, size_t max, int timeout_ms);
/* HELLO (PROTO_VERSION, our pid); returns the reply's wire status (0 on
 * success, else a positive errno), -EPROTO for a reply that is not HELLO's,
 * or a negative errno. */
int raw_hello(int fd, uint64_t req_id);

#endif /* RMEM_TESTS_RAW_H */
