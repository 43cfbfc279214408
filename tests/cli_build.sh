#!/bin/sh
# tests/cli_build.sh - the build is portable and -Werror is a developer's
# flag: no -mpopcnt/-march from the build machine; the POPCNT instruction
# appears only in the copies the index selects at run time (*_popcnt in
# hnsw_bin.c and src/index/hnsw_many.c);
# a plain `make` compiles without -Werror, `make check` with it.
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u WERROR make --no-print-directory "$@"; }

flags=$(mk -n -B -W hnsw_bin.c build/rel/hnsw_bin.o 2>&1 | grep -- ' -c hnsw_bin.c')
case "$flags" in
"") bad "make -n shows no compile line for hnsw_bin.c" ;;
*-march=*|*-mpopcnt*|*-mtune=native*) bad "machine-specific flags: $flags" ;;
*) ok "release objects use no -march/-mpopcnt" ;;
esac
case "$flags" in
*-Werror*) bad "a plain make compiles with -Werror: $flags" ;;
*) ok "a plain make compiles without -Werror" ;;
esac
# the default goal is `all` (a plain make builds the library and the tool)
goal=$(mk -p -q -n FORCE 2>/dev/null | sed -n 's/^\.DEFAULT_GOAL := //p')
[ "$goal" = all ] && ok "a plain make builds all" || bad "the default goal is '$goal', not all"
mk -n check 2>&1 | grep -q -- 'WERROR=-Werror' &&
    ok "make check builds with -Werror" || bad "make check does not pass -Werror"

# where the instruction is: every function holding popcnt is a *_popcnt copy
if ! command -v objdump >/dev/null 2>&1; then
    echo "skip - popcnt placement: no objdump"
elif [ "$(uname -m)" != x86_64 ]; then
    echo "skip - popcnt placement: not x86-64"
else
    for f in build/libmess.so build/mess; do
        objdump -d --no-show-raw-insn "$f" | awk '
            /^[0-9a-f]+ <.*>:$/ { fn = $2 }
            /\tpopcnt/ { n[fn]++ }
            END { for (k in n) print k }' >"$tmp/fns"
        if ! grep -q '_popcnt>:$' "$tmp/fns"; then
            bad "$f: no run-time selected POPCNT copy"
        elif grep -v '_popcnt>:$' "$tmp/fns" >"$tmp/other"; then
            bad "$f: popcnt outside the selected copies: $(tr '\n' ' ' <"$tmp/other")"
        else
            ok "$f: POPCNT only in $(tr '\n' ' ' <"$tmp/fns")"
        fi
    done
fi
finish
