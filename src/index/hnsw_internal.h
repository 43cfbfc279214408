/*
 * hnsw_internal.h - the inside of the HNSW index over binary codes: the
 * layout of struct hnsw and struct hnsw_scratch, and the helpers every
 * part of the index inlines.  Internal to the index: included by the
 * files of the index only, every other file uses hnsw_bin.h:
 *
 *   hnsw_bin.c                 the core graph: lifecycle, label map,
 *                              scratch, search, insert, delete,
 *                              compaction, accessors; the Hamming
 *                              distance and its POPCNT dispatch
 *   src/index/hnsw_many.c      the interleaved search (hnsw_search_many)
 *   src/index/hnsw_score.c     a gathered neighbour list scored at once
 *                              (its SIMD copies)
 *   src/index/hnsw_file.c      the travel form, the mapped graph file and
 *                              its writer, the full check
 *   src/index/hnsw_delta.c     checkpoint deltas
 *   src/index/hnsw_layout.c    the opt-in code layout: each node's layer-0
 *                              ids and its neighbours' codes in one block
 *
 * Calls go one way: hnsw_many.c, hnsw_file.c and hnsw_delta.c call
 * hnsw_bin.c, and hnsw_delta.c the writer in hnsw_file.c; hnsw_bin.c
 * calls none of them but hnsw_score.c, which calls none of the index, and
 * hnsw_layout.c (the layout's upkeep), which reads the graph through the
 * accessors here only.
 *
 * The accessors and Hamming kernels are always-inlined bodies here, not
 * functions of one file, so that each compiled copy of a hot loop (the
 * POPCNT and baseline copies of search, insert and hnsw_search_many)
 * inlines them whatever file it is in.
 */
#ifndef MESS_HNSW_INTERNAL_H
#define MESS_HNSW_INTERNAL_H

#include <sodium.h>

#include "hnsw_bin.h"

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
#define HNSW_MAYBE_UNUSED __attribute__((unused))
#else
#define HNSW_INLINE static inline
#define HNSW_MAYBE_UNUSED
#endif

/* ---- a neighbour list scored at once (hnsw_score.c) ------------------
 * The query's Hamming distances to the 128-bit codes of ids[0..n) (node i's
 * code at codes + 2 i) into dist[0..n), n <= 64; returns the mask whose
 * bit i is set when dist[i] < bound.  hnsw_score_list_pick gives the copy
 * of the popcount level in force (SIMD_POPCOUNT: 0 portable, 1 POPCNT,
 * 2 AVX2); all give the same distances and mask. */
#define HNSW_SCORE_MAX 64
typedef uint64_t (*hnsw_score_list_fn)(const uint64_t *q, const uint64_t *codes,
                                       const uint32_t *ids, uint32_t n, uint32_t bound,
                                       uint32_t *dist);
hnsw_score_list_fn hnsw_score_list_pick(void);

/* ---- the graph and the search state ---------------------------------- */

/* Memory layout: codes, labels, levels and flags in flat arrays; layer 0
 * links contiguous (node i's block at i * (1 + 2M): a count, then ids);
 * upper-layer links in one block per node that has levels above 0. */
struct hnsw {
    struct hnsw_params p;
    uint32_t words, m, m0;
    double ml;
    size_t n;            /* nodes: n_base attached ones, then the tail */
    /* Nodes 0..n_base-1 of an attached graph (hnsw_attach): views into the
     * caller's mapping, bounds-checked on every read (the file may be
     * hostile).  n_base = 0 for a graph built or loaded on the heap. */
    size_t n_base;
    uint64_t *bcodes;
    struct hnsw_label *blabels;
    uint8_t *blevels, *bdeleted;
    uint32_t *blinks0;
    const uint32_t *buoff; /* node's first upper-link word in bblob */
    uint32_t *bblob;
    size_t bblob_words;
    size_t bytes_mapped; /* the attached file's length */
    /* The tail: nodes n_base.. in heap arrays, node n_base + i at index i. */
    size_t cap;
    uint64_t *codes;     /* cap x words */
    struct hnsw_label *labels; /* cap */
    uint8_t *levels;     /* cap */
    uint8_t *deleted;    /* cap */
    uint32_t *links0;    /* cap x (1 + m0) */
    uint32_t **upper;    /* cap: level x (1 + m) or NULL */
    uint32_t entry;
    int max_level;       /* -1 when empty */
    size_t n_deleted;
    size_t upper_words;  /* sum over nodes of level x (1 + m) */
    uint64_t rng;        /* splitmix64 state for levels */
    uint32_t *map;       /* label -> node, open addressing; UINT32_MAX empty */
    size_t map_mask;
    int map_mapped;      /* map is the attached file's section (not freed) */
    struct hnsw_scratch *build; /* search state of inserts (exclusive) */
    uint64_t *tmp;       /* 2M + 2 keys for link shrinking */
    uint32_t *sel, *sel2; /* 2M + 2 ids each */
    /* Checkpoint tracking (hnsw_track, hnsw_write_delta): which blocks of
     * nodes 0..n_mark-1 changed since the mark; dirty = NULL: not tracked. */
    size_t n_mark;
    uint8_t *dirty;      /* n_mark bytes of DIRTY_* bits */
    /* The code layout (hnsw_layout_build, src/index/hnsw_layout.c): NULL,
     * or one block of lay_words words per node for lay_cap nodes (node i
     * at lay + i lay_words): its layer-0 ids (m0 of them, EMPTY after the
     * last), then the 128-bit codes of those ids in the same order.  Kept
     * equal to the links and codes by every change (hnsw_layout_sync). */
    uint64_t *lay;
    size_t lay_cap, lay_words;
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
    struct hnsw_counts cnt; /* work of the searches made with it */
    /* hnsw_search_many's visit set: one bit per node (n / 8 bytes: a few
     * KiB per shard, so the beams in flight keep theirs in L1/L2), cleared
     * after each search through the list of the nodes it visited */
    uint64_t *vis;
    size_t vis_cap;      /* words */
    uint32_t *vlist;
    size_t vlist_cap, nvis;
};

/* The two bucket queues of one layer search (Alg. 2) as its inner step
 * sees them: the candidates (cand heads, ncand entries, none below
 * bucket cmin) and the results (res heads, nr <= ef entries, none above
 * bucket rmax), their entries taken from pool (used so far).  A local
 * copy in each hot loop (search_layer, the beams of hnsw_search_many),
 * which the inlined bq_offer keeps in registers. */
struct bq {
    struct bq_entry *pool;
    uint32_t *cand, *res;
    size_t ef, nr, ncand;
    uint32_t used, cmin, rmax;
};

/* Alg. 2's update for neighbour e at distance d, the one copy every search
 * loop inlines: e becomes a candidate and a result if the results are not
 * full or d is below the farthest one's, which is then evicted past ef.
 * With check_dead (deleted nodes in the graph, live results wanted) a
 * deleted e is a candidate only: it routes but never enters the results;
 * its flag is read only when e would enter. */
#define BQ_PUSH_(q, head, dist, id)                                          \
    do {                                                                     \
        (q)->pool[(q)->used].node = (id);                                    \
        (q)->pool[(q)->used].next = (q)->head[dist];                         \
        (q)->head[dist] = (q)->used++;                                       \
    } while (0)

#define EMPTY UINT32_MAX
#define NIL UINT32_MAX
#define NO_SLOT SIZE_MAX

#define KEY(d, node) ((uint64_t)(d) << 32 | (uint64_t)(node))
#define KEY_DIST(k) ((uint32_t)((k) >> 32))
#define KEY_NODE(k) ((uint32_t)(k))

/* hnsw_track's bits per node: its layer-0 block, its upper blocks, its
 * deleted flag changed since the mark. */
#define DIRTY_L0 1u
#define DIRTY_UP 2u
#define DIRTY_DEL 4u

static inline void mark_dirty(struct hnsw *h, uint32_t node, unsigned bit)
{
    if (node < h->n_mark)
        h->dirty[node] |= (uint8_t)bit;
}

/* ---- inlined accessors and kernels ----------------------------------- */

/* Per-node accessors: node < h->n (the callers check ids read from links
 * or the label map against h->n first).  A node below n_base lives in the
 * attached file, the others in the heap tail. */
HNSW_INLINE const uint64_t *code_of(const struct hnsw *h, uint32_t node)
{
    if (node < h->n_base)
        return h->bcodes + (size_t)node * h->words;
    return h->codes + (size_t)(node - h->n_base) * h->words;
}

HNSW_INLINE struct hnsw_label *label_ptr(const struct hnsw *h, uint32_t node)
{
    return node < h->n_base ? h->blabels + node : h->labels + (node - h->n_base);
}

HNSW_INLINE uint8_t *level_ptr(const struct hnsw *h, uint32_t node)
{
    return node < h->n_base ? h->blevels + node : h->levels + (node - h->n_base);
}

HNSW_INLINE uint8_t *del_ptr(const struct hnsw *h, uint32_t node)
{
    return node < h->n_base ? h->bdeleted + node : h->deleted + (node - h->n_base);
}

HNSW_INLINE void bq_offer(struct bq *q, uint32_t e, uint32_t d, const struct hnsw *h,
                          int check_dead)
{
    if (q->nr < q->ef || d < q->rmax) {
        BQ_PUSH_(q, cand, d, e);
        q->ncand++;
        if (d < q->cmin)
            q->cmin = d;
        if (check_dead && *del_ptr(h, e))
            return;
        BQ_PUSH_(q, res, d, e);
        if (d > q->rmax || q->nr == 0)
            q->rmax = d;
        if (++q->nr > q->ef) {
            q->res[q->rmax] = q->pool[q->res[q->rmax]].next;
            q->nr--;
            while (q->res[q->rmax] == NIL)
                q->rmax--;
        }
    }
}

HNSW_INLINE uint32_t *links0_of(const struct hnsw *h, uint32_t node)
{
    if (node < h->n_base)
        return h->blinks0 + (size_t)node * (1 + h->m0);
    return h->links0 + (size_t)(node - h->n_base) * (1 + h->m0);
}

/* The link list (count, then ids) of node at level, or NULL when the node
 * has no such level, or its block lies outside the attached file's upper
 * blob (a hostile file).  The count may exceed M / 2M in such a file: the
 * readers clamp it (link_count), and check every id against h->n. */
HNSW_INLINE uint32_t *links_of(const struct hnsw *h, uint32_t node, int level)
{
    size_t off;
    if (level == 0)
        return links0_of(h, node);
    if ((unsigned)level > *level_ptr(h, node))
        return NULL;
    if (node >= h->n_base)
        return h->upper[node - h->n_base] + (size_t)(level - 1) * (1 + h->m);
    off = h->buoff[node];
    if (off > h->bblob_words || (size_t)level * (1 + h->m) > h->bblob_words - off)
        return NULL;
    return h->bblob + off + (size_t)(level - 1) * (1 + h->m);
}

HNSW_INLINE uint32_t link_count(const struct hnsw *h, const uint32_t *l, int level)
{
    uint32_t max = level == 0 ? h->m0 : h->m;
    return l[0] < max ? l[0] : max;
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

#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* Node's block of the code layout (h->lay != NULL, node < h->n): its
 * layer-0 ids as 32-bit words, then from word h->m on (HNSW_LAY_CODES) the
 * codes of those ids, two words each. */
HNSW_INLINE uint64_t *lay_block(const struct hnsw *h, uint32_t node)
{
    return h->lay + (size_t)node * h->lay_words;
}
#define HNSW_LAY_CODES(h, blk) ((blk) + (h)->m)

/* Cache lines holding a link list's count and its first cnt ids. */
HNSW_INLINE uint64_t lines_of(const uint32_t *l, uint32_t cnt)
{
    uintptr_t a = (uintptr_t)l;
    return (uint64_t)((a + 4 * (uintptr_t)cnt) / 64 - a / 64 + 1);
}

/* Sorts keys ascending: insertion sort for short runs (one distance bucket,
 * a link list), quicksort with median-of-three pivots above that.  A
 * file-local function (not inlined, not external): each file that calls
 * it has its own copy, so its callers' hot loops keep the register use
 * the compiler gives a call within one file. */
static HNSW_MAYBE_UNUSED void sort_keys(uint64_t *k, size_t n)
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

/* Grows *a (elem-byte items) to hold at least need, by 1.5x steps. */
static inline int grow_array(void **a, size_t *cap, size_t need, size_t elem)
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

/* Room for the bucket queues' heads (cand_head, res_head) of nb distances
 * (bits + 1) in a scratch: both replaced, their contents not kept, when
 * they are shorter (scratch_prepare in hnsw_bin.c, scratch_prepare_many in
 * hnsw_many.c). */
static inline int scratch_grow_buckets(struct hnsw_scratch *s, uint32_t nb)
{
    uint32_t *c, *r;
    if (nb <= s->nbuckets)
        return MESS_OK;
    c = (uint32_t *)mess_malloc_array(nb, sizeof *c);
    r = (uint32_t *)mess_malloc_array(nb, sizeof *r);
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
    return MESS_OK;
}

/* ---- shared by the index's files, defined in hnsw_bin.c ---------------- */

/* Parameters in range (hnsw_new, and the readers of the file forms). */
int hnsw_params_ok(const struct hnsw_params *p);
/* Room for `need` nodes in all (the tail arrays hold need - n_base). */
int hnsw_grow(struct hnsw *h, size_t need);

/* The label map: open addressing with linear probing from the label's
 * hash, slots naming node ids, EMPTY free. */
size_t hnsw_map_find_slot(const struct hnsw *h, struct hnsw_label label);
void hnsw_map_fill(const struct hnsw *h, uint32_t *map, size_t mask);
size_t hnsw_map_size_for(size_t want);
int hnsw_map_rebuild(struct hnsw *h, size_t want);
void hnsw_map_remove(struct hnsw *h, size_t s);

/* ---- the code layout's upkeep, defined in hnsw_layout.c ------------------ */

/* Room in the layout for `nodes` nodes (hnsw_grow calls it while the
 * layout exists; MESS_ENOMEM leaves it as it was). */
int hnsw_layout_grow(struct hnsw *h, size_t nodes);
/* Writes node's block from its layer-0 list and the codes it names: after
 * every change of the list (a new node, a link added or shrunk, a delta);
 * nothing when there is no layout. */
void hnsw_layout_sync(struct hnsw *h, uint32_t node);

/* ---- the writer of the graph file, shared by the deltas ------------------ */

static inline int host_little_endian(void)
{
    const uint32_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Buffered writer that hashes what it writes. */
struct gw {
    int fd, err;
    uint8_t *buf;
    size_t len, cap;
    uint64_t off;
    crypto_generichash_state st;
};

/* Defined in hnsw_file.c: hnsw_gw_out hashes and writes n bytes,
 * hnsw_gw_put buffers them, hnsw_gw_flush writes the buffer out,
 * hnsw_gw_links writes a link list as a block of 1 + max words. */
void hnsw_gw_out(struct gw *w, const uint8_t *p, size_t n);
void hnsw_gw_flush(struct gw *w);
void hnsw_gw_put(struct gw *w, const void *p, size_t n);
void hnsw_gw_links(struct gw *w, const uint32_t *l, uint32_t cnt, uint32_t max,
                   uint32_t *block);

#endif
