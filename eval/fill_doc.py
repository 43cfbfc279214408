#!/usr/bin/python3
"""Copies the tables of docs/eval/NAME/tables.md into a Markdown document
between markers, so the prose of docs/EVALUATION.md never carries stale
tables:

    <!-- eval:sift:exp1 -->  ... replaced ...  <!-- /eval -->

Keys: exp1 .. exp6, builds, machine (the "### Experiment N" / "### Builds" /
"### Machine"
sections of tables.md, without their heading).

    /usr/bin/python3 eval/fill_doc.py docs/EVALUATION.md sift large"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def sections(path):
    out, key = {}, None
    for line in open(path):
        m = re.match(r"### (Experiment (\d+)|Builds|Machine)", line)
        if m:
            key = "exp" + m.group(2) if m.group(2) else m.group(1).lower()
            out[key] = []
            continue
        if key:
            out[key].append(line)
    return {k: "".join(v).strip() + "\n" for k, v in out.items()}


def fill(doc, name, secs):
    def repl(m):
        key = m.group(1)
        if key not in secs:
            return m.group(0)
        return "<!-- eval:%s:%s -->\n%s<!-- /eval -->" % (name, key, secs[key])
    return re.sub(r"<!-- eval:%s:(\w+) -->.*?<!-- /eval -->" % re.escape(name), repl, doc,
                  flags=re.S)


def main():
    doc_path, names = sys.argv[1], sys.argv[2:]
    doc = open(doc_path).read()
    for name in names:
        t = os.path.join(ROOT, "docs", "eval", name, "tables.md")
        if os.path.exists(t):
            doc = fill(doc, name, sections(t))
    with open(doc_path, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
