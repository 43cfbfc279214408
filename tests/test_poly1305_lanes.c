/*
 * test_poly1305_lanes.c - poly1305_many (poly1305_lanes.c) against
 * libsodium's crypto_onetimeauth_poly1305 on every path the CPU has (the
 * libsodium fallback, AVX2, AVX-512): RFC 8439's vector, random keys and
 * messages of every length 0..1100 behind heads of 0, 16 and 32 bytes at
 * every alignment, accumulators next to 2^130 - 5, and the largest limbs.
 */
#include <sodium.h>

#include "poly1305_lanes.h"
#include "harness.h"

static uint32_t rnd(uint32_t n)
{
    return randombytes_uniform(n);
}

/* The paths this CPU can run: 0 .. max. */
static int isa_max(void)
{
    int isa = 0;
    while (isa < 2 && poly1305_lanes_force(isa + 1) == MESS_OK)
        isa++;
    poly1305_lanes_force(-1);
    return isa;
}

static void test_force(void)
{
    int max = isa_max();
    printf("# Poly1305 paths available: 0..%d (CPU default %d)\n", max, poly1305_lanes_isa());
    CHECK(poly1305_lanes_isa() == max);
    CHECK_RC(poly1305_lanes_force(3), MESS_EINVAL);
    CHECK_RC(poly1305_lanes_force(-2), MESS_EINVAL);
    CHECK_OK(poly1305_lanes_force(0));
    CHECK(poly1305_lanes_isa() == 0);
    CHECK_OK(poly1305_lanes_force(-1));
    CHECK(poly1305_lanes_isa() == max);
}

/* RFC 8439 section 2.5.2, in lanes beside random messages. */
static void test_rfc8439(void)
{
    static const uint8_t key[32] = {
        0x85, 0xd6, 0xbe, 0x78, 0x57, 0x55, 0x6d, 0x33, 0x7f, 0x44, 0x52,
        0xfe, 0x42, 0xd5, 0x06, 0xa8, 0x01, 0x03, 0x80, 0x8a, 0xfb, 0x0d,
        0xb2, 0xfd, 0x4a, 0xbf, 0xf6, 0xaf, 0x41, 0x49, 0xf5, 0x1b};
    static const uint8_t want[16] = {0xa8, 0x06, 0x1d, 0xc1, 0x30, 0x51, 0x36, 0xc6,
                                     0xc2, 0x2b, 0x8b, 0xaf, 0x0c, 0x01, 0x27, 0xa9};
    static const char text[] = "Cryptographic Forum Research Group";
    uint8_t other[20][34], okey[20][32], tag[20][16], ref[16];
    const uint8_t *kp[20], *mp[20];
    int isa, max = isa_max();
    size_t i, at;
    crypto_onetimeauth(ref, (const uint8_t *)text, 34, key);
    CHECK(memcmp(ref, want, 16) == 0);
    for (isa = 0; isa <= max; isa++)
        for (at = 0; at < 20; at += 7) {
            CHECK_OK(poly1305_lanes_force(isa));
            randombytes_buf(other, sizeof other);
            randombytes_buf(okey, sizeof okey);
            for (i = 0; i < 20; i++) {
                kp[i] = i == at ? key : okey[i];
                mp[i] = i == at ? (const uint8_t *)text : other[i];
            }
            poly1305_many(20, kp, NULL, 0, mp, 34, tag);
            CHECK(memcmp(tag[at], want, 16) == 0);
            for (i = 0; i < 20; i++) {
                crypto_onetimeauth(ref, mp[i], 34, kp[i]);
                CHECK(crypto_verify_16(ref, tag[i]) == 0);
            }
        }
    poly1305_lanes_force(-1);
}

#define MAXLEN 1100
#define MAXN 37

/* Every length 0..MAXLEN, each in one call of 1..MAXN messages (partial
 * groups included) at random alignments, behind a head of 0, 16 or 32
 * bytes; tags against libsodium on head || msg. */
static void test_random_all_lengths(void)
{
    static uint8_t pool[MAXN][16 + 32 + MAXLEN + 16], cat[32 + MAXLEN], keys[MAXN][32 + 1];
    uint8_t tag[MAXN][16], ref[16];
    const uint8_t *kp[MAXN], *hp[MAXN], *mp[MAXN];
    int isa, max = isa_max();
    size_t len, i, bad = 0, total = 0;
    for (isa = 0; isa <= max; isa++) {
        CHECK_OK(poly1305_lanes_force(isa));
        for (len = 0; len <= MAXLEN; len++) {
            size_t n = 1 + (len * 7 + (size_t)isa) % MAXN, hl = 16 * (len % 3);
            randombytes_buf(pool, sizeof pool);
            randombytes_buf(keys, sizeof keys);
            for (i = 0; i < n; i++) {
                size_t off = rnd(16);
                kp[i] = keys[i] + (i & 1); /* odd addresses too */
                hp[i] = pool[i] + off;
                mp[i] = pool[i] + off + hl + rnd(16);
            }
            poly1305_many(n, kp, hl ? hp : NULL, hl, mp, len, tag);
            for (i = 0; i < n; i++) {
                memcpy(cat, hp[i], hl);
                memcpy(cat + hl, mp[i], len);
                crypto_onetimeauth(ref, cat, hl + len, kp[i]);
                bad += crypto_verify_16(ref, tag[i]) != 0;
                total++;
            }
        }
    }
    poly1305_lanes_force(-1);
    printf("# %zu random tags over %d paths, %zu differ from libsodium's\n", total, max + 1,
           bad);
    CHECK(bad == 0);
    CHECK(total > 3 * MAXLEN);
}

/* Values where the reductions matter: r = 1 (key 01 00 .. 00) and two
 * blocks m1 = 2^128 - 1, m2 = 2^128 - 1 - j leave h = 2^130 - 2 - j before
 * the final reduction, so j = 0..8 straddles p = 2^130 - 5 (h >= p must
 * subtract p, h < p must not); then the largest clamped r with all-ones
 * blocks and s, and a zero key. */
static void test_edges(void)
{
    enum { N = 16 };
    uint8_t keys[N][32], msg[N][64], tag[N][16], ref[16];
    const uint8_t *kp[N], *mp[N];
    int isa, max = isa_max();
    size_t i, len, bad = 0;
    for (isa = 0; isa <= max; isa++) {
        CHECK_OK(poly1305_lanes_force(isa));
        for (len = 16; len <= 64; len += 16) {
            memset(keys, 0, sizeof keys);
            memset(msg, 0xff, sizeof msg);
            for (i = 0; i < N; i++) {
                kp[i] = keys[i];
                mp[i] = msg[i];
                if (i < 9) {
                    keys[i][0] = 1; /* r = 1, s = 0 */
                    msg[i][16] = (uint8_t)(0xff - i);
                } else if (i < 14) {
                    memset(keys[i], 0xff, 32); /* r clamps to its largest */
                    msg[i][len - 1] = (uint8_t)(0xff - (i - 9));
                } else if (i == 14) {
                    keys[i][16] = 0xff; /* r = 0: the tag is s */
                }
            }
            poly1305_many(N, kp, NULL, 0, mp, len, tag);
            for (i = 0; i < N; i++) {
                crypto_onetimeauth(ref, mp[i], len, kp[i]);
                bad += crypto_verify_16(ref, tag[i]) != 0;
            }
        }
    }
    poly1305_lanes_force(-1);
    CHECK(bad == 0);
}

/* A head whose length is not a multiple of 16 takes the libsodium path
 * and still gives the tag of head || msg. */
static void test_odd_head(void)
{
    uint8_t key[32], buf[100], tag[1][16], ref[16];
    const uint8_t *kp[1] = {key}, *hp[1] = {buf}, *mp[1] = {buf + 5};
    randombytes_buf(key, sizeof key);
    randombytes_buf(buf, sizeof buf);
    poly1305_many(1, kp, hp, 5, mp, 90, tag);
    crypto_onetimeauth(ref, buf, 95, key);
    CHECK(memcmp(ref, tag[0], 16) == 0);
    poly1305_many(0, kp, hp, 16, mp, 90, tag); /* nothing to do */
}

int main(void)
{
    if (sodium_init() < 0) {
        printf("sodium_init failed\n0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_force);
    RUN(test_rfc8439);
    RUN(test_random_all_lengths);
    RUN(test_edges);
    RUN(test_odd_head);
    HARNESS_END();
}
