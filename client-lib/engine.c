/*
 * engine.c - the one in-order request engine of the stream transport.
 *
 * The daemon answers the requests of a connection strictly in the order it
 * received them.  So the engine keeps one FIFO of the frames sent and not yet
 * answered, and every reply must answer the frame at its head; anything else
 * means the stream is out of step, and the client is then broken for good.
 * Synchronous calls and posted operations share the FIFO: a call waiting for
 * its own reply first handles the replies to the frames sent before it,
 * completing posted operations into the queue that rmem_poll() empties.
 *
 * The engine never waits on one direction only.  The daemon stops reading
 * requests while its replies cannot go out, so a send that finds the socket
 * full receives replies while it waits for room; without that, a WRITE queued
 * behind a few large READs would deadlock both sides.
 *
 * Posted frames are queued and sent in batches (one sendmsg() for many,
 * see ENG_BATCH_FRAMES in engine.h); every path that waits sends the queue
 * first, so a frame is never left unsent while its caller waits for it.
 *
 * The receiver is resumable: a reply may arrive in pieces over several calls
 * (rmem_poll with timeout 0, say), so where it stands lives in the client.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "tcp.h"
#include "tls.h"

#define NO_DEADLINE INT64_MAX
#define FIFO_MASK (ENG_MAX_FRAMES - 1)
/*
 * Before sleeping in poll() for a reply, the engine asks for it without
 * sleeping for up to ENG_SPIN_US.  A reply that arrives while the thread
 * sleeps costs a wake-up, and on a VM (this machine's loopback, daemon and
 * client pinned to two CPUs) that wake-up was most of a round trip: 64 B
 * write p50 58 us sleeping, 24 us spinning, 8.5 us when the daemon spins
 * too.  Spinning only pays while the reply comes within the window, so it
 * is adaptive: a reply caught refills the credit, a spin in vain spends
 * one, and without credit only every ENG_SPIN_PROBE-th wait tries (the
 * daemon on this very CPU, or a caller that waits long: spinning there
 * would only take the CPU from whoever must answer).
 */
#define ENG_SPIN_US     50
#define ENG_SPIN_CREDIT 4
#define ENG_SPIN_PROBE  16
/* The most SO_RCVLOWAT asks for while READ data streams in (rx_lowat()):
 * below the kernel's own cap, half the receive buffer (tcp.c asks for
 * 4 MiB, which the kernel doubles). */
#define ENG_LOWAT_MAX   (3 << 20)
/* Bulk READ replies after the current one that the mark may wait for too,
 * and how long a wait under such a mark sleeps at most (rx_lowat()). */
#define ENG_LOWAT_AHEAD    2
#define ENG_LOWAT_AHEAD_MS 2
#define INITIAL_CQ 64u
/* Ended posted operations kept for reuse: as many as may be in flight. */
#define ENG_OP_CACHE ENG_MAX_FRAMES

_Static_assert((ENG_MAX_FRAMES & FIFO_MASK) == 0, "ENG_MAX_FRAMES must be a power of two");
_Static_assert(ENG_STAGE_CAP >= PROTO_HDR_LEN + PROTO_MAX_CTL, "a control reply fits the stage");
_Static_assert(ENG_TX_CAP >= PROTO_HDR_LEN + PROTO_MAX_CTL + ENG_TX_COPY_MAX,
	       "any one frame's copied part fits the empty send queue");

static struct eng_frame *fifo_at(struct engine *e, uint32_t i)
{
	return &e->fifo[(e->fifo_head + i) & FIFO_MASK];
}

/* The receiver's next part: len bytes into dst. */
static void expect(struct engine *e, enum eng_rx_state state, void *dst, size_t len)
{
	e->rx_state = state;
	e->rx_dst = dst;
	e->rx_left = len;
	e->rx_seg = 0;
}

/* n bytes of the current part have landed at rx_dst (within its run). */
static void rx_took(struct engine *e, size_t n)
{
	e->rx_left -= n;
	e->rx_dst += n;
	if (!e->rx_seg)
		return;
	e->rx_run_left -= n;
	/* (The gap is skipped only before a run that follows.) */
	if (e->rx_run_left == 0 && e->rx_left > 0) {
		e->rx_dst += e->rx_gap;
		e->rx_run_left = e->rx_seg;
	}
}

/* How much of the current part may land at rx_dst at once. */
static size_t rx_run(const struct engine *e)
{
	return e->rx_seg && e->rx_run_left < e->rx_left ? e->rx_run_left : e->rx_left;
}

static void expect_header(struct engine *e)
{
	expect(e, RX_HDR, e->rx_hdr_buf, PROTO_HDR_LEN);
}

/* Empties the send queue; its frames stay in the FIFO. */
static void tx_reset(struct engine *e)
{
	e->tx_frames = e->tx_iovcnt = e->tx_used = 0;
	e->tx_bytes = 0;
	e->tx_tail_copied = false;
}

void eng_init(struct engine *e, int timeout_ms)
{
	e->fd = -1;
	e->fd_mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	e->notify_fd = -1;
	e->timeout_ms = timeout_ms;
	e->next_req_id = 1;
	e->fifo_head = e->fifo_count = 0;
	e->bytes_in_flight = 0;
	e->stage_start = e->stage_end = 0;
	e->rcvlowat = 1;
	tx_reset(e);
	expect_header(e);
}

/* ---- completions --------------------------------------------------------------- */

int eng_cq_reserve(struct engine *e)
{
	struct eng_cq *q = &e->cq;
	uint32_t need = q->count + e->async_ops + 1;
	uint32_t cap = q->cap ? q->cap : INITIAL_CQ;
	struct rmem_completion *v;

	if (need <= q->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	v = malloc(cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < q->count; i++)
		v[i] = q->v[(q->head + i) & (q->cap - 1)];
	free(q->v);
	q->v = v;
	q->cap = cap;
	q->head = 0;
	return 0;
}

int eng_cq_take(struct engine *e, struct rmem_completion *out, int max)
{
	struct eng_cq *q = &e->cq;
	uint32_t n = q->count < (uint32_t)max ? q->count : (uint32_t)max;

	for (uint32_t i = 0; i < n; i++)
		out[i] = q->v[(q->head + i) & (q->cap - 1)];
	q->head = (q->head + n) & (q->cap ? q->cap - 1 : 0);
	q->count -= n;
	if (n)
		e->tx_hold = true;
	return (int)n;
}

struct eng_op *eng_op_new(struct engine *e)
{
	struct eng_op *op = e->op_cache;

	if (!op)
		return calloc(1, sizeof(*op));
	e->op_cache = op->next_parked;
	e->op_cached--;
	*op = (struct eng_op){ 0 };
	return op;
}

void eng_op_free(struct engine *e, struct eng_op *op)
{
	if (e->op_cached == ENG_OP_CACHE) {
		free(op);
		return;
	}
	op->next_parked = e->op_cache;
	e->op_cache = op;
	e->op_cached++;
}

/* Queues op's completion with status and frees op.  Room in the queue was
 * reserved when it was posted. */
static void op_complete(struct engine *e, struct eng_op *op, int status)
{
	struct eng_cq *q = &e->cq;

	q->v[(q->head + q->count) & (q->cap - 1)] = (struct rmem_completion){
		.cookie = op->cookie,
		.status = status,
	};
	q->count++;
	e->async_ops--;
	eng_op_free(e, op);
	eng_notify(e);
}

void eng_notify(struct engine *e)
{
	uint64_t one = 1;

	if (e->notify_fd < 0 || e->notified)
		return;
	/* An eventfd's write fails only when its count would overflow. */
	if (write(e->notify_fd, &one, sizeof one) == (ssize_t)sizeof one)
		e->notified = true;
}

/* An operation has ended.  A posted one that the loss of the connection
 * ended waits for the resume instead (-ECONNRESET is only ever the
 * library's own status for that: the daemon never answers a READ, WRITE,
 * ALLOC or FREE with it). */
static void op_finish(struct engine *e, struct eng_op *op)
{
	if (!op->async) {
		op->done = true;
		return;
	}
	if (e->park_lost && op->status == -ECONNRESET) {
		eng_park(e, op);
		return;
	}
	op_complete(e, op, op->status);
}

void eng_park(struct engine *e, struct eng_op *op)
{
	op->next_parked = NULL;
	if (e->parked_tail)
		e->parked_tail->next_parked = op;
	else
		e->parked_head = op;
	e->parked_tail = op;
}

struct eng_op *eng_unpark_all(struct engine *e)
{
	struct eng_op *all = e->parked_head;

	e->parked_head = e->parked_tail = NULL;
	for (struct eng_op *op = all; op; op = op->next_parked) {
		op->status = 0;
		op->frames = op->sent = 0;
		op->sealed = false;
		op->on_stream = false;
	}
	return all;
}

void eng_complete(struct engine *e, struct eng_op *op, int status)
{
	op_complete(e, op, status);
}

int eng_recover(struct engine *e)
{
	if (!e->broken)
		return 0;
	return e->recover ? e->recover(e->recover_ctx) : -ECONNRESET;
}

void eng_op_part_done(struct engine *e, struct eng_op *op, int status)
{
	if (status && !op->status)
		op->status = status;
	if (--op->frames == 0 && op->sealed)
		op_finish(e, op);
}

void eng_seal(struct engine *e, struct eng_op *op)
{
	op->sealed = true;
	if (op->frames == 0)
		op_finish(e, op);
}

/* The reply to the head frame is complete. */
static void frame_done(struct engine *e, int status)
{
	struct eng_frame *f = fifo_at(e, 0);
	struct eng_op *op = f->op;

	e->bytes_in_flight -= f->len;
	e->fifo_head = (e->fifo_head + 1) & FIFO_MASK;
	e->fifo_count--;
	expect_header(e);
	eng_op_part_done(e, op, status);
}

int eng_fail(struct engine *e, int err)
{
	/* Shutting the socket down at once lets the daemon end the session and
	 * free its regions without waiting for rmem_close(). */
	if (!e->broken && e->fd >= 0)
		shutdown(e->fd, SHUT_RDWR);
	if (!e->broken)
		e->fail_err = err;
	e->broken = true;
	while (e->fifo_count) {
		struct eng_op *op = fifo_at(e, 0)->op;

		/* The caller of a synchronous call learns why; posted operations
		 * all read the same way. */
		if (!op->async)
			op->status = err;
		frame_done(e, -ECONNRESET);
	}
	e->stage_start = e->stage_end = 0;
	tx_reset(e);
	return err;
}

void eng_release(struct engine *e)
{
	/* Outside of a call only posted operations can be in flight. */
	while (e->fifo_count) {
		struct eng_frame *f = fifo_at(e, 0);
		struct eng_op *op = f->op;

		e->fifo_head = (e->fifo_head + 1) & FIFO_MASK;
		e->fifo_count--;
		if (--op->frames == 0 && op->async)
			free(op);
	}
	tx_reset(e);
	for (struct eng_op *op = eng_unpark_all(e), *next; op; op = next) {
		next = op->next_parked;
		free(op);
	}
	free(e->cq.v);
	e->cq = (struct eng_cq){ 0 };
	while (e->op_cache) {
		struct eng_op *op = e->op_cache;

		e->op_cache = op->next_parked;
		free(op);
	}
	e->op_cached = 0;
	/* (The keepalive thread, eng_shutdown's one caller, is gone.) */
	tls_conn_free(e->tls);
	e->tls = NULL;
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
	pthread_mutex_destroy(&e->fd_mu);
}

void eng_reopen(struct engine *e, int fd, struct tls_conn *tls)
{
	struct tls_conn *old_tls = e->tls;
	int old;

	/* rmem_close may shut the stream down meanwhile (eng_shutdown, from
	 * its thread, while the keepalive thread resumes here): it must see
	 * the old fd or the new, never a number already closed (and maybe
	 * reused by the application), and once it has asked, the new stream
	 * must not wait a whole handshake for an answer. */
	pthread_mutex_lock(&e->fd_mu);
	old = e->fd;
	e->fd = fd;
	e->tls = tls;
	e->ktls_tx = tls && tls_kernel_tx(tls);
	if (fd >= 0 && __atomic_load_n(&e->stop_recover, __ATOMIC_RELAXED))
		shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&e->fd_mu);
	/* The old session's close_notify cannot reach a broken stream: no
	 * wait for it (tls_conn_free never waits). */
	tls_conn_free(old_tls);
	if (old >= 0)
		close(old);
	e->reopened++;
	e->broken = false;
	e->fail_err = 0;
	e->fifo_head = e->fifo_count = 0;
	e->bytes_in_flight = 0;
	e->stage_start = e->stage_end = 0;
	e->rcvlowat = 1; /* a new socket's */
	tx_reset(e);
	expect_header(e);
	e->last_progress_ms = e->last_send_ms = clock_mono_ms();
	/* A PING of the old stream will never be answered. */
	e->ping_op = (struct eng_op){ 0 };
}

/* ---- receiving ------------------------------------------------------------------ */

static int on_reply_header(struct engine *e)
{
	const struct eng_frame *f = fifo_at(e, 0);
	struct proto_hdr *h = &e->rx_hdr;

	/* -EPROTO (another version) and every other decode error alike: the
	 * peer does not speak our protocol. */
	if (proto_hdr_decode(e->rx_hdr_buf, h) != 0 || h->flags != PROTO_F_RESPONSE)
		return eng_fail(e, -EPROTO);
	/* The daemon answers a request it cannot decode with an ERROR frame,
	 * then closes; a header it could not decode gets req_id 0. */
	if (h->opcode == PROTO_OP_ERROR && (h->req_id == f->req_id || h->req_id == 0)) {
		if (h->length != PROTO_STATUS_LEN)
			return eng_fail(e, -EPROTO);
		expect(e, RX_ERROR, e->rx_status, PROTO_STATUS_LEN);
		return 0;
	}
	if (h->opcode != f->opcode || h->req_id != f->req_id)
		return eng_fail(e, -EPROTO);
	switch (f->opcode) {
	case PROTO_OP_WRITE:
		if (h->length != PROTO_STATUS_LEN)
			return eng_fail(e, -EPROTO);
		expect(e, RX_STATUS, e->rx_status, PROTO_STATUS_LEN);
		return 0;
	case PROTO_OP_READ:
		if (h->length < PROTO_STATUS_LEN)
			return eng_fail(e, -EPROTO);
		expect(e, RX_STATUS, e->rx_status, PROTO_STATUS_LEN);
		return 0;
	default:
		if (h->length > PROTO_MAX_CTL)
			return eng_fail(e, -EPROTO);
		f->op->rx_len = h->length;
		expect(e, RX_PAYLOAD, e->rx, h->length);
		return 0;
	}
}

static int on_status(struct engine *e)
{
	const struct eng_frame *f = fifo_at(e, 0);
	size_t data_len = 0;
	int status = 0;

	if (f->opcode == PROTO_OP_WRITE) {
		if (proto_status_decode(e->rx_status, e->rx_hdr.length, &status) < 0)
			return eng_fail(e, -EPROTO);
		frame_done(e, status);
		return 0;
	}
	if (proto_read_rep_decode(e->rx_status, e->rx_hdr.length, &status, &data_len) < 0)
		return eng_fail(e, -EPROTO);
	if (status) {
		frame_done(e, status);
		return 0;
	}
	if (data_len != f->len)
		return eng_fail(e, -EPROTO);
	expect(e, RX_DATA, f->dst, data_len);
	if (f->seg) {
		e->rx_seg = f->seg;
		e->rx_gap = f->gap;
		e->rx_run_left = f->first;
	}
	return 0;
}

static int on_error_frame(struct engine *e)
{
	int status = 0;

	if (proto_status_decode(e->rx_status, PROTO_STATUS_LEN, &status) < 0 || status == 0)
		return eng_fail(e, -EPROTO);
	return eng_fail(e, status);
}

/* A control reply is in e->rx.  A synchronous caller reads it there once
 * its op is done; a posted one is decoded now, as the next reply may
 * overwrite it before rmem_poll() returns. */
static int on_payload(struct engine *e)
{
	struct eng_op *op = fifo_at(e, 0)->op;
	int status = 0;

	if (op->decode && op->decode(e, op, op->rx_len, &status) < 0)
		return eng_fail(e, -EPROTO);
	frame_done(e, status);
	return 0;
}

/* The current part of the head's reply has fully arrived. */
static int on_part(struct engine *e)
{
	switch (e->rx_state) {
	case RX_HDR:
		return on_reply_header(e);
	case RX_STATUS:
		return on_status(e);
	case RX_DATA:
		frame_done(e, 0);
		return 0;
	case RX_PAYLOAD:
		return on_payload(e);
	case RX_ERROR:
		return on_error_frame(e);
	}
	return eng_fail(e, -EPROTO);
}

/* Handles what the stage holds.  Returns with the stage empty, or with the
 * FIFO empty, or broken. */
static int consume_stage(struct engine *e)
{
	while (e->fifo_count > 0) {
		size_t avail = e->stage_end - e->stage_start, run = rx_run(e);
		size_t n = avail < run ? avail : run;
		int err;

		if (n > 0) {
			memcpy(e->rx_dst, e->stage + e->stage_start, n);
			rx_took(e, n);
			e->stage_start += (uint32_t)n;
		}
		if (e->rx_left > 0) {
			if (n > 0 && e->stage_start != e->stage_end)
				continue; /* the next run of a spaced READ */
			return 0;
		}
		err = on_part(e);
		if (err)
			return err;
	}
	return 0;
}

/* Bytes of f's reply after its header that may pass through the stage; sets
 * *stop when no byte after them may (bulk READ data, or the end of what is
 * known). */
static size_t reply_tail(const struct eng_frame *f, bool *stop)
{
	switch (f->opcode) {
	case PROTO_OP_WRITE:
		return PROTO_STATUS_LEN;
	case PROTO_OP_READ:
		if (f->len > ENG_COPY_MAX) {
			*stop = true;
			return PROTO_STATUS_LEN;
		}
		return PROTO_STATUS_LEN + f->len;
	case PROTO_OP_ALLOC:
		/* Posted allocs and frees queue up like transfers; a refusal
		 * is shorter, which is harmless as for a failed READ. */
		return PROTO_ALLOC_REP_LEN;
	case PROTO_OP_FREE:
		return PROTO_STATUS_LEN;
	default:
		/* Length unknown until its header; and nothing is ever sent after
		 * a synchronous control request before its reply is in. */
		*stop = true;
		return PROTO_MAX_CTL;
	}
}

/* How much one recv() into the empty stage may take: the rest of the current
 * part and the replies after it, up to the first bulk READ data, so that
 * bulk data is never copied.  (A READ that fails is shorter than assumed;
 * then a little of what follows may be copied, which is harmless.) */
static size_t stage_want(struct engine *e)
{
	const struct eng_frame *f = fifo_at(e, 0);
	size_t want = e->rx_left;
	bool stop = false;

	switch (e->rx_state) {
	case RX_HDR:
		want += reply_tail(f, &stop);
		break;
	case RX_STATUS:
		want += reply_tail(f, &stop) - PROTO_STATUS_LEN;
		break;
	default:
		stop = true;
		break;
	}
	for (uint32_t i = 1; !stop && i < e->fifo_count && want < ENG_STAGE_CAP; i++)
		want += PROTO_HDR_LEN + reply_tail(fifo_at(e, i), &stop);
	return want < ENG_STAGE_CAP ? want : ENG_STAGE_CAP;
}

/* ---- the stream: the socket, or TLS over it ------------------------------------- */

static ssize_t stream_recv(struct engine *e, void *buf, size_t len)
{
	return e->tls ? tls_read(e->tls, buf, len) : tcp_recv_some(e->fd, buf, len);
}

static ssize_t stream_recvv(struct engine *e, struct iovec *iov, int cnt)
{
	return e->tls ? tls_readv(e->tls, iov, cnt) : tcp_recvv_some(e->fd, iov, cnt);
}

/* Under kernel TLS sendmsg() writes records (MSG_NOSIGNAL, one system
 * call per batch, the caller's buffers to the kernel with no copy). */
static ssize_t stream_send(struct engine *e, const struct iovec *iov, int cnt)
{
	return e->tls && !e->ktls_tx ? tls_writev(e->tls, iov, cnt)
				     : tcp_send_some(e->fd, iov, cnt);
}

/* Plaintext TLS holds already: poll() on the socket would not see it. */
static bool stream_pending(const struct engine *e)
{
	return e->tls && tls_pending(e->tls);
}

static int stream_wait(struct engine *e, short events, int timeout_ms)
{
	if ((events & POLLIN) && stream_pending(e))
		return POLLIN;
	return tcp_wait(e->fd, events, timeout_ms);
}

/* One recv(): READ data straight into the caller's buffer, anything else into
 * the (empty) stage.  Returns tcp_recv_some()'s result; *drained tells
 * whether a receive into the stage took less than it asked for: the socket
 * held no more then. */
static ssize_t recv_more(struct engine *e, bool *drained)
{
	size_t want;
	ssize_t n;

	e->stage_start = e->stage_end = 0;
	*drained = false;
	if (e->rx_state == RX_DATA && e->rx_seg) {
		/* A spaced READ: its runs at once, straight where they go. */
		struct iovec iov[ENG_RX_IOV];
		uint8_t *d = e->rx_dst;
		size_t left = e->rx_left, run = rx_run(e);
		int cnt = 0;

		for (; left > 0 && cnt < ENG_RX_IOV; cnt++) {
			iov[cnt] = (struct iovec){ .iov_base = d, .iov_len = run };
			left -= run;
			if (left > 0)
				d += run + e->rx_gap;
			run = left < e->rx_seg ? left : e->rx_seg;
		}
		n = stream_recvv(e, iov, cnt);
		for (size_t k = n > 0 ? (size_t)n : 0; k > 0;) {
			size_t t = rx_run(e) < k ? rx_run(e) : k;

			rx_took(e, t);
			k -= t;
		}
		return n;
	}
	if (e->rx_state == RX_DATA) {
		/* Bulk data streams in while we copy: read on until -EAGAIN. */
		n = stream_recv(e, e->rx_dst, e->rx_left);
		if (n > 0) {
			e->rx_dst += n;
			e->rx_left -= (size_t)n;
		}
		return n;
	}
	want = stage_want(e);
	n = stream_recv(e, e->stage, want);
	if (n > 0)
		e->stage_end = (uint32_t)n;
	*drained = n > 0 && (size_t)n < want;
	return n;
}

/* Handles every reply that can be had without waiting.  0, or a negative
 * errno when the stream broke.  After a short recv() it does not ask again:
 * that would nearly always be one more system call to hear -EAGAIN, and
 * whoever waits next polls anyway. */
static int eng_recv(struct engine *e)
{
	bool drained = false;

	if (e->broken)
		return -ECONNRESET;
	e->rx_none_yet = false;
	for (;;) {
		int err = consume_stage(e);
		ssize_t n;

		if (err)
			return err;
		if (e->fifo_count == 0) {
			/* Bytes nobody asked for: the peer is out of step. */
			if (e->stage_start != e->stage_end)
				return eng_fail(e, -EPROTO);
			return 0;
		}
		if (drained)
			return 0;
		n = recv_more(e, &drained);
		if (n == -EAGAIN)
			return 0;
		if (n < 0)
			return eng_fail(e, (int)n);
		e->last_progress_ms = clock_mono_ms();
	}
}

/* ---- waiting ---------------------------------------------------------------------- */

/* The spin before poll() (see ENG_SPIN_US): > 0 revents when the socket
 * became readable meanwhile, 0 when it did not (or spinning does not pay
 * now), or a negative errno. */
static int spin_first(struct engine *e)
{
	int rc;

	if (e->spin_credit == 0 && ++e->spin_probe % ENG_SPIN_PROBE != 0)
		return 0;
	rc = stream_pending(e) ? POLLIN : tcp_spin_readable(e->fd, ENG_SPIN_US);
	if (rc > 0)
		e->spin_credit = ENG_SPIN_CREDIT;
	else if (e->spin_credit > 0)
		e->spin_credit--;
	return rc;
}

/*
 * While a READ's data streams in, the socket is readable to poll() only once
 * that READ's data still due has arrived, and with it the next
 * ENG_LOWAT_AHEAD bulk READ replies when those requests are out (at most
 * ENG_LOWAT_MAX in all); at once again for anything else.  Woken at every
 * segment, the client took about 3.3 wake-ups per MiB, and on loopback each
 * one is paid on the sending daemon's CPU: 1 MiB READs at 16 in flight lost
 * a fifth of their bandwidth to it.  One wake-up per READ still cost the
 * daemon 4% of its CPU (perf: sock_def_readable); one per three READs gave
 * 1 MiB reads pinned +8.7% (16 alternated pairs, medians 5,664 against
 * 5,211 MB/s; daemon CPU per MiB 187 against 200 us), unpinned +0.7%
 * (docs/benchmarks.md).  Completions then come in threes: bulk transfers
 * trade a little latency for bandwidth, as interrupt coalescing does.
 * It cannot deadlock: the current reply's header has promised its bytes,
 * the daemon answers every request that went out without waiting for
 * anything from us, EOF and errors wake poll() whatever the mark, and the
 * kernel wakes us anyway when the buffer or the window is full.  A reply
 * after the current one may be shorter than counted (a READ the daemon
 * refuses), so a wait under a mark that counts them sleeps at most
 * ENG_LOWAT_AHEAD_MS (true: eng_wait bounds it).  Set only when the value
 * changes: a system call.
 */
static bool rx_lowat(struct engine *e, short events)
{
	size_t want = 1;

	/* A mark counts bytes on the wire; TLS's records are longer than the
	 * plaintext they hold, and what TLS has buffered the mark cannot see. */
	if ((events & POLLIN) && e->rx_state == RX_DATA && e->rx_left > 1 && !e->tls) {
		/* The queued tail of the FIFO has not gone out yet. */
		uint32_t sent = e->fifo_count - e->tx_frames;

		want = e->rx_left;
		for (uint32_t i = 1; i <= ENG_LOWAT_AHEAD && i < sent && want < ENG_LOWAT_MAX; i++) {
			const struct eng_frame *f = fifo_at(e, i);

			if (f->opcode != PROTO_OP_READ || f->len <= ENG_COPY_MAX)
				break;
			want += PROTO_HDR_LEN + PROTO_STATUS_LEN + f->len;
		}
		if (want > ENG_LOWAT_MAX)
			want = ENG_LOWAT_MAX;
	}
	if ((int)want != e->rcvlowat && tcp_set_rcvlowat(e->fd, (int)want) == 0)
		e->rcvlowat = (int)want;
	return e->rcvlowat > 1 && (size_t)e->rcvlowat > e->rx_left;
}

/*
 * Waits until the socket can make progress: readable while replies are due,
 * writable when want_out.  Returns 0 then, 1 once deadline has passed, or a
 * negative errno: when something is due and nothing has moved for
 * e->timeout_ms, the daemon is stuck and the stream is broken (-ETIMEDOUT).
 * Callers only wait when something is due.
 */
static int eng_wait(struct engine *e, bool want_out, int64_t deadline)
{
	short events = (short)((e->fifo_count ? POLLIN : 0) | (want_out ? POLLOUT : 0));
	int64_t stall = e->timeout_ms > 0 ? e->last_progress_ms + e->timeout_ms : NO_DEADLINE;
	int64_t until = deadline < stall ? deadline : stall;
	int64_t now = clock_mono_ms();
	int left = -1;
	int rc;

	if (until != NO_DEADLINE) {
		if (now >= stall) {
			/* Nothing moved as far as this client looked; but the
			 * thread may have been away, waiting on another client
			 * (a redundant region's step ends its pieces' calls one
			 * after another), while the reply came: the socket is
			 * asked before the stream is called stuck.  Without
			 * this a stalled piece failed every piece of its step. */
			rc = stream_wait(e, events, 0);
			if (rc > 0)
				return 0;
			return eng_fail(e, rc < 0 ? rc : -ETIMEDOUT);
		}
		if (now >= deadline)
			return 1; /* the caller's turn to decide; no need to ask poll() */
		left = until - now > INT32_MAX ? INT32_MAX : (int)(until - now);
	}
	/* For a lone request, or a batch of small ones: since posts are sent
	 * in batches, rmemd answers a batch with one writev(), so the spin
	 * catches the whole batch instead of cutting it short (16 allocs in
	 * flight, pinned: 290-355 k requests/s sleeping, 435-757 k spinning).
	 * Bulk transfers take longer than the window: no spin for them. */
	if (rx_lowat(e, events) && (left < 0 || left > ENG_LOWAT_AHEAD_MS))
		left = ENG_LOWAT_AHEAD_MS;
	rc = events == POLLIN && (e->fifo_count == 1 || e->bytes_in_flight <= ENG_BATCH_BYTES)
		     ? spin_first(e) : 0;
	if (rc == 0)
		rc = stream_wait(e, events, left);
	if (rc < 0)
		return eng_fail(e, rc);
	if (rc > 0)
		return 0;
	/* Under a low-water mark bytes may have come without waking us: let
	 * the caller receive them; with nothing there the next wait fails. */
	if (e->rcvlowat > 1)
		return 0;
	if (clock_mono_ms() >= stall)
		return eng_fail(e, -ETIMEDOUT);
	return clock_mono_ms() >= deadline ? 1 : 0;
}

/* ---- sending ------------------------------------------------------------------------ */

static bool frame_fits(const struct engine *e, uint32_t bytes)
{
	if (e->fifo_count == ENG_MAX_FRAMES)
		return false;
	/* One frame always goes, whatever its size. */
	return e->fifo_count == 0 || e->bytes_in_flight + bytes <= ENG_MAX_BYTES;
}

static int reserve_out(struct engine *e, uint32_t bytes)
{
	while (!frame_fits(e, bytes)) {
		/* Only frames that went out can be answered. */
		int err = eng_flush(e);

		if (!err)
			err = eng_recv(e);
		if (err)
			return err;
		if (frame_fits(e, bytes))
			break;
		err = eng_wait(e, false, NO_DEADLINE);
		if (err < 0)
			return err;
	}
	return 0;
}

/* Drops the first n bytes from the front of an iovec array. */
static void iov_advance(struct iovec **iov, int *iovcnt, size_t n)
{
	while (*iovcnt > 0 && n >= (*iov)->iov_len) {
		n -= (*iov)->iov_len;
		(*iov)++;
		(*iovcnt)--;
	}
	if (*iovcnt > 0 && n > 0) {
		(*iov)->iov_base = (uint8_t *)(*iov)->iov_base + n;
		(*iov)->iov_len -= n;
	}
}

/* now: the clock as read just before; read again only after a wait (the
 * clock reads in ms, and a send() does not take one: two reads per batch
 * were 1% of the client's CPU at 16 allocs in flight). */
static int send_iov(struct engine *e, struct iovec *iov, int iovcnt, int64_t now)
{
	while (iovcnt > 0) {
		ssize_t n = stream_send(e, iov, iovcnt);
		int err;

		if (n > 0) {
			e->last_progress_ms = now;
			iov_advance(&iov, &iovcnt, (size_t)n);
			continue;
		}
		if (n < 0 && n != -EAGAIN)
			return eng_fail(e, (int)n);
		err = eng_recv(e);
		if (err)
			return err;
		err = eng_wait(e, true, NO_DEADLINE);
		if (err < 0)
			return err;
		now = clock_mono_ms();
	}
	return 0;
}

int eng_flush(struct engine *e)
{
	int err;

	if (e->broken)
		return -ECONNRESET;
	e->tx_hold = false;
	if (e->tx_frames == 0)
		return 0;
	/* (A send that must wait for room receives meanwhile, which clears
	 * it again.) */
	e->rx_none_yet = e->tx_frames == e->fifo_count;
	e->last_send_ms = clock_mono_ms(); /* the lease's clock (keepalive.c) */
	err = send_iov(e, e->tx_iov, (int)e->tx_iovcnt, e->last_send_ms);
	/* (A failure has emptied the queue already, with the FIFO.) */
	tx_reset(e);
	return err;
}

/* Appends len bytes at p to the send queue: copied into tx_buf, or sent
 * from p itself. */
static void tx_add(struct engine *e, const void *p, size_t len, bool copy)
{
	uint8_t *dst = e->tx_buf + e->tx_used;

	if (len == 0)
		return;
	e->tx_bytes += len;
	if (!copy) {
		e->tx_iov[e->tx_iovcnt++] = (struct iovec){ .iov_base = (void *)p, .iov_len = len };
		e->tx_tail_copied = false;
		return;
	}
	memcpy(dst, p, len);
	e->tx_used += (uint32_t)len;
	if (e->tx_tail_copied) {
		e->tx_iov[e->tx_iovcnt - 1].iov_len += len;
		return;
	}
	e->tx_iov[e->tx_iovcnt++] = (struct iovec){ .iov_base = dst, .iov_len = len };
	e->tx_tail_copied = true;
}

/* Queues one frame (see eng_send), once the bounds on what is in flight and
 * on the send queue let it in. */
static int eng_queue(struct engine *e, struct eng_op *op, uint16_t opcode,
		     const void *fixed, size_t fixed_len, const void *data, uint32_t data_len,
		     void *dst, uint32_t read_len)
{
	bool copy_data = data_len <= ENG_TX_COPY_MAX;
	size_t copied = PROTO_HDR_LEN + fixed_len + (copy_data ? data_len : 0);
	uint8_t hdr[PROTO_HDR_LEN];
	struct eng_frame *f;
	int err;

	if (e->broken)
		return -ECONNRESET;
	err = reserve_out(e, data_len + read_len);
	if (!err && (e->tx_used + copied > ENG_TX_CAP || e->tx_iovcnt + 3 > ENG_TX_IOV))
		err = eng_flush(e);
	if (err)
		return err;
	proto_hdr_encode(hdr, &(struct proto_hdr){
		.opcode = opcode,
		.length = (uint32_t)(fixed_len + data_len),
		.req_id = e->next_req_id,
	});
	/* Queued before the first byte goes, so every reply finds its frame. */
	if (e->fifo_count == 0)
		e->last_progress_ms = clock_mono_ms();
	f = fifo_at(e, e->fifo_count++);
	*f = (struct eng_frame){
		.op = op,
		.req_id = e->next_req_id++,
		.dst = dst,
		.len = data_len + read_len,
		.opcode = opcode,
	};
	if (opcode == PROTO_OP_READ && e->post_stride.seg) {
		f->first = e->post_stride.first;
		f->seg = e->post_stride.seg;
		f->gap = e->post_stride.gap;
	}
	e->bytes_in_flight += f->len;
	op->frames++;
	op->sent++;
	e->tx_frames++;
	tx_add(e, hdr, sizeof(hdr), true);
	tx_add(e, fixed, fixed_len, true);
	tx_add(e, data, data_len, copy_data);
	return 0;
}

int eng_send(struct engine *e, struct eng_op *op, uint16_t opcode, const void *fixed,
	     size_t fixed_len, const void *data, uint32_t data_len, void *dst, uint32_t read_len)
{
	int err = eng_queue(e, op, opcode, fixed, fixed_len, data, data_len, dst, read_len);

	return err ? err : eng_flush(e);
}

int eng_post(struct engine *e, struct eng_op *op, uint16_t opcode, const void *fixed,
	     size_t fixed_len, const void *data, uint32_t data_len, void *dst, uint32_t read_len)
{
	int err = eng_queue(e, op, opcode, fixed, fixed_len, data, data_len, dst, read_len);

	if (err)
		return err;
	if (e->tx_frames >= ENG_BATCH_FRAMES || e->tx_bytes >= ENG_BATCH_BYTES)
		return eng_flush(e);
	/* Nothing else out: no reply is coming that the caller would poll
	 * for, so nothing to batch with yet.  Sending at once keeps a lone
	 * post's latency, and the daemon works on it while the next ones are
	 * queued.  Not so while the caller answers completions rmem_poll()
	 * just gave it (e->tx_hold): it polls again next, which sends them
	 * all as one.  With 16 allocs in flight each batch then costs one
	 * sendmsg(), one read() and one writev() in rmemd, not two of each
	 * (the lone post split every batch 1 + 15, and the daemon's replies
	 * with it): see docs/benchmarks.md for the figures. */
	if (e->fifo_count == e->tx_frames && !e->tx_hold)
		return eng_flush(e);
	return 0;
}

/* ---- waiting for results ------------------------------------------------------------- */

int eng_wait_op(struct engine *e, struct eng_op *op)
{
	int err = eng_flush(e); /* posts queued ahead of op, if any */

	if (err && !op->done)
		return err;
	/* Waits first: the reply to a request just sent is rarely there yet
	 * (and when anything is, poll() says so at once).  A broken stream
	 * has ended every frame, so op is done then too. */
	while (!op->done) {
		err = eng_wait(e, false, NO_DEADLINE);
		if (err >= 0)
			err = eng_recv(e);
		if (err < 0 && !op->done)
			return err;
	}
	return op->status;
}

int eng_progress(struct engine *e, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? NO_DEADLINE : clock_mono_ms() + timeout_ms;

	for (;;) {
		int err = eng_flush(e);

		/* Just sent all that is in flight: a receive now would only
		 * hear EAGAIN (one wasted system call per batch), and the wait
		 * looks at the socket first anyway.  Not when not waiting:
		 * the flag may be old, and replies in since then. */
		if (!err && e->rx_none_yet && timeout_ms != 0)
			e->rx_none_yet = false;
		else if (!err)
			err = eng_recv(e);
		/* Completions first, even those a failure just made. */
		if (e->cq.count || err)
			return e->cq.count ? 0 : err;
		if (e->fifo_count == 0)
			return 0;
		err = eng_wait(e, false, deadline);
		if (err)
			return e->cq.count || err > 0 ? 0 : err;
	}
}

int eng_wait_fd(const struct engine *e, struct pollfd *pfd)
{
	/* eng_flush() sends all it has before returning, so only replies are
	 * ever waited for.  Under a low-water mark (a READ's data streaming
	 * in) the socket wakes poll() late for anything else: eng_wait()
	 * knows how to handle that, a bare poll() does not. */
	if (e->broken || e->fd < 0 || e->fifo_count == 0 || e->cq.count || e->rcvlowat > 1 ||
	    stream_pending(e))
		return 0;
	*pfd = (struct pollfd){ .fd = e->fd, .events = POLLIN };
	return 1;
}

int eng_ping_nowait(struct engine *e, struct eng_op *op)
{
	int err = eng_recv(e);

	if (err || op->frames)
		return err;
	*op = (struct eng_op){ .sealed = true };
	return eng_send(e, op, PROTO_OP_PING, NULL, 0, NULL, 0, NULL, 0);
}

int eng_call(struct engine *e, uint16_t opcode, const void *payload, size_t len,
	     size_t *reply_len)
{
	struct eng_op op = { .sealed = true };
	int err;

	err = eng_send(e, &op, opcode, payload, len, NULL, 0, NULL, 0);
	if (err)
		return err;
	err = eng_wait_op(e, &op);
	if (err)
		return err;
	*reply_len = op.rx_len;
	return 0;
}

/* ---- the lease ------------------------------------------------------------------------ */

bool eng_broken(const struct engine *e)
{
	return e->broken;
}

int64_t eng_last_send_ms(const struct engine *e)
{
	return e->last_send_ms;
}

int eng_ping(struct engine *e)
{
	size_t reply_len;
	int status, err;

	err = eng_call(e, PROTO_OP_PING, NULL, 0, &reply_len);
	if (err)
		return err;
	if (proto_status_decode(e->rx, reply_len, &status) < 0)
		return eng_fail(e, -EPROTO);
	return 0;
}

void eng_shutdown(struct engine *e)
{
	/* From another thread than the client's: fd_mu keeps e->fd's number
	 * from changing under us (eng_reopen). */
	pthread_mutex_lock(&e->fd_mu);
	__atomic_store_n(&e->stop_recover, true, __ATOMIC_RELAXED);
	if (e->fd >= 0)
		shutdown(e->fd, SHUT_RDWR);
	pthread_mutex_unlock(&e->fd_mu);
}

int eng_lease_poke(struct engine *e)
{
	int64_t interval = e->lease_ms / 3 ? e->lease_ms / 3 : 1;
	int64_t due = e->last_send_ms + interval, now = clock_mono_ms();

	if (!e->lease_ms || e->broken)
		return -1;
	if (now < due)
		return (int)(due - now);
	eng_ping_nowait(e, &e->ping_op);
	return e->broken ? -1 : (int)interval;
}
