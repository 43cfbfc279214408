#!/bin/sh
# tests/cli_protocol.sh - the `mess` protocol commands end to end on a slice
# of the bundled SIFT set: the documented command forms, their JSON last
# lines, delete/compact, and hostile input files (an error message and a
# non-zero exit, never a signal).
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

# check NAME COMMAND...: succeeds (exit 0)


# has_keys NAME KEY...: the last stdout line is a JSON object with the keys
has_keys() {
    name=$1
    shift
    last=$(tail -n 1 "$tmp/out")
    for k in "$@"; do
        case "$last" in
        "{"*"\"$k\":"*"}") ;;
        *) bad "$name: key $k missing in: $last"; return ;;
        esac
    done
    ok "$name: JSON keys"
}

json_num() { tail -n 1 "$tmp/out" | sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }

# a slice of the bundled set: 1500 base vectors, 20 queries (bvecs records
# are 4 + 128 bytes)
D=datasets/sift
head -c $((132 * 1500)) $D/base.bvecs >"$tmp/base.bvecs"
head -c $((132 * 1000)) $D/base.bvecs >"$tmp/first.bvecs"
tail -c $((132 * 500)) "$tmp/base.bvecs" >"$tmp/more.bvecs"
head -c $((132 * 20)) $D/query.bvecs >"$tmp/q.bvecs"
# the base vectors 3, 17 and 42 as queries (their own nearest neighbours)
for i in 3 17 42; do
    dd if="$tmp/base.bvecs" bs=132 skip=$i count=1 2>/dev/null
done >"$tmp/self.bvecs"

C="$tmp/client.mess"
S="$tmp/server.mess"
SEED=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export SEED # through the environment (--seed-env), never argv

check "init with every documented flag" $MESS init --client "$C" --server "$S" \
    --train $D/learn.bvecs --shards 8 --per-item 3 --bits 128 --p-store 0.08 \
    --p-prr 0.0417424 --p-irr 0.0417424 --hnsw-m 8 --ef-construction 60 \
    --metric l2 --payload f32 --seed-env SEED --threads 2
has_keys init shards per_item bits p_store p_prr p_irr p_query deterministic
if [ "$(stat -c %a "$C")" = 600 ]; then ok "client file mode 0600"; else bad "client file mode $(stat -c %a "$C")"; fi

check "insert (ids 0.. in file order)" $MESS insert --client "$C" --server "$S" "$tmp/first.bvecs" --threads 2
has_keys insert items entries seconds
[ "$(json_num items)" = 1000 ] && [ "$(json_num entries)" = 3000 ] && ok "insert counts" || bad "insert counts: $(tail -n 1 "$tmp/out")"

check "insert after build with --first-id" $MESS insert --client "$C" --server "$S" "$tmp/more.bvecs" --first-id 1000
refuse "1 2" "the same ids again are refused" $MESS insert --client "$C" --server "$S" "$tmp/more.bvecs" --first-id 1000

check "query" $MESS query --client "$C" --server "$S" "$tmp/q.bvecs" -k 10 --pool 200 --out "$tmp/r.ivecs" --threads 2
has_keys query queries k pool mean_request_bytes mean_response_bytes mean_candidates \
    mean_unique_candidates server_ms_per_query client_ms_per_query auth_failures
[ "$(json_num queries)" = 20 ] && [ "$(json_num auth_failures)" = 0 ] && ok "query counts" || bad "query counts"
[ "$(json_num unopened)" -gt 0 ] && ok "redundant copies not opened" || bad "unopened: $(json_num unopened)"
check "query --verify-all" $MESS query --client "$C" --server "$S" "$tmp/q.bvecs" -k 10 --pool 200 --verify-all
[ "$(json_num unopened)" = 0 ] && [ "$(json_num auth_failures)" = 0 ] && ok "verify-all opens every entry" || bad "verify-all: $(tail -n 1 "$tmp/out")"
[ "$(stat -c %s "$tmp/r.ivecs")" = $((20 * (4 + 40))) ] && ok "result file size" || bad "result file size"

# the inserted vectors find themselves (ids 3, 17, 42 and 1000 + 2)
check "self query" $MESS query --client "$C" --server "$S" "$tmp/self.bvecs" -k 3 --pool 120 --out "$tmp/self.ivecs"
ids=$(od -An -v -t d4 -w16 "$tmp/self.ivecs" | awk '{print $2}' | tr '\n' ' ')
[ "$ids" = "3 17 42 " ] && ok "items are their own nearest neighbours" || bad "self ids: $ids"

check "delete" $MESS delete --client "$C" --server "$S" --ids 3,17,42
has_keys delete ids entries missing_entries
[ "$(json_num missing_entries)" = 0 ] && ok "delete: no missing entries" || bad "delete: $(tail -n 1 "$tmp/out")"
# what delete cannot check (its --help says so): an id never stored, or one
# deleted already, is not refused; the server counts its entries missing
check "delete of an id deleted already and one never stored" \
    $MESS delete --client "$C" --server "$S" --ids 3,999999
[ "$(json_num missing_entries)" = 6 ] && ok "their 2 x 3 entries counted missing" ||
    bad "missing_entries: $(tail -n 1 "$tmp/out")"
check "query after delete" $MESS query --client "$C" --server "$S" "$tmp/self.bvecs" -k 10 --pool 200 --out "$tmp/after.ivecs"
if od -An -v -t d4 "$tmp/after.ivecs" | tr -s ' ' '\n' | grep -qx -e 3 -e 17 -e 42; then
    bad "a deleted id was returned"
else
    ok "deleted ids never returned"
fi
check "info before compaction" $MESS info --server "$S"
[ "$(json_num deleted)" = 9 ] && ok "9 deleted entries" || bad "deleted: $(json_num deleted)"
check "compact" $MESS compact --server "$S"
has_keys compact entries live deleted bytes
[ "$(json_num deleted)" = 0 ] && [ "$(json_num entries)" = $((1497 * 3)) ] && ok "compacted" || bad "compact: $(tail -n 1 "$tmp/out")"
check "query after compaction" $MESS query --client "$C" --server "$S" "$tmp/self.bvecs" -k 10 --pool 200 --out "$tmp/after2.ivecs"
if od -An -v -t d4 "$tmp/after2.ivecs" | tr -s ' ' '\n' | grep -qx -e 3 -e 17 -e 42; then
    bad "a deleted id was returned after compaction"
else
    ok "deleted ids never returned after compaction"
fi
check "info" $MESS info --server "$S"
has_keys info entries live deleted bytes bytes_per_entry shards per_item bits payload_bytes

# --help of every command
for cmd in init insert query delete compact info export import verify checkpoint; do
    check "$cmd --help" $MESS $cmd --help
done

# usage errors: exit 2
$MESS query --client "$C" --server "$S" "$tmp/q.bvecs" >/dev/null 2>&1
[ $? -eq 2 ] && ok "missing --pool is a usage error" || bad "missing --pool"
$MESS delete --client "$C" --server "$S" --ids 3,,x >/dev/null 2>&1
[ $? -eq 2 ] && ok "bad --ids is a usage error" || bad "bad --ids"
$MESS init --client "$tmp/c2" --server "$tmp/s2" --train $D/learn.bvecs --seed 12 >/dev/null 2>&1
[ $? -eq 2 ] && ok "short --seed is a usage error" || bad "short --seed"

# hostile input files: never a signal, always a message
printf 'garbage' >"$tmp/garbage"
: >"$tmp/empty"
# server directories: an arena cut short, a MANIFEST byte flipped, a graph
# file gone, the exported (one-file) form
cp -r "$S" "$tmp/trunc_server"
a=$(ls "$tmp/trunc_server"/shard-0001-*.arena)
truncate -s -1 "$a"
cp -r "$S" "$tmp/flipped"
printf '\001' | dd of="$tmp/flipped/MANIFEST" bs=1 seek=150 conv=notrunc 2>/dev/null
cp -r "$S" "$tmp/nograph"
rm "$tmp/nograph"/shard-0000-*.graph
$MESS export --server "$S" "$tmp/exported" >/dev/null 2>&1
head -c 200 "$tmp/q.bvecs" >"$tmp/trunc.bvecs"
printf '\377\377\377\177' >"$tmp/huge_dim.fvecs"
for f in "$tmp/garbage" "$tmp/empty" "$tmp/trunc_server" "$tmp/flipped" "$tmp/nograph" \
    "$tmp/exported" "$C" /nonexistent "$tmp"; do
    refuse "1 2" "server file $(basename "$f")" $MESS info --server "$f"
    refuse "1 2" "server file $(basename "$f") in query" $MESS query --client "$C" --server "$f" "$tmp/q.bvecs" --pool 100
done
for f in "$tmp/garbage" "$tmp/empty" "$S" /nonexistent; do
    refuse "1 2" "client file $(basename "$f")" $MESS query --client "$f" --server "$S" "$tmp/q.bvecs" --pool 100
done
for f in "$tmp/trunc.bvecs" "$tmp/huge_dim.fvecs" "$tmp/garbage" "$tmp/empty"; do
    refuse "1 2" "vector file $(basename "$f") in insert" $MESS insert --client "$C" --server "$S" "$f"
    refuse "1 2" "vector file $(basename "$f") in query" $MESS query --client "$C" --server "$S" "$f" --pool 100
done
refuse "1 2" "training file truncated" $MESS init --client "$tmp/c3" --server "$tmp/s3" --train "$tmp/trunc.bvecs"
refuse "1 2" "wrong dimension" $MESS insert --client "$C" --server "$S" $D/../sift/groundtruth.ivecs

finish
