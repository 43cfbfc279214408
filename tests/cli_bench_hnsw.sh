#!/bin/sh
# tests/cli_bench_hnsw.sh - `mess bench hnsw` on real codes (signs of a
# seeded projection of the bundled SIFT set, written by the benchmark
# driver): a small run ends with its JSON line, reaches high recall at a
# wide beam, writes the exact P-th distances, and bad input is refused.
# Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
PYTHON=${PYTHON:-/usr/bin/python3}
. tests/shlib.sh
run() { "$MESS" bench hnsw "$@" >"$tmp/out" 2>"$tmp/err"; }

if "$PYTHON" scripts/bench_hnsw.py --sets sift --nq 50 --write-codes "$tmp" >/dev/null 2>"$tmp/err" &&
    [ -s "$tmp/sift_base.bvecs" ] && [ -s "$tmp/sift_query.bvecs" ]; then
    ok "driver writes the codes"
else
    bad "driver writes the codes"
    cat "$tmp/err"
fi
B="$tmp/sift_base.bvecs"
Q="$tmp/sift_query.bvecs"

if run --base "$B" --query "$Q" --P 10,20 --ef 8,64 --repeat 1 --kth-out "$tmp/kth.ivecs" &&
    tail -n 1 "$tmp/out" | "$PYTHON" -c '
import json, sys
d = json.loads(sys.stdin.read())
assert d["n"] == 10000 and d["nq"] == 50 and d["bits"] == 128
assert d["P"] == [10, 20] and d["ef"] == [8, 64]
r = d["recall"]
assert all(0 <= x <= 1 for row in r for x in row)
assert r[0][1] >= 0.95 and r[1][1] >= 0.95, r  # wide beam: near exact
assert r[0][1] >= r[0][0] - 0.02, r            # wider beam is not worse
assert all(q > 0 for row in d["qps"] for q in row)
assert d["build_s"] > 0 and d["bytes_per_node"] > 16 + 4 * 33
'; then
    ok "run ends with its JSON line, recall near 1 at ef 64"
else
    bad "run"
    cat "$tmp/out" "$tmp/err"
fi
# --mapped: the same searches on the graph file, mapped and attached (the
# server's working form); the tool checks that the hits are identical
if run --base "$B" --query "$Q" --P 10 --ef 32 --repeat 1 --mapped &&
    grep -q '^mapped graph file: ' "$tmp/out" &&
    tail -n 1 "$tmp/out" | "$PYTHON" -c '
import json, sys
d = json.loads(sys.stdin.read())
assert 16 + 4 * 33 < d["mapped_bytes_per_node"] < 200, d
assert d["mapped_time_ratio_max"] > 0 and all(q > 0 for row in d["qps_mapped"] for q in row)
'; then
    ok "--mapped: the mapped graph answers, the time ratio is reported"
else
    bad "--mapped"
    cat "$tmp/out" "$tmp/err"
fi
refuse 1 "--mapped with no writable TMPDIR" env TMPDIR="$tmp/missing" "$MESS" bench hnsw \
    --base "$B" --query "$Q" --P 10 --ef 32 --repeat 1 --mapped
# 50 records of (int32 dim = 2, 2 distances)
if [ "$(wc -c <"$tmp/kth.ivecs")" -eq $((50 * 12)) ]; then
    ok "exact P-th distances written"
else
    bad "exact P-th distances written"
fi

for args in "--P 0" "--ef 1,x" "--m 1" "--efc 0" "--bogus 1" "--repeat 0"; do
    # shellcheck disable=SC2086
    refuse 2 "$args" "$MESS" bench hnsw --base "$B" --query "$Q" $args
done
refuse 2 "a missing --base" "$MESS" bench hnsw --query "$Q"

# codes whose width is not a multiple of 64 bits, and mismatched widths
printf '\003\000\000\000abc' >"$tmp/odd.bvecs"
refuse 1 "24-bit codes" "$MESS" bench hnsw --base "$tmp/odd.bvecs" --query "$Q"
refuse 1 "mismatched code widths" "$MESS" bench hnsw --base datasets/sift/query.bvecs --query "$Q"
head -c 101 "$B" >"$tmp/cut.bvecs"
refuse 1 "a truncated codes file" "$MESS" bench hnsw --base "$tmp/cut.bvecs" --query "$Q"

finish
