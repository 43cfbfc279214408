#!/usr/bin/python3
"""eval/scale.py - recall as N grows (issue 31): the pool B and the bytes per
query that recall@10 0.95 and 0.99 need on prefixes of one set, the
planner's prediction checked against the measurement, and a fit of B(N)
extrapolated to 10M and 100M.

    # prefixes: the first N base vectors, the first 1,000 queries, their
    # exact top 100 over the prefix (eval/speed.py data)
    python3 eval/speed.py data --src /work/data/1m --n 100000 --out build/scale/1m-100k
    # a prefix's curve: mess init (the defaults: u8 for .bvecs, efC 64,
    # a fixed seed file) + mess insert --threads 2, then mess query at
    # every pool on the first --queries queries (or --server/--client of a
    # directory built already), and `mess plan` on --plan-queries of them
    nice python3 eval/scale.py curve --data build/scale/1m-100k --out build/scale/results.jsonl
    # the table: B and bytes for 0.95 / 0.99 per prefix, the planner,
    # B(N) fitted and extrapolated
    python3 eval/scale.py report build/scale/results.jsonl

`curve` appends one JSON object per prefix to --out: n, pools, recall,
bytes per query (request + response, measured by mess query), server and
client ms per query, the build's wall/CPU seconds and entries/s (when it
built), the planner's curves (paper and conditional model, with its search
check) and the load average before and after.

`report` interpolates each curve in log B to the B of recall 0.95 and
0.99 (None when the largest pool measured does not reach it), checks the
planner: the model's B for the target beside the measured B on every
prefix, and the model fitted on a smaller prefix (the ratio measured B /
model B there) applied to the model's B on the next larger prefix, and
fits log B = a + b log N over the prefixes (least squares) to extrapolate
to 10M and 100M.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "eval"))
from speed import child_cpu, load_avg, read_vecs, run, write_vecs  # noqa: E402

POOLS = "250,500,750,1000,1500,2000,3000,4000,6000"


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def build(a, work):
    """mess init with the defaults (a fixed seed file) + mess insert."""
    c, s = os.path.join(work, "c"), os.path.join(work, "s")
    for p in (c, s):
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    seed = os.path.join(work, "seed")
    with open(seed, "w") as f:
        f.write("5a" * 32 + "\n")
    t0, c0 = time.perf_counter(), child_cpu()
    init = run([a.tool, "init", "--client", c, "--server", s, "--train",
                os.path.join(a.data, "learn.bvecs"), "--seed-file", seed,
                "--threads", str(a.threads)])
    j = run([a.tool, "insert", "--client", c, "--server", s, "--threads", str(a.threads),
             os.path.join(a.data, "base.bvecs")])
    j["init"] = init
    j["wall_s"] = time.perf_counter() - t0
    j["cpu_s"] = child_cpu() - c0
    return j, c, s


def plan(a, who, q, gt, pools):
    """mess plan's curves (paper and conditional model, its search check on
    --check-shards shards) on the first --plan-queries queries."""
    t0 = time.perf_counter()
    j = run([a.tool, "plan"] + who + ["--data", os.path.join(a.data, "base.bvecs"),
             "--queries", q, "--gt", gt, "--sample", str(a.plan_queries),
             "--pools", ",".join(str(b) for b in pools), "--threads", str(a.threads),
             "--check-shards", str(a.check_shards), "--target", "0.95"])
    out = {k: j.get(k) for k in ("curve_paper", "curve_conditional", "search_eff",
                                 "pool", "queries", "check_shards")}
    out["seconds"] = time.perf_counter() - t0
    log("plan: %.1f s, pool for 0.95 %s" % (out["seconds"], j.get("pool")))
    return out


def cmd_plan(a):
    """the planner alone on a set no server was built for: a client trained
    here with the defaults (the fixed seed file), no measured curve."""
    work = a.work or os.path.join(ROOT, "build", "scale", os.path.basename(a.data.rstrip("/")))
    os.makedirs(work, exist_ok=True)
    seed = os.path.join(work, "seed")
    with open(seed, "w") as f:
        f.write("5a" * 32 + "\n")
    q, gt = os.path.join(work, "q.bvecs"), os.path.join(work, "gt.ivecs")
    write_vecs(q, read_vecs(os.path.join(a.data, "query.bvecs"))[: a.queries])
    write_vecs(gt, read_vecs(os.path.join(a.data, "groundtruth.ivecs"))[: a.queries])
    out = {"data": a.data, "load_before": load_avg(), "queries": a.queries, "recall": None,
           "n": os.path.getsize(os.path.join(a.data, "base.bvecs")) // (4 + 128),
           "pools": [int(b) for b in a.pools.split(",")]}
    out["plan"] = plan(a, ["--train", os.path.join(a.data, "learn.bvecs"), "--seed-file", seed],
                       q, gt, out["pools"])
    out["load_after"] = load_avg()
    with open(a.out, "a") as f:
        f.write(json.dumps(out) + "\n")
    print(json.dumps(out))


def cmd_curve(a):
    work = a.work or os.path.join(ROOT, "build", "scale", os.path.basename(a.data.rstrip("/")))
    os.makedirs(work, exist_ok=True)
    out = {"data": a.data, "load_before": load_avg(), "start": time.strftime("%H:%M:%S")}
    n = os.path.getsize(os.path.join(a.data, "base.bvecs")) // (4 + 128)
    out["n"] = n
    if a.server:
        c, s = os.path.join(work, "c"), a.server
        shutil.copyfile(a.client, c)  # a deterministic client is saved after queries
        out["build"] = None
    else:
        log("build %s (%d vectors)" % (a.data, n))
        out["build"], c, s = build(a, work)
        log("built: %.1f s wall, %.1f s CPU" % (out["build"]["wall_s"], out["build"]["cpu_s"]))
    q = os.path.join(work, "q.bvecs")
    write_vecs(q, read_vecs(os.path.join(a.data, "query.bvecs"))[: a.queries])
    gt = os.path.join(work, "gt.ivecs")
    write_vecs(gt, read_vecs(os.path.join(a.data, "groundtruth.ivecs"))[: a.queries])
    pools = [int(b) for b in a.pools.split(",")]
    out.update(pools=pools, queries=a.queries, recall=[], bytes=[], server_ms=[], client_ms=[])
    for b in pools:
        j = run([a.tool, "query", "--client", c, "--server", s, q, "-k", "10",
                 "--pool", str(b), "--gt", gt])
        out["recall"].append(j["recall"])
        out["bytes"].append(j["mean_request_bytes"] + j["mean_response_bytes"])
        out["server_ms"].append(j["server_ms_per_query"])
        out["client_ms"].append(j["client_ms_per_query"])
        log("B %d: recall@10 %.4f, %.0f bytes, server %.2f ms" %
            (b, j["recall"], out["bytes"][-1], j["server_ms_per_query"]))
    out["info"] = run([a.tool, "info", "--client", c, "--pool", "1500"])
    # bytes per query with every budget filled, per encoding (mess info's
    # figure at B = 1500 moved by B's entries): what u8 / f32 cost at the
    # same recall whichever payload this directory stores
    out["bytes_enc"] = {
        e: [v["bytes_per_query"] + (b - 1500) * v["entry_bytes"] for b in pools]
        for e, v in out["info"]["encodings"].items()}
    if a.plan_queries:
        out["plan"] = plan(a, ["--client", c], q, gt, pools)
    out["load_after"] = load_avg()
    with open(a.out, "a") as f:
        f.write(json.dumps(out) + "\n")
    print(json.dumps(out))


def b_for(pools, rec, target):
    """B at which the curve reaches target, linear in log B between the
    two pools around it; None when the largest pool does not reach it."""
    for i, r in enumerate(rec):
        if r >= target:
            if i == 0:
                return float(pools[0])
            lo, hi = math.log(pools[i - 1]), math.log(pools[i])
            f = (target - rec[i - 1]) / (r - rec[i - 1])
            return math.exp(lo + f * (hi - lo))
    return None


def fmt(x, f="%.0f"):
    return "-" if x is None else f % x


def enc_bytes(r, enc, b):
    """bytes per query at pool b with every budget filled, payload enc."""
    v = r["info"]["encodings"][enc]
    return v["bytes_per_query"] + (b - 1500) * v["entry_bytes"]


def cmd_report(a):
    rows = [json.loads(line) for line in open(a.results) if line.strip()]
    rows.sort(key=lambda r: r["n"])
    targets = (0.95, 0.99)
    print("| N | queries | " + " | ".join("B %d" % b for b in rows[0]["pools"]) +
          " | B for 0.95 | KB u8 / f32 | B for 0.99 | KB u8 / f32 | load |")
    print("|---|---|" + "---|" * (len(rows[0]["pools"]) + 5))
    fits = {t: [] for t in targets}
    for r in rows:
        if r["recall"] is None:  # the planner alone (scale.py plan)
            continue
        cells = []
        for t in targets:
            b = b_for(r["pools"], r["recall"], t)
            cells += [fmt(b), "-" if b is None else "%.0f / %.0f" % (
                enc_bytes(r, "u8", b) / 1000, enc_bytes(r, "f32", b) / 1000)]
            if b is not None:
                fits[t].append((r["n"], b))
        print("| %s | %d | %s | %s | %s |" % (
            "{:,}".format(r["n"]), r["queries"],
            " | ".join("%.4f" % x for x in r["recall"]), " | ".join(cells),
            "-".join(r["load_before"][:1] + r["load_after"][:1])))
    print()
    print("server ms per query (one thread) per pool:")
    for r in [r for r in rows if r["recall"] is not None]:
        print("| %s | %s |" % ("{:,}".format(r["n"]),
                               " | ".join("%.2f" % x for x in r["server_ms"])))
    print()
    print("planner (mess plan, conditional model with its search check) against measured:")
    print("| N | plan queries | model B 0.95 | measured B 0.95 | measured / model | "
          "model x the smaller prefix's ratio |")
    print("|---|---|---|---|---|---|")
    prev = None
    for r in rows:
        if not r.get("plan"):
            continue
        cur = r["plan"]["curve_conditional"]
        mb = b_for([p for p, _ in cur], [x for _, x in cur], 0.95)
        meas = r["recall"] and b_for(r["pools"], r["recall"], 0.95)
        ratio = None if mb is None or meas is None else meas / mb
        fitted = None if prev is None or mb is None else mb * prev
        print("| %s | %s | %s | %s | %s | %s |" % (
            "{:,}".format(r["n"]), r["plan"]["queries"], fmt(mb), fmt(meas),
            fmt(ratio, "%.2f"), fmt(fitted)))
        if ratio is not None:
            prev = ratio
    print()
    for t in targets:
        pts = fits[t]
        if len(pts) < 2:
            print("B for %.2f: fewer than two prefixes reach it" % t)
            continue
        x = np.log([p[0] for p in pts])
        y = np.log([p[1] for p in pts])
        slope, icpt = np.polyfit(x, y, 1)
        sizes = (10 ** 6, 10 ** 7, 10 ** 8)
        ext = {n: math.exp(icpt + slope * math.log(n)) for n in sizes}
        local = (y[-1] - y[-2]) / (x[-1] - x[-2])
        ext_local = {n: pts[-1][1] * (n / pts[-1][0]) ** local for n in sizes}
        print("B for %.2f: log B = %.3f + %.3f log N over N = %s; the last two prefixes "
              "alone: B ~ N^%.3f" % (t, icpt, slope,
                                     ", ".join("{:,}".format(p[0]) for p in pts), local))
        last = [r for r in rows if r["recall"] is not None][-1]
        for n in sizes:
            print("  N %s: B %.0f (last two: %.0f), KB u8 / f32 %.0f / %.0f" % (
                "{:,}".format(n), ext[n], ext_local[n], enc_bytes(last, "u8", ext[n]) / 1000,
                enc_bytes(last, "f32", ext[n]) / 1000))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("curve")
    c.add_argument("--data", required=True, help="a set directory (eval/speed.py data)")
    c.add_argument("--out", required=True, help="JSON lines, appended")
    c.add_argument("--tool", default=os.path.join(ROOT, "build", "mess"))
    c.add_argument("--server", help="a directory built already (read only) ...")
    c.add_argument("--client", help="... and its client file (copied)")
    c.add_argument("--work", default="")
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--queries", type=int, default=1000)
    c.add_argument("--pools", default=POOLS)
    c.add_argument("--plan-queries", type=int, default=100, help="0: no mess plan")
    c.add_argument("--check-shards", type=int, default=2)
    p = sub.add_parser("plan")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tool", default=os.path.join(ROOT, "build", "mess"))
    p.add_argument("--work", default="")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--pools", default=POOLS)
    p.add_argument("--plan-queries", type=int, default=100)
    p.add_argument("--check-shards", type=int, default=2)
    r = sub.add_parser("report")
    r.add_argument("results")
    a = ap.parse_args()
    {"curve": cmd_curve, "plan": cmd_plan, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
