"""Every errno the API can produce arrives as OSError with that errno (so
Python's subclass) and rmem_strerror's text."""
import errno
import os
import signal
import threading

import pytest

import rmem
from conftest import NET, RDMA, TENANT, Daemon, QUOTA, MAX_HANDLES, free_port


def check(excinfo, code, cls=OSError):
    e = excinfo.value
    assert type(e) is cls, (type(e), e)
    assert e.errno == code, e
    assert e.strerror == rmem.strerror(-code), e
    assert str(e) == "[Errno %d] %s" % (code, rmem.strerror(code))


def test_connection_refused(daemon):
    with pytest.raises(OSError) as e:
        rmem.connect("tcp://127.0.0.1:%d" % free_port("127.0.0.1"))
    check(e, errno.ECONNREFUSED, ConnectionRefusedError)


def test_wrong_secret(daemon):
    with pytest.raises(OSError) as e:
        rmem.connect(daemon.endpoint(NET), tenant="ml", secret_file=daemon.badkey)
    check(e, errno.EACCES, PermissionError)


def test_missing_secret_file(daemon):
    with pytest.raises(OSError) as e:
        rmem.connect(daemon.endpoint(NET), tenant="ml", secret_file=daemon.key + ".none")
    check(e, errno.ENOENT, FileNotFoundError)


def test_bad_options(daemon):
    with pytest.raises(OSError) as e:
        rmem.connect(daemon.endpoint(NET), tenant="ml")   # no secret_file
    check(e, errno.EINVAL)
    with pytest.raises(OSError) as e:
        rmem.connect("nonsense://x")
    check(e, errno.EINVAL)


def test_unknown_congestion(daemon):
    with pytest.raises(OSError) as e:
        daemon.connect("tcp" if not RDMA else NET, tcp_congestion="nosuchcc")
    check(e, errno.ENOPROTOOPT)


@pytest.mark.skipif(RDMA, reason="this machine has RDMA")
def test_rdma_without_rdma(daemon):
    with pytest.raises(OSError) as e:
        rmem.connect("127.0.0.1:%d" % daemon.port, transport="rdma", tenant="ml",
                     secret_file=daemon.key)
    assert e.value.errno == errno.ENOTSUP
    assert e.value.strerror == rmem.strerror(-errno.ENOTSUP)


def test_region_errors(client):
    with client.alloc(4096) as r:
        with pytest.raises(OSError) as e:
            r.read(len(r) - 1, 2)
        check(e, errno.ERANGE)
        with pytest.raises(OSError) as e:
            r.write(len(r), b"x")
        check(e, errno.ERANGE)
        with pytest.raises(OSError) as e:
            r.read_into(len(r) - 3, bytearray(4))
        check(e, errno.ERANGE)
        with pytest.raises(OSError) as e:
            r.cas(4, 0, 1)
        check(e, errno.EINVAL)
        with pytest.raises(OSError) as e:
            r.faa(len(r), 1)
        check(e, errno.ERANGE)
    with pytest.raises(OSError) as e:
        client.alloc(0)
    check(e, errno.EINVAL)
    with pytest.raises(TypeError):
        client.alloc("big")
    with pytest.raises(OverflowError):
        client.alloc(-1)
    with pytest.raises(TypeError):
        client.alloc(1).write(0, "a str is not bytes")
    with pytest.raises(TypeError):
        client.alloc(1).read_into(0, b"bytes are read-only")


def test_names_errors(client, transport):
    name = "py/err-" + transport
    r = client.create(name, 4096)
    with pytest.raises(OSError) as e:
        client.create(name, 4096)
    check(e, errno.EEXIST, FileExistsError)
    with pytest.raises(OSError) as e:
        client.open(name + "-none", "r")
    check(e, errno.ENOENT, FileNotFoundError)
    with pytest.raises(OSError) as e:
        client.unlink(name + "-none")
    check(e, errno.ENOENT, FileNotFoundError)
    with pytest.raises(OSError) as e:
        client.create("has space", 4096)
    check(e, errno.EINVAL)
    with pytest.raises(OSError) as e:
        client.open("x" * 256, "r")
    check(e, errno.ENAMETOOLONG)
    with pytest.raises(ValueError):
        client.open(name, "x")
    ro = client.open(name, "r")
    with pytest.raises(OSError) as e:
        ro.write(0, b"x")
    check(e, errno.EACCES, PermissionError)
    with pytest.raises(OSError) as e:
        ro.faa(0, 1)
    check(e, errno.EACCES, PermissionError)
    client.unlink(name)
    r.free()
    ro.free()


def test_names_with_nul(daemon, client, admin, transport):
    """A name is a C string to librmem: "a\0b" would reach rmem_create as
    "a" and "kv\0x" open "kv", another region than the one asked for.
    Every name argument with a NUL is ValueError, and nothing is made."""
    base = "py/nul-" + transport
    keep = client.create(base, 4096)
    calls = [
        ("create", lambda n: client.create(n, 4096)),
        ("open r", lambda n: client.open(n, "r")),
        ("open rw", lambda n: client.open(n, "rw")),
        ("unlink", lambda n: client.unlink(n)),
        ("unlink revoke", lambda n: client.unlink(n, revoke=True)),
    ]
    for what, call in calls:
        for name in (base + "\0x", "\0" + base, base + "\0"):
            with pytest.raises(ValueError, match="NUL"):
                call(name)
            assert not any("\0" in n["name"] for n in admin.names()), what
        with pytest.raises(TypeError):
            call(base.encode())          # bytes names are not taken
    # The prefix before the NUL is untouched: still there, still one handle.
    mine = [n for n in admin.names() if n["name"] == base]
    assert len(mine) == 1 and mine[0]["handles"] == 1, mine
    assert not any(n["name"] == "py" for n in admin.names())
    # Other strings that name something on the way to librmem: "ml\0x"
    # would authenticate as tenant ml.
    ep = daemon.endpoint(NET)
    for kw in ({"tenant": TENANT + "\0x", "secret_file": daemon.key},
               {"transport": NET + "\0x"}, {"tcp_congestion": "cubic\0x"}):
        with pytest.raises(ValueError, match="NUL"):
            rmem.connect(ep, **kw).close()
    with pytest.raises(ValueError):
        rmem.connect(ep + "\0x")
    client.unlink(base)
    keep.free()


def test_too_many_handles(daemon, transport):
    with daemon.connect(transport) as c:
        name = "py/handles-" + transport
        keep = [c.create(name, 4096)]
        with pytest.raises(OSError) as e:
            for _ in range(MAX_HANDLES + 1):
                keep.append(c.open(name, "r"))
        check(e, errno.EMFILE)
        assert len(keep) == MAX_HANDLES
        c.unlink(name)


def test_quota(daemon):
    with daemon.connect(NET) as c:
        with pytest.raises(OSError) as e:
            c.alloc(QUOTA + 4096)
        check(e, errno.EDQUOT)


def test_no_memory(daemon):
    with daemon.connect("unix") as c:   # anonymous: no quota, the pool's 64 MiB
        with pytest.raises(OSError) as e:
            c.alloc(1 << 30)
        check(e, errno.ENOMEM)


def test_admin_only(daemon):
    with daemon.connect(NET) as c:
        with pytest.raises(OSError) as e:
            c.names()
        check(e, errno.EACCES, PermissionError)


@pytest.fixture
def own_daemon():
    d = Daemon(pool="16M")
    d.start()
    yield d
    try:
        os.kill(d.proc.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    d.cleanup()


def test_timeout(own_daemon):
    c = own_daemon.connect(NET, timeout_ms=500, resume_ms=0)
    r = c.alloc(4096)
    os.kill(own_daemon.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(OSError) as e:
            # Over RDMA a read is one-sided (the NIC answers it): time out
            # in a call the daemon serves.
            c.stats() if RDMA else r.read(0, 8)
        check(e, errno.ETIMEDOUT, TimeoutError)
    finally:
        os.kill(own_daemon.proc.pid, signal.SIGCONT)
    # The stream state is unknown after a timeout: the client is broken.
    with pytest.raises(OSError) as e:
        r.read(0, 8)
    check(e, errno.ECONNRESET, ConnectionResetError)
    c.close()


def test_connection_lost(own_daemon):
    c = own_daemon.connect(NET, resume_ms=0)
    r = c.alloc(4096)
    own_daemon.proc.kill()
    own_daemon.proc.wait()
    with pytest.raises(OSError) as e:
        r.write(0, b"gone")
    check(e, errno.ECONNRESET, ConnectionResetError)
    c.close()


def test_atomic_in_flight_across_restart(own_daemon):
    """An atomic whose connection is lost while in flight, on a client
    that resumes: ECONNABORTED, outcome unknown.  The daemon is stopped so
    the atomic stays in flight, then killed and started again."""
    c = own_daemon.connect("unix", resume_ms=10000, timeout_ms=20000)
    r = c.alloc(4096)
    os.kill(own_daemon.proc.pid, signal.SIGSTOP)
    box = {}

    def faa():
        try:
            box["old"] = r.faa(0, 1)
        except OSError as e:
            box["err"] = e

    t = threading.Thread(target=faa)
    t.start()
    t.join(0.5)
    own_daemon.proc.kill()
    own_daemon.proc.wait()
    own_daemon.start()
    t.join(30)
    assert not t.is_alive()
    # Without the fd store the new rmemd knows no session: the resume
    # fails and the client is broken (ECONNRESET); with it, ECONNABORTED.
    e = box.get("err")
    assert e is not None, box
    assert e.errno in (errno.ECONNABORTED, errno.ECONNRESET), e
    assert e.strerror == rmem.strerror(e.errno)
    assert isinstance(e, ConnectionError)
    c.close()
