#!/usr/bin/python3
"""eval/text.py - MESS on a labelled text set (datasets/make_text.py):
Recall@10 against the exact dense top-10 (cosine) and MRR@10 against the
qrels, per candidate pool B, beside exact dense retrieval, plaintext hnswlib
and BM25, with bytes and each side's time per query.  `mess plan` runs on
the same client for its prediction against the measurement (issue 13.9).

    make eval-text            (docs/TEXT.md; EVAL_TEXT_ARGS passes options)
    /usr/bin/python3 eval/text.py --data datasets/text/debian --out docs/eval/text
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import K, ROOT, log, seed_for  # noqa: E402
import mess  # noqa: E402

MESS_TOOL = os.path.join(ROOT, "build", "mess")


class TextSet:
    def __init__(self, d, max_queries=0):
        self.dir = d
        self.name = os.path.basename(os.path.normpath(d))
        self.base = mess.read_f32(os.path.join(d, "base.fvecs"))
        self.train = mess.read_f32(os.path.join(d, "learn.fvecs"))
        self.queries = mess.read_f32(os.path.join(d, "query.fvecs"))
        self.truth = mess.read_ivecs(os.path.join(d, "groundtruth.ivecs"))
        self.qrels = mess.read_ivecs(os.path.join(d, "qrels.ivecs"))[:, 0]
        self.base_text = [json.loads(l)["text"] for l in open(os.path.join(d, "base.jsonl"), encoding="utf-8")]
        self.query_text = [json.loads(l)["text"] for l in open(os.path.join(d, "query.jsonl"), encoding="utf-8")]
        if max_queries:
            self.queries = self.queries[:max_queries]
            self.truth = self.truth[:max_queries]
            self.qrels = self.qrels[:max_queries]
            self.query_text = self.query_text[:max_queries]
        self.dim = self.base.shape[1]


class VecSet:
    """A TEXMEX set without text: datasets/sift (.bvecs, L2), datasets/words
    (.fvecs, cosine); "MRR" against the exact nearest neighbour
    (truth[:, 0]) in place of qrels."""
    def __init__(self, d, max_queries=0, ext="bvecs", metric="l2"):
        self.dir, self.name = d, os.path.basename(os.path.normpath(d))
        self.base = mess.read_f32(os.path.join(d, "base." + ext))
        self.train = mess.read_f32(os.path.join(d, "learn." + ext))
        self.queries = mess.read_f32(os.path.join(d, "query." + ext))
        self.truth = mess.read_ivecs(os.path.join(d, "groundtruth.ivecs"))
        if max_queries:
            self.queries, self.truth = self.queries[:max_queries], self.truth[:max_queries]
        self.qrels = self.truth[:, 0]
        self.dim, self.metric = self.base.shape[1], metric


def recall_rows(ids, truth):
    """Per query |returned top-K ^ exact top-K| / K."""
    return np.array([len(set(int(x) for x in a[:K]) & set(int(x) for x in b[:K])) / K
                     for a, b in zip(ids, truth)])


def rr_rows(ids, qrels):
    """Per query 1/rank of the relevant passage in the top-K, else 0."""
    out = np.zeros(len(qrels))
    for i, (a, rel) in enumerate(zip(ids, qrels)):
        for r, x in enumerate(a[:K]):
            if int(x) == int(rel):
                out[i] = 1.0 / (r + 1)
                break
    return out


# ---- BM25 over scipy sparse matrices -------------------------------------------

TOKEN = re.compile(r"[a-z0-9]+")


def bm25(base_text, query_text, k1=0.9, b=0.4):
    """Okapi BM25 (Lucene's idf, the Anserini defaults k1 = 0.9, b = 0.4)
    over lowercase alphanumeric tokens: the top-K base rows per query."""
    import scipy.sparse as sp
    vocab = {}
    rows, cols = [], []
    for i, t in enumerate(base_text):
        for w in TOKEN.findall(t.lower()):
            rows.append(i)
            cols.append(vocab.setdefault(w, len(vocab)))
    n = len(base_text)
    tf = sp.csr_matrix((np.ones(len(rows), dtype=np.float64), (rows, cols)),
                       shape=(n, len(vocab)))
    tf.sum_duplicates()
    dl = np.asarray(tf.sum(axis=1)).ravel()
    df = np.bincount(tf.indices, minlength=len(vocab))
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    tf = tf.tocoo()
    norm = k1 * (1 - b + b * dl / dl.mean())
    w = tf.data * (k1 + 1) / (tf.data + norm[tf.row]) * idf[tf.col]
    W = sp.csc_matrix((w, (tf.row, tf.col)), shape=(n, len(vocab)))
    qr, qc = [], []
    for i, t in enumerate(query_text):
        for wd in set(TOKEN.findall(t.lower())):
            if wd in vocab:
                qr.append(i)
                qc.append(vocab[wd])
    Q = sp.csr_matrix((np.ones(len(qr)), (qr, qc)), shape=(len(query_text), len(vocab)))
    S = (Q @ W.T).toarray()
    out = np.empty((len(query_text), K), dtype=np.int64)
    for i in range(len(query_text)):
        c = np.argpartition(-S[i], K)[:K]
        out[i] = c[np.lexsort((c, -S[i][c]))]
    return out


def hnswlib_curve(ds, efs, m=16, ef_construction=300):
    import hnswlib
    idx = hnswlib.Index(space="ip", dim=ds.dim)   # unit vectors: ip ranks as cosine
    t0 = time.perf_counter()
    idx.init_index(max_elements=len(ds.base), ef_construction=ef_construction, M=m,
                   random_seed=100)
    idx.set_num_threads(2)
    idx.add_items(ds.base, np.arange(len(ds.base)))
    build_s = time.perf_counter() - t0
    idx.set_num_threads(1)
    rows = []
    for ef in efs:
        idx.set_ef(max(ef, K))
        t0 = time.perf_counter()
        lab, _ = idx.knn_query(ds.queries, k=K)
        ms = 1e3 * (time.perf_counter() - t0) / len(ds.queries)
        rows.append(dict(config="hnswlib", ef=ef, recall=recall_rows(lab, ds.truth).mean(),
                         mrr=rr_rows(lab, ds.qrels).mean(), server_ms=ms,
                         bytes=4 * ds.dim + K * 12, build_s=build_s))
        log("  hnswlib ef=%d recall=%.4f mrr=%.4f %.3f ms" % (ef, rows[-1]["recall"],
                                                          rows[-1]["mrr"], ms))
    return rows


# ---- MESS ---------------------------------------------------------------------------

class Built:
    def __init__(self, ds, name, params, threads):
        self.name, self.params = name, params
        t0 = time.perf_counter()
        self.client = mess.Client(params, ds.train, seed=seed_for(name), threads=threads)
        t1 = time.perf_counter()
        self.server = mess.Server(params)
        ids = np.arange(len(ds.base), dtype=np.uint64)
        for i in range(0, len(ids), 10000):
            buf = self.client.upload(ids[i:i + 10000], ds.base[i:i + 10000], threads)
            self.server.apply_upload(buf, threads)
            buf.close()
        self.train_s, self.build_s = t1 - t0, time.perf_counter() - t0
        log("build %s: %.1f s (train %.1f)" % (name, self.build_s, self.train_s))

    def close(self):
        self.client.close()
        self.server.close()


def mess_sweep(b, ds, pools, threads, label):
    rows = []
    for B in pools:
        got, srv, cli, nbytes = [], 0.0, 0.0, 0
        for q in ds.queries:
            r = b.client.query(b.server, q, K, B, threads)
            got.append(r.ids)
            srv += r.server_seconds
            cli += r.client_seconds
            nbytes += r.request_bytes + r.response_bytes
        n = len(ds.queries)
        rec, rr = recall_rows(got, ds.truth), rr_rows(got, ds.qrels)
        rows.append(dict(config=label, pool=B, recall=rec.mean(), mrr=rr.mean(),
                         recall_first200=rec[:200].mean(), bytes=nbytes / n,
                         server_ms=1e3 * srv / n, client_ms=1e3 * cli / n))
        log("  %s B=%d recall=%.4f mrr=%.4f %.1f KB server %.2f ms client %.2f ms"
            % (label, B, rows[-1]["recall"], rows[-1]["mrr"], nbytes / n / 1024,
               rows[-1]["server_ms"], rows[-1]["client_ms"]))
    return rows


def write_vecs(path, m, dtype):
    m = np.ascontiguousarray(m, dtype=dtype)
    rec = np.empty((m.shape[0], m.shape[1] + 1), dtype="<i4")
    rec[:, 0] = m.shape[1]
    rec[:, 1:] = m.view("<i4") if dtype == "<f4" else m
    rec.tofile(path)


def plan_of(b, ds, pools, ef_search, nq=200):
    """`mess plan` on the client b, the first nq queries and their truth."""
    with tempfile.TemporaryDirectory() as tmp:
        cpath = os.path.join(tmp, "c.client")
        b.client.save(cpath)
        q = os.path.join(tmp, "q.fvecs")
        g = os.path.join(tmp, "g.ivecs")
        write_vecs(q, ds.queries[:nq], "<f4")
        write_vecs(g, ds.truth[:nq, :K], "<i4")
        cmd = [MESS_TOOL, "plan", "--client", cpath, "--data", os.path.join(ds.dir, "base.fvecs"),
               "--queries", q, "--gt", g, "--pools", ",".join(map(str, pools)),
               "--threads", "2", "--ef-search", str(ef_search)]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            log("mess plan failed: %s" % r.stderr.strip())
            return None
        out = json.loads(r.stdout.strip().splitlines()[-1])
        out["wall_s"] = time.perf_counter() - t0
        out["warnings"] = [l for l in r.stderr.splitlines() if "warning" in l]
        return out


def main():
    ap = argparse.ArgumentParser(description="MESS on a labelled text set")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "text", "debian"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "eval", "text"))
    ap.add_argument("--queries", type=int, default=0, help="first N queries (0: all)")
    ap.add_argument("--pools", default="250,500,1000,1500,3000")
    ap.add_argument("--configs", default="nonoise,d8q8,d8q8-ef64,d8q12,d8q12-ef64",
                    help="comma list of: nonoise, d8q8, d8q12 (kappa 128), cos (the cosine "
                         "defaults) with optional -efN")
    ap.add_argument("--payloads", default="f16,i8", help="extra payload encodings at --payload-pool")
    ap.add_argument("--payload-pool", type=int, default=1500)
    ap.add_argument("--plan-pools", default="250,500,1000,1500,3000")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.data, "qrels.ivecs")):
        sys.exit("eval/text.py: %s is not ready: make data-text" % a.data)
    ds = TextSet(a.data, a.queries)
    pools = [int(x) for x in a.pools.split(",")]
    log("%s: %d base, %d queries, %d learn, dim %d" % (ds.name, len(ds.base), len(ds.queries),
                                                        len(ds.train), ds.dim))
    res = {"data": ds.name, "base": len(ds.base), "queries": len(ds.queries),
           "learn": len(ds.train), "dim": ds.dim, "pools": pools, "rows": [], "plan": []}
    exact = ds.truth[:, :K]
    res["exact"] = dict(config="exact dense", recall=1.0, mrr=rr_rows(exact, ds.qrels).mean())
    t0 = time.perf_counter()
    bm = bm25(ds.base_text, ds.query_text)
    res["bm25"] = dict(config="BM25", recall=recall_rows(bm, ds.truth).mean(),
                       mrr=rr_rows(bm, ds.qrels).mean(), seconds=time.perf_counter() - t0)
    log("exact dense MRR@10 %.4f; BM25 MRR@10 %.4f (Recall@10 vs dense %.4f)"
        % (res["exact"]["mrr"], res["bm25"]["mrr"], res["bm25"]["recall"]))
    res["hnswlib"] = hnswlib_curve(ds, [10, 16, 32, 64, 128, 256])

    # the paper's flips at its 128 bits (kappa given: not the cosine
    # defaults), and "cos": mess.Params(dim, metric="cos") as it stands
    flips = {"nonoise": (0.0, 0.0), "d8q8": (0.08, 0.08), "d8q12": (0.08, 0.12), "cos": None}
    for cfg in a.configs.split(","):
        base, _, ef = cfg.partition("-ef")
        if flips[base] is None:
            params = mess.Params(ds.dim, metric="cos")
            if ef:
                params.ef_search = int(ef)
            p_d, p_q = params.p_store, params.p_query
        else:
            p_d, p_q = flips[base]
            params = mess.Params(ds.dim, metric="cos", kappa=128, p_store=p_d, p_query=p_q,
                                 ef_search=int(ef or 0))
        b = Built(ds, cfg, params, a.threads)
        rows = mess_sweep(b, ds, pools, a.threads, cfg)
        for r in rows:
            r["build_s"] = b.build_s
        res["rows"] += rows
        if base == "d8q8":
            for efs in (int(ef or 0),):
                pl = plan_of(b, ds, [int(x) for x in a.plan_pools.split(",")], efs)
                if pl:
                    pl["config"] = cfg
                    res["plan"].append(pl)
                    log("  plan %s: %s" % (cfg, pl["curve"]))
        if cfg == "d8q8-ef64" and a.payloads:
            for enc in a.payloads.split(","):
                pp = mess.Params(ds.dim, metric="cos", kappa=128, p_store=p_d, p_query=p_q,
                                 ef_search=int(ef or 0), payload=enc)
                be = Built(ds, cfg + "-" + enc, pp, a.threads)
                res["rows"] += mess_sweep(be, ds, [a.payload_pool], a.threads, cfg + "-" + enc)
                be.close()
        b.close()
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump(res, f, indent=1, default=float)
    print(json.dumps({k: res[k] for k in ("exact", "bm25")}, default=float))
    for r in res["rows"]:
        print("%-16s B=%5d recall %.4f MRR %.4f bytes %7.0f server %.2f ms client %.2f ms"
              % (r["config"], r["pool"], r["recall"], r["mrr"], r["bytes"], r["server_ms"],
                 r["client_ms"]))


if __name__ == "__main__":
    main()
