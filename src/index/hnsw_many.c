/*
 * hnsw_many.c - many HNSW searches interleaved on one thread
 * (hnsw_search_many, docs/PERFORMANCE.md "Server"): each beam runs
 * search_layer's decisions (hnsw_bin.c) one step at a time and stops where
 * it waits for memory, so the lines of one beam arrive while the others
 * compute.  The results are exactly hnsw_search's.
 */
#include "hnsw_internal.h"

/* ---- many searches interleaved (hnsw_search_many) -------------------------------
 *
 * The beam search of search_layer (layer 0, live nodes only) cut at its two
 * waits: a beam stops after it has picked its next candidate and
 * prefetched that node's link list (BEAM_GATHER follows), and after it has
 * gathered the unvisited neighbours and prefetched their codes
 * (BEAM_SCORE follows).  A round-robin over up to `width` beams lets the
 * lines of one arrive while the others compute.  Each beam makes exactly
 * the decisions search_layer makes, in the same order, on its own
 * scratch; only the interleaving of independent searches differs. */
enum { BEAM_DONE, BEAM_GATHER, BEAM_SCORE, BEAM_UADDR, BEAM_ULIST, BEAM_UPPER, BEAM_PICK };

struct beam {
    struct hnsw_job *job;
    struct hnsw_scratch *s;
    const uint32_t *l;   /* the list being expanded */
    const uint64_t *blk; /* its block of the code layout (lay) */
    int lay;             /* the graph's code layout read (fast 3, opts'
                            layout 1, the graph has one) */
    const uint64_t *codes; /* fast: every node's code, node i at 2 i */
    int fast;            /* 128-bit codes in one array, no deleted node */
    hnsw_score_list_fn score; /* fast 3: each list scored at once, else NULL */
    int listed;          /* visits listed in s->vlist (else the bitmap is
                            cleared whole: small enough) */
    int defer;           /* next picks made together at the end of a round
                            (BEAM_PICK), else at once (opts->fast 0) */
    size_t ef, nr, ncand;
    uint32_t used, cmin, rmax, np;
    uint32_t ep, epd;    /* the greedy descent's node and distance */
    int level;           /* its layer */
    int run;             /* the layer-0 search was started */
};

/* hnsw_search_many's paths (struct hnsw_many_opts, per call): fast, the
 * common case's own loops and the beams' next picks made together at the
 * end of each round (struct beam's defer); the largest visit bitmap
 * cleared whole rather than through the list of the nodes visited
 * (clear_words).  The tests and the benchmark compare them with the
 * former loops (fast 0). */
static const struct hnsw_many_opts many_defaults = {HNSW_MANY_FAST, HNSW_MANY_CLEAR_WORDS, 1};

/* Pops candidates until one with a link list (BEAM_GATHER, its list
 * prefetched) or the end of the search (BEAM_DONE). */
HNSW_INLINE int beam_pick(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    uint32_t *ch = b->s->cand_head;
    const struct bq_entry *pool = b->s->pool;
    const size_t bytes = 4 * (size_t)(1 + h->m0);
    while (b->ncand > 0) {
        const uint32_t *l;
        uint32_t c;
        size_t off;
        while (ch[b->cmin] == NIL)
            b->cmin++;
        if (b->nr >= b->ef && b->cmin > b->rmax)
            break;
        c = pool[ch[b->cmin]].node;
        ch[b->cmin] = pool[ch[b->cmin]].next;
        b->ncand--;
        l = links_of(h, c, 0);
        if (!l)
            continue;
        if (b->lay) {
            /* the node's block: its ids and their codes, whole lines */
            const char *blk = (const char *)lay_block(h, c);
            const size_t lbytes = h->lay_words * 8;
            for (off = 0; off < lbytes; off += 64)
                PREFETCH(blk + off);
            b->l = l; /* for the count of its lines only: not read */
            b->blk = (const uint64_t *)(const void *)blk;
            return BEAM_GATHER;
        }
        for (off = 0; off < bytes; off += 64)
            PREFETCH((const char *)l + off);
        PREFETCH((const char *)l + bytes - 1);
        b->l = l;
        return BEAM_GATHER;
    }
    return BEAM_DONE;
}

/* The queues of a beam as a struct bq (hnsw_internal.h), for its inner
 * loops, and back. */
HNSW_INLINE struct bq beam_queues(const struct beam *b)
{
    struct bq q;
    q.pool = b->s->pool;
    q.cand = b->s->cand_head;
    q.res = b->s->res_head;
    q.ef = b->ef;
    q.nr = b->nr;
    q.ncand = b->ncand;
    q.used = b->used;
    q.cmin = b->cmin;
    q.rmax = b->rmax;
    return q;
}

HNSW_INLINE void beam_queues_back(struct beam *b, const struct bq *q)
{
    b->nr = q->nr;
    b->ncand = q->ncand;
    b->used = q->used;
    b->cmin = q->cmin;
    b->rmax = q->rmax;
}

/* The picked node's block of the code layout (its list and its
 * neighbours' codes, arrived together): the unvisited neighbours marked,
 * the whole list scored at once (hnsw_score.c, the ids 0..63 naming the
 * block's codes in place), and the queues updated for the unvisited ones
 * below the bound, in list order: the decisions of beam_gather then
 * beam_score (and search_layer's), the list cut into 64-id chunks, each
 * marked before it is scored.  The bound of a chunk refuses no neighbour
 * the updates would take (while the results are full rmax never rises),
 * so the cut changes nothing.  Deleted nodes route but never enter the
 * results, as in search_layer. */
static const uint32_t lay_iota[HNSW_SCORE_MAX] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
    32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
    48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};

HNSW_INLINE int beam_lay(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    struct hnsw_scratch *s = b->s;
    const uint32_t *ids = (const uint32_t *)(const void *)b->blk;
    const uint64_t *codes = HNSW_LAY_CODES(h, b->blk), *q = b->job->query;
    uint64_t *vis = s->vis;
    uint32_t *vlist = s->vlist;
    const size_t n = h->n;
    const uint32_t all = h->p.bits + 1, m0 = h->m0;
    const int listed = b->listed, dead = h->n_deleted != 0;
    size_t nvis = s->nvis;
    struct bq Q = beam_queues(b);
    uint32_t cnt = 0, np = 0, base, i;
    uint32_t dist[HNSW_SCORE_MAX];
    while (cnt < m0 && ids[cnt] != EMPTY)
        cnt++;
    s->cnt.expanded++;
    s->cnt.links += cnt;
    s->cnt.link_lines += lines_of(b->l, cnt);
    for (base = 0; base < cnt; base += HNSW_SCORE_MAX) {
        const uint32_t m = cnt - base < HNSW_SCORE_MAX ? cnt - base : HNSW_SCORE_MAX;
        uint64_t fresh = 0, mask;
        for (i = 0; i < m; i++) {
            uint32_t e = ids[base + i];
            if (e < n) {
                uint64_t *w = vis + (e >> 6), bit = (uint64_t)1 << (e & 63);
                if (!(*w & bit)) {
                    *w |= bit;
                    if (listed)
                        vlist[nvis++] = e;
                    fresh |= (uint64_t)1 << i;
                }
            }
        }
        if (!fresh)
            continue;
        np += (uint32_t)__builtin_popcountll(fresh);
        mask = b->score(q, codes + 2 * (size_t)base, lay_iota, m,
                        Q.nr < Q.ef ? all : Q.rmax, dist) & fresh;
        while (mask) {
            uint32_t j = (uint32_t)__builtin_ctzll(mask);
            mask &= mask - 1;
            bq_offer(&Q, ids[base + j], dist[j], h, dead);
        }
    }
    s->nvis = nvis;
    s->cnt.scored += np;
    beam_queues_back(b, &Q);
    return BEAM_PICK;
}

/* The unvisited neighbours of the picked node, their codes prefetched. */
HNSW_INLINE int beam_gather(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    struct hnsw_scratch *s = b->s;
    const uint32_t *l = b->l;
    uint64_t *vis = s->vis;
    uint32_t *pend = s->pending, *vlist = s->vlist;
    const size_t n = h->n;
    size_t nvis = s->nvis;
    uint32_t cnt, i, np = 0;
    if (b->lay)
        return beam_lay(b);
    cnt = link_count(h, l, 0);
    s->cnt.expanded++;
    s->cnt.links += cnt;
    s->cnt.link_lines += lines_of(l, cnt);
    if (b->fast == 2) {
        /* no branch on the visit bit: every id's bit is set and the id is
         * kept (np advanced) only if the bit was clear; an id past the
         * last node reads and rewrites word 0 unchanged */
        const uint64_t *codes = b->codes;
        for (i = 1; i <= cnt; i++) {
            uint32_t e = l[i];
            uint32_t in = e < n, x = in ? e : 0;
            uint64_t *w = vis + (x >> 6), v = *w;
            uint64_t bit = (uint64_t)in << (x & 63);
            pend[np] = e;
            np += (uint32_t)(((v & bit) == 0) & in);
            *w = v | bit;
            PREFETCH(codes + 2 * (size_t)x);
        }
        s->cnt.scored += np;
        b->np = np;
        return np ? BEAM_SCORE : BEAM_PICK;
    }
    if (b->fast) {
        const uint64_t *codes = b->codes;
        const int listed = b->listed;
        for (i = 1; i <= cnt; i++) {
            uint32_t e = l[i];
            if (e < n) {
                uint64_t *w = vis + (e >> 6), bit = (uint64_t)1 << (e & 63);
                if (!(*w & bit)) {
                    *w |= bit;
                    if (listed)
                        vlist[nvis++] = e;
                    pend[np++] = e;
                    PREFETCH(codes + 2 * (size_t)e);
                }
            }
        }
        s->nvis = nvis;
        s->cnt.scored += np;
        b->np = np;
        return np ? BEAM_SCORE : b->defer ? BEAM_PICK : beam_pick(b);
    }
    for (i = 1; i <= cnt; i++) {
        uint32_t e = l[i];
        uint64_t bit = (uint64_t)1 << (e & 63);
        if (e < n && !(vis[e >> 6] & bit)) {
            vis[e >> 6] |= bit;
            if (b->listed)
                vlist[nvis++] = e;
            pend[np++] = e;
            PREFETCH(code_of(h, e));
            if (h->n_deleted) /* read if it enters the results */
                PREFETCH(del_ptr(h, e));
        }
    }
    s->nvis = nvis;
    s->cnt.scored += np;
    b->np = np;
    return np ? BEAM_SCORE : b->defer ? BEAM_PICK : beam_pick(b);
}

/* Scores the gathered neighbours (search_layer's inner loop), then picks. */
HNSW_INLINE int beam_score(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    struct hnsw_scratch *s = b->s;
    const uint64_t *q = b->job->query;
    const uint32_t *pend = s->pending;
    struct bq Q = beam_queues(b);
    uint32_t i;
    if (b->score) {
        /* the whole list's distances first (hnsw_score.c), then the queue
         * updates of the neighbours below the bound only, in list order:
         * while the results are full (nr >= ef) rmax never rises, so a
         * neighbour at or past the chunk's first rmax cannot enter and
         * the updates below make exactly the decisions of the loop after */
        const uint64_t *codes = b->codes;
        const uint32_t all = h->p.bits + 1;
        uint32_t dist[HNSW_SCORE_MAX], base;
        for (base = 0; base < b->np; base += HNSW_SCORE_MAX) {
            uint32_t m = b->np - base < HNSW_SCORE_MAX ? b->np - base : HNSW_SCORE_MAX;
            uint64_t mask = b->score(q, codes, pend + base, m, Q.nr < Q.ef ? all : Q.rmax, dist);
            while (mask) {
                uint32_t j = (uint32_t)__builtin_ctzll(mask);
                mask &= mask - 1;
                /* no deleted node on this path: the entry point is live */
                bq_offer(&Q, pend[base + j], dist[j], h, 0);
            }
        }
        beam_queues_back(b, &Q);
        return BEAM_PICK;
    }
    if (b->fast) {
        const uint64_t *codes = b->codes;
        const uint64_t q0 = q[0], q1 = q[1];
        for (i = 0; i < b->np; i++) {
            uint32_t e = pend[i];
            const uint64_t *c = codes + 2 * (size_t)e;
            bq_offer(&Q, e,
                     (uint32_t)(__builtin_popcountll(q0 ^ c[0]) +
                                __builtin_popcountll(q1 ^ c[1])),
                     h, 0);
        }
        beam_queues_back(b, &Q);
        return b->defer ? BEAM_PICK : beam_pick(b);
    }
    for (i = 0; i < b->np; i++)
        bq_offer(&Q, pend[i], dist_to(h, q, pend[i]), h, h->n_deleted != 0);
    beam_queues_back(b, &Q);
    return b->defer ? BEAM_PICK : beam_pick(b);
}

/* scratch_prepare for hnsw_search_many: the queues as for a search, and a
 * visit set of n bits (all clear: grown zeroed, cleared after each use)
 * with room to list every node, instead of the 16-bit marks. */
static int scratch_prepare_many(struct hnsw_scratch *s, const struct hnsw *h, size_t ef)
{
    size_t words = (h->n + 63) / 64;
    uint32_t nb = h->p.bits + 1;
    if (words > s->vis_cap) {
        size_t cap = words + words / 2 + 16;
        uint64_t *v = (uint64_t *)mess_calloc_array(cap, sizeof *v);
        if (!v)
            return MESS_ENOMEM;
        free(s->vis);
        s->vis = v;
        s->vis_cap = cap;
    }
    if (scratch_grow_buckets(s, nb))
        return MESS_ENOMEM;
    if (grow_array((void **)&s->vlist, &s->vlist_cap, h->n + 1, sizeof *s->vlist) ||
        grow_array((void **)&s->pool, &s->pool_cap, 2 * h->n + 2, sizeof *s->pool) ||
        grow_array((void **)&s->out, &s->out_cap, ef + 1, sizeof *s->out) ||
        grow_array((void **)&s->pending, &s->pending_cap, (size_t)h->m0 + 1,
                   sizeof *s->pending))
        return MESS_ENOMEM;
    return MESS_OK;
}

/* The layer-0 search from the descent's node (search_layer's start). */
HNSW_INLINE int beam_layer0(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    struct hnsw_scratch *s = b->s;
    uint32_t ep = b->ep, epd = b->epd, *ch = s->cand_head, *rh = s->res_head;
    s->cnt.searches++;
    memset(ch, 0xff, (size_t)(h->p.bits + 1) * sizeof *ch);
    memset(rh, 0xff, (size_t)(h->p.bits + 1) * sizeof *rh);
    b->run = 1;
    b->used = 0;
    s->vis[ep >> 6] |= (uint64_t)1 << (ep & 63);
    s->vlist[0] = ep;
    s->nvis = 1;
    s->pool[b->used].node = ep;
    s->pool[b->used].next = ch[epd];
    ch[epd] = b->used++;
    b->ncand = 1;
    b->cmin = epd;
    b->nr = 0;
    b->rmax = 0;
    if (!h->n_deleted || !*del_ptr(h, ep)) {
        s->pool[b->used].node = ep;
        s->pool[b->used].next = rh[epd];
        rh[epd] = b->used++;
        b->nr = 1;
        b->rmax = epd;
    }
    return beam_pick(b);
}

/* The greedy descent (greedy()) one step at a time, three waits a step:
 * where ep's list on the layer is (its level byte and upper-link offset
 * or block pointer: BEAM_UADDR follows), the list (BEAM_ULIST), its
 * neighbours' codes (BEAM_UPPER), each prefetched while other beams run.
 * Below layer 1, layer 0 starts. */
HNSW_INLINE int beam_descend(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    if (b->level <= 0)
        return beam_layer0(b);
    PREFETCH(level_ptr(h, b->ep));
    if (b->ep < h->n_base)
        PREFETCH(h->buoff + b->ep);
    else
        PREFETCH(h->upper + (b->ep - h->n_base));
    return BEAM_UADDR;
}

/* ep's list on the layer, or on the next one down that it has. */
HNSW_INLINE int beam_uaddr(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    const size_t bytes = 4 * (size_t)(1 + h->m);
    for (; b->level > 0; b->level--) {
        const uint32_t *l = links_of(h, b->ep, b->level);
        size_t off;
        if (!l)
            continue;
        for (off = 0; off < bytes; off += 64)
            PREFETCH((const char *)l + off);
        PREFETCH((const char *)l + bytes - 1);
        b->l = l;
        return BEAM_ULIST;
    }
    return beam_layer0(b);
}

HNSW_INLINE int beam_ulist(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    const uint32_t *l = b->l;
    uint32_t i, cnt = link_count(h, l, b->level);
    for (i = 1; i <= cnt; i++)
        if (l[i] < h->n)
            PREFETCH(code_of(h, l[i]));
    return BEAM_UPPER;
}

/* One pass of greedy() over the list: a move stays on the layer (the new
 * node's list next), none goes down (the same node's list there). */
HNSW_INLINE int beam_upper(struct beam *b)
{
    const struct hnsw *h = b->job->h;
    const uint32_t *l = b->l;
    uint32_t i, cnt = link_count(h, l, b->level), ep = b->ep, epd = b->epd;
    int changed = 0;
    for (i = 1; i <= cnt; i++) {
        uint32_t e = l[i], d;
        if (e >= h->n)
            continue;
        d = dist_to(h, b->job->query, e);
        b->s->cnt.upper++;
        if (d < epd || (d == epd && e < ep)) {
            epd = d;
            ep = e;
            changed = 1;
        }
    }
    b->ep = ep;
    b->epd = epd;
    if (changed)
        return beam_descend(b);
    b->level--;
    return beam_uaddr(b);
}

/* search_body up to the descent, which it starts. */
HNSW_INLINE int beam_start(struct beam *b, struct hnsw_job *job, struct hnsw_scratch *s,
                           const struct hnsw_many_opts *o, hnsw_score_list_fn score)
{
    const struct hnsw *h = job->h;
    size_t ef;

    b->job = job;
    b->s = s;
    b->run = 0;
    b->defer = o->fast != 0;
    job->n_out = 0;
    job->rc = MESS_OK;
    if (!h || !s || !job->query || (!job->out && job->P)) {
        job->rc = MESS_EINVAL;
        return BEAM_DONE;
    }
    if (job->P == 0 || h->n == 0)
        return BEAM_DONE;
    ef = job->ef < job->P ? job->P : job->ef;
    if (ef > h->n)
        ef = h->n;
    job->rc = scratch_prepare_many(s, h, ef);
    if (job->rc != MESS_OK)
        return BEAM_DONE;
    b->ef = ef;
    /* the common case in a loop of its own: 128-bit codes all in one
     * array (an attached graph without a tail, or a heap graph), no
     * deleted node; a visit bitmap of at most 128 KiB is cleared whole */
    b->fast = o->fast && h->words == 2 && !h->n_deleted &&
              (h->n_base == h->n || h->n_base == 0);
    b->codes = h->n_base ? h->bcodes : h->codes;
    b->listed = !o->fast || (h->n + 63) / 64 > o->clear_words;
    if (b->fast && o->fast >= 2 && !b->listed)
        b->fast = 2; /* the branch-free loops (their bitmap is cleared whole) */
    b->score = b->fast && o->fast >= 3 ? score : NULL;
    /* the code layout, where the graph has one, whatever else fast needs
     * (it holds every code; deleted nodes are checked in its loop) */
    b->lay = o->fast >= 3 && o->layout && h->lay != NULL && score != NULL;
    if (b->lay)
        b->score = score;
    b->ep = h->entry;
    b->epd = dist_to(h, job->query, b->ep);
    b->level = h->max_level;
    return beam_descend(b);
}

/* The results of a finished beam, as search_layer drains and search_body
 * copies them. */
HNSW_INLINE void beam_finish(struct beam *b)
{
    struct hnsw_job *job = b->job;
    struct hnsw_scratch *s = b->s;
    const uint32_t *rh = s->res_head;
    size_t k = 0, i;
    uint32_t d;
    if (!b->run)
        return;
    if (b->listed) /* the visit set, empty again */
        for (i = 0; i < s->nvis; i++)
            s->vis[s->vlist[i] >> 6] = 0;
    else
        memset(s->vis, 0, (b->job->h->n + 63) / 64 * sizeof *s->vis);
    s->nvis = 0;
    for (d = 0; d <= b->rmax && k < b->nr; d++) {
        size_t first = k;
        uint32_t j;
        for (j = rh[d]; j != NIL; j = s->pool[j].next)
            s->out[k++] = KEY(d, s->pool[j].node);
        sort_keys(s->out + first, k - first);
    }
    for (i = 0; i < k && i < job->P; i++) {
        static const struct hnsw_label none = {0, 0};
        job->out[i].node = KEY_NODE(s->out[i]);
        job->out[i].dist = KEY_DIST(s->out[i]);
        job->out[i].label = job->skip_labels ? none : *label_ptr(job->h, job->out[i].node);
    }
    job->n_out = i;
    b->run = 0;
}

HNSW_INLINE int many_body(struct hnsw_job *jobs, size_t n,
                          struct hnsw_scratch *const *scratch, unsigned width,
                          const struct hnsw_many_opts *o, hnsw_score_list_fn score)
{
    struct beam b[HNSW_MANY_MAX];
    int st[HNSW_MANY_MAX], any;
    size_t next = 0, i;
    unsigned k;

    /* a slot that is done takes the next job (jobs that end at once, e.g.
     * an empty index, are finished right away) */
#define BEAM_REFILL(k)                                                       \
    do {                                                                     \
        while (st[k] == BEAM_DONE && next < n) {                             \
            st[k] = beam_start(&b[k], &jobs[next++], scratch[k], o, score);         \
            if (st[k] == BEAM_DONE)                                          \
                beam_finish(&b[k]);                                          \
        }                                                                    \
    } while (0)

    for (k = 0; k < width; k++) {
        st[k] = BEAM_DONE;
        BEAM_REFILL(k);
    }
    do {
        any = 0;
        for (k = 0; k < width; k++) {
            if (st[k] == BEAM_DONE || st[k] == BEAM_PICK)
                continue;
            switch (st[k]) {
            case BEAM_GATHER:
                st[k] = beam_gather(&b[k]);
                break;
            case BEAM_SCORE:
                st[k] = beam_score(&b[k]);
                break;
            case BEAM_UADDR:
                st[k] = beam_uaddr(&b[k]);
                break;
            case BEAM_ULIST:
                st[k] = beam_ulist(&b[k]);
                break;
            default:
                st[k] = beam_upper(&b[k]);
                break;
            }
            if (st[k] == BEAM_DONE) {
                beam_finish(&b[k]);
                BEAM_REFILL(k);
            }
            any |= st[k] != BEAM_DONE;
        }
        /* the next candidates of the beams that scored, picked together:
         * their lists' prefetches (a page walk each) overlap */
        for (k = 0; k < width; k++) {
            if (st[k] != BEAM_PICK)
                continue;
            st[k] = beam_pick(&b[k]);
            if (st[k] == BEAM_DONE) {
                beam_finish(&b[k]);
                BEAM_REFILL(k);
            }
        }
    } while (any);
#undef BEAM_REFILL
    for (i = 0; i < n; i++)
        if (jobs[i].rc != MESS_OK)
            return jobs[i].rc;
    return MESS_OK;
}

#ifdef HNSW_DISPATCH
static HNSW_POPCNT int many_popcnt(struct hnsw_job *jobs, size_t n,
                                   struct hnsw_scratch *const *scratch, unsigned width,
                                   const struct hnsw_many_opts *o, hnsw_score_list_fn score)
{
    return many_body(jobs, n, scratch, width, o, score);
}
#endif

static int many_soft(struct hnsw_job *jobs, size_t n,
                     struct hnsw_scratch *const *scratch, unsigned width,
                     const struct hnsw_many_opts *o, hnsw_score_list_fn score)
{
    return many_body(jobs, n, scratch, width, o, score);
}

int hnsw_search_many(struct hnsw_job *jobs, size_t n,
                     struct hnsw_scratch *const *scratch, unsigned width,
                     const struct hnsw_many_opts *opts)
{
    struct hnsw_many_opts o = opts ? *opts : many_defaults;
    unsigned k;
    hnsw_score_list_fn score;
    o.fast = o.fast < 0 ? 0 : o.fast > 3 ? 3 : o.fast;
    if ((n && !jobs) || !scratch || width == 0 || width > HNSW_MANY_MAX)
        return MESS_EINVAL;
    for (k = 0; k < width; k++)
        if (!scratch[k])
            return MESS_EINVAL;
    for (k = 0; k < width; k++) /* one scratch per slot */
        if (k > 0 && scratch[k] == scratch[k - 1])
            return MESS_EINVAL;
    score = o.fast >= 3 ? hnsw_score_list_pick() : NULL;
#ifdef HNSW_DISPATCH
    if (hnsw_popcount_hw())
        return many_popcnt(jobs, n, scratch, width, &o, score);
#endif
    return many_soft(jobs, n, scratch, width, &o, score);
}
