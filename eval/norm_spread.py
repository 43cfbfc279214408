#!/usr/bin/python3
"""eval/norm_spread.py - how L2 recall falls as the norms of the vectors
spread (issue 29: L2 on unnormalised embeddings, norms 1.6-8.8, gave
Recall@10 0.64 where cosine gave 0.99), the measurement behind the hint
`mess init` and Python's Client give when the training vectors' norms
spread (cli/files.c, python/mess/core.py: NORM_SPREAD_HINT).

The bundled SIFT vectors all have norm 512 (+-0.3%), so L2 and cosine
agree on them.  Each vector (base, queries, training) is scaled by its own
factor, log-uniform on [1, R]: directions are unchanged, so the cosine
neighbours are SIFT's, while the L2 neighbours move towards the short
vectors.  For each R the script builds three servers, M 16, t 4: l2 (the
paper's defaults, the vectors as they are), cos (the cosine defaults, the
vectors as they are) and cos_unit (the cosine defaults, every vector
normalised to length 1), and prints one JSON line: the spread statistic
the hint uses (95th over 5th percentile of the training norms) and
Recall@10 at each pool against the exact L2 and cosine truths
(NAME_vs_TRUTH_BPOOL).

    MESS_LIBRARY=build/libmess.so python3 eval/norm_spread.py [--spreads 1,2,5.5]
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import mess  # noqa: E402


def topk(base, queries, k, metric):
    if metric == "cos":
        b = base / np.linalg.norm(base, axis=1, keepdims=True)
        q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        d = -q @ b.T
    else:
        d = (queries ** 2).sum(1)[:, None] - 2 * queries @ base.T + (base ** 2).sum(1)[None]
    return np.argsort(d, axis=1, kind="stable")[:, :k]


def recall(ids, truth):
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / len(b)
                          for a, b in zip(ids, truth)]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "..", "datasets", "sift"))
    ap.add_argument("--spreads", default="1,1.5,2,3,5.5")
    ap.add_argument("--pools", default="200,1000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    base = mess.read_f32(os.path.join(a.data, "base.bvecs"))
    learn = mess.read_f32(os.path.join(a.data, "learn.bvecs"))
    queries = mess.read_f32(os.path.join(a.data, "query.bvecs"))[:a.queries]
    pools = [int(x) for x in a.pools.split(",")]
    rng = np.random.default_rng(29)
    for R in [float(x) for x in a.spreads.split(",")]:
        def scaled(x):
            f = np.exp(rng.uniform(0.0, np.log(R), size=(x.shape[0], 1)))
            return np.ascontiguousarray(x * f, dtype=np.float32)

        def unit(x):
            return np.ascontiguousarray(x / np.linalg.norm(x, axis=1, keepdims=True),
                                        dtype=np.float32)
        b, l, q = scaled(base), scaled(learn), scaled(queries)
        n = np.linalg.norm(l, axis=1)
        row = {"R": R, "p95_over_p5": round(float(np.percentile(n, 95) / np.percentile(n, 5)), 4),
               "max_over_min": round(float(n.max() / n.min()), 4)}
        truth = {m: topk(b, q, 10, m) for m in ("l2", "cos")}
        # (name, metric, vectors as given or normalised, truths to score)
        runs = [("l2", "l2", False, ("l2", "cos")), ("cos", "cos", False, ("cos",)),
                ("cos_unit", "cos", True, ("cos",))]
        for name, metric, norm, against in runs:
            p = mess.Params(128, metric=metric, shards=16, per_item=4)
            bb, ll, qq = (unit(b), unit(l), unit(q)) if norm else (b, l, q)
            t0 = time.time()
            with mess.Client(p, ll, seed=bytes(32), threads=a.threads) as c, mess.Server(p) as s:
                c.insert(s, np.arange(len(bb)), bb, threads=a.threads)
                for pool in pools:
                    ids, _ = c.search(s, qq, k=10, pool=pool, threads=a.threads)
                    for t in against:
                        row["%s_vs_%s_B%d" % (name, t, pool)] = round(recall(ids, truth[t]), 4)
            row["%s_seconds" % name] = round(time.time() - t0, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
