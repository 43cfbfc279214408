#!/bin/sh
# tests/cli_bench_throughput.sh - `mess bench throughput` on a small server
# directory: both server modes (the throughput mode over windows of 256
# and of 3 requests, and the former groups) answer byte-identically (the
# command fails otherwise), every phase reports queries/s per core, the
# recall and codes scored are positive, and bad options, a missing
# client, query file or ground truth rows are refused.
# Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

if small_server "$tmp/c" "$tmp/s"; then
    ok "a server of 3,000 items"
else
    bad "init or insert failed"
fi
if "$MESS" bench throughput --server "$tmp/s" --client "$tmp/c" --data datasets/sift \
    --queries 20 --pool 200 --batches 1,7 --threads 1,2 --windows 256,3,0 --rounds 1 \
    --ef-search 16 >"$tmp/out" 2>"$tmp/err"; then
    ok "bench throughput runs"
    [ "$(json differ)" = 0 ] && ok "both server modes byte-identical" || bad "differ: $(json differ)"
    for k in codes_per_query recall request_qps_per_core finish_qps_per_core qps_per_core \
        all_qps_per_core; do
        v=$(json $k)
        if positive "$v"; then ok "$k = $v"; else bad "$k: '$v'"; fi
    done
    [ "$(json ef_search)" = 16 ] && ok "--ef-search 16 is the run's floor" ||
        bad "ef_search: $(json ef_search)"
    [ "$(grep -c '^  [12]  ' "$tmp/out")" = 4 ] && ok "4 runs (2 worker counts x 2 batch sizes)" ||
        bad "runs: $(grep -c '^  [12]  ' "$tmp/out")"
else
    bad "bench throughput failed: $(cat "$tmp/err")"
fi
# --layout codes: the code layout built first, both modes still
# byte-identical (128-bit codes; 64-bit ones are refused below)
if small_server "$tmp/c128" "$tmp/s128" 128 &&
    "$MESS" bench throughput --server "$tmp/s128" --client "$tmp/c128" --data datasets/sift \
    --queries 20 --pool 200 --batches 7 --threads 1 --windows 256,0 --rounds 1 --layout codes \
    >"$tmp/out" 2>"$tmp/err"; then
    [ "$(json differ)" = 0 ] && positive "$(json recall)" &&
        ok "--layout codes: both modes byte-identical, recall $(json recall)" ||
        bad "--layout codes: differ $(json differ), recall $(json recall)"
else
    bad "--layout codes failed: $(cat "$tmp/err")"
fi
# refusals (usage 2, failure 1)
B="$MESS bench throughput"
refuse "2" "--layout bogus" $B --server "$tmp/s" --client "$tmp/c" --data datasets/sift --layout bogus
says "--layout codes on 64-bit codes" "other than 128 bits" $B --server "$tmp/s" --client "$tmp/c" \
    --data datasets/sift --layout codes
refuse "2" "no --server" $B --data datasets/sift
refuse "2" "a bad --batches list" $B --server "$tmp/s" --client "$tmp/c" --data datasets/sift --batches 1,x
refuse "2" "batch 0" $B --server "$tmp/s" --client "$tmp/c" --data datasets/sift --batches 0
refuse "2" "threads 0" $B --server "$tmp/s" --client "$tmp/c" --data datasets/sift --threads 0
refuse "2" "window 5000" $B --server "$tmp/s" --client "$tmp/c" --data datasets/sift --windows 5000
refuse "1" "a missing client" $B --server "$tmp/s" --client "$tmp/none" --data datasets/sift
refuse "1" "a missing query file" $B --server "$tmp/s" --client "$tmp/c" --data "$tmp"
mkdir -p "$tmp/few"
cp datasets/sift/query.bvecs "$tmp/few/"
head -c $((404 * 10)) datasets/sift/groundtruth.ivecs >"$tmp/few/groundtruth.ivecs"
refuse "1" "10 ground truth rows for 20 queries" $B --server "$tmp/s" --client "$tmp/c" \
    --data "$tmp/few" --queries 20
grep -q '10 rows for 20 queries' "$tmp/err" && ok "the rows are counted" || bad "$(cat "$tmp/err")"
finish
