/*
 * hnsw_layout.c - the opt-in code layout of a graph (hnsw_bin.h, "the code
 * layout"): one block per node holding its layer-0 ids and, beside them,
 * the 128-bit codes of the nodes they name, so that the interleaved search
 * (hnsw_many.c) reads an expanded node's list and every code it scores
 * from one contiguous, 64-byte-aligned block (two or three pages of a
 * huge-page mapping at most) instead of the list and one random line per
 * neighbour.  A copy of what the graph holds, built in memory from it
 * (never written to a file) and kept equal to it by hnsw_layout_sync at
 * every change of a layer-0 list; codes never change once added.
 *
 * Block of node i (h->lay_words 64-bit words from h->lay + i lay_words):
 * its first link_count ids as 32-bit words, EMPTY in the slots after the
 * last (an id EMPTY in a hostile file's list is stored as EMPTY - 1, so
 * the count stays the first EMPTY slot's place and the id is still past
 * the last node); from word m (m0 / 2) on, the code of each stored id in
 * the same order, zero for an id past the last node (never scored).
 */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE */
#endif
#include <errno.h>
#include <sys/mman.h>

#include "hnsw_internal.h"

/* Blocks as large as this or larger are aligned to it: a transparent huge
 * page then covers whole blocks (one page walk for many nodes). */
#define LAY_HUGE ((size_t)2 << 20)

/* 64-bit words of one node's block: m0 ids and m0 codes of two words,
 * rounded up to whole 64-byte lines. */
static size_t lay_words_for(uint32_t m)
{
    size_t w = (size_t)m + 4 * (size_t)m; /* 2m ids = m words; 2m codes */
    return (w + 7) / 8 * 8;
}

size_t hnsw_layout_node_bytes(const struct hnsw_params *p)
{
    if (!p || p->bits != 128 || p->m < 2 || p->m > MESS_MAX_HNSW_M)
        return 0;
    return lay_words_for(p->m) * 8;
}

/* A zeroed array of `nodes` blocks, aligned to a line (to LAY_HUGE when
 * it is that large), or NULL. */
static uint64_t *lay_alloc(const struct hnsw *h, size_t nodes)
{
    size_t bytes, align;
    void *p = NULL;
    if (nodes == 0)
        nodes = 1;
    if (mess_mul_size(nodes, h->lay_words * 8, &bytes))
        return NULL;
    align = bytes >= LAY_HUGE ? LAY_HUGE : 64;
    if (posix_memalign(&p, align, bytes) != 0)
        return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Under a common setting of Linux ("madvise", this machine's) only
     * memory that asks gets transparent huge pages: the alignment alone
     * got none.  Advice only (errno kept: a kernel without them refuses
     * it); the blocks are the same in 4 KiB pages (docs/PERFORMANCE.md
     * "The code layout in 2 MiB pages"). */
    if (align == LAY_HUGE) {
        int saved = errno;
        madvise(p, bytes, MADV_HUGEPAGE);
        errno = saved;
    }
#endif
    memset(p, 0, bytes);
    return (uint64_t *)p;
}

void hnsw_layout_sync(struct hnsw *h, uint32_t node)
{
    uint64_t *blk, *codes;
    uint32_t *ids;
    const uint32_t *l;
    uint32_t cnt, i;
    if (!h->lay || node >= h->n)
        return;
    blk = lay_block(h, node);
    ids = (uint32_t *)(void *)blk;
    codes = HNSW_LAY_CODES(h, blk);
    l = links0_of(h, node);
    cnt = link_count(h, l, 0);
    for (i = 0; i < cnt; i++) {
        uint32_t e = l[1 + i];
        ids[i] = e == EMPTY ? EMPTY - 1 : e;
        if (e < h->n) {
            const uint64_t *c = code_of(h, e);
            codes[2 * i] = c[0];
            codes[2 * i + 1] = c[1];
        } else {
            codes[2 * i] = 0;
            codes[2 * i + 1] = 0;
        }
    }
    for (; i < h->m0; i++) {
        ids[i] = EMPTY;
        codes[2 * i] = 0;
        codes[2 * i + 1] = 0;
    }
}

int hnsw_layout_grow(struct hnsw *h, size_t nodes)
{
    uint64_t *q;
    if (!h->lay || nodes <= h->lay_cap)
        return MESS_OK;
    q = lay_alloc(h, nodes);
    if (!q)
        return MESS_ENOMEM;
    memcpy(q, h->lay, h->n * h->lay_words * 8);
    free(h->lay);
    h->lay = q;
    h->lay_cap = nodes;
    return MESS_OK;
}

int hnsw_layout_build(struct hnsw *h)
{
    size_t i, cap;
    if (!h)
        return MESS_EINVAL;
    if (h->words != 2) {
        hnsw_layout_drop(h);
        return MESS_EPARAM;
    }
    hnsw_layout_drop(h);
    h->lay_words = lay_words_for(h->m);
    /* every node the arrays have room for, so adds up to that capacity
     * (hnsw_reserve's) need no growth */
    cap = h->n_base + h->cap > h->n ? h->n_base + h->cap : h->n;
    if (cap == 0)
        cap = 1;
    h->lay = lay_alloc(h, cap);
    if (!h->lay)
        return MESS_ENOMEM;
    h->lay_cap = cap;
    for (i = 0; i < h->n; i++)
        hnsw_layout_sync(h, (uint32_t)i);
    return MESS_OK;
}

void hnsw_layout_drop(struct hnsw *h)
{
    if (!h)
        return;
    free(h->lay);
    h->lay = NULL;
    h->lay_cap = 0;
}

size_t hnsw_layout_bytes(const struct hnsw *h)
{
    return h && h->lay ? h->lay_cap * h->lay_words * 8 : 0;
}
