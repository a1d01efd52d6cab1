#!/bin/bash
# test_rmemctl.sh - rmemctl against a running rmemd: stats, pools, regions and
# clients, as text and as JSON, over the Unix socket and (stats only) over
# TCP; its exit status and messages when no daemon runs or when asked for an
# admin listing over TCP.  TAP output.
#
#   RMEM_BUILD=build tests/func/test_rmemctl.sh
set -u
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/lib/rmemd.sh
RMEMCTL=$B/rmemctl
rmemd_setup rmemctl-test
[ -x "$RMEMCTL" ] || skip_all "$RMEMCTL is not built"

sock=$tmp/rmemd.sock
port=$(free_port)
rmemd_conf "$tmp/rmemd.conf" "$port" 64M

# A client that holds two 1 MiB regions (raw protocol, over TCP) until killed.
cat > "$tmp/holder.py" << 'PY'
import os, socket, struct, sys, time
MAGIC = 0x4d454d52
def call(s, op, rid, payload):
    s.sendall(struct.pack("<IHHHHIQ", MAGIC, 1, op, 0, 0, len(payload), rid) + payload)
    hdr = b""
    while len(hdr) < 24:
        hdr += s.recv(24 - len(hdr))
    magic, ver, rop, flags, _, length, rrid = struct.unpack("<IHHHHIQ", hdr)
    body = b""
    while len(body) < length:
        body += s.recv(length - len(body))
    assert magic == MAGIC and rop == op and rrid == rid, "bad reply"
    return body
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
st, = struct.unpack("<i", call(s, 1, 1, struct.pack("<IIII", 1, 0, os.getpid(), 0))[:4])
assert st == 0, "HELLO status %d" % st
ids = []
for i in range(2):
    body = call(s, 2, 10 + i, struct.pack("<QII", 1 << 20, 0, 0))
    st, _, rid, addr, length, rkey, fl = struct.unpack("<iIQQQII", body)
    assert st == 0, "ALLOC status %d" % st
    ids.append(rid)
print("ready %d %d" % tuple(ids), flush=True)
time.sleep(300)
PY

# json_check FILE PYTHON-EXPRESSIONS: the JSON object in FILE is "d"; every
# line of the second argument must be true.
json_check() {
	python3 - "$1" "$2" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for expr in sys.argv[2].strip().splitlines():
    if not eval(expr):
        print("# failed: %s\n# json: %s" % (expr.strip(), json.dumps(d)[:400]))
        sys.exit(1)
PY
}

# ---- no daemon yet ---------------------------------------------------------------
"$RMEMCTL" -s "$sock" stats > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q -F "$sock" "$tmp/err" && grep -q -i rmemd "$tmp/err"
ok $? "no daemon: rmemctl stats exits 1 (got $rc) naming rmemd and the socket"
diag < "$tmp/err"
"$RMEMCTL" -c "127.0.0.1:$port" stats > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && [ -s "$tmp/err" ]
ok $? "no daemon: rmemctl -c HOST:PORT stats exits 1 with a message (got $rc)"
"$RMEMCTL" -s "$sock" frobnicate > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ -s "$tmp/err" ]
ok $? "unknown command: exit 2 with a message (got $rc)"
"$RMEMCTL" -s "$sock" -c "127.0.0.1:$port" stats > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ]
ok $? "-s and -c together: exit 2 (got $rc)"

# ---- start the daemon -----------------------------------------------------------------
rmemd_start "$tmp/rmemd.conf" "$tmp/rmemd.log"
rc=$?
if [ $rc -ne 0 ]; then
	echo "# rmemd did not become ready ($rc):"
	tail -20 "$tmp/rmemd.log" | diag
	echo "Bail out! rmemd did not start"
	exit 1
fi

python3 "$tmp/holder.py" "$port" > "$tmp/holder.out" 2>&1 &
hpid=$!
for _ in $(seq 200); do
	grep -q '^ready' "$tmp/holder.out" && break
	kill -0 "$hpid" 2> /dev/null || break
	sleep 0.05
done
read -r _ id1 id2 < <(grep '^ready' "$tmp/holder.out")
[ -n "${id2:-}" ]
ok $? "a raw client holds two 1 MiB regions (ids ${id1:-?} ${id2:-?})"
[ -n "${id2:-}" ] || diag < "$tmp/holder.out"

# ---- stats ------------------------------------------------------------------------------
"$RMEMCTL" -s "$sock" stats > "$tmp/out" 2> "$tmp/err"
ok $? "rmemctl -s SOCK stats exits 0"
grep -q -E '^pool_bytes: +67108864' "$tmp/out" && grep -q -E '^used_bytes: +2097152' "$tmp/out" &&
	grep -q -E '^regions: +2$' "$tmp/out"
ok $? "stats text shows pool_bytes, used_bytes and regions"
diag < "$tmp/out"

"$RMEMCTL" -s "$sock" --json stats > "$tmp/json" 2> "$tmp/err"
ok $? "rmemctl --json stats exits 0"
json_check "$tmp/json" '
all(type(d["stats"][k]) is int for k in ("pool_bytes", "used_bytes", "free_bytes"))
all(type(d["stats"][k]) is int for k in ("largest_free", "regions", "clients"))
d["stats"]["pool_bytes"] == 64 << 20
d["stats"]["used_bytes"] == 2 << 20
d["stats"]["free_bytes"] == d["stats"]["pool_bytes"] - d["stats"]["used_bytes"]
d["stats"]["largest_free"] == d["stats"]["free_bytes"]
d["stats"]["regions"] == 2
d["stats"]["clients"] == 2
d["stats"]["allocs"] == 2 and d["stats"]["frees"] == 0'
ok $? "stats JSON: integer keys with the right figures"

"$RMEMCTL" stats --json -s "$sock" > "$tmp/json2" 2> /dev/null &&
	json_check "$tmp/json2" 'd["stats"]["regions"] == 2'
ok $? "options after the command work too"
RMEMD_SOCKET=$sock "$RMEMCTL" stats > /dev/null 2>&1
ok $? "RMEMD_SOCKET picks the socket"

"$RMEMCTL" -c "127.0.0.1:$port" stats > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q -E '^used_bytes: +2097152' "$tmp/out"
ok $? "rmemctl -c 127.0.0.1:PORT stats works over TCP (exit $rc)"
"$RMEMCTL" -c "127.0.0.1:$port" --json stats > "$tmp/json" 2> "$tmp/err" &&
	json_check "$tmp/json" 'd["stats"]["used_bytes"] == 2 << 20'
ok $? "rmemctl -c 127.0.0.1:PORT --json stats"

# ---- admin listings ---------------------------------------------------------------------
"$RMEMCTL" -s "$sock" pools > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q default "$tmp/out"
ok $? "rmemctl pools lists the default pool (exit $rc)"
diag < "$tmp/out"
"$RMEMCTL" -s "$sock" --json pools > "$tmp/json" 2> "$tmp/err" && json_check "$tmp/json" '
len(d["pools"]) == 1
d["pools"][0]["name"] == "default"
d["pools"][0]["bytes"] == 64 << 20 and d["pools"][0]["used_bytes"] == 2 << 20
d["pools"][0]["alignment"] == 64 and d["pools"][0]["regions"] == 2
all(type(d["pools"][0][k]) is int for k in ("bytes", "used_bytes", "largest_free"))
all(type(d["pools"][0][k]) is int for k in ("regions", "page_size", "alignment"))'
ok $? "pools JSON"

"$RMEMCTL" -s "$sock" regions > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q -E "^ *${id1:-x} " "$tmp/out" && grep -q -E "^ *${id2:-x} " "$tmp/out"
ok $? "rmemctl regions lists both regions (exit $rc)"
diag < "$tmp/out"
"$RMEMCTL" -s "$sock" --json regions > "$tmp/json" 2> "$tmp/err" && json_check "$tmp/json" "
sorted(r['id'] for r in d['regions']) == sorted([${id1:-0}, ${id2:-0}])
all(r['length'] == 1 << 20 and r['pool'] == 0 for r in d['regions'])
len(set(r['client_id'] for r in d['regions'])) == 1
len(set(r['addr'] for r in d['regions'])) == 2"
ok $? "regions JSON: both ids, 1 MiB each, one owner"

"$RMEMCTL" -s "$sock" clients > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q tcp "$tmp/out" && grep -q unix "$tmp/out"
ok $? "rmemctl clients lists the tcp holder and itself over unix (exit $rc)"
diag < "$tmp/out"
"$RMEMCTL" -s "$sock" --json clients > "$tmp/json" 2> "$tmp/err" && json_check "$tmp/json" "
len(d['clients']) == 2
[c['transport'] for c in d['clients'] if c['regions'] == 2] == ['tcp']
[c['used_bytes'] for c in d['clients'] if c['transport'] == 'tcp'] == [2 << 20]
all(type(c[k]) is int for c in d['clients'] for k in ('id', 'regions', 'used_bytes'))
all(type(c[k]) is int for c in d['clients'] for k in ('connected_ms', 'idle_ms'))
all(isinstance(c['peer'], str) and c['peer'] for c in d['clients'])"
ok $? "clients JSON"

for cmd in pools regions clients; do
	"$RMEMCTL" -c "127.0.0.1:$port" "$cmd" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q -i -E 'unix|admin' "$tmp/err"
	ok $? "rmemctl -c HOST:PORT $cmd: exit 1 (got $rc) with a message about the Unix socket"
done
head -1 "$tmp/err" | diag

# ---- the holder goes away ------------------------------------------------------------------
kill -KILL "$hpid"
wait "$hpid" 2> /dev/null
hpid=
gone=1
for _ in $(seq 100); do
	if "$RMEMCTL" -s "$sock" --json stats > "$tmp/json" 2> /dev/null &&
		json_check "$tmp/json" 'd["stats"]["used_bytes"] == d["stats"]["regions"] == 0' \
			> /dev/null; then
		gone=0
		break
	fi
	sleep 0.05
done
ok $gone "after the holder is killed, rmemctl shows used_bytes 0 and no regions"
"$RMEMCTL" -s "$sock" --json regions > "$tmp/json" 2> /dev/null &&
	json_check "$tmp/json" 'd["regions"] == []'
ok $? "and an empty regions list in JSON"

rmemd_stop TERM "$tmp/rmemd.log"
ok $rc "rmemd exits 0 on SIGTERM (exit $rc)"

tap_done
