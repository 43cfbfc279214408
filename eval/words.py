#!/usr/bin/python3
"""eval/words.py - recall per byte on the word-vector set
(datasets/make_words.py, issue 31): Recall@10 against the exact cosine
top-10 and the bytes a query moves (request + response) per candidate pool
B, for MESS configurations beside plaintext hnswlib on the same unit
vectors, in one invocation.

A configuration is NAME=SPEC, SPEC a comma list of key=value as in
eval/configs.py (M shards, t per item, k kappa, d p_store, q p_query,
ef ef_search, pay payload), starting from the cosine defaults (M 64, t 16,
kappa 64, p_D = p_q = 0.016, ef_search 64, f32).  Each row states its
privacy in the planner's units (`mess plan --target-recall --help`):
X = ln((1-p_D)/p_D) t kappa/128, Y = ln((1-p_q)/p_q) M kappa/128, Y_cap
the same for p_PRR = p_IRR, Z = one shard's ln((1-p)/p) kappa/128; the
paper's limits are X 39.08, Y 156.3, Y_cap 200.6, Z 2.442.

    nice /usr/bin/python3 eval/words.py --queries 1000 \\
        --config "defaults-i8=pay=i8" --config "nonoise-i8=d=0,q=0,pay=i8" \\
        --out docs/eval/words/results.json
    /usr/bin/python3 eval/words.py --table --out docs/eval/words/results.json

Rows accumulate in --out across runs of the same set and query count.
The table's KB are 1,024 bytes.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT  # noqa: E402
from text import Built, VecSet, hnswlib_curve, mess_sweep  # noqa: E402
from configs import eta, params_of, parse_spec  # noqa: E402

COS = dict(M=64, t=16, k=64, d=0.016, q=0.016, ef=64, pay="f32")
LIMITS = dict(X=39.08, Y=156.3, Y_cap=200.6, Z=2.442)


def privacy(c):
    """The planner's X, Y, Y_cap, Z for configuration c (inf: no noise)."""
    a = (1 - math.sqrt(1 - 2 * c["q"])) / 2       # p_PRR = p_IRR giving p_q
    s = c["k"] / 128.0
    return dict(X=eta(c["d"]) * c["t"] * s, Y=eta(c["q"]) * c["M"] * s,
                Y_cap=eta(a) * c["M"] * s, Z=max(eta(c["d"]), eta(c["q"])) * s)


def within(pv):
    return all(pv[k] <= LIMITS[k] * (1 + 1e-3) for k in LIMITS)


def fmt(v):
    return "inf" if math.isinf(v) else "%.4g" % v


def table(res):
    pools = res["pools"]
    out = ["| configuration | M | t | kappa | p_D | p_q | ef | payload | X / Y / Z | "
           + " | ".join("B = %d" % b for b in pools) + " |",
           "|" + "---|" * (9 + len(pools))]
    for r in res["rows"]:
        c, pv = r["spec"], r["privacy"]
        by = {x["pool"]: x for x in r["curve"]}
        cells = [r["config"], str(c["M"]), str(c["t"]), str(c["k"]), fmt(c["d"]), fmt(c["q"]),
                 str(c["ef"]), c["pay"],
                 "%s / %s / %s%s" % (fmt(pv["X"]), fmt(pv["Y"]), fmt(pv["Z"]),
                                     "" if within(pv) else " (over)")]
        cells += ["%.3f, %.0f KB" % (by[b]["recall"], by[b]["bytes"] / 1024) if b in by else ""
                  for b in pools]
        out.append("| " + " | ".join(cells) + " |")
    if res.get("hnswlib"):
        out.append("")
        out.append("| hnswlib (M 16, efC 300) | " + " | ".join(
            "ef %d: %.3f" % (h["ef"], h["recall"]) for h in res["hnswlib"]) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description="recall per byte on the word-vector set")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "words"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "eval", "words", "results.json"))
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--pools", default="500,1000,1500,2000,3000,4000")
    ap.add_argument("--config", action="append", default=[], help="NAME=SPEC (repeatable)")
    ap.add_argument("--hnswlib-efs", default="10,20,40,80,160",
                    help="hnswlib ef values ('' to skip)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--table", action="store_true", help="print --out as a Markdown table and stop")
    a = ap.parse_args()
    if a.table:
        with open(a.out) as f:
            print(table(json.load(f)))
        return
    # "MRR" is against the exact nearest base word
    ds = VecSet(a.data, a.queries, "fvecs", "cos")
    pools = [int(x) for x in a.pools.split(",")]
    res = {"data": ds.name, "base": len(ds.base), "queries": len(ds.queries), "pools": pools,
           "rows": [], "hnswlib": [], "commands": []}
    if os.path.exists(a.out):
        with open(a.out) as f:
            old = json.load(f)
        if old.get("queries") == res["queries"] and old.get("data") == res["data"]:
            res = old                       # accumulate runs of the same set and queries
            res["pools"] = sorted(set(res["pools"]) | set(pools))
    res["commands"].append({"command": " ".join(sys.argv), "load": os.getloadavg(),
                            "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out + ".tmp", "w") as f:
            json.dump(res, f, indent=1, default=float)
        os.rename(a.out + ".tmp", a.out)

    if a.hnswlib_efs:
        res["hnswlib"] = hnswlib_curve(ds, [int(x) for x in a.hnswlib_efs.split(",")])
        save()
    for item in a.config:
        name, _, spec = item.partition("=")
        c = parse_spec(spec, COS, "words.py")
        b = Built(ds, name, params_of(c, ds.dim, "cos"), a.threads)
        rows = mess_sweep(b, ds, pools, a.threads, name)
        b.close()
        res["rows"] = [r for r in res["rows"] if r["config"] != name]
        res["rows"].append(dict(config=name, spec=c, privacy=privacy(c), curve=rows,
                                build_s=b.build_s, load=os.getloadavg()))
        save()
    print(table(res))


if __name__ == "__main__":
    main()
