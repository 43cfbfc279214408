"""mess.wire (the Python mirror of wire.h) against the library: every
offset and size it uses must agree with mess_*_size, and a real request and
response must parse with it."""
import os
import unittest

import numpy as np

import mess
from mess import wire

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIFT = os.path.join(ROOT, "datasets", "sift")


class WireLayout(unittest.TestCase):
    def configs(self):
        for kw in (dict(), dict(shards=4, per_item=2, kappa=128),
                   dict(shards=7, per_item=3, kappa=64, payload="i8")):
            yield mess.Params(128, **kw)

    def test_sizes_match_library(self):
        for p in self.configs():
            t, M, cb = p.per_item, p.shards, wire.code_bytes(p)
            # upload(0) = H + O + 8, request = H + O + R + M (2 + cb),
            # response(0) = H + R + 2M: solved for header H, owner tag O and
            # request id R, each must be wire.py's
            upl0, req, resp0 = p.upload_size(0), p.request_size(), p.response_size(0)
            R = req - M * (wire.BUDGET_BYTES + cb) - (upl0 - wire.COUNT_BYTES)
            O = (upl0 - wire.COUNT_BYTES) - (resp0 - M * wire.BUDGET_BYTES - R)
            H = upl0 - wire.COUNT_BYTES - O
            self.assertEqual((H, O, R), (wire.HEADER_BYTES, wire.OWNER_BYTES,
                                         wire.REQUEST_ID_BYTES))
            self.assertEqual(upl0, wire.RECORDS_OFFSET)
            self.assertEqual(p.delete_size(0), wire.RECORDS_OFFSET)
            self.assertEqual(resp0, wire.RESPONSE_BODY_OFFSET + M * wire.BUDGET_BYTES)
            self.assertEqual(req, wire.request_codes_offset(p) + M * cb)
            self.assertEqual(p.upload_size(1) - upl0, t * wire.upload_record_bytes(p))
            self.assertEqual(p.delete_size(1) - p.delete_size(0), t * wire.DELETE_RECORD_BYTES)
            self.assertEqual(p.response_size(5) - resp0, 5 * p.payload_size())

    def test_real_buffers(self):
        p = mess.Params(128, shards=4, per_item=2, ef_construction=40, train_sample=1000)
        base = mess.read_f32(os.path.join(SIFT, "base.bvecs"))[:300].copy()
        train = mess.read_f32(os.path.join(SIFT, "learn.bvecs"))[:1000].copy()
        with mess.Client(p, train, seed=bytes(32)) as c, mess.Server(p) as s:
            c.insert(s, np.arange(300, dtype=np.uint64), base)
            q, req = c.request(base[0], pool=40)
            req = bytes(req)
            self.assertEqual(req[:wire.MAGIC_BYTES], wire.MAGIC["request"])
            self.assertEqual(int.from_bytes(req[wire.MAGIC_BYTES:wire.MAGIC_BYTES + 4], "little"),
                             wire.VERSION)
            hdr, rid, budgets, codes = wire.parse_request(req, p.shards, wire.code_bytes(p))
            self.assertEqual(int(budgets.sum()), 40)
            self.assertEqual(codes.shape, (p.shards, wire.code_bytes(p)))
            resp = bytes(s.search(req))
            self.assertEqual(resp[:wire.MAGIC_BYTES], wire.MAGIC["response"])
            per = wire.response_entries(resp, p.shards, p.payload_size())
            self.assertTrue(all(len(e) <= b for e, b in zip(per, budgets)))
            # rebuilt from its parts, the response is the same bytes and
            # the client finishes it
            again = wire.build_response(hdr, rid, [np.frombuffer(b"".join(e), dtype=np.uint8)
                                                   .reshape(len(e), p.payload_size())
                                                   for e in per])
            self.assertEqual(again, resp)
            ids, _, _ = c.finish(q, again, 5)
            self.assertIn(0, [int(i) for i in ids])


if __name__ == "__main__":
    unittest.main()
