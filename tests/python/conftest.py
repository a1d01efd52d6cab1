"""Fixtures of the Python binding's tests: a real rmemd on private paths
and a free port (as tests/lib/daemon.c starts it), and clients of it over
each transport.

Over RDMA (RMEM_TEST_TRANSPORT=rdma, in the test VM) the daemon listens on
RMEM_VM_RDMA_ADDR and the network client connects with rdma://; on the host
the network client is tcp://.  Either way "unix" is the admin socket.
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

import rmem

BUILD = os.environ.get("RMEM_BUILD", "build")
RDMA = os.environ.get("RMEM_TEST_TRANSPORT") == "rdma"
NET = "rdma" if RDMA else "tcp"
TENANT = "ml"
QUOTA = 4 << 20
MAX_HANDLES = 16


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
        for _ in range(5):
            self.port = free_port(self.host)
            rdma = "%s:%d" % (self.host, free_port(self.host)) if RDMA else ""
            conf = os.path.join(self.dir, "rmemd.conf")
            with open(conf, "w") as f:
                f.write('listen = { tcp = "%s:%d"; rdma = "%s"; admin = "%s"; metrics = ""; };\n'
                        % (self.host, self.port, rdma, self.sock))
                f.write('pools = ( { name = "default"; size = "%s"; hugepages = "off"; '
                        'alignment = 64; } );\n' % self.pool)
                f.write("limits = { max_clients = 256; lease_timeout_ms = 10000; "
                        "max_handles = %d; };\n" % MAX_HANDLES)
                f.write('log = { level = "info"; };\n')
                f.write('tenants = ( { name = "%s"; secret_file = "%s"; quota = "%d"; } );\n'
                        % (TENANT, self.key, QUOTA))
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen([os.path.join(BUILD, "rmemd"), "-c", conf],
                                             stdout=log, stderr=log)
            if self.wait_ready():
                return
            self.stop()
        raise RuntimeError("rmemd did not start: " + open(self.log).read()[-2000:])

    def wait_ready(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                rmem.connect("unix:" + self.sock).close()
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def endpoint(self, transport):
        if transport == "unix":
            return "unix:" + self.sock
        return "%s://%s:%d" % (transport, self.host, self.port)

    def connect(self, transport=NET, **kw):
        if transport != "unix" and "tenant" not in kw:
            kw.update(tenant=TENANT, secret_file=self.key)
        return rmem.connect(self.endpoint(transport), **kw)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

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
