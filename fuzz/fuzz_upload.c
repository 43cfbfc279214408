/*
 * fuzz_upload.c - mess_server_apply_upload of a hostile upload buffer on a
 * fresh server.  All or nothing: a rejected buffer leaves the server empty;
 * an accepted one leaves a searchable server, owned by the upload's tag.
 */
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    mess_server *s = NULL;
    mess_server_stats st;
    uint8_t *resp;
    size_t len;
    int rc;

    if (mess_server_new(&fx->p, &s) != MESS_OK)
        fuzz_fail("server_new");
    rc = mess_server_apply_upload(s, data, size, 1 + size % 2);
    if (mess_server_stats_get(s, &st) != MESS_OK)
        fuzz_fail("stats");
    if (rc != MESS_OK && st.entries != 0)
        fuzz_fail("a rejected upload changed the server");
    if (rc == MESS_OK) {
        /* the upload's owner tag now owns the server (mess.h: the first
         * upload applied, empty or not); unless the tags agree, the
         * fixture's request is another client's: MESS_EOWNER */
        uint8_t tag[MESS_OWNER_BYTES], mine[MESS_OWNER_BYTES];
        int ours;
        if (mess_server_owner(s, tag) != MESS_OK ||
            mess_client_owner(fx->client, mine) != MESS_OK)
            fuzz_fail("no owner after an accepted upload");
        ours = memcmp(tag, mine, MESS_OWNER_BYTES) == 0;
        rc = mess_server_search(s, fx->request, fx->request_len, 1, &resp, &len);
        if (rc != (ours ? MESS_OK : MESS_EOWNER))
            fuzz_fail("search after an accepted upload");
        if (rc == MESS_OK)
            mess_buf_free(resp);
        /* a second application of the same buffer is a duplicate */
        if (st.entries > 0 && mess_server_apply_upload(s, data, size, 1) == MESS_OK)
            fuzz_fail("the same upload applied twice");
    }
    mess_server_free(s);
    return 0;
}
