#!/bin/sh
# scripts/deb.sh [OUT] - `make deb`: builds the Debian packages (libmess0,
# libmess-dev, mess-tools, python3-mess) with `dpkg-buildpackage -us -uc
# -b` from a copy of the tracked files in OUT/src (default build/deb, so
# the work tree's build/ is left alone), runs lintian on the result, then
# scripts/deb_smoke.sh on the .deb files.  Needs the packages of
# `scripts/deps.sh deb`.
set -eu
cd "$(dirname "$0")/.."
# Debian's tools and interpreter only (not a python3 from ~/.pyenv etc.)
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
out=${1:-build/deb}
# the package version is the library's (mess.h); a release adds a
# debian/changelog entry (dch -v VERSION)
hv=$(sed -n 's/^#define MESS_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9][0-9]*\).*/\2/p' mess.h | paste -sd.)
cv=$(dpkg-parsechangelog -S Version)
if [ "$hv" != "$cv" ]; then
    echo "deb: debian/changelog is at $cv but mess.h at $hv: add an entry (dch -v $hv)" >&2
    exit 1
fi
rm -rf "$out"
mkdir -p "$out/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # the work tree's version of every tracked file (uncommitted edits too)
    git ls-files -z | xargs -0 cp -P --parents -t "$out/src"
else
    tar --exclude=./build --exclude=./.git -cf - . | tar -C "$out/src" -xf -
fi
echo "deb: dpkg-buildpackage -us -uc -b in $out/src (log: $out/build.log)"
if ! (cd "$out/src" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
    tail -n 40 "$out/build.log"
    echo "deb: dpkg-buildpackage failed (full log: $out/build.log)" >&2
    exit 1
fi
ls "$out"/*.deb
changes=$(ls "$out"/*.changes)
# lintian: errors, warnings and unused overrides fail; what remains is
# justified in debian/*.lintian-overrides and docs/PACKAGING.md
echo "deb: lintian $changes"
rc=0
lintian --fail-on error,warning --display-info "$changes" >"$out/lintian.txt" 2>&1 || rc=$?
grep -v '^running with root privileges' "$out/lintian.txt" || true
[ "$rc" -eq 0 ] || { echo "deb: lintian failed (exit $rc)" >&2; exit 1; }
# an override that silences nothing is a stale claim (docs/PACKAGING.md
# called one needed after lintian had stopped emitting its tag): it fails
# too, although lintian reports it as information only
if grep -q 'unused-override' "$out/lintian.txt"; then
    echo "deb: lintian: an unused override: remove it from debian/*.lintian-overrides" \
        "and docs/PACKAGING.md" >&2
    exit 1
fi
sh scripts/deb_smoke.sh "$out"
