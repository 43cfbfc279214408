#!/bin/sh
# tests/cli_query_save.sh - when `mess query` writes the client file (issue
# 12 item 2, D3): never for a production client (its permanent reports are
# a PRF of the query, nothing to remember), and for a deterministic client
# on every exit after a request, the failing ones included (its operation
# counter must not repeat coin streams).
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

D=datasets/sift
head -c $((132 * 600)) $D/base.bvecs >"$tmp/base.bvecs"
head -c $((132 * 5)) $D/query.bvecs >"$tmp/q.bvecs"
MESS_TEST_SEED=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export MESS_TEST_SEED

same() { cmp -s "$1" "$2"; }

for mode in production deterministic; do
    c=$tmp/$mode.client
    s=$tmp/$mode.server
    if [ $mode = deterministic ]; then seedopt="--seed-env MESS_TEST_SEED"; else seedopt=""; fi
    # shellcheck disable=SC2086
    if ! "$MESS" init --client "$c" --server "$s" --train $D/learn.bvecs --shards 4 \
        --per-item 2 --train-sample 2000 $seedopt >"$tmp/out" 2>"$tmp/err" ||
        ! "$MESS" insert --client "$c" --server "$s" "$tmp/base.bvecs" >"$tmp/out" 2>"$tmp/err"; then
        bad "$mode: init and insert ($(head -c 200 "$tmp/err"))"
        continue
    fi
    cp "$c" "$tmp/before"
    if "$MESS" query --client "$c" --server "$s" --pool 40 "$tmp/q.bvecs" >"$tmp/out" 2>"$tmp/err"; then
        ok "$mode: query succeeds"
    else
        bad "$mode: query failed: $(head -c 200 "$tmp/err")"
    fi
    case "$(tail -n 1 "$tmp/out")" in
    *memo*) bad "$mode: the JSON still names the memo cache" ;;
    *) ok "$mode: no memo in the JSON" ;;
    esac
    if [ $mode = production ]; then
        if same "$c" "$tmp/before"; then ok "$mode: client file not written"; else bad "$mode: client file written by a query"; fi
    else
        if same "$c" "$tmp/before"; then bad "$mode: counter not saved after a successful query"; else ok "$mode: client saved after the query"; fi
    fi
    # a failure after the requests went out: the --out file cannot be written
    cp "$c" "$tmp/before"
    refuse "1" "$mode: query whose --out cannot be written" \
        "$MESS" query --client "$c" --server "$s" --pool 40 --out "$tmp/no/such/dir/o.ivecs" "$tmp/q.bvecs"
    if [ $mode = production ]; then
        if same "$c" "$tmp/before"; then ok "$mode: client file not written on failure"; else bad "$mode: client file written by a failed query"; fi
    else
        if same "$c" "$tmp/before"; then bad "$mode: counter not saved after a failed query"; else ok "$mode: client saved after a failed query"; fi
    fi
    # a failure before any request (a query file of another dimension): nothing to save
    head -c $((4 + 64)) "$tmp/q.bvecs" >"$tmp/bad.bvecs"
    printf '\100\000\000\000' | dd of="$tmp/bad.bvecs" bs=1 count=4 conv=notrunc 2>/dev/null
    cp "$c" "$tmp/before"
    refuse "1 2" "$mode: query of the wrong dimension" \
        "$MESS" query --client "$c" --server "$s" --pool 40 "$tmp/bad.bvecs"
    if same "$c" "$tmp/before"; then ok "$mode: no request, client not written"; else bad "$mode: client written without a request"; fi
done
finish
