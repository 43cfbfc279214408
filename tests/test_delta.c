/*
 * test_delta.c - checkpoint deltas at the graph level (hnsw_track,
 * hnsw_write_delta, hnsw_apply_delta; docs/PROTOCOL.md "Proportional
 * checkpoint"), written by a reviewer of the format:
 *   - a base graph file attached and a chain of two deltas applied gives
 *     the writer's graph byte for byte (graph file, search answers), and
 *     the same further inserts then give the same graph file and the same
 *     next delta (level generator, entry point, deleted count);
 *   - a delta applied out of order, twice, to another shard or to the
 *     wrong base is refused and leaves the graph as it was;
 *   - every header count, id and level made wrong (the digest recomputed
 *     so the checks behind it are reached) is refused, graph unchanged;
 *   - upper-block word counts that do not hold whole blocks are refused
 *     without reading past the end of the delta (the buffer ends at a
 *     PROT_NONE page, so an over-read faults in any build).  Before the
 *     check of whole blocks, such a block was read on into the next
 *     section and the digest; the scan stopped at the digest's first word
 *     that was not a valid id, so only a graph of about 2^31 nodes could
 *     have let it run past the end.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sodium.h>

#include "hnsw_bin.h"
#include "hnsw_internal.h" /* the code layout's blocks */
#include "internal.h"
#include "harness.h"

#define BITS 128
#define WORDS (BITS / 64)
#define NQ 24
#define D_HEADER 192

static uint64_t rs = 0x243f6a8885a308d3ull;

static uint64_t next64(void)
{
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Codes clustered around 8 centres, so inserts rewrite older blocks. */
static uint64_t codes[2000 * WORDS];

static void make_codes(void)
{
    uint64_t centre[8 * WORDS];
    size_t i, w;
    for (i = 0; i < 8 * WORDS; i++)
        centre[i] = next64();
    for (i = 0; i < 2000; i++)
        for (w = 0; w < WORDS; w++)
            codes[i * WORDS + w] =
                centre[(i % 8) * WORDS + w] ^ (next64() & next64() & next64());
}

#define LB(i) hnsw_label_of(0x1000u + (uint64_t)(i), 0x77ull)

static struct hnsw *graph_new(uint32_t m)
{
    struct hnsw_params p;
    struct hnsw *h = NULL;
    memset(&p, 0, sizeof p);
    p.bits = BITS;
    p.m = m;
    p.ef_construction = 32;
    p.seed = 99;
    return hnsw_new(&p, &h) == MESS_OK ? h : NULL;
}

static int add_range(struct hnsw *h, size_t from, size_t to)
{
    size_t i;
    for (i = from; i < to; i++)
        if (hnsw_add(h, codes + i * WORDS, LB(i), NULL) != MESS_OK)
            return -1;
    return 0;
}

/* h's graph file in a 4096-aligned heap buffer (attachable, writable). */
static uint8_t *graph_file(const struct hnsw *h, size_t *len, uint8_t digest[32])
{
    char path[] = "/tmp/test_delta_XXXXXX";
    int fd = mkstemp(path);
    void *p = NULL;
    off_t end;
    if (fd < 0)
        return NULL;
    unlink(path);
    if (hnsw_write_graph(h, fd, digest) != MESS_OK || (end = lseek(fd, 0, SEEK_END)) <= 0 ||
        posix_memalign(&p, 4096, (size_t)end) != 0 ||
        pread(fd, p, (size_t)end, 0) != (ssize_t)end) {
        free(p);
        close(fd);
        return NULL;
    }
    close(fd);
    *len = (size_t)end;
    return (uint8_t *)p;
}

/* Same graph file bytes. */
static int same_graph(const struct hnsw *a, const struct hnsw *b)
{
    size_t la = 0, lb = 0;
    uint8_t d[32];
    uint8_t *x = graph_file(a, &la, d), *y = graph_file(b, &lb, d);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* The delta since h's mark, exactly its bytes (malloc'd). */
static uint8_t *delta_of(const struct hnsw *h, const struct hnsw_delta_info *info,
                         size_t *len, uint8_t digest[32])
{
    char path[] = "/tmp/test_delta_XXXXXX";
    int fd = mkstemp(path);
    uint64_t bytes = 0;
    uint8_t *p;
    if (fd < 0)
        return NULL;
    unlink(path);
    if (hnsw_write_delta(h, info, fd, digest, &bytes) != MESS_OK || bytes == 0 ||
        !(p = (uint8_t *)malloc((size_t)bytes)) || pread(fd, p, (size_t)bytes, 0) != (ssize_t)bytes) {
        close(fd);
        return NULL;
    }
    close(fd);
    *len = (size_t)bytes;
    return p;
}

/* A graph attached to a private copy of the base file (*copy: free it
 * after hnsw_free). */
static struct hnsw *attach_copy(const uint8_t *base, size_t len, uint8_t **copy)
{
    struct hnsw *h = NULL;
    void *p = NULL;
    *copy = NULL;
    if (posix_memalign(&p, 4096, len) != 0)
        return NULL;
    memcpy(p, base, len);
    if (hnsw_attach(p, len, NULL, &h) != MESS_OK) {
        free(p);
        return NULL;
    }
    *copy = (uint8_t *)p;
    return h;
}

static int same_search(const struct hnsw *a, const struct hnsw *b)
{
    struct hnsw_scratch *s = NULL;
    struct hnsw_hit ha[10], hb[10];
    size_t q, na, nb;
    int same = hnsw_scratch_new(&s) == MESS_OK;
    for (q = 0; same && q < NQ; q++) {
        const uint64_t *c = codes + (1900 + q) * WORDS;
        if (hnsw_search(a, s, c, 10, 40, ha, &na) != MESS_OK ||
            hnsw_search(b, s, c, 10, 40, hb, &nb) != MESS_OK || na != nb ||
            memcmp(ha, hb, na * sizeof *ha) != 0)
            same = 0;
    }
    hnsw_scratch_free(s);
    return same;
}

static void resum(uint8_t *b, size_t len)
{
    crypto_generichash(b + len - 32, 32, b, len - 32, NULL, 0);
}

/* 1 if g's code layout equals the one built from g anew (the blocks kept
 * up through the deltas are those a build gives). */
static int layout_fresh(struct hnsw *g)
{
    size_t bytes = hnsw_count(g) * g->lay_words * 8;
    uint64_t *kept = (uint64_t *)malloc(bytes ? bytes : 1);
    int same;
    if (!kept || !g->lay) {
        free(kept);
        return 0;
    }
    memcpy(kept, g->lay, bytes);
    same = hnsw_layout_build(g) == MESS_OK && memcmp(kept, g->lay, bytes) == 0;
    free(kept);
    return same;
}

/* Applies d (len bytes) to g with expect's digest set to d's own. */
static int apply(struct hnsw *g, const uint8_t *d, size_t len, struct hnsw_delta_info *e,
                 char *msg, size_t cap)
{
    if (len >= 32)
        memcpy(e->digest, d + len - 32, 32);
    return hnsw_apply_delta(g, d, len, e, msg, cap);
}

/* ---- the writer's state, through a chain ---------------------------------- */

static void test_chain_equals_writer(void)
{
    struct hnsw *w = graph_new(6), *r = NULL, *r2 = NULL;
    struct hnsw_delta_info i1, i2, e;
    uint8_t *base = NULL, *copy = NULL, *copy2 = NULL, *d1 = NULL, *d2 = NULL, *x = NULL,
            *y = NULL;
    uint8_t bsum[32], s1[32], s2[32], sx[32], sy[32];
    size_t blen = 0, l1 = 0, l2 = 0, lx = 0, ly = 0, i;
    char msg[200];

    CHECK(w && add_range(w, 0, 500) == 0);
    for (i = 0; i < 40; i += 4)
        CHECK_OK(hnsw_delete(w, LB(i)));
    base = graph_file(w, &blen, bsum);
    CHECK(base != NULL);
    CHECK_OK(hnsw_track(w));

    /* delta 1: 80 inserts, older and newer nodes deleted */
    CHECK(add_range(w, 500, 580) == 0);
    for (i = 100; i < 130; i += 3)
        CHECK_OK(hnsw_delete(w, LB(i)));
    CHECK_OK(hnsw_delete(w, LB(510)));
    CHECK_OK(hnsw_delete(w, LB(577)));
    memset(&i1, 0, sizeof i1);
    i1.shard = 3;
    i1.generation = 2;
    i1.base_generation = 1;
    memcpy(i1.base_digest, bsum, 32);
    d1 = delta_of(w, &i1, &l1, s1);
    CHECK(d1 != NULL);
    CHECK_OK(hnsw_track(w));

    /* delta 2: more inserts, deletions of a base node and of delta 1's */
    CHECK(add_range(w, 580, 640) == 0);
    CHECK_OK(hnsw_delete(w, LB(300)));
    CHECK_OK(hnsw_delete(w, LB(520)));
    CHECK_OK(hnsw_delete(w, LB(630)));
    i2 = i1;
    i2.generation = 3;
    memcpy(i2.prev_digest, s1, 32);
    d2 = delta_of(w, &i2, &l2, s2);
    CHECK(d2 != NULL);
    if (!base || !d1 || !d2) {
        hnsw_free(w);
        free(base);
        free(d1);
        free(d2);
        return;
    }

    /* the reader: base + delta 1 + delta 2 */
    r = attach_copy(base, blen, &copy);
    CHECK(r != NULL);
    /* with the code layout, which the deltas keep up */
    CHECK_OK(hnsw_layout_build(r));
    e = i1;
    e.nodes_after = 580;
    CHECK_OK(apply(r, d1, l1, &e, msg, sizeof msg));
    /* twice: refused, nothing changes */
    CHECK_RC(apply(r, d1, l1, &e, msg, sizeof msg), MESS_EFORMAT);
    CHECK(hnsw_count(r) == 580);
    e = i2;
    e.nodes_after = 640;
    CHECK_OK(apply(r, d2, l2, &e, msg, sizeof msg));
    CHECK(hnsw_count(r) == hnsw_count(w) && hnsw_deleted(r) == hnsw_deleted(w) &&
          hnsw_entry_point(r) == hnsw_entry_point(w));
    CHECK_OK(hnsw_check(r));
    CHECK(same_graph(r, w));
    CHECK(same_search(r, w));
    CHECK(layout_fresh(r));

    /* the same further work on both: the same graph and the same delta */
    CHECK_OK(hnsw_track(w));
    CHECK_OK(hnsw_track(r));
    CHECK(add_range(w, 640, 700) == 0 && add_range(r, 640, 700) == 0);
    CHECK_OK(hnsw_delete(w, LB(200)));
    CHECK_OK(hnsw_delete(r, LB(200)));
    CHECK(same_graph(r, w));
    CHECK(same_search(r, w));
    i2.generation = 4;
    memcpy(i2.prev_digest, s2, 32);
    x = delta_of(w, &i2, &lx, sx);
    y = delta_of(r, &i2, &ly, sy);
    CHECK(x && y && lx == ly && memcmp(x, y, lx) == 0);

    /* out of order, wrong shard, wrong base: refused, graph unchanged */
    r2 = attach_copy(base, blen, &copy2);
    CHECK(r2 != NULL);
    if (r2) {
        size_t n0 = hnsw_count(r2);
        e = i2;
        e.generation = 3;
        memset(e.prev_digest, 0, 32);
        memcpy(e.prev_digest, s1, 32);
        e.nodes_after = UINT64_MAX;
        CHECK_RC(apply(r2, d2, l2, &e, msg, sizeof msg), MESS_EFORMAT); /* before d1 */
        e = i1;
        e.nodes_after = UINT64_MAX;
        e.shard = 4;
        CHECK_RC(apply(r2, d1, l1, &e, msg, sizeof msg), MESS_EFORMAT);
        e = i1;
        e.nodes_after = UINT64_MAX;
        e.base_digest[0] ^= 1;
        CHECK_RC(apply(r2, d1, l1, &e, msg, sizeof msg), MESS_EFORMAT);
        e = i1;
        e.nodes_after = 579; /* the manifest's count disagrees */
        CHECK_RC(apply(r2, d1, l1, &e, msg, sizeof msg), MESS_EFORMAT);
        e = i1;
        e.nodes_after = UINT64_MAX;
        memcpy(e.digest, s2, 32); /* the manifest names another delta */
        CHECK_RC(hnsw_apply_delta(r2, d1, l1, &e, msg, sizeof msg), MESS_EFORMAT);
        CHECK(hnsw_count(r2) == n0);
        {
            struct hnsw *fresh = NULL;
            uint8_t *c3 = NULL;
            fresh = attach_copy(base, blen, &c3);
            CHECK(fresh && same_graph(fresh, r2));
            hnsw_free(fresh);
            free(c3);
        }
    }
    hnsw_free(r2);
    free(copy2);
    hnsw_free(r);
    free(copy);
    hnsw_free(w);
    free(base);
    free(d1);
    free(d2);
    free(x);
    free(y);
}

/* ---- hostile headers --------------------------------------------------------- */

static void test_header_fields(void)
{
    /* offset, width of the header fields that have a check behind them */
    static const struct {
        unsigned off, width;
        const char *name;
    } f[] = {{96, 8, "before"}, {104, 8, "after"}, {116, 4, "top"},   {120, 8, "deleted"},
             {136, 8, "c0"},    {144, 8, "cu"},    {152, 8, "cuw"},   {160, 8, "nuw"},
             {168, 8, "nd"},    {176, 4, "bits"},  {180, 4, "m"},     {184, 8, "bytes"}};
    static const int64_t delta[] = {1, -1, 2, -2, 1 << 20, (int64_t)1 << 32, -((int64_t)1 << 40)};
    struct hnsw *w = graph_new(6), *r = NULL;
    struct hnsw_delta_info info, e;
    uint8_t *base = NULL, *copy = NULL, *d = NULL, *b = NULL, *pristine = NULL;
    uint8_t bsum[32], sum[32];
    size_t blen = 0, len = 0, plen = 0, k, v;
    char msg[200];
    unsigned refused = 0, tried = 0;

    CHECK(w && add_range(w, 0, 300) == 0);
    CHECK_OK(hnsw_delete(w, LB(7)));
    base = graph_file(w, &blen, bsum);
    CHECK_OK(hnsw_track(w));
    CHECK(add_range(w, 300, 340) == 0);
    CHECK_OK(hnsw_delete(w, LB(9)));
    CHECK_OK(hnsw_delete(w, LB(301)));
    memset(&info, 0, sizeof info);
    info.generation = 2;
    info.base_generation = 1;
    memcpy(info.base_digest, bsum, 32);
    d = delta_of(w, &info, &len, sum);
    r = base ? attach_copy(base, blen, &copy) : NULL;
    CHECK(d && r);
    if (!d || !r)
        goto done;
    pristine = graph_file(r, &plen, sum);
    b = (uint8_t *)malloc(len);
    CHECK(pristine && b);
    if (!pristine || !b)
        goto done;
    for (k = 0; k < sizeof f / sizeof f[0]; k++)
        for (v = 0; v < sizeof delta / sizeof delta[0]; v++) {
            uint64_t x;
            int rc;
            if (f[k].width == 4 && (uint32_t)delta[v] == 0)
                continue; /* the same u32 */
            memcpy(b, d, len);
            x = f[k].width == 8 ? mess_load_u64(b + f[k].off) : mess_load_u32(b + f[k].off);
            x += (uint64_t)delta[v];
            if (f[k].width == 8)
                mess_store_u64(b + f[k].off, x);
            else
                mess_store_u32(b + f[k].off, (uint32_t)x);
            resum(b, len);
            e = info;
            e.nodes_after = UINT64_MAX;
            msg[0] = 0;
            tried++;
            rc = apply(r, b, len, &e, msg, sizeof msg);
            if (rc != MESS_OK)
                refused++;
            else
                fprintf(stderr, "  header field %s %+lld: applied\n", f[k].name,
                        (long long)delta[v]);
            CHECK(rc == MESS_EFORMAT && msg[0] != 0);
            if (rc == MESS_OK)
                break; /* r changed: the later checks would mean nothing */
            {
                size_t l2 = 0;
                uint8_t *now = graph_file(r, &l2, sum);
                CHECK(now && l2 == plen && memcmp(now, pristine, plen) == 0);
                free(now);
            }
        }
    /* the entry point off the top level or past the last node */
    {
        uint32_t bad[3];
        bad[0] = (uint32_t)hnsw_count(w);
        bad[1] = UINT32_MAX;
        bad[2] = 0;
        for (k = 0; k < 3; k++) {
            if (hnsw_level(w, bad[k]) == hnsw_level(w, hnsw_entry_point(w)) && k == 2)
                continue; /* node 0 happens to be on the top level */
            memcpy(b, d, len);
            mess_store_u32(b + 112, bad[k]);
            resum(b, len);
            e = info;
            e.nodes_after = UINT64_MAX;
            CHECK_RC(apply(r, b, len, &e, msg, sizeof msg), MESS_EFORMAT);
        }
    }
    /* truncated anywhere: refused */
    for (k = 0; k + 1 < len; k += 1 + len / 50) {
        memcpy(b, d, k);
        if (k >= D_HEADER + 32)
            resum(b, k);
        e = info;
        e.nodes_after = UINT64_MAX;
        CHECK(apply(r, b, k, &e, msg, sizeof msg) != MESS_OK);
    }
    CHECK(hnsw_count(r) == 300);
    /* the pristine delta still applies after all that */
    e = info;
    e.nodes_after = 340;
    CHECK_OK(apply(r, d, len, &e, msg, sizeof msg));
    CHECK(same_graph(r, w));
    printf("# %u header mutations, %u refused\n", tried, refused);
done:
    free(b);
    free(pristine);
    free(d);
    hnsw_free(r);
    free(copy);
    free(base);
    hnsw_free(w);
}

/* ---- upper-block word counts that hold no whole block ------------------------ */

/* len bytes of d copied so that they end where a PROT_NONE page begins;
 * *area / *area_len: the mapping to munmap. */
static uint8_t *guarded(const uint8_t *d, size_t len, void **area, size_t *area_len)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (len + pg - 1) / pg * pg;
    int fd = open("/dev/zero", O_RDWR);
    uint8_t *m;
    if (fd < 0)
        return NULL;
    m = (uint8_t *)mmap(NULL, body + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m + body, pg, PROT_NONE) != 0) {
        munmap(m, body + pg);
        return NULL;
    }
    memcpy(m + body - len, d, len);
    *area = m;
    *area_len = body + pg;
    return m + body - len;
}

static void put_header(uint8_t *b, const struct hnsw *g, uint64_t after, uint64_t cu,
                       uint64_t cuw, uint64_t nuw, size_t len)
{
    const uint8_t magic[8] = {'M', 'E', 'S', 'S', 'D', 'L', 'T', 'A'};
    uint32_t ep = hnsw_entry_point(g);
    memset(b, 0, D_HEADER);
    memcpy(b, magic, 8);
    mess_store_u32(b + 8, 1);
    mess_store_u64(b + 16, 2);
    mess_store_u64(b + 24, 1);
    mess_store_u64(b + 96, hnsw_count(g));
    mess_store_u64(b + 104, after);
    mess_store_u32(b + 112, ep);
    mess_store_u32(b + 116, hnsw_level(g, ep) + 1);
    mess_store_u64(b + 120, hnsw_deleted(g));
    mess_store_u64(b + 144, cu);
    mess_store_u64(b + 152, cuw);
    mess_store_u64(b + 160, nuw);
    mess_store_u32(b + 176, hnsw_get_params(g)->bits);
    mess_store_u32(b + 180, hnsw_get_params(g)->m);
    mess_store_u64(b + 184, len);
}

static void test_partial_upper_blocks(void)
{
    struct hnsw *w = graph_new(16), *r = NULL;
    uint8_t *base = NULL, *copy = NULL, bsum[32], *b, *g;
    size_t blen = 0, len, i, alen = 0, m0 = 32;
    uint32_t up_node = UINT32_MAX;
    void *area = NULL;
    struct hnsw_delta_info e;
    char msg[200];

    CHECK(w && add_range(w, 0, 400) == 0);
    base = w ? graph_file(w, &blen, bsum) : NULL;
    r = base ? attach_copy(base, blen, &copy) : NULL;
    CHECK(r != NULL && hnsw_level(r, hnsw_entry_point(r)) >= 1);
    if (!r)
        goto done;
    for (i = 0; i < hnsw_count(r) && up_node == UINT32_MAX; i++)
        if (hnsw_level(r, (uint32_t)i) >= 1)
            up_node = (uint32_t)i;
    memset(&e, 0, sizeof e);
    e.shard = 0;
    e.generation = 2;
    e.base_generation = 1;
    e.nodes_after = UINT64_MAX;

    /* one new node of level 1 whose upper block the header says is one
     * word long: nothing follows it but the digest */
    len = D_HEADER + WORDS * 8 + 16 + 1 + 1 + (1 + m0) * 4 + 4 + 32;
    b = (uint8_t *)calloc(1, len);
    CHECK(b != NULL);
    if (b) {
        put_header(b, r, hnsw_count(r) + 1, 0, 0, 1, len);
        memcpy(b + D_HEADER, codes + 1999 * WORDS, WORDS * 8);
        mess_store_u64(b + D_HEADER + WORDS * 8, 0xdead);
        b[D_HEADER + WORDS * 8 + 16] = 1; /* level 1 */
        resum(b, len);
        g = guarded(b, len, &area, &alen);
        CHECK(g != NULL);
        if (g) {
            CHECK_RC(apply(r, g, len, &e, msg, sizeof msg), MESS_EFORMAT);
            printf("# refused: %s\n", msg);
            munmap(area, alen);
        }
        free(b);
    }
    CHECK(hnsw_count(r) == 400);

    /* an older node's changed upper blocks, one word of them */
    CHECK(up_node != UINT32_MAX);
    len = D_HEADER + 4 + 4 + 32;
    b = (uint8_t *)calloc(1, len);
    if (b && up_node != UINT32_MAX) {
        put_header(b, r, hnsw_count(r), 1, 1, 0, len);
        mess_store_u32(b + D_HEADER, up_node);
        resum(b, len);
        g = guarded(b, len, &area, &alen);
        CHECK(g != NULL);
        if (g) {
            CHECK_RC(apply(r, g, len, &e, msg, sizeof msg), MESS_EFORMAT);
            printf("# refused: %s\n", msg);
            munmap(area, alen);
        }
    }
    free(b);
    CHECK(hnsw_count(r) == 400 && same_graph(r, w));
done:
    hnsw_free(r);
    free(copy);
    free(base);
    hnsw_free(w);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    make_codes();
    RUN(test_chain_equals_writer);
    RUN(test_header_fields);
    RUN(test_partial_upper_blocks);
    HARNESS_END();
}
