#!/bin/bash
# test_etcd_tls.sh - etcd over TLS with client certificates (issue 33): a
# private CA made here with openssl, a real 3-member etcd on loopback that
# serves clients over https:// only and wants a client certificate
# (tests/lib/etcd.sh, ETCD_TLS_DIR), and rmemd, librmem (etcds://) and
# rmemctl on it.  Checks that rmemd with the right CA, certificate and key
# registers (its key read back with etcdctl over TLS) and its repair agent
# reaches the cluster through etcds://; that a client allocates, writes and
# reads over etcds://; that rmemctl cluster lists the server; that a wrong
# CA, a missing certificate, an expired one, one of another CA and an
# unreadable file are each refused with an error that names the file
# (rmemd exits 1 at start, librmem returns its errno, rmemctl says it);
# that an http:// endpoint with TLS files set is a config error, never
# plain HTTP; that rmemd -t names an unreadable key file with FILE:LINE.
# TAP output.
#
#   RMEM_BUILD=build tests/func/test_etcd_tls.sh
# run-tests-timeout: 240
set -u
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/cluster_test.sh rmem-etcd-tls
command -v openssl > /dev/null ||
	skip_all "openssl is missing (scripts/install-deps installs it)"
CLIENT=$B/tests/cluster_client
RMEMCTL=$B/rmemctl
[ -x "$CLIENT" ] || skip_all "$CLIENT is not built"
[ -x "$RMEMCTL" ] || skip_all "$RMEMCTL is not built"

NAME=tls$$
LEASE_MS=3000
T=$tmp/tls

cleanup_all() {
	local p
	for p in "$tmp"/pids/keeper*; do
		[ -s "$p" ] && kill -TERM "$(cat "$p")" 2> /dev/null
	done
	etcd_cleanup
	rmemd_cleanup
}
trap cleanup_all EXIT

# ---- the certificates ---------------------------------------------------------------------
# ca (the members' and the clients'), server (IP 127.0.0.1), client; a CA
# nobody trusts (other) and a client certificate of it (stranger); a
# client certificate of ca that expired yesterday (expired).
etcd_tls_certs "$T" &&
	tls_ca "$T" other &&
	etcd_tls_cert "$T" stranger other 2 && etcd_tls_cert "$T" expired ca -1
ok $? "openssl makes a CA, the members' and a client's certificates, another CA's and an" \
	"expired one" || cat "$T"/*.err | diag
openssl verify -CAfile "$T/ca.pem" "$T/client.pem" > /dev/null 2>&1 &&
	! openssl verify -CAfile "$T/ca.pem" "$T/expired.pem" > /dev/null 2>&1 &&
	! openssl verify -CAfile "$T/ca.pem" "$T/stranger.pem" > /dev/null 2>&1 &&
	openssl x509 -in "$T/server.pem" -noout -ext subjectAltName | grep -q "IP Address:127.0.0.1"
ok $? "client.pem verifies against ca.pem; expired.pem (expired) and stranger.pem do not;" \
	"server.pem is made out to IP 127.0.0.1"

# ---- etcd over TLS, client certificates required -----------------------------------------
export ETCD_TLS_DIR=$T
etcd_start 3 || etcd_wait_healthy 15
ok $? "a 3-member etcd serves clients over TLS with --client-cert-auth ($ETCD_ENDPOINTS)"
# shellcheck disable=SC2046
[[ $ETCD_ENDPOINTS == https://* ]] &&
	! ETCDCTL_API=3 "$ETCDCTL_BIN" --endpoints="$ETCD_ENDPOINTS" --dial-timeout=2s \
		--command-timeout=3s --cacert "$T/ca.pem" get /x > /dev/null 2>&1 &&
	! ETCDCTL_API=3 "$ETCDCTL_BIN" --endpoints="http://${ETCD_ENDPOINTS#https://}" \
		--dial-timeout=2s --command-timeout=3s $(etcdctl_tls_flags) get /x > /dev/null 2>&1
ok $? "etcd refuses a client without a certificate, and plain HTTP"

# URL QUERY: the cluster's etcds:// URL with QUERY.
HOSTS=${ETCD_ENDPOINTS//https:\/\//}
url() { echo "etcds://$HOSTS/$NAME?$1"; }
GOOD="etcd_ca=$T/ca.pem&etcd_cert=$T/client.pem&etcd_key=$T/client.key"

# ---- rmemd with the right files registers ------------------------------------------------
read -r -a rports <<< "$(free_ports 4)"
CLUSTER_TLS="$T/ca.pem,$T/client.pem,$T/client.key" \
	cluster_conf 0 "$NAME" "127.0.0.1:${rports[0]}" "" "$LEASE_MS" debug
grep -q "etcd_ca = \"$T/ca.pem\"" "$tmp/r0.conf" && "$RMEMD" -t -c "$tmp/r0.conf" > /dev/null 2>&1
ok $? "rmemd -t accepts cluster.etcd_ca, etcd_cert and etcd_key with https:// endpoints"
cluster_start 0 --no-store || diag <<< "s0 did not get ready: $REPLY"
cluster_registered "$NAME" 0 100
ok $? "rmemd registers in etcd over TLS (its key read with etcdctl --cacert --cert --key)" ||
	tail -20 "$tmp/r0.log" | diag
grep -q "etcd over TLS: https://127.0.0.1:[0-9]* answered" "$tmp/r0.log" &&
	grep -q "repair: agent started .*through etcds://.*etcd_ca=$T/ca.pem" "$tmp/r0.log"
ok $? "rmemd says so, and its repair agent reaches the cluster through etcds://" ||
	grep "cluster:\|repair:" "$tmp/r0.log" | diag

# ---- a client and rmemctl with the same files ---------------------------------------------
"$CLIENT" "$(url "$GOOD")" io 2 > "$tmp/io.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "io [1-9][0-9]* ops, 0 failures" "$tmp/io.out"
ok $? "a client over etcds:// allocates, writes and reads back ($(head -1 "$tmp/io.out"))" ||
	diag < "$tmp/io.out"
# The same files as rmem_opts' etcd_ca, etcd_cert, etcd_key.
CLUSTER_CLIENT_ETCD_TLS="$T/ca.pem,$T/client.pem,$T/client.key" \
	"$CLIENT" "etcds://$HOSTS/$NAME" io 1 > "$tmp/io.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "io [1-9][0-9]* ops, 0 failures" "$tmp/io.out"
ok $? "the same with the files in rmem_opts ($(head -1 "$tmp/io.out"))" || diag < "$tmp/io.out"
CLUSTER_CLIENT_ETCD_TLS="$T/other.pem,," "$CLIENT" "etcds://$HOSTS/$NAME" io 1 \
	> "$tmp/io.out" 2>&1
rc1=$?
CLUSTER_CLIENT_ETCD_TLS="$T/other.pem,," "$CLIENT" "$(url "$GOOD")" io 1 > "$tmp/io2.out" 2>&1
rc2=$?
CLUSTER_CLIENT_ETCD_TLS="$T/ca.pem,$T/client.pem,$T/client.key" \
	"$CLIENT" "etcd://$HOSTS/$NAME" io 1 > "$tmp/io3.out" 2>&1
rc3=$?
[ $rc1 -ne 0 ] && grep -q -F "verify against the etcd_ca file" "$tmp/io.out" &&
	[ $rc2 -ne 0 ] && grep -q -F "invalid argument" "$tmp/io2.out" &&
	[ $rc3 -ne 0 ] && grep -q -F "invalid argument" "$tmp/io3.out"
ok $? "rmem_opts: a wrong etcd_ca is refused; one the URL contradicts, or any with etcd://," \
	"is -EINVAL" || cat "$tmp/io.out" "$tmp/io2.out" "$tmp/io3.out" | diag
"$RMEMCTL" -e "$(url "$GOOD")" cluster > "$tmp/ctl.out" 2> "$tmp/ctl.err"
rc=$?
[ $rc -eq 0 ] && grep -q "^s0 *up *127.0.0.1:${rports[0]}" "$tmp/ctl.out"
ok $? "rmemctl -e etcds://... cluster lists s0" || cat "$tmp/ctl.out" "$tmp/ctl.err" | diag
"$RMEMCTL" -e "$(url "$GOOD")" --json stats > "$tmp/stats.out" 2> "$tmp/ctl.err"
ok $? "rmemctl -e etcds://... stats (through librmem) answers" || diag < "$tmp/ctl.err"

# ---- what is refused, and how it is said ----------------------------------------------------
# refused WHAT QUERY TEXT...: a client, rmemctl cluster and rmemctl stats with
# QUERY fail, each saying every TEXT (fixed strings).
refused() {
	local what=$1 q=$2 rc1 rc2 rc3 s
	shift 2
	"$CLIENT" "$(url "$q")" io 1 > "$tmp/r.client" 2>&1
	rc1=$?
	"$RMEMCTL" -e "$(url "$q")" cluster > /dev/null 2> "$tmp/r.ctl"
	rc2=$?
	"$RMEMCTL" -e "$(url "$q")" stats > /dev/null 2> "$tmp/r.stats"
	rc3=$?
	diag < "$tmp/r.client"
	diag < "$tmp/r.ctl"
	[ $rc1 -ne 0 ] && [ $rc2 -eq 1 ] && [ $rc3 -ne 0 ] && ! grep -q "^io " "$tmp/r.client"
	s=$?
	for text in "$@"; do
		[ $s -eq 0 ] && grep -q -F -- "$text" "$tmp/r.client" "$tmp/r.ctl" || s=1
	done
	ok $s "$what"
}

refused "a wrong CA: refused, the client says etcd_ca, rmemctl names the file" \
	"etcd_ca=$T/other.pem&etcd_cert=$T/client.pem&etcd_key=$T/client.key" \
	"does not verify against the etcd_ca file" "verify against etcd_ca $T/other.pem"
grep -q -F "verify against the etcd_ca file" "$tmp/r.client" &&
	grep -q -F "verify against etcd_ca $T/other.pem" "$tmp/r.ctl"
ok $? "(the client's words are rmem_strerror's, rmemctl's name the path)"
refused "no client certificate: refused, saying none was given" "etcd_ca=$T/ca.pem" \
	"no etcd_cert was given"
refused "an expired client certificate: refused, rmemctl names it" \
	"etcd_ca=$T/ca.pem&etcd_cert=$T/expired.pem&etcd_key=$T/expired.key" \
	"refused this client's certificate" "refused etcd_cert $T/expired.pem"
refused "another CA's client certificate: refused, rmemctl names it" \
	"etcd_ca=$T/ca.pem&etcd_cert=$T/stranger.pem&etcd_key=$T/stranger.key" \
	"refused etcd_cert $T/stranger.pem"
refused "a certificate file that is not there: refused, naming it" \
	"etcd_ca=$T/ca.pem&etcd_cert=$T/none.pem&etcd_key=$T/client.key" \
	"etcd_cert or etcd_key file cannot be read" "etcd_cert $T/none.pem: No such file"
refused "a key that is not the certificate's: refused, naming both" \
	"etcd_ca=$T/ca.pem&etcd_cert=$T/client.pem&etcd_key=$T/server.key" \
	"etcd_key $T/server.key cannot be used"

# Plain HTTP with TLS files: never.
"$CLIENT" "etcd://$HOSTS/$NAME?$GOOD" io 1 > "$tmp/r.client" 2>&1
rc1=$?
"$RMEMCTL" -e "etcd://$HOSTS/$NAME?$GOOD" cluster > /dev/null 2> "$tmp/r.ctl"
rc2=$?
[ $rc1 -ne 0 ] && grep -q -F "invalid argument" "$tmp/r.client" && [ $rc2 -eq 2 ] &&
	grep -q -F "need etcds://" "$tmp/r.ctl"
ok $? "etcd:// (plain HTTP) with etcd_ca...: -EINVAL from librmem, a usage error of rmemctl" ||
	cat "$tmp/r.client" "$tmp/r.ctl" | diag

# rmemd at start: a refused certificate is fatal, said once, naming the file.
# start_fails WHAT CA,CERT,KEY TEXT: rmemd on those files exits 1 at start,
# its log saying TEXT (a fixed string), and never gets ready.
start_fails() {
	local rc
	CLUSTER_TLS=$2 cluster_conf 1 "$NAME" "127.0.0.1:${rports[1]}" "" "$LEASE_MS" info s1
	timeout 60 "$RMEMD" -c "$tmp/r1.conf" > "$tmp/r1.log" 2>&1
	rc=$?
	[ $rc -eq 1 ] && grep -q -F -- "$3" "$tmp/r1.log" && ! grep -q "ready:" "$tmp/r1.log" &&
		[ -z "$(etcdctl_ get "/rmem/$NAME/servers/s1" --print-value-only 2> /dev/null)" ]
	ok $? "rmemd with $1 exits 1 at start ($rc), its log naming the file" ||
		grep "cluster\|err" "$tmp/r1.log" | diag
}
start_fails "a wrong CA" "$T/other.pem,$T/client.pem,$T/client.key" \
	"does not verify against etcd_ca $T/other.pem"
start_fails "an expired client certificate" "$T/ca.pem,$T/expired.pem,$T/expired.key" \
	"refused etcd_cert $T/expired.pem"
start_fails "no client certificate" "$T/ca.pem,," "no etcd_cert was given"

# ---- the config: FILE:LINE -----------------------------------------------------------------
# bad NAME LINE TEXT CONF: rmemd -t on CONF exits 1 with FILE:LINE: and TEXT.
bad() {
	local file=$tmp/bad-$1.conf rc
	printf '%s\n' "$4" > "$file"
	"$RMEMD" -t -c "$file" > /dev/null 2> "$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && grep -q -F "$file:$2:" "$tmp/err" && grep -q -F -- "$3" "$tmp/err"
	ok $? "rmemd -t refuses $1 with $file:$2: ($(head -1 "$tmp/err"))"
}
EP=${ETCD_ENDPOINTS%%,*}
bad http-with-ca 3 "is not https://" "listen = { tcp = \"127.0.0.1:7470\"; };
cluster = { name = \"x\";
  etcd = \"$EP,http://127.0.0.1:2379\";
  etcd_ca = \"$T/ca.pem\"; };"
bad unreadable-key 4 "cluster.etcd_key: cannot open \"$T/gone.key\": No such file" \
	"listen = { tcp = \"127.0.0.1:7470\"; };
cluster = { etcd = \"$EP\";
  etcd_ca = \"$T/ca.pem\"; etcd_cert = \"$T/client.pem\";
  etcd_key = \"$T/gone.key\"; };"
bad key-a-directory 3 "cluster.etcd_key: \"$T\" is not a file" \
	"listen = { tcp = \"127.0.0.1:7470\"; };
cluster = { etcd = \"$EP\"; etcd_cert = \"$T/client.pem\";
  etcd_key = \"$T\"; };"
bad cert-without-key 3 "cluster.etcd_cert is set without cluster.etcd_key" \
	"listen = { tcp = \"127.0.0.1:7470\"; };
cluster = { etcd = \"$EP\";
  etcd_cert = \"$T/client.pem\"; };"
bad ca-without-etcd 2 "cluster.etcd_ca is set but cluster.etcd is not" \
	"listen = { tcp = \"127.0.0.1:7470\"; };
cluster = { etcd_ca = \"$T/ca.pem\"; };"
# A file only root may read, for a user who may not: rmemd -t as that user.
if [ "$(id -u)" -eq 0 ] && command -v setpriv > /dev/null; then
	cp "$T/client.key" "$T/private.key" && chmod 600 "$T/private.key"
	printf '%s\n' 'listen = { tcp = "127.0.0.1:7470"; };' \
		"cluster = { etcd = \"$EP\"; etcd_cert = \"$T/client.pem\";" \
		"  etcd_key = \"$T/private.key\"; };" > "$tmp/private.conf"
	chmod 755 "$tmp" "$T"
	chmod 644 "$tmp/private.conf" "$T/client.pem"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$RMEMD" -t -c "$tmp/private.conf" \
		> /dev/null 2> "$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && grep -q -F "$tmp/private.conf:3: cluster.etcd_key: cannot open" "$tmp/err" &&
		grep -q "Permission denied" "$tmp/err"
	ok $? "rmemd -t as a user who may not read etcd_key says so at FILE:LINE" \
		"($(head -1 "$tmp/err"))"
else
	skip_one "not root (or no setpriv): a file this user cannot read needs another user"
fi

tap_done
