#!/usr/bin/python3
"""compare_defaults.py BASE OTHER PAIRS [--delta D ...] [--mess PATH]

How another configuration's privacy bounds compare with a base
configuration's on the same real pairs: runs `mess account report` on both
client files (BASE, e.g. the paper's configuration; OTHER, e.g. the cosine
defaults) for the pairs in PAIRS (consecutive rows; scripts/near_pairs.py
makes close pairs) at each delta, and prints for xi_pure, xi_pld and the
single-shard value: the mean ratio OTHER / BASE, the share of pairs where
OTHER is higher, and the largest ratio; then the per-bit eta_D of both.
Last line: one JSON object with the same numbers.
"""
import argparse
import json
import subprocess
import sys


def report(mess, client, pairs, delta):
    out = subprocess.run([mess, "account", "report", "--client", client, "--pairs", pairs,
                          "--delta", str(delta)], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    rows = [json.loads(line) for line in out if line.startswith('{"pair"')]
    return rows, json.loads(out[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base")
    ap.add_argument("other")
    ap.add_argument("pairs")
    ap.add_argument("--delta", type=float, nargs="+", default=[1e-5, 0.01])
    ap.add_argument("--mess", default="build/mess")
    a = ap.parse_args()
    result = {"pairs": None, "deltas": {}}
    for delta in a.delta:
        base, bsum = report(a.mess, a.base, a.pairs, delta)
        other, osum = report(a.mess, a.other, a.pairs, delta)
        result["pairs"] = len(base)
        result["eta_D"] = [bsum["eta_D"], osum["eta_D"]]
        per = {}
        for key in ("xi_pure", "xi_pld", "xi_single_shard"):
            ratios = [o[key] / b[key] for b, o in zip(base, other) if b[key] > 0]
            higher = sum(o[key] > b[key] for b, o in zip(base, other))
            per[key] = {"mean_base": sum(b[key] for b in base) / len(base),
                        "mean_other": sum(o[key] for o in other) / len(other),
                        "mean_ratio": sum(ratios) / len(ratios),
                        "higher": higher, "share_higher": higher / len(base),
                        "max_ratio": max(ratios)}
            print("delta %-7g %-16s mean %8.2f -> %8.2f (ratio of means %.3f, mean ratio "
                  "%.3f); higher for %d of %d pairs (%.0f%%), at most %+.0f%%"
                  % (delta, key, per[key]["mean_base"], per[key]["mean_other"],
                     per[key]["mean_other"] / per[key]["mean_base"], per[key]["mean_ratio"],
                     higher, len(base), 100 * higher / len(base),
                     100 * (per[key]["max_ratio"] - 1)))
        result["deltas"][str(delta)] = per
    print("per bit: eta_D %.4f (base) against %.4f (other) nats"
          % tuple(result["eta_D"]))
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
