"""Server directories through the bindings (docs/PROTOCOL.md, "Server
directory"): create, open (all shards or a subset), checkpoint, export
(byte for byte reproducible), import, verify; a damaged directory is
refused with the file and the reason."""
import errno
import glob
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import mess

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIFT = os.path.join(ROOT, "datasets", "sift")
N = 400


def params():
    return mess.Params(128, shards=4, per_item=2, ef_construction=40, hnsw_m=8,
                       train_sample=1000)


class Data:
    base = mess.read_f32(os.path.join(SIFT, "base.bvecs"))[:N].copy()
    train = mess.read_f32(os.path.join(SIFT, "learn.bvecs"))[:2000].copy()
    queries = mess.read_f32(os.path.join(SIFT, "query.bvecs"))[:4].copy()


class TestStore(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.c = mess.Client(params(), Data.train, seed=bytes(range(32)))

    def tearDown(self):
        self.c.close()
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.d, name)

    def build(self):
        s = mess.Server.create(self.path("s"), params())
        self.c.insert(s, np.arange(N), Data.base)
        s.checkpoint()
        return s

    def answers(self, s):
        reqs = [self.c.request(q, 64) for q in Data.queries]
        return [bytes(s.search(r[1])) for r in reqs]

    def test_create_checkpoint_open(self):
        with self.build() as s, mess.Server(params()) as m:
            self.c.insert(m, np.arange(N), Data.base)
            self.assertEqual(s.stats().entries, N * 2)
            req = self.c.request(Data.queries[0], 64)[1]
            self.assertEqual(bytes(s.search(req)), bytes(m.search(req)))
        with mess.Server.open(self.path("s"), expect=params()) as s:
            self.assertEqual(s.stats().entries, N * 2)
            self.assertTrue(s.belongs_to(self.c))
        self.assertTrue(mess.Server.verify(self.path("s")).startswith("ok: generation 2,"))
        with self.assertRaises(mess.ParamsMismatchError):
            mess.Server.open(self.path("s"), expect=mess.Params(128, shards=8))

    def test_busy(self):
        # another process holds the directory's writer claim (the flock on
        # S/LOCK): a change is BusyError (MESS_EBUSY), not StateError
        self.build().close()
        holder = subprocess.Popen(
            [sys.executable, "-c",
             "import fcntl, sys\n"
             "f = open(sys.argv[1], 'a')\n"
             "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "print('held', flush=True)\n"
             "sys.stdin.read()\n", self.path("s/LOCK")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(holder.stdout.readline().strip(), "held")
            with mess.Server.open(self.path("s")) as s:
                with self.assertRaises(mess.BusyError) as e:
                    self.c.insert(s, np.arange(N, N + 10), Data.base[:10])
                self.assertNotIsInstance(e.exception, mess.StateError)
                self.assertEqual(e.exception.code, -17)
                self.assertEqual(e.exception.applied, 0)
                self.assertIn("another process is writing", str(e.exception))
                with self.assertRaises(mess.BusyError):
                    s.checkpoint()
        finally:
            holder.communicate("")
        with mess.Server.open(self.path("s")) as s:  # done: it writes
            self.c.insert(s, np.arange(N, N + 10), Data.base[:10])
            s.checkpoint()
            self.assertEqual(s.stats().entries, (N + 10) * 2)

    def test_create_over_existing(self):
        # its own status (MESS_EEXIST), not an I/O error
        self.build().close()
        with self.assertRaises(mess.AlreadyExistsError) as e:
            mess.Server.create(self.path("s"), params())
        self.assertEqual(e.exception.errno, errno.EEXIST)
        self.assertEqual(e.exception.code, -16)

    def test_applied_counts(self):
        # the client counts what a server acknowledged (issue 29 item 7)
        self.assertEqual(self.c.applied, (0, 0))
        self.build().close()
        self.assertEqual(self.c.applied, (N, 0))
        self.c.note_applied(deleted=3)
        self.c.save(self.path("c.mess"))
        with mess.Client.load(self.path("c.mess")) as c:
            self.assertEqual(c.applied, (N, 3))
        # a client file of format 2 (before the counts): loads, uncounted
        with mess.Client.load(os.path.join(ROOT, "tests", "fixtures", "client-v2.mess")) as c:
            self.assertIsNone(c.applied)
            c.note_applied(1)
            self.assertIsNone(c.applied)
        with self.assertRaises(ValueError):
            self.c.note_applied(-1)

    def test_export_import_bytes(self):
        with self.build() as s:
            s.export(self.path("a.mess"))
            s.export(self.path("b.mess"))
        with open(self.path("a.mess"), "rb") as f:
            a = f.read()
        with open(self.path("b.mess"), "rb") as f:
            self.assertEqual(f.read(), a)
        with mess.Server.import_(self.path("a.mess"), self.path("copy")) as t:
            t.export(self.path("c.mess"))
        with open(self.path("c.mess"), "rb") as f:
            self.assertEqual(f.read(), a)
        with self.assertRaises(OSError):  # not an empty directory
            mess.Server.import_(self.path("a.mess"), self.path("copy"))
        # the travel file is not a directory
        with self.assertRaises(mess.FormatError) as e:
            mess.Server.open(self.path("a.mess"))
        self.assertIn("exported server", str(e.exception))

    def test_lazy_damaged_delta(self):
        # a chain of deltas (an insert after the base's checkpoint); a byte
        # of a delta's body flipped: the open reads the header only, the
        # first search fails naming the file, other shards still answer
        with self.build() as s:
            self.c.insert(s, np.arange(N, N + 20), Data.base[:20] + 1)
            s.checkpoint()
        delta = sorted(glob.glob(self.path("s/shard-0001-*.delta")))[-1]
        with open(delta, "r+b") as f:
            f.seek(300)
            b = f.read(1)
            f.seek(300)
            f.write(bytes([b[0] ^ 1]))
        req = self.c.request(Data.queries[0], 64)[1]
        with mess.Server.open(self.path("s")) as s:
            self.assertIsNone(s.error())
            self.assertEqual(s.stats().entries, (N + 20) * 2)
            s.search_shards(req, [0, 2, 3])
            with self.assertRaises(mess.FormatError) as e:
                s.search(req)
            self.assertIn(os.path.basename(delta), str(e.exception))
            self.assertIn(os.path.basename(delta), s.error())
        with self.assertRaises(mess.FormatError) as e:
            mess.Server.verify(self.path("s"))
        self.assertIn(os.path.basename(delta), str(e.exception))

    def test_subset(self):
        self.build().close()
        with mess.Server.open(self.path("s"), shards=[2, 0]) as s:
            req = self.c.request(Data.queries[0], 64)[1]
            with self.assertRaises(mess.StateError):
                s.search(req)
            with self.assertRaises(mess.InvalidArgumentError):
                s.export(self.path("x.mess"))
        for bad in ([], [4], [1, 1]):
            with self.assertRaises((ValueError, mess.InvalidArgumentError)):
                mess.Server.open(self.path("s"), shards=bad)

    def test_extract_and_log_position(self):
        with self.build() as s:
            self.assertEqual(s.log_position(), (2, 0))
            req = self.c.request(Data.queries[0], 64)[1]
            whole = bytes(s.search_shards(req, [1, 3]))
        mess.Server.extract(self.path("s"), [3, 1], self.path("g"))
        with mess.Server.open(self.path("g"), expect=params(), shards=[1, 3]) as g:
            self.assertEqual(bytes(g.search_shards(req, [1, 3])), whole)
            with self.assertRaises(mess.StateError):
                g.search_shards(req, [0])
        with mess.Server.open(self.path("g")) as g:  # whole: the other shards empty
            self.assertEqual(g.log_position(), (2, 0))
            self.assertEqual(g.shard(0).nodes, 0)
            self.c.insert(g, np.arange(N, N + 20), Data.base[:20])  # its own log only
            self.assertGreater(g.log_position()[1], 0)
        with mess.Server.open(self.path("s")) as s:
            self.assertEqual(s.log_position(), (2, 0))
        with self.assertRaises(OSError) as e:  # exists
            mess.Server.extract(self.path("s"), [0], self.path("g"))
        self.assertIn("exists", str(e.exception))
        with self.assertRaises(mess.InvalidArgumentError) as e:
            mess.Server.extract(self.path("s"), [4], self.path("h"))
        self.assertIn("shard 4 out of range", str(e.exception))
        with self.assertRaises(mess.IOFailureError):
            mess.Server.extract(self.path("nothing"), [0], self.path("h"))
        self.assertFalse(os.path.exists(self.path("h")))
        with self.assertRaises(mess.InvalidArgumentError):
            mess.Server(params()).log_position()

    def test_damage_named(self):
        self.build().close()
        arena = sorted(glob.glob(self.path("s/shard-0001-*.arena")))[0]
        with open(arena, "r+b") as f:
            f.truncate(os.path.getsize(arena) - 1)
        with self.assertRaises(mess.FormatError) as e:
            mess.Server.open(self.path("s"))
        self.assertIn(os.path.basename(arena), str(e.exception))
        self.assertIn("truncated", str(e.exception))
        with self.assertRaises(mess.FormatError) as e:
            mess.Server.verify(self.path("s"))
        self.assertIn(os.path.basename(arena), str(e.exception))
        os.unlink(self.path("s/MANIFEST"))
        with self.assertRaises(mess.IOFailureError):
            mess.Server.open(self.path("s"))


if __name__ == "__main__":
    unittest.main()
