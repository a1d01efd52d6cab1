#!/usr/bin/env python3
# cluster_restart.py - for tests/func/test_cluster.sh, not a test itself: one
# cluster member restarted without loss through the emulated systemd fd
# store (tests/lib/rmemd_start.py), as its id and generation are seen in etcd.
#
#   cluster_restart.py TMPDIR CONF PORT KEYPREFIX
#
# Starts rmemd -c CONF (no cluster.id: the id is drawn) under the fd store,
# creates the named region "keep/c" on 127.0.0.1:PORT and fills it, then
# restarts it with SIGTERM, then with SIGKILL, then once more from an empty
# fd store (its memory lost).  After each start it prints one line
#   KIND ID GENERATION MS NAMED
# where KIND is first, term, kill or fresh; ID and GENERATION are from the
# server's record in etcd (the one key under KEYPREFIX whose tcp endpoint
# is PORT); MS is how long the key took to appear after the start began;
# NAMED is "intact" when "keep/c" opened through the record's endpoint has
# its bytes, "gone" when it does not exist, else what went wrong.  Exits 1
# when a step cannot be done (rmemd not ready, no key within 15 s).
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rmemd_start import Rmemd        # noqa: E402
from rmemwire import Client          # noqa: E402

ETCDCTL = os.environ.get("ETCDCTL_BIN", "etcdctl")
ENDPOINTS = os.environ["ETCD_ENDPOINTS"]
DATA = bytes((i * 7 + 3) & 0xff for i in range(8192))


def record(prefix, port):
    """The record of the server at PORT under prefix, or None."""
    out = subprocess.run([ETCDCTL, "--endpoints=" + ENDPOINTS, "--dial-timeout=2s",
                          "--command-timeout=3s", "get", "--prefix", prefix,
                          "--print-value-only"], env=dict(os.environ, ETCDCTL_API="3"),
                         capture_output=True, text=True)
    for line in out.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("tcp") == "127.0.0.1:%d" % port:
            return rec
    return None


def wait_record(prefix, port, t0):
    """The record once there, and the ms since t0."""
    deadline = time.time() + 15
    while time.time() < deadline:
        rec = record(prefix, port)
        if rec is not None:
            return rec, int((time.time() - t0) * 1000)
        time.sleep(0.05)
    return None, 0


def named(rec):
    host, port = rec["tcp"].rsplit(":", 1)
    c = Client((host, int(port)))
    try:
        c.hello()
        st, o = c.open("keep/c", 1)
        if st == 2:
            return "gone"
        if st != 0:
            return "open-%d" % st
        st, got = c.read(o["id"], o["key"], 0, len(DATA))
        return "intact" if st == 0 and got == DATA else "read-%d" % st
    finally:
        c.close()


def main():
    tmp, conf, port, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    d = Rmemd(tmp, conf=conf, log=os.path.join(tmp, "restart.log"))

    def start(kind):
        t0 = time.time()
        up, _ = d.try_start()
        if not up:
            print("# rmemd did not get ready (%s)" % kind, flush=True)
            sys.exit(1)
        rec, ms = wait_record(prefix, port, t0)
        if rec is None:
            print("# no record of the server at port %d (%s)" % (port, kind), flush=True)
            sys.exit(1)
        return rec, ms

    def stop(sig):
        d.stop(sig)
        # The record of this life must go before the next start, so that
        # the next record seen is the next life's: at once after SIGTERM
        # (revoked), within the lease after SIGKILL.
        deadline = time.time() + 15
        while record(prefix, port) is not None and time.time() < deadline:
            time.sleep(0.05)

    rec, ms = start("first")
    c = Client(("127.0.0.1", port))
    c.hello()
    st, n = c.create("keep/c", len(DATA))
    if st != 0 or c.write(n["id"], n["key"], 0, DATA) != 0:
        print("# create keep/c: %d" % st, flush=True)
        sys.exit(1)
    c.close()
    print("first %s %d %d %s" % (rec["id"], rec["generation"], ms, named(rec)), flush=True)
    for kind, sig in (("term", signal.SIGTERM), ("kill", signal.SIGKILL)):
        stop(sig)
        rec, ms = start(kind)
        print("%s %s %d %d %s" % (kind, rec["id"], rec["generation"], ms, named(rec)),
              flush=True)
    stop(signal.SIGTERM)
    # Nothing kept: new memory.
    d.drop()
    rec, ms = start("fresh")
    print("fresh %s %d %d %s" % (rec["id"], rec["generation"], ms, named(rec)), flush=True)
    stop(signal.SIGTERM)
    d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
