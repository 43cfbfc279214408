#!/usr/bin/python3
"""hnsw_bin against faiss IndexBinaryHNSW on the same binary codes.

    /usr/bin/python3 scripts/bench_hnsw.py [--sets sift,large] [--efc 100] ...

For each data set (datasets/sift, and datasets/large when it has been
built), the SIFT descriptors become 128-bit codes: the signs of a seeded
Gaussian random projection of the mean-centred vectors (SimHash).  The codes
are written once to .bvecs files; `mess bench hnsw` builds hnsw_bin over them
and faiss IndexBinaryHNSW is built in this process over the same bytes, with
the same M_hnsw and ef_construction, both single-threaded.  Debian's faiss is
built for the generic x86-64 baseline (its popcount is a libgcc call), so
the tool with the baseline popcount only (build/mess-portable, whose `bench`
runs its twin build/mess-bench-portable; `make bench` builds both) is
measured too, for a like-for-like column.  Both are measured
over the same grid of ef values for every P: recall against exact Hamming
top-P (the exact P-th distance comes from the C tool's brute force and is
checked here against faiss IndexBinaryFlat) and queries per second, best of
--repeat timed runs.

The comparison point for each P: faiss at its smallest ef whose recall
reaches --target (its best recall if none does), and hnsw_bin at its
smallest ef whose recall is at least faiss' recall there.  faiss' efSearch
bounds its candidate queue while hnsw_bin's beam is max(P, ef), so equal ef
values are not equal work: only points of equal recall compare.  The whole
curves and the points for several targets are printed too.  The last line is one JSON object:
{"n":..,"bits":128,"P":[..],"recall_mess":[..],"recall_faiss":[..],
 "qps_mess":[..],"qps_faiss":[..],"build_s_mess":..,"build_s_faiss":..}
for the largest set measured.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import faiss
except ImportError:  # reported when a benchmark needs it (--write-codes does not)
    faiss = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POP8 = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(1)


def read_bvecs(path):
    raw = np.fromfile(path, dtype=np.uint8)
    d = int(raw[:4].view(np.int32)[0])
    return raw.reshape(-1, 4 + d)[:, 4:]


def read_vectors(stem):
    """stem.bvecs (uint8) or stem.fvecs (float32, e.g. SIFT1M)."""
    if os.path.exists(stem + ".bvecs"):
        return read_bvecs(stem + ".bvecs")
    raw = np.fromfile(stem + ".fvecs", dtype=np.float32)
    d = int(raw[:1].view(np.int32)[0])
    return raw.reshape(-1, 1 + d)[:, 1:]


def read_ivecs(path):
    raw = np.fromfile(path, dtype=np.int32)
    d = int(raw[0])
    return raw.reshape(-1, 1 + d)[:, 1:]


def write_bvecs(path, x):
    n, d = x.shape
    rec = np.empty((n, 4 + d), dtype=np.uint8)
    rec[:, :4] = np.frombuffer(np.int32(d).tobytes(), dtype=np.uint8)
    rec[:, 4:] = x
    rec.tofile(path)


def simhash(base, query, bits, seed):
    """sign((x - mean) . r_i), r_i seeded Gaussian; bit i in byte i/8."""
    rng = np.random.default_rng(seed)
    r = rng.standard_normal((base.shape[1], bits))
    mu = base.astype(np.float64).mean(0)

    def code(x):
        out = []
        for s in range(0, len(x), 65536):
            b = (x[s:s + 65536].astype(np.float64) - mu) @ r > 0
            out.append(np.packbits(b, axis=1, bitorder="little"))
        return np.concatenate(out)
    return code(base), code(query)


def hamming_rows(q, b):
    return POP8[np.bitwise_xor(q, b)].sum(-1)


def run_mess(mess, bfile, qfile, kfile, a, Ps, efs, nq):
    cmd = [mess, "bench", "hnsw", "--base", bfile, "--query", qfile,
           "--m", str(a.m), "--efc", str(a.efc), "--seed", str(a.seed),
           "--P", ",".join(map(str, Ps)), "--ef", ",".join(map(str, efs)),
           "--repeat", str(a.repeat), "--nq", str(nq)]
    if kfile:
        cmd += ["--kth-out", kfile]
    print("$ " + " ".join(cmd), flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    lines = out.strip().splitlines()
    for line in lines[:-1]:
        print("  " + line)
    return json.loads(lines[-1])


def run_faiss(base, query, kth, a, Ps, efs):
    faiss.omp_set_num_threads(1)
    index = faiss.IndexBinaryHNSW(base.shape[1] * 8, a.m)
    index.hnsw.efConstruction = a.efc
    t0 = time.thread_time()
    index.add(base)
    build_s = time.thread_time() - t0
    print(f"  faiss IndexBinaryHNSW: build {build_s:.2f} s (one thread)")
    recall = np.zeros((len(Ps), len(efs)))
    qps = np.zeros((len(Ps), len(efs)))
    for ip, P in enumerate(Ps):
        for ie, ef in enumerate(efs):
            index.hnsw.efSearch = ef
            best = None
            for r in range(a.repeat):
                t0 = time.thread_time()
                D, I = index.search(query, P)
                t = time.thread_time() - t0
                best = t if best is None or t < best else best
                if r == 0:
                    ok = I >= 0
                    d = hamming_rows(query[:, None, :], base[np.where(ok, I, 0)])
                    if not np.array_equal(d[ok], D[ok]):
                        sys.exit("faiss returned distances that are not the Hamming distances")
                    recall[ip, ie] = ((d <= kth[:, ip:ip + 1]) & ok).sum() / (len(query) * P)
            qps[ip, ie] = len(query) / best
            print(f"  faiss P={P} ef={ef} recall={recall[ip, ie]:.4f} qps={qps[ip, ie]:.0f}")
    return build_s, recall, qps


def check_kth(base, query, kth, Ps, count):
    """The C tool's exact P-th distances against faiss' exact flat index."""
    flat = faiss.IndexBinaryFlat(base.shape[1] * 8)
    flat.add(base)
    D, _ = flat.search(query[:count], max(Ps))
    for ip, P in enumerate(Ps):
        if not np.array_equal(D[:, P - 1], kth[:count, ip]):
            sys.exit(f"exact top-{P} distances differ between mess and faiss IndexBinaryFlat")


def pick(rm, rf, target):
    """faiss' smallest ef with recall >= target (its best recall if none
    reaches it); hnsw_bin's smallest ef with recall >= faiss' there.  The
    smallest ef, not the fastest point: points of equal work differ only by
    timing noise, and picking the fastest of them would favour either side."""
    okf = np.nonzero(rf >= target)[0]
    jf = int(okf[0]) if len(okf) else int(np.argmax(rf))
    okm = np.nonzero(rm >= rf[jf])[0]
    if len(okm):
        return jf, int(okm[0]), True
    return jf, int(np.argmax(rm)), False


def bench_set(name, path, a, Ps, efs):
    base = read_vectors(os.path.join(path, "base"))
    query = read_vectors(os.path.join(path, "query"))
    nq = min(len(query), a.nq)
    t0 = time.thread_time()
    bc, qc = simhash(base, query[:nq], a.bits, a.seed)
    print(f"\n== {name}: {len(bc)} base, {nq} queries, {a.bits}-bit SimHash codes "
          f"({time.thread_time() - t0:.1f} s); M={a.m} efc={a.efc}, one thread each")
    with tempfile.TemporaryDirectory(prefix="mess-bench-") as tmp:
        bfile, qfile, kfile = (os.path.join(tmp, f) for f in
                               ("base.bvecs", "query.bvecs", "kth.ivecs"))
        write_bvecs(bfile, bc)
        write_bvecs(qfile, qc)
        m = run_mess(a.mess, bfile, qfile, kfile, a, Ps, efs, nq)
        kth = read_ivecs(kfile)
        mp = None
        if a.mess_portable and os.path.exists(a.mess_portable):
            print("  the same engine with the baseline popcount only (no POPCNT):")
            mp = run_mess(a.mess_portable, bfile, qfile, None, a, Ps, efs, nq)
    check_kth(bc, qc, kth, Ps, min(nq, 200))
    fb, rf, qf = run_faiss(bc, qc, kth, a, Ps, efs)
    rm, qm = np.array(m["recall"]), np.array(m["qps"])

    qp = np.array(mp["qps"]) if mp else np.full(qm.shape, np.nan)
    print(f"\n  {name}: recall / single-thread QPS, hnsw_bin vs faiss (same codes);")
    print("  'portable' is hnsw_bin with the baseline popcount, like Debian's faiss")
    print("  P    ef   recall_mess recall_faiss   qps_mess qps_portable  qps_faiss  ratio")
    for ip, P in enumerate(Ps):
        for ie, ef in enumerate(efs):
            print(f"  {P:<4} {ef:<4} {rm[ip, ie]:11.4f} {rf[ip, ie]:12.4f} "
                  f"{qm[ip, ie]:10.0f} {qp[ip, ie]:12.0f} {qf[ip, ie]:10.0f} "
                  f"{qm[ip, ie] / qf[ip, ie]:6.2f}")
    res = {"n": int(len(bc)), "bits": a.bits, "P": Ps, "recall_mess": [],
           "recall_faiss": [], "qps_mess": [], "qps_faiss": [],
           "build_s_mess": round(m["build_s"], 3), "build_s_faiss": round(fb, 3)}
    for t in sorted(set([0.9, 0.95, 0.99, a.target])):
        print(f"\n  {name}: faiss' smallest ef with recall >= {t}, hnsw_bin's "
              "smallest ef with at least that recall")
        for ip, P in enumerate(Ps):
            jf, jm, ok = pick(rm[ip], rf[ip], t)
            print(f"  P={P}: faiss ef={efs[jf]} recall {rf[ip, jf]:.4f} {qf[ip, jf]:.0f} q/s; "
                  f"hnsw_bin ef={efs[jm]} recall {rm[ip, jm]:.4f} {qm[ip, jm]:.0f} q/s; "
                  f"QPS ratio {qm[ip, jm] / qf[ip, jf]:.2f}"
                  + (f" (portable build {qp[ip, jm] / qf[ip, jf]:.2f})" if mp else "")
                  + ("" if ok else "  (hnsw_bin never reaches faiss' recall)"))
            if t == a.target:
                res["recall_mess"].append(round(float(rm[ip, jm]), 4))
                res["recall_faiss"].append(round(float(rf[ip, jf]), 4))
                res["qps_mess"].append(round(float(qm[ip, jm]), 1))
                res["qps_faiss"].append(round(float(qf[ip, jf]), 1))
    print(f"  build: hnsw_bin {m['build_s']:.2f} s, faiss {fb:.2f} s, ratio "
          f"{fb / m['build_s']:.2f}"
          + (f"; portable build {mp['build_s']:.2f} s, ratio {fb / mp['build_s']:.2f}" if mp else "")
          + f"; hnsw_bin {m['bytes_per_node']:.1f} bytes/node")
    print("  " + json.dumps(res, separators=(",", ":")))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="sift,large",
                    help="data sets under datasets/ (missing ones are skipped)")
    ap.add_argument("--mess", default=os.path.join(ROOT, "build", "mess"))
    ap.add_argument("--mess-portable", default=os.path.join(ROOT, "build", "mess-portable"),
                    help="the tool with the baseline popcount only (skipped if absent)")
    ap.add_argument("--bits", type=int, default=128)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--efc", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--P", default="25,50,100")
    ap.add_argument("--ef", default="16,24,32,48,64,96,128,192,256,384")
    ap.add_argument("--nq", type=int, default=2000, help="queries per set")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-codes", metavar="DIR",
                    help="only write each set's codes to DIR/NAME_{base,query}.bvecs "
                    "(for `mess bench hnsw` runs by hand) and exit")
    ap.add_argument("--target", type=float, default=0.95,
                    help="faiss recall at the compared operating point")
    a = ap.parse_args()
    Ps = [int(x) for x in a.P.split(",")]
    efs = [int(x) for x in a.ef.split(",")]
    results = []
    for name in a.sets.split(","):
        path = os.path.join(ROOT, "datasets", name)
        if not os.path.exists(os.path.join(path, "groundtruth.ivecs")):
            print(f"\n== {name}: not built ({path}; see datasets/README.md), skipped")
            continue
        if a.write_codes:
            base = read_vectors(os.path.join(path, "base"))
            query = read_vectors(os.path.join(path, "query"))[:a.nq]
            bc, qc = simhash(base, query, a.bits, a.seed)
            os.makedirs(a.write_codes, exist_ok=True)
            for part, x in (("base", bc), ("query", qc)):
                write_bvecs(os.path.join(a.write_codes, f"{name}_{part}.bvecs"), x)
            print(f"{name}: {len(bc)} base and {len(qc)} query codes -> {a.write_codes}")
            continue
        if faiss is None:
            sys.exit("bench_hnsw.py needs faiss: apt-get install python3-faiss")
        results.append(bench_set(name, path, a, Ps, efs))
    if a.write_codes:
        return
    if not results:
        sys.exit("no data set found")
    print(json.dumps(max(results, key=lambda r: r["n"]), separators=(",", ":")))


if __name__ == "__main__":
    main()
