/*
 * test_endpoint.c - the endpoint string parser, good inputs and bad ones.
 */
#include <errno.h>
#include <string.h>

#include "endpoint.h"
#include "tap.h"

static const char *kind_name(enum endpoint_kind kind)
{
	switch (kind) {
	case ENDPOINT_TCP:
		return "tcp";
	case ENDPOINT_RDMA:
		return "rdma";
	case ENDPOINT_UNIX:
		return "unix";
	}
	return "?";
}

static void check_inet(const char *s, enum endpoint_kind kind, bool explicit_scheme,
		       const char *host, uint16_t port)
{
	struct endpoint ep;
	int err = endpoint_parse(s, &ep);
	char port_str[8];

	snprintf(port_str, sizeof(port_str), "%u", port);
	ok(err == 0 && ep.kind == kind && ep.explicit_scheme == explicit_scheme &&
	   strcmp(ep.host, host) == 0 && ep.port_num == port && strcmp(ep.port, port_str) == 0,
	   "\"%s\" -> %s host \"%s\" port %u (got err %d, %s \"%s\" %u)", s, kind_name(kind),
	   host, port, err, kind_name(ep.kind), ep.host, ep.port_num);
}

static void check_unix(const char *s, const char *path)
{
	struct endpoint ep;
	int err = endpoint_parse(s, &ep);

	ok(err == 0 && ep.kind == ENDPOINT_UNIX && strcmp(ep.path, path) == 0,
	   "\"%s\" -> unix path \"%s\" (got err %d)", s, path, err);
}

static void check_bad(const char *s)
{
	struct endpoint ep;
	int err = endpoint_parse(s, &ep);

	ok(err == -EINVAL, "\"%s\" is rejected with -EINVAL (got %d)", s, err);
}

static void good_inputs(void)
{
	check_inet("localhost:7000", ENDPOINT_TCP, false, "localhost", 7000);
	check_inet("tcp://localhost:7000", ENDPOINT_TCP, true, "localhost", 7000);
	check_inet("rdma://10.0.0.1:7001", ENDPOINT_RDMA, true, "10.0.0.1", 7001);
	check_inet("127.0.0.1:1", ENDPOINT_TCP, false, "127.0.0.1", 1);
	check_inet("host.example.com:65535", ENDPOINT_TCP, false, "host.example.com", 65535);
	check_inet("host.example.com.:80", ENDPOINT_TCP, false, "host.example.com.", 80);
	check_inet("my_host-2:80", ENDPOINT_TCP, false, "my_host-2", 80);
	check_inet("[::1]:7000", ENDPOINT_TCP, false, "::1", 7000);
	check_inet("tcp://[2001:db8::17]:443", ENDPOINT_TCP, true, "2001:db8::17", 443);
	check_inet("rdma://[fe80::1%eth0]:7001", ENDPOINT_RDMA, true, "fe80::1%eth0", 7001);
	check_inet("[::ffff:192.0.2.1]:9", ENDPOINT_TCP, false, "::ffff:192.0.2.1", 9);
	check_unix("unix:/run/rmemd/rmemd.sock", "/run/rmemd/rmemd.sock");
	check_unix("unix:rel/sock", "rel/sock");
	check_unix("unix:s", "s");
}

static void long_inputs(void)
{
	char buf[600];
	size_t n;

	/* The longest path that fits sun_path with its NUL, then one byte more. */
	memcpy(buf, "unix:", 5);
	memset(buf + 5, 'p', ENDPOINT_PATH_MAX - 1);
	buf[5 + ENDPOINT_PATH_MAX - 1] = '\0';
	{
		struct endpoint ep;
		int err = endpoint_parse(buf, &ep);

		ok(err == 0 && strlen(ep.path) == ENDPOINT_PATH_MAX - 1,
		   "a %d-byte unix path is accepted (got %d)", ENDPOINT_PATH_MAX - 1, err);
	}
	memset(buf + 5, 'p', ENDPOINT_PATH_MAX);
	buf[5 + ENDPOINT_PATH_MAX] = '\0';
	ok(endpoint_parse(buf, &(struct endpoint){ 0 }) == -EINVAL,
	   "a %d-byte unix path is rejected", ENDPOINT_PATH_MAX);

	/* A 63-character label is fine, 64 is not. */
	memset(buf, 'a', 63);
	memcpy(buf + 63, ":1", 3);
	ok(endpoint_parse(buf, &(struct endpoint){ 0 }) == 0, "a 63-character label is accepted");
	memset(buf, 'a', 64);
	memcpy(buf + 64, ":1", 3);
	ok(endpoint_parse(buf, &(struct endpoint){ 0 }) == -EINVAL,
	   "a 64-character label is rejected");

	/* Names of 253 characters pass, 254 do not. */
	n = 0;
	while (n < 253) {
		size_t chunk = 253 - n >= 50 ? 49 : 253 - n;

		memset(buf + n, 'b', chunk);
		n += chunk;
		if (n < 253)
			buf[n++] = '.';
	}
	memcpy(buf + n, ":80", 4);
	ok(strlen(buf) == 256 && endpoint_parse(buf, &(struct endpoint){ 0 }) == 0,
	   "a 253-character name is accepted");
	memmove(buf + 1, buf, strlen(buf) + 1);
	buf[0] = 'b';
	ok(endpoint_parse(buf, &(struct endpoint){ 0 }) == -EINVAL,
	   "a 254-character name is rejected");
}

static void bad_inputs(void)
{
	static const char *const bad[] = {
		"", ":", "localhost", "localhost:", ":7000", "localhost:0", "localhost:65536",
		"localhost:99999", "localhost:007", "localhost:+80", "localhost:-1",
		"localhost:80x", "localhost:80 ", " localhost:80", "localhost: 80",
		"localhost:80:81", "local host:80", "local/host:80", "-host:80",
		"host-:80", "a..b:80", ".host:80", "host..:80", "::1:80", "[::1]",
		"[::1]80", "[::1]:", "[::1]:0", "[]:80", "[::1:80", "::1]:80",
		"[not-ipv6]:80", "[1.2.3.4]:80", "[fe80::1%]:80", "[fe80::1%eth 0]:80",
		"[::1]:80x", "1.2.3:80", "256.1.1.1:80", "1.2.3.4.5:80", "tcp://",
		"tcp://:80", "tcp://host", "rdma://", "rdma://host:0", "udp://host:80",
		"TCP://host:80", "tcp:/host:80", "tcp:host:80", "unix:", "http://h:80",
		"host:80/", "tcp://tcp://host:80",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_bad(bad[i]);
	ok(endpoint_parse(NULL, &(struct endpoint){ 0 }) == -EINVAL, "NULL string -> -EINVAL");
	ok(endpoint_parse("localhost:1", NULL) == -EINVAL, "NULL output -> -EINVAL");
}

/* TLS: tls://, ?tls=1 and the tls_* parameters, which never come without
 * TLS (issue 33: nothing that asks for TLS means clear text). */
static void tls_inputs(void)
{
	static const char *const bad[] = {
		"localhost:80?tls_ca=/ca.pem", "tcp://h:80?tls_name=x", "rdma://h:80?tls=1",
		"tls://h:80?tls_ca=/a&tls_ca=/b", "tls://h:80?tls_cert=/c", "tls://h:80?tls_key=/k",
		"tls://h:80?", "tls://h:80?tls=2", "tls://h:80?tls_ca=", "tls://h:80?tls_ca=%zz",
		"tls://h:80?tls_ca=%00", "tls://h:80?other=1", "h:80?tls=1&tls=1", "tls://h",
	};
	struct endpoint ep;
	int err;

	check_inet("tls://localhost:7000", ENDPOINT_TCP, true, "localhost", 7000);
	err = endpoint_parse("tls://127.0.0.1:7000", &ep);
	ok(err == 0 && ep.tls && !ep.tls_ca[0] && !ep.tls_name[0], "tls:// is TLS with the "
	   "system's CA and the host's name (%d)", err);
	err = endpoint_parse("127.0.0.1:7000", &ep);
	ok(err == 0 && !ep.tls, "HOST:PORT is no TLS (%d)", err);
	err = endpoint_parse("tcp://h:7000?tls=1&tls_ca=/etc/a%26b.pem&tls_name=rmemd.example"
			     "&tls_cert=/c.pem&tls_key=/k.pem", &ep);
	ok(err == 0 && ep.tls && !strcmp(ep.host, "h") && ep.port_num == 7000 &&
	   !strcmp(ep.tls_ca, "/etc/a&b.pem") && !strcmp(ep.tls_name, "rmemd.example") &&
	   !strcmp(ep.tls_cert, "/c.pem") && !strcmp(ep.tls_key, "/k.pem"),
	   "?tls=1 with every tls_* parameter, %%26 decoded (%d: %s %s)", err, ep.tls_ca,
	   ep.tls_name);
	err = endpoint_parse("[::1]:9?tls=1", &ep);
	ok(err == 0 && ep.tls && !strcmp(ep.host, "::1"), "[::1]:9?tls=1 (%d)", err);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_bad(bad[i]);
}

int main(void)
{
	good_inputs();
	long_inputs();
	bad_inputs();
	tls_inputs();
	return tap_done();
}
