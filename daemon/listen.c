/*
 * listen.c - see listen.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "addr.h"
#include "bindaddr.h"
#include "conn.h"
#include "listen.h"
#include "log.h"
#include "server.h"
#include "tcp_cc.h"
#include "tenant.h"
#include "tlsaccept.h"

#define BACKLOG 1024
/* Room for a whole 1 MiB transfer and its neighbour in the socket, as the
 * library asks too: about 10% more bandwidth for 1 MiB calls than autotuning
 * on loopback (scripts/bench-tcp). */
#define STREAM_BUF_BYTES (4 << 20)

struct listeners {
	struct evconnlistener *tcp;
	struct evconnlistener *admin;
	char admin_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static void on_tcp_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			  int salen, void *arg)
{
	struct server *srv = arg;
	char peer[64];
	int one = 1, buf = STREAM_BUF_BYTES, rc;

	(void)l;
	(void)salen;
	addr_format(sa, peer, sizeof peer);
	/* Replies are small and latency-bound; never let Nagle hold them. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
	/* tcp.congestion, checked when the config was loaded. */
	rc = tcp_cc_set(fd, srv->cfg.tcp_congestion);
	if (rc < 0)
		log_warn("client %s: congestion control \"%s\": %s; keeping the system's",
			    peer, srv->cfg.tcp_congestion, strerror(-rc));
	if (srv->tls)
		tlsaccept_start(srv, fd, peer);
	else
		conn_accept(srv, fd, SESSION_TCP, false, peer);
}

static void on_unix_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			   int salen, void *arg)
{
	struct ucred cred;
	socklen_t clen = sizeof cred;
	char peer[64];
	bool admin = false;

	(void)l;
	(void)sa;
	(void)salen;
	/* Admin rights come from the kernel's word on who is calling, never
	 * from anything the client says. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
		admin = tenant_admin_peer(cred.uid, cred.gid);
		snprintf(peer, sizeof peer, "uid=%u", (unsigned)cred.uid);
	} else {
		snprintf(peer, sizeof peer, "uid=?");
	}
	conn_accept(arg, fd, SESSION_UNIX, admin, peer);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
	(void)l;
	(void)arg;
	/* EMFILE and friends: keep listening, the next accept may work. */
	log_warn("accept: %s", strerror(errno));
}

static int open_tcp(struct server *srv, struct listeners *ls, char *err, size_t errlen)
{
	int fd = bindaddr_listen("listen.tcp", srv->cfg.listen_tcp, BACKLOG, err, errlen), rc;

	if (fd < 0)
		return fd;
	ls->tcp = evconnlistener_new(srv->base, on_tcp_accept, srv,
				     LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!ls->tcp) {
		rc = -errno;
		snprintf(err, errlen, "listen.tcp: %s: %s", srv->cfg.listen_tcp, strerror(errno));
		close(fd);
		return rc;
	}
	evconnlistener_set_error_cb(ls->tcp, on_accept_error);
	return 0;
}

/* A socket file left by a crashed rmemd is removed; one that still answers
 * belongs to a running rmemd and is left alone. */
static int clear_stale_socket(const struct sockaddr_un *sun, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (lstat(sun->sun_path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "listen.admin: %s exists and is not a socket", sun->sun_path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (const struct sockaddr *)sun, sizeof *sun) == 0) {
		close(fd);
		snprintf(err, errlen, "listen.admin: %s: another rmemd is running", sun->sun_path);
		return -EADDRINUSE;
	}
	if (fd >= 0)
		close(fd);
	unlink(sun->sun_path);
	return 0;
}

static int open_admin(struct server *srv, struct listeners *ls, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = srv->cfg.listen_admin;
	int fd = -1, rc;

	if (strlen(path) >= sizeof sun.sun_path) {
		snprintf(err, errlen, "listen.admin: path too long: %s", path);
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	rc = clear_stale_socket(&sun, err, errlen);
	if (rc < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0)
		goto fail;
	/* Anyone may connect as a client; admin rights are checked per peer
	 * with SO_PEERCRED. */
	if (chmod(path, 0666) < 0 || listen(fd, BACKLOG) < 0)
		goto fail_unlink;
	ls->admin = evconnlistener_new(srv->base, on_unix_accept, srv,
				       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!ls->admin)
		goto fail_unlink;
	evconnlistener_set_error_cb(ls->admin, on_accept_error);
	snprintf(ls->admin_path, sizeof ls->admin_path, "%s", path);
	return 0;
fail_unlink:
	rc = -errno;
	unlink(path);
	goto out;
fail:
	rc = -errno;
out:
	snprintf(err, errlen, "listen.admin: %s: %s", path, strerror(-rc));
	if (fd >= 0)
		close(fd);
	return rc;
}

int listeners_open(struct server *srv, char *err, size_t errlen)
{
	struct listeners *ls;
	int rc = 0;

	/* Who may connect is settled before anyone can. */
	if (tenant_init(srv) < 0) {
		snprintf(err, errlen, "libsodium cannot start");
		return -EIO;
	}
	ls = calloc(1, sizeof *ls);
	if (!ls) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	srv->listeners = ls;
	/* TLS before the port opens: no client is ever served in clear text
	 * on a port that should have been TLS. */
	if (srv->cfg.listen_tcp[0])
		rc = tlsaccept_open(srv, err, errlen);
	if (rc == 0 && srv->cfg.listen_tcp[0])
		rc = open_tcp(srv, ls, err, errlen);
	if (rc == 0 && srv->cfg.listen_admin[0])
		rc = open_admin(srv, ls, err, errlen);
	if (rc < 0)
		listeners_close(srv);
	return rc;
}

void listeners_close(struct server *srv)
{
	struct listeners *ls = srv->listeners;

	if (!ls)
		return;
	if (ls->tcp)
		evconnlistener_free(ls->tcp);
	tlsaccept_close(srv);
	if (ls->admin) {
		evconnlistener_free(ls->admin);
		unlink(ls->admin_path);
	}
	free(ls);
	srv->listeners = NULL;
}
