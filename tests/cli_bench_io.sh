#!/bin/sh
# tests/cli_bench_io.sh - `mess bench io` on a small server directory:
# it runs every mode (new, random, former, ask) at two pools, one and two
# queries in flight, reports bytes read, cold and warm times, the device's
# rate and the first query after a cold open in its JSON line (figures,
# not timings, are checked), and refuses bad options; `mess info
# --memory` reports private against mapped file bytes.
# Last line: "N passed, N failed".
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

if small_server "$tmp/c" "$tmp/s"; then
    ok "a server of 3,000 items"
else
    bad "init or insert failed"
fi
if "$MESS" bench io --server "$tmp/s" --client "$tmp/c" --data datasets/sift --queries 6 \
    --pools 50,200 --threads 1,2 --modes new,random,former,ask --device-reads 64 --first 1 \
    >"$tmp/out" 2>"$tmp/err"; then
    ok "bench io runs"
    [ "$(grep -c '^  [0-9]* *[12] *\(new\|random\|former\|ask\) ' "$tmp/out")" = 16 ] &&
        ok "16 runs reported (2 pools x 2 threads x 4 modes)" ||
        bad "runs: $(grep -c '^  [0-9]* *[12] *\(new\|random\|former\|ask\) ' "$tmp/out")"
    for k in cold_p50_ms warm_p50_ms warm_mean_ms first_ms graph_bytes target_bytes rss_bytes; do
        v=$(json $k)
        if positive "$v"; then ok "$k = $v"; else bad "$k: '$v'"; fi
    done
    for k in read_bytes_per_query device_reads_s_qd1 private_bytes file_mapped_bytes; do
        v=$(json $k)
        # zero where the files are cached by a layer the eviction does not
        # reach or refuse O_DIRECT (tmpfs): reported, not required
        if awk -v v="$v" 'BEGIN { exit !(v != "" && v + 0 >= 0) }'; then ok "$k = $v"
        else bad "$k: '$v'"; fi
    done
    grep -q '"mode":"former"' "$tmp/out" && ok "the former policy measured" || bad "no former mode"
else
    bad "bench io failed: $(cat "$tmp/err")"
fi
# mess info --memory: private bytes against mapped file pages
if "$MESS" info --server "$tmp/s" --memory >"$tmp/out" 2>"$tmp/err"; then
    for k in process_private_bytes process_mapped_bytes dir_mapped_bytes; do
        v=$(json $k)
        if positive "$v"; then ok "info --memory: $k = $v"; else bad "info --memory: $k: '$v'"; fi
    done
    [ "$(json entries)" = 6000 ] && ok "info --memory keeps the stats (6,000 entries)" ||
        bad "entries: $(json entries)"
else
    bad "info --memory failed: $(cat "$tmp/err")"
fi
"$MESS" info --server "$tmp/s" >"$tmp/out" 2>&1
grep -q process_private_bytes "$tmp/out" && bad "info without --memory prints memory" ||
    ok "info without --memory: the stats alone"
for args in "--modes new,bogus" "--modes ''" "--threads 17" "--threads 0" "--pools x" \
    "--queries 0" "--first 101" "--bogus"; do
    # shellcheck disable=SC2086
    refuse "1 2" "$args" "$MESS" bench io --server "$tmp/s" --client "$tmp/c" --data datasets/sift $args
done
refuse "2" "no --data" "$MESS" bench io --server "$tmp/s"
refuse "1" "no client" "$MESS" bench io --server "$tmp/s" --client "$tmp/none" --data datasets/sift
refuse "1" "no query file" "$MESS" bench io --server "$tmp/s" --client "$tmp/c" --data "$tmp"
refuse "1" "no server" "$MESS" bench io --server "$tmp/none" --client "$tmp/c" --data datasets/sift
finish
