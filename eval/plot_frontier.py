#!/usr/bin/python3
"""eval/plot_frontier.py - the privacy-utility frontier of docs/TEXT.md from
eval/text_sweep.py results (matplotlib, an optional dependency:
python3-matplotlib).

Left: Recall@10 against the total pool B (and bytes per query) for the
paper's defaults and the cosine defaults, on the text set and on SIFT.
Right: Recall@10 at one pool against the privacy bound on real near pairs
(mean xi_pld of `mess account report`, relative to the paper defaults':
left of 1 is more private), one line per kappa through its flips.

    /usr/bin/python3 eval/plot_frontier.py --text docs/eval/text/sweep.json \\
        --sift docs/eval/text/sweep-sift.json --out docs/eval/text/frontier.png
"""
import argparse
import json
import sys


def rows_of(path):
    with open(path) as f:
        return json.load(f)


def pick(res, M, t, k, d, q, ef):
    for r in res["rows"]:
        c = r["spec"]
        if (c["M"], c["t"], c["k"], c["ef"]) == (M, t, k, ef) and abs(c["d"] - d) < 1e-9 \
                and abs(c["q"] - q) < 1e-9:
            return r
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", required=True)
    ap.add_argument("--sift")
    ap.add_argument("--out", required=True)
    ap.add_argument("--pool", type=int, default=500, help="text pool of the right panel")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_frontier.py: needs matplotlib (apt-get install python3-matplotlib)")
    text = rows_of(a.text)
    sets = [("text, 500 queries", text)]
    if a.sift:
        sets.append(("SIFT 10k, 200 queries", rows_of(a.sift)))
    fig, axes = plt.subplots(1, len(sets) + 1, figsize=(5.2 * (len(sets) + 1), 4.2))
    for ax, (name, res) in zip(axes, sets):
        for (M, t, k, d, q, ef), label, style in (
                ((64, 16, 128, 0.08, 0.08, 0), "paper defaults (kappa 128, p 0.08, ef 0)", "o--"),
                ((64, 16, 128, 0.08, 0.08, 64), "paper defaults + ef_search 64", "o:"),
                ((64, 16, 64, 0.016, 0.016, 0), "kappa 64, p 0.016, ef 0", "s--"),
                ((64, 16, 64, 0.016, 0.016, 64), "cosine defaults (kappa 64, p 0.016, ef 64)", "s-")):
            r = pick(res, M, t, k, d, q, ef)
            if r:
                ax.plot([x["pool"] for x in r["curve"]], [x["recall"] for x in r["curve"]],
                        style, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("total pool B (bytes/query = B x %d B, f32 payload)" %
                      round(res["rows"][0]["curve"][0]["bytes"] / res["rows"][0]["curve"][0]["pool"]))
        ax.set_ylabel("Recall@10")
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    ax = axes[-1]
    ref = pick(text, 64, 16, 128, 0.08, 0.08, 64) or pick(text, 64, 16, 128, 0.08, 0.08, 0)
    base = ref["privacy"]["mean_xi_pld"]
    for k, marker in ((128, "o-"), (64, "s-"), (256, "^-")):
        pts = []
        for r in text["rows"]:
            c = r["spec"]
            if (c["M"], c["t"], c["k"], c["ef"]) == (64, 16, k, 64) and r["privacy"]:
                by = {x["pool"]: x["recall"] for x in r["curve"]}
                if a.pool in by:
                    pts.append((r["privacy"]["mean_xi_pld"] / base, by[a.pool], c["d"]))
        pts.sort()
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker, label="kappa %d" % k)
            for x, y, d in pts:
                ax.annotate("p %.3g" % d, (x, y), fontsize=6, xytext=(3, -8),
                            textcoords="offset points")
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("mean xi_pld on 100 near pairs / paper defaults' (left: more private)")
    ax.set_ylabel("Recall@10 at B = %d (text, ef_search 64)" % a.pool)
    ax.set_title("privacy-utility frontier (M 64, t 16)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main()
