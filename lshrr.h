/*
 * lshrr.h - bitwise randomized response on packed codes and the two-phase
 * (permanent / instantaneous) query perturbation.  Internal header.
 *
 * Paper sections 3.2 and 4.3: every bit of a code flips independently with
 * probability p (LSHRR, Fernandes et al.).  A query is perturbed twice: a
 * permanent report (PRR, p_PRR), a keyed PRF of the logical query, so
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

/* The report to send for a query: the permanent report (PRR, p_prr) then
 * fresh instantaneous flips (IRR, p_irr) from r.  The PRR is a PRF of the
 * logical query, RAPPOR's memoisation without a cache: its coins are a
 * ChaCha20 stream keyed by BLAKE2b-256(key; u64 dim | the query's float
 * bytes, -0 taken as +0), one lshrr_flip per shard in order.  A "logical
 * query" is the exact vector (bit for bit): a re-embedded text that
 * differs in one float is another query with its own report.  The same
 * query always gets the same PRR, whatever happened before (a failed
 * query, a client not saved, a restored backup), so the server never sees
 * two permanent reports of one query; nothing is stored.
 * clean: shards x kappa/64 words; out the same.  MESS_EINVAL for a NULL
 * argument, dim == 0, kappa not a positive multiple of 64 or a probability
 * outside [0, 1/2]; out is wiped on error. */
int lshrr_query_report(const uint8_t key[32], struct mess_rng *r,
                       const float *query, size_t dim, uint32_t shards,
                       uint32_t kappa, const uint64_t *clean, double p_prr,
                       double p_irr, uint64_t *out);

#endif
