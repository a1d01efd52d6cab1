#!/usr/bin/env python3
# test_starter.py - the tests' one starter, tests/lib/rmemd_start.py, as its
# C and shell callers meet it (a supervisor spoken to in lines): the ready
# line says where rmemd is and is true; the fd store keeps the pool and
# the state, so a kill -9 and a SIGTERM restart restore them and "drop"
# makes the next start fresh; stop says how rmemd ended; a config rmemd
# refuses is "failed exit 1", never "ready"; and rmemd never outlives its
# starter (end of input, or the starter killed as a dying test would be).
# TAP output.
#
#   RMEM_BUILD=build tests/func/test_starter.py
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STARTER = os.path.join(HERE, "..", "lib", "rmemd_start.py")
B = os.environ.get("RMEM_BUILD", "build")
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from tap import done, ok  # noqa: E402


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone as far as a test is concerned.
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def gone_within(pid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


class Starter:
    def __init__(self, tmp, *args):
        self.p = subprocess.Popen([sys.executable, STARTER, "--dir", tmp] + list(args),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def line(self):
        return self.p.stdout.readline().rstrip("\n")

    def call(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.line()


def fields(line):
    return dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)


def log_of(path):
    with open(path, errors="replace") as f:
        return f.read()


def main():
    if not os.access(os.path.join(B, "rmemd"), os.X_OK):
        print("1..0 # SKIP %s/rmemd is not built" % B)
        return 77
    tmp = tempfile.mkdtemp(prefix="rmem-starter.")

    # ---- start, the store, restarts ----------------------------------------------
    s = Starter(os.path.join(tmp, "a"), "--pool", "16M")
    ready = s.line()
    f = fields(ready)
    ok(ready.startswith("ready ") and int(f.get("pid", 0)) > 0 and int(f.get("port", 0)) > 0,
       "the first line is the ready line, with pid and port (%s)" % ready[:60])
    pid = int(f["pid"])
    try:
        socket.create_connection(("127.0.0.1", int(f["port"])), timeout=5).close()
        c = socket.socket(socket.AF_UNIX)
        c.connect(f["admin"])
        c.close()
        ok(True, "its TCP port and admin socket accept connections")
    except (OSError, KeyError) as e:
        ok(False, "its TCP port and admin socket accept connections (%s)" % e)
    conf = log_of(f["conf"])
    ok('size = "16M"' in conf and ":%s\"" % f["port"] in conf,
       "the config it wrote has the pool size asked for and the port it says")
    st = s.call("store")
    ok(st == "store 2 rmem-pool-default,rmem-state", "the fd store keeps pool and state (%s)" % st)
    ready = s.call("restart KILL")
    ok(ready.startswith("ready ") and int(fields(ready)["pid"]) != pid and not alive(pid),
       "restart KILL: the old rmemd is gone, a new one is ready")
    ok("restored from the fd store" in log_of(f["log"]), "and it restored from the fd store")
    ready = s.call("restart TERM")
    ok(ready.startswith("ready ") and log_of(f["log"]).count("restored from the fd store") == 2,
       "restart TERM: ready again, restored from the store again")
    ok(s.call("drop") == "ok" and s.call("store") == "store 0 ", "drop: the store is empty")
    ready = s.call("restart TERM")
    ok(ready.startswith("ready ") and "nothing to restore" in log_of(f["log"]).split(
        "restored from the fd store")[-1], "after drop a restart is fresh")
    pid = int(fields(ready)["pid"])
    ok(s.call("notified READY=1") == "yes" and s.call("notified STOPPING=1") == "no",
       "notified: READY=1 came, STOPPING=1 not yet")
    r = s.call("stop TERM 30000")
    ok(r == "exit 0" and not alive(pid), "stop TERM: exit 0 (%s)" % r)
    ok(s.call("notified STOPPING=1") == "yes", "notified: STOPPING=1 came")
    ready = s.call("start")
    pid = int(fields(ready).get("pid", 0))
    ok(ready.startswith("ready "), "start after stop: ready")
    r = s.call("stop KILL")
    ok(r == "exit %d" % (128 + signal.SIGKILL), "stop KILL: exit 137 (%s)" % r)
    ok(s.call("frobnicate").startswith("error "), "an unknown command is an error line")
    pid = int(fields(s.call("start")).get("pid", 0))
    s.p.stdin.close()
    rc = s.p.wait(30)
    ok(rc == 0 and pid > 0 and gone_within(pid, 10),
       "end of input: the starter exits 0 (%s) and its rmemd is gone" % rc)

    # ---- refused ---------------------------------------------------------------------
    s = Starter(os.path.join(tmp, "b"), "--extra", "no_such_key = 1;")
    r = s.line()
    ok(r == "failed exit 1", "a config rmemd refuses: \"failed exit 1\" (%s)" % r)
    s.p.stdin.close()
    s.p.wait(30)

    # ---- never outlives its starter -------------------------------------------------
    s = Starter(os.path.join(tmp, "d"), "--pool", "16M")
    pid = int(fields(s.line()).get("pid", 0))
    s.p.kill()
    s.p.wait()
    ok(pid > 0 and gone_within(pid, 10), "the starter killed (-9): rmemd dies with it")
    if pid > 0 and alive(pid):
        os.kill(pid, signal.SIGKILL)

    subprocess.run(["rm", "-rf", tmp])
    return done()


if __name__ == "__main__":
    sys.exit(main())
