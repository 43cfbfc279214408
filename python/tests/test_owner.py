"""Owner tags (a server refuses clients other than its first uploader), the
server-side search beam (ef_search outside the parameter fingerprint) and
non-finite vectors refused on upload, through the bindings."""
import os
import tempfile
import unittest

import numpy as np

import mess

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIFT = os.path.join(ROOT, "datasets", "sift")
N = 600


def params(**kw):
    args = dict(shards=4, per_item=2, ef_construction=40, hnsw_m=8, train_sample=1000)
    args.update(kw)
    return mess.Params(128, **args)


class Data:
    base = mess.read_f32(os.path.join(SIFT, "base.bvecs"))[:N].copy()
    train = mess.read_f32(os.path.join(SIFT, "learn.bvecs"))[:2000].copy()
    queries = mess.read_f32(os.path.join(SIFT, "query.bvecs"))[:5].copy()


class TestOwner(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        p = params()
        cls.a = mess.Client(p, Data.train, seed=bytes(range(32)))
        cls.b = mess.Client(p, Data.train, seed=bytes(range(1, 33)))

    @classmethod
    def tearDownClass(cls):
        cls.a.close()
        cls.b.close()

    def test_tags(self):
        self.assertEqual(len(self.a.owner), mess.OWNER_BYTES)
        self.assertNotEqual(self.a.owner, self.b.owner)
        # a function of the master key: the same after a save and load
        with tempfile.TemporaryDirectory() as d:
            self.a.save(os.path.join(d, "c"))
            with mess.Client.load(os.path.join(d, "c")) as again:
                self.assertEqual(again.owner, self.a.owner)

    def test_first_uploader_owns_the_server(self):
        with mess.Server(params()) as s:
            self.assertIsNone(s.owner)
            self.assertTrue(s.belongs_to(self.a) and s.belongs_to(self.b))
            self.a.insert(s, np.arange(N), Data.base)
            self.assertEqual(s.owner, self.a.owner)
            self.assertTrue(s.belongs_to(self.a))
            self.assertFalse(s.belongs_to(self.b))
            self.assertFalse(s.belongs_to(self.b.owner))
            with self.assertRaises(ValueError):
                s.belongs_to(b"short")
            before = s.stats()
            with self.b.upload([N], Data.base[:1]) as up:
                with self.assertRaises(mess.OwnerError) as cm:
                    s.apply_upload(up)
            self.assertIn("another client", str(cm.exception))
            with self.b.delete([0, 1]) as dl:
                with self.assertRaises(mess.OwnerError):
                    s.apply_delete(dl)
            q, req = self.b.request(Data.queries[0], 40)
            with q, req, self.assertRaises(mess.OwnerError):
                s.search(req)
            self.assertEqual(s.stats(), before)
            # the owner still works, and the tag survives save and load
            self.assertEqual(self.a.query(s, Data.queries[0], k=5, pool=80).ids.size, 5)
            with tempfile.TemporaryDirectory() as d:
                s.save(os.path.join(d, "s"))
                with mess.Server.load(os.path.join(d, "s")) as t:
                    self.assertEqual(t.owner, self.a.owner)
                    self.assertFalse(t.belongs_to(self.b))


class TestLayout(unittest.TestCase):
    def test_codes_layout_through_inserts_deletes_checkpoints(self):
        # a directory server: the layout grows with inserts, survives a
        # checkpoint's new mappings (rebuilt there), answers as the default
        p = params()
        with tempfile.TemporaryDirectory() as d, \
                mess.Client(p, Data.train, seed=bytes(32)) as c:
            with mess.Server.create(os.path.join(d, "s"), p) as s:
                c.insert(s, np.arange(N // 2), Data.base[:N // 2])
                s.checkpoint()
                s.set_layout("codes")
                c.insert(s, np.arange(N // 2, N), Data.base[N // 2:])
                with c.delete(np.arange(0, N, 7)) as dl:
                    s.apply_delete(dl)
                s.checkpoint()
                with_layout = s.stats().bytes
                reqs = [c.request(q, 80) for q in Data.queries[:5]]
                got = [bytes(s.search(r)) for _, r in reqs]
                s.set_layout("default")
                # M 8: 320 bytes per entry (and per node of spare capacity)
                self.assertGreaterEqual(with_layout - s.stats().bytes, 320 * s.stats().entries)
                self.assertEqual([bytes(s.search(r)) for _, r in reqs], got)
                for q, r in reqs:
                    q.close()
                    r.close()


class TestEfSearch(unittest.TestCase):
    def test_ef_search_is_server_tuning(self):
        p = params()
        with mess.Client(p, Data.train, seed=bytes(32)) as c, \
                mess.Server(params(ef_search=200)) as s:
            c.insert(s, np.arange(N), Data.base)   # fingerprints agree
            self.assertEqual(s.params.ef_search, 200)
            s.set_ef_search(7)
            self.assertEqual(s.params.ef_search, 7)
            self.assertEqual(c.query(s, Data.queries[0], k=5, pool=40).ids.size, 5)
            for bad in (-1, mess.MAX_EF + 1):
                with self.assertRaises(ValueError):
                    s.set_ef_search(bad)
            with self.assertRaises(TypeError):
                s.set_ef_search(1.5)
            self.assertEqual(s.params.ef_search, 7)
            # the code layout: more memory, the same response bytes
            q, req = c.request(Data.queries[1], 40)
            with q, req:
                want = bytes(s.search(req))
                before = s.stats()
                s.set_layout("codes")
                self.assertGreater(s.stats().bytes, before.bytes)
                self.assertEqual(bytes(s.search(req)), want)
                with self.assertRaises(ValueError):
                    s.set_layout("other")
                s.set_layout("default")
                self.assertEqual(s.stats().bytes, before.bytes)
        # a client trained with another subsample talks to the same server
        with mess.Client(params(train_sample=500), Data.train, seed=bytes(32)) as c2, \
                mess.Server(p) as s2:
            c2.insert(s2, np.arange(10), Data.base[:10])


class TestNonFinite(unittest.TestCase):
    def test_upload_refuses_nan_and_inf(self):
        with mess.Client(params(), Data.train, seed=bytes(32)) as c, \
                mess.Server(params()) as s:
            for bad in (np.nan, np.inf, -np.inf):
                v = Data.base[:3].copy()
                v[2, 5] = bad
                with self.assertRaises(mess.InvalidArgumentError):
                    c.upload(np.arange(3), v)
                with self.assertRaises(mess.InvalidArgumentError):
                    c.insert(s, np.arange(3), v)
            self.assertEqual(s.stats().entries, 0)


if __name__ == "__main__":
    unittest.main()
