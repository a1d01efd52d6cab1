# tlscerts.sh - a private CA and certificates made with openssl, for the
# tests of TLS (etcd's: tests/lib/etcd.sh; rmem's own: tests/func/test_tls.sh
# and tests/func/tls/over-tls).  Sourced (bash or sh); needs nothing else.
#
#   tls_certs DIR        DIR/ca.pem (ca.key), DIR/server.pem (IP 127.0.0.1,
#                        DNS localhost) and DIR/client.pem (CN client)
#   tls_cert DIR NAME CA DAYS [EXT]
#                        DIR/NAME.key and DIR/NAME.pem (CN NAME) signed by
#                        DIR/CA.pem, valid DAYS days from now (negative:
#                        expired that long ago: its notAfter before its
#                        notBefore, which openssl x509 -req allows and every
#                        verifier refuses as expired); EXT a section of
#                        DIR/ext.cnf (default client)
#   tls_ca DIR NAME      another CA, DIR/NAME.pem and DIR/NAME.key
# Each returns 0 when openssl made them all; its complaints are in DIR/*.err.

tls_cert() {
	local d=$1 n=$2 ca=$3 days=$4 ext=${5:-client}
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$d/$n.key" -out "$d/$n.csr" -subj "/CN=$n" 2> "$d/$n.err" &&
		openssl x509 -req -in "$d/$n.csr" -CA "$d/$ca.pem" -CAkey "$d/$ca.key" \
			-days "$days" -extfile "$d/ext.cnf" -extensions "$ext" -out "$d/$n.pem" \
			2>> "$d/$n.err"
}

tls_ca() {
	local d=$1 n=$2
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-keyout "$d/$n.key" -out "$d/$n.pem" -subj "/CN=rmem test CA $n $$" 2> "$d/$n.err"
}

# The sections of ext.cnf: server (IP 127.0.0.1 and localhost; server and
# client use: etcd's members' gateway dials its own gRPC port with it),
# client, and elsewhere (a server certificate made out to another name).
tls_certs() {
	local d=$1
	mkdir -p "$d" || return 1
	printf '%s\n' "[server]" "subjectAltName = IP:127.0.0.1, DNS:localhost" \
		"extendedKeyUsage = serverAuth, clientAuth" "[client]" \
		"extendedKeyUsage = clientAuth" "[elsewhere]" \
		"subjectAltName = DNS:elsewhere.example" "extendedKeyUsage = serverAuth" \
		> "$d/ext.cnf"
	tls_ca "$d" ca && tls_cert "$d" server ca 2 server && tls_cert "$d" client ca 2 client
}
