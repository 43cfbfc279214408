#!/usr/bin/python3
"""eval/text_sweep.py - configurations of MESS at matched privacy on a
labelled text set (issue 17, "Closing the gap"): Recall@10 / MRR@10 per pool
B for each configuration, with the accountants' bounds of its client on real
near pairs (`mess account report`), so rows compare at equal privacy.

A configuration is a comma list of key=value (missing keys: the library
defaults, cosine metric):  M shards, t per item, k kappa, d p_store,
q p_query (effective; split evenly into PRR/IRR), ef server ef_search,
pay payload.  "d=match" / "q=match" pick the flip whose per-bit bound makes
the configuration's stored-data (eta_D * t * kappa) or query-side
(eta_q * M * kappa) worst case equal to the defaults' (0.08, 0.08 at
t = 16, M = 64, kappa = 128); the report then checks it on real pairs.

    nice /usr/bin/python3 eval/text_sweep.py --queries 500 \
        --config "M=64,t=16" --config "t=8,d=match" ... --out docs/eval/text/sweep.json

Configurations are separated by --config (repeatable) or by ';' in one.
--data datasets/sift runs the same on the bundled SIFT set (L2; its "MRR"
is against the exact nearest neighbour).  --table prints --out as the
Markdown table of docs/TEXT.md.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import K, ROOT, log  # noqa: E402
from text import MESS_TOOL, Built, TextSet, VecSet, mess_sweep, write_vecs  # noqa: E402
from configs import eta, params_of, parse_spec  # noqa: E402

DEF = dict(M=64, t=16, k=128, d=0.08, q=0.08, ef=0, pay="f32")


def flip_for_eta(e):
    return 1.0 / (1.0 + math.exp(e))


def parse(spec):
    c = parse_spec(spec, DEF, "text_sweep", ("match",))
    # matched flips: the per-bit bound scales with the bits a pair can differ in
    if c["d"] == "match":
        c["d"] = flip_for_eta(eta(DEF["d"]) * DEF["t"] * DEF["k"] / (c["t"] * c["k"]))
    if c["q"] == "match":
        c["q"] = flip_for_eta(eta(DEF["q"]) * DEF["M"] * DEF["k"] / (c["M"] * c["k"]))
    return c


def name_of(c):
    return "M%d-t%d-k%d-d%.4g-q%.4g-ef%d-%s" % (c["M"], c["t"], c["k"], c["d"], c["q"],
                                                c["ef"], c["pay"])


def privacy(b, ds, npairs, delta, repeats):
    """`mess account report` on npairs (query, its exact top-1 passage) pairs:
    the near pairs a user would want hidden from each other."""
    with tempfile.TemporaryDirectory() as tmp:
        cp = os.path.join(tmp, "c.client")
        b.client.save(cp)
        pf = os.path.join(tmp, "pairs.fvecs")
        rows = np.empty((2 * npairs, ds.dim), dtype=np.float32)
        rows[0::2] = ds.queries[:npairs]
        rows[1::2] = ds.base[ds.truth[:npairs, 0]]
        write_vecs(pf, rows, "<f4")
        cmd = [MESS_TOOL, "account", "report", "--client", cp, "--pairs", pf,
               "--delta", repr(delta), "--repeats", str(repeats)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            log("account report failed: %s" % r.stderr.strip())
            return None
        lines = [json.loads(x) for x in r.stdout.strip().splitlines() if x.startswith("{")]
        per, summ = lines[:-1], lines[-1]
        out = {"pairs": npairs, "delta": delta, "repeats": repeats}
        # a bound the accountant cannot give (flips too small for its
        # range) is null in its JSON: the mean is then unbounded too
        for key in ("xi_pure", "xi_pld", "xi_single_shard", "xi_ap", "xi_sp"):
            vals = [p[key] for p in per if key in p]
            if vals:
                out["mean_" + key] = (None if any(v is None for v in vals)
                                      else float(np.mean(vals)))
        for key in ("max_xi_pure", "max_xi_pld", "max_xi_single_shard", "max_xi_ap", "max_xi_sp"):
            if key in summ:
                out[key] = summ[key]
        return out


def table(res):
    """The Markdown table of docs/TEXT.md: privacy means against the
    defaults' row (bold where worse by more than 0.5%), then recall / MRR."""
    ref = next((r["privacy"] for r in res["rows"]
                if r["spec"]["M"] == 64 and r["spec"]["t"] == 16 and r["spec"]["k"] == 128
                and abs(r["spec"]["d"] - 0.08) < 1e-9 and abs(r["spec"]["q"] - 0.08) < 1e-9), None)
    keys = ("mean_xi_pure", "mean_xi_pld", "mean_xi_single_shard", "mean_xi_ap")
    pools = res["pools"]
    out = ["| M | t | kappa | p_D | p_q | ef_search | xi_pure | xi_pld | single shard | xi_ap | "
           + " | ".join("B = %d" % b for b in pools) + " |",
           "|" + "---|" * (10 + len(pools))]
    for r in res["rows"]:
        c, pv = r["spec"], r["privacy"] or {}
        cells = [str(c["M"]), str(c["t"]), str(c["k"]), "%.4g" % c["d"], "%.4g" % c["q"], str(c["ef"])]
        for k in keys:
            v = pv.get(k)
            if k in pv and v is None:
                cells.append("unbounded")
                continue
            worse = ref and v is not None and ref.get(k) is not None and v > ref[k] * 1.005
            cells.append(("**%.0f**" if worse else "%.0f") % v if v is not None else "")
        by = {x["pool"]: x for x in r["curve"]}
        cells += ["%.3f / %.3f" % (by[b]["recall"], by[b]["mrr"]) if b in by else "" for b in pools]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description="MESS configurations at matched privacy (text)")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "text", "debian"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "eval", "text", "sweep.json"))
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--pools", default="250,500,1000,1500")
    ap.add_argument("--config", action="append", default=[])
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--table", action="store_true", help="print --out as a Markdown table and stop")
    a = ap.parse_args()
    if a.table:
        with open(a.out) as f:
            print(table(json.load(f)))
        return
    if os.path.exists(os.path.join(a.data, "base.bvecs")):
        ds = VecSet(a.data, a.queries)
    else:
        ds = TextSet(a.data, a.queries)
        ds.metric = "cos"
    pools = [int(x) for x in a.pools.split(",")]
    specs = [s for c in (a.config or [""]) for s in c.split(";")]
    res = {"data": ds.name, "base": len(ds.base), "queries": len(ds.queries), "pools": pools,
           "command": " ".join(sys.argv), "rows": []}
    if os.path.exists(a.out):
        with open(a.out) as f:
            old = json.load(f)
        if old.get("queries") == res["queries"] and old.get("data") == res["data"]:
            res["rows"] = old["rows"]   # accumulate runs of the same set and queries
    for spec in specs:
        c = parse(spec)
        name = name_of(c)
        b = Built(ds, name, params_of(c, ds.dim, ds.metric), a.threads)
        pv = privacy(b, ds, a.pairs, a.delta, a.repeats)
        log("  %s privacy %s" % (name, pv))
        rows = mess_sweep(b, ds, pools, a.threads, name)
        b.close()
        res["rows"] = [r for r in res["rows"] if r["config"] != name]
        res["rows"].append(dict(config=name, spec=c, privacy=pv, curve=rows, build_s=b.build_s))
        os.makedirs(os.path.dirname(a.out), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1, default=float)
    def bound(pv, key):
        """a mean bound for the summary line: absent nan, unbounded inf"""
        if key not in pv:
            return float("nan")
        return float("inf") if pv[key] is None else pv[key]

    for r in res["rows"]:
        pv = r["privacy"] or {}
        print("%-40s xi_pure %7.1f xi_pld %7.1f xi_ap %7.1f | %s" % (
            r["config"], bound(pv, "mean_xi_pure"), bound(pv, "mean_xi_pld"),
            bound(pv, "mean_xi_ap"),
            " ".join("B=%d %.3f/%.3f" % (x["pool"], x["recall"], x["mrr"]) for x in r["curve"])))


if __name__ == "__main__":
    main()
