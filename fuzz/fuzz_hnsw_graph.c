/*
 * fuzz_hnsw_graph.c - hnsw_attach on hostile graph files (the mapped
 * form of a shard's graph, docs/HNSW.md "Graph file").  The first input
 * byte picks how the rest is used:
 *   even  the file as is (header checksum, layout checks)
 *   odd   the file with its header checksum recomputed here, so mutations
 *         of the header fields and of every section get past the checksum
 * The bytes are copied into a 4096-aligned buffer (as a mapping would be).
 * An attached graph must survive searches, finds, deletes, inserts,
 * hnsw_check, serialization, a graph-file write and compaction without a
 * fault, a hang or an error other than a status; a graph hnsw_check
 * accepts must also be one hnsw_deserialize accepts from its serialized
 * form, with the same searches.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "hnsw_bin.h"
#include "fuzz.h"

#define SUM_AT 232

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hnsw *h = NULL, *c = NULL, *r = NULL;
    struct hnsw_scratch *s = NULL;
    struct hnsw_hit hits[8], hits2[8];
    uint64_t code[MESS_MAX_BITS / 64];
    uint8_t *buf = NULL, digest[32];
    size_t len, n, found, found2, words, k;
    char msg[256];
    int checked, fd;

    if (size == 0)
        return 0;
    len = size - 1;
    if (posix_memalign((void **)&buf, 4096, len ? len : 1) != 0)
        return 0;
    memcpy(buf, data + 1, len);
    if ((data[0] & 1) && len >= SUM_AT + 32)
        crypto_generichash(buf + SUM_AT, 32, buf, SUM_AT, NULL, 0);
    if (hnsw_attach_msg(buf, len, NULL, &h, msg, sizeof msg) != MESS_OK) {
        if (h || !msg[0])
            fuzz_fail("a refused attach leaves a graph or no reason");
        free(buf);
        return 0;
    }
    checked = hnsw_check_msg(h, msg, sizeof msg) == MESS_OK;
    if (!checked && !msg[0])
        fuzz_fail("hnsw_check refused without a reason");
    if (hnsw_scratch_new(&s) != MESS_OK)
        fuzz_fail("scratch");
    words = hnsw_get_params(h)->bits / 64;
    n = hnsw_count(h);
    for (k = 0; k < words; k++)
        code[k] = 0x5a5a5a5a5a5a5a5aull * (k + 1);
    if (hnsw_search(h, s, code, 8, 16, hits, &found) != MESS_OK || found > 8)
        fuzz_fail("search of an attached graph");
    for (k = 0; k < found; k++)
        if (hits[k].node >= n)
            fuzz_fail("a hit past the last node");
    if (checked) {
        /* a verified graph is a valid one: the travel form loads it back */
        struct mess_wr w;
        struct mess_rd rd;
        mess_wr_init(&w);
        if (hnsw_serialize(h, &w) != MESS_OK)
            fuzz_fail("serialize of a checked graph");
        mess_rd_init(&rd, w.p, w.len);
        if (hnsw_deserialize(&rd, NULL, &r) != MESS_OK)
            fuzz_fail("a checked graph does not deserialize");
        if (hnsw_search(r, s, code, 8, 16, hits2, &found2) != MESS_OK || found2 != found ||
            memcmp(hits, hits2, found * sizeof *hits) != 0)
            fuzz_fail("a checked graph searches differently after a round trip");
        hnsw_free(r);
        mess_wr_free(&w);
    }
    if (n > 0) {
        hnsw_find(h, hnsw_label(h, 0), NULL);
        hnsw_delete(h, hnsw_label(h, n - 1));
    }
    for (k = 0; k < 3 && n < 4096; k++) {
        code[0] ^= (uint64_t)1 << (k * 7);
        hnsw_add(h, code, hnsw_label_of(0xfeedfacecafebeefull + k, 0x0ddba11ull), NULL);
    }
    if (hnsw_search(h, s, code, 8, 16, hits, &found) != MESS_OK)
        fuzz_fail("search after add");
    hnsw_check_msg(h, msg, sizeof msg);
    fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        hnsw_write_graph(h, fd, digest);
        close(fd);
    }
    if (n < 4096 && hnsw_compact(h, &c, NULL) == MESS_OK) {
        if (hnsw_search(c, s, code, 8, 16, hits, &found) != MESS_OK)
            fuzz_fail("search after compact");
        hnsw_free(c);
    }
    hnsw_scratch_free(s);
    hnsw_free(h);
    free(buf);
    return 0;
}
