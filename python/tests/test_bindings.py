"""Tests of the ctypes bindings on the bundled real SIFT data (a scaled-down
configuration so the suite takes seconds)."""
import gc
import weakref
import errno
import os
import stat
import tempfile
import threading
import unittest

import numpy as np

import mess

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIFT = os.path.join(ROOT, "datasets", "sift")
SEED = bytes(range(32))
N = 1500


def exact_topk(base, queries, k):
    d = (queries ** 2).sum(1)[:, None] - 2 * queries @ base.T + (base ** 2).sum(1)[None]
    return np.argsort(d, axis=1, kind="stable")[:, :k]


def small_params(**kw):
    args = dict(shards=4, per_item=2, ef_construction=80, train_sample=1000)
    args.update(kw)
    return mess.Params(128, **args)


class Data:
    base = mess.read_f32(os.path.join(SIFT, "base.bvecs"))[:N].copy()
    train = mess.read_f32(os.path.join(SIFT, "learn.bvecs"))
    queries = mess.read_f32(os.path.join(SIFT, "query.bvecs"))[:40].copy()
    truth = exact_topk(base, queries, 10)


def build(params, n=N, seed=SEED):
    c = mess.Client(params, Data.train, seed=seed, threads=2)
    s = mess.Server(params)
    c.insert(s, np.arange(n), Data.base[:n], threads=2)
    return c, s


def recall(ids, truth):
    return np.mean([len(set(a.tolist()) & set(b.tolist())) / len(b)
                    for a, b in zip(ids, truth)])


class TestLibrary(unittest.TestCase):
    def test_version_and_path(self):
        self.assertEqual(mess.version(), mess.__version__)
        self.assertTrue(os.path.exists(mess.library_path))

    def test_strerror(self):
        self.assertIn("invalid", mess.strerror(-1).lower())
        self.assertTrue(mess.strerror(-999))

    def test_params_defaults_are_the_papers(self):
        p = mess.Params(128)
        # efConstruction 64, not the paper's 300: the same recall curve
        # (docs/PERFORMANCE.md "Against plaintext")
        self.assertEqual((p.shards, p.per_item, p.kappa, p.ef_construction),
                         (64, 16, 128, 64))
        self.assertAlmostEqual(p.p_store, 0.08)
        self.assertAlmostEqual(p.p_query, 0.08, places=9)
        q = mess.Params(128, p_query=0.12, payload="f16", metric="cos")
        self.assertAlmostEqual(q.p_query, 0.12, places=9)
        self.assertEqual((q.payload, q.metric), (1, 2))
        self.assertEqual(q.copy(), q)
        self.assertNotEqual(q, p)
        self.assertAlmostEqual(mess.effective_flip(mess.split_flip(0.1),
                                                   mess.split_flip(0.1)), 0.1)

    def test_params_errors(self):
        with self.assertRaises(mess.LimitError) as cm:
            mess.Params(128, shards=5000).check()
        self.assertEqual(cm.exception.code, -9)
        self.assertEqual(cm.exception.message, mess.strerror(-9))
        with self.assertRaises(mess.InvalidArgumentError):
            mess.Params(128, kappa=100).check()
        with self.assertRaises(TypeError):
            mess.Params(128, no_such_field=1)
        with self.assertRaises(mess.MessError):
            mess.Server(mess.Params(128, per_item=65))

    def test_params_size_field(self):
        # mess.h "Growable structs": the Structure carries its ctypes size,
        # the library refuses 0 or a size below the first layout
        import ctypes
        p = mess.Params(128)
        self.assertEqual(p.size, ctypes.sizeof(p))
        self.assertEqual(mess.Params().size, ctypes.sizeof(p))
        self.assertNotIn("size", p.as_dict())
        with self.assertRaises(TypeError):
            mess.Params(128, size=8)
        p.size = 0
        with self.assertRaises(mess.InvalidArgumentError):
            p.check()
        with self.assertRaises(mess.InvalidArgumentError):
            mess.Server(p)
        p.size = 8
        with self.assertRaises(mess.InvalidArgumentError):
            p.check()

    def test_sizes(self):
        p = mess.Params(128)
        # request: header 24, owner tag 16, id 16, M u16 budgets, M codes
        # of kappa/8 bytes
        self.assertEqual(p.request_size(), 24 + 16 + 16 + 64 * 2 + 64 * 16)
        e32, e16, e8 = (mess.Params(128, payload=x).payload_size() for x in ("f32", "f16", "i8"))
        self.assertEqual(e32 - e16, 2 * 128)   # 4 vs 2 bytes per component
        self.assertEqual(e16 - e8, 128 - 8)    # 1 byte per component + 8 (offset, step)
        self.assertGreater(p.response_size(1500), 1500 * e32)
        # u8: one byte per component, no offset or step
        self.assertEqual(e8 - mess.Params(128, payload="u8").payload_size(), 8)
        self.assertEqual(mess.Params(128, payload="u8").payload_size(), 16 + 8 + 128)

    def test_payload_follows_the_data(self):
        b = mess.read_bvecs(os.path.join(SIFT, "query.bvecs"))
        self.assertEqual(mess.Params.for_data(b).payload, mess.PAYLOADS["u8"])
        self.assertEqual(mess.Params.for_data(b).dim, 128)
        self.assertEqual(mess.Params.for_data(b, payload="f16").payload, 1)
        self.assertEqual(mess.Params.for_data(b.astype(np.float32)).payload, 0)
        self.assertEqual(mess.Params.for_data(b[0], shards=8).shards, 8)


class TestVecs(unittest.TestCase):
    def test_read_matches_raw_file(self):
        raw = np.fromfile(os.path.join(SIFT, "query.bvecs"), dtype=np.uint8)
        raw = raw.reshape(-1, 4 + 128)[:, 4:]
        b = mess.read_bvecs(os.path.join(SIFT, "query.bvecs"))
        f = mess.read_f32(os.path.join(SIFT, "query.bvecs"))
        self.assertEqual(b.dtype, np.uint8)
        self.assertTrue(np.array_equal(b, raw))
        self.assertTrue(np.array_equal(f, raw.astype(np.float32)))
        self.assertTrue(f.flags.c_contiguous)
        gt = mess.read_ivecs(os.path.join(SIFT, "groundtruth.ivecs"))
        self.assertEqual(gt.shape, (200, 100))

    def test_roundtrip_and_bad_files(self):
        with tempfile.TemporaryDirectory() as d:
            a = np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32)
            mess.write_fvecs(os.path.join(d, "a.fvecs"), a)
            self.assertTrue(np.array_equal(mess.read_fvecs(os.path.join(d, "a.fvecs")), a))
            mess.write_ivecs(os.path.join(d, "i.ivecs"), np.arange(6).reshape(2, 3))
            self.assertEqual(mess.read_ivecs(os.path.join(d, "i.ivecs")).tolist(),
                             [[0, 1, 2], [3, 4, 5]])
            with open(os.path.join(d, "a.fvecs"), "ab") as f:
                f.write(b"xy")
            with self.assertRaises(mess.FormatError):
                mess.read_fvecs(os.path.join(d, "a.fvecs"))
            with self.assertRaises(mess.IOFailureError) as cm:
                mess.read_f32(os.path.join(d, "missing.fvecs"))
            # the path and the system's reason (issue 13 item 4)
            self.assertEqual(cm.exception.errno, errno.ENOENT)
            self.assertEqual(cm.exception.filename, os.path.join(d, "missing.fvecs"))
            self.assertIn("No such file or directory", str(cm.exception))

    def test_u64vecs_and_ivecs_range(self):
        # issue 13 item 1: ids from 2^31 do not fit .ivecs; .u64vecs holds them
        with tempfile.TemporaryDirectory() as d:
            ids = np.array([[2**31 - 1, 2**31], [2**32 + 906, 2**64 - 1]], dtype=np.uint64)
            mess.write_u64vecs(os.path.join(d, "r.u64vecs"), ids)
            back = mess.read_u64vecs(os.path.join(d, "r.u64vecs"))
            self.assertEqual(back.dtype, np.uint64)
            self.assertEqual(back.tolist(), ids.tolist())
            mess.write_ivecs(os.path.join(d, "ok.ivecs"), np.array([[2**31 - 1, -1]]))
            self.assertEqual(mess.read_ivecs(os.path.join(d, "ok.ivecs")).tolist(),
                             [[2**31 - 1, -1]])
            for bad in (ids, np.array([[2**31]], dtype=np.int64),
                        np.array([[2**32 + 906]], dtype=np.uint64)):
                with self.assertRaises(ValueError):
                    mess.write_ivecs(os.path.join(d, "bad.ivecs"), bad)
            self.assertFalse(os.path.exists(os.path.join(d, "bad.ivecs")))
            with self.assertRaises(ValueError):
                mess.write_u64vecs(os.path.join(d, "neg.u64vecs"), np.array([[-1]]))
            with self.assertRaises(TypeError):
                mess.write_ivecs(os.path.join(d, "f.ivecs"), np.array([[1.5]]))


class TestArguments(unittest.TestCase):
    """Issue 13 item 10 / issue 12 item 11: every argument is checked in
    Python before it reaches C (a negative k once wrapped to a huge size_t
    and overflowed the result arrays: SIGSEGV)."""

    @classmethod
    def setUpClass(cls):
        cls.p = small_params()
        cls.c, cls.s = build(cls.p, n=200)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.s.close()

    def test_k_pool_threads(self):
        q = Data.queries[0]
        for k in (0, -1, -2**40, -2**63):
            with self.assertRaises(ValueError):
                self.c.query(self.s, q, k=k, pool=100)
            qs, req = self.c.request(q, 100)
            with qs, req, self.s.search(req) as resp:
                with self.assertRaises(ValueError):
                    self.c.finish(qs, resp, k)
                # the query is still usable after the refusal
                ids, _, _ = self.c.finish(qs, resp, 3)
                self.assertEqual(len(ids), 3)
        for pool in (0, -1, -2**40):
            with self.assertRaises(ValueError):
                self.c.request(q, pool)
            with self.assertRaises(ValueError):
                self.c.search(self.s, Data.queries[:2], k=3, pool=pool)
        for bad in (2.5, "10", None, True):
            with self.assertRaises(TypeError):
                self.c.query(self.s, q, k=bad, pool=100)
            with self.assertRaises(TypeError):
                self.c.request(q, bad)
        for t in (0, -1):
            with self.assertRaises(ValueError):
                self.s.search(b"x", threads=t)
            with self.assertRaises(ValueError):
                self.c.insert(self.s, [10**6], Data.base[:1], threads=t)
        with self.assertRaises(ValueError):
            self.c.insert(self.s, [10**6], Data.base[:1], batch=0)
        with self.assertRaises(TypeError):
            self.c.finish(b"not a query", b"", 3)

    def test_shapes_and_types(self):
        with self.assertRaises(ValueError):
            self.c.request(Data.queries[0][:5], 100)
        with self.assertRaises(ValueError):
            self.c.insert(self.s, [1, 2], Data.base[:3])
        with self.assertRaises(TypeError):
            self.c.insert(self.s, [1.5], Data.base[:1])
        # an empty list is no ids, not ids of the wrong type ([] reads as
        # float64: "ids must be integers, got float64" before)
        with self.c.delete([]) as b:
            self.assertEqual(self.s.apply_delete(b), 0)
        with self.assertRaises(ValueError):
            self.c.insert(self.s, [-1], Data.base[:1])
        with self.assertRaises(ValueError):
            self.c.insert(self.s, [7, 7], Data.base[:2])
        bad = Data.base[:2].copy()
        bad[1, 3] = np.nan
        with self.assertRaises(ValueError):
            self.c.insert(self.s, [10**6, 10**6 + 1], bad)
        with self.assertRaises(TypeError):
            self.c.insert(None, [10**6], Data.base[:1])
        with self.assertRaises(ValueError):
            self.s.shard(0).neighbors(-1)
        with self.assertRaises(ValueError):
            self.s.shard(-1)
        self.assertEqual(self.s.stats().live, 200 * self.p.per_item)

    def test_pool_range(self):
        # issue 29: the real bound is MAX_BUDGET x M, checked in Python
        q = Data.queries[0]
        top = mess.MAX_BUDGET * self.p.shards
        with self.assertRaises(ValueError) as cm:
            self.c.request(q, top + 1)
        self.assertIn("pool must be in [1, %d] for this client (%d shards"
                      % (top, self.p.shards), str(cm.exception))
        with self.assertRaises(ValueError):
            self.c.query(self.s, q, k=3, pool=mess.MAX_BUDGET * mess.MAX_SHARDS)
        qs, req = self.c.request(q, top)
        with qs, req:
            pass

    def test_k_above_pool_warns(self):
        # issue 29: fewer than k results used to come back without a word
        q = Data.queries[0]
        with self.assertWarns(mess.MessWarning) as cm:
            r = self.c.query(self.s, q, k=10, pool=4)
        self.assertIn("k=10 is larger than pool=4: a query returns at most 4 results",
                      str(cm.warning))
        self.assertLessEqual(len(r.ids), 4)
        self.assertEqual(cm.filename, __file__)   # points at the caller
        import warnings
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            self.c.search(self.s, Data.queries[:3], k=5, pool=2)
            self.assertEqual(len([w for w in got if w.category is mess.MessWarning]), 1)
            qs, req = self.c.request(q, 4)
            with qs, req, self.s.search(req) as resp:
                self.c.finish(qs, resp, 6)
            self.assertEqual(len([w for w in got if w.category is mess.MessWarning]), 2)
            self.c.query(self.s, q, k=4, pool=4)          # k == pool: nothing said
            self.c.search(self.s, Data.queries[:2], k=3, pool=100)
            self.assertEqual(len([w for w in got if w.category is mess.MessWarning]), 2)

    def test_non_finite_named(self):
        # issue 29: the error names row and component, as mess does
        bad = Data.base[:3].copy()
        bad[1, 3] = np.nan
        with self.assertRaises(mess.InvalidArgumentError) as cm:
            self.c.insert(self.s, [10**6, 10**6 + 1, 10**6 + 2], bad)
        self.assertIn("vectors must be finite: row 1 (from 0), component 3 is NaN "
                      "(nothing was sent)", str(cm.exception))
        bad[1, 3] = -np.inf
        with self.assertRaises(mess.InvalidArgumentError) as cm:
            self.c.upload([10**6, 10**6 + 1, 10**6 + 2], bad)
        self.assertIn("row 1 (from 0), component 3 is -inf", str(cm.exception))
        q = Data.queries[0].copy()
        q[5] = np.inf
        with self.assertRaises(mess.InvalidArgumentError) as cm:
            self.c.query(self.s, q, k=3, pool=100)
        self.assertIn("the query must be finite: component 5 is +inf", str(cm.exception))
        with self.assertRaises(mess.InvalidArgumentError) as cm:
            self.c.search(self.s, np.stack([Data.queries[1], q]), k=3, pool=100)
        self.assertIn("queries must be finite: row 1 (from 0), component 5 is +inf",
                      str(cm.exception))
        train = Data.train[:1000].copy()
        train[7, 0] = np.nan
        with self.assertRaises(mess.InvalidArgumentError) as cm:
            mess.Client(self.p, train)
        self.assertIn("train must be finite: row 7 (from 0), component 0 is NaN",
                      str(cm.exception))
        self.assertEqual(self.s.stats().live, 200 * self.p.per_item)

    def test_zero_vector_under_cosine(self):
        # issue 29: a zero vector has no direction under cosine: refused, named
        gauss = np.random.default_rng(2).standard_normal((300, 16)).astype(np.float32)
        with mess.Client(mess.Params(16, shards=2, per_item=1, metric="cos"), gauss,
                         seed=SEED) as c, mess.Server(c.params) as s:
            v = gauss[:3].copy()
            v[1] = 0
            with self.assertRaises(mess.InvalidArgumentError) as cm:
                c.insert(s, [0, 1, 2], v)
            self.assertIn("vectors: row 1 (from 0) is a zero vector", str(cm.exception))
            with self.assertRaises(mess.InvalidArgumentError) as cm:
                c.request(v[1], 10)
            self.assertIn("the query: it is a zero vector", str(cm.exception))
            self.assertEqual(s.stats().live, 0)
            c.insert(s, [0, 2], v[[0, 2]])

    def test_norm_spread_hint(self):
        # issue 29: l2 on unnormalised embeddings lost recall without a word;
        # Client() hints when the training norms spread (as mess init does)
        import warnings
        train = Data.train[:300]
        spread = train * (1 + np.arange(300) % 4)[:, None].astype(np.float32)
        for metric, text in (("l2", "under l2 a vector's length counts as much"),
                             ("cos", "the codes are made from the vectors as given")):
            p = small_params(metric=metric)
            with self.assertWarns(mess.MessWarning) as cm:
                mess.Client(p, spread, seed=SEED).close()
            self.assertIn("norms spread (95th / 5th percentile 4.0", str(cm.warning))
            self.assertIn(text, str(cm.warning))
            self.assertEqual(cm.filename, __file__)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            mess.Client(small_params(metric="ip"), spread, seed=SEED).close()
            mess.Client(small_params(), train, seed=SEED).close()   # SIFT: norms equal
            mess.Client(small_params(metric="cos"), train * 1.5, seed=SEED).close()
            # Gaussian L2 data of 16 dimensions spread 1.8: not a hint's case
            gauss = np.random.default_rng(1).standard_normal((300, 16)).astype(np.float32)
            mess.Client(mess.Params(16, shards=4, per_item=2), gauss, seed=SEED).close()
        self.assertEqual([str(w.message) for w in got if w.category is mess.MessWarning], [])

    def test_params_fields(self):
        for kw in ({"shards": -1}, {"kappa": -64}, {"per_item": 2**32}):
            with self.assertRaises(ValueError):
                mess.Params(100, **kw)
        for kw in ({"shards": 2.5}, {"p_store": "0.1"}):
            with self.assertRaises(TypeError):
                mess.Params(100, **kw)
        with self.assertRaises(ValueError):
            mess.Params(100, p_store=float("nan"))
        with self.assertRaises(ValueError):
            mess.Params(100, metric="l1")

    def test_u8_refuses_other_data(self):
        p = small_params()
        p.payload = mess.PAYLOADS["u8"]
        with mess.Client(p, Data.train, seed=SEED) as c, mess.Server(p) as s:
            x = Data.base[:3].copy()
            x[2, 7] = 3.25
            for call in (lambda: c.insert(s, [0, 1, 2], x),
                         lambda: c.upload([0, 1, 2], x)):
                with self.assertRaises(mess.InvalidArgumentError) as cm:
                    call()
                self.assertIn("row 2 (from 0), component 7 is 3.25", str(cm.exception))
            self.assertEqual(s.stats().live, 0)
            x[2, 7] = 255
            c.insert(s, [0, 1, 2], x)
            ids, dists, _ = c.finish(*self._ask(c, s, x[1]))
            self.assertEqual((int(ids[0]), float(dists[0])), (1, 0.0))

    @staticmethod
    def _ask(c, s, q):
        qs, req = c.request(q, 40)
        return qs, s.search(req), 1

    def test_insert_reports_how_far_it_got(self):
        # not atomic across batches (documented): the error carries .applied
        with mess.Server(self.p) as s:
            self.c.insert(s, [50], Data.base[50:51])
            with self.assertRaises(mess.MessError) as cm:
                self.c.insert(s, np.arange(40, 60), Data.base[40:60], batch=5)
            self.assertEqual(cm.exception.applied, 10)  # ids 40..49
            self.assertEqual(s.stats().live, 11 * self.p.per_item)
            # the rest goes in after the stored id
            self.c.insert(s, np.arange(51, 60), Data.base[51:60], batch=5)
            self.assertEqual(s.stats().live, 20 * self.p.per_item)

    def test_count_stored(self):
        # where an interrupted insert stopped, nothing changed by asking
        with mess.Server(self.p) as s:
            self.c.insert(s, np.arange(10), Data.base[:10])
            before = s.stats().live
            with self.c.upload(np.arange(5, 15), Data.base[5:15]) as b:
                stored, records = s.count_stored(b)
            self.assertEqual(records, 10 * self.p.per_item)
            self.assertEqual(stored, 5 * self.p.per_item)  # ids 5..9
            with self.c.upload(np.arange(10, 12), Data.base[10:12]) as b:
                self.assertEqual(s.count_stored(b), (0, 2 * self.p.per_item))
            self.assertEqual(s.stats().live, before)
            with self.assertRaises(mess.FormatError):
                s.count_stored(b"\0" * 40)


class TestProtocol(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.p = small_params()
        cls.c, cls.s = build(cls.p)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.s.close()

    def test_recall_and_bytes(self):
        ids, dists = self.c.search(self.s, Data.queries, k=10, pool=400, threads=2)
        self.assertEqual(ids.shape, (40, 10))
        self.assertGreaterEqual(recall(ids, Data.truth), 0.9)
        self.assertTrue(np.all(np.diff(dists, axis=1) >= 0))
        r = self.c.query(self.s, Data.queries[0], 10, 400)
        self.assertEqual(r.request_bytes, self.p.request_size())
        self.assertLessEqual(r.response_bytes, self.p.response_size(400))
        self.assertEqual(r.stats.candidates, 400)
        # distances are the exact squared L2 of the returned ids
        want = ((Data.base[r.ids.astype(np.int64)] - Data.queries[0]) ** 2).sum(1)
        self.assertTrue(np.allclose(r.dists, want, rtol=1e-5))

    def test_search_batch(self):
        # one C call for the whole batch (the GIL released once): the
        # responses are byte for byte those of search(), and the per-request
        # function is not called at all
        import mess._lib as lib
        import mess.core as core
        pairs = [self.c.request(Data.queries[i], 160) for i in range(12)]
        reqs = [r for _, r in pairs]
        want = [bytes(self.s.search(r)) for r in reqs]
        saved = core.L.server_search
        try:
            def no_single(*a):
                raise AssertionError("search_batch called mess_server_search")
            core.L.server_search = no_single
            with mess.Workers(2) as w:
                self.assertEqual(w.threads, 2)
                got = self.s.search_batch(reqs, workers=w)
                got2 = self.s.search_batch([bytes(r) for r in reqs], workers=w)
            got3 = self.s.search_batch(reqs, threads=3)
        finally:
            core.L.server_search = saved
        self.assertEqual([bytes(b) for b in got], want)
        self.assertEqual([bytes(b) for b in got2], want)
        self.assertEqual([bytes(b) for b in got3], want)
        ids, _, _ = self.c.finish(pairs[0][0], got[0], 10)
        self.assertGreater(len(ids), 0)
        self.assertEqual(self.s.search_batch([]), [])
        # all or nothing: one truncated request fails the batch
        with self.assertRaises(mess.FormatError):
            self.s.search_batch(reqs[:3] + [bytes(reqs[3])[:30]])
        with self.assertRaises(mess.LimitError):
            mess.Workers(lib.lib.mess_max_threads() + 1)
        with self.assertRaises(TypeError):
            self.s.search_batch(reqs, workers=3)
        for q, r in pairs:
            q.close()
            r.close()

    def test_three_steps_by_hand_and_buffers(self):
        q, req = self.c.request(Data.queries[1], 160)
        with q, req:
            view = np.asarray(req)
            self.assertEqual(bytes(view[:4]), b"MSRQ")
            resp = self.s.search(req)
            # bytes copies go back in as well as library buffers
            ids, dists, st = self.c.finish(q, bytes(resp), 10)
            ids2, _, _ = self.c.finish(q, resp, 10)
            self.assertTrue(np.array_equal(ids, ids2))
            self.assertEqual(st.auth_failures, 0)
            self.assertEqual(st.unique + st.unopened, st.candidates)
            # one tampered ciphertext byte: dropped; counted when opened,
            # always counted with verify-all; the same results either way
            bad = bytearray(bytes(resp))
            bad[-3] ^= 1
            ids2, _, st2 = self.c.finish(q, bad, 10)
            self.assertEqual(st2.unique + st2.auth_failures + st2.unopened, st2.candidates)
            self.c.set_verify_all(True)
            ids3, _, st3 = self.c.finish(q, bad, 10)
            self.c.set_verify_all(False)
            self.assertEqual((st3.auth_failures, st3.unopened), (1, 0))
            self.assertTrue(np.array_equal(ids2, ids3))
            # a response to another request
            q2, req2 = self.c.request(Data.queries[2], 160)
            with q2, req2:
                with self.assertRaises(mess.AuthenticationError):
                    self.c.finish(q2, resp, 10)
            resp.close()
            self.assertTrue(resp.closed)

    def test_view_outlives_closed_buffer(self):
        # np.asarray(buf) is zero-copy: the view must keep the library's
        # memory alive after close() (it used to be freed under the array)
        q, req = self.c.request(Data.queries[5], 160)
        with q:
            want = bytes(req)
            view = np.asarray(req)
            tail = view[1:]
            self.assertFalse(view.flags.writeable)
            self.assertEqual(view.ctypes.data, req.ptr)  # no copy
            req.close()
            self.assertTrue(req.closed)
            with self.assertRaises(mess.StateError):
                np.asarray(req)
            # churn the allocator: freed memory would be reused or rewritten
            for _ in range(8):
                oq, oreq = self.c.request(Data.queries[6], 160)
                oq.close()
                oreq.close()
            self.assertEqual(bytes(view), want)
            self.assertEqual(bytes(tail), want[1:])
        # and the memory goes with the last view; at once without one
        q, req = self.c.request(Data.queries[5], 160)
        q.close()
        block = weakref.ref(req._block)
        view = np.asarray(req)
        req.close()
        self.assertIsNotNone(block())
        del view
        self.assertIsNone(block())
        q, req = self.c.request(Data.queries[5], 160)
        q.close()
        block = weakref.ref(req._block)
        req.close()
        self.assertIsNone(block())

    def test_client_threads(self):
        if not mess._lib.has("mess_client_set_threads"):
            with self.assertRaises(NotImplementedError):
                self.c.set_threads(2)
            return
        q, req = self.c.request(Data.queries[4], 400)
        with q, req, self.s.search(req) as resp:
            self.c.set_threads(1)
            one = self.c.finish(q, resp, 10)
            self.c.set_threads(2)
            two = self.c.finish(q, resp, 10)
            self.c.set_threads(1)
        self.assertTrue(np.array_equal(one[0], two[0]))
        self.assertTrue(np.array_equal(one[1], two[1]))

    def test_concurrent_server_searches(self):
        q, req = self.c.request(Data.queries[3], 240)
        out = [None] * 4

        def work(i):
            with self.s.search(req, threads=1) as r:
                out[i] = bytes(r)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertTrue(all(o == out[0] for o in out))
        q.close()
        req.close()

    def test_bad_input(self):
        with self.assertRaises(ValueError):
            self.c.request(np.zeros(7, np.float32), 100)
        with self.assertRaises(mess.VersionError):
            self.s.apply_upload(b"MSUP" + bytes(60))
        with self.c.upload([9001], Data.base[:1]) as up:
            with self.assertRaises(mess.FormatError):  # truncated
                self.s.apply_upload(bytes(up)[:-1])
        with self.assertRaises(mess.MessError) as cm:
            self.s.search(b"junk")
        self.assertTrue(cm.exception.message)
        with self.assertRaises(mess.StateError):  # id already stored
            self.c.insert(self.s, [5], Data.base[5:6])
        other = small_params(per_item=3)
        with mess.Server(other) as s2, self.c.upload([9000], Data.base[:1]) as up:
            with self.assertRaises(mess.ParamsMismatchError):
                s2.apply_upload(up)
        with self.assertRaises(ValueError):
            self.c.upload([1, 2], Data.base[:3])

    def test_server_view(self):
        total = 0
        for v in self.s.shards():
            n = v.nodes
            total += n
            codes, labels, levels = v.codes(), v.labels(), v.levels()
            self.assertEqual(codes.shape, (n, 2))
            self.assertEqual(v.codes_bytes().shape, (n, 16))
            self.assertEqual(labels.shape, (n, 16))
            self.assertEqual(len(np.unique(labels, axis=0)), n)
            self.assertEqual(levels[v.entry_point], levels.max())
            self.assertEqual(v.entries().shape, (n, self.p.payload_size()))
            offs, ids = v.links(0)
            self.assertEqual(offs.shape, (n + 1,))
            self.assertTrue(np.array_equal(v.neighbors(7, 0), ids[offs[7]:offs[8]]))
            self.assertTrue(ids.max() < n)
            self.assertFalse(v.deleted().any())
        self.assertEqual(total, N * 2)
        with self.assertRaises(IndexError):
            self.s.shard(4)


class TestLifecycle(unittest.TestCase):
    def test_clean_codes_visible_without_noise(self):
        p = small_params(p_store=0.0)
        c, s = build(p, n=300)
        with c, s:
            stored = set()
            for v in s.shards():
                stored.update(map(bytes, v.codes_bytes()))
            mine = set()
            for i in range(300):
                mine.update(map(bytes, c.codes(Data.base[i]).view(np.uint8)))
            self.assertTrue(stored <= mine)
            self.assertGreater(len(stored), 300)

    def test_delete_compact_save_load(self):
        p = small_params()
        c, s = build(p, n=400)
        with tempfile.TemporaryDirectory() as d, c, s:
            with c.delete([3, 4, 5]) as buf:
                self.assertEqual(len(buf), p.delete_size(3))
                self.assertEqual(s.apply_delete(buf), 0)
                self.assertEqual(s.apply_delete(buf), 6)  # already gone
            st = s.stats()
            self.assertEqual((st.entries, st.deleted), (800, 6))
            r = c.query(s, Data.base[4], 10, 160)
            self.assertNotIn(4, r.ids.tolist())
            s.compact(threads=2)
            self.assertEqual(s.stats().entries, 794)
            cp, sp = os.path.join(d, "c.mess"), os.path.join(d, "s.mess")
            c.save(cp, passphrase="pw")
            s.save(sp)
            self.assertEqual(stat.S_IMODE(os.stat(cp).st_mode), 0o600)
            with self.assertRaises(mess.PassphraseError):
                mess.Client.load(cp, "wrong")
            with self.assertRaises(mess.RoleError):
                mess.Server.load(cp)
            with self.assertRaises(mess.ParamsMismatchError):
                mess.Server.load(sp, expect=small_params(shards=5))
            with mess.Client.load(cp, "pw") as c2, mess.Server.load(sp, p) as s2:
                self.assertEqual(c2.params, p)
                self.assertEqual(s2.stats()[:3], s.stats()[:3])
                r2 = c2.query(s2, Data.base[10], 10, 160)
                self.assertEqual(r2.ids[0], 10)

    def test_passphrase_rules(self):
        p = small_params()
        with tempfile.TemporaryDirectory() as d, \
                mess.Client(p, Data.train, seed=SEED) as c:
            sealed, plain = os.path.join(d, "sealed.mess"), os.path.join(d, "plain.mess")
            # every byte counts, NUL included: nothing is cut at the first NUL
            c.save(sealed, passphrase=b"ab\x00cd")
            for wrong in (b"ab", b"ab\x00", b"ab\x00xx", "ab"):
                with self.assertRaises(mess.PassphraseError):
                    mess.Client.load(sealed, wrong)
            with mess.Client.load(sealed, bytearray(b"ab\x00cd")) as c2:
                self.assertEqual(c2.params, p)
            # str passphrases are UTF-8
            c.save(sealed, passphrase="p\u00e4ss")
            with mess.Client.load(sealed, "p\u00e4ss".encode("utf-8")):
                pass
            # empty passphrases are refused, saving and loading
            for empty in ("", b""):
                with self.assertRaises(mess.InvalidArgumentError):
                    c.save(os.path.join(d, "empty.mess"), passphrase=empty)
                with self.assertRaises(mess.InvalidArgumentError):
                    mess.Client.load(sealed, empty)
            self.assertFalse(os.path.exists(os.path.join(d, "empty.mess")))
            with self.assertRaises(TypeError):
                c.save(sealed, passphrase=123)
            # with a passphrase, an unsealed file is refused (it could be a
            # client planted with someone else's keys)
            c.save(plain)
            with self.assertRaises(mess.PassphraseError):
                mess.Client.load(plain, "anything")
            with mess.Client.load(plain):
                pass

    def test_save_exist_ok(self):
        # issue 29 item 1: a new client's file is the only copy of its
        # server's keys; exist_ok=False never replaces anything
        p = small_params()
        with tempfile.TemporaryDirectory() as d, \
                mess.Client(p, Data.train, seed=SEED) as c:
            path = os.path.join(d, "c.mess")
            c.save(path, exist_ok=False)
            with mess.Client.load(path) as c2:
                self.assertEqual(c2.params, p)
            def read(f):
                with open(f, "rb") as fh:
                    return fh.read()
            before = read(path)
            with mess.Client(p, Data.train[:1000]) as other:   # other keys
                with self.assertRaises(mess.AlreadyExistsError) as cm:
                    other.save(path, exist_ok=False)
                with self.assertRaises(FileExistsError):
                    other.save(path, passphrase="pw", exist_ok=False)
            e = cm.exception
            self.assertEqual((e.code, e.errno, e.filename), (-16, errno.EEXIST, path))
            self.assertIn(path, str(e))
            self.assertEqual(read(path), before)
            # a dangling symlink is not followed; a directory is refused too
            link, target = os.path.join(d, "link.mess"), os.path.join(d, "nowhere")
            os.symlink("nowhere", link)
            with self.assertRaises(FileExistsError):
                c.save(link, exist_ok=False)
            self.assertFalse(os.path.exists(target))
            with self.assertRaises(FileExistsError):
                c.save(d, exist_ok=False)
            self.assertEqual(sorted(os.listdir(d)), ["c.mess", "link.mess"])
            # the default still replaces (saving a client again)
            c.save(path)
            with mess.Client.load(path):
                pass

    def test_deterministic_mode_repeats(self):
        p = small_params()
        a = mess.Client(p, Data.train, seed=SEED)
        b = mess.Client(p, Data.train, seed=SEED)
        with a, b:
            self.assertTrue(a.deterministic and b.deterministic)
            self.assertTrue(np.array_equal(a.codes(Data.base[0]), b.codes(Data.base[0])))
            with a.upload([1, 2], Data.base[:2]) as ua, b.upload([1, 2], Data.base[:2]) as ub:
                self.assertEqual(bytes(ua), bytes(ub))
        with self.assertRaises(ValueError):
            mess.Client(p, Data.train, seed=b"short")

    def test_closed_handles(self):
        p = small_params()
        s = mess.Server(p)
        s.close()
        s.close()  # idempotent
        with self.assertRaises(mess.StateError):
            s.stats()
        # garbage collection frees the rest
        for _ in range(3):
            mess.Server(p)
        gc.collect()


if __name__ == "__main__":
    unittest.main()
