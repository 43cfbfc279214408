/*
 * fuzz_response.c - mess_client_finish of a hostile response to the
 * fixture's real query.  Whatever the bytes, no crash, and every id
 * returned is one the client stored (only authenticated entries count).
 * Each input is tried as is and with the fixture's request id written
 * over bytes 24..39, so the entry parsing stays reachable even when the
 * library's coins (hence request ids) change and the seeds were not
 * regenerated.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static void one(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    uint64_t ids[FUZZ_POOL + 4];
    float dists[FUZZ_POOL + 4];
    size_t n = 0, i, k;
    mess_finish_stats st;
    int rc;

    rc = mess_client_finish(fx->client, fx->query, data, size, FUZZ_POOL + 4, ids,
                            dists, &n, &st);
    if (rc != MESS_OK && n != 0)
        fuzz_fail("results returned with an error");
    if (n > st.unique || st.unique + st.auth_failures > st.candidates)
        fuzz_fail("finish statistics");
    for (i = 0; i < n; i++) {
        for (k = 0; k < FUZZ_ITEMS && ids[i] != fuzz_item_id(k); k++)
            ;
        if (k == FUZZ_ITEMS)
            fuzz_fail("an id the client never stored");
        if (i > 0 && (dists[i] < dists[i - 1] || ids[i] == ids[i - 1]))
            fuzz_fail("results not sorted / not deduplicated");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    uint8_t *copy;
    one(data, size);
    if (size >= 40 && memcmp(data + 24, fx->response + 24, 16) != 0) {
        copy = (uint8_t *)malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        memcpy(copy + 24, fx->response + 24, 16);
        one(copy, size);
        free(copy);
    }
    return 0;
}
