#!/bin/sh
# tests/cli_bench_forward.sh - the benchmarks are their own program,
# build/mess-bench (bench/), not part of the tool: `mess bench WHAT ...`
# runs the mess-bench beside the tool's executable with the same
# arguments, so its output and exit code are mess-bench's (help texts,
# refusals, a real run with its numbers masked); a tool with none beside
# it (as installed) says that the benchmarks are built from the source
# tree and exits 2; a mess-bench it cannot run is named with the reason.
# The tool's sources (cli/) include the public headers only and link
# against the shared library's exported API alone.  The installed tool is
# checked in tests/cli_install.sh.  Last line: "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
set -u
MESS=${MESS:-build/mess}
tool=$MESS   # the real tool (shlib.sh may wrap $MESS to record stderr)
bench=$(dirname "$tool")/mess-bench
. tests/shlib.sh
# stderr of a tool run outside $MESS, recorded like $MESS's (msgcov.py)
record() { [ -z "${msg_log:-}" ] || cat "$tmp/err" >>"$msg_log"; }
# the names a help text lists (one space suffices: "protocol" fills its column)
names() { sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p'; }
# numbers (times, rates, sizes) differ between two runs
mask() { sed -E 's/[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/N/g' "$1"; }

[ -x "$bench" ] && ok "$bench is built beside $tool" || bad "no $bench"

# same NAME MASK ARGS...: `mess bench ARGS` and `mess-bench ARGS` print the
# same stdout and stderr (numbers masked when MASK is 1) and exit alike.
same() {
    name=$1
    masked=$2
    shift 2
    "$MESS" bench "$@" >"$tmp/o1" 2>"$tmp/e1"
    rc1=$?
    "$bench" "$@" >"$tmp/o2" 2>"$tmp/e2"
    rc2=$?
    if [ "$masked" = 1 ]; then
        for f in o1 e1 o2 e2; do mask "$tmp/$f" >"$tmp/$f.m" && mv "$tmp/$f.m" "$tmp/$f"; done
    fi
    if [ "$rc1" = "$rc2" ] && cmp -s "$tmp/o1" "$tmp/o2" && cmp -s "$tmp/e1" "$tmp/e2"; then
        ok "mess bench $name = mess-bench $name (exit $rc1)"
    else
        bad "mess bench $name: exit $rc1 vs $rc2; $(diff "$tmp/o1" "$tmp/o2" | head -n 4) $(diff "$tmp/e1" "$tmp/e2" | head -n 4)"
    fi
}

same "(no WHAT)" 0
same "--help" 0 --help
whats=$("$bench" --help | names)
# shellcheck disable=SC2086
[ "$(echo $whats | wc -w)" -ge 8 ] && ok "mess-bench lists $(echo $whats)" || bad "mess-bench --help: $(echo $whats)"
for w in $whats; do
    same "$w --help" 0 "$w" --help
done
same "foo (unknown)" 0 foo
same "hnsw (no --base)" 0 hnsw
same "open (missing server)" 0 open --server "$tmp/none"
same "payload --bogus" 0 payload --bogus
same "payload (a run)" 1 payload --entries 200 --unique 80 --dim 64 --repeat 3
grep -q '^{' "$tmp/o1" && ok "the run ends with its JSON line" || bad "payload run: $(cat "$tmp/e1")"

# the tool with no mess-bench beside it, as installed
mkdir "$tmp/alone" && cp "$tool" "$tmp/alone/mess"
for args in "server" "--help" "hnsw --help" ""; do
    # shellcheck disable=SC2086
    "$tmp/alone/mess" bench $args >"$tmp/out" 2>"$tmp/err"
    rc=$?
    record
    if [ $rc = 2 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] &&
       grep -q '^mess: bench: the benchmarks are not installed; they are built from the source tree (make, then build/mess-bench WHAT or build/mess bench WHAT)$' "$tmp/err"; then
        ok "alone: mess bench $args says where the benchmarks are (exit 2)"
    else
        bad "alone: mess bench $args: exit $rc, stdout $(head -c 100 "$tmp/out"), stderr $(cat "$tmp/err")"
    fi
done
"$tmp/alone/mess" --help | names | grep -qx bench && ok "alone: mess --help lists bench" ||
    bad "alone: mess --help does not list bench"

# a mess-bench beside the tool that cannot be run: named, with the reason
mkdir "$tmp/noexec" && cp "$tool" "$tmp/noexec/mess" && : >"$tmp/noexec/mess-bench" &&
    chmod 644 "$tmp/noexec/mess-bench"
"$tmp/noexec/mess" bench server >"$tmp/out" 2>"$tmp/err"
rc=$?
record
if [ $rc = 1 ] && grep -q "^mess: bench: $tmp/noexec/mess-bench: Permission denied\$" "$tmp/err"; then
    ok "a mess-bench that cannot run: named (exit 1)"
else
    bad "a mess-bench that cannot run: exit $rc, $(cat "$tmp/err")"
fi

# cli/ includes the public headers and its own cli.h only (the Makefile
# also compiles it without the library's include paths) ...
inc=$(grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' cli/*.c cli/*.h |
      sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/' | sort -u |
      grep -vx -e '../mess.h' -e '../mess_experimental.h' -e 'cli.h')
[ -z "$inc" ] && ok "cli/ includes only mess.h, mess_experimental.h and cli.h" ||
    bad "cli/ includes: $(echo $inc)"
# ... and calls the exported API only: its objects link against the
# shared library, which exports nothing else (libmess.map)
# (the objects of cli/'s sources only: a tree built before a file moved
# may still hold its old object there)
objs=$(for c in cli/*.c; do o=build/rel/cli/$(basename "$c" .c).o; [ -f "$o" ] && echo "$o"; done)
if [ -n "$objs" ] && [ -f build/libmess.so ]; then
    mkdir "$tmp/lib" && ln -s "$(pwd)/build/libmess.so" "$tmp/lib/libmess.so.0"
    # shellcheck disable=SC2086
    if ${CC:-cc} -o "$tmp/mess-shared" $objs build/libmess.so -lm -pthread >"$tmp/log" 2>&1 &&
       [ "$(LD_LIBRARY_PATH="$tmp/lib" "$tmp/mess-shared" version)" = "$("$tool" version)" ]; then
        ok "the tool's objects link against libmess.so (exported API only)"
    else
        bad "the tool's objects against libmess.so: $(grep -o 'undefined reference to `[^'\'']*' "$tmp/log" | sort -u | head -n 5)"
    fi
else
    echo "skip - build/rel/cli/*.o or build/libmess.so not built (make all)"
fi
finish
