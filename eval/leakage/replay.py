#!/usr/bin/python3
"""replay.py - replay attacks through the server view (issue 12 items 1, 2;
docs/LEAKAGE.md "Replays").

Majority voting over what a server sees more than once of the same data:

  reinsert  an item deleted and inserted again R times with the same vector
            (an upsert, a periodic re-index): the server collects the
            item's perturbed code in each of its shards once per version and
            votes per bit.  The attacker is granted the linkage of the
            versions (the nodes each one-item upload adds).  With storage
            coins fixed per (shard, id) every version is the same report and
            the vote's bit error stays at p_D; with fresh coins per insert
            it falls towards 0.
  retry     a query sent R times by a client that is reloaded from its file
            before each try (a `mess query` that failed after sending its
            request: a production client is never rewritten by a query):
            the server votes per bit over the R requests' codes.  With the
            permanent report a PRF of the query (D3), the vote converges to
            that report (bit error p_PRR); a fresh permanent report per try
            (c16ecae, whose memo was lost with the failed run) lets it
            converge to the clean code (bit error 0).
  repeat    the same query R times from one client in memory: the
            reference, bit error -> p_PRR.

Production-mode clients (OS coins).  The request's codes are its last
M * kappa / 8 bytes (wire.c).  Prints one line per case and, last, one JSON
object {"replay": [{"case", "repeats", "bits", "single", "majority",
"expected", "sigma"}, ...]}; --out DIR writes DIR/replay.md and replay.json.
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import numpy as np  # noqa: E402

from common import mess  # noqa: E402


def bits_of(codes_u64):
    a = np.ascontiguousarray(codes_u64)
    return np.unpackbits(a.view(np.uint8).reshape(a.shape[0], -1), axis=1,
                         bitorder="little")


def majority(stack):
    """stack (R, ...) of 0/1: per-position majority (ties count as errors'
    half: broken towards 1 on even R, which is symmetric in expectation)."""
    return (2 * stack.sum(0) >= stack.shape[0]).astype(np.uint8)


def reinsert(c, p, vecs, repeats, first_id=1000):
    """Returns (single-report bit error, majority bit error, bits)."""
    s = mess.Server(p)
    single, vote, nbits = 0, 0, 0
    try:
        for k, x in enumerate(vecs):
            iid = first_id + k
            clean = bits_of(c.codes(x))                    # (M, kappa)
            versions = []                                  # per version: {shard: bits}
            for r in range(repeats + 1):
                if r:
                    with c.delete([iid]) as d:
                        s.apply_delete(d)
                before = [v.nodes for v in s.shards()]
                c.insert(s, [iid], x[None, :])
                got = {}
                for j, v in enumerate(s.shards()):
                    if v.nodes > before[j]:
                        got[j] = bits_of(v.codes()[before[j]:before[j] + 1])[0]
                versions.append(got)
            shards = sorted(versions[0])
            for j in shards:
                st = np.stack([ver[j] for ver in versions if j in ver])
                single += int((st[0] != clean[j]).sum())
                vote += int((majority(st) != clean[j]).sum())
                nbits += clean.shape[1]
    finally:
        s.close()
    return single / nbits, vote / nbits, nbits


def request_codes(p, req):
    raw = np.frombuffer(bytes(req), dtype=np.uint8)
    nb = p.shards * p.kappa // 8
    return np.unpackbits(raw[-nb:].reshape(p.shards, p.kappa // 8), axis=1,
                         bitorder="little")


def queries(c, p, path, qs, repeats, reload):
    """Majority over `repeats` requests of each query; reload: load the
    client from `path` before each request (nothing saved)."""
    single, vote, nbits = 0, 0, 0
    for q in qs:
        clean = bits_of(c.codes(q))
        stack = []
        cl = None if reload else mess.Client.load(path)
        for _ in range(repeats):
            cc = mess.Client.load(path) if reload else cl
            qs_, req = cc.request(q, 100)
            with qs_, req:
                stack.append(request_codes(p, req))
            if reload:
                cc.close()
        if cl is not None:
            cl.close()
        st = np.stack(stack)
        frac = float((st[0] != clean).mean())
        if frac > 0.3:
            raise RuntimeError("request codes not found at the buffer's end "
                               "(bit error %.2f against the clean code)" % frac)
        single += int((st[0] != clean).sum())
        vote += int((majority(st) != clean).sum())
        nbits += clean.size
    return single / nbits, vote / nbits, nbits


def vecs(data, stem):
    """DIR/stem.bvecs (SIFT sets) or, failing that, DIR/stem.fvecs (text)."""
    path = os.path.join(data, stem + ".bvecs")
    return mess.read_f32(path if os.path.exists(path) else path[:-5] + "fvecs")


def run(data, items=8, insert_repeats=25, nqueries=4, query_repeats=41, shards=64,
        per_item=16, train_rows=5000, log=print, metric="l2"):
    base = vecs(data, "base")
    train = vecs(data, "learn")[:train_rows]
    qv = vecs(data, "query")
    # the metric's defaults (l2: the paper's kappa 128, p_D = p_q = 0.08;
    # ip/cos: 64 and 0.016)
    p = mess.Params(base.shape[1], metric=metric, shards=shards, per_item=per_item,
                    train_sample=train_rows)
    rows = []
    tmp = tempfile.mkdtemp(prefix="replay-")
    path = os.path.join(tmp, "client.bin")
    try:
        with mess.Client(p, train, seed=None, threads=2) as c:
            c.save(path)
            sd, mj, nb = reinsert(c, p, base[:items], insert_repeats)
            rows.append(dict(case="reinsert", repeats=insert_repeats + 1, bits=nb,
                             single=sd, majority=mj, expected=p.p_store))
            a = p.p_prr
            for case, reload in (("retry", True), ("repeat", False)):
                sd, mj, nb = queries(c, p, path, qv[:nqueries], query_repeats, reload)
                rows.append(dict(case=case, repeats=query_repeats, bits=nb, single=sd,
                                 majority=mj, expected=a))
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    for r in rows:
        e = r["expected"]
        r["sigma"] = float(np.sqrt(e * (1 - e) / r["bits"]))
        r["within_4_sigma"] = abs(r["majority"] - e) <= 4 * r["sigma"]
        log("%-8s R=%-3d bits %6d  single %.4f  majority %.4f  (no-gain value %.4f, "
            "4 sigma %.4f)" % (r["case"], r["repeats"], r["bits"], r["single"],
                               r["majority"], e, 4 * r["sigma"]))
    return rows


def table(rows):
    out = ["| case | repeats | bits | single-report bit error | majority-vote bit error "
           "| value if the vote gains nothing | within 4 sigma |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %d | %d | %.4f | %.4f | %.4f | %s |"
                   % (r["case"], r["repeats"], r["bits"], r["single"], r["majority"],
                      r["expected"], "yes" if r["within_4_sigma"] else "**no**"))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "datasets", "sift"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--queries", type=int, default=4)
    ap.add_argument("--metric", default="l2", help="l2, ip or cos (that metric's defaults)")
    a = ap.parse_args()
    rows = run(a.data, items=a.items, nqueries=a.queries, metric=a.metric,
               log=lambda m: print(m, file=sys.stderr))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "replay.json"), "w") as f:
            json.dump(rows, f, indent=1)
        with open(os.path.join(a.out, "replay.md"), "w") as f:
            f.write("<!-- generated by eval/leakage/replay.py (library %s) -->\n\n"
                    % mess.version() + table(rows))
    print(json.dumps({"replay": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
