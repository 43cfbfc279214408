#!/bin/sh
# tests/cli_bench_protocol.sh - `mess bench protocol` on a slice of the
# bundled SIFT set (1000 base vectors, 10 queries, exact ground truth made
# here): the report ends with one JSON object with the curve, the timing
# and the bytes, and bad options are refused.  Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
PYTHON=${PYTHON:-/usr/bin/python3}
. tests/shlib.sh

D=datasets/sift
head -c $((132 * 1000)) $D/base.bvecs >"$tmp/base.bvecs"
head -c $((132 * 10)) $D/query.bvecs >"$tmp/query.bvecs"
cp $D/learn.bvecs "$tmp/learn.bvecs"
"$PYTHON" - "$tmp" <<'PY'
import sys, numpy as np
d = sys.argv[1]
def rd(p):
    r = np.fromfile(p, dtype=np.uint8).reshape(-1, 132)
    return r[:, 4:].astype(np.float64)
b, q = rd(d + "/base.bvecs"), rd(d + "/query.bvecs")
dist = ((q[:, None, :] - b[None, :, :]) ** 2).sum(-1)
gt = np.argsort(dist, axis=1, kind="stable")[:, :10].astype(np.int32)
out = np.hstack([np.full((len(q), 1), 10, np.int32), gt])
out.tofile(d + "/groundtruth.ivecs")
PY

if "$MESS" bench protocol --data "$tmp" --configs nonoise --payloads f32,i8 --shards 8 --per-item 2 \
    --pools 20,100 --timing-pool 100 --no-hnswlib >"$tmp/out" 2>"$tmp/err"; then
    last=$(tail -n 1 "$tmp/out")
    case "$last" in
    '{"bench":"protocol"'*'"config":"nonoise","payload":"f32"'*'"recall":{"20":'*'"server_ms_per_query":'*'"client_ms_per_query":'*'"payload":"i8"'*'}') ok "report ends with its JSON object" ;;
    *) bad "JSON line: $last" ;;
    esac
    # at pool 100 of 1000 items with no noise the exact top 10 is found
    r=$(printf '%s\n' "$last" | sed -n 's/.*"payload":"f32"[^]]*"recall":{"20":[0-9.]*,"100":\([0-9.]*\)}.*/\1/p')
    if awk -v r="$r" 'BEGIN { exit !(r + 0 >= 0.9 && r + 0 <= 1) }'; then
        ok "No-Noise recall at B=100: $r"
    else
        bad "No-Noise recall at B=100: '$r'"
    fi
    # exact bytes: 200-byte request (M = 8, with its 16-byte owner tag), 56
    # bytes of response framing,
    # 536-byte f32 entries, 160-byte i8 ones
    if printf '%s\n' "$last" | grep -q '"payload":"f32"[^]]*"bytes_per_query":{"20":[0-9]*,"100":53856}' &&
        printf '%s\n' "$last" | grep -q '"payload":"i8"[^]]*"bytes_per_query":{"20":[0-9]*,"100":16256}'; then
        ok "bytes per query"
    else
        bad "bytes per query in: $last"
    fi
    # the verify-all baseline ran on the same responses (the bench fails
    # if it ever ranks differently from the default)
    if printf '%s\n' "$last" | grep -q '"client_finish_ms":[0-9.]*,.*"client_finish_verify_all_ms":[0-9.]*'; then
        ok "finish timed against its verify-all baseline"
    else
        bad "no verify-all timing in: $last"
    fi
    # and the per-entry libsodium path (the finish before the lane core)
    if printf '%s\n' "$last" | grep -q '"client_finish_per_entry_ms":[0-9.]*[1-9]'; then
        ok "finish timed against the per-entry path"
    else
        bad "no per-entry timing in: $last"
    fi
else
    bad "bench protocol run failed"
    cat "$tmp/err"
fi

# tiny pools with 64 shards run: there the request (1,208 bytes) is larger
# than the response, and the bench's per-query slot holds both in turn
if "$MESS" bench protocol --data "$tmp" --configs nonoise --payloads i8 --shards 64 --per-item 2 \
    --pools 1 --timing-pool 1 --queries 3 --no-hnswlib >"$tmp/out" 2>"$tmp/err"; then
    ok "pool 1 with 64 shards"
else
    bad "pool 1 with 64 shards: $(cat "$tmp/err")"
fi

for bad_opt in "--pools 0" "--configs nope" "--payloads f64" "--data /nonexistent"; do
    # shellcheck disable=SC2086
    refuse "1 2" "$bad_opt" "$MESS" bench protocol $bad_opt --no-hnswlib
done

finish
