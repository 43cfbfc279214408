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
  - xi_link mixes the reference shard exactly (worlds.mixed_logw): checked
    against hand-computed mixtures, on random recoveries (never below
    xi_single), and on the case that broke the sampled estimator (views
    whose reference shards all missed a pair's few far shards: xi_link
    below xi_single, as text 10k pair 2 in the grid);
  - replay (M = 8, t = 4): the majority vote over 26 versions of a
    re-inserted item stays within 4 sigma of p_D (issue 12 item 1: it was
    0.000 before storage coins became a PRF of (shard, id)), and the vote
    over 15 requests of a query by a client reloaded before each (a retry
    after a failure) within 4 sigma of p_PRR (issue 12 item 2: 0.000 before
    the permanent report became a PRF of the query);
  - the calibration's shortcuts (view-by-view, kept seed distances, GSGM
    over its columns and all hop counts in one pass, one MDS eigen-
    decomposition per shard, Joint's cycle step from the rows it compares)
    give the plain computations' numbers (up to float32 rounding) and
    choices;
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


def sampled_reference():
    """run.py's xi_link mixes the reference shard over all shards instead
    of using the few drawn in the held-out views.  The case of text 10k
    pair 2 (largest xi_link 24.6 against xi_single 28.6 with the drawn
    reference shards): a pair whose distance sits in a few shards, 8 views
    that recovered nothing and whose reference shards all missed those few;
    the attacker still holds one uniformly random entry, so xi_link must be
    at least xi_single, interval included."""
    M, t = 64, 16
    d = np.full(M, 8, np.int64)
    d[[5, 17, 40, 63]] = 30
    views = 8
    res = {m: {"U": [8] * views, "correct": [0] * views, "wrong": [0.5] * views,
               "C": [[] for _ in range(views)]} for m in A.METHODS}
    a = types.SimpleNamespace(p_store=0.08, delta=0.01, no_ci=False)
    p = types.SimpleNamespace(per_item=t)
    rows, _ = R.pair_rows(a, p, 5000, 0, 1, 2, 0.05, d, {}, res, [8] * views,
                          [8 * t] * views, ci=True, quiet=True)
    r = rows[0]
    check(r["xi_single"] <= r["xi_link"] <= r["xi_complete"]
          and r.get("xi_link_ci", [0])[0] >= r["xi_single"],
          "reference shards drawn away from the far shards: xi_single %.2f <= xi_link %.2f "
          "(interval %s) <= xi_complete %.2f"
          % (r["xi_single"], r["xi_link"], r.get("xi_link_ci"), r["xi_complete"]))


def mixing():
    """worlds.mixed_logw against hand-computed mixtures, and the ordering
    on random recoveries."""
    d = np.array([1, 2, 3, 10])
    w = np.exp(W.mixed_logw(d, [[3]]))          # r uniform over shards 0-2
    want = np.zeros(14)
    want[[11, 12, 13]] = 1 / 3
    check(np.allclose(w, want), "one view, shard 3 recovered: U uniform on 11, 12, 13")
    w = np.exp(W.mixed_logw(d, [[], 10]))     # a list view and a sums view
    want = np.zeros(21)
    want[[1, 2, 3, 10]] += 1 / 8
    want[[11, 12, 13, 20]] += 1 / 8
    check(np.allclose(w, want), "two views (none recovered; a sum of 10): the 1-of-4 "
          "mixture and its shift by 10, half each")
    rng = np.random.default_rng(9)
    bad = 0
    for k in range(40):
        d = rng.integers(0, 25, 64)
        xs = W.xi_single(0.08, d, 0.01)
        views = []
        for _ in range(int(rng.integers(1, 9))):
            route = rng.choice(64, 16, replace=False)
            views.append(sorted(route[1:1 + int(rng.integers(0, 4))].tolist()))
        xl = W.xi_link_mixed(0.08, d, views, 0.01)
        lo, _ = W.bootstrap_ci_mixed(0.08, d, views, 0.01, reps=20)
        bad += not (xl >= xs - 1e-9 and lo >= xs - 1e-9)
    check(bad == 0, "40 random pairs and recoveries: xi_link and its interval's lower end "
          ">= xi_single in all (%d not)" % bad)


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
    keep = R.KEEP_BYTES
    R.KEEP_BYTES = 0          # the seed distances computed again for the Joint pass
    try:
        again = R.calibrate(views, None, ex.p)
    finally:
        R.KEEP_BYTES = keep
    check(again == got, "calibration without kept seed distances %s = with %s" % (again, got))
    shortcuts(views, ex.p.per_item)


def shortcuts(views, t):
    """GSGM over the columns it uses and all hop counts in one pass, and MDS
    from one eigen-decomposition per shard, give the same numbers as the
    plain computations (all columns filtered, one decomposition per call)."""
    diff = sweep = mds = chosen = 0
    worst = 0.0
    for tr in views:
        at = A.Attack(tr["shards"], tr["know"], t)
        swept = at.gsgm_sweep((0, 1, 2, 3))
        for h in (0, 1, 2, 3):
            one = A.Attack(tr["shards"], tr["know"], t, {"gsgm_hops": h})
            sweep += swept[h] != one.run("GSGM")
            for s in range(len(tr["shards"])):
                if s == one.r:
                    continue
                ir, is_ = A.common(one.k, one.r, s)
                c = one.cand[s]
                if len(ir) < 3 or c.size == 0:
                    continue
                plain = A._corr_rows(one.filtered(s, h)[c][:, is_],
                                     one.filtered(one.r, h)[one.v, ir])
                got = one.score_gsgm(s)
                worst = max(worst, float(np.abs(plain - got).max()))
                diff += not np.allclose(plain, got, rtol=1e-5, atol=1e-6)
            full = [None] * len(tr["shards"])
            for s in range(len(tr["shards"])):
                ir, is_ = A.common(one.k, one.r, s)
                c = one.cand[s]
                if s != one.r:
                    full[s] = np.zeros(c.size) if len(ir) < 3 or c.size == 0 else \
                        A._corr_rows(one.filtered(s, h)[c][:, is_],
                                     one.filtered(one.r, h)[one.v, ir])
            chosen += [x[:2] for x in one._select(full)] != \
                [x[:2] for x in one.run("GSGM")]
        for dims in R.GRID["mds_dims"]:
            cached = at.with_cfg({"mds_dims": dims})
            fresh = A.Attack(tr["shards"], tr["know"], t, {"mds_dims": dims})
            for s in range(len(tr["shards"])):
                if s != at.r:
                    mds += not np.array_equal(cached.score_mds(s), fresh.score_mds(s))
    # float32 sums over fewer columns round differently (numpy's reduction
    # blocks): equal to rounding, and the same choices
    check(diff == 0 and chosen == 0, "GSGM over its columns = over all columns filtered "
          "(largest score difference %.1e; %d shard scores differ beyond rounding, %d "
          "choices differ)" % (worst, diff, chosen))
    jdiff = rdiff = 0
    for tr in views:
        for h in (0, 2, 3):
            at = A.Attack(tr["shards"], tr["know"], t, {"gsgm_hops": h, "joint_cycle": 1.0})
            jdiff += [x[:2] for x in at.joint()] != [x[:2] for x in at.joint(full=True)]
            for s in range(len(tr["shards"])):
                nodes = [0, tr["shards"][s].n // 2, tr["shards"][s].n - 1]
                rdiff += not np.allclose(at.filtered_rows(s, h, nodes),
                                         at.filtered(s, h)[nodes], rtol=1e-4, atol=1e-5)
    check(jdiff == 0 and rdiff == 0, "Joint's cycle step from the compared rows only = "
          "from every row filtered (%d choices, %d shards' rows differ)" % (jdiff, rdiff))
    check(sweep == 0, "GSGM's one-pass sweep over hops 0-3 = one run per hop count "
          "(%d differ)" % sweep)
    check(mds == 0, "MDS with the shared eigen-decompositions = computed per call "
          "(%d shard scores differ)" % mds)


def main():
    options()
    sampled_reference()
    mixing()
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
