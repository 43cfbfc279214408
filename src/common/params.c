/*
 * params.c - public parameters: defaults from the paper, validation, the
 * canonical encoding carried by every buffer and file, and its fingerprint.
 */
#include <math.h>
#include <sodium.h>

#include "params.h"

double mess_effective_flip(double a, double b)
{
    return a * (1.0 - b) + b * (1.0 - a);
}

/* Solves 2a(1-a) = p_q for a in [0, 1/2]: a = (1 - sqrt(1 - 2 p_q)) / 2. */
double mess_split_flip(double p_q)
{
    if (!(p_q >= 0.0))
        return 0.0;
    if (p_q >= 0.5)
        return 0.5;
    return (1.0 - sqrt(1.0 - 2.0 * p_q)) / 2.0;
}

/* The end of the last field this library knows ("Growable structs"). */
#define PARAMS_KNOWN MESS_FIELD_END(mess_params, train_sample)

static void params_defaults(mess_params *p, uint32_t dim)
{
    memset(p, 0, sizeof *p);
    p->size = (uint32_t)sizeof *p;
    p->dim = dim;
    p->metric = MESS_METRIC_L2;
    /* 128 bits at every dimension (below 128 dimensions the hash stacks
     * IsoHash blocks, isohash.h); the CLI and Python take it from here. */
    p->kappa = 128;
    p->shards = 64;
    p->per_item = 16;
    p->p_store = 0.08;
    p->p_prr = mess_split_flip(0.08);
    p->p_irr = p->p_prr;
    p->hnsw_m = 16;
    /* the paper's 300 is far more than the shard graphs need: 64, the
     * widest beam their searches run by default, gives the same recall at
     * every pool (docs/PERFORMANCE.md "Against plaintext") at a quarter
     * of the build */
    p->ef_construction = 64;
    p->ef_search = 0;
    p->payload = MESS_PAYLOAD_F32;
    p->train_sample = 0;
}

int mess_params_default_sized(mess_params *p, size_t size, uint32_t dim)
{
    mess_params d;
    params_defaults(&d, dim);
    return mess_struct_out(p, size, &d, PARAMS_KNOWN, MESS_PARAMS_MIN_SIZE);
}

int params_import(const mess_params *in, mess_params *out)
{
    mess_params d;
    int rc;
    if (!in || !out)
        return MESS_EINVAL;
    if (in->size < MESS_PARAMS_MIN_SIZE)
        return MESS_EINVAL;
    params_defaults(&d, in->dim);
    rc = mess_struct_in(&d, PARAMS_KNOWN, in, in->size, MESS_PARAMS_MIN_SIZE);
    if (rc == MESS_OK)
        *out = d;
    return rc;
}

int params_export(const mess_params *p, mess_params *out, size_t size)
{
    return mess_struct_out(out, size, p, PARAMS_KNOWN, MESS_PARAMS_MIN_SIZE);
}

/* docs/TEXT.md, "Decision": kappa 64, bounds lower than the paper's on
 * average over near pairs, higher for a minority of close pairs. */
#define DENSE_KAPPA 64
#define DENSE_FLIP 0.016
#define DENSE_EF_SEARCH 64

int mess_params_default_for_sized(mess_params *p, size_t size, uint32_t dim,
                                  uint32_t metric)
{
    mess_params d;
    params_defaults(&d, dim);
    d.metric = metric;
    if (metric == MESS_METRIC_IP || metric == MESS_METRIC_COSINE) {
        d.kappa = DENSE_KAPPA;
        d.p_store = DENSE_FLIP;
        d.p_prr = mess_split_flip(DENSE_FLIP);
        d.p_irr = d.p_prr;
        d.ef_search = DENSE_EF_SEARCH;
    }
    return mess_struct_out(p, size, &d, PARAMS_KNOWN, MESS_PARAMS_MIN_SIZE);
}

static int prob_ok(double x)
{
    return x >= 0.0 && x <= 0.5; /* also false for NaN */
}

int mess_params_check(const mess_params *in)
{
    mess_params q;
    const mess_params *p = &q;
    if (params_import(in, &q) != MESS_OK)
        return MESS_EINVAL;
    if (p->dim == 0 || p->kappa == 0 || p->kappa % 64 != 0 || p->shards == 0 ||
        p->per_item == 0 || p->per_item > p->shards || p->hnsw_m < 2 ||
        p->ef_construction == 0 || p->metric > MESS_METRIC_COSINE ||
        p->payload > MESS_PAYLOAD_U8)
        return MESS_EINVAL;
    if (!prob_ok(p->p_store) || !prob_ok(p->p_prr) || !prob_ok(p->p_irr))
        return MESS_EINVAL;
    /* kappa > dim is allowed: the hash then stacks ceil(kappa / dim)
     * IsoHash blocks of the principal subspace (isohash.h). */
    if (p->dim > MESS_MAX_DIM || p->kappa > MESS_MAX_BITS ||
        p->shards > MESS_MAX_SHARDS || p->hnsw_m > MESS_MAX_HNSW_M ||
        p->ef_construction > MESS_MAX_EF || p->ef_search > MESS_MAX_EF)
        return MESS_ELIMIT;
    return MESS_OK;
}

size_t params_vector_bytes(const mess_params *p)
{
    switch (p->payload) {
    case MESS_PAYLOAD_F16: return (size_t)p->dim * 2;
    case MESS_PAYLOAD_I8:  return 8 + (size_t)p->dim;
    case MESS_PAYLOAD_U8:  return (size_t)p->dim;
    default:               return (size_t)p->dim * 4;
    }
}

static uint64_t double_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static double bits_double(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Writes the canonical MESS_PARAMS_BYTES encoding. */
static void params_pack(const mess_params *p, uint8_t *q)
{
    const uint32_t head[5] = {p->dim, p->metric, p->kappa, p->shards,
                              p->per_item};
    const uint64_t probs[3] = {double_bits(p->p_store), double_bits(p->p_prr),
                               double_bits(p->p_irr)};
    const uint32_t tail[5] = {p->hnsw_m, p->ef_construction, p->ef_search,
                              p->payload, p->train_sample};
    size_t i;
    for (i = 0; i < 5; i++, q += 4)
        mess_store_u32(q, head[i]);
    for (i = 0; i < 3; i++, q += 8)
        mess_store_u64(q, probs[i]);
    for (i = 0; i < 5; i++, q += 4)
        mess_store_u32(q, tail[i]);
}

void params_encode(const mess_params *p, struct mess_wr *w)
{
    uint8_t *q = mess_wr_reserve(w, MESS_PARAMS_BYTES);
    if (q)
        params_pack(p, q);
}

int params_decode(struct mess_rd *r, mess_params *p)
{
    uint64_t a, b, c;
    memset(p, 0, sizeof *p);
    p->size = (uint32_t)sizeof *p;
    if (mess_rd_u32(r, &p->dim) || mess_rd_u32(r, &p->metric) ||
        mess_rd_u32(r, &p->kappa) || mess_rd_u32(r, &p->shards) ||
        mess_rd_u32(r, &p->per_item) || mess_rd_u64(r, &a) ||
        mess_rd_u64(r, &b) || mess_rd_u64(r, &c) ||
        mess_rd_u32(r, &p->hnsw_m) || mess_rd_u32(r, &p->ef_construction) ||
        mess_rd_u32(r, &p->ef_search) || mess_rd_u32(r, &p->payload) ||
        mess_rd_u32(r, &p->train_sample))
        return MESS_EFORMAT;
    p->p_store = bits_double(a);
    p->p_prr = bits_double(b);
    p->p_irr = bits_double(c);
    return mess_params_check(p) == MESS_OK ? MESS_OK : MESS_EFORMAT;
}

/* ef_search (server tuning) and train_sample (client training) are set to
 * 0 before hashing: they are not part of the protocol's identity. */
void params_fingerprint(const mess_params *p, uint8_t fp[MESS_FINGERPRINT_BYTES])
{
    static const uint8_t domain[] = "libmess params v2";
    uint8_t buf[sizeof domain + MESS_PARAMS_BYTES];
    mess_params q = *p;
    q.ef_search = 0;
    q.train_sample = 0;
    memcpy(buf, domain, sizeof domain);
    params_pack(&q, buf + sizeof domain);
    crypto_generichash(fp, MESS_FINGERPRINT_BYTES, buf, sizeof buf, NULL, 0);
}
