#!/bin/bash
# test_static.sh - librmem exports only its API, and links statically.
#  - nm: librmem.a and librmem.so.1 define no global but rmem_* (and the
#    reserved __rmem_* of the compat versions; RMEM_1.x version nodes);
#  - nor any function of common/'s daemon-only modules (state.c, hash64.c,
#    addr.c): librmem takes from libcommon.a what it calls;
#  - one version story: rmem.h's RMEM_VERSION_*, the Makefile's VERSION and
#    the map's newest node agree;
#  - an application with its own client_lock, proto_encode, rdma_attach
#    (names librmem used or uses inside) links against librmem.a with
#    `pkg-config --static --libs librmem` alone, and runs against rmemd;
#  - a program built before RMEM_1.2 gets the old struct layouts from
#    rmem_alloc@RMEM_1.0, rmem_stats@RMEM_1.0, rmem_regions@RMEM_1.0 (dlvsym), nothing written
#    past them.
# TAP output.
set -uo pipefail
cd "$(dirname "$0")/../.."

. tests/lib/tap.sh
. tests/lib/rmemd.sh
rmemd_setup rmem-static
stage="$tmp/stage"

# ---- what the build under test exports ----
foreign() { awk 'NF >= 3 && $2 ~ /^[A-Z]$/ && $3 !~ /^(rmem_|__rmem_|RMEM_1\.)/ {print $3}'; }
for f in "$B/librmem.a" "$B/librmem.so.1"; do
	[ -e "$f" ] || { ok 1 "$f is built"; continue; }
	case $f in
	*.a) bad=$(nm -g --defined-only "$f" | foreign) ;;
	*) bad=$(nm -D --defined-only "$f" | foreign) ;;
	esac
	[ -z "$bad" ]; ok $? "$f defines no global but rmem_*${bad:+ (also: $(echo $bad))}"
done

# ---- only what the client calls ----
# librmem links libcommon.a as an archive: common/'s daemon-only modules
# (the fd store's state codec, the hash table, the address printer) stay
# out of it.  Looked for by the names each module's own object defines,
# local or global.  (randbytes.c went in when the router's pick of servers
# took its rand_xorshift.)
for m in state hash64 addr; do
	syms=$(nm --defined-only "$B/c/common/$m.o" 2>/dev/null | awk '$2 ~ /^[TDRB]$/ {print $3}')
	if [ -z "$syms" ]; then
		ok 1 "$B/c/common/$m.o is built and defines something"
		continue
	fi
	for f in "$B/librmem.so.1" "$B/librmem.a"; do
		hit=$(nm --defined-only "$f" 2>/dev/null | awk '{print $3}' | grep -Fx -f <(echo "$syms"))
		[ -e "$f" ] && [ -z "$hit" ]
		ok $? "$(basename "$f") has no code of common/$m.c${hit:+ (has: $(echo $hit))}"
	done
done

# ---- one version story ----
hv=$(awk '/#define RMEM_VERSION_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep="."}' \
	client-lib/include/rmem.h)
mv=$(awk '/^VERSION *:=/ {print $3}' Makefile)
node=$(grep -o '^RMEM_[0-9]*\.[0-9]*' client-lib/librmem.map | tail -n 1)
[ "$hv" = "$mv" ] && [ "RMEM_${hv%.*}" = "$node" ]
ok $? "rmem.h says $hv, the Makefile $mv, the map's newest node is $node"

# ---- a static application ----
stage_install "$stage" "$tmp/install.log"
ok $? "make install PREFIX=/usr DESTDIR=... succeeds"
# Only the archive is left where pkg-config points: -lrmem must take it.
mkdir -p "$tmp/shared"
mv "$stage"/usr/lib/librmem.so* "$tmp/shared/"

cat > "$tmp/app.c" <<'APP'
#include <rmem.h>
#include <stdio.h>
#include <string.h>

/* Names librmem had (or has) inside: an application may use them. */
int client_lock_calls, proto_encode_calls, rdma_attach_calls;
void client_lock(void *p) { (void)p; client_lock_calls++; }
int proto_encode(const char *s) { proto_encode_calls++; return (int)strlen(s); }
int rdma_attach(int x) { rdma_attach_calls++; return x + 1; }
void lock_hold(void);
void lock_hold(void) { }

int main(int argc, char **argv)
{
	rmem_client *c;
	struct rmem_region r;
	char out[4096], in[sizeof out];
	int rc;

	if (argc < 2)
		return 2;
	client_lock(NULL);
	if (proto_encode("abc") != 3 || rdma_attach(41) != 42 || client_lock_calls != 1) {
		fprintf(stderr, "the application's own functions were not called\n");
		return 1;
	}
	if (rmem_version() != RMEM_VERSION) {
		fprintf(stderr, "rmem_version %x, header %x\n", rmem_version(), RMEM_VERSION);
		return 1;
	}
	for (size_t i = 0; i < sizeof out; i++)
		out[i] = (char)(i * 7 + 3);
	memset(in, 0, sizeof in);
	rc = rmem_connect(argv[1], NULL, &c);
	if (rc < 0) {
		fprintf(stderr, "connect: %s\n", rmem_strerror(rc));
		return 1;
	}
	if ((rc = rmem_alloc(c, sizeof out, 0, &r)) < 0 ||
	    (rc = rmem_write(c, &r, 0, out, sizeof out)) < 0 ||
	    (rc = rmem_read(c, &r, 0, in, sizeof in)) < 0 ||
	    (rc = rmem_free(c, &r)) < 0) {
		fprintf(stderr, "op: %s\n", rmem_strerror(rc));
		return 1;
	}
	rmem_close(c);
	if (memcmp(in, out, sizeof out) != 0) {
		fprintf(stderr, "read back other bytes\n");
		return 1;
	}
	printf("static ok\n");
	return 0;
}
APP
pc="$stage/usr/lib/pkgconfig"
flags=$(PKG_CONFIG_PATH="$pc" PKG_CONFIG_SYSROOT_DIR="$stage" pkg-config --cflags --static --libs librmem)
ok $? "pkg-config --static librmem answers"
cc -std=c99 -Wall -Wextra -Werror -o "$tmp/app" "$tmp/app.c" $flags >"$tmp/cc.log" 2>&1
rc=$?
ok $rc "an application with its own client_lock, proto_encode, rdma_attach links statically"
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/cc.log"
if [ -e "$tmp/app" ]; then
	! readelf -d "$tmp/app" | grep -q 'librmem'
	ok $? "it needs no librmem.so"
fi

port=$(free_port)
rmemd_conf "$tmp/rmemd.conf" "$port" 16M
RMEMD="$stage/usr/sbin/rmemd" rmemd_start "$tmp/rmemd.conf" "$tmp/rmemd.log"
ok $? "the installed rmemd starts and says READY=1"
out=$("$tmp/app" "tcp://127.0.0.1:$port" 2>&1)
[ "$out" = "static ok" ]; ok $? "it allocs, writes, reads back the same bytes and frees: $out"

# ---- older callers ----
cat > "$tmp/compat.c" <<'APP'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <rmem.h>
#include <stdio.h>
#include <string.h>

/* The structs as RMEM_1.0 had them, with a canary behind. */
struct old_region { uint64_t id, addr, length; uint32_t rkey, flags; unsigned char canary[16]; };
struct old_stats { uint64_t v[10]; unsigned char canary[48]; };
struct old_region_info { uint64_t id, addr, length, client_id; uint32_t pool, reserved; };

static int untouched(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0xA5)
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	void *lib = dlopen(argv[1], RTLD_NOW);
	int (*alloc10)(rmem_client *, uint64_t, uint32_t, struct old_region *);
	int (*stats10)(rmem_client *, struct old_stats *);
	int (*free10)(rmem_client *, const struct old_region *);
	int (*regions10)(rmem_client *, uint64_t, struct old_region_info *, size_t);
	struct old_region_info ri[4];
	rmem_client *admin;
	int n;
	int (*conn)(const char *, const struct rmem_opts *, rmem_client **);
	void (*close10)(rmem_client *);
	struct old_region r;
	struct old_stats st;
	rmem_client *c;

	if (argc < 4 || !lib)
		return 2;
	*(void **)&alloc10 = dlvsym(lib, "rmem_alloc", "RMEM_1.0");
	*(void **)&stats10 = dlvsym(lib, "rmem_stats", "RMEM_1.0");
	*(void **)&free10 = dlvsym(lib, "rmem_free", "RMEM_1.0");
	*(void **)&conn = dlvsym(lib, "rmem_connect", "RMEM_1.0");
	*(void **)&close10 = dlvsym(lib, "rmem_close", "RMEM_1.0");
	*(void **)&regions10 = dlvsym(lib, "rmem_regions", "RMEM_1.0");
	if (!alloc10 || !stats10 || !free10 || !conn || !close10 || !regions10 ||
	    !dlvsym(lib, "rmem_post_alloc", "RMEM_1.1")) {
		fprintf(stderr, "a versioned symbol is missing\n");
		return 1;
	}
	memset(&r, 0xA5, sizeof r);
	memset(&st, 0xA5, sizeof st);
	if (conn(argv[2], NULL, &c) < 0 || alloc10(c, 100, 0, &r) < 0 || stats10(c, &st) < 0)
		return 1;
	if (r.length < 100 || !untouched(r.canary, sizeof r.canary) ||
	    st.v[4] < 1 || !untouched(st.canary, sizeof st.canary)) {
		fprintf(stderr, "old layouts not kept\n");
		return 1;
	}
	/* Entries of 40 bytes, back to back: the second starts where RMEM_1.0
	 * put it, and the canary after the one filled is untouched. */
	memset(ri, 0xA5, sizeof ri);
	if (conn(argv[3], NULL, &admin) < 0 || (n = regions10(admin, 0, ri, 1)) != 1 ||
	    ri[0].id != r.id || ri[0].length != r.length || ri[0].reserved != 0 ||
	    !untouched((const unsigned char *)&ri[1], sizeof ri - sizeof ri[0])) {
		fprintf(stderr, "rmem_regions@RMEM_1.0: old layout not kept (%d)\n", n);
		return 1;
	}
	close10(admin);
	if (free10(c, &r) < 0)
		return 1;
	close10(c);
	printf("compat ok\n");
	return 0;
}
APP
cc -std=c99 -Wall -Wextra -Werror -Iclient-lib/include -o "$tmp/compat" "$tmp/compat.c" -ldl \
	>"$tmp/cc2.log" 2>&1
ok $? "a program with RMEM_1.0's structs builds"
out=$("$tmp/compat" "$tmp/shared/librmem.so.1" "tcp://127.0.0.1:$port" "unix:$tmp/rmemd.sock" 2>&1)
[ "$out" = "compat ok" ]
ok $? "rmem_alloc@RMEM_1.0, rmem_stats@RMEM_1.0 and rmem_regions@RMEM_1.0 write the old layouts only: $out"

tap_done
