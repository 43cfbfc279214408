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

    # issue 13 item 7: the client and server files on a read-only file
    # system (root: a private read-only tmpfs; otherwise a directory without
    # write permission).  A production client is not written, so its query
    # just works; a deterministic client must be saved, so it is refused
    # before any request, with no --out file.
    ro=$tmp/ro-$mode
    mkdir -p "$ro"
    cp -r "$c" "$s" "$ro/"
    if [ "$(id -u)" = 0 ]; then
        # shellcheck disable=SC2016
        unshare -m sh -c 'mount -t tmpfs tmpfs "$1" && cp -r "$2" "$3" "$1/" &&
            mount -o remount,ro "$1" && shift 3 && exec "$@"' sh \
            "$ro" "$c" "$s" "$MESS" query --client "$ro/${c##*/}" --server "$ro/${s##*/}" \
            --pool 40 --out "$tmp/ro-$mode.ivecs" "$tmp/q.bvecs" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        reason="Read-only file system"
    else
        chmod 555 "$ro"
        "$MESS" query --client "$ro/${c##*/}" --server "$ro/${s##*/}" \
            --pool 40 --out "$tmp/ro-$mode.ivecs" "$tmp/q.bvecs" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        chmod 755 "$ro"
        reason="Permission denied"
    fi
    if [ $mode = production ]; then
        if [ $rc = 0 ] && grep -q '^{"queries":5,' "$tmp/out" && [ -s "$tmp/ro-$mode.ivecs" ]; then
            ok "$mode: read-only client file: the query runs and writes --out"
        else
            bad "$mode: read-only client file: exit $rc, $(head -c 300 "$tmp/err")"
        fi
    else
        if [ $rc = 1 ] && ! grep -q '^{' "$tmp/out" && [ ! -e "$tmp/ro-$mode.ivecs" ] &&
            grep -q "^mess: $ro: $reason\$" "$tmp/err" &&
            grep -q "^mess: $ro/${c##*/}: a deterministic (--seed) client is saved after its queries .*refused before running any" "$tmp/err"; then
            ok "$mode: read-only client file refused up front (no --out, the reason and the path)"
        else
            bad "$mode: read-only client file: exit $rc, out: $(head -c 100 "$tmp/out"), --out written: $([ -e "$tmp/ro-$mode.ivecs" ] && echo yes || echo no), err: $(head -c 300 "$tmp/err")"
        fi
    fi
done
finish
