/*
 * fuzz_response.c - mess_client_finish of a hostile response to the
 * fixture's real query.  Whatever the bytes, no crash, and every id
 * returned is one the client stored (only authenticated entries count).
 * Each input is tried as is and with the fixture's request id written
 * over its place (wire.h), so the entry parsing stays reachable even when the
 * library's coins (hence request ids) change and the seeds were not
 * regenerated.
 */
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "fuzz.h"

struct finished {
    int rc;
    size_t n;
    uint64_t ids[FUZZ_POOL + 4];
    float dists[FUZZ_POOL + 4];
    mess_finish_stats st;
};

static void finish(const uint8_t *data, size_t size, int verify_all,
                   struct finished *f)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    memset(f, 0, sizeof *f);
    mess_client_set_verify_all(fx->client, verify_all);
    f->rc = mess_client_finish(fx->client, fx->query, data, size, FUZZ_POOL + 4,
                               f->ids, f->dists, &f->n, &f->st);
    mess_client_set_verify_all(fx->client, 0);
}

/* Both modes: one authentic copy per claimed id (default) and every entry
 * (verify-all) must return exactly the same results. */
static void one(const uint8_t *data, size_t size)
{
    struct finished a, b;
    size_t i, k;

    finish(data, size, 0, &a);
    finish(data, size, 1, &b);
    if (a.rc != MESS_OK && a.n != 0)
        fuzz_fail("results returned with an error");
    if (a.n > a.st.unique || a.st.unique + a.st.auth_failures > a.st.candidates)
        fuzz_fail("finish statistics");
    if ((a.rc == MESS_OK || a.rc == MESS_EAUTH) &&
        a.st.unique + a.st.auth_failures + a.st.unopened != a.st.candidates)
        fuzz_fail("every entry is opened or a redundant copy");
    if (a.rc != b.rc || a.n != b.n || memcmp(a.ids, b.ids, a.n * sizeof a.ids[0]) != 0 ||
        memcmp(a.dists, b.dists, a.n * sizeof a.dists[0]) != 0 ||
        a.st.unique != b.st.unique || a.st.auth_failures > b.st.auth_failures ||
        b.st.unopened != 0)
        fuzz_fail("verify-all and the default disagree");
    for (i = 0; i < a.n; i++) {
        for (k = 0; k < FUZZ_ITEMS && a.ids[i] != fuzz_item_id(k); k++)
            ;
        if (k == FUZZ_ITEMS)
            fuzz_fail("an id the client never stored");
        if (i > 0 && (a.dists[i] < a.dists[i - 1] || a.ids[i] == a.ids[i - 1]))
            fuzz_fail("results not sorted / not deduplicated");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    const size_t at = WIRE_HEADER_BYTES, n = WIRE_REQUEST_ID_BYTES;
    uint8_t *copy;
    one(data, size);
    if (size >= at + n && memcmp(data + at, fx->response + at, n) != 0) {
        copy = (uint8_t *)malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        memcpy(copy + at, fx->response + at, n);
        one(copy, size);
        free(copy);
    }
    return 0;
}
