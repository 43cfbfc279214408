"""Neighbouring worlds, ground truth and the xi_link accounting of the
cross-shard inference evaluation (paper, Appendix A.2).

A trial of challenge pair q = (x0, x1) in world b: a client loaded from the
experiment's saved client (fixed IsoHash mappings, so d_s(q) is fixed),
a fresh server, and one upload of the background vectors plus (target id,
x_b).  The trial draws fresh ids for every record: the route (t of M) and
the storage coins are keyed functions of the id, so fresh ids give a fresh
assignment and fresh randomized response through the library's own code,
and the two worlds of one trial share ids, routes and background records
exactly.  The server then builds every shard's HNSW graph.

Ground truth (used only after inference, and to hand the attack its
auxiliary seeds) comes from the client's delete buffer of one id, which
lists that id's t (shard, label) pairs; the label is found in the server
view.  No delete is applied.
"""
import os
import struct

import numpy as np

from common import mess  # noqa: F401  (sets sys.path for the bindings)
import mess.account as acc

import attack as A


def popcount_rows(a_u64):
    b = np.unpackbits(np.ascontiguousarray(a_u64).view(np.uint8), axis=1)
    return b.sum(1)


def shard_distances(client, x0, x1):
    """d_s(q) for every shard: Hamming distance of the clean codes."""
    return popcount_rows(client.codes(x0) ^ client.codes(x1)).astype(np.int64)


def angle(x0, x1):
    x0, x1 = np.asarray(x0, np.float64), np.asarray(x1, np.float64)
    c = x0 @ x1 / (np.linalg.norm(x0) * np.linalg.norm(x1))
    return float(np.arccos(np.clip(c, -1, 1)) / np.pi)


def near_candidates(base, angle_max=0.05):
    """Every pair (d, i, j), i < j, of `base` at normalised angle
    0 < d <= angle_max, in row-major order of (i, j).  Cosines in float32
    blocks of the upper triangle with a margin, the angle of each hit in
    float64 (a 20k x 512 set is about 100 GFLOP on the reference BLAS, so
    run.py computes this once for its largest prefix)."""
    x = base.astype(np.float64)
    nrm = np.linalg.norm(x, axis=1)
    idx = np.flatnonzero(nrm > 0)
    u = x[idx] / nrm[idx, None]
    u32 = u.astype(np.float32)
    cmin = np.cos(np.pi * angle_max) - 1e-4
    out = []
    for s in range(0, len(u), 2048):
        c = u32[s:s + 2048] @ u32[s:].T
        r, q = np.nonzero(c >= cmin)
        keep = q > r                  # column s + q, row s + r: q > r is j > i
        r, q = r[keep], q[keep] + s
        d = np.arccos(np.clip(np.einsum("ij,ij->i", u[s + r], u[q]), -1, 1)) / np.pi
        ok = (d <= angle_max) & (d > 0)
        out.extend(zip(d[ok], idx[s + r[ok]], idx[q[ok]]))
    return out


def near_pairs(base, angle_max=0.05, count=5, cands=None):
    """Real pairs of `base` at normalised angle <= angle_max, the closest to
    the radius first, each vector used once (as scripts/near_pairs.py).
    `cands`: near_candidates of a longer prefix of the same set (the pairs
    of both indices < len(base) are exactly this prefix's candidates)."""
    n = len(base)
    if cands is None:
        cands = near_candidates(base, angle_max)
    cands = sorted((t for t in cands if t[1] < n and t[2] < n), key=lambda t: -t[0])
    used, pairs = set(), []
    for d, i, j in cands:
        if i in used or j in used:
            continue
        used.update((i, j))
        pairs.append((float(d), int(i), int(j)))
        if len(pairs) == count:
            break
    return pairs


class GroundTruth:
    """id -> [(shard, node)] through one-id delete buffers matched against
    the server's labels."""

    def __init__(self, client, server, some_ids):
        self.c = client
        t = client.params.per_item
        a, b = int(some_ids[0]), int(some_ids[1])
        with client.delete([a]) as d1, client.delete([a, b]) as d2:
            l1, l2 = len(d1), len(d2)
        self.rec = (l2 - l1) // t
        self.head = l1 - t * self.rec
        self.t = t
        self.label_index = []
        for v in server.shards():
            lab = np.ascontiguousarray(v.labels())
            lab = lab.view(np.uint8).reshape(v.nodes, -1) if v.nodes else \
                np.zeros((0, self.rec - 4), np.uint8)
            if lab.shape[1] != self.rec - 4:
                raise RuntimeError("label width %d does not match delete record %d"
                                   % (lab.shape[1], self.rec - 4))
            self.label_index.append({bytes(row): i for i, row in enumerate(lab)})

    def nodes(self, item_id):
        with self.c.delete([int(item_id)]) as d:
            raw = bytes(d)
        out = []
        for k in range(self.t):
            off = self.head + k * self.rec
            shard = struct.unpack_from("<I", raw, off)[0]
            node = self.label_index[shard].get(raw[off + 4:off + self.rec])
            if node is None:
                raise RuntimeError("id %d: label not on shard %d" % (item_id, shard))
            out.append((shard, node))
        return out


class Experiment:
    """One data set prefix, one saved client (fixed hashes)."""

    def __init__(self, params, train, base, client_path, seed=b"\x5a" * 32, threads=2,
                 log=None):
        self.p = params
        self.base = base
        self.threads = threads
        self.path = client_path
        if not os.path.exists(client_path):
            with mess.Client(params, train, seed=seed, threads=threads) as c:
                c.save(client_path)
        self.client = mess.Client.load(client_path)
        self.log = log or (lambda m: None)

    def pair_distances(self, x0, x1):
        return shard_distances(self.client, x0, x1)

    def build(self, ids, vectors):
        c = mess.Client.load(self.path)
        s = mess.Server(self.p)
        c.insert(s, ids, vectors, threads=self.threads)
        return c, s

    def trial(self, pair, world, trial_key, seed_frac, rng, methods_cfg=None,
              background=None):
        """One trial: returns {"truth": target [(s, node)], "ref": (s,node),
        "shards": [Shard], "know": Knowledge, "codes": target clean codes}."""
        x = pair[world]
        bg = background
        n = len(bg) + 1
        ids = (np.uint64(trial_key) << np.uint64(24)) + np.arange(n, dtype=np.uint64)
        pos = int(rng.integers(n))
        vec = np.insert(bg, pos, x, axis=0)
        target = int(ids[pos])
        c, s = self.build(ids, vec)
        try:
            gt = GroundTruth(c, s, ids)
            truth = gt.nodes(target)
            bg_ids = np.delete(ids, pos)
            nseed = int(round(seed_frac * len(bg_ids)))
            seed_pick = rng.choice(len(bg_ids), size=nseed, replace=False)
            M = self.p.shards
            items = [[] for _ in range(M)]
            nodes = [[] for _ in range(M)]
            for k in np.sort(seed_pick):
                for sh, node in gt.nodes(bg_ids[k]):
                    items[sh].append(k)
                    nodes[sh].append(node)
            items = [np.asarray(i, np.int64) for i in items]
            nodes = [np.asarray(v, np.int64) for v in nodes]
            order = [np.argsort(i) for i in items]
            items = [i[o] for i, o in zip(items, order)]
            nodes = [v[o] for v, o in zip(nodes, order)]
            ref = truth[int(rng.integers(len(truth)))]
            shards = A.shards_from_server(s)
        finally:
            s.close()
            c.close()
        know = A.Knowledge(ref[0], ref[1], items, nodes)
        return {"truth": truth, "ref": ref, "shards": shards, "know": know}


def score_trial(tr, chosen, d, target_codes, kappa):
    """U (recovered target distance), correct count, wrong-block distances."""
    truth = dict(tr["truth"])
    ref = tr["ref"]
    U = int(d[ref[0]])
    correct = 0
    wrong = []
    for s, node, _ in chosen:
        if truth.get(s) == node:
            correct += 1
            U += int(d[s])
        else:
            # normalised Hamming distance of the wrongly chosen block to the
            # target's clean code in that shard (common-null check)
            bits = tr["shards"][s].bits[node]
            tb = np.unpackbits(np.ascontiguousarray(target_codes[s]).view(np.uint8),
                               bitorder="little")
            wrong.append(float((bits != tb).mean()))
    return U, correct, wrong


def xi_from_us(p_store, us, delta0):
    """xi at delta0 for the empirical distribution of U, exact RR profile."""
    us = np.asarray(us, np.int64)
    cnt = np.bincount(us)
    with np.errstate(divide="ignore"):
        logw = np.log(cnt / cnt.sum())
    with acc.PLD(p_store, logw) as pld:
        return pld.epsilon(delta0)


def recovered_shards(tr, chosen):
    """The shards of `chosen` ((s, node, conf) triples) whose node is the
    target's entry there (ground truth, after inference)."""
    truth = dict(tr["truth"])
    return sorted(int(s) for s, node, _ in chosen if truth.get(s) == node)


def mixed_logw(d, views):
    """ln w(u) of U = d_r + V over held-out views, the reference shard r mixed
    exactly instead of sampled.  A view is either the list C of shards the
    procedure recovered (V = sum of d over C; r uniform over the M - |C|
    shards outside C: given C, the reference is a uniform shard of the rest
    of a uniform route, so uniform over them) or, for runs that kept only
    sums, the int V (r uniform over all M; it double-counts a recovered
    shard with probability |C| / M).  Each view weighs 1 / len(views).

    With r uniform, a view with C empty is exactly the 1-of-M mixture of
    xi_single; and U >= d_r' for r' uniform over all M under a coupling (r =
    r' unless r' is in C, when V already holds d_r'), so the mixture is
    stochastically at least the single-shard one and xi_link >= xi_single
    holds by construction, for every resample too (a sampled r can miss the
    pair's large-distance shards in a few views: text 10k pair 2 gave 24.6
    against xi_single 28.6)."""
    d = np.asarray(d, np.int64)
    M = d.size
    us, ws = [], []
    for c in views:
        if isinstance(c, (int, np.integer)):
            v, rest = int(c), d
        else:
            c = np.asarray(c, np.int64)
            v = int(d[c].sum())
            keep = np.ones(M, bool)
            keep[c] = False
            rest = d[keep]
        us.append(v + rest)
        ws.append(np.full(rest.size, 1.0 / (len(views) * rest.size)))
    w = np.bincount(np.concatenate(us), weights=np.concatenate(ws))
    with np.errstate(divide="ignore"):
        return np.log(w)


def xi_link_mixed(p_store, d, views, delta0):
    """xi at delta0 of mixed_logw(d, views) (exact RR profile)."""
    with acc.PLD(p_store, mixed_logw(d, views)) as pld:
        return pld.epsilon(delta0)


def bootstrap_ci_mixed(p_store, d, views, delta0, reps=200, seed=1, level=0.95):
    """Bootstrap over held-out views of xi_link_mixed."""
    rng = np.random.default_rng(seed)
    vals = [xi_link_mixed(p_store, d, [views[i] for i in rng.integers(len(views),
                                                                      size=len(views))],
                          delta0)
            for _ in range(reps)]
    a = (1 - level) / 2
    return float(np.quantile(vals, a)), float(np.quantile(vals, 1 - a))


def xi_single(p_store, d, delta0):
    """One uniformly chosen shard's entry: w = 1-of-M route weights."""
    with acc.PLD(p_store, acc.route_weights(d, 1)) as pld:
        return pld.epsilon(delta0)


def xi_complete(p_store, d, t, delta0):
    return acc.stored(p_store, d, t, delta0=delta0).xi_pld


def bootstrap_ci(p_store, us, delta0, reps=200, seed=1, level=0.95):
    rng = np.random.default_rng(seed)
    us = np.asarray(us)
    vals = [xi_from_us(p_store, rng.choice(us, size=us.size, replace=True), delta0)
            for _ in range(reps)]
    a = (1 - level) / 2
    return float(np.quantile(vals, a)), float(np.quantile(vals, 1 - a))
