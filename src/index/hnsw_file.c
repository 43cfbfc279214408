/*
 * hnsw_file.c - the HNSW graph in files: the travel form (hnsw_serialize /
 * hnsw_deserialize), the graph file that is mapped and searched in place
 * (hnsw_write_graph, hnsw_attach, hnsw_graph_digest) with its buffered
 * hashing writer (the deltas' too), and the full check of any graph
 * (hnsw_check).  Every reader checks what it reads: the files are hostile
 * input (docs/HNSW.md, "Serialized form", "Graph file").
 */
#include <errno.h>
#include <unistd.h>

#include "hnsw_internal.h"

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
