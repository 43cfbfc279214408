"""Tests of the accountant and planning bindings against closed forms and
brute force (paper section 5.2, Appendix A.1, Appendix B)."""
import itertools
import math
import os
import unittest

import numpy as np

import mess
import mess.account as A

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIFT = os.path.join(ROOT, "datasets", "sift")


@unittest.skipUnless(A.available(), "libmess built without the accountant API")
class TestAccount(unittest.TestCase):
    def test_eta_and_pure_bound(self):
        self.assertAlmostEqual(A.eta(0.08), math.log(0.92 / 0.08), places=12)
        d = [7, 3, 11, 5, 9]
        self.assertAlmostEqual(A.stored_pure(0.08, d, 2), A.eta(0.08) * (11 + 9), places=9)
        with self.assertRaises(mess.InvalidArgumentError) as cm:
            A.eta(0.0)
        self.assertEqual(cm.exception.message, mess.strerror(-1))

    def test_route_weights_brute_force(self):
        d, t = [4, 1, 6, 2, 3, 5], 3
        w = np.exp(A.route_weights(d, t))
        self.assertEqual(len(w), 1 + 6 + 5 + 4)
        want = np.zeros(len(w))
        subsets = list(itertools.combinations(d, t))
        for s in subsets:
            want[sum(s)] += 1.0 / len(subsets)
        self.assertTrue(np.allclose(w, want, atol=1e-12))

    def test_pld(self):
        w = A.route_weights([10, 20, 30, 5], 2)
        with A.PLD(0.08, w) as pld:
            xi = pld.epsilon(1e-5)
            self.assertLessEqual(pld.delta(xi), 1e-5 * (1 + 1e-9))
            self.assertGreater(pld.delta(xi * 0.9), 1e-5)
            self.assertEqual(pld.support()[0], 50)
            bound, exact = pld.tail(xi + 1.0)
            self.assertLessEqual(exact, bound + 1e-12)
        with self.assertRaises(mess.StateError):
            pld.delta(1.0)
        r = A.stored(0.08, [10, 20, 30, 5], 2, delta0=1e-5)
        self.assertAlmostEqual(r.xi_pld, xi, places=6)
        self.assertLessEqual(r.xi_pld, r.xi_pure + 1e-9)

    def test_rr_delta(self):
        self.assertEqual(A.rr_delta(0.1, 0, 0.5), 0.0)
        self.assertGreater(A.rr_delta(0.1, 20, 0.5), A.rr_delta(0.1, 20, 5.0))
        # eps at the pure bound: nothing left
        self.assertAlmostEqual(A.rr_delta(0.1, 20, 20 * A.eta(0.1)), 0.0, places=12)

    def test_query_accountants(self):
        a = mess.split_flip(0.08)
        # one submission: the composed flip's randomized response
        self.assertAlmostEqual(A.access(a, a, 1), A.eta(0.08), places=9)
        self.assertGreater(A.access(a, a, 100), A.access(a, a, 1))
        g_eq, g_ne = A.search(a, a, 1)
        self.assertEqual(g_eq, 0.0)
        xi, xu = A.search_xi(a, a, 10, 8192, 100)
        self.assertLessEqual(xi, xu + 1e-9)
        # the paper's random-LSH regression value (Appendix A.2.6)
        self.assertAlmostEqual(A.random_lsh(0.21, 128, 0.05, 0.01)[1], 20.041, places=3)

    def test_versions(self):
        """Theorem V: a history is randomized response on d + changed bits."""
        d = [3, 0, 7, 12, 1, 1, 2, 9]
        self.assertEqual(A.versions(0.08, d, 2).xi_pld,
                         A.stored(0.08, [2 * x for x in d], 2).xi_pld)
        self.assertEqual(A.versions(0.08, d, 2, changed=[0] * 8).xi_pld,
                         A.stored(0.08, d, 2).xi_pld)
        eta2, shown, err = A.version_bits(0.08)
        self.assertAlmostEqual(eta2, 2 * math.log(0.92 / 0.08), places=12)
        self.assertAlmostEqual(shown, 0.92 ** 2 + 0.08 ** 2, places=14)
        self.assertAlmostEqual(err, 1 / (1 + math.exp(eta2)), places=14)
        with self.assertRaises(mess.MessError):
            A.versions(0.08, d, 2, changed=[4] + [0] * 7)

    def test_summary(self):
        """The bottom line's numbers are the accountants' (random-hyperplane
        model: the item's t * kappa bits as random_lsh's mixture)."""
        p = mess.Params(128)
        text, j = A.summary(p, angle=0.05, delta0=1e-5)
        self.assertAlmostEqual(j["eta_D"], A.eta(p.p_store), places=7)
        self.assertAlmostEqual(j["item_xi_pld"],
                               A.random_lsh(p.p_store, p.per_item * p.kappa, 0.05, 1e-5)[0],
                               places=5)
        eta2, shown, err = A.version_bits(p.p_store)
        self.assertAlmostEqual(j["update_shown"], shown, places=7)
        self.assertAlmostEqual(j["update_read_error"], err, places=7)
        self.assertAlmostEqual(j["eta_changed"], eta2, places=7)
        self.assertEqual(j["delete_entries"], p.per_item)
        for phrase in ("What the server sees", "What it cannot conclude",
                       "What it can conclude", "%.2f nats per bit" % j["eta_D"],
                       "%.0f%% of them" % (100 * shown)):
            self.assertIn(phrase, text)
        # the chances of telling apart are (1 + TV) / 2, TV the profile at
        # eps = 0: random_lsh's mixture is 0 at delta just above TV and
        # positive just below (one entry: kappa bits; a query: M kappa)
        p = mess.Params(128, shards=4, per_item=2)
        text, j = A.summary(p, angle=0.005)
        for key, flip, bits in (("item_entry_tv", p.p_store, p.kappa),
                                ("item_tv", p.p_store, p.per_item * p.kappa),
                                ("query_tv", j["p_query"], p.shards * p.kappa)):
            tv = j[key]
            self.assertTrue(0 < tv < 1, key)
            self.assertEqual(A.random_lsh(flip, bits, 0.005, tv * (1 + 1e-6))[0], 0.0)
            self.assertGreater(A.random_lsh(flip, bits, 0.005, tv * (1 - 1e-6))[0], 0.0)

    def test_correctness_model(self):
        pp = A.compound_flip(0.08, 0.12)
        self.assertAlmostEqual(pp, 0.08 * 0.88 + 0.12 * 0.92, places=12)
        self.assertAlmostEqual(A.overtake(128, pp, 20, 20), 0.5, places=12)
        self.assertLess(A.overtake(128, pp, 10, 40), 0.01)
        count = np.zeros(129)
        count[30], count[40] = 100, 1000
        mean, var = A.rank(128, pp, 20, count, 0.25)
        self.assertGreaterEqual(mean, 1.0)
        self.assertTrue(0 <= A.hit(mean, var, 50) <= 1)
        self.assertAlmostEqual(A.recovery([0.5, 0.2]), 1 - 0.5 * 0.8, places=12)
        h, t = [0.5, 0.2, 0.9, 0.3], 2
        subsets = list(itertools.combinations(h, t))
        want = np.mean([1 - np.prod([1 - x for x in s]) for s in subsets])
        self.assertAlmostEqual(A.recovery_uniform(h, t), want, places=12)
        with self.assertRaises(ValueError):
            A.rank(128, pp, 20, count[:10], 0.25)

    def test_plan_recall_on_sift(self):
        base = mess.read_f32(os.path.join(SIFT, "base.bvecs"))[:800].copy()
        train = mess.read_f32(os.path.join(SIFT, "learn.bvecs"))
        queries = mess.read_f32(os.path.join(SIFT, "query.bvecs"))[:10].copy()
        p = mess.Params(128, shards=4, per_item=2, train_sample=1000)
        with mess.Client(p, train, seed=bytes(32)) as c:
            r = A.plan_recall(c, base, queries, [8, 40, 200, 800])
        self.assertTrue(np.all((r >= 0) & (r <= 1)))
        self.assertTrue(np.all(np.diff(r) >= -1e-12))
        self.assertGreater(r[-1], 0.9)  # a pool of the whole shard finds everything


class TestAvailability(unittest.TestCase):
    def test_missing_symbols_raise_clearly(self):
        if A.available():
            self.assertIsInstance(A.eta(0.25), float)
        else:
            with self.assertRaises(NotImplementedError):
                A.eta(0.25)


if __name__ == "__main__":
    unittest.main()
