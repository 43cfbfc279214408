#!/usr/bin/env python3
"""scripts/structure.py - the library's structure, measured from its objects.

    structure.py [--objects DIR] [--graph]

Joins each library object's defined symbols (nm --defined-only) with every
object's undefined ones (nm -u) into a file-level call graph and reports its
strongly connected components; --graph prints every edge as
"caller.c -> callee.c (symbols)".  Used by tests/structure.sh, which fails
on any cycle; docs/ARCHITECTURE.md draws the same graph by component.
"""
import argparse
import os
import subprocess
import sys


def symbols(obj, flag):
    out = subprocess.run(["nm", flag, obj], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if not parts:
            continue
        if flag == "-u":
            names.add(parts[-1])
        elif len(parts) >= 3 and parts[1].isupper() and parts[1] != "U":
            names.add(parts[2])
    return names


def object_files(root):
    objs = []
    for dirpath, _, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        # the library's objects only: not the tools, tests or examples
        if rel.split(os.sep)[0] in ("cli", "tests", "examples", "fuzz", "bench"):
            continue
        for f in files:
            # an object whose source is gone (a file moved since) is stale
            if f.endswith(".o") and os.path.exists(os.path.join(rel, f[:-2] + ".c")):
                objs.append(os.path.join(dirpath, f))
    return sorted(objs)


def graph(root):
    objs = object_files(root)
    defined, undefined, name = {}, {}, {}
    for o in objs:
        src = os.path.relpath(o, root)[:-2] + ".c"
        name[o] = src
        for s in symbols(o, "--defined-only"):
            defined.setdefault(s, src)
        undefined[src] = symbols(o, "-u")
    edges = {}
    for src, und in undefined.items():
        for s in und:
            dst = defined.get(s)
            if dst and dst != src:
                edges.setdefault(src, {}).setdefault(dst, set()).add(s)
    return sorted(undefined), edges


def sccs(nodes, edges):
    """Tarjan's algorithm, iterative; components of more than one file."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", default="build/rel")
    ap.add_argument("--graph", action="store_true")
    a = ap.parse_args()
    nodes, edges = graph(a.objects)
    if not nodes:
        print("structure: no objects under %s (make first)" % a.objects,
              file=sys.stderr)
        return 2
    if a.graph:
        for src in sorted(edges):
            for dst in sorted(edges[src]):
                syms = sorted(edges[src][dst])
                print("%s -> %s (%d: %s)" % (src, dst, len(syms),
                                             " ".join(syms[:6])))
    cycles = sccs(nodes, edges)
    for comp in cycles:
        inner = sum(len(edges.get(a, {}).get(b, ())) for a in comp for b in comp)
        print("cycle of %d files (%d symbols on its internal edges): %s"
              % (len(comp), inner, " ".join(comp)))
    print("%d files, %d call cycles" % (len(nodes), len(cycles)))
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
