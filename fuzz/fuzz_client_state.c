/*
 * fuzz_client_state.c - mess_client_load on hostile client state files
 * (container, zstd frame, key block, IsoHash, generation map), then uses any
 * client it accepted: a loaded client must be safe to query and upload with.
 */
#include <unistd.h>

#include "statefile.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    const char *path = fuzz_tmp_path(".client");
    mess_client *c = NULL;
    mess_query *q = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    uint64_t id = 7, codes[4096 / 64 * 4];
    mess_params p;

    if (fuzz_state_file(path, STATEFILE_CLIENT, data, size) != 0)
        return 0;
    if (mess_client_load(path, NULL, &c) == MESS_OK) {
        if (mess_client_params(c, &p) != MESS_OK)
            fuzz_fail("params of a loaded client");
        if (p.dim <= 128) {
            if (mess_client_request(c, fx->q, 8, &q, &buf, &len) == MESS_OK) {
                if (len != mess_request_size(&p))
                    fuzz_fail("request size");
                mess_buf_free(buf);
                mess_query_free(q);
            }
            if (mess_client_upload(c, &id, fx->x, 1, 1, &buf, &len) == MESS_OK) {
                if (len != mess_upload_size(&p, 1))
                    fuzz_fail("upload size");
                mess_buf_free(buf);
            }
            if (p.shards <= 4 && p.kappa <= 4096 &&
                mess_client_codes(c, fx->x, codes) != MESS_OK)
                fuzz_fail("codes of a loaded client");
        }
        if (mess_client_delete(c, &id, 1, &buf, &len) == MESS_OK)
            mess_buf_free(buf);
        mess_client_free(c);
    }
    unlink(path);
    return 0;
}
