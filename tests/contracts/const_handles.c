/*
 * const_handles.c - compiled (not run) by tests/abi_contracts.sh under
 * -Werror: every call mess.h documents as not changing its handle takes a
 * pointer to const, so code holding only const handles can make it.  With
 * -DMUTATE it also passes a const client to mess_client_request, which
 * changes the client: that build must fail (the check can fail).
 */
#include <stddef.h>
#include <stdint.h>

#include "../../mess_experimental.h"

int use_const(const mess_client *c, const mess_server *s, const mess_query *q,
              const mess_params *p, const uint8_t *req, size_t req_len,
              const float *x);

int use_const(const mess_client *c, const mess_server *s, const mess_query *q,
              const mess_params *p, const uint8_t *req, size_t req_len,
              const float *x)
{
    mess_params out;
    mess_finish_stats fst;
    mess_server_stats sst;
    uint8_t tag[MESS_OWNER_BYTES], *resp = NULL;
    uint64_t ids[10], codes[64];
    float dists[10];
    size_t resp_len = 0, n = 0, nodes = 0;
    int rc = 0;

    rc |= mess_params_check(p);
    rc |= mess_client_params(c, &out);
    rc |= mess_client_is_deterministic(c);
    rc |= mess_client_codes(c, x, codes);
    rc |= mess_client_owner(c, tag);
    rc |= mess_server_params(s, &out);
    rc |= mess_server_owner(s, tag);
    rc |= mess_server_check_owner(s, tag);
    rc |= mess_server_stats_get(s, &sst);
    rc |= mess_server_count_stored(s, req, req_len, &n, NULL); /* a probe: const */
    /* the query's two halves: search on a const server, finish with a
     * const client and a const query (any number of times) */
    rc |= mess_server_search(s, req, req_len, 1, &resp, &resp_len);
    rc |= mess_client_finish(c, q, resp, resp_len, 10, ids, dists, &n, &fst);
    rc |= mess_client_finish(c, q, resp, resp_len, 10, ids, dists, &n, &fst);
    mess_buf_free(resp);
    /* a query state seals and saves from const handles (mess.h, "Query
     * state") */
    rc |= mess_query_seal(c, &q, 1, &resp, &resp_len);
    mess_buf_free(resp);
    rc |= mess_query_save(c, &q, 1, "queries.qstate");
    rc |= mess_client_save(c, "client.mess", NULL);
    rc |= mess_client_save_pass(c, "client.mess", "pw", 2);
    rc |= mess_client_save_new(c, "new.mess", "pw", 2);
    rc |= mess_server_save(s, "server.mess");
    /* sizes from const parameters */
    n = mess_upload_size(p, 1) + mess_delete_size(p, 1) + mess_request_size(p) +
        mess_response_size(p, 10) + mess_payload_size(p);
    /* the experimental server view reads a const server */
    rc |= mess_server_shard_nodes(s, 0, &nodes);
#ifdef MUTATE
    {
        mess_query *q2;
        uint8_t *r2;
        size_t l2;
        rc |= mess_client_request(c, x, 10, &q2, &r2, &l2);
    }
#endif
    return rc + (int)(n & 1);
}
