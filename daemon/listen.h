/*
 * listen.h - rmemd's listening sockets: TCP (control and the TCP data path)
 * and the Unix admin socket.  Accepted connections go to conn_accept().
 */
#ifndef RMEMD_LISTEN_H
#define RMEMD_LISTEN_H

#include <stddef.h>

struct server;
struct listeners;

/* Opens what srv->cfg asks for.  On failure returns a negative errno with a
 * message in err and nothing left open. */
int listeners_open(struct server *srv, char *err, size_t errlen);
/* Closes them and removes the Unix socket file.  Accepts srv->listeners NULL. */
void listeners_close(struct server *srv);

#endif /* RMEMD_LISTEN_H */
