/*
 * fuzz_query_state.c - the query-state loaders (mess.h, "Query state") on
 * hostile input: mess_query_load on state files and mess_query_unseal on
 * sealed buffers, for the fixture's client.  Every query accepted is then
 * used: finished with the fixture's real response (no results with an
 * error, every id one the client stored), sealed again and unsealed to the
 * same count.
 *
 * The sealed bytes are authenticated, so a mutation past the header dies
 * at the AEAD; the target therefore also seals inputs itself, with the
 * fixture client's real key, so that the checks made after authentication
 * are reached.  The first input byte picks the mode:
 *   0-2  a state file (fuzz.h, fuzz_state_file: this byte is its mode too)
 *        given to mess_query_load
 *   3    the rest as a sealed buffer, given to mess_query_unseal
 *   4    u8 count, then a plaintext (docs/PROTOCOL.md, "Query state"):
 *        sealed here under the fixture's parameters and key, then unsealed
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "statefile.h"
#include "fuzz.h"

#define MAX_QUERIES 8
#define HEADER_BYTES 52 /* magic | version | fingerprint | count | nonce */

/* The plaintext sealed as the library seals it: the header of the
 * fixture's parameters, the count given, a fresh nonce, and the
 * XChaCha20-Poly1305 of plain under the client's query-state key
 * (crypto_kdf context "MESSqsta" of its master key). */
static uint8_t *seal_plain(const mess_client *c, uint32_t count, const uint8_t *plain,
                           size_t len, size_t *out_len)
{
    uint8_t key[32], *buf;
    unsigned long long clen;
    *out_len = HEADER_BYTES + len + crypto_aead_xchacha20poly1305_ietf_ABYTES;
    buf = (uint8_t *)malloc(*out_len);
    if (!buf)
        return NULL;
    memcpy(buf, "MSQS", 4);
    mess_store_u32(buf + 4, MESS_QUERY_STATE_VERSION);
    params_fingerprint(&c->p, buf + 8);
    mess_store_u32(buf + 24, count);
    randombytes_buf(buf + 28, 24);
    crypto_kdf_derive_from_key(key, sizeof key, 0, "MESSqsta", c->keys->master);
    crypto_aead_xchacha20poly1305_ietf_encrypt(buf + HEADER_BYTES, &clen, plain, len, buf,
                                               HEADER_BYTES, NULL, buf + 28, key);
    sodium_memzero(key, sizeof key);
    return buf;
}

static void use(mess_query **qs, size_t n)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    mess_query *again[MAX_QUERIES];
    uint8_t *buf;
    size_t len, i, k, got, m;
    uint64_t ids[FUZZ_POOL];
    float dists[FUZZ_POOL];
    int rc;

    for (i = 0; i < n; i++) {
        rc = mess_client_finish(fx->client, qs[i], fx->response, fx->response_len,
                                FUZZ_POOL, ids, dists, &got, NULL);
        if (rc != MESS_OK && got != 0)
            fuzz_fail("results returned with an error");
        for (k = 0; k < got; k++) {
            size_t s;
            for (s = 0; s < FUZZ_ITEMS && ids[k] != fuzz_item_id(s); s++)
                ;
            if (s == FUZZ_ITEMS)
                fuzz_fail("an id the client never stored");
        }
    }
    if (mess_query_seal(fx->client, (const mess_query *const *)qs, n, &buf, &len) !=
        MESS_OK)
        fuzz_fail("a loaded query does not seal again");
    if (len != mess_query_sealed_size(&fx->p, n))
        fuzz_fail("sealed length");
    if (mess_query_unseal(fx->client, buf, len, again, MAX_QUERIES, &m) != MESS_OK ||
        m != n)
        fuzz_fail("a sealed query does not unseal again");
    for (i = 0; i < m; i++)
        mess_query_free(again[i]);
    mess_buf_free(buf);
}

static void check(int rc, mess_query **qs, size_t n)
{
    size_t i;
    if (rc == MESS_OK) {
        if (n == 0 || n > MAX_QUERIES)
            fuzz_fail("query count");
        use(qs, n);
        for (i = 0; i < n; i++)
            mess_query_free(qs[i]);
        return;
    }
    if (rc != MESS_ELIMIT && n != 0)
        fuzz_fail("a count with an error");
    for (i = 0; i < MAX_QUERIES; i++)
        if (qs[i])
            fuzz_fail("a query left with an error");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    mess_query *qs[MAX_QUERIES];
    size_t n = 0, len;
    uint8_t *buf;
    int rc;

    if (size == 0)
        return 0;
    switch (data[0] % 5) {
    case 3:
        rc = mess_query_unseal(fx->client, data + 1, size - 1, qs, MAX_QUERIES, &n);
        check(rc, qs, n);
        break;
    case 4:
        if (size < 2)
            return 0;
        buf = seal_plain(fx->client, data[1], data + 2, size - 2, &len);
        if (!buf)
            return 0;
        rc = mess_query_unseal(fx->client, buf, len, qs, MAX_QUERIES, &n);
        check(rc, qs, n);
        free(buf);
        break;
    default: {
        const char *path = fuzz_tmp_path(".qstate");
        if (fuzz_state_file(path, STATEFILE_QUERY, data, size) != 0)
            return 0;
        rc = mess_query_load(fx->client, path, qs, MAX_QUERIES, &n);
        check(rc, qs, n);
        unlink(path);
    }
    }
    return 0;
}
