#!/bin/sh
# tests/abi_walkthrough.sh - the usage walkthrough at the top of mess.h is
# examples/walkthrough.c, line for line (the code between the two
# "walkthrough: begin/end" markers), and that program runs: parameters ->
# client and server -> upload and apply -> save and reload -> request ->
# search -> finish -> free, finding the query's own item first.
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
prog=build/examples/walkthrough
[ -x "$prog" ] || make -s --no-print-directory "$prog" >/dev/null 2>&1

sed -n '/^\/\* ---- walkthrough: begin ---- \*\/$/,/^\/\* ---- walkthrough: end ---- \*\/$/p' \
    examples/walkthrough.c | sed '1d;$d' > "$tmp/example"
sed -n '/^ \* ---- walkthrough: begin ----$/,/^ \* ---- walkthrough: end ----$/p' mess.h |
    sed '1d;$d' | sed 's/^ \* \{0,1\}//' > "$tmp/header"
if [ "$(wc -l < "$tmp/example")" -gt 40 ] && cmp -s "$tmp/example" "$tmp/header"; then
    ok "mess.h's walkthrough is examples/walkthrough.c ($(wc -l < "$tmp/example") lines)"
else
    diff "$tmp/header" "$tmp/example" | head -20
    bad "mess.h's walkthrough differs from examples/walkthrough.c"
fi

if "$prog" "$tmp" > "$tmp/out" 2>&1; then
    ok "walkthrough runs: $(cat "$tmp/out")"
else
    bad "walkthrough failed: $(cat "$tmp/out")"
fi
grep -q "nearest id 1007 " "$tmp/out" && ok "the query's own item comes first" ||
    bad "the query's own item is not first"
[ -f "$tmp/client.mess" ] && [ -f "$tmp/server.mess" ] && ok "both save points written" ||
    bad "save points missing"
mode=$(stat -c %a "$tmp/client.mess" 2>/dev/null)
[ "$mode" = 600 ] && ok "client file mode 0600" || bad "client file mode $mode"
finish
