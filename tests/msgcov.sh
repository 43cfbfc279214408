#!/bin/sh
# tests/msgcov.sh - make check runs it after the tests/cli_*.sh, which
# recorded what mess printed on stderr in build/cli-messages
# (MESS_MESSAGE_LOG): every message the tool can print has a test that
# prints it (tests/msgcov.py).  Last line: "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
exec "${PYTHON:-/usr/bin/python3}" tests/msgcov.py "${MESS_MESSAGE_LOG:-build/cli-messages}"
