/*
 * fuzz_delta.c - hnsw_apply_delta on hostile delta files (a shard's
 * checkpoint delta, docs/PROTOCOL.md "Proportional checkpoint"), applied to
 * a small real graph attached from its graph file (fuzz_delta_base).  The
 * first input byte picks how the rest is used:
 *   even  the delta as is (its own digest, the header's fields)
 *   odd   the delta with its trailing digest recomputed here, so mutations
 *         of every count, id, level and block get past the digest
 * What the manifest would say (shard, generations, base and previous
 * digests, the delta's digest) is taken from the input itself, so the
 * checks reached are the delta's own.  A refused delta must come with a
 * reason and leave the graph as it was (same node count, hnsw_check still
 * passes); an applied one must survive searches, inserts, deletes,
 * hnsw_check, a graph-file write and a new delta without a fault.  The
 * lazy open's check of the header alone (hnsw_delta_header_check, given
 * exactly the first HNSW_DELTA_HEADER_BYTES bytes or fewer, as the open
 * reads them) must never read past them, and must pass every delta the
 * apply takes, with the deleted count the applied graph then has (what
 * mess_server_stats reports before the apply).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "hnsw_bin.h"
#include "fuzz.h"

#define DELTA_HEADER 192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t *base;
    static size_t base_len;
    struct hnsw *h = NULL;
    struct hnsw_scratch *s = NULL;
    struct hnsw_delta_info e;
    struct hnsw_hit hits[8];
    uint64_t code[MESS_MAX_BITS / 64];
    uint8_t *buf, *map = NULL, digest[32];
    uint64_t bytes, hdel = 0;
    size_t len, n0, found, k, words;
    char msg[256];
    int rc, hrc, fd;

    if (!base && fuzz_delta_base(NULL, &base, &base_len) != 0)
        fuzz_fail("the base graph");
    if (size == 0)
        return 0;
    len = size - 1;
    buf = (uint8_t *)malloc(len ? len : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, len);
    if ((data[0] & 1) && len >= DELTA_HEADER + 32)
        crypto_generichash(buf + len - 32, 32, buf, len - 32, NULL, 0);
    if (posix_memalign((void **)&map, 4096, base_len) != 0) {
        free(buf);
        return 0;
    }
    memcpy(map, base, base_len);
    if (hnsw_attach(map, base_len, NULL, &h) != MESS_OK)
        fuzz_fail("the base graph does not attach");
    memset(&e, 0, sizeof e);
    e.nodes_after = UINT64_MAX;
    if (len >= DELTA_HEADER + 32) {
        e.shard = mess_load_u32(buf + 12);
        e.generation = mess_load_u64(buf + 16);
        e.base_generation = mess_load_u64(buf + 24);
        memcpy(e.base_digest, buf + 32, 32);
        memcpy(e.prev_digest, buf + 64, 32);
        memcpy(e.digest, buf + len - 32, 32);
    }
    n0 = hnsw_count(h);
    {
        /* the header as the lazy open reads it: its own allocation, so a
         * read past it is caught */
        size_t hl = len < HNSW_DELTA_HEADER_BYTES ? len : HNSW_DELTA_HEADER_BYTES;
        uint8_t *hdr = (uint8_t *)malloc(hl ? hl : 1);
        if (!hdr) {
            hnsw_free(h);
            free(map);
            free(buf);
            return 0;
        }
        memcpy(hdr, buf, hl);
        msg[0] = 0;
        hrc = hnsw_delta_header_check(h, hdr, hl, len, n0, &e, &hdel, msg, sizeof msg);
        free(hdr);
        if (hrc != MESS_OK && !msg[0])
            fuzz_fail("a refused delta header without a reason");
    }
    msg[0] = 0;
    rc = hnsw_apply_delta(h, buf, len, &e, msg, sizeof msg);
    if (rc == MESS_OK && hrc != MESS_OK)
        fuzz_fail("the header check refuses a delta the apply takes");
    if (rc == MESS_OK && hdel != hnsw_deleted(h))
        fuzz_fail("the header's deleted count differs from the applied graph's");
    if (rc != MESS_OK) {
        if (rc != MESS_ENOMEM) {
            if (!msg[0])
                fuzz_fail("a refused delta without a reason");
            if (hnsw_count(h) != n0 || hnsw_check(h) != MESS_OK)
                fuzz_fail("a refused delta changed the graph");
        }
        hnsw_free(h);
        free(map);
        free(buf);
        return 0;
    }
    hnsw_check_msg(h, msg, sizeof msg);
    if (hnsw_scratch_new(&s) != MESS_OK)
        fuzz_fail("scratch");
    words = hnsw_get_params(h)->bits / 64;
    for (k = 0; k < words; k++)
        code[k] = 0x3c3c3c3c3c3c3c3cull * (k + 1);
    if (hnsw_search(h, s, code, 8, 16, hits, &found) != MESS_OK || found > 8)
        fuzz_fail("search after a delta");
    for (k = 0; k < found; k++)
        if (hits[k].node >= hnsw_count(h))
            fuzz_fail("a hit past the last node");
    hnsw_track(h);
    if (hnsw_count(h) > 0)
        hnsw_delete(h, hnsw_label(h, (uint32_t)(hnsw_count(h) - 1)));
    for (k = 0; k < 3 && hnsw_count(h) < 4096; k++) {
        code[0] ^= (uint64_t)1 << (k * 5);
        hnsw_add(h, code, hnsw_label_of(0xabad1deaull + k, 0x5eedull), NULL);
    }
    if (hnsw_search(h, s, code, 8, 16, hits, &found) != MESS_OK)
        fuzz_fail("search after add");
    fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        struct hnsw_delta_info w;
        memset(&w, 0, sizeof w);
        hnsw_write_graph(h, fd, digest);
        hnsw_write_delta(h, &w, fd, digest, &bytes);
        close(fd);
    }
    hnsw_scratch_free(s);
    hnsw_free(h);
    free(map);
    free(buf);
    return 0;
}
