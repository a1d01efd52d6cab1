#!/usr/bin/env python3
# test_rawcall.py - the Python tests' wire constants are common/proto.h's:
# tests/lib/rawcall.py reads the header at import and rmemwire.py names
# what it reads.  Checked: the opcodes are the enum's, whole and in order;
# the header layout is PROTO_HDR_LEN bytes; a changed proto.h changes what
# the Python side sends (so the two cannot drift apart); and no opcode or
# header number is written out again in tests/lib or the tests that import
# it.  TAP output.
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.dont_write_bytecode = True
import rawcall  # noqa: E402
from tap import done, ok  # noqa: E402
import rmemwire  # noqa: E402

with open(rawcall.PROTO_H) as f:
    text = f.read()

ops = rawcall.OP
ok(ops.get("ERROR") == 0 and sorted(ops.values()) == list(range(len(ops))),
   "enum proto_op read whole: %d opcodes, 0..%d without a gap" % (len(ops), len(ops) - 1))
names_in_h = re.findall(r"^\s*PROTO_OP_(\w+)\s*=", text, re.M)
ok(sorted(names_in_h) == sorted(ops), "every PROTO_OP_* of proto.h is in rawcall.OP")
ok(rawcall.MAGIC == 0x4d454d52 and struct.pack("<I", rawcall.MAGIC) == b"RMEM",
   "PROTO_MAGIC is \"RMEM\" as bytes")
ok(struct.calcsize(rawcall.HDR) == rawcall.CONST["HDR_LEN"] == 24,
   "the header layout is PROTO_HDR_LEN (%d) bytes" % rawcall.CONST["HDR_LEN"])
ok(rawcall.CONST.get("HELLO_REP_RESUME_LEN") == rawcall.CONST["HELLO_REP_LEN"] +
   rawcall.CONST["RESUME_TOKEN_LEN"], "a #define of #defines is evaluated (HELLO_REP_RESUME_LEN)")
used = ("HELLO", "ALLOC", "FREE", "WRITE", "READ", "STATS", "REGIONS", "CREATE", "OPEN",
        "UNLINK", "NAMES", "RESUME", "REKEY", "PING", "AUTH_BEGIN", "AUTH")
ok(all(getattr(rmemwire, k) == ops[k] for k in used),
   "rmemwire's opcodes are proto.h's (%d names)" % len(used))
ok(rmemwire.F_RESUMABLE == rawcall.CONST["HELLO_F_RESUMABLE"],
   "rmemwire.F_RESUMABLE is PROTO_HELLO_F_RESUMABLE")

# A proto.h whose numbers moved: what is read moves with it.
moved = re.sub(r"(PROTO_OP_HELLO\s*=\s*)1\b", r"\g<1>42", text)
moved = re.sub(r"(#define PROTO_HDR_LEN\s+)24", r"\g<1>32", moved)
mops, mconst = rawcall.read_proto_h(moved)
ok(mops["HELLO"] == 42 and mconst["HDR_LEN"] == 32 and mops["ALLOC"] == 2,
   "a proto.h with HELLO = 42 and a 32-byte header reads as such")
try:
    rawcall.read_proto_h(text.replace("enum proto_op", "enum proto_opcode"))
    ok(False, "a proto.h without enum proto_op is refused")
except ImportError:
    ok(True, "a proto.h without enum proto_op is refused")

# The same reader serves common/state.h (tests/lib/restartlib.py).
with open(os.path.join(os.path.dirname(rawcall.PROTO_H), "state.h")) as f:
    st_enum, st_const = rawcall.read_header(f.read(), "STATE_", "state_type")
ok(st_enum.get("FREE") == 0 and st_enum.get("NAME") == 5 and
   st_const.get("SLOT_LEN") == 384 and st_const.get("HDR_LEN") == 4096,
   "state.h read by the same reader: %d types, %s-byte slots" %
   (len(st_enum), st_const.get("SLOT_LEN")))

# No number of the wire written out again beside the import.
lib = os.path.join(HERE, "..", "lib")
bad = []
for name in ("rmemwire.py", "rawcall.py", "restartlib.py"):
    with open(os.path.join(lib, name)) as f:
        src = f.read()
    for pat in (r"req\(\s*\d", r"call\([^,]+,\s*\d", r"0x4d454d52", r"recv_exact\([^,]+,\s*24\)",
                r"^[A-Z_, ]+=\s*\d+(\s*,\s*\d+)+\s*$"):
        if re.search(pat, src, re.M):
            bad.append("%s: %s" % (name, pat))
ok(not bad, "no opcode, magic or header length written out again in tests/lib %s" % bad)

sys.exit(done())
