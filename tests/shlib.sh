# tests/shlib.sh - sourced by every tests/cli_*.sh (run from the repository
# root): a scratch directory $tmp removed on exit, the ok / bad counters,
# and finish, which prints the closing "N passed, N failed" line and
# returns non-zero when a check failed.
pass=0
fail=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
