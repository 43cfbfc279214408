"""Cross-shard inference on the server view (paper, Appendix A.2).

Input: what the untrusted server holds for every shard (perturbed codes,
HNSW links and levels, read through mess.ShardView) plus the evaluator's
auxiliary knowledge: one known target entry (reference shard, node) and the
correspondences of a fraction of background items (seeds: item -> node in
each shard holding it).  No ground truth, no labels, no world bit.

Each procedure scores every non-seed node of every destination shard as the
target's entry there, takes the best node per shard, and keeps the t - 1
shards whose best node stands out most (its z-score among that shard's
candidates).  Procedures:

  MDS       landmark classical MDS of shard-local Hamming distances (the
            common seeds of the two shards are the landmarks), aligned by
            orthogonal Procrustes on those seeds; score = -distance to the
            target's coordinates.
  Topology  degree and neighbour-degree similarity plus seeded graph
            matching: how many of the target's 1- and 2-hop seed
            neighbours (mapped through the seeds) are a candidate's 1- and
            2-hop neighbours.
  GSGM      graph-signal matching: each node's distances to the seeds,
            low-pass filtered over its shard's graph (h hops), compared by
            correlation on the common seeds.
  Joint     the three scores standardised per shard and summed; the best
            candidates are then re-ranked by cycle consistency over shard
            triples (reference, s, s'): a candidate whose profile agrees
            with the other shards' chosen candidates gains.

Pure numpy; hyper-parameters come from the calibration trials (run.py).
"""
import numpy as np

try:
    from scipy.sparse import csr_matrix
except ImportError:  # dense fallback (fine for small shards)
    csr_matrix = None

METHODS = ("MDS", "Topology", "GSGM", "Joint")


# ---- the server view as arrays ---------------------------------------------

class Shard:
    """One shard of the server view: bits (n, kappa) uint8, undirected
    level-0 adjacency as an edge list, degrees, levels."""

    def __init__(self, codes_u64, offsets, ids, levels):
        n = codes_u64.shape[0]
        self.n = n
        self.codes = np.ascontiguousarray(codes_u64, dtype=np.uint64).reshape(n, -1)
        self.bits = np.unpackbits(np.ascontiguousarray(codes_u64).view(np.uint8),
                                  axis=1, bitorder="little")
        self.kappa = self.bits.shape[1]
        deg = np.diff(offsets)
        src = np.repeat(np.arange(n), deg)
        dst = ids.astype(np.int64)
        self.out_deg = deg.astype(np.float64)
        self.in_deg = np.bincount(dst, minlength=n).astype(np.float64)
        # undirected edge list (both directions of every link, deduplicated)
        e = np.concatenate([src * n + dst, dst * n + src]) if n else np.zeros(0, np.int64)
        e = np.unique(e)
        self.er, self.ec = e // max(n, 1), e % max(n, 1)
        self.deg = np.bincount(self.er, minlength=n).astype(np.float64)
        self.levels = levels.astype(np.float64)
        w = np.ones(self.er.size)
        if csr_matrix is not None:
            self.A = csr_matrix((w, (self.er, self.ec)), shape=(n, n))
        else:
            self.A = np.zeros((n, n))
            self.A[self.er, self.ec] = 1.0

    def spread(self, x):
        """sum over undirected neighbours: (A x) for x (n,) or (n, k)."""
        if x.ndim == 1:
            return np.bincount(self.er, weights=x[self.ec], minlength=self.n)
        return np.asarray(self.A @ x)

    def mean_filter(self, x, hops, alpha=0.5):
        """h steps of x <- (1-alpha) x + alpha mean_neighbours(x)."""
        d = np.maximum(self.deg, 1.0)[:, None]
        for _ in range(hops):
            x = (1 - alpha) * x + alpha * self.spread(x) / d
        return x


def shards_from_server(server):
    out = []
    for v in server.shards():
        offs, ids = v.links(0)
        out.append(Shard(v.codes(), offs, ids, v.levels()))
    return out


def hamming(a_bits, b_bits):
    """Hamming distances between rows of two 0/1 matrices: float32 (na, nb)."""
    a = a_bits.astype(np.float32)
    b = b_bits.astype(np.float32)
    return a.sum(1)[:, None] + b.sum(1)[None, :] - 2.0 * (a @ b.T)


_POP16 = None


def hamming_packed(a_u64, b_u64, chunk=1 << 21):
    """The same distances from packed codes (n, words) uint64: XOR and a
    16-bit popcount table, in row blocks of about `chunk` words (faster
    than the float product on Debian's reference BLAS, and exact)."""
    global _POP16
    if _POP16 is None:
        _POP16 = np.unpackbits(np.arange(65536, dtype=np.uint16).view(np.uint8)
                               .reshape(-1, 2), axis=1).sum(1).astype(np.uint8)
    n, w = a_u64.shape
    m = b_u64.shape[0]
    # distances are at most 64 * w; uint8 while that fits (kappa <= 255):
    # a 20k prefix's seed distances are then 0.3 GB instead of 1.3
    out = np.empty((n, m), np.uint8 if 64 * w <= 255 else np.float32)
    step = max(1, chunk // max(m * w, 1))
    for i in range(0, n, step):
        x = a_u64[i:i + step, None, :] ^ b_u64[None, :, :]
        out[i:i + step] = _POP16[x.view(np.uint16)].sum(2, dtype=np.uint16)
    return out


# ---- auxiliary knowledge ------------------------------------------------------

class Knowledge:
    """ref: (shard, node) of the known target entry; seeds: seed_nodes[s] =
    int array of the seed items' nodes in shard s, seed_items[s] = the seed
    item numbers of those nodes (same order)."""

    def __init__(self, ref_shard, ref_node, seed_items, seed_nodes):
        self.ref_shard, self.ref_node = ref_shard, ref_node
        self.seed_items, self.seed_nodes = seed_items, seed_nodes


def common(k, r, s):
    """Positions (in r's and s's seed lists) of the seed items in both."""
    _, ir, is_ = np.intersect1d(k.seed_items[r], k.seed_items[s], return_indices=True)
    return ir, is_


# ---- per-shard score vectors ---------------------------------------------------

def _zs(x):
    sd = x.std()
    return (x - x.mean()) / (sd if sd > 0 else 1.0)


def _corr_rows(X, y):
    Xc = X - X.mean(1, keepdims=True)
    yc = y - y.mean()
    den = np.sqrt((Xc * Xc).sum(1) * (yc * yc).sum()) + 1e-12
    return Xc @ yc / den


def _lmds_eig(D):
    """The eigen-decomposition _lmds truncates: (eigenvalues in decreasing
    order, their vectors, mean sq dist (m,)) of a landmark distance matrix
    D (m, m); one per matrix, whatever the number of dimensions."""
    D2 = D.astype(np.float64) ** 2
    m = D2.shape[0]
    J = np.eye(m) - 1.0 / m
    B = -0.5 * J @ D2 @ J
    w, V = np.linalg.eigh(B)
    order = np.argsort(w)[::-1]
    return w[order], V[:, order], D2.mean(0)


def _lmds(D, dims, eig=None):
    """Landmark MDS basis from a landmark distance matrix D (m, m), or its
    _lmds_eig: (coords of landmarks (m, k), pinv transform (k, m), mean sq
    dist (m,))."""
    w, V, mean2 = eig if eig is not None else _lmds_eig(D)
    w, V = np.maximum(w[:dims], 1e-9), V[:, :dims]
    L = V * np.sqrt(w)
    Lsharp = (V / np.sqrt(w)).T
    return L, Lsharp, mean2


def _lmds_embed(Lsharp, mean2, Dpts):
    return (-0.5 * (Dpts.astype(np.float64) ** 2 - mean2) @ Lsharp.T)


class Attack:
    """All procedures over one view; hyper-parameters in `cfg`."""

    def __init__(self, shards, know, t, cfg=None):
        self.S, self.k, self.t = shards, know, t
        self.cfg = dict(mds_dims=8, gsgm_hops=2, joint_top=3, joint_cycle=1.0)
        if cfg:
            self.cfg.update(cfg)
        M = len(shards)
        self.M = M
        r, v = know.ref_shard, know.ref_node
        # distances of every node to its shard's seeds
        self.H = [hamming_packed(sh.codes, sh.codes[know.seed_nodes[s]]) if sh.n else
                  np.zeros((0, 0), np.float32) for s, sh in enumerate(shards)]
        self.cand = []
        for s, sh in enumerate(shards):
            mask = np.ones(sh.n, bool)
            mask[know.seed_nodes[s]] = False
            if s == r:
                mask[:] = False
            self.cand.append(np.flatnonzero(mask))
        self._filtered = {}
        self._refrows = {}
        self._eig = {}
        self.r, self.v = r, v

    def with_cfg(self, cfg):
        """The same view under other hyper-parameters, sharing the seed
        distances and filtered signals already computed (calibration tries
        every grid value on one view)."""
        other = object.__new__(Attack)
        other.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_all"})
        other.cfg = dict(self.cfg, **(cfg or {}))
        if all(other.cfg[k] == self.cfg[k] for k in ("mds_dims", "gsgm_hops")) \
                and hasattr(self, "_all"):
            other._all = self._all        # scores do not depend on joint_cycle
        return other

    # -- helpers
    def filtered(self, s, hops):
        """Shard s's standardised seed distances, low-pass filtered over its
        graph (float32; only one `hops` value is cached at a time, since
        all shards' signals at a 20k prefix take 1.3 GB)."""
        key = (s, hops)
        if key not in self._filtered:
            if any(k[1] != hops for k in self._filtered):
                self._filtered.clear()
            X = self.H[s].astype(np.float32)
            if X.size:
                X = (X - X.mean(0)) / (X.std(0) + np.float32(1e-9))
            self._filtered[key] = self.S[s].mean_filter(X, hops).astype(np.float32, copy=False) \
                if hops else X
        return self._filtered[key]

    def standardised(self, s, cols=None):
        """Shard s's seed distances (the columns `cols` of them, all by
        default), each column standardised over the shard's nodes: float32,
        column by column the same numbers as the full matrix's columns."""
        X = self.H[s] if cols is None else self.H[s][:, cols]
        X = X.astype(np.float32)
        if X.size:
            X = (X - X.mean(0)) / (X.std(0) + np.float32(1e-9))
        return X

    def filtered_rows(self, s, hops, nodes):
        """Rows `nodes` of filtered(s, hops), all columns, without filtering
        the other rows: e_i^T P^h by propagating the rows' indicators h
        steps (P = x/2 + mean over neighbours/2, A symmetric), times the
        standardised signals.  Equal to filtered() up to float rounding."""
        sh = self.S[s]
        Y = np.zeros((len(nodes), sh.n))
        Y[np.arange(len(nodes)), nodes] = 1.0
        inv = 1.0 / np.maximum(sh.deg, 1.0)
        for _ in range(hops):
            Y = 0.5 * Y + 0.5 * sh.spread((Y * inv).T).T
        return (Y @ self.standardised(s)).astype(np.float32)

    def gsgm_iterates(self, s, hops):
        """Yields (h, shard s's filtered signals after h hops) for h = 0 ..
        max(hops), each step continuing the previous one (the same numbers
        as filtered(s, h)), over the columns GSGM compares for s: its seeds
        in common with the reference shard.  The reference shard's row is
        kept at every h (all its columns: each destination shard compares
        different ones)."""
        ir, is_ = common(self.k, self.r, s)
        X = self.standardised(s, is_)
        sh = self.S[s]
        d = np.maximum(sh.deg, 1.0)[:, None]
        for h in range(max(hops) + 1):
            if h:
                X = 0.5 * X + 0.5 * sh.spread(X) / d      # mean_filter, one step
            if h in hops:
                yield h, X.astype(np.float32, copy=False), ir

    def ref_rows(self, hops):
        """The reference node's filtered signal at each hop count in `hops`
        (its shard filtered once, all columns, one step after another)."""
        key = tuple(sorted(hops))
        for rows in self._refrows.values():     # a sweep's rows serve any count in it
            if set(hops) <= set(rows):
                return rows
        if key not in self._refrows:
            X = self.standardised(self.r)
            sh = self.S[self.r]
            d = np.maximum(sh.deg, 1.0)[:, None]
            rows = {}
            for h in range(max(hops) + 1):
                if h:
                    X = 0.5 * X + 0.5 * sh.spread(X) / d
                if h in hops:
                    rows[h] = X[self.v].astype(np.float32)
            self._refrows[key] = rows
        return self._refrows[key]

    def gsgm_sweep(self, hops):
        """GSGM's choice at every hop count in `hops` (calibration): each
        shard's signals are filtered once, up to the largest count, over the
        columns its score uses (about 15/63 of its seeds) instead of all of
        them once per count.  {h: chosen}, each equal to
        with_cfg({"gsgm_hops": h}).run("GSGM")."""
        hops = tuple(hops)
        ref = self.ref_rows(hops)
        scores = {h: [None] * self.M for h in hops}
        for s in range(self.M):
            if s == self.r:
                continue
            c = self.cand[s]
            for h, F, ir in self.gsgm_iterates(s, hops):
                scores[h][s] = np.zeros(c.size) if len(ir) < 3 or c.size == 0 else \
                    _corr_rows(F[c], ref[h][ir])
        return {h: self._select(scores[h]) for h in hops}

    # -- scores for destination shard s over self.cand[s]
    def score_mds(self, s):
        ir, is_ = common(self.k, self.r, s)
        c = self.cand[s]
        dims = self.cfg["mds_dims"]
        if len(ir) < dims + 2 or c.size == 0:
            return np.zeros(c.size)
        Hr, Hs = self.H[self.r][:, ir], self.H[s][:, is_]
        lr = self.k.seed_nodes[self.r][ir]
        ls = self.k.seed_nodes[s][is_]
        # the decompositions do not depend on dims: once per shard for the
        # calibration's three values (with_cfg shares self._eig)
        if s not in self._eig:
            self._eig[s] = (_lmds_eig(Hr[lr]), _lmds_eig(Hs[ls]))
        er, es = self._eig[s]
        Lr, Sr, mr = _lmds(None, dims, er)
        Ls, Ss, ms = _lmds(None, dims, es)
        # Procrustes: rotate s's landmark configuration onto r's
        U, _, Vt = np.linalg.svd(Ls.T @ Lr)
        R = U @ Vt
        yt = _lmds_embed(Sr, mr, Hr[self.v:self.v + 1])[0]
        yc = _lmds_embed(Ss, ms, Hs[c]) @ R
        return -np.sqrt(((yc - yt) ** 2).sum(1))

    def score_gsgm(self, s):
        ir, is_ = common(self.k, self.r, s)
        c = self.cand[s]
        if len(ir) < 3 or c.size == 0:
            return np.zeros(c.size)
        h = self.cfg["gsgm_hops"]
        Fr = self.ref_rows((h,))[h][ir]
        for _, F, _ in self.gsgm_iterates(s, (h,)):
            return _corr_rows(F[c], Fr)

    def _mapped(self, s, nodes_r):
        """Nodes of shard s of the seed items among `nodes_r` (nodes of r)."""
        k = self.k
        pos = np.flatnonzero(np.isin(k.seed_nodes[self.r], nodes_r))
        items = k.seed_items[self.r][pos]
        _, _, js = np.intersect1d(items, k.seed_items[s], return_indices=True)
        return k.seed_nodes[s][js]

    def score_topology(self, s):
        c = self.cand[s]
        if c.size == 0:
            return np.zeros(0)
        R, S = self.S[self.r], self.S[s]
        e = np.zeros(R.n)
        e[self.v] = 1.0
        n1 = R.spread(e)
        n2 = R.spread(n1)
        hop1 = np.flatnonzero(n1 > 0)
        hop2 = np.flatnonzero((n2 > 0) & (n1 == 0))
        hop2 = hop2[hop2 != self.v]
        x1 = np.zeros(S.n)
        x1[self._mapped(s, hop1)] = 1.0
        x2 = np.zeros(S.n)
        x2[self._mapped(s, hop2)] = 1.0
        a1 = S.spread(x1)            # seed 1-hop neighbours shared
        a2 = S.spread((S.spread(x1) > 0).astype(np.float64)) + S.spread(x2)  # 2-hop agreement
        # degree and neighbour-degree similarity (unseeded structure)
        nd_r = R.spread(R.deg)[self.v] / max(R.deg[self.v], 1)
        nd_s = S.spread(S.deg) / np.maximum(S.deg, 1)
        sd = np.std(S.deg) + 1e-9
        struct = -np.abs(S.deg - R.deg[self.v]) / sd \
            - np.abs(S.in_deg - R.in_deg[self.v]) / (np.std(S.in_deg) + 1e-9) \
            - np.abs(nd_s - nd_r) / (np.std(nd_s) + 1e-9)
        return (2.0 * a1 + 0.5 * a2 + 0.1 * struct)[c]

    # -- selection
    def _select(self, scores):
        """scores[s] over cand[s] -> chosen list of (s, node, confidence)."""
        best = []
        for s in range(self.M):
            sc = scores[s]
            if s == self.r or sc is None or sc.size == 0:
                continue
            i = int(np.argmax(sc))
            if sc.size == 1:
                # the shard's only unexplained node: every other node is a
                # known seed, so nothing else can be the target's entry
                conf = np.inf
            else:
                sd = sc.std()
                conf = (sc[i] - sc.mean()) / (sd if sd > 0 else 1.0)
            best.append((conf, s, int(self.cand[s][i])))
        best.sort(reverse=True)
        return [(s, node, conf) for conf, s, node in best[:self.t - 1]]

    def run(self, method):
        if method == "MDS":
            return self._select([self.score_mds(s) if s != self.r else None
                                 for s in range(self.M)])
        if method == "GSGM":
            return self._select([self.score_gsgm(s) if s != self.r else None
                                 for s in range(self.M)])
        if method == "Topology":
            return self._select([self.score_topology(s) if s != self.r else None
                                 for s in range(self.M)])
        if method == "Joint":
            return self.joint()
        raise ValueError(method)

    def all_scores(self):
        if not hasattr(self, "_all"):
            self._all = {}
            for name, f in (("MDS", self.score_mds), ("GSGM", self.score_gsgm),
                            ("Topology", self.score_topology)):
                self._all[name] = [f(s) if s != self.r else None for s in range(self.M)]
        return self._all

    def run_all(self):
        a = self.all_scores()
        out = {m: self._select(a[m]) for m in ("MDS", "GSGM", "Topology")}
        out["Joint"] = self.joint()
        return out

    def joint(self, full=False):
        """Joint; full=True filters every row of every shard (the plain
        computation, for the test) instead of the rows compared."""
        a = self.all_scores()
        comb = []
        for s in range(self.M):
            if s == self.r or a["MDS"][s] is None or a["MDS"][s].size == 0:
                comb.append(None)
                continue
            comb.append(_zs(a["MDS"][s]) + _zs(a["GSGM"][s]) + _zs(a["Topology"][s]))
        w = self.cfg["joint_cycle"]
        if w <= 0:
            return self._select(comb)
        # cycle consistency over triples (r, s, s'): among each shard's top
        # candidates, prefer the one whose filtered seed profile agrees with
        # the leading candidates of the other shards.
        K = self.cfg["joint_top"]
        h = self.cfg["gsgm_hops"]
        first = self._select(comb)
        lead = {s: node for s, node, _ in first}
        new = list(comb)
        tops = {s: np.argsort(comb[s])[::-1][:K] for s in range(self.M)
                if comb[s] is not None}
        # the filtered signals of the few rows compared: each shard's top
        # candidates and its leading one (not all rows of all shards)
        rows = {}
        for s in range(self.M):
            nodes = [int(x) for x in self.cand[s][tops[s]]] if s in tops else []
            if s in lead:
                nodes.append(lead[s])
            if nodes:
                F = self.filtered(s, h) if full else self.filtered_rows(s, h, nodes)
                rows[s] = {node: (F[node] if full else F[k])
                           for k, node in enumerate(nodes)}
        for s in range(self.M):
            if comb[s] is None:
                continue
            top = tops[s]
            bonus = np.zeros(top.size)
            F1all = np.array([rows[s][int(x)] for x in self.cand[s][top]])
            for s2, n2 in lead.items():
                if s2 == s:
                    continue
                i1, i2 = common(self.k, s, s2)
                if len(i1) < 3:
                    continue
                F1 = F1all[:, i1]
                f2 = rows[s2][n2][i2]
                bonus += _corr_rows(F1, f2)
            bonus /= max(len(lead) - (s in lead), 1)
            sc = comb[s].copy()
            sc[top] += w * bonus * (sc.std() if sc.std() > 0 else 1.0) * 3.0
            new[s] = sc
        return self._select(new)
