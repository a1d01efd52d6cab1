#!/bin/bash
# test_tls.sh - TLS 1.3 on rmem's own TCP path (issue 33, second part): a
# private CA made here with openssl (tests/lib/tlscerts.sh), rmemd with
# listen.tls (client certificates required), a plain rmemd, and one whose
# own certificate has expired.  Checks that a tls:// client with the
# right CA and certificate connects and moves bytes, by URL parameters,
# by rmem_opts and by ?tls=1, and that rmem_transport() and rmemctl
# clients say tls; that another CA, an expired server certificate and the
# wrong server name are -EBADE; that no client certificate, an expired
# one and one of another CA are -EKEYREJECTED, with rmemd's log saying
# why; that unusable files are -ENOKEY; that a plain client on the TLS
# port and a tls:// client on the plain port are each -EPROTO at once,
# never a hang nor clear text; that tls_* parameters without TLS are
# -EINVAL; that a peer that stalls before or inside the handshake is
# closed at limits.frame_timeout_ms while others are served; that a TLS
# peer sending garbage, or a record that does not authenticate, is closed
# while others are served; that a
# recording of the stream (tests/lib/tcprecord.py) holds none of the
# region's bytes over TLS, and holds them over plain TCP (so the
# recording would have seen them); that a held client resumes over a new
# handshake after a restart; that with listen.tls.cert_tenants a client
# certificate's CN proves its tenant (and nothing else: a CN of no tenant,
# HMAC as another tenant); that rmemd -t names a bad TLS file with
# FILE:LINE; that every daemon exits 0.  TAP output.
#
# With RMEM_TLS_KERNEL=1 (tests/func/ktls/test_tls.sh, in the VM, whose
# kernel has the tls module) the kernel must be sealing: each check that
# names the transport wants "ktls" (or "ktls-tx") where it wants "tls".
#
#   RMEM_BUILD=build tests/func/test_tls.sh
# run-tests-timeout: 180
set -u
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/lib/rmemd.sh
. tests/lib/tlscerts.sh
rmemd_setup rmem-tls
command -v openssl > /dev/null ||
	skip_all "openssl is missing (scripts/install-deps installs it)"
CLIENT=$B/tests/tls_client
RMEMCTL=$B/rmemctl
[ -x "$CLIENT" ] || skip_all "$CLIENT is not built"
# KIND: what rmem_transport(), rmemctl clients and rmemd's log call a TLS
# session here (a prefix: kernel TLS is "ktls", or "ktls-tx" when the
# kernel seals only what is sent).
KIND=tls
if [ -n "${RMEM_TLS_KERNEL:-}" ]; then
	KIND=ktls
	grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp
	ok $? "RMEM_TLS_KERNEL: the kernel lists the tls ULP ($(cat /proc/sys/net/ipv4/tcp_available_ulp))"
fi
T=$tmp/certs
PATTERN="rmem-tls-region-bytes-$$-0123456789abcdef"

starters=()
cleanup_all() {
	local p
	for p in "${starters[@]}" "${holder:-}" "${proxy:-}"; do
		[ -n "$p" ] && kill -TERM "$p" 2> /dev/null
	done
	rmemd_cleanup
}
trap cleanup_all EXIT

# ---- the certificates ---------------------------------------------------------------------
# ca: the server's (IP 127.0.0.1, localhost) and a client's; other: a CA
# nobody trusts, and stranger, a client certificate of it; expired: a
# client certificate of ca, expired; oldserver: a server certificate of
# ca, expired.
tls_certs "$T" && tls_ca "$T" other && tls_cert "$T" stranger other 2 &&
	tls_cert "$T" expired ca -1 && tls_cert "$T" oldserver ca -1 server
ok $? "openssl makes a CA, server and client certificates, another CA's, expired ones" ||
	cat "$T"/*.err | diag
openssl verify -CAfile "$T/ca.pem" "$T/server.pem" "$T/client.pem" > /dev/null 2>&1 &&
	! openssl verify -CAfile "$T/ca.pem" "$T/oldserver.pem" > /dev/null 2>&1 &&
	! openssl verify -CAfile "$T/ca.pem" "$T/stranger.pem" > /dev/null 2>&1
ok $? "server.pem and client.pem verify against ca.pem; oldserver.pem and stranger.pem do not"

# ---- the daemons ----------------------------------------------------------------------------
# start NAME ARGS...: an rmemd of its own in $tmp/NAME; its port in
# port_NAME.  Short frame deadline: the stalled handshakes below.
LIMITS='limits = { max_clients = 64; lease_timeout_ms = 10000; frame_timeout_ms = 700; };'
start() {
	local name=$1
	shift
	rmemd_starter "$tmp/$name" --extra "$LIMITS" "$@" || { diag <<< "$REPLY"; return 1; }
	starters+=("$spid")
	printf -v "port_$name" '%s' "$(rmemd_field port)"
}
start tls --listen-tls "$T/server.pem,$T/server.key,$T/ca.pem,require"
ok $? "rmemd starts with listen.tls, client certificates required"
start plain
ok $? "a plain rmemd starts"
start old --listen-tls "$T/oldserver.pem,$T/oldserver.key"
ok $? "an rmemd with an expired certificate of its own starts (it is the clients' to refuse)"
# shellcheck disable=SC2154
P=$port_tls
# shellcheck disable=SC2154
PLAIN=$port_plain
# shellcheck disable=SC2154
OLD=$port_old
grep -q "listen.tcp: TLS 1.3 only, certificate $T/server.pem, client certificates of $T/ca.pem required" \
	"$tmp/tls/rmemd.log"
ok $? "rmemd logs that listen.tcp is TLS 1.3 only and whose certificates it wants"
grep -q "listen.tls.ktls = auto: kernel TLS where the kernel has its tls module (tcp_available_ulp: " \
	"$tmp/tls/rmemd.log"
ok $? "rmemd logs whether this kernel lists the tls ULP for kernel TLS" ||
	grep ktls "$tmp/tls/rmemd.log" | diag

GOOD="tls_ca=$T/ca.pem&tls_cert=$T/client.pem&tls_key=$T/client.key"

# ---- good ones ------------------------------------------------------------------------------
# client WHAT EXPECT ENDPOINT [PATTERN]: tls_client's first line is EXPECT...
client() {
	local what=$1 want=$2 ep=$3
	shift 3
	timeout 20 "$CLIENT" "$ep" "$@" > "$tmp/c.out" 2>&1
	[[ $(head -1 "$tmp/c.out") == "connect: $want"* ]]
	ok $? "$what" || diag < "$tmp/c.out"
}

client "tls:// with the CA, a client certificate and its key in the URL: connects over tls" \
	"0 $KIND" "tls://127.0.0.1:$P?$GOOD" "$PATTERN"
grep -q "^io: ok" "$tmp/c.out"
ok $? "... and writes and reads 256 KiB back" || diag < "$tmp/c.out"
TLS_CLIENT_OPTS="$T/ca.pem,$T/client.pem,$T/client.key," \
	client "the same files as rmem_opts tls_ca, tls_cert, tls_key" "0 $KIND" "tls://127.0.0.1:$P"
client "127.0.0.1:PORT?tls=1&...: TLS as tls:// says" "0 $KIND" "127.0.0.1:$P?tls=1&$GOOD" \
	"$PATTERN"
client "tls://localhost:PORT: the name localhost is checked and matches" "0 $KIND" \
	"tls://localhost:$P?$GOOD"
grep -q "client 127.0.0.1:[0-9]*: TLS 1.3 ($KIND" "$tmp/tls/rmemd.log"
ok $? "rmemd logs each session's TLS and which kind ($KIND here)"

# rmemctl clients on the Unix socket names a TLS session's transport.
mkfifo "$tmp/hold.in"
TLS_CLIENT_HOLD=1 TLS_CLIENT_RESUME_MS=10000 "$CLIENT" "tls://127.0.0.1:$P?$GOOD" "$PATTERN" \
	< "$tmp/hold.in" > "$tmp/hold.out" 2>&1 &
holder=$!
exec 9> "$tmp/hold.in"
for _ in $(seq 100); do grep -q holding "$tmp/hold.out" && break; sleep 0.05; done
"$RMEMCTL" -s "$tmp/tls/rmemd.sock" clients > "$tmp/clients.out" 2>&1
grep -qE "^ *[0-9]+ +$KIND[^ ]* " "$tmp/clients.out"
ok $? "rmemctl clients shows the tls:// session's transport as tls" ||
	diag < "$tmp/clients.out"

# A restart (the fd store keeps the memory): the held client resumes over
# a new TLS session (a new handshake, the same files) and works on.
rmemd_ctl "$tmp/tls" "restart TERM" && [[ $REPLY == "ready "* ]]
ok $? "rmemd with listen.tls restarts under the fd store" || diag <<< "$REPLY"
# The keepalive thread finds the lost stream and resumes (an alloc sent
# while it does would be -ECONNABORTED: never sent twice).
for _ in $(seq 200); do grep -q "client [0-9]* (.*) resumed" "$tmp/tls/rmemd.log" && break
	sleep 0.05; done
echo io >&9
for _ in $(seq 200); do grep -q "^transport:" "$tmp/hold.out" && break; sleep 0.05; done
[ "$(grep -c "^io: ok" "$tmp/hold.out")" -eq 2 ] && grep -q "^transport: $KIND" "$tmp/hold.out" &&
	grep -q "client [0-9]* (.*) resumed" "$tmp/tls/rmemd.log"
ok $? "the held tls:// client resumes after the restart and moves bytes again" ||
	{ diag < "$tmp/hold.out"; grep -i "resum\|TLS" "$tmp/tls/rmemd.log" | tail -5 | diag; }
exec 9>&-
wait "$holder"
holder=

# ---- the server's certificate ------------------------------------------------------------
client "another CA (tls_ca=other.pem): -EBADE" "-52 EBADE" \
	"tls://127.0.0.1:$P?tls_ca=$T/other.pem&tls_cert=$T/client.pem&tls_key=$T/client.key"
client "the system's CAs (no tls_ca) do not know this one: -EBADE" "-52 EBADE" \
	"tls://127.0.0.1:$P?tls_cert=$T/client.pem&tls_key=$T/client.key"
client "the wrong server name (tls_name=elsewhere.example): -EBADE" "-52 EBADE" \
	"tls://127.0.0.1:$P?$GOOD&tls_name=elsewhere.example"
client "an expired server certificate: -EBADE" "-52 EBADE" "tls://127.0.0.1:$OLD?$GOOD"
grep -q "TLS handshake failed: .*alert certificate expired" "$tmp/old/rmemd.log"
ok $? "... the client told it why: rmemd logs its alert, certificate expired" ||
	grep TLS "$tmp/old/rmemd.log" | diag

# ---- the client's certificate ------------------------------------------------------------
client "no client certificate where one is required: -EKEYREJECTED" "-129 EKEYREJECTED" \
	"tls://127.0.0.1:$P?tls_ca=$T/ca.pem"
client "an expired client certificate: -EKEYREJECTED" "-129 EKEYREJECTED" \
	"tls://127.0.0.1:$P?tls_ca=$T/ca.pem&tls_cert=$T/expired.pem&tls_key=$T/expired.key"
client "a client certificate of another CA: -EKEYREJECTED" "-129 EKEYREJECTED" \
	"tls://127.0.0.1:$P?tls_ca=$T/ca.pem&tls_cert=$T/stranger.pem&tls_key=$T/stranger.key"
n=$(grep -c "TLS handshake failed" "$tmp/tls/rmemd.log")
grep -q "TLS handshake failed: .*certificate" "$tmp/tls/rmemd.log" && [ "$n" -ge 3 ]
ok $? "rmemd logs each refused handshake with OpenSSL's reason ($n)" ||
	grep "TLS" "$tmp/tls/rmemd.log" | diag
client "a certificate file that is not there: -ENOKEY" "-126 ENOKEY" \
	"tls://127.0.0.1:$P?tls_ca=$T/ca.pem&tls_cert=$T/none.pem&tls_key=$T/client.key"
client "a key that is not the certificate's: -ENOKEY" "-126 ENOKEY" \
	"tls://127.0.0.1:$P?tls_ca=$T/ca.pem&tls_cert=$T/client.pem&tls_key=$T/server.key"
client "a CA file that is no CA (a key): -ENOKEY" "-126 ENOKEY" \
	"tls://127.0.0.1:$P?tls_ca=$T/ca.key&tls_cert=$T/client.pem&tls_key=$T/client.key"

# ---- TLS on one end only ---------------------------------------------------------------------
s=$SECONDS
client "a plain client on the TLS port: -EPROTO" "-71 EPROTO" "127.0.0.1:$P"
client "a tls:// client on the plain port: -EPROTO" "-71 EPROTO" "tls://127.0.0.1:$PLAIN?$GOOD"
[ $((SECONDS - s)) -le 3 ]
ok $? "both at once, never a wait for a timeout ($((SECONDS - s)) s)"
grep -q "a plain rmem client on a TLS port" "$tmp/tls/rmemd.log" &&
	grep -q "a TLS client on a plain port (listen.tls is off)" "$tmp/plain/rmemd.log"
ok $? "each rmemd logs which it was"
client "tls_ca on a plain endpoint: -EINVAL, never clear text" "-22 EINVAL" \
	"127.0.0.1:$P?tls_ca=$T/ca.pem"
TLS_CLIENT_OPTS="$T/ca.pem,,," client "rmem_opts tls_ca with tcp://: -EINVAL" "-22 EINVAL" \
	"tcp://127.0.0.1:$P"
TLS_CLIENT_OPTS="$T/other.pem,,," client "rmem_opts tls_ca that the URL contradicts: -EINVAL" \
	"-22 EINVAL" "tls://127.0.0.1:$P?$GOOD"

# ---- stalled handshakes ---------------------------------------------------------------------
# A peer silent after connecting, and one that stops inside its ClientHello:
# both closed at limits.frame_timeout_ms (700 ms here), while rmemd serves.
python3 - "$P" > "$tmp/stall.out" 2>&1 << 'EOF' &
import socket, sys, time
port = int(sys.argv[1])
silent = socket.create_connection(("127.0.0.1", port))
half = socket.create_connection(("127.0.0.1", port))
half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01")
t0 = time.monotonic()
for name, s in (("silent", silent), ("half", half)):
    s.settimeout(10)
    try:
        data = s.recv(4096)
        while data:
            data = s.recv(4096)
        print("%s closed after %.1f s" % (name, time.monotonic() - t0))
    except OSError as e:
        print("%s: %s after %.1f s" % (name, e, time.monotonic() - t0))
EOF
stall=$!
client "a good client is served while two peers stall their handshakes" "0 $KIND" \
	"tls://127.0.0.1:$P?$GOOD" "$PATTERN"
wait "$stall"
grep -q "silent closed" "$tmp/stall.out" && grep -q "half closed" "$tmp/stall.out" &&
	! grep -qE "after ([3-9]|[1-9][0-9])\." "$tmp/stall.out"
ok $? "both stalled peers are closed within a few seconds" || diag < "$tmp/stall.out"
grep -q "no TLS handshake within limits.frame_timeout_ms" "$tmp/tls/rmemd.log"
ok $? "rmemd logs the stalled handshakes"

# A flood of silent peers past limits.max_clients (64 here): the oldest
# handshakes are dropped at once, before their deadline, so that at most
# 64 are held; a good client connects in the middle of it.
python3 - "$P" > "$tmp/flood.out" 2>&1 << 'EOF' &
import socket, sys, time
port = int(sys.argv[1])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(80)]
time.sleep(0.3)  # well inside the 700 ms deadline
gone = 0
for s in socks:
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            gone += 1
    except BlockingIOError:
        pass
    except OSError:
        gone += 1
print("dropped early: %d of %d" % (gone, len(socks)))
EOF
flood=$!
client "a good client connects while 80 silent peers flood the handshakes" "0 $KIND" \
	"tls://127.0.0.1:$P?$GOOD"
wait "$flood"
n=$(sed -n 's/^dropped early: \([0-9]*\) of 80$/\1/p' "$tmp/flood.out")
[ -n "$n" ] && [ "$n" -ge 16 ] && grep -q "TLS handshakes in progress (limits.max_clients)" \
	"$tmp/tls/rmemd.log"
ok $? "past limits.max_clients the oldest handshakes are dropped before their deadline (${n:-?})" ||
	diag < "$tmp/flood.out"

# ---- hostile TLS peers ----------------------------------------------------------------------
# After a good handshake: garbage inside TLS (not an rmem frame), and raw
# bytes beside TLS (a record that does not authenticate).  Each is closed;
# the daemon serves the next client.
python3 - "$P" "$T" > "$tmp/hostile.out" 2>&1 << 'EOF'
import os, socket, ssl, sys
port, d = int(sys.argv[1]), sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.load_verify_locations(d + "/ca.pem")
ctx.load_cert_chain(d + "/client.pem", d + "/client.key")
def closed(s):
    s.settimeout(5)
    try:
        while s.recv(4096):
            pass
        return "closed"
    except (ssl.SSLError, OSError) as e:
        return "closed (%s)" % type(e).__name__
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
s.sendall(b"GET / HTTP/1.0\r\n\r\n" * 4)
print("garbage inside TLS:", closed(s))
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
raw = socket.socket(fileno=os.dup(s.fileno()))  # the same TCP stream, beside TLS
raw.sendall(b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
print("forged record:", closed(raw))
EOF
grep -q "^garbage inside TLS: closed" "$tmp/hostile.out" &&
	grep -q "^forged record: closed" "$tmp/hostile.out"
ok $? "a TLS peer that sends garbage, or a record that does not authenticate, is closed" ||
	diag < "$tmp/hostile.out"
client "... and the next client is served" "0 $KIND" "tls://127.0.0.1:$P?$GOOD" "$PATTERN"
grep -q "client 127.0.0.1:[0-9]*: TLS: " "$tmp/tls/rmemd.log"
ok $? "rmemd logs OpenSSL's reason for the forged record" || grep "TLS" "$tmp/tls/rmemd.log" | diag

# ---- what the wire carries ------------------------------------------------------------------
# record TARGET_PORT OUT: tcprecord.py in front of 127.0.0.1:TARGET_PORT;
# its port in $rport.
record() {
	: > "$2"
	# A port file of its own: the last proxy's must not be read for this one's.
	python3 tests/lib/tcprecord.py "127.0.0.1:$1" "$2" > "$2.port" &
	proxy=$!
	for _ in $(seq 200); do [ -s "$2.port" ] && break; sleep 0.05; done
	rport=$(cat "$2.port")
}
record "$P" "$tmp/wire.tls"
client "through a recording proxy, a tls:// client writes and reads its region" "0 $KIND" \
	"tls://127.0.0.1:$rport?$GOOD" "$PATTERN"
kill -TERM "$proxy"
wait "$proxy" 2> /dev/null
record "$PLAIN" "$tmp/wire.plain"
client "through the same proxy, a plain client does the same" "0 tcp" "127.0.0.1:$rport" \
	"$PATTERN"
kill -TERM "$proxy"
wait "$proxy" 2> /dev/null
proxy=
tls_bytes=$(stat -c %s "$tmp/wire.tls")
[ "$tls_bytes" -gt 524288 ] && ! grep -q -a -F "$PATTERN" "$tmp/wire.tls" &&
	! grep -q -a -F "${PATTERN:0:16}" "$tmp/wire.tls"
ok $? "the TLS recording ($tls_bytes bytes) holds no 16 bytes of the region's pattern"
grep -q -a -F "$PATTERN" "$tmp/wire.plain"
ok $? "the plain recording holds the pattern (the recording sees region bytes)"

# ---- a client certificate for a tenant (listen.tls.cert_tenants) ------------------------------
# rmemd with tenants "client" (client.pem's CN) and "other": a certificate
# whose CN names a tenant proves it, as HMAC does; a CN that names none
# leaves the client anonymous, which tenants refuse on the network.
tls_cert "$T" nobody ca 2 && (umask 077 && echo "client-secret-0123456789" > "$T/client.secret" &&
	echo "other-secret-0123456789abc" > "$T/other.secret")
TENANTS="tenants = ( { name = \"client\"; secret_file = \"$T/client.secret\"; },
  { name = \"other\"; secret_file = \"$T/other.secret\"; } );"
LIMITS="$LIMITS $TENANTS"
start ten --listen-tls "$T/server.pem,$T/server.key,$T/ca.pem,cert-tenants"
ok $? "rmemd starts with tenants and listen.tls.cert_tenants"
# shellcheck disable=SC2154
TEN=$port_ten
client "a certificate whose CN is tenant client: connects as it, no secret" "0 $KIND" \
	"tls://127.0.0.1:$TEN?$GOOD" "$PATTERN"
grep -qE "TLS 1.3 \($KIND[^)]*\), certificate of tenant client" "$tmp/ten/rmemd.log"
ok $? "rmemd logs the session's tenant from its certificate"
client "no certificate and no secret: anonymous, refused (-EACCES)" "-13 EACCES" \
	"tls://127.0.0.1:$TEN?tls_ca=$T/ca.pem"
client "a certificate whose CN names no tenant: anonymous, refused (-EACCES)" "-13 EACCES" \
	"tls://127.0.0.1:$TEN?tls_ca=$T/ca.pem&tls_cert=$T/nobody.pem&tls_key=$T/nobody.key"
TLS_CLIENT_TENANT="client,$T/client.secret" client \
	"the certificate's tenant proven by HMAC as well: connects" "0 $KIND" "tls://127.0.0.1:$TEN?$GOOD"
TLS_CLIENT_TENANT="other,$T/other.secret" client \
	"HMAC as another tenant than the certificate's: -EACCES" "-13 EACCES" \
	"tls://127.0.0.1:$TEN?$GOOD"
grep -q "AUTH as another tenant than the client certificate's (client)" "$tmp/ten/rmemd.log"
ok $? "rmemd logs why"
TLS_CLIENT_TENANT="other,$T/other.secret" client \
	"no certificate, HMAC as tenant other: connects (HMAC beside certificates)" "0 $KIND" \
	"tls://127.0.0.1:$TEN?tls_ca=$T/ca.pem"
# Without cert_tenants, the same certificate proves nothing.
client "on rmemd without cert_tenants the CN is no tenant: the plain daemon's policy" \
	"0 $KIND" "tls://127.0.0.1:$P?$GOOD"
! grep -q "certificate of tenant" "$tmp/tls/rmemd.log"
ok $? "... and rmemd with listen.tls but without cert_tenants names no tenant"

# ---- rmemd -t ---------------------------------------------------------------------------------
printf '%s\n' 'listen = {' '  tcp = "127.0.0.1:1";' \
	"  tls = { cert = \"$T/server.pem\"; key = \"$T/none.key\"; };" '};' > "$tmp/bad.conf"
"$RMEMD" -t -c "$tmp/bad.conf" > "$tmp/t.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "$tmp/bad.conf:3: listen.tls.key: cannot open \"$T/none.key\"" "$tmp/t.out"
ok $? "rmemd -t names a missing listen.tls.key with FILE:LINE (rc $rc)" || diag < "$tmp/t.out"

# Every daemon stops cleanly (under the sanitizers: no leak, no error).
for name in tls plain old ten; do
	rmemd_ctl "$tmp/$name" "stop TERM" && [ "$REPLY" = "exit 0" ]
	ok $? "rmemd $name exits 0 on SIGTERM ($REPLY)" || tail -5 "$tmp/$name/rmemd.log" | diag
done

tap_done
