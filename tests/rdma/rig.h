/*
 * rig.h - a real rmemd for the RDMA tests: listening on the Soft-RoCE
 * address of the test VM (tests/func/harness.c's daemon listens on 127.0.0.1,
 * which rxe cannot reach), on a private directory and ports, started the way
 * systemd would (NOTIFY_SOCKET, READY=1).
 *
 *   struct rig d;
 *   if (rig_start(&d, getenv("RMEM_VM_RDMA_ADDR"), "keys = \"window\";", "256M") < 0)
 *           ...;
 *   ... rawclient_open(&c, d.addr, d.tcp_port, ...) ...
 *   ok(rig_stop(&d) == 0, "rmemd exits 0 on SIGTERM");
 *   rig_cleanup(&d);
 *
 * Messages go to stdout as TAP comments.
 */
#ifndef RMEM_TESTS_RIG_H
#define RMEM_TESTS_RIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct rig {
	pid_t pid;               /* 0 when not running */
	char dir[64];            /* mkdtemp directory, removed by rig_cleanup */
	char conf_path[128];
	char log_path[128];      /* the daemon's stdout and stderr */
	char admin_path[128];
	char notify_path[128];
	char addr[64];           /* where both listeners are */
	uint16_t tcp_port;       /* listen.tcp */
	uint16_t rdma_port;      /* listen.rdma; 0 when RDMA is off */
	int notify_fd;
	const char *extra;       /* more top-level config (rig_start_extra), or NULL */
};

/*
 * Writes a config and starts $RMEM_BUILD/rmemd (default build/) on it: a pool
 * of pool_size, listen.tcp on addr, and, when rdma_group is not NULL,
 * listen.rdma on addr plus "rdma = { <rdma_group> };" (e.g. "keys =
 * \"window\";"); rdma_group NULL means listen.rdma = "" and no rdma group.
 * Waits up to 60 s for READY=1.  0 or a negative errno (the log tail is
 * printed, everything is cleaned up).
 */
int rig_start(struct rig *d, const char *addr, const char *rdma_group, const char *pool_size);
/* The same with extra (e.g. "tenants = ( ... );") appended at top level;
 * extra must outlive the rig. */
int rig_start_extra(struct rig *d, const char *addr, const char *rdma_group,
		    const char *pool_size, const char *extra);
/* SIGTERM, reaps it (SIGKILL after 30 s): exit code, 128 + signal, or
 * -ETIMEDOUT.  Prints the log tail when that is not 0. */
int rig_stop(struct rig *d);
/* Kills it if still running, removes the directory.  Idempotent. */
void rig_cleanup(struct rig *d);
bool rig_log_contains(const struct rig *d, const char *needle);
void rig_log_tail(const struct rig *d, int lines);

#endif /* RMEM_TESTS_RIG_H */
