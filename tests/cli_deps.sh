#!/bin/sh
# tests/cli_deps.sh - scripts/deps.sh (run first by make check) never runs
# apt-get silently: as root its first line of output says it is about to,
# and names the packages; MESS_NO_APT=1 or another user only lists them.
# dpkg-query and apt-get are stand-ins on PATH (nothing is installed).
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
mkdir -p "$tmp/bin"
# every package "not installed"; apt-get logs its call after the output so far
printf '#!/bin/sh\nexit 1\n' >"$tmp/bin/dpkg-query"
printf '#!/bin/sh\necho "apt-get $*" >>"%s/apt.log"\necho "APT RAN"\n' "$tmp" >"$tmp/bin/apt-get"
chmod +x "$tmp/bin/dpkg-query" "$tmp/bin/apt-get"
run() { env PATH="$tmp/bin:$PATH" "$@" sh scripts/deps.sh build >"$tmp/out" 2>&1; }

if [ "$(id -u)" -eq 0 ]; then
    run env -u MESS_NO_APT
    first=$(head -n 1 "$tmp/out")
    case "$first" in
    "deps: running apt-get (as root) to install missing Debian packages: build-essential"*"(MESS_NO_APT=1 to only list them)")
        ok "the first line says apt-get will run, with the packages" ;;
    *) bad "first line: $first" ;;
    esac
    grep -q 'install -y' "$tmp/apt.log" 2>/dev/null && ok "then apt-get install runs" ||
        bad "apt-get was not called"
    rm -f "$tmp/apt.log"
    if run env MESS_NO_APT=1; then bad "MESS_NO_APT=1: exit 0 with packages missing"; else
        ok "MESS_NO_APT=1: fails"; fi
    [ ! -e "$tmp/apt.log" ] && ok "MESS_NO_APT=1: apt-get not run" || bad "MESS_NO_APT=1 ran apt-get"
    grep -q 'sudo apt-get install build-essential' "$tmp/out" &&
        ok "MESS_NO_APT=1: prints the command" || bad "MESS_NO_APT=1 output: $(cat "$tmp/out")"
else
    echo "skip - not root: deps.sh only lists packages here"
    run env
    [ ! -e "$tmp/apt.log" ] && ok "not root: apt-get not run" || bad "not root: apt-get ran"
fi
finish
