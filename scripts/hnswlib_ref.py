#!/usr/bin/python3
"""Plaintext HNSW reference for `mess bench protocol`: hnswlib on the raw
vectors of a TEXMEX set, recall@10 against its ground truth per ef.

Prints a build line and one JSON object per ef on stdout.
"""
import argparse
import json
import os
import time

import numpy as np
import hnswlib


def read_vecs(path):
    raw = np.fromfile(path, dtype=np.uint8)
    dim = int(raw[:4].view(np.int32)[0])
    if path.endswith(".bvecs"):
        rec = 4 + dim
        return raw.reshape(-1, rec)[:, 4:].astype(np.float32)
    rec = 4 + 4 * dim
    return raw.reshape(-1, rec)[:, 4:].copy().view(np.float32 if path.endswith(".fvecs") else np.int32)


def pick(d, name):
    for ext in (".bvecs", ".fvecs"):
        p = os.path.join(d, name + ext)
        if os.path.exists(p):
            return p
    raise SystemExit("no %s in %s" % (name, d))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--ef", default="10,50,100,200,400")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=0, help="the first N queries (all)")
    ap.add_argument("--throughput", default="",
                    help="thread counts: per ef, a batch knn_query on that many threads, "
                         "queries/s and queries/s per core (CPU time), best of 3 rounds "
                         "of at least 0.25 s each")
    ap.add_argument("--index", default="",
                    help="hnswlib index file: loaded if it exists, else built and saved "
                         "there (its build_s then 0: loaded)")
    a = ap.parse_args()
    base = read_vecs(pick(a.data, "base"))
    query = read_vecs(pick(a.data, "query"))
    gt = read_vecs(os.path.join(a.data, "groundtruth.ivecs"))[:, : a.k]
    if a.queries:
        query, gt = query[: a.queries], gt[: a.queries]
    t0 = time.time()
    idx = hnswlib.Index(space="l2", dim=base.shape[1])
    if a.index and os.path.exists(a.index):
        idx.load_index(a.index, max_elements=base.shape[0])
        if idx.get_current_count() != base.shape[0]:
            raise SystemExit("%s: %d items, the base has %d"
                             % (a.index, idx.get_current_count(), base.shape[0]))
        built = 0.0
    else:
        idx.init_index(max_elements=base.shape[0], M=16, ef_construction=300, random_seed=1)
        idx.add_items(base, np.arange(base.shape[0]), num_threads=a.threads)
        built = round(time.time() - t0, 3)
        if a.index:
            idx.save_index(a.index)
    print(json.dumps({"build_s": built, "M": 16, "ef_construction": 300,
                      "loaded": a.index != "" and built == 0.0}))
    for ef in [int(x) for x in a.ef.split(",")]:
        idx.set_ef(max(ef, a.k))
        idx.set_num_threads(1)
        t0 = time.time()
        labels, _ = idx.knn_query(query, k=a.k)
        dt = time.time() - t0
        hits = sum(len(set(labels[i]) & set(gt[i])) for i in range(len(query)))
        row = {"ef": ef, "recall": round(hits / (len(query) * a.k), 4),
               "ms_per_query": round(1e3 * dt / len(query), 4)}
        for t in [int(x) for x in a.throughput.split(",") if x]:
            # best of 3 rounds, each the query set repeated for at least
            # 0.25 s: one pass of 500 queries (about 0.1 s) moved by 30%
            # between passes on this machine
            wall = cpu = float("inf")
            for _ in range(3):
                n = 0
                w0, c0 = time.perf_counter(), time.process_time()
                while n == 0 or time.perf_counter() - w0 < 0.25:
                    idx.knn_query(query, k=a.k, num_threads=t)
                    n += len(query)
                wall = min(wall, (time.perf_counter() - w0) / n)
                cpu = min(cpu, (time.process_time() - c0) / n)
            row["qps_t%d" % t] = round(1.0 / wall, 1)
            row["qps_per_core_t%d" % t] = round(1.0 / cpu, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
