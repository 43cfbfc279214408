/*
 * mess_experimental.h - libmess interfaces that may change.
 *
 * STABILITY: everything declared here may change or go between minor
 * versions (0.2 -> 0.3, and after 1.0 between 1.x releases), in its
 * signature or its behaviour; mess.h is the stable API.  Programs that use
 * these functions should check mess_version_number() against the
 * MESS_VERSION_NUMBER they were built with.  The functions are exported
 * by libmess.so as mess_* like the stable ones (symbol version MESS_0) and
 * follow mess.h's conventions (status codes, NULL-accepting frees, no
 * process-wide state beyond mess.h's list, on which
 * mess_server_set_advice's mask is).
 *
 * What is here: vector file I/O (TEXMEX formats), the read-only server
 * view (leakage evaluations, audits), the privacy accountants, the
 * recall planner, the configuration search (mess_plan_choose) and the
 * memory/disk estimate.  Include it explicitly; mess.h does not.
 */
#ifndef MESS_EXPERIMENTAL_H
#define MESS_EXPERIMENTAL_H

#include "mess.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Vector files (TEXMEX formats)
 *
 * .fvecs: per record, int32 dim then dim float32.
 * .ivecs: per record, int32 dim then dim int32.
 * .bvecs: per record, int32 dim then dim uint8.
 * .u64vecs: per record, int32 dim then dim uint64 (ids of any size; the
 *   files `mess query --out` writes when ids reach 2^31).
 * All little-endian.  A failure of the system (open, read, write, rename)
 * is MESS_EIO with errno as the system left it (EISDIR for a directory).
 * Every record of a file must have the same dim (1..MESS_MAX_DIM), and the
 * file size must be a whole number of records; otherwise MESS_EFORMAT.
 * Arrays returned are row-major n x dim, allocated with malloc; release them
 * with mess_vecs_free().
 * ---------------------------------------------------------------------- */

/* Reads .fvecs or .bvecs (chosen by the file name's extension) as float32. */
MESS_API int mess_vecs_read_f32(const char *path, float **out, size_t *n, size_t *dim);
MESS_API int mess_fvecs_read(const char *path, float **out, size_t *n, size_t *dim);
MESS_API int mess_bvecs_read(const char *path, uint8_t **out, size_t *n, size_t *dim);
MESS_API int mess_ivecs_read(const char *path, int32_t **out, size_t *n, size_t *dim);
MESS_API int mess_fvecs_write(const char *path, const float *v, size_t n, size_t dim);
MESS_API int mess_bvecs_write(const char *path, const uint8_t *v, size_t n, size_t dim);
MESS_API int mess_ivecs_write(const char *path, const int32_t *v, size_t n, size_t dim);
MESS_API int mess_u64vecs_read(const char *path, uint64_t **out, size_t *n, size_t *dim);
MESS_API int mess_u64vecs_write(const char *path, const uint64_t *v, size_t n, size_t dim);
MESS_API void mess_vecs_free(void *p);

/* ------------------------------------------------------------------------
 * Read-only server view
 *
 * Everything the untrusted server holds, shard by shard, for leakage
 * evaluations (paper Appendix A.2) and audits: nodes numbered 0..n-1 in
 * insertion order, each with its perturbed code, opaque label, HNSW level,
 * deleted flag, links per level and ciphertext.  Nothing here is secret and
 * nothing here changes the server.  shard >= M is MESS_EINVAL; an output
 * array with room for fewer than the shard's n nodes (`cap`) is MESS_ELIMIT.
 * On a directory-backed server the first view of a shard applies its delta
 * chain, like a search (docs/PROTOCOL.md "Lazy apply"): a damaged delta is
 * MESS_EFORMAT, mess_server_error names it.
 * ---------------------------------------------------------------------- */

/* *nodes: nodes of the shard, deleted ones included. */
MESS_API int mess_server_shard_nodes(const mess_server *s, uint32_t shard,
                                     size_t *nodes);
/* *node: the graph's entry point; MESS_ENOTFOUND if the shard is empty. */
MESS_API int mess_server_shard_entry_point(const mess_server *s, uint32_t shard,
                                           uint32_t *node);
/* Perturbed codes, kappa/64 words per node (bit layout of
 * mess_client_codes); cap counts nodes. */
MESS_API int mess_server_shard_codes(const mess_server *s, uint32_t shard,
                                     uint64_t *codes, size_t cap);
/* Labels, MESS_LABEL_BYTES (16) opaque bytes per node; cap counts nodes. */
#define MESS_LABEL_BYTES 16
MESS_API size_t mess_label_bytes(void);
MESS_API int mess_server_shard_labels(const mess_server *s, uint32_t shard,
                                      uint8_t *labels, size_t cap);
/* Top layer of each node (0 = bottom layer only). */
MESS_API int mess_server_shard_levels(const mess_server *s, uint32_t shard,
                                      uint32_t *levels, size_t cap);
/* 1 for a node marked deleted, else 0. */
MESS_API int mess_server_shard_deleted(const mess_server *s, uint32_t shard,
                                       uint8_t *deleted, size_t cap);
/* Ciphertexts, mess_payload_size() bytes per node; cap counts nodes. */
MESS_API int mess_server_shard_entries(const mess_server *s, uint32_t shard,
                                       uint8_t *entries, size_t cap);
/* Links of one node at one level (at most 2*M_hnsw at level 0, M_hnsw
 * above): *n is their number; MESS_EINVAL if node >= n or level exceeds the
 * node's level; MESS_ELIMIT (with *n set) if cap < *n. */
MESS_API int mess_server_shard_neighbors(const mess_server *s, uint32_t shard,
                                         uint32_t node, uint32_t level, uint32_t *ids,
                                         size_t cap, size_t *n);
/* All links of one level in compressed-row form: node i's links are
 * ids[offsets[i] .. offsets[i+1]) (none for nodes below the level).
 * offsets has room for n_offsets >= nodes + 1 entries; *n_ids gets the
 * total, and ids (cap entries) may be NULL with cap 0 to ask for it only. */
MESS_API int mess_server_shard_links(const mess_server *s, uint32_t shard,
                                     uint32_t level, size_t *offsets, size_t n_offsets,
                                     uint32_t *ids, size_t cap, size_t *n_ids);

/* ------------------------------------------------------------------------
 * Privacy accountants (paper section 5.2, Appendix A.1)
 *
 * Pure numerics over public flip probabilities and fixed-hash Hamming
 * distances; no handle to the protocol is needed, so a user can state what
 * the server may learn before outsourcing anything.  Privacy parameters are
 * in nats (an event's probability changes by at most a factor e^xi, plus
 * delta where one is given).  Everything is computed in log space or on
 * probabilities in [0, 1]: no overflow and no NaN for flip probabilities in
 * (0, 1/2], kappa up to MESS_MAX_BITS, M up to MESS_MAX_SHARDS and
 * repetition counts up to MESS_ACCOUNT_MAX_REPEATS.  A flip probability of
 * 0 has no finite guarantee and is MESS_EINVAL; 1/2 releases nothing (0).
 * ---------------------------------------------------------------------- */

/* Repetition counts R beyond this are MESS_ELIMIT (2^53: exact in a double). */
#define MESS_ACCOUNT_MAX_REPEATS ((uint64_t)1 << 53)
/* Smallest target delta accepted; mass dropped by truncation is below 1e-30. */
#define MESS_ACCOUNT_MIN_DELTA 1e-20
/* Route dynamic programme limits: (min(t, M-t) + 1) * (U + 1) cells, U the
 * largest aggregate distance, and cell updates (a few seconds at most);
 * MESS_ELIMIT beyond.  The paper's configuration needs 33K cells. */
#define MESS_ACCOUNT_MAX_CELLS (1u << 24)
#define MESS_ACCOUNT_MAX_WORK 4294967296.0
MESS_API uint64_t mess_account_max_repeats(void);
MESS_API double mess_account_min_delta(void);
MESS_API size_t mess_account_max_cells(void);
MESS_API double mess_account_max_work(void);

/* eta = ln((1 - p) / p): the per-coordinate pure XDP of randomized response
 * with flip probability p in (0, 1/2] (Proposition 5.1).  eta_D for p_D. */
MESS_API int mess_account_eta(double p, double *eta);

/* Pure stored-data bound of Theorem 5.2: eta_D * D_D with D_D the sum of
 * the t largest of the m per-shard fixed-hash distances d[0..m-1] (the
 * worst t-shard route; with t = m, the realized route of the
 * identifier-fixed case).  1 <= t <= m <= MESS_MAX_SHARDS, d[s] <=
 * MESS_MAX_BITS. */
MESS_API int mess_account_stored_pure(double p_store, const uint32_t *d, size_t m,
                                      size_t t, double *xi);

/* Route-averaged distance distribution w(u) = Pr[sum of d over a uniform
 * t-of-m route = u] (section 5.2.2, dynamic programme of Appendix A.1.1;
 * no subset is enumerated).  Writes ln w(u) for u = 0 .. *len - 1, where
 * *len = 1 + (sum of the t largest d); -INFINITY where w(u) = 0.
 *   logw: NULL to only learn *len, else room for `cap` doubles (cap < *len
 *         is MESS_ELIMIT with *len set).
 * The programme carries probabilities (the counts of A.1.1 divided by
 * C(m, t) at every step), so nothing overflows; weights below 1e-300 may
 * underflow to 0, far below any delta this accountant accepts.  Work is
 * O(m * min(t, m-t) * U); beyond MESS_ACCOUNT_MAX_CELLS or
 * MESS_ACCOUNT_MAX_WORK, MESS_ELIMIT. */
MESS_API int mess_account_route_weights(const uint32_t *d, size_t m, size_t t,
                                        double *logw, size_t cap, size_t *len);

/* Exact randomized-response hockey-stick profile of Corollary 5.3 for u
 * differing coordinates with flip probability p:
 *   delta_u(eps) = sum_z C(u,z) (1-p)^z p^(u-z) [1 - e^(eps - (2z-u) eta)]_+
 * u <= MESS_MAX_SHARDS * MESS_MAX_BITS, eps >= 0.  The profile is the same in
 * both directions (randomized response is symmetric). */
MESS_API int mess_account_rr_delta(double p, uint64_t u, double eps, double *delta);

/* The privacy-loss distribution of randomized response mixed over a
 * distance distribution: the route-averaged profile
 * delta(eps) = sum_u w(u) delta_u(eps) of Corollary 5.3. */
typedef struct mess_account_pld mess_account_pld;

/* Builds the mixture for flip probability p in (0, 1/2] and log-weights
 * logw[u], u = 0 .. len-1 (normalised here; -INFINITY entries are absent;
 * at least one must be finite; len - 1 <= MESS_MAX_SHARDS * MESS_MAX_BITS).
 * A point mass (identifier-fixed route) is logw[u] = 0 at one u. */
MESS_API int mess_account_pld_new(double p, const double *logw, size_t len,
                                  mess_account_pld **out);
MESS_API void mess_account_pld_free(mess_account_pld *pld);

/* delta(eps) of the mixture for eps >= 0 (the larger of both directions). */
MESS_API int mess_account_pld_delta(const mess_account_pld *pld, double eps,
                                    double *delta);

/* xi(delta0) = inf { eps >= 0 : delta(eps) <= delta0 }, by bisection to
 * 1e-9 (absolute, or 1e-15 relative for large values); the value returned
 * satisfies delta(xi) <= delta0.  delta0 in [MESS_ACCOUNT_MIN_DELTA, 1). */
MESS_API int mess_account_pld_epsilon(const mess_account_pld *pld, double delta0,
                                      double *xi);

/* Upper-tail bound of Corollary 5.3 on the privacy loss of the released
 * index: Pr[L > eps] <= min{1, inf_{0 <= a < eps} delta(a)/(1 - e^(a-eps))}
 * (the infimum is searched numerically; every a tried gives a valid bound).
 * *exact (may be NULL) receives Pr[L > eps] of the augmented release that
 * also reveals the route, computed from the mixture directly. */
MESS_API int mess_account_pld_tail(const mess_account_pld *pld, double eps,
                                   double *bound, double *exact);

/* Largest and mean aggregate distance of the mixture. */
MESS_API int mess_account_pld_support(const mess_account_pld *pld, uint64_t *u_max,
                                      double *u_mean);

typedef struct mess_account_stored_result {
    uint32_t size;   /* sizeof as the caller compiled it (set by the call;
                        mess.h, "Growable structs") */
    double eta;      /* eta_D = ln((1 - p_D) / p_D) */
    uint64_t u_max;  /* D_D: sum of the t largest distances (or of all, fixed) */
    double u_mean;   /* mean aggregate distance under the route distribution */
    double xi_pure;  /* eta_D * D_D: pure XDP of Theorem 5.2 */
    double xi_pld;   /* pair-specific XDP at delta0 (Corollary 5.3) */
} mess_account_stored_result;
/* First layout: every field above. */
#define MESS_ACCOUNT_STORED_RESULT_MIN_SIZE \
    (offsetof(mess_account_stored_result, xi_pld) + sizeof(double))
MESS_API size_t mess_sizeof_account_stored_result(void);

/* Stored-data accountant for one challenge pair with per-shard fixed-hash
 * distances d[0..m-1]:
 *   fixed = 0: uniform t-of-m route (w from mess_account_route_weights);
 *   fixed = 1: identifier-fixed route, d lists the t realized shards (t = m),
 *              w is a point mass at their sum.
 * delta0 in [MESS_ACCOUNT_MIN_DELTA, 1).  *out is filled within out_size
 * bytes (the macro passes sizeof(mess_account_stored_result)). */
MESS_API int mess_account_stored_sized(double p_store, const uint32_t *d, size_t m,
                                       size_t t, int fixed, double delta0,
                                       mess_account_stored_result *out,
                                       size_t out_size);
#define mess_account_stored(p_store, d, m, t, fixed, delta0, out) \
    mess_account_stored_sized((p_store), (d), (m), (t), (fixed), (delta0), \
                              (out), sizeof(mess_account_stored_result))

/* Version history of one id (docs/PRIVACY.md, "Versions of an item"): the
 * storage coins are a PRF of (shard, id), two per position whatever the
 * number of versions, so a history of any number v >= 2 of versions is
 * randomized response on d[s] + changed[s] bits of shard s, where the two
 * challenge histories differ by the same mask in every version, d[s] bits
 * of it in shard s, and changed[s] <= d[s] of those positions change
 * within the history (NULL: all of them, the worst case: 2 d[s]).  Fills
 * *out as mess_account_stored does for the distances d[s] + changed[s]
 * (xi_pure, xi_pld at delta0, route uniform or fixed); v = 1 is
 * changed = 0.  Which positions change is not covered: see
 * mess_account_version_bits. */
MESS_API int mess_account_versions_sized(double p_store, const uint32_t *d,
                                         const uint32_t *changed, size_t m,
                                         size_t t, int fixed, double delta0,
                                         mess_account_stored_result *out,
                                         size_t out_size);
#define mess_account_versions(p_store, d, changed, m, t, fixed, delta0, out) \
    mess_account_versions_sized((p_store), (d), (changed), (m), (t), (fixed), \
                                (delta0), (out), sizeof(mess_account_stored_result))

/* Per position of an updated id, flip p_store in (0, 1/2]:
 *   *eta_changed  2 eta_D, the pure loss of a position that changes within
 *                 the history (two reports), for any number of versions;
 *   *shown        (1-p)^2 + p^2, the probability that a changed clean bit
 *                 shows as a changed stored bit (unchanged ones never do);
 *   *read_error   p^2 / ((1-p)^2 + p^2) = 1 / (1 + e^(2 eta_D)), the error
 *                 of reading such a stored bit as the clean bit, in every
 *                 version: the least error 2 eta_D allows.
 * Any pointer may be NULL. */
MESS_API int mess_account_version_bits(double p_store, double *eta_changed,
                                       double *shown, double *read_error);

/* The bottom line for one client's parameters (docs/PRIVACY.md, "The bottom
 * line"): a short paragraph in plain words (what the server sees; what it
 * cannot conclude: reading code bits, telling an item or a query from a
 * near one, repeated queries; what it can: near items linkable within a
 * shard, updates, deletes), each sentence with the number computed by the
 * accountants above, then one JSON line with those numbers.  Pairs are
 * modelled with random hyperplanes: each bit of two codes differs with
 * probability `angle` (the normalised angle d_theta, in (0, 1/2]; the
 * paper's near radius is 0.05); delta0 is the delta of the item's xi_pld.
 * "Tells apart with probability" is (1 + TV) / 2, TV the total variation
 * between the two views (the profile at eps = 0), the best guess between
 * two equally likely inputs.  p must pass mess_params_check with p_store
 * and the effective query flip in (0, 1/2].  text: room for cap bytes
 * (NUL-terminated), or NULL to learn *len, the length without the NUL
 * (MESS_ELIMIT if cap <= *len). */
MESS_API int mess_account_summary(const mess_params *p, double angle, double delta0,
                                  char *text, size_t cap, size_t *len);

/* Access-pattern parameter of Theorem 5.4 for PRR flip a and IRR flip b in
 * [0, 1/2] (not both 0) and R >= 1 submissions of one logical query:
 *   eta_R = ln(((1-a)(1-b)^R + a b^R) / (a(1-b)^R + (1-a) b^R)),
 * evaluated in closed form in log space (O(1) for any R).  The complete
 * access transcript is eta_R-XDP w.r.t. D_Q; xi_AP = eta_R * D_Q. */
MESS_API int mess_account_access(double p_prr, double p_irr, uint64_t repeats,
                                 double *eta_r);

/* Search-pattern parameters of Theorem 5.5: gamma_eq (same clean bit,
 * shared vs fresh permanent report) and gamma_ne (different clean bits),
 * the largest |log-likelihood ratio| between reuse and split over all
 * report sequences, by exact enumeration of the sufficient statistics
 * (ones among the first R-1 reports, last report).  For R > 2^16 only
 * the two extreme counts are evaluated: the ratio is monotone in the count
 * (it is affine in the posterior of the permanent bit), so this is exact.
 * p_prr in [0, 1/2], p_irr in (0, 1/2], R >= 1 (R = 1: gamma_eq = 0 and
 * gamma_ne = eta_1). */
MESS_API int mess_account_search(double p_prr, double p_irr, uint64_t repeats,
                                 double *gamma_eq, double *gamma_ne);

/* xi_SP = (K_Q - u) gamma_eq + u gamma_ne and the uniform ordinary-DP bound
 * K_Q max(gamma_eq, gamma_ne) (Theorem 5.5) for K_Q = bits contacted
 * (sum of kappa over contacted shards) and u = D_Q <= K_Q. */
MESS_API int mess_account_search_xi(double p_prr, double p_irr, uint64_t repeats,
                                    uint64_t bits, uint64_t distance, double *xi_sp,
                                    double *xi_uniform);

/* Random-hyperplane LSH case (Appendix A.2.6 regression value): kappa bits
 * each differing independently with probability d_theta in [0, 1], flip p.
 *   *xi_mixture: exact profile mixed over u ~ Binomial(kappa, d_theta),
 *                inverted at delta0 (what this accountant computes);
 *   *xi_chernoff: eta * kappa * a*, with a* > d_theta solving
 *                kappa KL(a* || d_theta) = ln(1/delta0) (the Chernoff
 *                relative-entropy tail of the distance at delta0, then
 *                pure XDP at that distance; reproduces the paper's 20.041
 *                for p = 0.21, kappa = 128, d_theta = 0.05, delta0 = 0.01).
 * Either pointer may be NULL. */
MESS_API int mess_account_random_lsh(double p, uint32_t kappa, double d_theta,
                                     double delta0, double *xi_mixture,
                                     double *xi_chernoff);

/* ------------------------------------------------------------------------
 * Correctness model (Proposition 4.1, Appendix B): predicted recall
 * ---------------------------------------------------------------------- */

/* p_plus = p_D (1 - p_q) + p_q (1 - p_D): storage and query flips compound. */
MESS_API int mess_plan_compound_flip(double p_store, double p_query, double *p_plus);

/* Gaussian overtaking probability of Proposition 4.1: a background item at
 * clean distance d overtakes a target at clean distance d_star,
 *   Phi((d_star - d)(1 - 2 p_plus) / sqrt(2 kappa p_plus (1 - p_plus))).
 * d, d_star <= kappa; p_plus in [0, 1/2] (0: a step, 1/2 at a tie). */
MESS_API int mess_plan_overtake(uint32_t kappa, double p_plus, uint32_t d_star,
                                uint32_t d, double *prob);

/* Poisson-binomial shard rank of Proposition B.1: count[d], d = 0..kappa,
 * is the number of background items (target excluded) at clean distance d
 * in the whole database; occupancy = t/M scales it to one shard.
 *   *mean = 1 + occupancy sum_d count[d] P(d),
 *   *var  = occupancy sum_d count[d] P(d) (1 - P(d)). */
MESS_API int mess_plan_rank(uint32_t kappa, double p_plus, uint32_t d_star,
                            const double *count, double occupancy, double *mean,
                            double *var);

/* P_hit(P) = Phi((P + 1/2 - mean) / sqrt(var)) for a per-shard budget P
 * (continuity correction 1/2); var = 0 gives a step. */
MESS_API int mess_plan_hit(double mean, double var, double budget, double *prob);

/* Aggregate recovery 1 - prod_s (1 - p_hit[s]) over an item's n shards. */
MESS_API int mess_plan_recovery(const double *p_hit, size_t n, double *prob);

/* The same averaged over a uniform t-of-m route (what a planner who does
 * not fix the identifier expects): E_S[1 - prod_{s in S}(1 - p_hit[s])]. */
MESS_API int mess_plan_recovery_uniform(const double *p_hit, size_t m, size_t t,
                                        double *prob);

/* The conditional refinement (MESS_PLAN_CONDITIONAL below).  Proposition
 * 4.1 treats the overtaking events of one target as independent, but they
 * all compare against the same perturbed target distance X; conditioning
 * on it restores that correlation:
 *   Pr[X = x | d] = (Binomial(d, 1-p_plus) * Binomial(kappa-d, p_plus))(x)
 * (the distance law of the proof of Proposition 4.1, convolved exactly),
 * an item at clean distance d overtakes with F_d(x) = Pr[X_d < x] +
 * Pr[X_d = x]/2, and P_hit = sum_x Pr[X = x | d_star] Phi((P + 1/2 - 1 -
 * mu(x)) / sigma(x)) with mu(x), sigma(x)^2 the Poisson-binomial moments
 * of the F_d(x) (occupancy-scaled counts as in mess_plan_rank).
 * kappa <= MESS_PLAN_MAX_CONDITIONAL_BITS (tables are (kappa+1)^2). */
#define MESS_PLAN_PAPER        0  /* Proposition 4.1 / Appendix B as stated */
#define MESS_PLAN_CONDITIONAL  1  /* conditioned on the target's perturbed distance */
#define MESS_PLAN_MAX_CONDITIONAL_BITS 1024
MESS_API size_t mess_plan_max_conditional_bits(void);

/* pmf[x] = Pr[perturbed distance = x | clean distance d], x = 0..kappa. */
MESS_API int mess_plan_distance_pmf(uint32_t kappa, double p_plus, uint32_t d,
                                    double *pmf);

/* P_hit of the conditional model for one shard: count[] and occupancy as in
 * mess_plan_rank (target excluded), budget P >= 0. */
MESS_API int mess_plan_hit_conditional(uint32_t kappa, double p_plus, uint32_t d_star,
                                       const double *count, double occupancy,
                                       double budget, double *prob);

/* Predicted Recall@k for candidate pools pools[0..npools-1] (total B split
 * over the M shards as the protocol does), from the client's own clean
 * codes: nothing here leaves the client.
 *   data:    the n x dim vectors the client stores;
 *   queries: nq x dim sample of queries;
 *   truth:   nq x k indices into data of each query's exact top-k, or NULL
 *            to compute them here with the client's metric;
 *   recall:  npools outputs, the mean over queries and targets of the
 *            aggregate recovery probability (route averaged);
 *   threads: workers (0 = 1).
 * Uses p_D, p_q = mess_effective_flip(p_PRR, p_IRR), M, t, kappa of the
 * client.  This is Proposition 4.1 / Appendix B as the paper states it;
 * it treats a target's overtaking events as independent and is strongly
 * pessimistic at small pools on the bundled SIFT set, where the
 * conditional model of mess_plan_recall_model comes close to measured
 * recall (docs/PRIVACY.md compares both). */
MESS_API int mess_plan_recall(const mess_client *c, const float *data, size_t n,
                              const float *queries, size_t nq,
                              const uint32_t *truth, size_t k, const size_t *pools,
                              size_t npools, unsigned threads, double *recall);

/* The same with a choice of model: MESS_PLAN_PAPER (what mess_plan_recall
 * computes) or MESS_PLAN_CONDITIONAL (closer to measured recall; see
 * docs/PRIVACY.md). */
MESS_API int mess_plan_recall_model(const mess_client *c, int model, const float *data,
                                    size_t n, const float *queries, size_t nq,
                                    const uint32_t *truth, size_t k, const size_t *pools,
                                    size_t npools, unsigned threads, double *recall);

/* The search check.  The two models above assume each shard returns its
 * exact top-P by perturbed Hamming distance.  The server searches an HNSW
 * graph with beam ef = max(P, ef_search); where that beam is too narrow for
 * the data (sentence embeddings at small P: docs/TEXT.md) it returns less,
 * and the models are optimistic.  mess_plan_recall_search rebuilds
 * check_shards shards locally as the server would hold them (round(n t/M)
 * items: the targets of the first check_queries queries plus a uniform
 * sample, storage-perturbed; queries perturbed with p_q; the server's HNSW
 * parameters), measures per budget P the share eff(P) of targets in a
 * shard's exact top-P that the HNSW search returns (ties split as an exact
 * search would), and evaluates the model at the budget eff(P) P.  Coins
 * come from a fixed local seed (repeatable; nothing leaves the client).
 * This correction treats the search's misses as independent across shards
 * and is pessimistic where eff is far below 1 (docs/TEXT.md: on the bundled
 * SIFT set measured recall lies between the two curves).  search == NULL or
 * check_shards == 0: no check (mess_plan_recall_model). */
#define MESS_PLAN_MAX_CHECK_SHARDS 64
MESS_API size_t mess_plan_max_check_shards(void);
struct mess_plan_search {
    uint32_t size;          /* sizeof(struct mess_plan_search) as the caller
                               compiled it: set it before the call
                               (mess.h, "Growable structs") */
    uint32_t ef_search;     /* the server's beam floor (its ef_search) */
    uint32_t check_shards;  /* shards rebuilt, 0..MESS_PLAN_MAX_CHECK_SHARDS
                               (more than M: M); 0 = no check */
    uint32_t check_queries; /* queries of the sample the check uses (0: 100) */
    double *eff;            /* npools: receives eff(B) (may be NULL) */
    double *recall_exact;   /* npools: receives the curve without the check
                               (exact per-shard search; may be NULL) */
};
/* First layout: up to check_queries (eff and recall_exact are optional:
 * NULL when absent). */
#define MESS_PLAN_SEARCH_MIN_SIZE offsetof(struct mess_plan_search, eff)

MESS_API int mess_plan_recall_search(const mess_client *c, int model, const float *data,
                                     size_t n, const float *queries, size_t nq,
                                     const uint32_t *truth, size_t k, const size_t *pools,
                                     size_t npools, struct mess_plan_search *search,
                                     unsigned threads, double *recall);

/* ------------------------------------------------------------------------
 * Configuration from the client's data (`mess plan --target-recall`,
 * `mess init --target-recall | --max-bytes`, Python's Params.for_data)
 *
 * Searches configurations for the fewest bytes per query reaching a
 * Recall@k target, or for the highest predicted recall within a byte
 * budget, under privacy limits.  For every M in grid_shards, t in
 * grid_per_item (t <= M) and kappa in grid_bits a candidate takes the
 * least noise its limits allow, in the accountants' units (nats) for a
 * reference pair whose codes differ in 1/128 of the bits of every shard
 * (a pair's distance in bits grows with kappa), eta(p) = ln((1-p)/p):
 *
 *   p_D: the smallest flip with  eta(p_D) t kappa / 128 <= X  (Theorem 5.2)
 *   p_q: the smallest flip with  eta(p_q) M kappa / 128 <= Y and
 *        eta(a) M kappa / 128 <= Y_cap, a = p_PRR = p_IRR (the split of
 *        p_q; the bound for any number of submissions of one query)
 *   both: eta(p) kappa / 128 <= Z for p = p_D and p = p_q (one shard's
 *        code of an item or a query: the per-shard noise floor)
 *
 * (Theorem 5.4 for the access pattern).  The defaults (a limit of 0) are
 * the paper's configuration's values (M 64, t 16, kappa 128, p_D = p_q =
 * 0.08): X = 39.08, Y = 156.3, Y_cap = 200.6, Z = 2.442, so a choice is at
 * privacy no worse than the defaults' in these units (real pairs can
 * differ: check one with `mess account report`); Z = INFINITY drops the
 * floor.  No flip goes below 1e-12.  Each candidate's hashes are trained
 * on `train`; its recall curve over `pools` is the conditional model with
 * the search check (mess_plan_recall_search, MESS_PLAN_CONDITIONAL) on
 * `data` and `queries`, and its bytes at a pool are mess_request_size +
 * mess_response_size.  Nothing leaves the client.
 *
 * Payloads: with choose_payload 0 every candidate uses base's encoding.
 * With 1, data whose every component is an integer in [0, 255] uses u8
 * (exact, the fewest bytes); other data weighs f32, f16 and i8: the
 * "payload recall" of an encoding is the Recall@k of an exact search over
 * the data sample as that encoding decodes it (the client's rerank sees
 * the decoded vectors), a candidate's predicted recall with it is the
 * model's times the payload recall, and the encoding giving the fewest
 * bytes (target) or the highest recall (budget) is taken.
 * ---------------------------------------------------------------------- */

/* The defaults' limits: lim[0..3] = X, Y, Y_cap, Z (computed from
 * mess_params_default's flips). */
MESS_API void mess_plan_default_limits(double lim[4]);

/* The limit that set a flip (the least noise that limit allows was the
 * largest among the limits'). */
#define MESS_PLAN_BOUND_FLOOR 0  /* none: the 1e-12 floor */
#define MESS_PLAN_BOUND_STORE 1  /* X, stored data */
#define MESS_PLAN_BOUND_QUERY 2  /* Y, one submission */
#define MESS_PLAN_BOUND_CAP   3  /* Y_cap, any number of submissions */
#define MESS_PLAN_BOUND_SHARD 4  /* Z, one shard */

typedef struct mess_plan_candidate {
    uint32_t size;          /* sizeof as the library compiled it */
    uint32_t shards;        /* M */
    uint32_t per_item;      /* t */
    uint32_t bits;          /* kappa */
    uint32_t payload;       /* MESS_PAYLOAD_* of the bytes and recall below */
    uint32_t store_bound;   /* MESS_PLAN_BOUND_* that set p_store */
    uint32_t query_bound;   /* MESS_PLAN_BOUND_* that set p_prr */
    double p_store;         /* p_D */
    double p_query;         /* p_q = mess_effective_flip(p_prr, p_prr) */
    double p_prr;           /* p_PRR = p_IRR */
    double xi_store, xi_query, xi_cap, xi_shard; /* the four bounds above */
    size_t pool;            /* B: the first pool reaching the target (target),
                               the best within the budget (budget); 0: none */
    double recall;          /* predicted Recall@k at pool (with pool 0: the
                               highest along the curve) */
    double bytes;           /* request + response at pool (with pool 0: at the
                               pool of `recall`) */
    const double *curve;    /* npools: the model's curve (payload recall not
                               applied); valid during on_candidate only */
} mess_plan_candidate;

struct mess_plan_choose_in {
    uint32_t size;            /* sizeof(struct mess_plan_choose_in) as the
                                 caller compiled it: set it (mess.h,
                                 "Growable structs") */
    uint32_t k;               /* recall depth, 1..n */
    const mess_params *base;  /* dim, metric, payload, hnsw_m,
                                 ef_construction, ef_search, train_sample;
                                 the search sets M, t, kappa and the flips */
    const float *train;       /* ntrain x dim: hash training set */
    size_t ntrain;
    const float *data;        /* n x dim: (a sample of) the data stored */
    size_t n;
    const float *queries;     /* nq x dim: a sample of queries */
    size_t nq;
    const uint32_t *truth;    /* nq x k exact top-k indices into data, or
                                 NULL: computed here with base's metric */
    double target_recall;     /* in (0, 1); 0 with max_bytes */
    double max_bytes;         /* byte budget per query (> 0); 0 with a target */
    double max_xi;            /* X (0: 39.08, the defaults') */
    double max_xi_query;      /* Y (0: 156.3) */
    double max_xi_cap;        /* Y_cap (0: 200.6) */
    double max_xi_shard;      /* Z (0: 2.442; INFINITY: no floor) */
    const uint32_t *grid_shards;   /* M values (NULL: 16, 32, 64) */
    size_t n_grid_shards;
    const uint32_t *grid_per_item; /* t values (NULL: 4, 8, 16) */
    size_t n_grid_per_item;
    const uint32_t *grid_bits;     /* kappa values, multiples of 64 up to
                                      MESS_PLAN_MAX_CONDITIONAL_BITS (NULL:
                                      64, 128, 256) */
    size_t n_grid_bits;
    const size_t *pools;      /* B values in the order tried (NULL: 250, 500,
                                 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000) */
    size_t npools;
    uint32_t check_shards;    /* the search check's shards (0: no check) */
    uint32_t check_queries;   /* queries it uses (0: 100) */
    uint32_t choose_payload;  /* 1: choose the encoding (above); 0: base's */
    uint32_t threads;         /* workers (0 = 1) */
    const uint8_t *seed;      /* 32 bytes: deterministic hashes; NULL: random */
    /* called after each candidate (may be NULL), in grid order (M, then
     * kappa, then t) */
    void (*on_candidate)(void *ctx, const mess_plan_candidate *c);
    void *ctx;
};
/* First layout: every field above. */
#define MESS_PLAN_CHOOSE_IN_MIN_SIZE \
    (offsetof(struct mess_plan_choose_in, ctx) + sizeof(void *))

typedef struct mess_plan_choice {
    uint32_t size;            /* sizeof as the caller compiled it (set by the
                                 call) */
    uint32_t found;           /* 1: best reaches the target / fits the budget */
    size_t candidates;        /* candidates evaluated */
    double max_xi, max_xi_query, max_xi_cap, max_xi_shard; /* limits used */
    double payload_recall[4]; /* per MESS_PAYLOAD_*: the payload recall
                                 (1 for f32 and u8; 0: not weighed) */
    mess_plan_candidate best; /* the winner; without one (found 0): with a
                                 target the candidate of the highest recall
                                 (fewest bytes among equals), with a budget
                                 the one of the fewest bytes at its smallest
                                 pool; curve is NULL */
    mess_params params;       /* best's parameters: base's with M, t, kappa,
                                 p_store, p_prr = p_irr and payload set */
} mess_plan_choice;
/* First layout: every field above. */
#define MESS_PLAN_CHOICE_MIN_SIZE \
    (offsetof(mess_plan_choice, params) + sizeof(mess_params))
MESS_API size_t mess_sizeof_plan_choice(void);

/* Fills *out within out_size bytes (the macro passes
 * sizeof(mess_plan_choice)).  MESS_OK with out->found = 1; MESS_ENOTFOUND
 * with found = 0 and best as described when no candidate reaches the
 * target or fits the budget (every pool tried); MESS_EINVAL for a NULL,
 * an empty or inconsistent input (not exactly one of target_recall and
 * max_bytes, k > n, t > every M, a kappa not a multiple of 64, a truth
 * index outside data), MESS_ELIMIT for a kappa above
 * MESS_PLAN_MAX_CONDITIONAL_BITS; a candidate whose flips the library
 * refuses (mess_params_check) is skipped.  Any other code: training a
 * candidate or its prediction failed (nothing written). */
MESS_API int mess_plan_choose_sized(const struct mess_plan_choose_in *in,
                                    mess_plan_choice *out, size_t out_size);
#define mess_plan_choose(in, out) \
    mess_plan_choose_sized((in), (out), sizeof(mess_plan_choice))

/* ------------------------------------------------------------------------
 * Memory and disk estimate (docs/EVALUATION.md, "Memory and disk per entry")
 *
 * What a server of parameters p holding `items` items (items x t entries)
 * needs, from the sizes of its real arrays and files; nothing is
 * allocated.  Expected values: the upper HNSW layers and the shards' sizes
 * are random (n_j ~ Binomial(items, t/M)), so a real server differs by a
 * few per cent at a few thousand entries per shard and by less above
 * (tests/test_estimate.c builds servers and checks the tolerances stated
 * there).  *_bytes are totals over all shards; *_per_entry divide by
 * entries (0 when there are none).
 * ---------------------------------------------------------------------- */
typedef struct mess_estimate_result {
    uint32_t size;            /* sizeof as the caller compiled it (set by the
                                 call; mess.h, "Growable structs") */
    uint32_t payload_bytes;   /* ciphertext per entry (mess_payload_size) */
    uint64_t items;           /* as asked */
    uint64_t entries;         /* items x t */
    double shard_entries;     /* mean entries per shard: entries / M */
    /* hot: what a search reads, held in memory or in the page cache */
    uint64_t code_bytes;      /* perturbed codes, kappa/8 per entry */
    uint64_t label_bytes;     /* labels, 16 per entry */
    uint64_t link_bytes;      /* levels, deleted flags, HNSW links (all layers) */
    uint64_t map_bytes;       /* label -> node maps (inserts, deletes) */
    uint64_t resident_bytes;  /* the shards' graph files (page-aligned
                                 sections of the terms above): the hot set
                                 of a file-backed server */
    /* cold: read only for the entries a search returns */
    uint64_t arena_bytes;     /* payload arenas, entries x payload_bytes */
    uint64_t disk_bytes;      /* the server directory after a checkpoint:
                                 graph files, arenas, manifest */
    uint64_t travel_bytes;    /* the exported (travel) file, at most: full
                                 link lists and zstd's worst case; zstd
                                 usually saves 5-10% with f32 payloads */
    uint64_t memory_bytes;    /* the whole server in memory as
                                 mess_server_load leaves it (what
                                 mess_server_stats reports as bytes) */
    double resident_per_entry;
    double disk_per_entry;
    double memory_per_entry;
} mess_estimate_result;
/* First layout: every field above. */
#define MESS_ESTIMATE_RESULT_MIN_SIZE \
    (offsetof(mess_estimate_result, memory_per_entry) + sizeof(double))
MESS_API size_t mess_sizeof_estimate_result(void);

/* Fills *out within out_size bytes (the macro passes
 * sizeof(mess_estimate_result)).  MESS_EINVAL for NULL or invalid
 * parameters; MESS_ELIMIT if a shard could not hold its share or items x t
 * reaches 2^53. */
MESS_API int mess_estimate_sized(const mess_params *p, uint64_t items,
                                 mess_estimate_result *out, size_t out_size);
#define mess_estimate(p, items, out) \
    mess_estimate_sized((p), (items), (out), sizeof(mess_estimate_result))

/* ------------------------------------------------------------------------
 * Page-cache advice for server directories
 *
 * How mess_server_open and mess_server_checkpoint advise the kernel
 * (posix_madvise) about the mappings of a directory's graph files and
 * payload arenas: a mask of the flags below, process-wide, read by every
 * later open and checkpoint (servers already open keep theirs).  Meant for
 * measurements (eval/onem.py cold; docs/PROTOCOL.md "Open time" has them
 * and the reason for MESS_ADVICE_DEFAULT, what every server gets unless
 * this is called).  mess_server_verify reads every page and takes none.
 * ---------------------------------------------------------------------- */
/* graph mapping: random access (no readahead) while attaching, normal after */
#define MESS_ADVICE_GRAPH_RANDOM_OPEN 0x01u
/* graph mapping: random access for good */
#define MESS_ADVICE_GRAPH_RANDOM 0x02u
/* arena mapping: random access for good */
#define MESS_ADVICE_ARENA_RANDOM 0x04u
/* after attaching, read in the background: the levels, upper-link offsets
 * and upper links (what every search's descent reads) */
#define MESS_ADVICE_GRAPH_WILLNEED_UPPER 0x08u
/* after the open, read the whole graph files in the background (on a
 * thread of the open's; only the upper layers' sections when the graphs
 * are more than half of physical memory).  A process forked while that
 * thread runs has its memory but not the thread: the child does not read
 * in, and the thread's block is never freed there. */
#define MESS_ADVICE_GRAPH_WILLNEED 0x10u
#define MESS_ADVICE_DEFAULT \
    (MESS_ADVICE_GRAPH_RANDOM_OPEN | MESS_ADVICE_ARENA_RANDOM | MESS_ADVICE_GRAPH_WILLNEED)

/* Sets the mask (0: no advice, the kernel's readahead everywhere); the
 * previous one goes to *previous (may be NULL).  MESS_EINVAL for an
 * unknown bit (nothing changes). */
MESS_API int mess_server_set_advice(unsigned mask, unsigned *previous);

#ifdef __cplusplus
}
#endif
#endif /* MESS_EXPERIMENTAL_H */
