/*
 * isohash.h - per-shard isotropic hashing (paper section 3.1; Kong & Li,
 * "Isotropic Hashing", NIPS 2012).  Internal header.
 *
 * For each shard j: a seeded subsample of the training set, its mean mu_j
 * and covariance, the top-kappa eigenvectors W_j (LAPACK dsyevr), and an
 * orthogonal Q_j with equal diagonal of Q_j^T Lambda Q_j found by
 * Lift-and-Projection from a seeded Haar-random start (the start is what
 * makes shards differ when they share a subsample).  Hashing uses
 * P_j = W_j Q_j: bit i of x's code is ((x - mu_j) . P_j[:, i] > 0), stored in
 * 64-bit word i/64 at bit position i%64.
 *
 * kappa > dim (an extension, not in the paper): the bits come in
 * B = ceil(kappa / dim) blocks of kb = ceil(kappa / B) bits, each block an
 * IsoHash of the same top-kb principal subspace under its own Haar start
 * (the last block keeps its first columns).  Every bit then has the same
 * variance lambda-bar of the top kb eigenvalues; bits of different blocks
 * are correlated, and the Hamming distance is a sum of B IsoHash distances.
 *
 * The training set is separate from the indexed set on purpose: the privacy
 * analysis (section 5.2.1) treats the hash as fixed, i.e. trained on public
 * data or data excluded from the neighbouring relation.
 */
#ifndef MESS_ISOHASH_H
#define MESS_ISOHASH_H

#include "internal.h"

#define ISOHASH_DEFAULT_SAMPLE 20000
#define ISOHASH_DEFAULT_TOL 1e-3   /* relative: max |diag - mean| / mean */
#define ISOHASH_DEFAULT_MAX_ITER 500

/* The rotation after PCA.  Only ISOHASH_LP is IsoHash; the others are the
 * baselines of the quality comparison in docs/ENCODING.md. */
enum isohash_rotation {
    ISOHASH_LP = 0,          /* Lift-and-Projection from a Haar start */
    ISOHASH_PCA = 1,         /* no rotation: sign of the top principal axes */
    ISOHASH_RANDOM = 2,      /* the Haar start alone */
    ISOHASH_HYPERPLANES = 3  /* no PCA: Gaussian hyperplanes through mu_j */
};

struct isohash_params {
    uint32_t dim;       /* d */
    uint32_t kappa;     /* bits per shard: multiple of 64 (> dim: blocks) */
    uint32_t shards;    /* M */
    size_t sample;      /* rows per shard subsample; 0 = min(n, 20000) */
    double tol;         /* LP stop: relative max |diag - mean|; 0 = default */
    uint32_t max_iter;  /* LP iteration cap; 0 = default */
    unsigned threads;   /* workers over shards; 0 = 1 */
    int rotation;       /* enum isohash_rotation; 0 = ISOHASH_LP */
    uint8_t seed[32];   /* secret: subsamples and random starts */
};

struct isohash;

/* Trains all M shard hashes on train (n x dim floats, row-major; finite).
 * Shard j draws its subsample and its rotation from the ChaCha20 stream
 * (seed, j).  MESS_EINVAL for bad shapes (kappa 0 or not a multiple of 64,
 * kappa > dim with ISOHASH_PCA, n < 2, tol < 0, unknown rotation, a
 * non-finite value), MESS_ELIMIT beyond the library's limits, MESS_ENUMERIC
 * if LAPACK fails.  LP stops at tol or after max_iter iterations, whichever
 * comes first: check isohash_residual. */
int isohash_train(const struct isohash_params *p, const float *train,
                  size_t n, struct isohash **out);
void isohash_free(struct isohash *h);

uint32_t isohash_dim(const struct isohash *h);
uint32_t isohash_kappa(const struct isohash *h);
uint32_t isohash_shards(const struct isohash *h);
uint32_t isohash_words(const struct isohash *h);
/* Achieved max |diag(Q^T Lambda Q) - mean| / mean of shard j (the worst
 * block), i.e. the spread of the projected variances relative to their
 * target; NAN for ISOHASH_HYPERPLANES. */
double isohash_residual(const struct isohash *h, uint32_t shard);
/* The target lambda-bar of shard j: the mean of the top kb eigenvalues of
 * its subsample covariance (kb = kappa when kappa <= dim).  The absolute
 * residual max |diag - mean| is residual * target. */
double isohash_target_variance(const struct isohash *h, uint32_t shard);
/* LP iterations shard j needed (the most of its blocks). */
uint32_t isohash_iterations(const struct isohash *h, uint32_t shard);
/* Column i of P_j (dim floats, strided by stride_out). */
const float *isohash_projection(const struct isohash *h, uint32_t shard,
                                size_t *stride_out);

/* Codes of nvec vectors for one shard: codes[nvec x words].  One
 * vectorized matrix-vector product per vector against P_j (packed
 * contiguous once per call). */
int isohash_hash(const struct isohash *h, uint32_t shard, const float *x,
                 size_t nvec, uint64_t *codes);
/* Codes of one vector for all M shards, one product against the
 * side-by-side d x (M kappa) matrix: codes[M x words]. */
int isohash_hash_all(const struct isohash *h, const float *x, uint64_t *codes);

/* The same codes through BLAS (sgemm in chunks of 512 vectors; one sgemv).
 * Identical sums with the reference BLAS; kept because an optimised BLAS
 * may beat the loops, and measured against them by `mess bench encode`. */
int isohash_hash_sgemm(const struct isohash *h, uint32_t shard,
                       const float *x, size_t nvec, uint64_t *codes);
int isohash_hash_all_sgemv(const struct isohash *h, const float *x,
                           uint64_t *codes);

/* Which projection loop runs: 0 portable C, 1 AVX2, 2 AVX-512 (what the
 * CPU has, or what isohash_project_force chose).  All give the same bits.
 * Force -1 (the CPU decides, default), 0, 1 or 2 (MESS_EINVAL if the CPU
 * lacks it); for tests and benchmarks, not thread-safe (the one table of
 * these choices: SIMD_PROJECT in src/common/simd.h). */
int isohash_project_isa(void);
/* The raw projections x^T [P_0 ... P_{M-1}] behind isohash_hash_all's
 * codes: y[M x kappa] (for the test that compares the loops bit for bit). */
int isohash_project_all(const struct isohash *h, const float *x, float *y);
int isohash_project_force(int isa);

int isohash_serialize(const struct isohash *h, struct mess_wr *w);
int isohash_deserialize(struct mess_rd *r, struct isohash **out);

#endif
