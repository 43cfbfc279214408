#!/bin/sh
# tests/cli_install.sh - `make install` into a staging DESTDIR: a program
# built with `pkg-config mess` links (static and shared) and runs, and
# `make uninstall` removes every installed file.
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
