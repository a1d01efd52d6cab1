/*
 * engine.h - the request engine of librmem (engine.c): the one in-order
 * FIFO of requests on the stream, the send queue, the receiver, the
 * completion queue, and the lease's clock; and the data path over it
 * (datapath.c), which puts reads, writes and atomics on the NIC when the
 * client has one (verbs.h) and on the stream otherwise.
 *
 * Control requests always travel on the stream (TCP, Unix socket).  On an
 * RDMA client (e->nic set) reads, writes and atomics go on its queue pair
 * instead; posted operations share struct eng_op and the completion queue
 * either way.
 *
 * Locking: the engine has none.  Every public call that touches a client
 * holds the client's lock (lock.h) from start to end, including its waits
 * on the socket, and so does the keepalive thread; so the engine is only
 * ever used by one thread at a time.
 */
#ifndef RMEM_ENGINE_H
#define RMEM_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
#include <pthread.h>
#include <sys/uio.h>

#include "verbs_regcache.h"
#include "op.h"
#include "proto.h"
#include "rmem.h"

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
 * The send queue.  A posted frame is queued, not sent: one sendmsg() per
 * request cost about as much kernel CPU on each side as the work itself,
 * so posts go out in batches, like a verbs doorbell rung once for many work
 * requests.  The queue is sent when it holds ENG_BATCH_FRAMES frames or
 * ENG_BATCH_BYTES bytes, and before anything waits (rmem_poll, a
 * synchronous call, a post that must make room, the keepalive thread); see
 * eng_post().  Headers and fixed parts are copied into tx_buf (so are WRITE
 * data up to ENG_TX_COPY_MAX bytes), larger data are sent from the caller's
 * buffer, which is the caller's only after the completion.
 */
#define ENG_BATCH_FRAMES 16u
#define ENG_BATCH_BYTES  (64u << 10)
#define ENG_TX_CAP       (16u << 10)
#define ENG_TX_COPY_MAX  512u
#define ENG_TX_IOV       (2 * ENG_BATCH_FRAMES + 4)
/* Runs of a spaced READ received by one recvmsg() (a 256 KiB piece range
 * of a redundant region is 64 chunks of 4 KiB). */
#define ENG_RX_IOV       64

/* One request in flight, in the order sent: the daemon answers in this order. */
struct eng_frame {
	struct eng_op *op;
	uint64_t req_id;
	uint8_t *dst;     /* READ: where the data goes */
	uint32_t len;     /* READ: data bytes expected; WRITE: data bytes sent */
	uint16_t opcode;
	/* READ into spaced runs (struct eng_stride): the first run's bytes,
	 * then runs of seg bytes, each gap bytes after the last; seg 0: one
	 * run. */
	uint32_t first, seg, gap;
};

/* What the next READ frame queued (eng_post, eng_send) scatters into: set
 * by the data path just before, cleared just after (datapath.c). */
struct eng_stride {
	uint32_t first, seg, gap;
};

/* Where the receiver is within the reply at the head of the FIFO. */
enum eng_rx_state {
	RX_HDR,      /* the frame header */
	RX_STATUS,   /* WRITE or READ reply: the status */
	RX_DATA,     /* READ reply: the data, into the caller's buffer */
	RX_PAYLOAD,  /* control reply: the payload, into e->rx */
	RX_ERROR,    /* ERROR frame: its status; the stream ends after it */
};

/* Completions of async operations that rmem_poll() has not returned yet. */
struct eng_cq {
	struct rmem_completion *v;
	uint32_t head, count, cap;   /* cap: 0 or a power of two */
};

struct verbs_conn;

struct engine {
	/* The stream; -1 before it is open.  Read by the thread that holds
	 * the client; changed only by eng_reopen under fd_mu, which
	 * eng_shutdown, the one call from another thread, holds too. */
	int fd;
	/* TLS on the stream (common/tls.h), NULL for clear text: changed with
	 * fd, by eng_reopen; every byte goes through it then. */
	struct tls_conn *tls;
	bool ktls_tx;            /* the kernel seals what we send: sendmsg() as on TCP */
	pthread_mutex_t fd_mu;
	int timeout_ms;          /* longest wait without progress; <= 0 forever */
	/* Set when the stream state is unknown (timeout, garbage, EOF): every
	 * later call fails with -ECONNRESET without touching the socket. */
	bool broken;
	struct verbs_conn *nic;    /* the RDMA data path (datapath.c), or NULL */
	uint64_t next_req_id;
	uint32_t max_io;         /* min(daemon's max_io, PROTO_MAX_IO), > 0 */
	/* ranges from rmem_register_buf(), registered on RDMA (datapath.c) */
	struct regcache_kept kept;

	struct eng_frame fifo[ENG_MAX_FRAMES];
	uint32_t fifo_head, fifo_count;
	uint64_t bytes_in_flight;
	uint32_t async_ops;      /* posted, not yet completed */
	struct eng_cq cq;
	/* Ended posted operations kept for the next posts (eng_op_new): a
	 * malloc and a free per request were 2% of the client's CPU at 16
	 * allocs in flight.  Linked by next_parked; at most ENG_OP_CACHE. */
	struct eng_op *op_cache;
	uint32_t op_cached;
	int64_t last_progress_ms;
	uint8_t spin_credit;     /* eng_wait's busy-poll: see spin_first() */
	uint8_t spin_probe;
	int rcvlowat;            /* the socket's SO_RCVLOWAT as last set: see rx_lowat() */
	enum eng_rx_state rx_state;
	struct proto_hdr rx_hdr;
	uint8_t *rx_dst;         /* where the current part goes */
	size_t rx_left;          /* bytes of the current part still due */
	/* A spaced READ's data (eng_frame.seg): bytes left of the current
	 * run, the run and the gap after each; rx_seg 0: one run. */
	size_t rx_run_left;
	uint32_t rx_seg, rx_gap;
	struct eng_stride post_stride;
	uint8_t rx_hdr_buf[PROTO_HDR_LEN];
	uint8_t rx_status[PROTO_STATUS_LEN];
	uint32_t stage_start, stage_end;
	uint8_t stage[ENG_STAGE_CAP];
	uint8_t rx[PROTO_MAX_CTL]; /* payload of the last control reply */
	/* The send queue (see ENG_BATCH_FRAMES): its frames are in the FIFO
	 * already, the last tx_frames of it, and no byte of them has gone. */
	uint32_t tx_frames;
	/* rmem_poll() has handed completions to the caller, who is likely to
	 * post again in answer before polling: a post that finds nothing in
	 * flight then waits in the queue for the next flush too (eng_post),
	 * so that the answers to one batch go out as one.  Any flush clears
	 * it. */
	bool tx_hold;
	/* The last flush sent every frame in flight: no reply can be in yet,
	 * so a wait need not receive first (eng_progress).  Any receive
	 * clears it. */
	bool rx_none_yet;
	uint32_t tx_iovcnt;
	uint32_t tx_used;        /* bytes of tx_buf queued */
	size_t tx_bytes;         /* bytes queued in all */
	bool tx_tail_copied;     /* the last iovec ends at tx_buf + tx_used */
	struct iovec tx_iov[ENG_TX_IOV];
	uint8_t tx_buf[ENG_TX_CAP];

	/* The lease: the daemon ends a session that sends no frame on its
	 * stream for lease_ms, so the keepalive thread (keepalive.c) sends
	 * PING when calls do not, and waits that hold the client long ping by
	 * themselves (eng_lease_poke). */
	uint32_t lease_ms;           /* from HELLO; 0: no lease */
	int64_t last_send_ms;        /* when a frame last went out, monotonic */
	struct eng_op ping_op;       /* eng_lease_poke's PING, answered or not */

	/* Resuming after a daemon restart (reclaim.c).  With park_lost set, a
	 * posted operation that a lost connection ends (status -ECONNRESET,
	 * from eng_fail or the NIC) is parked, not completed: the resume
	 * sends it again (reads and writes) or ends it (eng_complete).
	 * fail_err says why the stream broke (the first eng_fail).  recover
	 * is the resume itself, for the keepalive thread (eng_recover); it is
	 * the client's, given at connect.  stop_recover (atomic; set under
	 * fd_mu) asks a resume in progress to give up: rmem_close() is
	 * waiting. */
	bool park_lost;
	int fail_err;
	/* rmem_fd() (pollfd.c): an eventfd the engine writes when it queues a
	 * completion (notified: it holds a count), so that a completion that
	 * another thread's call received (the keepalive thread, a synchronous
	 * call) still wakes an event loop waiting on rmem_fd; -1: none.
	 * reopened counts new streams (eng_reopen), whose fd may reuse the
	 * old one's number. */
	int notify_fd;
	bool notified;
	uint32_t reopened;
	struct eng_op *parked_head, *parked_tail;
	int (*recover)(void *ctx);
	void *recover_ctx;
	bool stop_recover;
};

/* ---- engine.c ---------------------------------------------------------------- */

/* Readies the engine of a freshly zeroed client: no stream yet. */
void eng_init(struct engine *e, int timeout_ms);
/* Forgets every operation in flight (their buffers are the callers' again)
 * and frees what the engine holds, the socket included.  The NIC must be
 * gone already (dp_detach). */
void eng_release(struct engine *e);

/* Tells rmem_fd()'s eventfd (e->notify_fd) that a completion is queued. */
void eng_notify(struct engine *e);

/* Marks the stream unusable: shuts it down and ends every operation in
 * flight (async ones with -ECONNRESET, synchronous ones with err; async
 * ones are parked instead when e->park_lost).  Returns err. */
int eng_fail(struct engine *e, int err);

/* ---- resuming (reclaim.c) --------------------------------------------------------- */

/* Takes a new stream fd in place of the broken one (closed here): the
 * engine is as after eng_init, with its completions, parked operations,
 * request ids and lease kept.  Nothing may be in flight on the stream.
 * Once eng_shutdown has run, the new stream is shut down at once. */
void eng_reopen(struct engine *e, int fd, struct tls_conn *tls);
/* Parks an async op ended by a lost connection (verbs_detach's drop too). */
void eng_park(struct engine *e, struct eng_op *op);
/* A zeroed operation for a post, from the engine's cache when it holds
 * one (NULL: no memory), and the way back for one that has ended. */
struct eng_op *eng_op_new(struct engine *e);
void eng_op_free(struct engine *e, struct eng_op *op);
/* Takes every parked op, in the order they were parked (their post
 * order); each is reset for sending again (no frame, not sealed, no
 * status).  NULL when there is none; the list is linked by next_parked. */
struct eng_op *eng_unpark_all(struct engine *e);
/* Ends an unparked async op with status: its completion is queued. */
void eng_complete(struct engine *e, struct eng_op *op, int status);
/* For the keepalive thread: resumes a broken stream through e->recover.
 * 0 (the stream works again) or a negative errno. */
int eng_recover(struct engine *e);

/*
 * Sends one request frame for op, behind whatever the send queue holds:
 * header, then fixed (fixed_len bytes), then data (data_len bytes, WRITE
 * only).  When it returns 0, the frame and the queue have gone out.  For
 * READ, dst and read_len say where the reply's data goes; a control reply
 * goes to e->rx.  First waits, receiving replies, until the frame fits the
 * bounds; while the socket is full it receives replies too, so that it never
 * deadlocks with a daemon that waits for us to read.  0 or a negative errno
 * (the stream is then broken and op has failed).
 */
int eng_send(struct engine *e, struct eng_op *op, uint16_t opcode, const void *fixed,
	     size_t fixed_len, const void *data, uint32_t data_len, void *dst, uint32_t read_len);

/*
 * eng_send()'s queueing form, for posted operations: the frame joins the
 * send queue, which goes out once it holds ENG_BATCH_FRAMES frames or
 * ENG_BATCH_BYTES bytes, or at the next eng_flush() (every wait flushes
 * first).  WRITE data above ENG_TX_COPY_MAX is sent from data itself, so it
 * must stay untouched until op ends; fixed is copied.  0 or a negative errno
 * (the stream is then broken and op has failed).
 */
int eng_post(struct engine *e, struct eng_op *op, uint16_t opcode, const void *fixed,
	     size_t fixed_len, const void *data, uint32_t data_len, void *dst, uint32_t read_len);

/* Sends the send queue, receiving replies while the socket is full.  0 (the
 * queue is empty then) or a negative errno (the stream is then broken). */
int eng_flush(struct engine *e);

/* One frame (or RDMA work request) of op has ended with status: op keeps
 * the first error, and ends once sealed and every frame has ended. */
void eng_op_part_done(struct engine *e, struct eng_op *op, int status);

/* Seals op: no more frames.  An async op whose frames are all answered
 * completes now. */
void eng_seal(struct engine *e, struct eng_op *op);

/* Receives until the synchronous op has ended; returns its status. */
int eng_wait_op(struct engine *e, struct eng_op *op);

/*
 * rmem_poll()'s engine: makes progress for up to timeout_ms (0: none, < 0:
 * no limit) until a completion is queued.  0 (look at e->cq), or a negative
 * errno when the stream broke.
 */
int eng_progress(struct engine *e, int timeout_ms);

/* What a caller that waits on many clients at once (the cluster router's
 * rmem_poll) should poll() for so that eng_progress() has something to do:
 * 1 with *pfd set, or 0 when this engine cannot be waited on that way now
 * (nothing due, broken, or a low-water mark that would wake it late): then
 * the caller waits in eng_progress() itself. */
int eng_wait_fd(const struct engine *e, struct pollfd *pfd);

/* Makes room in e->cq for one more async operation than are in flight now.
 * 0 or -ENOMEM. */
int eng_cq_reserve(struct engine *e);
/* Moves up to max completions to out; returns how many. */
int eng_cq_take(struct engine *e, struct rmem_completion *out, int max);

/* Handles the replies already in, then sends a PING for op unless op's last
 * one is still unanswered, without waiting for the reply: the next receive on
 * the stream takes it.  op lives in the engine (eng_lease_poke).  0 or a
 * negative errno (the stream is then broken). */
int eng_ping_nowait(struct engine *e, struct eng_op *op);

/* One control request and its reply: on success the reply payload is in
 * e->rx and its length in *reply_len. */
int eng_call(struct engine *e, uint16_t opcode, const void *payload, size_t len,
	     size_t *reply_len);


/* ---- for the keepalive thread and long waits (the lease) -------------------- */

/* True once the stream is unusable. */
bool eng_broken(const struct engine *e);
/* When a frame last went out (monotonic ms). */
int64_t eng_last_send_ms(const struct engine *e);
/* PING and its reply.  0, or a negative errno (the stream is then broken). */
int eng_ping(struct engine *e);
/* Shuts the stream down, from any thread: a call waiting on it ends, and
 * so does a resume in progress (the stream it opens next too). */
void eng_shutdown(struct engine *e);
/*
 * For a call that holds the client and waits long without using the stream
 * (RDMA completions): sends a PING itself when the lease needs one, since
 * the keepalive thread cannot have the client meanwhile.  Returns the
 * milliseconds until it should be called again (wait no longer than that),
 * or -1 for never.  A failure breaks the stream like any send.
 */
int eng_lease_poke(struct engine *e);

#endif /* RMEM_ENGINE_H */
