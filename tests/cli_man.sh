#!/bin/sh
# tests/cli_man.sh - mess(1) is generated from the tool's help texts
# (scripts/manpage.sh): it renders without a groff warning, has a section
# for every command `mess --help` lists (and every `mess account`
# accountant), and every option of every help text is in it.  `mess bench`
# has a paragraph saying where the benchmarks are (they are not installed
# with the tool and the page), whatever build/mess-bench holds.
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
MESS=${MESS:-build/mess}
page="$tmp/mess.1"

if sh scripts/manpage.sh "$MESS" >"$page" 2>"$tmp/err" && [ -s "$page" ]; then
    ok "scripts/manpage.sh generates the page"
else
    bad "scripts/manpage.sh: $(cat "$tmp/err")"
fi
[ -f build/mess.1 ] && cmp -s "$page" build/mess.1 &&
    ok "build/mess.1 is the page of this build/mess" || bad "build/mess.1 missing or stale"
if command -v groff >/dev/null 2>&1; then
    groff -man -Tutf8 -ww -z "$page" >"$tmp/warn" 2>&1
    [ ! -s "$tmp/warn" ] && ok "groff -ww: no warnings" || bad "groff warns: $(head -c 300 "$tmp/warn")"
else
    echo "skip - groff not installed"
fi
grep -q '^\.TH MESS 1 .*libmess '"$("$MESS" version | sed 's/^mess //')" "$page" &&
    ok ".TH names the version" || bad ".TH line: $(grep '^\.TH' "$page")"

# every command and accountant has its section; every option is there
names() { sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p'; }
missing=""
for cmd in $("$MESS" --help | names); do
    [ "$cmd" = version ] && { grep -q '^\.SS "mess version"' "$page" || missing="$missing version"; continue; }
    [ "$cmd" = bench ] && { grep -q '^\.SS "mess bench"' "$page" || missing="$missing bench"; continue; }
    grep -q "^\\.SS \"mess $cmd\"" "$page" || missing="$missing $cmd"
    helps="$cmd"
    case "$cmd" in account)
        for w in $("$MESS" "$cmd" --help | names); do
            grep -q "^\\.SS \"mess $cmd $w\"" "$page" || missing="$missing $cmd-$w"
            helps="$helps $cmd:$w"
        done ;;
    esac
    for h in $helps; do
        # shellcheck disable=SC2046
        for opt in $("$MESS" $(echo "$h" | tr : ' ') --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
            esc=$(printf '%s' "$opt" | sed 's/-/\\\\-/g')
            grep -q -- "$esc" "$page" || missing="$missing $h$opt"
        done
    done
done
[ -z "$missing" ] && ok "every command, accountant and option is in the page" ||
    bad "not in the page:$missing"
grep -q '^The benchmarks are not installed' "$page" &&
    ok "mess bench: the page says the benchmarks are not installed" || bad "mess bench paragraph"
n=$(grep -c '^\.SS' "$page")
[ "$n" -ge 15 ] && ok "$n command sections" || bad "only $n command sections"
finish
