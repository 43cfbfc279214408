#!/usr/bin/python3
"""make_words.py - a word-vector set: 100-d fastText vectors of English
words, trained offline on text that Debian packages ship (issue 31).

Corpus: GCIDE (the GNU Collaborative International Dictionary of English,
dict-gcide), FOLDOC and the Jargon File (dict-foldoc, dict-jargon), the
WordNet 3.0 glosses (wordnet-base), the Linux kernel's documentation
(linux-doc-6.1), Python's documentation sources (python3.11-doc), Perl's
pod pages (perl-doc) and PostgreSQL's HTML manual (postgresql-doc-15).
Markup is stripped, the text lowercased and cut into ASCII words
(letters, with one inner apostrophe); one paragraph a line.

Vectors: Debian's `fasttext cbow` (--model; dim 100, window 5, 5
negatives, --epoch epochs, minCount --min-count, no subwords unless
--maxn: word2vec's CBOW, the fastest of fastText's trainings on a busy
machine) with a fixed seed and ONE thread: fastText's threads update the shared weights without locks
(hogwild), so more than one thread gives different vectors on every run.
The corpus and the trained word vectors are kept under --cache, keyed by
the corpus's SHA-256 and the training options: a rerun trains nothing.

Words: the --base + --queries + --learn most frequent words of the model's
vocabulary (at least two letters), given roles by a fixed-seed
permutation, so the queries are held-out words, none of them in the base,
and the learn set (hash training) is disjoint from both.

Output directory (default datasets/words, not committed):
  base.fvecs        base words' vectors (100-d float32, unit length)
  query.fvecs       held-out query words' vectors
  learn.fvecs       training words' vectors, in neither base nor query
  groundtruth.ivecs per query, the exact top-100 base rows by cosine (inner
                    product of the unit vectors, in float64), ties broken
                    by the smaller row
  base.txt, query.txt, learn.txt  the words, one a line, in row order
  meta.json         counts, sources and package versions, timings

datasets/README.md documents the run.
"""
import argparse
import gzip
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_text import exact_topk, write_vecs  # noqa: E402
from make_wordnet import data_entries  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DIM = 100
PACKAGES = ["fasttext", "dict-gcide", "dict-foldoc", "dict-jargon", "wordnet-base",
            "linux-doc-6.1", "python3.11-doc", "perl-doc", "postgresql-doc-15"]
WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
TAG = re.compile(r"<[^>]*>")


def die(msg):
    sys.stderr.write("make_words.py: %s\n" % msg)
    sys.exit(1)


def log(msg):
    sys.stderr.write("make_words.py: %s\n" % msg)
    sys.stderr.flush()


# ---- packages -----------------------------------------------------------------

def versions():
    """Installed version of every package the set needs; installs the
    missing ones as root (as scripts/deps.sh does), else says what to run."""
    def query():
        out = {}
        for p in PACKAGES:
            r = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", p],
                               capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.startswith("install ok installed"):
                out[p] = r.stdout.split("\t")[1]
        return out
    have = query()
    missing = [p for p in PACKAGES if p not in have]
    if missing:
        if os.geteuid() != 0 or os.environ.get("MESS_NO_APT"):
            die("missing Debian packages: %s (sudo apt-get install %s)"
                % (" ".join(missing), " ".join(missing)))
        log("running apt-get (as root) to install %s" % " ".join(missing))
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"]
                       + missing, check=True, env=env, stdout=sys.stderr)
        have = query()
    return have


def package_files(pkg, pattern):
    """The package's files whose path matches pattern, sorted."""
    r = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True, text=True, check=True)
    rx = re.compile(pattern)
    return sorted(p for p in r.stdout.split("\n") if rx.search(p) and os.path.isfile(p))


# ---- the corpus ---------------------------------------------------------------

def read_text(path):
    op = gzip.open if path.endswith((".gz", ".dz")) else open
    with op(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


def paragraphs(text):
    """Blank-line separated paragraphs as lists of lowercase words."""
    for para in re.split(r"\n\s*\n", text):
        words = WORD.findall(para.lower())
        if words:
            yield words


def clean_gcide(t):
    # headword pronunciations (\Ab*di*ca"tion\) and source tags ([1913 Webster])
    t = re.sub(r"\\[^\\\n]*\\", " ", t)
    return re.sub(r"\[[^\]\n]*(Webster|WordNet|PJC|Century)[^\]\n]*\]", " ", t)


def clean_html(t):
    t = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", t)
    # block-level tags end a paragraph
    t = re.sub(r"(?i)</?(p|div|h[1-6]|li|tr|pre|table|dt|dd)\b[^>]*>", "\n\n", t)
    return html.unescape(TAG.sub(" ", t))


def wordnet_glosses(path):
    return "\n\n".join(" ".join(words) + " " + gloss
                       for _, words, gloss in data_entries(path))


def sources():
    """(name, [(path, cleaner)]) of every corpus part, in a fixed order."""
    dictd = "/usr/share/dictd/"
    ident = lambda t: t                  # noqa: E731
    return [
        ("gcide", [(dictd + "gcide.dict.dz", clean_gcide)]),
        ("foldoc", [(dictd + "foldoc.dict.dz", lambda t: TAG.sub(" ", t))]),
        ("jargon", [(dictd + "jargon.dict.dz", ident)]),
        ("wordnet", [("/usr/share/wordnet/data." + p, None)
                     for p in ("noun", "verb", "adj", "adv")]),
        ("linux-doc", [(p, ident) for p in package_files(
            "linux-doc-6.1", r"/Documentation/.*\.(rst|txt)\.gz$")]),
        ("python-doc", [(p, ident) for p in package_files(
            "python3.11-doc", r"/html/_sources/.*\.txt$")]),
        ("perl-doc", [(p, lambda t: re.sub(r"[A-Z]<+\s*|\s*>+", " ", t))
                      for p in package_files("perl-doc", r"\.pod$")]),
        ("postgresql-doc", [(p, clean_html) for p in package_files(
            "postgresql-doc-15", r"/html/.*\.html$")]),
    ]


def build_corpus(path):
    """Writes the corpus, one paragraph a line; returns per-part counts."""
    stats = {}
    with open(path + ".tmp", "w", encoding="ascii") as out:
        for name, files in sources():
            n_tok = n_par = 0
            for p, clean in files:
                text = wordnet_glosses(p) if clean is None else clean(read_text(p))
                for words in paragraphs(text):
                    out.write(" ".join(words) + "\n")
                    n_tok += len(words)
                    n_par += 1
            stats[name] = {"files": len(files), "paragraphs": n_par, "tokens": n_tok}
            log("corpus: %-14s %5d files %9d tokens" % (name, len(files), n_tok))
    os.rename(path + ".tmp", path)
    return stats


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


# ---- training -----------------------------------------------------------------

def train(corpus, cache, a):
    """The word vectors (fastText's .vec file, most frequent word first),
    trained once per corpus and options."""
    opts = ["-dim", str(DIM), "-epoch", str(a.epoch), "-minCount", str(a.min_count),
            "-maxn", str(a.maxn), "-seed", str(a.seed), "-thread", "1"]
    key = hashlib.sha256((sha256(corpus) + " " + a.model + " " + " ".join(opts)).encode()).hexdigest()[:16]
    vec = os.path.join(cache, "model-%s.vec" % key)
    if os.path.exists(vec):
        log("model: cached %s" % vec)
        return vec, opts, 0.0
    prefix = os.path.join(cache, "train-%s" % key)
    cmd = ["fasttext", a.model, "-input", corpus, "-output", prefix, "-verbose", "1"] + opts
    log("model: " + " ".join(cmd))
    t0 = time.time()
    subprocess.run(cmd, check=True)
    os.rename(prefix + ".vec", vec)
    os.remove(prefix + ".bin")           # the full model (with subword buckets), not needed
    return vec, opts, time.time() - t0


def read_vec(path):
    with open(path, encoding="utf-8") as f:
        n, d = map(int, f.readline().split())
        words, rows = [], []
        for line in f:
            parts = line.rstrip().split(" ")
            words.append(parts[0])
            rows.append(np.array(parts[1:], dtype=np.float32))
    if len(words) != n or any(len(r) != d for r in rows):
        die("%s: malformed (%d of %d words)" % (path, len(words), n))
    return words, np.vstack(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "words"))
    ap.add_argument("--cache", default=os.path.join(HERE, "words-cache"))
    ap.add_argument("--base", type=int, default=100000, help="base words (100000)")
    ap.add_argument("--queries", type=int, default=10000, help="held-out query words (10000)")
    ap.add_argument("--learn", type=int, default=10000, help="training words (10000)")
    ap.add_argument("--model", choices=("cbow", "skipgram"), default="cbow")
    ap.add_argument("--epoch", type=int, default=3, help="fastText epochs (3)")
    ap.add_argument("--min-count", type=int, default=3, help="fastText minCount (3)")
    ap.add_argument("--maxn", type=int, default=0,
                    help="longest subword, 0 for none (0; fastText's default is 6)")
    ap.add_argument("--seed", type=int, default=20261128)
    a = ap.parse_args()
    t_start = time.time()
    vers = versions()
    if not shutil.which("fasttext"):
        die("fasttext is not on PATH (apt-get install fasttext)")
    os.makedirs(a.cache, exist_ok=True)

    corpus = os.path.join(a.cache, "corpus.txt")
    stats_path = os.path.join(a.cache, "corpus.json")
    t0 = time.time()
    if os.path.exists(corpus) and os.path.exists(stats_path):
        with open(stats_path) as f:
            cstats = json.load(f)
        if cstats.get("packages") != vers:
            log("corpus: package versions changed, rebuilding")
            os.remove(corpus)
    if not os.path.exists(corpus):
        parts = build_corpus(corpus)
        cstats = {"packages": vers, "parts": parts,
                  "tokens": sum(p["tokens"] for p in parts.values())}
        with open(stats_path + ".tmp", "w") as f:
            json.dump(cstats, f, indent=1)
        os.rename(stats_path + ".tmp", stats_path)
    t_corpus = time.time() - t0
    log("corpus: %d tokens (%.0f s)" % (cstats["tokens"], t_corpus))

    vec, opts, t_train = train(corpus, a.cache, a)
    words, V = read_vec(vec)
    # A few markup words (Sphinx's "tocdepth", ...) come out of training as
    # zero vectors: they have no direction, so they are left out.
    norms = np.linalg.norm(V.astype(np.float64), axis=1)
    keep = [i for i, w in enumerate(words) if w != "</s>" and len(w) >= 2 and norms[i] > 0]
    need = a.base + a.queries + a.learn
    if need > len(keep):
        die("the vocabulary has %d words, %d asked" % (len(keep), need))
    zero = [words[i] for i in range(len(words)) if norms[i] == 0]
    keep = np.array(keep[:need])
    V = (V[keep].astype(np.float64) / norms[keep, None]).astype(np.float32)
    perm = np.random.RandomState(a.seed).permutation(need)
    roles = {"query": np.sort(perm[:a.queries]),
             "base": np.sort(perm[a.queries:a.queries + a.base]),
             "learn": np.sort(perm[a.queries + a.base:])}

    os.makedirs(a.out, exist_ok=True)
    for role, rows in roles.items():
        write_vecs(os.path.join(a.out, role + ".fvecs"), V[rows], "<f4")
        with open(os.path.join(a.out, role + ".txt"), "w", encoding="ascii") as f:
            f.write("".join(words[keep[r]] + "\n" for r in rows))
    t0 = time.time()
    gt = exact_topk(V[roles["base"]].astype(np.float64),
                    V[roles["query"]].astype(np.float64), 100)
    write_vecs(os.path.join(a.out, "groundtruth.ivecs"), gt, "<i4")
    t_gt = time.time() - t0
    meta = {"source": "fastText (%s) on text of Debian packages" % a.model,
            "packages": vers, "corpus": cstats["parts"], "corpus_tokens": cstats["tokens"],
            "corpus_sha256": sha256(corpus), "fasttext_options": a.model + " " + " ".join(opts),
            "vocabulary": len(words), "dim": DIM,
            "metric": "cosine (vectors unit length)",
            "base": len(roles["base"]), "queries": len(roles["query"]),
            "learn": len(roles["learn"]),
            "zero_vectors": zero, "rarest_word_rank": int(keep[-1]), "seed": a.seed,
            "seconds": {"corpus": round(t_corpus, 1), "train": round(t_train, 1),
                        "groundtruth": round(t_gt, 1),
                        "total": round(time.time() - t_start, 1)}}
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
