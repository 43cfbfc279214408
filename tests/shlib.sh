# tests/shlib.sh - sourced by every tests/cli_*.sh (run from the repository
# root): a scratch directory $tmp removed on exit, the ok / bad counters,
# refuse, check, says, snap, json, positive, small_server, and finish, which
# prints the closing "N passed, N failed" line and returns non-zero when a
# check failed.
pass=0
fail=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# With MESS_MESSAGE_LOG=DIR (make check), $MESS becomes a wrapper that also
# appends what mess writes on stderr to DIR/TEST.log, for tests/msgcov.py
# (every message the tool can print has a test that prints it).
if [ -n "${MESS_MESSAGE_LOG:-}" ] && [ -n "${MESS:-}" ]; then
    mkdir -p "$MESS_MESSAGE_LOG"
    case $MESS in /*) real_mess=$MESS ;; *) real_mess=$(pwd)/$MESS ;; esac
    case $MESS_MESSAGE_LOG in /*) msg_log=$MESS_MESSAGE_LOG ;; *) msg_log=$(pwd)/$MESS_MESSAGE_LOG ;; esac
    msg_log=$msg_log/$(basename "$0" .sh).log
    cat >"$tmp/mess" <<EOF
#!/bin/sh
# another user (a permission test) cannot write here: run unrecorded
( : >>"$msg_log" && : >"$tmp/mess-err.\$\$" ) 2>/dev/null || exec "$real_mess" "\$@"
"$real_mess" "\$@" 2>"$tmp/mess-err.\$\$"
rc=\$?
cat "$tmp/mess-err.\$\$" >&2
cat "$tmp/mess-err.\$\$" >>"$msg_log"
rm -f "$tmp/mess-err.\$\$"
exit \$rc
EOF
    chmod +x "$tmp/mess"
    MESS=$tmp/mess
fi
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }
# refuse CODES NAME COMMAND...: COMMAND exits with one of CODES ("2", or
# "1 2"), says why in a "mess: " line on stderr and prints no JSON result.
refuse() {
    codes=$1
    name=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    case " $codes " in
    *" $rc "*) expected=1 ;;
    *) expected=0 ;;
    esac
    if [ $expected = 1 ] && grep -q '^mess: ' "$tmp/err" && ! grep -q '^{' "$tmp/out"; then
        ok "refused: $name"
    else
        bad "not refused: $name (exit $rc, stderr: $(head -c 200 "$tmp/err"))"
    fi
}
# check NAME COMMAND...: COMMAND succeeds (its stdout in $tmp/out, stderr
# in $tmp/err, shown when it fails).
check() {
    name=$1
    shift
    if "$@" >"$tmp/out" 2>"$tmp/err"; then ok "$name"; else bad "$name (exit $?)"; cat "$tmp/err"; fi
}
# says_codes CODES NAME TEXT COMMAND...: refused (refuse CODES) and stderr
# holds TEXT; says NAME TEXT COMMAND... is the same with exit 1.
says_codes() {
    codes=$1
    name=$2
    text=$3
    shift 3
    refuse "$codes" "$name" "$@"
    if grep -qF -- "$text" "$tmp/err"; then ok "$name: message"; else
        bad "$name: wanted '$text', got: $(cat "$tmp/err")"; fi
}
says() { says_codes 1 "$@"; }
# snap DIR: one line per file of a server directory (name, checksum, size),
# to compare a directory before and after a command.
snap() { (cd "$1" && for f in *; do printf '%s ' "$f"; cksum <"$f"; done); }
# json KEY: the value of KEY in the last line of $tmp/out (the JSON line a
# bench or account command ends its report with).
json() { tail -n 1 "$tmp/out" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
# positive V: V is a number above zero.
positive() { awk -v v="$1" 'BEGIN { exit !(v + 0 > 0) }'; }
# small_server CLIENT SERVER [BITS]: init + insert of the bundled SIFT set's
# first 3,000 base rows (copied to $tmp/base.bvecs): 4 shards, 2 hashes an
# item, BITS-bit codes (64), 1,000 training rows, the key from $seed (set
# and exported here, a fixed one, so that every run builds the same
# directory).  Quiet; fails when init or insert does.
small_server() {
    seed=0101010101010101010101010101010101010101010101010101010101010101
    export seed
    [ -f "$tmp/base.bvecs" ] || head -c $((132 * 3000)) datasets/sift/base.bvecs >"$tmp/base.bvecs"
    "$MESS" init --client "$1" --server "$2" --train datasets/sift/learn.bvecs \
        --shards 4 --per-item 2 --bits "${3:-64}" --train-sample 1000 --seed-env seed >/dev/null 2>&1 &&
        "$MESS" insert --client "$1" --server "$2" "$tmp/base.bvecs" >/dev/null 2>&1
}
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
