#!/bin/bash
# test_repair_hostile.sh - the repair agent against a tenant's look-alike
# names and a forger in etcd (issue 30, items 4 and 6): a real 3-member
# etcd on loopback and four rmemd of 64 MiB (s0..s3, tenants ml and web,
# lease_ms 1000, cluster.repair_grace_ms 1000, log level debug: each agent
# logs its give-back passes), then $B/tests/test_repair_hostile, whose TAP
# stream this is (what it checks is at its top).  It calls this script
# back as its hook (tests/lib/redund_hook.sh).
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_repair_hostile.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1
NSRV=4
. tests/lib/redund_hook.sh

# ---- the hook: test_repair_hostile runs "$0 --hook DIR CMD ARGS" --------------------
key() { echo "/rmem/$NAME/names/ml/$1"; }
passes() { # each member's give-back passes so far, one a line
	for ((i = 0; i < NSRV; i++)); do
		grep -c 'repair: looked at my' "$dir/r$i.log" # 1 for none: not a failure
	done
	return 0
}
hook_cmd() {
	case $cmd in
	endpoint) # server s$1's stream endpoint, from its key in etcd (asked again
		# while etcdctl times out on a loaded machine)
		for _ in 1 2 3 4 5; do
			v=$(etcdctl_ get "/rmem/$NAME/servers/s$1" --print-value-only) && [ -n "$v" ] &&
				break
			sleep 0.2
		done
		python3 -c 'import json, sys; print(json.load(sys.stdin)["tcp"])' <<< "$v" ;;
	mark) # the passes so far, for "passes"
		passes > "$dir/mark" ;;
	passes) # 0 once every member made $1 passes since the mark; up to $2 s
		for ((t = 0; t <= $2 * 10; t++)); do
			paste -d' ' "$dir/mark" <(passes) |
				awk -v n="$1" '$2 < $1 + n { bad = 1 } END { exit bad }' && exit 0
			sleep 0.1
		done
		echo "# passes at the mark: $(tr '\n' ' ' < "$dir/mark"); now: $(passes | tr '\n' ' ')" >&2
		exit 1 ;;
	pieces-held | pieces-marked) # ml's pieces "$1~M.I" on the live servers; those
		# rmemctl names lists as pieces
		n=0
		for ((i = 0; i < NSRV; i++)); do
			c=$("$B/rmemctl" -s "$dir/r$i.sock" --json names 2> /dev/null | python3 -c '
import json, re, sys
want = sys.argv[1] == "pieces-marked"
print(sum(1 for m in json.load(sys.stdin)["names"]
          if m["tenant"] == "ml" and re.fullmatch(re.escape(sys.argv[2]) + r"~\d+\.\d+", m["name"])
          and (not want or m.get("piece"))))' "$cmd" "$1") || exit 1
			n=$((n + c))
		done
		echo "$n" ;;
	save) # ml's record of $1, kept aside
		etcdctl_ get "$(key "$1")" --print-value-only > "$dir/saved.$1" && [ -s "$dir/saved.$1" ] ;;
	restore) # the saved record of $1 put back
		etcdctl_ put "$(key "$1")" < "$dir/saved.$1" > /dev/null ;;
	del) # the attacker deletes ml's record of $1
		etcdctl_ del "$(key "$1")" | grep -qx 1 ;;
	forge) # the attacker puts a record of $1 made from the saved one, $2 of:
		# newer (every piece one layout on), 1+1 (the third piece left out),
		# decoy (each piece made 9 on another server)
		servers=$(etcdctl_ get --prefix "/rmem/$NAME/servers/" --print-value-only)
		python3 -c '
import json, sys
rec = json.load(open(sys.argv[1]))
how = sys.argv[2]
gens = {}
for line in sys.argv[3].splitlines():
    if line.strip().startswith("{"):
        r = json.loads(line)
        gens[r["id"]] = r["generation"]
if how == "newer":
    rec["layout_gen"] += 1
    for p in rec["pieces"]:
        p["made"] += 1
elif how == "1+1":
    rec["redundancy"] = "1+1"
    rec["pieces"] = rec["pieces"][:2]
elif how == "decoy":
    ids = sorted(gens)
    rec["layout_gen"] = 9
    for p in rec["pieces"]:
        other = ids[(ids.index(p["server"]) + 1) % len(ids)]
        p.update(server=other, generation=gens[other], made=9, state="healthy")
else:
    sys.exit(2)
print(json.dumps(rec))' "$dir/saved.$1" "$2" "$servers" > "$dir/forged.$1" || exit 1
		etcdctl_ put "$(key "$1")" < "$dir/forged.$1" > /dev/null ;;
	*) hook_common "$@" ;;
	esac
}
redund_hook "$@"

. tests/lib/cluster_prog.sh rmem-repair-hostile test_repair_hostile
NAME=rh$$
mkdir -p "$tmp/keys"
for k in ml web; do
	(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/keys/$k.key")
done

# TCP on loopback, whatever RMEM_TEST_TRANSPORT says: its clients are TCP's.
TRANSPORT=tcp HOST=127.0.0.1
tenants() {
	cat >> "$tmp/r$1.conf" << EOC
tenants = (
	{ name = "ml"; secret_file = "$tmp/keys/ml.key"; },
	{ name = "web"; secret_file = "$tmp/keys/web.key"; }
);
EOC
}
redund_up 1000,1000 debug tenants
server_diag() {
	grep "repair: gave back\|repair: kept" "$tmp/r$1.log" | head -8 | sed "s/^/s$1: /" | diag
}
redund_run RMEM_TENANT_DIR="$tmp/keys"
