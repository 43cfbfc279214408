/*
 * test_payload_kat.c - payload_seal / payload_open / payload_peek_id against
 * known-answer vectors computed independently of payload.c
 * (scripts/payload_kat.py: libsodium's Poly1305, HChaCha20 and IETF
 * ChaCha20 called directly, encodings by Python's struct).  One changed
 * byte anywhere in an entry must fail authentication.
 */
#include <sodium.h>

#include "payload.h"
#include "harness.h"
#include "payload_kat.h"

/* The AD layout the compiled payload.h implements: "MESSpay4" | shard |
 * generation (16 bytes, PAYLOAD_AD_BYTES defined) or "MESSpay3" | shard. */
#ifdef PAYLOAD_AD_BYTES
#define KAT_ENTRY(v) ((v)->entry_v4)
#define KAT_CTX(v) payload_ctx((v)->shard, (v)->generation)
#define KAT_OTHER_CTX(v) payload_ctx((v)->shard, (v)->generation + 1)
#else
#define KAT_ENTRY(v) ((v)->entry_v3)
#define KAT_CTX(v) ((v)->shard)
#define KAT_OTHER_CTX(v) ((v)->shard + 1)
#endif

static void kat_params(const struct payload_kat *v, mess_params *p)
{
    mess_params_default(p, v->dim);
    p->payload = v->payload;
}

static void kat_keys(const struct payload_kat *v, struct payload_keys *k)
{
    memcpy(k->enc, v->enc, 32);
    memcpy(k->mac, v->mac, 32);
    memcpy(k->prf, v->prf, 32);
}

static void test_seal_matches(void)
{
    size_t i;
    for (i = 0; i < sizeof payload_kats / sizeof payload_kats[0]; i++) {
        const struct payload_kat *v = &payload_kats[i];
        mess_params p;
        struct payload_keys k;
        uint8_t *plain, *entry;
        kat_params(v, &p);
        kat_keys(v, &k);
        CHECK(payload_entry_bytes(&p) == v->entry_bytes);
        plain = (uint8_t *)malloc(payload_plain_bytes(&p));
        entry = (uint8_t *)malloc(v->entry_bytes);
        payload_seal(&p, &k, KAT_CTX(v), v->id, v->x, plain, entry);
        if (memcmp(entry, KAT_ENTRY(v), v->entry_bytes) != 0) {
            fprintf(stderr, "  KAT %s: sealed entry differs\n", v->name);
            CHECK(0);
        }
        free(plain);
        free(entry);
    }
}

static void test_open_known_entries(void)
{
    size_t i, b;
    for (i = 0; i < sizeof payload_kats / sizeof payload_kats[0]; i++) {
        const struct payload_kat *v = &payload_kats[i];
        mess_params p;
        struct payload_keys k;
        uint8_t *plain, *entry;
        float *x;
        uint64_t id = 0;
        size_t d, refused = 0;
        kat_params(v, &p);
        kat_keys(v, &k);
        plain = (uint8_t *)malloc(payload_plain_bytes(&p));
        entry = (uint8_t *)malloc(v->entry_bytes);
        x = (float *)malloc(v->dim * sizeof *x);
        memcpy(entry, KAT_ENTRY(v), v->entry_bytes);
        CHECK(payload_peek_id(&k, entry) == v->id);
        CHECK_OK(payload_open(&p, &k, KAT_CTX(v), entry, plain, &id, x));
        CHECK(id == v->id);
        if (v->payload == MESS_PAYLOAD_F32 || v->payload == MESS_PAYLOAD_I8 ||
            v->payload == MESS_PAYLOAD_U8)
            for (d = 0; d < v->dim; d++)
                CHECK(x[d] == v->x[d]); /* exact: f32, integral i8, u8 */
        /* another context (shard or generation) does not open it */
        CHECK_RC(payload_open(&p, &k, KAT_OTHER_CTX(v), entry, plain, &id, x),
                 MESS_EAUTH);
        /* nor does any entry with one bit changed */
        for (b = 0; b < v->entry_bytes; b++) {
            entry[b] ^= (uint8_t)(1u << (b % 8));
            refused += payload_open_raw(&p, &k, KAT_CTX(v), entry, plain) == MESS_EAUTH;
            entry[b] ^= (uint8_t)(1u << (b % 8));
        }
        CHECK(refused == v->entry_bytes);
        free(plain);
        free(entry);
        free(x);
    }
}

/* The batched calls (payload_peek_ids, payload_open_peeked_many: the lane
 * core) on the known entries: each one in a full batch whose other lanes
 * hold copies with one bit changed, so lanes of one call must not mix. */
static void test_batched_known_entries(void)
{
    size_t i, l;
    for (i = 0; i < sizeof payload_kats / sizeof payload_kats[0]; i++) {
        const struct payload_kat *v = &payload_kats[i];
        mess_params p;
        struct payload_keys k;
        const struct payload_keys *kp[PAYLOAD_BATCH];
        const uint8_t *ep[PAYLOAD_BATCH];
        uint64_t ctx[PAYLOAD_BATCH], id[PAYLOAD_BATCH];
        int ok[PAYLOAD_BATCH];
        uint8_t *entries, *plain, *ref;
        size_t pb, good = 0;
        kat_params(v, &p);
        kat_keys(v, &k);
        pb = payload_plain_bytes(&p);
        entries = (uint8_t *)malloc(PAYLOAD_BATCH * v->entry_bytes);
        plain = (uint8_t *)malloc(PAYLOAD_BATCH * pb);
        ref = (uint8_t *)malloc(pb);
        if (!entries || !plain || !ref) {
            CHECK(0);
            free(entries), free(plain), free(ref);
            return;
        }
        CHECK_OK(payload_open_raw(&p, &k, KAT_CTX(v), (const uint8_t *)KAT_ENTRY(v), ref));
        for (l = 0; l < PAYLOAD_BATCH; l++) {
            uint8_t *e = entries + l * v->entry_bytes;
            memcpy(e, KAT_ENTRY(v), v->entry_bytes);
            if (l % 3 != 1) /* lanes 1, 4, 7, ... stay authentic */
                e[(l * 37) % v->entry_bytes] ^= (uint8_t)(1u << (l % 8));
            kp[l] = &k;
            ep[l] = e;
            ctx[l] = KAT_CTX(v);
        }
        payload_peek_ids(PAYLOAD_BATCH, kp, ep, id);
        CHECK(id[1] == v->id);
        for (l = 0; l < PAYLOAD_BATCH; l++)
            CHECK(id[l] == payload_peek_id(&k, ep[l]));
        payload_open_peeked_many(&p, PAYLOAD_BATCH, kp, ctx, ep, id, plain, ok);
        for (l = 0; l < PAYLOAD_BATCH; l++) {
            CHECK(ok[l] == (l % 3 == 1));
            if (ok[l]) {
                good++;
                CHECK(memcmp(plain + l * pb, ref, pb) == 0);
            }
        }
        CHECK(good == (PAYLOAD_BATCH + 1) / 3);
        free(entries);
        free(plain);
        free(ref);
    }
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    printf("# %zu known-answer entries, AD layout %s\n",
           sizeof payload_kats / sizeof payload_kats[0],
#ifdef PAYLOAD_AD_BYTES
           "MESSpay4 | shard | generation"
#else
           "MESSpay3 | shard"
#endif
    );
    RUN(test_seal_matches);
    RUN(test_open_known_entries);
    RUN(test_batched_known_entries);
    HARNESS_END();
}
