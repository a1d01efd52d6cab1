/*
 * bindaddr.h - a listening TCP socket on a configured "HOST:PORT", for the
 * two listeners that take one: listen.c (listen.tcp) and metrics.c
 * (listen.metrics).  Below both; calls nothing of the daemon's.
 */
#ifndef RMEMD_BINDADDR_H
#define RMEMD_BINDADDR_H

#include <stddef.h>

/*
 * A nonblocking, close-on-exec socket bound to addr (SO_REUSEADDR) and
 * listening with backlog: the fd, or a negative errno with
 * "KEY: ..." in err (key is the config key, for the message).
 */
int bindaddr_listen(const char *key, const char *addr, int backlog, char *err, size_t errlen);

#endif /* RMEMD_BINDADDR_H */
