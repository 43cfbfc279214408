"""The evaluation's figures (matplotlib, Agg backend): ours measured, the
paper's numbers drawn grey/hollow and labelled "paper (quoted)"."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import paper  # noqa: E402
from common import log  # noqa: E402

COLORS = {"No-Noise": "#2b6cb0", "MESS p_q=0.08": "#c53030", "MESS p_q=0.12": "#dd6b20"}


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    log("wrote %s" % path)


def recall_vs_pool(rows, path, title):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name in dict.fromkeys(r["config"] for r in rows):
        rr = [r for r in rows if r["config"] == name]
        ax.plot([r["pool"] for r in rr], [r["recall"] for r in rr], marker="o",
                color=COLORS.get(name), label="%s (ours)" % name)
    q = paper.FIG9_SIFT_008_008
    ax.plot([b for b, _ in q], [r for _, r in q], ls="--", color="0.45", lw=1.2,
            label="paper SIFT p_D=0.08, p_q=0.08 (quoted, Fig. 9)")
    q = paper.FIG9_SIFT_012_008
    ax.plot([b for b, _ in q], [r for _, r in q], ls=":", color="0.45", lw=1.2,
            label="paper SIFT p_D=0.12, p_q=0.08 (quoted, Fig. 9)")
    ax.set_xscale("log")
    ax.set_xlabel("candidate pool B (sum of per-shard budgets, log)")
    ax.set_ylabel("Recall@10")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    _save(fig, path)


def effect_of_t(rows, path, title):
    ts = list(dict.fromkeys(r["t"] for r in rows))
    pools = sorted(set(r["pool"] for r in rows))
    x = range(len(ts))
    n = len(pools) + 1
    w = 0.8 / n
    fig, ax = plt.subplots(figsize=(7, 4))
    shades = ["#feb2b2", "#c53030", "#742a2a"]
    for k, B in enumerate(pools):
        vals = [100 * next(r["recall"] for r in rows if r["t"] == t and r["pool"] == B)
                for t in ts]
        pos = [i - 0.4 + w * (k + 0.5) for i in x]
        ax.bar(pos, vals, w, color=shades[k % 3], label="ours, B=%d" % B)
        for p_, v in zip(pos, vals):
            ax.text(p_, v + 1, "%.1f" % v, ha="center", fontsize=7)
    pos = [i - 0.4 + w * (len(pools) + 0.5) for i in x]
    ax.bar(pos, [paper.FIG5_SIFT_T.get(t, 0) for t in ts], w, color="white",
           edgecolor="0.4", hatch="//", label="paper SIFT, B=1500 (quoted, Fig. 5)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(["t=%d" % t for t in ts])
    ax.set_ylabel("Recall@10 (%)")
    ax.set_ylim(0, 125)
    ax.set_yticks(range(0, 101, 20))
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", ncol=3)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)


def query_flip(table, sweeps, path, title):
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    ps = [r["p_q"] for r in table]
    x = range(len(ps))
    w = 0.38
    for off, net, col in ((-w / 2, "lan", "#dd6b20"), (w / 2, "wan", "#2b6cb0")):
        vals = [r["total_%s_ms" % net] for r in table]
        a.bar([i + off for i in x], vals, w, color=col, label=net.upper())
        for i, v in zip(x, vals):
            a.text(i + off, v * 1.08, "%.1f" % v, ha="center", fontsize=7)
    a.set_yscale("log")
    a.set_ylim(min(r["total_lan_ms"] for r in table) / 2,
               max(r["total_wan_ms"] for r in table) * 4)
    a.set_xticks(list(x))
    a.set_xticklabels(["p=%.2f\nB=%d" % (r["p_q"], r["pool"]) for r in table])
    a.set_ylabel("total ms/query (log)")
    a.set_title("total latency at the smallest B reaching the target", fontsize=10)
    a.legend(fontsize=8, loc="upper left", ncol=2)
    a.grid(axis="y", alpha=0.3)
    for p in ps:
        rr = [r for r in sweeps if abs(r["p_q"] - p) < 1e-9]
        b.plot([r["pool"] for r in rr], [100 * r["recall"] for r in rr], marker="o",
               label="p=%.2f (ours)" % p)
    for p, pts in paper.FIG6_SIFT100M.items():
        b.plot([x for x, _ in pts], [y for _, y in pts], ls=":", color="0.6", lw=1)
    b.plot([], [], ls=":", color="0.6", label="paper SIFT100M, p=0..0.12 (quoted, Fig. 6b)")
    b.set_xscale("log")
    b.set_xlabel("candidate pool B (log)")
    b.set_ylabel("Recall@10 (%)")
    b.set_title("recall vs pool per query flip p (p_D = 0.08)", fontsize=10)
    b.grid(alpha=0.3)
    b.legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=10)
    _save(fig, path)


def latency_table(rows, path, title):
    """Total LAN and WAN ms/query per scheme on a log axis."""
    names = [r["scheme"] for r in rows]
    x = range(len(names))
    w = 0.38
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for off, net, col in ((-w / 2, "lan", "#dd6b20"), (w / 2, "wan", "#2b6cb0")):
        vals = [r["total_%s_ms" % net] for r in rows]
        bars = ax.bar([i + off for i in x], vals, w, color=col, label=net.upper())
        for bar, r in zip(bars, rows):
            if r["source"] != "measured":
                bar.set_hatch("//")
                bar.set_alpha(0.55)
    for i, r in zip(x, rows):
        ax.text(i, max(r["total_lan_ms"], r["total_wan_ms"]) * 1.3, "%.0f KB" % r["kb_per_query"]
                if r["kb_per_query"] >= 10 else "%.2f KB" % r["kb_per_query"],
                ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(list(x))
    ax.set_xticklabels(["%s\n(%s)" % (r["scheme"], r["source"]) for r in rows], fontsize=7)
    ax.set_ylabel("total ms/query (log)")
    ax.set_title(title + "   hatched = quoted from the paper")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)


def payloads(rows, path, title):
    encs = list(dict.fromkeys(r["payload"] for r in rows))
    pools = sorted(set(r["pool"] for r in rows))
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    x = range(len(encs))
    w = 0.8 / len(pools)
    for k, B in enumerate(pools):
        rr = [next(r for r in rows if r["payload"] == e and r["pool"] == B) for e in encs]
        pos = [i - 0.4 + w * (k + 0.5) for i in x]
        bars = a.bar(pos, [r["kb_per_query"] for r in rr], w, label="B=%d" % B)
        for bar, r in zip(bars, rr):
            a.text(bar.get_x() + bar.get_width() / 2, r["kb_per_query"], "%.0f" % r["kb_per_query"],
                   ha="center", va="bottom", fontsize=7)
        b.plot(list(x), [r["recall"] for r in rr], "o-", label="B=%d" % B)
    for ax in (a, b):
        ax.set_xticks(list(x))
        ax.set_xticklabels(encs)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    a.set_ylabel("KB per query (request + response)")
    a.set_title("communication")
    b.set_ylabel("Recall@10")
    lo = min(r["recall"] for r in rows)
    b.set_ylim(max(0, lo - 0.05), 1.005)
    b.set_title("quality (exact rerank on decoded vectors)")
    fig.suptitle(title, fontsize=10)
    _save(fig, path)


def baselines(hnsw_rows, faiss_rows, path, title):
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.8))
    a.plot([r["server_ms"] for r in hnsw_rows], [r["recall"] for r in hnsw_rows], "o-",
           color="#2b6cb0")
    for r in hnsw_rows[::3]:
        a.annotate("ef=%d" % r["ef"], (r["server_ms"], r["recall"]), fontsize=7,
                   textcoords="offset points", xytext=(3, -9))
    a.axhline(0.98, color="0.5", ls=":", lw=1)
    a.set_xscale("log")
    a.set_xlabel("ms/query (1 thread, log)")
    a.set_ylabel("Recall@10")
    a.set_title("plaintext hnswlib (M=16, efC=300): ef sweep")
    a.grid(alpha=0.3)
    pools = [r["pool"] for r in faiss_rows]
    x = range(len(pools))
    w = 0.38
    cpu = all("server_cpu_ms_ours" in r for r in faiss_rows)
    key_o, key_f = (("server_cpu_ms_ours", "server_cpu_ms_faiss") if cpu
                    else ("server_ms_ours", "server_ms_faiss"))
    what = "CPU ms" if cpu else "ms"
    b.bar([i - w / 2 for i in x], [r[key_o] for r in faiss_rows], w,
          color="#c53030", label="ours: hnsw_bin (server %s)" % what)
    b.bar([i + w / 2 for i in x], [r[key_f] for r in faiss_rows], w,
          color="#718096", label="faiss IndexBinaryHNSW (server %s)" % what)
    b.set_xticks(list(x))
    b.set_xticklabels(["B=%d" % p for p in pools])
    b.set_ylabel("server %s/query (1 thread)" % what)
    b2 = b.twinx()
    b2.plot(list(x), [r["shard_hamming_recall_ours"] for r in faiss_rows], "o-",
            color="#c53030", label="shard Hamming recall, ours")
    b2.plot(list(x), [r["shard_hamming_recall_faiss"] for r in faiss_rows], "s--",
            color="#2d3748", label="shard Hamming recall, faiss")
    lo = min(min(r["shard_hamming_recall_ours"], r["shard_hamming_recall_faiss"])
             for r in faiss_rows)
    b2.set_ylim(max(0, lo - 0.25), 1.01)
    b2.set_ylabel("fraction of each shard's true top-budget found")
    b.set_title("same perturbed codes, same requests (end-to-end recall: table)",
                fontsize=10)
    h1, l1 = b.get_legend_handles_labels()
    h2, l2 = b2.get_legend_handles_labels()
    b.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1),
             ncol=2)
    fig.suptitle(title, fontsize=10)
    _save(fig, path)


def recall_vs_latency(rows, path, title):
    """Figure 4's SIFT panel: Recall@10 against total latency, hollow
    markers LAN, filled WAN; ours measured in colour, the paper's quoted
    points in grey.  HE-Cluster (recall 0.47) is named below the axis."""
    from matplotlib.lines import Line2D
    fig, ax = plt.subplots(figsize=(8, 4.4))
    marks = {"HNSW": "o", "No-Noise": "s", "MESS": "D", "Compass": "^", "HE-Cluster": "p"}

    def kind(name):
        for k in marks:
            if name.startswith(k):
                return k
        return "MESS"
    handles, low = [], []
    for r in rows:
        k = kind(r["scheme"])
        quoted = r["source"] != "measured"
        if r["recall"] < 0.9:
            low.append(r)
            continue
        col = "0.55" if quoted else {"HNSW": "#2b6cb0", "No-Noise": "#2f855a",
                                      "MESS": "#c53030"}.get(k, "k")
        for net, filled in (("lan", False), ("wan", True)):
            ax.scatter(r["total_%s_ms" % net], r["recall"], marker=marks[k], s=60,
                       facecolors=col if filled else "white", edgecolors=col, linewidths=1.4)
        handles.append(Line2D([], [], ls="", marker=marks[k], markerfacecolor=col,
                              markeredgecolor=col, label="%s (%s)" % (r["scheme"], r["source"])))
    ax.set_xscale("log")
    ax.set_ylim(0.9, 1.01)
    ax.set_xlabel("total latency per query, ms (log; hollow = LAN, filled = WAN)")
    ax.set_ylabel("Recall@10")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    for r in low:
        ax.text(0.01, 0.96, "off scale: %s (%s): Recall %.2f, LAN %.0f ms, WAN %.0f ms"
                % (r["scheme"], r["source"], r["recall"], r["total_lan_ms"], r["total_wan_ms"]),
                transform=ax.transAxes, ha="left", fontsize=7, color="0.4")
    ax.legend(handles=handles, fontsize=7, loc="lower left", ncol=2)
    _save(fig, path)
