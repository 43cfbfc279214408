/*
 * walkthrough.c - the usage walkthrough at the top of mess.h, compiled and
 * run (make check: tests/abi_walkthrough.sh, which also checks that the
 * code between the two marker lines is the code in mess.h, line for line).
 *
 *   build/examples/walkthrough [DIR]   (state files go to DIR, default .)
 *
 * The data are synthetic (a fixed pseudo-random stream), so it runs
 * anywhere in a fraction of a second; examples/sift_search.c does the
 * same on a real set.  Exit status 0 when the query's own vector is found
 * first, as it should be.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../mess.h"

#define DIM 32
#define N_TRAIN 500
#define N_BASE 2000

static float uniform(uint64_t *state)
{
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    return (float)(*state >> 40) / (float)(1u << 24) - 0.5f;
}

/* ---- walkthrough: begin ---- */
static int walkthrough(const char *dir, uint32_t dim, const float *train,
                       size_t n_train, const uint64_t *ids, const float *vectors,
                       size_t n, const float *query, uint64_t *top, size_t *found)
{
    mess_params p;
    mess_client *c = NULL;
    mess_server *s = NULL;
    mess_query *q = NULL;
    uint8_t *up = NULL, *req = NULL, *resp = NULL;
    size_t up_len, req_len, resp_len;
    float dists[10];
    char cpath[4096], spath[4096];
    int rc;

    // 1. Public parameters, shared by both roles (the server may know them).
    mess_params_default(&p, dim);
    p.shards = 8;   // M graphs (default 64) ...
    p.per_item = 2; // ... each item in t of them (default 16)
    if ((rc = mess_params_check(&p)) != MESS_OK)
        return rc;

    // 2. The client (every secret; trains its hash on public data) and
    //    the untrusted server.  seed NULL: keys from the OS CSPRNG.
    if ((rc = mess_client_new(&p, train, n_train, NULL, 1, &c)) != MESS_OK ||
        (rc = mess_server_new(&p, &s)) != MESS_OK)
        goto out;

    // 3. Upload: the client encodes, the buffer crosses to the server,
    //    which applies it (all or nothing).
    if ((rc = mess_client_upload(c, ids, vectors, n, 1, &up, &up_len)) != MESS_OK ||
        (rc = mess_server_apply_upload(s, up, up_len, 1)) != MESS_OK)
        goto out;

    // Save points: the client after every upload or delete (it keeps the
    // generation of deleted ids; a passphrase seals the file; a client made
    // from a seed also after each request), the server after every apply
    // or compact.  Both reload to the same state.
    snprintf(cpath, sizeof cpath, "%s/client.mess", dir);
    snprintf(spath, sizeof spath, "%s/server.mess", dir);
    if ((rc = mess_client_save(c, cpath, NULL)) != MESS_OK ||
        (rc = mess_server_save(s, spath)) != MESS_OK)
        goto out;
    mess_client_free(c);
    mess_server_free(s);
    s = NULL;
    if ((rc = mess_client_load(cpath, NULL, &c)) != MESS_OK ||
        (rc = mess_server_load(spath, &p, &s)) != MESS_OK)
        goto out;

    // 4. Query: request (client) -> search (server) -> finish (client),
    //    a candidate pool of 64 over the M shards, the best 10 reranked.
    if ((rc = mess_client_request(c, query, 64, &q, &req, &req_len)) != MESS_OK ||
        (rc = mess_server_search(s, req, req_len, 1, &resp, &resp_len)) != MESS_OK)
        goto out;
    // MESS_EAUTH from finish: a forged or foreign response, not "no results".
    rc = mess_client_finish(c, q, resp, resp_len, 10, top, dists, found, NULL);

out:
    // 5. Free every buffer and handle (each free accepts NULL).
    mess_buf_free(up);
    mess_buf_free(req);
    mess_buf_free(resp);
    mess_query_free(q);
    mess_server_free(s);
    mess_client_free(c);
    return rc;
}
/* ---- walkthrough: end ---- */

int main(int argc, char **argv)
{
    static float train[N_TRAIN * DIM], base[N_BASE * DIM], query[DIM];
    static uint64_t ids[N_BASE];
    uint64_t top[10], state = 1;
    size_t i, found = 0;
    int rc;

    for (i = 0; i < N_TRAIN * DIM; i++)
        train[i] = uniform(&state);
    for (i = 0; i < N_BASE * DIM; i++)
        base[i] = uniform(&state);
    for (i = 0; i < N_BASE; i++)
        ids[i] = 1000 + i;
    for (i = 0; i < DIM; i++) /* near item 7 */
        query[i] = base[7 * DIM + i] + 0.01f * uniform(&state);

    rc = walkthrough(argc > 1 ? argv[1] : ".", DIM, train, N_TRAIN, ids, base, N_BASE,
                     query, top, &found);
    if (rc != MESS_OK) {
        fprintf(stderr, "walkthrough: %s (%s)\n", mess_strerror(rc), mess_error_name(rc));
        return 1;
    }
    printf("libmess %s: %zu results, nearest id %llu (expected 1007)\n",
           mess_version_string(), found, found ? (unsigned long long)top[0] : 0ull);
    return found > 0 && top[0] == 1007 ? 0 : 1;
}
