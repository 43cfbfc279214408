/*
 * estimate.c - memory and disk a configuration needs for N items
 * (mess_estimate, mess_experimental.h).
 *
 * Every term is the size of a real array of the server, per entry, summed
 * over the shards (docs/EVALUATION.md, "Memory and disk per entry"):
 *   codes      kappa/8                       hnsw_bin.c codes
 *   labels     16                            labels
 *   links      levels 1 + deleted 1 + layer-0 block (1 + 2 M_hnsw) x 4
 *              + upper layers E[level] (1 + M_hnsw) x 4, E[level] =
 *              1/(M_hnsw - 1) (levels are floor(-ln U / ln M_hnsw):
 *              Pr[level >= l] = M_hnsw^-l)
 *   label map  4 bytes per slot, a power of two per shard
 *   payload    mess_payload_size: siv 16 + id 8 + encoded vector
 * A shard holds n_j entries, n_j ~ Binomial(items, t/M) (every item picks
 * t of the M shards through a keyed PRF); sums of per-entry terms are
 * linear in n_j, so only the label map (a power of two) and the page
 * rounding of the mapped form depend on the spread, which is taken from
 * the normal approximation of n_j.
 */
#include <math.h>

#include "hnsw_bin.h"
#include "mess_experimental.h"
#include "numeric.h"
#include "payload.h"
#include "store.h"

#define EST_PAGE 4096.0
/* sizeof(struct hnsw) is private to the index (hnsw_internal.h); it is
 * below this. */
#define EST_HNSW_STRUCT 256.0
/* Serialized graph header (docs/HNSW.md) and per-node fixed fields. */
#define EST_SER_GRAPH_HEAD 52.0
/* Container of a travel file: header, parameters, lengths, BLAKE2b tail. */
#define EST_CONTAINER 132.0

/* Pr[n <= a] for n ~ N(mu, var) taken as an integer (continuity
 * correction); var = 0 is a step at mu. */
static double shard_cdf(double a, double mu, double var)
{
    double f = floor(a);
    if (var <= 0.0)
        return mu <= f + 1e-9 ? 1.0 : 0.0;
    return numeric_normal_cdf((f + 0.5 - mu) / sqrt(var));
}

/* E[f(slots)] of a label map rounded up to a power of two of at least 16
 * slots >= factor (n + add) (hnsw_map_rebuild in hnsw_bin.c), over n ~ N(mu,
 * var); f(slots) = 4 slots bytes, page-aligned if paged. */
static double expected_map_bytes(double mu, double var, double factor, double add,
                                 int paged)
{
    double e = 0.0, lo_p = 0.0, size;
    /* size = s exactly when factor (n + add) in (s/2, s] (s > 16) */
    for (size = 16.0; size < 1e19; size *= 2.0) {
        double hi_p = shard_cdf(size / factor - add, mu, var);
        double b = 4.0 * size;
        if (paged)
            b = ceil(b / EST_PAGE) * EST_PAGE;
        e += b * (hi_p - lo_p);
        lo_p = hi_p;
        if (hi_p >= 1.0 - 1e-15 && size / factor - add > mu)
            break;
    }
    return e;
}

/* E[bytes rounded up to whole pages] for a section of X bytes, X normal
 * (mean, sd) and at least 0: sum over pages k >= 1 of Pr[X > (k-1) page]. */
static double expected_pages(double mean, double sd)
{
    double k, e, hi;
    if (mean <= 0.0)
        return 0.0;
    if (sd <= 0.0)
        return ceil(mean / EST_PAGE) * EST_PAGE;
    /* pages below mean - 8 sd are full for certain; none past mean + 8 sd */
    k = floor((mean - 8.0 * sd > 0.0 ? mean - 8.0 * sd : 0.0) / EST_PAGE);
    e = k;
    hi = mean + 8.0 * sd;
    for (k += 1.0; (k - 1.0) * EST_PAGE < hi; k += 1.0)
        e += 1.0 - numeric_normal_cdf(((k - 1.0) * EST_PAGE - mean) / sd);
    return e * EST_PAGE;
}

int mess_estimate_sized(const mess_params *in, uint64_t items,
                        mess_estimate_result *caller, size_t size)
{
    mess_estimate_result r;
    mess_params p;
    double M, t, mu, var, shards, words, m, m0, e_level, upper;
    double per_code, per_label, per_links, map_mem, map_file, graph_file;
    double ser_graph;
    int rc;

    if (!in || !caller)
        return MESS_EINVAL;
    rc = params_import(in, &p);
    if (rc != MESS_OK)
        return rc;
    rc = mess_params_check(&p);
    if (rc != MESS_OK)
        return rc;
    /* every shard must be able to hold its share, and the totals must be
     * exact in a double (entries < 2^53) */
    if (items > ((uint64_t)1 << 53) / p.per_item)
        return MESS_ELIMIT;
    M = (double)p.shards;
    t = (double)p.per_item;
    shards = M;
    mu = (double)items * t / M;
    var = (double)items * (t / M) * (1.0 - t / M);
    if (mu + 6.0 * sqrt(var) > (double)HNSW_MAX_NODES)
        return MESS_ELIMIT;

    memset(&r, 0, sizeof r);
    r.size = (uint32_t)sizeof r;
    r.items = items;
    r.entries = items * p.per_item;
    r.shard_entries = mu;
    r.payload_bytes = (uint32_t)payload_entry_bytes(&p);

    words = (double)(p.kappa / 64);
    m = (double)p.hnsw_m;
    m0 = 2.0 * m;
    e_level = 1.0 / (m - 1.0);
    upper = e_level * (1.0 + m) * 4.0;
    per_code = words * 8.0;
    per_label = (double)sizeof(struct hnsw_label);
    per_links = 1.0 + 1.0 + (1.0 + m0) * 4.0 + upper;

    r.code_bytes = (uint64_t)llround((double)r.entries * per_code);
    r.label_bytes = (uint64_t)llround((double)r.entries * per_label);
    r.link_bytes = (uint64_t)llround((double)r.entries * per_links);
    /* the mapped form keeps the map of a loaded graph: >= 2 (n + 1) slots */
    map_file = shards * expected_map_bytes(mu, var, 2.0, 1.0, 0);
    r.map_bytes = (uint64_t)llround(map_file);

    /* the graph file of a shard of mu entries (hnsw_file.c, docs/HNSW.md,
     * "Graph file"): a header page, then codes, labels, levels, deleted
     * flags, layer-0 links, upper-link offsets (u32 per node), upper links
     * and the label map, each starting on a page */
    graph_file = EST_PAGE;
    if (mu > 0.0) {
        /* per shard, each section's size varies with n_j (sd sqrt(var)); the
         * upper links also with the levels drawn: Var[level] = m/(m-1)^2 */
        double sd = sqrt(var), ublock = (1.0 + m) * 4.0;
        double sd_upper = sqrt(mu * ublock * ublock * m / ((m - 1.0) * (m - 1.0)) +
                               upper * upper * var);
        graph_file += expected_pages(mu * per_code, sd * per_code) +
                      expected_pages(mu * per_label, sd * per_label) +
                      2.0 * expected_pages(mu, sd) +
                      expected_pages(mu * (1.0 + m0) * 4.0, sd * (1.0 + m0) * 4.0) +
                      expected_pages(mu * 4.0, sd * 4.0) +
                      expected_pages(mu * upper, sd_upper) +
                      expected_map_bytes(mu, var, 2.0, 1.0, 1);
    }
    r.resident_bytes = (uint64_t)llround(shards * graph_file);
    r.arena_bytes = r.entries * (uint64_t)r.payload_bytes;
    r.disk_bytes = r.resident_bytes + r.arena_bytes +
                   /* the MANIFEST of a directory just built or folded: no chains */
                   STORE_HEADER_BYTES + (uint64_t)p.shards * STORE_SHARD_BYTES +
                   STORE_DIGEST_BYTES;

    /* the travel file (mess_server_save): serialized graphs with full link
     * lists, the ciphertexts, a container; zstd's worst case on top */
    ser_graph = EST_SER_GRAPH_HEAD + 8.0 +
                mu * (per_label + 2.0 + per_code + (1.0 + m0) * 4.0 + upper);
    {
        double raw = 4.0 + 1.0 + MESS_OWNER_BYTES + shards * ser_graph +
                     (double)r.arena_bytes;
        /* ZSTD_compressBound: raw + raw/256 + a small constant per frame */
        r.travel_bytes = (uint64_t)llround(EST_CONTAINER + raw + floor(raw / 256.0) + 64.0);
    }

    /* in memory (mess_server_load: arrays of exactly n, at least 64 nodes;
     * an upper-link pointer per node; the map of a loaded graph) */
    map_mem = map_file;
    {
        double cap = mu < 64.0 ? 64.0 : mu; /* hnsw grow(): at least 64 */
        double per_cap = per_code + per_label + 1.0 + 1.0 + (1.0 + m0) * 4.0 +
                         (double)sizeof(uint32_t *);
        r.memory_bytes = (uint64_t)llround(
            (double)sizeof(struct mess_server) + shards * sizeof(struct shard_store) +
            shards * (EST_HNSW_STRUCT + cap * per_cap + mu * upper) + map_mem +
            (double)r.arena_bytes);
    }
    if (r.entries > 0) {
        double e = (double)r.entries;
        r.resident_per_entry = (double)r.resident_bytes / e;
        r.disk_per_entry = (double)r.disk_bytes / e;
        r.memory_per_entry = (double)r.memory_bytes / e;
    }
    return mess_struct_out(caller, size, &r,
                           MESS_FIELD_END(mess_estimate_result, memory_per_entry),
                           MESS_ESTIMATE_RESULT_MIN_SIZE);
}
