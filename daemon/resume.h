/*
 * resume.h - taking a session back after a daemon restart (docs/protocol.md
 * 7.13): RESUME moves a restored, detached session into a connection's
 * fresh one; REKEY gives a region a new key and tells its address.  Called
 * by ctl.c (and resume_find by restore.c); calls session, region, names and
 * the NIC keys (srv->keys) below it.
 */
#ifndef RMEMD_RESUME_H
#define RMEMD_RESUME_H

#include <stdint.h>

struct server;
struct session;
struct region;

/* A restored session (detached or resumed since) by id, or NULL. */
struct session *resume_find(struct server *srv, uint64_t id);
/*
 * s, a connection's fresh session before HELLO, takes over the detached
 * restored session `from`: its id, regions, handles and resume token, and a
 * new attach token; `from` is freed.  The caller checked token and tenant.
 * -EINVAL when s said HELLO already, -EBUSY when from is not detached.
 */
int resume_session(struct server *srv, struct session *s, struct session *from);
/* REKEY: region id of s gets a new key (the old one dies first): the NIC's
 * when s has a queue pair, else a random one.  -ENOENT, or the NIC's error. */
int resume_rekey(struct server *srv, struct session *s, uint64_t id, const struct region **out);

#endif /* RMEMD_RESUME_H */
