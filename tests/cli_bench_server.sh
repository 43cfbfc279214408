#!/bin/sh
# tests/cli_bench_server.sh - `mess bench server` on a small server
# directory: every variant (widths, copy-ahead, kept workers, 1 and 2
# threads) answers byte-identically (the command fails otherwise), the
# rates, counts and floor are positive, the batch reports queries/s, and
# bad options, a missing client, server or query file are refused.
# Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

if small_server "$tmp/c" "$tmp/s"; then
    ok "a server of 3,000 items"
else
    bad "init or insert failed"
fi
if "$MESS" bench server --server "$tmp/s" --client "$tmp/c" --data datasets/sift --queries 30 \
    --pool 200 --widths 0,1,4,16 --ahead 0,4 --keep 0,1 --threads 1,2 --batch-threads 1,2 \
    --rounds 2 --chase-mib 4 >"$tmp/out" 2>"$tmp/err"; then
    ok "bench server runs"
    [ "$(json differ)" = 0 ] && ok "every variant byte-identical" || bad "differ: $(json differ)"
    for k in lat_ns line16_ns ham_ns searches expanded scored link_lines floor_ms cpu_ms qps_per_core; do
        v=$(json $k)
        if positive "$v"; then ok "$k = $v"; else bad "$k: '$v'"; fi
    done
    [ "$(grep -c '^  [01] ' "$tmp/out")" = 32 ] && ok "32 variants timed" ||
        bad "variants: $(grep -c '^  [01] ' "$tmp/out")"
else
    bad "bench server failed: $(cat "$tmp/err")"
fi
# the common case's loops (without and with the branch-free gather, and
# with each list scored at once) beside the former ones (--fast 0,1,2,3),
# cold and warm
if "$MESS" bench server --server "$tmp/s" --client "$tmp/c" --data datasets/sift --queries 20 \
    --pool 200 --widths 0,4 --ahead 4 --fast 0,1,2,3 --warm --threads 1 --batch-threads 1 --rounds 1 \
    --chase-mib 4 >"$tmp/out" 2>"$tmp/err"; then
    [ "$(json differ)" = 0 ] && ok "fast and former loops, warm and cold: byte-identical" ||
        bad "differ: $(json differ)"
    [ "$(grep -c '^  1 ' "$tmp/out")" = 16 ] && ok "16 variants timed (--fast 0,1,2,3 --warm)" ||
        bad "variants: $(grep -c '^  1 ' "$tmp/out")"
else
    bad "bench server --fast 0,1,2,3 --warm failed: $(cat "$tmp/err")"
fi
# both layouts on one handle (the code layout built once, 128-bit codes
# only): the same bytes
refuse "1" "--layout codes on 64-bit codes" "$MESS" bench server --server "$tmp/s" --client "$tmp/c" \
    --data datasets/sift --queries 20 --layout codes
grep -q "other than 128 bits" "$tmp/err" && ok "--layout codes on 64-bit codes: the message says 128 bits" ||
    bad "message: $(cat "$tmp/err")"
refuse "1" "info --layout codes on 64-bit codes" "$MESS" info --server "$tmp/s" --layout codes
grep -q "has codes of other than 128 bits" "$tmp/err" && ok "info --layout codes: the message says 128 bits" ||
    bad "info message: $(cat "$tmp/err")"
if small_server "$tmp/c128" "$tmp/s128" 128 &&
    "$MESS" bench server --server "$tmp/s128" --client "$tmp/c128" --data datasets/sift --queries 20 \
    --pool 200 --widths 4 --ahead 4 --fast 3 --layout default,codes --threads 1 --batch-threads 1 \
    --rounds 1 --chase-mib 4 >"$tmp/out" 2>"$tmp/err"; then
    [ "$(json differ)" = 0 ] && ok "--layout default,codes: byte-identical" ||
        bad "differ: $(json differ)"
    [ "$(grep -c '^  1 .* codes ' "$tmp/out")" = 1 ] && ok "--layout codes timed" ||
        bad "layout variants: $(cat "$tmp/out")"
    grep -q 'code layout built in .* bytes per entry' "$tmp/out" && ok "its bytes per entry printed" ||
        bad "no layout bytes line"
else
    bad "bench server --layout default,codes failed: $(cat "$tmp/err")"
fi
for args in "--widths 17" "--widths x" "--threads 1,,2" "--queries 0" "--bogus" "--travel $tmp/none" \
    "--fast 0,1,2,3,1" "--fast 4" "--popcount 3" "--popcount 0,1,2,0" "--layout codes,x" \
    "--layout none"; do
    # shellcheck disable=SC2086
    refuse "1 2" "$args" "$MESS" bench server --server "$tmp/s" --client "$tmp/c" --data datasets/sift $args
done
refuse "2" "no --data" "$MESS" bench server --server "$tmp/s"
printf 'not a state file' >"$tmp/junk"
refuse "1" "no client" "$MESS" bench server --server "$tmp/s" --client "$tmp/none" --data datasets/sift
refuse "1" "a damaged client" "$MESS" bench server --server "$tmp/s" --client "$tmp/junk" --data datasets/sift
refuse "1" "a damaged travel file" "$MESS" bench server --travel "$tmp/junk" --client "$tmp/c" \
    --data datasets/sift
refuse "1" "no query file" "$MESS" bench server --server "$tmp/s" --client "$tmp/c" --data "$tmp"
refuse "1" "no server" "$MESS" bench server --server "$tmp/none" --client "$tmp/c" --data datasets/sift
finish
