#!/usr/bin/python3
"""The paper's evaluation on our data, with the baselines in the same
process (docs/EVALUATION.md):

  1 Recall@10 vs candidate pool B: No-Noise, (p_D, p_q) = (0.08, 0.08),
    (0.08, 0.12)                                         (paper Fig. 9, Fig. 4)
  2 effect of t in {1, 4, 8, 16} at a fixed pool         (paper Fig. 5)
  3 effect of the query flip p in {0, .08, .10, .12}     (paper Table 3, Fig. 6)
  4 latency and communication breakdown, LAN / WAN model (paper Table 2)
  5 payload encodings f32 / f16 / i8                     (recall, KB/query)
  6 baselines: plaintext hnswlib, faiss IndexBinaryHNSW on our perturbed codes

    /usr/bin/python3 eval/evaluate.py --data datasets/sift --out docs/eval/sift

Each experiment writes a CSV and a PNG into --out, plus tables.md (every
table in Markdown) and machine.txt.  Progress goes to stderr."""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from common import ROOT, Build, DataSet, NETWORKS, log, mess, params_for, sweep, write_csv
import baselines
import paper
import plots

CONFIGS_EXP1 = [("No-Noise", 0.0, 0.0), ("MESS p_q=0.08", 0.08, 0.08),
                ("MESS p_q=0.12", 0.08, 0.12)]


def machine_info(threads):
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import faiss
    import hnswlib  # noqa: F401
    import matplotlib
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem, 1),
        "load_avg_at_start": os.getloadavg(), "threads_used": threads,
        "os": platform.platform(), "python": platform.python_version(),
        "numpy": np.__version__, "faiss": getattr(faiss, "__version__", "?"),
        "hnswlib": _version_of("hnswlib"),
        "matplotlib": matplotlib.__version__, "libmess": mess.version(),
        "commit": _git_commit(),
        "library": mess.library_path, "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def _git_commit():
    import subprocess
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except Exception:
        return "?"


def _version_of(pkg):
    try:
        from importlib.metadata import version
        return version(pkg)
    except Exception:
        return "?"


def pick(rows, pool):
    for r in rows:
        if r["pool"] == pool:
            return r
    raise KeyError("pool %d not in the sweep" % pool)


def first_reaching(rows, target):
    for r in rows:
        if r["recall"] >= target:
            return r
    return rows[-1]


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return "\n".join(out) + "\n"


def f(v, nd=2):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return ("%%.%df" % nd) % v


def main():
    ap = argparse.ArgumentParser(description="MESS evaluation (see module doc)")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "sift"))
    ap.add_argument("--out", default=None, help="output dir (docs/eval/NAME)")
    ap.add_argument("--queries", type=int, default=0, help="use the first N queries (0 = all)")
    ap.add_argument("--base", type=int, default=0,
                    help="index only the first N base vectors (exact truth recomputed)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pools", default="64,100,150,250,400,500,750,1000,1500,2000,3000,4000")
    ap.add_argument("--nonoise-pool", type=int, default=400,
                    help="No-Noise pool for table 2 (paper: 250-400 on SIFT)")
    ap.add_argument("--mess-pool", type=int, default=1500,
                    help="MESS pool for table 2, t and payload runs (paper: 1400-1600, Fig. 5: 1500)")
    ap.add_argument("--small-pool", type=int, default=250,
                    help="second pool of experiments 2 and 5, where recall is not saturated")
    ap.add_argument("--target", type=float, default=0.99,
                    help="recall target choosing B per p in experiment 3")
    ap.add_argument("--faiss-pools", default="500,1500,4000")
    ap.add_argument("--hnsw-target", type=float, default=0.98)
    ap.add_argument("--experiments", default="1,2,3,4,5,6")
    ap.add_argument("--resume", metavar="RESULTS_JSON",
                    help="start from an earlier run's results.json (same data, --base, "
                         "--queries, --pools): its results are kept and its noise sweeps reused "
                         "instead of rebuilt; --experiments names what to add")
    ap.add_argument("--replot", action="store_true",
                    help="redo CSVs, plots and tables from OUT/results.json only")
    a = ap.parse_args()
    if a.replot:
        out = a.out or os.path.join(ROOT, "docs", "eval",
                                    os.path.basename(os.path.normpath(a.data)))
        with open(os.path.join(out, "results.json")) as fh:
            saved = json.load(fh)
        args = argparse.Namespace(**saved["args"])
        if "--target" in sys.argv:  # re-choose experiment 3's pools
            args.target = a.target
        write_outputs(saved["results"], out, args,
                      saved["machine"], argparse.Namespace(**saved["dataset"]))
        return

    ds = DataSet(a.data, a.queries or None, a.base or None)
    out = a.out or os.path.join(ROOT, "docs", "eval", ds.name)
    os.makedirs(out, exist_ok=True)
    pools = [int(x) for x in a.pools.split(",")]
    for need in (a.nonoise_pool, a.mess_pool, a.small_pool):
        if need not in pools:
            pools = sorted(pools + [need])
    exps = set(int(x) for x in a.experiments.split(","))
    T = a.threads
    info = machine_info(T)
    info.update(dataset=ds.dir, base=len(ds.base), queries=len(ds.queries),
                train=len(ds.train), dim=ds.dim, command=" ".join(sys.argv))
    log("data %s: %d base, %d queries, %d train, dim %d; %s, %d cores"
        % (ds.name, len(ds.base), len(ds.queries), len(ds.train), ds.dim,
           info["cpu"], info["cores"]))
    t_start = time.perf_counter()
    res = {"exp1": [], "exp2": [], "exp3_sweeps": [], "exp4": [], "exp5": [],
           "hnswlib": [], "faiss": [], "builds": []}
    sweeps = {}
    if a.resume:
        # A long run in parts: each part starts from the previous results.json.
        with open(a.resume) as fh:
            prev = json.load(fh)
        pa = prev["args"]
        if (prev["dataset"]["n_base"], prev["dataset"]["n_queries"], pa["pools"]) != \
                (len(ds.base), len(ds.queries), a.pools):
            sys.exit("--resume: %s was run on other data, --base, --queries or --pools"
                     % a.resume)
        res.update(prev["results"])
        for name in dict.fromkeys(r["config"] for r in res["exp1"]):
            sweeps[name] = (None, [r for r in res["exp1"] if r["config"] == name])
        info["earlier_parts"] = prev["machine"].pop("earlier_parts", []) + [prev["machine"]]
        log("resumed from %s: sweeps of %s reused" % (a.resume, ", ".join(sweeps) or "none"))
    out_json = os.path.join(out, "results.json")

    def checkpoint(done):
        # results.json after every stage: a stopped run keeps what it finished
        # (--replot turns it into CSVs, plots and tables)
        info["minutes"] = round((time.perf_counter() - t_start) / 60, 1)
        info["complete"] = done
        tmp = out_json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"results": res, "args": vars(a), "machine": info,
                       "dataset": {"name": ds.name, "n_base": len(ds.base),
                                   "n_queries": len(ds.queries)}},
                      fh, indent=0)
        os.replace(tmp, out_json)

    def noted(b):
        res["builds"].append(dict(name=b.name, build_s=b.build_s, train_s=b.train_s,
                                  encode_s=b.encode_s, server_s=b.apply_s,
                                  upload_bytes=b.upload_bytes,
                                  entries=b.server.stats().entries,
                                  server_bytes=b.server.stats().bytes))
        return b

    def rows_of(key, label, params, at, reuse):
        """Rows at pools `at`: reuse(rows) of the kept sweep `key` when there
        is one, else a fresh build named `label` swept and closed."""
        if key in sweeps:
            return reuse(sweeps[key][1])
        b = noted(Build(ds, label, params, T))
        rows = sweep(b, ds, at, T)
        b.close()
        return rows

    # ---- the three noise settings: experiments 1, 3 (p=.08/.12), 4, 5, 6
    if exps & {1, 2, 3, 4, 5, 6}:
        for name, pd, pq in CONFIGS_EXP1:
            with_faiss = name == "MESS p_q=0.08" and 6 in exps
            if name in sweeps and not with_faiss:
                continue
            if name == "MESS p_q=0.12" and not exps & {1, 3}:
                continue
            if name == "No-Noise" and not exps & {1, 4}:
                continue
            if name in sweeps:
                # resumed: the faiss comparison needs the build itself, the
                # sweep is kept
                b = noted(Build(ds, name + " (for faiss)", params_for(ds, pd, pq), T))
            else:
                b = noted(Build(ds, name, params_for(ds, pd, pq), T))
                rows = sweep(b, ds, pools, T)
                sweeps[name] = (b, rows)
                res["exp1"] += rows
            if with_faiss:
                fs = baselines.FaissServer(b, T)
                res["faiss"] = baselines.faiss_vs_ours(
                    b, fs, ds, [int(x) for x in a.faiss_pools.split(",")], T)
                del fs
            b.close()
            checkpoint(False)

    # ---- experiment 3: query flip p with p_D = 0.08
    if 3 in exps:
        res["exp3_sweeps"] = []  # a resumed run redoes an experiment it names
        for p in (0.0, 0.08, 0.10, 0.12):
            key = {0.08: "MESS p_q=0.08", 0.12: "MESS p_q=0.12"}.get(p)
            rows = rows_of(key, "MESS p_q=%.2f" % p, params_for(ds, 0.08, p), pools,
                           lambda kept: [dict(r) for r in kept])
            for r in rows:
                r["p_q"] = p
            res["exp3_sweeps"] += rows
            checkpoint(False)

    two = sorted({a.small_pool, a.mess_pool})

    def at_two(kept):
        return [dict(pick(kept, B)) for B in two]

    # ---- experiment 5: payload encodings
    if 5 in exps:
        res["exp5"] = []
        for enc in ("f32", "f16", "i8"):
            rows = rows_of("MESS p_q=0.08" if enc == "f32" else None, "MESS %s" % enc,
                           params_for(ds, payload=enc), two, at_two)
            for r in rows:
                r["payload"] = enc
                r["entry_bytes"] = params_for(ds, payload=enc).payload_size()
                res["exp5"].append(r)
            checkpoint(False)

    # ---- experiment 2: t at a fixed pool
    if 2 in exps:
        res["exp2"] = []
        for t in (1, 4, 8, 16):
            rows = rows_of("MESS p_q=0.08" if t == 16 else None, "MESS t=%d" % t,
                           params_for(ds, per_item=t), two, at_two)
            for r in rows:
                r["t"] = t
                r["paper_recall_quoted"] = paper.FIG5_SIFT_T[t] / 100 if r["pool"] == 1500 else None
                res["exp2"].append(r)
            checkpoint(False)

    # ---- experiment 6 (and table 2's first row): plaintext hnswlib
    hnsw_chosen = None
    if exps & {4, 6}:
        res["hnswlib"], hnsw_chosen = baselines.plaintext_hnsw(ds, T, a.hnsw_target)
        checkpoint(False)

    # ---- experiment 4: table 2
    if 4 in exps and "No-Noise" in sweeps and "MESS p_q=0.08" in sweeps:
        res["exp4"] = []
        builds = {b["name"]: b for b in res["builds"]}
        h = hnsw_chosen
        res["exp4"].append(dict(scheme="HNSW (hnswlib, ef=%d)" % h["ef"], source="measured",
                                build_s=h["build_s"], server_ms=h["server_ms"], client_ms=None,
                                pool=None, recall=h["recall"], messages=2,
                                kb_per_query=h["kb_per_query"],
                                **{k: h[k] for k in h if k.startswith(("transfer_", "total_"))}))
        for name, pool in (("No-Noise", a.nonoise_pool), ("MESS p_q=0.08", a.mess_pool)):
            r = pick(sweeps[name][1], pool)
            res["exp4"].append(dict(scheme=name, source="measured",
                                    build_s=builds[name]["build_s"], server_ms=r["server_ms"],
                                    client_ms=r["client_ms"], pool=pool, recall=r["recall"],
                                    messages=2, kb_per_query=r["kb_per_query"],
                                    **{k: r[k] for k in r if k.startswith(("transfer_", "total_"))}))
        for name, build_s, nets, msgs, kb in paper.TABLE2_SIFT:
            row = dict(scheme=name, source="quoted", build_s=build_s,
                       server_ms=nets["LAN"][0], client_ms=nets["LAN"][2], pool=None,
                       recall=paper.FIG4_SIFT[name]["LAN"][1], messages=msgs,
                       kb_per_query=kb)
            for net in NETWORKS:
                s_, tr, c_, tot = nets[net]
                row["server_%s_ms" % net.lower()] = s_
                row["client_%s_ms" % net.lower()] = c_
                row["transfer_%s_ms" % net.lower()] = tr
                row["total_%s_ms" % net.lower()] = tot
            res["exp4"].append(row)

    checkpoint(True)
    write_outputs(res, out, a, info, ds)
    log("done in %.1f min" % info["minutes"])


def write_outputs(res, out, a, info, ds):
    P = lambda n: os.path.join(out, n)  # noqa: E731
    n_base = getattr(ds, "n_base", None) or len(ds.base)
    n_queries = getattr(ds, "n_queries", None) or len(ds.queries)
    title = "%s: %d base, %d queries, M=64, kappa=128, efC=300" % (ds.name, n_base, n_queries)
    md = ["<!-- written by eval/evaluate.py; %s -->\n" % info["date_utc"]]
    if res["exp1"]:
        write_csv(P("exp1_recall_vs_pool.csv"), res["exp1"])
        plots.recall_vs_pool(res["exp1"], P("exp1_recall_vs_pool.png"),
                             "Recall@10 vs pool B, t=16\n" + title)
        configs = list(dict.fromkeys(r["config"] for r in res["exp1"]))
        pools = list(dict.fromkeys(r["pool"] for r in res["exp1"]))
        quoted = dict(paper.FIG9_SIFT_008_008)
        md.append("### Experiment 1: Recall@10 vs candidate pool B\n")
        md.append(md_table(["B"] + configs + ["paper (0.08, 0.08), quoted"],
                           [[str(B)] + [f(next(r["recall"] for r in res["exp1"]
                                                  if r["config"] == c and r["pool"] == B), 4)
                                        for c in configs] + [f(quoted.get(B), 3)]
                            for B in pools]))
    if res["exp2"]:
        write_csv(P("exp2_effect_of_t.csv"), res["exp2"])
        plots.effect_of_t(res["exp2"], P("exp2_effect_of_t.png"),
                          "Recall@10 vs t, p_D=p_q=0.08 (%s)" % ds.name)
        md.append("\n### Experiment 2: effect of t (p_D = p_q = 0.08)\n")
        md.append(md_table(["t", "B", "Recall@10", "unique candidates", "KB/query", "server ms",
                            "client ms", "paper SIFT Recall at B=1500 (quoted)"],
                           [[str(r["t"]), str(r["pool"]), f(r["recall"], 4), f(r["unique"], 0),
                             f(r["kb_per_query"], 1), f(r["server_ms"]), f(r["client_ms"]),
                             f(r["paper_recall_quoted"], 4)] for r in res["exp2"]]))
    if res["exp3_sweeps"]:
        write_csv(P("exp3_query_flip_sweeps.csv"), res["exp3_sweeps"])
        table = []
        for p in dict.fromkeys(r["p_q"] for r in res["exp3_sweeps"]):
            rr = [r for r in res["exp3_sweeps"] if r["p_q"] == p]
            r = dict(first_reaching(rr, a.target))
            r["target"] = a.target
            table.append(r)
        write_csv(P("exp3_query_flip.csv"), table)
        plots.query_flip(table, res["exp3_sweeps"], P("exp3_query_flip.png"),
                         "Query flip p (p_D = 0.08, t = 16; %s); B = smallest grid pool with "
                         "Recall@10 >= %g" % (ds.name, a.target))
        md.append("\n### Experiment 3: query flip p (p_D = 0.08), smallest grid B with "
                  "Recall@10 >= %g\n" % a.target)
        rows = []
        for r in table:
            q = paper.TABLE3_SIFT100M.get(round(r["p_q"], 2))
            for net in ("LAN", "WAN"):
                n = net.lower()
                rows.append([f(r["p_q"]), net, str(r["pool"]), f(r["recall"], 4),
                             f(r["server_ms"]), f(r["transfer_%s_ms" % n]), f(r["client_ms"]),
                             f(r["total_%s_ms" % n]), f(r["kb_per_query"], 1),
                             "%d / %s / %s" % (q[0], f(q[2 if net == "LAN" else 3][3]), f(q[1]))
                             if q else "-"])
        md.append(md_table(["p", "net", "B", "Recall@10", "server ms", "transfer ms",
                            "client ms", "total ms", "KB/query",
                            "paper SIFT100M B / total ms / KB (quoted)"], rows))
    if res["exp4"]:
        write_csv(P("exp4_latency_comm.csv"), res["exp4"])
        plots.latency_table(res["exp4"], P("exp4_latency_comm.png"),
                            "Latency per query, %s" % ds.name)
        plots.recall_vs_latency(res["exp4"], P("exp4_recall_vs_latency.png"),
                                "Recall@10 vs latency (paper Fig. 4, SIFT panel; grey = quoted)")
        md.append("\n### Experiment 4: latency and communication (paper Table 2)\n")
        rows = []
        for r in res["exp4"]:
            for net in ("WAN", "LAN"):
                n = net.lower()
                srv = r.get("server_%s_ms" % n, r["server_ms"])
                cli = r.get("client_%s_ms" % n, r["client_ms"])
                bs = r["build_s"] if r["scheme"] != "Compass" else paper.TABLE2_COMPASS_BUILD
                rows.append([r["scheme"], r["source"], f(bs, 2), net, f(srv),
                             f(r["transfer_%s_ms" % n]), f(cli), f(r["total_%s_ms" % n]),
                             f(r["messages"], 0 if r["messages"] == 2 else 2),
                             f(r["kb_per_query"]), f(r["recall"], 4),
                             str(r["pool"]) if r["pool"] else "-"])
        md.append(md_table(["scheme", "source", "build s", "net", "server ms", "transfer ms",
                            "client ms", "total ms", "messages", "KB/query", "Recall@10", "B"],
                           rows))
    if res["exp5"]:
        write_csv(P("exp5_payload.csv"), res["exp5"])
        plots.payloads(res["exp5"], P("exp5_payload.png"),
                       "Payload encodings, p_D=p_q=0.08 (%s)" % ds.name)
        md.append("\n### Experiment 5: payload encodings (p_D = p_q = 0.08)\n")
        md.append(md_table(["payload", "B", "entry bytes", "Recall@10", "KB/query", "client ms",
                            "LAN total ms", "WAN total ms"],
                           [[r["payload"], str(r["pool"]), str(r["entry_bytes"]), f(r["recall"], 4),
                             f(r["kb_per_query"], 1), f(r["client_ms"]), f(r["total_lan_ms"]),
                             f(r["total_wan_ms"])] for r in res["exp5"]]))
    if res["hnswlib"]:
        write_csv(P("exp6_hnswlib.csv"), res["hnswlib"])
    if res["faiss"]:
        write_csv(P("exp6_faiss_binary_hnsw.csv"), res["faiss"])
    if res["hnswlib"] and res["faiss"]:
        plots.baselines(res["hnswlib"], res["faiss"], P("exp6_baselines.png"),
                        "Baselines in the same process (%s)" % ds.name)
    if res["hnswlib"] or res["faiss"]:
        md.append("\n### Experiment 6: baselines in the same process\n")
        if res["hnswlib"]:
            md.append("plaintext hnswlib (M=16, efConstruction=300), 1 thread per query:\n\n")
            md.append(md_table(["ef", "Recall@10", "ms/query", "build s"],
                               [[str(r["ef"]), f(r["recall"], 4), f(r["server_ms"], 3),
                                 f(r["build_s"])] for r in res["hnswlib"]]))
        if res["faiss"]:
            md.append("\nfaiss IndexBinaryHNSW (M=16, efConstruction=300, efSearch = budget) vs "
                      "our hnsw_bin on the same perturbed codes and requests (p_D = p_q = 0.08),"
                      " 1 thread:\n\n")
            md.append(md_table(["B", "Recall@10 ours", "Recall@10 faiss",
                                "shard Hamming recall ours", "shard Hamming recall faiss",
                                "server ms ours", "server ms faiss (all)",
                                "faiss search calls only", "CPU ms ours", "CPU ms faiss",
                                "build s ours", "build s faiss"],
                               [[str(r["pool"]), f(r["recall_ours"], 4), f(r["recall_faiss"], 4),
                                 f(r["shard_hamming_recall_ours"], 4),
                                 f(r["shard_hamming_recall_faiss"], 4), f(r["server_ms_ours"]),
                                 f(r["server_ms_faiss"]), f(r["faiss_search_only_ms"]),
                                 f(r.get("server_cpu_ms_ours")), f(r.get("server_cpu_ms_faiss")),
                                 f(r["build_s_ours"], 1), f(r["build_s_faiss"], 1)]
                                for r in res["faiss"]]))
    if res["builds"]:
        write_csv(P("builds.csv"), res["builds"])
        md.append("\n### Builds (offline phase)\n")
        md.append(md_table(["configuration", "total s", "hash training s", "client encode s",
                            "server insert s", "upload MB", "entries", "server MB"],
                           [[b["name"], f(b["build_s"], 1), f(b["train_s"], 1),
                             f(b["encode_s"], 1), f(b["server_s"], 1),
                             f(b["upload_bytes"] / 1e6, 1), str(b["entries"]),
                             f(b["server_bytes"] / 1e6, 1)] for b in res["builds"]]))
    md.append("\n### Machine\n")
    md.append(md_table(["item", "value"], [
        ["CPU", "%s, %s cores, %s GiB RAM" % (info.get("cpu"), info.get("cores"),
                                              info.get("memory_gib"))],
        ["load average at start (1/5/15 min)",
         " / ".join("%.1f" % x for x in info.get("load_avg_at_start", []))],
        ["threads used", str(info.get("threads_used"))],
        ["OS", str(info.get("os"))],
        ["software", "Python %s, numpy %s, faiss %s, hnswlib %s, matplotlib %s, libmess %s"
         % (info.get("python"), info.get("numpy"), info.get("faiss"), info.get("hnswlib"),
            info.get("matplotlib"), info.get("libmess"))],
        ["source commit", str(info.get("commit", "?"))],
        ["data", "%s: %s base, %s queries, %s learn, dim %s"
         % (info.get("dataset"), info.get("base"), info.get("queries"), info.get("train"),
            info.get("dim"))],
        ["command", "`%s`" % info.get("command")],
        ["date (UTC), run time", "%s, %s min" % (info.get("date_utc"), info.get("minutes"))],
    ]))
    with open(P("tables.md"), "w") as fh:
        fh.write("\n".join(md))
    with open(P("machine.json"), "w") as fh:
        json.dump(info, fh, indent=1)
    log("wrote %s" % P("tables.md"))


if __name__ == "__main__":
    main()
