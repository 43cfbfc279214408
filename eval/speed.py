#!/usr/bin/python3
"""eval/speed.py - libmess against plaintext hnswlib on the same raw vectors
(issue 32): build time with the same thread count, recall at every pool of
the recall curve per efConstruction, in one invocation.

    /usr/bin/python3 eval/speed.py data --src /work/data/large --n 58500 --out build/speed/large58k
    nice /usr/bin/python3 eval/speed.py build --data build/speed/large58k \
        --efc 300,100 --tools build/mess,/work/base/build/mess --threads 2 \
        --pools 250,500,1000,1500,3000 --rounds 1

`data` writes a TEXMEX-style directory (base.bvecs of the first --n base
vectors, learn.bvecs, query.bvecs of the first --queries queries and
groundtruth.ivecs: the exact top 100 by L2 over that base), which `mess
bench server --data` and scripts/hnswlib_ref.py read too.

`build` runs, per round and in rotating order, hnswlib's add_items (M 16,
efConstruction 300, --threads) and `mess init` + `mess insert --threads`
for every tool and efConstruction (d8q8, the defaults but for
--ef-construction; same seed file, so the same client keys and hashes);
the insert's wall seconds (its JSON: client = encode, server = apply; the
rest is the save) and CPU seconds (all threads) beside hnswlib's.  In the
first round, right after each build of the first tool, `mess query` at
every pool gives recall@10 per efConstruction (the recall curve: the
graphs' bytes do not depend on efConstruction, so recall per byte moves
only with recall; --no-recall skips it).  Load average printed before and
after; the last line is JSON.

`hnswlib` builds hnswlib's index alone, in --chunks timed slices, and
saves it for `mess bench throughput --hnswlib-index` (the 1M set's in
docs/PERFORMANCE.md):

    nice /usr/bin/python3 eval/speed.py hnswlib --data /work/data/1m --index 1m.bin
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_vecs(path):
    raw = np.fromfile(path, dtype=np.uint8)
    dim = int(raw[:4].view(np.int32)[0])
    if path.endswith(".bvecs"):
        return raw.reshape(-1, 4 + dim)[:, 4:]
    return raw.reshape(-1, 4 + 4 * dim)[:, 4:].copy().view(
        np.float32 if path.endswith(".fvecs") else np.int32)


def write_vecs(path, x):
    x = np.ascontiguousarray(x)
    n, d = x.shape
    head = np.frombuffer(np.int32(d).tobytes(), dtype=np.uint8)
    rec = np.empty((n, 4 + d * x.itemsize), dtype=np.uint8)
    rec[:, :4] = head
    rec[:, 4:] = x.view(np.uint8).reshape(n, -1)
    rec.tofile(path)


def load_avg():
    return open("/proc/loadavg").read().split()[:3]


def cmd_data(a):
    os.makedirs(a.out, exist_ok=True)
    base = read_vecs(os.path.join(a.src, "base.bvecs"))[: a.n]
    query = read_vecs(os.path.join(a.src, "query.bvecs"))[: a.queries]
    write_vecs(os.path.join(a.out, "base.bvecs"), base)
    write_vecs(os.path.join(a.out, "query.bvecs"), query)
    shutil.copyfile(os.path.join(a.src, "learn.bvecs"), os.path.join(a.out, "learn.bvecs"))
    b = base.astype(np.float32)
    bn = (b * b).sum(1)
    gt = np.empty((len(query), 100), dtype=np.int32)
    for i in range(0, len(query), 200):
        q = query[i:i + 200].astype(np.float32)
        d = bn[None, :] - 2 * q @ b.T
        top = np.argpartition(d, 100, axis=1)[:, :100]
        order = np.argsort(np.take_along_axis(d, top, 1), axis=1, kind="stable")
        gt[i:i + 200] = np.take_along_axis(top, order, 1)
    write_vecs(os.path.join(a.out, "groundtruth.ivecs"), gt)
    print(json.dumps({"out": a.out, "n": len(base), "queries": len(query)}))


def hnswlib_build(base, threads, chunks=1, save=""):
    """wall and CPU seconds (all threads) of hnswlib's build; with chunks > 1
    add_items runs on that many slices in turn and prints each one's
    time, so a build stopped part way still tells its rate; save: the
    index written there after the timing (the file scripts/hnswlib_ref.py
    --index and `mess bench throughput --hnswlib-index` load)."""
    import hnswlib
    t0, c0 = time.perf_counter(), time.process_time()
    idx = hnswlib.Index(space="l2", dim=base.shape[1])
    idx.init_index(max_elements=base.shape[0], M=16, ef_construction=300, random_seed=1)
    cut = np.linspace(0, base.shape[0], chunks + 1).astype(int)
    for lo, hi in zip(cut[:-1], cut[1:]):
        idx.add_items(base[lo:hi], np.arange(lo, hi), num_threads=threads)
        if chunks > 1:
            print("  hnswlib: %d items added, %.1f s wall, %.1f s CPU, load %s"
                  % (hi, time.perf_counter() - t0, time.process_time() - c0,
                     " ".join(load_avg())), flush=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if save:
        idx.save_index(save)
    return wall, cpu


def cmd_hnswlib(a):
    """hnswlib's build alone (M 16, efC 300, seed 1, as
    scripts/hnswlib_ref.py builds it), timed per slice, its index kept."""
    base = read_vecs(os.path.join(a.data, "base.bvecs")).astype(np.float32)
    wall, cpu = hnswlib_build(base, a.threads, a.chunks, a.index)
    print(json.dumps({"data": a.data, "n": len(base), "threads": a.threads,
                      "hnswlib_build_s": round(wall, 1), "hnswlib_build_cpu_s": round(cpu, 1),
                      "index": a.index, "load_after": " ".join(load_avg())}))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit("failed: %s" % " ".join(cmd))
    return json.loads(r.stdout.strip().splitlines()[-1])


def mess_build(tool, data, work, efc, threads, seed, keep=""):
    """a server built in work (or, with keep, in keep and keep.client, with a
    production client: no seed, so queries never rewrite its file)."""
    c, s = os.path.join(work, "c"), os.path.join(work, "s")
    if keep:
        c, s = keep + ".client", keep
    for p in (c, s):
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    subprocess.run([tool, "init", "--client", c, "--server", s, "--train",
                    os.path.join(data, "learn.bvecs"), "--ef-construction", str(efc),
                    "--threads", str(threads)] + ([] if keep else ["--seed-file", seed]),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0, c0 = time.perf_counter(), child_cpu()
    j = run([tool, "insert", "--client", c, "--server", s, "--threads", str(threads),
             os.path.join(data, "base.bvecs")])
    j["wall_s"] = time.perf_counter() - t0
    j["cpu_s"] = child_cpu() - c0
    return j, c, s


def recall_curve(a, tool, c, s, pools, work):
    """recall@10 of `mess query` at every pool on server s."""
    q, gt = os.path.join(work, "q.bvecs"), os.path.join(work, "gt.ivecs")
    write_vecs(q, read_vecs(os.path.join(a.data, "query.bvecs"))[: a.queries or None])
    write_vecs(gt, read_vecs(os.path.join(a.data, "groundtruth.ivecs"))[: a.queries or None])
    rec = []
    for b in pools:
        j = run([tool, "query", "--client", c, "--server", s, q, "-k", "10",
                 "--pool", str(b), "--gt", gt])
        rec.append(j["recall"])
    return rec


def cmd_build(a):
    tools = a.tools.split(",")
    efcs = [int(e) for e in a.efc.split(",")]
    pools = [] if a.no_recall else [int(b) for b in a.pools.split(",")]
    work = a.work or os.path.join(ROOT, "build", "speed", "work")
    os.makedirs(work, exist_ok=True)
    seed = os.path.join(work, "seed")
    with open(seed, "w") as f:
        f.write("5a" * 32 + "\n")
    base = read_vecs(os.path.join(a.data, "base.bvecs")).astype(np.float32)
    print("load average before: %s" % " ".join(load_avg()), flush=True)
    variants = [("hnswlib", None)] + [(t, e) for e in efcs for t in tools]
    if a.mess_first:
        variants = variants[1:] + variants[:1]
    times = {v: [] for v in variants}
    parts = {}
    recalls = {}
    for r in range(a.rounds):
        order = variants[r % len(variants):] + variants[: r % len(variants)]
        for v in order:
            if v[0] == "hnswlib":
                t, cpu = hnswlib_build(base, a.threads, a.chunks)
                parts.setdefault(v, []).append({"cpu_s": cpu})
            else:
                keep = a.keep if r == 0 and v == (tools[0], efcs[0]) else ""
                j, c, s = mess_build(v[0], a.data, work, v[1], a.threads, seed, keep)
                t = j["wall_s"]
                parts.setdefault(v, []).append(j)
                if r == 0 and v[0] == tools[0] and pools:
                    recalls[v[1]] = recall_curve(a, tools[0], c, s, pools, work)
            times[v].append(t)
            print("round %d %-28s %8.2f s wall %8.2f s CPU"
                  % (r, "%s efC %s" % v if v[1] else v[0], t, parts[v][-1]["cpu_s"]),
                  flush=True)
    hl = min(times[("hnswlib", None)])
    hcpu = min(p["cpu_s"] for p in parts[("hnswlib", None)])
    out = {"data": a.data, "n": len(base), "threads": a.threads, "hnswlib_build_s": hl,
           "hnswlib_build_cpu_s": hcpu, "mess": []}
    print("\nhnswlib (M 16, efC 300, %d threads): %.2f s wall, %.2f s CPU (best)"
          % (a.threads, hl, hcpu))
    print("| tool | efC | insert s wall (best) | client s | server s | CPU s (best) "
          "| wall / hnswlib | CPU / hnswlib |")
    print("|---|---|---|---|---|---|---|---|")
    for v in [v for v in variants if v[0] != "hnswlib"]:
        best = min(range(len(times[v])), key=lambda i: times[v][i])
        j = parts[v][best]
        cpu = min(p["cpu_s"] for p in parts[v])
        print("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx |"
              % (v[0], v[1], times[v][best], j["client_seconds"], j["server_seconds"],
                 cpu, times[v][best] / hl, cpu / hcpu))
        out["mess"].append(dict(tool=v[0], efc=v[1], insert_s=times[v][best],
                                client_s=j["client_seconds"], server_s=j["server_seconds"],
                                cpu_s=cpu, ratio=times[v][best] / hl, cpu_ratio=cpu / hcpu))
    if pools:
        out["recall"] = recalls
        print("\nrecall@10 per pool (%s, %s queries)" % (tools[0], a.queries or "all"))
        print("| efC | " + " | ".join("B %d" % b for b in pools) + " |")
        print("|---|" + "---|" * len(pools))
        for e in efcs:
            print("| %d | " % e + " | ".join("%.4f" % x for x in recalls[e]) + " |")
    print("load average after: %s" % " ".join(load_avg()))
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("--src", required=True)
    d.add_argument("--n", type=int, required=True)
    d.add_argument("--queries", type=int, default=1000)
    d.add_argument("--out", required=True)
    b = sub.add_parser("build")
    b.add_argument("--data", required=True)
    b.add_argument("--efc", default="300")
    b.add_argument("--tools", default="build/mess")
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--pools", default="250,500,1000,1500,3000")
    b.add_argument("--queries", type=int, default=0, help="first N queries for the recall (all)")
    b.add_argument("--rounds", type=int, default=1)
    b.add_argument("--work", default="")
    b.add_argument("--no-recall", action="store_true", help="times only")
    b.add_argument("--mess-first", action="store_true",
                   help="the first round builds with mess before hnswlib")
    b.add_argument("--chunks", type=int, default=1,
                   help="hnswlib's add_items in this many slices, each timed")
    b.add_argument("--keep", default="",
                   help="the first round's build of the first tool and efC goes to "
                   "KEEP and KEEP.client (production client) and stays")
    h = sub.add_parser("hnswlib")
    h.add_argument("--data", required=True)
    h.add_argument("--threads", type=int, default=2)
    h.add_argument("--chunks", type=int, default=10,
                   help="add_items in this many slices, each timed")
    h.add_argument("--index", required=True, help="where the index is saved")
    a = ap.parse_args()
    {"data": cmd_data, "build": cmd_build, "hnswlib": cmd_hnswlib}[a.cmd](a)


if __name__ == "__main__":
    main()
