#!/usr/bin/python3
"""eval/ef_time.py - the server's cost of a search beam floor: one client and
server (defaults, cosine) on a data set, the same requests searched with
ef_search 0 and each floor in --efs, alternating rounds, the best round
per setting (the machine is shared: the minimum is the least disturbed).

    nice /usr/bin/python3 eval/ef_time.py --data datasets/text/debian --queries 300
    nice /usr/bin/python3 eval/ef_time.py --data datasets/sift --queries 200 --pools 64,128,192,512
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, log, seed_for  # noqa: E402
import mess  # noqa: E402


def load(d):
    ext = "fvecs" if os.path.exists(os.path.join(d, "base.fvecs")) else "bvecs"
    r = lambda n: mess.read_f32(os.path.join(d, "%s.%s" % (n, ext)))
    return r("base"), r("learn"), r("query"), ext


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "text", "debian"))
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--pools", default="250,500,1000,1500")
    ap.add_argument("--efs", default="64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    base, learn, qs, ext = load(a.data)
    qs = qs[: a.queries]
    metric = "cos" if ext == "fvecs" else "l2"
    p = mess.Params(base.shape[1], metric=metric)
    c = mess.Client(p, learn, seed=seed_for("ef-time"), threads=a.threads)
    s = mess.Server(p)
    ids = np.arange(len(base), dtype=np.uint64)
    for i in range(0, len(ids), 10000):
        buf = c.upload(ids[i:i + 10000], base[i:i + 10000], a.threads)
        s.apply_upload(buf, a.threads)
        buf.close()
    pools = [int(x) for x in a.pools.split(",")]
    efs = [0] + [int(x) for x in a.efs.split(",")]
    out = {"data": a.data, "queries": len(qs), "pools": pools, "efs": efs, "ms": {}}
    for B in pools:
        reqs = []
        for q in qs:
            qq, req = c.request(q, B)
            reqs.append((qq, req))
        best = {ef: float("inf") for ef in efs}
        for _ in range(a.rounds):
            for ef in efs:
                s.set_ef_search(ef)
                t0 = time.perf_counter()
                for _, req in reqs:
                    resp = s.search(req, 1)
                    resp.close()
                best[ef] = min(best[ef], 1e3 * (time.perf_counter() - t0) / len(reqs))
        out["ms"][B] = best
        log("B=%d server ms per query (best of %d rounds, 1 thread): %s" % (
            B, a.rounds, ", ".join("ef_search %d: %.3f" % (e, best[e]) for e in efs)))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
