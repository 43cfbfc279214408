#!/bin/sh
# tests/valgrind.sh TEST... - runs each test program under valgrind memcheck
# and adds up the "N passed, N failed" lines like tests/run.sh.  A program
# with any memcheck error (invalid read or write, use of uninitialised
# memory, a definitely or indirectly lost block) counts as one more failure;
# its valgrind log is printed.
set -u
VALGRIND=${VALGRIND:-valgrind}
passed=0
failed=0
log=${TMPDIR:-/tmp}/mess-valgrind.$$
for t in "$@"; do
    name=$(basename "$t")
    out=$($VALGRIND --quiet --error-exitcode=99 --leak-check=full \
        --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect --log-file="$log.%p" "$t" 2>/dev/null)
    rc=$?
    summary=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s\n' "$summary" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1/p')
    f=$(printf '%s\n' "$summary" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\2/p')
    errs=$(cat "$log".* 2>/dev/null | grep -c '^==[0-9]*== [A-Z]')
    if [ -z "$p" ]; then
        p=0
        f=1
    fi
    if [ "$rc" -ne 0 ] || [ "$errs" -ne 0 ]; then
        cat "$log".* 2>/dev/null | head -n 80
        [ "$f" -eq 0 ] && f=1
    fi
    rm -f "$log".*
    echo "$name (valgrind): $p passed, $f failed, $errs memcheck reports"
    passed=$((passed + p))
    failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
