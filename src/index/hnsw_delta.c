/*
 * hnsw_delta.c - checkpoint deltas of an HNSW graph: the record of changes
 * since a mark (hnsw_track), the delta's writer, its header check (the
 * lazy open's) and its apply.  The format below; the blocks are written
 * by the graph file's writer (hnsw_gw_*).
 */
#include "hnsw_internal.h"

/* ---- checkpoint deltas (docs/PROTOCOL.md "Proportional checkpoint") --------
 *
 * A delta holds what changed in a graph since hnsw_track's mark: the nodes
 * added after it, the layer-0 and upper blocks of older nodes that an
 * insert rewrote, the older nodes deleted, and the header fields (entry,
 * top level, deleted count, level-generator state).  hnsw_apply_delta
 * brings a graph holding the mark's state to the writer's: the blocks are
 * written over the mapping (MAP_PRIVATE: copied pages) or the heap tail,
 * new nodes join the tail, the label map takes the changes.  Layout (all
 * little-endian; D_* are header offsets):
 *
 *   0    "MESSDLTA"                 8    u32 version (1)   12 u32 shard
 *   16   u64 generation             24   u64 base generation
 *   32   base graph BLAKE2b-256     64   previous delta's BLAKE2b-256 (zeros)
 *   96   u64 nodes before           104  u64 nodes after
 *   112  u32 entry                  116  u32 top (max level + 1)
 *   120  u64 deleted nodes after    128  u64 level-generator state after
 *   136  u64 changed layer-0 blocks (c0)
 *   144  u64 nodes with changed upper blocks (cu)
 *   152  u64 their upper words (cuw)   160 u64 new nodes' upper words (nuw)
 *   168  u64 newly deleted older nodes (nd)
 *   176  u32 bits    180 u32 m    184 u64 file bytes
 *   192  new nodes (k = after - before): codes k x words u64, labels k x 16,
 *        levels k x u8, deleted k x u8, layer-0 blocks k x (1 + m0) u32,
 *        upper blocks nuw u32 (each node's L blocks of 1 + m, node order)
 *        changed layer-0: c0 u32 ids (ascending, < before), c0 blocks
 *        changed upper: cu u32 ids (ascending, < before), cuw u32 (all L
 *        blocks of each, in id order)
 *        deleted: nd u32 ids (ascending, < before)
 *   end  BLAKE2b-256 of every byte before it
 *
 * Every block is (count, ids, zeros) as in the graph file. */
static const uint8_t delta_magic[8] = {'M', 'E', 'S', 'S', 'D', 'L', 'T', 'A'};
#define DELTA_VERSION 1u
#define D_VERSION 8
#define D_SHARD 12
#define D_GEN 16
#define D_BASEGEN 24
#define D_BASESUM 32
#define D_PREVSUM 64
#define D_BEFORE 96
#define D_AFTER 104
#define D_ENTRY 112
#define D_TOP 116
#define D_NDEL 120
#define D_RNG 128
#define D_C0 136
#define D_CU 144
#define D_CUW 152
#define D_NUW 160
#define D_ND 168
#define D_BITS 176
#define D_M 180
#define D_BYTES 184
#define D_HEADER 192

int hnsw_track(struct hnsw *h)
{
    if (!h)
        return MESS_EINVAL;
    free(h->dirty);
    h->n_mark = 0;
    h->dirty = (uint8_t *)calloc(h->n ? h->n : 1, 1);
    if (!h->dirty)
        return MESS_ENOMEM; /* untracked: the next checkpoint writes a base */
    h->n_mark = h->n;
    return MESS_OK;
}

int hnsw_tracked(const struct hnsw *h)
{
    return h && h->dirty != NULL;
}

/* The counts of the delta since the mark. */
struct delta_counts {
    uint64_t k, nuw, c0, cu, cuw, nd, bytes;
};

static void delta_count(const struct hnsw *h, struct delta_counts *c)
{
    size_t i;
    memset(c, 0, sizeof *c);
    c->k = h->n - h->n_mark;
    for (i = h->n_mark; i < h->n; i++)
        c->nuw += (uint64_t)*level_ptr(h, (uint32_t)i) * (1 + h->m);
    for (i = 0; i < h->n_mark; i++) {
        uint8_t d = h->dirty[i];
        if (!d)
            continue;
        if (d & DIRTY_L0)
            c->c0++;
        if ((d & DIRTY_UP) && *level_ptr(h, (uint32_t)i) > 0 &&
            *level_ptr(h, (uint32_t)i) <= HNSW_MAX_LEVEL) {
            c->cu++;
            c->cuw += (uint64_t)*level_ptr(h, (uint32_t)i) * (1 + h->m);
        }
        if ((d & DIRTY_DEL) && *del_ptr(h, (uint32_t)i))
            c->nd++;
    }
    c->bytes = D_HEADER + c->k * ((uint64_t)h->words * 8 + 16 + 2 + (1 + (uint64_t)h->m0) * 4) +
               c->nuw * 4 + c->c0 * (4 + (1 + (uint64_t)h->m0) * 4) + c->cu * 4 + c->cuw * 4 +
               c->nd * 4 + 32;
}

uint64_t hnsw_delta_bytes(const struct hnsw *h)
{
    struct delta_counts c;
    if (!hnsw_tracked(h))
        return UINT64_MAX;
    delta_count(h, &c);
    return c.bytes;
}

int hnsw_write_delta(const struct hnsw *h, const struct hnsw_delta_info *info, int fd,
                     uint8_t digest[32], uint64_t *bytes)
{
    struct delta_counts c;
    struct gw w;
    uint8_t hdr[D_HEADER];
    uint32_t *block = NULL;
    size_t i;
    int lv;

    if (!h || !info || fd < 0 || !digest || !hnsw_tracked(h))
        return MESS_EINVAL;
    if (!host_little_endian())
        return MESS_EINVAL;
    delta_count(h, &c);
    memset(&w, 0, sizeof w);
    w.fd = fd;
    w.cap = 1 << 16;
    w.buf = (uint8_t *)malloc(w.cap);
    block = (uint32_t *)mess_malloc_array(1 + (size_t)h->m0, 4);
    if (!w.buf || !block) {
        free(w.buf);
        free(block);
        return MESS_ENOMEM;
    }
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, delta_magic, 8);
    mess_store_u32(hdr + D_VERSION, DELTA_VERSION);
    mess_store_u32(hdr + D_SHARD, info->shard);
    mess_store_u64(hdr + D_GEN, info->generation);
    mess_store_u64(hdr + D_BASEGEN, info->base_generation);
    memcpy(hdr + D_BASESUM, info->base_digest, 32);
    memcpy(hdr + D_PREVSUM, info->prev_digest, 32);
    mess_store_u64(hdr + D_BEFORE, h->n_mark);
    mess_store_u64(hdr + D_AFTER, h->n);
    mess_store_u32(hdr + D_ENTRY, h->entry);
    mess_store_u32(hdr + D_TOP, (uint32_t)(h->max_level + 1));
    mess_store_u64(hdr + D_NDEL, h->n_deleted);
    mess_store_u64(hdr + D_RNG, h->rng);
    mess_store_u64(hdr + D_C0, c.c0);
    mess_store_u64(hdr + D_CU, c.cu);
    mess_store_u64(hdr + D_CUW, c.cuw);
    mess_store_u64(hdr + D_NUW, c.nuw);
    mess_store_u64(hdr + D_ND, c.nd);
    mess_store_u32(hdr + D_BITS, h->p.bits);
    mess_store_u32(hdr + D_M, h->p.m);
    mess_store_u64(hdr + D_BYTES, c.bytes);
    crypto_generichash_init(&w.st, NULL, 0, 32);
    hnsw_gw_put(&w, hdr, sizeof hdr);
    /* new nodes */
    for (i = h->n_mark; i < h->n; i++)
        hnsw_gw_put(&w, code_of(h, (uint32_t)i), (size_t)h->words * 8);
    for (i = h->n_mark; i < h->n; i++)
        hnsw_gw_put(&w, label_ptr(h, (uint32_t)i), 16);
    for (i = h->n_mark; i < h->n; i++)
        hnsw_gw_put(&w, level_ptr(h, (uint32_t)i), 1);
    for (i = h->n_mark; i < h->n; i++) {
        uint8_t d = *del_ptr(h, (uint32_t)i) != 0;
        hnsw_gw_put(&w, &d, 1);
    }
    for (i = h->n_mark; i < h->n; i++) {
        const uint32_t *l = links0_of(h, (uint32_t)i);
        hnsw_gw_links(&w, l, link_count(h, l, 0), h->m0, block);
    }
    for (i = h->n_mark; i < h->n; i++)
        for (lv = 1; lv <= *level_ptr(h, (uint32_t)i); lv++) {
            const uint32_t *l = links_of(h, (uint32_t)i, lv);
            hnsw_gw_links(&w, l, l ? link_count(h, l, lv) : 0, h->m, block);
        }
    /* changed blocks of older nodes, then their deletions */
    for (i = 0; i < h->n_mark; i++)
        if (h->dirty[i] & DIRTY_L0) {
            uint32_t id = (uint32_t)i;
            hnsw_gw_put(&w, &id, 4);
        }
    for (i = 0; i < h->n_mark; i++)
        if (h->dirty[i] & DIRTY_L0) {
            const uint32_t *l = links0_of(h, (uint32_t)i);
            hnsw_gw_links(&w, l, link_count(h, l, 0), h->m0, block);
        }
#define UP_CHANGED(i)                                                             \
    ((h->dirty[i] & DIRTY_UP) && *level_ptr(h, (uint32_t)(i)) > 0 &&             \
     *level_ptr(h, (uint32_t)(i)) <= HNSW_MAX_LEVEL)
    for (i = 0; i < h->n_mark; i++)
        if (UP_CHANGED(i)) {
            uint32_t id = (uint32_t)i;
            hnsw_gw_put(&w, &id, 4);
        }
    for (i = 0; i < h->n_mark; i++)
        if (UP_CHANGED(i))
            for (lv = 1; lv <= *level_ptr(h, (uint32_t)i); lv++) {
                const uint32_t *l = links_of(h, (uint32_t)i, lv);
                hnsw_gw_links(&w, l, l ? link_count(h, l, lv) : 0, h->m, block);
            }
#undef UP_CHANGED
    for (i = 0; i < h->n_mark; i++)
        if ((h->dirty[i] & DIRTY_DEL) && *del_ptr(h, (uint32_t)i)) {
            uint32_t id = (uint32_t)i;
            hnsw_gw_put(&w, &id, 4);
        }
    hnsw_gw_flush(&w);
    if (!w.err) {
        crypto_generichash_final(&w.st, digest, 32);
        hnsw_gw_out(&w, digest, 32);
    }
    if (!w.err && w.off + 32 != c.bytes)
        w.err = MESS_EFORMAT; /* cannot happen: the counts and the writes agree */
    free(w.buf);
    free(block);
    if (!w.err && bytes)
        *bytes = c.bytes;
    return w.err;
}

/* A block of 1 + max words read from a delta: count <= max, ids < n, zero
 * after them. */
static int delta_block_ok(const uint8_t *p, uint32_t max, uint64_t n)
{
    uint32_t cnt = mess_load_u32(p), i;
    if (cnt > max)
        return 0;
    for (i = 1; i <= max; i++) {
        uint32_t v = mess_load_u32(p + 4 * (size_t)i);
        if (i <= cnt ? v >= n : v != 0)
            return 0;
    }
    return 1;
}

static int label_cmp(const void *a, const void *b)
{
    const struct hnsw_label *x = (const struct hnsw_label *)a, *y = (const struct hnsw_label *)b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return 0;
}

static int id_in(const uint8_t *ids, uint64_t n, uint32_t id)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        uint32_t v = mess_load_u32(ids + 4 * mid);
        if (v == id)
            return 1;
        if (v < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* A delta's counts as its header states them (D_* offsets above). */
struct delta_head {
    uint64_t before, after; /* nodes */
    uint64_t ndel;          /* deleted nodes after */
    uint64_t c0, cu, cuw;   /* changed layer-0 blocks, upper blocks, their words */
    uint64_t nuw, nd;       /* new nodes' upper words, newly deleted older nodes */
    uint32_t entry, top;
};

static void delta_head_load(const uint8_t *b, struct delta_head *d)
{
    d->before = mess_load_u64(b + D_BEFORE);
    d->after = mess_load_u64(b + D_AFTER);
    d->entry = mess_load_u32(b + D_ENTRY);
    d->top = mess_load_u32(b + D_TOP);
    d->ndel = mess_load_u64(b + D_NDEL);
    d->c0 = mess_load_u64(b + D_C0);
    d->cu = mess_load_u64(b + D_CU);
    d->cuw = mess_load_u64(b + D_CUW);
    d->nuw = mess_load_u64(b + D_NUW);
    d->nd = mess_load_u64(b + D_ND);
}

/* The header fields of a delta of len bytes (the file's length; only the
 * first D_HEADER bytes of b are read) against what the graph h and the
 * chain expect: shard, generations, base and previous digests, the graph's
 * parameters, nodes before = `before` and after, every count in range,
 * and the length the counts give.  The level check against h's top is
 * hnsw_apply_delta's (it needs the earlier deltas applied).  Fills d. */
static int delta_fields(const struct hnsw *h, const uint8_t *b, uint64_t len, uint64_t before_want,
                        const struct hnsw_delta_info *expect, struct delta_head *d, char *msg,
                        size_t cap)
{
    uint64_t k, want, blk0;
    if (mess_load_u32(b + D_SHARD) != expect->shard ||
        mess_load_u64(b + D_GEN) != expect->generation ||
        mess_load_u64(b + D_BASEGEN) != expect->base_generation ||
        sodium_memcmp(b + D_BASESUM, expect->base_digest, 32) != 0 ||
        sodium_memcmp(b + D_PREVSUM, expect->prev_digest, 32) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT,
                   "delta belongs to another shard, generation, base or chain");
    if (mess_load_u32(b + D_BITS) != h->p.bits || mess_load_u32(b + D_M) != h->p.m)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta made for other graph parameters");
    delta_head_load(b, d);
    if (d->before != before_want || d->after < d->before || d->after > HNSW_MAX_NODES ||
        (expect->nodes_after != UINT64_MAX && d->after != expect->nodes_after))
        return mess_fail(msg, cap, MESS_EFORMAT,
                   "delta: %llu nodes before / %llu after, the graph has %llu",
                   (unsigned long long)d->before, (unsigned long long)d->after,
                   (unsigned long long)before_want);
    if (d->c0 > d->before || d->cu > d->before || d->nd > d->before || d->cuw > UINT32_MAX ||
        d->nuw > UINT32_MAX ||
        d->ndel > d->after || d->top > HNSW_MAX_LEVEL + 1 || (d->after == 0) != (d->top == 0) ||
        (d->after > 0 && d->entry >= d->after) || (d->after == 0 && d->entry != EMPTY))
        return mess_fail(msg, cap, MESS_EFORMAT, "delta header: a count, entry point or level out of range");
    k = d->after - d->before;
    blk0 = (1 + (uint64_t)h->m0) * 4;
    want = D_HEADER + k * ((uint64_t)h->words * 8 + 16 + 2 + blk0) + d->nuw * 4 +
           d->c0 * (4 + blk0) + d->cu * 4 + d->cuw * 4 + d->nd * 4 + 32;
    if (want != len || mess_load_u64(b + D_BYTES) != len)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta of %llu bytes, its counts give %llu",
                   (unsigned long long)len, (unsigned long long)want);
    return MESS_OK;
}

/* Magic and version. */
static int delta_magic_ok(const uint8_t *b, uint64_t len, char *msg, size_t cap)
{
    uint32_t version;
    if (len < D_HEADER + 32)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta of %llu bytes: shorter than its header",
                   (unsigned long long)len);
    if (memcmp(b, delta_magic, 8) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT, "not a delta file (bad magic)");
    version = mess_load_u32(b + D_VERSION);
    if (version != DELTA_VERSION)
        return mess_fail(msg, cap, MESS_EVERSION, "delta format version %u, this library reads %u",
                   version, DELTA_VERSION);
    return MESS_OK;
}

int hnsw_delta_header_check(const struct hnsw *h, const uint8_t *hdr, size_t hdr_len,
                            uint64_t file_len, uint64_t before,
                            const struct hnsw_delta_info *expect, uint64_t *deleted_after,
                            char *msg, size_t cap)
{
    struct delta_head d;
    int rc;
    if (msg && cap)
        msg[0] = 0;
    if (!h || !hdr || !expect)
        return MESS_EINVAL;
    if (hdr_len < HNSW_DELTA_HEADER_BYTES)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta of %llu bytes: shorter than its header",
                   (unsigned long long)file_len);
    rc = delta_magic_ok(hdr, file_len, msg, cap);
    if (rc == MESS_OK)
        rc = delta_fields(h, hdr, file_len, before, expect, &d, msg, cap);
    if (rc == MESS_OK && deleted_after)
        *deleted_after = d.ndel;
    return rc;
}

int hnsw_apply_delta(struct hnsw *h, const uint8_t *b, size_t len,
                     const struct hnsw_delta_info *expect, char *msg, size_t cap)
{
    uint8_t sum[32];
    uint64_t k, blk0, blk, off, i, up;
    uint64_t newdel = 0;
    uint32_t lv;
    struct delta_head d;
    const uint8_t *codes, *labels, *levels, *dels, *l0, *ublob, *c0ids, *c0blk, *cuids,
        *cublob, *ndids;
    struct hnsw_label *sorted = NULL;
    uint32_t **blocks = NULL;
    int rc;

    if (msg && cap)
        msg[0] = 0;
    if (!h || !b || !expect)
        return MESS_EINVAL;
    rc = delta_magic_ok(b, len, msg, cap);
    if (rc != MESS_OK)
        return rc;
    crypto_generichash(sum, 32, b, len - 32, NULL, 0);
    if (sodium_memcmp(sum, b + len - 32, 32) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta checksum mismatch (truncated or modified)");
    if (sodium_memcmp(sum, expect->digest, 32) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta digest differs from the manifest's");
    rc = delta_fields(h, b, len, h->n, expect, &d, msg, cap);
    if (rc != MESS_OK)
        return rc;
    if ((int)d.top < h->max_level + 1)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta header: a count, entry point or level out of range");
    k = d.after - d.before;
    blk0 = (1 + (uint64_t)h->m0) * 4;
    blk = (1 + (uint64_t)h->m) * 4;
    off = D_HEADER;
    codes = b + off; off += k * h->words * 8;
    labels = b + off; off += k * 16;
    levels = b + off; off += k;
    dels = b + off; off += k;
    l0 = b + off; off += k * blk0;
    ublob = b + off; off += d.nuw * 4;
    c0ids = b + off; off += d.c0 * 4;
    c0blk = b + off; off += d.c0 * blk0;
    cuids = b + off; off += d.cu * 4;
    cublob = b + off; off += d.cuw * 4;
    ndids = b + off;

    /* new nodes: levels, flags, blocks */
    up = 0;
    for (i = 0; i < k; i++) {
        if (levels[i] > HNSW_MAX_LEVEL || levels[i] >= d.top || dels[i] > 1)
            return mess_fail(msg, cap, MESS_EFORMAT, "delta: new node %llu: level or flag out of range",
                       (unsigned long long)(d.before + i));
        newdel += dels[i];
        if (!delta_block_ok(l0 + i * blk0, h->m0, d.after))
            return mess_fail(msg, cap, MESS_EFORMAT, "delta: new node %llu: bad layer-0 links",
                       (unsigned long long)(d.before + i));
        for (lv = 0; lv < levels[i]; lv++) {
            if (d.nuw - up < 1 + (uint64_t)h->m || !delta_block_ok(ublob + up * 4, h->m, d.after))
                return mess_fail(msg, cap, MESS_EFORMAT, "delta: new node %llu: bad upper links",
                           (unsigned long long)(d.before + i));
            up += 1 + h->m;
        }
    }
    if (up != d.nuw)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta: new nodes' upper words disagree with the header");
    /* changed blocks of older nodes */
    for (i = 0; i < d.c0; i++) {
        uint32_t id = mess_load_u32(c0ids + 4 * i);
        if (id >= d.before || (i > 0 && id <= mess_load_u32(c0ids + 4 * (i - 1))) ||
            !delta_block_ok(c0blk + i * blk0, h->m0, d.after))
            return mess_fail(msg, cap, MESS_EFORMAT, "delta: changed layer-0 block %llu is bad",
                       (unsigned long long)i);
    }
    up = 0;
    for (i = 0; i < d.cu; i++) {
        uint32_t id = mess_load_u32(cuids + 4 * i), L;
        if (id >= d.before || (i > 0 && id <= mess_load_u32(cuids + 4 * (i - 1))))
            return mess_fail(msg, cap, MESS_EFORMAT, "delta: changed upper node %llu out of order",
                       (unsigned long long)i);
        L = *level_ptr(h, id);
        if (L == 0 || L > HNSW_MAX_LEVEL || !links_of(h, id, (int)L))
            return mess_fail(msg, cap, MESS_EFORMAT, "delta: node %u has no upper blocks to change", id);
        for (lv = 0; lv < L; lv++) {
            if (d.cuw - up < 1 + (uint64_t)h->m || !delta_block_ok(cublob + up * 4, h->m, d.after))
                return mess_fail(msg, cap, MESS_EFORMAT, "delta: node %u: bad upper links", id);
            up += 1 + h->m;
        }
    }
    if (up != d.cuw)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta: changed upper words disagree with the header");
    for (i = 0; i < d.nd; i++) {
        uint32_t id = mess_load_u32(ndids + 4 * i);
        if (id >= d.before || (i > 0 && id <= mess_load_u32(ndids + 4 * (i - 1))) ||
            *del_ptr(h, id))
            return mess_fail(msg, cap, MESS_EFORMAT, "delta: deletion %llu names no live older node",
                       (unsigned long long)i);
    }
    if (h->n_deleted + d.nd + newdel != d.ndel)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta: deleted count %llu, its deletions give %llu",
                   (unsigned long long)d.ndel,
                   (unsigned long long)(h->n_deleted + d.nd + newdel));
    if (d.after > 0 &&
        (d.entry < d.before ? *level_ptr(h, d.entry) : levels[d.entry - d.before]) + 1u != d.top)
        return mess_fail(msg, cap, MESS_EFORMAT, "delta: the entry point is not on the top level");
    /* the new live labels: unique, and not a live older node's (unless it
     * is deleted here) */
    if (k > 0) {
        uint64_t nl = 0;
        sorted = (struct hnsw_label *)mess_malloc_array((size_t)k, sizeof *sorted);
        blocks = (uint32_t **)mess_calloc_array((size_t)k, sizeof *blocks);
        if (!sorted || !blocks) {
            rc = MESS_ENOMEM;
            goto fail;
        }
        for (i = 0; i < k; i++)
            if (!dels[i]) {
                struct hnsw_label l;
                uint32_t node;
                memcpy(&l, labels + 16 * i, 16);
                sorted[nl++] = l;
                if (hnsw_find(h, l, &node) == MESS_OK && !id_in(ndids, d.nd, node)) {
                    rc = mess_fail(msg, cap, MESS_EFORMAT,
                             "delta: new node %llu has the label of live node %u",
                             (unsigned long long)(d.before + i), node);
                    goto fail;
                }
            }
        qsort(sorted, (size_t)nl, sizeof *sorted, label_cmp);
        for (i = 1; i < nl; i++)
            if (hnsw_label_eq(sorted[i - 1], sorted[i])) {
                rc = mess_fail(msg, cap, MESS_EFORMAT, "delta: two new nodes share a label");
                goto fail;
            }
        /* every allocation before the first change */
        for (i = 0; i < k; i++)
            if (levels[i] > 0) {
                blocks[i] = (uint32_t *)mess_malloc_array((size_t)levels[i] * (1 + h->m), 4);
                if (!blocks[i]) {
                    rc = MESS_ENOMEM;
                    goto fail;
                }
            }
        rc = hnsw_grow(h, (size_t)d.after);
        if (rc != MESS_OK)
            goto fail;
    }
    if (!h->map || 2 * d.after > h->map_mask + 1) {
        /* the map a handle growing to `after` nodes rebuilds; made
         * before any change (a failure leaves the graph as it was) */
        rc = hnsw_map_rebuild(h, 2 * (size_t)d.after > 16 ? 2 * (size_t)d.after : 16);
        if (rc != MESS_OK)
            goto fail;
    }

    /* apply: nothing below fails */
    for (i = 0; i < d.nd; i++) {
        uint32_t id = mess_load_u32(ndids + 4 * i);
        size_t s = hnsw_map_find_slot(h, *label_ptr(h, id));
        *del_ptr(h, id) = 1;
        if (s != NO_SLOT && h->map[s] == id)
            hnsw_map_remove(h, s);
    }
    for (i = 0; i < k; i++) {
        size_t t = (size_t)(d.before + i - h->n_base);
        memcpy(h->codes + t * h->words, codes + i * h->words * 8, (size_t)h->words * 8);
        memcpy(&h->labels[t], labels + 16 * i, 16);
        h->levels[t] = levels[i];
        h->deleted[t] = dels[i];
        memcpy(h->links0 + t * (1 + h->m0), l0 + i * blk0, (size_t)blk0);
        free(h->upper[t]);
        h->upper[t] = blocks[i];
        blocks[i] = NULL;
    }
    up = 0;
    for (i = 0; i < k; i++)
        if (levels[i] > 0) {
            size_t t = (size_t)(d.before + i - h->n_base);
            memcpy(h->upper[t], ublob + up * 4, (size_t)levels[i] * (size_t)blk);
            up += (uint64_t)levels[i] * (1 + h->m);
        }
    h->n = (size_t)d.after;
    h->upper_words += (size_t)d.nuw;
    for (i = 0; i < k; i++)
        if (!dels[i]) {
            size_t s = hnsw_map_find_slot(h, h->labels[d.before + i - h->n_base]);
            if (s == NO_SLOT) { /* cannot happen: the map has room */
                hnsw_map_fill(h, h->map, h->map_mask);
                break;
            }
            h->map[s] = (uint32_t)(d.before + i);
        }
    for (i = 0; i < d.c0; i++)
        memcpy(links0_of(h, mess_load_u32(c0ids + 4 * i)), c0blk + i * blk0, (size_t)blk0);
    /* the code layout, if any: the new nodes' blocks and the changed ones */
    for (i = 0; i < k; i++)
        hnsw_layout_sync(h, (uint32_t)(d.before + i));
    for (i = 0; i < d.c0; i++)
        hnsw_layout_sync(h, mess_load_u32(c0ids + 4 * i));
    up = 0;
    for (i = 0; i < d.cu; i++) {
        uint32_t id = mess_load_u32(cuids + 4 * i), L = *level_ptr(h, id);
        memcpy(links_of(h, id, 1), cublob + up * 4, (size_t)L * (size_t)blk);
        up += (uint64_t)L * (1 + h->m);
    }
    h->entry = d.after ? d.entry : EMPTY;
    h->max_level = (int)d.top - 1;
    h->n_deleted = (size_t)d.ndel;
    h->rng = mess_load_u64(b + D_RNG);
    rc = MESS_OK;
fail:
    if (blocks)
        for (i = 0; i < k; i++)
            free(blocks[i]);
    free(blocks);
    free(sorted);
    return rc;
}
