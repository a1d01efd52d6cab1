#!/usr/bin/env python3
# cluster_keeper.py - one rmemd of tests/func/test_cluster_lib.sh, run under
# the fd store emulator (tests/lib/fdstore.py) so that it can be restarted
# without loss, as systemd would restart it.  Commands come one per line
# on a fifo, "CMD SEQ"; when one is done "SEQ ok" (or "SEQ fail") is
# written to the ack file:
#   kill    kill -9 the daemon; its memfds stay in the store
#   start   start it again with what the store keeps (restart without loss)
#   fresh   drop the store, start it again (its memory is new)
#   restart SIGTERM, as systemctl restart: the daemon shuts down keeping
#           its state in the store, and is started again with it
# The daemon's pid is kept in pidfile.
#
#   cluster_keeper.py DIR RMEMD CONF LOG PIDFILE FIFO ACK
import os
import select
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fdstore import FdStore  # noqa: E402


def main():
    d, rmemd, conf, log, pidfile, fifo, ack = sys.argv[1:8]
    os.makedirs(d, exist_ok=True)
    st = FdStore(d)
    proc = [None]

    def start():
        p = st.start([rmemd, "-c", conf], log)
        proc[0] = p
        with open(pidfile, "w") as f:
            f.write("%d\n" % p.pid)
        return st.wait_for("READY=1", 60)

    def stop(sig):
        p = proc[0]
        if p and p.poll() is None:
            p.send_signal(sig)
            p.wait()
        st.pump(0.2)
        return True

    def kill():
        return stop(signal.SIGKILL)

    def term():
        return stop(signal.SIGTERM)

    if not start():
        sys.exit(1)
    fd = os.open(fifo, os.O_RDWR)
    buf = b""
    try:
        while True:
            r, _, _ = select.select([fd, st.sock], [], [], 0.2)
            if st.sock in r:
                st.pump()
            if fd not in r:
                continue
            buf += os.read(fd, 4096)
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                cmd, _, seq = line.decode().partition(" ")
                if cmd == "kill":
                    good = kill()
                elif cmd == "start":
                    good = start()
                elif cmd == "restart":
                    good = term() and start()
                elif cmd == "fresh":
                    for name in st.names():
                        st.drop(name)
                    good = start()
                elif cmd == "quit":
                    kill()
                    return
                else:
                    good = False
                with open(ack, "a") as f:
                    f.write("%s %s\n" % (seq, "ok" if good else "fail"))
    finally:
        kill()
        st.close()


main()
