/*
 * hnsw_bin.c - HNSW over packed binary codes (Hamming distance): the core
 * graph (lifecycle, label map, scratch, search, insert, delete,
 * compaction, accessors) and the Hamming distance with its POPCNT
 * dispatch.  The rest of the index is in src/index/: the interleaved
 * search (hnsw_many.c), the travel form, the graph file and its check
 * (hnsw_file.c), the checkpoint deltas (hnsw_delta.c); the layout of
 * struct hnsw and struct hnsw_scratch, and the helpers every part
 * inlines, in hnsw_internal.h.  Those files call this one, never the
 * reverse.
 *
 * Searches use bucket queues over the integer distances (see struct
 * hnsw_scratch); sorted results are 64-bit keys (distance << 32 | node), so
 * ties break by node id.
 *
 * An attached graph (hnsw_attach) reads nodes 0..n_base-1 from the
 * caller's mapping of a graph file (format in src/index/hnsw_file.c)
 * and keeps nodes added later in the same heap arrays a built graph uses
 * (the "tail"); every id, count, level and offset read from the mapping is
 * checked before use, since the file may be hostile.
 */
#include <math.h>

#include "hnsw_internal.h"
#include "simd.h"

/* ---- popcount at run time ------------------------------------------------
 * The copies and their choice: HNSW_DISPATCH in hnsw_internal.h; what the
 * CPU offers and the forced choice: SIMD_POPCOUNT in src/common/simd.h. */

int hnsw_popcount_force(int mode)
{
    return simd_force(SIMD_POPCOUNT, mode);
}

int hnsw_popcount_hw(void)
{
#ifdef HNSW_DISPATCH
    return simd_level(SIMD_POPCOUNT);
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

/* ---- lifecycle ------------------------------------------------------------ */

int hnsw_params_ok(const struct hnsw_params *p)
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
    if (!hnsw_params_ok(p))
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
    if (!h->map_mapped)
        free(h->map);
    hnsw_scratch_free(h->build);
    free(h->tmp);
    free(h->sel);
    free(h->sel2);
    free(h->dirty);
    hnsw_layout_drop(h);
    free(h);
}

const struct hnsw_params *hnsw_get_params(const struct hnsw *h)
{
    return &h->p;
}

/* Room for `need` nodes in all (the tail arrays hold need - n_base):
 * geometric (x1.25, at least 64) so single adds stay amortized O(1), but
 * exactly `need` when that is more, so a bulk insert announced by
 * hnsw_reserve or a load leaves no slack. */
int hnsw_grow(struct hnsw *h, size_t need)
{
    size_t cap = h->cap + h->cap / 4, i;
    void *q;
    if (need <= h->n_base + h->cap)
        return MESS_OK;
    need -= h->n_base;
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
    if (hnsw_layout_grow(h, h->n_base + cap) != MESS_OK)
        return MESS_ENOMEM; /* the arrays grown stay; the next call retries */
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
    rc = hnsw_grow(h, n);
    if (rc != MESS_OK || n <= h->n)
        return rc;
    if (!h->map || 2 * n > h->map_mask + 1) {
        rc = hnsw_map_rebuild(h, 2 * n);
        if (rc != MESS_OK)
            return rc;
    }
    if (scratch_prepare(h->build, h, n, h->p.ef_construction) != MESS_OK)
        return MESS_ENOMEM;
    rng = h->rng;
    for (i = h->n - h->n_base; i < n - h->n_base; i++) {
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
    for (i = h->n - h->n_base; i < h->cap; i++) {
        free(h->upper[i]);
        h->upper[i] = NULL;
    }
}

/* ---- label map -------------------------------------------------------------- */

/* The slot of map (mask + 1 slots) holding label, or the empty slot where
 * it would go; NO_SLOT when neither turns up within mask + 1 probes (only
 * in a hostile attached file: a valid map is never full).  Slots naming a
 * node >= h->n (hostile) are skipped as holding another label. */
static size_t map_slot_in(const struct hnsw *h, const uint32_t *map, size_t mask,
                          struct hnsw_label label)
{
    size_t s = (size_t)mix_label(label) & mask, k;
    for (k = 0; k <= mask; k++) {
        uint32_t v = map[s];
        if (v == EMPTY || (v < h->n && hnsw_label_eq(*label_ptr(h, v), label)))
            return s;
        s = (s + 1) & mask;
    }
    return NO_SLOT;
}

size_t hnsw_map_find_slot(const struct hnsw *h, struct hnsw_label label)
{
    return map_slot_in(h, h->map, h->map_mask, label);
}

/* The live nodes' labels in node order into map (mask + 1 slots, all
 * EMPTY, more slots than nodes): the canonical map the graph file holds. */
void hnsw_map_fill(const struct hnsw *h, uint32_t *map, size_t mask)
{
    size_t i, s;
    for (i = 0; i < h->n; i++)
        if (!*del_ptr(h, (uint32_t)i)) {
            s = map_slot_in(h, map, mask, *label_ptr(h, (uint32_t)i));
            if (s != NO_SLOT)
                map[s] = (uint32_t)i;
        }
}

/* Slots of a map for `want` entries (a power of two, >= 2 want, >= 16). */
size_t hnsw_map_size_for(size_t want)
{
    size_t size = 16;
    while (size < 2 * want)
        size *= 2;
    return size;
}

int hnsw_map_rebuild(struct hnsw *h, size_t want)
{
    size_t size = hnsw_map_size_for(want);
    uint32_t *m;
    m = (uint32_t *)mess_malloc_array(size, sizeof *m);
    if (!m)
        return MESS_ENOMEM;
    memset(m, 0xff, size * sizeof *m);
    if (!h->map_mapped)
        free(h->map);
    h->map = m;
    h->map_mapped = 0;
    h->map_mask = size - 1;
    hnsw_map_fill(h, m, h->map_mask);
    return MESS_OK;
}

int hnsw_find(const struct hnsw *h, struct hnsw_label label, uint32_t *node)
{
    size_t s;
    if (!h)
        return MESS_EINVAL;
    if (!h->map)
        return MESS_ENOTFOUND;
    s = hnsw_map_find_slot(h, label);
    if (s == NO_SLOT || h->map[s] == EMPTY || *del_ptr(h, h->map[s]))
        return MESS_ENOTFOUND;
    if (node)
        *node = h->map[s];
    return MESS_OK;
}

/* Removes slot s with backward shift (linear probing); at most one pass
 * over the table, and slots naming no node (hostile) stay where they are. */
void hnsw_map_remove(struct hnsw *h, size_t s)
{
    size_t j = s, k;
    for (k = 0; k < h->map_mask; k++) {
        size_t home;
        uint32_t v;
        j = (j + 1) & h->map_mask;
        v = h->map[j];
        if (v == EMPTY)
            break;
        if (v >= h->n)
            continue;
        home = (size_t)mix_label(*label_ptr(h, v)) & h->map_mask;
        if ((s < j) ? (home <= s || home > j) : (home <= s && home > j)) {
            h->map[s] = v;
            s = j;
        }
    }
    h->map[s] = EMPTY;
}

int hnsw_delete(struct hnsw *h, struct hnsw_label label)
{
    size_t s;
    uint8_t *del;
    if (!h)
        return MESS_EINVAL;
    if (!h->map)
        return MESS_ENOTFOUND;
    s = hnsw_map_find_slot(h, label);
    if (s == NO_SLOT || h->map[s] == EMPTY)
        return MESS_ENOTFOUND;
    del = del_ptr(h, h->map[s]);
    if (*del) /* a hostile file's map names a deleted node */
        return MESS_ENOTFOUND;
    *del = 1;
    mark_dirty(h, h->map[s], DIRTY_DEL);
    if (h->n_deleted < h->n) /* a hostile header's count stays <= n */
        h->n_deleted++;
    hnsw_map_remove(h, s);
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
    free(s->vis);
    free(s->vlist);
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
    if (scratch_grow_buckets(s, nb))
        return MESS_ENOMEM;
    if (grow_array((void **)&s->pool, &s->pool_cap, 2 * n + 2, sizeof *s->pool) ||
        grow_array((void **)&s->out, &s->out_cap, ef + 1, sizeof *s->out) ||
        grow_array((void **)&s->pending, &s->pending_cap, (size_t)h->m0 + 1,
                   sizeof *s->pending))
        return MESS_ENOMEM;
    scratch_next_epoch(s);
    return MESS_OK;
}

void hnsw_scratch_counts(const struct hnsw_scratch *s, struct hnsw_counts *out)
{
    if (!out)
        return;
    if (!s)
        memset(out, 0, sizeof *out);
    else
        *out = s->cnt;
}

void hnsw_scratch_counts_reset(struct hnsw_scratch *s)
{
    if (s)
        memset(&s->cnt, 0, sizeof s->cnt);
}

/* ---- search ----------------------------------------------------------------------- */

/* Greedy descent on one layer from *ep (Alg. 2 with ef = 1). */
HNSW_INLINE void greedy(const struct hnsw *h, const uint64_t *q, int level,
                   uint32_t *ep, uint32_t *ep_dist, uint64_t *scored)
{
    int changed = 1;
    /* each step lowers (distance, node): no cycle, whatever the links */
    while (changed) {
        const uint32_t *l = links_of(h, *ep, level);
        uint32_t i, cnt;
        changed = 0;
        if (!l)
            break;
        cnt = link_count(h, l, level);
        for (i = 1; i <= cnt; i++) {
            uint32_t e = l[i], d;
            if (e >= h->n)
                continue;
            d = dist_to(h, q, e);
            ++*scored;
            if (d < *ep_dist || (d == *ep_dist && e < *ep)) {
                *ep_dist = d;
                *ep = e;
                changed = 1;
            }
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
                           size_t ef, int level, int live_only,
                           hnsw_score_list_fn score)
{
    uint32_t *pend = s->pending;
    uint16_t *mark = s->mark, epoch = s->epoch;
    const uint32_t bits = h->p.bits;
    const size_t n = h->n;
    uint32_t d, i, np, cnt;
    size_t k;
    /* the queues (struct bq), updated by bq_offer */
    struct bq Q;
    /* deleted nodes route but never enter the results */
    const int check_dead = live_only && h->n_deleted != 0;
    /* a whole neighbour list scored at once (hnsw_score.c) when the codes
     * are 128 bits in one array: a heap graph, or an attached one without
     * a tail */
    const uint64_t *codes1 = h->n_base ? h->bcodes : h->codes;
    uint32_t dist[HNSW_SCORE_MAX];
    if (h->words != 2 || (h->n_base != 0 && h->n_base != h->n))
        score = NULL;

    Q.pool = s->pool;
    Q.cand = s->cand_head;
    Q.res = s->res_head;
    Q.ef = ef;
    Q.nr = 0;
    Q.ncand = 0;
    Q.used = 0;
    Q.rmax = 0;
    memset(Q.cand, 0xff, (size_t)(bits + 1) * sizeof *Q.cand);
    memset(Q.res, 0xff, (size_t)(bits + 1) * sizeof *Q.res);

    mark[ep] = epoch;
    BQ_PUSH_(&Q, cand, ep_dist, ep);
    Q.ncand = 1;
    Q.cmin = ep_dist;
    if (!live_only || !h->n_deleted || !*del_ptr(h, ep)) {
        BQ_PUSH_(&Q, res, ep_dist, ep);
        Q.nr = 1;
        Q.rmax = ep_dist;
    }
    while (Q.ncand > 0) {
        uint32_t c, e;
        const uint32_t *l;
        while (Q.cand[Q.cmin] == NIL)
            Q.cmin++;
        if (Q.nr >= ef && Q.cmin > Q.rmax)
            break;
        c = Q.pool[Q.cand[Q.cmin]].node;
        Q.cand[Q.cmin] = Q.pool[Q.cand[Q.cmin]].next;
        Q.ncand--;
        l = links_of(h, c, level);
        /* the likely next candidate's links, while this one is expanded */
        if (Q.cand[Q.cmin] != NIL)
            PREFETCH(links_of(h, Q.pool[Q.cand[Q.cmin]].node, level));
        if (!l)
            continue;
        cnt = link_count(h, l, level);
        s->cnt.expanded++;
        s->cnt.links += cnt;
        s->cnt.link_lines += lines_of(l, cnt);
        /* gather the unvisited neighbours and prefetch their codes before
         * computing any distance: mark and code loads are the cache misses;
         * an id past the last node (a hostile file) is skipped */
        for (i = 1; i <= cnt; i++)
            if (l[i] < n)
                PREFETCH(mark + l[i]);
        np = 0;
        for (i = 1; i <= cnt; i++) {
            e = l[i];
            if (e < n && mark[e] != epoch) {
                mark[e] = epoch;
                pend[np++] = e;
                PREFETCH(code_of(h, e));
            }
        }
        s->cnt.scored += np;
        if (score) {
            /* the distances first, then the updates of the neighbours
             * below the bound, in list order: once nr >= ef, rmax never
             * rises, so the others are refused by the loop below too */
            uint32_t base, m, j;
            for (base = 0; base < np; base += HNSW_SCORE_MAX) {
                uint64_t mask;
                m = np - base < HNSW_SCORE_MAX ? np - base : HNSW_SCORE_MAX;
                mask = score(q, codes1, pend + base, m, Q.nr < ef ? bits + 1 : Q.rmax, dist);
                while (mask) {
                    j = (uint32_t)__builtin_ctzll(mask);
                    mask &= mask - 1;
                    bq_offer(&Q, pend[base + j], dist[j], h, check_dead);
                }
            }
            continue;
        }
        for (i = 0; i < np; i++)
            bq_offer(&Q, pend[i], dist_to(h, q, pend[i]), h, check_dead);
    }
    /* drain the result buckets in ascending distance */
    k = 0;
    for (d = 0; d <= Q.rmax && k < Q.nr; d++) {
        size_t first = k;
        uint32_t j;
        for (j = Q.res[d]; j != NIL; j = Q.pool[j].next)
            s->out[k++] = KEY(d, Q.pool[j].node);
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
        greedy(h, query, level, &ep, &epd, &s->cnt.upper);
    nres = search_layer(h, s, query, ep, epd, ef, 0, 1, NULL);
    s->cnt.searches++;
    for (i = 0; i < nres && i < P; i++) {
        out[i].node = KEY_NODE(s->out[i]);
        out[i].dist = KEY_DIST(s->out[i]);
        out[i].label = *label_ptr(h, out[i].node);
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

/* Adds link from -> to at level, shrinking from's list by the heuristic
 * when it overflows.  In an attached file's list (hostile, maybe) the
 * count is clamped and ids past the last node are dropped. */
HNSW_INLINE void add_link(struct hnsw *h, uint32_t from, uint32_t to, int level,
                     uint64_t *tmp, uint32_t *sel)
{
    uint32_t *l = links_of(h, from, level);
    uint32_t max = level == 0 ? h->m0 : h->m, i, k, cnt, nk = 0;
    if (!l)
        return;
    cnt = link_count(h, l, level);
    for (i = 1; i <= cnt; i++)
        if (l[i] == to)
            return;
    mark_dirty(h, from, level == 0 ? DIRTY_L0 : DIRTY_UP);
    if (cnt < max) {
        l[cnt + 1] = to;
        l[0] = cnt + 1;
        if (level == 0)
            hnsw_layout_sync(h, from);
        return;
    }
    for (i = 1; i <= cnt; i++)
        if (l[i] < h->n)
            tmp[nk++] = KEY(ham(code_of(h, from), code_of(h, l[i]), h->words), l[i]);
    tmp[nk++] = KEY(ham(code_of(h, from), code_of(h, to), h->words), to);
    sort_keys(tmp, nk);
    k = select_heuristic(h, tmp, nk, max, sel);
    for (i = 0; i < k; i++)
        l[i + 1] = sel[i];
    l[0] = k;
    if (level == 0)
        hnsw_layout_sync(h, from);
}

HNSW_INLINE int add_body(struct hnsw *h, const uint64_t *code, struct hnsw_label label,
                         uint32_t *node_out)
{
    struct hnsw_scratch *s;
    uint32_t node, ep, epd;
    int level, lc, rc;
    size_t nres, slot, t;
    uint64_t rng;
    const hnsw_score_list_fn score = hnsw_score_list_pick();

    if (!h || !code)
        return MESS_EINVAL;
    if (h->n >= HNSW_MAX_NODES)
        return MESS_ELIMIT;
    if (hnsw_find(h, label, NULL) == MESS_OK)
        return MESS_EINVAL;
    rc = hnsw_grow(h, h->n + 1);
    if (rc != MESS_OK)
        return rc;
    if (!h->map || 2 * (h->n + 1) > h->map_mask + 1) {
        rc = hnsw_map_rebuild(h, 2 * (h->n + 1));
        if (rc != MESS_OK)
            return rc;
    }
    slot = hnsw_map_find_slot(h, label);
    if (slot == NO_SLOT) { /* an attached file's map with no empty slot */
        rc = hnsw_map_rebuild(h, 2 * (h->n + 1));
        if (rc != MESS_OK)
            return rc;
        slot = hnsw_map_find_slot(h, label);
    }
    /* the generator advances only once the add cannot fail any more */
    rng = h->rng;
    level = draw_level(h, &rng);
    node = (uint32_t)h->n;
    t = h->n - h->n_base; /* the node's index in the tail arrays */
    if (level > 0 && !h->upper[t]) {
        h->upper[t] = (uint32_t *)mess_calloc_array((size_t)level * (1 + h->m), sizeof(uint32_t));
        if (!h->upper[t])
            return MESS_ENOMEM;
    }
    s = h->build;
    if (scratch_prepare(s, h, h->n + 1, h->p.ef_construction) != MESS_OK)
        return MESS_ENOMEM; /* the block, if any, stays for this node's retry */
    h->rng = rng;
    memcpy(h->codes + t * h->words, code, (size_t)h->words * 8);
    h->labels[t] = label;
    h->levels[t] = (uint8_t)level;
    h->deleted[t] = 0;
    h->links0[t * (1 + h->m0)] = 0;
    h->n++;
    h->upper_words += (size_t)level * (1 + h->m);
    h->map[slot] = node;
    hnsw_layout_sync(h, node); /* its block, empty until layer 0 below */

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
        greedy(h, code, lc, &ep, &epd, &s->cnt.upper);
    for (lc = level < h->max_level ? level : h->max_level; lc >= 0; lc--) {
        uint32_t k, i, *l;
        scratch_next_epoch(s);
        s->mark[node] = s->epoch; /* never link to itself */
        nres = search_layer(h, s, code, ep, epd, h->p.ef_construction, lc, 0, score);
        k = select_heuristic(h, s->out, nres, h->m, h->sel);
        l = links_of(h, node, lc);
        l[0] = k;
        for (i = 0; i < k; i++)
            l[i + 1] = h->sel[i];
        if (lc == 0)
            hnsw_layout_sync(h, node);
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
        if (!*del_ptr(h, (uint32_t)i)) {
            rc = hnsw_add(c, code_of(h, (uint32_t)i), *label_ptr(h, (uint32_t)i), &node);
            if (rc != MESS_OK) {
                hnsw_free(c);
                return rc;
            }
        }
        if (old_to_new)
            old_to_new[i] = node;
    }
    /* the new graph keeps the code layout the old one has */
    if (h->lay && (rc = hnsw_layout_build(c)) != MESS_OK) {
        hnsw_free(c);
        return rc;
    }
    *out = c;
    return MESS_OK;
}

size_t hnsw_count(const struct hnsw *h) { return h ? h->n : 0; }
size_t hnsw_deleted(const struct hnsw *h) { return h ? h->n_deleted : 0; }
size_t hnsw_live(const struct hnsw *h) { return h ? h->n - h->n_deleted : 0; }
uint32_t hnsw_entry_point(const struct hnsw *h) { return h ? h->entry : EMPTY; }

size_t hnsw_heap_bytes(const struct hnsw *h)
{
    size_t b;
    if (!h)
        return 0;
    b = sizeof *h + h->cap * ((size_t)h->words * 8 + sizeof *h->labels + 1 + 1 +
                              (1 + (size_t)h->m0) * 4 + sizeof(uint32_t *));
    b += (h->map && !h->map_mapped ? h->map_mask + 1 : 0) * sizeof(uint32_t);
    b += (h->upper_words - h->bblob_words) * 4; /* the tail's upper blocks */
    b += hnsw_layout_bytes(h);
    return b;
}

size_t hnsw_mapped_bytes(const struct hnsw *h)
{
    return h ? h->bytes_mapped : 0;
}

size_t hnsw_bytes(const struct hnsw *h)
{
    return hnsw_heap_bytes(h) + hnsw_mapped_bytes(h);
}

uint32_t hnsw_level(const struct hnsw *h, uint32_t node)
{
    return h && node < h->n ? *level_ptr(h, node) : 0;
}

int hnsw_neighbors(const struct hnsw *h, uint32_t node, uint32_t level,
                   const uint32_t **ids, size_t *n)
{
    const uint32_t *l;
    if (!h || !ids || !n || node >= h->n || level > *level_ptr(h, node) ||
        level > HNSW_MAX_LEVEL)
        return MESS_EINVAL;
    l = links_of(h, node, (int)level);
    if (!l)
        return MESS_EFORMAT; /* an attached file's block out of bounds */
    *ids = l + 1;
    *n = link_count(h, l, (int)level);
    return MESS_OK;
}

const uint64_t *hnsw_code(const struct hnsw *h, uint32_t node)
{
    return h && node < h->n ? code_of(h, node) : NULL;
}

struct hnsw_label hnsw_label(const struct hnsw *h, uint32_t node)
{
    return h && node < h->n ? *label_ptr(h, node) : hnsw_label_of(0, 0);
}

int hnsw_is_deleted(const struct hnsw *h, uint32_t node)
{
    return h && node < h->n ? *del_ptr(h, node) != 0 : 0;
}
