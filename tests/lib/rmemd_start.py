#!/usr/bin/env python3
# rmemd_start.py - the one way the tests start rmemd.  It writes a config on
# private paths and free ports (or takes the caller's), starts rmemd the
# way systemd would (NOTIFY_SOCKET, READY=1) under the one emulated fd store
# (fdstore.py), waits for READY=1 and says where the daemon is.  Restart
# without loss (kill -9, SIGTERM) starts rmemd again with what the store
# keeps.  Python tests import it; C (tests/lib/daemon.c) and shell
# (tests/lib/rmemd.sh, cluster.sh) run it as a supervisor and talk to it in
# lines:
#
#   rmemd_start.py [--dir D] [--pool 64M] [--lease-ms N] ... [-- PREFIX...]
#
# stdin takes one command a line; each gets one line on stdout:
#   start [MS]            -> ready KEY=VALUE...  |  failed exit N  |  failed timeout
#   stop SIG [MS]         -> exit N (0..255, 128+signal)  |  timeout (then killed);
#                            SIG 0: none, wait for an end already under way
#   restart SIG [MS]      stop without a time limit, then start
#   drop                  -> ok: the store forgets everything (next start is fresh)
#   store                 -> store N NAME,NAME...
#   notified LINE         -> yes | no: LINE came since the last start
#   quit, or end of input -> bye: rmemd is killed
# The first start is done at once.  The ready line's keys: pid dir conf log
# admin notify port rdma_port metrics_port host_port metrics_host_port (values
# have no spaces; the last may be empty).
# Every notify line is also appended to DIR/notify.out as "msg LINE", and at
# READY=1 each --check (tcp:PORT, unix:PATH, vmlck:) is done there, at once,
# as "check KIND ok|failed WHY" or "vmlck KB".
#
#   import rmemd_start
#   d = rmemd_start.Rmemd(tmp, pool="64M", lease_ms=2000)
#   d.start(); ... d.port, d.admin, d.store ...; d.stop(signal.SIGTERM)
import argparse
import ctypes
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fdstore import FdStore  # noqa: E402

B = os.environ.get("RMEM_BUILD", "build")
RMEMD = os.environ.get("RMEMD") or os.path.join(B, "rmemd")


def free_port(host="127.0.0.1"):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam)
    s.bind((host, 0))
    p = s.getsockname()[1]
    s.close()
    return p


def hostport(host, port):
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


def _die_with_parent():
    # A test that dies must not leave its daemon behind.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _status(rc):
    """Popen's returncode as the shell says it: 128 + signal."""
    return 128 - rc if rc < 0 else rc


class Rmemd:
    """rmemd on private paths under the emulated fd store.  Ports are picked
    free unless given; a port taken before rmemd bound it is tried again."""

    def __init__(self, tmp=None, host="127.0.0.1", port=0, rdma=False, rdma_port=0,
                 metrics=False, metrics_addr=None, pool="64M", lease_ms=10000,
                 max_clients=64, log_level="debug", rdma_group=None, extra="",
                 cluster=None, conf=None, log=None, admin=None, checks=(), prefix=(),
                 rdma_addr=None, die_with_parent=False, store=True, listen_tls=None):
        self.tmp = tmp or tempfile.mkdtemp(prefix="rmemt.", dir="/tmp")
        self.host = host
        self.fixed = (port, rdma_port)
        self.want_rdma, self.want_metrics = rdma, metrics
        self.metrics_addr, self.rdma_addr = metrics_addr, rdma_addr
        self.pool, self.lease_ms, self.max_clients = pool, lease_ms, max_clients
        self.log_level, self.rdma_group, self.extra = log_level, rdma_group, extra
        self.cluster = cluster        # dict: etcd, name, id (or None: drawn), lease_ms
        # "CERT,KEY[,CA[,FLAG...]]": listen.tls (TLS on listen.tcp), or None;
        # FLAG "require" (require_client_cert), "ktls-off" (ktls = "off"),
        # "cert-tenants" (cert_tenants = true)
        self.listen_tls = listen_tls
        # A config the caller wrote is used as it is (its ports are its own).
        self.own_conf = conf is None or not os.path.exists(conf)
        self.conf = conf or os.path.join(self.tmp, "rmemd.conf")
        self.log = log or os.path.join(self.tmp, "rmemd.log")
        self.admin = admin or os.path.join(self.tmp, "rmemd.sock")
        self.checks, self.prefix = list(checks), list(prefix)
        self.die_with_parent = die_with_parent
        # store=False: no NOTIFY_SOCKET, as rmemd run by hand: it keeps
        # nothing for a restart (a SIGTERM is a stop: a cluster member
        # revokes its lease), and ready is when its admin socket answers.
        self.use_store = store
        self.notify_out = os.path.join(self.tmp, "notify.out")
        self.store = None             # made at the first start
        self.rmemd = RMEMD
        self.args = []                # after "-c CONF": --discard-state and the like
        self.p = None
        self.mark = 0
        self.started = 0              # index into store.lines of this life
        self.port = self.rdma_port = self.metrics_port = 0
        self.host_port = ""

    # ---- config ----------------------------------------------------------------

    def pick_ports(self):
        taken = set()

        def pick(fixed, want=True):
            if not want:
                return 0
            p = fixed
            while not p or p in taken:   # three distinct ports
                p = free_port(self.host)
            taken.add(p)
            return p
        self.port = pick(self.fixed[0])
        self.rdma_port = pick(self.fixed[1], self.want_rdma)
        self.metrics_port = pick(0, self.want_metrics)
        self.host_port = hostport(self.host, self.port)

    def write_conf(self):
        rdma = hostport(self.host, self.rdma_port) if self.rdma_port else ""
        if self.rdma_addr is not None:
            rdma = self.rdma_addr
        if self.metrics_addr is not None:
            metrics = self.metrics_addr
        else:
            metrics = hostport(self.host, self.metrics_port) if self.metrics_port else ""
        # listen.metrics is on by default (127.0.0.1:9470): off unless asked
        # for, so that daemons of tests running at once never meet.
        tls = ""
        if self.listen_tls:
            f = self.listen_tls.split(",")
            keys = ("cert", "key", "ca")
            flags = f[3:]
            tls = " tls = {%s%s%s%s };" % ("".join(' %s = "%s";' % (k, v)
                                                   for k, v in zip(keys, f) if v),
                                           " require_client_cert = true;"
                                           if "require" in flags else "",
                                           ' ktls = "off";' if "ktls-off" in flags else "",
                                           " cert_tenants = true;"
                                           if "cert-tenants" in flags else "")
        text = ['# written by tests/lib/rmemd_start.py',
                'listen = { tcp = "%s"; rdma = "%s"; admin = "%s"; metrics = "%s";%s };'
                % (self.host_port, rdma, self.admin, metrics, tls)]
        # Pools "default" and those a test adds after it in extra, as
        # "more_pools = ( {...}, ... );" (not a key of rmemd.conf: spliced in).
        more = re.search(r"^more_pools = \((.*?)\);$", self.extra, re.M | re.S)
        text.append('pools = ( { name = "default"; size = "%s"; hugepages = "off"; '
                    'alignment = 64; }%s );' % (self.pool, ",\n" + more.group(1) if more else ""))
        extra = self.extra[:more.start()] + self.extra[more.end():] if more else self.extra
        # A test that sets limits of its own says all of them in extra.
        if "limits" not in self.extra:
            text.append("limits = { max_clients = %d; lease_timeout_ms = %d; };"
                        % (self.max_clients, self.lease_ms))
        text.append('log = { level = "%s"; };' % self.log_level)
        if self.rdma_group:
            text.append("rdma = { %s };" % self.rdma_group)
        if self.cluster:
            c = self.cluster
            cid = ' id = "%s";' % c["id"] if c.get("id") else ""
            grace = (" repair_grace_ms = %d;" % c["repair_grace_ms"]
                     if c.get("repair_grace_ms") is not None else "")
            tls = "".join(' %s = "%s";' % (k, c[k]) for k in ("etcd_ca", "etcd_cert", "etcd_key")
                          if c.get(k))
            text.append('cluster = { etcd = "%s"; name = "%s";%s lease_ms = %d;%s%s };'
                        % (c["etcd"], c["name"], cid, int(c.get("lease_ms", 3000)), grace, tls))
        if extra:
            text.append(extra)
        with open(self.conf, "w") as f:
            f.write("\n".join(text) + "\n")

    # ---- the process -------------------------------------------------------------

    def _note(self, lines):
        with open(self.notify_out, "a") as f:
            for line in lines:
                f.write("msg %s\n" % line)

    def pump(self, timeout=0.0):
        n = len(self.store.lines)
        got = self.store.pump(timeout)
        if len(self.store.lines) > n:
            self._note(self.store.lines[n:])
        return got

    def _check(self, what):
        kind, _, arg = what.partition(":")
        try:
            if kind == "tcp":
                socket.create_connection((self.host, int(arg)), timeout=2).close()
            elif kind == "unix":
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(2)
                c.connect(arg)
                c.close()
            elif kind == "vmlck":
                with open("/proc/%d/status" % self.p.pid) as f:
                    for line in f:
                        if line.startswith("VmLck:"):
                            return "vmlck %s" % line.split()[1]
                return "vmlck ?"
            return "check %s ok" % kind
        except OSError as e:
            return "check %s failed %s" % (kind, e)

    def _spawn(self, env=None):
        if self.store is None:
            self.store = FdStore(self.tmp)
        self.mark = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        self.started = len(self.store.lines)
        argv = self.prefix + [self.rmemd, "-c", self.conf] + self.args
        pre = _die_with_parent if self.die_with_parent else None
        if self.use_store:
            self.p = self.store.start(argv, self.log, env, pre)
            return
        e = dict(os.environ if env is None else env)
        for k in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PID"):
            e.pop(k, None)
        with open(self.log, "ab") as log:
            self.p = subprocess.Popen(argv, env=e, stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, preexec_fn=pre)

    def _answers(self):
        """Without NOTIFY_SOCKET: True once the admin socket (else the TCP
        port) of the config accepts a connection."""
        with open(self.conf) as f:
            text = f.read()
        m = re.search(r'admin\s*=\s*"([^"]+)"', text)
        try:
            if m:
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(1)
                c.connect(m.group(1))
            else:
                m = re.search(r'tcp\s*=\s*"\[?([^"]*?)\]?:(\d+)"', text)
                c = socket.create_connection((m.group(1), int(m.group(2))), timeout=1)
            c.close()
            return True
        except OSError:
            return False

    def _wait_ready(self, timeout):
        """True once READY=1 came; False when rmemd ended first or timed out."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump(0)
            if "READY=1" in self.store.lines[self.started:] or \
                    (not self.use_store and self._answers()):
                # What READY=1 promises, checked before anything else runs.
                res = [self._check(w) for w in self.checks]
                if res:
                    with open(self.notify_out, "a") as f:
                        f.write("".join(r + "\n" for r in res))
                return True
            if self.p.poll() is not None or time.monotonic() >= deadline:
                return False
            self.pump(min(0.05, max(0.0, deadline - time.monotonic())))

    def attempt(self, timeout=60, settle=0.05, env=None):
        """Starts rmemd: ("ready", None), ("exit", N) or ("timeout", None).
        settle: how long to take the fd store's messages after READY=1."""
        fresh = self.p is None and not self.port
        for attempt in range(3):
            if (fresh or attempt) and self.own_conf:
                self.pick_ports()
                self.write_conf()
            elif fresh:
                # The caller's config: its ports are what the caller says.
                self.port, self.rdma_port = self.fixed
                self.host_port = hostport(self.host, self.port)
            self._spawn(env)
            if self._wait_ready(timeout):
                if settle:
                    self.pump(settle)
                return "ready", None
            if self.p.poll() is None:
                self._kill()
                return "timeout", None
            rc = _status(self.p.returncode)
            self.pump(0.05)
            # A port probed free may have been taken before rmemd bound it.
            if not (self.own_conf and fresh and "in use" in self.new_log()):
                return "exit", rc
        return "exit", rc

    def try_start(self, env=None, timeout=60):
        """attempt(), as (True, log) or (False, log): a daemon that does not
        come up is an answer, not a crash of the test."""
        what, _ = self.attempt(timeout, 0.05, env)
        return what == "ready", self.new_log()

    def start(self, timeout=60, settle=0.05):
        what, rc = self.attempt(timeout, settle)
        if what != "ready":
            raise RuntimeError("rmemd did not get ready (%s %s):\n%s"
                               % (what, rc, self.new_log()))

    def _kill(self):
        if self.p and self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Ends rmemd with sig (0: none, it is ending already); its exit
        status (128 + signal), or None when it had to be killed after
        timeout seconds (None: no limit)."""
        if self.p is None or self.p.poll() is not None:
            return _status(self.p.returncode) if self.p else None
        if sig:
            self.p.send_signal(sig)
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.p.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                self._kill()
                self.pump(0.05)
                return None
            # The store's messages as they come (a SIGTERM hands it the state).
            self.pump(0.02)
        self.pump(0.05)
        return _status(self.p.returncode)

    def kill(self):
        self.stop(signal.SIGKILL)

    def drop(self):
        """The store forgets everything, as if systemd had lost it."""
        for name in (self.store.names() if self.store else []):
            self.store.drop(name)

    def new_log(self):
        try:
            with open(self.log, errors="replace") as f:
                f.seek(self.mark)
                return f.read()
        except OSError:
            return ""

    def notified(self, line):
        self.pump(0)
        return line in self.store.lines[self.started:]

    def ready_line(self):
        return ("ready pid=%d dir=%s conf=%s log=%s admin=%s notify=%s port=%d rdma_port=%d "
                "metrics_port=%d host_port=%s metrics_host_port=%s"
                % (self.p.pid, self.tmp, self.conf, self.log, self.admin, self.store.path,
                   self.port, self.rdma_port, self.metrics_port, self.host_port,
                   hostport(self.host, self.metrics_port) if self.metrics_port else ""))

    def close(self):
        self._kill()
        if self.store:
            self.store.close()


# ---- the supervisor: C and shell callers -------------------------------------------

def _sig(name):
    return int(name) if name.isdigit() else getattr(signal, "SIG" + name.upper().replace("SIG", ""))


def on_term(d):
    """SIGTERM: rmemd killed, and out.  Not d.close(): the handler runs
    between two bytecodes of the main thread, which may be inside
    Popen.wait() with its lock held (waiting for rmemd to end), and a
    second wait() here would hang on that lock for ever, rmemd a zombie
    (seen: test_etcd_tls.sh's cleanup).  The subreaper or init reaps it."""
    p = d.p
    if p is not None and p.returncode is None:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os._exit(0)


def serve(d, out, ready_ms=60000):
    """Commands on stdin, one reply line each on out, until quit or EOF."""
    def say(text):
        out.write(text + "\n")
        out.flush()

    def start(ms):
        what, rc = d.attempt(ms / 1000.0)
        if what == "ready":
            say(d.ready_line())
        else:
            say("failed %s%s" % (what, "" if rc is None else " %d" % rc))

    start(ready_ms)
    parent = os.getppid()
    buf = b""
    while True:
        r, _, _ = select.select([0, d.store.sock], [], [], 1.0)
        # A shell's fifo never ends: the test's end is its going away.
        if os.getppid() != parent:
            break
        if d.store.sock in r:
            d.pump(0)
        if 0 not in r:
            continue
        got = os.read(0, 4096)
        if not got:
            break
        buf += got
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            cmd, _, arg = line.decode().strip().partition(" ")
            args = arg.split()
            if cmd == "start":
                start(int(args[0]) if args else 60000)
            elif cmd == "stop":
                rc = d.stop(_sig(args[0]), int(args[1]) / 1000.0 if len(args) > 1 else None)
                say("timeout" if rc is None else "exit %d" % rc)
            elif cmd == "restart":
                d.stop(_sig(args[0]), None)
                start(int(args[1]) if len(args) > 1 else 60000)
            elif cmd == "drop":
                d.drop()
                say("ok")
            elif cmd == "store":
                names = d.store.names()
                say("store %d %s" % (len(names), ",".join(names)))
            elif cmd == "notified":
                say("yes" if d.notified(arg.strip()) else "no")
            elif cmd == "quit":
                d.close()
                say("bye")
                return
            else:
                say("error unknown command %s" % cmd)
    d.close()


def main():
    a = argparse.ArgumentParser(description="start rmemd for a test")
    a.add_argument("--dir", help="private directory (made with mkdtemp when not given)")
    a.add_argument("--host", default="127.0.0.1")
    a.add_argument("--port", type=int, default=0, help="listen.tcp port (free one: 0)")
    a.add_argument("--rdma", action="store_true", help="listen.rdma on a port of its own")
    a.add_argument("--rdma-port", type=int, default=0)
    a.add_argument("--rdma-group", help='written as "rdma = { GROUP };"')
    a.add_argument("--metrics", action="store_true", help="listen.metrics on a free port")
    a.add_argument("--metrics-addr", help="listen.metrics as given")
    a.add_argument("--pool", default="64M")
    a.add_argument("--lease-ms", type=int, default=10000)
    a.add_argument("--max-clients", type=int, default=64)
    a.add_argument("--log-level", default="debug")
    a.add_argument("--extra", default="", help="appended at top level")
    a.add_argument("--cluster", help="ETCD,NAME,ID,LEASE_MS[,REPAIR_GRACE_MS]: a cluster block "
                   "(ID may be empty)")
    a.add_argument("--cluster-tls", help="CA,CERT,KEY: the cluster block's etcd_ca, etcd_cert "
                   "and etcd_key (each may be empty: left out)")
    a.add_argument("--listen-tls", help="CERT,KEY[,CA[,FLAG...]]: listen.tls on listen.tcp "
                   "(CA: clients' certificates verified; FLAG require: and required, "
                   "ktls-off: ktls = \"off\", cert-tenants: cert_tenants = true)")
    a.add_argument("--conf", help="config path; an existing file is used as it is")
    a.add_argument("--log", help="rmemd's stdout and stderr")
    a.add_argument("--admin", help="admin socket path")
    a.add_argument("--check", action="append", default=[],
                   help="at READY=1: tcp:PORT, unix:PATH or vmlck:")
    a.add_argument("--ready-ms", type=int, default=60000, help="how long the first start may take")
    a.add_argument("--no-store", action="store_true",
                   help="no NOTIFY_SOCKET: no fd store; ready when the admin socket answers")
    a.add_argument("--rmemd", default=RMEMD, help="the rmemd to run ($RMEM_BUILD/rmemd)")
    a.add_argument("--write-only", action="store_true",
                   help="write the config (--conf) and exit: for rmemd -t and the like")
    a.add_argument("prefix", nargs="*", help="a command that runs rmemd (prlimit ...)")
    o = a.parse_args()
    cluster = None
    if o.cluster:
        f = o.cluster.split(",")
        etcd, name, cid, lease = f[:4]
        cluster = {"etcd": etcd.replace(";", ","), "name": name, "id": cid,
                   "lease_ms": int(lease),
                   "repair_grace_ms": int(f[4]) if len(f) > 4 else None}
        if o.cluster_tls:
            ca, cert, key = o.cluster_tls.split(",")
            cluster.update(etcd_ca=ca, etcd_cert=cert, etcd_key=key)
    if o.dir:
        os.makedirs(o.dir, exist_ok=True)
    elif o.write_only:
        o.dir = os.path.dirname(os.path.abspath(o.conf))
    d = Rmemd(o.dir, host=o.host, port=o.port, rdma=o.rdma or bool(o.rdma_port),
              rdma_port=o.rdma_port, metrics=o.metrics, metrics_addr=o.metrics_addr,
              pool=o.pool, lease_ms=o.lease_ms, max_clients=o.max_clients,
              log_level=o.log_level, rdma_group=o.rdma_group, extra=o.extra,
              cluster=cluster, conf=o.conf, log=o.log, admin=o.admin, checks=o.check,
              prefix=o.prefix, die_with_parent=True, store=not o.no_store,
              listen_tls=o.listen_tls)
    d.rmemd = o.rmemd
    if o.write_only:
        d.pick_ports()
        d.write_conf()
        return 0
    # Our stdout is the reply channel: rmemd never writes to it.
    signal.signal(signal.SIGTERM, lambda *_: on_term(d))
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    serve(d, sys.stdout, o.ready_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
