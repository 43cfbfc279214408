#!/usr/bin/python3
"""exact_search_sim.py CLIENT [options] - Recall@k of an exact top-P search per
shard over randomly perturbed codes (Monte Carlo, no HNSW).

Separates the two gaps between `mess plan` and `mess query`: the model's own
approximations (this simulation draws the actual perturbation: one query
report shared by every comparison, independent storage flips per entry,
a uniform t-of-M route per item) and HNSW's misses (absent here: each shard
returns its exact P nearest perturbed codes, ties broken at random).  Uses
the client's clean codes through the Python bindings (python/mess), the
client's p_D, p_q, M, t, kappa.

  --data DIR      base.bvecs, query.bvecs, groundtruth.ivecs (datasets/sift)
  --queries N     first N queries (60)       --trials T   routes x noise draws (2)
  --pools LIST    total pools B (64,128,192,256,512,1024)
  -k K            recall depth (10)          --seed S     (1)
Last line: one JSON object {"pools", "recall", ...}.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import mess  # noqa: E402
from mess import vecs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("client")
    ap.add_argument("--data", default="datasets/sift")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--pools", default="64,128,192,256,512,1024")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    c = mess.Client.load(a.client)
    p = c.params
    M, t, K = p.shards, p.per_item, p.kappa
    p_d, p_q = p.p_store, mess.effective_flip(p.p_prr, p.p_irr)
    base = vecs.read_f32(os.path.join(a.data, "base.bvecs"))
    qs = vecs.read_f32(os.path.join(a.data, "query.bvecs"))[: a.queries]
    gt = vecs.read_ivecs(os.path.join(a.data, "groundtruth.ivecs"))[: a.queries, : a.k]
    pools = [int(x) for x in a.pools.split(",")]

    def bits(x):
        cd = np.ascontiguousarray(c.codes(x))
        return np.unpackbits(cd.view(np.uint8).reshape(M, K // 8), axis=1,
                             bitorder="little").astype(bool)

    clean = np.stack([bits(x) for x in base])  # (N, M, K)
    n = len(base)
    rng = np.random.default_rng(a.seed)
    rec = {b: [] for b in pools}
    for _ in range(a.trials):
        route = np.argsort(rng.random((n, M)), axis=1)[:, :t]
        member = np.zeros((n, M), bool)
        member[np.arange(n)[:, None], route] = True
        stored = clean ^ (rng.random(clean.shape) < p_d)
        for qi in range(len(qs)):
            qb = bits(qs[qi]) ^ (rng.random((M, K)) < p_q)
            dist = (stored ^ qb[None]).sum(axis=2) + rng.random((n, M)) * 0.5
            dist[~member] = np.inf
            order = np.argsort(dist, axis=0)
            truth = set(gt[qi].tolist())
            for b in pools:
                base_b, extra = divmod(b, M)
                # the protocol's split: base_b per shard, one more for `extra` shards
                per = np.full(M, base_b)
                per[rng.permutation(M)[:extra]] += 1
                cand = set()
                for s in range(M):
                    cand.update(order[: per[s], s].tolist())
                rec[b].append(len(cand & truth) / a.k)
    out = [round(float(np.mean(rec[b])), 4) for b in pools]
    for b, r in zip(pools, out):
        print("B=%d exact-search recall %.4f" % (b, r))
    print(json.dumps({"pools": pools, "recall": out, "queries": len(qs), "trials": a.trials,
                      "p_store": p_d, "p_query": round(p_q, 6), "k": a.k}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
