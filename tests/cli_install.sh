#!/bin/sh
# tests/cli_install.sh - `make install` into a staging DESTDIR: a program
# built with `pkg-config mess` links (static and shared) and runs, the
# installed tool carries no benchmark (no mess-bench is installed; its
# `mess bench` says they are built from the source tree; nm and strings
# find no benchmark code in it), and `make uninstall` removes every
# installed file.
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
dest="$tmp/root"
prefix=/opt/libmess-test
cat > "$tmp/prog.c" <<'C'
#include <mess.h>
#include <mess_experimental.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    double eta = 0;
    /* the header and the library agree, and real calls work (a stable
     * one and one of the experimental header) */
    if (strcmp(mess_version_string(), MESS_VERSION_STRING) != 0 ||
        mess_version_number() != MESS_VERSION_NUMBER)
        return 1;
    if (mess_account_eta(0.25, &eta) != MESS_OK || eta < 1.09 || eta > 1.1)
        return 1;
    printf("%s\n", mess_strerror(MESS_EFORMAT));
    return 0;
}
C

if make -s --no-print-directory install DESTDIR="$dest" PREFIX="$prefix" >"$tmp/log" 2>&1; then
    ok "make install"
else
    cat "$tmp/log"
    bad "make install"
fi
for f in lib/libmess.a lib/libmess.so lib/libmess.so.0 include/mess.h include/mess_experimental.h \
         lib/pkgconfig/mess.pc bin/mess share/doc/libmess/README.md share/man/man1/mess.1 \
         lib/python3/dist-packages/mess/__init__.py; do
    [ -e "$dest$prefix/$f" ] && ok "installed $f" || bad "installed $f"
done

# the benchmarks (build/mess-bench) stay in the build tree
found=$(find "$dest" -name '*bench*')
[ -z "$found" ] && ok "no benchmark program installed" || bad "installed: $found"
inst="$dest$prefix/bin/mess"
"$inst" bench server >"$tmp/out" 2>"$tmp/err"
rc=$?
# recorded like $MESS's stderr, for tests/msgcov.py
[ -z "${msg_log:-}" ] || cat "$tmp/err" >>"$msg_log"
if [ $rc = 2 ] && [ ! -s "$tmp/out" ] &&
   grep -q '^mess: bench: the benchmarks are not installed; they are built from the source tree' "$tmp/err"; then
    ok "installed mess bench server: built from the source tree (exit 2)"
else
    bad "installed mess bench server: exit $rc, $(cat "$tmp/out" "$tmp/err" | head -c 300)"
fi
# the symbols are there (cli_cmd_bench, the forwarder), no benchmark's
if nm "$inst" >"$tmp/nm" 2>&1 && grep -q ' cli_cmd_bench$' "$tmp/nm"; then
    syms=$(grep -i bench "$tmp/nm" | grep -v ' cli_cmd_bench$')
    [ -z "$syms" ] && ok "nm: no benchmark symbol in the installed tool" || bad "nm: $(echo $syms | head -c 300)"
else
    bad "nm $inst: $(head -c 200 "$tmp/nm")"
fi
# the benchmarks' texts (their usage lines, the hnswlib reference) neither
hits=$(strings "$inst" | grep -e 'usage: mess bench' -e 'hnswlib_ref' -e 'mess bench [a-z]* --help')
[ -z "$hits" ] && ok "strings: no benchmark text in the installed tool" || bad "strings: $hits"

export PKG_CONFIG_PATH="$dest$prefix/lib/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$dest"
cc=${CC:-cc}
# shellcheck disable=SC2046
if $cc -o "$tmp/static" "$tmp/prog.c" $(pkg-config --cflags mess) \
       "$dest$prefix/lib/libmess.a" $(pkg-config --static --libs-only-l mess | sed 's/-lmess//') \
       >"$tmp/log" 2>&1 && "$tmp/static" >/dev/null; then
    ok "static link through pkg-config --static"
else
    cat "$tmp/log"
    bad "static link through pkg-config --static"
fi
# shellcheck disable=SC2046
if $cc -o "$tmp/shared" "$tmp/prog.c" $(pkg-config --cflags --libs mess) >"$tmp/log" 2>&1 &&
   LD_LIBRARY_PATH="$dest$prefix/lib" "$tmp/shared" >/dev/null; then
    ok "shared link through pkg-config"
else
    cat "$tmp/log"
    bad "shared link through pkg-config"
fi

# the installed Python package finds the installed library of its prefix
# (not the source tree's: it runs from elsewhere, with no MESS_LIBRARY)
want=$(sed -n 's/^#define MESS_VERSION_STRING "\(.*\)"/\1/p' mess.h)
got=$(cd "$tmp" && env -u MESS_LIBRARY PYTHONPATH="$dest$prefix/lib/python3/dist-packages" \
    "${PYTHON:-/usr/bin/python3}" -c 'import mess, mess._lib as L; print(mess.version(), L.path)' 2>&1)
case "$got" in
"$want $dest$prefix/lib/libmess.so.0") ok "installed Python package loads the installed library" ;;
*) bad "installed Python package: $got" ;;
esac

make -s --no-print-directory uninstall DESTDIR="$dest" PREFIX="$prefix" >/dev/null 2>&1
left=$(find "$dest" -type f -o -type l | wc -l)
[ "$left" -eq 0 ] && ok "make uninstall removes every file" || {
    find "$dest" -type f -o -type l
    bad "make uninstall removes every file"
}
finish
