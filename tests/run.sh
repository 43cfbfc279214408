#!/bin/sh
# tests/run.sh TEST... - runs each test program (built from tests/test_*.c)
# and each shell script (tests/cli_*.sh), adds up their "N passed, N failed"
# lines, and prints the total as the last line.
# Exits non-zero if any test failed or any program ended without a summary
# (a crash counts as a failure).
set -u
passed=0
failed=0
for t in "$@"; do
    name=$(basename "$t")
    case "$t" in
    *.sh) out=$(sh "$t" 2>&1) ;;
    *) out=$("$t" 2>&1) ;;
    esac
    rc=$?
    summary=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s\n' "$summary" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1/p')
    f=$(printf '%s\n' "$summary" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\2/p')
    if [ -z "$p" ]; then
        printf '%s\n' "$out"
        echo "not ok - $name exited $rc without a summary (crash?)"
        failed=$((failed + 1))
        continue
    fi
    if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
        printf '%s\n' "$out"
        [ "$f" -eq 0 ] && f=1
    fi
    # a skipped check says so even when the test passed
    printf '%s\n' "$out" | grep -E '^(skip|[0-9]+ skipped)' || true
    echo "$name: $p passed, $f failed"
    passed=$((passed + p))
    failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
