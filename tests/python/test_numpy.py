"""numpy arrays go to and from remote memory in place: no second buffer
(tracemalloc sees what numpy and Python allocate), and another process
reads a named region's slices."""
import os
import subprocess
import sys
import tracemalloc

import pytest

np = pytest.importorskip("numpy")

from conftest import NET  # noqa: E402


def allocated_by(fn):
    """The peak of what Python and numpy allocated while fn() ran, in bytes."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_round_trip_no_copy(client):
    a = np.arange(1 << 20, dtype=np.float32)       # 4 MiB
    with client.alloc(a.nbytes) as r:
        r.write(0, a)
        out = np.empty_like(a)
        peak = allocated_by(lambda: r.read_into(0, out))
        assert np.array_equal(a, out)
        assert peak < 64 << 10, "read_into allocated %d bytes" % peak
        peak = allocated_by(lambda: r.write(0, a))
        assert peak < 64 << 10, "write allocated %d bytes" % peak
        # A 2-D slice of rows is contiguous: in place too.
        m = np.zeros((1024, 1024), dtype=np.float32)
        r.read_into(0, m[256:512])
        assert np.array_equal(m[256:512].ravel(), a[:256 * 1024])
        # A strided view is not one buffer: refused, never copied.
        with pytest.raises((BufferError, TypeError)):
            r.read_into(0, m[:, 0])


def test_tracemalloc_sees_a_copy():
    """The check above can fail: r.read() makes a bytes object of n bytes,
    which tracemalloc does count."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        b = bytes(4 << 20)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak >= 4 << 20 and len(b)


WRITER = r"""
import sys, numpy as np, rmem
ep, key, name, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = rmem.connect(ep, tenant="ml", secret_file=key)
a = np.arange(n, dtype=np.int64)
r = c.create(name, a.nbytes)
r.write(0, a)
print("stored", flush=True)
"""


def test_another_process_reads_slices(daemon):
    name, n = "py/array", 256 * 1024                  # 2 MiB of int64
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-c", WRITER, daemon.endpoint(NET), daemon.key, name,
                        str(n)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "stored" in p.stdout, p.stderr
    with daemon.connect(NET) as c:
        with c.open(name, "r") as r:
            part = np.empty(1024, dtype=np.int64)
            for start in (0, 1024, n - 1024):
                r.read_into(start * 8, part)
                assert np.array_equal(part, np.arange(start, start + 1024))
        c.unlink(name)
