#!/bin/sh
# tests/cli_bench_payload.sh - `mess bench payload`: every variant opens its
# entries (the command fails otherwise), the report ends with one JSON
# object of positive times and the two entry sizes, and bad options are
# refused.  Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

if "$MESS" bench payload --entries 200 --unique 80 --dim 64 --repeat 3 >"$tmp/out" 2>"$tmp/err"; then
    ok "bench payload runs"
    for k in siv_peek_open_ms siv_open_all_ms rfc_open_all_ms rfc_verify_open_ms; do
        v=$(json $k)
        if awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }'; then ok "$k = $v"; else bad "$k: '$v'"; fi
    done
    # f32 of 64 dims: id 8 + vector 256, plus the SIV 16 / nonce 12 + tag 16
    [ "$(json siv_entry_bytes)" = 280 ] && [ "$(json rfc_entry_bytes)" = 292 ] &&
        ok "entry sizes" || bad "entry sizes: $(tail -n 1 "$tmp/out")"
else
    bad "bench payload failed: $(cat "$tmp/err")"
fi
for args in "--unique 10 --entries 5" "--entries 0" "--dim x" "--bogus"; do
    # shellcheck disable=SC2086
    refuse 2 "$args" "$MESS" bench payload $args
done
finish
