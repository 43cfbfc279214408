/*
 * nodiscard.c - compiled (not run) by tests/abi_contracts.sh under
 * -Werror: with -DIGNORE the result of mess_client_finish is dropped, and
 * the build must fail (MESS_NODISCARD: an ignored MESS_EAUTH would let a
 * forged or failed response pass for an empty result); without it, the
 * same call with its result checked must build.
 */
#include <stddef.h>
#include <stdint.h>

#include "../../mess.h"

int finish_once(const mess_client *c, const mess_query *q, const uint8_t *resp,
                size_t len, uint64_t *ids, float *dists, size_t *n);

int finish_once(const mess_client *c, const mess_query *q, const uint8_t *resp,
                size_t len, uint64_t *ids, float *dists, size_t *n)
{
#ifdef IGNORE
    mess_client_finish(c, q, resp, len, 10, ids, dists, n, NULL);
    return 0;
#else
    return mess_client_finish(c, q, resp, len, 10, ids, dists, n, NULL);
#endif
}
