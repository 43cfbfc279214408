#!/bin/sh
# tests/abi_contracts.sh - contracts the compiler holds (mess.h, "Results
# that must be checked" and the const handles of "Threads"):
#   - ignoring mess_client_finish's result does not compile under -Werror,
#     and the same call with its result used does;
#   - every call documented as not changing its handle compiles with const
#     handles, and a const client given to a call that changes it
#     (mess_client_request) does not;
#   - a program that defines MESS_API / MESS_NODISCARD empty (a compiler
#     without the attributes) still compiles against both headers.
cd "$(dirname "$0")/.." || exit 1
. tests/shlib.sh
cc=${CC:-cc}
flags="-std=c99 -pedantic -Wall -Wextra -Werror -c"

build() { # build NAME SOURCE EXTRA-FLAGS...: 0 if it compiles
    name=$1 src=$2
    shift 2
    # shellcheck disable=SC2086
    $cc $flags "$@" -o "$tmp/$name.o" "$src" >"$tmp/$name.log" 2>&1
}

if build used tests/contracts/nodiscard.c; then
    ok "finish with its result used compiles"
else
    cat "$tmp/used.log"; bad "finish with its result used compiles"
fi
if build ignored tests/contracts/nodiscard.c -DIGNORE; then
    bad "an ignored finish result compiles under -Werror"
elif grep -q "mess_client_finish" "$tmp/ignored.log" &&
     grep -qi "unused.result\|ignoring return value" "$tmp/ignored.log"; then
    ok "an ignored finish result is an error under -Werror"
else
    cat "$tmp/ignored.log"; bad "ignored finish: failed for another reason"
fi

if build const tests/contracts/const_handles.c; then
    ok "calls that do not change a handle take const handles"
else
    cat "$tmp/const.log"; bad "calls that do not change a handle take const handles"
fi
if build mutate tests/contracts/const_handles.c -DMUTATE; then
    bad "a const client passed to mess_client_request compiles"
elif grep -q "mess_client_request" "$tmp/mutate.log" && grep -qi "const" "$tmp/mutate.log"; then
    ok "a const client passed to mess_client_request is an error"
else
    cat "$tmp/mutate.log"; bad "const client to request: failed for another reason"
fi

# without the attributes: the macros may be predefined empty
if build plain tests/contracts/const_handles.c -DMESS_API= -DMESS_NODISCARD=; then
    ok "both headers compile with MESS_API and MESS_NODISCARD empty"
else
    cat "$tmp/plain.log"; bad "both headers compile with MESS_API and MESS_NODISCARD empty"
fi
if build plain_ignored tests/contracts/nodiscard.c -DIGNORE -DMESS_NODISCARD=; then
    ok "MESS_NODISCARD empty: an ignored result is no longer diagnosed (the macro is what holds it)"
else
    cat "$tmp/plain_ignored.log"; bad "MESS_NODISCARD empty still fails"
fi
finish
