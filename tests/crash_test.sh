#!/bin/sh
# tests/crash_test.sh TEST... - make crash-test: runs each crash test
# program (release build) with its output shown, adds up their "N passed,
# N failed" lines and prints the total as the last line; exits non-zero if
# any failed or ended without a summary.  The environment chooses the
# rounds (MESS_CRASH_ROUNDS) and the seed (MESS_CRASH_SEED).
set -u
passed=0
failed=0
start=$(date +%s)
mkdir -p build
for t in "$@"; do
    name=$(basename "$t")
    log=build/$name.log
    t0=$(date +%s)
    "$t" >"$log" 2>&1
    rc=$?
    cat "$log"
    summary=$(tail -n 1 "$log")
    p=$(printf '%s\n' "$summary" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1/p')
    f=$(printf '%s\n' "$summary" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\2/p')
    if [ -z "$p" ]; then
        echo "not ok - $name exited $rc without a summary (crash?)"
        p=0
        f=1
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
    fi
    echo "$name: $p passed, $f failed in $(($(date +%s) - t0)) s"
    passed=$((passed + p))
    failed=$((failed + f))
done
echo "crash-test: $(($(date +%s) - start)) s in all"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
