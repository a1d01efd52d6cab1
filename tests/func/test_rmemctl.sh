#!/bin/bash
# test_rmemctl.sh - rmemctl against a running rmemd: stats, pools, regions,
# clients and names, as text and as JSON, over the Unix socket and (stats,
# unlink) over TCP; unlink and unlink --revoke of named regions; its exit
# status and messages when no daemon runs, when asked for an admin listing
# over TCP, and for bad names; unlink as a tenant (-t, -k); the admin's
# unlink in a namespace (--namespace).  TAP output.
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
sys.dont_write_bytecode = True  # nothing written into the tree
sys.path.insert(0, "tests/lib")
from rawcall import OP, VERSION, call
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
st, = struct.unpack("<i", call(s, OP["HELLO"], 1, struct.pack("<IIII", VERSION, 0, os.getpid(), 0))[:4])
assert st == 0, "HELLO status %d" % st
ids = []
for i in range(2):
    body = call(s, OP["ALLOC"], 10 + i, struct.pack("<QII", 1 << 20, 0, 0))
    st, _, rid, addr, length, rkey, fl = struct.unpack("<iIQQQII", body)
    assert st == 0, "ALLOC status %d" % st
    ids.append(rid)
print("ready %d %d" % tuple(ids), flush=True)
# Holds its session: a PING every 2 s renews the 10 s lease, however long
# a loaded machine makes the steps above take.
for rid in range(100, 250):
    time.sleep(2)
    call(s, 7, rid, b"")
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

# helper_start OUT SCRIPT ARGS...: a raw client (python3 SCRIPT ARGS) in the
# background ($hpid), given 10 s to print its "ready" line into OUT.
helper_start() {
	local out=$1 _
	shift
	python3 "$@" > "$out" 2>&1 &
	hpid=$!
	for _ in $(seq 200); do
		grep -q '^ready' "$out" && break
		kill -0 "$hpid" 2> /dev/null || break
		sleep 0.05
	done
}

# helper_kill: kill -9 of that client, reaped.
helper_kill() {
	kill -KILL "$hpid" 2> /dev/null
	wait "$hpid" 2> /dev/null
	hpid=
}

# settles LISTING CHECK [LISTING CHECK...]: 0 once, for every pair,
# `rmemctl --json LISTING` passes json_check's CHECK (5 s at most).
settles() {
	local a=("$@") i _
	for _ in $(seq 100); do
		for ((i = 0; i < ${#a[@]}; i += 2)); do
			"$RMEMCTL" -s "$sock" --json "${a[i]}" > "$tmp/json" 2> /dev/null &&
				json_check "$tmp/json" "${a[i + 1]}" > /dev/null || break
		done
		((i >= ${#a[@]})) && return 0
		sleep 0.05
	done
	return 1
}

# ctl_fails TEXT WHAT ARG...: rmemctl ARG... exits 1 saying TEXT on stderr
# (the assertion WHAT, with the exit code seen).
ctl_fails() {
	local text=$1 what=$2 rc
	shift 2
	"$RMEMCTL" "$@" > /dev/null 2> "$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && grep -q -F "$text" "$tmp/err"
	ok $? "$what (got $rc)"
	diag < "$tmp/err"
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
for args in "unlink" "unlink a b" "--revoke names" "-t x unlink a" "--namespace x names" \
	"--namespace x -t a -k f unlink a" "cluster" "-e etcd://127.0.0.1:1/x cluster"; do
	# shellcheck disable=SC2086  # the words are the arguments
	"$RMEMCTL" -s "$sock" $args > /dev/null 2> "$tmp/err"
	rc=$?
	[ $rc -eq 2 ] && [ -s "$tmp/err" ]
	ok $? "rmemctl $args: usage error, exit 2 with a message (got $rc)"
done
# cluster drain's own: no ID, one too many, --wait or --timeout elsewhere, --json
for args in "cluster drain" "cluster undrain" "cluster drain s0 s1" "--wait cluster" \
	"--timeout 5 stats" "--timeout x cluster drain s0" "--json cluster drain s0"; do
	# shellcheck disable=SC2086  # the words are the arguments
	"$RMEMCTL" -e etcd://127.0.0.1:1/x $args > /dev/null 2> "$tmp/err"
	rc=$?
	[ $rc -eq 2 ] && [ -s "$tmp/err" ]
	ok $? "rmemctl -e ... $args: usage error, exit 2 with a message (got $rc)"
done
"$RMEMCTL" -e "tcp://127.0.0.1:$port" cluster > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "needs an etcd:// or etcds:// endpoint" "$tmp/err"
ok $? "-e with a tcp:// endpoint: usage error, exit 2 (got $rc)"

# ---- start the daemon -----------------------------------------------------------------
rmemd_start "$tmp/rmemd.conf" "$tmp/rmemd.log"
rc=$?
if [ $rc -ne 0 ]; then
	echo "# rmemd did not become ready ($rc):"
	tail -20 "$tmp/rmemd.log" | diag
	echo "Bail out! rmemd did not start"
	exit 1
fi

helper_start "$tmp/holder.out" "$tmp/holder.py" "$port"
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
helper_kill
settles stats 'd["stats"]["used_bytes"] == d["stats"]["regions"] == 0'
ok $? "after the holder is killed, rmemctl shows used_bytes 0 and no regions"
"$RMEMCTL" -s "$sock" --json regions > "$tmp/json" 2> /dev/null &&
	json_check "$tmp/json" 'd["regions"] == []'
ok $? "and an empty regions list in JSON"

# ---- named regions ---------------------------------------------------------------------------
# A client (raw protocol, over TCP, so in the anonymous namespace as rmemctl on
# the Unix socket is) creates three names and opens one of them read-only too,
# then holds its handles until killed.  One name has the characters JSON must
# escape.
qname='t/"q\'
cat > "$tmp/namer.py" << 'PY'
import socket, struct, sys, time
sys.dont_write_bytecode = True  # nothing written into the tree
sys.path.insert(0, "tests/lib")
from rawcall import CONST, OP, VERSION, call
def named(s, op, rid, name, size, flags):
    n = name.encode()
    body = call(s, op, rid, struct.pack("<QIHH", size, flags, len(n), 0) + n)
    st, = struct.unpack("<i", body[:4])
    assert st == 0, "op %d %s: status %d" % (op, name, st)
    return struct.unpack("<iIQQQII", body)[2]
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
st, = struct.unpack("<i", call(s, OP["HELLO"], 1, struct.pack("<IIII", VERSION, 0, 0, 0))[:4])
assert st == 0, "HELLO status %d" % st
CREATE, OPEN, READ = OP["CREATE"], OP["OPEN"], CONST["ACCESS_READ"]
ids = [named(s, CREATE, 10, "t/a", 1 << 20, 0), named(s, OPEN, 11, "t/a", 0, READ),
       named(s, CREATE, 12, sys.argv[2], 64 << 10, 0), named(s, CREATE, 13, "t/r", 64 << 10, 0)]
print("ready %d %d %d %d" % tuple(ids), flush=True)
# Holds its session: a PING every 2 s renews the 10 s lease, however long
# a loaded machine makes the steps above take.
for rid in range(100, 250):
    time.sleep(2)
    call(s, 7, rid, b"")
PY
helper_start "$tmp/namer.out" "$tmp/namer.py" "$port" "$qname"
grep -q '^ready' "$tmp/namer.out"
ok $? "a raw client creates t/a, $qname and t/r and opens t/a read-only"
grep -q '^ready' "$tmp/namer.out" || diag < "$tmp/namer.out"

"$RMEMCTL" -s "$sock" names > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q -E '^ *[0-9]+ +- +1\.0 MiB +1048576 .* 2 +linked +t/a$' "$tmp/out" &&
	grep -q -F "$qname" "$tmp/out"
ok $? "rmemctl names: a table with t/a (anonymous, 1 MiB, 2 handles, linked) (exit $rc)"
diag < "$tmp/out"
[ $rc -eq 0 ] || diag < "$tmp/err"
"$RMEMCTL" -s "$sock" --json names > "$tmp/json" 2> "$tmp/err" && json_check "$tmp/json" "
sorted(n['name'] for n in d['names']) == sorted(['t/a', 't/r', 't/\"q\\\\'])
[n['id'] for n in d['names']] == sorted(n['id'] for n in d['names'])
all(n['tenant'] == '' and n['unlinked'] is False for n in d['names'])
[(n['length'], n['handles']) for n in d['names'] if n['name'] == 't/a'] == [(1 << 20, 2)]
all(n['handles'] == 1 for n in d['names'] if n['name'] != 't/a')
all(type(n[k]) is int for n in d['names'] for k in ('id', 'length', 'age_ms', 'handles'))"
ok $? "names JSON: the three names, the quote and backslash escaped, in id order"
"$RMEMCTL" -s "$sock" regions > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c -E ' rw +t/a$' "$tmp/out")" -eq 1 ] &&
	[ "$(grep -c -E ' r +t/a$' "$tmp/out")" -eq 1 ] && grep -q -E ' rw +t/r$' "$tmp/out" &&
	grep -F "$qname" "$tmp/out" | grep -q -E ' rw +t/"q'
ok $? "rmemctl regions: each handle with its access and name (t/a twice: rw and r) (exit $rc)"
diag < "$tmp/out"
"$RMEMCTL" -s "$sock" --json regions > "$tmp/json" 2> "$tmp/err" && json_check "$tmp/json" "
sorted((r['name'], r['access']) for r in d['regions'] if r['name'] is not None) == sorted([('t/a', 'rw'), ('t/a', 'r'), ('t/r', 'rw'), ('t/\"q\\\\', 'rw')])
len(set(r['name_id'] for r in d['regions'] if r['name'] == 't/a')) == 1
all(r['name_id'] > 0 and r['unlinked'] is False for r in d['regions'] if r['name'] is not None)
all(r['name_id'] == 0 and r['access'] == 'rw' for r in d['regions'] if r['name'] is None)"
ok $? "regions JSON: names, name ids (one for both t/a handles) and access; null for anonymous ones"
"$RMEMCTL" -s "$sock" --json stats > "$tmp/json" 2> /dev/null &&
	json_check "$tmp/json" 'd["stats"]["used_bytes"] == (1 << 20) + (128 << 10)'
ok $? "stats: a name's bytes count once, whatever its handles"

"$RMEMCTL" -s "$sock" unlink t/a > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/out" ]
ok $? "rmemctl unlink t/a exits 0, silent (got $rc)"
diag < "$tmp/err"
"$RMEMCTL" -s "$sock" --json names > "$tmp/json" 2> /dev/null && json_check "$tmp/json" "
[(n['unlinked'], n['handles']) for n in d['names'] if n['name'] == 't/a'] == [(True, 2)]"
ok $? "names: t/a is listed unlinked while its 2 handles are open"
"$RMEMCTL" -s "$sock" names 2> /dev/null | grep -q -E ' unlinked +t/a$'
ok $? "names table: t/a unlinked"
"$RMEMCTL" -s "$sock" regions 2> /dev/null | grep -c -E ' \(t/a\)$' | grep -q -x 2 &&
	"$RMEMCTL" -s "$sock" --json regions 2> /dev/null > "$tmp/json" && json_check "$tmp/json" "
[r['unlinked'] for r in d['regions'] if r['name'] == 't/a'] == [True, True]"
ok $? "regions: both t/a handles shown as (t/a), unlinked"
"$RMEMCTL" -s "$sock" unlink t/a > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q -F "t/a" "$tmp/err" && grep -q -i "no name" "$tmp/err"
ok $? "rmemctl unlink t/a again: exit 1, no such name (got $rc)"
diag < "$tmp/err"

"$RMEMCTL" -c "127.0.0.1:$port" unlink "$qname" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ]
ok $? "rmemctl -c HOST:PORT unlink works over TCP, in the same anonymous namespace (exit $rc)"
diag < "$tmp/err"
"$RMEMCTL" -s "$sock" unlink --revoke t/r > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ]
ok $? "rmemctl unlink --revoke t/r exits 0 (got $rc)"
diag < "$tmp/err"
"$RMEMCTL" -s "$sock" --json names > "$tmp/json" 2> /dev/null && json_check "$tmp/json" "
[n['handles'] for n in d['names'] if n['name'] == 't/\"q\\\\' and n['unlinked']] == [1]
not [n for n in d['names'] if n['name'] == 't/r' and n['handles'] > 0]"
ok $? "names: $qname unlinked with its handle; t/r revoked, no handle left"

"$RMEMCTL" -c "127.0.0.1:$port" names > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q -i -E 'unix|admin' "$tmp/err"
ok $? "rmemctl -c HOST:PORT names: exit 1 (got $rc) with a message about the Unix socket"
long=$(printf 'n%.0s' $(seq 256))
"$RMEMCTL" -s "$sock" unlink "$long" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q -i "long" "$tmp/err"
ok $? "rmemctl unlink of a 256-byte name: exit 1, too long (got $rc)"
"$RMEMCTL" -s "$sock" unlink "a b" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q -i "not a name" "$tmp/err"
ok $? "rmemctl unlink 'a b': exit 1, not a name (got $rc)"

helper_kill
settles names 'd["names"] == []' stats 'd["stats"]["used_bytes"] == d["stats"]["regions"] == 0'
ok $? "after the namer is killed: no names left, used_bytes 0 and no regions"

# ---- the admin's unlink in a namespace: --namespace ---------------------------------------
helper_start "$tmp/namer.out" "$tmp/namer.py" "$port" "t/ns"
grep -q '^ready' "$tmp/namer.out"
ok $? "a raw client creates t/a, t/ns and t/r again"
ctl_fails "Unix socket" "rmemctl -c HOST:PORT --namespace '' unlink: exit 1, refused: admin only" \
	-c "127.0.0.1:$port" --namespace "" unlink t/ns
ctl_fails "no tenant 'nosuch'" "rmemctl --namespace nosuch unlink t/ns: exit 1, no such tenant" \
	-s "$sock" --namespace nosuch unlink t/ns
"$RMEMCTL" -s "$sock" --namespace "" unlink t/a > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/out" ]
ok $? "rmemctl --namespace '' unlink t/a: the admin unlinks in the anonymous namespace (exit $rc)"
diag < "$tmp/err"
"$RMEMCTL" -s "$sock" -N "" --revoke unlink t/r > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ]
ok $? "rmemctl -N '' --revoke unlink t/r exits 0 (got $rc)"
"$RMEMCTL" -s "$sock" --json names > "$tmp/json" 2> /dev/null && json_check "$tmp/json" "
[(n['unlinked'], n['handles']) for n in d['names'] if n['name'] == 't/a'] == [(True, 2)]
not [n for n in d['names'] if n['name'] == 't/r' and n['handles'] > 0]
[n['unlinked'] for n in d['names'] if n['name'] == 't/ns'] == [False]"
ok $? "names: t/a unlinked with its 2 handles, t/r revoked, t/ns still linked"
"$RMEMCTL" -s "$sock" --namespace "" unlink t/ns > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ]
ok $? "rmemctl --namespace '' unlink t/ns exits 0 (got $rc)"
"$RMEMCTL" -s "$sock" --namespace "" unlink t/ns > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q -F "no name 't/ns' in the anonymous namespace" "$tmp/err"
ok $? "again: exit 1, no such name (got $rc)"
helper_kill
settles names 'd["names"] == []'
ok $? "after the namer is killed again: no names left"

rmemd_stop TERM "$tmp/rmemd.log"
ok $rc "rmemd exits 0 on SIGTERM (exit $rc)"

# ---- as a tenant: -t and -k -------------------------------------------------------------------
# A daemon with a tenant: rmemctl unlinks in the tenant's namespace.
printf 'secret of tenant alpha, 0123456789' > "$tmp/alpha.key"
chmod 600 "$tmp/alpha.key"
printf 'not the secret of tenant alpha, 99' > "$tmp/wrong.key"
chmod 600 "$tmp/wrong.key"
rmemd_conf "$tmp/rmemd2.conf" "$port" 64M
echo "tenants = ( { name = \"alpha\"; secret_file = \"$tmp/alpha.key\"; } );" >> "$tmp/rmemd2.conf"
rmemd_start "$tmp/rmemd2.conf" "$tmp/rmemd2.log"
rc=$?
ok $rc "rmemd with tenant alpha starts ($rc)"
[ $rc -eq 0 ] || tail -20 "$tmp/rmemd2.log" | diag
ctl_fails "no name 't/a' in alpha's namespace" \
	"rmemctl -t alpha -k KEY unlink t/a: exit 1, not in alpha's namespace" \
	-c "127.0.0.1:$port" -t alpha -k "$tmp/alpha.key" unlink t/a
ctl_fails "refused tenant 'alpha'" "with the wrong secret: exit 1, the tenant refused" \
	-c "127.0.0.1:$port" -t alpha -k "$tmp/wrong.key" unlink t/a
# The admin's unlink in alpha's namespace (rmem_unlink_ns; test_named covers a
# name that is there).
ctl_fails "no name 't/a' in alpha's namespace" \
	"rmemctl --namespace alpha unlink t/a: exit 1, not in alpha's namespace" \
	-s "$sock" --namespace alpha unlink t/a
"$RMEMCTL" -c "127.0.0.1:$port" -t alpha -k "$tmp/alpha.key" --namespace alpha \
	unlink t/a > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ]
ok $? "--namespace with -t -k: usage error, exit 2 (got $rc)"
rmemd_stop TERM "$tmp/rmemd2.log"
ok $rc "that rmemd exits 0 on SIGTERM too (exit $rc)"

tap_done
