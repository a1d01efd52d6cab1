# fdstore.py - systemd's side of the file-descriptor store, for host tests
# that restart rmemd without systemd: the one emulator, behind
# tests/lib/rmemd_start.py (docs/architecture.md, "Restart without
# loss").  It binds a NOTIFY_SOCKET, keeps the fds that FDSTORE=1 messages
# carry (SCM_RIGHTS) under their FDNAME, drops them on FDSTOREREMOVE=1, and
# starts each rmemd with what it keeps as LISTEN_FDS / LISTEN_FDNAMES from
# fd 3 on, as systemd does.  sd_listen_fds() checks LISTEN_PID == getpid(),
# so the child is started as `sh -c 'LISTEN_PID=$$ exec rmemd ...'`.
#
#   st = FdStore(tmpdir)
#   p = st.start([rmemd, "-c", conf], log)     # a Popen
#   st.wait_for("READY=1", 60)
#   ... p.kill(); p.wait(); st.pump() ...
#   st.names() -> ["rmem-pool-default", "rmem-state"]
#   st.fd("rmem-state") -> an fd the test may damage
import array
import os
import select
import socket
import subprocess
import time


class FdStore:
    def __init__(self, tmpdir):
        self.path = os.path.join(tmpdir, "notify.sock")
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.store = []      # (name, fd), in the order they came
        self.lines = []      # every notify line, for asserts
        self.removed = []    # names FDSTOREREMOVE named

    def close(self):
        for _, fd in self.store:
            os.close(fd)
        self.store = []
        self.sock.close()

    def names(self):
        return sorted(n for n, _ in self.store)

    def fd(self, name):
        for n, fd in self.store:
            if n == name:
                return fd
        return None

    def drop(self, name):
        """Forgets name, as if systemd had lost it."""
        keep = []
        for n, fd in self.store:
            if n == name:
                os.close(fd)
            else:
                keep.append((n, fd))
        self.store = keep

    def _handle(self, data, fds):
        fields = {}
        for line in data.decode(errors="replace").splitlines():
            self.lines.append(line)
            k, _, v = line.partition("=")
            fields[k] = v
        name = fields.get("FDNAME", "stored")
        if fields.get("FDSTOREREMOVE") == "1":
            self.removed.append(name)
            self.drop(name)
        if fields.get("FDSTORE") == "1":
            for fd in fds:
                self.store.append((name, fd))
            fds = []
        for fd in fds:  # fds nobody asked us to keep
            os.close(fd)

    def pump(self, timeout=0.0):
        """Takes every message waiting (up to timeout seconds for the first)."""
        got = 0
        while True:
            r, _, _ = select.select([self.sock], [], [], timeout)
            if not r:
                return got
            timeout = 0
            fds = array.array("i")
            data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(64 * fds.itemsize))
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[:len(cdata) - (len(cdata) % fds.itemsize)])
            self._handle(data, list(fds))
            got += 1

    def wait_for(self, line, timeout):
        """Pumps until a notify line equal to line arrives; True if it did."""
        start = len(self.lines)
        deadline = time.monotonic() + timeout
        while True:
            if line in self.lines[start:]:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.pump(min(left, 0.2))

    def start(self, argv, log_path, env=None, preexec=None):
        """Starts argv with the store's fds as LISTEN_FDS from fd 3; preexec
        runs in the child too."""
        fds = [fd for _, fd in self.store]
        names = [n for n, _ in self.store]
        e = dict(os.environ if env is None else env)
        e["NOTIFY_SOCKET"] = self.path
        for k in ("LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PID"):
            e.pop(k, None)
        if fds:
            e["LISTEN_FDS"] = str(len(fds))
            e["LISTEN_FDNAMES"] = ":".join(names)
        n = len(fds)

        def place():
            # Out of the way first, then onto 3, 4, ...: a source may sit
            # where another one goes.
            high = [os.dup2(fd, 1000 + i) for i, fd in enumerate(fds)]
            for i, fd in enumerate(high):
                os.dup2(fd, 3 + i)
                os.set_inheritable(3 + i, True)
            for fd in high:
                os.close(fd)
            if preexec:
                preexec()

        log = open(log_path, "ab")
        cmd = ["sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$@"', "sh"] + list(argv)
        if not fds:
            cmd = list(argv)
        p = subprocess.Popen(cmd, env=e, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=place, pass_fds=tuple(range(3, 3 + n)))
        log.close()
        return p
