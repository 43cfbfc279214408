/*
 * hnsw_bin.c - HNSW over packed binary codes (Hamming distance).
 *
 * The layout of struct hnsw and struct hnsw_scratch, and the helpers every
 * part of the index inlines, are in src/index/hnsw_internal.h.
 *
 * Searches use bucket queues over the integer distances (see struct
 * hnsw_scratch); sorted results are 64-bit keys (distance << 32 | node), so
 * ties break by node id.
 *
 * An attached graph (hnsw_attach) reads nodes 0..n_base-1 from the
 * caller's mapping of a graph file (format below, before hnsw_write_graph)
 * and keeps nodes added later in the same heap arrays a built graph uses
 * (the "tail"); every id, count, level and offset read from the mapping is
 * checked before use, since the file may be hostile.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include <sodium.h>

#include "hnsw_internal.h"

/* ---- popcount at run time ------------------------------------------------
 * The copies and their choice: HNSW_DISPATCH in hnsw_internal.h. */

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
                           size_t ef, int level, int live_only)
{
    struct bq_entry *pool = s->pool;
    uint32_t *ch = s->cand_head, *rh = s->res_head, *pend = s->pending;
    uint16_t *mark = s->mark, epoch = s->epoch;
    const uint32_t bits = h->p.bits;
    const size_t n = h->n;
    uint32_t used = 0, cmin, rmax = 0, d, i, np, cnt;
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
    if (!live_only || !h->n_deleted || !*del_ptr(h, ep)) {
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
        for (i = 0; i < np; i++) {
            e = pend[i];
            d = dist_to(h, q, e);
            if (nr < ef || d < rmax) {
                BQ_PUSH(ch, d, e);
                ncand++;
                if (d < cmin)
                    cmin = d;
                if (live_only && h->n_deleted && *del_ptr(h, e))
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
        greedy(h, query, level, &ep, &epd, &s->cnt.upper);
    nres = search_layer(h, s, query, ep, epd, ef, 0, 1);
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
}

HNSW_INLINE int add_body(struct hnsw *h, const uint64_t *code, struct hnsw_label label,
                         uint32_t *node_out)
{
    struct hnsw_scratch *s;
    uint32_t node, ep, epd;
    int level, lc, rc;
    size_t nres, slot, t;
    uint64_t rng;

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
        const struct hnsw_label *lb = label_ptr(h, (uint32_t)i);
        const uint64_t *c = code_of(h, (uint32_t)i);
        mess_wr_u64(w, lb->lo);
        mess_wr_u64(w, lb->hi);
        mess_wr_u8(w, *level_ptr(h, (uint32_t)i));
        mess_wr_u8(w, *del_ptr(h, (uint32_t)i));
        for (k = 0; k < h->words; k++)
            mess_wr_u64(w, c[k]);
    }
    /* an attached file's lists as they are read (counts clamped, blocks
     * outside the blob empty): a hostile file writes something the
     * reader refuses, never past the mapping */
    for (i = 0; i < h->n; i++)
        for (lv = 0; lv <= *level_ptr(h, (uint32_t)i); lv++) {
            const uint32_t *l = links_of(h, (uint32_t)i, lv);
            uint32_t cnt = l ? link_count(h, l, lv) : 0;
            mess_wr_u32(w, cnt);
            for (k = 1; k <= cnt; k++)
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
    if (!hnsw_params_ok(&p))
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
    if (hnsw_grow(h, (size_t)n) != MESS_OK) {
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
        h->upper_words += (size_t)h->levels[i] * (1 + h->m);
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
    if (hnsw_map_rebuild(h, (size_t)n + 1) != MESS_OK) {
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

/* ---- the graph file: mapped and searched in place ------------------------
 *
 * One header page, then eight sections, each starting on a 4096-byte
 * boundary (zero padding between them and after the last), all integers
 * little-endian (docs/HNSW.md, "Graph file"):
 *
 *   0    "MESSHNSW"
 *   8    u32 format version (1)       12   u32 header page bytes (4096)
 *   16   u32 bits   20 u32 m   24 u32 ef_construction   28 u32 words
 *   32   u32 m0 (2m)   36 u32 entry (UINT32_MAX when empty)
 *   40   u32 max_level + 1 (0 when empty)   44 u32 sections (8)
 *   48   u64 seed   56 u64 level-generator state   64 u64 n
 *   72   u64 deleted nodes   80 u64 label map slots   88 u64 upper-link words
 *   96   u64 file bytes
 *   104  8 x (u64 offset, u64 bytes): codes, labels, levels, deleted,
 *        links0, upper offsets, upper links, label map
 *   232  BLAKE2b-256 of bytes 0..231
 *   264  zero to the end of the page
 *
 * Sections: codes n x words u64; labels n x (u64 lo, u64 hi); levels n x u8;
 * deleted n x u8 (0 or 1); links0 n x (1 + m0) u32 (a count, the ids, zero
 * after them); upper offsets n x u32 (the node's first word in the upper
 * links); upper links: for each node with level L > 0, L blocks of
 * (1 + m) u32 (count, ids, zeros), in node order; label map: slots x u32,
 * the live nodes inserted in node order by linear probing from
 * mix_label(label) (UINT32_MAX empty), slots the smallest power of two
 * >= max(16, 2 (n + 1)).  The bytes are a function of the graph alone.
 */
#define GRAPH_PAGE 4096u
#define GRAPH_VERSION 1u
#define GRAPH_SECTIONS 8
enum { SEC_CODES, SEC_LABELS, SEC_LEVELS, SEC_DELETED, SEC_LINKS0, SEC_UOFF,
       SEC_BLOB, SEC_MAP };
static const char *const sec_name[GRAPH_SECTIONS] = {
    "codes", "labels", "levels", "deleted flags", "layer-0 links",
    "upper-link offsets", "upper links", "label map"};
static const uint8_t graph_magic[8] = {'M', 'E', 'S', 'S', 'H', 'N', 'S', 'W'};

#define H_VERSION 8
#define H_HDRLEN 12
#define H_BITS 16
#define H_M 20
#define H_EFC 24
#define H_WORDS 28
#define H_M0 32
#define H_ENTRY 36
#define H_TOP 40
#define H_NSEC 44
#define H_SEED 48
#define H_RNG 56
#define H_N 64
#define H_NDEL 72
#define H_SLOTS 80
#define H_BLOB 88
#define H_FILELEN 96
#define H_SECTIONS 104
#define H_SUM 232
#define H_END 264

struct graph_layout {
    uint64_t off[GRAPH_SECTIONS], len[GRAPH_SECTIONS], file_len;
};

static uint64_t page_up(uint64_t x)
{
    return (x + GRAPH_PAGE - 1) / GRAPH_PAGE * GRAPH_PAGE;
}

/* Section lengths and offsets; every factor is bounded by the caller
 * (n <= HNSW_MAX_NODES, words <= 64, m0 <= 512, blob and slots < 2^35), so
 * nothing overflows 64 bits. */
static void graph_layout(uint32_t words, uint32_t m0, uint64_t n, uint64_t blob,
                         uint64_t slots, struct graph_layout *g)
{
    int i;
    g->len[SEC_CODES] = n * words * 8;
    g->len[SEC_LABELS] = n * 16;
    g->len[SEC_LEVELS] = n;
    g->len[SEC_DELETED] = n;
    g->len[SEC_LINKS0] = n * (1 + (uint64_t)m0) * 4;
    g->len[SEC_UOFF] = n * 4;
    g->len[SEC_BLOB] = blob * 4;
    g->len[SEC_MAP] = slots * 4;
    g->off[0] = GRAPH_PAGE;
    for (i = 1; i < GRAPH_SECTIONS; i++)
        g->off[i] = page_up(g->off[i - 1] + g->len[i - 1]);
    g->file_len = page_up(g->off[GRAPH_SECTIONS - 1] + g->len[GRAPH_SECTIONS - 1]);
}

void hnsw_gw_out(struct gw *w, const uint8_t *p, size_t n)
{
    crypto_generichash_update(&w->st, p, n);
    while (n > 0 && !w->err) {
        ssize_t k = write(w->fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            w->err = MESS_EIO;
            return;
        }
        if (k == 0) {
            w->err = MESS_EIO;
            return;
        }
        p += k;
        n -= (size_t)k;
    }
}

void hnsw_gw_flush(struct gw *w)
{
    if (w->len)
        hnsw_gw_out(w, w->buf, w->len);
    w->len = 0;
}

void hnsw_gw_put(struct gw *w, const void *p, size_t n)
{
    if (w->err || n == 0)
        return;
    w->off += n;
    if (w->len + n > w->cap)
        hnsw_gw_flush(w);
    if (n >= w->cap) {
        hnsw_gw_out(w, (const uint8_t *)p, n);
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void gw_zero_to(struct gw *w, uint64_t off)
{
    static const uint8_t zero[256];
    while (w->off < off && !w->err) {
        uint64_t k = off - w->off;
        hnsw_gw_put(w, zero, k > sizeof zero ? sizeof zero : (size_t)k);
    }
}

/* Writes list l (count clamped, NULL: empty) as a block of 1 + max words. */
void hnsw_gw_links(struct gw *w, const uint32_t *l, uint32_t cnt, uint32_t max,
                     uint32_t *block)
{
    memset(block, 0, (1 + (size_t)max) * 4);
    block[0] = cnt;
    if (cnt)
        memcpy(block + 1, l + 1, (size_t)cnt * 4);
    hnsw_gw_put(w, block, (1 + (size_t)max) * 4);
}

int hnsw_write_graph(const struct hnsw *h, int fd, uint8_t digest[32])
{
    struct graph_layout g;
    struct gw w;
    uint8_t hdr[GRAPH_PAGE];
    uint32_t *map = NULL, *block = NULL;
    uint64_t blob = 0, slots;
    size_t i, n;
    int lv, s;

    if (!h || fd < 0 || !digest)
        return MESS_EINVAL;
    if (!host_little_endian())
        return MESS_EINVAL; /* the mapped form is the memory image of a little-endian host */
    n = h->n;
    for (i = 0; i < n; i++) {
        uint8_t L = *level_ptr(h, (uint32_t)i);
        if (L > HNSW_MAX_LEVEL)
            return MESS_EFORMAT; /* an attached file's level byte */
        blob += (uint64_t)L * (1 + h->m);
    }
    if (blob > UINT32_MAX)
        return MESS_ELIMIT; /* upper offsets are 32-bit */
    slots = hnsw_map_size_for(n + 1);
    graph_layout(h->words, h->m0, n, blob, slots, &g);
    memset(&w, 0, sizeof w);
    w.fd = fd;
    w.cap = 1 << 16;
    w.buf = (uint8_t *)malloc(w.cap);
    map = (uint32_t *)mess_malloc_array((size_t)slots, 4);
    block = (uint32_t *)mess_malloc_array(1 + (size_t)h->m0, 4);
    if (!w.buf || !map || !block) {
        free(w.buf);
        free(map);
        free(block);
        return MESS_ENOMEM;
    }
    memset(map, 0xff, (size_t)slots * 4);
    hnsw_map_fill(h, map, (size_t)slots - 1);

    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, graph_magic, 8);
    mess_store_u32(hdr + H_VERSION, GRAPH_VERSION);
    mess_store_u32(hdr + H_HDRLEN, GRAPH_PAGE);
    mess_store_u32(hdr + H_BITS, h->p.bits);
    mess_store_u32(hdr + H_M, h->p.m);
    mess_store_u32(hdr + H_EFC, h->p.ef_construction);
    mess_store_u32(hdr + H_WORDS, h->words);
    mess_store_u32(hdr + H_M0, h->m0);
    mess_store_u32(hdr + H_ENTRY, h->entry);
    mess_store_u32(hdr + H_TOP, (uint32_t)(h->max_level + 1));
    mess_store_u32(hdr + H_NSEC, GRAPH_SECTIONS);
    mess_store_u64(hdr + H_SEED, h->p.seed);
    mess_store_u64(hdr + H_RNG, h->rng);
    mess_store_u64(hdr + H_N, n);
    mess_store_u64(hdr + H_NDEL, h->n_deleted);
    mess_store_u64(hdr + H_SLOTS, slots);
    mess_store_u64(hdr + H_BLOB, blob);
    mess_store_u64(hdr + H_FILELEN, g.file_len);
    for (s = 0; s < GRAPH_SECTIONS; s++) {
        mess_store_u64(hdr + H_SECTIONS + 16 * s, g.off[s]);
        mess_store_u64(hdr + H_SECTIONS + 16 * s + 8, g.len[s]);
    }
    crypto_generichash(hdr + H_SUM, 32, hdr, H_SUM, NULL, 0);

    crypto_generichash_init(&w.st, NULL, 0, 32);
    hnsw_gw_put(&w, hdr, sizeof hdr);
    /* codes, labels and levels: the attached part and the tail, as stored */
    gw_zero_to(&w, g.off[SEC_CODES]);
    hnsw_gw_put(&w, h->bcodes, h->n_base * h->words * 8);
    hnsw_gw_put(&w, h->codes, (n - h->n_base) * h->words * 8);
    gw_zero_to(&w, g.off[SEC_LABELS]);
    hnsw_gw_put(&w, h->blabels, h->n_base * 16);
    hnsw_gw_put(&w, h->labels, (n - h->n_base) * 16);
    gw_zero_to(&w, g.off[SEC_LEVELS]);
    hnsw_gw_put(&w, h->blevels, h->n_base);
    hnsw_gw_put(&w, h->levels, n - h->n_base);
    gw_zero_to(&w, g.off[SEC_DELETED]);
    for (i = 0; i < n; i++) {
        uint8_t d = *del_ptr(h, (uint32_t)i) != 0;
        hnsw_gw_put(&w, &d, 1);
    }
    gw_zero_to(&w, g.off[SEC_LINKS0]);
    for (i = 0; i < n; i++) {
        const uint32_t *l = links0_of(h, (uint32_t)i);
        hnsw_gw_links(&w, l, link_count(h, l, 0), h->m0, block);
    }
    gw_zero_to(&w, g.off[SEC_UOFF]);
    blob = 0;
    for (i = 0; i < n; i++) {
        uint32_t o = (uint32_t)blob;
        hnsw_gw_put(&w, &o, 4);
        blob += (uint64_t)*level_ptr(h, (uint32_t)i) * (1 + h->m);
    }
    gw_zero_to(&w, g.off[SEC_BLOB]);
    for (i = 0; i < n; i++)
        for (lv = 1; lv <= *level_ptr(h, (uint32_t)i); lv++) {
            const uint32_t *l = links_of(h, (uint32_t)i, lv);
            hnsw_gw_links(&w, l, l ? link_count(h, l, lv) : 0, h->m, block);
        }
    gw_zero_to(&w, g.off[SEC_MAP]);
    hnsw_gw_put(&w, map, (size_t)slots * 4);
    gw_zero_to(&w, g.file_len);
    hnsw_gw_flush(&w);
    if (!w.err)
        crypto_generichash_final(&w.st, digest, 32);
    free(w.buf);
    free(map);
    free(block);
    return w.err;
}

int hnsw_graph_digest(const void *base, size_t len, uint8_t digest[32])
{
    if (!base || !digest)
        return MESS_EINVAL;
    crypto_generichash(digest, 32, (const uint8_t *)base, len, NULL, 0);
    return MESS_OK;
}

int hnsw_attach_msg(void *base, size_t len, const struct hnsw_params *expect,
                    struct hnsw **out, char *msg, size_t cap)
{
    const uint8_t *b = (const uint8_t *)base;
    uint8_t sum[32];
    struct hnsw_params p;
    struct graph_layout g;
    struct hnsw *h;
    uint32_t version, words, m0, entry, top, nsec;
    uint64_t n, ndel, slots, blob, file_len;
    size_t i;
    int s, rc;

    if (msg && cap)
        msg[0] = 0;
    if (!out)
        return MESS_EINVAL;
    *out = NULL;
    if (!base || ((uintptr_t)base & (GRAPH_PAGE - 1)) != 0)
        return mess_fail(msg, cap, MESS_EINVAL, "graph mapping not page-aligned");
    if (!host_little_endian())
        return mess_fail(msg, cap, MESS_EINVAL,
                   "graph files are little-endian; this host is not");
    if (len < GRAPH_PAGE)
        return mess_fail(msg, cap, MESS_EFORMAT, "graph file of %zu bytes: shorter than its header page", len);
    if (memcmp(b, graph_magic, 8) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT, "not a graph file (bad magic)");
    version = mess_load_u32(b + H_VERSION);
    if (version != GRAPH_VERSION)
        return mess_fail(msg, cap, MESS_EVERSION, "graph file format version %u, this library reads %u",
                   version, GRAPH_VERSION);
    crypto_generichash(sum, 32, b, H_SUM, NULL, 0);
    if (sodium_memcmp(sum, b + H_SUM, 32) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT, "graph header checksum mismatch");
    for (i = H_END; i < GRAPH_PAGE; i++)
        if (b[i])
            return mess_fail(msg, cap, MESS_EFORMAT, "graph header: nonzero byte at %zu past the fields", i);
    memset(&p, 0, sizeof p);
    p.bits = mess_load_u32(b + H_BITS);
    p.m = mess_load_u32(b + H_M);
    p.ef_construction = mess_load_u32(b + H_EFC);
    p.seed = mess_load_u64(b + H_SEED);
    words = mess_load_u32(b + H_WORDS);
    m0 = mess_load_u32(b + H_M0);
    entry = mess_load_u32(b + H_ENTRY);
    top = mess_load_u32(b + H_TOP);
    nsec = mess_load_u32(b + H_NSEC);
    n = mess_load_u64(b + H_N);
    ndel = mess_load_u64(b + H_NDEL);
    slots = mess_load_u64(b + H_SLOTS);
    blob = mess_load_u64(b + H_BLOB);
    file_len = mess_load_u64(b + H_FILELEN);
    if (mess_load_u32(b + H_HDRLEN) != GRAPH_PAGE || nsec != GRAPH_SECTIONS)
        return mess_fail(msg, cap, MESS_EFORMAT, "graph header: page size or section count is not 4096 / 8");
    if (!hnsw_params_ok(&p) || words != p.bits / 64 || m0 != 2 * p.m)
        return mess_fail(msg, cap, MESS_EFORMAT, "graph header: parameters out of range");
    if (expect && (expect->bits != p.bits || expect->m != p.m ||
                   expect->ef_construction != p.ef_construction || expect->seed != p.seed))
        return mess_fail(msg, cap, MESS_EPARAM, "graph made for other parameters");
    if (n > HNSW_MAX_NODES || ndel > n || top > HNSW_MAX_LEVEL + 1 || (n == 0) != (top == 0) ||
        (n > 0 && entry >= n) || (n == 0 && entry != EMPTY))
        return mess_fail(msg, cap, MESS_EFORMAT, "graph header: node count, entry point or top level out of range");
    if (slots != hnsw_map_size_for((size_t)n + 1) || blob > UINT32_MAX)
        return mess_fail(msg, cap, MESS_EFORMAT, "graph header: label map or upper-link size out of range");
    graph_layout(words, m0, n, blob, slots, &g);
    if (file_len != g.file_len || file_len != (uint64_t)len)
        return mess_fail(msg, cap, MESS_EFORMAT, "graph file of %zu bytes, its header says %llu (layout: %llu)",
                   len, (unsigned long long)file_len, (unsigned long long)g.file_len);
    for (s = 0; s < GRAPH_SECTIONS; s++)
        if (mess_load_u64(b + H_SECTIONS + 16 * s) != g.off[s] ||
            mess_load_u64(b + H_SECTIONS + 16 * s + 8) != g.len[s])
            return mess_fail(msg, cap, MESS_EFORMAT, "graph header: section '%s' not where the layout puts it",
                       sec_name[s]);
    if (n > 0 && b[g.off[SEC_LEVELS] + entry] + 1u != top)
        return mess_fail(msg, cap, MESS_EFORMAT, "graph: the entry point is not on the top level");
    rc = hnsw_new(&p, &h);
    if (rc != MESS_OK)
        return rc;
    h->n = h->n_base = (size_t)n;
    h->bcodes = (uint64_t *)((uint8_t *)base + g.off[SEC_CODES]);
    h->blabels = (struct hnsw_label *)((uint8_t *)base + g.off[SEC_LABELS]);
    h->blevels = (uint8_t *)base + g.off[SEC_LEVELS];
    h->bdeleted = (uint8_t *)base + g.off[SEC_DELETED];
    h->blinks0 = (uint32_t *)((uint8_t *)base + g.off[SEC_LINKS0]);
    h->buoff = (const uint32_t *)((uint8_t *)base + g.off[SEC_UOFF]);
    h->bblob = (uint32_t *)((uint8_t *)base + g.off[SEC_BLOB]);
    h->bblob_words = (size_t)blob;
    h->upper_words = (size_t)blob;
    h->bytes_mapped = len;
    h->map = (uint32_t *)((uint8_t *)base + g.off[SEC_MAP]);
    h->map_mask = (size_t)slots - 1;
    h->map_mapped = 1;
    h->entry = entry;
    h->max_level = (int)top - 1;
    h->n_deleted = (size_t)ndel;
    h->rng = mess_load_u64(b + H_RNG);
    *out = h;
    return MESS_OK;
}

int hnsw_attach(void *base, size_t len, const struct hnsw_params *expect,
                struct hnsw **out)
{
    return hnsw_attach_msg(base, len, expect, out, NULL, 0);
}

int hnsw_check_msg(const struct hnsw *h, char *msg, size_t cap)
{
    uint32_t *stamp = NULL, st = 0;
    size_t i, ndel = 0, live = 0, blob = 0, nslots;
    int lv, rc = MESS_EFORMAT;
    uint32_t top = 0;

    if (msg && cap)
        msg[0] = 0;
    if (!h)
        return MESS_EINVAL;
    if (h->n > HNSW_MAX_NODES || h->max_level > HNSW_MAX_LEVEL ||
        (h->n == 0) != (h->max_level < 0) || (h->n > 0 && h->entry >= h->n) ||
        (h->n == 0 && h->entry != EMPTY))
        return mess_fail(msg, cap, rc, "graph: node count, entry point or top level out of range");
    if (h->n > 0 && *level_ptr(h, h->entry) != (unsigned)h->max_level)
        return mess_fail(msg, cap, rc, "graph: the entry point is not on the top level");
    for (i = 0; i < h->n; i++) {
        uint8_t L = *level_ptr(h, (uint32_t)i), d = *del_ptr(h, (uint32_t)i);
        if ((int)L > h->max_level)
            return mess_fail(msg, cap, rc, "graph: node %zu has level %u above the top level %d",
                       i, L, h->max_level);
        if (d > 1)
            return mess_fail(msg, cap, rc, "graph: node %zu has deleted flag %u", i, d);
        ndel += d;
        if (i < h->n_base && h->buoff[i] != blob)
            return mess_fail(msg, cap, rc, "graph: node %zu's upper links at word %u, the layout says %zu",
                       i, h->buoff[i], blob);
        if (i < h->n_base)
            blob += (size_t)L * (1 + h->m);
        if (L + 1u > top)
            top = L + 1u;
    }
    if (blob != h->bblob_words)
        return mess_fail(msg, cap, rc, "graph: the upper links fill %zu words of %zu", blob, h->bblob_words);
    if (ndel != h->n_deleted)
        return mess_fail(msg, cap, rc, "graph: %zu nodes flagged deleted, the header says %zu",
                   ndel, h->n_deleted);
    if (top != (uint32_t)(h->max_level + 1))
        return mess_fail(msg, cap, rc, "graph: no node on the top level");
    /* links: counts, targets, levels, duplicates (a stamp per node) */
    stamp = (uint32_t *)mess_calloc_array(h->n ? h->n : 1, sizeof *stamp);
    if (!stamp)
        return MESS_ENOMEM;
    for (i = 0; i < h->n; i++)
        for (lv = 0; lv <= *level_ptr(h, (uint32_t)i); lv++) {
            const uint32_t *l = links_of(h, (uint32_t)i, lv);
            uint32_t k, max = lv == 0 ? h->m0 : h->m;
            if (!l) {
                mess_fail(msg, cap, rc, "graph: node %zu's level-%d links lie outside the upper links", i, lv);
                goto done;
            }
            if (l[0] > max) {
                mess_fail(msg, cap, rc, "graph: node %zu has %u links on level %d (at most %u)",
                    i, l[0], lv, max);
                goto done;
            }
            if (++st == 0) {
                memset(stamp, 0, h->n * sizeof *stamp);
                st = 1;
            }
            for (k = 1; k <= l[0]; k++) {
                uint32_t e = l[k];
                if (e >= h->n || e == i || *level_ptr(h, e) < lv || stamp[e] == st) {
                    mess_fail(msg, cap, rc, "graph: node %zu, level %d: link to %u is %s", i, lv, e,
                        e >= h->n ? "past the last node" : e == i ? "a self link" :
                        stamp[e] == st ? "a duplicate" : "to a node without that level");
                    goto done;
                }
                stamp[e] = st;
            }
        }
    /* label map: every live node under its own label, nothing else in it */
    if (h->n - ndel > 0 && !h->map) {
        mess_fail(msg, cap, rc, "graph: live nodes but no label map");
        goto done;
    }
    nslots = h->map ? h->map_mask + 1 : 0;
    if (h->map && nslots < 2 * h->n) {
        mess_fail(msg, cap, rc, "graph: label map of %zu slots for %zu nodes", nslots, h->n);
        goto done;
    }
    for (i = 0; i < nslots; i++)
        live += h->map[i] != EMPTY;
    if (live != h->n - ndel) {
        mess_fail(msg, cap, rc, "graph: label map holds %zu entries for %zu live nodes", live, h->n - ndel);
        goto done;
    }
    for (i = 0; i < h->n; i++)
        if (!*del_ptr(h, (uint32_t)i)) {
            size_t s = hnsw_map_find_slot(h, *label_ptr(h, (uint32_t)i));
            if (s == NO_SLOT || h->map[s] != i) {
                mess_fail(msg, cap, rc, "graph: live node %zu is not found under its label "
                    "(a duplicate label or a broken label map)", i);
                goto done;
            }
        }
    rc = MESS_OK;
done:
    free(stamp);
    return rc;
}

int hnsw_check(const struct hnsw *h)
{
    return hnsw_check_msg(h, NULL, 0);
}
