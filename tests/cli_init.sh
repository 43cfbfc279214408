#!/bin/sh
# tests/cli_init.sh - `mess init` never replaces a client file (issue 29
# item 1): a second init with the same --client is refused before the
# training, exit 1, the file's bytes unchanged and its server still
# answering; --force keeps the old file under a name it prints (never
# overwriting an earlier kept copy) and writes a new one.  An init whose
# server cannot be made leaves no client file and puts a kept one back.
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

D=datasets/sift
C="$tmp/c.mess"
head -c $((132 * 100)) $D/base.bvecs >"$tmp/few.bvecs"
small="--train $D/learn.bvecs --shards 2 --per-item 1 --bits 64 --train-sample 500"

# init SERVER [options]: mess init of the small client $C and SERVER
init() {
    $MESS init --client "$C" --server "$@" $small >"$tmp/out" 2>"$tmp/err"
}

if init "$tmp/s1" && $MESS insert --client "$C" --server "$tmp/s1" "$tmp/few.bvecs" \
    >/dev/null 2>>"$tmp/err"; then
    ok "init and insert"
else
    bad "init and insert: $(cat "$tmp/err")"
fi
sum=$(cksum <"$C")

# the same --client again, another server: refused, nothing changed
init "$tmp/s2"
rc=$?
if [ $rc = 1 ] && ! grep -q '^{' "$tmp/out" &&
    grep -qxF "mess: $C exists: init never replaces a client file (it may hold the only keys of a server); give another --client, or add --force to keep the old file under a new name and write a new one" "$tmp/err"; then
    ok "second init refused, exit 1, the message names the file"
else
    bad "second init: exit $rc, stdout $(head -c 200 "$tmp/out"), stderr $(cat "$tmp/err")"
fi
[ "$(cksum <"$C")" = "$sum" ] && ok "client file bytes unchanged" || bad "client file changed"
[ ! -e "$tmp/s2" ] && ok "refused before the server was made" || bad "$tmp/s2 was created"
if $MESS query --client "$C" --server "$tmp/s1" "$tmp/few.bvecs" -k 1 --pool 8 \
    >"$tmp/q" 2>"$tmp/err" && grep -q '"auth_failures":0' "$tmp/q"; then
    ok "the first server still answers with the kept keys"
else
    bad "query after the refusal: $(cat "$tmp/err")"
fi

# a symlink at C, even dangling: refused, its target not created
ln -s "$tmp/elsewhere" "$tmp/link.mess"
$MESS init --client "$tmp/link.mess" --server "$tmp/s3" $small >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -q "^mess: $tmp/link.mess exists: init never replaces" "$tmp/err" &&
    [ ! -e "$tmp/elsewhere" ] && [ -L "$tmp/link.mess" ]; then
    ok "a dangling symlink at --client refused, not followed"
else
    bad "dangling symlink: exit $rc, $(cat "$tmp/err")"
fi

# --force: the old file is kept under the printed name, a new one written
init "$tmp/s2" --force
rc=$?
kept=$(sed -n "s|^mess: $C existed: kept as \(.*\) (--force)\$|\1|p" "$tmp/err")
if [ $rc = 0 ] && [ -n "$kept" ] && grep -q '^{' "$tmp/out"; then
    ok "--force: init succeeds and prints the kept name ($(basename "$kept"))"
else
    bad "--force: exit $rc, $(cat "$tmp/err")"
fi
case $(basename "$kept") in
c.mess.replaced-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9]*)
    ok "kept as C.replaced-YYYYmmddTHHMMSS" ;;
*) bad "kept name '$kept'" ;;
esac
[ -f "$kept" ] && [ "$(cksum <"$kept")" = "$sum" ] && ok "the kept file is the old one, byte for byte" ||
    bad "kept file missing or changed"
[ "$(cksum <"$C")" != "$sum" ] && ok "a new client file at C" || bad "C not replaced under --force"
if $MESS query --client "$kept" --server "$tmp/s1" "$tmp/few.bvecs" -k 1 --pool 8 \
    >/dev/null 2>"$tmp/err"; then
    ok "the kept file still opens its server"
else
    bad "kept file with s1: $(cat "$tmp/err")"
fi
# a second --force (likely the same second): another name, the first
# kept copy untouched
sum2=$(cksum <"$C")
rm -rf "$tmp/s2"
init "$tmp/s2" --force
kept2=$(sed -n "s|^mess: $C existed: kept as \(.*\) (--force)\$|\1|p" "$tmp/err")
if [ -n "$kept2" ] && [ "$kept2" != "$kept" ] && [ "$(cksum <"$kept")" = "$sum" ] &&
    [ "$(cksum <"$kept2")" = "$sum2" ]; then
    ok "a second --force keeps another copy ($(basename "$kept2")), the first intact"
else
    bad "second --force: '$kept' '$kept2' $(cat "$tmp/err")"
fi
# --force with nothing at C: nothing to keep, nothing said
refuse 1 "--force on a directory at --client" \
    $MESS init --client "$tmp" --server "$tmp/s4" --force $small
grep -q "is a directory: --force keeps an existing client file" "$tmp/err" &&
    ok "the directory message" || bad "directory: $(cat "$tmp/err")"
$MESS init --client "$tmp/fresh.mess" --server "$tmp/s5" --force $small >/dev/null 2>"$tmp/err"
if [ $? = 0 ] && ! grep -q "existed" "$tmp/err" && ! ls "$tmp" | grep -q "fresh.mess.replaced"; then
    ok "--force with no file: nothing kept, nothing said"
else
    bad "--force on a new path: $(cat "$tmp/err")"
fi

# an init whose server cannot be made (a mistyped --server) changes
# nothing: before, it left a new client file (which the next init then
# refused), and with --force the old one moved aside for the new one
says "init into a missing parent" "cannot create server directory '$tmp/no/s'" \
    $MESS init --client "$tmp/typo.mess" --server "$tmp/no/s" $small
[ ! -e "$tmp/typo.mess" ] && grep -qF "$tmp/typo.mess: the new client file is removed" "$tmp/err" &&
    ok "no client file left, and said" || bad "typo.mess left: $(cat "$tmp/err")"
cp "$tmp/fresh.mess" "$tmp/fresh.before"
says "--force into a missing parent" "cannot create server directory '$tmp/no/s'" \
    $MESS init --client "$tmp/fresh.mess" --server "$tmp/no/s" --force $small
cmp -s "$tmp/fresh.mess" "$tmp/fresh.before" && ! ls "$tmp" | grep -q "fresh.mess.replaced" &&
    grep -qF "$tmp/fresh.mess: the old client file is back" "$tmp/err" &&
    ok "--force: the old client file is back, no copy left" ||
    bad "--force into a missing parent: $(ls "$tmp" | grep fresh) $(cat "$tmp/err")"

# byte data: a .bvecs --train chooses u8 payloads (one byte a component)
# unless --payload names one; a vector that is not bytes is then refused
# with its row and component
$MESS init --client "$tmp/u8.mess" --server "$tmp/u8" $small >"$tmp/out" 2>"$tmp/err"
if [ $? = 0 ] && grep -q '"payload":"u8","payload_bytes":152,' "$tmp/out" &&
    $MESS info --server "$tmp/u8" | grep -q '"payload":"u8","payload_bytes":152'; then
    ok "a .bvecs --train chooses u8 payloads (152-byte entries at 128 dims, f32 536)"
else
    bad "u8 by default: $(cat "$tmp/out" "$tmp/err")"
fi
# mess info: the bytes a query moves at pool B, per encoding (entry: 24
# bytes of SIV and id plus the vector), for the client and the server
for who in "--server $tmp/u8" "--client $tmp/u8.mess"; do
    # shellcheck disable=SC2086
    a=$($MESS info $who --pool 100 | sed -n 's/.*"u8":{"entry_bytes":152,"bytes_per_query":\([0-9]*\)}}}$/\1/p')
    # shellcheck disable=SC2086
    b=$($MESS info $who | sed -n 's/.*"pool":1500,"request_bytes":[0-9]*,"bytes_per_query":\([0-9]*\),"encodings":{"f32":{"entry_bytes":536,.*"f16":{"entry_bytes":280,.*"i8":{"entry_bytes":160,.*"u8":{"entry_bytes":152,"bytes_per_query":\1}}}$/\1/p')
    if [ -n "$a" ] && [ -n "$b" ] && [ $((b - a)) = $((1400 * 152)) ]; then
        ok "info $(echo "$who" | cut -d' ' -f1): $b bytes per query at pool 1500, $a at --pool 100"
    else
        bad "info $who: '$a' '$b' $($MESS info $who)"
    fi
done
$MESS init --client "$tmp/f32.mess" --server "$tmp/f32" $small --payload f32 >"$tmp/out" 2>"$tmp/err"
grep -q '"payload":"f32","payload_bytes":536,' "$tmp/out" &&
    ok "--payload f32 is kept for .bvecs" || bad "--payload f32: $(cat "$tmp/out" "$tmp/err")"
/usr/bin/python3 -c '
import struct, sys
with open(sys.argv[1], "wb") as f:
    for r in range(3):
        v = [float(r + i) for i in range(128)]
        if r == 2:
            v[7] = 3.25
        f.write(struct.pack("<i128f", 128, *v))
' "$tmp/frac.fvecs"
refuse 1 "a non-byte vector into a u8 index" \
    $MESS insert --client "$tmp/u8.mess" --server "$tmp/u8" "$tmp/frac.fvecs"
grep -qF "mess: '$tmp/frac.fvecs' row 2: component 7 is 3.25; the index stores u8 payloads, which hold integers in [0, 255] only (init with --payload f32, f16 or i8 for other data)" "$tmp/err" &&
    ok "the refusal names row and component" || bad "u8 refusal: $(cat "$tmp/err")"
$MESS info --server "$tmp/u8" | grep -q '"entries":0,' &&
    ok "nothing of the refused file stored" || bad "entries after the refusal"
finish
