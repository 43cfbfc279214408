#!/bin/sh
# tests/abi_exports.sh - what libmess.so exports (docs/ARCHITECTURE.md,
# "API and ABI"): only mess_* functions, each under the symbol version
# MESS_0, exactly the MESS_API declarations of mess.h and
# mess_experimental.h (a function declared without MESS_API is not
# exported; an internal function is never exported), and the soname.
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
so=build/libmess.so
[ -f "$so" ] || make -s --no-print-directory "$so" >/dev/null 2>&1

nm -D --defined-only "$so" > "$tmp/nm" 2>"$tmp/err" || {
    bad "nm -D $so: $(cat "$tmp/err")"; finish; exit 1; }
# "ADDR TYPE NAME[@@VERSION]"
awk '{print $3}' "$tmp/nm" | sed 's/@.*//' | sort -u > "$tmp/names"
n=$(wc -l < "$tmp/names")
others=$(grep -v -e '^mess_' -e '^MESS_0$' "$tmp/names" | head -20 | tr '\n' ' ')
if [ -z "$others" ] && [ "$n" -gt 50 ]; then
    ok "only mess_* (and the MESS_0 node) exported: $n symbols"
else
    bad "exported symbols not named mess_* ($n symbols): $others"
fi
unversioned=$(awk '$3 ~ /^mess_/ && $3 !~ /@@MESS_0$/ {print $3}' "$tmp/nm" | head -5 | tr '\n' ' ')
if [ -z "$unversioned" ] && grep -q ' A MESS_0$' "$tmp/nm"; then
    ok "every function has the symbol version MESS_0"
else
    bad "functions without the version MESS_0: $unversioned"
fi
# the internal modules' functions are not exported (they were before)
for f in parallel_for hnsw_new wire_header isohash_train payload_seal statefile_read; do
    if grep -qx "$f" "$tmp/names"; then bad "internal $f exported"; else ok "internal $f hidden"; fi
done

# exported == declared with MESS_API in the two public headers
cat mess.h mess_experimental.h | tr '\n' ' ' | grep -o 'MESS_API [^(;]*(' |
    sed 's/($//; s/.*[ *]//' | grep '^mess_' | sort -u > "$tmp/declared"
grep '^mess_' "$tmp/names" > "$tmp/exported"
missing=$(comm -23 "$tmp/declared" "$tmp/exported" | tr '\n' ' ')
extra=$(comm -13 "$tmp/declared" "$tmp/exported" | tr '\n' ' ')
if [ -z "$missing" ] && [ -s "$tmp/declared" ]; then
    ok "every MESS_API function exported ($(wc -l < "$tmp/declared"))"
else
    bad "declared MESS_API but not exported: $missing"
fi
if [ -z "$extra" ]; then
    ok "nothing exported that the headers do not declare"
else
    bad "exported but not declared MESS_API: $extra"
fi
# every function declared in a public header carries MESS_API
plain=$(awk 'prev != "MESS_API MESS_NODISCARD" && /^(const |unsigned |int |void |size_t |double |uint32_t |uint64_t )[^(]*mess_[a-z0-9_]*\(/ {print} {prev = $0}' \
        mess.h mess_experimental.h | head -5)
if [ -z "$plain" ]; then
    ok "no public declaration without MESS_API"
else
    bad "declarations without MESS_API: $plain"
fi
soname=$(objdump -p "$so" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libmess.so.0 ] && ok "soname libmess.so.0" || bad "soname is '$soname'"
finish
