/*
 * repair_agent.h - rmemd's repair of redundant named regions
 * (docs/architecture.md, "Redundancy", repair; rmemd.conf(5),
 * cluster.repair_grace_ms).
 *
 * Every rmemd of a cluster runs the agent, a thread; one at a time leads,
 * by holding /rmem/<cluster>/repair/leader under its own etcd lease.  The
 * leader scans the names' records: a redundant region with a piece that is
 * not healthy, or whose server is gone (or back as another generation),
 * for cluster.repair_grace_ms is opened as a writer through librmem, as
 * the tenant that made it (its secret from this rmemd's tenants), and
 * rmem_repair()ed: its pieces rebuilt on live servers and its record
 * rewritten.  A region another client writes is left to that writer
 * (librmem repairs it on its next write).  The agent never touches struct
 * server after start: it reads the config it copied and writes atomics
 * that main.c's loop copies into the metrics' counters.  Only main.c calls
 * it.
 */
#ifndef RMEMD_REPAIR_AGENT_H
#define RMEMD_REPAIR_AGENT_H

struct server;

/* Starts the agent when cluster.etcd is set and cluster.repair_grace_ms
 * is not 0 (after member_start: it uses the member's id).  0, or a
 * negative errno (no thread, no memory); etcd down is not an error. */
int repair_agent_start(struct server *srv);

/* Stops it: a repair under way (one region) ends first, then a leader
 * gives up the lead at once (its lease revoked); the thread is joined. */
void repair_agent_stop(struct server *srv);

#endif /* RMEMD_REPAIR_AGENT_H */
