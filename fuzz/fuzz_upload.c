/*
 * fuzz_upload.c - mess_server_apply_upload of a hostile upload buffer on a
 * fresh server.  All or nothing: a rejected buffer leaves the server empty;
 * an accepted one leaves a searchable server.
 */
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
        if (mess_server_search(s, fx->request, fx->request_len, 1, &resp, &len) !=
            MESS_OK)
            fuzz_fail("search after an accepted upload");
        mess_buf_free(resp);
        /* a second application of the same buffer is a duplicate */
        if (st.entries > 0 && mess_server_apply_upload(s, data, size, 1) == MESS_OK)
            fuzz_fail("the same upload applied twice");
    }
    mess_server_free(s);
    return 0;
}
