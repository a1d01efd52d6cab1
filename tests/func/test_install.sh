#!/bin/bash
# make install into a staging DESTDIR, then build a program that includes only
# <rmem.h> and links through pkg-config librmem, and run it against rmemd.
# TAP output.
set -uo pipefail
cd "$(dirname "$0")/../.."

. tests/lib/tap.sh
. tests/lib/rmemd.sh
rmemd_setup rmem-install
stage="$tmp/stage"

stage_install "$stage" "$tmp/install.log"
ok $? "make install PREFIX=/usr DESTDIR=... succeeds"
for f in usr/sbin/rmemd usr/bin/rmemctl usr/lib/librmem.so.1 usr/lib/librmem.so usr/lib/librmem.a \
	usr/include/rmem.h usr/lib/pkgconfig/librmem.pc etc/rmemd/rmemd.conf \
	lib/systemd/system/rmemd.service usr/lib/tmpfiles.d/rmemd-thp.conf \
	usr/share/man/man8/rmemd.8 usr/share/man/man5/rmemd.conf.5 \
	usr/share/man/man3/rmem_alloc.3 usr/share/man/man7/librmem.7 usr/share/man/man8/rmemctl.8; do
	[ -e "$stage/$f" ]; ok $? "installed $f"
done
if pkg-config --exists nbdkit; then
	plugindir=$(pkg-config --variable=plugindir nbdkit)
	[ -x "$stage$plugindir/nbdkit-rmem-plugin.so" ]
	ok $? "nbdkit-rmem-plugin.so installed into nbdkit's plugin directory ($plugindir)"
	[ -e "$stage/usr/share/man/man1/nbdkit-rmem-plugin.1" ]; ok $? "with its man page"
	LD_LIBRARY_PATH="$stage/usr/lib" nbdkit --dump-plugin "$stage$plugindir/nbdkit-rmem-plugin.so" 2>&1 | grep -q '^thread_model=parallel$'
	ok $? "nbdkit loads it: thread_model=parallel"
else
	skip_one "no nbdkit-plugin-dev: the plugin is not built"
fi
soname=$(objdump -p "$stage/usr/lib/librmem.so.1" | awk '/SONAME/ {print $2}')
[ "$soname" = "librmem.so.1" ]; ok $? "SONAME is librmem.so.1 ($soname)"
bad=$(nm -D --defined-only "$stage/usr/lib/librmem.so.1" | awk '$2 ~ /[TDB]/ && $3 !~ /^rmem_/ {print $3}')
[ -z "$bad" ]; ok $? "only rmem_* symbols exported${bad:+ (also: $bad)}"
grep -q 'ExecStart=/usr/sbin/rmemd' "$stage/lib/systemd/system/rmemd.service"; ok $? "unit points at the installed rmemd"

cat > "$tmp/app.c" <<'APP'
#include <rmem.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
	rmem_client *c;
	struct rmem_region r;
	char out[] = "hello, remote memory", in[sizeof out] = "";
	int rc = rmem_connect(argv[1], NULL, &c);
	if (rc < 0) { fprintf(stderr, "connect: %s\n", rmem_strerror(rc)); return 1; }
	if ((rc = rmem_alloc(c, sizeof out, 0, &r)) < 0 ||
	    (rc = rmem_write(c, &r, 0, out, sizeof out)) < 0 ||
	    (rc = rmem_read(c, &r, 0, in, sizeof in)) < 0 ||
	    (rc = rmem_free(c, &r)) < 0) {
		fprintf(stderr, "op: %s\n", rmem_strerror(rc));
		return 1;
	}
	printf("%s via %s\n", in, rmem_transport(c));
	rmem_close(c);
	return strcmp(in, out) != 0;
	(void)argc;
}
APP
pc="$stage/usr/lib/pkgconfig"
flags=$(PKG_CONFIG_PATH="$pc" PKG_CONFIG_SYSROOT_DIR="$stage" pkg-config --cflags --libs librmem)
ok $? "pkg-config librmem answers ($flags)"
cc -std=c99 -Wall -Wextra -Werror -o "$tmp/app" "$tmp/app.c" $flags 2>"$tmp/cc.log"
ok $? "a program that includes only <rmem.h> builds with pkg-config flags"

port=$(free_port)
rmemd_conf "$tmp/rmemd.conf" "$port" 16M
RMEMD="$stage/usr/sbin/rmemd" rmemd_start "$tmp/rmemd.conf" "$tmp/rmemd.log"
ok $? "the installed rmemd starts and says READY=1"
out=$(LD_LIBRARY_PATH="$stage/usr/lib" "$tmp/app" "tcp://127.0.0.1:$port" 2>&1)
ok $? "it runs against rmemd: $out"
[ "$out" = "hello, remote memory via tcp" ]; ok $? "and says which transport it used"
out=$(LD_LIBRARY_PATH="$stage/usr/lib" "$stage/usr/bin/rmemctl" -s "$tmp/rmemd.sock" --json stats)
ok $? "installed rmemctl talks to it"

# The Python binding (python/): make install put the package where a plain
# Debian python3 looks for it (PREFIX=/usr: /usr/lib/python3/dist-packages,
# on its sys.path), without an rpath.  The staged copy is imported as the
# installed one would be: that directory, the staged librmem.
py=/usr/bin/python3
pydir=usr/lib/python3/dist-packages
for f in rmem/__init__.py rmem/_aio.py rmem/_rmem.abi3.so; do
	[ -e "$stage/$pydir/$f" ]; ok $? "installed $pydir/$f"
done
env -i "$py" -c 'import sys; sys.exit("/'"$pydir"'" not in sys.path)'
ok $? "/$pydir is on a plain python3's sys.path"
! objdump -p "$stage/$pydir/rmem/_rmem.abi3.so" | grep -q 'R.*PATH'
ok $? "the installed extension has no rpath"
pyprog='import rmem, sys
with rmem.connect(sys.argv[1]) as c, c.alloc(64) as r:
    r.write(0, b"hello from python")
    print(r.read(0, 17).decode(), "via", c.transport, rmem.__file__)'
out=$(env -i PYTHONPATH="$stage/$pydir" LD_LIBRARY_PATH="$stage/usr/lib" "$py" -c "$pyprog" \
	"unix:$tmp/rmemd.sock" 2>&1)
case $out in
"hello from python via unix $stage/$pydir/rmem/__init__.py") ok 0 "import rmem finds the installed package: $out" ;;
*) ok 1 "import rmem finds the installed package: $out" ;;
esac

# pip install --no-build-isolation ./python, offline, with Debian's
# setuptools and wheel, from a copy of the tree's python/ (pip builds in
# place) against the staged library and header.
mkdir -p "$tmp/src" && cp -r python "$tmp/src/python" && rm -rf "$tmp/src/python/build" \
	"$tmp/src/python/"*.egg-info
PKG_CONFIG_PATH="$stage/usr/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" RMEM_BUILD=/nonexistent \
	"$py" -m pip install --no-build-isolation --no-index --no-deps --target "$tmp/pip" \
	"$tmp/src/python" > "$tmp/pip.log" 2>&1
ok $? "pip install --no-build-isolation ./python works offline" || tail -20 "$tmp/pip.log" | diag
out=$(env -i PYTHONPATH="$tmp/pip" LD_LIBRARY_PATH="$stage/usr/lib" "$py" -c "$pyprog" \
	"unix:$tmp/rmemd.sock" 2>&1)
case $out in
"hello from python via unix $tmp/pip/rmem/__init__.py") ok 0 "the pip-installed package works: $out" ;;
*) ok 1 "the pip-installed package works: $out" ;;
esac
ls "$tmp/pip/rmem/" | grep -q '^_rmem\.abi3\.so$'
ok $? "pip built the abi3 (Limited API) extension"

tap_done
