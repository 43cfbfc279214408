#!/bin/sh
# scripts/bench.sh - the benchmarks of `make bench`, one after the other.
# Each prints its findings and, as its last line, one JSON object.
# Run from the top of the tree after `make all`.
set -eu
PYTHON=${PYTHON:-/usr/bin/python3}

# Binary HNSW engine vs faiss IndexBinaryHNSW on the same 128-bit codes of
# datasets/sift and (when built) datasets/large; see docs/HNSW.md.
nice "$PYTHON" scripts/bench_hnsw.py
