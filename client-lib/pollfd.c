/*
 * pollfd.c - rmem_fd(): one descriptor an event loop can wait on for a
 * client's posted operations.
 *
 * What there is to wait for changes with every call: the stream's socket
 * while replies are due, nothing while nothing is, "now" while completions
 * are queued, posts wait to be sent, or transfers sit on an RDMA queue pair
 * (which has no descriptor without arming its completion channel, and the
 * synchronous path owns that).  So the descriptor is an epoll set that
 * holds an eventfd, written when there is something to do now, and the
 * socket while replies are due; every call re-arms it as it lets the
 * client go (client_release), and the engine writes the eventfd when it
 * queues a completion, whoever's call received the reply (the keepalive
 * thread's included).  A set that changes only when the state does costs
 * a client that never asked for it nothing, and one that did a system
 * call at most per change.
 */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "datapath.h"

struct client_pollfd {
	int epfd;
	int evfd;
	int stream_fd;          /* the socket in the set, or -1 */
	uint32_t stream_gen;    /* its engine's reopened count then */
};

static void pollfd_close(struct client_pollfd *p)
{
	if (!p)
		return;
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->evfd >= 0)
		close(p->evfd);
	free(p);
}

static int pollfd_new(struct client_pollfd **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct client_pollfd *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	p->stream_fd = -1;
	p->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (p->evfd < 0 || p->epfd < 0)
		goto fail;
	ev.data.fd = p->evfd;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->evfd, &ev) < 0)
		goto fail;
	*out = p;
	return 0;
fail:
	err = -errno;
	pollfd_close(p);
	return err;
}

/* The socket in the set: fd, or none (-1). */
static void set_stream(struct client_pollfd *p, int fd, uint32_t gen)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (fd == p->stream_fd && gen == p->stream_gen)
		return;
	/* A socket closed by a resume left the set by itself: ENOENT then. */
	if (p->stream_fd >= 0)
		(void)epoll_ctl(p->epfd, EPOLL_CTL_DEL, p->stream_fd, NULL);
	p->stream_fd = -1;
	if (fd >= 0 && epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		/* No room in the kernel: wake the loop on every turn rather
		 * than never. */
		return;
	}
	p->stream_fd = fd;
	p->stream_gen = gen;
}

void pollfd_arm(struct rmem_client *c)
{
	struct client_pollfd *p = c->pollfd;
	struct engine *e = &c->eng;
	struct pollfd pfd;
	bool now = false;
	int stream = -1;

	if (e->cq.count || e->broken || e->tx_frames)
		now = true;   /* rmem_poll returns, reports or sends at once */
	else if (dp_wait_fd(e, &pfd) == 1)
		stream = pfd.fd;
	else if (e->async_ops)
		now = true;   /* RDMA transfers, or a low-water mark: poll */
	set_stream(p, stream, e->reopened);
	if (stream >= 0 && p->stream_fd < 0)
		now = true;
	if (now) {
		eng_notify(e);
	} else if (e->notified) {
		uint64_t n;

		/* Nonblocking; empty already is as good. */
		(void)!read(p->evfd, &n, sizeof n);
		e->notified = false;
	}
}

int single_fd(struct rmem_client *c)
{
	int err = 0, fd;

	client_hold(c);
	if (!c->pollfd) {
		err = pollfd_new(&c->pollfd);
		if (!err)
			c->eng.notify_fd = c->pollfd->evfd;
	}
	fd = err ? err : c->pollfd->epfd;
	client_release(c);  /* arms it */
	return fd;
}

void pollfd_free(struct rmem_client *c)
{
	c->eng.notify_fd = -1;
	pollfd_close(c->pollfd);
	c->pollfd = NULL;
}
