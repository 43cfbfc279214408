#!/bin/sh
# tests/cli_bench_encode.sh - `mess bench encode`: a small real run on the
# bundled SIFT set ends with its JSON line, and bad options are refused.
# Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh
run() { "$MESS" bench encode "$@" >"$tmp/out" 2>"$tmp/err"; }

if run --shards 1 --kappa 64 --codes 1000 && [ "$(json bench)" = '"encode"' ] &&
    positive "$(json hash_all_loop_vps)" && positive "$(json hash_all_sgemv_vps)" &&
    positive "$(json hash_bulk_loop_vps)" && positive "$(json hash_bulk_sgemm_vps)" &&
    positive "$(json bitsliced_bps)" && [ "$(json kappa)" = 64 ]; then
    ok "throughput run ends with its JSON line"
else
    bad "throughput run"
    cat "$tmp/out" "$tmp/err"
fi

for args in "--kappa 100" "--p 0.7" "--codes 10" "--quality --lp" "--bogus" \
    "--shards 0"; do
    # shellcheck disable=SC2086
    refuse 2 "$args" "$MESS" bench encode $args
done

run --data "$tmp/none"
if [ $? -eq 1 ] && grep -q "base" "$tmp/err"; then
    ok "missing data directory is an error"
else
    bad "missing data directory"
fi

finish
