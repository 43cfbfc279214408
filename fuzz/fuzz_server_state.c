/*
 * fuzz_server_state.c - mess_server_load on hostile server state files
 * (container, zstd frame, M graphs, ciphertext tables), then uses any
 * server it accepted: search, delete, compact, stats.
 */
#include <unistd.h>

#include "statefile.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    const char *path = fuzz_tmp_path(".server");
    mess_server *s = NULL;
    mess_server_stats st;
    uint8_t *resp = NULL;
    size_t len = 0, missing = 0;

    if (fuzz_state_file(path, STATEFILE_SERVER, data, size) != 0)
        return 0;
    if (mess_server_load(path, NULL, &s) == MESS_OK) {
        if (mess_server_stats_get(s, &st) != MESS_OK ||
            st.live + st.deleted != st.entries)
            fuzz_fail("stats of a loaded server");
        if (mess_server_search(s, fx->request, fx->request_len, 2, &resp, &len) ==
            MESS_OK) {
            if (len > mess_response_size(&fx->p, FUZZ_POOL))
                fuzz_fail("response larger than its bound");
            mess_buf_free(resp);
        }
        /* a loaded server may refuse the fixture's delete (another owner,
         * other parameters); one that applies it stays consistent */
        if (mess_server_apply_delete(s, fx->del, fx->del_len, &missing) == MESS_OK &&
            (mess_server_stats_get(s, &st) != MESS_OK ||
             st.live + st.deleted != st.entries))
            fuzz_fail("stats after a delete");
        if (mess_server_compact(s, 1) == MESS_OK &&
            mess_server_search(s, fx->request, fx->request_len, 1, &resp, &len) ==
                MESS_OK)
            mess_buf_free(resp);
        mess_server_free(s);
    }
    unlink(path);
    return 0;
}
