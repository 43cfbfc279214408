#!/bin/sh
# tests/cli_bench_client.sh - `mess bench client`: every step of encode and
# finish is timed (positive), both finish paths open every entry (the
# command fails otherwise), the floors are positive, and bad options are
# refused.  Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

if "$MESS" bench client --shards 4 --learn 300 --queries 5 --pool 300 --unique 100 --repeat 3 \
    >"$tmp/out" 2>"$tmp/err"; then
    ok "bench client runs"
    for k in hash_ms rr_ms encode_ms hash_floor_ms peek_entry_ms peek_batch_ms \
        keystream_entry_ms keystream_batch_ms poly1305_entry_ms siv_batch_ms \
        open_entry_ms open_batch_ms rerank_entry_ms finish_entry_ms finish_batch_ms \
        finish_floor_ms block_ns_sodium block_ns_lanes block_ns_rounds \
        hash_portable_ms encode_portable_ms poly1305_batch_ms poly1305_nosimd_ms \
        open_nosimd_ms finish_nosimd_ms poly_lanes_ns_per_byte; do
        v=$(json $k)
        if positive "$v"; then ok "$k = $v"; else bad "$k: '$v'"; fi
    done
    [ "$(json pool)" = 300 ] && [ "$(json unique)" = 100 ] && ok "pool and unique" ||
        bad "pool and unique: $(tail -n 1 "$tmp/out")"
else
    bad "bench client failed: $(cat "$tmp/err")"
fi
# f16 responses: the rerank is timed with the portable half conversion too
if "$MESS" bench client --shards 4 --learn 300 --queries 5 --pool 300 --unique 100 --repeat 3 \
    --payload f16 >"$tmp/out" 2>"$tmp/err" &&
    tail -n 1 "$tmp/out" | grep -q '"payload":"f16","entry_bytes":280,' &&
    positive "$(json rerank_f16_portable_ms)"; then
    ok "--payload f16: 280-byte entries, rerank_f16_portable_ms = $(json rerank_f16_portable_ms)"
else
    bad "--payload f16: $(tail -n 1 "$tmp/out") $(cat "$tmp/err")"
fi
refuse 2 "--payload f8" "$MESS" bench client --payload f8
# learn and query vectors of different dimensions: refused
mkdir -p "$tmp/mixed"
printf '\004\000\000\000\001\002\003\004' >"$tmp/mixed/learn.bvecs"
printf '\003\000\000\000\001\002\003' >"$tmp/mixed/query.bvecs"
refuse "1" "learn and query dimensions differ" "$MESS" bench client --data "$tmp/mixed"
grep -q "dimensions differ" "$tmp/err" && ok "the message names the mismatch" ||
    bad "mismatch message: $(cat "$tmp/err")"
for args in "--unique 10 --pool 5" "--pool 0" "--learn x" "--data /nonexistent" "--bogus"; do
    # shellcheck disable=SC2086
    refuse "1 2" "$args" "$MESS" bench client $args
done
finish
