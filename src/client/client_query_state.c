/*
 * client_query_state.c - pending queries kept outside the process: the
 * mess_query states a client's requests made, sealed under a key of that
 * client, as a buffer (mess_query_seal / _unseal) or as a state file
 * (mess_query_save / _load), so that the finish may run in another process
 * or after a restart, with the responses to the requests made before it.
 *
 * Why sealed: a query state holds the clean query, which is as secret as
 * the data (the request carries only its randomized reports).  The key is
 * derived from the client's master key (crypto_kdf context "MESSqsta"), so
 * only the client that made the queries can read them back, and whoever
 * can write the file can neither read nor change a query without the load
 * failing (MESS_EAUTH).
 *
 * Sealed form (docs/PROTOCOL.md, "Query state"):
 *   0   magic "MSQS"
 *   4   u32 version (MESS_QUERY_STATE_VERSION, 1; others are MESS_EVERSION)
 *   8   parameter fingerprint[16] (as the buffers': MESS_EPARAM if other)
 *   24  u32 n, the queries (1 .. 2^32 - 1)
 *   28  nonce[24] (random)
 *   52  XChaCha20-Poly1305 (associated data: bytes 0 .. 52) of n x
 *       (request id[16] | M x u16 budget | dim x f32 query), then its tag[16]
 * Every field of a query has a length fixed by the parameters, so the
 * sealed form's length tells n and the parameters, nothing of a query.
 * The file is the state-file container (statefile.h, role
 * STATEFILE_QUERY, unsealed: the body is already) around these bytes,
 * written atomically with mode 0600.
 */
#include <math.h>
#include <sodium.h>

#include "client.h"
#include "statefile.h"

static const uint8_t qstate_magic[4] = {'M', 'S', 'Q', 'S'};
#define QSTATE_COUNT_OFFSET (8 + MESS_FINGERPRINT_BYTES)
#define QSTATE_NONCE_OFFSET (QSTATE_COUNT_OFFSET + 4)
#define QSTATE_NONCE_BYTES crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define QSTATE_HEADER_BYTES (QSTATE_NONCE_OFFSET + QSTATE_NONCE_BYTES)
#define QSTATE_TAG_BYTES crypto_aead_xchacha20poly1305_ietf_ABYTES

uint32_t mess_query_state_version(void)
{
    return MESS_QUERY_STATE_VERSION;
}

/* Plaintext bytes of one query for parameters p. */
static size_t query_bytes(const mess_params *p)
{
    return WIRE_REQUEST_ID_BYTES + (size_t)p->shards * 2 + (size_t)p->dim * 4;
}

/* The sealed length of n queries, or 0 if n is 0, above 2^32 - 1, or the
 * length overflows size_t. */
static size_t sealed_size(const mess_params *p, size_t n)
{
    size_t body, total;
    if (n == 0 || (uint64_t)n > UINT32_MAX ||
        mess_mul_size(n, query_bytes(p), &body) != MESS_OK ||
        mess_add_size(body, QSTATE_HEADER_BYTES + QSTATE_TAG_BYTES, &total) != MESS_OK)
        return 0;
    return total;
}

size_t mess_query_sealed_size(const mess_params *p, size_t n)
{
    mess_params full;
    if (params_import(p, &full) != MESS_OK || mess_params_check(&full) != MESS_OK)
        return 0;
    return sealed_size(&full, n);
}

/* The sealing key of client c: a subkey of its master key used for
 * nothing else. */
static void qstate_key(const mess_client *c, uint8_t key[KEY_BYTES])
{
    crypto_kdf_derive_from_key(key, KEY_BYTES, 0, "MESSqsta", c->keys->master);
}

/* Seals n queries into dst (sealed_size(p, n) bytes, checked by the
 * caller): the plaintext is written in place and encrypted over itself,
 * so no other copy of a clean query is made. */
static void seal(const mess_client *c, const mess_query *const *qs, size_t n,
                 uint8_t *dst, size_t len)
{
    const mess_params *p = &c->p;
    uint8_t key[KEY_BYTES], *m = dst + QSTATE_HEADER_BYTES;
    unsigned long long clen;
    size_t i, j;

    memcpy(dst, qstate_magic, 4);
    mess_store_u32(dst + 4, MESS_QUERY_STATE_VERSION);
    params_fingerprint(p, dst + 8);
    mess_store_u32(dst + QSTATE_COUNT_OFFSET, (uint32_t)n);
    randombytes_buf(dst + QSTATE_NONCE_OFFSET, QSTATE_NONCE_BYTES);
    for (i = 0; i < n; i++) {
        const mess_query *q = qs[i];
        memcpy(m, q->request_id, WIRE_REQUEST_ID_BYTES);
        m += WIRE_REQUEST_ID_BYTES;
        for (j = 0; j < p->shards; j++, m += 2) {
            m[0] = (uint8_t)q->budgets[j];
            m[1] = (uint8_t)(q->budgets[j] >> 8);
        }
        for (j = 0; j < p->dim; j++, m += 4) {
            uint32_t bits;
            memcpy(&bits, &q->q[j], 4);
            mess_store_u32(m, bits);
        }
    }
    qstate_key(c, key);
    crypto_aead_xchacha20poly1305_ietf_encrypt(
        dst + QSTATE_HEADER_BYTES, &clen, dst + QSTATE_HEADER_BYTES,
        len - QSTATE_HEADER_BYTES - QSTATE_TAG_BYTES, dst, QSTATE_HEADER_BYTES, NULL,
        dst + QSTATE_NONCE_OFFSET, key);
    sodium_memzero(key, sizeof key);
}

/* The checks every sealing call makes before writing anything: the
 * queries exist and are this client's shape (a query of another client's
 * parameters would be read past its arrays). */
static int seal_args(const mess_client *c, const mess_query *const *qs, size_t n,
                     size_t *len)
{
    size_t i;
    if (!c || !qs || !len || n == 0)
        return MESS_EINVAL;
    for (i = 0; i < n; i++)
        if (!qs[i] || qs[i]->dim != c->p.dim)
            return MESS_EINVAL;
    *len = sealed_size(&c->p, n);
    return *len ? MESS_OK : MESS_ELIMIT;
}

int mess_query_seal_into(const mess_client *c, const mess_query *const *qs, size_t n,
                         uint8_t *buf, size_t cap, size_t *len)
{
    int rc;
    if (!buf)
        return MESS_EINVAL;
    rc = seal_args(c, qs, n, len);
    if (rc != MESS_OK)
        return rc;
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    if (cap < *len)
        return MESS_ELIMIT;
    seal(c, qs, n, buf, *len);
    return MESS_OK;
}

int mess_query_seal(const mess_client *c, const mess_query *const *qs, size_t n,
                    uint8_t **buf, size_t *len)
{
    size_t need;
    int rc;
    if (!buf || !len)
        return MESS_EINVAL;
    *buf = NULL;
    *len = 0;
    rc = seal_args(c, qs, n, &need);
    if (rc != MESS_OK)
        return rc;
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    *buf = (uint8_t *)malloc(need);
    if (!*buf)
        return MESS_ENOMEM;
    seal(c, qs, n, *buf, need);
    *len = need;
    return MESS_OK;
}

/* One query from its plaintext (query_bytes(p) bytes at m) into *out.  An
 * authenticated plaintext was written by seal(), but its fields are
 * checked as they would be on a request all the same: budgets summing to
 * a pool of 1 .. MESS_MAX_BUDGET * M, finite components. */
static int query_from(const mess_params *p, const uint8_t *m, mess_query **out)
{
    mess_query *q;
    uint64_t pool = 0;
    size_t j;
    *out = NULL;
    q = (mess_query *)calloc(1, sizeof *q);
    if (!q)
        return MESS_ENOMEM;
    q->dim = p->dim;
    q->q = (float *)mess_malloc_array(p->dim, sizeof(float));
    q->budgets = (uint16_t *)mess_malloc_array(p->shards, sizeof(uint16_t));
    if (!q->q || !q->budgets) {
        mess_query_free(q);
        return MESS_ENOMEM;
    }
    memcpy(q->request_id, m, WIRE_REQUEST_ID_BYTES);
    m += WIRE_REQUEST_ID_BYTES;
    for (j = 0; j < p->shards; j++, m += 2) {
        q->budgets[j] = (uint16_t)(m[0] | m[1] << 8);
        pool += q->budgets[j];
    }
    for (j = 0; j < p->dim; j++, m += 4) {
        uint32_t bits = mess_load_u32(m);
        memcpy(&q->q[j], &bits, 4);
        if (!isfinite(q->q[j]))
            pool = 0;
    }
    if (pool == 0) {
        mess_query_free(q);
        return MESS_EFORMAT;
    }
    *out = q;
    return MESS_OK;
}

/* Sets the caller's query outputs to NULL (a failed call leaves none). */
static void clear_out(mess_query **qs, size_t cap)
{
    size_t i;
    for (i = 0; qs && i < cap; i++)
        qs[i] = NULL;
}

static int unseal(const mess_client *c, const uint8_t *buf, size_t len,
                  mess_query **qs, size_t cap, size_t *n)
{
    const mess_params *p = &c->p;
    uint8_t fp[MESS_FINGERPRINT_BYTES], key[KEY_BYTES], *m = NULL;
    unsigned long long mlen;
    size_t count, i, plain;
    uint32_t version;
    int rc;

    if (len < QSTATE_HEADER_BYTES + QSTATE_TAG_BYTES ||
        memcmp(buf, qstate_magic, 4) != 0)
        return MESS_EFORMAT;
    version = mess_load_u32(buf + 4);
    if (version != MESS_QUERY_STATE_VERSION)
        return MESS_EVERSION;
    params_fingerprint(p, fp);
    if (sodium_memcmp(fp, buf + 8, MESS_FINGERPRINT_BYTES) != 0)
        return MESS_EPARAM;
    count = mess_load_u32(buf + QSTATE_COUNT_OFFSET);
    if (count == 0 || sealed_size(p, count) != len)
        return MESS_EFORMAT;
    *n = count;
    if (cap < count)
        return MESS_ELIMIT;
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    plain = len - QSTATE_HEADER_BYTES - QSTATE_TAG_BYTES;
    m = (uint8_t *)malloc(plain ? plain : 1);
    if (!m)
        return MESS_ENOMEM;
    qstate_key(c, key);
    rc = crypto_aead_xchacha20poly1305_ietf_decrypt(
             m, &mlen, NULL, buf + QSTATE_HEADER_BYTES, len - QSTATE_HEADER_BYTES, buf,
             QSTATE_HEADER_BYTES, buf + QSTATE_NONCE_OFFSET, key) == 0
             ? MESS_OK
             : MESS_EAUTH; /* tampered, or sealed by another client */
    sodium_memzero(key, sizeof key);
    for (i = 0; rc == MESS_OK && i < count; i++)
        rc = query_from(p, m + i * query_bytes(p), &qs[i]);
    if (rc != MESS_OK)
        while (i > 0) {
            mess_query_free(qs[--i]);
            qs[i] = NULL;
        }
    sodium_memzero(m, plain);
    free(m);
    return rc;
}

int mess_query_unseal(const mess_client *c, const uint8_t *buf, size_t len,
                      mess_query **qs, size_t cap, size_t *n)
{
    size_t count = 0;
    int rc;
    if (!c || !buf || !n || (cap && !qs))
        return MESS_EINVAL;
    clear_out(qs, cap);
    rc = unseal(c, buf, len, qs, cap, &count);
    *n = rc == MESS_OK || rc == MESS_ELIMIT ? count : 0;
    return rc;
}

int mess_query_save(const mess_client *c, const mess_query *const *qs, size_t n,
                    const char *path)
{
    uint8_t *buf;
    size_t len;
    int rc;
    if (!path)
        return MESS_EINVAL;
    rc = mess_query_seal(c, qs, n, &buf, &len);
    if (rc != MESS_OK)
        return rc;
    rc = statefile_write(path, STATEFILE_QUERY, &c->p, buf, len, NULL, 0, 0600);
    free(buf);
    return rc;
}

int mess_query_load(const mess_client *c, const char *path, mess_query **qs,
                    size_t cap, size_t *n)
{
    mess_params p;
    uint8_t *raw = NULL, fa[MESS_FINGERPRINT_BYTES], fb[MESS_FINGERPRINT_BYTES];
    size_t raw_len = 0, count = 0;
    int rc;
    if (!c || !path || !n || (cap && !qs))
        return MESS_EINVAL;
    clear_out(qs, cap);
    *n = 0;
    rc = statefile_read(path, STATEFILE_QUERY, NULL, 0, &p, &raw, &raw_len);
    if (rc != MESS_OK)
        return rc;
    params_fingerprint(&p, fa);
    params_fingerprint(&c->p, fb);
    rc = memcmp(fa, fb, sizeof fa) == 0 ? unseal(c, raw, raw_len, qs, cap, &count)
                                        : MESS_EPARAM;
    if (rc == MESS_OK || rc == MESS_ELIMIT)
        *n = count;
    statefile_free_raw(raw, raw_len);
    return rc;
}
