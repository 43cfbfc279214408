/*
 * mess.c - the MESS protocol's front door (paper section 4, Figure 6):
 * public entry points only, which nothing below them calls.
 * mess_client_new makes a client (its keys, then the per-shard IsoHash
 * trained on the caller's sample); mess_client_codes gives the clean
 * codes of vectors (also for the accountants, accountant.c, above it).
 * Everything else stands below this file: the client's machinery in
 * src/client/client_core.c, each client operation beside its entry
 * points (client_update.c, client_request.c, client_finish.c,
 * client_state.c), the server in src/server (its handle in
 * server_core.c) over its directory in src/store.
 */
#include <sodium.h>

#include "client.h"
#include "isohash.h"

int mess_client_new(const mess_params *in, const float *train, size_t n,
                    const uint8_t *seed, unsigned threads, mess_client **out)
{
    struct isohash_params hp;
    mess_params pp;
    const mess_params *p = &pp;
    mess_client *c;
    int rc;

    if (!in || !train || n == 0 || !out)
        return MESS_EINVAL;
    *out = NULL;
    rc = params_import(in, &pp);
    if (rc != MESS_OK)
        return rc;
    rc = client_alloc(p, &c);
    if (rc != MESS_OK)
        return rc;
    if (seed) {
        static const uint8_t domain[] = "libmess deterministic master key";
        crypto_generichash(c->keys->master, KEY_BYTES, domain, sizeof domain,
                           seed, MESS_SEED_BYTES);
        c->deterministic = 1;
    } else {
        randombytes_buf(c->keys->master, KEY_BYTES);
    }
    client_keys_derive(c);

    memset(&hp, 0, sizeof hp);
    hp.dim = p->dim;
    hp.kappa = p->kappa;
    hp.shards = p->shards;
    hp.sample = p->train_sample;
    hp.tol = 0.0;     /* library default */
    hp.max_iter = 0;  /* library default */
    hp.threads = threads;
    memcpy(hp.seed, c->keys->hash, 32);
    rc = isohash_train(&hp, train, n, &c->hash);
    sodium_memzero(hp.seed, sizeof hp.seed);
    if (rc != MESS_OK) {
        mess_client_free(c);
        return rc;
    }
    *out = c;
    return MESS_OK;
}

int mess_client_codes(const mess_client *c, const float *x, uint64_t *codes)
{
    if (!c || !x || !codes)
        return MESS_EINVAL;
    return isohash_hash_all(c->hash, x, codes);
}
