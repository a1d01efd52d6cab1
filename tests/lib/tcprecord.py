#!/usr/bin/env python3
"""tcprecord.py - a TCP proxy on loopback that keeps every byte it carries,
for tests that must show what a stream does not hold in clear (a packet
capture without tcpdump or its rights: tests/func/test_tls.sh).

    tcprecord.py TARGET_HOST:PORT OUT

Listens on a free port of 127.0.0.1, prints it on a line of its own, and
forwards each connection to TARGET; the bytes of both directions are
appended to OUT as they pass.  Runs until killed (SIGTERM)."""
import socket
import sys
import threading


def pump(src, dst, out, lock):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            with lock:
                out.write(data)
                out.flush()
            dst.sendall(data)
    except OSError:
        pass
    finally:
        # EOF on one side ends that direction only: the peer may still answer.
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(conn, target, out, lock):
    host, port = target.rsplit(":", 1)
    try:
        up = socket.create_connection((host, int(port)))
    except OSError:
        conn.close()
        return
    a = threading.Thread(target=pump, args=(conn, up, out, lock), daemon=True)
    b = threading.Thread(target=pump, args=(up, conn, out, lock), daemon=True)
    a.start()
    b.start()
    a.join()
    b.join()
    conn.close()
    up.close()


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: tcprecord.py TARGET_HOST:PORT OUT\n")
        return 2
    target, path = sys.argv[1], sys.argv[2]
    lock = threading.Lock()
    out = open(path, "ab")
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    print(ls.getsockname()[1], flush=True)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, target, out, lock), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
