/*
 * test_payload_batch.c - the lane core (chacha_lanes.c) and the batched
 * payload calls against libsodium and the one-entry calls: thousands of
 * random inputs, every core the CPU has (portable C, AVX2, AVX-512), lanes
 * of one call mixing authentic and tampered entries.
 */
#include <sodium.h>

#include "chacha_lanes.h"
#include "metric.h"
#include "payload.h"
#include "poly1305_lanes.h"
#include "harness.h"

static uint32_t rnd(uint32_t n)
{
    return randombytes_uniform(n);
}

/* The cores this CPU can run: 0 .. max. */
static int isa_max(void)
{
    int isa = 0;
    while (isa < 2 && chacha_lanes_force(isa + 1) == MESS_OK)
        isa++;
    chacha_lanes_force(-1);
    return isa;
}

static void test_force(void)
{
    int max = isa_max();
    printf("# lane cores available: 0..%d (CPU default %d)\n", max, chacha_lanes_isa());
    CHECK(chacha_lanes_isa() == max);
    CHECK_RC(chacha_lanes_force(3), MESS_EINVAL);
    CHECK_RC(chacha_lanes_force(-2), MESS_EINVAL);
    CHECK_OK(chacha_lanes_force(0));
    CHECK(chacha_lanes_isa() == 0);
    CHECK_OK(chacha_lanes_force(-1));
    CHECK(chacha_lanes_isa() == max);
}

#define NK 4096

/* HChaCha20 and the id pad on NK random (key, input) pairs per core, in
 * calls of random sizes (partial lane groups included). */
static void test_hchacha_pad_kat(void)
{
    static uint8_t keys[NK][32], in[NK][16], out[NK][32];
    static const uint8_t *kp[NK], *np[NK];
    static uint32_t ctr[NK];
    static uint64_t pad[NK];
    int isa, max = isa_max();
    size_t i, n, bad_h = 0, bad_p = 0;
    for (isa = 0; isa <= max; isa++) {
        CHECK_OK(chacha_lanes_force(isa));
        randombytes_buf(keys, sizeof keys);
        randombytes_buf(in, sizeof in);
        for (i = 0; i < NK; i++) {
            kp[i] = keys[i];
            np[i] = in[i] + 4;
            /* the whole 32-bit counter, ends included */
            ctr[i] = i % 3 == 0 ? (uint32_t)-1 - rnd(4) : i % 3 == 1 ? rnd(4) : randombytes_random();
        }
        for (i = 0; i < NK; i += n) {
            n = 1 + rnd(100);
            if (n > NK - i)
                n = NK - i;
            chacha_hchacha_many(n, kp + i, (const uint8_t(*)[16])in + i, out + i);
            chacha_pad8_many(n, kp + i, ctr + i, np + i, pad + i);
        }
        for (i = 0; i < NK; i++) {
            uint8_t ref[32], ks[8] = {0};
            crypto_core_hchacha20(ref, in[i], keys[i], NULL);
            bad_h += memcmp(ref, out[i], 32) != 0;
            crypto_stream_chacha20_ietf_xor_ic(ks, ks, 8, np[i], ctr[i], keys[i]);
            bad_p += mess_load_u64(ks) != pad[i];
        }
    }
    chacha_lanes_force(-1);
    CHECK(bad_h == 0);
    CHECK(bad_p == 0);
}

/* Keystream XOR jobs of random lengths (0 to 11 blocks and a tail),
 * counters (up to the last block of the 32-bit counter) and keys, in place
 * and not, against crypto_stream_chacha20_ietf_xor_ic. */
static void test_xor_kat(void)
{
    enum { NJ = 2000, MAXLEN = 11 * 64 + 63 };
    static struct chacha_job job[NJ];
    static uint8_t keys[NJ][32], nonces[NJ][12];
    uint8_t *plain = (uint8_t *)malloc((size_t)NJ * MAXLEN);
    uint8_t *buf = (uint8_t *)malloc((size_t)NJ * MAXLEN);
    uint8_t *ref = (uint8_t *)malloc(MAXLEN);
    int isa, max = isa_max();
    size_t i, n, bad = 0, blocks_total = 0;
    CHECK(plain && buf && ref);
    for (isa = 0; plain && buf && ref && isa <= max; isa++) {
        CHECK_OK(chacha_lanes_force(isa));
        randombytes_buf(keys, sizeof keys);
        randombytes_buf(nonces, sizeof nonces);
        randombytes_buf(plain, (size_t)NJ * MAXLEN);
        for (i = 0; i < NJ; i++) {
            size_t len = rnd(MAXLEN + 1), blocks = (len + 63) / 64;
            uint8_t *b = buf + i * MAXLEN;
            job[i].key = keys[i];
            job[i].nonce = nonces[i];
            job[i].ctr = i % 4 == 0 ? (uint32_t)(0xffffffffu - blocks + 1) : randombytes_random() >> 1;
            if (i % 2) { /* in place */
                memcpy(b, plain + i * MAXLEN, len);
                job[i].src = b;
            } else {
                job[i].src = plain + i * MAXLEN;
            }
            job[i].dst = b;
            job[i].len = len;
            blocks_total += blocks;
        }
        for (i = 0; i < NJ; i += n) {
            n = 1 + rnd(40);
            if (n > NJ - i)
                n = NJ - i;
            chacha_xor_many(n, job + i);
        }
        for (i = 0; i < NJ; i++) {
            crypto_stream_chacha20_ietf_xor_ic(ref, plain + i * MAXLEN, job[i].len,
                                               nonces[i], job[i].ctr, keys[i]);
            bad += memcmp(ref, buf + i * MAXLEN, job[i].len) != 0;
        }
    }
    printf("# %zu keystream blocks compared\n", blocks_total);
    chacha_lanes_force(-1);
    CHECK(bad == 0);
    free(plain);
    free(buf);
    free(ref);
}

/* The Poly1305 paths this CPU can run: 0 (libsodium) .. max. */
static int poly_max(void)
{
    int isa = 0;
    while (isa < 2 && poly1305_lanes_force(isa + 1) == MESS_OK)
        isa++;
    poly1305_lanes_force(-1);
    return isa;
}

/* payload_peek_ids and payload_open_peeked_many give what the one-entry
 * calls give, for every encoding and dimensions of 0 to 11 keystream
 * blocks, with authentic and tampered entries (a flipped bit anywhere,
 * another context, a wrong claimed id, another shard's keys) mixed in the
 * lanes of one call; every lane core with every Poly1305 path. */
static void test_batch_open(void)
{
    static const uint32_t payloads[4] = {MESS_PAYLOAD_F32, MESS_PAYLOAD_F16, MESS_PAYLOAD_I8,
                                         MESS_PAYLOAD_U8};
    int isa, max = isa_max(), pmax = poly_max(), combo;
    size_t round, bad_peek = 0, bad_ok = 0, bad_plain = 0, nfail = 0, nok = 0;
    printf("# lane cores 0..%d x Poly1305 paths 0..%d\n", max, pmax);
    for (combo = 0; combo < (max + 1) * (pmax + 1); combo++) {
        isa = combo / (pmax + 1);
        CHECK_OK(chacha_lanes_force(isa));
        CHECK_OK(poly1305_lanes_force(combo % (pmax + 1)));
        for (round = 0; round < 60; round++) {
            mess_params p;
            struct payload_keys keys[4];
            const struct payload_keys *kp[PAYLOAD_BATCH];
            const uint8_t *ep[PAYLOAD_BATCH];
            uint64_t ctx[PAYLOAD_BATCH], id[PAYLOAD_BATCH], peek[PAYLOAD_BATCH];
            int ok[PAYLOAD_BATCH];
            uint8_t *entries, *plain, *plain1;
            float *x;
            size_t eb, pb, n = 1 + rnd(PAYLOAD_BATCH), i, d;
            mess_params_default(&p, 1 + rnd(176));
            p.payload = payloads[round % 4];
            eb = payload_entry_bytes(&p);
            pb = payload_plain_bytes(&p);
            entries = (uint8_t *)malloc(n * eb);
            plain = (uint8_t *)malloc(n * pb);
            plain1 = (uint8_t *)malloc(pb);
            x = (float *)malloc(p.dim * sizeof *x);
            if (!entries || !plain || !plain1 || !x) {
                CHECK(0);
                free(entries), free(plain), free(plain1), free(x);
                return;
            }
            randombytes_buf(keys, sizeof keys);
            for (i = 0; i < n; i++) {
                uint64_t sealed;
                randombytes_buf(&sealed, sizeof sealed);
                for (d = 0; d < p.dim; d++)
                    x[d] = (float)rnd(512) - 256.0f;
                kp[i] = &keys[rnd(4)];
                ctx[i] = payload_ctx(rnd(64), rnd(3));
                payload_seal(&p, kp[i], ctx[i], sealed, x, plain1, entries + i * eb);
                ep[i] = entries + i * eb;
                switch (rnd(6)) {
                case 0: /* one bit anywhere */
                    entries[i * eb + rnd((uint32_t)eb)] ^= (uint8_t)(1u << rnd(8));
                    break;
                case 1:
                    ctx[i] ^= 1;
                    break;
                case 2:
                    kp[i] = kp[i] == &keys[0] ? &keys[1] : &keys[0];
                    break;
                default: /* authentic */
                    break;
                }
            }
            payload_peek_ids(n, kp, ep, peek);
            for (i = 0; i < n; i++) {
                id[i] = payload_peek_id(kp[i], ep[i]);
                bad_peek += peek[i] != id[i];
                if (rnd(8) == 0)
                    id[i] ^= 1; /* a claimed id that is not the sealed one */
            }
            payload_open_peeked_many(&p, n, kp, ctx, ep, id, plain, ok);
            for (i = 0; i < n; i++) {
                int rc = payload_open_peeked(&p, kp[i], ctx[i], ep[i], id[i], plain1);
                bad_ok += ok[i] != (rc == MESS_OK);
                nok += ok[i] != 0;
                nfail += ok[i] == 0;
                /* the same plaintext, or both wiped */
                bad_plain += memcmp(plain + i * pb, plain1, pb) != 0;
            }
            free(entries);
            free(plain);
            free(plain1);
            free(x);
        }
    }
    chacha_lanes_force(-1);
    poly1305_lanes_force(-1);
    printf("# %zu entries opened, %zu refused\n", nok, nfail);
    CHECK(nok > 0 && nfail > 0);
    CHECK(bad_peek == 0);
    CHECK(bad_ok == 0);
    CHECK(bad_plain == 0);
}

/* metric_distance_many gives metric_distance's bits for every metric, any
 * dimension (tails of 1-3 components included) and any count (groups of
 * four and the rest), on its AVX and its portable loop alternately. */
static void test_distance_many(void)
{
    size_t round, bad = 0, total = 0;
    for (round = 0; round < 600; round++) {
        uint32_t dim = 1 + rnd(300), metric = (uint32_t)(round % 3), i;
        size_t n = rnd(14), v;
        float *q = (float *)malloc(dim * sizeof *q);
        float *x = (float *)malloc((n ? n : 1) * dim * sizeof *x);
        double out[14];
        if (!q || !x) {
            CHECK(0);
            free(q), free(x);
            return;
        }
        for (i = 0; i < dim; i++)
            q[i] = ((float)rnd(1u << 20) - 524288.0f) / (float)(1 + rnd(1000));
        for (i = 0; i < n * dim; i++)
            x[i] = ((float)rnd(1u << 20) - 524288.0f) / (float)(1 + rnd(1000));
        metric_set_simd(round % 2 == 0); /* the AVX loop (if any), then the portable */
        metric_distance_many(metric == 0   ? MESS_METRIC_L2
                             : metric == 1 ? MESS_METRIC_IP
                                           : MESS_METRIC_COSINE,
                             q, x, n, dim, out);
        for (v = 0; v < n; v++) {
            double one = metric_distance(metric == 0   ? MESS_METRIC_L2
                                         : metric == 1 ? MESS_METRIC_IP
                                                       : MESS_METRIC_COSINE,
                                         q, x + v * dim, dim);
            bad += memcmp(&one, &out[v], sizeof one) != 0;
            total++;
        }
        free(q);
        free(x);
    }
    metric_set_simd(1);
    printf("# %zu distances compared\n", total);
    CHECK(total > 1000);
    CHECK(bad == 0);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(test_force);
    RUN(test_hchacha_pad_kat);
    RUN(test_xor_kat);
    RUN(test_batch_open);
    RUN(test_distance_many);
    HARNESS_END();
}
