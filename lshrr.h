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
 * fresh 32-bit uniform is below round(p * 2^32), so p is exact to 2^-32. */
int lshrr_flip(struct mess_rng *r, uint64_t *code, uint32_t bits, double p);

/* The same distribution drawn by geometric skips between flipped positions
 * (53-bit uniforms, inversion); kept for the throughput comparison in
 * `mess bench rr`, see docs/ENCODING.md. */
int lshrr_flip_geometric(struct mess_rng *r, uint64_t *code, uint32_t bits,
                         double p);

/* p_q = a(1-b) + b(1-a). */
double lshrr_effective_p(double a, double b);

/* The PRR memo cache: BLAKE2b(memo key; dim | query bytes) -> the M
 * permanent reports of that query.  Holds at most `capacity` queries and
 * evicts the least recently used one.  An evicted query that comes back
 * gets a fresh permanent report, i.e. the server may then hold two
 * independent reports of it: eviction trades memory for privacy (the
 * search-pattern accountant counts reports, docs/PRIVACY.md). */
struct lshrr_memo;

int lshrr_memo_new(size_t capacity, uint32_t shards, uint32_t kappa,
                   const uint8_t key[32], struct lshrr_memo **out);
void lshrr_memo_free(struct lshrr_memo *m);
size_t lshrr_memo_count(const struct lshrr_memo *m);

/* Writes the M reports to send for `query` (dim floats) whose clean codes
 * are clean[M x kappa/64]: the memoised PRR (drawn with p_prr on a miss and
 * stored) with fresh IRR flips (p_irr).  *memo_hit tells whether the PRR
 * came from the cache. */
int lshrr_query_report(struct lshrr_memo *m, struct mess_rng *r,
                       const float *query, size_t dim, const uint64_t *clean,
                       double p_prr, double p_irr, uint64_t *out,
                       int *memo_hit);

int lshrr_memo_serialize(const struct lshrr_memo *m, struct mess_wr *w);
/* Hostile input: every count is checked; the key is the client's memo key. */
int lshrr_memo_deserialize(struct mess_rd *r, const uint8_t key[32],
                           struct lshrr_memo **out);

#endif
