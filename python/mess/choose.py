"""mess.choose: the configuration from the user's data (mess_plan_choose,
mess_experimental.h), as `mess init --target-recall / --max-bytes` uses it.

choose(train, data, target_recall=R | max_bytes=N, queries=None, ...)
returns a Choice: the Params to create the client with, the pool B to
query with, the predicted recall and bytes per query, and why (the limit
that set each flip).  Params.for_data(x, target_recall=R, train=...)
returns only the Params.
"""
import ctypes
from collections import namedtuple
from ctypes import byref

import numpy as np

from . import _lib as L
from ._lib import MessError

# MESS_PLAN_BOUND_*: the limit that set a flip
BOUNDS = {0: "floor", 1: "max_xi", 2: "max_xi_query", 3: "max_xi_cap", 4: "max_xi_shard"}
_PAYLOAD_NAMES = {0: "f32", 1: "f16", 2: "i8", 3: "u8"}

Candidate = namedtuple("Candidate", "shards per_item bits payload p_store p_query p_prr "
                       "xi_store xi_query xi_cap xi_shard pool recall bytes store_bound "
                       "query_bound")


class Choice(namedtuple("Choice", "params pool recall bytes candidate candidates "
                        "payload_recall limits")):
    """The winner: params (mess.Params), pool (B for Client.query),
    recall (predicted Recall@k at B), bytes (per query at B), candidate
    (its Candidate: flips, bounds, the limit that set each flip in
    store_bound / query_bound), candidates (every Candidate tried),
    payload_recall ({"f32": 1.0, "f16": ..., ...}, the encodings weighed),
    limits (max_xi, max_xi_query, max_xi_cap, max_xi_shard used)."""


class NoConfigurationError(L.NotFoundError):
    """No candidate reaches the target (or fits the budget): .best is the
    best reachable Candidate (highest recall; with a budget, fewest bytes)."""

    def __init__(self, message, best):
        MessError.__init__(self, L.ENOTFOUND, message, "mess_plan_choose_sized")
        self.best = best
        self.args = (message,)


_choose = None


def _fn():
    global _choose
    if _choose is None:
        if not hasattr(L.lib, "mess_plan_choose_sized"):
            raise NotImplementedError("mess_plan_choose_sized: not exported by %s" % L.path)
        f = L.lib.mess_plan_choose_sized
        f.argtypes = [ctypes.POINTER(L.mess_plan_choose_in),
                      ctypes.POINTER(L.mess_plan_choice), ctypes.c_size_t]
        f.restype = ctypes.c_int
        _choose = f
    return _choose


def _cand(c):
    return Candidate(c.shards, c.per_item, c.bits, _PAYLOAD_NAMES.get(c.payload, c.payload),
                     c.p_store, c.p_query, c.p_prr, c.xi_store, c.xi_query, c.xi_cap,
                     c.xi_shard, c.pool or None, c.recall, c.bytes,
                     BOUNDS.get(c.store_bound), BOUNDS.get(c.query_bound))


def _f32(x, name, dim=None):
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError("%s must have shape (n, dim) with n, dim >= 1, got %s"
                         % (name, a.shape))
    if dim is not None and a.shape[1] != dim:
        raise ValueError("%s has dimension %d, expected %d" % (name, a.shape[1], dim))
    if not np.all(np.isfinite(a)):
        raise ValueError("%s has a component that is not finite" % name)
    return a


def _grid(v, name, dtype):
    if v is None:
        return None
    a = np.ascontiguousarray(np.asarray(v, dtype=dtype).ravel())
    if a.size == 0:
        raise ValueError("%s must not be empty" % name)
    return a


def choose(train, data, target_recall=None, max_bytes=None, queries=None, k=10,
           holdout=200, truth=None, payload=None, grid_shards=None, grid_per_item=None,
           grid_bits=(64, 128), pools=None, max_xi=None, max_xi_query=None,
           max_xi_cap=None, max_xi_shard=None, check_shards=4, threads=1, seed=None,
           **fields):
    """The configuration for target_recall (the fewest bytes per query
    reaching Recall@k) or max_bytes (the highest predicted recall within
    it), at privacy no weaker than the paper's limits (or the max_xi*
    given), from a sample of the data: train (hash training set), data
    (vectors like those to be stored, ideally as many), queries (sample
    queries; None: the last min(holdout, n/5) rows of data are held out,
    their exact top-k computed in the library).  payload None chooses the
    encoding (u8 for byte data, else f16 / i8 when the model says recall
    holds, else f32); fields (metric, hnsw_m, ...) go to Params.  The
    grids and pools default to those of `mess init --target-recall`
    (kappa 64, 128; pools from 100).  Raises NoConfigurationError when
    nothing reaches the target (its .best: the best reachable)."""
    from .core import Params  # core imports this module lazily too
    if (target_recall is None) == (max_bytes is None):
        raise ValueError("give one of target_recall and max_bytes")
    t = _f32(train, "train")
    d = _f32(data, "data", t.shape[1])
    if queries is None:
        nq = min(int(holdout), d.shape[0] // 5)
        if nq < 1:
            raise ValueError("data has %d rows: too few to hold out queries from "
                             "(give queries)" % d.shape[0])
        q = np.ascontiguousarray(d[d.shape[0] - nq:])
        d = np.ascontiguousarray(d[:d.shape[0] - nq])
    else:
        q = _f32(queries, "queries", t.shape[1])
    if payload is not None:
        fields["payload"] = payload
    base = Params(t.shape[1], **fields)
    gm = _grid(grid_shards, "grid_shards", np.uint32)
    gt = _grid(grid_per_item, "grid_per_item", np.uint32)
    gk = _grid(grid_bits, "grid_bits", np.uint32)
    pl = _grid(pools if pools is not None else
               (100, 175, 250, 375, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000),
               "pools", np.uintp)
    tr = None
    if truth is not None:
        tr = np.ascontiguousarray(np.asarray(truth, dtype=np.int64)[:, :k])
        if tr.shape != (q.shape[0], k) or tr.min() < 0 or tr.max() >= d.shape[0]:
            raise ValueError("truth must be (len(queries), >= k) indices into data")
        tr = tr.astype(np.uint32)
    sd = None
    if seed is not None:
        sd = bytes(seed)
        if len(sd) != 32:
            raise ValueError("seed must be 32 bytes")
    seen = []

    def note(_ctx, c):
        seen.append(_cand(c.contents))
    cb = L.PLAN_CANDIDATE_FN(note)
    inp = L.mess_plan_choose_in()
    inp.size = ctypes.sizeof(inp)  # mess.h, "Growable structs"
    inp.k = int(k)
    inp.base = ctypes.cast(ctypes.pointer(base), ctypes.POINTER(L.mess_params))
    inp.train, inp.ntrain = t.ctypes.data, t.shape[0]
    inp.data, inp.n = d.ctypes.data, d.shape[0]
    inp.queries, inp.nq = q.ctypes.data, q.shape[0]
    inp.truth = tr.ctypes.data if tr is not None else None
    inp.target_recall = float(target_recall or 0)
    inp.max_bytes = float(max_bytes or 0)
    inp.max_xi = float(max_xi or 0)
    inp.max_xi_query = float(max_xi_query or 0)
    inp.max_xi_cap = float(max_xi_cap or 0)
    inp.max_xi_shard = float(max_xi_shard or 0)
    for name, a in (("grid_shards", gm), ("grid_per_item", gt), ("grid_bits", gk),
                    ("pools", pl)):
        if a is not None:
            setattr(inp, name, a.ctypes.data)
            setattr(inp, "n_" + name if name != "pools" else "npools", a.size)
    inp.check_shards = int(check_shards)
    inp.check_queries = 100
    inp.choose_payload = 1 if payload is None else 0
    inp.threads = int(threads)
    inp.seed = ctypes.cast(ctypes.c_char_p(sd), ctypes.c_void_p) if sd else None
    inp.on_candidate = cb
    out = L.mess_plan_choice()
    rc = _fn()(byref(inp), byref(out), ctypes.sizeof(out))
    if rc == L.ENOTFOUND:
        b = _cand(out.best)
        if target_recall is not None:
            msg = ("no configuration reaches Recall@%d %.4g on this sample: the best "
                   "reachable is %.4f (M %d, t %d, kappa %d, %s, %.0f bytes per query)"
                   % (k, target_recall, b.recall, b.shards, b.per_item, b.bits, b.payload,
                      b.bytes))
        else:
            msg = ("no configuration fits %.0f bytes per query: the fewest is %.0f (M %d, "
                   "t %d, kappa %d, %s)" % (max_bytes, b.bytes, b.shards, b.per_item,
                                           b.bits, b.payload))
        raise NoConfigurationError(msg, b)
    if rc != 0:
        raise L.error(rc, "mess_plan_choose_sized")
    p = Params()
    ctypes.memmove(byref(p), byref(out.params), ctypes.sizeof(L.mess_params))
    p.size = ctypes.sizeof(L.mess_params)
    w = _cand(out.best)
    pr = {_PAYLOAD_NAMES[i]: out.payload_recall[i] for i in range(4) if out.payload_recall[i]}
    return Choice(p, w.pool, w.recall, w.bytes, w, seen, pr,
                  dict(max_xi=out.max_xi, max_xi_query=out.max_xi_query,
                       max_xi_cap=out.max_xi_cap, max_xi_shard=out.max_xi_shard))


__all__ = ["choose", "Choice", "Candidate", "NoConfigurationError", "BOUNDS"]
