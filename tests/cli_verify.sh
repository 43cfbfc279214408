#!/bin/sh
# tests/cli_verify.sh - lost acknowledged changes are noticed (issue 29
# item 7): `mess verify` says when the write-ahead log ends in a torn
# record and what the next writer drops; the client counts the uploads
# and deletes a server acknowledged, and `mess verify --client C` exits 1
# when the server holds fewer live items than C put there (a log cut
# short at a record boundary verifies "ok" on its own, as it did on
# e209c26 with a third of its entries); a client file of format 2 (before
# the counts) still loads, says it did not count, and is written back as
# format 3.
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

size() { wc -c <"$1" | tr -d ' '; }

D=datasets/sift
cp $D/base.bvecs "$tmp/base.bvecs"
head -c $((132 * 300)) $D/base.bvecs >"$tmp/few.bvecs"
head -c $((132 * 1000)) $D/learn.bvecs >"$tmp/learn.bvecs"
SEED=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export SEED
C=$tmp/c.mess
S=$tmp/s
$MESS init --client "$C" --server "$S" --train "$tmp/learn.bvecs" --shards 4 --per-item 2 \
    --bits 128 --hnsw-m 8 --ef-construction 40 --train-sample 1000 --seed-env SEED \
    >/dev/null 2>&1 || bad "init"

# whole inserts and deletes: counted, compared
check "insert" $MESS insert --client "$C" --server "$S" "$tmp/few.bvecs"
check "delete (one id never stored)" $MESS delete --client "$C" --server "$S" --ids 1,2,5000
check "verify --client" $MESS verify --server "$S" --client "$C"
grep -q "ok: .*; it holds 298 live items, client '$C' put 298 there (300 uploaded, 2 deleted)" \
    "$tmp/out" && ok "the counts agree (the id never stored not counted)" ||
    bad "verify --client: $(cat "$tmp/out")"
cp -a "$S" "$tmp/old"
check "insert more" $MESS insert --client "$C" --server "$S" "$tmp/few.bvecs" --first-id 1000
says "an older copy of the directory" \
    "server '$tmp/old' holds 298 live items, fewer than the 598 client '$C' put there (600 uploaded, 2 deleted, acknowledged): 300 acknowledged items are missing" \
    $MESS verify --server "$tmp/old" --client "$C"
grep -q "^$tmp/old: ok: generation" "$tmp/out" && ok "the files themselves are sound" ||
    bad "stdout: $(cat "$tmp/out")"

# an insert stopped with its batches in the log (no checkpoint), then the
# log cut: at a record boundary (looks whole) and inside a record (torn)
C2=$tmp/c2.mess
S2=$tmp/s2
$MESS init --client "$C2" --server "$S2" --train "$tmp/learn.bvecs" --shards 4 --per-item 2 \
    --bits 128 --hnsw-m 8 --ef-construction 40 --train-sample 1000 --seed-env SEED \
    >/dev/null 2>&1 || bad "init 2"
$MESS insert --client "$C2" --server "$S2" "$tmp/base.bvecs" --batch 50 >/dev/null 2>"$tmp/kerr" &
pid=$!
i=0
while [ "$(size "$S2/wal")" -lt 300000 ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
target=$(pgrep -P "$pid" 2>/dev/null | head -1)
kill -TERM "${target:-$pid}"
{ wait "$pid"; } 2>/dev/null
stored=$(sed -n "s/^mess: \([0-9]*\) of the 10000 items.*/\1/p" "$tmp/kerr")
[ -n "$stored" ] && [ "$stored" -ge 100 ] && ok "insert stopped with $stored items in the log" ||
    bad "stopped: $(cat "$tmp/kerr")"
check "verify --client of the stopped insert" $MESS verify --server "$S2" --client "$C2"
grep -q "it holds $stored live items, client '$C2' put $stored there" "$tmp/out" &&
    ok "the log's items counted" || bad "$(cat "$tmp/out")"
records=$((${stored:-0} / 50))
[ "$records" -gt 0 ] || records=1 # (a failure said above)
per=$(($(size "$S2/wal") / records))
cp -a "$S2" "$tmp/cut"
truncate -s $((per * (records - 1))) "$tmp/cut/wal"
check "verify of a log cut at a record boundary" $MESS verify --server "$tmp/cut"
grep -q "torn" "$tmp/out" && bad "a boundary cut called torn" ||
    ok "a boundary cut looks whole on its own (only the client can tell)"
says "verify --client of a log cut at a record boundary" \
    "holds $((stored - 50)) live items, fewer than the $stored client '$C2' put there ($stored uploaded, 0 deleted, acknowledged): 50 acknowledged items are missing" \
    $MESS verify --server "$tmp/cut" --client "$C2"
cp -a "$S2" "$tmp/torn"
truncate -s $((per * (records - 1) + 100)) "$tmp/torn/wal"
check "verify of a torn log" $MESS verify --server "$tmp/torn"
grep -qF "but the write-ahead log ends in a torn record after its $((records - 1)) complete ones: record $((records - 1)) (an upload, 100 of its $per bytes present, from byte $((per * (records - 1)))), which the next writer drops" "$tmp/out" &&
    ok "verify names the torn record and what is dropped" || bad "torn: $(cat "$tmp/out")"
truncate -s $((per * (records - 1) + 10)) "$tmp/torn/wal"
check "verify of a torn log (a partial header)" $MESS verify --server "$tmp/torn"
grep -qF "ends in 10 bytes that are no complete record (from byte $((per * (records - 1))), after its $((records - 1)) complete ones)" "$tmp/out" &&
    ok "verify names the bytes dropped" || bad "torn header: $(cat "$tmp/out")"

# a client file of format 2 (before the counts): loads, did not count,
# written back as format 3
F=tests/fixtures
cp $F/client-v2.mess "$tmp/v2.mess"
check "import a server of format 2" $MESS import $F/server-v2.mess "$tmp/s3"
check "verify --client with a format 2 client" $MESS verify --server "$tmp/s3" --client "$tmp/v2.mess"
grep -q "did not count its changes (a client file of format 2): nothing to compare" "$tmp/out" &&
    ok "says it cannot compare" || bad "$(cat "$tmp/out")"
check "insert with a format 2 client" $MESS insert --client "$tmp/v2.mess" --server "$tmp/s3" \
    $F/items.fvecs --first-id 100
/usr/bin/python3 -c 'import struct,sys; print(struct.unpack("<I", open(sys.argv[1],"rb").read()[8:12])[0])' \
    "$tmp/v2.mess" >"$tmp/ver"
[ "$(cat "$tmp/ver")" = 3 ] && ok "written back as format 3" || bad "format $(cat "$tmp/ver")"
check "verify --client still uncounted" $MESS verify --server "$tmp/s3" --client "$tmp/v2.mess"
grep -q "did not count" "$tmp/out" && ok "still no count (never a false one)" ||
    bad "$(cat "$tmp/out")"
SEED3=1f0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export SEED3
$MESS init --client "$tmp/c3.mess" --server "$tmp/s4" --train "$tmp/learn.bvecs" --shards 4 \
    --per-item 2 --bits 128 --hnsw-m 8 --ef-construction 40 --train-sample 1000 \
    --seed-env SEED3 >/dev/null 2>&1 || bad "init 3"
says "verify --client of another client's server" "belongs to another client" \
    $MESS verify --server "$S" --client "$tmp/c3.mess"
finish
