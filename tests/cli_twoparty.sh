#!/bin/sh
# tests/cli_twoparty.sh - the two-party flow as files (issue 29 item 6):
# `mess request` on the client's host writes the requests and the sealed
# pending queries, `mess search` on the server's host (no client file
# there) answers them, `mess finish` back on the client's host gives the
# results, each step a separate process.  With a deterministic client the
# three steps give exactly `mess query`'s results for the same queries:
# the requests are the same bytes (the same operation counter), so are the
# responses and the finish.  A response to another request, a query state
# of another client, of other parameters, of another version or damaged,
# and damaged message files are refused with a message, nothing written.
set -u
MESS=${MESS:-build/mess}
PYTHON=${PYTHON:-/usr/bin/python3}
. tests/shlib.sh

check() {
    name=$1
    shift
    if "$@" >"$tmp/out" 2>"$tmp/err"; then ok "$name"; else bad "$name (exit $?): $(head -c 300 "$tmp/err")"; fi
}
# refused_with NAME TEXT COMMAND...: refused (exit 1) with TEXT in the message
refused_with() {
    name=$1
    text=$2
    shift 2
    refuse "1" "$name" "$@"
    if grep -q -- "$text" "$tmp/err"; then ok "$name: the message says '$text'"; else bad "$name: message: $(head -c 300 "$tmp/err")"; fi
}
field() { # field NAME FILE: the value of "NAME" in the JSON line of FILE
    sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" "$2" | tail -n 1
}

D=datasets/sift
head -c $((132 * 600)) $D/base.bvecs >"$tmp/base.bvecs"
head -c $((132 * 8)) $D/query.bvecs >"$tmp/q.bvecs"
head -c $((132 * 3)) $D/query.bvecs >"$tmp/q3.bvecs"
COMMON="--shards 4 --per-item 2 --train-sample 2000"
SA=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
SB=1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100
export SA SB # seeds go through the environment (--seed-env), never argv

check "init client A (deterministic) and its server" "$MESS" init --client "$tmp/a.client" \
    --server "$tmp/a.server" --train $D/learn.bvecs $COMMON --seed-env SA
check "A inserts 600 items" "$MESS" insert --client "$tmp/a.client" --server "$tmp/a.server" \
    "$tmp/base.bvecs"
check "init client B (same parameters, other keys)" "$MESS" init --client "$tmp/b.client" \
    --server "$tmp/b.server" --train $D/learn.bvecs $COMMON --seed-env SB
check "init client C (other parameters)" "$MESS" init --client "$tmp/c.client" \
    --server "$tmp/c.server" --train $D/learn.bvecs --shards 8 --per-item 2 \
    --train-sample 2000 --seed-env SA
cp "$tmp/a.client" "$tmp/direct.client"
cp "$tmp/a.client" "$tmp/two.client"

# ---- the same results as mess query ------------------------------------------
check "mess query (one process, both roles)" "$MESS" query --client "$tmp/direct.client" \
    --server "$tmp/a.server" --pool 40 -k 10 --out "$tmp/direct.ivecs" "$tmp/q.bvecs"
cp "$tmp/out" "$tmp/direct.json"
check "mess request (client's host)" "$MESS" request --client "$tmp/two.client" \
    --query "$tmp/q.bvecs" --pool 40 --out "$tmp/req.msg" --state "$tmp/q.state"
case $(tail -n 1 "$tmp/out") in
'{"queries":8,"pool":40,"request_bytes":'*'"state_bytes":'*) ok "request: its JSON line" ;;
*) bad "request: JSON line $(tail -n 1 "$tmp/out")" ;;
esac
# the server's host holds the server directory and the request file only
mkdir "$tmp/host"
cp -r "$tmp/a.server" "$tmp/host/server"
cp "$tmp/req.msg" "$tmp/host/req.msg"
check "mess search (server's host, no client file)" sh -c \
    'cd "$1" && "$2" search --server server --request req.msg --out resp.msg' sh \
    "$tmp/host" "$(cd "$(dirname "$MESS")" && pwd)/$(basename "$MESS")"
case $(tail -n 1 "$tmp/out") in
'{"queries":8,"mean_request_bytes":'*'"server_ms_per_query":'*) ok "search: its JSON line" ;;
*) bad "search: JSON line $(tail -n 1 "$tmp/out")" ;;
esac
cp "$tmp/host/resp.msg" "$tmp/resp.msg"
# the code layout (mess_server_set_layout): the same response bytes
check "mess search --layout codes" "$MESS" search --server "$tmp/host/server" \
    --request "$tmp/req.msg" --out "$tmp/resp_codes.msg" --layout codes
cmp -s "$tmp/resp.msg" "$tmp/resp_codes.msg" && ok "--layout codes: the same responses" ||
    bad "--layout codes: other response bytes"
refuse 2 "mess search --layout junk (a usage error)" "$MESS" search \
    --server "$tmp/host/server" --request "$tmp/req.msg" --out "$tmp/x.msg" --layout junk
grep -q "default or codes" "$tmp/err" && ok "--layout junk: the message names the layouts" ||
    bad "--layout junk: message: $(head -c 300 "$tmp/err")"
check "mess finish (client's host, a new process)" "$MESS" finish --client "$tmp/two.client" \
    --state "$tmp/q.state" --response "$tmp/resp.msg" -k 10 --out "$tmp/two.ivecs" \
    --gt "$tmp/direct.ivecs"
cp "$tmp/out" "$tmp/two.json"
if [ -s "$tmp/two.ivecs" ] && cmp -s "$tmp/direct.ivecs" "$tmp/two.ivecs"; then
    ok "request / search / finish give exactly mess query's ids"
else
    bad "the two-party ids differ from mess query's"
fi
[ "$(field recall "$tmp/two.json")" = "1.0000" ] && ok "finish --gt: recall 1.0000 against mess query's ids" ||
    bad "finish --gt recall: $(field recall "$tmp/two.json")"
for f in queries k mean_request_bytes mean_response_bytes mean_bytes_per_query \
    mean_candidates mean_unique_candidates auth_failures unopened; do
    a=$(field $f "$tmp/direct.json")
    b=$(field $f "$tmp/two.json")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "finish: $f as mess query ($a)"; else bad "finish: $f $b, mess query $a"; fi
done
if cmp -s "$tmp/direct.client" "$tmp/two.client"; then
    ok "the deterministic client files agree afterwards (the same operation counter)"
else
    bad "the client files differ after mess query and mess request"
fi
check "finish again: the query state is not consumed" "$MESS" finish --client "$tmp/two.client" \
    --state "$tmp/q.state" --response "$tmp/resp.msg" --out "$tmp/again.ivecs"
cmp -s "$tmp/direct.ivecs" "$tmp/again.ivecs" && ok "the same ids again" || bad "other ids the second time"

# ---- what each file holds ------------------------------------------------------
[ "$(stat -c %a "$tmp/q.state")" = 600 ] && ok "the query state is mode 0600" ||
    bad "query state mode $(stat -c %a "$tmp/q.state")"
if "$PYTHON" - "$tmp/q.bvecs" "$tmp/q.state" "$tmp/req.msg" "$tmp/resp.msg" <<'EOF'
import struct, sys
raw = open(sys.argv[1], "rb").read()
dim = struct.unpack("<i", raw[:4])[0]
q0 = struct.pack("<%df" % dim, *raw[4:4 + dim])  # the first query as float32
for path in sys.argv[2:]:
    if q0[:64] in open(path, "rb").read():
        sys.exit("%s holds the clean query" % path)
EOF
then ok "no file holds the clean query in clear (the state is sealed)"; else bad "a file holds the clean query"; fi

# ---- refused -------------------------------------------------------------------
check "a second request run (another request id)" "$MESS" request --client "$tmp/two.client" \
    --query "$tmp/q.bvecs" --pool 40 --out "$tmp/req2.msg" --state "$tmp/q2.state"
check "its search" "$MESS" search --server "$tmp/a.server" --request "$tmp/req2.msg" \
    --out "$tmp/resp2.msg"
rm -f "$tmp/x.ivecs"
refused_with "a response to another request" "does not answer request 1 of" \
    "$MESS" finish --client "$tmp/two.client" --state "$tmp/q.state" \
    --response "$tmp/resp2.msg" --out "$tmp/x.ivecs"
[ ! -e "$tmp/x.ivecs" ] && ok "nothing written for a response to another request" || bad "--out written"
check "the second run's own responses finish" "$MESS" finish --client "$tmp/two.client" \
    --state "$tmp/q2.state" --response "$tmp/resp2.msg"
refused_with "another client's query state" "does not open with client" \
    "$MESS" finish --client "$tmp/b.client" --state "$tmp/q.state" --response "$tmp/resp.msg"
refused_with "a client of other parameters" "made for other parameters" \
    "$MESS" finish --client "$tmp/c.client" --state "$tmp/q.state" --response "$tmp/resp.msg"
refused_with "a client file given as the query state" "not a query state file" \
    "$MESS" finish --client "$tmp/two.client" --state "$tmp/a.client" --response "$tmp/resp.msg"
cp "$tmp/q.state" "$tmp/bad.state"
printf '\377' | dd of="$tmp/bad.state" bs=1 seek=300 count=1 conv=notrunc 2>/dev/null
refused_with "a damaged query state" "(cannot load query state)" \
    "$MESS" finish --client "$tmp/two.client" --state "$tmp/bad.state" --response "$tmp/resp.msg"
# a body of another version inside a valid container (the sealed bytes sit
# in a raw zstd block: the version follows the magic; checksum recomputed)
if "$PYTHON" - "$tmp/q.state" "$tmp/v2.state" <<'EOF'
import hashlib, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"MSQS")
if i < 0:
    sys.exit("no MSQS in the file")
b[i + 4:i + 8] = struct.pack("<I", 2)
b[-32:] = hashlib.blake2b(bytes(b[:-32]), digest_size=32).digest()
open(sys.argv[2], "wb").write(bytes(b))
EOF
then
    refused_with "a query state of another version" "another format version (this build reads version 1)" \
        "$MESS" finish --client "$tmp/two.client" --state "$tmp/v2.state" --response "$tmp/resp.msg"
else
    bad "could not make a query state of another version"
fi
check "requests for 3 queries" "$MESS" request --client "$tmp/two.client" \
    --query "$tmp/q3.bvecs" --pool 40 --out "$tmp/req3.msg" --state "$tmp/q3.state"
check "their search" "$MESS" search --server "$tmp/a.server" --request "$tmp/req3.msg" \
    --out "$tmp/resp3.msg"
refused_with "responses to another number of queries" "holds 3 responses and" \
    "$MESS" finish --client "$tmp/two.client" --state "$tmp/q.state" --response "$tmp/resp3.msg"
refused_with "a request file given as the responses" "not a response file (mess search writes them)" \
    "$MESS" finish --client "$tmp/two.client" --state "$tmp/q.state" --response "$tmp/req.msg"
refused_with "a query state given as the requests" "not a request file (mess request writes them)" \
    "$MESS" search --server "$tmp/a.server" --request "$tmp/q.state" --out "$tmp/x.msg"
cp "$tmp/req.msg" "$tmp/v2.msg"
printf '\002' | dd of="$tmp/v2.msg" bs=1 seek=8 count=1 conv=notrunc 2>/dev/null
refused_with "a request file of another version" "request file version 2, this build reads version 1" \
    "$MESS" search --server "$tmp/a.server" --request "$tmp/v2.msg" --out "$tmp/x.msg"
head -c $(($(wc -c <"$tmp/resp.msg") - 10)) "$tmp/resp.msg" >"$tmp/cut.msg"
refused_with "a response file cut short" "response 8 of 8 is cut short" \
    "$MESS" finish --client "$tmp/two.client" --state "$tmp/q.state" --response "$tmp/cut.msg"
{ cat "$tmp/resp.msg"; printf 'x'; } >"$tmp/long.msg"
refused_with "bytes after the last response" "1 bytes after its 8 responses" \
    "$MESS" finish --client "$tmp/two.client" --state "$tmp/q.state" --response "$tmp/long.msg"
[ ! -e "$tmp/x.msg" ] && ok "search wrote no response file for a refused request file" || bad "x.msg written"
check "client B's request" "$MESS" request --client "$tmp/b.client" --query "$tmp/q.bvecs" \
    --pool 40 --out "$tmp/reqb.msg" --state "$tmp/qb.state"
refused_with "another client's request on A's server" "is not the owner of server" \
    "$MESS" search --server "$tmp/a.server" --request "$tmp/reqb.msg" --out "$tmp/x.msg"
[ ! -e "$tmp/x.msg" ] && ok "no response file for another client's requests" || bad "x.msg written"
printf 'MESSREQS\001\000\000\000\001\000\000\000\003\000\000\000\000\000\000\000abc' >"$tmp/junk.msg"
refused_with "a request file holding no request" "is not a request server" \
    "$MESS" search --server "$tmp/a.server" --request "$tmp/junk.msg" --out "$tmp/x.msg"
{
    printf 'MESSRSPS\001\000\000\000\010\000\000\000'
    for i in 1 2 3 4 5 6 7 8; do printf '\003\000\000\000\000\000\000\000abc'; done
} >"$tmp/junk.msg"
refused_with "a response file holding no response" "response 1 cannot be read" \
    "$MESS" finish --client "$tmp/two.client" --state "$tmp/q.state" --response "$tmp/junk.msg"
head -c $((4 + 64)) "$tmp/q.bvecs" >"$tmp/bad.bvecs"
printf '\100\000\000\000' | dd of="$tmp/bad.bvecs" bs=1 count=4 conv=notrunc 2>/dev/null
refused_with "queries of another dimension" "has dimension 64, the index expects 128" \
    "$MESS" request --client "$tmp/two.client" --query "$tmp/bad.bvecs" --pool 40 \
    --out "$tmp/x.msg" --state "$tmp/x.state"
refused_with "a query state that cannot be written" "No such file or directory" \
    "$MESS" request --client "$tmp/two.client" --query "$tmp/q.bvecs" --pool 40 \
    --out "$tmp/y.msg" --state "$tmp/no/such/dir/q.state"
[ ! -e "$tmp/y.msg" ] && ok "no request file without its query state" || bad "y.msg written"
refuse 2 "request without --state" "$MESS" request --client "$tmp/two.client" \
    --query "$tmp/q.bvecs" --pool 40 --out "$tmp/x.msg"
grep -q "missing: --state" "$tmp/err" && ok "request names what is missing" || bad "request: $(cat "$tmp/err")"
refuse 2 "search without --out" "$MESS" search --server "$tmp/a.server" --request "$tmp/req.msg"
refuse 2 "search with a client file" "$MESS" search --server "$tmp/a.server" \
    --request "$tmp/req.msg" --out "$tmp/x.msg" --client "$tmp/a.client"
refuse 2 "finish without --response" "$MESS" finish --client "$tmp/two.client" --state "$tmp/q.state"

# ---- a deterministic client that cannot be saved: refused before requesting ---
ro=$tmp/ro
mkdir -p "$ro"
if [ "$(id -u)" = 0 ]; then
    # shellcheck disable=SC2016
    unshare -m sh -c 'mount -t tmpfs tmpfs "$1" && cp "$2" "$1/" &&
        mount -o remount,ro "$1" && shift 2 && exec "$@"' sh \
        "$ro" "$tmp/two.client" "$MESS" request --client "$ro/two.client" \
        --query "$tmp/q.bvecs" --pool 40 --out "$tmp/ro.msg" --state "$tmp/ro.state" \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
else
    cp "$tmp/two.client" "$ro/"
    chmod 555 "$ro"
    "$MESS" request --client "$ro/two.client" --query "$tmp/q.bvecs" --pool 40 \
        --out "$tmp/ro.msg" --state "$tmp/ro.state" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    chmod 755 "$ro"
fi
if [ $rc = 1 ] && [ ! -e "$tmp/ro.msg" ] && [ ! -e "$tmp/ro.state" ] &&
    grep -q "a deterministic (--seed) client is saved after its requests" "$tmp/err"; then
    ok "a deterministic client that cannot be saved is refused before any request"
else
    bad "read-only deterministic client: exit $rc, $(head -c 300 "$tmp/err")"
fi

# ---- a production client: never written, the flow works --------------------------
check "init a production client" "$MESS" init --client "$tmp/p.client" --server "$tmp/p.server" \
    --train $D/learn.bvecs $COMMON
check "insert" "$MESS" insert --client "$tmp/p.client" --server "$tmp/p.server" "$tmp/base.bvecs"
cp "$tmp/p.client" "$tmp/p.before"
check "production: request" "$MESS" request --client "$tmp/p.client" --query "$tmp/q.bvecs" \
    --pool 40 --out "$tmp/p-req.msg" --state "$tmp/p.state"
cmp -s "$tmp/p.client" "$tmp/p.before" && ok "production: the client file is not written" ||
    bad "production: the client file changed"
check "production: search" "$MESS" search --server "$tmp/p.server" --request "$tmp/p-req.msg" \
    --out "$tmp/p-resp.msg" --threads 2
check "production: finish" "$MESS" finish --client "$tmp/p.client" --state "$tmp/p.state" \
    --response "$tmp/p-resp.msg" --threads 2 --verify-all --out "$tmp/p.u64vecs"
[ "$(field queries "$tmp/out")" = 8 ] && [ "$(field auth_failures "$tmp/out")" = 0 ] &&
    ok "production: 8 queries finished, no authentication failure" || bad "production: $(cat "$tmp/out")"

# ---- help, the command list ----------------------------------------------------
for c in request search finish; do
    if "$MESS" $c --help >"$tmp/out" 2>&1 && grep -q "^usage: mess $c " "$tmp/out"; then
        ok "mess $c --help"
    else
        bad "mess $c --help: $(head -c 200 "$tmp/out")"
    fi
    "$MESS" --help | grep -q "^  $c " && ok "mess --help lists $c" || bad "mess --help does not list $c"
done
finish
