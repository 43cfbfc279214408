"""The baselines, run in the same process as libmess on the same data:
plaintext HNSW (Debian's hnswlib) over the raw vectors, and faiss's
IndexBinaryHNSW over the very perturbed codes our server stores, answering
the very requests our client sends."""
import time

import numpy as np

from common import K, NETWORKS, log, recall, transfer_ms
from mess import wire

EF_GRID = (10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512)


def plaintext_hnsw(ds, threads, target=0.98, m=16, ef_construction=300):
    """hnswlib, M=16 and our efConstruction; ef tuned to the smallest value
    on EF_GRID whose Recall@10 >= target.  Returns (curve rows, chosen row)."""
    import hnswlib
    log("hnswlib: build M=%d efConstruction=%d" % (m, ef_construction))
    idx = hnswlib.Index(space="l2", dim=ds.dim)
    t0 = time.perf_counter()
    idx.init_index(max_elements=len(ds.base), ef_construction=ef_construction, M=m,
                   random_seed=100)
    idx.set_num_threads(threads)
    idx.add_items(ds.base, np.arange(len(ds.base)))
    build_s = time.perf_counter() - t0
    idx.set_num_threads(1)
    # plaintext request: the query (float32); response: K ids (u64) and
    # distances (f32).  The same network model as ours.
    req_b, resp_b = 4 * ds.dim, K * (8 + 4)
    rows, chosen = [], None
    for ef in EF_GRID:
        idx.set_ef(max(ef, K))
        # best of 3 passes: sub-0.1 ms timings on a shared machine
        best = float("inf")
        for _ in range(3):
            got = []
            t0 = time.perf_counter()
            for q in ds.queries:
                lab, _ = idx.knn_query(q, k=K)
                got.append(lab[0])
            best = min(best, time.perf_counter() - t0)
        ms = 1e3 * best / len(ds.queries)
        row = dict(config="hnswlib", ef=ef, recall=recall(got, ds.truth), server_ms=ms,
                   build_s=build_s, request_bytes=req_b, response_bytes=resp_b,
                   kb_per_query=(req_b + resp_b) / 1024.0)
        for net in NETWORKS:
            row["transfer_%s_ms" % net.lower()] = transfer_ms(req_b + resp_b, net)
            row["total_%s_ms" % net.lower()] = ms + row["transfer_%s_ms" % net.lower()]
        rows.append(row)
        if chosen is None and row["recall"] >= target:
            chosen = row
            log("hnswlib: ef=%d reaches Recall@10 %.4f (%.3f ms/query, build %.1f s)"
                % (ef, row["recall"], ms, build_s))
    if chosen is None:
        chosen = rows[-1]
    return rows, chosen


# ---- faiss IndexBinaryHNSW on our server's codes ------------------------------

# The buffers' layout is mess.wire's (the Python mirror of wire.h).
_parse_request = wire.parse_request
_response = wire.build_response


def _popcount8():
    return np.array([bin(i).count("1") for i in range(256)], dtype=np.uint16)


class FaissServer:
    """faiss IndexBinaryHNSW per shard over the codes our server holds
    (read through the server view), answering our wire-format requests."""

    def __init__(self, build, threads, m=16):
        import faiss
        self.faiss = faiss
        p = build.params
        self.shards, self.code_bytes = p.shards, p.kappa // 8
        faiss.omp_set_num_threads(threads)
        self.codes, self.entries, self.indexes, self.nonce_to_node = [], [], [], []
        t0 = time.perf_counter()
        for v in build.server.shards():
            codes = np.ascontiguousarray(v.codes_bytes())
            idx = faiss.IndexBinaryHNSW(p.kappa, m)
            idx.hnsw.efConstruction = p.ef_construction
            idx.add(codes)
            self.codes.append(codes)
            self.indexes.append(idx)
            ent = v.entries()
            self.entries.append(ent)
            self.nonce_to_node.append({bytes(e[:12]): i for i, e in enumerate(ent)})
        self.build_s = time.perf_counter() - t0
        faiss.omp_set_num_threads(1)
        self.pop = _popcount8()
        log("faiss IndexBinaryHNSW: %d shards built in %.1f s" % (self.shards, self.build_s))

    def search(self, req):
        """(response bytes, per-shard node lists) for a request."""
        hdr, rid, budgets, codes = _parse_request(req, self.shards, self.code_bytes)
        out, nodes = [], []
        self.search_s = 0.0
        for j in range(self.shards):
            b = int(budgets[j])
            if b == 0:
                out.append(self.entries[j][:0])
                nodes.append(np.empty(0, dtype=np.int64))
                continue
            idx = self.indexes[j]
            idx.hnsw.efSearch = b  # ours: ef = max(budget, ef_search = 0)
            t0 = time.perf_counter()
            _, I = idx.search(codes[j:j + 1], b)
            self.search_s += time.perf_counter() - t0
            sel = I[0][I[0] >= 0]
            nodes.append(sel)
            out.append(self.entries[j][sel])
        return _response(hdr, rid, out), nodes

    def our_nodes(self, resp):
        """Per-shard node ids of a response from our server (ciphertexts
        are told apart by their unique synthetic nonces)."""
        nodes = []
        for j, ents in enumerate(wire.response_entries(resp, self.shards,
                                                       self.entries[0].shape[1])):
            m = self.nonce_to_node[j]
            nodes.append(np.array([m[e[:12]] for e in ents], dtype=np.int64))
        return nodes

    def shard_quality(self, req, nodes):
        """Fraction of returned nodes within the exact budget-th smallest
        Hamming distance of the shard (ties count as hits), summed over
        shards: (hits, asked)."""
        _, _, budgets, codes = _parse_request(req, self.shards, self.code_bytes)
        hits = asked = 0
        for j in range(self.shards):
            b = int(budgets[j])
            if b == 0 or len(self.codes[j]) == 0:
                continue
            d = self.pop[np.bitwise_xor(self.codes[j], codes[j])].sum(1)
            b = min(b, len(d))
            kth = np.partition(d, b - 1)[b - 1]
            hits += int((d[nodes[j]] <= kth).sum())
            asked += b
        return hits, asked


def faiss_vs_ours(build, fs, ds, pools, threads):
    """Same requests to both engines; our client finishes both responses."""
    rows = []
    c, s = build.client, build.server
    for B in pools:
        got_o, got_f = [], []
        t_o = t_f = t_fs = c_o = c_f = 0.0
        qh_o = qh_f = asked = 0
        for q in ds.queries:
            qs, req = c.request(q, B)
            with qs, req:
                # wall time, and CPU time of the process (both engines run
                # on this one thread; CPU time ignores descheduling)
                t0, p0 = time.perf_counter(), time.process_time()
                resp = s.search(req, 1)
                t1, p1 = time.perf_counter(), time.process_time()
                fresp, fnodes = fs.search(req)
                t2, p2 = time.perf_counter(), time.process_time()
                t_o += t1 - t0
                t_f += t2 - t1
                c_o += p1 - p0
                c_f += p2 - p1
                t_fs += fs.search_s
                with resp:
                    got_o.append(c.finish(qs, resp, K)[0])
                    onodes = fs.our_nodes(resp)
                got_f.append(c.finish(qs, fresp, K)[0])
                h, a = fs.shard_quality(req, onodes)
                qh_o += h
                asked += a
                qh_f += fs.shard_quality(req, fnodes)[0]
        n = len(ds.queries)
        row = dict(pool=B, recall_ours=recall(got_o, ds.truth),
                   recall_faiss=recall(got_f, ds.truth),
                   shard_hamming_recall_ours=qh_o / asked,
                   shard_hamming_recall_faiss=qh_f / asked,
                   server_ms_ours=1e3 * t_o / n, server_ms_faiss=1e3 * t_f / n,
                   faiss_search_only_ms=1e3 * t_fs / n,
                   server_cpu_ms_ours=1e3 * c_o / n, server_cpu_ms_faiss=1e3 * c_f / n,
                   build_s_ours=build.apply_s, build_s_faiss=fs.build_s)
        log("  faiss vs ours B=%d: recall %.4f / %.4f, shard Hamming recall %.4f / %.4f, "
            "server %.2f (search calls %.2f) / %.2f ms"
            % (B, row["recall_faiss"], row["recall_ours"], row["shard_hamming_recall_faiss"],
               row["shard_hamming_recall_ours"], row["server_ms_faiss"],
               row["faiss_search_only_ms"], row["server_ms_ours"]))
        rows.append(row)
    return rows
