/*
 * fuzz_merge.c - mess_response_merge of hostile partial responses to the
 * fixture's real request (D18).  Input: u8 n (1 + n % 4 parts), then each
 * part but the last as u16 length | bytes, the last taking the rest.
 * Whatever the bytes: no crash; a refusal allocates nothing and says why;
 * an accepted merge is a response whose shape mess_client_finish accepts
 * (never MESS_EFORMAT) and that holds every part's entries.  Each input is
 * tried as is and with the fixture's request id written over every part's
 * (wire.h), so the section parser stays reachable when the library's
 * coins change and the seeds were not regenerated.
 */
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "fuzz.h"

#define MAX_PARTS 4

static void one(const uint8_t *const *parts, const size_t *lens, size_t n)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    uint8_t *resp = NULL;
    size_t len = 0, in = 0, i, k;
    char msg[160];
    uint64_t ids[FUZZ_POOL];
    float d[FUZZ_POOL];
    int rc = mess_response_merge(&fx->p, fx->request, fx->request_len, parts, lens,
                                 n, &resp, &len, msg, sizeof msg);
    if (rc != MESS_OK) {
        if (resp || len || msg[0] == '\0')
            fuzz_fail("a refused merge left output or no message");
        return;
    }
    for (i = 0; i < n; i++)
        in += lens[i];
    /* the response's fixed part: header, id, M counts; each part's: header,
     * id, section count, and 6 bytes per section (at least one) */
    if (!resp || len < WIRE_RESPONSE_BODY_OFFSET + 2 * fx->p.shards ||
        len - (WIRE_RESPONSE_BODY_OFFSET + 2 * fx->p.shards) >
            in - n * (WIRE_PARTIAL_BODY_OFFSET + WIRE_SECTION_BYTES))
        fuzz_fail("merged length");
    rc = mess_client_finish(fx->client, fx->query, resp, len, FUZZ_POOL, ids, d, &k, NULL);
    if (rc == MESS_EFORMAT)
        fuzz_fail("finish refused the shape of a merged response");
    mess_buf_free(resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    const uint8_t *parts[MAX_PARTS];
    uint8_t *copies[MAX_PARTS];
    size_t lens[MAX_PARTS], n, i, off = 1;
    const size_t at = WIRE_HEADER_BYTES, idn = WIRE_REQUEST_ID_BYTES;
    int differs = 0;
    if (size < 1)
        return 0;
    n = 1 + data[0] % MAX_PARTS;
    for (i = 0; i < n; i++) {
        size_t l = size - off;
        if (i + 1 < n) {
            if (size - off < 2)
                return 0;
            l = (size_t)data[off] | (size_t)data[off + 1] << 8;
            off += 2;
            if (l > size - off)
                l = size - off;
        }
        parts[i] = data + off;
        lens[i] = l;
        off += l;
    }
    one(parts, lens, n);
    for (i = 0; i < n; i++)
        if (lens[i] >= at + idn &&
            memcmp(parts[i] + at, fx->request + WIRE_REQUEST_ID_OFFSET, idn) != 0)
            differs = 1;
    if (!differs)
        return 0;
    for (i = 0; i < n; i++) {
        copies[i] = (uint8_t *)malloc(lens[i] ? lens[i] : 1);
        if (!copies[i]) {
            while (i-- > 0)
                free(copies[i]);
            return 0;
        }
        memcpy(copies[i], parts[i], lens[i]);
        if (lens[i] >= at + idn)
            memcpy(copies[i] + at, fx->request + WIRE_REQUEST_ID_OFFSET, idn);
        parts[i] = copies[i];
    }
    one(parts, lens, n);
    for (i = 0; i < n; i++)
        free(copies[i]);
    return 0;
}
