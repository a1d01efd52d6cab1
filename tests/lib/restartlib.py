# restartlib.py - what test_restart.py, test_hostile_restart.py,
# test_keepstate.py and bench/restart.py share: TAP output, rmemd on private paths started through
# the emulated fd store (rmemd_start.py, fdstore.py), the raw pipelining helpers, and the
# crash loop's storm of clients with the check of what a restart restored
# against what was acknowledged.
#
#   d = Daemon(tmp, lease_ms=60000); d.start()
#   c = d.tcp(); c.hello() ...
#   d.kill(); up, log = d.try_start()
#   ok(cond, "what"); ...; sys.exit(done())
import os
import random
import shutil
import struct
import tempfile
import threading
import time

import rmemwire
from rmemwire import Client
import rawcall
from rawcall import HDR, HDR_LEN, MAGIC, VERSION
from rmemd_start import B, RMEMD, Rmemd, free_port  # noqa: F401 (for the tests)
from tap import diag, done, ok  # noqa: F401 (for the tests)


# ---- rmemd under the fd store ---------------------------------------------------------

class Daemon(Rmemd):
    """rmemd on private paths under the emulated fd store (rmemd_start.py),
    its ports fixed at once (a test may name them before the start), and
    the raw clients of the restart tests."""

    def __init__(self, tmp, pool="64M", lease_ms=2000):
        super().__init__(tmp, pool=pool, lease_ms=lease_ms, max_clients=256,
                         log_level="info", admin=os.path.join(tmp, "admin.sock"))
        self.pick_ports()
        super().write_conf()

    def write_conf(self, pool, lease_ms=2000, extra="", rdma=""):
        self.pool, self.lease_ms, self.extra, self.rdma_addr = pool, lease_ms, extra, rdma
        super().write_conf()

    def tcp(self):
        return Client(("127.0.0.1", self.port))

    def adm(self):
        c = Client(self.admin)
        c.hello(0)
        return c


def run_cases(prefix, cases):
    """Each (label, fn) of cases as fn(dir), a directory of its own under a
    temporary one; the TAP plan's exit status (a skip without rmemd)."""
    if not os.access(RMEMD, os.X_OK):
        print("1..0 # SKIP %s is not built" % RMEMD)
        return 0
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        for label, fn in cases:
            sub = os.path.join(tmp, label)
            os.mkdir(sub)
            fn(sub)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return done()


def pattern(seed, n):
    r = random.Random(seed)
    return bytes(r.getrandbits(8) for _ in range(n))


def spin(seconds):
    """Waits seconds without sleeping: a crash point microseconds after a
    request needs a finer clock than the scheduler's."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


# ---- pipelined requests on the raw wire -----------------------------------------------

def frame(c, op, payload):
    c.rid += 1
    return struct.pack(HDR, MAGIC, VERSION, op, 0, 0, len(payload), c.rid) + payload


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        got = s.recv(n - len(b))
        if not got:
            raise OSError("connection closed")
        b += got
    return b


def recv_reply(c):
    """The payload of the next reply on c's socket."""
    hdr = recv_exact(c.s, HDR_LEN)
    return recv_exact(c.s, struct.unpack_from("<I", hdr, 12)[0])


# ---- crash consistency --------------------------------------------------------------

class Storm:
    """Clients that allocate, free, create and unlink, and record what was
    acknowledged.  in_flight: requests sent whose reply may not have come."""

    def __init__(self, d, nclients, round_no):
        self.d = d
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.alive = {}      # region id -> (len) acknowledged, not freed
        self.freed = set()   # region ids whose FREE was acknowledged
        self.unsure = set()  # region ids with a FREE in flight
        self.named = {}      # name -> pattern seed, CREATE and its WRITE acknowledged
        self.unlinked = set()
        self.unsure_names = set()
        self.round = round_no
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(nclients)]

    def alloc(self, c, rnd, sizes, mine):
        st, r = c.alloc(rnd.choice(sizes))
        if st == 0:
            with self.lock:
                self.alive[r["id"]] = r["len"]
            mine.append(r)

    def free(self, c, rnd, mine):
        r = mine.pop(rnd.randrange(len(mine)))
        with self.lock:
            self.unsure.add(r["id"])
        if c.free(r["id"], r["key"]) == 0:
            with self.lock:
                self.unsure.discard(r["id"])
                self.freed.add(r["id"])
                del self.alive[r["id"]]

    def create(self, c, name, mine):
        """CREATE name and WRITE its pattern, acknowledged when both are:
        (CREATE's status, region, acknowledged)."""
        with self.lock:
            self.unsure_names.add(name)
        st, r = c.create(name, 4096)
        if st == 0 and c.write(r["id"], r["key"], 0, pattern(name, 4096)) == 0:
            with self.lock:
                self.named[name] = r["id"]
                self.unsure_names.discard(name)
                self.alive[r["id"]] = r["len"]
            mine.append(r)
            return st, r, True
        return st, r, False

    def run(self, i):
        rnd = random.Random(self.round * 100 + i)
        try:
            c = self.d.tcp()
            c.hello()
            mine = []
            k = 0
            while not self.stop.is_set():
                op = rnd.random()
                if op < 0.4 or not mine:
                    self.alloc(c, rnd, [64, 4096, 65536, 100000], mine)
                elif op < 0.7:
                    self.free(c, rnd, mine)
                elif op < 0.9:
                    k += 1
                    self.create(c, "storm/%d/%d/%d" % (self.round, i, k), mine)
                else:
                    with self.lock:
                        cand = [n for n in self.named if n.startswith("storm/%d/%d/" % (self.round, i))
                                and n not in self.unlinked]
                    if cand:
                        name = rnd.choice(cand)
                        with self.lock:
                            self.unsure_names.add(name)
                        if c.unlink(name) == 0:
                            with self.lock:
                                self.unlinked.add(name)
                                self.unsure_names.discard(name)
        except (OSError, AssertionError, struct.error):
            pass  # the daemon died under us: what was acknowledged is recorded

    def go(self):
        for t in self.threads:
            t.start()

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)

    def record(self, all_named):
        """Folds this round's acknowledged names into all_named (name ->
        "alive" | "unlinked"); a name with a request in flight is unknown."""
        for name in self.named:
            all_named[name] = "alive"
        for name in self.unlinked:
            all_named[name] = "unlinked"
        for name in self.unsure_names:
            all_named.pop(name, None)


def check_restored(d, storm, all_named, label):
    problems = []
    adm = d.adm()
    regs = adm.regions()
    names = adm.names()
    st = adm.stats()
    ids = {r[0]: r for r in regs}
    for rid, length in storm.alive.items():
        if rid in storm.unsure:
            continue
        if rid not in ids:
            problems.append("acknowledged region %d lost" % rid)
        elif ids[rid][2] != length:
            problems.append("region %d has length %d, not %d" % (rid, ids[rid][2], length))
    for rid in storm.freed:
        if rid in ids:
            problems.append("freed region %d is back" % rid)
    spans = sorted((r[1], r[2]) for r in regs)
    for (a0, l0), (a1, l1) in zip(spans, spans[1:]):
        if a0 + l0 > a1:
            problems.append("regions overlap: [%x,+%d) and [%x,+%d)" % (a0, l0, a1, l1))
    held = sum(r[2] for r in regs) + sum(v[1] for v in names.values() if v[2] == 0)
    if held != st["used"]:
        problems.append("used bytes %d but regions and names hold %d" % (st["used"], held))
    if st["free"] + st["used"] != st["pool"]:
        problems.append("free + used != pool")
    c = d.tcp()
    c.hello()
    # Every name is checked for presence; the bytes of a sample of this
    # round's names and of older ones (reading them all costs minutes).
    mine = "storm/%d/" % storm.round
    pick = random.Random(storm.round)
    older = sorted(n for n in all_named if not n.startswith(mine))
    newer = sorted(n for n in all_named if n.startswith(mine))
    sample = set(pick.sample(older, min(len(older), 40)) + pick.sample(newer, min(len(newer), 60)))
    for name in all_named:
        if name in storm.unsure_names:
            continue
        gone = all_named[name] == "unlinked"
        present = ("", name) in names
        if gone and present:
            problems.append("unlinked name %s is back" % name)
        if not gone and not present:
            problems.append("acknowledged name %s lost" % name)
        if not gone and present and name in sample:
            s1, r = c.open(name, 1)
            s2, got = c.read(r["id"], r["key"], 0, 4096) if s1 == 0 else (s1, b"")
            if got != pattern(name, 4096):
                problems.append("named region %s: bytes differ" % name)
            if s1 == 0:
                c.free(r["id"], r["key"])
    c.close()
    adm.close()
    return problems


# ---- the state memfd (common/state.h) -------------------------------------------------

def crc32c(data, crc=0):
    crc ^= 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff


# Read from common/state.h, as rawcall reads proto.h: no number of the
# format is written out again here.
with open(os.path.join(os.path.dirname(rawcall.PROTO_H), "state.h")) as _f:
    _STATE_ENUM, _STATE_CONST = rawcall.read_header(_f.read(), "STATE_", "state_type")
STATE_HDR_LEN = _STATE_CONST["HDR_LEN"]
STATE_SLOT_LEN = _STATE_CONST["SLOT_LEN"]
STATE_TYPES = {v: k for k, v in _STATE_ENUM.items() if k not in ("FREE", "TYPE_COUNT")}


def state_slots(fd):
    """The used slots of a state memfd, as common/state.h lays them out:
    [(index, type name, record)], record a dict of the fields the tests
    look at (a NAME's "object", "name" and "flags"; any other record's
    "id", its first u64).  Nothing is checked here: the daemon's decoder
    is what decides; this only says where a record is."""
    hdr = os.pread(fd, STATE_HDR_LEN, 0)
    nslots = struct.unpack_from("<I", hdr, 16)[0]
    data = os.pread(fd, nslots * STATE_SLOT_LEN, STATE_HDR_LEN)
    out = []
    for i in range(nslots):
        s = data[i * STATE_SLOT_LEN:(i + 1) * STATE_SLOT_LEN]
        t = struct.unpack_from("<H", s, 0)[0]
        if t == 0:
            continue
        kind = STATE_TYPES.get(t, "type %d" % t)
        if kind == "NAME":
            obj, n, flags = struct.unpack_from("<QHH", s, 8)
            rec = {"object": obj, "name": s[24:24 + n].decode(errors="replace"),
                   "flags": flags}
        else:
            rec = {"id": struct.unpack_from("<Q", s, 8)[0]}
        out.append((i, kind, rec))
    return out


def state_name_slot(fd, name):
    """The index of the slot holding the NAME record of name; None if none."""
    for i, kind, rec in state_slots(fd):
        if kind == "NAME" and rec["name"] == name:
            return i
    return None
