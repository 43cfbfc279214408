#!/bin/sh
# scripts/deb_smoke.sh DIR - the .deb files in DIR, unpacked with dpkg -x
# into a scratch root (nothing is installed on this machine): `mess
# --version` runs, no package ships a benchmark program (mess-bench stays
# in the build tree) and the packaged `mess bench` says so, a C program
# compiled against libmess-dev (its header, its pkg-config file) links and
# runs against libmess0, and python3-mess
# imports and loads libmess0's library; apt-get --simulate says the
# packages' dependencies can be met here.  Last line "N passed, N failed".
set -u
dir=${1:?usage: scripts/deb_smoke.sh DIR-WITH-DEBS}
dir=$(cd "$dir" && pwd) || exit 1
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
want=$(dpkg-parsechangelog -l "$(dirname "$0")/../debian/changelog" -S Version | sed 's/-[^-]*$//')

for p in libmess0 libmess-dev mess-tools python3-mess; do
    deb=$(ls "$dir"/${p}_*.deb 2>/dev/null | head -n 1)
    if [ -n "$deb" ] && dpkg -x "$deb" "$root/sys"; then
        ok "unpacked $(basename "$deb")"
    else
        bad "no $p package in $dir"
    fi
done
lib="$root/sys/usr/lib/$ma"

out=$(LD_LIBRARY_PATH="$lib" "$root/sys/usr/bin/mess" --version 2>&1)
[ "$out" = "mess $want" ] && ok "mess --version: $out" || bad "mess --version: $out (want mess $want)"
[ -f "$root/sys/usr/share/man/man1/mess.1.gz" ] && ok "mess(1) in mess-tools" || bad "no mess(1)"
# the benchmarks are built from the source tree, not packaged
shipped=$(for deb in "$dir"/*.deb; do dpkg -c "$deb"; done | grep -E '/[^/]*bench[^/]*$')
[ -z "$shipped" ] && ok "no package ships a benchmark program" || bad "packaged: $shipped"
out=$(LD_LIBRARY_PATH="$lib" "$root/sys/usr/bin/mess" bench server 2>&1)
rc=$?
case "$rc $out" in
"2 mess: bench: the benchmarks are not installed; they are built from the source tree"*)
    ok "mess bench: built from the source tree (exit 2)" ;;
*) bad "mess bench server: exit $rc, $out" ;;
esac

cat >"$root/prog.c" <<'C'
#include <mess.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    mess_server *s = NULL;
    mess_params p;
    if (strcmp(mess_version(), MESS_VERSION_STRING) != 0)
        return 1;
    mess_params_default(&p, 32);
    if (mess_server_new(&p, &s) != MESS_OK)
        return 2;
    mess_server_free(s);
    printf("%s\n", mess_version());
    return 0;
}
C
# shellcheck disable=SC2046
if cc -o "$root/prog" "$root/prog.c" $(PKG_CONFIG_SYSROOT_DIR="$root/sys" \
        PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs mess) >"$root/log" 2>&1; then
    ok "C program compiles and links with pkg-config mess (libmess-dev)"
    out=$(LD_LIBRARY_PATH="$lib" "$root/prog" 2>&1)
    [ "$out" = "$want" ] && ok "C program runs against libmess0" || bad "C program: $out"
    ldd_out=$(LD_LIBRARY_PATH="$lib" ldd "$root/prog" | grep libmess)
    case "$ldd_out" in *"$lib/libmess.so.0"*) ok "linked to libmess.so.0 of libmess0" ;;
    *) bad "ldd: $ldd_out" ;; esac
else
    cat "$root/log"
    bad "C program against libmess-dev"
fi
if cc -o "$root/prog_static" "$root/prog.c" -I"$root/sys/usr/include" \
       "$lib/libmess.a" $(PKG_CONFIG_SYSROOT_DIR="$root/sys" PKG_CONFIG_PATH="$lib/pkgconfig" \
       pkg-config --static --libs-only-l mess | sed 's/-lmess//') >"$root/log" 2>&1 &&
   [ "$("$root/prog_static")" = "$want" ]; then
    ok "C program linked with libmess.a (libmess-dev) runs"
else
    cat "$root/log"
    bad "static link against libmess-dev"
fi

out=$(cd "$root" && env -u MESS_LIBRARY LD_LIBRARY_PATH="$lib" \
      PYTHONPATH="$root/sys/usr/lib/python3/dist-packages" \
      /usr/bin/python3 -c 'import mess; print(mess.__file__); print(mess.library_path); print(mess.version())' 2>&1)
exp=$(printf '%s\n%s\n%s' "$root/sys/usr/lib/python3/dist-packages/mess/__init__.py" "$lib/libmess.so.0" "$want")
[ "$out" = "$exp" ] && ok "python3 -c 'import mess' loads libmess0's library" || bad "python3-mess: $out"

if command -v apt-get >/dev/null 2>&1; then
    # shellcheck disable=SC2046
    if apt-get -s -q install "$dir"/*.deb >"$root/apt" 2>&1; then
        ok "apt-get --simulate: the dependencies can be met"
    else
        tail -n 5 "$root/apt"
        bad "apt-get --simulate install fails"
    fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
