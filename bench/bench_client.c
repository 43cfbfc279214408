/*
 * bench_client.c - `mess bench client`: the client's per-query steps, each
 * timed on its own and set beside its floor (docs/PERFORMANCE.md).
 *
 * Encode (a client trained on the set's learn vectors; the set's queries):
 *   hash      isohash_hash_all: the query's code in every shard
 *   prr+irr   lshrr_query_report: both randomized responses
 *   request   the rest of mess_client_request (buffers, pool split, wire)
 * Finish (one simulated response of B entries of U distinct items, f32
 * payloads of the set's dimension; U as bench protocol measures it):
 *   peek      the claimed id of every entry
 *   keystream ChaCha20 of each opened vector
 *   poly1305  the hash of AD | plaintext of each opened entry
 *   siv       the HChaCha20 PRF of that hash, compared with the entry's
 *   open      the three together as the finish runs them
 *   rerank    decode and exact distance of each opened vector (batched:
 *             metric_distance_many over PAYLOAD_BATCH of them)
 *   top-k     the best k = 10 of U (heap, then sort)
 * for the per-entry libsodium calls ("entry"), the batched path without
 * the SIMD cores ("no-simd": the portable lane core and libsodium's
 * Poly1305, client_finish_set_simd(0)) and with them ("batch":
 * chacha_lanes.c's AVX-512 core, poly1305_lanes.c), in one run; the hash
 * with isohash.c's portable and the CPU's projection loop.  Floors from rates measured in
 * the same run: a ChaCha20 block at the best long-stream rate (libsodium's
 * multi-block path or the lane core on full lanes), Poly1305 bytes at
 * the better of libsodium's long-message rate and the lanes' on 16 long
 * messages, the projections' bytes at the read rate
 * of a buffer of their size, a distance at its best rate (one at a time or
 * four interleaved) on vectors in cache.
 */
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chacha_lanes.h"
#include "isohash.h"
#include "lshrr.h"
#include "metric.h"
#include "poly1305_lanes.h"
#include "client.h"
#include "simd.h"
#include "bench.h"

#define TOPK 10

struct resp {
    mess_params p;
    size_t n, unique, plain, eb, vblocks;
    struct payload_keys *keys;      /* per shard */
    const struct payload_keys **kp; /* per entry */
    uint64_t *ctx, *ids;
    const uint8_t **ep;
    size_t *open;     /* the U entries opened (first copy of each item) */
    uint8_t *entries; /* n x eb */
    uint8_t *pl;      /* U x plain */
    uint8_t *h;       /* U x 16: Poly1305 outputs */
    float *q, *x;     /* the query; PAYLOAD_BATCH decoded vectors */
    float *dist;
    int *ok;
};

static void resp_free(struct resp *s)
{
    free(s->keys);
    free(s->kp);
    free(s->ctx);
    free(s->ids);
    free(s->ep);
    free(s->open);
    free(s->entries);
    free(s->pl);
    free(s->h);
    free(s->q);
    free(s->x);
    free(s->dist);
    free(s->ok);
}

static int resp_build(struct resp *s, size_t n, size_t unique, uint32_t dim,
                      uint32_t shards, uint32_t payload)
{
    size_t i, j;
    float *v;
    uint8_t *scratch;
    mess_params_default(&s->p, dim);
    s->p.shards = shards;
    s->p.payload = payload;
    s->n = n;
    s->unique = unique;
    s->plain = payload_plain_bytes(&s->p);
    s->eb = payload_entry_bytes(&s->p);
    s->vblocks = (s->plain - 8 + 63) / 64;
    s->keys = (struct payload_keys *)calloc(s->p.shards, sizeof *s->keys);
    s->kp = (const struct payload_keys **)calloc(n, sizeof *s->kp);
    s->ctx = (uint64_t *)calloc(n, sizeof *s->ctx);
    s->ids = (uint64_t *)calloc(n, sizeof *s->ids);
    s->ep = (const uint8_t **)calloc(n, sizeof *s->ep);
    s->open = (size_t *)calloc(unique, sizeof *s->open);
    s->entries = (uint8_t *)malloc(n * s->eb);
    s->pl = (uint8_t *)malloc(unique * s->plain);
    s->h = (uint8_t *)malloc(unique * 16);
    s->q = (float *)calloc(dim, sizeof *s->q);
    s->x = (float *)calloc((size_t)PAYLOAD_BATCH * dim, sizeof *s->x);
    s->dist = (float *)calloc(unique, sizeof *s->dist);
    s->ok = (int *)calloc(n, sizeof *s->ok);
    v = (float *)malloc(dim * sizeof *v);
    scratch = (uint8_t *)malloc(s->plain);
    if (!s->keys || !s->kp || !s->ctx || !s->ids || !s->ep || !s->open || !s->entries ||
        !s->pl || !s->h || !s->q || !s->x || !s->dist || !s->ok || !v || !scratch) {
        free(v);
        free(scratch);
        return MESS_ENOMEM;
    }
    randombytes_buf(s->keys, s->p.shards * sizeof *s->keys);
    for (j = 0; j < dim; j++)
        s->q[j] = (float)((j * 29) % 200);
    /* the first copy of each item first, as the dedupe finds it; copies of
     * an item in distinct shards */
    for (i = 0; i < n; i++) {
        size_t item = i < unique ? i : (i * 2654435761u) % unique;
        uint32_t shard = (uint32_t)((item + (i / unique) * 7) % s->p.shards);
        for (j = 0; j < dim; j++)
            v[j] = (float)((item * 31 + j * 17) % 256);
        s->kp[i] = &s->keys[shard];
        s->ctx[i] = payload_ctx(shard, 0);
        s->ep[i] = s->entries + i * s->eb;
        payload_seal(&s->p, s->kp[i], s->ctx[i], (uint64_t)item, v, scratch,
                     s->entries + i * s->eb);
        if (i < unique)
            s->open[i] = i;
    }
    sodium_memzero(scratch, s->plain);
    free(scratch);
    free(v);
    return MESS_OK;
}

/* ---- the steps, per response; each returns a value that depends on its
 * work (so none is optimised away) and counts failures in *bad ---------- */

static uint64_t step_peek_entry(struct resp *s, size_t *bad)
{
    uint64_t sum = 0;
    size_t i;
    (void)bad;
    for (i = 0; i < s->n; i++)
        sum += s->ids[i] = payload_peek_id(s->kp[i], s->ep[i]);
    return sum;
}

static uint64_t step_peek_batch(struct resp *s, size_t *bad)
{
    (void)bad;
    payload_peek_ids(s->n, s->kp, s->ep, s->ids);
    return s->ids[s->n - 1];
}

static uint64_t step_keystream_entry(struct resp *s, size_t *bad)
{
    size_t u;
    (void)bad;
    for (u = 0; u < s->unique; u++) {
        const uint8_t *e = s->ep[s->open[u]];
        mess_store_u64(s->pl + u * s->plain, s->ids[s->open[u]]);
        crypto_stream_chacha20_ietf_xor_ic(s->pl + u * s->plain + 8, e + PAYLOAD_SIV_BYTES + 8,
                                           s->plain - 8, e,
                                           (mess_load_u32(e + 12) & 0x3fffffffu) + 1,
                                           s->kp[s->open[u]]->enc);
    }
    return s->pl[s->plain + 9];
}

static uint64_t step_keystream_batch(struct resp *s, size_t *bad)
{
    const struct payload_keys *k[PAYLOAD_BATCH];
    const uint8_t *e[PAYLOAD_BATCH];
    size_t u, m, l;
    (void)bad;
    for (u = 0; u < s->unique; u += m) {
        m = s->unique - u < PAYLOAD_BATCH ? s->unique - u : PAYLOAD_BATCH;
        for (l = 0; l < m; l++) {
            mess_store_u64(s->pl + (u + l) * s->plain, s->ids[s->open[u + l]]);
            k[l] = s->kp[s->open[u + l]];
            e[l] = s->ep[s->open[u + l]];
        }
        payload_vector_xor_many(&s->p, m, k, e, s->pl + u * s->plain);
    }
    return s->pl[s->plain + 9];
}

static uint64_t step_poly(struct resp *s, size_t *bad)
{
    size_t u;
    (void)bad;
    for (u = 0; u < s->unique; u++) {
        crypto_onetimeauth_state st;
        uint8_t ad[PAYLOAD_AD_BYTES];
        memcpy(ad, "MESSpay4", 8);
        mess_store_u64(ad + 8, s->ctx[s->open[u]]);
        crypto_onetimeauth_init(&st, s->kp[s->open[u]]->mac);
        crypto_onetimeauth_update(&st, ad, sizeof ad);
        crypto_onetimeauth_update(&st, s->pl + u * s->plain, s->plain);
        crypto_onetimeauth_final(&st, s->h + 16 * u);
    }
    return s->h[16 * s->unique - 1];
}

/* As the finish runs it: PAYLOAD_BATCH messages per poly1305_many call. */
static uint64_t step_poly_batch(struct resp *s, size_t *bad)
{
    const uint8_t *key[PAYLOAD_BATCH], *head[PAYLOAD_BATCH], *msg[PAYLOAD_BATCH];
    uint8_t ad[PAYLOAD_BATCH][PAYLOAD_AD_BYTES];
    size_t u, m, l;
    (void)bad;
    for (u = 0; u < s->unique; u += m) {
        m = s->unique - u < PAYLOAD_BATCH ? s->unique - u : PAYLOAD_BATCH;
        for (l = 0; l < m; l++) {
            memcpy(ad[l], "MESSpay4", 8);
            mess_store_u64(ad[l] + 8, s->ctx[s->open[u + l]]);
            key[l] = s->kp[s->open[u + l]]->mac;
            head[l] = ad[l];
            msg[l] = s->pl + (u + l) * s->plain;
        }
        poly1305_many(m, key, head, PAYLOAD_AD_BYTES, msg, s->plain,
                      (uint8_t(*)[16])(s->h + 16 * u));
    }
    return s->h[16 * s->unique - 1];
}

static uint64_t step_siv_entry(struct resp *s, size_t *bad)
{
    size_t u;
    for (u = 0; u < s->unique; u++) {
        uint8_t out[32];
        crypto_core_hchacha20(out, s->h + 16 * u, s->kp[s->open[u]]->prf, NULL);
        *bad += crypto_verify_16(out, s->ep[s->open[u]]) == 0;
    }
    return 0;
}

static uint64_t step_siv_batch(struct resp *s, size_t *bad)
{
    const uint8_t *prf[PAYLOAD_BATCH];
    uint8_t out[PAYLOAD_BATCH][32];
    size_t u, m, l;
    for (u = 0; u < s->unique; u += m) {
        m = s->unique - u < PAYLOAD_BATCH ? s->unique - u : PAYLOAD_BATCH;
        for (l = 0; l < m; l++)
            prf[l] = s->kp[s->open[u + l]]->prf;
        chacha_hchacha_many(m, prf, (const uint8_t(*)[16])(s->h + 16 * u), out);
        for (l = 0; l < m; l++)
            *bad += crypto_verify_16(out[l], s->ep[s->open[u + l]]) == 0;
    }
    return 0;
}

/* (the simulated hashes are of garbage plaintexts until the keystream
 * step ran, so siv counts matches, not failures: see the caller) */

static uint64_t step_open_entry(struct resp *s, size_t *bad)
{
    size_t u;
    for (u = 0; u < s->unique; u++) {
        size_t i = s->open[u];
        *bad += payload_open_peeked(&s->p, s->kp[i], s->ctx[i], s->ep[i], s->ids[i],
                                    s->pl + u * s->plain) != MESS_OK;
    }
    return s->pl[9];
}

static uint64_t step_open_batch(struct resp *s, size_t *bad)
{
    const struct payload_keys *k[PAYLOAD_BATCH];
    const uint8_t *e[PAYLOAD_BATCH];
    uint64_t ctx[PAYLOAD_BATCH], id[PAYLOAD_BATCH];
    int ok[PAYLOAD_BATCH];
    size_t u, m, l;
    for (u = 0; u < s->unique; u += m) {
        m = s->unique - u < PAYLOAD_BATCH ? s->unique - u : PAYLOAD_BATCH;
        for (l = 0; l < m; l++) {
            size_t i = s->open[u + l];
            k[l] = s->kp[i];
            e[l] = s->ep[i];
            ctx[l] = s->ctx[i];
            id[l] = s->ids[i];
        }
        payload_open_peeked_many(&s->p, m, k, ctx, e, id, s->pl + u * s->plain, ok);
        for (l = 0; l < m; l++)
            *bad += !ok[l];
    }
    return s->pl[9];
}

static uint64_t step_rerank_entry(struct resp *s, size_t *bad)
{
    size_t u;
    (void)bad;
    for (u = 0; u < s->unique; u++) {
        payload_decode_vector(&s->p, s->pl + u * s->plain + 8, s->x);
        s->dist[u] = (float)metric_distance(s->p.metric, s->q, s->x, s->p.dim);
    }
    return (uint64_t)s->dist[0];
}

/* As the finish runs it: PAYLOAD_BATCH plaintexts decoded, then their
 * distances together. */
static uint64_t step_rerank_batch(struct resp *s, size_t *bad)
{
    double d[PAYLOAD_BATCH];
    size_t u, m, l;
    for (u = 0; u < s->unique; u += m) {
        m = s->unique - u < PAYLOAD_BATCH ? s->unique - u : PAYLOAD_BATCH;
        for (l = 0; l < m; l++)
            payload_decode_vector(&s->p, s->pl + (u + l) * s->plain + 8,
                                  s->x + l * s->p.dim);
        metric_distance_many(s->p.metric, s->q, s->x, m, s->p.dim, d);
        for (l = 0; l < m; l++) {
            *bad += (float)d[l] != s->dist[u + l]; /* the same bits as per entry */
            s->dist[u + l] = (float)d[l];
        }
    }
    return (uint64_t)s->dist[0];
}

static int fcmp(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static uint64_t step_topk(struct resp *s, size_t *bad)
{
    float h[TOPK];
    size_t n = 0, u, i, c;
    (void)bad;
    for (u = 0; u < s->unique; u++) {
        float v = s->dist[u];
        if (n < TOPK) {
            for (i = n++; i > 0 && h[(i - 1) / 2] < v; i = (i - 1) / 2)
                h[i] = h[(i - 1) / 2];
            h[i] = v;
            continue;
        }
        if (!(v < h[0]))
            continue;
        for (i = 0; (c = 2 * i + 1) < n; i = c) {
            if (c + 1 < n && h[c] < h[c + 1])
                c++;
            if (!(v < h[c]))
                break;
            h[i] = h[c];
        }
        h[i] = v;
    }
    qsort(h, n, sizeof *h, fcmp);
    return (uint64_t)h[0];
}

typedef uint64_t (*step_fn)(struct resp *, size_t *);

/* Best of 3 rounds of `repeat` calls, ms per call. */
static double time_step(step_fn f, struct resp *s, size_t repeat, size_t *bad,
                        volatile uint64_t *sink)
{
    double best = 1e30;
    size_t round, r;
    for (round = 0; round < 3; round++) {
        double t0 = cli_cpu_s(), t;
        for (r = 0; r < repeat; r++)
            *sink += f(s, bad);
        t = (cli_cpu_s() - t0) / (double)repeat;
        if (t < best)
            best = t;
    }
    return 1e3 * best;
}

/* ---- rates for the floors ------------------------------------------------ */

struct rates {
    double block_sodium, block_lanes, block_rounds, block; /* ns per ChaCha20 block */
    double poly_sodium, poly_lanes, poly_byte; /* ns per Poly1305 byte */
    double read_byte;                        /* ns per byte read, projections' size */
    double dist;                             /* ns per exact distance in cache */
};

static void measure_rates(struct rates *rt, size_t proj_bytes, const mess_params *p,
                          volatile uint64_t *sink)
{
    enum { LONG = 1 << 18, JOBS = 64 };
    uint8_t *buf = (uint8_t *)calloc(LONG, 1), key[32] = {1}, nonce[12] = {2}, tag[16];
    uint64_t *proj = (uint64_t *)calloc(proj_bytes / 8 + 1, 8);
    float *vec = (float *)calloc((size_t)p->dim * 64, sizeof(float));
    struct chacha_job job[JOBS];
    static const uint8_t *hk[LONG / 64];
    size_t round, r, i;
    memset(rt, 0, sizeof *rt);
    rt->block_sodium = rt->block_lanes = rt->block_rounds = rt->poly_byte = rt->read_byte = rt->dist = 1e30;
    rt->poly_sodium = rt->poly_lanes = 1e30;
    if (!buf || !proj || !vec) {
        free(buf);
        free(proj);
        free(vec);
        return;
    }
    for (i = 0; i < JOBS; i++) {
        job[i].key = key;
        job[i].nonce = nonce;
        job[i].ctr = (uint32_t)(i * (LONG / JOBS / 64));
        job[i].src = job[i].dst = buf + i * (LONG / JOBS);
        job[i].len = LONG / JOBS;
    }
    for (i = 0; i < (size_t)p->dim * 64; i++)
        vec[i] = (float)(i % 97);
    for (i = 0; i < LONG / 64; i++)
        hk[i] = key;
    memset(proj, 1, proj_bytes); /* real pages, not the shared zero page */
    for (round = 0; round < 3; round++) {
        double t0 = cli_cpu_s(), t;
        for (r = 0; r < 20; r++)
            crypto_stream_chacha20_ietf_xor_ic(buf, buf, LONG, nonce, 1, key);
        t = (cli_cpu_s() - t0) / 20 / (LONG / 64) * 1e9;
        rt->block_sodium = t < rt->block_sodium ? t : rt->block_sodium;
        t0 = cli_cpu_s();
        for (r = 0; r < 20; r++)
            chacha_xor_many(JOBS, job);
        t = (cli_cpu_s() - t0) / 20 / (LONG / 64) * 1e9;
        rt->block_lanes = t < rt->block_lanes ? t : rt->block_lanes;
        t0 = cli_cpu_s();
        for (r = 0; r < 20; r++) /* the 20 rounds alone, full lanes */
            chacha_hchacha_many(LONG / 64, hk, (const uint8_t(*)[16])buf,
                                (uint8_t(*)[32])(buf + LONG / 4));
        t = (cli_cpu_s() - t0) / 20 / (LONG / 64) * 1e9;
        rt->block_rounds = t < rt->block_rounds ? t : rt->block_rounds;
        t0 = cli_cpu_s();
        for (r = 0; r < 20; r++)
            crypto_onetimeauth(tag, buf, LONG, key);
        t = (cli_cpu_s() - t0) / 20 / LONG * 1e9;
        rt->poly_sodium = t < rt->poly_sodium ? t : rt->poly_sodium;
        {
            /* 16 messages of LONG / 16 bytes in the lanes */
            const uint8_t *pk[16], *pm[16];
            uint8_t ptag[16][16];
            for (i = 0; i < 16; i++) {
                pk[i] = key;
                pm[i] = buf + i * (LONG / 16);
            }
            t0 = cli_cpu_s();
            for (r = 0; r < 20; r++)
                poly1305_many(16, pk, NULL, 0, pm, LONG / 16, ptag);
            t = (cli_cpu_s() - t0) / 20 / LONG * 1e9;
            rt->poly_lanes = t < rt->poly_lanes ? t : rt->poly_lanes;
            *sink += ptag[3][0];
        }
        *sink += tag[0];
        t0 = cli_cpu_s();
        for (r = 0; r < 50; r++) {
            uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0; /* 4 chains: loads bound */
            for (i = 0; i + 4 <= proj_bytes / 8; i += 4) {
                a0 += proj[i];
                a1 += proj[i + 1];
                a2 += proj[i + 2];
                a3 += proj[i + 3];
            }
            *sink += a0 + a1 + a2 + a3;
        }
        t = (cli_cpu_s() - t0) / 50 / (double)proj_bytes * 1e9;
        rt->read_byte = t < rt->read_byte ? t : rt->read_byte;
        t0 = cli_cpu_s();
        for (r = 0; r < 2000; r++)
            for (i = 0; i < 64; i++)
                *sink += (uint64_t)metric_distance(p->metric, vec, vec + i * p->dim, p->dim);
        t = (cli_cpu_s() - t0) / 2000 / 64 * 1e9;
        rt->dist = t < rt->dist ? t : rt->dist;
        t0 = cli_cpu_s();
        for (r = 0; r < 2000; r++) {
            double d[64];
            metric_distance_many(p->metric, vec, vec, 64, p->dim, d);
            *sink += (uint64_t)d[r % 64];
        }
        t = (cli_cpu_s() - t0) / 2000 / 64 * 1e9;
        rt->dist = t < rt->dist ? t : rt->dist;
    }
    rt->poly_byte = rt->poly_sodium < rt->poly_lanes ? rt->poly_sodium : rt->poly_lanes;
    rt->block = rt->block_sodium < rt->block_lanes ? rt->block_sodium : rt->block_lanes;
    if (rt->block_rounds < rt->block)
        rt->block = rt->block_rounds;
    free(buf);
    free(proj);
    free(vec);
}

/* ---- encode ---------------------------------------------------------------- */

struct enc_times {
    double total, hash, rr; /* ms per query */
    double total_old, hash_old; /* the same with the portable projection loop */
};

static int time_encode(mess_client *c, const float *qv, size_t nq, size_t pool,
                       struct enc_times *et)
{
    const mess_params *p = &c->p;
    size_t words = params_words(p), i, round;
    uint64_t *clean = (uint64_t *)calloc((size_t)p->shards * words, 8);
    uint64_t *report = (uint64_t *)calloc((size_t)p->shards * words, 8);
    int rc = clean && report ? MESS_OK : MESS_ENOMEM;
    int isa = isohash_project_isa(), old;
    et->total = et->hash = et->rr = et->total_old = et->hash_old = 1e30;
    for (round = 0; round < 3 && rc == MESS_OK; round++) {
        double t0, t;
        /* old = the portable projection loop (isohash.c), new = the CPU's */
        for (old = 1; old >= 0 && rc == MESS_OK; old--) {
            double *tot = old ? &et->total_old : &et->total;
            double *hsh = old ? &et->hash_old : &et->hash;
            isohash_project_force(old ? 0 : isa);
            t0 = cli_cpu_s();
            for (i = 0; i < nq && rc == MESS_OK; i++) {
                mess_query *q = NULL;
                uint8_t *req = NULL;
                size_t len;
                rc = mess_client_request(c, qv + i * p->dim, pool, &q, &req, &len);
                mess_buf_free(req);
                mess_query_free(q);
            }
            t = 1e3 * (cli_cpu_s() - t0) / (double)nq;
            *tot = t < *tot ? t : *tot;
            t0 = cli_cpu_s();
            for (i = 0; i < nq && rc == MESS_OK; i++)
                rc = isohash_hash_all(c->hash, qv + i * p->dim, clean);
            t = 1e3 * (cli_cpu_s() - t0) / (double)nq;
            *hsh = t < *hsh ? t : *hsh;
        }
        isohash_project_force(-1);
        t0 = cli_cpu_s();
        for (i = 0; i < nq && rc == MESS_OK; i++) {
            struct mess_rng rng;
            client_coins_init(c, &rng, i, COIN_QUERY, 0, 0);
            rc = lshrr_query_report(c->keys->memo, &rng, qv + i * p->dim, p->dim,
                                    p->shards, p->kappa, clean, p->p_prr, p->p_irr,
                                    report);
            mess_rng_wipe(&rng);
        }
        t = 1e3 * (cli_cpu_s() - t0) / (double)nq;
        et->rr = t < et->rr ? t : et->rr;
    }
    if (clean)
        sodium_memzero(clean, (size_t)p->shards * words * 8);
    free(clean);
    free(report);
    return rc;
}

static const char help[] =
    "usage: mess bench client [--data DIR] [--learn N] [--queries N] [--pool B]\n"
    "                         [--unique U] [--repeat R] [--shards M] [--payload E]\n"
    "\n"
    "The client's per-query steps, each timed alone (CPU, best of 3 rounds)\n"
    "beside its floor from rates measured in the same run: encode (hash,\n"
    "PRR+IRR, request) on a client trained on DIR's learn vectors and DIR's\n"
    "queries; finish (peek, keystream, Poly1305, SIV, open, rerank, top-k) on\n"
    "one simulated response of B entries of U distinct items, for the\n"
    "per-entry libsodium calls, the batched path without the SIMD cores\n"
    "(portable lane core, libsodium's Poly1305) and the batched path with\n"
    "them (AVX-512 ChaCha20 lanes, Poly1305 lanes); encode with the portable\n"
    "and the CPU's projection loop.\n"
    "\n"
    "  --data DIR    learn and query vectors (datasets/sift)\n"
    "  --learn N     training rows used, the first N (2000; hashing costs\n"
    "                the same whatever the training)\n"
    "  --queries N   queries encoded per round (200)\n"
    "  --pool B      entries per response (1500)\n"
    "  --unique U    distinct items among them (616: bundled set at B = 1500;\n"
    "                the large set has 1065)\n"
    "  --repeat R    responses per timed round (200)\n"
    "  --shards M    graphs (64): the encode's M; the simulated response's\n"
    "                entries spread over its shards the same way\n"
    "  --payload E   the response's encoding, f32|f16|i8|u8 (f32); with f16\n"
    "                the batched rerank is also timed with the portable half\n"
    "                conversion, the CPU's other cores on (rerank_f16_portable)\n"
    "\n"
    "Last line: one JSON object (ms per query; floors in ms; rates in ns).\n";

int bench_client(int argc, char **argv)
{
    static const char *const fin_names[] = {"peek", "keystream", "poly1305", "siv",
                                            "open", "rerank", "top-k"};
    static const char *const pay_names[] = {"f32", "f16", "i8", "u8"};
    struct cli_args a;
    const char *dir, *pname;
    uint32_t payload;
    double rerank_f16_portable = 0;
    long nlearn, nq, pool, unique, repeat, shards;
    float *learn = NULL, *query = NULL;
    size_t nl = 0, nqa = 0, dim = 0, d2 = 0, bad = 0, junk = 0, i;
    mess_params p;
    mess_client *c = NULL;
    struct resp s;
    struct rates rt;
    struct enc_times et;
    volatile uint64_t sink = 0;
    double ent[7], fbk[7], bat[7], floor_[7], proj_bytes, enc_floor_hash, enc_floor_rr;
    int rc;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(help, stdout);
        return CLI_OK;
    }
    dir = cli_opt(&a, "--data");
    if (cli_opt_long(&a, "--learn", 64, 100000000, 2000, &nlearn) ||
        cli_opt_long(&a, "--queries", 1, 100000000, 200, &nq) ||
        cli_opt_long(&a, "--pool", 1, 1L << 20, 1500, &pool) ||
        cli_opt_long(&a, "--unique", 1, 1L << 20, 616, &unique) ||
        cli_opt_long(&a, "--repeat", 1, 100000, 200, &repeat) ||
        cli_opt_long(&a, "--shards", 1, MESS_MAX_SHARDS, 64, &shards))
        return CLI_USAGE;
    pname = cli_opt(&a, "--payload");
    for (payload = 0; pname && payload < 4 && strcmp(pname, pay_names[payload]) != 0; payload++)
        ;
    if (payload == 4) {
        cli_error("--payload: unknown value '%s' (accepted: f32, f16, i8, u8)", pname);
        return CLI_USAGE;
    }
    if (!pname)
        payload = MESS_PAYLOAD_F32;
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (unique > pool) {
        cli_error("--unique %ld is more than --pool %ld", unique, pool);
        return CLI_USAGE;
    }
    if (!dir)
        dir = "datasets/sift";
    if (sodium_init() < 0)
        return cli_fail("bench client", NULL, MESS_ECRYPTO);
    if (cli_read_set(dir, "learn", &learn, &nl, &dim) != MESS_OK ||
        cli_read_set(dir, "query", &query, &nqa, &d2) != MESS_OK) {
        mess_vecs_free(learn);
        mess_vecs_free(query);
        return CLI_FAIL;
    }
    if (d2 != dim) {
        cli_error("'%s': learn and query dimensions differ", dir);
        mess_vecs_free(learn);
        mess_vecs_free(query);
        return CLI_FAIL;
    }
    if ((size_t)nlearn < nl)
        nl = (size_t)nlearn;
    if ((size_t)nq > nqa)
        nq = (long)nqa;
    mess_params_default(&p, (uint32_t)dim);
    p.shards = (uint32_t)shards;
    if (p.per_item > p.shards)
        p.per_item = p.shards;
    rc = mess_client_new(&p, learn, nl, NULL, 2, &c);
    mess_vecs_free(learn);
    if (rc == MESS_OK)
        rc = time_encode(c, query, (size_t)nq, (size_t)pool, &et);
    mess_vecs_free(query);
    if (rc != MESS_OK) {
        mess_client_free(c);
        return cli_fail("bench client", NULL, rc);
    }
    memset(&s, 0, sizeof s);
    rc = resp_build(&s, (size_t)pool, (size_t)unique, (uint32_t)dim, p.shards, payload);
    proj_bytes = (double)p.shards * p.kappa * p.dim * sizeof(float);
    if (rc == MESS_OK)
        measure_rates(&rt, (size_t)proj_bytes, &p, &sink);
    if (rc != MESS_OK) {
        resp_free(&s);
        mess_client_free(c);
        return cli_fail("bench client", NULL, rc);
    }
    /* steps in finish order, so each finds the state its predecessors
     * leave (ids peeked, plaintexts decrypted, hashes computed); the
     * batched steps twice: without the SIMD cores (the portable lane core
     * and libsodium's Poly1305, client_finish_set_simd(0)), then with the
     * CPU's */
    {
        size_t match_e = 0, match_f = 0, match_b = 0;
        ent[0] = time_step(step_peek_entry, &s, (size_t)repeat, &junk, &sink);
        ent[1] = time_step(step_keystream_entry, &s, (size_t)repeat, &junk, &sink);
        ent[2] = time_step(step_poly, &s, (size_t)repeat, &junk, &sink);
        ent[3] = time_step(step_siv_entry, &s, (size_t)repeat, &match_e, &sink);
        ent[4] = time_step(step_open_entry, &s, (size_t)repeat, &bad, &sink);
        ent[5] = time_step(step_rerank_entry, &s, (size_t)repeat, &junk, &sink);
        ent[6] = time_step(step_topk, &s, (size_t)repeat, &junk, &sink);
        for (i = 0; i < 2; i++) {
            double *t = i ? bat : fbk;
            client_finish_set_simd((int)i);
            t[0] = time_step(step_peek_batch, &s, (size_t)repeat, &junk, &sink);
            t[1] = time_step(step_keystream_batch, &s, (size_t)repeat, &junk, &sink);
            t[2] = time_step(step_poly_batch, &s, (size_t)repeat, &junk, &sink);
            t[3] = time_step(step_siv_batch, &s, (size_t)repeat, i ? &match_b : &match_f, &sink);
            t[4] = time_step(step_open_batch, &s, (size_t)repeat, &bad, &sink);
            t[5] = time_step(step_rerank_batch, &s, (size_t)repeat, &bad, &sink);
            t[6] = ent[6];
        }
        client_finish_set_simd(1);
        /* f16: the rerank with the portable half conversion, every other
         * core the CPU's (issue 31: F16C against the scalar loop) */
        if (payload == MESS_PAYLOAD_F16) {
            simd_force(SIMD_F16, 0);
            rerank_f16_portable = time_step(step_rerank_batch, &s, (size_t)repeat, &bad, &sink);
            simd_force(SIMD_F16, -1);
        }
        /* every SIV must match, the same number of times each way */
        if (match_e != match_b || match_e != match_f || match_e != 3 * (size_t)repeat * s.unique)
            bad++;
    }
    floor_[0] = 1e-6 * (double)s.n * rt.block;
    floor_[1] = 1e-6 * (double)(s.unique * s.vblocks) * rt.block;
    floor_[2] = 1e-6 * (double)(s.unique * (PAYLOAD_AD_BYTES + s.plain)) * rt.poly_byte;
    floor_[3] = 1e-6 * (double)s.unique * rt.block;
    floor_[4] = floor_[1] + floor_[2] + floor_[3];
    floor_[5] = 1e-6 * (double)s.unique * rt.dist;
    floor_[6] = 0; /* below the timer's resolution at this size: no ratio */
    enc_floor_hash = 1e-6 * proj_bytes * rt.read_byte;
    /* entropy of 2 M kappa coins of probability p: keystream at the block rate */
    {
        double pp = p.p_prr, pi = p.p_irr;
        double hbits = -(pp * log2(pp) + (1 - pp) * log2(1 - pp)) -
                       (pi * log2(pi) + (1 - pi) * log2(1 - pi));
        enc_floor_rr = 1e-6 * ceil((double)p.shards * p.kappa * hbits / 512.0) * rt.block;
    }

    printf("mess bench client: %s, dim %zu, M %u, kappa %u; encode over %ld queries; "
           "finish: B = %ld entries of U = %ld items, %s (%zu-byte entries, %zu "
           "keystream blocks per vector); lane core ISA %d, Poly1305 lanes ISA %d, "
           "projection ISA %d, F16C %d\n",
           dir, dim, p.shards, p.kappa, nq, pool, unique, pay_names[payload], s.eb, s.vblocks,
           chacha_lanes_isa(), poly1305_lanes_isa(), isohash_project_isa(),
           simd_level(SIMD_F16));
    printf("rates: ChaCha20 block %.1f ns (libsodium long stream) / %.1f ns (lane core, "
           "full lanes) / %.1f ns (lane core, rounds alone); Poly1305 %.3f ns/byte (libsodium, "
           "long message) / %.3f ns/byte (lanes, 16 long messages); read %.3f ns/byte "
           "(%.0f-byte buffer); distance %.1f ns\n",
           rt.block_sodium, rt.block_lanes, rt.block_rounds, rt.poly_sodium, rt.poly_lanes,
           rt.read_byte,
           proj_bytes, rt.dist);
    printf("%-10s %10s %10s %10s %10s %8s %8s\n", "step", "entry ms", "no-simd ms",
           "batch ms", "floor ms", "entry/fl", "batch/fl");
    printf("%-10s %10s %10.4f %10.4f %10.4f %8s %8.1f\n", "hash", "", et.hash_old, et.hash,
           enc_floor_hash, "", et.hash / enc_floor_hash);
    printf("%-10s %10s %10.4f %10.4f %10.4f %8s %8.1f\n", "prr+irr", "", et.rr, et.rr,
           enc_floor_rr, "", et.rr / enc_floor_rr);
    printf("%-10s %10s %10.4f %10.4f %10s\n", "request", "", et.total_old - et.hash_old - et.rr,
           et.total - et.hash - et.rr, "-");
    printf("%-10s %10s %10.4f %10.4f\n", "encode", "", et.total_old, et.total);
    for (i = 0; i < 7; i++) {
        if (floor_[i] > 0)
            printf("%-10s %10.4f %10.4f %10.4f %10.4f %8.1f %8.1f\n", fin_names[i], ent[i],
                   fbk[i], bat[i], floor_[i], ent[i] / floor_[i], bat[i] / floor_[i]);
        else
            printf("%-10s %10.4f %10.4f %10.4f %10s\n", fin_names[i], ent[i], fbk[i], bat[i],
                   "-");
    }
    {
        double fe = ent[0] + ent[4] + ent[5] + ent[6], fb = bat[0] + bat[4] + bat[5] + bat[6];
        double ff = floor_[0] + floor_[4] + floor_[5];
        double fn = fbk[0] + fbk[4] + fbk[5] + fbk[6];
        printf("%-10s %10.4f %10.4f %10.4f %10.4f %8.1f %8.1f   (peek + open + rerank + top-k)\n",
               "finish", fe, fn, fb, ff, fe / ff, fb / ff);
        if (payload == MESS_PAYLOAD_F16)
            printf("rerank with the portable half conversion %.4f ms (F16C %.4f: %.2fx); "
                   "finish %.4f ms with it\n", rerank_f16_portable, bat[5],
                   bat[5] > 0 ? rerank_f16_portable / bat[5] : 0.0,
                   fb - bat[5] + rerank_f16_portable);
        printf("encode + finish: per entry %.4f, batched without SIMD %.4f, batched %.4f ms "
               "(floor %.4f; batched / no-SIMD %.2fx faster, / per entry %.2fx)\n",
               et.total_old + fe, et.total_old + fn, et.total + fb, enc_floor_hash + ff,
               (et.total_old + fn) / (et.total + fb), (et.total_old + fe) / (et.total + fb));
        if (bad) {
            cli_error("%zu entries failed to open or SIVs to match (a bug)", bad);
            resp_free(&s);
            mess_client_free(c);
            return CLI_FAIL;
        }
        printf("{\"bench\":\"client\",\"payload\":\"%s\",\"entry_bytes\":%zu,"
               "\"rerank_f16_portable_ms\":%.4f,", pay_names[payload], s.eb,
               rerank_f16_portable);
        printf("\"dim\":%zu,\"pool\":%ld,\"unique\":%ld,\"isa\":%d,"
               "\"block_ns_sodium\":%.2f,\"block_ns_lanes\":%.2f,\"block_ns_rounds\":%.2f,\"poly_ns_per_byte\":%.4f,"
               "\"poly_lanes_ns_per_byte\":%.4f,\"read_ns_per_byte\":%.4f,\"dist_ns\":%.2f,"
               "\"hash_ms\":%.4f,\"hash_portable_ms\":%.4f,\"rr_ms\":%.4f,\"encode_ms\":%.4f,"
               "\"encode_portable_ms\":%.4f,"
               "\"hash_floor_ms\":%.4f,\"rr_floor_ms\":%.5f",
               dim, pool, unique, chacha_lanes_isa(), rt.block_sodium, rt.block_lanes,
               rt.block_rounds,
               rt.poly_sodium, rt.poly_lanes, rt.read_byte, rt.dist, et.hash, et.hash_old, et.rr, et.total,
               et.total_old, enc_floor_hash,
               enc_floor_rr);
        for (i = 0; i < 7; i++)
            printf(",\"%s_entry_ms\":%.4f,\"%s_nosimd_ms\":%.4f,\"%s_batch_ms\":%.4f,"
                   "\"%s_floor_ms\":%.4f",
                   fin_names[i][0] == 't' ? "topk" : fin_names[i], ent[i],
                   fin_names[i][0] == 't' ? "topk" : fin_names[i], fbk[i],
                   fin_names[i][0] == 't' ? "topk" : fin_names[i], bat[i],
                   fin_names[i][0] == 't' ? "topk" : fin_names[i], floor_[i]);
        printf(",\"finish_entry_ms\":%.4f,\"finish_nosimd_ms\":%.4f,\"finish_batch_ms\":%.4f,"
               "\"finish_floor_ms\":%.4f}\n",
               fe, fn, fb, ff);
    }
    (void)sink;
    resp_free(&s);
    mess_client_free(c);
    return CLI_OK;
}
