#!/bin/sh
# scripts/bench.sh - the benchmarks of `make bench`, one after the other.
# Each prints its findings and, as its last line, one JSON object.
# Run from the top of the tree after `make all`.
set -eu
PYTHON=${PYTHON:-/usr/bin/python3}

# Binary HNSW engine vs faiss IndexBinaryHNSW on the same 128-bit codes of
# datasets/sift and (when built) datasets/large; see docs/HNSW.md.
nice "$PYTHON" scripts/bench_hnsw.py

# The MESS protocol: recall@10 vs pool for No-Noise and MESS flips, time,
# bytes per payload encoding, build rate, server memory, with hnswlib on
# the raw vectors as reference; see docs/PROTOCOL.md.
nice ./build/mess bench protocol --data datasets/sift
if [ -f datasets/large/groundtruth.ivecs ]; then
    # 4 builds of 4.2M entries: the first 1000 of the 9,929 queries keep
    # the query phase short
    nice ./build/mess bench protocol --data datasets/large --payloads f32,i8 --queries 1000
fi

# Opening a response's entries: SIV one copy per id (the default) vs every
# entry vs a stored-nonce ChaCha20-Poly1305; docs/PROTOCOL.md.
nice ./build/mess bench payload

# Client-side encoding: IsoHash hashing (sgemv vs sgemm) and randomized
# response samplers (bits/s, ratios to the reference in the same run), then
# the recall of Hamming top-P for IsoHash and its baselines; docs/ENCODING.md.
nice ./build/mess bench encode
nice ./build/mess bench encode --quality --seeds 5
