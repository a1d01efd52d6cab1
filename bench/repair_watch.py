#!/usr/bin/env python3
# repair_watch.py - make bench-redundancy's stopwatch for a repair (issue 21).
# It kills -9 KILL (default 1) rmemd holding a data piece of a redundant named
# region at once (never the repair leader, whose death would add an election),
# then times, from that kill: their keys leaving etcd (their lease), the
# leader's "repair: ... rebuilding" log line (lease + grace + a scan), its
# "rebuilt" line, and the name's record healthy again (every piece healthy on
# a server present in its generation, as test_repair.sh's hook checks it).
# Polls the logs every 20 ms and etcd's JSON gateway every 100 ms.  Prints
# one JSON line; exit 1 when the repair did not end within TIMEOUT s.
#
#   bench/repair_watch.py ETCD_URL CLUSTER TENANT/NAME DIR TIMEOUT [KILL]
# DIR holds rI.log and pids/rmemdI for each server sI.
import base64, glob, json, os, re, signal, sys, time, urllib.request

etcd, cluster, name, d, timeout = sys.argv[1:6]
timeout = float(timeout)
nkill = int(sys.argv[6]) if len(sys.argv) > 6 else 1
pre = "/rmem/%s/" % cluster


def rng(key, prefix=False):
    body = {"key": base64.b64encode(key.encode()).decode()}
    if prefix:
        end = key[:-1] + chr(ord(key[-1]) + 1)
        body["range_end"] = base64.b64encode(end.encode()).decode()
    req = urllib.request.Request(etcd + "/v3/kv/range", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=2) as f:
        kvs = json.load(f).get("kvs", [])
    return [base64.b64decode(kv["value"]).decode() for kv in kvs]


def record():
    v = rng(pre + "names/" + name)
    return json.loads(v[0]) if v else None


def servers():
    out = {}
    for v in rng(pre + "servers/", True):
        try:
            r = json.loads(v)
            out[r["id"]] = r["generation"]
        except (ValueError, KeyError):
            pass
    return out


rec = record()
if not rec:
    sys.exit("repair_watch: no record for " + name)
lead = (rng(pre + "repair/leader") or [""])[0]
k = int(rec["redundancy"].split("+")[0])
victims = [p["server"] for p in rec["pieces"][:k] if p["server"] != lead][:nkill]
if len(victims) < nkill:
    sys.exit("repair_watch: fewer than %d data pieces off the leader" % nkill)
vis = [int(v[1:]) for v in victims]
pids = [int(open("%s/pids/rmemd%d" % (d, vi)).read()) for vi in vis]
logs = {int(re.search(r"r(\d+)\.log$", f).group(1)): f for f in glob.glob(d + "/r*.log")}
seen = {i: os.path.getsize(f) for i, f in logs.items()}
piece = (rec["size"] + k * rec["chunk"] - 1) // (k * rec["chunk"]) * rec["chunk"]

t = {}
for pid in pids:
    os.kill(pid, signal.SIGKILL)
t0 = time.monotonic()
n = 0
while time.monotonic() - t0 < timeout and "healthy" not in t:
    time.sleep(0.02)
    now = time.monotonic() - t0
    for i, f in logs.items():
        if i in vis:
            continue
        with open(f, "rb") as fh:
            fh.seek(seen[i])
            new = fh.read()
        seen[i] += len(new)
        for line in new.decode(errors="replace").splitlines():
            if "repair: " + name + ":" in line:
                if "rebuilding" in line and "rebuilding" not in t:
                    t["rebuilding"], t["repairer"] = now, "s%d" % i
                elif "rebuilt" in line:
                    t["rebuilt"] = now
    n += 1
    if n % 5:
        continue
    try:
        if "gone" not in t and not any(rng(pre + "servers/" + v) for v in victims):
            t["gone"] = now
        if "rebuilding" in t:
            rec, sv = record(), servers()
            if rec and all(p["state"] == "healthy" and sv.get(p["server"]) == p["generation"]
                           for p in rec["pieces"]):
                t["healthy"] = time.monotonic() - t0
    except OSError:
        pass  # etcd slow on a loaded host: asked again next time

ok = "healthy" in t
out = {"step": "repair", "region_bytes": rec["size"], "piece_bytes": piece,
       "rebuilt_bytes": piece * nkill, "killed": ",".join(victims),
       "leader": lead, "repairer": t.get("repairer"), "ok": ok}
for key in ("gone", "rebuilding", "rebuilt", "healthy"):
    out[key + "_s"] = round(t[key], 3) if key in t else None
if ok:
    out["rebuild_s"] = round(t["healthy"] - t["rebuilding"], 3)
    out["mbs"] = round(piece * nkill / 1e6 / out["rebuild_s"], 1)
print(json.dumps(out))
sys.exit(0 if ok else 1)
