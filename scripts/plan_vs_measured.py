#!/usr/bin/python3
"""plan_vs_measured.py [options] - `mess plan`'s predicted Recall@k against the
recall `mess query --gt` measures, on the same deterministic client.

Builds a client and server on the bundled SIFT set (mess init / insert with a
fixed --seed, so runs repeat), measures recall at every pool B with
`mess query --gt`, predicts it with `mess plan --gt` on the same client, and
fits the paper's empirical curve (Appendix B)

    R(B) = gamma_cov * Phi((B_eff - mu_R) / sigma_R),  B_eff = M floor(B/M) + 1/2

to the measurements by least squares.  Reports, per B, measured / predicted /
fitted recall, and the error of (a) the unfitted model, (b) the model scaled
by one fitted coverage factor, (c) the three-parameter normal-CDF fit.
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
    work = a.work or tempfile.mkdtemp(prefix="mess-plan-")
    os.makedirs(work, exist_ok=True)
    c, s = os.path.join(work, "client"), os.path.join(work, "server")
    d = a.data
    gt = os.path.join(d, "groundtruth.ivecs")
    pools = [int(x) for x in a.pools.split(",")]
    init = run([a.mess, "init", "--client", c, "--server", s, "--train", os.path.join(d, "learn.bvecs"),
                "--p-store", a.p_store, "--p-query", a.p_query, "--seed", a.seed,
                "--threads", a.threads])
    M = init["shards"]
    run([a.mess, "insert", "--client", c, "--server", s, os.path.join(d, "base.bvecs"),
         "--threads", a.threads])
    # The prediction first: `mess query` saves the client (memo cache) and
    # the plan only reads the hashes, which queries do not change.
    plan = run([a.mess, "plan", "--client", c, "--data", os.path.join(d, "base.bvecs"),
                "--queries", os.path.join(d, "query.bvecs"), "--gt", gt, "-k", a.k,
                "--pools", ",".join(map(str, pools)), "--threads", a.threads])
    pred = np.array([r for _, r in plan["curve"]])
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
    cov = float(np.dot(pred, meas) / np.dot(pred, pred))  # one coverage factor
    scaled = cov * pred

    def err(x):
        e = x - meas
        return float(np.sqrt(np.mean(e * e))), float(np.max(np.abs(e)))

    print("%8s %10s %10s %10s %10s" % ("B", "measured", "model", "cov*model", "normal fit"))
    for i, b in enumerate(pools):
        print("%8d %10.4f %10.4f %10.4f %10.4f" % (b, meas[i], pred[i], scaled[i], fit[i]))
    e0, e1, e2 = err(pred), err(scaled), err(fit)
    print("unfitted model: rmse %.4f max %.4f; coverage %.4f x model: rmse %.4f max %.4f; "
          "normal fit (gamma %.4f mu %.1f sigma %.1f): rmse %.4f max %.4f"
          % (e0[0], e0[1], cov, e1[0], e1[1], g, mu, sg, e2[0], e2[1]))
    print(json.dumps({
        "p_store": float(a.p_store), "p_query": float(a.p_query), "shards": M,
        "k": int(a.k), "pools": pools,
        "measured": [round(float(x), 4) for x in meas],
        "predicted": [round(float(x), 4) for x in pred],
        "rmse_model": round(e0[0], 4), "max_err_model": round(e0[1], 4),
        "coverage": round(cov, 4), "rmse_coverage_model": round(e1[0], 4),
        "gamma_cov": round(float(g), 4), "mu_R": round(float(mu), 1), "sigma_R": round(float(sg), 1),
        "rmse_fit": round(e2[0], 4), "max_err_fit": round(e2[1], 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
