/*
 * fuzz_hnsw.c - hnsw_deserialize on hostile bytes.  A graph it accepts
 * must serialize back to the same bytes and be safe to search, extend,
 * delete from and compact.
 */
#include <stdlib.h>

#include "hnsw_bin.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mess_rd r;
    struct mess_wr w;
    struct hnsw *h = NULL, *c = NULL;
    struct hnsw_scratch *s = NULL;
    struct hnsw_hit hits[8];
    uint64_t code[MESS_MAX_BITS / 64];
    uint32_t *map;
    size_t n, found, used, words;

    mess_rd_init(&r, data, size);
    if (hnsw_deserialize(&r, NULL, &h) != MESS_OK)
        return 0;
    used = r.off;
    mess_wr_init(&w);
    if (hnsw_serialize(h, &w) != MESS_OK || w.len != used ||
        memcmp(w.p, data, used) != 0)
        fuzz_fail("an accepted graph does not serialize back to its bytes");
    mess_wr_free(&w);
    words = hnsw_get_params(h)->bits / 64;
    memset(code, 0x5a, words * 8);
    if (hnsw_scratch_new(&s) != MESS_OK)
        fuzz_fail("scratch");
    if (hnsw_search(h, s, code, 8, 16, hits, &found) != MESS_OK || found > 8)
        fuzz_fail("search of an accepted graph");
    n = hnsw_count(h);
    if (n > 0)
        hnsw_delete(h, hnsw_label(h, 0));
    if (n < 4096 && hnsw_add(h, code, hnsw_label_of(0xfeedfacecafebeefull, 0x0ddba11ull), NULL) == MESS_OK &&
        hnsw_search(h, s, code, 8, 16, hits, &found) != MESS_OK)
        fuzz_fail("search after add");
    n = hnsw_count(h);
    map = (uint32_t *)malloc((n ? n : 1) * sizeof *map);
    if (map && hnsw_compact(h, &c, map) == MESS_OK) {
        if (hnsw_search(c, s, code, 8, 16, hits, &found) != MESS_OK)
            fuzz_fail("search after compact");
        hnsw_free(c);
    }
    free(map);
    hnsw_scratch_free(s);
    hnsw_free(h);
    return 0;
}
