#!/bin/sh
# tests/cli_messages.sh - refusals no other tests/cli_*.sh triggered (found
# by tests/msgcov.py, `make cli-messages`): each is triggered and its text
# checked (a fixed string: what is wrong and, where there is one, what is
# accepted).  Cheap: argument checks and a 2-shard client.
# says_codes CODES NAME TEXT COMMAND... (tests/shlib.sh): refused with one
# of CODES, no JSON, and a stderr line containing TEXT.
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

D=datasets/sift
head -c $((132 * 300)) $D/learn.bvecs >"$tmp/train.bvecs"
head -c $((132 * 50)) $D/base.bvecs >"$tmp/b50.bvecs"
head -c $((132 * 3)) $D/query.bvecs >"$tmp/q3.bvecs"
SEEDX=abababababababababababababababababababababababababababababababab
export SEEDX # through the environment, never argv
C=$tmp/c
S=$tmp/s
"$MESS" init --client "$C" --server "$S" --train "$tmp/train.bvecs" --shards 2 --per-item 1 \
    --seed-env SEEDX >/dev/null 2>&1 || bad "init of the 2-shard client"

# commands and their required options
says_codes 2 "unknown command" "unknown command 'bogus' (see mess --help)" "$MESS" bogus
says_codes 2 "unknown benchmark" "unknown benchmark 'foo' (see mess bench --help)" "$MESS" bench foo
says_codes 2 "unknown accountant" "unknown accountant 'foo' (see mess account --help)" "$MESS" account foo
says_codes 2 "init without options" "init needs --client, --server and --train (see --help)" "$MESS" init
says_codes 2 "insert without options" "insert needs --client, --server and FILE (see --help)" "$MESS" insert
says_codes 2 "delete without options" "delete needs --client, --server and --ids (see --help)" "$MESS" delete
says_codes 2 "compact without options" "compact needs --server (see --help)" "$MESS" compact
says_codes 2 "info without options" "info needs one of --server and --client (see --help)" "$MESS" info
says_codes 2 "an unexpected argument" "unexpected argument 'extra' (see --help)" "$MESS" info --server "$S" extra
says_codes 2 "a number out of range" "--p-store: expected a number in [0, 0.5], got '0.7'" \
    "$MESS" init --client "$tmp/x" --server "$tmp/y" --train "$tmp/train.bvecs" --p-store 0.7
says_codes "1 2" "a repeated id" "--ids: an id is repeated" "$MESS" delete --client "$C" --server "$S" --ids 1,1

# passphrases and seeds
says_codes 2 "--passphrase-env unset" "--passphrase-env: variable MESS_NO_SUCH_VAR_Q is not set" \
    "$MESS" init --client "$tmp/x" --server "$tmp/y" --train "$tmp/train.bvecs" --passphrase-env MESS_NO_SUCH_VAR_Q
EMPTYP='' says_codes 2 "--passphrase-env empty" "--passphrase-env: variable EMPTYP is empty (an empty passphrase seals nothing)" \
    "$MESS" init --client "$tmp/x" --server "$tmp/y" --train "$tmp/train.bvecs" --passphrase-env EMPTYP
says_codes 2 "--seed-env without a value" "--seed-env NAME / --seed-file PATH: the option needs its value" \
    "$MESS" init --client "$tmp/x" --server "$tmp/y" --train "$tmp/train.bvecs" --seed-env
says_codes 2 "--seed-env and --seed-file" "--seed-env and --seed-file: give one of them" \
    "$MESS" init --client "$tmp/x" --server "$tmp/y" --train "$tmp/train.bvecs" --seed-env SEEDX --seed-file "$tmp/f"
says_codes 2 "--seed-env unset" "--seed-env: variable MESS_NO_SUCH_VAR_Q is not set" \
    "$MESS" init --client "$tmp/x" --server "$tmp/y" --train "$tmp/train.bvecs" --seed-env MESS_NO_SUCH_VAR_Q
BADHEX=xyz says_codes 2 "--seed-env not hex" "--seed-env: variable BADHEX must hold 64 hex digits" \
    "$MESS" init --client "$tmp/x" --server "$tmp/y" --train "$tmp/train.bvecs" --seed-env BADHEX
echo zz >"$tmp/seed.txt"
says_codes 2 "--seed-file not hex" "--seed-file: $tmp/seed.txt must hold 64 hex digits" \
    "$MESS" init --client "$tmp/x" --server "$tmp/y" --train "$tmp/train.bvecs" --seed-file "$tmp/seed.txt"

# mess account
says_codes 2 "account access without options" "account access needs --p-prr, --p-irr and --repeats (see --help)" \
    "$MESS" account access
says_codes 2 "account search without options" "account search needs --p-prr, --p-irr, --repeats, --bits and --distance" \
    "$MESS" account search
says_codes 2 "account search distance above bits" "--distance 200 exceeds --bits 128" \
    "$MESS" account search --p-prr 0.04 --p-irr 0.04 --repeats 1 --bits 128 --distance 200
says_codes 2 "account stored without options" "account stored needs --p-store, --distances, --per-item and --delta" \
    "$MESS" account stored
says_codes 2 "account stored: too many shards" "--distances: at most 1024 shards" \
    "$MESS" account stored --p-store 0.08 --per-item 1 --delta 0.01 \
    --distances "$(awk 'BEGIN { for (i = 0; i < 1025; i++) printf "%s1", (i ? "," : "") }')"
says_codes 2 "account stored --fixed list" "--fixed: the list must hold exactly the 3 realized shards" \
    "$MESS" account stored --p-store 0.08 --distances 1,2 --fixed --per-item 3 --delta 0.01
says_codes "1 2" "account stored: route distribution too large" \
    "account stored: the route distribution is too large to compute exactly (" \
    "$MESS" account stored --p-store 0.08 --per-item 500 --delta 0.01 \
    --distances "$(awk 'BEGIN { for (i = 0; i < 1024; i++) printf "%s%d", (i ? "," : ""), i % 100 }')"
grep -Fq -- "--fixed gives the worst route" "$tmp/err" && ok "the refusal names --fixed" || bad "no --fixed hint"
says_codes 2 "account random-lsh without options" "account random-lsh needs --p-store, --bits, --angle and --delta" \
    "$MESS" account random-lsh
says_codes 2 "account report without options" "account report needs --client, --pairs and --delta (see --help)" \
    "$MESS" account report
says_codes "1 2" "account report: odd number of rows" "'$tmp/q3.bvecs' has 3 rows; pairs need an even, non-zero number" \
    "$MESS" account report --client "$C" --pairs "$tmp/q3.bvecs" --delta 0.01
printf '\002\000\000\000\000\000\200\077\000\000\000\100' >"$tmp/d2.fvecs"
cat "$tmp/d2.fvecs" "$tmp/d2.fvecs" >"$tmp/pairs2.fvecs"
says_codes "1 2" "account report: pairs of another dimension" "'$tmp/pairs2.fvecs' has dimension 2, the client expects 128" \
    "$MESS" account report --client "$C" --pairs "$tmp/pairs2.fvecs" --delta 0.01
"$MESS" init --client "$tmp/c0" --server "$tmp/s0" --train "$tmp/train.bvecs" --shards 2 --per-item 1 \
    --p-store 0 >/dev/null 2>&1 || bad "init with --p-store 0"
head -c $((132 * 2)) $D/query.bvecs >"$tmp/q2.bvecs"
says_codes "1 2" "account report without storage noise" "the client stores without noise (p_store = 0): no stored-data guarantee" \
    "$MESS" account report --client "$tmp/c0" --pairs "$tmp/q2.bvecs" --delta 0.01

# mess plan
says_codes 2 "plan with neither --client nor --train" "plan needs exactly one of --client and --train (see --help)" \
    "$MESS" plan --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs"
says_codes 2 "plan: a seed with a client" "--seed-env / --seed-file go with --train; a client state has its own keys" \
    "$MESS" plan --client "$C" --seed-env SEEDX --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs"
says_codes 2 "plan: a parameter with a client" "--bits goes with --train; a client state has its own parameters" \
    "$MESS" plan --client "$C" --bits 256 --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs"
says_codes 2 "plan without --data" "plan needs --data and --queries (see --help)" "$MESS" plan --client "$C"
says_codes "1 2" "plan: -k above the data" "-k 100 exceeds the 50 data vectors" \
    "$MESS" plan --client "$C" --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs" -k 100
says_codes "1 2" "plan: queries of another dimension" "--data has dimension 128 and --queries 2; the client expects 128" \
    "$MESS" plan --client "$C" --data "$tmp/b50.bvecs" --queries "$tmp/d2.fvecs"
says_codes "1 2" "plan: a missing --gt" "$tmp/none.ivecs: No such file or directory" \
    "$MESS" plan --client "$C" --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs" --gt "$tmp/none.ivecs"
# ground truth: 3 rows of 10 ids, then one naming item 50 (outside 50 rows)
awk 'BEGIN { for (r = 0; r < 3; r++) { printf "%c%c%c%c", 10, 0, 0, 0; for (i = 0; i < 10; i++) printf "%c%c%c%c", i + (r == 2 && i == 9 ? 41 : 0), 0, 0, 0 } }' >"$tmp/gt.ivecs"
head -c $((44 * 2)) "$tmp/gt.ivecs" >"$tmp/gt2.ivecs"
says_codes "1 2" "plan: ground truth rows" "'$tmp/gt2.ivecs' has 2 rows of 10 ids; need 3 rows of at least 10" \
    "$MESS" plan --client "$C" --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs" --gt "$tmp/gt2.ivecs"
says_codes "1 2" "plan: ground truth outside --data" "'$tmp/gt.ivecs' row 2 names item 50, outside --data" \
    "$MESS" plan --client "$C" --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs" --gt "$tmp/gt.ivecs"

# mess insert / query / info
says_codes "1 2" "insert of another dimension" "'$tmp/d2.fvecs' has dimension 2, the index expects 128" \
    "$MESS" insert --client "$C" --server "$S" "$tmp/d2.fvecs"
"$MESS" init --client "$tmp/c4" --server "$tmp/s4" --train "$tmp/train.bvecs" --shards 4 --per-item 1 \
    >/dev/null 2>&1 || bad "init of a 4-shard client"
says_codes "1 2" "a server of other parameters" "server state '$S' was made for other parameters than client '$tmp/c4'" \
    "$MESS" query --client "$tmp/c4" --server "$S" --pool 8 "$tmp/q3.bvecs"
# --pool's real range is 1 .. 65535 x the client's M (issue 29: 67107840,
# 65535 x 1024, was advertised, then failed as "size limit exceeded")
says_codes 2 "--pool above 65535 x M" \
    "--pool: expected an integer in [1, 131070] for this client (2 shards, at most 65535 candidates each), got 67107840" \
    "$MESS" query --client "$C" --server "$S" --pool 67107840 "$tmp/q3.bvecs"
"$MESS" query --client "$C" --server "$S" --pool 131070 -k 10 "$tmp/q3.bvecs" >"$tmp/out" 2>"$tmp/err" &&
    grep -q '"pool":131070' "$tmp/out" && ok "--pool 65535 x M accepted" ||
    bad "--pool 131070: $(cat "$tmp/err")"
grep -q "warning" "$tmp/err" && bad "a warning with k below the pool: $(cat "$tmp/err")" ||
    ok "no warning with -k below --pool"
# k above the pool: at most B results, said on stderr (it used to be silent)
"$MESS" query --client "$C" --server "$S" --pool 4 -k 10 "$tmp/q3.bvecs" >"$tmp/out" 2>"$tmp/err" &&
    grep -qxF "mess: warning: -k 10 is larger than --pool 4: a query returns at most 4 results (the pool bounds its candidates)" "$tmp/err" &&
    grep -q '^{' "$tmp/out" && ok "-k above --pool: warned, and the query runs" ||
    bad "-k 10 --pool 4: $(cat "$tmp/err")"
# training vectors whose norms spread (issue 29: l2 on unnormalised
# embeddings): a hint naming the spread, by metric; none for SIFT's equal
# norms or for ip.  300 SIFT rows, row i scaled by 1 + i mod 4.
/usr/bin/python3 - "$tmp/train.bvecs" "$tmp/spread.fvecs" <<'PY'
import struct, sys
raw = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    for i in range(len(raw) // 132):
        row = raw[i * 132 + 4:(i + 1) * 132]
        f.write(struct.pack("<i", 128) + struct.pack("<128f", *[(1 + i % 4) * b for b in row]))
PY
hint() { # METRIC FILE: init's stderr into $tmp/err
    "$MESS" init --client "$tmp/h$1$2" --server "$tmp/hs$1$2" --train "$tmp/$2" --metric "$1" \
        --shards 2 --per-item 1 --bits 64 >/dev/null 2>"$tmp/err"
}
hint l2 spread.fvecs
grep -q "^mess: hint: $tmp/spread.fvecs: the training vectors' norms spread (95th / 5th percentile 4\.0[0-9]); under --metric l2 a vector's length counts as much as its direction" "$tmp/err" &&
    ok "hint: l2 on vectors whose norms spread" || bad "no l2 hint: $(cat "$tmp/err")"
hint cos spread.fvecs
grep -q "^mess: hint: $tmp/spread.fvecs: the training vectors' norms spread (95th / 5th percentile 4\.0[0-9]); the codes are made from the vectors as given" "$tmp/err" &&
    ok "hint: cos on vectors whose norms spread" || bad "no cos hint: $(cat "$tmp/err")"
hint ip spread.fvecs
grep -q "hint" "$tmp/err" && bad "a hint for ip: $(cat "$tmp/err")" || ok "no hint for ip"
hint l2 train.bvecs
grep -q "hint" "$tmp/err" && bad "a hint for SIFT's equal norms: $(cat "$tmp/err")" ||
    ok "no hint for equal norms"
SEALP=a-passphrase "$MESS" init --client "$tmp/cs" --server "$tmp/ss" --train "$tmp/train.bvecs" --shards 2 \
    --per-item 1 --passphrase-env SEALP >/dev/null 2>&1 || bad "init of a sealed client"
says_codes 1 "info of a sealed client without its passphrase" \
    "$tmp/cs: the client file is sealed: give its passphrase (--passphrase-env V) to see its mode" \
    "$MESS" info --client "$tmp/cs"
printf 'MESSSTAT' >"$tmp/short.mess"
says_codes 1 "info of a truncated client file" "$tmp/short.mess: " "$MESS" info --client "$tmp/short.mess"
grep -Fq "(cannot read client state)" "$tmp/err" && ok "the truncated file's refusal says what failed" ||
    bad "truncated client file: $(cat "$tmp/err")"

# malformed id files, a too-wide code for the conditional model
printf '\001\000\000\000\001\000' >"$tmp/bad.ivecs"
printf '\001\000\000\000\001\000' >"$tmp/bad.u64vecs"
says_codes 1 "query: malformed .ivecs --gt" \
    "$tmp/bad.ivecs: not a valid .ivecs file for --gt: malformed or truncated (every record: int32 dim, then dim int32)" \
    "$MESS" query --client "$C" --server "$S" --pool 8 --gt "$tmp/bad.ivecs" "$tmp/q3.bvecs"
says_codes 1 "query: malformed .u64vecs --gt" \
    "$tmp/bad.u64vecs: not a valid .u64vecs file for --gt: malformed or truncated (every record: int32 dim, then dim uint64)" \
    "$MESS" query --client "$C" --server "$S" --pool 8 --gt "$tmp/bad.u64vecs" "$tmp/q3.bvecs"
says_codes "1 2" "plan: malformed --gt" "$tmp/bad.ivecs: malformed, truncated or corrupted input (--gt)" \
    "$MESS" plan --client "$C" --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs" --gt "$tmp/bad.ivecs"
says_codes 2 "plan: conditional model above 1024 bits" "--model conditional needs kappa <= 1024 (use --model paper)" \
    "$MESS" plan --train "$tmp/train.bvecs" --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs" \
    --shards 2 --per-item 1 --bits 1088 --model conditional

# mess bench on a small data directory: dimensions, ground truth, limits
dd=$tmp/dd
mkdir -p "$dd"
cp "$tmp/b50.bvecs" "$dd/base.bvecs"
cp "$tmp/q3.bvecs" "$dd/query.bvecs"
cp "$tmp/d2.fvecs" "$dd/learn.fvecs"
says_codes 1 "bench encode: dimensions differ" "$dd: base, query and learn dimensions differ" \
    "$MESS" bench encode --data "$dd"
rm "$dd/learn.fvecs"
cp "$tmp/train.bvecs" "$dd/learn.bvecs"
printf 'xx' >"$dd/groundtruth.ivecs"
says_codes 1 "bench protocol: malformed ground truth" "$dd/groundtruth.ivecs: malformed, truncated or corrupted input (cannot read)" \
    "$MESS" bench protocol --data "$dd"
# 3 queries of 5 ids: too few for recall@10
awk 'BEGIN { for (r = 0; r < 3; r++) { printf "%c%c%c%c", 5, 0, 0, 0; for (i = 0; i < 5; i++) printf "%c%c%c%c", i, 0, 0, 0 } }' >"$dd/groundtruth.ivecs"
says_codes 1 "bench encode: short ground truth" "$dd/groundtruth.ivecs: want >= 10 ids for each of the 3 queries" \
    "$MESS" bench encode --data "$dd" --quality
says_codes 1 "bench protocol: short ground truth" "'$dd': inconsistent dimensions or ground truth" \
    "$MESS" bench protocol --data "$dd"

# recall@10 ground truth naming item 50 of 50 base vectors
cp "$tmp/gt.ivecs" "$dd/groundtruth.ivecs"
says_codes 1 "bench encode: ground truth outside the base" "groundtruth.ivecs row 2 names item 50, outside the 50 base vectors" \
    "$MESS" bench encode --data "$dd" --quality --seeds 1

says_codes 2 "bench hnsw: unknown --popcount" "--popcount: auto, hw or soft, not 'fast'" \
    "$MESS" bench hnsw --popcount fast

# mess plan --target-recall (the configuration search)
says_codes 2 "plan --target-recall: bad --pools" "--pools: expected a comma list of pools B >= 1" \
    "$MESS" plan --target-recall 0.9 --train "$tmp/train.bvecs" --data "$tmp/b50.bvecs" --queries "$tmp/q3.bvecs" --pools x
says_codes 1 "plan --target-recall: dimensions differ" "--train has dimension 128, --data 128 and --queries 2: they must agree" \
    "$MESS" plan --target-recall 0.9 --train "$tmp/train.bvecs" --data "$tmp/b50.bvecs" --queries "$tmp/d2.fvecs"

mkdir -p "$tmp/empty"
says_codes 1 "bench batch: an empty data directory" "$tmp/empty: cannot read base, learn and query vectors of one dimension" \
    "$MESS" bench batch --data "$tmp/empty"

finish
