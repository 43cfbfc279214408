#!/usr/bin/python3
"""Builds real SIFT datasets (TEXMEX format) from photos that Debian ships.

    /usr/bin/python3 datasets/make_sift.py            # bundled set -> datasets/sift/
    /usr/bin/python3 datasets/make_sift.py --large    # large set   -> datasets/large/

Every photo is assigned to exactly one role (base, query or learn) by a keyed
hash of its file name, so queries never come from an image whose other
descriptors are in the base (the TEXMEX SIFT protocol; held-out descriptors of
the base's own images have near-twins there and make every method look
perfect).  Descriptors are OpenCV's 128-d SIFT, rounded to uint8 as in
TEXMEX; each image contributes at most --per-image descriptors (the strongest
keypoints) and exact duplicates are dropped.  The output is deterministic:
sorted inputs, fixed parameters, a fixed shuffle seed.

Files written: base.bvecs, query.bvecs, learn.bvecs, groundtruth.ivecs (exact
L2 top-100 ids of base per query, ties broken by the smaller id).
"""
import argparse
import glob
import hashlib
import os
import sys
import time

import numpy as np

try:
    import cv2
except ImportError:  # pragma: no cover - reported to the user
    sys.exit("make_sift.py needs OpenCV: apt-get install python3-opencv")

EXTS = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp", ".webp")
SEED = 20261122


def source_dirs(large):
    dirs = ["/usr/share/doc/opencv-doc/examples"]
    try:
        import skimage
        dirs.append(os.path.join(os.path.dirname(skimage.__file__), "data"))
    except ImportError:
        pass
    if large:
        dirs += ["/usr/share/backgrounds", "/usr/share/wallpapers",
                 "/usr/share/desktop-base", "/usr/share/images/desktop-base"]
    return [d for d in dirs if os.path.isdir(d)]


def list_images(large):
    paths = []
    for d in source_dirs(large):
        for p in glob.glob(os.path.join(d, "**", "*"), recursive=True):
            if p.lower().endswith(EXTS) and os.path.isfile(p) and not os.path.islink(p):
                paths.append(os.path.realpath(p))
    return sorted(set(paths))


def role_of(path):
    """query 10%, learn 10%, base 80% of the images, by file content name."""
    h = hashlib.blake2b(os.path.basename(path).encode() + b"|" +
                        str(os.path.getsize(path)).encode(), digest_size=8)
    bucket = int.from_bytes(h.digest(), "little") % 10
    return "query" if bucket == 0 else "learn" if bucket == 1 else "base"


def descriptors(path, per_image, max_side):
    img = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    if img is None or min(img.shape) < 32:
        return None
    scale = max_side / max(img.shape)
    if scale < 1.0:
        img = cv2.resize(img, (int(round(img.shape[1] * scale)),
                               int(round(img.shape[0] * scale))),
                         interpolation=cv2.INTER_AREA)
    sift = cv2.SIFT_create()
    kps, desc = sift.detectAndCompute(img, None)
    if desc is None or len(kps) == 0:
        return None
    order = sorted(range(len(kps)),
                   key=lambda i: (-kps[i].response, kps[i].pt[1], kps[i].pt[0], i))
    desc = desc[order[:per_image]]
    return np.clip(np.rint(desc), 0, 255).astype(np.uint8)


def dedupe(x):
    _, idx = np.unique(x, axis=0, return_index=True)
    return x[np.sort(idx)]


def write_vecs(path, x, dtype):
    x = np.ascontiguousarray(x, dtype=dtype)
    n, d = x.shape
    rec = np.empty((n, 4 + d * x.itemsize), dtype=np.uint8)
    rec[:, :4] = np.frombuffer(np.int32(d).tobytes(), dtype=np.uint8)
    rec[:, 4:] = x.view(np.uint8).reshape(n, -1)
    tmp = path + ".tmp"
    rec.tofile(tmp)
    os.replace(tmp, path)


def ground_truth(base, query, k):
    """Exact L2 top-k on the integer vectors; ties by smaller id."""
    # float64 BLAS products of uint8 vectors are exact integers (< 2^53), and
    # orders of magnitude faster than numpy's integer matmul.
    b = base.astype(np.float64)
    bn = (b * b).sum(1).astype(np.int64)
    out = np.empty((len(query), k), dtype=np.int32)
    ids = np.arange(len(base), dtype=np.int64)
    shift = int(len(base)).bit_length()
    for s in range(0, len(query), 256):
        q = query[s:s + 256].astype(np.float64)
        qb = np.rint(q @ b.T).astype(np.int64)
        d = bn[None, :] - 2 * qb + (q * q).sum(1).astype(np.int64)[:, None]
        key = (d << shift) | ids[None, :]
        part = np.argpartition(key, k - 1, axis=1)[:, :k]
        pk = np.take_along_axis(key, part, 1)
        out[s:s + 256] = np.take_along_axis(part, np.argsort(pk, axis=1), 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", action="store_true", help="build the large set")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--per-image", type=int, help="descriptor cap per image")
    ap.add_argument("--max-side", type=int, default=2048, help="resize larger photos")
    ap.add_argument("--base", type=int, help="base descriptors (default: all / 10000)")
    ap.add_argument("--queries", type=int, help="query descriptors")
    ap.add_argument("--learn", type=int, help="learn descriptors")
    a = ap.parse_args()
    large = a.large
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "large" if large else "sift")
    per_image = a.per_image or (4000 if large else 600)
    n_base = a.base or (0 if large else 10000)
    n_query = a.queries or (10000 if large else 200)
    n_learn = a.learn or (50000 if large else 5000)
    # sizes given on the command line are requirements; the large set's
    # default learn size is only a cap (the learn images give ~20k)
    required = {"base": a.base is not None or not large,
                "query": True,
                "learn": a.learn is not None or not large}

    t0 = time.time()
    paths = list_images(large)
    groups = {"base": [], "query": [], "learn": []}
    counts = {"base": 0, "query": 0, "learn": 0}
    for i, p in enumerate(paths):
        d = descriptors(p, per_image, a.max_side)
        if d is None:
            continue
        r = role_of(p)
        groups[r].append(d)
        counts[r] += 1
        if sys.stderr.isatty():
            print(f"\r{i + 1}/{len(paths)} images", end="", file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    rng = np.random.default_rng(SEED)
    sets = {}
    for r, want in (("base", n_base), ("query", n_query), ("learn", n_learn)):
        x = dedupe(np.concatenate(groups[r])) if groups[r] else np.zeros((0, 128), np.uint8)
        x = x[rng.permutation(len(x))]
        if want and len(x) < want and required[r]:
            sys.exit(f"only {len(x)} {r} descriptors available, {want} wanted")
        sets[r] = x[:want] if want else x
    # a descriptor present in two roles would be a near-twin: drop it from
    # query and learn
    base_keys = {row.tobytes() for row in sets["base"]}
    for r in ("query", "learn"):
        keep = [i for i, row in enumerate(sets[r]) if row.tobytes() not in base_keys]
        sets[r] = sets[r][keep]
    t1 = time.time()
    gt = ground_truth(sets["base"], sets["query"], 100)
    t2 = time.time()
    os.makedirs(out, exist_ok=True)
    write_vecs(os.path.join(out, "base.bvecs"), sets["base"], np.uint8)
    write_vecs(os.path.join(out, "query.bvecs"), sets["query"], np.uint8)
    write_vecs(os.path.join(out, "learn.bvecs"), sets["learn"], np.uint8)
    write_vecs(os.path.join(out, "groundtruth.ivecs"), gt, np.int32)
    print(f"images: {len(paths)} (base {counts['base']}, query {counts['query']}, "
          f"learn {counts['learn']}); descriptors: base {len(sets['base'])}, "
          f"query {len(sets['query'])}, learn {len(sets['learn'])}; "
          f"descriptors {t1 - t0:.1f} s, ground truth {t2 - t1:.1f} s -> {out}")


if __name__ == "__main__":
    main()
