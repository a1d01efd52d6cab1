# notify_listen.py SOCKET LINE TIMEOUT [CHECK...] - the systemd side of
# sd_notify for shell tests (tests/lib/rmemd.sh): binds the NOTIFY_SOCKET
# path, prints every line it receives as "msg LINE", and exits 0 once LINE
# came (1 after TIMEOUT seconds).  At that moment it checks what READY=1
# promises: each CHECK is tcp:PORT or unix:PATH (connect to it, "check KIND
# ok" or "check KIND failed ...") or vmlck: (the sender's locked memory,
# "vmlck KB"; the kernel names the sender through SO_PASSCRED).
import socket, struct, sys, time

path, want, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
checks = sys.argv[4:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind(path)
deadline = time.monotonic() + timeout

def check(what, pid):
    kind, _, arg = what.partition(":")
    try:
        if kind == "tcp":
            c = socket.create_connection(("127.0.0.1", int(arg)), timeout=2)
        elif kind == "unix":
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.settimeout(2)
            c.connect(arg)
        elif kind == "vmlck":
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmLck:"):
                        print("vmlck %s" % line.split()[1], flush=True)
            return
        c.close()
        print("check %s ok" % kind, flush=True)
    except OSError as e:
        print("check %s failed %s" % (kind, e), flush=True)

while True:
    left = deadline - time.monotonic()
    if left <= 0:
        print("timeout", flush=True)
        sys.exit(1)
    s.settimeout(left)
    try:
        data, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
    except socket.timeout:
        print("timeout", flush=True)
        sys.exit(1)
    pid = 0
    for level, kind, cdata in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", cdata[:12])[0]
    for line in data.decode(errors="replace").splitlines():
        print("msg " + line, flush=True)
        if line == want:
            for what in checks:
                check(what, pid)
            sys.exit(0)
