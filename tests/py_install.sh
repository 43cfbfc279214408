#!/bin/sh
# tests/py_install.sh - the Python package installs with pip into a
# virtualenv that sees Debian's numpy and setuptools (offline:
# --no-build-isolation --no-index), as a copy and editable (-e), and finds
# its library: $MESS_LIBRARY, an installed one (the linker's path), the
# source tree's build/ (editable); without any, a clear ImportError.
# Skips (0 checks, says why) when python3-venv is not installed.
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
root=$(pwd)
py=${PYTHON:-/usr/bin/python3}
lib="$root/build/libmess.so"
want=$(sed -n 's/^#define MESS_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9][0-9]*\).*/\2/p' mess.h |
       paste -sd.)

if ! "$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/log" 2>&1; then
    echo "skipped: py_install.sh: '$py -m venv' failed (install python3-venv): $(tail -n 1 "$tmp/log")"
    finish
    exit
fi
vpy="$tmp/venv/bin/python"
pip() { "$vpy" -m pip install -q --no-build-isolation --no-index --no-warn-script-location "$@"; }

# probe: prints the module's file, the library it loaded and the versions
probe='import mess; print(mess.__file__); print(mess.library_path); print(mess.__version__)'
# a real round trip through the installed package
use='
import numpy as np, mess
rng = np.random.default_rng(1)
base = rng.standard_normal((300, 16)).astype(np.float32)
p = mess.Params(16, shards=4, per_item=2)
with mess.Client(p, base, seed=bytes(32)) as c, mess.Server(p) as s:
    c.insert(s, np.arange(300), base)
    r = c.query(s, base[7], k=5, pool=60)
    print(int(r.ids[0]))
'

if pip "$root/python" >"$tmp/log" 2>&1; then
    ok "pip install ./python"
else
    cat "$tmp/log"
    bad "pip install ./python"
fi
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
out=$(cd "$tmp" && MESS_LIBRARY="$lib" "$vpy" -c "$probe" 2>&1)
if [ "$out" = "$(printf '%s\n%s\n%s' "$site/mess/__init__.py" "$lib" "$want")" ]; then
    ok "installed copy imports, loads \$MESS_LIBRARY, version $want"
else
    bad "installed copy with MESS_LIBRARY: $out"
fi
out=$(cd "$tmp" && MESS_LIBRARY="$lib" "$vpy" -c "$use" 2>&1)
[ "$out" = 7 ] && ok "installed copy: insert and query" || bad "installed copy: query: $out"
"$vpy" -m pip show mess 2>/dev/null | grep -qx "Version: $want" &&
    ok "pip show: version $want (mess.h)" || bad "pip show mess: no version $want"

# an installed library, found through the dynamic linker
mkdir -p "$tmp/lib" && cp "$lib" "$tmp/lib/libmess.so.0"
out=$(cd "$tmp" && env -u MESS_LIBRARY LD_LIBRARY_PATH="$tmp/lib" "$vpy" -c "$probe" 2>&1 | sed -n 2p)
[ "$out" = "$tmp/lib/libmess.so.0" ] && ok "installed copy finds an installed libmess.so.0" ||
    bad "installed copy with the library on the linker's path loaded: $out"

# no library anywhere: ImportError naming MESS_LIBRARY (unless this
# machine has one installed, which would rightly be found)
if ldconfig -p 2>/dev/null | grep -q 'libmess\.so\.0' || [ -e /usr/local/lib/libmess.so.0 ]; then
    echo "skip - no-library check: this machine has libmess.so.0 installed"
else
    out=$(cd "$tmp" && env -u MESS_LIBRARY -u LD_LIBRARY_PATH "$vpy" -c 'import mess' 2>&1 | tail -n 1)
    case "$out" in
    "ImportError: libmess.so not found: set MESS_LIBRARY"*) ok "no library: ImportError says what to do" ;;
    *) bad "no library: $out" ;;
    esac
fi

# editable: the package is the source tree's, the library its build/
if pip -e "$root/python" >"$tmp/log" 2>&1; then
    ok "pip install -e ./python"
else
    cat "$tmp/log"
    bad "pip install -e ./python"
fi
out=$(cd "$tmp" && env -u MESS_LIBRARY "$vpy" -c "$probe" 2>&1)
if [ "$out" = "$(printf '%s\n%s\n%s' "$root/python/mess/__init__.py" "$lib" "$want")" ]; then
    ok "editable install: source tree's package and build/libmess.so"
else
    bad "editable install: $out"
fi
out=$(cd "$tmp" && env -u MESS_LIBRARY "$vpy" -c "$use" 2>&1)
[ "$out" = 7 ] && ok "editable install: insert and query" || bad "editable install: query: $out"
"$vpy" -m pip uninstall -q -y mess >/dev/null 2>&1
out=$(cd "$tmp" && "$vpy" -c 'import mess' 2>&1 | tail -n 1)
case "$out" in
*"No module named 'mess'"*) ok "pip uninstall removes it" ;;
*) bad "after pip uninstall: $out" ;;
esac
finish
