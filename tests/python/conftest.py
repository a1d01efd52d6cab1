"""Fixtures of the Python binding's tests: a real rmemd on private paths
and a free port (tests/lib/rmemd_start.py, the tests' one starter), and clients of it over
each transport.

Over RDMA (RMEM_TEST_TRANSPORT=rdma, in the test VM) the daemon listens on
RMEM_VM_RDMA_ADDR and the network client connects with rdma://; on the host
the network client is tcp://.  Either way "unix" is the admin socket.
"""
import os
import shutil
import socket
import sys
import tempfile

import pytest

import rmem

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rmemd_start import Rmemd  # noqa: E402  (the one way the tests start rmemd)

BUILD = os.environ.get("RMEM_BUILD", "build")
RDMA = os.environ.get("RMEM_TEST_TRANSPORT") == "rdma"
NET = "rdma" if RDMA else "tcp"
TENANT = "ml"
QUOTA = 4 << 20
MAX_HANDLES = 16


def eventually(check, timeout=10.0):
    """check() polled until it is true (then True), or False after timeout
    seconds: for what the daemon does once it hears of something (a session
    that ended), which a loaded host may take a while to get to."""
    import time
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def free_port(host):
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    def __init__(self, pool="64M"):
        self.dir = tempfile.mkdtemp(prefix="rmem-py.")
        self.host = os.environ.get("RMEM_VM_RDMA_ADDR", "127.0.0.1") if RDMA else "127.0.0.1"
        self.sock = os.path.join(self.dir, "rmemd.sock")
        self.key = os.path.join(self.dir, "ml.key")
        self.badkey = os.path.join(self.dir, "bad.key")
        for path, secret in ((self.key, "python-binding-secret\n"),
                             (self.badkey, "not-the-secret\n")):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, secret.encode())
            os.close(fd)
        self.pool = pool
        self.proc = None
        self.log = os.path.join(self.dir, "rmemd.log")

    def start(self):
        conf = ('limits = { max_clients = 256; lease_timeout_ms = 10000; max_handles = %d; };\n'
                'tenants = ( { name = "%s"; secret_file = "%s"; quota = "%d"; } );'
                % (MAX_HANDLES, TENANT, self.key, QUOTA))
        self.rmemd = Rmemd(self.dir, host=self.host, rdma=RDMA, pool=self.pool,
                           log_level="info", extra=conf, admin=self.sock, log=self.log)
        self.rmemd.start(timeout=30, settle=0)
        self.port = self.rmemd.port
        self.proc = self.rmemd.p

    def endpoint(self, transport):
        if transport == "unix":
            return "unix:" + self.sock
        return "%s://%s:%d" % (transport, self.host, self.port)

    def connect(self, transport=NET, **kw):
        if transport != "unix" and "tenant" not in kw:
            kw.update(tenant=TENANT, secret_file=self.key)
        return rmem.connect(self.endpoint(transport), **kw)

    def stop(self):
        if self.proc:
            self.rmemd.stop(timeout=20)
            self.rmemd.close()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon():
    d = Daemon()
    d.start()
    yield d
    d.cleanup()


# Every API test runs over the network transport (tcp on the host, rdma in
# the VM) and the Unix socket.
@pytest.fixture(params=[NET, "unix"])
def transport(request):
    return request.param


@pytest.fixture
def client(daemon, transport):
    c = daemon.connect(transport)
    yield c
    c.close()


@pytest.fixture
def admin(daemon):
    c = daemon.connect("unix")
    yield c
    c.close()
