#!/usr/bin/python3
"""Builds real SIFT datasets (TEXMEX format) from photos that Debian ships.

    /usr/bin/python3 datasets/make_sift.py            # bundled set -> datasets/sift/
    /usr/bin/python3 datasets/make_sift.py --large    # large set   -> datasets/large/
    /usr/bin/python3 datasets/make_sift.py --1m       # 1M set      -> datasets/1m/

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

--1m adds the images of opencv-doc's HTML manual, reads photos at native
resolution, caches each image's descriptors (--cache) so a rerun or an
interrupted run does not recompute them, and assigns roles to groups of
pictures rather than files: one wallpaper's renderings (sizes, aspect ratios,
light/dark variants, a theme's pieces) and images that look alike (a 64-bit
difference hash within --near Hamming distance) share a role.
"""
import argparse
import glob
import hashlib
import multiprocessing
import os
import re
import sys
import time

import numpy as np

try:
    import cv2
except ImportError:  # pragma: no cover - reported to the user
    sys.exit("make_sift.py needs OpenCV: apt-get install python3-opencv")

EXTS = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp", ".webp")
SEED = 20261122
PER_IMAGE_1M = 12000


OPENCV_HTML = "/usr/share/doc/opencv-doc/opencv4/html"


def source_dirs(large, html=False):
    dirs = ["/usr/share/doc/opencv-doc/examples"]
    try:
        import skimage
        dirs.append(os.path.join(os.path.dirname(skimage.__file__), "data"))
    except ImportError:
        pass
    if large:
        dirs += ["/usr/share/backgrounds", "/usr/share/wallpapers",
                 "/usr/share/desktop-base", "/usr/share/images/desktop-base"]
    if html:
        dirs.append(OPENCV_HTML)
    return [d for d in dirs if os.path.isdir(d)]


def list_images(large, html=False):
    paths = []
    for d in source_dirs(large, html):
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


def family(path):
    """The picture a file renders, for the renderings Debian ships of one
    wallpaper: a Plasma wallpaper's directory (sizes, light/dark), a
    desktop-base theme (wallpaper, login, GRUB at several aspect ratios),
    Sway's sizes and portraits, GNOME's -l/-d pairs, a size in the file
    name (MATE).  None otherwise."""
    m = re.match(r"/usr/share/wallpapers/([^/]+)/", path)
    if m:
        return "wallpapers/" + m.group(1)
    m = re.match(r"/usr/share/desktop-base/([^/]+-theme)/", path)
    if m:
        return "desktop-base/" + m.group(1)
    base = os.path.basename(path)
    if "/backgrounds/sway/" in path:
        return "sway/" + re.sub(r"_\d+x\d+(_Portrait)?(?=\.)", "", base)
    if "/backgrounds/gnome/" in path:
        return "gnome/" + re.sub(r"-[ld](?=\.[a-z]+$)", "", base)
    stem = re.sub(r"_\d+x\d+(?=[._])", "", base)  # MATE's Name_WxH.jpg
    if stem != base:
        return os.path.join(os.path.dirname(path), os.path.splitext(stem)[0])
    return None


def dhash(img):
    """64-bit difference hash: signs of horizontal gradients on 9x8 pixels."""
    small = cv2.resize(img, (9, 8), interpolation=cv2.INTER_AREA).astype(np.int16)
    bits = (small[:, 1:] > small[:, :-1]).ravel()
    return int(np.packbits(bits).view(">u8")[0])


def role_groups(paths, hashes, near):
    """Union of the files of one family, of identical files (same name and
    size, as role_of keys them) and of files whose difference hashes are
    within `near` bits; returns a group key per path (its smallest member's
    role key)."""
    n = len(paths)
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i, j):
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)

    first = {}
    for i, p in enumerate(paths):
        for k in (family(p), (os.path.basename(p), os.path.getsize(p))):
            if k is not None:
                union(i, first.setdefault(k, i))
    h = np.array(hashes, dtype=np.uint64)
    # near-constant images (blank diagrams) hash to runs of zeros/ones and
    # would chain unrelated pictures together: only informative hashes join
    pop = np.array([bin(int(x)).count("1") for x in h])
    ok = (pop >= 8) & (pop <= 56)
    idx = np.flatnonzero(ok)
    for a in range(len(idx)):
        x = h[idx[a]] ^ h[idx[a + 1:]]
        d = np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(1)
        for b in np.flatnonzero(d <= near):
            union(int(idx[a]), int(idx[a + 1 + b]))
    return [find(i) for i in range(n)]


def role_of_key(key):
    h = hashlib.blake2b(key.encode(), digest_size=8)
    bucket = int.from_bytes(h.digest(), "little") % 10
    return "query" if bucket == 0 else "learn" if bucket == 1 else "base"


def sift_sorted(img):
    """Every SIFT descriptor of img, strongest first, rounded to uint8."""
    kps, desc = cv2.SIFT_create().detectAndCompute(img, None)
    if desc is None or len(kps) == 0:
        return np.zeros((0, 128), np.uint8)
    order = sorted(range(len(kps)),
                   key=lambda i: (-kps[i].response, kps[i].pt[1], kps[i].pt[0], i))
    return np.clip(np.rint(desc[order]), 0, 255).astype(np.uint8)


def cached_descriptors(job):
    """(descriptors strongest first, difference hash) of one image, through
    a cache keyed by the file's content, --max-side and OpenCV's version;
    None for an unreadable or tiny image."""
    path, max_side, cache = job
    with open(path, "rb") as f:
        data = f.read()
    key = hashlib.sha256(data + f"|{max_side}|{cv2.__version__}".encode()).hexdigest()
    cpath = os.path.join(cache, key[:2], key + ".npz") if cache else None
    if cpath and os.path.exists(cpath):
        with np.load(cpath) as z:
            if int(z["ok"]):
                return z["desc"], int(z["dhash"])
            return None
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
    ok = img is not None and min(img.shape) >= 32
    desc, dh = np.zeros((0, 128), np.uint8), 0
    if ok:
        dh = dhash(img)
        scale = max_side / max(img.shape)
        if scale < 1.0:
            img = cv2.resize(img, (int(round(img.shape[1] * scale)),
                                   int(round(img.shape[0] * scale))),
                             interpolation=cv2.INTER_AREA)
        desc = sift_sorted(img)
        ok = len(desc) > 0
    if cpath:
        os.makedirs(os.path.dirname(cpath), exist_ok=True)
        tmp = cpath + f".{os.getpid()}.tmp.npz"
        np.savez(tmp, desc=desc, dhash=np.uint64(dh), ok=np.int8(ok))
        os.replace(tmp, cpath)
    return (desc, dh) if ok else None


def _worker_init():
    cv2.setNumThreads(1)


def descriptors(path, per_image, max_side):
    img = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    if img is None or min(img.shape) < 32:
        return None
    scale = max_side / max(img.shape)
    if scale < 1.0:
        img = cv2.resize(img, (int(round(img.shape[1] * scale)),
                               int(round(img.shape[0] * scale))),
                         interpolation=cv2.INTER_AREA)
    desc = sift_sorted(img)[:per_image]
    return desc if len(desc) else None


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
    # float32 BLAS products of uint8 128-d vectors are exact: every partial
    # sum is an integer below 128 * 255^2 < 2^24, so the order in which a
    # BLAS adds them does not matter; |norm(b) - 2 q.b| < 2^24 stays exact.
    # The k-th smallest value is found per row; every id at or below it is
    # sorted by (distance, id), which breaks ties by the smaller id.
    assert base.shape[1] * 255 * 255 < (1 << 24)
    k = min(k, len(base))
    b = np.ascontiguousarray(base, dtype=np.float32)
    bn = np.einsum("ij,ij->i", b, b)
    out = np.empty((len(query), k), dtype=np.int32)
    step = max(1, min(256, (1 << 26) // max(1, len(base))))
    for s in range(0, len(query), step):
        d = query[s:s + step].astype(np.float32) @ b.T
        d *= -2
        d += bn
        kth = np.partition(d, k - 1, axis=1)[:, k - 1]
        for r in range(len(d)):
            cand = np.flatnonzero(d[r] <= kth[r])
            out[s + r] = cand[np.lexsort((cand, d[r, cand]))[:k]]
    return out


def check_ground_truth(base, query, gt, n):
    """Recomputes n evenly spaced queries' top-k by integer arithmetic (no
    BLAS, no floating point, a stable sort) and counts the rows that differ."""
    k = gt.shape[1]
    rows = np.unique(np.linspace(0, len(query) - 1, n).astype(int))
    bad = 0
    for r in rows:
        q = query[r].astype(np.int32)
        dist = np.empty(len(base), np.int64)
        for s in range(0, len(base), 1 << 17):
            diff = base[s:s + (1 << 17)].astype(np.int32) - q
            dist[s:s + len(diff)] = np.einsum("ij,ij->i", diff, diff)
        top = np.argsort(dist, kind="stable")[:k]
        bad += not np.array_equal(top, gt[r])
    return len(rows), bad


def collect_1m(paths, per_image, max_side, cache, jobs, near):
    """Descriptors of every image (cached, `jobs` processes), grouped into
    roles by role_groups; returns (groups, counts, stats)."""
    work = [(p, max_side, cache) for p in paths]
    res = []
    t0 = time.time()
    with multiprocessing.Pool(jobs, initializer=_worker_init) as pool:
        for i, r in enumerate(pool.imap(cached_descriptors, work, chunksize=1)):
            res.append(r)
            if (i + 1) % 100 == 0 or i + 1 == len(work):
                print(f"{i + 1}/{len(work)} images, {time.time() - t0:.0f} s",
                      file=sys.stderr, flush=True)
    kept = [(p, r) for p, r in zip(paths, res) if r is not None]
    # one rendering per picture: the one giving the most descriptors (the
    # largest), ties by path; the others would put near-twins in the base
    best = {}
    for i, (p, (desc, _)) in enumerate(kept):
        f = family(p)
        if f is not None and (f not in best or len(desc) > len(kept[best[f]][1][0])):
            best[f] = i
    n_files = len(kept)
    kept = [(p, r) for i, (p, r) in enumerate(kept)
            if family(p) is None or best[family(p)] == i]
    root = role_groups([p for p, _ in kept], [r[1] for _, r in kept], near)
    groups = {"base": [], "query": [], "learn": []}
    counts = {"base": 0, "query": 0, "learn": 0}
    capped = 0
    total = 0
    for (p, (desc, _)), g in zip(kept, root):
        gp = kept[g][0]
        r = role_of_key(os.path.basename(gp) + "|" + str(os.path.getsize(gp)))
        groups[r].append(desc[:per_image])
        counts[r] += 1
        capped += len(desc) > per_image
        total += len(desc)
    stats = (f"{n_files} images gave descriptors, {len(kept)} after one rendering "
             f"per picture ({total} descriptors, {capped} images capped at "
             f"{per_image}), {len(set(root))} role groups")
    return groups, counts, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", action="store_true", help="build the large set")
    ap.add_argument("--1m", dest="one_m", action="store_true",
                    help="build the 1M set (opencv-doc HTML images too, native size)")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--per-image", type=int, help="descriptor cap per image")
    ap.add_argument("--max-side", type=int, help="resize larger photos "
                    "(default 2048; --1m: native size)")
    ap.add_argument("--base", type=int, help="base descriptors "
                    "(default: all / 10000 / --1m 1000000)")
    ap.add_argument("--queries", type=int, help="query descriptors")
    ap.add_argument("--learn", type=int, help="learn descriptors")
    ap.add_argument("--cache", help="--1m: descriptor cache directory "
                    "(default OUT/../sift-cache)")
    ap.add_argument("--jobs", type=int, default=2, help="--1m: processes for SIFT")
    ap.add_argument("--near", type=int, default=4,
                    help="--1m: difference-hash bits within which images share a role")
    ap.add_argument("--check", type=int, default=20,
                    help="queries whose ground truth is recomputed by integer brute force")
    a = ap.parse_args()
    one_m = a.one_m
    large = a.large or one_m
    name = "1m" if one_m else "large" if large else "sift"
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    per_image = a.per_image or (PER_IMAGE_1M if one_m else 4000 if large else 600)
    max_side = a.max_side or (1 << 30 if one_m else 2048)
    n_base = a.base or (1000000 if one_m else 0 if large else 10000)
    n_query = a.queries or (10000 if large else 200)
    n_learn = a.learn or (100000 if one_m else 50000 if large else 5000)
    # sizes given on the command line are requirements; the large set's
    # default learn size is only a cap (the learn images give ~20k)
    required = {"base": a.base is not None or not a.large,
                "query": True,
                "learn": a.learn is not None or not large}

    t0 = time.time()
    paths = list_images(large, html=one_m)
    stats = ""
    if one_m:
        cache = a.cache or os.path.join(os.path.dirname(os.path.abspath(out)), "sift-cache")
        groups, counts, stats = collect_1m(paths, per_image, max_side, cache,
                                           a.jobs, a.near)
        stats = "; " + stats
    else:
        groups = {"base": [], "query": [], "learn": []}
        counts = {"base": 0, "query": 0, "learn": 0}
        for i, p in enumerate(paths):
            d = descriptors(p, per_image, max_side)
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
    base_keys = set()
    for r, want in (("base", n_base), ("query", n_query), ("learn", n_learn)):
        x = dedupe(np.concatenate(groups[r])) if groups[r] else np.zeros((0, 128), np.uint8)
        if one_m and base_keys:
            # the 1M set drops copies of base descriptors before the draw,
            # so it holds exactly the sizes asked for
            x = x[np.array([row.tobytes() not in base_keys for row in x], dtype=bool)]
        x = x[rng.permutation(len(x))]
        if want and len(x) < want and required[r]:
            sys.exit(f"only {len(x)} {r} descriptors available, {want} wanted")
        sets[r] = x[:want] if want else x
        if r == "base":
            base_keys = {row.tobytes() for row in sets["base"]}
    # a descriptor present in two roles would be a near-twin: drop it from
    # query and learn
    for r in ("query", "learn"):
        keep = [i for i, row in enumerate(sets[r]) if row.tobytes() not in base_keys]
        sets[r] = sets[r][keep]
    t1 = time.time()
    print(f"descriptors {t1 - t0:.1f} s{stats}; computing the ground truth",
          file=sys.stderr, flush=True)
    gt = ground_truth(sets["base"], sets["query"], 100)
    t2 = time.time()
    checked, bad = check_ground_truth(sets["base"], sets["query"], gt, a.check)
    if bad:
        sys.exit(f"ground truth check: {bad} of {checked} queries differ")
    t3 = time.time()
    os.makedirs(out, exist_ok=True)
    write_vecs(os.path.join(out, "base.bvecs"), sets["base"], np.uint8)
    write_vecs(os.path.join(out, "query.bvecs"), sets["query"], np.uint8)
    write_vecs(os.path.join(out, "learn.bvecs"), sets["learn"], np.uint8)
    write_vecs(os.path.join(out, "groundtruth.ivecs"), gt, np.int32)
    print(f"images: {len(paths)} (base {counts['base']}, query {counts['query']}, "
          f"learn {counts['learn']}){stats}; descriptors: base {len(sets['base'])}, "
          f"query {len(sets['query'])}, learn {len(sets['learn'])}; "
          f"descriptors {t1 - t0:.1f} s, ground truth {t2 - t1:.1f} s, "
          f"checked {checked} queries by integer brute force in {t3 - t2:.1f} s -> {out}")


if __name__ == "__main__":
    main()
