/*
 * bench_encode.c - `mess bench encode`: the client-side encoding.
 *
 * Throughput (default): IsoHash training time, hashing vectors/s for all M
 * shards (per vector or per shard over a batch; vectorized loops vs BLAS
 * sgemv / sgemm), and
 * storage-side randomized response bits/s over 10^6 codes for the three
 * exact samplers, as ratios to the one-uniform-per-bit reference.
 *
 * --quality: on a TEXMEX set with ground truth, the recall of exact Hamming
 * top-P against the true L2 top-10, for IsoHash and its baselines, with and
 * without randomized response.  The numbers of docs/ENCODING.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hnsw_bin.h"
#include "isohash.h"
#include "lshrr.h"
#include "bench.h"

struct data {
    float *base, *query, *learn;
    int32_t *gt;
    size_t nb, nq, nl, ngt, dim, kgt;
};

static void data_free(struct data *d)
{
    mess_vecs_free(d->base);
    mess_vecs_free(d->query);
    mess_vecs_free(d->learn);
    mess_vecs_free(d->gt);
    memset(d, 0, sizeof *d);
}

static int data_load(const char *dir, int with_gt, struct data *d)
{
    size_t dq, dl;
    char path[4096];
    int rc;
    memset(d, 0, sizeof *d);
    if (cli_read_set(dir, "base", &d->base, &d->nb, &d->dim) ||
        cli_read_set(dir, "query", &d->query, &d->nq, &dq) ||
        cli_read_set(dir, "learn", &d->learn, &d->nl, &dl))
        goto fail;
    if (dq != d->dim || dl != d->dim) {
        cli_error("%s: base, query and learn dimensions differ", dir);
        goto fail;
    }
    if (with_gt) {
        snprintf(path, sizeof path, "%s/groundtruth.ivecs", dir);
        rc = mess_ivecs_read(path, &d->gt, &d->ngt, &d->kgt);
        if (rc != MESS_OK) {
            cli_error("%s: %s", path, mess_strerror(rc));
            goto fail;
        }
        if (d->ngt != d->nq || d->kgt < 10) {
            cli_error("%s: want >= 10 ids for each of the %zu queries", path,
                      d->nq);
            goto fail;
        }
    }
    return 0;
fail:
    data_free(d);
    return -1;
}

static int train(const struct data *d, uint32_t kappa, uint32_t shards,
                 int rotation, unsigned threads, uint8_t seed_byte,
                 struct isohash **h)
{
    struct isohash_params p;
    int rc;
    memset(&p, 0, sizeof p);
    p.dim = (uint32_t)d->dim;
    p.kappa = kappa;
    p.shards = shards;
    p.threads = threads;
    p.rotation = rotation;
    memset(p.seed, seed_byte, sizeof p.seed);
    rc = isohash_train(&p, d->learn, d->nl, h);
    if (rc != MESS_OK)
        cli_error("training (kappa %u, M %u): %s", kappa, shards,
                  mess_strerror(rc));
    return rc;
}

/* ------------------------------------------------------------------------
 * Throughput
 * ---------------------------------------------------------------------- */

typedef int (*flip_fn)(struct mess_rng *, uint64_t *, uint32_t, double);

enum gen_mode { GEN_ONE, GEN_SEEDED_PER_CODE, GEN_CSPRNG_PER_CODE };

/* Seconds to perturb n codes of kappa bits. */
static double time_flips(flip_fn f, enum gen_mode mode, uint64_t *codes,
                         size_t n, uint32_t kappa, double p)
{
    static const uint8_t seed[32] = {1, 2, 3};
    struct mess_rng r;
    size_t i, words = kappa / 64;
    double t0 = cli_wall_s();
    mess_rng_init(&r, mode == GEN_CSPRNG_PER_CODE ? NULL : seed, 0);
    for (i = 0; i < n; i++) {
        if (mode == GEN_SEEDED_PER_CODE)
            mess_rng_init(&r, seed, i);
        else if (mode == GEN_CSPRNG_PER_CODE)
            mess_rng_init(&r, NULL, 0);
        f(&r, codes + i * words, kappa, p);
    }
    mess_rng_wipe(&r);
    return cli_wall_s() - t0;
}

static int run_throughput(const struct data *d, uint32_t kappa,
                          uint32_t shards, unsigned threads, size_t ncodes,
                          double p_store)
{
    static const double ps[] = {0.01, 0.08, 0.21, 0.5};
    static const struct {
        const char *name;
        flip_fn fn;
    } samplers[] = {
        {"threshold", lshrr_flip_threshold},
        {"bitsliced", lshrr_flip},
        {"geometric", lshrr_flip_geometric},
    };
    struct isohash *h = NULL;
    uint64_t *codes = NULL;
    size_t words = kappa / 64, i, nvec, done;
    double t0, t_train, t_hash[4], rate[4][3], t_seeded, t_csprng,
        t_one, t_seeded_thr;
    uint32_t j, it_min = UINT32_MAX, it_max = 0;
    double res_max = 0;
    int rc = MESS_OK, s, k, round;

    t0 = cli_wall_s();
    if (train(d, kappa, shards, ISOHASH_LP, threads, 0x42, &h))
        return CLI_FAIL;
    t_train = cli_wall_s() - t0;
    for (j = 0; j < shards; j++) {
        uint32_t it = isohash_iterations(h, j);
        it_min = it < it_min ? it : it_min;
        it_max = it > it_max ? it : it_max;
        if (isohash_residual(h, j) > res_max)
            res_max = isohash_residual(h, j);
    }
    printf("# IsoHash: %zu training rows, d %zu, kappa %u, M %u, %u threads\n",
           d->nl, d->dim, kappa, shards, threads);
    printf("train: %.2f s (%.3f s per shard per thread), LP iterations %u..%u, "
           "max relative residual %.2e\n",
           t_train, t_train * threads / shards, it_min, it_max, res_max);

    /* hashing the base vectors (at most 100,000) into all M shards, two ways */
    nvec = d->nb < 100000 ? d->nb : 100000;
    codes = (uint64_t *)malloc(nvec * shards * words * 8 > ncodes * words * 8
                                   ? nvec * shards * words * 8
                                   : ncodes * words * 8);
    if (!codes) {
        isohash_free(h);
        cli_error("out of memory");
        return CLI_FAIL;
    }
    /* best of 3 alternating rounds (the machine may be shared) of four
     * ways: per vector into all shards (loop, sgemv), per shard over the
     * batch (loop, sgemm) */
    for (k = 0; k < 4; k++)
        t_hash[k] = INFINITY;
    for (round = 0; round < 3 && rc == MESS_OK; round++)
        for (k = 0; k < 4 && rc == MESS_OK; k++) {
            double t;
            t0 = cli_wall_s();
            if (k < 2) {
                done = 0;
                while (rc == MESS_OK && (done < 64 || cli_wall_s() - t0 < 0.3)) {
                    i = done % nvec;
                    rc = (k == 0 ? isohash_hash_all : isohash_hash_all_sgemv)(
                        h, d->base + i * d->dim, codes + i * shards * words);
                    done++;
                }
                t = (cli_wall_s() - t0) / (double)done;
            } else {
                for (j = 0; j < shards && rc == MESS_OK; j++)
                    rc = (k == 2 ? isohash_hash : isohash_hash_sgemm)(
                        h, j, d->base, nvec, codes + j * nvec * words);
                t = (cli_wall_s() - t0) / (double)nvec;
            }
            t_hash[k] = t < t_hash[k] ? t : t_hash[k];
        }
    if (rc != MESS_OK) {
        cli_error("hashing: %s", mess_strerror(rc));
        free(codes);
        isohash_free(h);
        return CLI_FAIL;
    }
    printf("# hashing into all %u shards, vectors/s (best of 3); ratios to "
           "BLAS sgemv per vector\n", shards);
    printf("per vector, BLAS sgemv (isohash_hash_all_sgemv)   %10.0f  1.00\n"
           "per vector, vectorized loop (isohash_hash_all)    %10.0f  %.2f\n"
           "per shard over %6zu, BLAS sgemm (isohash_hash_sgemm) %7.0f  %.2f\n"
           "per shard over %6zu, vectorized loop (isohash_hash)  %7.0f  %.2f\n",
           1.0 / t_hash[1], 1.0 / t_hash[0], t_hash[1] / t_hash[0], nvec,
           1.0 / t_hash[3], t_hash[1] / t_hash[3], nvec, 1.0 / t_hash[2],
           t_hash[1] / t_hash[2]);

    /* storage-side randomized response over ncodes codes */
    printf("# randomized response, %zu codes x %u bits, one generator, best "
           "of 2; ratios to threshold\n",
           ncodes, kappa);
    printf("%-6s %14s %14s %8s %14s %8s\n", "p", "threshold b/s",
           "bitsliced b/s", "ratio", "geometric b/s", "ratio");
    for (s = 0; s < 4; s++) {
        for (k = 0; k < 3; k++)
            rate[s][k] = 0;
        for (round = 0; round < 2; round++)
            for (k = 0; k < 3; k++) {
                double r;
                memset(codes, 0, ncodes * words * 8);
                r = (double)ncodes * kappa /
                    time_flips(samplers[k].fn, GEN_ONE, codes, ncodes, kappa,
                               ps[s]);
                rate[s][k] = r > rate[s][k] ? r : rate[s][k];
            }
        printf("%-6.2f %14.3g %14.3g %8.2f %14.3g %8.2f\n", ps[s], rate[s][0],
               rate[s][1], rate[s][1] / rate[s][0], rate[s][2],
               rate[s][2] / rate[s][0]);
    }
    /* the protocol keys one generator per (item, shard) code */
    memset(codes, 0, ncodes * words * 8);
    t_one = time_flips(lshrr_flip, GEN_ONE, codes, ncodes, kappa, p_store);
    t_seeded = time_flips(lshrr_flip, GEN_SEEDED_PER_CODE, codes, ncodes,
                          kappa, p_store);
    t_seeded_thr = time_flips(lshrr_flip_threshold, GEN_SEEDED_PER_CODE, codes,
                              ncodes, kappa, p_store);
    t_csprng = time_flips(lshrr_flip, GEN_CSPRNG_PER_CODE, codes, ncodes / 10,
                          kappa, p_store) * 10;
    printf("# p = %.2f, a generator per code (as the protocol's insert): "
           "ratios to one generator\n", p_store);
    printf("bitsliced, one generator:           %10.3g b/s  1.00\n",
           (double)ncodes * kappa / t_one);
    printf("bitsliced, seeded per code:         %10.3g b/s  %.2f\n",
           (double)ncodes * kappa / t_seeded, t_one / t_seeded);
    printf("threshold, seeded per code:         %10.3g b/s  %.2f\n",
           (double)ncodes * kappa / t_seeded_thr, t_one / t_seeded_thr);
    printf("bitsliced, CSPRNG-keyed per code:   %10.3g b/s  %.2f  (%zu codes)\n",
           (double)ncodes * kappa / t_csprng, t_one / t_csprng, ncodes / 10);

    printf("{\"bench\":\"encode\",\"dim\":%zu,\"kappa\":%u,\"shards\":%u,"
           "\"train_s\":%.3f,\"lp_iter_max\":%u,\"lp_residual_max\":%.3g,"
           "\"hash_all_sgemv_vps\":%.1f,\"hash_all_loop_vps\":%.1f,"
           "\"hash_bulk_sgemm_vps\":%.1f,\"hash_bulk_loop_vps\":%.1f,"
           "\"codes\":%zu,\"flip\":[",
           d->dim, kappa, shards, t_train, it_max, res_max, 1.0 / t_hash[1],
           1.0 / t_hash[0], 1.0 / t_hash[3], 1.0 / t_hash[2], ncodes);
    for (s = 0; s < 4; s++)
        printf("%s{\"p\":%g,\"threshold_bps\":%.4g,\"bitsliced_bps\":%.4g,"
               "\"geometric_bps\":%.4g}",
               s ? "," : "", ps[s], rate[s][0], rate[s][1], rate[s][2]);
    printf("],\"per_code_seeded_over_one\":%.3f,"
           "\"per_code_csprng_over_one\":%.3f}\n",
           t_one / t_seeded, t_one / t_csprng);
    free(codes);
    isohash_free(h);
    return CLI_OK;
}

/* ------------------------------------------------------------------------
 * Quality: recall of exact Hamming top-P against the L2 top-10
 * ---------------------------------------------------------------------- */

#define NP 3
static const size_t pools[NP] = {10, 100, 1000};

/* Expected number of the 10 true neighbours among the Hamming top-P of one query, ties at the cut broken
 * uniformly at random (computed exactly, not sampled). */
static void recall_one(const uint64_t *qc, const uint64_t *bc, size_t nb,
                       uint32_t words, uint32_t kappa, const int32_t *gt,
                       uint32_t *dist, size_t *hist, double *hits)
{
    size_t i, t;
    memset(hist, 0, (kappa + 1) * sizeof *hist);
    hnsw_hamming_many(qc, bc, nb, words, dist); /* POPCNT chosen at run time */
    for (i = 0; i < nb; i++)
        hist[dist[i]]++;
    for (t = 0; t < NP; t++) {
        size_t P = pools[t] < nb ? pools[t] : nb, below = 0;
        uint32_t cut = 0;
        int g;
        while (below + hist[cut] < P)
            below += hist[cut++];
        hits[t] = 0;
        for (g = 0; g < 10; g++) {
            uint32_t dg = dist[gt[g]];
            if (dg < cut)
                hits[t] += 1;
            else if (dg == cut)
                hits[t] += (double)(P - below) / (double)hist[cut];
        }
    }
}

/* Mean recall over queries for one trained hash, clean (pflip 0) or with
 * base and query codes flipped with probability pflip. */
static int recall_of(const struct data *d, const struct isohash *h,
                     double pflip, uint8_t seed_byte, double *recall)
{
    uint32_t kappa = isohash_kappa(h), words = kappa / 64;
    uint64_t *bc = (uint64_t *)malloc(d->nb * words * 8);
    uint64_t *qc = (uint64_t *)malloc(d->nq * words * 8);
    uint32_t *dist = (uint32_t *)malloc(d->nb * sizeof *dist);
    size_t *hist = (size_t *)malloc((kappa + 1) * sizeof *hist);
    uint8_t seed[32];
    struct mess_rng r;
    size_t i, t;
    int rc;
    if (!bc || !qc || !dist || !hist) {
        rc = MESS_ENOMEM;
        goto done;
    }
    rc = isohash_hash(h, 0, d->base, d->nb, bc);
    if (rc == MESS_OK)
        rc = isohash_hash(h, 0, d->query, d->nq, qc);
    if (rc != MESS_OK)
        goto done;
    if (pflip > 0) {
        memset(seed, seed_byte, sizeof seed);
        mess_rng_init(&r, seed, 1);
        for (i = 0; i < d->nb && rc == MESS_OK; i++)
            rc = lshrr_flip(&r, bc + i * words, kappa, pflip);
        for (i = 0; i < d->nq && rc == MESS_OK; i++)
            rc = lshrr_flip(&r, qc + i * words, kappa, pflip);
        mess_rng_wipe(&r);
        if (rc != MESS_OK)
            goto done;
    }
    for (t = 0; t < NP; t++)
        recall[t] = 0;
    for (i = 0; i < d->nq; i++) {
        double hits[NP];
        recall_one(qc + i * words, bc, d->nb, words, kappa,
                   d->gt + i * d->kgt, dist, hist, hits);
        for (t = 0; t < NP; t++)
            recall[t] += hits[t] / 10.0 / (double)d->nq;
    }
done:
    free(bc);
    free(qc);
    free(dist);
    free(hist);
    return rc;
}

static int run_quality(const struct data *d, double pflip, int reps,
                       unsigned threads)
{
    static const uint32_t kappas[] = {64, 128, 256};
    static const struct {
        const char *name;
        int rotation;
    } methods[] = {
        {"isohash", ISOHASH_LP},
        {"pca", ISOHASH_PCA},
        {"random-rotation", ISOHASH_RANDOM},
        {"hyperplanes", ISOHASH_HYPERPLANES},
    };
    double res[3][4][2][NP], sq[2][NP], sd;
    size_t i, t;
    int k, m, noisy, rep, first = 1;

    for (i = 0; i < d->nq; i++)
        for (k = 0; k < 10; k++)
            if (d->gt[i * d->kgt + k] < 0 ||
                (size_t)d->gt[i * d->kgt + k] >= d->nb) {
                cli_error("groundtruth.ivecs row %zu names item %d, outside the "
                          "%zu base vectors", i, (int)d->gt[i * d->kgt + k], d->nb);
                return CLI_FAIL;
            }
    printf("# recall of exact Hamming top-P against the L2 top-10: base %zu, "
           "queries %zu, trained on learn (%zu rows, disjoint from base), "
           "mean of %d seeds; flips: base and query codes with p = %.2f\n",
           d->nb, d->nq, d->nl, reps, pflip);
    printf("%-16s %5s | %7s %7s %7s | %7s %7s %7s | %6s\n", "method", "kappa",
           "P=10", "P=100", "P=1000", "RR P=10", "P=100", "P=1000", "sd<=");
    for (k = 0; k < 3; k++)
        for (m = 0; m < 4; m++) {
            int ok = !(kappas[k] > d->dim && methods[m].rotation == ISOHASH_PCA);
            memset(res[k][m], 0, sizeof res[k][m]);
            memset(sq, 0, sizeof sq);
            for (rep = 0; ok && rep < reps; rep++) {
                struct isohash *h = NULL;
                if (train(d, kappas[k], 1, methods[m].rotation, threads,
                          (uint8_t)(0x10 + rep), &h))
                    return CLI_FAIL;
                for (noisy = 0; noisy < 2; noisy++) {
                    double r[NP];
                    if (recall_of(d, h, noisy ? pflip : 0.0,
                                  (uint8_t)(0x80 + rep), r) != MESS_OK) {
                        isohash_free(h);
                        cli_error("out of memory");
                        return CLI_FAIL;
                    }
                    for (t = 0; t < NP; t++) {
                        res[k][m][noisy][t] += r[t] / reps;
                        sq[noisy][t] += r[t] * r[t] / reps;
                    }
                }
                isohash_free(h);
            }
            if (!ok) {
                printf("%-16s %5u |     n/a (kappa > d: no rotation, no "
                       "new axes)\n", methods[m].name, kappas[k]);
                continue;
            }
            /* the largest standard deviation over seeds of the row */
            sd = 0;
            for (noisy = 0; noisy < 2; noisy++)
                for (t = 0; t < NP; t++) {
                    double v = sq[noisy][t] - res[k][m][noisy][t] * res[k][m][noisy][t];
                    v = v > 0 && reps > 1 ? sqrt(v * reps / (reps - 1)) : 0;
                    sd = v > sd ? v : sd;
                }
            printf("%-16s %5u | %7.3f %7.3f %7.3f | %7.3f %7.3f %7.3f | %6.3f\n",
                   methods[m].name, kappas[k], res[k][m][0][0],
                   res[k][m][0][1], res[k][m][0][2], res[k][m][1][0],
                   res[k][m][1][1], res[k][m][1][2], sd);
            fflush(stdout);
        }
    printf("{\"bench\":\"encode-quality\",\"base\":%zu,\"queries\":%zu,"
           "\"p\":%g,\"seeds\":%d,\"pools\":[10,100,1000],\"rows\":[",
           d->nb, d->nq, pflip, reps);
    for (k = 0; k < 3; k++)
        for (m = 0; m < 4; m++) {
            if (kappas[k] > d->dim && methods[m].rotation == ISOHASH_PCA)
                continue;
            printf("%s{\"method\":\"%s\",\"kappa\":%u,\"clean\":[%.4f,%.4f,%.4f],"
                   "\"rr\":[%.4f,%.4f,%.4f]}",
                   first ? "" : ",", methods[m].name, kappas[k],
                   res[k][m][0][0], res[k][m][0][1], res[k][m][0][2],
                   res[k][m][1][0], res[k][m][1][1], res[k][m][1][2]);
            first = 0;
        }
    printf("]}\n");
    return CLI_OK;
}

/* ------------------------------------------------------------------------
 * LP convergence: iterations and time against the tolerance
 * ---------------------------------------------------------------------- */

static int run_lp(const struct data *d)
{
    static const uint32_t kappas[] = {64, 128};
    static const double tols[] = {1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6};
    struct isohash_params p;
    int k, t, first = 1;
    char json[4096];
    size_t off = 0;

    printf("# Lift-and-Projection on %zu training rows (d %zu), one shard; "
           "residual = max |diag - mean| / mean\n", d->nl, d->dim);
    printf("%5s %8s %10s %12s %14s %8s\n", "kappa", "tol", "iterations",
           "residual", "abs residual", "time s");
    for (k = 0; k < 2; k++) {
        if (kappas[k] > d->dim)
            continue;
        for (t = 0; t < 6; t++) {
            struct isohash *h = NULL;
            double t0 = cli_wall_s(), dt;
            int rc;
            memset(&p, 0, sizeof p);
            p.dim = (uint32_t)d->dim;
            p.kappa = kappas[k];
            p.shards = 1;
            p.tol = tols[t];
            p.max_iter = 100000;
            memset(p.seed, 0x42, sizeof p.seed);
            rc = isohash_train(&p, d->learn, d->nl, &h);
            dt = cli_wall_s() - t0;
            if (rc != MESS_OK) {
                cli_error("training: %s", mess_strerror(rc));
                return CLI_FAIL;
            }
            printf("%5u %8.0e %10u %12.2e %14.3g %8.2f\n", kappas[k], tols[t],
                   isohash_iterations(h, 0), isohash_residual(h, 0),
                   isohash_residual(h, 0) * isohash_target_variance(h, 0), dt);
            if (off < sizeof json - 200)
                off += (size_t)snprintf(json + off, sizeof json - off,
                                        "%s{\"kappa\":%u,\"tol\":%g,"
                                        "\"iterations\":%u,\"residual\":%.3g,"
                                        "\"seconds\":%.3f}",
                                        first ? "" : ",", kappas[k], tols[t],
                                        isohash_iterations(h, 0),
                                        isohash_residual(h, 0), dt);
            first = 0;
            isohash_free(h);
        }
    }
    printf("{\"bench\":\"encode-lp\",\"rows\":[%s]}\n", json);
    return CLI_OK;
}

static void usage(void)
{
    printf("usage: mess bench encode [--data DIR] [--kappa K] [--shards M]\n"
           "                         [--codes N] [--p P] [--threads T]\n"
           "       mess bench encode --quality [--data DIR] [--p P] [--seeds R]\n"
           "                         [--queries Q]\n"
           "       mess bench encode --lp [--data DIR]\n\n"
           "Client-side encoding.  DIR holds base, query and learn (.bvecs or\n"
           ".fvecs) and, for --quality, groundtruth.ivecs (default\n"
           "datasets/sift).  IsoHash is trained on learn.\n\n"
           "  --kappa K    bits per shard (default 128)\n"
           "  --shards M   shards hashed per vector (default 16; the paper uses 64)\n"
           "  --codes N    codes perturbed per sampler (default 1000000)\n"
           "  --p P        flip probability (default 0.08, the paper's p_D)\n"
           "  --threads T  training threads (default 2)\n"
           "  --quality    recall of Hamming top-P for IsoHash, PCA, a random\n"
           "               rotation and random hyperplanes at kappa 64/128/256\n"
           "  --seeds R    training / flip seeds averaged by --quality (default 3)\n"
           "  --queries Q  --quality uses the first Q queries only (default all)\n"
           "  --lp         Lift-and-Projection iterations, residual and time\n"
           "               against the tolerance (1e-1 .. 1e-6)\n\n"
           "The last line of output is one JSON object.\n");
}

int bench_encode(int argc, char **argv)
{
    struct cli_args a;
    struct data d;
    const char *dir;
    long kappa, shards, ncodes, threads, seeds, queries;
    double p;
    int quality, lp, rc;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        usage();
        return CLI_OK;
    }
    dir = cli_opt(&a, "--data");
    if (!dir)
        dir = "datasets/sift";
    quality = cli_flag(&a, "--quality");
    lp = cli_flag(&a, "--lp");
    if (cli_opt_long(&a, "--kappa", 64, MESS_MAX_BITS, 128, &kappa) ||
        cli_opt_long(&a, "--shards", 1, MESS_MAX_SHARDS, 16, &shards) ||
        cli_opt_long(&a, "--codes", 1000, 100000000, 1000000, &ncodes) ||
        cli_opt_long(&a, "--threads", 1, 64, 2, &threads) ||
        cli_opt_long(&a, "--seeds", 1, 100, 3, &seeds) ||
        cli_opt_long(&a, "--queries", 0, 100000000, 0, &queries) ||
        cli_opt_double(&a, "--p", 0.0, 0.5, 0.08, &p) || cli_check_unused(&a))
        return CLI_USAGE;
    if (kappa % 64 != 0) {
        cli_error("--kappa: must be a multiple of 64");
        return CLI_USAGE;
    }
    if (quality && lp) {
        cli_error("--quality and --lp: one at a time");
        return CLI_USAGE;
    }
    if (data_load(dir, quality, &d))
        return CLI_FAIL;
    if (queries > 0 && (size_t)queries < d.nq)
        d.nq = (size_t)queries; /* the first ones */
    if (quality)
        rc = run_quality(&d, p, (int)seeds, (unsigned)threads);
    else if (lp)
        rc = run_lp(&d);
    else
        rc = run_throughput(&d, (uint32_t)kappa, (uint32_t)shards,
                            (unsigned)threads, (size_t)ncodes, p);
    data_free(&d);
    return rc;
}
