#!/usr/bin/python3
"""bounds.py - the stored-data bounds of two parameter sets over a range of
delta (docs/LEAKAGE.md, "The bounds over delta").

For the cross-shard evaluation's challenge pairs (real pairs at normalised
angle <= --angle, the pairs run.py attacks at each --prefix) and for
query / exact-nearest-base pairs (as docs/TEXT.md's privacy columns), under
each parameter set's own client (fixed hashes, run.py's saved clients),
computes with the accountant (mess.account, the code `mess account report`
and run.py use):
  xi_single    one uniformly chosen shard's entry (1-of-M mixture PLD)
  xi_complete  the complete view (t-of-M route, Theorem 5.2, PLD)
at every --delta, and the delta-free pure values (eta * the largest shard
distance; eta * the t largest summed).  Writes OUT/bounds.json and
OUT/bounds.md (per delta and set: mean and max over pairs, the ratio of
the means, how many pairs are higher under the first configuration).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from common import log, mess  # noqa: E402
import mess.account as acc  # noqa: E402
import run as R  # noqa: E402
import worlds as W  # noqa: E402

CONFIGS = {
    "cos": ("cosine defaults (kappa 64, p 0.016)", []),
    "k64": ("kappa 64, p 0.016", ["--bits", "64", "--p-store", "0.016", "--p-query", "0.016"]),
    "paper": ("paper defaults (kappa 128, p 0.08)",
              ["--bits", "128", "--p-store", "0.08", "--p-query", "0.08"]),
}


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--metric", default="cos")
    ap.add_argument("--configs", nargs="+", default=["cos", "paper"], choices=list(CONFIGS))
    ap.add_argument("--delta", type=float, nargs="+",
                    default=[1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.05])
    ap.add_argument("--prefix", type=int, nargs="+", default=[2000, 5000, 10000, 20000])
    ap.add_argument("--pairs", type=int, default=5, help="near pairs per prefix")
    ap.add_argument("--angle", type=float, default=0.05)
    ap.add_argument("--queries", type=int, default=100,
                    help="query / exact-nearest pairs (0: none)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--client-dir", default=None)
    return ap.parse_args(argv)


def client_for(argv, ds, dim, train, cdir):
    a = R.parse(argv)
    p = R.params(a, dim)
    path = R.client_path(a, ds, cdir)
    if not os.path.exists(path):
        log("training %s" % os.path.basename(path))
        with mess.Client(p, train, seed=b"\x5a" * 32, threads=2) as c:
            c.save(path)
    return a, p, mess.Client.load(path)


def pair_sets(o, ds, base, cdir):
    near = {}
    ns = [n for n in o.prefix if n <= len(base)]
    cands = R.near_cached(ds, base[:max(ns)], o.angle, cdir) if ns else []
    for n in ns:
        for dth, i, j in W.near_pairs(base[:n], o.angle, o.pairs, cands=cands):
            near[(i, j)] = dth
    sets = {"near": [(i, j, None) for (i, j) in sorted(near)]}
    if o.queries:
        q = mess.read_f32(R.vecs_path(ds, "query"))
        gt = mess.read_ivecs(os.path.join(ds, "groundtruth.ivecs"))
        sets["query"] = [(k, int(gt[k][0]), q[k]) for k in range(min(o.queries, len(q)))]
    return sets


def main(argv=None):
    o = parse(argv)
    ds = os.path.abspath(o.data)
    base = mess.read_f32(R.vecs_path(ds, "base"))
    train = mess.read_f32(R.vecs_path(ds, "learn"))
    cdir = o.client_dir or os.path.join(HERE, "..", "..", "build", "leakage")
    os.makedirs(cdir, exist_ok=True)
    sets = pair_sets(o, ds, base, cdir)
    res = {}
    for cname in o.configs:
        a, p, client = client_for(["--metric", o.metric] + CONFIGS[cname][1], ds,
                                  base.shape[1], train, cdir)
        t, pd = int(p.per_item), float(p.p_store)
        eta = float(acc.eta(pd))
        for sname, pairs in sets.items():
            rows = []
            for i, j, qv in pairs:
                x0 = base[i] if qv is None else qv
                d = W.shard_distances(client, x0, base[j])
                r = {"pair": [int(i), int(j)], "pure_single": eta * int(d.max()),
                     "pure_complete": float(acc.stored_pure(pd, d, t)),
                     "single": {}, "complete": {}}
                with acc.PLD(pd, acc.route_weights(d, 1)) as pld:
                    for dl in o.delta:
                        r["single"][repr(dl)] = float(pld.epsilon(dl))
                for dl in o.delta:
                    r["complete"][repr(dl)] = float(acc.stored(pd, d, t, delta0=dl).xi_pld)
                rows.append(r)
            res[cname, sname] = rows
        client.close()
        log("%s: done" % cname)
    md = table(o, sets, res)
    if o.out:
        os.makedirs(o.out, exist_ok=True)
        with open(os.path.join(o.out, "bounds.json"), "w") as f:
            json.dump({"config": {k: getattr(o, k) for k in ("metric", "configs", "delta",
                                                              "prefix", "pairs", "angle",
                                                              "queries")},
                       "data": os.path.basename(os.path.normpath(ds)),
                       "results": {"%s/%s" % k: v for k, v in res.items()}}, f, indent=1)
        with open(os.path.join(o.out, "bounds.md"), "w") as f:
            f.write(md)
    print(md)
    return 0


def table(o, sets, res):
    c0, c1 = o.configs[0], o.configs[-1]
    out = ["<!-- generated by eval/leakage/bounds.py; first = %s, second = %s -->"
           % (CONFIGS[c0][0], CONFIGS[c1][0]), ""]
    for sname, pairs in sets.items():
        out += ["%s pairs (%d): %s" % (sname, len(pairs),
                                       "challenge pairs of the leakage grid, d_theta <= %g"
                                       % o.angle if sname == "near" else
                                       "a query and its exact nearest base vector"), "",
                "| bound | delta | %s mean / max | %s mean / max | ratio of means | "
                "pairs higher under %s |" % (c0, c1, c0),
                "|---|---|---|---|---|---|"]
        a, b = res[c0, sname], res[c1, sname]
        for kind in ("single", "complete"):
            for dl in o.delta:
                va = np.array([r[kind][repr(dl)] for r in a])
                vb = np.array([r[kind][repr(dl)] for r in b])
                out.append("| %s | %g | %.1f / %.1f | %.1f / %.1f | %.3f | %d of %d |"
                           % (kind, dl, va.mean(), va.max(), vb.mean(), vb.max(),
                              va.mean() / vb.mean(), int((va > vb).sum()), len(va)))
        for kind in ("pure_single", "pure_complete"):
            va = np.array([r[kind] for r in a])
            vb = np.array([r[kind] for r in b])
            out.append("| %s | - | %.1f / %.1f | %.1f / %.1f | %.3f | %d of %d |"
                       % (kind, va.mean(), va.max(), vb.mean(), vb.max(),
                          va.mean() / vb.mean(), int((va > vb).sum()), len(va)))
        out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
