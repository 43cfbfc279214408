#!/bin/sh
# tests/cli_resume.sh - an insert that stops part-way (issue 29 item 5): a
# real `mess insert` killed mid-run (SIGTERM: it stops after the batch
# being applied and says how many items are stored; SIGKILL: nothing said)
# leaves a consistent directory holding a prefix of FILE; running it again
# is refused with a hint, and `mess insert --resume` inserts the rest:
# then the directory holds every item exactly once and the queries give
# the same answers and recall as an uninterrupted build.  A row stored
# past the prefix is refused, not inserted twice; a row whose id holds
# another vector (another file at ids in use) is never skipped.  A
# file-size limit reached part-way (ulimit -f) is reported like a full
# disk, with the count stored.
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

# entries DIR: the entry count `mess verify` reports
entries() { $MESS verify --server "$1" 2>/dev/null | sed -n 's/.* \([0-9]*\) entries (.*/\1/p'; }
# killed SIG DIR CLIENT: starts the insert of base.bvecs (batches of 20,
# about 500 of them), sends SIG once the server's log holds a batch, and
# waits; its exit status in $rc, its stderr in $tmp/kerr
killed() {
    sig=$1
    $MESS insert --client "$3" --server "$2" "$tmp/base.bvecs" --batch 20 \
        >"$tmp/kout" 2>"$tmp/kerr" &
    pid=$!
    i=0
    while [ ! -s "$2/wal" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
    # with MESS_MESSAGE_LOG, $pid is the recording wrapper: signal its mess
    target=$(pgrep -P "$pid" 2>/dev/null | head -1)
    kill -"$sig" "${target:-$pid}"
    { wait "$pid"; } 2>/dev/null
    rc=$?
}

# stdout past a file-size limit (first: the recording wrapper's log is
# still empty, under the limit): exit 1 and said.  Before, with SIGXFSZ
# ignored, the output was cut at the limit and the exit status was 0
(ulimit -f 2 && exec $MESS init --help) >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] && grep -q "^mess: cannot write standard output" "$tmp/err" &&
    ok "stdout past the file-size limit: exit 1, said" ||
    bad "stdout past the file-size limit: exit $rc, $(wc -c <"$tmp/out") bytes ($(cat "$tmp/err"))"

D=datasets/sift
cp $D/base.bvecs "$tmp/base.bvecs"
head -c $((132 * 1000)) $D/learn.bvecs >"$tmp/learn.bvecs"
SEED=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export SEED
COMMON="--shards 4 --per-item 2 --bits 128 --hnsw-m 8 --ef-construction 40 --train-sample 1000"
for x in ref term kill; do
    $MESS init --client "$tmp/$x.mess" --server "$tmp/$x" --train "$tmp/learn.bvecs" \
        $COMMON --seed-env SEED >/dev/null 2>&1 || bad "init $x"
done

check "uninterrupted insert" $MESS insert --client "$tmp/ref.mess" --server "$tmp/ref" \
    "$tmp/base.bvecs" --batch 20
[ "$(entries "$tmp/ref")" = 20000 ] && ok "reference: 20000 entries" ||
    bad "reference: $(entries "$tmp/ref") entries"

# SIGTERM: stops after a whole batch, says what is stored, exit 128 + 15
killed TERM "$tmp/term" "$tmp/term.mess"
[ "$rc" = 143 ] && ok "SIGTERM: exit 143" || bad "SIGTERM: exit $rc ($(cat "$tmp/kerr"))"
grep -q "interrupted (signal 15) after a whole batch" "$tmp/kerr" && ok "SIGTERM: said" ||
    bad "SIGTERM: $(cat "$tmp/kerr")"
stored=$(sed -n "s/^mess: \([0-9]*\) of the 10000 items of '.*' are stored in '.*' and durable (rows 0 to \([0-9]*\), ids 0 to \2); .*--resume.*/\1/p" "$tmp/kerr")
[ -n "$stored" ] && [ "$stored" -gt 0 ] && [ "$stored" -lt 10000 ] &&
    [ $((stored % 20)) = 0 ] && ok "SIGTERM: $stored items stored (whole batches)" ||
    bad "SIGTERM: stored '$stored': $(cat "$tmp/kerr")"
[ "$(entries "$tmp/term")" = $((stored * 2)) ] && ok "the directory holds what was said" ||
    bad "the directory holds $(entries "$tmp/term") entries, said $stored items"
says "insert again without --resume" "is already stored (after an interrupted insert, --resume skips the rows stored)" \
    $MESS insert --client "$tmp/term.mess" --server "$tmp/term" "$tmp/base.bvecs" --batch 20
grep -qF "$stored of the 10000 items" "$tmp/err" && ok "the refusal says how many are stored" ||
    bad "refusal: $(cat "$tmp/err")"
check "--resume" $MESS insert --client "$tmp/term.mess" --server "$tmp/term" \
    "$tmp/base.bvecs" --batch 20 --resume
grep -q "^{\"items\":$((10000 - stored)),\"skipped\":$stored," "$tmp/out" &&
    ok "--resume skipped the $stored stored rows" || bad "--resume: $(cat "$tmp/out")"
[ "$(entries "$tmp/term")" = 20000 ] && ok "every item stored exactly once" ||
    bad "after --resume: $(entries "$tmp/term") entries"
check "--resume of a complete insert" $MESS insert --client "$tmp/term.mess" \
    --server "$tmp/term" "$tmp/base.bvecs" --resume
grep -q '^{"items":0,"skipped":10000,' "$tmp/out" && ok "nothing left to insert" ||
    bad "complete: $(cat "$tmp/out")"

# SIGKILL: nothing said, the log holds whole batches; --resume goes on
killed KILL "$tmp/kill" "$tmp/kill.mess"
[ "$rc" = 137 ] && ok "SIGKILL: killed mid-run" || bad "SIGKILL: exit $rc"
check "--resume after SIGKILL" $MESS insert --client "$tmp/kill.mess" --server "$tmp/kill" \
    "$tmp/base.bvecs" --batch 20 --resume
grep -q '"skipped":[1-9]' "$tmp/out" && ok "SIGKILL: the stored rows skipped" ||
    bad "SIGKILL: $(cat "$tmp/out")"
[ "$(entries "$tmp/kill")" = 20000 ] && ok "SIGKILL: every item stored exactly once" ||
    bad "after SIGKILL and --resume: $(entries "$tmp/kill") entries"

# the same answers, and so the same recall, as the uninterrupted build
for x in ref term kill; do
    $MESS query --client "$tmp/$x.mess" --server "$tmp/$x" $D/query.bvecs -k 10 --pool 200 \
        --gt $D/groundtruth.ivecs --out "$tmp/$x.ivecs" >"$tmp/$x.q" 2>/dev/null ||
        bad "query $x"
    sed -n 's/.*"recall":\([0-9.]*\).*/\1/p' "$tmp/$x.q" >"$tmp/$x.recall"
done
[ -s "$tmp/ref.recall" ] && cmp -s "$tmp/ref.recall" "$tmp/term.recall" &&
    cmp -s "$tmp/ref.recall" "$tmp/kill.recall" &&
    ok "same recall@10 as uninterrupted ($(cat "$tmp/ref.recall"))" ||
    bad "recall: $(cat "$tmp/ref.recall") / $(cat "$tmp/term.recall") / $(cat "$tmp/kill.recall")"
cmp -s "$tmp/ref.ivecs" "$tmp/term.ivecs" && cmp -s "$tmp/ref.ivecs" "$tmp/kill.ivecs" &&
    ok "the same top 10 of every query" || bad "answers differ"

# rows stored past the prefix (ids of another insert): refused, not
# doubled; the rows before them are inserted, and a second --resume finds
# every id there
head -c $((132 * 200)) $D/base.bvecs >"$tmp/a.bvecs"
tail -c $((132 * 100)) "$tmp/a.bvecs" >"$tmp/a2.bvecs"
$MESS init --client "$tmp/p.mess" --server "$tmp/p" --train "$tmp/learn.bvecs" $COMMON \
    --seed-env SEED >/dev/null 2>&1 || bad "init p"
check "insert ids 100-199" $MESS insert --client "$tmp/p.mess" --server "$tmp/p" \
    "$tmp/a2.bvecs" --first-id 100
says "--resume with a later row stored" "an id in [100, 120) is already stored" \
    $MESS insert --client "$tmp/p.mess" --server "$tmp/p" "$tmp/a.bvecs" --batch 20 --resume
grep -qF "100 of the 200 items of '$tmp/a.bvecs' are stored in '$tmp/p' and durable (rows 0 to 99" "$tmp/err" &&
    ok "says the rows stored before the refusal" || bad "$(cat "$tmp/err")"
check "--resume again: the rows after them were there" $MESS insert --client "$tmp/p.mess" \
    --server "$tmp/p" "$tmp/a.bvecs" --batch 20 --resume
grep -q '^{"items":0,"skipped":200,' "$tmp/out" && ok "nothing left, nothing doubled" ||
    bad "$(cat "$tmp/out")"
[ "$(entries "$tmp/p")" = 400 ] && ok "no item stored twice" ||
    bad "$(entries "$tmp/p") entries"
# another file's rows at ids in use (a second file inserted without
# --first-id): its ids hold other vectors, so none of its rows is stored;
# before, the refusal said "all 100 items ... are stored" and --resume
# skipped every row, exit 0, inserting nothing
dd if=$D/base.bvecs bs=132 skip=200 count=100 of="$tmp/other.bvecs" 2>/dev/null
says "another file at ids in use" "'$tmp/other.bvecs' row 0: the server holds id 0 with another vector" \
    $MESS insert --client "$tmp/p.mess" --server "$tmp/p" "$tmp/other.bvecs"
grep -qF "none of the 100 items of '$tmp/other.bvecs' is stored" "$tmp/err" &&
    ok "says none of its items is stored" || bad "$(cat "$tmp/err")"
says "--resume of another file at ids in use" \
    "--resume: '$tmp/other.bvecs' row 0: the server holds id 0 with another vector" \
    $MESS insert --client "$tmp/p.mess" --server "$tmp/p" "$tmp/other.bvecs" --resume
# rows 0-149 of a.bvecs again, then other.bvecs' 100 rows as ids 150..:
# the 150 stored rows are skipped, the row at id 150 is not this one
head -c $((132 * 150)) "$tmp/a.bvecs" >"$tmp/mixed.bvecs"
cat "$tmp/other.bvecs" >>"$tmp/mixed.bvecs"
says "--resume past the stored rows into ids in use" \
    "--resume: '$tmp/mixed.bvecs' row 150: the server holds id 150 with another vector" \
    $MESS insert --client "$tmp/p.mess" --server "$tmp/p" "$tmp/mixed.bvecs" --batch 64 --resume
[ "$(entries "$tmp/p")" = 400 ] && ok "nothing skipped, nothing doubled" ||
    bad "$(entries "$tmp/p") entries"
check "another file past the ids in use" $MESS insert --client "$tmp/p.mess" \
    --server "$tmp/p" "$tmp/other.bvecs" --first-id 200
[ "$(entries "$tmp/p")" = 600 ] && ok "its 100 items stored" || bad "$(entries "$tmp/p") entries"
# a complete insert whose id 192 was deleted and inserted again with
# another vector, resumed: the row at id 192 is not FILE's, and the rows
# stored after it in its batch do not hide it (before, the search for the
# prefix's end probed single rows, walked past it, and --resume said all
# 200 rows were stored, exit 0)
check "delete id 192" $MESS delete --client "$tmp/p.mess" --server "$tmp/p" --ids 192
head -c 132 "$tmp/other.bvecs" >"$tmp/one.bvecs"
check "id 192 again, another vector" $MESS insert --client "$tmp/p.mess" --server "$tmp/p" \
    "$tmp/one.bvecs" --first-id 192
says "--resume past an id inserted again" \
    "--resume: '$tmp/a.bvecs' row 192: the server holds id 192 with another vector" \
    $MESS insert --client "$tmp/p.mess" --server "$tmp/p" "$tmp/a.bvecs" --batch 20 --resume

# a run that reaches ids in use after inserting new ones: says how many
# it stored, without pointing to --resume
check "other.bvecs as ids 1000-1099" $MESS insert --client "$tmp/p.mess" --server "$tmp/p" \
    "$tmp/other.bvecs" --first-id 1000
head -c $((132 * 150)) "$tmp/a.bvecs" >"$tmp/a150.bvecs"
says "a run into ids in use" "'$tmp/a150.bvecs' row 50: the server holds id 1000 with another vector" \
    $MESS insert --client "$tmp/p.mess" --server "$tmp/p" "$tmp/a150.bvecs" --first-id 950 --batch 50
grep -qF "50 of the 150 items of '$tmp/a150.bvecs' are stored in '$tmp/p' and durable (rows 0 to 49, ids 950 to 999)" "$tmp/err" &&
    ! grep -qF "inserts the rest" "$tmp/err" && ok "says the 50 it stored, no --resume hint" ||
    bad "$(cat "$tmp/err")"

# a file-size limit (ulimit -f, in a subshell) reached part-way: the write
# fails with EFBIG and the insert says so and how many items it stored
# (before, SIGXFSZ ended it mid-write: exit 153, nothing said), and
# --resume then inserts the rest, each item once
$MESS init --client "$tmp/f.mess" --server "$tmp/f" --train "$tmp/learn.bvecs" $COMMON \
    --seed-env SEED >/dev/null 2>&1 || bad "init f"
# 2,000 blocks: 1 MB (sh, POSIX 512-byte blocks) or 2 MB (bash), of the
# log's 3.8 MB
(ulimit -f 2000 && exec $MESS insert --client "$tmp/f.mess" --server "$tmp/f" \
    "$tmp/base.bvecs" --batch 500) >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] && ok "file-size limit: exit 1" || bad "file-size limit: exit $rc ($(cat "$tmp/err"))"
grep -q "^mess: cannot write server .*: File too large" "$tmp/err" &&
    ok "file-size limit: 'File too large'" || bad "file-size limit: $(cat "$tmp/err")"
stored=$(sed -n "s/^mess: \([0-9]*\) of the 10000 items of '.*' are stored in '.*' and durable .*/\1/p" "$tmp/err")
[ -n "$stored" ] && [ "$stored" -gt 0 ] && [ "$stored" -lt 10000 ] &&
    [ "$(entries "$tmp/f")" = $((stored * 2)) ] &&
    ok "file-size limit: $stored items stored, as said" ||
    bad "file-size limit: said '$stored', holds $(entries "$tmp/f") entries: $(cat "$tmp/err")"
check "--resume after the file-size limit" $MESS insert --client "$tmp/f.mess" \
    --server "$tmp/f" "$tmp/base.bvecs" --batch 500 --resume
[ "$(entries "$tmp/f")" = 20000 ] && ok "file-size limit: every item stored exactly once" ||
    bad "after the file-size limit and --resume: $(entries "$tmp/f") entries"
# the limit reached by the checkpoint, after the log took the batch
# (600 blocks: 300 or 600 KB, above the client file's 245 KB and under a
# graph file's 800 KB): the insert says
# its items are durable in the log (before: only "it keeps its last
# checkpoint", read as lost); every open sees them, and `mess checkpoint`
# writes them once the limit is gone
head -c $((132 * 10)) $D/learn.bvecs >"$tmp/ten.bvecs"
# limited BLOCKS ID: inserts ten.bvecs at ids ID.. under ulimit -f BLOCKS;
# its exit status in $rc, its output in $tmp/out and $tmp/err
limited() {
    (ulimit -f "$1" && exec $MESS insert --client "$tmp/f.mess" --server "$tmp/f" \
        "$tmp/ten.bvecs" --first-id "$2") >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
limited 600 20000
[ "$rc" = 1 ] && grep -q "^mess: cannot write server .*: File too large" "$tmp/err" &&
    ok "checkpoint past the file-size limit: refused" || bad "exit $rc: $(cat "$tmp/err")"
grep -qF "what this command applied is durable all the same: it is in the write-ahead log of '$tmp/f'" "$tmp/err" &&
    ok "says what it applied is durable" || bad "$(cat "$tmp/err")"
[ "$(entries "$tmp/f")" = 20020 ] && ok "the 10 items are there" ||
    bad "after the failed checkpoint: $(entries "$tmp/f") entries"
check "checkpoint without the limit" $MESS checkpoint --server "$tmp/f"
check "verify --client" $MESS verify --server "$tmp/f" --client "$tmp/f.mess"
grep -q "20020 entries (20020 live)" "$tmp/out" && ok "checkpointed: 20020 entries" ||
    bad "$(cat "$tmp/out")"
# the limit under the client file's 245 KB and over the log's appends
# (200 blocks: 100 or 200 KB): the log takes the batch, the client's save
# fails; the insert says the client file is behind, not that all is
# durable (the file does not record what the server applied)
limited 200 20010
[ "$rc" = 1 ] && grep -qF "mess: $tmp/f.mess: File too large" "$tmp/err" &&
    ok "client save past the file-size limit: refused" || bad "exit $rc: $(cat "$tmp/err")"
grep -qF "the write-ahead log of '$tmp/f' holds what this command applied, but client file '$tmp/f.mess' could not record it" "$tmp/err" &&
    ok "says the client file is behind" || bad "$(cat "$tmp/err")"
grep -q "durable all the same" "$tmp/err" && bad "said durable with the client file behind" ||
    ok "not said durable"
finish
