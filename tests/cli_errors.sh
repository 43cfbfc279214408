#!/bin/sh
# tests/cli_errors.sh - the messages of `mess` refusals: each names what is
# wrong (the option, the file and the system's reason) and what is accepted.
# expect CODES NAME PATTERN COMMAND...: refused with one of CODES and a
# stderr line matching the extended regular expression PATTERN.
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

expect() {
    codes=$1
    name=$2
    pat=$3
    shift 3
    refuse "$codes" "$name" "$@"
    if grep -Eq -- "$pat" "$tmp/err"; then
        ok "message: $name"
    else
        bad "message: $name: wanted /$pat/, got: $(head -c 300 "$tmp/err")"
    fi
}

D=datasets/sift
head -c $((132 * 300)) $D/learn.bvecs >"$tmp/train.bvecs"

# parameters (13.2: --bits above the dimension is allowed, so the message
# must not say "at most the dimension")
expect 2 "--bits 100" "--bits: expected a multiple of 64 in \[64, 4096\], got 100 \(more bits than dimensions is allowed\)" \
    $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --bits 100
if grep -q "at most the dimension" "$tmp/err"; then bad "stale 'at most the dimension' text"; else ok "no stale dimension text"; fi
expect 2 "--per-item above --shards" "--per-item 9: at most --shards \(8\)" \
    $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --shards 8 --per-item 9
expect 2 "--metric unknown" "--metric: unknown value 'l1' \(accepted: l2, ip, cos, cosine\)" \
    $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --metric l1
expect 2 "--payload unknown" "--payload: unknown value 'f8' \(accepted: f32, f16, i8, u8\)" \
    $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --payload f8
expect 2 "--bits 100 in plan" "--bits: expected a multiple of 64" \
    $MESS plan --train "$tmp/train.bvecs" --data "$tmp/train.bvecs" --queries "$tmp/train.bvecs" --bits 100
# 256 bits on 128-d data is accepted
if $MESS init --client "$tmp/c" --server "$tmp/s" --train "$tmp/train.bvecs" --bits 256 --shards 2 --per-item 1 >"$tmp/out" 2>"$tmp/err"; then
    ok "--bits 256 on 128-d data accepted"
else
    bad "--bits 256 on 128-d data: $(cat "$tmp/err")"
fi

SEED=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export SEED # through the environment, never argv
# a tiny deployment on 128-d SIFT rows
C="$tmp/c.mess"
S="$tmp/s.mess"
$MESS init --client "$C" --server "$S" --train "$tmp/train.bvecs" --shards 2 --per-item 1 \
    --seed-env SEED >/dev/null 2>&1 ||
    bad "init of the small deployment"
head -c $((132 * 3)) $D/base.bvecs >"$tmp/three.bvecs"

# 13.1: ids from 2^31 do not fit .ivecs; .u64vecs holds them.  Items
# 2^31-1, 2^31, 2^31+1, then 2^32+906 .. (which .ivecs would write as 906).
u64_ids() { # FILE: the ids of a .u64vecs file with k = 1, one per line
    n=$(($(stat -c %s "$1") / 12))
    i=0
    while [ $i -lt $n ]; do
        od -An -v -t u8 -j $((12 * i + 4)) -N 8 "$1" | tr -d ' '
        i=$((i + 1))
    done
}
$MESS insert --client "$C" --server "$S" "$tmp/three.bvecs" --first-id 2147483647 >/dev/null 2>&1 ||
    bad "insert at first id 2^31-1"
dd if="$tmp/three.bvecs" bs=132 count=1 2>/dev/null >"$tmp/q0.bvecs"
if $MESS query --client "$C" --server "$S" "$tmp/q0.bvecs" -k 1 --pool 8 --out "$tmp/r0.ivecs" >/dev/null 2>"$tmp/err" &&
    [ "$(od -An -v -t d4 -j 4 -N 4 "$tmp/r0.ivecs" | tr -d ' ')" = 2147483647 ]; then
    ok "id 2^31-1 written to .ivecs"
else
    bad "id 2^31-1 in .ivecs: $(cat "$tmp/err")"
fi
expect 1 "id 2^31 refused by .ivecs" "r\.ivecs: id 2147483648 does not fit \.ivecs \(int32: ids up to 2147483647\); write a \.u64vecs file instead" \
    $MESS query --client "$C" --server "$S" "$tmp/three.bvecs" -k 1 --pool 8 --out "$tmp/r.ivecs"
[ -e "$tmp/r.ivecs" ] && bad "a refused .ivecs was written" || ok "nothing written for a refused .ivecs"
if $MESS query --client "$C" --server "$S" "$tmp/three.bvecs" -k 1 --pool 8 --out "$tmp/r.u64vecs" >/dev/null 2>"$tmp/err"; then
    got=$(u64_ids "$tmp/r.u64vecs" | tr '\n' ' ')
    [ "$got" = "2147483647 2147483648 2147483649 " ] && ok "ids 2^31-1..2^31+1 in .u64vecs" || bad "u64vecs ids: $got"
else
    bad "query --out .u64vecs: $(cat "$tmp/err")"
fi
head -c $((132 * 6)) $D/base.bvecs | tail -c $((132 * 3)) >"$tmp/next.bvecs"
$MESS insert --client "$C" --server "$S" "$tmp/next.bvecs" --first-id 4294968202 >/dev/null 2>&1 ||
    bad "insert at first id 2^32+906"
if $MESS query --client "$C" --server "$S" "$tmp/next.bvecs" -k 1 --pool 8 --out "$tmp/r2.u64vecs" >/dev/null 2>"$tmp/err"; then
    got=$(u64_ids "$tmp/r2.u64vecs" | tr '\n' ' ')
    [ "$got" = "4294968202 4294968203 4294968204 " ] && ok "id 2^32+906 kept in .u64vecs" || bad "u64vecs ids: $got"
else
    bad "query --out .u64vecs: $(cat "$tmp/err")"
fi
expect 1 "id 2^32+906 refused by .ivecs" "id 4294968202 does not fit \.ivecs" \
    $MESS query --client "$C" --server "$S" "$tmp/next.bvecs" -k 1 --pool 8 --out "$tmp/r2.ivecs"
# the .u64vecs ground truth is read back for recall
cp "$tmp/r2.u64vecs" "$tmp/gt.u64vecs"
if $MESS query --client "$C" --server "$S" "$tmp/next.bvecs" -k 1 --pool 8 --gt "$tmp/gt.u64vecs" >"$tmp/out" 2>"$tmp/err" &&
    tail -n 1 "$tmp/out" | grep -q '"recall":1.0000'; then
    ok "--gt .u64vecs with ids above 2^32"
else
    bad "--gt .u64vecs: $(tail -n 1 "$tmp/out") $(cat "$tmp/err")"
fi

# --out through the library's writer: a symlink planted at OUT.tmp (where
# the writer once opened its temporary) is not followed (issue 12 item 8's
# sibling in vecio.c)
printf precious >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/sym.u64vecs.tmp"
if $MESS query --client "$C" --server "$S" "$tmp/next.bvecs" -k 1 --pool 8 --out "$tmp/sym.u64vecs" >/dev/null 2>"$tmp/err" &&
    [ "$(cat "$tmp/victim")" = precious ] && [ -L "$tmp/sym.u64vecs.tmp" ] && [ -f "$tmp/sym.u64vecs" ] &&
    [ ! -L "$tmp/sym.u64vecs" ] && cmp -s "$tmp/sym.u64vecs" "$tmp/r2.u64vecs"; then
    ok "--out: a symlink planted at OUT.tmp is not followed"
else
    bad "--out with a planted OUT.tmp symlink: victim now '$(head -c 40 "$tmp/victim")', $(cat "$tmp/err")"
fi

# 13.5: extensions: what is accepted
cp "$tmp/q0.bvecs" "$tmp/q0.dat"
# 13.5: --pool 0 names --pool and its range, not "needs --client, ..."
# when everything was given; a missing piece is named
expect 2 "--pool 0" "^mess: --pool: expected an integer in \[1, [0-9]+\], got '0'\$" \
    $MESS query --client "$C" --server "$S" "$tmp/three.bvecs" --pool 0
if grep -q "needs --client" "$tmp/err"; then bad "--pool 0 still says 'needs --client'"; else ok "--pool 0 does not claim a missing option"; fi
expect 2 "query without --pool" "query needs --client, --server, --pool B and FILE; missing: --pool \(see --help\)\$" \
    $MESS query --client "$C" --server "$S" "$tmp/three.bvecs"
expect 2 "query without --client and FILE" "missing: --client FILE \(see --help\)\$" \
    $MESS query --server "$S" --pool 8
expect 2 "unknown query extension" "q0\.dat: unknown extension for queries; accepted: \.fvecs \(float32\), \.bvecs \(uint8\)" \
    $MESS query --client "$C" --server "$S" "$tmp/q0.dat" --pool 8
expect 2 "unknown insert extension" "q0\.dat: unknown extension for vectors to insert; accepted: \.fvecs" \
    $MESS insert --client "$C" --server "$S" "$tmp/q0.dat"
expect 2 "unknown training extension" "q0\.dat: unknown extension for training file; accepted: \.fvecs" \
    $MESS init --client "$tmp/c9" --server "$tmp/s9" --train "$tmp/q0.dat"
expect 2 "unknown --out extension" "r\.txt: unknown extension for --out; accepted: \.ivecs \(int32 ids below 2\^31\), \.u64vecs" \
    $MESS query --client "$C" --server "$S" "$tmp/q0.bvecs" --pool 8 --out "$tmp/r.txt"
expect 2 "unknown --gt extension" "g\.txt: unknown extension for --gt; accepted: \.ivecs" \
    $MESS query --client "$C" --server "$S" "$tmp/q0.bvecs" --pool 8 --gt "$tmp/g.txt"
expect 1 "malformed vector file" "trunc\.bvecs: not a valid \.bvecs file for queries: malformed or truncated" \
    sh -c "head -c 200 '$tmp/three.bvecs' >'$tmp/trunc.bvecs'; exec $MESS query --client '$C' --server '$S' '$tmp/trunc.bvecs' --pool 8"

# 13.4: the path and the system's reason for every OS error
expect 1 "missing query file" "$tmp/none\.bvecs: No such file or directory$" \
    $MESS query --client "$C" --server "$S" "$tmp/none.bvecs" --pool 8
expect 1 "missing training file" "$tmp/none\.bvecs: No such file or directory$" \
    $MESS init --client "$tmp/c9" --server "$tmp/s9" --train "$tmp/none.bvecs"
mkdir "$tmp/dir.bvecs"
expect 1 "directory as vector file" "dir\.bvecs: Is a directory$" \
    $MESS insert --client "$C" --server "$S" "$tmp/dir.bvecs"
expect 1 "--out in a missing directory" "$tmp/nodir/r\.u64vecs: No such file or directory$" \
    $MESS query --client "$C" --server "$S" "$tmp/q0.bvecs" -k 1 --pool 8 --out "$tmp/nodir/r.u64vecs"
expect 1 "missing --gt" "$tmp/none\.ivecs: No such file or directory$" \
    $MESS query --client "$C" --server "$S" "$tmp/q0.bvecs" -k 1 --pool 8 --gt "$tmp/none.ivecs"
expect 1 "missing client file" "$tmp/none\.mess: No such file or directory$" \
    $MESS query --client "$tmp/none.mess" --server "$S" "$tmp/q0.bvecs" --pool 8
expect 1 "missing server file" "$tmp/none\.mess: No such file or directory$" \
    $MESS info --server "$tmp/none.mess"
expect 1 "init into a missing directory" "$tmp/nodir/c: No such file or directory$" \
    $MESS init --client "$tmp/nodir/c" --server "$tmp/nodir/s" --train "$tmp/train.bvecs" --shards 2 --per-item 1
# permission: as root, run as nobody on a file only root may read
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
    chmod 755 "$tmp"
    cp "$tmp/q0.bvecs" "$tmp/secret.bvecs"
    chmod 600 "$tmp/secret.bvecs"
    expect 1 "unreadable file" "secret\.bvecs: Permission denied$" \
        setpriv --reuid=65534 --regid=65534 --clear-groups $MESS query --client "$C" --server "$S" "$tmp/secret.bvecs" --pool 8
    chmod 644 "$tmp/train.bvecs"
    expect 1 "unwritable directory" "$tmp/c9: Permission denied$" \
        setpriv --reuid=65534 --regid=65534 --clear-groups $MESS init --client "$tmp/c9" --server "$tmp/s9" --train "$tmp/train.bvecs" --shards 2 --per-item 1
    chmod 700 "$tmp"
else
    echo "# skipped permission checks: need root and setpriv (uid $(id -u))"
fi
# read-only file system: a private mount namespace with a read-only tmpfs
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    mkdir "$tmp/ro"
    unshare -m sh -c "mount -t tmpfs -o ro tmpfs '$tmp/ro' && exec $MESS query --client '$C' --server '$S' '$tmp/q0.bvecs' -k 1 --pool 8 --out '$tmp/ro/r.u64vecs'" >"$tmp/out" 2>"$tmp/err"
    if grep -q "ro/r\.u64vecs: Read-only file system$" "$tmp/err"; then ok "read-only file system named"; else bad "read-only fs: $(cat "$tmp/err")"; fi
else
    echo "# skipped the read-only file system check: need root and unshare -m"
fi

# 13.8: non-finite values are refused with the file and the row
printf '\003\000\000\000' >"$tmp/nan.fvecs"
printf '\000\000\200\077\000\000\200\077\000\000\200\077' >>"$tmp/nan.fvecs"
printf '\003\000\000\000\000\000\200\077\000\000\300\177\000\000\200\077' >>"$tmp/nan.fvecs"
expect 1 "NaN in a vector file" "nan\.fvecs: row 1 \(from 0\), component 1 is NaN; training file must be finite" \
    $MESS init --client "$tmp/c9" --server "$tmp/s9" --train "$tmp/nan.fvecs"

# 13.8: a training set too small for the shards' dimensions is refused, a
# small one warned about
head -c $((132 * 10)) $D/learn.bvecs >"$tmp/ten.bvecs"
expect 1 "10 training rows" "ten\.bvecs: 10 training rows; the hash of 128 bits on 128 dimensions needs at least 129 \(min\(bits, dim\) \+ 1\)" \
    $MESS init --client "$tmp/c9" --server "$tmp/s9" --train "$tmp/ten.bvecs"
[ -e "$tmp/c9" ] && bad "a client was written from 10 rows" || ok "nothing written for 10 training rows"
expect 1 "10 training rows in plan" "ten\.bvecs: 10 training rows" \
    $MESS plan --train "$tmp/ten.bvecs" --data "$tmp/three.bvecs" --queries "$tmp/q0.bvecs" -k 1
if $MESS init --client "$tmp/c9" --server "$tmp/s9" --train "$tmp/train.bvecs" --shards 2 --per-item 1 >"$tmp/out" 2>"$tmp/err" &&
    grep -q "warning: .*train\.bvecs: only 300 training rows (fewer than 1000)" "$tmp/err"; then
    ok "300 training rows: accepted with a warning"
else
    bad "300 training rows: $(cat "$tmp/err")"
fi

# issue 29: under cos a zero vector (no direction) is refused with its row,
# in an insert, an insert --resume, a query and a request; nothing stored
/usr/bin/python3 - "$tmp" <<'EOF'
import struct, sys
import numpy as np
x = np.random.default_rng(3).standard_normal((300, 16)).astype(np.float32)
def w(name, a):
    with open(sys.argv[1] + "/" + name, "wb") as f:
        for r in a:
            f.write(struct.pack("<i", a.shape[1]) + r.tobytes())
w("cos_train.fvecs", x)
y = x[:20].copy()
y[5] = 0
w("cos_zero.fvecs", y)
EOF
SEED=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export SEED
$MESS init --client "$tmp/cz.mess" --server "$tmp/sz" --train "$tmp/cos_train.fvecs" --metric cos \
    --shards 2 --per-item 1 --bits 64 --train-sample 300 --seed-env SEED >/dev/null 2>&1 ||
    bad "init --metric cos"
ZERO="cos_zero\.fvecs' row 5 is a zero vector: under --metric cos every vector needs a direction \(a length above 0\)"
expect 1 "a zero vector under cos" "$ZERO" \
    $MESS insert --client "$tmp/cz.mess" --server "$tmp/sz" "$tmp/cos_zero.fvecs"
expect 1 "a zero vector under cos, --resume" "$ZERO" \
    $MESS insert --client "$tmp/cz.mess" --server "$tmp/sz" "$tmp/cos_zero.fvecs" --resume
expect 1 "a zero query under cos" "$ZERO" \
    $MESS query --client "$tmp/cz.mess" --server "$tmp/sz" "$tmp/cos_zero.fvecs" --pool 10 -k 1
expect 1 "a zero request under cos" "$ZERO" \
    $MESS request --client "$tmp/cz.mess" --query "$tmp/cos_zero.fvecs" --pool 10 \
    --out "$tmp/rz.req" --state "$tmp/rz.qs"
$MESS verify --server "$tmp/sz" | grep -q " 0 entries" && ok "nothing stored" ||
    bad "stored: $($MESS verify --server "$tmp/sz")"

finish
