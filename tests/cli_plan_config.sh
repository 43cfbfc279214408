#!/bin/sh
# tests/cli_plan_config.sh - `mess plan --target-recall R --max-xi X`: the
# configuration search (issue 17).  On the bundled SIFT set with a small
# grid: every candidate stays within the privacy limits and takes the least
# noise they allow (one limit is tight), the winner has the fewest bytes of
# the candidates that reach R, a stricter limit means more noise, and the
# winner's recall measured with init/insert/query is not below the
# prediction by more than a small tolerance.  Bad options are refused.
# Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
PYTHON=${PYTHON:-/usr/bin/python3}
. tests/shlib.sh

seed=5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a
export seed
S=datasets/sift
common="--train $S/learn.bvecs --data $S/base.bvecs --queries $S/query.bvecs --gt $S/groundtruth.ivecs --seed-env seed --threads 2"

# shellcheck disable=SC2086
if "$MESS" plan --target-recall 0.9 $common --grid-shards 16 --grid-per-item 4,8 \
        --grid-bits 64,128 --sample 40 --check-queries 20 --pools 64,128,192,256 \
        >"$tmp/plan" 2>"$tmp/plan.err"; then
    ok "plan --target-recall runs on a 4-candidate grid"
else
    bad "plan --target-recall ($(head -c 300 "$tmp/plan.err"))"
fi
cat "$tmp/plan" | sed -n '2,7p' | sed 's/^/# /'

# The limits, the least noise, and the winner, checked from first principles.
"$PYTHON" - "$tmp/plan" >"$tmp/checks" <<'EOF'
import json, math, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
eta = lambda p: math.log((1 - p) / p)
pq_def = 0.08                      # the defaults: M 64, t 16, kappa 128, p_D = p_q = 0.08
a_def = (1 - math.sqrt(1 - 2 * pq_def)) / 2
lim = dict(x=eta(0.08) * 16, y=eta(pq_def) * 64, cap=eta(a_def) * 64, z=eta(0.08))
def say(ok, msg):
    print(("ok " if ok else "bad ") + msg)
say(abs(d["max_xi"] - lim["x"]) < 1e-3 and abs(d["max_xi_query"] - lim["y"]) < 1e-2 and
    abs(d["max_xi_cap"] - lim["cap"]) < 1e-2 and abs(d["max_xi_shard"] - lim["z"]) < 1e-4,
    "default limits are the defaults' bounds (%.3f %.2f %.2f %.4f)" %
    (lim["x"], lim["y"], lim["cap"], lim["z"]))
cands = d["candidates"]
say(len(cands) == 4, "4 candidates (M 16; t 4, 8; kappa 64, 128)")
tol = 1e-6
within, tight = True, True
for c in cands:
    r = c["bits"] / 128.0
    xs = eta(c["p_store"]) * c["per_item"] * r
    x1 = eta(c["p_store"]) * r
    xq = eta(c["p_query"]) * c["shards"] * r
    xc = eta(c["p_prr"]) * c["shards"] * r
    xq1 = eta(c["p_query"]) * r
    within &= xs <= lim["x"] * (1 + tol) and x1 <= lim["z"] * (1 + tol)
    within &= xq <= lim["y"] * (1 + tol) and xc <= lim["cap"] * (1 + tol)
    within &= xq1 <= lim["z"] * (1 + tol)
    # least noise: some limit binds for each side
    tight &= abs(xs - lim["x"]) < 1e-6 * lim["x"] or abs(x1 - lim["z"]) < 1e-6 * lim["z"]
    tight &= (abs(xq - lim["y"]) < 1e-6 * lim["y"] or abs(xc - lim["cap"]) < 1e-6 * lim["cap"]
              or abs(xq1 - lim["z"]) < 1e-6 * lim["z"])
say(within, "every candidate's flips keep all four bounds within the limits")
say(tight, "every candidate takes the least noise: a limit binds on each side")
reach = [c for c in cands if c["pool"] is not None]
best = d["best"]
say(best is not None and reach and best["bytes"] == min(c["bytes"] for c in reach)
    and best["recall_at_pool"] >= d["target"],
    "the winner has the fewest bytes among the candidates reaching the target")
# .bvecs --data: the bytes of u8 payloads (152-byte entries), as mess init
# stores byte data: request (24 + 16 + 16 + 2M + M kappa/8) + response
# (24 + 16 + 2M + pool entries)
req = lambda c: 24 + 16 + 16 + 2 * c["shards"] + c["shards"] * c["bits"] // 8
say(reach and all(c["bytes"] == req(c) + 24 + 16 + 2 * c["shards"] + c["pool"] * 152
                  for c in reach),
    "bytes per query count u8 payloads for .bvecs data")
# kappa 64 at the same limits flips less than kappa 128 (per-bit bound halves)
k64 = [c for c in cands if c["bits"] == 64 and c["per_item"] == 4][0]
k128 = [c for c in cands if c["bits"] == 128 and c["per_item"] == 4][0]
say(k64["p_store"] < k128["p_store"] and k64["p_query"] < k128["p_query"],
    "kappa 64 gets less noise than kappa 128 at the same limits")
if best:
    print("BEST %d %d %d %.12g %.12g %d %.6f" % (best["shards"], best["per_item"], best["bits"],
          best["p_store"], best["p_prr"], best["pool"], best["recall_at_pool"]))
EOF
while read -r word rest; do
    case $word in
    ok) ok "$rest" ;;
    bad) bad "$rest" ;;
    BEST) set -- $rest; bm=$1 bt=$2 bk=$3 bpd=$4 bpa=$5 bpool=$6 bpred=$7 ;;
    esac
done <"$tmp/checks"

# The choice against measurement: build it, query at its pool.
if [ -n "${bm:-}" ]; then
    if "$MESS" init --client "$tmp/c" --server "$tmp/s" --train $S/learn.bvecs --seed-env seed \
            --shards "$bm" --per-item "$bt" --bits "$bk" --p-store "$bpd" --p-prr "$bpa" \
            --p-irr "$bpa" >/dev/null 2>"$tmp/err" &&
        "$MESS" insert --client "$tmp/c" --server "$tmp/s" --threads 2 $S/base.bvecs \
            >/dev/null 2>>"$tmp/err" &&
        "$MESS" query --client "$tmp/c" --server "$tmp/s" --pool "$bpool" \
            --gt $S/groundtruth.ivecs $S/query.bvecs >"$tmp/q" 2>>"$tmp/err"; then
        m=$(tail -n 1 "$tmp/q" | sed -n 's/.*"recall":\([0-9.]*\).*/\1/p')
        echo "# chosen M=$bm t=$bt kappa=$bk B=$bpool: predicted $bpred, measured $m (100 queries)"
        awk -v m="$m" -v p="$bpred" 'BEGIN { exit !(m != "" && m >= p - 0.03) }' &&
            ok "measured recall of the choice ($m) is within 0.03 of its prediction ($bpred) or above" ||
            bad "measured recall of the choice ($m) is below its prediction ($bpred) by more than 0.03"
    else
        bad "building the chosen configuration ($(head -c 300 "$tmp/err"))"
    fi
fi

# A stricter stored-data limit means more storage noise (one candidate, no check).
one="--grid-shards 16 --grid-per-item 4 --grid-bits 64 --sample 10 --check-shards 0 --pools 64"
p_of() { tail -n 1 "$1" | sed -n 's/.*"candidates":\[{[^}]*"p_store":\([0-9.e-]*\).*/\1/p'; }
# shellcheck disable=SC2086
"$MESS" plan --target-recall 0.5 $common $one >"$tmp/a" 2>/dev/null
# shellcheck disable=SC2086
"$MESS" plan --target-recall 0.5 $common $one --max-xi 5 >"$tmp/b" 2>/dev/null
pa=$(p_of "$tmp/a") pb=$(p_of "$tmp/b")
awk -v a="$pa" -v b="$pb" 'BEGIN { exit !(a != "" && b != "" && b > a) }' &&
    ok "--max-xi 5 flips more than the default limit (p_D $pb > $pa)" ||
    bad "--max-xi 5: p_D '$pb' not above '$pa'"
# shellcheck disable=SC2086
"$MESS" plan --target-recall 0.5 $common $one --max-xi-shard inf >"$tmp/c2" 2>/dev/null
pc=$(p_of "$tmp/c2")
awk -v a="$pa" -v c="$pc" 'BEGIN { exit !(a != "" && c != "" && c < a) }' &&
    ok "--max-xi-shard inf lets the totals alone decide (p_D $pc < $pa)" ||
    bad "--max-xi-shard inf: p_D '$pc' not below '$pa'"

# shellcheck disable=SC2086
refuse 2 "--target-recall with --shards" "$MESS" plan --target-recall 0.9 $common --shards 16
# shellcheck disable=SC2086
refuse 2 "--grid-bits 100" "$MESS" plan --target-recall 0.9 $common --grid-bits 100
# shellcheck disable=SC2086
refuse 2 "--target-recall 1.5" "$MESS" plan --target-recall 1.5 $common
# shellcheck disable=SC2086
refuse 2 "--max-xi -1" "$MESS" plan --target-recall 0.9 $common --max-xi -1
refuse 2 "--target-recall without --train" "$MESS" plan --target-recall 0.9 \
    --data $S/base.bvecs --queries $S/query.bvecs
head -c $((132 * 100)) $S/learn.bvecs >"$tmp/l100.bvecs"
refuse 1 "100 training rows for kappa 256" "$MESS" plan --target-recall 0.9 \
    --train "$tmp/l100.bvecs" --data $S/base.bvecs --queries $S/query.bvecs --grid-bits 64,256
grep -q "needs at least 129" "$tmp/err" && ok "message: the training set is too small for kappa 256" ||
    bad "message: small training set: $(head -c 200 "$tmp/err")"
# shellcheck disable=SC2086
refuse 2 "--grid-per-item 0" "$MESS" plan --target-recall 0.9 $common --grid-per-item 0

finish
