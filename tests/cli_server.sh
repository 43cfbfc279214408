#!/bin/sh
# tests/cli_server.sh - the server directory from the command line
# (docs/PROTOCOL.md, "Server directory"): init makes the directory and
# never replaces one; export is byte for byte reproducible and import
# gives it back; verify names the damaged file; checkpoint; a travel file,
# a client file or a plain directory given as --server is refused with its
# own message; a directory that cannot be written keeps its generation.
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

# says NAME TEXT COMMAND...: refused, and stderr holds TEXT
says() { says_codes "1 2" "$@"; }

D=datasets/sift
head -c $((132 * 600)) $D/base.bvecs >"$tmp/base.bvecs"
head -c $((132 * 1000)) $D/learn.bvecs >"$tmp/learn.bvecs"
head -c $((132 * 5)) $D/query.bvecs >"$tmp/q.bvecs"
SEED=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export SEED
C=$tmp/c.mess
S=$tmp/s
COMMON="--shards 4 --per-item 2 --bits 128 --hnsw-m 8 --ef-construction 40 --train-sample 1000"

check "init makes the server directory" $MESS init --client "$C" --server "$S" \
    --train "$tmp/learn.bvecs" $COMMON --seed-env SEED
[ -f "$S/MANIFEST" ] && [ "$(ls "$S" | grep -c '\.graph$')" = 4 ] &&
    [ "$(ls "$S" | grep -c '\.arena$')" = 4 ] && ok "MANIFEST, 4 graph files, 4 arenas" ||
    bad "directory: $(ls "$S")"
cp "$C" "$tmp/c.before"
says "init over an existing server" "exists and is not empty" \
    $MESS init --client "$C" --server "$S" --train "$tmp/learn.bvecs" $COMMON
cmp -s "$C" "$tmp/c.before" && ok "the refused init left the client file" ||
    bad "the refused init rewrote the client file"
says "init into a missing parent" "cannot create server directory '$tmp/no/s': No such file or directory" \
    $MESS init --client "$tmp/c2.mess" --server "$tmp/no/s" --train "$tmp/learn.bvecs" $COMMON
check "insert" $MESS insert --client "$C" --server "$S" "$tmp/base.bvecs"
check "verify" $MESS verify --server "$S"
grep -q "^$S: ok: generation 2, 4 shards, 1200 entries (1200 live)" "$tmp/out" &&
    ok "verify: one line with the generation and the entries" || bad "verify: $(cat "$tmp/out")"
check "checkpoint" $MESS checkpoint --server "$S"
cp "$C" "$tmp/c.q" # the same coins for the query of the copy below
check "query" $MESS query --client "$C" --server "$S" "$tmp/q.bvecs" --pool 40 -k 5 \
    --out "$tmp/r1.ivecs"

# the travel form: the same bytes every time, and through import again
check "export" $MESS export --server "$S" "$tmp/e1.mess"
check "export again" $MESS export --server "$S" "$tmp/e2.mess"
cmp -s "$tmp/e1.mess" "$tmp/e2.mess" && ok "export is byte for byte reproducible" ||
    bad "two exports differ"
check "import" $MESS import "$tmp/e1.mess" "$tmp/s2"
check "export of the imported copy" $MESS export --server "$tmp/s2" "$tmp/e3.mess"
cmp -s "$tmp/e1.mess" "$tmp/e3.mess" && ok "import -> export gives the same bytes" ||
    bad "import -> export differs"
check "query the imported copy" $MESS query --client "$tmp/c.q" --server "$tmp/s2" "$tmp/q.bvecs" \
    --pool 40 -k 5 --out "$tmp/r2.ivecs"
cmp -s "$tmp/r1.ivecs" "$tmp/r2.ivecs" && ok "the copy answers the same" || bad "answers differ"
says "import into a non-empty directory" "$tmp/s2: the directory exists and is not empty" \
    $MESS import "$tmp/e1.mess" "$tmp/s2"
printf 'garbage' >"$tmp/garbage"
says "import of a file that is not a server" "cannot import '$tmp/garbage' into '$tmp/s3'" \
    $MESS import "$tmp/garbage" "$tmp/s3"
[ ! -e "$tmp/s3" ] && ok "the failed import left no directory" || bad "s3 left behind"
says "export into a missing directory" "cannot export to '$tmp/no/e.mess': No such file or directory" \
    $MESS export --server "$S" "$tmp/no/e.mess"

# a shard group's directory (mess extract): copied files, its own MANIFEST
check "extract shards 0-1,3" $MESS extract --server "$S" --shards 0-1,3 "$tmp/g0"
grep -q "\"extracted\":\"$tmp/g0\",\"shards\":3" "$tmp/out" && ok "extract: its line" ||
    bad "extract: $(cat "$tmp/out")"
check "verify the extracted directory" $MESS verify --server "$tmp/g0"
for j in 0 1 3; do
    cmp -s "$(ls "$S"/shard-000$j-*.arena)" "$(ls "$tmp/g0"/shard-000$j-*.arena)" ||
        bad "extract: shard $j's arena differs"
done
[ ! -s "$(ls "$tmp/g0"/shard-0002-*.arena)" ] && ok "extract: shard 2 is empty" ||
    bad "extract: shard 2 has entries"
says "extract into an existing directory" "$tmp/g0 exists" \
    $MESS extract --server "$S" --shards 2 "$tmp/g0"
says "extract of a shard out of range" "shard 4 out of range (4 shards)" \
    $MESS extract --server "$S" --shards 2-4 "$tmp/g1"
says "extract of a range backwards" "--shards: 3-1 is not a range of shards below" \
    $MESS extract --server "$S" --shards 3-1 "$tmp/g1"
says "extract of a shard listed twice" "shard 1 listed twice" \
    $MESS extract --server "$S" --shards 0-1,1 "$tmp/g1"
says "extract of more shards than there can be" "--shards: shard 5 listed twice" \
    $MESS extract --server "$S" --shards 0-1023,5 "$tmp/g1"
says "extract of a shard list that is not one" "'2,x' is not a list of shard numbers" \
    $MESS extract --server "$S" --shards 2,x "$tmp/g1"
[ ! -e "$tmp/g1" ] && [ -z "$(ls -d "$tmp"/g1.tmp-* 2>/dev/null)" ] &&
    ok "the refused extracts left nothing" || bad "left: $(ls "$tmp")"

# files where the directory is expected
says "an exported server as --server" "this is an exported server; run \`mess import $tmp/e1.mess DIR\`" \
    $MESS query --client "$C" --server "$tmp/e1.mess" "$tmp/q.bvecs" --pool 40
says "a client file as --server" "$C: this is a client file, not a server directory" \
    $MESS info --server "$C"
says "garbage as --server" "$tmp/garbage: not a server directory" \
    $MESS verify --server "$tmp/garbage"
says "a missing --server" "$tmp/none: No such file or directory" \
    $MESS info --server "$tmp/none"

# damage: verify and every opening command name the file and the reason
cp -r "$S" "$tmp/d1"
g=$(ls "$tmp/d1"/shard-0002-*.graph)
printf '\001' | dd of="$g" bs=1 seek=300 conv=notrunc 2>/dev/null
says "verify: a graph byte changed" "server '$tmp/d1' is damaged: $(basename "$g"): digest differs" \
    $MESS verify --server "$tmp/d1"
cp -r "$S" "$tmp/d2"
a=$(ls "$tmp/d2"/shard-0003-*.arena)
truncate -s -10 "$a"
says "open: an arena cut short" "cannot open server '$tmp/d2': $(basename "$a"):" \
    $MESS query --client "$C" --server "$tmp/d2" "$tmp/q.bvecs" --pool 40
grep -q "(truncated)" "$tmp/err" && ok "the message says truncated" || bad "$(cat "$tmp/err")"

# a delta damaged in its body (docs/PROTOCOL.md "Lazy apply"): the open
# reads only each delta's header, so info opens; the first command that
# reads the shard fails naming the file; verify names it too
cp -r "$S" "$tmp/d3"
cp "$C" "$tmp/c.d3"
head -c $((132 * 620)) $D/base.bvecs | tail -c $((132 * 20)) >"$tmp/more.bvecs"
check "insert 20 more: delta chains" $MESS insert --client "$tmp/c.d3" --server "$tmp/d3" \
    "$tmp/more.bvecs" --first-id 600
dl=$(ls "$tmp/d3"/shard-0001-*.delta)
[ -n "$dl" ] && ok "the insert wrote deltas" || bad "no delta: $(ls "$tmp/d3")"
printf '\001' | dd of="$dl" bs=1 seek=300 conv=notrunc 2>/dev/null
check "info opens without reading the delta's body" $MESS info --server "$tmp/d3"
says "query: a delta's body damaged" "server '$tmp/d3': $(basename "$dl"): delta checksum mismatch" \
    $MESS query --client "$tmp/c.d3" --server "$tmp/d3" "$tmp/q.bvecs" --pool 40
says "export: a delta's body damaged" "server '$tmp/d3': $(basename "$dl"): delta checksum mismatch" \
    $MESS export --server "$tmp/d3" "$tmp/d3.mess"
says "compact: a delta's body damaged" "server '$tmp/d3': $(basename "$dl"): delta checksum mismatch" \
    $MESS compact --server "$tmp/d3"
says "verify: a delta's body damaged" "$(basename "$dl"): delta checksum mismatch" \
    $MESS verify --server "$tmp/d3"

# the open benchmark: the directory against its exported file
check "bench open" $MESS bench open --server "$S" --repeat 1
tail -n 1 "$tmp/out" | grep -q '^{"open_cold_ms":[0-9.]*,"open_warm_ms":[0-9.]*,"load_cold_ms":[0-9.]*,"load_warm_ms":[0-9.]*,"dir_bytes":[0-9]*,"travel_bytes":[0-9]*,"entries":1200,"shards":4,' &&
    ok "bench open: JSON line" || bad "bench open: $(tail -n 1 "$tmp/out")"
[ -z "$(ls "$tmp" | grep '\.bench\.')" ] && ok "bench open removed its exported file" ||
    bad "left: $(ls "$tmp")"
refuse "2" "usage: bench open" $MESS bench open
grep -q "bench open needs --server" "$tmp/err" && ok "bench open usage message" || bad "$(cat "$tmp/err")"

# usage
for cmd in "extract --server $S $tmp/g2" "extract --shards 1 $tmp/g2" \
    "export --server $S" "export $tmp/x.mess" "import $tmp/e1.mess" "verify" "checkpoint"; do
    # shellcheck disable=SC2086
    refuse "2" "usage: mess $cmd" $MESS $cmd
done
grep -q "checkpoint needs --server" "$tmp/err" && ok "usage message" || bad "$(cat "$tmp/err")"
refuse "2" "usage: import" $MESS import
grep -q "import needs FILE and DIR" "$tmp/err" && ok "import usage message" || bad "$(cat "$tmp/err")"
refuse "2" "usage: verify" $MESS verify
grep -q "verify needs --server" "$tmp/err" && ok "verify usage message" || bad "$(cat "$tmp/err")"
refuse "2" "usage: export" $MESS export "$tmp/x"
grep -q "export needs --server and FILE" "$tmp/err" && ok "export usage message" || bad "$(cat "$tmp/err")"

# a directory that cannot be written (root: a read-only bind mount) keeps
# its generation: the insert is refused and the directory is unchanged
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    snap "$S" >"$tmp/s.before"
    # shellcheck disable=SC2016
    refuse "1" "insert into a read-only server directory" unshare -m sh -c \
        'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"' sh \
        "$S" $MESS insert --client "$C" --server "$S" "$tmp/q.bvecs" --first-id 9000
    grep -q "cannot write server '$S' (it keeps its last checkpoint): Read-only file system" \
        "$tmp/err" && ok "read-only: message" || bad "read-only: $(cat "$tmp/err")"
    snap "$S" | cmp -s - "$tmp/s.before" && ok "read-only: directory unchanged" ||
        bad "read-only: directory changed"
    check "verify after the refused write" $MESS verify --server "$S"
else
    echo "# not root or no mount namespace: read-only check not run"
fi
finish
