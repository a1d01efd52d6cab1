#!/usr/bin/env python3
# run-tests-timeout: 600
# test_keepstate.py - no path discards memory without the operator asking
# (docs/architecture.md, "Upgrade and rollback"), on the host through the
# emulated fd store (tests/lib/fdstore.py):
#   - a state that cannot be restored (truncated, a damaged slot, a damaged
#     header, a newer format forged with a good check, a pool smaller, removed,
#     renamed or of another alignment in the config, a pool memfd lost): rmemd
#     stays up and serves nothing (no TCP port, no admin socket), READY=1 and a
#     STATUS= that names the cause and the ways out, the log line likewise; the
#     store keeps every fd (the same files, nothing FDSTOREREMOVEd) and every
#     byte, across a SIGTERM too; the cause undone, the next start restores the
#     named region's bytes; `--discard-state` then starts fresh, and says so;
#     a removed pool that holds nothing goes, with the state kept;
#   - a pool grown in the config, and a pool added, are taken at the restart
#     with every region's bytes (named, and anonymous through RESUME + REKEY);
#     the grown tail is handed out and kept over a kill -9; a growth cut short
#     by a crash (memfd grown, header not; a new pool's memfd the header does
#     not name) restores;
#   - upgrade and rollback: the previous release ($RMEM_PREV_RELEASE, else the
#     newest vX.Y.Z tag of another version, else the commit before the one
#     that set the Makefile's VERSION) is built from git
#     in a temporary directory; this rmemd restores its state, it restores this
#     rmemd's state (no redundant pieces), grown pool included.
import os
import signal
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from restartlib import (RMEMD, STATE_HDR_LEN, STATE_SLOT_LEN, Daemon,  # noqa: E402
                        crc32c, diag, ok, pattern, run_cases, state_name_slot)

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def listening(d):
    """Whether the TCP port or the admin socket takes a connection."""
    for fam, addr in ((socket.AF_INET, ("127.0.0.1", d.port)), (socket.AF_UNIX, d.admin)):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(1)
        try:
            s.connect(addr)
            return True
        except OSError:
            pass
        finally:
            s.close()
    return False


def store_files(d):
    """(name, device, inode) of every fd the store holds: the same files or not."""
    out = []
    for n, fd in d.store.store:
        st = os.fstat(fd)
        out.append((n, st.st_dev, st.st_ino))
    return sorted(out)


def make_precious(d, size=4096):
    c = d.tcp()
    c.hello()
    _, r = c.create("precious", size)
    c.write(r["id"], r["key"], 0, pattern(7, size))
    c.close()


def precious_ok(d, size=4096):
    c = d.tcp()
    c.hello()
    st, r = c.open("precious", 1)
    s1, got = c.read(r["id"], r["key"], 0, size) if st == 0 else (st, b"")
    c.close()
    return st == 0 and s1 == 0 and got == pattern(7, size)


def with_conf(d, pool, extra=""):
    return lambda: d.write_conf(pool, 2000, extra)


# ---- refused: the state is kept -----------------------------------------------------

def refused_case(tmp, label, damage, expect):
    """damage(d) breaks the kept state and returns how to undo it (None: it
    cannot be undone, the loss happened before rmemd ran)."""
    d = Daemon(tmp)
    d.start()
    make_precious(d)
    d.stop(signal.SIGKILL)
    undo = damage(d)
    before, nrem = store_files(d), len(d.store.removed)
    up, log = d.try_start()
    lines = [x for x in log.splitlines() if "not restoring" in x]
    status = [x for x in d.store.lines[d.started:] if x.startswith("STATUS=")]
    ok(up and d.p.poll() is None, "%s: rmemd stays up (READY=1) rather than fail the unit" % label)
    ok(len(lines) == 1 and expect in lines[0] and "serving nothing" in lines[0] and
       "--discard-state" in lines[0] and "starting fresh" not in log,
       "%s: one log line names the cause and the ways out, nothing starts fresh" % label)
    diag(lines)
    ok(status and expect in status[-1] and "discard" in status[-1] and
       "refused" in status[-1], "%s: STATUS= says so (%s)" % (label, status[-1:]))
    ok(not listening(d),
       "%s: nothing is served: no TCP listener, no admin socket" % label)
    ok(store_files(d) == before and len(d.store.removed) == nrem,
       "%s: the fd store holds the same files, none removed (%s)" % (label, d.store.names()))
    rc = d.stop()
    ok(rc == 0 and store_files(d) == before and len(d.store.removed) == nrem,
       "%s: a SIGTERM ends it with 0 and the store as it was (status %s)" % (label, rc))
    if undo:
        undo()
        up, log = d.try_start()
        ok(up and "restored from the fd store" in log and precious_ok(d),
           "%s: the cause undone, the next start restores the named region's bytes" % label)
        d.stop(signal.SIGKILL)
        damage(d)
    d.args = ["--discard-state"]
    up, log = d.try_start()
    d.args = []
    ok(up and "discarding what it keeps, as asked (--discard-state)" in log and listening(d),
       "%s: --discard-state drops it, says so, and serves" % label)
    c = d.tcp()
    c.hello()
    st, _ = c.open("precious")
    c.close()
    ok(st == 2 and "rmem-state" in d.store.names() and store_files(d) != before, "%s: after the discard the start is fresh (OPEN: %d)" % (label, st))
    d.stop()
    d.store.close()


def flip(fd, off):
    b = os.pread(fd, 1, off)
    os.pwrite(fd, bytes([b[0] ^ 0x5a]), off)
    return lambda: os.pwrite(fd, b, off)


def damages():
    def truncate(d):
        fd = d.store.fd("rmem-state")
        size = os.fstat(fd).st_size
        tail = os.pread(fd, 100, size - 100)
        os.ftruncate(fd, size - 100)
        return lambda: (os.ftruncate(fd, size), os.pwrite(fd, tail, size - 100))

    def slot(d):
        fd = d.store.fd("rmem-state")
        i = state_name_slot(fd, "precious")
        return flip(fd, STATE_HDR_LEN + i * STATE_SLOT_LEN + 24)

    def header(d):
        return flip(d.store.fd("rmem-state"), 40)

    def newer(d):
        # A format this rmemd does not know, with a check that holds: what a
        # later release would write, not damage.
        fd = d.store.fd("rmem-state")
        old = os.pread(fd, STATE_HDR_LEN, 0)
        h = bytearray(old)
        struct.pack_into("<I", h, 4, 2)
        struct.pack_into("<I", h, STATE_HDR_LEN - 8, crc32c(bytes(h[:STATE_HDR_LEN - 8])))
        os.pwrite(fd, bytes(h), 0)
        return lambda: os.pwrite(fd, old, 0)

    def shrink(d):
        d.write_conf("32M")
        return with_conf(d, "64M")

    def renamed(d):
        d.write_conf("64M", 2000, 'more_pools = ( { name = "second"; size = "8M"; '
                     'hugepages = "off"; alignment = 64; } );')
        # The state's pool 0 is "default": a config that puts another pool
        # first would hand its bytes out as another pool's.
        with open(d.conf) as f:
            text = f.read()
        text = text.replace('name = "default"', 'name = "first"', 1)
        with open(d.conf, "w") as f:
            f.write(text)
        return with_conf(d, "64M")

    def alignment(d):
        with open(d.conf) as f:
            text = f.read()
        with open(d.conf, "w") as f:
            f.write(text.replace("alignment = 64", "alignment = 4096"))
        return with_conf(d, "64M")

    def lost(d):
        d.store.drop("rmem-pool-default")
        return None

    return [("truncated state", truncate, "truncated"),
            ("damaged slot", slot, "damaged"),
            ("damaged header", header, "damaged"),
            ("newer format", newer, "of format 2"),
            ("pool smaller in the config", shrink, "never shrink"),
            ("pool renamed in the config", renamed, "in the state, first"),
            ("pool alignment changed", alignment, "alignment 4096"),
            ("pool memfd lost", lost, "no memfd for its pool default")]


def removed_pool(tmp):
    """A pool that holds a region, gone from the config: refused, kept."""
    second = ('more_pools = ( { name = "second"; size = "8M"; hugepages = "off"; '
              'alignment = 64; } );')
    d = Daemon(tmp, lease_ms=60000)
    d.write_conf("8M", 60000, second)
    d.start()
    c = d.tcp()
    c.hello()
    regs = []
    for i in range(3):   # 8 MiB pools: the third lands in "second"
        _, r = c.alloc(3 * MIB)
        c.write(r["id"], r["key"], 0, pattern(30 + i, 4096))
        regs.append(r)
    adm = d.adm()
    pools = {x[4] for x in adm.regions()}
    adm.close()
    ok(pools == {0, 1}, "removed pool: the regions are in both pools (%s)" % sorted(pools))
    d.stop(signal.SIGKILL)   # the session is kept with its regions
    c.close()
    before = store_files(d)
    d.write_conf("8M", 60000)
    up, log = d.try_start()
    ok(up and "pool second is in the state but not in the config, and holds 1 region(s)" in log
       and not listening(d), "removed pool: refused, named, nothing served")
    d.stop()
    ok(store_files(d) == before, "removed pool: the store keeps both pools and the state")
    d.write_conf("8M", 60000, second)
    up, log = d.try_start()
    adm = d.adm() if up else None
    ok(up and "restored from the fd store" in log and len(adm.regions()) == 3,
       "removed pool: put back, the regions are restored")
    adm.close()
    d.stop()
    d.store.close()
    # An empty pool may go: nothing in it is lost.
    os.mkdir(os.path.join(tmp, "empty"))
    d = Daemon(os.path.join(tmp, "empty"))
    d.write_conf("8M", 2000, second)
    d.start()
    make_precious(d)
    d.stop(signal.SIGKILL)
    d.write_conf("8M")
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and "pool second: in the state, not in the "
       "config, empty: it goes" in log and precious_ok(d) and
       d.store.names() == ["rmem-pool-default", "rmem-state"],
       "removed empty pool: restored without it, its memfd out of the store (%s)"
       % d.store.names())
    d.stop(signal.SIGKILL)
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and precious_ok(d),
       "removed empty pool: the next restart restores, the state names one pool")
    d.stop()
    d.store.close()


# ---- a pool grows, a pool is added ------------------------------------------------

def seeded(tmp, name, rmemd=RMEMD):
    """rmemd (64 MiB, long leases) stopped with SIGTERM after a session made
    a named region (pattern 1) and an anonymous one (pattern 2), 1 MiB each:
    (the daemon, HELLO's reply, the anonymous region)."""
    d = Daemon(tmp, lease_ms=60000)
    d.write_conf("64M", 60000)
    d.rmemd = rmemd
    d.start()
    a = d.tcp()
    _, ha = a.hello()
    _, n = a.create(name, MIB)
    a.write(n["id"], n["key"], 0, pattern(1, MIB))
    _, r = a.alloc(MIB)
    a.write(r["id"], r["key"], 0, pattern(2, MIB))
    d.stop()
    a.close()
    return d, ha, r


def test_grow(tmp):
    second = ('more_pools = ( { name = "second"; size = "16M"; hugepages = "off"; '
              'alignment = 64; } );')
    d, ha, r = seeded(tmp, "grow/named")
    d.write_conf("128M", 60000)
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and
       "grown from 67108864 to 134217728 bytes" in log,
       "grow: 64M -> 128M restores and says the pool grew")
    diag([x for x in log.splitlines() if "grown" in x or "names" in x])
    ok(os.fstat(d.store.fd("rmem-pool-default")).st_size == 128 * MIB,
       "grow: the kept memfd is 128 MiB now")
    adm = d.adm()
    ok(adm.stats()["pool"] == 128 * MIB, "grow: STATS says 128 MiB of pool")
    adm.close()
    b = d.tcp()
    st, _ = b.resume(ha["id"], ha["token"])
    st2, k = b.rekey(r["id"]) if st == 0 else (st, None)
    s3, got = b.read(r["id"], k["key"], 0, MIB) if st2 == 0 else (st2, b"")
    ok(st == 0 and s3 == 0 and got == pattern(2, MIB),
       "grow: the anonymous region's bytes are there (RESUME, REKEY, READ)")
    ok(precious_named(d, "grow/named", 1), "grow: the named region's bytes are there")
    st, big = b.alloc(100 * MIB)
    ok(st == 0, "grow: 100 MiB fit, so the new tail is handed out (ALLOC %d)" % st)
    b.write(big["id"], big["key"], 100 * MIB - 4096, pattern(3, 4096))
    d.stop(signal.SIGKILL)
    b.close()
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and "grown" not in log,
       "grow: a kill -9 after it restores, the header already says 128 MiB")
    c = d.tcp()
    st, _ = c.resume(ha["id"], ha["token"])
    st2, k = c.rekey(big["id"]) if st == 0 else (st, None)
    s3, got = c.read(big["id"], k["key"], 100 * MIB - 4096, 4096) if st2 == 0 else (st2, b"")
    ok(s3 == 0 and got == pattern(3, 4096), "grow: bytes in the grown tail survive the kill -9")
    c.close()
    d.stop()
    # A pool added after the kept one.
    d.write_conf("128M", 60000, second)
    up, log = d.try_start()
    adm = d.adm() if up else None
    ok(up and "restored from the fd store" in log and "(1 new)" in log and
       adm.stats()["pool"] == 144 * MIB and
       d.store.names() == ["rmem-pool-default", "rmem-pool-second", "rmem-state"],
       "new pool: restored, the new pool served and in the store (%s)" % d.store.names())
    if adm:
        adm.close()
    d.stop(signal.SIGKILL)
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and precious_named(d, "grow/named", 1),
       "new pool: a kill -9 after it restores both pools")
    d.stop()
    # A growth cut short by a crash: the memfd grown, the header not.
    d.drop()
    d.write_conf("64M", 60000)
    d.start()
    make_precious(d)
    d.stop(signal.SIGKILL)
    os.ftruncate(d.store.fd("rmem-pool-default"), 96 * MIB)
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and precious_ok(d),
       "cut short: a memfd larger than the header says restores at the config's size")
    d.stop(signal.SIGKILL)
    # ... and a new pool's memfd that the header does not name: made anew.
    stale = os.memfd_create("rmem-pool-second")
    os.ftruncate(stale, 16 * MIB)
    os.pwrite(stale, b"\x55" * 4096, 0)
    d.store.store.append(("rmem-pool-second", stale))
    d.write_conf("64M", 60000, second)
    up, log = d.try_start()
    fd = d.store.fd("rmem-pool-second")
    ok(up and "restored from the fd store" in log and precious_ok(d) and fd is not None and
       os.pread(fd, 4096, 0) == bytes(4096),
       "cut short: a new pool's stale memfd is replaced by a zeroed one")
    d.stop()
    d.store.close()


def precious_named(d, name, seed):
    c = d.tcp()
    c.hello()
    st, r = c.open(name, 1)
    s1, got = c.read(r["id"], r["key"], 0, MIB) if st == 0 else (st, b"")
    c.close()
    return st == 0 and s1 == 0 and got == pattern(seed, MIB)


# ---- upgrade from the previous release, and rollback to it -------------------------

def newest_other_tag(top):
    """The newest release tag (vX.Y.Z) of a version other than this tree's
    Makefile says, or None."""
    with open(os.path.join(top, "Makefile")) as f:
        mine = [x.split()[-1] for x in f if x.startswith("VERSION")][0]
    tags = subprocess.run(["git", "-C", top, "tag", "-l", "v[0-9]*", "--sort=-v:refname"],
                          capture_output=True, text=True).stdout.split()
    return next((t for t in tags if t[1:] != mine), None)


def previous_release(tmp):
    """The previous release's rmemd built from git, or (None, why)."""
    top = subprocess.run(["git", "-C", HERE, "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True)
    if top.returncode:
        return None, "not a git checkout"
    top = top.stdout.strip()
    rev = os.environ.get("RMEM_PREV_RELEASE") or newest_other_tag(top)
    if not rev:
        # Without tags: the commit that set the Makefile's VERSION to what
        # it is; its parent is the last of the previous release.
        out = subprocess.run(["git", "-C", top, "log", "-1", "--format=%H", "-G",
                              r"^VERSION +:=", "--", "Makefile"], capture_output=True, text=True)
        if out.returncode or not out.stdout.strip():
            return None, "no commit sets VERSION (a shallow clone?)"
        rev = out.stdout.strip() + "^"
    ver = subprocess.run(["git", "-C", top, "show", rev + ":Makefile"], capture_output=True,
                         text=True)
    if ver.returncode:
        return None, "%s is not in this clone (shallow?)" % rev
    version = [x.split()[-1] for x in ver.stdout.splitlines() if x.startswith("VERSION")][0]
    src = os.path.join(tmp, "prev")
    os.mkdir(src)
    arch = subprocess.Popen(["git", "-C", top, "archive", rev], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", src], stdin=arch.stdout, check=True)
    arch.wait()
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SANITIZE", "RMEM_BUILD")}
    b = subprocess.run(["nice", "-n", "10", "make", "-s", "-j2", "build/rmemd"], cwd=src,
                       env=env, capture_output=True, text=True)
    if b.returncode:
        return None, "building %s failed: %s" % (rev, b.stderr[-400:])
    return (os.path.join(src, "build", "rmemd"), version), None


def test_releases(tmp):
    prev, why = previous_release(tmp)
    if not prev:
        ok(True, "# SKIP upgrade and rollback: %s" % why)
        return
    old, version = prev
    diag("previous release: rmemd %s, built in %s" % (version, os.path.dirname(old)))
    d, ha, r = seeded(tmp, "rel/old", old)
    d.rmemd = RMEMD
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and precious_named(d, "rel/old", 1),
       "upgrade: this rmemd restores rmemd %s's state, the named region's bytes" % version)
    b = d.tcp()
    st, _ = b.resume(ha["id"], ha["token"])
    st2, k = b.rekey(r["id"]) if st == 0 else (st, None)
    s3, got = b.read(r["id"], k["key"], 0, MIB) if st2 == 0 else (st2, b"")
    ok(st == 0 and s3 == 0 and got == pattern(2, MIB),
       "upgrade: a session of rmemd %s RESUMEs, its region's bytes are there" % version)
    _, n2 = b.create("rel/new", MIB)
    b.write(n2["id"], n2["key"], 0, pattern(4, MIB))
    d.stop()
    b.close()
    d.rmemd = old
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and precious_named(d, "rel/old", 1) and
       precious_named(d, "rel/new", 4),
       "rollback: rmemd %s restores this rmemd's state (no redundant pieces)" % version)
    d.stop()
    # Grown by this rmemd, then rolled back with the grown config: the
    # header keeps the layout every release reads.
    d.rmemd = RMEMD
    d.write_conf("96M", 60000)
    up, log = d.try_start()
    ok(up and "grown from" in log, "rollback after a grow: this rmemd grows the pool")
    d.stop()
    d.rmemd = old
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and precious_named(d, "rel/new", 4),
       "rollback after a grow: rmemd %s restores the grown pool" % version)
    d.stop()
    d.rmemd = RMEMD
    d.store.close()


def test_range_past(tmp):
    """A header that gives a pool less than its ranges need (forged with a
    good check): the growth must not make the ranges past it believable."""
    d = Daemon(tmp, lease_ms=60000)
    d.write_conf("64M", 60000)
    d.start()
    c = d.tcp()
    c.hello()
    _, low = c.create("past/low", 40 * MIB)
    _, high = c.create("past/high", 4 * MIB)
    d.stop(signal.SIGKILL)
    c.close()
    fd = d.store.fd("rmem-state")
    h = bytearray(os.pread(fd, STATE_HDR_LEN, 0))
    struct.pack_into("<Q", h, 32 + 32, 32 * MIB)     # pool 0's size
    struct.pack_into("<I", h, STATE_HDR_LEN - 8, crc32c(bytes(h[:STATE_HDR_LEN - 8])))
    os.pwrite(fd, bytes(h), 0)
    before = store_files(d)
    up, log = d.try_start()
    ok(up and "past the 33554432 bytes the state gives it" in log and not listening(d) and
       store_files(d) == before,
       "a range past the pool size the state says is refused, the store kept (%s)"
       % [x[40:150] for x in log.splitlines() if "not restoring" in x])
    d.stop()
    d.store.close()


def test_no_identity(tmp):
    """Format 1 as the first codec wrote it: generation and server_id zero."""
    d = Daemon(tmp)
    d.start()
    make_precious(d)
    d.stop(signal.SIGKILL)
    fd = d.store.fd("rmem-state")
    h = bytearray(os.pread(fd, STATE_HDR_LEN, 0))
    h[24:32] = bytes(8)
    h[928:960] = bytes(32)
    struct.pack_into("<I", h, STATE_HDR_LEN - 8, crc32c(bytes(h[:STATE_HDR_LEN - 8])))
    os.pwrite(fd, bytes(h), 0)
    up, log = d.try_start()
    ok(up and "restored from the fd store" in log and "carries no server id" in log and
       precious_ok(d), "format 1 without an identity (the codec's first step) restores")
    d.stop()
    d.store.close()


def main():
    cases = [("refused%d" % i, lambda sub, c=c: refused_case(sub, *c))
             for i, c in enumerate(damages())]
    cases += [("removed", removed_pool), ("noid", test_no_identity), ("past", test_range_past),
              ("grow", test_grow),
              ("releases", test_releases)]
    return run_cases("rmem-keepstate.", cases)


if __name__ == "__main__":
    sys.exit(main())
