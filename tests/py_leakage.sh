#!/bin/sh
# tests/py_leakage.sh - a fast check of the cross-shard inference attack
# (eval/leakage/selftest.py, docs/LEAKAGE.md): accuracy well above chance on
# an easy case, chance on noise, xi_single <= xi_link <= xi_complete, and
# the replay votes (re-inserts within 4 sigma of p_D, query retries within 4
# sigma of p_PRR; both 0.000 on c16ecae).  Last line "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
MESS_LIBRARY="${MESS_LIBRARY:-$(pwd)/build/libmess.so}" \
    exec "${PYTHON:-/usr/bin/python3}" eval/leakage/selftest.py
