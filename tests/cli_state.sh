#!/bin/sh
# tests/cli_state.sh - the `mess` tool and its state files: a file error
# names the path and the operating system's reason ("mess: PATH: reason").
set -u
MESS=${MESS:-build/mess}
. tests/shlib.sh

D=datasets/sift
C="$tmp/client.mess"
S="$tmp/server.mess"
head -c $((132 * 100)) $D/base.bvecs >"$tmp/few.bvecs" # 100 rows: init needs min(bits, dim) + 1 = 65 at 64 bits

if $MESS init --client "$C" --server "$S" --train $D/learn.bvecs --shards 2 \
    --per-item 1 --bits 64 --train-sample 500 >/dev/null 2>"$tmp/err"; then
    ok "init a small client"
else
    bad "init a small client: $(cat "$tmp/err")"
fi

# says NAME EXPECTED COMMAND...: fails, and stderr holds the line EXPECTED
says() {
    name=$1
    want=$2
    shift 2
    if "$@" >/dev/null 2>"$tmp/err"; then
        bad "$name: succeeded"
    elif grep -qxF "$want" "$tmp/err"; then
        ok "$name"
    else
        bad "$name: stderr '$(cat "$tmp/err")', want '$want'"
    fi
}

says "missing server file" "mess: $tmp/nope.mess: No such file or directory" \
    $MESS info --server "$tmp/nope.mess"
says "missing client file" "mess: $tmp/nope.mess: No such file or directory" \
    $MESS insert --client "$tmp/nope.mess" --server "$S" "$tmp/few.bvecs"
says "missing directory" "mess: $tmp/no/dir/c.mess: No such file or directory" \
    $MESS init --client "$tmp/no/dir/c.mess" --server "$tmp/s2.mess" \
    --train "$tmp/few.bvecs" --shards 1 --per-item 1 --bits 64
says "a directory given as the client file" "mess: $tmp: Is a directory" \
    $MESS insert --client "$tmp" --server "$S" "$tmp/few.bvecs"
# a FIFO as the client file: refused at once (before, the open waited for
# a writer that never came; timeout: the check fails rather than hangs)
mkfifo "$tmp/fifo.mess"
says "a FIFO given as the client file" "mess: $tmp/fifo.mess: not a regular file" \
    timeout 20 $MESS info --client "$tmp/fifo.mess"
says "a FIFO given as the client file of an insert" "mess: $tmp/fifo.mess: not a regular file" \
    timeout 20 $MESS insert --client "$tmp/fifo.mess" --server "$S" "$tmp/few.bvecs"
rm -f "$tmp/fifo.mess"
says "a directory that is not a server" \
    "mess: cannot open server '$tmp': $tmp/MANIFEST: No such file or directory (not a server directory, or its MANIFEST is lost)" \
    $MESS info --server "$tmp"

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    chmod 755 "$tmp"
    says "permission denied" "mess: $C: Permission denied" \
        setpriv --reuid=65534 --regid=65534 --clear-groups \
        $MESS insert --client "$C" --server "$S" "$tmp/few.bvecs"
    # a client file its user may read but not save (its directory is not
    # theirs), and a server they may write: insert and delete refused
    # before the server applies anything (before, the server took the
    # batches and the client's save then failed)
    mkdir "$tmp/rc" "$tmp/rs"
    cp "$C" "$tmp/rc/c.mess"
    chmod 644 "$tmp/rc/c.mess"
    cp -a "$S" "$tmp/rs/s"
    chown -R 65534:65534 "$tmp/rs"
    snap "$tmp/rs/s" >"$tmp/before"
    for cmd in "insert --first-id 500 $tmp/few.bvecs" "delete --ids 1"; do
        says "${cmd%% *} with a client file that cannot be saved" \
            "mess: $tmp/rc/c.mess: ${cmd%% *} saves the client file after the server applies it, and this one cannot be saved; refused before changing anything" \
            setpriv --reuid=65534 --regid=65534 --clear-groups \
            $MESS $(echo "${cmd%% *}") --client "$tmp/rc/c.mess" --server "$tmp/rs/s" ${cmd#* }
    done
    snap "$tmp/rs/s" >"$tmp/after"
    cmp -s "$tmp/before" "$tmp/after" && ok "the server unchanged" ||
        bad "server changed: $(diff "$tmp/before" "$tmp/after")"
    mkdir "$tmp/ro"
    if unshare -m sh -c "mount -t tmpfs -o ro tmpfs '$tmp/ro'" 2>/dev/null; then
        says "read-only file system" "mess: $tmp/ro/c.mess: Read-only file system" \
            unshare -m sh -c "mount -t tmpfs -o ro tmpfs '$tmp/ro' && exec $MESS init \
                --client '$tmp/ro/c.mess' --server '$tmp/s3.mess' --train '$tmp/few.bvecs' \
                --shards 1 --per-item 1 --bits 64"
    else
        echo "# no mount namespace: read-only check not run"
    fi
else
    echo "# not root: permission and read-only checks not run"
fi

# a state file of container version 1 (checksum made right) is refused and
# the message names both versions
/usr/bin/python3 - "$C" "$tmp/v1.mess" <<'EOF'
import hashlib, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[8:12] = struct.pack("<I", 1)
b[-32:] = hashlib.blake2b(bytes(b[:-32]), digest_size=32).digest()
open(sys.argv[2], "wb").write(bytes(b))
EOF
says "container version 1" "mess: $tmp/v1.mess: state file format version 1, this build reads versions 2 to 3 (written by another libmess version: re-create it with mess init, or use the version that wrote it)" \
    $MESS insert --client "$tmp/v1.mess" --server "$S" "$tmp/few.bvecs"

# with a passphrase, an unsealed client file is refused (it could have been
# planted with someone else's keys), and a sealed one needs the passphrase
MESS_TEST_PASS="a passphrase"
export MESS_TEST_PASS
refuse 1 "--passphrase-env on an unsealed client file" \
    $MESS insert --client "$C" --server "$S" "$tmp/few.bvecs" --passphrase-env MESS_TEST_PASS
grep -q "unsealed" "$tmp/err" && ok "the refusal says the file is unsealed" ||
    bad "refusal message: $(cat "$tmp/err")"
MESS_EMPTY=
export MESS_EMPTY
refuse "1 2" "an empty passphrase" \
    $MESS init --client "$tmp/e.mess" --server "$tmp/e.server" --train "$tmp/few.bvecs" \
    --shards 1 --per-item 1 --bits 64 --passphrase-env MESS_EMPTY
[ ! -e "$tmp/e.mess" ] && ok "no client file under an empty passphrase" ||
    bad "a client file was written under an empty passphrase"

# the deterministic seed: never on the command line; from the environment
# or a file, with a warning that it is the master key
SEEDHEX=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
SMALL="--shards 2 --per-item 1 --bits 64 --train-sample 500"
refuse 2 "--seed HEX on the command line" \
    $MESS init --client "$tmp/d1.mess" --server "$tmp/d1.server" --train $D/learn.bvecs \
    $SMALL --seed $SEEDHEX
grep -q -- "--seed-env" "$tmp/err" && grep -q -- "--seed-file" "$tmp/err" &&
    ! grep -q "$SEEDHEX" "$tmp/err" && [ ! -e "$tmp/d1.mess" ] &&
    ok "the refusal points to --seed-env / --seed-file and does not echo the seed" ||
    bad "--seed refusal: $(cat "$tmp/err")"
MESS_TEST_SEED=$SEEDHEX
export MESS_TEST_SEED
if $MESS init --client "$tmp/d1.mess" --server "$tmp/d1.server" --train $D/learn.bvecs \
    $SMALL --seed-env MESS_TEST_SEED >"$tmp/out" 2>"$tmp/err" &&
    grep -q '"deterministic":true' "$tmp/out" && grep -q "master key" "$tmp/err"; then
    ok "--seed-env: a deterministic client, and a warning that the seed is the master key"
else
    bad "--seed-env: $(cat "$tmp/out" "$tmp/err")"
fi
printf '%s\n' "$SEEDHEX" >"$tmp/seed.txt"
if $MESS init --client "$tmp/d2.mess" --server "$tmp/d2.server" --train $D/learn.bvecs \
    $SMALL --seed-file "$tmp/seed.txt" >/dev/null 2>&1 && cmp -s "$tmp/d1.mess" "$tmp/d2.mess"; then
    ok "--seed-file gives the same client as --seed-env"
else
    bad "--seed-file"
fi
printf '0123\n' >"$tmp/short.txt"
refuse 2 "--seed-file with a short seed" \
    $MESS init --client "$tmp/d3.mess" --server "$tmp/d3.server" --train $D/learn.bvecs \
    $SMALL --seed-file "$tmp/short.txt"
refuse 2 "--seed-env naming an unset variable" \
    $MESS init --client "$tmp/d3.mess" --server "$tmp/d3.server" --train $D/learn.bvecs \
    $SMALL --seed-env MESS_NO_SUCH_VARIABLE_X

# mess info --client: the mode and whether the file is sealed
info_is() {
    name=$1
    want=$2
    shift 2
    if "$@" >"$tmp/out" 2>"$tmp/err" && grep -q "$want" "$tmp/out"; then
        ok "$name"
    else
        bad "$name: $(cat "$tmp/out" "$tmp/err")"
    fi
}
info_is "info: a seeded client is deterministic, unsealed" \
    '"mode":"deterministic","sealed":false' $MESS info --client "$tmp/d1.mess"
info_is "info: a client from the OS CSPRNG is production" \
    '"mode":"production","sealed":false' $MESS info --client "$C"
MESS_INFO_PASS="info passphrase"
export MESS_INFO_PASS
$MESS init --client "$tmp/d4.mess" --server "$tmp/d4.server" --train $D/learn.bvecs \
    $SMALL --seed-env MESS_TEST_SEED --passphrase-env MESS_INFO_PASS >/dev/null 2>&1
info_is "info: a sealed seeded client, with its passphrase" \
    '"mode":"deterministic","sealed":true' \
    $MESS info --client "$tmp/d4.mess" --passphrase-env MESS_INFO_PASS
refuse 1 "info on a sealed client without its passphrase" $MESS info --client "$tmp/d4.mess"
grep -q "sealed" "$tmp/err" && ok "the refusal says the file is sealed" ||
    bad "sealed refusal: $(cat "$tmp/err")"

finish
