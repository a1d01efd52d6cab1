#!/usr/bin/env python3
# restart.py - make bench-restart: what a restart costs the clients of rmemd,
# on the host, through the emulated systemd fd store (tests/lib/fdstore.py).
#
# For each pool size (POOLS, default "64M 4G") one rmemd holds the same
# HELD bytes (default 16 MiB: one named region and one anonymous region of
# a resumable session, each written with a pattern).  Then, ROUNDS times,
# alternating the pool sizes (A B A B ...), the daemon is stopped (SIGTERM,
# then SIGKILL) and started again from the store, and we time:
#   ready:  the signal to READY=1 (the new rmemd serves);
#   pause:  the signal to the first verified read of a client that resumes
#           its session (RESUME, REKEY, READ of the anonymous region);
#   first:  after READY, the first 1 MiB ALLOC of a new client (lazy
#           zeroing puts its cost there, bounded by the request's size).
# The daemon's own "restore: ... ms" line says where its time went.
# A benchmark: it prints figures (medians) and asserts nothing.  The host
# is shared: compare ratios taken in one run, never runs with each other.
#   POOLS="64M 4G" ROUNDS=5 RMEM_BUILD=build bench/restart.py
# As root it runs twice, with the kernel's shmem THP off ("never": 4 KiB
# pages) and on ("advise", which rmemd's pools ask for), side by side
# (THP=asis: once, under the kernel's setting as it is).
# In the test VM over rxe (window keys register each pool whole):
#   tests/vm/run-in-vm -- env POOLS="64M 1G" RDMA_ADDR=\$RMEM_VM_RDMA_ADDR KEYS=window \
#       bench/restart.py
import os
import re
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from restartlib import RMEMD, Daemon, free_port  # noqa: E402

POOLS = os.environ.get("POOLS", "64M 4G").split()
ROUNDS = int(os.environ.get("ROUNDS", "5"))
HELD = int(os.environ.get("HELD", str(16 << 20)))


class Server(Daemon):
    """test_restart's Daemon with the NIC in the restart: RDMA_ADDR (the
    VM's RMEM_VM_RDMA_ADDR) and KEYS ("window" registers each pool whole
    before READY); a start waits longer, and takes no time after READY."""

    def __init__(self, tmp, pool):
        super().__init__(tmp, pool, lease_ms=60000)
        rdma = os.environ.get("RDMA_ADDR", "")
        if rdma:
            rdma = "%s:%d" % (rdma, free_port())
        self.write_conf(pool, 60000, rdma=rdma,
                        extra='rdma = { keys = "%s"; };\n' % os.environ.get("KEYS", "auto"))

    def start(self):
        super().start(timeout=300, settle=0)


def pattern(n, seed):
    return bytes((i * 131 + seed) & 0xff for i in range(256)) * (n // 256)


def setup(srv):
    srv.start()
    c = srv.tcp()
    _, h = c.hello()
    half = HELD // 2
    _, r = c.alloc(half)
    data = pattern(1 << 20, 7)
    for off in range(0, half, 1 << 20):
        c.write(r["id"], r["key"], off, data)
    _, n = c.create("bench/held", half)
    for off in range(0, half, 1 << 20):
        c.write(n["id"], n["key"], off, data)
    return c, h, r, data


def one_restart(srv, sess, sig):
    c, h, r, data = sess
    t0 = time.monotonic()
    srv.p.send_signal(sig)
    srv.p.wait(120)
    c.close()
    srv.store.pump(0.0)
    srv.start()
    ready = time.monotonic() - t0
    # The resuming client: as soon as READY says the port is there.
    for _ in range(10000):
        try:
            nc = srv.tcp()
            st, _ = nc.resume(h["id"], h["token"])
            if st == 0:
                break
            nc.close()
        except OSError:
            pass
        time.sleep(0.001)
    else:
        raise RuntimeError("the session did not resume")
    _, k = nc.rekey(r["id"])
    st, got = nc.read(r["id"], k["key"], 0, len(data))
    pause = time.monotonic() - t0
    if st != 0 or got != data:
        raise RuntimeError("the resumed region's bytes are not there")
    r = dict(r, key=k["key"])
    n = srv.tcp()
    n.hello()
    t1 = time.monotonic()
    st, fr = n.alloc(1 << 20)
    first = time.monotonic() - t1
    n.free(fr["id"], fr["key"])
    n.close()
    # Steady state before the next restart: the scrub has faulted in and
    # zeroed every free byte, as in a daemon that has run a while.
    deadline = time.monotonic() + 300
    while "zeroed after READY" not in srv.new_log() and time.monotonic() < deadline:
        srv.store.pump(0.05)
    log = srv.new_log()
    m = re.search(r"restored from the fd store.*", log)
    z = re.search(r"restore: \d+ free bytes zeroed after READY, in (\d+) ms", log)
    g = re.search(r"registered with \S+ in (\d+) ms", log)
    line = (m.group(0) if m else "") + ("; scrub %s ms" % z.group(1) if z else "") + \
        ("; ibv_reg_mr %s ms" % g.group(1) if g else "")
    return ready, pause, first, line, (nc, h, r, data)


THP_SHMEM = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"


def thp_policy():
    try:
        with open(THP_SHMEM) as f:
            return re.search(r"\[(\w+)\]", f.read()).group(1)
    except (OSError, AttributeError):
        return ""


def set_thp(word):
    with open(THP_SHMEM, "w") as f:
        f.write(word)


def main():
    """THP=both (the default where THP_SHMEM is writable: as root) runs
    the pools with 4 KiB pages (shmem_enabled "never") and then with
    transparent 2 MiB ones ("advise", which rmemd's pools ask for), and puts
    the kernel's setting back; THP=asis runs once under the current one."""
    if not os.access(RMEMD, os.X_OK):
        print("bench-restart: %s is not built" % RMEMD, file=sys.stderr)
        return 1
    was = thp_policy()
    mode = os.environ.get("THP", "both" if os.access(THP_SHMEM, os.W_OK) else "asis")
    if mode == "asis":
        return run(was or "unknown")
    try:
        for word in ("never", "advise"):
            set_thp(word)
            rc = run(word)
            if rc:
                return rc
    finally:
        if was:
            set_thp(was)
    return 0


def run(policy):
    tmp = tempfile.mkdtemp(prefix="rmem-bench-restart.")
    servers, sessions = {}, {}
    figs = {(p, s): {"ready": [], "pause": [], "first": []}
            for p in POOLS for s in ("SIGTERM", "SIGKILL")}
    lines = {}
    try:
        for p in POOLS:
            d = os.path.join(tmp, p)
            os.mkdir(d)
            servers[p] = Server(d, p)
            sessions[p] = setup(servers[p])
        for _ in range(ROUNDS):
            for sig, label in ((signal.SIGTERM, "SIGTERM"), (signal.SIGKILL, "SIGKILL")):
                for p in POOLS:
                    ready, pause, first, line, sessions[p] = one_restart(servers[p], sessions[p],
                                                                         sig)
                    f = figs[(p, label)]
                    f["ready"].append(ready)
                    f["pause"].append(pause)
                    f["first"].append(first)
                    lines[(p, label)] = line
        print("bench-restart: %d MiB held, %d rounds alternated, medians (host: %s, %d CPUs, "
              "shared); shmem_enabled: %s" % (HELD >> 20, ROUNDS, os.uname().release,
                                             os.cpu_count(), policy))
        print("%-6s %-8s %10s %10s %12s" % ("pool", "signal", "ready s", "pause s",
                                             "1st alloc ms"))
        for sig in ("SIGTERM", "SIGKILL"):
            for p in POOLS:
                f = figs[(p, sig)]
                print("%-6s %-8s %10.3f %10.3f %12.2f" % (
                    p, sig, statistics.median(f["ready"]), statistics.median(f["pause"]),
                    statistics.median(f["first"]) * 1000))
            if len(POOLS) >= 2:
                a, b = figs[(POOLS[0], sig)], figs[(POOLS[-1], sig)]
                print("%-6s %-8s %9.2fx %9.2fx" % (
                    "ratio", sig,
                    statistics.median(b["ready"]) / statistics.median(a["ready"]),
                    statistics.median(b["pause"]) / statistics.median(a["pause"])))
        for k, v in sorted(lines.items()):
            print("# %s %s: %s" % (k[0], k[1], v.strip()))
    finally:
        for s in servers.values():
            if s.p and s.p.poll() is None:
                s.p.send_signal(signal.SIGTERM)
                s.p.wait(60)
            s.store.close()
        os.system("rm -rf '%s'" % tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
