/*
 * lshrr.h - bitwise randomized response on packed codes and the two-phase
 * (permanent / instantaneous) query perturbation.  Internal header.
 *
 * Paper sections 3.2 and 4.3: every bit of a code flips independently with
 * probability p (LSHRR, Fernandes et al.).  A query is perturbed twice: a
 * permanent report (PRR, p_PRR) memoised per logical query, RAPPOR-style, so
 * repeated submissions cannot be averaged, then a fresh instantaneous report
 * (IRR, p_IRR) per submission, so repeats cannot be linked.  The effective
 * per-bit flip is p_q = a(1-b) + b(1-a).
 */
#ifndef MESS_LSHRR_H
#define MESS_LSHRR_H

#include "internal.h"
#include "rng.h"

/* Flips each of the `bits` low bits of code (bit i in word i/64, position
 * i%64) independently with probability p in [0, 1/2]: a bit flips iff a
 * 32-bit uniform is below t = round(p * 2^32), so p is exact to 2^-32.
 * The uniforms are compared bit-sliced, 64 bits of the code at once, and
 * drawn lazily most significant bit first (about 1 keystream byte per code
 * bit instead of 4).  The fastest of the three samplers here on every p
 * measured by `mess bench encode` (docs/ENCODING.md); the one the protocol
 * uses.  MESS_EINVAL for a NULL argument, bits == 0 or p outside [0, 1/2]. */
int lshrr_flip(struct mess_rng *r, uint64_t *code, uint32_t bits, double p);

/* The same distribution, one 32-bit uniform per bit compared with t: the
 * reference the other samplers are measured and tested against. */
int lshrr_flip_threshold(struct mess_rng *r, uint64_t *code, uint32_t bits,
                         double p);

/* Independent flips with probability p (as a double, not rounded to
 * 2^-32) drawn by geometric skips between flipped positions: 53-bit
 * uniforms, inversion.  Faster than lshrr_flip only at small p (about 1.4x
 * at p = 0.01); kept for that comparison. */
int lshrr_flip_geometric(struct mess_rng *r, uint64_t *code, uint32_t bits,
                         double p);

/* p_q = a(1-b) + b(1-a). */
double lshrr_effective_p(double a, double b);

/* The PRR memo cache: BLAKE2b(memo key; dim | query bytes) -> the M
 * permanent reports of that query.  A "logical query" is the exact vector
 * (bit for bit, -0 = +0): a re-embedded text that differs in one float is
 * another query with its own report.  Holds at most `capacity` queries;
 * when full, the least recently used one is evicted (O(1): hash table plus
 * a recency list).  An evicted query that comes back gets a fresh permanent
 * report, so the server may then hold two independent reports of it, and
 * an averaging attack gets one more sample: eviction trades memory for
 * privacy (docs/ENCODING.md).  Repeating a query while it is cached costs
 * nothing beyond the IRR. */
struct lshrr_memo;

int lshrr_memo_new(size_t capacity, uint32_t shards, uint32_t kappa,
                   const uint8_t key[32], struct lshrr_memo **out);
void lshrr_memo_free(struct lshrr_memo *m);
size_t lshrr_memo_count(const struct lshrr_memo *m);

/* Writes the M reports to send for `query` (dim floats) whose clean codes
 * are clean[M x kappa/64]: the memoised PRR (drawn with p_prr on a miss and
 * stored, possibly evicting the least recently used query) with fresh IRR
 * flips (p_irr).  *memo_hit tells whether the PRR came from the cache.
 * On error the cache is unchanged. */
int lshrr_query_report(struct lshrr_memo *m, struct mess_rng *r,
                       const float *query, size_t dim, const uint64_t *clean,
                       double p_prr, double p_irr, uint64_t *out,
                       int *memo_hit);

int lshrr_memo_serialize(const struct lshrr_memo *m, struct mess_wr *w);
/* Hostile input: every count is checked; the key is the client's memo key. */
int lshrr_memo_deserialize(struct mess_rd *r, const uint8_t key[32],
                           struct lshrr_memo **out);

#endif
