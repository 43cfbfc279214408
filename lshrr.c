/*
 * lshrr.c - randomized response on packed bits and the PRR memo cache.
 */
#include <math.h>
#include <sodium.h>

#include "lshrr.h"

#define DIGEST_BYTES 32
#define EMPTY UINT32_MAX
#define MEMO_MAX_CAPACITY (1u << 24)

/* round(p * 2^32), saturating; p in [0, 1/2]. */
static uint64_t threshold32(double p)
{
    return (uint64_t)llround(p * 4294967296.0);
}

static int check_args(const struct mess_rng *r, const uint64_t *code,
                      uint32_t bits, double p)
{
    if (!r || !code || bits == 0 || !(p >= 0.0 && p <= 0.5))
        return MESS_EINVAL;
    return MESS_OK;
}

/* Next 4 / 8 keystream bytes as an integer, reading the buffer in place. */
static uint32_t coin32(struct mess_rng *r)
{
    uint32_t u;
    if (r->pos + 4 > r->fill)
        return mess_rng_u32(r);
    u = mess_load_u32(r->buf + r->pos);
    r->pos += 4;
    return u;
}

static uint64_t coin64(struct mess_rng *r)
{
    uint64_t u;
    if (r->pos + 8 > r->fill)
        return mess_rng_u64(r);
    u = mess_load_u64(r->buf + r->pos);
    r->pos += 8;
    return u;
}

/* Mask of `bits` (1..64) low lanes. */
static uint64_t lanes(uint32_t bits)
{
    return bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
}

int lshrr_flip_threshold(struct mess_rng *r, uint64_t *code, uint32_t bits,
                         double p)
{
    uint64_t t;
    uint32_t i;
    int rc = check_args(r, code, bits, p);
    if (rc != MESS_OK)
        return rc;
    t = threshold32(p);
    if (t == 0)
        return MESS_OK;
    for (i = 0; i < bits; i++)
        if ((uint64_t)coin32(r) < t)
            code[i / 64] ^= (uint64_t)1 << (i % 64);
    return MESS_OK;
}

/* 64 independent Bernoulli(t / 2^32) lanes: lane l flips iff its 32-bit
 * uniform U_l < t.  The U_l are drawn bit-sliced, most significant bit
 * first, one 64-bit random word per bit position, and only as far as some
 * lane is still undecided (its prefix equal to t's); a lane still tied
 * after t's lowest set bit has U_l >= t.  So the result is exactly the
 * comparison of lshrr_flip_threshold, with about log2(64) + 1.3 words per
 * 64 lanes instead of 32. */
static uint64_t bernoulli64(struct mess_rng *r, uint32_t t)
{
    uint64_t und = ~(uint64_t)0, res = 0;
    int k, low = 0;
    while (!(t >> low & 1))
        low++;
    for (k = 31; k >= low; k--) {
        uint64_t w = coin64(r);
        if (t >> k & 1) {
            res |= und & ~w; /* U bit 0 under t bit 1: U < t */
            und &= w;
        } else {
            und &= ~w;       /* U bit 1 over t bit 0: U > t */
        }
        if (!und)
            break;
    }
    return res;
}

int lshrr_flip(struct mess_rng *r, uint64_t *code, uint32_t bits, double p)
{
    uint64_t t;
    uint32_t w;
    int rc = check_args(r, code, bits, p);
    if (rc != MESS_OK)
        return rc;
    t = threshold32(p);
    if (t == 0)
        return MESS_OK;
    for (w = 0; w < (bits + 63) / 64; w++)
        code[w] ^= bernoulli64(r, (uint32_t)t) & lanes(bits - w * 64);
    return MESS_OK;
}

int lshrr_flip_geometric(struct mess_rng *r, uint64_t *code, uint32_t bits,
                         double p)
{
    double lq;
    uint64_t pos = 0;
    int rc = check_args(r, code, bits, p);
    if (rc != MESS_OK || p == 0.0)
        return rc;
    if (p == 0.5)
        return lshrr_flip(r, code, bits, p); /* one word per 64 bits */
    lq = log1p(-p);
    for (;;) {
        /* positions skipped before the next flip: Geometric(p) by inversion */
        double u = 1.0 - mess_rng_uniform(r); /* (0, 1] */
        double skip = floor(log(u) / lq);
        if (skip >= (double)(bits - pos))
            return MESS_OK;
        pos += (uint64_t)skip;
        code[pos / 64] ^= (uint64_t)1 << (pos % 64);
        pos++;
        if (pos >= bits)
            return MESS_OK;
    }
}

double lshrr_effective_p(double a, double b)
{
    return a * (1.0 - b) + b * (1.0 - a);
}

/* ------------------------------------------------------------------------
 * Memo cache
 * ---------------------------------------------------------------------- */

/* Entries live in fixed arrays; a hash table (open addressing, linear
 * probing) maps digests to entries, and a doubly linked list through
 * prev/next keeps them in recency order (head = most recent), so a lookup,
 * a use and an eviction are O(1). */
struct lshrr_memo {
    size_t capacity, count;
    uint32_t shards, kappa, words;
    uint64_t clock;       /* use counter: last_used values, serialized */
    uint8_t *key;         /* sodium_malloc'd memo key */
    uint8_t *digests;     /* capacity x 32 */
    uint64_t *last_used;  /* capacity */
    uint64_t *reports;    /* capacity x shards x words */
    uint32_t *prev, *next; /* capacity: recency list, EMPTY-terminated */
    uint32_t head, tail;
    uint32_t *table;      /* entry index or EMPTY */
    size_t table_mask;
};

static size_t report_words(const struct lshrr_memo *m)
{
    return (size_t)m->shards * m->words;
}

void lshrr_memo_free(struct lshrr_memo *m)
{
    if (!m)
        return;
    if (m->key)
        sodium_free(m->key);
    if (m->reports)
        sodium_memzero(m->reports, m->capacity * report_words(m) * 8);
    free(m->digests);
    free(m->last_used);
    free(m->reports);
    free(m->prev);
    free(m->next);
    free(m->table);
    free(m);
}

size_t lshrr_memo_count(const struct lshrr_memo *m)
{
    return m ? m->count : 0;
}

int lshrr_memo_new(size_t capacity, uint32_t shards, uint32_t kappa,
                   const uint8_t key[32], struct lshrr_memo **out)
{
    struct lshrr_memo *m;
    size_t tsize = 2, rw;
    if (!key || !out || capacity == 0 || shards == 0 || kappa == 0 ||
        kappa % 64 != 0)
        return MESS_EINVAL;
    *out = NULL;
    if (capacity > MEMO_MAX_CAPACITY || shards > MESS_MAX_SHARDS ||
        kappa > MESS_MAX_BITS)
        return MESS_ELIMIT;
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    while (tsize < 2 * capacity)
        tsize *= 2;
    m = (struct lshrr_memo *)calloc(1, sizeof *m);
    if (!m)
        return MESS_ENOMEM;
    m->capacity = capacity;
    m->shards = shards;
    m->kappa = kappa;
    m->words = kappa / 64;
    rw = report_words(m);
    m->key = (uint8_t *)sodium_malloc(32);
    m->digests = (uint8_t *)mess_malloc_array(capacity, DIGEST_BYTES);
    m->last_used = (uint64_t *)mess_malloc_array(capacity, 8);
    m->reports = (uint64_t *)mess_malloc_array(capacity, rw * 8);
    m->table = (uint32_t *)mess_malloc_array(tsize, 4);
    m->prev = (uint32_t *)mess_malloc_array(capacity, 4);
    m->next = (uint32_t *)mess_malloc_array(capacity, 4);
    if (!m->key || !m->digests || !m->last_used || !m->reports || !m->table ||
        !m->prev || !m->next) {
        lshrr_memo_free(m);
        return MESS_ENOMEM;
    }
    m->head = m->tail = EMPTY;
    memcpy(m->key, key, 32);
    m->table_mask = tsize - 1;
    memset(m->table, 0xff, tsize * 4);
    *out = m;
    return MESS_OK;
}

static size_t slot_of(const struct lshrr_memo *m, const uint8_t *digest)
{
    return (size_t)mess_load_u64(digest) & m->table_mask;
}

/* Entry index holding digest, or EMPTY; *slot_out is its table slot (or the
 * empty slot where it would go). */
static uint32_t find(const struct lshrr_memo *m, const uint8_t *digest,
                     size_t *slot_out)
{
    size_t s = slot_of(m, digest);
    while (m->table[s] != EMPTY) {
        if (memcmp(m->digests + (size_t)m->table[s] * DIGEST_BYTES, digest,
                   DIGEST_BYTES) == 0)
            break;
        s = (s + 1) & m->table_mask;
    }
    *slot_out = s;
    return m->table[s];
}

/* Removes table slot s, shifting later entries of the probe run back. */
static void table_remove(struct lshrr_memo *m, size_t s)
{
    size_t j = s;
    for (;;) {
        size_t home;
        j = (j + 1) & m->table_mask;
        if (m->table[j] == EMPTY)
            break;
        home = slot_of(m, m->digests + (size_t)m->table[j] * DIGEST_BYTES);
        /* move j back to s unless its home lies cyclically in (s, j] */
        if ((s < j) ? (home <= s || home > j) : (home <= s && home > j)) {
            m->table[s] = m->table[j];
            s = j;
        }
    }
    m->table[s] = EMPTY;
}

static void list_unlink(struct lshrr_memo *m, uint32_t e)
{
    if (m->prev[e] != EMPTY)
        m->next[m->prev[e]] = m->next[e];
    else
        m->head = m->next[e];
    if (m->next[e] != EMPTY)
        m->prev[m->next[e]] = m->prev[e];
    else
        m->tail = m->prev[e];
}

static void list_push_front(struct lshrr_memo *m, uint32_t e)
{
    m->prev[e] = EMPTY;
    m->next[e] = m->head;
    if (m->head != EMPTY)
        m->prev[m->head] = e;
    else
        m->tail = e;
    m->head = e;
}

/* Index of the entry to (re)use for a new digest: a free one, or the least
 * recently used, which is unlinked from the table and the list first. */
static uint32_t take_entry(struct lshrr_memo *m)
{
    size_t slot;
    uint32_t lru;
    if (m->count < m->capacity)
        return (uint32_t)m->count++;
    lru = m->tail;
    list_unlink(m, lru);
    find(m, m->digests + (size_t)lru * DIGEST_BYTES, &slot);
    table_remove(m, slot);
    return lru;
}

static void insert_entry(struct lshrr_memo *m, uint32_t e, const uint8_t *digest)
{
    size_t slot;
    memcpy(m->digests + (size_t)e * DIGEST_BYTES, digest, DIGEST_BYTES);
    find(m, digest, &slot);
    m->table[slot] = e;
}

int lshrr_query_report(struct lshrr_memo *m, struct mess_rng *r,
                       const float *query, size_t dim, const uint64_t *clean,
                       double p_prr, double p_irr, uint64_t *out,
                       int *memo_hit)
{
    crypto_generichash_state st;
    uint8_t digest[DIGEST_BYTES], dimb[8];
    size_t slot, rw, i;
    uint32_t e, j;
    int rc = MESS_OK;

    if (!m || !r || !query || !clean || !out || dim == 0 ||
        !(p_prr >= 0.0 && p_prr <= 0.5) || !(p_irr >= 0.0 && p_irr <= 0.5))
        return MESS_EINVAL;
    rw = report_words(m);
    /* the memo key makes the cache index useless to anyone without it */
    mess_store_u64(dimb, dim);
    crypto_generichash_init(&st, m->key, 32, DIGEST_BYTES);
    crypto_generichash_update(&st, dimb, sizeof dimb);
    for (i = 0; i < dim; i++) {
        uint8_t b[4];
        uint32_t u;
        float f = query[i] == 0.0f ? 0.0f : query[i]; /* -0 and +0 alike */
        memcpy(&u, &f, 4);
        mess_store_u32(b, u);
        crypto_generichash_update(&st, b, 4);
    }
    crypto_generichash_final(&st, digest, sizeof digest);

    e = find(m, digest, &slot);
    if (memo_hit)
        *memo_hit = e != EMPTY;
    if (e != EMPTY) {
        memcpy(out, m->reports + (size_t)e * rw, rw * 8);
        list_unlink(m, e);
    } else {
        /* a new permanent report, drawn before the cache is touched */
        memcpy(out, clean, rw * 8);
        for (j = 0; j < m->shards && rc == MESS_OK; j++)
            rc = lshrr_flip(r, out + (size_t)j * m->words, m->kappa, p_prr);
        if (rc != MESS_OK) {
            sodium_memzero(out, rw * 8);
            sodium_memzero(digest, sizeof digest);
            return rc;
        }
        e = take_entry(m);
        memcpy(m->reports + (size_t)e * rw, out, rw * 8);
        insert_entry(m, e, digest);
    }
    list_push_front(m, e);
    m->last_used[e] = ++m->clock;
    for (j = 0; j < m->shards && rc == MESS_OK; j++)
        rc = lshrr_flip(r, out + (size_t)j * m->words, m->kappa, p_irr);
    sodium_memzero(digest, sizeof digest);
    return rc;
}

/* Serialized: u64 capacity | u32 shards | u32 kappa | u64 count | u64 clock
 *             | count x (digest[32] | u64 last_used | shards x words x u64) */
int lshrr_memo_serialize(const struct lshrr_memo *m, struct mess_wr *w)
{
    size_t i, k, rw;
    if (!m || !w)
        return MESS_EINVAL;
    rw = report_words(m);
    mess_wr_u64(w, m->capacity);
    mess_wr_u32(w, m->shards);
    mess_wr_u32(w, m->kappa);
    mess_wr_u64(w, m->count);
    mess_wr_u64(w, m->clock);
    for (i = 0; i < m->count; i++) {
        mess_wr_bytes(w, m->digests + i * DIGEST_BYTES, DIGEST_BYTES);
        mess_wr_u64(w, m->last_used[i]);
        for (k = 0; k < rw; k++)
            mess_wr_u64(w, m->reports[i * rw + k]);
    }
    return w->err;
}

struct use_rank {
    uint64_t used;
    uint32_t entry;
};

static int by_use(const void *a, const void *b)
{
    const struct use_rank *x = (const struct use_rank *)a,
                          *y = (const struct use_rank *)b;
    if (x->used != y->used)
        return x->used < y->used ? -1 : 1;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* The recency list of a loaded cache, from the last_used stamps. */
static int rebuild_recency(struct lshrr_memo *m)
{
    struct use_rank *u;
    size_t i;
    if (m->count == 0)
        return MESS_OK;
    u = (struct use_rank *)mess_malloc_array(m->count, sizeof *u);
    if (!u)
        return MESS_ENOMEM;
    for (i = 0; i < m->count; i++) {
        u[i].used = m->last_used[i];
        u[i].entry = (uint32_t)i;
    }
    qsort(u, m->count, sizeof *u, by_use);
    for (i = 0; i < m->count; i++)
        list_push_front(m, u[i].entry);
    free(u);
    return MESS_OK;
}

int lshrr_memo_deserialize(struct mess_rd *r, const uint8_t key[32],
                           struct lshrr_memo **out)
{
    uint64_t cap, count, clock;
    uint32_t shards, kappa;
    struct lshrr_memo *m;
    size_t i, k, rw, need;
    int rc;

    if (!r || !key || !out)
        return MESS_EINVAL;
    *out = NULL;
    if (mess_rd_u64(r, &cap) || mess_rd_u32(r, &shards) ||
        mess_rd_u32(r, &kappa) || mess_rd_u64(r, &count) ||
        mess_rd_u64(r, &clock))
        return MESS_EFORMAT;
    if (cap == 0 || cap > MEMO_MAX_CAPACITY || count > cap || shards == 0 ||
        shards > MESS_MAX_SHARDS || kappa == 0 || kappa % 64 != 0 ||
        kappa > MESS_MAX_BITS)
        return MESS_EFORMAT;
    rw = (size_t)shards * (kappa / 64);
    /* the bytes must be there before anything is allocated for them */
    need = (size_t)count * (DIGEST_BYTES + 8 + rw * 8);
    if (need > mess_rd_left(r))
        return MESS_EFORMAT;
    rc = lshrr_memo_new((size_t)cap, shards, kappa, key, &m);
    if (rc != MESS_OK)
        return rc;
    for (i = 0; i < count; i++) {
        size_t slot;
        uint8_t digest[DIGEST_BYTES];
        uint64_t used = 0;
        mess_rd_bytes(r, digest, DIGEST_BYTES);
        mess_rd_u64(r, &used);
        if (used > clock || find(m, digest, &slot) != EMPTY) {
            lshrr_memo_free(m);
            return MESS_EFORMAT;
        }
        m->last_used[i] = used;
        for (k = 0; k < rw; k++)
            mess_rd_u64(r, &m->reports[i * rw + k]);
        m->count = i + 1;
        insert_entry(m, (uint32_t)i, digest);
    }
    m->clock = clock;
    rc = rebuild_recency(m);
    if (rc != MESS_OK) {
        lshrr_memo_free(m);
        return rc;
    }
    *out = m;
    return MESS_OK;
}
