#!/bin/sh
# tests/cli_busy.sh - a server directory another process is writing (issue
# 29 item 4): while another process holds the directory's writer claim
# (the flock on S/LOCK every writer takes, docs/PROTOCOL.md "One writer at
# a time"), insert, delete, compact and checkpoint exit 1 saying "another
# process is writing this directory" (before, insert said "an id in
# [a, b) is already stored"), and change no file; once it is done they
# work.  The same for a client file another command is using (its flock):
# insert, delete and a deterministic query, which save it, are refused.
set -u
MESS=${MESS:-build/mess}
PYTHON=${PYTHON:-/usr/bin/python3}
. tests/shlib.sh


D=datasets/sift
head -c $((132 * 300)) $D/base.bvecs >"$tmp/base.bvecs"
tail -c $((132 * 100)) $D/base.bvecs >"$tmp/more.bvecs"
head -c $((132 * 1000)) $D/learn.bvecs >"$tmp/learn.bvecs"
SEED=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export SEED
C=$tmp/c.mess
S=$tmp/s
COMMON="--shards 4 --per-item 2 --bits 128 --hnsw-m 8 --ef-construction 40 --train-sample 1000"

check "init" $MESS init --client "$C" --server "$S" --train "$tmp/learn.bvecs" $COMMON \
    --seed-env SEED
check "insert" $MESS insert --client "$C" --server "$S" "$tmp/base.bvecs"

hold() { # FILE FLAG: another process flocks FILE until it is killed
    rm -f "$2"
    "$PYTHON" -c '
import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
open(sys.argv[2], "w").close()
time.sleep(120)
' "$1" "$2" &
    holder=$!
    i=0
    while [ ! -e "$2" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
}

# another process takes the writer claim and keeps it until it is killed
hold "$S/LOCK" "$tmp/held"
[ -e "$tmp/held" ] && ok "another process holds the writer claim" || bad "no claim taken"
snap "$S" >"$tmp/before"
BUSY="cannot write server '$S' (it keeps its last checkpoint): another process is writing this directory"
says "insert while another process writes" "$BUSY" \
    $MESS insert --client "$C" --server "$S" --first-id 300 "$tmp/more.bvecs"
grep -q "already stored" "$tmp/err" && bad "busy reported as an id already stored" ||
    ok "not reported as an id already stored"
cp "$C" "$tmp/c.copy"
says "delete while another process writes" "$BUSY" \
    $MESS delete --client "$tmp/c.copy" --server "$S" --ids 1,2
says "compact while another process writes" "$BUSY" $MESS compact --server "$S"
says "checkpoint while another process writes" "$BUSY" $MESS checkpoint --server "$S"
snap "$S" >"$tmp/after"
cmp -s "$tmp/before" "$tmp/after" && ok "the refused commands changed no file" ||
    bad "files changed: $(diff "$tmp/before" "$tmp/after")"
kill "$holder"
wait "$holder" 2>/dev/null
check "insert once the other process is done" \
    $MESS insert --client "$C" --server "$S" --first-id 300 "$tmp/more.bvecs"
check "verify" $MESS verify --server "$S"
grep -q "800 entries (800 live)" "$tmp/out" && ok "every item stored once" ||
    bad "verify: $(cat "$tmp/out")"
# a command that saves the client file (insert, delete, a deterministic
# client's query) while another holds it: refused before loading it,
# nothing changed.  Before, both ran, and the later save dropped the
# earlier one's changes: a deterministic query running while an insert
# put back a deleted id saved the generation map it had loaded, and the
# id's entries then failed authentication, never returned
hold "$C" "$tmp/held2"
[ -e "$tmp/held2" ] && ok "another command holds the client file" || bad "no client lock taken"
CBUSY="$C: another mess command is using this client file"
cp "$C" "$tmp/c.before"
snap "$S" >"$tmp/before"
says "insert while another command uses the client file" "$CBUSY" \
    $MESS insert --client "$C" --server "$S" --first-id 400 "$tmp/more.bvecs"
says "delete while another command uses the client file" "$CBUSY" \
    $MESS delete --client "$C" --server "$S" --ids 1
says "a deterministic query while another command uses the client file" "$CBUSY" \
    $MESS query --client "$C" --server "$S" "$tmp/more.bvecs" -k 3 --pool 20
# init --force moves the file aside for a new one: refused too (before,
# the other command's save then replaced the new client file, whose
# server was left without its keys)
says "init --force while another command uses the client file" "$CBUSY" \
    $MESS init --client "$C" --server "$tmp/s2" --train "$tmp/learn.bvecs" $COMMON --force
[ ! -e "$tmp/s2" ] && ! ls "$tmp" | grep -q "c.mess.replaced" &&
    ok "init --force: nothing moved or made" || bad "init --force: $(ls "$tmp")"
cmp -s "$C" "$tmp/c.before" && ok "the client file unchanged" || bad "client file changed"
snap "$S" >"$tmp/after"
cmp -s "$tmp/before" "$tmp/after" && ok "the server unchanged" ||
    bad "files changed: $(diff "$tmp/before" "$tmp/after")"
check "info --client meanwhile (it reads only)" $MESS info --client "$C"
kill "$holder"
wait "$holder" 2>/dev/null
check "insert once the client file is free" \
    $MESS insert --client "$C" --server "$S" --first-id 400 "$tmp/more.bvecs"
# a production client is never written by a query: not locked by one
$MESS init --client "$tmp/p.mess" --server "$tmp/p" --train "$tmp/learn.bvecs" $COMMON \
    >/dev/null 2>&1 && $MESS insert --client "$tmp/p.mess" --server "$tmp/p" "$tmp/base.bvecs" \
    >/dev/null 2>&1 || bad "init and insert of a production client"
hold "$tmp/p.mess" "$tmp/held3"
check "a production query while another command uses its client file" \
    $MESS query --client "$tmp/p.mess" --server "$tmp/p" "$tmp/more.bvecs" -k 3 --pool 20
kill "$holder"
wait "$holder" 2>/dev/null
finish
