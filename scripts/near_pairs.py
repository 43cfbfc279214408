#!/usr/bin/python3
"""near_pairs.py DATA OUT.fvecs [--angle A] [--count N] [--limit L]

Writes challenge pairs for `mess account report`: real pairs (x0, x1) of
DATA (.fvecs or .bvecs) whose normalised angle d_theta = angle / pi is at
most A (0.05, the paper's radius, Appendix A.2), as consecutive rows of
OUT.  Picks the N (5) pairs closest to the radius from below, each vector
used once, among the first L (10000) vectors.  Prints one line per pair and
a JSON summary as the last line.
"""
import argparse
import json
import sys

import numpy as np


def read_vecs(path):
    raw = np.fromfile(path, dtype=np.uint8)
    dim = int(raw[:4].view(np.int32)[0])
    if path.endswith(".bvecs"):
        rec = raw.reshape(-1, 4 + dim)
        return rec[:, 4:].astype(np.float32)
    rec = raw.view(np.int32).reshape(-1, 1 + dim)
    return rec[:, 1:].view(np.float32).copy()


def write_fvecs(path, x):
    n, dim = x.shape
    out = np.empty((n, dim + 1), dtype=np.int32)
    out[:, 0] = dim
    out[:, 1:] = x.astype(np.float32).view(np.int32)
    out.tofile(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--angle", type=float, default=0.05)
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("--limit", type=int, default=10000)
    a = ap.parse_args()
    x = read_vecs(a.data)[: a.limit].astype(np.float64)
    norms = np.linalg.norm(x, axis=1)
    ok = norms > 0
    idx = np.nonzero(ok)[0]
    u = x[idx] / norms[idx, None]
    cands = []
    block = 2048
    for s in range(0, len(u), block):
        c = np.clip(u[s : s + block] @ u.T, -1.0, 1.0)
        dth = np.arccos(c) / np.pi
        for i in range(c.shape[0]):
            dth[i, : s + i + 1] = np.inf  # each unordered pair once, no self
        r, q = np.nonzero((dth <= a.angle) & (dth > 0))
        cands.extend(zip(dth[r, q], idx[s + r], idx[q]))
    cands.sort(key=lambda t: -t[0])  # closest to the radius first
    used, pairs = set(), []
    for d, i, j in cands:
        if i in used or j in used:
            continue
        used.update((i, j))
        pairs.append((float(d), int(i), int(j)))
        if len(pairs) == a.count:
            break
    if not pairs:
        print("no pair within d_theta <= %g" % a.angle, file=sys.stderr)
        return 1
    rows = np.array([x[k] for _, i, j in pairs for k in (i, j)])
    write_fvecs(a.out, rows)
    for d, i, j in pairs:
        print("pair %d %d d_theta %.5f" % (i, j, d))
    print(json.dumps({"pairs": len(pairs), "candidates": len(cands), "angle": a.angle,
                      "d_theta": [round(p[0], 6) for p in pairs]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
