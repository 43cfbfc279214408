#!/bin/sh
# tests/cli_estimate.sh - `mess estimate`: one JSON line whose figures
# agree with a server the tool builds from the bundled set (entries
# exactly; the server directory's files within 3% of disk_bytes; the
# opened directory's bytes, as `mess info` reports them (graphs mapped,
# arenas mapped and not counted), within 5% of resident_bytes; the
# exported file within its travel bound and above its ciphertexts), scale
# with --items, and bad options refused.
# Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh
# json_in FILE KEY: the value of KEY in the last line of FILE, a string without
# its quotes
json_in() { tail -n 1 "$1" | sed -n "s/.*\"$2\":\"*\([^,}\"]*\).*/\1/p"; }
opts="--shards 8 --per-item 2 --ef-construction 20 --train-sample 1000"

# shellcheck disable=SC2086
if "$MESS" estimate --items 10000 $opts >"$tmp/est" 2>"$tmp/err"; then
    ok "estimate runs"
    [ "$(json_in "$tmp/est" entries)" = 20000 ] && [ "$(json_in "$tmp/est" payload_bytes)" = 536 ] &&
        [ "$(json_in "$tmp/est" payload)" = f32 ] && [ "$(json_in "$tmp/est" arena_bytes)" = 10720000 ] &&
        ok "entries, payload and arena" || bad "figures: $(cat "$tmp/est")"
else
    bad "estimate failed: $(cat "$tmp/err")"
fi

# shellcheck disable=SC2086
# (--payload f32: the estimate's; a .bvecs --train alone would choose u8)
if "$MESS" init --client "$tmp/c" --server "$tmp/s" --train datasets/sift/learn.bvecs $opts \
       --payload f32 >/dev/null 2>"$tmp/err" &&
   "$MESS" insert --client "$tmp/c" --server "$tmp/s" datasets/sift/base.bvecs --threads 2 \
       >/dev/null 2>>"$tmp/err" &&
   "$MESS" info --server "$tmp/s" >"$tmp/info" 2>>"$tmp/err"; then
    ok "a real server of 10,000 items"
    got=$(json_in "$tmp/info" bytes) want=$(json_in "$tmp/est" resident_bytes)
    arena=$(json_in "$tmp/est" arena_bytes)
    if awk -v g="$got" -v w="$want" 'BEGIN { d = g / w - 1; exit !(d < 0.05 && d > -0.05) }'; then
        ok "resident: info says $got bytes, estimate $want"
    else
        bad "resident: info says $got bytes, estimate $want"
    fi
    got=$(cat "$tmp/s"/* | wc -c) want=$(json_in "$tmp/est" disk_bytes)
    if awk -v g="$got" -v w="$want" 'BEGIN { d = g / w - 1; exit !(d < 0.03 && d > -0.03) }'; then
        ok "disk: the directory holds $got bytes, estimate $want"
    else
        bad "disk: the directory holds $got bytes, estimate $want"
    fi
    "$MESS" export --server "$tmp/s" "$tmp/s.mess" >/dev/null 2>>"$tmp/err"
    size=$(wc -c < "$tmp/s.mess") bound=$(json_in "$tmp/est" travel_bytes)
    [ "$size" -le "$bound" ] && [ "$size" -ge "$arena" ] &&
        ok "exported file $size bytes, bound $bound" || bad "exported file $size bytes, bound $bound"
    [ "$(json_in "$tmp/info" entries)" = "$(json_in "$tmp/est" entries)" ] &&
        ok "entries as estimated" || bad "entries: $(cat "$tmp/info")"
else
    bad "building the server failed: $(cat "$tmp/err")"
fi

# ten times the items: ten times the arena, the per-entry disk about the same
"$MESS" estimate --items 100000 --shards 8 --per-item 2 >"$tmp/big" 2>"$tmp/err"
[ "$(json_in "$tmp/big" arena_bytes)" = 107200000 ] && ok "arena scales" ||
    bad "arena at 100k: $(cat "$tmp/big" "$tmp/err")"

# f16 payloads of 64 dims: siv 16 + id 8 + 128
"$MESS" estimate --items 5 --dim 64 --payload f16 >"$tmp/f16" 2>"$tmp/err"
[ "$(json_in "$tmp/f16" payload_bytes)" = 152 ] && ok "f16 payload size" ||
    bad "f16: $(cat "$tmp/f16" "$tmp/err")"

refuse 2 "no --items" "$MESS" estimate
refuse 2 "--items -1" "$MESS" estimate --items -1
refuse 2 "--dim 0" "$MESS" estimate --items 5 --dim 0
refuse 2 "--bogus" "$MESS" estimate --items 5 --bogus
refuse 2 "--bits 100" "$MESS" estimate --items 5 --bits 100
refuse 1 "a shard over its node limit" "$MESS" estimate --items 20000000000
finish
