"""Privacy accountants and the correctness model (mess_account_* and
mess_plan_* of mess_experimental.h: paper section 5.2, Appendix A.1, Proposition 4.1 and
Appendix B).  Pure numerics over public parameters, except plan_recall,
which uses the client's own clean codes.  Privacy parameters are in nats.

Bound lazily: with a library built before these functions existed, calling
one raises NotImplementedError naming the missing symbol."""
import ctypes
from collections import namedtuple
from ctypes import (POINTER, byref, c_double, c_int, c_size_t, c_uint32,
                    c_uint64, c_void_p)

import numpy as np

from . import _lib as L
from .core import _Handle

StoredResult = namedtuple("StoredResult", "eta u_max u_mean xi_pure xi_pld")

MAX_REPEATS = L.library_limits["ACCOUNT_MAX_REPEATS"]
MIN_DELTA = L.library_limits["ACCOUNT_MIN_DELTA"]


_stored_result = L.mess_account_stored_result  # size first: mess.h, "Growable structs"


_D = POINTER(c_double)
_PROTOS = {
    "mess_account_eta": [c_double, _D],
    "mess_account_stored_pure": [c_double, c_void_p, c_size_t, c_size_t, _D],
    "mess_account_route_weights": [c_void_p, c_size_t, c_size_t, c_void_p, c_size_t,
                                   POINTER(c_size_t)],
    "mess_account_rr_delta": [c_double, c_uint64, c_double, _D],
    "mess_account_pld_new": [c_double, c_void_p, c_size_t, POINTER(c_void_p)],
    "mess_account_pld_free": [c_void_p],
    "mess_account_pld_delta": [c_void_p, c_double, _D],
    "mess_account_pld_epsilon": [c_void_p, c_double, _D],
    "mess_account_pld_tail": [c_void_p, c_double, _D, _D],
    "mess_account_pld_support": [c_void_p, POINTER(c_uint64), _D],
    "mess_account_stored_sized": [c_double, c_void_p, c_size_t, c_size_t, c_int, c_double,
                                  POINTER(_stored_result), c_size_t],
    "mess_account_versions_sized": [c_double, c_void_p, c_void_p, c_size_t, c_size_t,
                                    c_int, c_double, POINTER(_stored_result), c_size_t],
    "mess_account_version_bits": [c_double, _D, _D, _D],
    "mess_account_summary": [c_void_p, c_double, c_double, ctypes.c_char_p, c_size_t,
                             POINTER(c_size_t)],
    "mess_account_access": [c_double, c_double, c_uint64, _D],
    "mess_account_search": [c_double, c_double, c_uint64, _D, _D],
    "mess_account_search_xi": [c_double, c_double, c_uint64, c_uint64, c_uint64, _D, _D],
    "mess_account_random_lsh": [c_double, c_uint32, c_double, c_double, _D, _D],
    "mess_plan_compound_flip": [c_double, c_double, _D],
    "mess_plan_overtake": [c_uint32, c_double, c_uint32, c_uint32, _D],
    "mess_plan_rank": [c_uint32, c_double, c_uint32, c_void_p, c_double, _D, _D],
    "mess_plan_hit": [c_double, c_double, c_double, _D],
    "mess_plan_recovery": [c_void_p, c_size_t, _D],
    "mess_plan_recovery_uniform": [c_void_p, c_size_t, c_size_t, _D],
    "mess_plan_recall": [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t, c_void_p,
                         c_size_t, c_void_p, c_size_t, ctypes.c_uint, c_void_p],
}
_bound = {}


def _fn(name):
    f = _bound.get(name)
    if f is None:
        if not L.has(name):
            raise NotImplementedError("%s: not in %s (rebuild libmess)" % (name, L.path))
        void = name == "mess_account_pld_free"
        f = L._proto(name, _PROTOS[name], None if void else c_int)
        _bound[name] = f
    return f


def available():
    """True if the loaded library has the accountant API."""
    return all(L.has(n) for n in _PROTOS)


def _u32(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind not in "iu" or (a.size and a.min() < 0):
        raise ValueError("distances must be non-negative integers")
    return np.ascontiguousarray(a.reshape(-1), dtype=np.uint32)


def _f64(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float64).reshape(-1))


def _out(name, *args, n=1):
    outs = [c_double() for _ in range(n)]
    _fn(name)(*args, *[byref(o) for o in outs])
    return outs[0].value if n == 1 else tuple(o.value for o in outs)


# ---- stored data (Theorem 5.2, Corollary 5.3) ---------------------------------

def eta(p):
    """ln((1-p)/p): per-coordinate pure XDP of randomized response."""
    return _out("mess_account_eta", p)


def stored_pure(p_store, d, t):
    """eta_D * (sum of the t largest per-shard distances d)."""
    d = _u32(d)
    return _out("mess_account_stored_pure", p_store, d.ctypes.data, d.size, t)


def route_weights(d, t):
    """ln w(u), u = 0..U: the aggregate distance over a uniform t-of-m route."""
    d = _u32(d)
    n = c_size_t()
    f = _fn("mess_account_route_weights")
    f(d.ctypes.data, d.size, t, None, 0, byref(n))
    out = np.empty(n.value, dtype=np.float64)
    f(d.ctypes.data, d.size, t, out.ctypes.data, out.size, byref(n))
    return out


def rr_delta(p, u, eps):
    """Exact randomized-response hockey-stick delta_u(eps)."""
    return _out("mess_account_rr_delta", p, u, eps)


class PLD(_Handle):
    """Privacy-loss distribution of randomized response mixed over a
    distance distribution (log-weights logw[u])."""

    # looked up at free time: the accountant symbols are bound lazily
    _free = staticmethod(lambda p: _fn("mess_account_pld_free")(p))

    def __init__(self, p, logw):
        w = _f64(logw)
        out = c_void_p()
        _fn("mess_account_pld_new")(p, w.ctypes.data, w.size, byref(out))
        super().__init__(out.value)

    def delta(self, eps):
        return _out("mess_account_pld_delta", self.ptr, eps)

    def epsilon(self, delta0):
        return _out("mess_account_pld_epsilon", self.ptr, delta0)

    def tail(self, eps):
        """(bound, exact) on Pr[privacy loss > eps]."""
        return _out("mess_account_pld_tail", self.ptr, eps, n=2)

    def support(self):
        """(largest aggregate distance, mean aggregate distance)."""
        u, m = c_uint64(), c_double()
        _fn("mess_account_pld_support")(self.ptr, byref(u), byref(m))
        return u.value, m.value


def stored(p_store, d, t, fixed=False, delta0=1e-5):
    """Stored-data accountant for one challenge pair: a StoredResult."""
    d = _u32(d)
    r = _stored_result()
    _fn("mess_account_stored_sized")(p_store, d.ctypes.data, d.size, t, int(bool(fixed)),
                                     delta0, byref(r), ctypes.sizeof(r))
    return StoredResult(r.eta, r.u_max, r.u_mean, r.xi_pure, r.xi_pld)


# ---- version histories (Theorem V of docs/PRIVACY.md) ---------------------------

def versions(p_store, d, t, changed=None, fixed=False, delta0=1e-5):
    """Stored-data accountant for a version history of one id whose two
    challenge histories differ by one mask in every version, d[s] bits of
    it in shard s, changed[s] of which change within the history (None:
    all, the worst case): a StoredResult on the distances d + changed,
    whatever the number of versions."""
    d = _u32(d)
    c = None if changed is None else _u32(changed)
    if c is not None and c.size != d.size:
        raise ValueError("changed needs one count per shard")
    r = _stored_result()
    _fn("mess_account_versions_sized")(p_store, d.ctypes.data,
                                       None if c is None else c.ctypes.data, d.size, t,
                                       int(bool(fixed)), delta0, byref(r), ctypes.sizeof(r))
    return StoredResult(r.eta, r.u_max, r.u_mean, r.xi_pure, r.xi_pld)


def version_bits(p_store):
    """(2 eta_D per changed bit, probability a changed bit shows, error of
    reading it as the clean bit)."""
    return _out("mess_account_version_bits", p_store, n=3)


def summary(params, angle=0.05, delta0=1e-5):
    """The bottom line for a client's parameters (a Client or Params):
    (paragraph in plain words, dict of the numbers behind it), the same as
    `mess account summary`."""
    import json
    p = params.params if hasattr(params, "params") else params
    n = c_size_t()
    f = _fn("mess_account_summary")
    f(byref(p), angle, delta0, None, 0, byref(n))
    buf = ctypes.create_string_buffer(n.value + 1)
    f(byref(p), angle, delta0, buf, len(buf), byref(n))
    text = buf.value.decode()
    body, _, last = text.rstrip("\n").rpartition("\n")
    return body + "\n", json.loads(last)


# ---- queries (Theorems 5.4, 5.5) -------------------------------------------------

def access(p_prr, p_irr, repeats=1):
    """eta_R of the access pattern for R submissions of one query."""
    return _out("mess_account_access", p_prr, p_irr, repeats)


def search(p_prr, p_irr, repeats=1):
    """(gamma_eq, gamma_ne) of the search pattern."""
    return _out("mess_account_search", p_prr, p_irr, repeats, n=2)


def search_xi(p_prr, p_irr, repeats, bits, distance):
    """(xi_SP, uniform ordinary-DP bound)."""
    return _out("mess_account_search_xi", p_prr, p_irr, repeats, bits, distance, n=2)


def random_lsh(p, kappa, d_theta, delta0):
    """(xi by the exact mixture, xi by the Chernoff tail)."""
    return _out("mess_account_random_lsh", p, kappa, d_theta, delta0, n=2)


# ---- correctness model (Proposition 4.1, Appendix B) ---------------------------

def compound_flip(p_store, p_query):
    return _out("mess_plan_compound_flip", p_store, p_query)


def overtake(kappa, p_plus, d_star, d):
    return _out("mess_plan_overtake", kappa, p_plus, d_star, d)


def rank(kappa, p_plus, d_star, count, occupancy):
    """(mean, var) of the Poisson-binomial shard rank; count[d], d=0..kappa."""
    c = _f64(count)
    if c.size != kappa + 1:
        raise ValueError("count needs kappa + 1 = %d entries" % (kappa + 1))
    return _out("mess_plan_rank", kappa, p_plus, d_star, c.ctypes.data, occupancy, n=2)


def hit(mean, var, budget):
    return _out("mess_plan_hit", mean, var, budget)


def recovery(p_hit):
    h = _f64(p_hit)
    return _out("mess_plan_recovery", h.ctypes.data, h.size)


def recovery_uniform(p_hit, t):
    h = _f64(p_hit)
    return _out("mess_plan_recovery_uniform", h.ctypes.data, h.size, t)


def plan_recall(client, data, queries, pools, k=10, truth=None, threads=1):
    """Predicted Recall@k per pool B from the client's clean codes (an
    upper envelope of measured recall: HNSW's own misses are ignored)."""
    dim = client.params.dim
    data = np.ascontiguousarray(data, dtype=np.float32).reshape(-1, dim)
    queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, dim)
    pools = np.ascontiguousarray(np.asarray(pools).reshape(-1), dtype=np.uintp)
    if truth is not None:
        truth = np.ascontiguousarray(truth, dtype=np.uint32).reshape(len(queries), k)
    out = np.empty(pools.size, dtype=np.float64)
    _fn("mess_plan_recall")(client.ptr, data.ctypes.data, len(data), queries.ctypes.data,
                            len(queries), truth.ctypes.data if truth is not None else None,
                            k, pools.ctypes.data, pools.size, threads, out.ctypes.data)
    return out
