#!/usr/bin/python3
"""selftest.py - a fast check of the cross-shard attack (tests/py_leakage.sh).

Small configuration (M = 8, t = 4, kappa = 128, a 1,000-vector prefix of the
bundled SIFT set, 20% seeds), one real pair at d_theta <= 0.05:
  - p_D = 0 and perfect seeds (every background correspondence known):
    every procedure must associate every entry (accuracy 1; the target is
    the only node of each of its shards that no seed explains), so the
    chain from server view to choice to score is sound end to end (it
    scored 0 before a shard with a single candidate could be chosen);
  - p_D = 0 (codes unperturbed) and 90% of background correspondences as
    seeds: the best procedure must associate most of the target's entries
    (accuracy >= 0.3; about 0.54 today; a random choice scores about 0.01), so an attack that
    stopped working cannot pass for a strong defence;
  - p_D = 0.5 (codes are noise): every procedure must fall to chance
    (accuracy <= 0.1), so the scoring does not leak ground truth;
  - p_D = 0.08: xi_single <= xi_link <= xi_complete for every procedure;
  - replay (M = 8, t = 4): the majority vote over 26 versions of a
    re-inserted item stays within 4 sigma of p_D (issue 12 item 1: it was
    0.000 before storage coins became a PRF of (shard, id)), and the vote
    over 15 requests of a query by a client reloaded before each (a retry
    after a failure) within 4 sigma of p_PRR (issue 12 item 2: 0.000 before
    the permanent report became a PRF of the query);
  - run.py's options: --metric cos starts from the cosine defaults (kappa
    64, p_D = p_q = 0.016), l2 from the paper's (128, 0.08), given flags
    override them, the saved client's name carries them, and a set of
    .fvecs files (the text sets) is found.
Last line: "N passed, N failed".
"""
import os
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from common import mess  # noqa: E402
import attack as A  # noqa: E402
import run as R  # noqa: E402
import replay as RP  # noqa: E402
import worlds as W  # noqa: E402

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - " + what)


def options():
    """run.py's parameter flags (no library work beyond mess.Params)."""
    cases = ((["--metric", "cos"], 512, (2, 64, 0.016, 0.016)),
             ([], 128, (0, 128, 0.08, 0.08)),
             (["--metric", "cos", "--bits", "128", "--p-store", "0.08", "--p-query", "0.08"],
              512, (2, 128, 0.08, 0.08)))
    for argv, dim, (metric, kappa, pd, pq) in cases:
        a = R.parse(argv)
        p = R.params(a, dim)
        got = (int(p.metric), int(p.kappa), float(p.p_store), float(p.p_query))
        check(got[:2] == (metric, kappa) and abs(got[2] - pd) < 1e-9
              and abs(got[3] - pq) < 1e-9 and (a.bits, a.p_store) == (kappa, p.p_store)
              and abs(a.p_query - pq) < 1e-9,
              "run.py %s: metric, kappa, p_D, p_q = %s (want %s)"
              % (" ".join(argv) or "(defaults)", got, (metric, kappa, pd, pq)))
    names = set()
    for argv in (["--metric", "cos"], ["--metric", "cos", "--p-store", "0.08"],
                 ["--metric", "cos", "--bits", "128"], ["--metric", "l2"]):
        for ds in ("/x/sift", "/x/debian"):
            a = R.parse(argv)
            R.params(a, 512)
            names.add(R.client_path(a, ds, "/c"))
    check(len(names) == 8, "run.py: 8 settings, %d saved-client names" % len(names))
    tmp = tempfile.mkdtemp(prefix="leakvecs-")
    try:
        path = os.path.join(tmp, "learn.fvecs")
        open(path, "wb").close()
        check(R.vecs_path(tmp, "learn") == path, "run.py finds learn.fvecs")
        try:
            R.vecs_path(tmp, "base")
            check(False, "run.py refuses a set without base.{bvecs,fvecs}")
        except SystemExit as e:
            check("base.bvecs" in str(e), "run.py refuses a set without base: %s" % e)
    finally:
        os.unlink(path)
        os.rmdir(tmp)


def naive_calibrate(views, t):
    """run.calibrate's choice, computed the plain way: a fresh Attack for
    every grid value, parameters chosen one after the other."""
    cfg = {k: v[0] for k, v in R.GRID.items()}
    for key in ("mds_dims", "gsgm_hops", "joint_cycle"):
        best, best_val = None, -1
        for val in R.GRID[key]:
            c = dict(cfg, **{key: val})
            tot = 0
            for tr in views:
                chosen = A.Attack(tr["shards"], tr["know"], t, c).run(R.OWNER[key])
                truth = dict(tr["truth"])
                tot += sum(truth.get(s) == node for s, node, _ in chosen)
            if tot > best_val:
                best, best_val = val, tot
        cfg[key] = best
    return cfg


def helpers(base, ex, pair):
    """The shortcuts of the grid run agree with the plain computations:
    packed Hamming distances, near pairs from a longer prefix's scan, and
    the view-by-view calibration."""
    rng = np.random.default_rng(3)
    for words in (1, 2, 4):
        a = rng.integers(0, 2 ** 63, (37, words), dtype=np.uint64) * np.uint64(2) + \
            rng.integers(0, 2, (37, words), dtype=np.uint64)
        b = a[rng.choice(37, 11, replace=False)] ^ rng.integers(0, 2 ** 63, (11, words),
                                                                 dtype=np.uint64)
        bits = lambda x: np.unpackbits(x.view(np.uint8), axis=1, bitorder="little")
        want = A.hamming(bits(a), bits(b))
        got = A.hamming_packed(a, b, chunk=64)
        check(np.array_equal(got.astype(np.float32), want),
              "packed Hamming distances equal the bit-matrix ones (%d bits)" % (64 * words))
    cands = W.near_candidates(base, 0.05)
    for n in (400, 700):
        direct = [(i, j) for _, i, j in W.near_pairs(base[:n], 0.05, 5)]
        via = [(i, j) for _, i, j in W.near_pairs(base[:n], 0.05, 5, cands=cands)]
        check(direct == via and len(direct) > 0,
              "prefix %d: near pairs from the %d-prefix scan %s = direct %s"
              % (n, len(base), via, direct))
    x0, x1, bg = pair
    rng = np.random.default_rng(5)
    views = [ex.trial((x0, x1), b, 900 + k, 0.9, rng, background=bg)
             for k in range(2) for b in (0, 1)]
    got = R.calibrate(views, None, ex.p)
    want = naive_calibrate(views, ex.p.per_item)
    check(got == want, "view-by-view calibration %s = the plain one %s" % (got, want))


def main():
    options()
    data = os.path.join(HERE, "..", "..", "datasets", "sift")
    base = mess.read_f32(os.path.join(data, "base.bvecs"))[:1000]
    train = mess.read_f32(os.path.join(data, "learn.bvecs"))[:2000]
    pairs = W.near_pairs(base, 0.05, 1)
    check(len(pairs) == 1, "a real pair at d_theta <= 0.05 in the prefix")
    if not pairs:
        return
    dth, i, j = pairs[0]
    tmp = tempfile.mkdtemp(prefix="leak-")
    results = {}
    # (p_D, seed fraction, held-out trials per world)
    for p_store, frac, trials in ((0.0, 1.0, 2), (0.0, 0.9, 4), (0.5, 0.2, 3),
                                  (0.08, 0.2, 6)):
        p = mess.Params(base.shape[1], shards=8, per_item=4, p_store=p_store,
                        train_sample=2000)
        a = types.SimpleNamespace(seed=11, seed_frac=frac, calib=0, trials=trials,
                                  delta=0.01, p_store=p_store, no_ci=True)
        ex = W.Experiment(p, train, base, os.path.join(tmp, "c%g.bin" % p_store),
                          threads=1)
        rows, _ = R.evaluate_pair(ex, a, len(base), 0, base, i, j, dth)
        if p_store == 0.08:
            helpers(base, ex, (base[i], base[j], np.delete(base, [i, j], axis=0)))
        results[(p_store, frac)] = {r["method"]: r for r in rows}
        ex.client.close()
    for m in A.METHODS:
        acc = results[(0.0, 1.0)][m]["accuracy"]
        check(acc >= 0.999, "p_D = 0, perfect seeds: %s accuracy %.3f = 1" % (m, acc))
    easy = results[(0.0, 0.9)]
    best = max(r["accuracy"] for r in easy.values())
    check(best >= 0.3, "p_D = 0: best association accuracy %.3f >= 0.3" % best)
    for m in A.METHODS:
        acc = results[(0.5, 0.2)][m]["accuracy"]
        check(acc <= 0.1, "p_D = 0.5: %s accuracy %.3f at chance (<= 0.1)" % (m, acc))
    for m in A.METHODS:
        r = results[(0.08, 0.2)][m]
        check(r["xi_single"] <= r["xi_link"] <= r["xi_complete"],
              "p_D = 0.08: %s xi_single %.2f <= xi_link %.2f <= xi_complete %.2f"
              % (m, r["xi_single"], r["xi_link"], r["xi_complete"]))
    for r in RP.run(data, items=2, insert_repeats=25, nqueries=2, query_repeats=15,
                    shards=8, per_item=4, train_rows=2000, log=print):
        if r["case"] == "repeat":
            continue  # the reference (one client in memory), not a regression
        check(r["within_4_sigma"], "replay %s: majority-vote bit error %.4f within 4 sigma "
              "(%.4f) of %.4f over %d repeats" % (r["case"], r["majority"], 4 * r["sigma"],
                                                 r["expected"], r["repeats"]))
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash is a failure with a summary line
        import traceback
        traceback.print_exc()
        failed += 1
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
