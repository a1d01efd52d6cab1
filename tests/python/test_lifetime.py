"""Use after free and after close raise ValueError, never crash; close()
waits for calls in progress on other threads."""
import os
import signal
import threading
import time

import pytest

from conftest import NET, RDMA, Daemon


def region_calls(r):
    buf = bytearray(8)
    return [
        lambda: r.read(0, 8),
        lambda: r.write(0, b"x"),
        lambda: r.read_into(0, buf),
        lambda: r.cas(0, 0, 1),
        lambda: r.faa(0, 1),
        lambda: r.__enter__(),
    ]


def client_calls(c):
    return [
        lambda: c.alloc(64),
        lambda: c.create("py/after", 64),
        lambda: c.open("py/after", "r"),
        lambda: c.unlink("py/after"),
        lambda: c.names(),
        lambda: c.stats(),
        lambda: c.transport,
        lambda: c.register(bytearray(8)),
        lambda: c.fileno(),
        lambda: c.__enter__(),
    ]


def test_use_after_free(client):
    r = client.alloc(64)
    r.free()
    r.free()   # a second free is a no-op
    for call in region_calls(r):
        with pytest.raises(ValueError):
            call()
    assert r.freed and len(r) >= 64   # what does not touch the daemon works


def test_use_after_close(daemon, transport):
    c = daemon.connect(transport)
    r = c.alloc(64)
    reg = c.register(bytearray(64))
    c.close()
    c.close()  # idempotent
    assert c.closed and r.freed
    for call in client_calls(c) + region_calls(r):
        with pytest.raises(ValueError):
            call()
    r.free()     # freed with the session: nothing left to do
    reg.close()  # released by the close
    del r, reg, c


def test_region_outlives_client_reference(daemon, transport):
    c = daemon.connect(transport)
    r = c.alloc(64)
    del c                # the region keeps its client alive
    r.write(0, b"alive")
    assert r.read(0, 5) == b"alive"
    r.client.close()
    with pytest.raises(ValueError):
        r.read(0, 5)


def test_close_waits_for_calls_in_progress():
    """close() on one thread while another waits in a read: the read ends
    (it is not cut off under the library), then the client closes."""
    d = Daemon(pool="16M")
    d.start()
    try:
        c = d.connect(NET, timeout_ms=20000)
        r = c.alloc(4096)
        r.write(0, b"before")
        os.kill(d.proc.pid, signal.SIGSTOP)
        box = {}

        def reader():
            try:
                # Over RDMA a read is one-sided (the NIC answers it): wait
                # in a call the daemon serves.
                if RDMA:
                    box["data"] = c.stats() and b"before"
                else:
                    box["data"] = r.read(0, 6)
            except Exception as e:  # noqa: BLE001 - whatever it is, we look
                box["err"] = e

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.3)
        closer = threading.Thread(target=c.close)
        closer.start()
        time.sleep(0.3)
        assert closer.is_alive(), "close() waits for the read in progress"
        assert not c.closed or t.is_alive()
        os.kill(d.proc.pid, signal.SIGCONT)
        t.join(20)
        closer.join(20)
        assert not t.is_alive() and not closer.is_alive()
        assert box.get("data") == b"before", box
        assert c.closed
        with pytest.raises(ValueError):
            r.read(0, 6)
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
        d.cleanup()


def test_many_threads_close_race(daemon, transport):
    """Threads hammer a client while another closes it: every call either
    works or raises ValueError (closed) -- no crash, no other error."""
    for _ in range(3):
        c = daemon.connect(transport)
        r = c.alloc(4096)
        bad = []
        stop = threading.Event()

        def work():
            while not stop.is_set():
                try:
                    r.write(0, b"race")
                    r.read(0, 4)
                except ValueError:
                    return
                except Exception as e:  # noqa: BLE001
                    bad.append(e)
                    return

        ts = [threading.Thread(target=work) for _ in range(8)]
        for t in ts:
            t.start()
        time.sleep(0.05)
        c.close()
        stop.set()
        for t in ts:
            t.join(10)
        assert not bad, bad
