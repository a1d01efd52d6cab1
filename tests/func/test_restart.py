#!/usr/bin/env python3
# run-tests-timeout: 600
# test_restart.py - restart without loss on the host, through an emulated
# systemd fd store (tests/lib/fdstore.py; docs/architecture.md, "Restart
# without loss"; docs/protocol.md 7.13):
#   - a restart (SIGTERM) and a crash (SIGKILL) keep every named region and its
#     bytes, anonymous regions of the sessions until their lease runs out, the
#     names listing, used bytes; RESUME takes a session back (REKEY gives
#     working keys), a wrong token is EACCES, an unknown session ENOENT, and
#     after the lease ENOENT with the memory back in the pool;
#   - under tenants RESUME needs the tenant handshake again, of the session's
#     own tenant (another tenant's, or none, is EACCES);
#   - (a store that cannot be restored is kept and nothing served:
#     test_keepstate.py;)
#   - the crash-consistency loop: clients storm alloc/free/create/unlink,
#     rmemd is SIGKILLed at random points and restarted from the store, and
#     the restored state must hold every acknowledged change and nothing
#     acknowledged as gone, with no overlap and used == what the table holds.
import json
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import rmemwire                      # noqa: E402
from restartlib import (B, RMEMD, Daemon, Storm,  # noqa: E402
                        check_restored, diag, done, ok, pattern)


def rmemctl_names(d):
    """rmemctl --json names, each record without its age (that restarts)."""
    out = subprocess.run([os.path.join(B, "rmemctl"), "-s", d.admin, "--json", "names"],
                         capture_output=True, text=True).stdout
    rows = []
    for r in json.loads(out or "{}").get("names", []):
        rows.append(json.dumps({k: v for k, v in r.items() if k != "age_ms"}, sort_keys=True))
    return sorted(rows)


# ---- restart and resume -------------------------------------------------------

def test_restart(tmp, sig, label):
    d = Daemon(tmp)
    d.start()
    ok("nothing to restore" in d.new_log(), "%s: first start is fresh, and says so" % label)
    ok(d.store.names() == ["rmem-pool-default", "rmem-state"],
       "%s: the pool and the state are in the fd store (%s)" % (label, d.store.names()))
    a, b, c = d.tcp(), d.tcp(), d.tcp()
    st, ha = a.hello()
    _, hb = b.hello()
    _, hc = c.hello()
    ok(st == 0 and ha["token"] is not None and len(ha["token"]) == 16,
       "%s: HELLO with RESUMABLE returns a 16-byte token" % label)
    _, r1 = a.alloc(100000)
    data1 = pattern(1, 100000)
    a.write(r1["id"], r1["key"], 0, data1)
    _, n1 = a.create("keep/one", 8192)
    named = pattern(2, 8192)
    a.write(n1["id"], n1["key"], 0, named)
    _, n2 = b.create("keep/two", 4096)
    b.write(n2["id"], n2["key"], 0, pattern(3, 4096))
    _, h2 = c.open("keep/one", 1)
    _, rc_ = c.alloc(65536)
    # A redundant region's piece (CREATE marked so): the mark outlives the restart.
    st, _ = b.create("keep/p~1.0", 4096, rmemwire.CREATE_F_PIECE)
    adm = d.adm()
    names_before = adm.names()
    ok(st == 0 and names_before[("", "keep/p~1.0")][3] == rmemwire.NAME_F_PIECE and
       names_before[("", "keep/one")][3] == 0,
       "%s: a piece made, listed as one (flags %s)" % (label, names_before.get(("", "keep/p~1.0"))))
    used_before = adm.stats()["used"]
    adm.close()
    ctl_before = rmemctl_names(d)
    rc = d.stop(sig)
    ok(rc == 0 if sig == signal.SIGTERM else rc == 128 + signal.SIGKILL,
       "%s: rmemd stopped (status %s)" % (label, rc))
    for x in (a, b, c):
        x.close()

    d.start()
    log = d.new_log()
    ok("restored from the fd store" in log, "%s: the next start restores" % label)
    diag([line for line in log.splitlines() if "restore" in line])
    adm = d.adm()
    ok(adm.names() == names_before, "%s: NAMES lists the same regions, the piece's mark "
       "included" % label)
    ctl_after = rmemctl_names(d)
    ok(ctl_after == ctl_before and any("keep/one" in r for r in ctl_after),
       "%s: rmemctl names lists the same (%d lines)" % (label, len(ctl_after)))
    ok(adm.stats()["used"] == used_before,
       "%s: used bytes are the same (%d)" % (label, used_before))
    n = d.tcp()
    n.hello()
    st, o = n.open("keep/one", 1)
    s1, got = n.read(o["id"], o["key"], 0, 8192) if st == 0 else (st, b"")
    ok(st == 0 and s1 == 0 and got == named, "%s: a named region's bytes are intact" % label)
    # RESUME: wrong token, unknown id, right token.
    r = d.tcp()
    st, _ = r.resume(ha["id"], bytes(16))
    ok(st == 13, "%s: RESUME with a wrong token is EACCES (%d)" % (label, st))
    st, _ = r.resume(ha["id"] + 1000, ha["token"])
    ok(st == 2, "%s: RESUME of an unknown session is ENOENT (%d)" % (label, st))
    st, hr = r.resume(ha["id"], ha["token"])
    ok(st == 0 and hr["id"] == ha["id"] and hr["token"] == ha["token"],
       "%s: RESUME with the right token takes the session back" % label)
    r2 = d.tcp()
    st, _ = r2.resume(ha["id"], ha["token"])
    ok(st == 16, "%s: a second RESUME of it is EBUSY (%d)" % (label, st))
    r2.close()
    st, _ = r.read(r1["id"], r1["key"], 0, 16)
    ok(st == 13, "%s: an old key is dead after the restart (EACCES, %d)" % (label, st))
    st, k1 = r.rekey(r1["id"])
    s1, got = r.read(r1["id"], k1["key"], 0, len(data1)) if st == 0 else (st, b"")
    ok(st == 0 and s1 == 0 and got == data1,
       "%s: REKEY gives a working key; the anonymous region's bytes are there" % label)
    st, kn = r.rekey(n1["id"])
    ok(st == 0 and kn["flags"] == 3 and r.write(n1["id"], kn["key"], 0, b"x") == 0,
       "%s: REKEY of a handle gives its access and a working key" % label)
    st, _ = r.rekey(h2["id"])
    ok(st == 2, "%s: REKEY of another session's region is ENOENT (%d)" % (label, st))
    # Sessions b and c are not resumed: after the lease their regions go.
    # r and n keep theirs alive meanwhile, as librmem's keepalive would.
    for _ in range(12):
        time.sleep(0.25)
        r.ping()
        n.ping()
    late = d.tcp()
    st, _ = late.resume(hc["id"], hc["token"])
    late.close()
    ok(st == 2, "%s: after the lease RESUME is ENOENT (%d)" % (label, st))
    adm2 = d.adm()
    used_after = adm2.stats()["used"]
    ok(used_after == used_before - rc_["len"],
       "%s: the lapsed session's anonymous region is back in the pool (%d -> %d)" %
       (label, used_before, used_after))
    ok(("", "keep/two") in adm2.names(),
       "%s: a named region outlives its lapsed creator" % label)
    for x in (adm, adm2, n, r):
        x.close()
    d.stop()
    d.store.close()


# ---- RESUME under tenants ------------------------------------------------------------

def test_tenants(tmp):
    secrets = {"team-a": b"secret of team a", "team-b": b"secret of team b"}
    extra = "tenants = ("
    for i, (t, sec) in enumerate(sorted(secrets.items())):
        path = os.path.join(tmp, t + ".key")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, sec)
        os.close(fd)
        extra += '%s { name = "%s"; secret_file = "%s"; }' % ("," if i else "", t, path)
    extra += " );\n"
    d = Daemon(tmp)
    d.write_conf("64M", 2000, extra)
    d.start()
    a = d.tcp()
    ok(a.auth("team-a", secrets["team-a"]) == 0, "tenants: team-a authenticates")
    _, ha = a.hello()
    _, r = a.alloc(4096)
    a.write(r["id"], r["key"], 0, b"team-a's bytes")
    d.stop(signal.SIGKILL)
    a.close()
    d.start()
    anon = d.tcp()
    rop, st = anon.resume_raw(ha["id"], ha["token"])
    ok(rop == 0 and st == 13,
       "tenants: RESUME without the tenant handshake is refused (ERROR EACCES: op %s, %s)" %
       (rop, st))
    anon.close()
    b = d.tcp()
    b.auth("team-b", secrets["team-b"])
    rop, st = b.resume_raw(ha["id"], ha["token"])
    ok(rop == rmemwire.RESUME and st == 13,
       "tenants: team-b with team-a's token is EACCES (%s)" % st)
    st, _ = b.hello()
    ok(st == 0, "tenants: after a refused RESUME the connection may still say HELLO")
    b.close()
    a2 = d.tcp()
    a2.auth("team-a", secrets["team-a"])
    st, hr = a2.resume(ha["id"], ha["token"])
    st2, k = a2.rekey(r["id"]) if st == 0 else (st, None)
    s3, got = a2.read(r["id"], k["key"], 0, 14) if st2 == 0 else (st2, b"")
    ok(st == 0 and s3 == 0 and got == b"team-a's bytes",
       "tenants: team-a, proven again, RESUMEs its session and reads its bytes")
    a2.close()
    d.stop()
    d.store.close()


# ---- a new owner only ever sees zeros (docs/architecture.md) ----------------------

def test_zeroing(tmp):
    """Free bytes are zeroed after READY (daemon/scrub.c): whatever the pool's
    free bytes hold at a restart (here: 0xaa written into the kept memfd, as a
    crash or a shutdown for a restart leaves them), every range handed out
    reads as zeros, while the scrub lags (tests/lib/slowscrub.so) and after
    it; the kept regions' bytes are never touched by it."""
    shim = os.path.join(B, "tests", "slowscrub.so")
    if not ok(os.path.exists(shim), "zeroing: %s is built (make %s)" % (shim, shim)):
        return
    mib = 1 << 20
    d = Daemon(tmp, lease_ms=1500)
    d.start()
    a = d.tcp()
    _, ha = a.hello()
    pn, pa = pattern(11, mib), pattern(12, mib)
    _, n = a.create("zero/keep", mib)
    a.write(n["id"], n["key"], 0, pn)
    _, r = a.alloc(mib)
    a.write(r["id"], r["key"], 0, pa)
    gone = []
    for _ in range(8):
        _, g = a.alloc(mib)
        a.write(g["id"], g["key"], 0, b"\x55" * mib)
        gone.append(g)
    for g in gone[:4]:  # freed just before the kill
        a.free(g["id"], g["key"])
    d.stop(signal.SIGKILL)
    a.close()
    # Every byte that is not one of the two kept regions: 0xaa.
    fd = d.store.fd("rmem-pool-default")
    size = os.fstat(fd).st_size
    img = bytearray(os.pread(fd, size, 0))
    at_n, at_a = img.find(pn[:4096]), img.find(pa[:4096])
    ok(at_n >= 0 and at_a >= 0, "zeroing: the kept regions are found in the pool memfd")
    diag("kept at %d and %d of %d bytes" % (at_n, at_a, size))
    keep = sorted([(at_n, at_n + mib), (at_a, at_a + mib)])
    pos = 0
    for lo, hi in keep + [(size, size)]:
        if lo > pos:
            os.pwrite(fd, b"\xaa" * (lo - pos), pos)
        pos = hi
    saved = dict(os.environ)
    os.environ["LD_PRELOAD"] = os.path.abspath(shim)
    os.environ["RMEM_TEST_SCRUB_DELAY_MS"] = "100"
    # The shim is plain, rmemd sanitized: ASan need not come first.
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") +
                                  ":verify_asan_link_order=0").lstrip(":")
    try:
        d.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)

    def alloc_all(c, what):
        regs, dirty = [], 0
        running = None
        while True:
            st, g = c.alloc(mib)
            if st:
                break
            regs.append(g)
            st, got = c.read(g["id"], g["key"], 0, mib)
            dirty += st != 0 or got.count(0) != mib
            if running is None:
                running = "zeroed after READY" not in d.new_log()
        ok(len(regs) >= 50 and dirty == 0,
           "zeroing: %s: %d MiB handed out, %d of them not all zeros" % (what, len(regs), dirty))
        return regs, running

    c = d.tcp()
    c.hello()
    regs, running = alloc_all(c, "while the scrub lags")
    ok(running, "zeroing: the scrub was still running when the first was handed out")
    for g in regs:
        c.free(g["id"], g["key"])
    c.close()
    deadline = time.monotonic() + 60
    while "zeroed after READY" not in d.new_log() and time.monotonic() < deadline:
        d.store.pump(0.1)
    ok("zeroed after READY" in d.new_log(), "zeroing: the scrub finishes, and says so")
    ok(any(x.startswith("STATUS=serving; zeroing free memory") for x in d.store.lines),
       "zeroing: STATUS= showed the scrub's progress")
    time.sleep(2)  # the lease: a's session, not resumed, gives its regions back
    c = d.tcp()
    c.hello()
    alloc_all(c, "after the scrub and the lease")
    c.close()
    n2 = d.tcp()
    n2.hello()
    st, o = n2.open("zero/keep", 1)
    s1, got = n2.read(o["id"], o["key"], 0, mib) if st == 0 else (st, b"")
    ok(st == 0 and s1 == 0 and got == pn, "zeroing: the kept named region's bytes are intact")
    n2.close()
    d.stop()
    d.store.close()


# ---- crash consistency --------------------------------------------------------------

def test_crash_loop(tmp, rounds):
    d = Daemon(tmp, pool="64M", lease_ms=60000)
    d.start()
    all_named = {}   # name -> "alive" | "unlinked" (acknowledged)
    points = 0
    bad = []
    rnd = random.Random(int(os.environ.get("RMEM_CRASH_SEED", "11")))
    t0 = time.monotonic()
    for i in range(rounds):
        storm = Storm(d, 4, i)
        storm.go()
        time.sleep(rnd.uniform(0.05, 0.6))
        d.kill()
        storm.end()
        points += 1
        storm.record(all_named)
        d.start()
        if "restored from the fd store" not in d.new_log():
            bad.append("round %d: not restored: %s" % (i, d.new_log()[-400:]))
            break
        probs = check_restored(d, storm, all_named, "round %d" % i)
        bad += ["round %d: %s" % (i, p) for p in probs]
        if len(bad) > 20:
            break
    dt = time.monotonic() - t0
    diag("crash points tried: %d in %.1f s; named regions tracked: %d" %
         (points, dt, len(all_named)))
    print("# CRASH_POINTS=%d" % points, flush=True)
    for b in bad[:20]:
        diag(b)
    ok(not bad and points == rounds,
       "crash consistency: %d SIGKILLs during alloc/free/create/unlink storms, "
       "every restored state matched what was acknowledged" % points)
    d.stop()
    d.store.close()


def main():
    if not os.access(RMEMD, os.X_OK):
        print("1..0 # SKIP %s is not built" % RMEMD)
        return 0
    tmp = tempfile.mkdtemp(prefix="rmem-restart.")
    try:
        for sig, label in ((signal.SIGTERM, "restart"), (signal.SIGKILL, "kill -9")):
            sub = os.path.join(tmp, label.replace(" ", ""))
            os.mkdir(sub)
            test_restart(sub, sig, label)
        sub = os.path.join(tmp, "tenants")
        os.mkdir(sub)
        test_tenants(sub)
        sub = os.path.join(tmp, "zeroing")
        os.mkdir(sub)
        test_zeroing(sub)
        sub = os.path.join(tmp, "crash")
        os.mkdir(sub)
        test_crash_loop(sub, int(os.environ.get("RMEM_CRASH_ROUNDS", "20")))
    finally:
        os.system("rm -rf '%s'" % tmp)
    return done()


if __name__ == "__main__":
    sys.exit(main())
