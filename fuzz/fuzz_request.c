/*
 * fuzz_request.c - mess_server_search of a hostile request on the fixture
 * server: any budget, any code, never more than the request's budgets.
 */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    uint8_t *resp = NULL;
    size_t len = 0;
    if (mess_server_search(fx->server, data, size, 1 + size % 2, &resp, &len) ==
        MESS_OK) {
        /* the response can never exceed the largest budget total */
        if (len > mess_response_size(&fx->p, (size_t)MESS_MAX_BUDGET * fx->p.shards))
            fuzz_fail("response size");
        mess_buf_free(resp);
    } else if (resp || len) {
        fuzz_fail("failed search left a response");
    }
    return 0;
}
