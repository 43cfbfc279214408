#!/usr/bin/python3
"""libmess from Python, end to end on the bundled SIFT set.

    /usr/bin/python3 examples/python_sift.py [--dir datasets/sift] [--pool 1500]

Trains the client's hashes on learn.bvecs, indexes base.bvecs on a server
held in the same process, queries with query.bvecs and reports Recall@10
against groundtruth.ivecs, the exact bytes per query, and a glimpse of what
the untrusted server can see."""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import mess  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(ROOT, "datasets", "sift"))
    ap.add_argument("--pool", type=int, default=1500, help="candidate pool B")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    base = mess.read_f32(os.path.join(a.dir, "base.bvecs"))
    train = mess.read_f32(os.path.join(a.dir, "learn.bvecs"))
    queries = mess.read_f32(os.path.join(a.dir, "query.bvecs"))
    truth = mess.read_ivecs(os.path.join(a.dir, "groundtruth.ivecs"))[:, :10]

    params = mess.Params(base.shape[1])  # the paper's defaults: M=64, t=16, ...
    print("parameters:", params)
    t0 = time.perf_counter()
    with mess.Client(params, train, threads=a.threads) as client, \
            mess.Server(params) as server:
        up = client.insert(server, np.arange(len(base)), base, threads=a.threads)
        print("built %d items in %.1f s, upload %.1f MB"
              % (len(base), time.perf_counter() - t0, up / 1e6))

        hits, req_b, resp_b, t_srv, t_cli = 0, 0, 0, 0.0, 0.0
        for q, gt in zip(queries, truth):
            r = client.query(server, q, k=10, pool=a.pool, threads=a.threads)
            hits += len(set(r.ids.tolist()) & set(gt.tolist()))
            req_b += r.request_bytes
            resp_b += r.response_bytes
            t_srv += r.server_seconds
            t_cli += r.client_seconds
        n = len(queries)
        print("Recall@10 %.4f at pool %d over %d queries" % (hits / (10 * n), a.pool, n))
        print("per query: %.1f KB, server %.2f ms, client %.2f ms"
              % ((req_b + resp_b) / n / 1024, 1e3 * t_srv / n, 1e3 * t_cli / n))

        view = server.shard(0)
        print("the server's shard 0: %d nodes, entry point %d, top level %d, "
              "first code %s, first label %s"
              % (view.nodes, view.entry_point, view.levels().max(),
                 view.codes_bytes()[0].tobytes().hex(), view.labels()[0].tobytes().hex()))


if __name__ == "__main__":
    main()
