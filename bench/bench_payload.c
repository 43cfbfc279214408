/*
 * bench_payload.c - `mess bench payload`: what it costs the client to open
 * one response's entries, for the payload construction libmess uses and
 * for the stock nonce-based AEAD it was chosen over.
 *
 * One simulated response: N entries (the pool B) of U distinct items, each
 * entry an f32 vector of `dim` components and its id, sealed for its own
 * shard.  Per response, CPU time of:
 *
 *   siv-open-all     every entry opened (mess_client_set_verify_all)
 *   siv-peek+open    every id peeked, one copy per item opened (the default)
 *   rfc-open-all     libsodium's ChaCha20-Poly1305 (RFC 8439, 12-byte stored
 *                    nonce): every entry verified and decrypted
 *   rfc-verify+open  the same entries, every tag verified (Poly1305 only)
 *                    and one copy per item decrypted: the best a stored-nonce
 *                    encrypt-then-MAC entry allows while verifying all
 *
 * as ratios to siv-peek+open, all in one run.  docs/PROTOCOL.md explains
 * the choice with these numbers.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "payload.h"
#include "bench.h"

#define RFC_NONCE 12
#define RFC_TAG 16

struct sim {
    mess_params p;
    size_t n, unique, plain, siv_bytes, rfc_bytes;
    struct payload_keys *keys; /* one per shard */
    uint32_t *shard;
    uint8_t *siv;   /* n x siv_bytes */
    uint8_t *rfc;   /* n x rfc_bytes: nonce | ct | tag */
    uint8_t *first; /* 1 for the first copy of its item */
    uint8_t *plain_buf;
};

static void make_ad(uint32_t shard, uint8_t ad[12])
{
    memcpy(ad, "MESSbnch", 8);
    mess_store_u32(ad + 8, shard);
}

/* The first copy of each item comes first in response order, as the
 * dedupe would find it; copies of an item sit in distinct shards. */
static int sim_build(struct sim *s, size_t n, size_t unique, uint32_t dim)
{
    float *x;
    size_t i, j;
    mess_params_default(&s->p, dim);
    s->n = n;
    s->unique = unique;
    s->plain = payload_plain_bytes(&s->p);
    s->siv_bytes = payload_entry_bytes(&s->p);
    s->rfc_bytes = RFC_NONCE + s->plain + RFC_TAG;
    s->keys = (struct payload_keys *)calloc(s->p.shards, sizeof *s->keys);
    s->shard = (uint32_t *)calloc(n, sizeof *s->shard);
    s->siv = (uint8_t *)malloc(n * s->siv_bytes);
    s->rfc = (uint8_t *)malloc(n * s->rfc_bytes);
    s->first = (uint8_t *)calloc(n, 1);
    s->plain_buf = (uint8_t *)malloc(n * s->plain);
    x = (float *)malloc(dim * sizeof *x);
    if (!s->keys || !s->shard || !s->siv || !s->rfc || !s->first || !s->plain_buf || !x) {
        free(x);
        return MESS_ENOMEM;
    }
    randombytes_buf(s->keys, s->p.shards * sizeof *s->keys);
    for (i = 0; i < n; i++) {
        size_t item = i < unique ? i : (i * 2654435761u) % unique;
        uint8_t ad[12];
        uint8_t *e = s->rfc + i * s->rfc_bytes;
        s->first[i] = i < unique;
        s->shard[i] = (uint32_t)((item + (i / unique) * 7) % s->p.shards);
        for (j = 0; j < dim; j++)
            x[j] = (float)((item * 31 + j * 17) % 256);
        payload_seal(&s->p, &s->keys[s->shard[i]], s->shard[i], (uint64_t)item, x,
                     s->plain_buf, s->siv + i * s->siv_bytes);
        make_ad(s->shard[i], ad);
        randombytes_buf(e, RFC_NONCE);
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(
            e + RFC_NONCE, e + RFC_NONCE + s->plain, NULL, s->plain_buf, s->plain, ad,
            sizeof ad, NULL, e, s->keys[s->shard[i]].enc);
    }
    free(x);
    return MESS_OK;
}

static void sim_free(struct sim *s)
{
    free(s->keys);
    free(s->shard);
    free(s->siv);
    free(s->rfc);
    free(s->first);
    free(s->plain_buf);
}

/* Each variant returns the number of entries that failed (0 expected). */
static size_t siv_open_all(struct sim *s)
{
    size_t i, bad = 0;
    for (i = 0; i < s->n; i++)
        bad += payload_open_raw(&s->p, &s->keys[s->shard[i]], s->shard[i],
                                s->siv + i * s->siv_bytes,
                                s->plain_buf + i * s->plain) != MESS_OK;
    return bad;
}

static size_t siv_peek_open(struct sim *s)
{
    size_t i, bad = 0;
    uint64_t sum = 0;
    for (i = 0; i < s->n; i++)
        sum += payload_peek_id(&s->keys[s->shard[i]], s->siv + i * s->siv_bytes);
    for (i = 0; i < s->n; i++)
        if (s->first[i])
            bad += payload_open_raw(&s->p, &s->keys[s->shard[i]], s->shard[i],
                                    s->siv + i * s->siv_bytes,
                                    s->plain_buf + i * s->plain) != MESS_OK;
    return bad + (sum == 1); /* keeps the peeks from being optimised away */
}

static size_t rfc_open_all(struct sim *s)
{
    size_t i, bad = 0;
    for (i = 0; i < s->n; i++) {
        const uint8_t *e = s->rfc + i * s->rfc_bytes;
        uint8_t ad[12];
        make_ad(s->shard[i], ad);
        bad += crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                   s->plain_buf + i * s->plain, NULL, e + RFC_NONCE, s->plain,
                   e + RFC_NONCE + s->plain, ad, sizeof ad, e,
                   s->keys[s->shard[i]].enc) != 0;
    }
    return bad;
}

/* RFC 8439 verification alone: the one-time Poly1305 key is keystream
 * block 0; the MAC covers AD | pad | ct | pad | lengths. */
static int rfc_verify(const struct sim *s, size_t i)
{
    static const uint8_t zero[16] = {0};
    const uint8_t *e = s->rfc + i * s->rfc_bytes;
    uint8_t ad[12], key[32], len[16], tag[16];
    crypto_onetimeauth_poly1305_state st;
    int rc;
    make_ad(s->shard[i], ad);
    crypto_stream_chacha20_ietf(key, sizeof key, e, s->keys[s->shard[i]].enc);
    crypto_onetimeauth_poly1305_init(&st, key);
    crypto_onetimeauth_poly1305_update(&st, ad, sizeof ad);
    crypto_onetimeauth_poly1305_update(&st, zero, (16 - sizeof ad % 16) % 16);
    crypto_onetimeauth_poly1305_update(&st, e + RFC_NONCE, s->plain);
    crypto_onetimeauth_poly1305_update(&st, zero, (16 - s->plain % 16) % 16);
    mess_store_u64(len, sizeof ad);
    mess_store_u64(len + 8, s->plain);
    crypto_onetimeauth_poly1305_update(&st, len, sizeof len);
    crypto_onetimeauth_poly1305_final(&st, tag);
    rc = crypto_verify_16(tag, e + RFC_NONCE + s->plain);
    sodium_memzero(key, sizeof key);
    return rc;
}

static size_t rfc_verify_open(struct sim *s)
{
    size_t i, bad = 0;
    for (i = 0; i < s->n; i++) {
        const uint8_t *e = s->rfc + i * s->rfc_bytes;
        if (rfc_verify(s, i) != 0) {
            bad++;
            continue;
        }
        /* the id (8 bytes from block 1) to dedupe; the rest for one copy */
        crypto_stream_chacha20_ietf_xor_ic(s->plain_buf + i * s->plain, e + RFC_NONCE,
                                           s->first[i] ? s->plain : 8, e, 1,
                                           s->keys[s->shard[i]].enc);
    }
    return bad;
}

static const char help[] =
    "usage: mess bench payload [--entries N] [--unique U] [--dim D] [--repeat R]\n"
    "\n"
    "CPU time to open one response of N entries (f32 payloads of D dims) of U\n"
    "distinct items, for the synthetic-IV entries libmess uses (every entry,\n"
    "or one copy per item after peeking the ids: the default) and for\n"
    "libsodium's ChaCha20-Poly1305 with a stored nonce (every entry, or every\n"
    "tag verified and one copy per item decrypted), as ratios to the default.\n"
    "\n"
    "  --entries N   entries per response (1500, the pool B)\n"
    "  --unique U    distinct items among them (618, as measured at B = 1500)\n"
    "  --dim D       vector dimension (128)\n"
    "  --repeat R    responses timed per variant, best of 3 rounds (200)\n"
    "\n"
    "Last line: one JSON object with ms per response and bytes per entry.\n";

int bench_payload(int argc, char **argv)
{
    static const char *const names[] = {"siv-peek+open", "siv-open-all", "rfc-open-all",
                                        "rfc-verify+open"};
    static const char *const keys[] = {"siv_peek_open", "siv_open_all", "rfc_open_all",
                                       "rfc_verify_open"};
    size_t (*const fns[])(struct sim *) = {siv_peek_open, siv_open_all, rfc_open_all,
                                           rfc_verify_open};
    struct cli_args a;
    long n, unique, dim, repeat;
    double best[4];
    struct sim s;
    size_t v, r, round, bad = 0;
    int rc;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(help, stdout);
        return CLI_OK;
    }
    if (cli_opt_long(&a, "--entries", 1, 1L << 20, 1500, &n) ||
        cli_opt_long(&a, "--unique", 1, 1L << 20, 618, &unique) ||
        cli_opt_long(&a, "--dim", 1, 65536, 128, &dim) ||
        cli_opt_long(&a, "--repeat", 1, 100000, 200, &repeat) || cli_check_unused(&a))
        return CLI_USAGE;
    if (unique > n) {
        cli_error("--unique %ld is more than --entries %ld", unique, n);
        return CLI_USAGE;
    }
    if (sodium_init() < 0)
        return cli_fail("bench payload", NULL, MESS_ECRYPTO);
    memset(&s, 0, sizeof s);
    rc = sim_build(&s, (size_t)n, (size_t)unique, (uint32_t)dim);
    if (rc != MESS_OK) {
        sim_free(&s);
        return cli_fail("bench payload", NULL, rc);
    }
    for (v = 0; v < 4; v++)
        best[v] = 1e30;
    /* rounds interleave the variants so drift of a shared machine hits all */
    for (round = 0; round < 3; round++)
        for (v = 0; v < 4; v++) {
            double t0 = cli_cpu_s(), t;
            for (r = 0; r < (size_t)repeat; r++)
                bad += fns[v](&s);
            t = (cli_cpu_s() - t0) / (double)repeat;
            if (t < best[v])
                best[v] = t;
        }
    printf("mess bench payload: %ld entries of %ld distinct items, f32 dim %ld; "
           "entry %zu bytes (SIV) vs %zu (stored nonce + tag)\n",
           n, unique, dim, s.siv_bytes, s.rfc_bytes);
    for (v = 0; v < 4; v++)
        printf("  %-16s %8.3f ms/response  %5.2fx\n", names[v], 1e3 * best[v],
               best[v] / best[0]);
    if (bad) {
        cli_error("%zu entries failed to open (a bug)", bad);
        sim_free(&s);
        return CLI_FAIL;
    }
    printf("{\"bench\":\"payload\",\"entries\":%ld,\"unique\":%ld,\"dim\":%ld,"
           "\"siv_entry_bytes\":%zu,\"rfc_entry_bytes\":%zu",
           n, unique, dim, s.siv_bytes, s.rfc_bytes);
    for (v = 0; v < 4; v++)
        printf(",\"%s_ms\":%.4f", keys[v], 1e3 * best[v]);
    printf("}\n");
    sim_free(&s);
    return CLI_OK;
}
