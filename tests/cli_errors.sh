#!/bin/sh
# tests/cli_errors.sh - the messages of `mess` refusals: each names what is
# wrong (the option, the file and the system's reason) and what is accepted.
# expect CODES NAME PATTERN COMMAND...: refused with one of CODES and a
# stderr line matching the extended regular expression PATTERN.
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

expect() {
    codes=$1
    name=$2
    pat=$3
    shift 3
    refuse "$codes" "$name" "$@"
    if grep -Eq -- "$pat" "$tmp/err"; then
        ok "message: $name"
    else
        bad "message: $name: wanted /$pat/, got: $(head -c 300 "$tmp/err")"
    fi
}

D=datasets/sift
head -c $((132 * 300)) $D/learn.bvecs >"$tmp/train.bvecs"

# parameters (13.2: --bits above the dimension is allowed, so the message
# must not say "at most the dimension")
expect 2 "--bits 100" "--bits: expected a multiple of 64 in \[64, 4096\], got 100 \(more bits than dimensions is allowed\)" \
    $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --bits 100
if grep -q "at most the dimension" "$tmp/err"; then bad "stale 'at most the dimension' text"; else ok "no stale dimension text"; fi
expect 2 "--per-item above --shards" "--per-item 9: at most --shards \(8\)" \
    $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --shards 8 --per-item 9
expect 2 "--metric unknown" "--metric: unknown value 'l1' \(accepted: l2, ip, cos\)" \
    $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --metric l1
expect 2 "--payload unknown" "--payload: unknown value 'f8' \(accepted: f32, f16, i8\)" \
    $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --payload f8
expect 2 "--bits 100 in plan" "--bits: expected a multiple of 64" \
    $MESS plan --train "$tmp/train.bvecs" --data "$tmp/train.bvecs" --queries "$tmp/train.bvecs" --bits 100
# 256 bits on 128-d data is accepted
if $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --bits 256 --shards 2 --per-item 1 >"$tmp/out" 2>"$tmp/err"; then
    ok "--bits 256 on 128-d data accepted"
else
    bad "--bits 256 on 128-d data: $(cat "$tmp/err")"
fi

finish
