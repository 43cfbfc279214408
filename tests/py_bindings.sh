#!/bin/sh
# tests/py_bindings.sh - the Python bindings' unittest suite (python/tests)
# against build/libmess.so; its last line is "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
MESS_LIBRARY="${MESS_LIBRARY:-$(pwd)/build/libmess.so}" \
    exec "${PYTHON:-/usr/bin/python3}" python/tests/run.py
