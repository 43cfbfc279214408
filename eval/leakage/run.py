#!/usr/bin/python3
"""run.py - the empirical cross-shard inference evaluation (docs/LEAKAGE.md).

For each index prefix and real challenge pair (x0, x1) at normalised angle
<= --angle, runs calibration and held-out trials in both neighbouring worlds
(fresh route, storage coins and graphs per trial, through libmess), attacks
each server view with MDS, Topology, GSGM and Joint (attack.py), and turns
the held-out distribution of the recovered target distance U into xi_link
with the exact randomized-response profile (mess.account), beside the
single-shard and complete-view values of the same pair.

Writes OUT/results.json and OUT/tables.md; prints progress on stderr and,
as its last line, one JSON object {"rows": [{"method", "n", "pair",
"xi_single", "xi_link", "xi_complete", "accuracy", ...}, ...]}.

Bounded default (make eval-leakage): prefix 2000, 2 pairs, 2 calibration and
8 held-out trials per world.  --full: prefixes 5000 and 10000 (what the
bundled set holds), 5 pairs, 30 calibration and 300 held-out trials per world
(hours; --trials/--calib/--pairs/--prefix override either preset).
"""
import argparse
import itertools
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))   # eval/common.py
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from common import log, mess  # noqa: E402
import attack as A  # noqa: E402
import worlds as W  # noqa: E402

GRID = {"mds_dims": (4, 8, 16), "gsgm_hops": (0, 1, 2, 3), "joint_cycle": (0.0, 1.0)}
# which method each hyper-parameter belongs to (calibrated on that method)
OWNER = {"mds_dims": "MDS", "gsgm_hops": "GSGM", "joint_cycle": "Joint"}
# calibration keeps the views' seed distances for its second pass up to this
# many bytes (a 20k view's are 0.3 GB, computed in about 13 s of CPU)
KEEP_BYTES = 1 << 30


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "datasets", "sift"))
    ap.add_argument("--out", default=None, help="directory for results.json, tables.md")
    ap.add_argument("--full", action="store_true", help="the paper's configuration")
    ap.add_argument("--prefix", type=int, nargs="+", default=None)
    ap.add_argument("--pairs", type=int, default=None)
    ap.add_argument("--first-pair", type=int, default=0,
                    help="skip the pairs before this one (each pair's randomness depends "
                         "only on --seed, the prefix and its number, so a run can be "
                         "extended pair by pair)")
    ap.add_argument("--calib", type=int, default=None, help="calibration trials per world")
    ap.add_argument("--trials", type=int, default=None, help="held-out trials per world")
    ap.add_argument("--angle", type=float, default=0.05)
    ap.add_argument("--delta", type=float, default=0.01)
    ap.add_argument("--seed-frac", type=float, default=0.2)
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--per-item", type=int, default=16)
    ap.add_argument("--metric", default="l2",
                    help="l2, ip or cos; kappa and the flips start from that metric's "
                         "defaults (mess_params_default_for: l2 the paper's 128 and 0.08, "
                         "ip/cos 64 and 0.016)")
    ap.add_argument("--bits", type=int, default=None, help="kappa (default: the metric's)")
    ap.add_argument("--p-store", type=float, default=None,
                    help="p_D (default: the metric's)")
    ap.add_argument("--p-query", type=float, default=None,
                    help="effective query flip p_q (default: the metric's)")
    ap.add_argument("--train-sample", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7, help="experiment seed")
    ap.add_argument("--no-ci", action="store_true")
    ap.add_argument("--order", choices=("prefix", "pair"), default="prefix",
                    help="prefix: all pairs of one prefix, then the next; pair: the "
                         "first pair of every prefix, then the second, ... (a run "
                         "stopped early still covers every prefix)")
    ap.add_argument("--client-dir", default=None, help="where the saved clients go")
    a = ap.parse_args(argv)
    full = dict(prefix=[5000, 10000], pairs=5, calib=30, trials=300)
    small = dict(prefix=[2000], pairs=2, calib=2, trials=8)
    for k, v in (full if a.full else small).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    return a


def calibrate(attacks, d, p):
    """Picks each hyper-parameter from GRID by the mean number of correct
    associations of its method on the calibration views: mds_dims by MDS
    (one eigen-decomposition per shard for the three values), gsgm_hops by
    GSGM (each score depends on its own parameter only; all hop counts from
    one pass of filtering over the columns GSGM uses, Attack.gsgm_sweep),
    then joint_cycle by Joint with the two chosen.  View by view; a view's
    seed distances (0.3 GB at 20k) are kept for the Joint pass while all
    views' fit in KEEP_BYTES, else computed again."""
    cfg = {k: v[0] for k, v in GRID.items()}
    tot = {(key, val): 0 for key in GRID for val in GRID[key]}

    def correct(tr, chosen):
        truth = dict(tr["truth"])
        return sum(truth.get(s) == node for s, node, _ in chosen)

    kept = []     # the views' Attacks, kept for the Joint pass while they fit
    size = 0
    for tr in attacks:
        at = A.Attack(tr["shards"], tr["know"], p.per_item, cfg)
        size += sum(h.nbytes for h in at.H)
        kept.append(at if size <= KEEP_BYTES else None)
        for val in GRID["mds_dims"]:
            tot["mds_dims", val] += correct(tr, at.with_cfg({"mds_dims": val}).run("MDS"))
        # every hop count from one pass of filtering (attack.Attack.gsgm_sweep)
        for val, chosen in at.gsgm_sweep(GRID["gsgm_hops"]).items():
            tot["gsgm_hops", val] += correct(tr, chosen)
    for key in ("mds_dims", "gsgm_hops"):
        cfg[key] = max(GRID[key], key=lambda v: (tot[key, v], -GRID[key].index(v)))
    for k, tr in enumerate(attacks):
        at = kept[k].with_cfg(cfg) if kept[k] is not None else \
            A.Attack(tr["shards"], tr["know"], p.per_item, cfg)
        kept[k] = None
        at.all_scores()
        for val in GRID["joint_cycle"]:
            tot["joint_cycle", val] += correct(tr, at.with_cfg({"joint_cycle": val})
                                               .run("Joint"))
        at._filtered.clear()      # shared with its parent: all shards' signals
    key = "joint_cycle"
    cfg[key] = max(GRID[key], key=lambda v: (tot[key, v], -GRID[key].index(v)))
    return cfg


def evaluate_pair(ex, a, n, pi, base, i, j, dth, t_start=None, progress=None):
    """Calibration and held-out trials of pair (base[i], base[j]) in both
    worlds; returns (rows, detail).  progress(rows, detail), if given, gets
    the partial result after every held-out trial but the last."""
    p = ex.p
    t_start = t_start or time.time()
    x0, x1 = base[i], base[j]
    bg = np.delete(base, [i, j], axis=0)
    d = ex.pair_distances(x0, x1)
    codes = [ex.client.codes(x0), ex.client.codes(x1)]
    rng = np.random.default_rng([a.seed, n, pi])
    key = itertools.count(((a.seed & 0xff) << 32) + (n << 12) + (pi << 8))
    # calibration: its own ids (keys) and rng, disjoint from held-out
    cal = []
    for tno in range(a.calib):
        k = next(key)
        for b in (0, 1):
            cal.append(ex.trial((x0, x1), b, k, a.seed_frac, rng, background=bg))
    cfg = calibrate(cal, d, p) if cal else {}
    del cal
    log("n=%d pair %d (d_theta %.4f, indices %d %d): calibrated %s"
        % (n, pi, dth, i, j, cfg))
    key = itertools.count(((a.seed & 0xff) << 32) + (n << 12) + (pi << 8) + 128)
    hrng = np.random.default_rng([a.seed, n, pi, 1])
    res = {m: {"U": [], "correct": [], "wrong": [], "C": []} for m in A.METHODS}
    ref_d, route_u, ref_s = [], [], []
    for tno in range(a.trials):
        k = next(key)
        for b in (0, 1):
            tr = ex.trial((x0, x1), b, k, a.seed_frac, hrng, background=bg)
            out = A.Attack(tr["shards"], tr["know"], p.per_item, cfg).run_all()
            for m in A.METHODS:
                U, corr, wrong = W.score_trial(tr, out[m], d, codes[b], p.kappa)
                res[m]["U"].append(U)
                res[m]["correct"].append(corr)
                res[m]["wrong"].extend(wrong)
                res[m]["C"].append(W.recovered_shards(tr, out[m]))
            ref_d.append(int(d[tr["ref"][0]]))
            ref_s.append(int(tr["ref"][0]))
            route_u.append(int(sum(d[s] for s, _ in tr["truth"])))
        if (tno + 1) % max(1, a.trials // 4) == 0:
            log("  trial %d/%d (%.0f s)" % (tno + 1, a.trials, time.time() - t_start))
        if progress is not None and tno + 1 < a.trials:
            # a long pair keeps what it has: rows of the trials so far,
            # without intervals, marked partial
            progress(*pair_rows(a, p, n, pi, i, j, dth, d, cfg, res, ref_d, route_u,
                                ci=False, quiet=True, ref_s=ref_s))
    return pair_rows(a, p, n, pi, i, j, dth, d, cfg, res, ref_d, route_u,
                     ci=not a.no_ci, ref_s=ref_s)


def pair_rows(a, p, n, pi, i, j, dth, d, cfg, res, ref_d, route_u, ci, quiet=False,
              ref_s=None):
    """The rows (one per method) and the detail record of a pair from the
    held-out results so far."""
    rows = []
    acct = a.p_store > 0
    xs = W.xi_single(a.p_store, d, a.delta) if acct else float("inf")
    xc = W.xi_complete(a.p_store, d, p.per_item, a.delta) if acct else float("inf")
    xr = W.xi_from_us(a.p_store, ref_d, a.delta) if acct else float("inf")
    for m in A.METHODS:
        r = res[m]
        row = {"method": m, "n": n, "pair": pi, "d_theta": round(dth, 5),
               "trials": len(r["U"]),
               "xi_single": round(xs, 3),
               # the reference shard mixed exactly over the shards outside
               # the recovered ones (worlds.mixed_logw), not sampled
               "xi_link": round(W.xi_link_mixed(a.p_store, d, r["C"], a.delta), 3)
               if acct else float("inf"),
               "xi_link_sampled": round(W.xi_from_us(a.p_store, r["U"], a.delta), 3)
               if acct else float("inf"),
               "xi_complete": round(xc, 3),
               "accuracy": round(float(np.mean(r["correct"])) / (p.per_item - 1), 4),
               "recovered_mean": round(float(np.mean(r["correct"])), 3),
               "xi_ref_only": round(xr, 3),
               "wrong_block_dist": round(float(np.mean(r["wrong"])), 4)
               if r["wrong"] else None,
               "cfg": cfg}
        if acct and ci and len(r["U"]) >= 4:
            lo, hi = W.bootstrap_ci_mixed(a.p_store, d, r["C"], a.delta)
            row["xi_link_ci"] = [round(lo, 3), round(hi, 3)]
        if not ci:
            row["partial"] = True
        rows.append(row)
        if not quiet:
            log("  %-8s acc %.3f  xi single %.2f  link %.2f  complete %.2f  wrong %.3f"
                % (m, row["accuracy"], xs, row["xi_link"], xc,
                   row["wrong_block_dist"] or float("nan")))
    det = {"n": n, "pair": pi, "indices": [i, j], "d_theta": dth,
           "d": [int(v) for v in d], "cfg": cfg,
           "U": {m: list(res[m]["U"]) for m in A.METHODS},
           "C": {m: list(res[m]["C"]) for m in A.METHODS},
           "ref_d": list(ref_d), "route_u": list(route_u)}
    if ref_s is not None:
        det["ref_shard"] = list(ref_s)
    return rows, det


def main(argv=None):
    a = parse(argv)
    ds = os.path.abspath(a.data)
    base_all = mess.read_f32(vecs_path(ds, "base"))
    train = mess.read_f32(vecs_path(ds, "learn"))
    p = params(a, base_all.shape[1])
    cdir = a.client_dir or os.path.join(HERE, "..", "..", "build", "leakage")
    os.makedirs(cdir, exist_ok=True)
    rows, detail = [], []
    t_start = time.time()
    ns = []
    for n in a.prefix:
        if n > len(base_all):
            log("prefix %d: the set holds only %d vectors, skipped" % (n, len(base_all)))
        else:
            ns.append(n)
    # the near pairs of every prefix from one pass over the longest
    cands = near_cached(ds, base_all[:max(ns)], a.angle, cdir) if ns else []
    work = []
    for n in ns:
        pairs = W.near_pairs(base_all[:n], a.angle, a.pairs, cands=cands)
        if not pairs:
            log("prefix %d: no pair within d_theta <= %g" % (n, a.angle))
        work.extend((n, pi, pr) for pi, pr in enumerate(pairs) if pi >= a.first_pair)
    if a.order == "pair":     # every prefix's first pair, then every second, ...
        work.sort(key=lambda w: (w[1], ns.index(w[0])))
    cpath = client_path(a, ds, cdir)
    exps = {}
    for n, pi, (dth, i, j) in work:
        if n not in exps:
            exps[n] = W.Experiment(p, train, base_all[:n], cpath, threads=a.threads)

        def partial(r, det):
            write(a, ds, rows + r, detail + [det], t_start, draw=False)

        r, det = evaluate_pair(exps[n], a, n, pi, base_all[:n], i, j, dth, t_start,
                               progress=partial)
        rows.extend(r)
        detail.append(det)
        write(a, ds, rows, detail, t_start)  # a long run keeps what it has
    write(a, ds, rows, detail, t_start)
    log(ordering_line(rows))
    print(json.dumps({"rows": [dict({k: r[k] for k in ("method", "n", "pair", "xi_single",
                                                       "xi_link", "xi_complete", "accuracy")},
                                    **({"xi_link_ci": r["xi_link_ci"]}
                                       if "xi_link_ci" in r else {}))
                               for r in rows]}))
    return 0


def near_cached(ds, base, angle, cdir):
    """near_candidates of `base` (a prefix of DS/base), cached in cdir under
    the set's name, the prefix, the angle and the base file's size and
    mtime: the scan is O(n^2 dim), minutes at 20k x 512 on the reference
    BLAS, and every piece of a grid run and eval/leakage/bounds.py need it."""
    path = vecs_path(ds, "base")
    st = os.stat(path)
    name = os.path.join(cdir, ".near-%s-%d-%g-%d-%d.npz" % (
        os.path.basename(os.path.normpath(ds)), len(base), angle, st.st_size,
        st.st_mtime_ns))
    if os.path.exists(name):
        z = np.load(name)
        return list(zip(z["d"].tolist(), z["i"].tolist(), z["j"].tolist()))
    c = W.near_candidates(base, angle)
    tmp = name + ".%d.tmp.npz" % os.getpid()
    np.savez(tmp, d=np.array([t[0] for t in c], np.float64),
             i=np.array([t[1] for t in c], np.int64), j=np.array([t[2] for t in c], np.int64))
    os.replace(tmp, name)
    return c


def client_path(a, ds, cdir):
    """The saved client holds the hashes AND the flips it applies: its name
    carries the data set and every parameter that shapes it (it used to
    carry only M, t, kappa and the sample, so a SIFT client at p_D 0.08
    would have been reused for another set or another p_D)."""
    return os.path.join(cdir, ".leakage-client-%s-%s-%d-%d-%d-%d-%g-%g.bin" %
                        (os.path.basename(os.path.normpath(ds)), a.metric, a.shards,
                         a.per_item, a.bits, a.train_sample, a.p_store, a.p_query))


def vecs_path(ds, stem):
    """DIR/stem.bvecs (SIFT sets) or DIR/stem.fvecs (the text sets)."""
    for ext in ("bvecs", "fvecs"):
        path = os.path.join(ds, stem + "." + ext)
        if os.path.exists(path):
            return path
    raise SystemExit("%s: neither %s.bvecs nor %s.fvecs" % (ds, stem, stem))


def params(a, dim):
    """The metric's defaults (mess.Params without kappa), then the flags that
    were given; a.bits, a.p_store and a.p_query are set to what is used."""
    kw = {} if a.p_query is None else {"p_query": a.p_query}
    p = mess.Params(dim, metric=a.metric, shards=a.shards, per_item=a.per_item,
                    train_sample=a.train_sample, **kw)
    if a.bits is not None:
        p.kappa = a.bits
    if a.p_store is not None:
        p.p_store = a.p_store
    p.check()
    a.bits, a.p_store, a.p_query = int(p.kappa), float(p.p_store), float(p.p_query)
    return p


def ordering_line(rows):
    """How often xi_single <= xi_link <= xi_complete holds: for the point
    values, and for the 95% interval's ends (lower end >= xi_single, upper
    end <= xi_complete)."""
    n = len(rows)
    pt = sum(r["xi_single"] <= r["xi_link"] <= r["xi_complete"] for r in rows)
    ci = [r for r in rows if "xi_link_ci" in r]
    lo = sum(r["xi_link_ci"][0] >= r["xi_single"] for r in ci)
    hi = sum(r["xi_link_ci"][1] <= r["xi_complete"] for r in ci)
    return ("ordering: xi_single <= xi_link <= xi_complete in %d of %d rows; of %d rows "
            "with an interval, its upper end <= xi_complete in %d and its lower end >= "
            "xi_single in %d" % (pt, n, len(ci), hi, lo))


def write(a, ds, rows, detail, t_start, draw=True):
    config = {k: getattr(a, k) for k in ("prefix", "pairs", "calib", "trials", "angle",
                                         "delta", "seed_frac", "shards", "per_item",
                                         "metric", "bits", "p_store", "p_query", "seed",
                                         "first_pair", "order")}
    config["data"] = os.path.basename(os.path.normpath(ds))
    config["seconds"] = round(time.time() - t_start, 1)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"config": config, "rows": rows, "detail": detail}, f, indent=1)
        with open(os.path.join(a.out, "tables.md"), "w") as f:
            f.write(tables(rows, config))
        if draw:
            plot(rows, os.path.join(a.out, "xi.png"))


def plot(rows, path):
    """xi_single, xi_link per method and xi_complete per (n, pair), log
    scale; skipped without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    keys = sorted({(r["n"], r["pair"]) for r in rows})
    if not keys:
        return
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(keys)), 3.6))
    series = ["single"] + list(A.METHODS) + ["complete"]
    w = 0.8 / len(series)
    for k, name in enumerate(series):
        ys, lo, hi = [], [], []
        for n, pi in keys:
            rs = {r["method"]: r for r in rows if r["n"] == n and r["pair"] == pi}
            any_r = next(iter(rs.values()))
            if name == "single":
                y = any_r["xi_single"]
            elif name == "complete":
                y = any_r["xi_complete"]
            else:
                y = rs[name]["xi_link"]
            ci = rs[name].get("xi_link_ci") if name in rs else None
            ys.append(y)
            lo.append(y - ci[0] if ci else 0)
            hi.append(ci[1] - y if ci else 0)
        xs = np.arange(len(keys)) + (k - len(series) / 2 + 0.5) * w
        ax.bar(xs, ys, w, label=name if name in A.METHODS else "xi_" + name,
               yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], capsize=2)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(keys)))
    ax.set_xticklabels(["n=%d\npair %d" % k for k in keys])
    ax.set_ylabel("xi at delta_0 = 0.01")
    ax.set_title("xi_link of the four procedures against the two bounds")
    ax.legend(fontsize=7, ncol=3, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def tables(rows, config):
    out = ["<!-- generated by eval/leakage/run.py; config: %s -->" % json.dumps(config), "",
           "| n | pair | d_theta | method | trials | accuracy | recovered of t-1 "
           "| wrong-block distance | xi_single | xi_link (95% CI) | xi_complete |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = " (%.1f-%.1f)" % tuple(r["xi_link_ci"]) if "xi_link_ci" in r else \
            " (partial: stopped)" if r.get("partial") else ""
        wb = "%.3f" % r["wrong_block_dist"] if r["wrong_block_dist"] is not None else "-"
        out.append("| %d | %d | %.4f | %s | %d | %.3f | %.2f | %s | %.2f | %.2f%s | %.2f |"
                   % (r["n"], r["pair"], r["d_theta"], r["method"], r["trials"],
                      r["accuracy"], r["recovered_mean"], wb, r["xi_single"],
                      r["xi_link"], ci, r["xi_complete"]))
    out.append("")
    # the paper's summary: largest xi_link over the four methods per config
    out.append("| n | pair | best method | largest xi_link | xi_single | xi_complete |")
    out.append("|---|---|---|---|---|---|")
    key = sorted({(r["n"], r["pair"]) for r in rows})
    for n, pi in key:
        rs = [r for r in rows if r["n"] == n and r["pair"] == pi]
        b = max(rs, key=lambda r: r["xi_link"])
        out.append("| %d | %d | %s | %.2f | %.2f | %.2f |"
                   % (n, pi, b["method"], b["xi_link"], b["xi_single"], b["xi_complete"]))
    out.append("")
    out.append(ordering_line(rows) + ".")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
