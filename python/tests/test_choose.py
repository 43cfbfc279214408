"""mess.choose and Params.for_data(target_recall=...): the configuration
search of the library (mess_plan_choose) on a part of the bundled SIFT set,
a small grid so the test takes seconds."""
import os
import unittest

import numpy as np

import mess

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIFT = os.path.join(ROOT, "datasets", "sift")
SEED = bytes(range(32))
SMALL = dict(grid_shards=[16], grid_per_item=[4, 8], grid_bits=[64],
             pools=[32, 64, 128, 256], check_shards=2, threads=2, seed=SEED)


class Data:
    base = mess.read_bvecs(os.path.join(SIFT, "base.bvecs"))[:2000]
    train = mess.read_f32(os.path.join(SIFT, "learn.bvecs"))
    queries = mess.read_f32(os.path.join(SIFT, "query.bvecs"))[:20].copy()


class TestChoose(unittest.TestCase):
    def test_target_reached(self):
        ch = mess.choose(Data.train, Data.base, target_recall=0.9, queries=Data.queries,
                         **SMALL)
        self.assertGreaterEqual(ch.recall, 0.9)
        self.assertEqual(len(ch.candidates), 2)
        self.assertEqual(ch.params.payload, mess.PAYLOADS["u8"])  # byte data
        self.assertEqual(ch.params.shards, 16)
        self.assertEqual(ch.bytes, ch.params.request_size() + ch.params.response_size(ch.pool))
        self.assertIn(ch.candidate.store_bound, mess.choose.__globals__["BOUNDS"].values())
        self.assertEqual(min(c.bytes for c in ch.candidates if c.pool), ch.bytes)
        ch.params.check()

    def test_for_data_and_holdout(self):
        p = mess.Params.for_data(Data.base, target_recall=0.9, train=Data.train, **SMALL)
        self.assertEqual(p.payload, mess.PAYLOADS["u8"])
        self.assertIn(p.per_item, (4, 8))
        with self.assertRaises(ValueError):
            mess.Params.for_data(Data.base, target_recall=0.9)  # no train
        with self.assertRaises(ValueError):
            mess.Params.for_data(Data.base, train=Data.train)  # no target

    def test_unreachable(self):
        with self.assertRaises(mess.NoConfigurationError) as cm:
            mess.choose(Data.train, Data.base, target_recall=0.999, queries=Data.queries,
                        **dict(SMALL, pools=[10, 20]))
        self.assertIsInstance(cm.exception, mess.NotFoundError)
        self.assertLess(cm.exception.best.recall, 0.999)
        self.assertIn("best reachable", str(cm.exception))

    def test_budget_and_float_payload(self):
        x = Data.base.astype(np.float32) * 0.37 + 0.01
        q = Data.queries * 0.37 + 0.01
        ch = mess.choose(Data.train, x, max_bytes=30000, queries=q, **SMALL)
        self.assertLessEqual(ch.bytes, 30000)
        self.assertNotEqual(ch.params.payload, mess.PAYLOADS["u8"])
        self.assertEqual(ch.payload_recall["f32"], 1.0)
        self.assertIn("i8", ch.payload_recall)

    def test_bad_input(self):
        with self.assertRaises(ValueError):
            mess.choose(Data.train, Data.base, queries=Data.queries)  # neither
        with self.assertRaises(ValueError):
            mess.choose(Data.train, Data.base, target_recall=0.9, max_bytes=1)
        with self.assertRaises(ValueError):
            mess.choose(Data.train, Data.base[:, :64], target_recall=0.9)
        with self.assertRaises(mess.InvalidArgumentError):
            mess.choose(Data.train, Data.base, target_recall=1.5, queries=Data.queries,
                        **SMALL)
        with self.assertRaises(mess.InvalidArgumentError):
            mess.choose(Data.train, Data.base, target_recall=0.9, queries=Data.queries,
                        **dict(SMALL, grid_bits=[100]))


if __name__ == "__main__":
    unittest.main()
