# rawcall.py - the control protocol by hand, for the shell tests' Python
# helpers (docs/protocol.md): one request out, its reply's payload back.
# The C tests' raw client is tests/lib/raw.c; this is its small cousin.
#
# The numbers are not written out again here: common/proto.h, the one
# wire-protocol header of daemon and library, is read at import.  OP maps
# an opcode's name to its number ("HELLO" -> PROTO_OP_HELLO), CONST a
# #define's name without PROTO_ to its value (CONST["HDR_LEN"]).
# tests/unit/test_rawcall.py checks the reading.
import os
import re
import struct

PROTO_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common",
                       "proto.h")


def read_header(text, prefix, enum):
    """(members, CONST) of a C header's text: enum <enum>'s members as
    {name without <prefix>OP_-style prefix: number} (the prefix is the
    members' common one, given as the enum's first member would spell it),
    and every #define <prefix>* whose value is an integer expression of
    integers and of earlier <prefix>* names, keyed without <prefix>."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    consts = {}
    for name, expr in re.findall(r"^[ \t]*#define[ \t]+" + prefix + r"(\w+)[ \t]+(.+)$", text,
                                 re.M):
        expr = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", expr.strip())
        expr = re.sub(r"\b" + prefix + r"(\w+)\b", lambda m: "(%d)" % consts[m.group(1)]
                      if m.group(1) in consts else m.group(0), expr)
        # Only arithmetic on numbers is evaluated; macros with arguments
        # and anything else are left out.
        if re.fullmatch(r"[0-9a-fA-Fx()+\-*/<> \t|&]+", expr) and "(" + name not in expr:
            try:
                consts[name] = int(eval(expr.replace("/", "//"), {"__builtins__": {}}))
            except (SyntaxError, ZeroDivisionError):
                pass
    body = re.search(r"enum\s+" + enum + r"\s*\{(.*?)\}", text, re.S)
    if not body:
        raise ImportError("no enum %s" % enum)
    members = {}
    for name, value in re.findall(r"\b" + prefix + r"(\w+)\s*=\s*(\d+)", body.group(1)):
        members[name] = int(value)
    return members, consts


def read_proto_h(text):
    """(OP, CONST) of proto.h's text: enum proto_op's members without
    PROTO_OP_, and the PROTO_* #defines without PROTO_."""
    try:
        ops, consts = read_header(text, "PROTO_", "proto_op")
    except ImportError:
        raise ImportError("common/proto.h: no enum proto_op")
    return {k[3:]: v for k, v in ops.items() if k.startswith("OP_")}, consts


with open(PROTO_H) as _f:
    OP, CONST = read_proto_h(_f.read())

MAGIC = CONST["MAGIC"]
VERSION = CONST["VERSION"]
HDR = "<IHHHHIQ"  # magic, version, opcode, flags, reserved, length, request id
HDR_LEN = CONST["HDR_LEN"]
if struct.calcsize(HDR) != HDR_LEN:
    raise ImportError("rawcall.HDR is %d bytes, PROTO_HDR_LEN %d" % (struct.calcsize(HDR), HDR_LEN))


def call(s, op, rid, payload):
    """Sends request op with payload on socket s; returns the reply's payload."""
    s.sendall(struct.pack(HDR, MAGIC, VERSION, op, 0, 0, len(payload), rid) + payload)
    hdr = b""
    while len(hdr) < HDR_LEN:
        hdr += s.recv(HDR_LEN - len(hdr))
    magic, ver, rop, flags, _, length, rrid = struct.unpack(HDR, hdr)
    body = b""
    while len(body) < length:
        body += s.recv(length - len(body))
    assert magic == MAGIC and rop == op and rrid == rid, "bad reply"
    return body
