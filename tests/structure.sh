#!/bin/sh
# tests/structure.sh - the library's structure (docs/ARCHITECTURE.md,
# "Components"): no call cycle among the library's files (measured from
# the objects by scripts/structure.py), the server and store never include
# the client's internal header (they never see its keys), the client never
# includes the server's or the store's, cli/ uses only the public headers,
# at most 16 .c/.h files at the root, no library .c over 1,500 lines, and
# docs/ARCHITECTURE.md names every library .c.
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
[ -f build/libmess.a ] || make -s --no-print-directory build/libmess.a >/dev/null 2>&1

if ${PYTHON:-/usr/bin/python3} scripts/structure.py --objects build/rel >"$tmp/cycles" 2>&1; then
    ok "no call cycle among the library's files ($(tail -n 1 "$tmp/cycles"))"
else
    bad "call cycles: $(cat "$tmp/cycles")"
fi

# includes "NAME.h" of the files matched by $1
includes() { grep -H '^#include "' $1 2>/dev/null; }
leak=$(includes 'src/server/*.[ch] src/store/*.[ch]' | grep '"client\.h"')
[ -z "$leak" ] && ok "server and store do not include client.h" || bad "client.h included: $leak"
leak=$(includes 'src/client/*.[ch]' | grep -E '"(server|store)\.h"')
[ -z "$leak" ] && ok "client does not include server.h or store.h" || bad "included by the client: $leak"
leak=$(includes 'cli/*.[ch]' | grep -vE '"(\.\./)?(mess|mess_experimental)\.h"|"cli\.h"')
[ -z "$leak" ] && ok "cli/ includes only the public headers" || bad "cli/ includes internal headers: $leak"

n=$(ls *.c *.h | wc -l)
[ "$n" -le 16 ] && ok "$n .c/.h files at the root (at most 16)" || bad "$n .c/.h files at the root: $(ls *.c *.h | tr '\n' ' ')"

big=$(wc -l *.c src/*/*.c | awk '$2 != "total" && $1 > 1500 {print $2 " (" $1 ")"}' | tr '\n' ' ')
[ -z "$big" ] && ok "no library .c over 1,500 lines" || bad "over 1,500 lines: $big"

missing=""
for f in *.c src/*/*.c; do
    grep -q "$(basename "$f")" docs/ARCHITECTURE.md || missing="$missing $f"
done
[ -z "$missing" ] && ok "docs/ARCHITECTURE.md names every library .c" || bad "not in docs/ARCHITECTURE.md:$missing"
finish
