"""Python face of libmess: parameters, the client and server roles, byte
buffers, queries and the read-only server view.

Arrays go in and out as numpy arrays; a C-contiguous array of the right
dtype (float32 vectors, uint64 ids, uint8 buffers) is passed to C by
pointer without a copy.  Every handle frees its C object on close(), at
the end of a `with` block, or when garbage-collected.
"""
import ctypes
import os
import time
import warnings
from collections import namedtuple
from ctypes import byref, c_size_t, c_uint32, c_void_p

import numpy as np

from . import _lib as L
from ._lib import MessError

METRICS = {"l2": 0, "ip": 1, "cos": 2, "cosine": 2}
OWNER_BYTES = L.library_limits["OWNER_BYTES"]  # MESS_OWNER_BYTES
MAX_EF = L.library_limits["MAX_EF"]              # MESS_MAX_EF
SEED_BYTES = L.library_limits["SEED_BYTES"]      # MESS_SEED_BYTES
MAX_BUDGET = L.library_limits["MAX_BUDGET"]      # MESS_MAX_BUDGET
PAYLOADS = {"f32": 0, "f16": 1, "i8": 2, "int8": 2, "u8": 3, "uint8": 3}
LAYOUTS = {"default": 0, "codes": 1}  # MESS_LAYOUT_DEFAULT, MESS_LAYOUT_CODES

FinishStats = namedtuple("FinishStats", "candidates unique auth_failures unopened")
ServerStats = namedtuple("ServerStats", "entries live deleted bytes min_shard max_shard")
QueryResult = namedtuple("QueryResult",
                         "ids dists stats request_bytes response_bytes "
                         "client_seconds server_seconds")


def _f32(a, dim=None, what="vectors"):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dim is not None:
        if a.ndim == 1:
            a = a.reshape(1, -1) if a.size == dim else a
        if a.ndim != 2 or a.shape[1] != dim:
            raise ValueError("%s must have shape (n, %d), got %s" % (what, dim, a.shape))
    return a


def _bytes_ok(a, params, what, function):
    """Under u8 payloads (MESS_PAYLOAD_U8) every component must be an
    integer in [0, 255]: refuses the first other one as the tool does,
    naming its row and component (InvalidArgumentError, before anything
    reaches C).  Call after _finite."""
    if params.payload != PAYLOADS["u8"] or a.size == 0:
        return
    bad = (a < 0) | (a > 255) | (a != np.floor(a))
    if not bad.any():
        return
    at = np.argwhere(bad)[0]
    where = ("row %d (from 0), component %d" % (at[0], at[1]) if a.ndim == 2
             else "component %d" % at[0])
    raise L.InvalidArgumentError(
        -1, "%s: %s is %r; u8 payloads hold integers in [0, 255] only "
        "(nothing was sent; use payload f32, f16 or i8 for other data)"
        % (what, where, float(a[tuple(at)])), function)


class MessWarning(UserWarning):
    """A call that runs but likely not as meant: k above the pool (fewer
    than k results come back), training vectors whose norms spread under
    the l2 or cos metric (NORM_SPREAD_HINT).  warnings.simplefilter(
    "error", mess.MessWarning) turns them into errors."""


# The 95th / 5th percentile of the training vectors' norms above which
# Client() hints to normalise them, per metric (l2, cos; none for ip, whose
# score includes the norms).  Measured by eval/norm_spread.py on the
# bundled SIFT set scaled row by row (table and reasons in cli/cli.h,
# CLI_NORM_SPREAD_L2 / _COS, which mess init uses): under l2 cosine-meant
# data lose a tenth of the cosine top 10 from a spread of 1.09 (Recall@10
# 0.906 at pool 1000; 0.533 at 2.20), but isotropic Gaussian L2 data
# spread 2.37 at 8 dimensions and 1.81 at 16, so l2 hints from 2.5 only;
# under cos the codes lose a point past 2 (0.975 at 2.20, 0.704 at 4.62);
# unit-length vectors keep 0.994-0.9995.
NORM_SPREAD_HINT = {METRICS["l2"]: 2.5, METRICS["cos"]: 2.0}


def _norm_hint(train, metric, stacklevel):
    limit = NORM_SPREAD_HINT.get(metric)
    if limit is None or train.shape[0] == 0:
        return
    n = np.sort(np.linalg.norm(train.astype(np.float64), axis=1))
    lo, hi = n[int(0.05 * (n.size - 1))], n[int(0.95 * (n.size - 1))]
    spread = hi / lo if lo > 0 else (np.inf if hi > 0 else 1.0)
    if spread <= limit:
        return
    if metric == METRICS["l2"]:
        why = ("under l2 a vector's length counts as much as its direction, so if these "
               "are embeddings meant to be compared by angle, normalise every vector to "
               "length 1 before training, inserting and querying, or the results are not "
               "the cosine neighbours")
    else:
        why = ("the codes are made from the vectors as given, so cosine recall falls as "
               "norms spread: normalise every vector to length 1 before training, "
               "inserting and querying (the cosine neighbours do not change)")
    warnings.warn("the training vectors' norms spread (95th / 5th percentile %.2f); %s "
                  "(eval/norm_spread.py)" % (spread, why), MessWarning,
                  stacklevel=stacklevel + 1)


def _finite(a, what, function):
    """Refuses non-finite vector components as the tool does, naming the
    first one's row and component (InvalidArgumentError, before anything
    reaches C)."""
    if a.size == 0 or np.isfinite(a).all():
        return
    at = np.argwhere(~np.isfinite(a))[0]
    v = a[tuple(at)]
    kind = "NaN" if np.isnan(v) else "+inf" if v > 0 else "-inf"
    where = ("row %d (from 0), component %d" % (at[0], at[1]) if a.ndim == 2
             else "component %d" % at[0])
    raise L.InvalidArgumentError(
        -1, "%s must be finite: %s is %s (nothing was sent)" % (what, where, kind), function)


def _directed(a, metric, what, function):
    """Under the cosine metric a zero vector has no direction: refused
    naming its row, as the tool does (InvalidArgumentError, before anything
    reaches C, which refuses it too)."""
    if metric != METRICS["cos"] or a.size == 0:
        return
    rows = a.reshape(-1, a.shape[-1])
    zero = np.flatnonzero(~rows.any(axis=1))
    if zero.size:
        where = "row %d (from 0)" % zero[0] if a.ndim == 2 else "it"
        raise L.InvalidArgumentError(
            -1, "%s: %s is a zero vector: under the cosine metric every vector needs a "
            "direction (nothing was sent)" % (what, where), function)


def _warn_k_pool(k, pool, stacklevel):
    """At most `pool` candidates come back, so k above it cannot be met: said
    once per call (mess query does the same on stderr)."""
    if k > pool:
        warnings.warn("k=%d is larger than pool=%d: a query returns at most %d results "
                      "(the pool bounds its candidates)" % (k, pool, pool), MessWarning,
                      stacklevel=stacklevel + 1)


def _u64(a):
    a = np.ascontiguousarray(a)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.uint64)  # [] reads as float64: no ids, not wrong ones
    if a.dtype.kind not in "iu":
        raise TypeError("ids must be integers, got %s" % a.dtype)
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        raise ValueError("ids must be non-negative")
    return np.ascontiguousarray(a.reshape(-1), dtype=np.uint64)


def _count(x, name, lo=1, hi=None):
    """An integer argument checked before it reaches C (where a negative
    value would wrap to a huge size_t): TypeError if not an integer,
    ValueError outside [lo, hi]."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError("%s must be an integer, got %r" % (name, x))
    x = int(x)
    if x < lo or (hi is not None and x > hi):
        raise ValueError("%s must be in [%d, %s], got %d"
                         % (name, lo, "inf" if hi is None else hi, x))
    return x


_SIZE_MAX = 2 ** (8 * ctypes.sizeof(c_size_t)) - 1


def _path(p):
    return os.fsencode(p)


def _pass(p):
    """(bytes, length) of a passphrase: a str is encoded as UTF-8, bytes-like
    objects are taken as they are (NUL bytes included, never cut); None is
    no passphrase.  The library refuses an empty one (InvalidArgumentError)."""
    if p is None:
        return None, 0
    if isinstance(p, str):
        b = p.encode("utf-8")
    elif isinstance(p, (bytes, bytearray, memoryview)):
        b = bytes(p)
    else:
        raise TypeError("passphrase must be str, bytes or None, not %s"
                        % type(p).__name__)
    return b, len(b)


def _threads(t):
    if t is None:
        return os.cpu_count() or 1
    return _count(t, "threads", 1, 2 ** 32 - 1)


# ---- parameters -------------------------------------------------------------

# The parameter fields (struct mess_params without its size field).
_PARAM_FIELDS = dict((k, t) for k, t in L.mess_params._fields_ if k != "size")


class Params(L.mess_params):
    """Public parameters (struct mess_params): Params(dim, **fields) starts
    from the defaults for the metric (mess_params_default_for: the paper's
    for l2; kappa 64, p_D = p_q = 0.016, ef_search 64 for ip and cos, unless
    kappa is given: those flips are matched to 64 bits) and overrides
    fields.  Extra keywords: p_query (effective query flip, split
    evenly into PRR and IRR), metric and payload also accept names ("l2",
    "ip", "cos"; "f32", "f16", "i8", "u8").  Params.for_data(x, **fields)
    takes dim from x and chooses u8 payloads for uint8 data."""

    def __init__(self, dim=None, **kw):
        super().__init__()
        self.size = ctypes.sizeof(L.mess_params)  # mess.h, "Growable structs"
        if dim is not None:
            m = kw.get("metric", 0)
            m = METRICS.get(m.lower(), 0) if isinstance(m, str) else m
            m = m if isinstance(m, (int, np.integer)) and not isinstance(m, bool) \
                and 0 <= m < 2 ** 32 and "kappa" not in kw else 0
            L.params_default_for(byref(self), ctypes.sizeof(self), int(dim), int(m))
        if "p_query" in kw:
            q = kw.pop("p_query")
            self.p_prr = self.p_irr = L.split_flip(q)
        for k, v in kw.items():
            if k == "metric" and isinstance(v, str):
                v = METRICS.get(v.lower(), v)
            if k == "payload" and isinstance(v, str):
                v = PAYLOADS.get(v.lower(), v)
            if k not in _PARAM_FIELDS:
                raise TypeError("unknown parameter %r" % k)
            if k in ("metric", "payload") and isinstance(v, str):
                raise ValueError("unknown %s %r (accepted: %s)" % (
                    k, v, ", ".join(METRICS if k == "metric" else PAYLOADS)))
            if _PARAM_FIELDS[k] is ctypes.c_double:
                if isinstance(v, bool) or not isinstance(v, (int, float, np.number)):
                    raise TypeError("%s must be a number, got %r" % (k, v))
                if not np.isfinite(v):
                    raise ValueError("%s must be finite, got %r" % (k, v))
            else:
                v = _count(v, k, 0, 2 ** 32 - 1)
            setattr(self, k, v)

    @classmethod
    def for_data(cls, x, target_recall=None, max_bytes=None, train=None, queries=None,
                 **kw):
        """Params(x.shape[1], **kw) for the vectors x (n x dim, or one
        vector): a uint8 array, byte data, gets u8 payloads (one exact byte
        per component, issue 31: f32 sent 3.5x the bytes for the same
        recall) unless payload is given.  With target_recall=R or
        max_bytes=N (and train=, the hash training set; queries= optional)
        the parameters are chosen from x as a sample of the data by
        mess.choose (mess_plan_choose): its .params; the pool to query with
        is mess.choose(...).pool."""
        if target_recall is not None or max_bytes is not None:
            from .choose import choose
            if train is None:
                raise ValueError("for_data(target_recall= / max_bytes=) needs train=")
            return choose(train, x, target_recall=target_recall, max_bytes=max_bytes,
                          queries=queries, **kw).params
        if train is not None or queries is not None:
            raise ValueError("train= and queries= go with target_recall= or max_bytes=")
        a = np.asarray(x)
        if a.ndim not in (1, 2) or a.shape[-1] == 0:
            raise ValueError("x must have shape (n, dim), got %s" % (a.shape,))
        if a.dtype == np.uint8 and "payload" not in kw:
            kw["payload"] = "u8"
        return cls(a.shape[-1], **kw)

    @property
    def p_query(self):
        """Effective query flip p_q = a(1-b) + b(1-a)."""
        return L.effective_flip(self.p_prr, self.p_irr)

    @property
    def words(self):
        return self.kappa // 64

    def check(self):
        """Raises InvalidArgumentError / LimitError if unusable."""
        L.params_check(byref(self))
        return self

    def copy(self):
        p = Params()
        ctypes.pointer(p)[0] = self
        return p

    def as_dict(self):
        return {k: getattr(self, k) for k in _PARAM_FIELDS}

    def __eq__(self, other):
        return isinstance(other, L.mess_params) and self.as_dict() == \
            {k: getattr(other, k) for k in _PARAM_FIELDS}

    def __repr__(self):
        return "Params(%s)" % ", ".join("%s=%r" % kv for kv in self.as_dict().items())

    # exact buffer sizes (communication figures)
    def upload_size(self, items):
        return L.upload_size(byref(self), items)

    def delete_size(self, items):
        return L.delete_size(byref(self), items)

    def request_size(self):
        return L.request_size(byref(self))

    def response_size(self, pool):
        return L.response_size(byref(self), pool)

    def payload_size(self):
        return L.payload_size(byref(self))

    def query_sealed_size(self, n=1):
        """Bytes of n sealed queries (Client.seal_queries)."""
        return L.query_sealed_size(byref(self), _count(n, "n", 1, 2 ** 32 - 1))


def effective_flip(p_prr, p_irr):
    return L.effective_flip(p_prr, p_irr)


def split_flip(p_q):
    return L.split_flip(p_q)


# ---- handles ------------------------------------------------------------------

class _Handle:
    """Owns one C pointer; frees it exactly once."""
    _free = None

    def __init__(self, ptr):
        self._ptr = ptr

    @property
    def ptr(self):
        if not self._ptr:
            raise L.StateError(-14, "handle already closed", type(self).__name__)
        return self._ptr

    @property
    def closed(self):
        return not self._ptr

    def close(self):
        p, self._ptr = self._ptr, None
        if p:
            type(self)._free(p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _Block:
    """One library allocation (mess_buf_free on the last reference).  A
    Buffer holds one and so does every numpy array made from that Buffer
    (it is the array's base), so the memory outlives Buffer.close() for
    as long as a view of it is alive."""

    def __init__(self, ptr, length):
        self.ptr = ptr
        self.__array_interface__ = {"shape": (length,), "typestr": "|u1",
                                    "data": (ptr, True), "version": 3}

    def __del__(self):
        p, self.ptr = self.ptr, None
        if p:
            L.buf_free(p)


class Buffer(_Handle):
    """A byte buffer the library allocated (upload, delete, request,
    response).  Passed back to the library without a copy; np.asarray(buf)
    is a read-only uint8 view that keeps the bytes alive by itself (after
    close() the memory goes with the last view); bytes(buf) copies."""

    def __init__(self, ptr, length):
        super().__init__(ptr)
        self.length = length
        self._block = _Block(ptr, length) if ptr else None

    def close(self):
        # drop this handle's reference: the block frees the memory when no
        # numpy view of it is left (at once if there is none)
        self._ptr, self._block = None, None

    def __len__(self):
        return self.length

    def __array__(self, dtype=None, copy=None):
        self.ptr  # StateError once closed
        a = np.asarray(self._block)
        return a if dtype is None else a.astype(dtype)

    def __bytes__(self):
        return ctypes.string_at(self.ptr, self.length)

    def numpy(self):
        return np.asarray(self)


def _buf_arg(b):
    """(pointer, length, keepalive) for Buffer / bytes / bytearray / numpy."""
    if isinstance(b, Buffer):
        return b.ptr, b.length, b
    if isinstance(b, bytes):
        return ctypes.cast(ctypes.c_char_p(b), c_void_p).value, len(b), b
    a = np.ascontiguousarray(np.frombuffer(b, dtype=np.uint8) if not
                             isinstance(b, np.ndarray) else b.view(np.uint8).reshape(-1))
    return a.ctypes.data, a.size, a


def _take_buf(ptr, n):
    return Buffer(ptr.value, n.value)


def _shard_set(shards, M):
    """A shard set as a uint32 array: checked here so that a negative or
    huge number is a ValueError, not a wrapped integer in C."""
    a = np.asarray(list(shards) if not isinstance(shards, np.ndarray) else shards)
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
        raise ValueError("shards must be a non-empty sequence of integers")
    if a.min() < 0 or a.max() >= M or np.unique(a).size != a.size:
        raise ValueError("shards must be distinct numbers in 0..%d" % (M - 1))
    return np.ascontiguousarray(a, dtype=np.uint32)


def split_records(params, buf, shards):
    """The records of an upload or delete buffer that belong to a shard set,
    as a buffer of the same kind (mess_records_split): what the server of
    that shard group applies.  Possibly without records; it still carries
    the owner tag."""
    ptr, n, keep = _buf_arg(buf)
    sh = _shard_set(shards, params.shards)
    out, m = c_void_p(), c_size_t()
    L.records_split(byref(params), ptr, n, sh.ctypes.data, sh.size, byref(out), byref(m))
    del keep
    return _take_buf(out, m)


def merge_responses(params, request, parts):
    """Joins the partial responses of shard groups to `request` into the
    whole response (mess_response_merge), byte for byte what one server
    holding every shard returns.  The parts must cover every shard once;
    an overlap, a gap, a part of another request (AuthenticationError) or a
    malformed part raise, with the library's sentence as the message."""
    rp, rn, rkeep = _buf_arg(request)
    args = [_buf_arg(x) for x in parts]
    k = len(args)
    ptrs = (c_void_p * max(k, 1))(*[a[0] for a in args])
    lens = (c_size_t * max(k, 1))(*[a[1] for a in args])
    out, m = c_void_p(), c_size_t()
    msg = ctypes.create_string_buffer(256)
    rc = L.response_merge(byref(params), rp, rn, ptrs, lens, k, byref(out), byref(m),
                          msg, len(msg))
    del rkeep, args
    if rc != 0:
        e = L.error(rc, "mess_response_merge")
        text = msg.value.decode(errors="replace")
        e.message = text or e.message
        e.args = ("mess_response_merge: %s (%s)" % (e.message, L.CODE_NAMES.get(rc, rc)),)
        raise e
    return _take_buf(out, m)


class Query(_Handle):
    """The client-side state of one outstanding query (mess_query).  It
    holds the clean query: Client.save_queries / seal_queries keep it
    outside the process, sealed for that client only."""
    _free = staticmethod(L.query_free)


def _queries_arg(queries):
    """(array of mess_query pointers, count, keepalive) for a Query or a
    sequence of them."""
    qs = [queries] if isinstance(queries, Query) else list(queries)
    if not qs:
        raise ValueError("no queries")
    for q in qs:
        if not isinstance(q, Query):
            raise TypeError("queries must be Query objects from Client.request, not %s"
                            % type(q).__name__)
    return (c_void_p * len(qs))(*[q.ptr for q in qs]), len(qs), qs


def _queries_out(load, *args):
    """Calls a query-state loader twice: with no room (LimitError with the
    count stored), then with room for that count; the new Query objects."""
    n = c_size_t()
    try:
        load(*(args + (None, 0, byref(n))))
    except L.LimitError:
        pass
    out = (c_void_p * n.value)()
    got = c_size_t()
    load(*(args + (out, n.value, byref(got))))
    return [Query(out[i]) for i in range(got.value)]


class Client(_Handle):
    """The secret role: keys, per-shard IsoHash, generation map (mess_client).

    Client(params, train, seed=None, threads=1): trains
    the hashes on `train` (n x dim float32).  seed: None for production
    (OS CSPRNG), or 32 bytes for deterministic experiment mode."""
    _free = staticmethod(L.client_free)

    def __init__(self, params, train, seed=None, threads=1, _ptr=None):
        if _ptr is not None:
            super().__init__(_ptr)
            return
        super().__init__(None)
        train = _f32(train, params.dim, "train")
        _finite(train, "train", "Client")
        _norm_hint(train, params.metric, 2)
        if seed is not None:
            seed = bytes(seed)
            if len(seed) != SEED_BYTES:
                raise ValueError("seed must be %d bytes" % SEED_BYTES)
        out = c_void_p()
        L.client_new(byref(params), train.ctypes.data, train.shape[0], seed,
                     _threads(threads), byref(out))
        self._ptr = out.value

    @classmethod
    def load(cls, path, passphrase=None):
        """Loads a client file.  With a passphrase the file must be sealed
        (PassphraseError for an unsealed one, a wrong passphrase, or a
        sealed file loaded without one); an empty one is refused."""
        out = c_void_p()
        L.client_load_pass(_path(path), *_pass(passphrase), byref(out))
        return cls(None, None, _ptr=out.value)

    @property
    def applied(self):
        """(uploaded, deleted): the items and ids a server acknowledged,
        as noted (note_applied; Client.insert notes its batches), saved in
        the client file; None for a client loaded from a file of format 2,
        which did not count.  mess verify --client compares a server with
        uploaded - deleted: against accidents, not a malicious host."""
        up, dl = ctypes.c_uint64(), ctypes.c_uint64()
        rc = L.client_applied(self.ptr, byref(up), byref(dl))
        if rc == L.ENOTFOUND:
            return None
        if rc != 0:
            raise L.error(rc, "mess_client_applied")
        return up.value, dl.value

    def note_applied(self, uploaded=0, deleted=0):
        """Counts `uploaded` items and `deleted` ids a server acknowledged
        (apply_upload / apply_delete returned); save the client after."""
        L.client_note_applied(self.ptr, _count(uploaded, "uploaded", 0, 2 ** 64 - 1),
                              _count(deleted, "deleted", 0, 2 ** 64 - 1))

    def save(self, path, passphrase=None, exist_ok=True):
        """Saves the client, sealed under `passphrase` (str or bytes, any
        bytes, not empty) if given.  exist_ok=False never replaces a file:
        a new client's file is the only copy of its server's keys, so
        anything at `path` raises AlreadyExistsError (a FileExistsError)
        and is left as it was; of several processes saving to one new path
        exactly one succeeds (mess_client_save_new, what `mess init`
        uses)."""
        save = L.client_save_pass if exist_ok else L.client_save_new
        save(self.ptr, _path(path), *_pass(passphrase))

    @property
    def params(self):
        p = Params()
        L.client_params(self.ptr, byref(p), ctypes.sizeof(p))
        return p

    @property
    def deterministic(self):
        """True for a client made from a seed (experiment mode)."""
        return bool(L.client_is_deterministic(self.ptr))

    @property
    def owner(self):
        """The client's 16-byte owner tag (bytes), carried by its upload,
        delete and request buffers; it reveals nothing about its keys."""
        tag = (ctypes.c_uint8 * OWNER_BYTES)()
        L.client_owner(self.ptr, tag)
        return bytes(tag)

    def set_threads(self, threads):
        """Worker threads finish() uses to open response entries (a
        property of this handle, not saved).  NotImplementedError with a
        library that predates mess_client_set_threads."""
        L.client_set_threads(self.ptr, _threads(threads))

    def set_verify_all(self, on):
        """Whether finish() authenticates every entry (True) or, the default,
        one authentic copy per id.  Same results; verify-all only makes
        auth_failures count tampered redundant copies too (an audit)."""
        L.client_set_verify_all(self.ptr, 1 if on else 0)

    def codes(self, x):
        """Clean codes of one vector for every shard: uint64 (M, kappa/64).
        Secret: for the client's own analysis, never to be sent."""
        p = self.params
        x = _f32(x).reshape(-1)
        if x.size != p.dim:
            raise ValueError("vector must have %d components" % p.dim)
        _finite(x, "the vector", "Client.codes")
        out = np.empty((p.shards, p.words), dtype=np.uint64)
        L.client_codes(self.ptr, x.ctypes.data, out.ctypes.data)
        return out

    def upload(self, ids, vectors, threads=1):
        """Encodes items into an upload Buffer for Server.apply_upload."""
        threads = _threads(threads)
        ids = _u64(ids)
        v = _f32(vectors, self.params.dim)
        if v.shape[0] != ids.size:
            raise ValueError("%d ids for %d vectors" % (ids.size, v.shape[0]))
        _finite(v, "vectors", "Client.upload")
        _directed(v, self.params.metric, "vectors", "Client.upload")
        _bytes_ok(v, self.params, "vectors", "Client.upload")
        buf, n = c_void_p(), c_size_t()
        L.client_upload(self.ptr, ids.ctypes.data, v.ctypes.data, ids.size,
                        _threads(threads), byref(buf), byref(n))
        return _take_buf(buf, n)

    def delete(self, ids):
        """Encodes a delete Buffer for Server.apply_delete."""
        ids = _u64(ids)
        buf, n = c_void_p(), c_size_t()
        L.client_delete(self.ptr, ids.ctypes.data, ids.size, byref(buf), byref(n))
        return _take_buf(buf, n)

    def request(self, q, pool):
        """(Query, request Buffer) for query vector q and total pool B, split
        over the M shards: 1 <= B <= MAX_BUDGET * M (ValueError beyond)."""
        p = self.params
        q = _f32(q).reshape(-1)
        if q.size != p.dim:
            raise ValueError("query must have %d components" % p.dim)
        _finite(q, "the query", "Client.request")
        _directed(q, p.metric, "the query", "Client.request")
        pool = _count(pool, "pool", 1)
        if pool > MAX_BUDGET * p.shards:
            raise ValueError("pool must be in [1, %d] for this client (%d shards, at most %d "
                             "candidates each), got %d"
                             % (MAX_BUDGET * p.shards, p.shards, MAX_BUDGET, pool))
        qs, buf, n = c_void_p(), c_void_p(), c_size_t()
        L.client_request(self.ptr, q.ctypes.data, pool, byref(qs), byref(buf), byref(n))
        query = Query(qs.value)
        query.pool = pool  # finish() warns when its k is above it
        return query, _take_buf(buf, n)

    def save_queries(self, path, queries):
        """Saves pending queries (a Query or a sequence) to the file at path,
        sealed under a key of this client (they hold the clean queries):
        load_queries reads them back, in another process or after a
        restart, and only with this client.  Mode 0600, written
        atomically."""
        arr, n, keep = _queries_arg(queries)
        L.query_save(self.ptr, arr, n, _path(path))
        del keep

    def load_queries(self, path):
        """The queries save_queries wrote, as a list of Query objects to
        finish() with the responses to their requests.  Another client's
        file or a changed byte raises AuthenticationError (or FormatError,
        the file's checksum), other parameters ParamsMismatchError,
        another format version VersionError, a client or server state
        file RoleError."""
        return _queries_out(L.query_load, self.ptr, _path(path))

    def seal_queries(self, queries):
        """The sealed form of pending queries (a Buffer: bytes(buf) to keep
        it anywhere), for unseal_queries of this client."""
        arr, n, keep = _queries_arg(queries)
        buf, m = c_void_p(), c_size_t()
        L.query_seal(self.ptr, arr, n, byref(buf), byref(m))
        del keep
        return _take_buf(buf, m)

    def unseal_queries(self, sealed):
        """The queries of a sealed form (any bytes-like object), as
        load_queries returns them."""
        ptr, n, keep = _buf_arg(sealed)
        qs = _queries_out(L.query_unseal, self.ptr, ptr, n)
        del keep
        return qs

    def finish(self, query, response, k):
        """Decrypts, dedupes and reranks a response: (ids uint64[n],
        dists float32[n], FinishStats) with n <= k results, and n <= the
        request's pool (MessWarning when k is above it)."""
        k = _count(k, "k", 1, 2 ** 31 - 1)
        if not isinstance(query, Query):
            raise TypeError("query must be the Query that request() returned")
        if getattr(query, "pool", None) is not None:
            _warn_k_pool(k, query.pool, 2)
        return self._finish(query, response, k)

    def _finish(self, query, response, k):
        ptr, n, keep = _buf_arg(response)
        ids = np.empty(k, dtype=np.uint64)
        dists = np.empty(k, dtype=np.float32)
        got = c_size_t()
        st = L.mess_finish_stats()
        L.client_finish(self.ptr, query.ptr, ptr, n, k, ids.ctypes.data,
                        dists.ctypes.data, byref(got), byref(st), ctypes.sizeof(st))
        del keep
        return (ids[:got.value], dists[:got.value],
                FinishStats(st.candidates, st.unique, st.auth_failures, st.unopened))

    # ---- one-call conveniences playing both roles -------------------------
    def insert(self, server, ids, vectors, threads=1, batch=10000):
        """Uploads in batches and applies them to `server`; returns the
        total upload bytes.

        Not atomic across batches, by decision: each batch is all-or-nothing
        on the server, but a failure in batch j leaves batches 0..j-1
        applied.  The exception raised then carries `.applied`, the number
        of leading items stored (ids[:applied]); retry with the rest.  It
        does not roll back by deleting them: a delete is itself visible to
        the server (tombstones until compact, new generations on re-insert),
        so a rollback would not restore the server's view.  What can be
        checked before any batch is sent is checked first: the arguments,
        ids repeated within the call, vector shape and finiteness."""
        threads = _threads(threads)
        batch = _count(batch, "batch", 1)
        if not isinstance(server, Server):
            raise TypeError("server must be a mess.Server")
        ids = _u64(ids)
        v = _f32(vectors, self.params.dim)
        if v.shape[0] != ids.size:
            raise ValueError("%d ids for %d vectors" % (ids.size, v.shape[0]))
        if np.unique(ids).size != ids.size:
            raise ValueError("ids repeat within the call")
        _finite(v, "vectors", "Client.insert")
        _directed(v, self.params.metric, "vectors", "Client.insert")
        _bytes_ok(v, self.params, "vectors", "Client.insert")
        total = 0
        for i in range(0, ids.size, batch):
            try:
                with self.upload(ids[i:i + batch], v[i:i + batch], threads) as b:
                    server.apply_upload(b, threads)
                    self.note_applied(len(ids[i:i + batch]), 0)  # acknowledged
                    total += len(b)
            except Exception as e:
                e.applied = i
                raise
        return total

    def query(self, server, q, k=10, pool=1500, threads=1):
        """request -> server search -> finish for one query: a QueryResult
        with the exact request/response bytes and each side's time."""
        k = _count(k, "k", 1, 2 ** 31 - 1)
        pool = _count(pool, "pool", 1, _SIZE_MAX)
        threads = _threads(threads)
        _warn_k_pool(k, pool, 2)
        return self._query(server, q, k, pool, threads)

    def _query(self, server, q, k, pool, threads):
        t0 = time.perf_counter()
        qs, req = self.request(q, pool)
        t1 = time.perf_counter()
        with qs, req:
            resp = server.search(req, threads)
            t2 = time.perf_counter()
            with resp:
                ids, dists, st = self._finish(qs, resp, k)
                t3 = time.perf_counter()
                return QueryResult(ids, dists, st, len(req), len(resp),
                                   (t1 - t0) + (t3 - t2), t2 - t1)

    def search(self, server, queries, k=10, pool=1500, threads=1):
        """Many queries: (ids uint64 (nq, k), dists float32 (nq, k)); rows
        with fewer than k results are padded with 2**64-1 / inf."""
        k = _count(k, "k", 1, 2 ** 31 - 1)
        pool = _count(pool, "pool", 1, _SIZE_MAX)
        threads = _threads(threads)
        Q = _f32(queries, self.params.dim, "queries")
        _finite(Q, "queries", "Client.search")
        _directed(Q, self.params.metric, "queries", "Client.search")
        _warn_k_pool(k, pool, 2)
        ids = np.full((Q.shape[0], k), np.iinfo(np.uint64).max, dtype=np.uint64)
        dists = np.full((Q.shape[0], k), np.inf, dtype=np.float32)
        for i in range(Q.shape[0]):
            r = self._query(server, Q[i], k, pool, threads)
            ids[i, :r.ids.size] = r.ids
            dists[i, :r.dists.size] = r.dists
        return ids, dists


class Workers(_Handle):
    """Persistent worker threads for the batch calls (mess_workers):
    Workers(threads) starts threads - 1 threads once (the calling thread is
    the other worker; None = os.cpu_count()); Server.search_batch reuses
    them instead of starting threads per call.  Safe to share; batches on
    one Workers run one after the other."""
    _free = staticmethod(L.workers_free)

    def __init__(self, threads=None):
        super().__init__(None)
        out = c_void_p()
        L.workers_new(_threads(threads), byref(out))
        self._ptr = out.value

    @property
    def threads(self):
        return L.workers_threads(self.ptr)


def _shard_reason(method):
    """A Server method whose failure, when a shard's delta chain could not
    be applied (docs/PROTOCOL.md "Lazy apply"), gets Server.error()'s line
    (the file and the reason) appended to its message."""
    def wrapped(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except L.MessError as e:
            why = self.error()
            if why:
                e.args = ("%s: %s" % (e.args[0], why),)
            raise
    wrapped.__name__ = method.__name__
    wrapped.__doc__ = method.__doc__
    return wrapped


class Server(_Handle):
    """The untrusted role: M HNSW graphs over perturbed codes plus
    ciphertexts (mess_server).  Server(params) is empty."""
    _free = staticmethod(L.server_free)

    def error(self):
        """None, or the line naming the delta file (and why) of a shard
        that cannot be used: the open checks a delta's header only, and the
        first call that reads the shard applies its chain
        (mess_server_error; docs/PROTOCOL.md "Lazy apply")."""
        msg = ctypes.create_string_buffer(512)
        try:
            rc = L.server_error(self.ptr, msg, len(msg))
        except NotImplementedError:  # an older library: applied at the open
            return None
        return msg.value.decode("utf-8", "replace") if rc != 0 else None

    def __init__(self, params, _ptr=None):
        if _ptr is not None:
            super().__init__(_ptr)
            return
        super().__init__(None)
        out = c_void_p()
        L.server_new(byref(params), byref(out))
        self._ptr = out.value

    @classmethod
    def load(cls, path, expect=None):
        out = c_void_p()
        L.server_load(_path(path), byref(expect) if expect is not None else None,
                      byref(out))
        return cls(None, _ptr=out.value)

    @_shard_reason
    def save(self, path):
        """The travel form: one compressed file (the same as export)."""
        L.server_save(self.ptr, _path(path))

    # ---- server directories (docs/PROTOCOL.md, "Server directory") ----

    @classmethod
    def create(cls, path, params):
        """A new server directory at `path` (new, or an empty directory)
        for params, generation 1, and its handle (mess_server_create)."""
        out = c_void_p()
        L.server_create(_path(path), byref(params), byref(out))
        return cls(None, _ptr=out.value)

    @classmethod
    def open(cls, path, expect=None, shards=None):
        """Opens the server directory at `path`: every shard, or only
        `shards` (shard numbers, any order, no repeats).  A server opened on
        a subset maps only those shards' files; it refuses a search and any
        upload or delete with a record of another shard (StateError), and
        cannot be exported.  A damaged directory raises the library's error
        with verify()'s reason (file and cause) appended."""
        out = c_void_p()
        arr, n = None, 0
        if shards is not None:
            idx = [int(j) for j in shards]
            if not idx or any(j < 0 or j > 0xffffffff for j in idx):
                raise ValueError("shards: a non-empty list of shard numbers")
            arr, n = (ctypes.c_uint32 * len(idx))(*idx), len(idx)
        try:
            L.server_open(_path(path), byref(expect) if expect is not None else None,
                          arr, n, byref(out))
        except (L.FormatError, L.IOFailureError, L.VersionError) as e:
            try:
                Server.verify(path)
            except L.MessError as why:
                e.args = ("%s: %s" % (e.args[0], why.args[0]),)
            raise e
        return cls(None, _ptr=out.value)

    def checkpoint(self):
        """Writes what was applied since the last checkpoint as the
        directory's next generation (mess_server_checkpoint)."""
        L.server_checkpoint(self.ptr)

    @_shard_reason
    def export(self, path):
        """The travel form: one compressed file, byte for byte the same for
        the same server (mess_server_export)."""
        L.server_export(self.ptr, _path(path))

    @classmethod
    def import_(cls, path, directory):
        """Makes server directory `directory` (new, or empty) from the
        travel file `path` (mess_server_import) and opens it."""
        L.server_import(_path(path), _path(directory))
        return cls.open(directory)

    @staticmethod
    def extract(path, shards, directory):
        """Makes the new server directory `directory` for a shard group from
        the server directory `path` (mess_server_extract): the files of
        `shards` copied, every other shard empty, its own MANIFEST and an
        empty log.  `path` must be checkpointed and `directory` must not
        exist; on failure nothing named `directory` is left, and the
        library's error carries the reason (file and cause)."""
        idx = [int(j) for j in shards]
        if not idx or any(j < 0 or j > 0xffffffff for j in idx):
            raise ValueError("shards: a non-empty list of shard numbers")
        arr = (ctypes.c_uint32 * len(idx))(*idx)
        msg = ctypes.create_string_buffer(512)
        rc = L.server_extract(_path(path), arr, len(idx), _path(directory), msg, len(msg))
        if rc != 0:
            e = L.error(rc, "mess_server_extract")
            e.args = ("mess_server_extract: %s" % msg.value.decode("utf-8", "replace"),)
            raise e

    def log_position(self):
        """(generation, log records) of a directory-backed server: the
        MANIFEST generation it is at and the updates in its log after it
        (mess_server_log_position)."""
        gen, recs = ctypes.c_uint64(), ctypes.c_uint64()
        L.server_log_position(self.ptr, byref(gen), byref(recs))
        return gen.value, recs.value

    @staticmethod
    def verify(path):
        """Checks the directory in full (every file's length, every graph
        file's digest and structure): returns the summary line, or raises
        the library's error whose message names the file and the reason."""
        msg = ctypes.create_string_buffer(1024)
        rc = L.server_verify(_path(path), msg, len(msg))
        text = msg.value.decode("utf-8", "replace")
        if rc != 0:
            e = L.error(rc, "mess_server_verify")
            e.args = ("mess_server_verify: %s: %s" % (os.fsdecode(path), text),)
            raise e
        return text

    @property
    def params(self):
        p = Params()
        L.server_params(self.ptr, byref(p), ctypes.sizeof(p))
        return p

    @_shard_reason
    def apply_upload(self, buf, threads=1):
        ptr, n, keep = _buf_arg(buf)
        L.server_apply_upload(self.ptr, ptr, n, _threads(threads))
        del keep

    @_shard_reason
    def count_stored(self, buf):
        """(stored, records): how many of an upload buffer's records the
        server already stores (those apply_upload would refuse as already
        stored), nothing changed: where an interrupted insert stopped."""
        ptr, n, keep = _buf_arg(buf)
        stored, records = c_size_t(), c_size_t()
        L.server_count_stored(self.ptr, ptr, n, byref(stored), byref(records))
        del keep
        return stored.value, records.value

    @_shard_reason
    def apply_delete(self, buf):
        """Returns how many (shard, label) pairs were not found."""
        ptr, n, keep = _buf_arg(buf)
        missing = c_size_t()
        L.server_apply_delete(self.ptr, ptr, n, byref(missing))
        del keep
        return missing.value

    @_shard_reason
    def compact(self, threads=1):
        L.server_compact(self.ptr, _threads(threads))

    def set_ef_search(self, ef):
        """Sets the per-shard search beam (ef = max(budget, ef_search)),
        0 .. MAX_EF; not part of the parameter fingerprint, saved with the
        server.  Not to be called while a search runs on this server."""
        if isinstance(ef, bool) or not isinstance(ef, (int, np.integer)):
            raise TypeError("ef_search must be an integer")
        if not 0 <= ef <= MAX_EF:
            raise ValueError("ef_search must be in 0..%d, got %d" % (MAX_EF, ef))
        L.server_set_ef_search(self.ptr, int(ef))

    def set_layout(self, layout):
        """The graphs' layout for search (mess_server_set_layout): "default",
        or "codes" (each node's neighbours' codes beside its links, built in
        memory now and kept up by inserts, deletes, compaction and
        checkpoints: 40 M_hnsw bytes more per entry, the same responses;
        128-bit codes only).  Not saved.  Not to be called while a search
        runs on this server."""
        if layout not in LAYOUTS:
            raise ValueError("layout must be one of %s, got %r" % (sorted(LAYOUTS), layout))
        L.server_set_layout(self.ptr, LAYOUTS[layout])

    @property
    def owner(self):
        """The owner tag (16 bytes) of the client whose first upload this
        server applied, or None while it has applied none."""
        tag = (ctypes.c_uint8 * OWNER_BYTES)()
        rc = L.server_owner(self.ptr, tag)
        if rc == L.ENOTFOUND:
            return None
        if rc != 0:
            raise L.error(rc, "mess_server_owner")
        return bytes(tag)

    def belongs_to(self, client):
        """True if `client` (a Client or its owner tag) may use this server:
        it is the owner, or the server has no owner yet.  Check it before
        uploading or querying; the server refuses others with OwnerError."""
        tag = client.owner if isinstance(client, Client) else bytes(client)
        if len(tag) != OWNER_BYTES:
            raise ValueError("an owner tag is %d bytes" % OWNER_BYTES)
        rc = L.server_check_owner(self.ptr, (ctypes.c_uint8 * OWNER_BYTES)(*tag))
        if rc not in (0, L.EOWNER):
            raise L.error(rc, "mess_server_check_owner")
        return rc == 0

    @_shard_reason
    def search(self, request, threads=1):
        """Answers a request: the response Buffer."""
        threads = _threads(threads)
        ptr, n, keep = _buf_arg(request)
        out, m = c_void_p(), c_size_t()
        L.server_search(self.ptr, ptr, n, _threads(threads), byref(out), byref(m))
        del keep
        return _take_buf(out, m)

    @_shard_reason
    def search_batch(self, requests, workers=None, threads=1):
        """Answers many requests in one C call (mess_server_search_batch): a
        list of response Buffers, in order, each what search() returns.

        ctypes releases the GIL around each foreign call, so a loop over
        search() gives it up and takes it back once per request; here it is
        released once for the whole batch, and the searches run in parallel
        across requests on `workers` (a Workers, reused across batches) or,
        if None, on a Workers of `threads` made for this call.  All or
        nothing: a failing request raises and no response is kept."""
        reqs = list(requests)
        n = len(reqs)
        args = [_buf_arg(r) for r in reqs]
        ptrs = (c_void_p * max(n, 1))(*[a[0] for a in args])
        lens = (c_size_t * max(n, 1))(*[a[1] for a in args])
        outs = (c_void_p * max(n, 1))()
        out_lens = (c_size_t * max(n, 1))()
        own = workers is None
        w = Workers(threads) if own else workers
        try:
            if not isinstance(w, Workers):
                raise TypeError("workers must be a mess.Workers or None")
            L.server_search_batch(self.ptr, ptrs, lens, n, w.ptr, outs, out_lens, None)
        finally:
            if own:
                w.close()
        del args
        return [Buffer(outs[i], out_lens[i]) for i in range(n)]

    @_shard_reason
    def search_shards(self, request, shards, threads=1):
        """Answers a request on a shard set only (mess_server_search_shards):
        a partial response Buffer covering exactly those shards, for
        merge_responses.  shards: distinct shard numbers, any order."""
        ptr, n, keep = _buf_arg(request)
        sh = _shard_set(shards, self.params.shards)
        out, m = c_void_p(), c_size_t()
        L.server_search_shards(self.ptr, ptr, n, sh.ctypes.data, sh.size, _threads(threads),
                               byref(out), byref(m))
        del keep
        return _take_buf(out, m)

    def stats(self):
        st = L.mess_server_stats()
        L.server_stats_get(self.ptr, byref(st), ctypes.sizeof(st))
        return ServerStats(st.entries, st.live, st.deleted, st.bytes,
                           st.min_shard, st.max_shard)

    def shard(self, j):
        """Read-only view of shard j (what the server sees)."""
        return ShardView(self, j)

    def shards(self):
        return [ShardView(self, j) for j in range(self.params.shards)]


class ShardView:
    """What the untrusted server holds for one shard: nodes in insertion
    order with perturbed codes, opaque labels, HNSW levels, deleted flags,
    links per level and ciphertexts.  Arrays are fresh copies."""

    def __init__(self, server, j):
        self.server = server
        self.index = _count(j, "shard", 0)
        self._p = server.params
        if not 0 <= self.index < self._p.shards:
            raise IndexError("shard %d out of range 0..%d" % (j, self._p.shards - 1))

    @property
    def nodes(self):
        n = c_size_t()
        L.shard_nodes(self.server.ptr, self.index, byref(n))
        return n.value

    def __len__(self):
        return self.nodes

    @property
    def entry_point(self):
        """Entry node id, or None if the shard is empty."""
        ep = c_uint32()
        try:
            L.shard_entry_point(self.server.ptr, self.index, byref(ep))
        except L.NotFoundError:
            return None
        return ep.value

    def _get(self, fn, shape, dtype):
        n = self.nodes
        out = np.empty((n,) + shape, dtype=dtype)
        fn(self.server.ptr, self.index, out.ctypes.data if out.size else
           ctypes.addressof(ctypes.c_uint64()), n)
        return out

    def codes(self):
        """Perturbed codes, uint64 (n, kappa/64)."""
        return self._get(L.shard_codes, (self._p.words,), np.uint64)

    def codes_bytes(self):
        """The same codes as uint8 (n, kappa/8), the wire's byte order."""
        return self.codes().view(np.uint8)

    def labels(self):
        """Opaque 128-bit labels, uint8 (n, 16)."""
        return self._get(L.shard_labels, (16,), np.uint8)

    def levels(self):
        return self._get(L.shard_levels, (), np.uint32)

    def deleted(self):
        return self._get(L.shard_deleted, (), np.uint8).astype(bool)

    def entries(self):
        """Ciphertexts, uint8 (n, payload_size)."""
        return self._get(L.shard_entries, (self._p.payload_size(),), np.uint8)

    def neighbors(self, node, level=0):
        node = _count(node, "node", 0, 2 ** 32 - 1)
        level = _count(level, "level", 0, 2 ** 32 - 1)
        out = np.empty(2 * max(self._p.hnsw_m, 1), dtype=np.uint32)
        n = c_size_t()
        L.shard_neighbors(self.server.ptr, self.index, node, level,
                          out.ctypes.data, out.size, byref(n))
        return out[:n.value].copy()

    def links(self, level=0):
        """All links of a level: (offsets int64 (n+1,), ids uint32); node i's
        neighbours are ids[offsets[i]:offsets[i+1]]."""
        level = _count(level, "level", 0, 2 ** 32 - 1)
        n = self.nodes
        offs = np.empty(n + 1, dtype=np.uintp)
        total = c_size_t()
        L.shard_links(self.server.ptr, self.index, level, offs.ctypes.data,
                      offs.size, None, 0, byref(total))
        ids = np.empty(max(total.value, 1), dtype=np.uint32)
        L.shard_links(self.server.ptr, self.index, level, offs.ctypes.data,
                      offs.size, ids.ctypes.data, ids.size, byref(total))
        return offs.astype(np.int64), ids[:total.value]


__all__ = ["Params", "Client", "Server", "Query", "Buffer", "ShardView",
           "FinishStats", "ServerStats", "QueryResult", "MessError", "MessWarning",
           "effective_flip", "split_flip", "METRICS", "PAYLOADS"]
