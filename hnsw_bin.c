/*
 * hnsw_bin.c - HNSW over packed binary codes (Hamming distance).
 *
 * Memory layout: codes, labels, levels and flags in flat arrays; layer 0
 * links contiguous (node i's block at i * (1 + 2M): a count, then ids);
 * upper-layer links in one block per node that has levels above 0.
 * Searches use bucket queues over the integer distances (see struct
 * hnsw_scratch); sorted results are 64-bit keys (distance << 32 | node), so
 * ties break by node id.
 */
#include <math.h>

#include "hnsw_bin.h"

struct hnsw {
    struct hnsw_params p;
    uint32_t words, m, m0;
    double ml;
    size_t n, cap;
    uint64_t *codes;     /* cap x words */
    struct hnsw_label *labels; /* cap */
    uint8_t *levels;     /* cap */
    uint8_t *deleted;    /* cap */
    uint32_t *links0;    /* cap x (1 + m0) */
    uint32_t **upper;    /* cap: level x (1 + m) or NULL */
    uint32_t entry;
    int max_level;       /* -1 when empty */
    size_t n_deleted;
    uint64_t rng;        /* splitmix64 state for levels */
    uint32_t *map;       /* label -> node, open addressing; UINT32_MAX empty */
    size_t map_mask;
    struct hnsw_scratch *build; /* search state of inserts (exclusive) */
    uint64_t *tmp;       /* 2M + 2 keys for link shrinking */
    uint32_t *sel, *sel2; /* 2M + 2 ids each */
};

/* Search state of one thread.  Distances are integers in [0, bits], so
 * both queues of Alg. 2 are bucket queues: one singly linked list per
 * distance, entries taken from a pool that is reset at every search.  The
 * candidate queue pops from its lowest non-empty bucket, the result set
 * evicts from its highest; every operation is O(1) amortised and no
 * comparison involves more than one small integer. */
struct bq_entry {
    uint32_t node;
    uint32_t next;
};

struct hnsw_scratch {
    uint16_t *mark;      /* visited epoch per node */
    size_t mark_cap;
    uint16_t epoch;
    struct bq_entry *pool;
    size_t pool_cap, pool_used;
    uint32_t *cand_head, *res_head; /* nbuckets each */
    uint32_t nbuckets;
    uint64_t *out;       /* sorted (distance, node) keys of the last layer search */
    size_t out_cap;
    uint32_t *pending;   /* unvisited neighbours of the node being expanded */
    size_t pending_cap;
};

#define EMPTY UINT32_MAX

/* ---- popcount at run time ------------------------------------------------
 * Hamming distance is one popcount per 64-bit word.  The build targets the
 * baseline ISA (no -mpopcnt: a package must run on every x86-64), so the
 * hot paths (search, insert, many-code distances) are compiled twice from
 * one always-inlined body: once with the POPCNT instruction enabled by a
 * target attribute, once for the baseline (the compiler's builtin without
 * it: bit arithmetic or a libgcc call).  Each call picks one with
 * __builtin_cpu_supports("popcnt"); both give identical results.
 * -DMESS_NO_POPCNT_DISPATCH keeps only the baseline copy (build/mess-portable). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && \
    !defined(MESS_NO_POPCNT_DISPATCH)
#define HNSW_DISPATCH 1
#define HNSW_POPCNT __attribute__((target("popcnt")))
#endif
#if defined(__GNUC__)
#define HNSW_INLINE static inline __attribute__((always_inline))
#else
#define HNSW_INLINE static inline
#endif

static int popcount_mode = -1; /* -1 the CPU decides, 0 software, 1 instruction */

int hnsw_popcount_force(int mode)
{
    if (mode < -1 || mode > 1)
        return MESS_EINVAL;
#ifdef HNSW_DISPATCH
    if (mode == 1 && !__builtin_cpu_supports("popcnt"))
        return MESS_EINVAL;
#else
    if (mode == 1)
        return MESS_EINVAL;
#endif
    popcount_mode = mode;
    return MESS_OK;
}

int hnsw_popcount_hw(void)
{
#ifdef HNSW_DISPATCH
    if (popcount_mode >= 0)
        return popcount_mode;
    return __builtin_cpu_supports("popcnt") != 0;
#else
    return 0;
#endif
}

/* ---- small utilities ---------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t mix_label(struct hnsw_label l)
{
    uint64_t x = l.lo ^ (l.hi * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static const uint64_t *code_of(const struct hnsw *h, uint32_t node)
{
    return h->codes + (size_t)node * h->words;
}

static uint32_t *links_of(const struct hnsw *h, uint32_t node, int level)
{
    if (level == 0)
        return h->links0 + (size_t)node * (1 + h->m0);
    return h->upper[node] + (size_t)(level - 1) * (1 + h->m);
}

/* hnsw_hamming, inlined into each compiled copy of its callers */
HNSW_INLINE uint32_t ham(const uint64_t *a, const uint64_t *b, uint32_t words)
{
    uint32_t d = 0, i;
    for (i = 0; i < words; i++)
        d += (uint32_t)__builtin_popcountll(a[i] ^ b[i]);
    return d;
}

HNSW_INLINE uint32_t dist_to(const struct hnsw *h, const uint64_t *q, uint32_t node)
{
    const uint64_t *c = code_of(h, node);
    if (h->words == 2) /* the common 128-bit case, unrolled */
        return (uint32_t)(__builtin_popcountll(q[0] ^ c[0]) +
                          __builtin_popcountll(q[1] ^ c[1]));
    return ham(q, c, h->words);
}

#ifdef HNSW_DISPATCH
static HNSW_POPCNT void hamming_blocks_popcnt(const uint64_t *a, const uint64_t *b,
                                              size_t n, uint32_t words, uint32_t *dist)
{
    size_t i;
    for (i = 0; i < n; i++)
        dist[i] = ham(a + i * words, b + i * words, words);
}

static HNSW_POPCNT void hamming_many_popcnt(const uint64_t *q, const uint64_t *codes,
                                            size_t n, uint32_t words, uint32_t *dist)
{
    size_t i;
    for (i = 0; i < n; i++)
        dist[i] = ham(q, codes + i * words, words);
}
#endif

#define KEY(d, node) ((uint64_t)(d) << 32 | (uint64_t)(node))
#define KEY_DIST(k) ((uint32_t)((k) >> 32))
#define KEY_NODE(k) ((uint32_t)(k))

/* ---- lifecycle ------------------------------------------------------------ */

static int params_ok(const struct hnsw_params *p)
{
    return p && p->bits >= 64 && p->bits % 64 == 0 && p->bits <= MESS_MAX_BITS &&
           p->m >= 2 && p->m <= MESS_MAX_HNSW_M && p->ef_construction >= 1 &&
           p->ef_construction <= MESS_MAX_EF;
}

int hnsw_new(const struct hnsw_params *p, struct hnsw **out)
{
    struct hnsw *h;
    if (!out)
        return MESS_EINVAL;
    *out = NULL;
    if (!params_ok(p))
        return MESS_EINVAL;
    h = (struct hnsw *)calloc(1, sizeof *h);
    if (!h)
        return MESS_ENOMEM;
    h->p = *p;
    h->words = p->bits / 64;
    h->m = p->m;
    h->m0 = 2 * p->m;
    h->ml = 1.0 / log((double)p->m);
    h->max_level = -1;
    h->entry = EMPTY;
    h->rng = p->seed;
    h->tmp = (uint64_t *)mess_malloc_array((size_t)h->m0 + 2, sizeof *h->tmp);
    h->sel = (uint32_t *)mess_malloc_array((size_t)h->m0 + 2, sizeof *h->sel);
    h->sel2 = (uint32_t *)mess_malloc_array((size_t)h->m0 + 2, sizeof *h->sel2);
    if (!h->tmp || !h->sel || !h->sel2 || hnsw_scratch_new(&h->build) != MESS_OK) {
        hnsw_free(h);
        return MESS_ENOMEM;
    }
    *out = h;
    return MESS_OK;
}

void hnsw_free(struct hnsw *h)
{
    size_t i;
    if (!h)
        return;
    if (h->upper) /* blocks of nodes to come too (hnsw_reserve) */
        for (i = 0; i < h->cap; i++)
            free(h->upper[i]);
    free(h->upper);
    free(h->codes);
    free(h->labels);
    free(h->levels);
    free(h->deleted);
    free(h->links0);
    free(h->map);
    hnsw_scratch_free(h->build);
    free(h->tmp);
    free(h->sel);
    free(h->sel2);
    free(h);
}

const struct hnsw_params *hnsw_get_params(const struct hnsw *h)
{
    return &h->p;
}

/* Room for `need` nodes: geometric (x1.25, at least 64) so single adds
 * stay amortized O(1), but exactly `need` when that is more, so a bulk
 * insert announced by hnsw_reserve or a load leaves no slack. */
static int grow(struct hnsw *h, size_t need)
{
    size_t cap = h->cap + h->cap / 4, i;
    void *q;
    if (need <= h->cap)
        return MESS_OK;
    if (cap < 64)
        cap = 64;
    if (cap < need)
        cap = need;
#define GROW(field, elems)                                                   \
    do {                                                                     \
        size_t bytes_;                                                       \
        if (mess_mul_size(cap, (elems) * sizeof *h->field, &bytes_))         \
            return MESS_ELIMIT;                                              \
        q = realloc(h->field, bytes_);                                       \
        if (!q)                                                              \
            return MESS_ENOMEM;                                              \
        h->field = q;                                                        \
    } while (0)
    GROW(codes, h->words);
    GROW(labels, 1);
    GROW(levels, 1);
    GROW(deleted, 1);
    GROW(links0, 1 + (size_t)h->m0);
    GROW(upper, 1);
#undef GROW
    for (i = h->cap; i < cap; i++)
        h->upper[i] = NULL;
    h->cap = cap;
    return MESS_OK;
}

/* Top layer of the next node: floor(-ln(U) m_L) from the level generator
 * state *rng, which it advances. */
static int draw_level(const struct hnsw *h, uint64_t *rng)
{
    double u = ((double)(splitmix64(rng) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double l = floor(-log(u) * h->ml);
    return l > HNSW_MAX_LEVEL ? HNSW_MAX_LEVEL : (int)l;
}

static int scratch_prepare(struct hnsw_scratch *s, const struct hnsw *h,
                           size_t n, size_t ef);
static int map_rebuild(struct hnsw *h, size_t want);

/* Besides the arrays, makes every allocation the adds up to n nodes need:
 * the label map, the insert scratch, and the upper-layer link block of
 * each node to come.  Their levels are drawn ahead from a copy of the
 * level generator; the adds draw the same levels in the same order, since
 * nothing else draws from it, and find their blocks in place.  A block
 * made for a node that is never added stays valid for the next add at
 * that position until hnsw_unreserve or hnsw_free releases it.  Nothing
 * serialized changes here. */
int hnsw_reserve(struct hnsw *h, size_t n)
{
    uint64_t rng;
    size_t i;
    int rc;
    if (!h)
        return MESS_EINVAL;
    if (n > HNSW_MAX_NODES)
        return MESS_ELIMIT;
    rc = grow(h, n);
    if (rc != MESS_OK || n <= h->n)
        return rc;
    if (!h->map || 2 * n > h->map_mask + 1) {
        rc = map_rebuild(h, 2 * n);
        if (rc != MESS_OK)
            return rc;
    }
    if (scratch_prepare(h->build, h, n, h->p.ef_construction) != MESS_OK)
        return MESS_ENOMEM;
    rng = h->rng;
    for (i = h->n; i < n; i++) {
        int level = draw_level(h, &rng);
        if (level > 0 && !h->upper[i]) {
            h->upper[i] = (uint32_t *)mess_calloc_array((size_t)level * (1 + h->m),
                                                        sizeof(uint32_t));
            if (!h->upper[i])
                return MESS_ENOMEM;
        }
    }
    return MESS_OK;
}

void hnsw_unreserve(struct hnsw *h)
{
    size_t i;
    if (!h || !h->upper)
        return;
    for (i = h->n; i < h->cap; i++) {
        free(h->upper[i]);
        h->upper[i] = NULL;
    }
}

/* ---- label map -------------------------------------------------------------- */

static size_t map_find_slot(const struct hnsw *h, struct hnsw_label label)
{
    size_t s = (size_t)mix_label(label) & h->map_mask;
    while (h->map[s] != EMPTY && !hnsw_label_eq(h->labels[h->map[s]], label))
        s = (s + 1) & h->map_mask;
    return s;
}

static int map_rebuild(struct hnsw *h, size_t want)
{
    size_t size = 16, i;
    uint32_t *m;
    while (size < 2 * want)
        size *= 2;
    m = (uint32_t *)mess_malloc_array(size, sizeof *m);
    if (!m)
        return MESS_ENOMEM;
    memset(m, 0xff, size * sizeof *m);
    free(h->map);
    h->map = m;
    h->map_mask = size - 1;
    for (i = 0; i < h->n; i++)
        if (!h->deleted[i])
            h->map[map_find_slot(h, h->labels[i])] = (uint32_t)i;
    return MESS_OK;
}

int hnsw_find(const struct hnsw *h, struct hnsw_label label, uint32_t *node)
{
    size_t s;
    if (!h)
        return MESS_EINVAL;
    if (!h->map)
        return MESS_ENOTFOUND;
    s = map_find_slot(h, label);
    if (h->map[s] == EMPTY || h->deleted[h->map[s]])
        return MESS_ENOTFOUND;
    if (node)
        *node = h->map[s];
    return MESS_OK;
}

/* Removes slot s with backward shift (linear probing). */
static void map_remove(struct hnsw *h, size_t s)
{
    size_t j = s;
    for (;;) {
        size_t home;
        j = (j + 1) & h->map_mask;
        if (h->map[j] == EMPTY)
            break;
        home = (size_t)mix_label(h->labels[h->map[j]]) & h->map_mask;
        if ((s < j) ? (home <= s || home > j) : (home <= s && home > j)) {
            h->map[s] = h->map[j];
            s = j;
        }
    }
    h->map[s] = EMPTY;
}

int hnsw_delete(struct hnsw *h, struct hnsw_label label)
{
    size_t s;
    if (!h)
        return MESS_EINVAL;
    if (!h->map)
        return MESS_ENOTFOUND;
    s = map_find_slot(h, label);
    if (h->map[s] == EMPTY)
        return MESS_ENOTFOUND;
    h->deleted[h->map[s]] = 1;
    h->n_deleted++;
    map_remove(h, s);
    return MESS_OK;
}

/* ---- scratch ------------------------------------------------------------------ */

int hnsw_scratch_new(struct hnsw_scratch **out)
{
    if (!out)
        return MESS_EINVAL;
    *out = (struct hnsw_scratch *)calloc(1, sizeof **out);
    return *out ? MESS_OK : MESS_ENOMEM;
}

void hnsw_scratch_free(struct hnsw_scratch *s)
{
    if (!s)
        return;
    free(s->mark);
    free(s->pool);
    free(s->cand_head);
    free(s->res_head);
    free(s->out);
    free(s->pending);
    free(s);
}

/* Starts a new visit: bumps the epoch, clearing marks when it wraps. */
static void scratch_next_epoch(struct hnsw_scratch *s)
{
    if (++s->epoch == 0) {
        memset(s->mark, 0, s->mark_cap * sizeof *s->mark);
        s->epoch = 1;
    }
}

/* Grows *a (elem-byte items) to hold at least need, by 1.5x steps. */
static int grow_array(void **a, size_t *cap, size_t need, size_t elem)
{
    size_t c = need + need / 2 + 64;
    void *q;
    if (need <= *cap)
        return MESS_OK;
    q = mess_malloc_array(c, elem);
    if (!q)
        return MESS_ENOMEM;
    free(*a);
    *a = q;
    *cap = c;
    return MESS_OK;
}

/* Prepares marks for n nodes, queues for a search of beam ef over n nodes
 * (each node enters each queue at most once), and starts a new visit. */
static int scratch_prepare(struct hnsw_scratch *s, const struct hnsw *h,
                           size_t n, size_t ef)
{
    uint32_t nb = h->p.bits + 1;
    if (n > s->mark_cap) {
        size_t cap = n + n / 2 + 64;
        uint16_t *m = (uint16_t *)mess_calloc_array(cap, sizeof *m);
        if (!m)
            return MESS_ENOMEM;
        free(s->mark);
        s->mark = m;
        s->mark_cap = cap;
        s->epoch = 0;
    }
    if (nb > s->nbuckets) {
        uint32_t *c = (uint32_t *)mess_malloc_array(nb, sizeof *c);
        uint32_t *r = (uint32_t *)mess_malloc_array(nb, sizeof *r);
        if (!c || !r) {
            free(c);
            free(r);
            return MESS_ENOMEM;
        }
        free(s->cand_head);
        free(s->res_head);
        s->cand_head = c;
        s->res_head = r;
        s->nbuckets = nb;
    }
    if (grow_array((void **)&s->pool, &s->pool_cap, 2 * n + 2, sizeof *s->pool) ||
        grow_array((void **)&s->out, &s->out_cap, ef + 1, sizeof *s->out) ||
        grow_array((void **)&s->pending, &s->pending_cap, (size_t)h->m0 + 1,
                   sizeof *s->pending))
        return MESS_ENOMEM;
    scratch_next_epoch(s);
    return MESS_OK;
}

/* ---- search ----------------------------------------------------------------------- */

/* Greedy descent on one layer from *ep (Alg. 2 with ef = 1). */
HNSW_INLINE void greedy(const struct hnsw *h, const uint64_t *q, int level,
                   uint32_t *ep, uint32_t *ep_dist)
{
    int changed = 1;
    while (changed) {
        const uint32_t *l = links_of(h, *ep, level);
        uint32_t i;
        changed = 0;
        for (i = 1; i <= l[0]; i++) {
            uint32_t d = dist_to(h, q, l[i]);
            if (d < *ep_dist || (d == *ep_dist && l[i] < *ep)) {
                *ep_dist = d;
                *ep = l[i];
                changed = 1;
            }
        }
    }
}

#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

#define NIL UINT32_MAX

/* Sorts keys ascending: insertion sort for short runs (one distance bucket,
 * a link list), quicksort with median-of-three pivots above that. */
static void sort_keys(uint64_t *k, size_t n)
{
    while (n > 24) {
        uint64_t a = k[0], b = k[n / 2], c = k[n - 1], pivot, t;
        size_t i = 0, j = n - 1;
        pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        for (;;) {
            while (k[i] < pivot)
                i++;
            while (k[j] > pivot)
                j--;
            if (i >= j)
                break;
            t = k[i];
            k[i] = k[j];
            k[j] = t;
            i++;
            j--;
        }
        /* recurse into the smaller part, loop on the larger */
        if (j + 1 < n - j - 1) {
            sort_keys(k, j + 1);
            k += j + 1;
            n -= j + 1;
        } else {
            sort_keys(k + j + 1, n - j - 1);
            n = j + 1;
        }
    }
    {
        size_t i, j;
        for (i = 1; i < n; i++) {
            uint64_t v = k[i];
            for (j = i; j > 0 && k[j - 1] > v; j--)
                k[j] = k[j - 1];
            k[j] = v;
        }
    }
}

/* Beam search of one layer (Alg. 2) from ep, with beam ef >= 1.  With
 * live_only, deleted nodes route but never enter the result set.  The
 * caller has started a visit (scratch_prepare / scratch_next_epoch).  On
 * return s->out holds the results as (distance << 32 | node) keys,
 * ascending (ties by node id); the count is returned. */
HNSW_INLINE size_t search_layer(const struct hnsw *h, struct hnsw_scratch *s,
                           const uint64_t *q, uint32_t ep, uint32_t ep_dist,
                           size_t ef, int level, int live_only)
{
    struct bq_entry *pool = s->pool;
    uint32_t *ch = s->cand_head, *rh = s->res_head, *pend = s->pending;
    uint16_t *mark = s->mark, epoch = s->epoch;
    const uint32_t words = h->words, bits = h->p.bits;
    uint32_t used = 0, cmin, rmax = 0, d, i, np;
    size_t nr = 0, ncand = 0, k;

    memset(ch, 0xff, (size_t)(bits + 1) * sizeof *ch);
    memset(rh, 0xff, (size_t)(bits + 1) * sizeof *rh);
#define BQ_PUSH(head, dist, id)                                              \
    do {                                                                     \
        pool[used].node = (id);                                              \
        pool[used].next = head[dist];                                        \
        head[dist] = used++;                                                 \
    } while (0)

    mark[ep] = epoch;
    BQ_PUSH(ch, ep_dist, ep);
    ncand = 1;
    cmin = ep_dist;
    if (!live_only || !h->deleted[ep]) {
        BQ_PUSH(rh, ep_dist, ep);
        nr = 1;
        rmax = ep_dist;
    }
    while (ncand > 0) {
        uint32_t c, e;
        const uint32_t *l;
        while (ch[cmin] == NIL)
            cmin++;
        if (nr >= ef && cmin > rmax)
            break;
        c = pool[ch[cmin]].node;
        ch[cmin] = pool[ch[cmin]].next;
        ncand--;
        l = links_of(h, c, level);
        /* the likely next candidate's links, while this one is expanded */
        if (ch[cmin] != NIL)
            PREFETCH(links_of(h, pool[ch[cmin]].node, level));
        /* gather the unvisited neighbours and prefetch their codes before
         * computing any distance: mark and code loads are the cache misses */
        for (i = 1; i <= l[0]; i++)
            PREFETCH(mark + l[i]);
        np = 0;
        for (i = 1; i <= l[0]; i++) {
            e = l[i];
            if (mark[e] != epoch) {
                mark[e] = epoch;
                pend[np++] = e;
                PREFETCH(h->codes + (size_t)e * words);
            }
        }
        for (i = 0; i < np; i++) {
            e = pend[i];
            d = dist_to(h, q, e);
            if (nr < ef || d < rmax) {
                BQ_PUSH(ch, d, e);
                ncand++;
                if (d < cmin)
                    cmin = d;
                if (live_only && h->deleted[e])
                    continue;
                BQ_PUSH(rh, d, e);
                if (d > rmax || nr == 0)
                    rmax = d;
                if (++nr > ef) {
                    rh[rmax] = pool[rh[rmax]].next;
                    nr--;
                    while (rh[rmax] == NIL)
                        rmax--;
                }
            }
        }
    }
#undef BQ_PUSH
    /* drain the result buckets in ascending distance */
    k = 0;
    for (d = 0; d <= rmax && k < nr; d++) {
        size_t first = k;
        uint32_t j;
        for (j = rh[d]; j != NIL; j = pool[j].next)
            s->out[k++] = KEY(d, pool[j].node);
        sort_keys(s->out + first, k - first);
    }
    return k;
}

HNSW_INLINE int search_body(const struct hnsw *h, struct hnsw_scratch *s,
                            const uint64_t *query, size_t P, size_t ef,
                            struct hnsw_hit *out, size_t *n_out)
{
    uint32_t ep, epd;
    size_t nres, i;
    int level, rc;

    if (!h || !s || !query || (!out && P) || !n_out)
        return MESS_EINVAL;
    *n_out = 0;
    if (P == 0 || h->n == 0)
        return MESS_OK;
    if (ef < P)
        ef = P;
    if (ef > h->n)
        ef = h->n;
    rc = scratch_prepare(s, h, h->n, ef);
    if (rc != MESS_OK)
        return rc;
    ep = h->entry;
    epd = dist_to(h, query, ep);
    for (level = h->max_level; level > 0; level--)
        greedy(h, query, level, &ep, &epd);
    nres = search_layer(h, s, query, ep, epd, ef, 0, 1);
    for (i = 0; i < nres && i < P; i++) {
        out[i].node = KEY_NODE(s->out[i]);
        out[i].dist = KEY_DIST(s->out[i]);
        out[i].label = h->labels[out[i].node];
    }
    *n_out = i;
    return MESS_OK;
}

#ifdef HNSW_DISPATCH
static HNSW_POPCNT int search_popcnt(const struct hnsw *h, struct hnsw_scratch *s,
                                     const uint64_t *query, size_t P, size_t ef,
                                     struct hnsw_hit *out, size_t *n_out)
{
    return search_body(h, s, query, P, ef, out, n_out);
}
#endif

static int search_soft(const struct hnsw *h, struct hnsw_scratch *s,
                       const uint64_t *query, size_t P, size_t ef,
                       struct hnsw_hit *out, size_t *n_out)
{
    return search_body(h, s, query, P, ef, out, n_out);
}

int hnsw_search(const struct hnsw *h, struct hnsw_scratch *s,
                const uint64_t *query, size_t P, size_t ef,
                struct hnsw_hit *out, size_t *n_out)
{
#ifdef HNSW_DISPATCH
    if (hnsw_popcount_hw())
        return search_popcnt(h, s, query, P, ef, out, n_out);
#endif
    return search_soft(h, s, query, P, ef, out, n_out);
}

void hnsw_hamming_many(const uint64_t *q, const uint64_t *codes, size_t n,
                       uint32_t words, uint32_t *dist)
{
    size_t i;
#ifdef HNSW_DISPATCH
    if (hnsw_popcount_hw()) {
        hamming_many_popcnt(q, codes, n, words, dist);
        return;
    }
#endif
    for (i = 0; i < n; i++)
        dist[i] = ham(q, codes + i * words, words);
}

void hnsw_hamming_blocks(const uint64_t *a, const uint64_t *b, size_t n,
                         uint32_t words, uint32_t *dist)
{
    size_t i;
#ifdef HNSW_DISPATCH
    if (hnsw_popcount_hw()) {
        hamming_blocks_popcnt(a, b, n, words, dist);
        return;
    }
#endif
    for (i = 0; i < n; i++)
        dist[i] = ham(a + i * words, b + i * words, words);
}

/* ---- insert ---------------------------------------------------------------------- */

/* Heuristic neighbour selection (Alg. 4): candidates keys ascending; keep e
 * unless an already kept r is strictly closer to e than the base is.
 * Writes at most `max` ids to sel and returns how many. */
HNSW_INLINE uint32_t select_heuristic(const struct hnsw *h, const uint64_t *keys,
                                 size_t nkeys, uint32_t max, uint32_t *sel)
{
    uint32_t ns = 0;
    size_t i;
    for (i = 0; i < nkeys && ns < max; i++) {
        uint32_t e = KEY_NODE(keys[i]), de = KEY_DIST(keys[i]), j;
        int good = 1;
        for (j = 0; j < ns && good; j++)
            if (ham(code_of(h, e), code_of(h, sel[j]), h->words) < de)
                good = 0;
        if (good)
            sel[ns++] = e;
    }
    return ns;
}

/* Adds link node -> e at level, shrinking e's list by the heuristic when
 * it overflows. */
HNSW_INLINE void add_link(struct hnsw *h, uint32_t from, uint32_t to, int level,
                     uint64_t *tmp, uint32_t *sel)
{
    uint32_t *l = links_of(h, from, level);
    uint32_t max = level == 0 ? h->m0 : h->m, i, k;
    for (i = 1; i <= l[0]; i++)
        if (l[i] == to)
            return;
    if (l[0] < max) {
        l[++l[0]] = to;
        return;
    }
    for (i = 0; i < l[0]; i++)
        tmp[i] = KEY(ham(code_of(h, from), code_of(h, l[i + 1]), h->words), l[i + 1]);
    tmp[i] = KEY(ham(code_of(h, from), code_of(h, to), h->words), to);
    sort_keys(tmp, (size_t)l[0] + 1);
    k = select_heuristic(h, tmp, (size_t)l[0] + 1, max, sel);
    for (i = 0; i < k; i++)
        l[i + 1] = sel[i];
    l[0] = k;
}

HNSW_INLINE int add_body(struct hnsw *h, const uint64_t *code, struct hnsw_label label,
                         uint32_t *node_out)
{
    struct hnsw_scratch *s;
    uint32_t node, ep, epd;
    int level, lc, rc;
    size_t nres, slot;
    uint64_t rng;

    if (!h || !code)
        return MESS_EINVAL;
    if (h->n >= HNSW_MAX_NODES)
        return MESS_ELIMIT;
    if (hnsw_find(h, label, NULL) == MESS_OK)
        return MESS_EINVAL;
    rc = grow(h, h->n + 1);
    if (rc != MESS_OK)
        return rc;
    if (!h->map || 2 * (h->n + 1) > h->map_mask + 1) {
        rc = map_rebuild(h, 2 * (h->n + 1));
        if (rc != MESS_OK)
            return rc;
    }
    /* the generator advances only once the add cannot fail any more */
    rng = h->rng;
    level = draw_level(h, &rng);
    node = (uint32_t)h->n;
    if (level > 0 && !h->upper[node]) {
        h->upper[node] = (uint32_t *)mess_calloc_array((size_t)level * (1 + h->m), sizeof(uint32_t));
        if (!h->upper[node])
            return MESS_ENOMEM;
    }
    s = h->build;
    if (scratch_prepare(s, h, h->n + 1, h->p.ef_construction) != MESS_OK)
        return MESS_ENOMEM; /* the block, if any, stays for this node's retry */
    h->rng = rng;
    memcpy(h->codes + (size_t)node * h->words, code, (size_t)h->words * 8);
    h->labels[node] = label;
    h->levels[node] = (uint8_t)level;
    h->deleted[node] = 0;
    h->links0[(size_t)node * (1 + h->m0)] = 0;
    h->n++;
    slot = map_find_slot(h, label);
    h->map[slot] = node;

    if (h->max_level < 0) {
        h->entry = node;
        h->max_level = level;
        if (node_out)
            *node_out = node;
        return MESS_OK;
    }
    ep = h->entry;
    epd = dist_to(h, code, ep);
    for (lc = h->max_level; lc > level; lc--)
        greedy(h, code, lc, &ep, &epd);
    for (lc = level < h->max_level ? level : h->max_level; lc >= 0; lc--) {
        uint32_t k, i, *l;
        scratch_next_epoch(s);
        s->mark[node] = s->epoch; /* never link to itself */
        nres = search_layer(h, s, code, ep, epd, h->p.ef_construction, lc, 0);
        k = select_heuristic(h, s->out, nres, h->m, h->sel);
        l = links_of(h, node, lc);
        l[0] = k;
        for (i = 0; i < k; i++)
            l[i + 1] = h->sel[i];
        for (i = 0; i < k; i++)
            add_link(h, l[i + 1], node, lc, h->tmp, h->sel2);
        /* the closest found is the entry to the next layer down */
        if (nres > 0) {
            ep = KEY_NODE(s->out[0]);
            epd = KEY_DIST(s->out[0]);
        }
    }
    if (level > h->max_level) {
        h->max_level = level;
        h->entry = node;
    }
    if (node_out)
        *node_out = node;
    return MESS_OK;
}

#ifdef HNSW_DISPATCH
static HNSW_POPCNT int add_popcnt(struct hnsw *h, const uint64_t *code,
                                  struct hnsw_label label, uint32_t *node_out)
{
    return add_body(h, code, label, node_out);
}
#endif

static int add_soft(struct hnsw *h, const uint64_t *code, struct hnsw_label label,
                    uint32_t *node_out)
{
    return add_body(h, code, label, node_out);
}

int hnsw_add(struct hnsw *h, const uint64_t *code, struct hnsw_label label,
             uint32_t *node_out)
{
#ifdef HNSW_DISPATCH
    if (hnsw_popcount_hw())
        return add_popcnt(h, code, label, node_out);
#endif
    return add_soft(h, code, label, node_out);
}

/* ---- maintenance and accessors ------------------------------------------------ */

int hnsw_compact(const struct hnsw *h, struct hnsw **out, uint32_t *old_to_new)
{
    struct hnsw *c;
    size_t i;
    int rc;
    if (!h || !out)
        return MESS_EINVAL;
    *out = NULL;
    rc = hnsw_new(&h->p, &c);
    if (rc != MESS_OK)
        return rc;
    for (i = 0; i < h->n; i++) {
        uint32_t node = EMPTY;
        if (!h->deleted[i]) {
            rc = hnsw_add(c, code_of(h, (uint32_t)i), h->labels[i], &node);
            if (rc != MESS_OK) {
                hnsw_free(c);
                return rc;
            }
        }
        if (old_to_new)
            old_to_new[i] = node;
    }
    *out = c;
    return MESS_OK;
}

size_t hnsw_count(const struct hnsw *h) { return h ? h->n : 0; }
size_t hnsw_deleted(const struct hnsw *h) { return h ? h->n_deleted : 0; }
size_t hnsw_live(const struct hnsw *h) { return h ? h->n - h->n_deleted : 0; }
uint32_t hnsw_entry_point(const struct hnsw *h) { return h ? h->entry : EMPTY; }

size_t hnsw_bytes(const struct hnsw *h)
{
    size_t b, i;
    if (!h)
        return 0;
    b = sizeof *h + h->cap * ((size_t)h->words * 8 + sizeof *h->labels + 1 + 1 +
                              (1 + (size_t)h->m0) * 4 + sizeof(uint32_t *));
    b += (h->map ? h->map_mask + 1 : 0) * sizeof(uint32_t);
    for (i = 0; i < h->n; i++)
        b += (size_t)h->levels[i] * (1 + h->m) * 4;
    return b;
}

uint32_t hnsw_level(const struct hnsw *h, uint32_t node)
{
    return h && node < h->n ? h->levels[node] : 0;
}

int hnsw_neighbors(const struct hnsw *h, uint32_t node, uint32_t level,
                   const uint32_t **ids, size_t *n)
{
    const uint32_t *l;
    if (!h || !ids || !n || node >= h->n || level > h->levels[node])
        return MESS_EINVAL;
    l = links_of(h, node, (int)level);
    *ids = l + 1;
    *n = l[0];
    return MESS_OK;
}

const uint64_t *hnsw_code(const struct hnsw *h, uint32_t node)
{
    return h && node < h->n ? code_of(h, node) : NULL;
}

struct hnsw_label hnsw_label(const struct hnsw *h, uint32_t node)
{
    return h && node < h->n ? h->labels[node] : hnsw_label_of(0, 0);
}

int hnsw_is_deleted(const struct hnsw *h, uint32_t node)
{
    return h && node < h->n ? h->deleted[node] : 0;
}

/* ---- serialization ----------------------------------------------------------------
 *
 *   "HNSW" | u32 version 2 | u32 bits | u32 m | u32 ef_construction |
 *   u64 seed | u64 level-generator state | u64 n | u32 entry |
 *   u32 max_level + 1 (0 when empty)
 *   n x (label[16] (u64 lo | u64 hi) | u8 level | u8 deleted | code words)
 * Version 1 (64-bit labels) is refused with MESS_EVERSION.
 *   n x (for level 0..node level: u32 count | count x u32 id)
 */
static const uint8_t hnsw_magic[4] = {'H', 'N', 'S', 'W'};
#define HNSW_FORMAT_VERSION 2

int hnsw_serialize(const struct hnsw *h, struct mess_wr *w)
{
    size_t i;
    uint32_t k;
    int lv;
    if (!h || !w)
        return MESS_EINVAL;
    mess_wr_bytes(w, hnsw_magic, 4);
    mess_wr_u32(w, HNSW_FORMAT_VERSION);
    mess_wr_u32(w, h->p.bits);
    mess_wr_u32(w, h->p.m);
    mess_wr_u32(w, h->p.ef_construction);
    mess_wr_u64(w, h->p.seed);
    mess_wr_u64(w, h->rng);
    mess_wr_u64(w, h->n);
    mess_wr_u32(w, h->entry);
    mess_wr_u32(w, (uint32_t)(h->max_level + 1));
    for (i = 0; i < h->n; i++) {
        mess_wr_u64(w, h->labels[i].lo);
        mess_wr_u64(w, h->labels[i].hi);
        mess_wr_u8(w, h->levels[i]);
        mess_wr_u8(w, h->deleted[i]);
        for (k = 0; k < h->words; k++)
            mess_wr_u64(w, h->codes[i * h->words + k]);
    }
    for (i = 0; i < h->n; i++)
        for (lv = 0; lv <= h->levels[i]; lv++) {
            const uint32_t *l = links_of(h, (uint32_t)i, lv);
            for (k = 0; k <= l[0]; k++)
                mess_wr_u32(w, l[k]);
        }
    return w->err;
}

int hnsw_deserialize(struct mess_rd *r, const struct hnsw_params *expect,
                     struct hnsw **out)
{
    struct hnsw_params p;
    struct hnsw *h = NULL;
    const uint8_t *magic;
    uint32_t version, entry, top, k;
    uint64_t n, state;
    size_t i, rec;
    int rc = MESS_EFORMAT, lv, seen_top = 0;
    size_t upper_counts = 0;

    if (!r || !out)
        return MESS_EINVAL;
    *out = NULL;
    memset(&p, 0, sizeof p);
    magic = mess_rd_take(r, 4);
    if (!magic || memcmp(magic, hnsw_magic, 4) != 0 || mess_rd_u32(r, &version))
        return MESS_EFORMAT;
    if (version != HNSW_FORMAT_VERSION)
        return MESS_EVERSION;
    if (mess_rd_u32(r, &p.bits) || mess_rd_u32(r, &p.m) ||
        mess_rd_u32(r, &p.ef_construction) || mess_rd_u64(r, &p.seed) ||
        mess_rd_u64(r, &state) || mess_rd_u64(r, &n) || mess_rd_u32(r, &entry) ||
        mess_rd_u32(r, &top))
        return MESS_EFORMAT;
    if (!params_ok(&p))
        return MESS_EFORMAT;
    if (expect && (expect->bits != p.bits || expect->m != p.m ||
                   expect->ef_construction != p.ef_construction ||
                   expect->seed != p.seed))
        return MESS_EPARAM;
    /* each node needs at least its record and one link count */
    rec = 16 + 2 + (size_t)p.bits / 8 + 4;
    if (n > HNSW_MAX_NODES || n > mess_rd_left(r) / rec || top > HNSW_MAX_LEVEL + 1 ||
        (n == 0) != (top == 0) || (n > 0 && entry >= n) || (n == 0 && entry != EMPTY))
        return MESS_EFORMAT;
    rc = hnsw_new(&p, &h);
    if (rc != MESS_OK)
        return rc;
    rc = MESS_EFORMAT;
    if (grow(h, (size_t)n) != MESS_OK) {
        rc = MESS_ENOMEM;
        goto fail;
    }
    for (i = 0; i < n; i++) {
        if (mess_rd_u64(r, &h->labels[i].lo) || mess_rd_u64(r, &h->labels[i].hi) ||
            mess_rd_u8(r, &h->levels[i]) ||
            mess_rd_u8(r, &h->deleted[i]))
            goto fail;
        if (h->levels[i] > HNSW_MAX_LEVEL || h->levels[i] >= top || h->deleted[i] > 1)
            goto fail;
        if (h->levels[i] + 1u == top)
            seen_top = 1;
        for (k = 0; k < h->words; k++)
            if (mess_rd_u64(r, &h->codes[i * h->words + k]))
                goto fail;
        h->n_deleted += h->deleted[i];
        h->n = i + 1; /* so hnsw_free releases upper blocks allocated so far */
        /* every level of every node is followed by at least its link count:
         * allocate upper blocks only for levels the input has bytes for */
        upper_counts += h->levels[i];
        if (upper_counts > mess_rd_left(r) / 4)
            goto fail;
        if (h->levels[i] > 0) {
            h->upper[i] = (uint32_t *)mess_calloc_array((size_t)h->levels[i] * (1 + h->m), 4);
            if (!h->upper[i]) {
                rc = MESS_ENOMEM;
                goto fail;
            }
        }
    }
    if (n > 0 && (!seen_top || h->levels[entry] + 1u != top))
        goto fail;
    for (i = 0; i < n; i++)
        for (lv = 0; lv <= h->levels[i]; lv++) {
            uint32_t *l = links_of(h, (uint32_t)i, lv), cnt, max = lv == 0 ? h->m0 : h->m;
            if (mess_rd_u32(r, &cnt) || cnt > max)
                goto fail;
            l[0] = cnt;
            for (k = 1; k <= cnt; k++) {
                uint32_t e, j;
                if (mess_rd_u32(r, &e) || e >= n || e == i || h->levels[e] < lv)
                    goto fail;
                for (j = 1; j < k; j++)
                    if (l[j] == e)
                        goto fail;
                l[k] = e;
            }
        }
    h->entry = n ? entry : EMPTY;
    h->max_level = (int)top - 1;
    h->rng = state;
    if (map_rebuild(h, (size_t)n + 1) != MESS_OK) {
        rc = MESS_ENOMEM;
        goto fail;
    }
    /* live labels must be unique: the map holds one node per label */
    {
        size_t live = 0;
        for (i = 0; i < h->map_mask + 1; i++)
            live += h->map[i] != EMPTY;
        if (live != h->n - h->n_deleted)
            goto fail;
    }
    *out = h;
    return MESS_OK;
fail:
    hnsw_free(h);
    return rc;
}
