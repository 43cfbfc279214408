"""Shared pieces of the evaluation: data sets, builds, query sweeps, the
network model, progress output and CSV files."""
import csv
import hashlib
import os
import sys
import time

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import mess  # noqa: E402

# The paper's network settings (section 6, "Experiment settings") and the
# design notes' model: time = RTT + bytes * 8 / bandwidth.
NETWORKS = {"LAN": (3e9, 1e-3), "WAN": (400e6, 80e-3)}
K = 10

_T0 = time.perf_counter()


def log(msg):
    t = time.perf_counter() - _T0
    print("[%3d:%02d] %s" % (t // 60, t % 60, msg), file=sys.stderr, flush=True)


def transfer_ms(nbytes, net):
    bw, rtt = NETWORKS[net]
    return 1e3 * (rtt + nbytes * 8.0 / bw)


def exact_truth(base, queries, k):
    """Exact L2 top-k ids (ties by the smaller id), in float64."""
    b = base.astype(np.float64)
    bn = (b * b).sum(1)
    out = np.empty((len(queries), k), dtype=np.int64)
    for i in range(0, len(queries), 64):
        q = queries[i:i + 64].astype(np.float64)
        d = bn[None, :] - 2.0 * q @ b.T  # + |q|^2, the same for the whole row
        part = np.argpartition(d, k, axis=1)[:, :k + 1] if d.shape[1] > k + 1 else \
            np.tile(np.arange(d.shape[1]), (len(q), 1))
        for r in range(len(q)):
            c = part[r]
            c = c[np.lexsort((c, d[r, c]))][:k]
            kth = d[r, c[-1]]
            # every id at the k-th distance competes: the smaller ids win
            ties = np.flatnonzero(d[r] <= kth)
            ties = ties[np.lexsort((ties, d[r, ties]))][:k]
            out[i + r] = ties
    return out


class DataSet:
    def __init__(self, directory, max_queries=None, max_base=None):
        self.dir = directory
        self.name = os.path.basename(os.path.normpath(directory))
        self.base = mess.read_f32(os.path.join(directory, "base.bvecs"))
        self.train = mess.read_f32(os.path.join(directory, "learn.bvecs"))
        self.queries = mess.read_f32(os.path.join(directory, "query.bvecs"))
        self.truth = mess.read_ivecs(os.path.join(directory, "groundtruth.ivecs"))[:, :K]
        if max_queries:
            self.queries = self.queries[:max_queries]
            self.truth = self.truth[:max_queries]
        if max_base and max_base < len(self.base):
            # the first max_base base vectors, with their own exact truth
            self.base = self.base[:max_base]
            log("exact ground truth of %d queries over the first %d base vectors"
                % (len(self.queries), max_base))
            self.truth = exact_truth(self.base, self.queries, K)
            self.name += "-%dk" % (max_base // 1000)
        self.dim = self.base.shape[1]


def recall(ids, truth):
    """Recall@K: |returned top-K  ^  exact top-K| / K, averaged."""
    hits = 0
    for a, b in zip(ids, truth):
        hits += len(set(int(x) for x in a[:K]) & set(int(x) for x in b[:K]))
    return hits / (K * len(truth))


def params_for(ds, p_store=0.08, p_query=0.08, per_item=16, payload="f32", **kw):
    return mess.Params(ds.dim, p_store=p_store, p_query=p_query,
                       per_item=per_item, payload=payload, **kw)


def seed_for(name):
    """Deterministic experiment mode: runs repeat exactly.  Every
    configuration gets the same seed (common random numbers): the same hash
    training, routes and randomized-response coins, so two configurations
    differ only by the parameter that was changed (a payload encoding sees
    identical codes; t = 4 routes are the first 4 of the t = 16 routes)."""
    del name
    return hashlib.sha256(b"libmess-eval").digest()


class Build:
    """A client and a server built over the whole base set, with the times
    of each offline phase."""

    def __init__(self, ds, name, params, threads):
        self.name = name
        self.params = params
        log("build %s: %s" % (name, _brief(params)))
        t0 = time.perf_counter()
        self.client = mess.Client(params, ds.train, seed=seed_for(name), threads=threads)
        t1 = time.perf_counter()
        try:  # the client's decryption threads, where the library has them
            self.client.set_threads(threads)
        except NotImplementedError:
            pass
        ids = np.arange(len(ds.base), dtype=np.uint64)
        self.upload_bytes = 0
        enc = app = 0.0
        self.server = mess.Server(params)
        for i in range(0, len(ids), 20000):
            a = time.perf_counter()
            buf = self.client.upload(ids[i:i + 20000], ds.base[i:i + 20000], threads)
            b = time.perf_counter()
            self.server.apply_upload(buf, threads)
            app += time.perf_counter() - b
            enc += b - a
            self.upload_bytes += len(buf)
            buf.close()
        self.train_s, self.encode_s, self.apply_s = t1 - t0, enc, app
        self.build_s = self.train_s + enc + app
        log("build %s: %.1f s (train %.1f, encode %.1f, server %.1f), %d entries"
            % (name, self.build_s, self.train_s, enc, app, self.server.stats().entries))

    def close(self):
        self.client.close()
        self.server.close()


def _brief(p):
    return ("M=%d t=%d kappa=%d p_D=%.2f p_q=%.2f payload=%s"
            % (p.shards, p.per_item, p.kappa, p.p_store, p.p_query,
               {0: "f32", 1: "f16", 2: "i8", 3: "u8"}[p.payload]))


def sweep(build, ds, pools, threads, label=None):
    """Every query at every pool B: one row per B with Recall@10, the
    candidates, exact bytes and each side's mean time."""
    rows = []
    for B in pools:
        got, srv, cli, req_b, resp_b, cand, uniq = [], 0.0, 0.0, 0, 0, 0, 0
        for q in ds.queries:
            r = build.client.query(build.server, q, K, B, threads)
            got.append(r.ids)
            srv += r.server_seconds
            cli += r.client_seconds
            req_b += r.request_bytes
            resp_b += r.response_bytes
            cand += r.stats.candidates
            uniq += r.stats.unique
        n = len(ds.queries)
        row = dict(config=label or build.name, pool=B, recall=recall(got, ds.truth),
                   candidates=cand / n, unique=uniq / n,
                   request_bytes=req_b / n, response_bytes=resp_b / n,
                   kb_per_query=(req_b + resp_b) / n / 1024.0,
                   server_ms=1e3 * srv / n, client_ms=1e3 * cli / n)
        for net in NETWORKS:
            row["transfer_%s_ms" % net.lower()] = transfer_ms((req_b + resp_b) / n, net)
            row["total_%s_ms" % net.lower()] = (row["server_ms"] + row["client_ms"]
                                                + row["transfer_%s_ms" % net.lower()])
        log("  %s B=%d recall=%.4f unique=%.0f %.1f KB server %.2f ms client %.2f ms"
            % (row["config"], B, row["recall"], row["unique"], row["kb_per_query"],
               row["server_ms"], row["client_ms"]))
        rows.append(row)
    return rows


def write_csv(path, rows):
    if not rows:
        return
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("%.6g" % v if isinstance(v, float) else v)
                        for k, v in r.items()})
    log("wrote %s" % os.path.relpath(path, ROOT))
