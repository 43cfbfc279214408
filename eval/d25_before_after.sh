#!/bin/sh
# eval/d25_before_after.sh - the lazy apply's before/after measurements
# (docs/EVALUATION.md "Lazy apply, before and after"): two builds, each a
# directory holding libmess.so and mess (BEFORE: a library whose open
# applies the delta chains; AFTER: lazy apply), run one after the other on
# the same server directory DIR (with DIR.client) that has chains, e.g. a
# copy of the large set after `onem.py append --count 10000 --no-hnswlib`.
#
#   sh eval/d25_before_after.sh BEFORE AFTER DIR DATA
#
# onem.py open --first-query rows go to docs/eval/1m/results.jsonl; the
# mess query / mess info / mess bench server timings are printed.
set -u
B=$1 A=$2 D=$3 DATA=$4
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
head -c 132 "$DATA/query.bvecs" >"$T/q1.bvecs"
drop() { /usr/bin/python3 -c "import sys; sys.path.insert(0,'eval'); import onem; onem.drop_cache('$D')"; }
for which in "$B" "$A"; do
    MESS_LIBRARY=$which/libmess.so /usr/bin/python3 eval/onem.py open --dir "$D" \
        --first-query --data "$DATA" --pool 1500 --repeat 3
done
for r in 1 2 3; do
    for mode in warm cold; do
        for which in "$B" "$A"; do
            cp "$D.client" "$T/q.client" # deterministic clients: the same coins each run
            [ $mode = cold ] && drop
            /usr/bin/time -f "query $which $mode: %e s wall, %U s user, %S s sys, %M KB max RSS" \
                "$which/mess" query --client "$T/q.client" --server "$D" "$T/q1.bvecs" \
                --pool 1500 -k 10 --out "$T/$(basename "$which").ivecs" >/dev/null
            [ $mode = cold ] && drop
            /usr/bin/time -f "info $which $mode: %e s wall, %U s user, %S s sys, %M KB max RSS" \
                "$which/mess" info --server "$D" >/dev/null
        done
        cmp -s "$T/$(basename "$B").ivecs" "$T/$(basename "$A").ivecs" &&
            echo "query results identical" || echo "query results DIFFER"
    done
done
for which in "$A" "$B"; do
    echo "== bench server $which (load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$which/mess" bench server --server "$D" --data "$DATA" --queries 300 --widths 8 \
        --threads 1 --rounds 3
done
