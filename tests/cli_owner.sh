#!/bin/sh
# tests/cli_owner.sh - a server belongs to the client of its first insert:
# another client's insert, query and delete are refused before any work
# with "this server belongs to another client" and leave the server
# directory as it was; ef_search is the server's tuning (a server made with
# another --ef-search serves the client; `mess query --ef-search` sets it for a
# run); vectors with NaN or infinity are refused on insert.
set -u
MESS=${MESS:-build/mess}
PYTHON=${PYTHON:-/usr/bin/python3}
. tests/shlib.sh


D=datasets/sift
head -c $((132 * 400)) $D/base.bvecs >"$tmp/base.bvecs"
head -c $((132 * 5)) $D/query.bvecs >"$tmp/q.bvecs"
head -c $((132 * 1000)) $D/learn.bvecs >"$tmp/learn.bvecs"
COMMON="--shards 4 --per-item 2 --bits 128 --hnsw-m 8 --ef-construction 40 --train-sample 1000"
SA=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
SB=1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100
export SA SB # seeds go through the environment (--seed-env), never argv

check "init owner A" $MESS init --client "$tmp/a.client" --server "$tmp/a.server" \
    --train "$tmp/learn.bvecs" $COMMON --seed-env SA
check "init client B (same parameters)" $MESS init --client "$tmp/b.client" \
    --server "$tmp/b.server" --train "$tmp/learn.bvecs" $COMMON --seed-env SB
check "A inserts into its server" $MESS insert --client "$tmp/a.client" \
    --server "$tmp/a.server" "$tmp/base.bvecs"

snap "$tmp/a.server" >"$tmp/a.before"
for cmd in "insert --first-id 1000 $tmp/base.bvecs" "query --pool 40 $tmp/q.bvecs" \
    "delete --ids 1,2,3"; do
    set -- $cmd
    verb=$1
    shift
    refuse "1" "B's $verb on A's server" $MESS $verb --client "$tmp/b.client" \
        --server "$tmp/a.server" "$@"
    if grep -q "this server belongs to another client" "$tmp/err"; then
        ok "B's $verb: the message names the owner mismatch"
    else
        bad "B's $verb: message: $(cat "$tmp/err")"
    fi
    if snap "$tmp/a.server" | cmp -s - "$tmp/a.before"; then
        ok "B's $verb left the server directory unchanged"
    else
        bad "B's $verb changed the server directory"
    fi
done
check "A still queries its server" $MESS query --client "$tmp/a.client" \
    --server "$tmp/a.server" "$tmp/q.bvecs" --pool 40 -k 5

# ef_search is not part of the parameters' identity
check "init with another --ef-search (same seed)" $MESS init --client "$tmp/e.client" \
    --server "$tmp/e.server" --train "$tmp/learn.bvecs" $COMMON --seed-env SA --ef-search 200
check "A inserts into the ef-200 server" $MESS insert --client "$tmp/a.client" \
    --server "$tmp/e.server" "$tmp/base.bvecs"
check "A queries the ef-200 server" $MESS query --client "$tmp/a.client" \
    --server "$tmp/e.server" "$tmp/q.bvecs" --pool 40 -k 5
check "info reports the server's beam" $MESS info --server "$tmp/e.server"
grep -q '"ef_search":200' "$tmp/out" && ok "ef_search 200 kept" || bad "info: $(cat "$tmp/out")"
check "query --ef-search sets the beam for a run" $MESS query --client "$tmp/a.client" \
    --server "$tmp/a.server" "$tmp/q.bvecs" --pool 40 -k 5 --ef-search 100
refuse "2" "query --ef-search beyond 65535" $MESS query --client "$tmp/a.client" \
    --server "$tmp/a.server" "$tmp/q.bvecs" --pool 40 --ef-search 65536
check "query --layout codes (the code layout for a run)" $MESS query --client "$tmp/a.client" \
    --server "$tmp/a.server" "$tmp/q.bvecs" --pool 40 -k 5 --layout codes
check "info --memory --layout codes" $MESS info --server "$tmp/a.server" --memory --layout codes
refuse "2" "query --layout other" $MESS query --client "$tmp/a.client" \
    --server "$tmp/a.server" "$tmp/q.bvecs" --pool 40 --layout other

# non-finite vectors are refused on insert, and nothing is stored
"$PYTHON" - "$tmp/base.bvecs" "$tmp/nan.fvecs" "$tmp/inf.fvecs" <<'EOF'
import struct, sys
raw = open(sys.argv[1], "rb").read()[:132 * 3]
rows = [list(raw[132 * i + 4:132 * (i + 1)]) for i in range(3)]
for path, bad in ((sys.argv[2], float("nan")), (sys.argv[3], float("inf"))):
    with open(path, "wb") as f:
        for i, r in enumerate(rows):
            v = [float(x) for x in r]
            if i == 2:
                v[7] = bad
            f.write(struct.pack("<i", 128) + struct.pack("<128f", *v))
EOF
snap "$tmp/a.server" >"$tmp/a.before"
for f in nan inf; do
    refuse "1 2" "insert of a vector with $f" $MESS insert --client "$tmp/a.client" \
        --server "$tmp/a.server" "$tmp/$f.fvecs" --first-id 5000
    grep -q "row 2" "$tmp/err" && ok "$f: the message names row 2" || bad "$f message: $(cat "$tmp/err")"
    snap "$tmp/a.server" | cmp -s - "$tmp/a.before" && ok "$f insert left the server unchanged" \
        || bad "$f insert changed the server"
done

finish
