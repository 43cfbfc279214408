#!/usr/bin/python3
"""plan_vs_measured.py [options] - `mess plan`'s predicted Recall@k (the paper's
model and the conditional one) against the recall `mess query --gt`
measures, on the same deterministic client.

Builds a client and server on the bundled SIFT set (mess init / insert with a
fixed --seed, so runs repeat), measures recall at every pool B with
`mess query --gt`, predicts it with `mess plan --gt` on the same client, and
fits the paper's empirical curve (Appendix B)

    R(B) = gamma_cov * Phi((B_eff - mu_R) / sigma_R),  B_eff = M floor(B/M) + 1/2

to the measurements by least squares.  Reports, per B, measured / predicted /
fitted recall, and the error of each model (a) unfitted, (b) scaled by one
fitted coverage factor, and (c) of the three-parameter normal-CDF fit.
Last line: one JSON object.

  --mess PATH        the tool (build/mess)
  --data DIR         dataset directory with learn/base/query/groundtruth (datasets/sift)
  --work DIR         where the state files go (a temporary directory)
  --p-store P        storage flip (0.08)       --p-query Q   effective query flip (0.08)
  --pools LIST       comma list of B (multiples of M from 64 to 8192)
  --threads N        (2)
  --seed HEX64       deterministic client (5a..5a)
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
from scipy.optimize import curve_fit
from scipy.stats import norm


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mess", default="build/mess")
    ap.add_argument("--data", default="datasets/sift")
    ap.add_argument("--work", default=None)
    ap.add_argument("--p-store", default="0.08")
    ap.add_argument("--p-query", default="0.08")
    ap.add_argument("--pools", default="64,128,192,256,384,512,768,1024,1536,2048,3072,4096,6144,8192")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--seed", default="5a" * 32)
    ap.add_argument("-k", default="10")
    a = ap.parse_args()
    os.environ["MESS_PLAN_SEED"] = a.seed  # mess takes seeds from the environment
    work = a.work or tempfile.mkdtemp(prefix="mess-plan-")
    os.makedirs(work, exist_ok=True)
    c, s = os.path.join(work, "client"), os.path.join(work, "server")
    d = a.data
    gt = os.path.join(d, "groundtruth.ivecs")
    pools = [int(x) for x in a.pools.split(",")]
    init = run([a.mess, "init", "--client", c, "--server", s, "--train", os.path.join(d, "learn.bvecs"),
                "--p-store", a.p_store, "--p-query", a.p_query, "--seed-env", "MESS_PLAN_SEED",
                "--threads", a.threads])
    M = init["shards"]
    run([a.mess, "insert", "--client", c, "--server", s, os.path.join(d, "base.bvecs"),
         "--threads", a.threads])
    # The prediction first: the plan only reads the hashes, which queries
    # do not change.
    plan = run([a.mess, "plan", "--client", c, "--data", os.path.join(d, "base.bvecs"),
                "--queries", os.path.join(d, "query.bvecs"), "--gt", gt, "-k", a.k,
                "--pools", ",".join(map(str, pools)), "--threads", a.threads])
    paper = np.array([r for _, r in plan["curve_paper"]])
    cond = np.array([r for _, r in plan["curve_conditional"]])
    meas = []
    for b in pools:
        q = run([a.mess, "query", "--client", c, "--server", s, os.path.join(d, "query.bvecs"),
                 "-k", a.k, "--pool", str(b), "--gt", gt, "--threads", a.threads])
        meas.append(q["recall"])
        print("measured B=%d recall=%.4f" % (b, q["recall"]), file=sys.stderr)
    meas = np.array(meas)
    B = np.array(pools, dtype=float)
    beff = M * np.floor(B / M) + 0.5

    def model(x, g, mu, sg):
        return g * norm.cdf((x - mu) / sg)

    (g, mu, sg), _ = curve_fit(model, beff, meas, p0=[meas.max(), np.median(beff), np.median(beff)],
                               bounds=([0, -1e6, 1e-6], [1, 1e6, 1e7]), maxfev=20000)
    fit = model(beff, g, mu, sg)

    def err(x):
        e = x - meas
        return float(np.sqrt(np.mean(e * e))), float(np.max(np.abs(e)))

    def coverage(pred):  # one factor, least squares
        return float(np.dot(pred, meas) / np.dot(pred, pred))

    cp, cc = coverage(paper), coverage(cond)
    print("%8s %9s %9s %9s %9s %9s" % ("B", "measured", "paper", "cond", "cov*cond", "fit"))
    for i, b in enumerate(pools):
        print("%8d %9.4f %9.4f %9.4f %9.4f %9.4f"
              % (b, meas[i], paper[i], cond[i], cc * cond[i], fit[i]))
    out = {"p_store": float(a.p_store), "p_query": float(a.p_query), "shards": M,
           "k": int(a.k), "pools": pools,
           "measured": [round(float(x), 4) for x in meas],
           "paper": [round(float(x), 4) for x in paper],
           "conditional": [round(float(x), 4) for x in cond],
           "gamma_cov": round(float(g), 4), "mu_R": round(float(mu), 1),
           "sigma_R": round(float(sg), 1)}
    for name, x in (("paper", paper), ("paper_cov", cp * paper), ("conditional", cond),
                    ("conditional_cov", cc * cond), ("fit", fit)):
        r, m = err(x)
        out["rmse_" + name] = round(r, 4)
        out["max_err_" + name] = round(m, 4)
        print("%-16s rmse %.4f max %.4f" % (name, r, m))
    out["coverage_paper"] = round(cp, 4)
    out["coverage_conditional"] = round(cc, 4)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
