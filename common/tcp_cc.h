/*
 * tcp_cc.h - a TCP congestion control chosen by name (TCP_CONGESTION), for
 * rmemd's tcp.congestion and librmem's rmem_opts.tcp_congestion.
 *
 * Off by default on both sides: a socket keeps the system's choice
 * (net.ipv4.tcp_congestion_control).  Naming one applies it to every TCP
 * data connection of that side; each sender's choice governs what it sends.
 */
#ifndef RMEM_TCP_CC_H
#define RMEM_TCP_CC_H

#include <stdbool.h>

/* The kernel's TCP_CA_NAME_MAX: names are shorter, NUL included. */
#define TCP_CC_NAME_MAX 16

/* Whether name looks like a congestion control's name: 1 to 15 of
 * [A-Za-z0-9_-].  Says nothing of whether this kernel has it. */
bool tcp_cc_name_ok(const char *name);

/*
 * Sets fd's congestion control to name; NULL or "" leaves fd as it is.
 * 0, or a negative errno: -EINVAL a malformed name, -ENOENT no such
 * algorithm in this kernel (not built, or its module tcp_NAME not loaded and
 * not loadable by us), -EPERM not in net.ipv4.tcp_allowed_congestion_control
 * and no CAP_NET_ADMIN.
 */
int tcp_cc_set(int fd, const char *name);

/* What tcp_cc_set() would say for name, tried on a throwaway TCP socket. */
int tcp_cc_probe(const char *name);

#endif /* RMEM_TCP_CC_H */
