/*
 * fuzz_delete.c - mess_server_apply_delete of a hostile delete buffer on a
 * server holding the fixture's items, then search and compaction over
 * whatever it marked deleted.
 */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    mess_server *s = NULL;
    mess_server_stats before, after;
    uint8_t *resp;
    size_t len, missing = 0;
    int rc;

    if (mess_server_new(&fx->p, &s) != MESS_OK ||
        mess_server_apply_upload(s, fx->upload, fx->upload_len, 1) != MESS_OK ||
        mess_server_stats_get(s, &before) != MESS_OK)
        fuzz_fail("fixture server");
    rc = mess_server_apply_delete(s, data, size, &missing);
    if (mess_server_stats_get(s, &after) != MESS_OK)
        fuzz_fail("stats");
    if (after.entries != before.entries || after.live + after.deleted != after.entries)
        fuzz_fail("delete changed the node count");
    /* mess.h: a buffer of another client than the server's owner is
     * MESS_EOWNER (the fixture server is owned by the upload's client) */
    if (rc != MESS_OK && rc != MESS_EFORMAT && rc != MESS_EPARAM &&
        rc != MESS_EVERSION && rc != MESS_EINVAL && rc != MESS_EOWNER)
        fuzz_fail("unexpected delete status");
    if (rc != MESS_OK && after.deleted != before.deleted)
        fuzz_fail("a refused delete marked items deleted");
    if (mess_server_search(s, fx->request, fx->request_len, 1, &resp, &len) != MESS_OK)
        fuzz_fail("search after delete");
    mess_buf_free(resp);
    if (mess_server_compact(s, 1 + size % 2) != MESS_OK ||
        mess_server_stats_get(s, &after) != MESS_OK || after.deleted != 0)
        fuzz_fail("compact after delete");
    if (mess_server_search(s, fx->request, fx->request_len, 1, &resp, &len) != MESS_OK)
        fuzz_fail("search after compact");
    mess_buf_free(resp);
    mess_server_free(s);
    return 0;
}
