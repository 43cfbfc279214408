"""Pending queries outside the process (mess.h, "Query state") through the
bindings: Client.save_queries / load_queries (a file) and seal_queries /
unseal_queries (bytes).  The finish runs in a NEW Python process, with the
client file and the responses made here, and gives this process's
results; another client, other parameters, another format version and
changed bytes are refused with the binding's exceptions."""
import json
import os
import stat
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import mess

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIFT = os.path.join(ROOT, "datasets", "sift")
K = 10

# The other process: loads the client and its pending queries, finishes
# each with its response, prints the results as JSON.
CHILD = r"""
import json, sys
import mess
d, k = sys.argv[1], int(sys.argv[2])
with mess.Client.load(d + "/client.mess") as c:
    qs = c.load_queries(d + "/pending.qstate")
    out = []
    for i, q in enumerate(qs):
        with open("%s/resp-%d" % (d, i), "rb") as f:
            resp = f.read()
        ids, dists, st = c.finish(q, resp, k)
        out.append([ids.tolist(), dists.tolist()])
        q.close()
print(json.dumps(out))
"""


def params(**kw):
    args = dict(shards=4, per_item=2, ef_construction=40, train_sample=1000)
    args.update(kw)
    return mess.Params(128, **args)


class TestQueryState(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = mess.read_f32(os.path.join(SIFT, "base.bvecs"))[:500].copy()
        train = mess.read_f32(os.path.join(SIFT, "learn.bvecs"))[:1000].copy()
        cls.queries = mess.read_f32(os.path.join(SIFT, "query.bvecs"))[:4].copy()
        cls.p = params()
        cls.c = mess.Client(cls.p, train, seed=bytes(range(32)))
        cls.other = mess.Client(cls.p, train, seed=bytes(range(1, 33)))
        cls.small = mess.Client(params(shards=8), train, seed=bytes(range(32)))
        cls.s = mess.Server(cls.p)
        cls.c.insert(cls.s, np.arange(500), base)
        cls.qs, cls.resps, cls.ref = [], [], []
        for v in cls.queries:
            q, req = cls.c.request(v, 40)
            resp = bytes(cls.s.search(req))
            ids, dists, _ = cls.c.finish(q, resp, K)
            cls.qs.append(q)
            cls.resps.append(resp)
            cls.ref.append((ids, dists))

    @classmethod
    def tearDownClass(cls):
        for q in cls.qs:
            q.close()
        for h in (cls.c, cls.other, cls.small, cls.s):
            h.close()

    def same_results(self, qs):
        self.assertEqual(len(qs), len(self.qs))
        for q, resp, (ids, dists) in zip(qs, self.resps, self.ref):
            got_ids, got_dists, _ = self.c.finish(q, resp, K)
            np.testing.assert_array_equal(got_ids, ids)
            np.testing.assert_array_equal(got_dists, dists)

    def test_seal_unseal(self):
        sealed = self.c.seal_queries(self.qs)
        self.assertEqual(len(sealed), self.p.query_sealed_size(len(self.qs)))
        back = self.c.unseal_queries(bytes(sealed))
        self.same_results(back)
        # one query alone; a Buffer, bytes, bytearray and numpy are accepted
        one = self.c.seal_queries(self.qs[1])
        for form in (one, bytes(one), bytearray(bytes(one)), np.asarray(one)):
            (q,) = self.c.unseal_queries(form)
            ids, _, _ = self.c.finish(q, self.resps[1], K)
            np.testing.assert_array_equal(ids, self.ref[1][0])
            # and not with another query's response
            with self.assertRaises(mess.AuthenticationError):
                self.c.finish(q, self.resps[0], K)
        # a random nonce: another sealing, other bytes
        self.assertNotEqual(bytes(self.c.seal_queries(self.qs[1])), bytes(one))
        with self.assertRaises(ValueError):
            self.c.seal_queries([])
        with self.assertRaises(TypeError):
            self.c.seal_queries([b"not a query"])

    def test_refused(self):
        sealed = bytes(self.c.seal_queries(self.qs))
        with self.assertRaises(mess.AuthenticationError):
            self.other.unseal_queries(sealed)
        with self.assertRaises(mess.ParamsMismatchError):
            self.small.unseal_queries(sealed)
        v2 = bytearray(sealed)
        v2[4:8] = struct.pack("<I", mess._lib.LIMITS["QUERY_STATE_VERSION"] + 1)
        with self.assertRaises(mess.VersionError):
            self.c.unseal_queries(bytes(v2))
        with self.assertRaises(mess.FormatError):
            self.c.unseal_queries(sealed[:-1])
        for i in range(28, len(sealed), 97):  # the sealed bytes, every 97th
            bad = bytearray(sealed)
            bad[i] ^= 0x20
            with self.assertRaises(mess.AuthenticationError):
                self.c.unseal_queries(bytes(bad))

    def test_file_in_a_new_process(self):
        with tempfile.TemporaryDirectory() as d:
            self.c.save("%s/client.mess" % d)
            self.c.save_queries("%s/pending.qstate" % d, self.qs)
            self.assertEqual(stat.S_IMODE(os.stat("%s/pending.qstate" % d).st_mode), 0o600)
            for i, resp in enumerate(self.resps):
                with open("%s/resp-%d" % (d, i), "wb") as f:
                    f.write(resp)
            env = dict(os.environ, MESS_LIBRARY=mess.library_path,
                       PYTHONPATH=os.path.join(ROOT, "python"))
            out = subprocess.run([sys.executable, "-c", CHILD, d, str(K)],
                                 env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(out.returncode, 0, out.stderr)
            got = json.loads(out.stdout)
            self.assertEqual(len(got), len(self.qs))
            for (ids, dists), (ref_ids, ref_dists) in zip(got, self.ref):
                np.testing.assert_array_equal(np.array(ids, dtype=np.uint64), ref_ids)
                np.testing.assert_array_equal(np.array(dists, dtype=np.float32), ref_dists)

    def test_file_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = "%s/pending.qstate" % d
            self.c.save_queries(path, self.qs)
            with self.assertRaises(mess.AuthenticationError):
                self.other.load_queries(path)
            with self.assertRaises(mess.ParamsMismatchError):
                self.small.load_queries(path)
            self.c.save("%s/client.mess" % d)
            with self.assertRaises(mess.RoleError):
                self.c.load_queries("%s/client.mess" % d)
            with self.assertRaises(mess.RoleError):
                mess.Client.load(path)
            with open(path, "rb") as f:
                raw = bytearray(f.read())
            raw[len(raw) // 2] ^= 1
            with open(path, "wb") as f:
                f.write(bytes(raw))
            with self.assertRaises(mess.FormatError):
                self.c.load_queries(path)
            with self.assertRaises(mess.IOFailureError) as e:
                self.c.load_queries("%s/missing.qstate" % d)
            self.assertEqual(e.exception.errno, 2)


if __name__ == "__main__":
    unittest.main()
