/*
 * isohash.c - per-shard PCA + isotropic rotation (Lift-and-Projection):
 * training through LAPACK and BLAS (dsyrk, dsyevr, dgeqrf, dorgqr); hashing by a
 * vectorized projection loop of its own (isohash_hash, isohash_hash_all),
 * with the BLAS sgemv / sgemm variants kept as the reference it is
 * measured against (`mess bench encode`).
 */
#include <cblas.h>
#include <math.h>
#include <sodium.h>

#include "isohash.h"
#include "parallel.h"
#include "rng.h"
#include "simd.h"

/* LAPACK, Fortran interface (trailing hidden lengths of character args). */
extern void dsyevr_(const char *jobz, const char *range, const char *uplo,
                    const int *n, double *a, const int *lda, const double *vl,
                    const double *vu, const int *il, const int *iu,
                    const double *abstol, int *m, double *w, double *z,
                    const int *ldz, int *isuppz, double *work,
                    const int *lwork, int *iwork, const int *liwork, int *info,
                    size_t, size_t, size_t);
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda,
                    double *tau, double *work, const int *lwork, int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a,
                    const int *lda, const double *tau, double *work,
                    const int *lwork, int *info);

struct isohash {
    uint32_t dim, kappa, shards;
    float *proj;        /* dim x (shards * kappa), row-major: all P_j side by side */
    float *bias;        /* shards * kappa: mu_j . P_j[:, i] */
    double *residual;   /* per shard: relative, see isohash_residual */
    double *target;     /* per shard: the mean variance lambda-bar */
    uint32_t *iters;    /* per shard */
};

uint32_t isohash_dim(const struct isohash *h) { return h->dim; }
uint32_t isohash_kappa(const struct isohash *h) { return h->kappa; }
uint32_t isohash_shards(const struct isohash *h) { return h->shards; }
uint32_t isohash_words(const struct isohash *h) { return h->kappa / 64; }

double isohash_residual(const struct isohash *h, uint32_t shard)
{
    return shard < h->shards ? h->residual[shard] : NAN;
}

double isohash_target_variance(const struct isohash *h, uint32_t shard)
{
    return shard < h->shards ? h->target[shard] : NAN;
}

uint32_t isohash_iterations(const struct isohash *h, uint32_t shard)
{
    return shard < h->shards ? h->iters[shard] : 0;
}

const float *isohash_projection(const struct isohash *h, uint32_t shard,
                                size_t *stride_out)
{
    if (stride_out)
        *stride_out = (size_t)h->shards * h->kappa;
    return shard < h->shards ? h->proj + (size_t)shard * h->kappa : NULL;
}

void isohash_free(struct isohash *h)
{
    if (!h)
        return;
    free(h->proj);
    free(h->bias);
    free(h->residual);
    free(h->target);
    free(h->iters);
    free(h);
}

static struct isohash *alloc_hash(uint32_t dim, uint32_t kappa, uint32_t shards)
{
    struct isohash *h = (struct isohash *)calloc(1, sizeof *h);
    size_t cols = (size_t)shards * kappa;
    if (!h)
        return NULL;
    h->dim = dim;
    h->kappa = kappa;
    h->shards = shards;
    h->proj = (float *)mess_malloc_array((size_t)dim * cols, sizeof(float));
    h->bias = (float *)mess_malloc_array(cols, sizeof(float));
    h->residual = (double *)mess_calloc_array(shards, sizeof(double));
    h->target = (double *)mess_calloc_array(shards, sizeof(double));
    h->iters = (uint32_t *)mess_calloc_array(shards, sizeof(uint32_t));
    if (!h->proj || !h->bias || !h->residual || !h->target || !h->iters) {
        isohash_free(h);
        return NULL;
    }
    return h;
}

/* Symmetric eigen-decomposition of the n x n matrix a (destroyed): the
 * eigenvalues il..iu (1-based, ascending) into w, vectors into z (n x m,
 * column-major). */
static int eig_range(int n, double *a, int il, int iu, double *w, double *z)
{
    int m = 0, info = 0, lwork = -1, liwork = -1, iwq = 0;
    double wq = 0, vl = 0, vu = 0, abstol = 0;
    int *isuppz = (int *)mess_malloc_array(2 * (size_t)n, sizeof(int));
    double *work;
    int *iwork;
    const char *range = (il == 1 && iu == n) ? "A" : "I";
    if (!isuppz)
        return MESS_ENOMEM;
    dsyevr_("V", range, "U", &n, a, &n, &vl, &vu, &il, &iu, &abstol, &m, w, z,
            &n, isuppz, &wq, &lwork, &iwq, &liwork, &info, 1, 1, 1);
    if (info != 0) {
        free(isuppz);
        return MESS_ENUMERIC;
    }
    lwork = (int)wq;
    liwork = iwq;
    work = (double *)mess_malloc_array((size_t)lwork, sizeof(double));
    iwork = (int *)mess_malloc_array((size_t)liwork, sizeof(int));
    if (!work || !iwork) {
        free(isuppz);
        free(work);
        free(iwork);
        return MESS_ENOMEM;
    }
    dsyevr_("V", range, "U", &n, a, &n, &vl, &vu, &il, &iu, &abstol, &m, w, z,
            &n, isuppz, work, &lwork, iwork, &liwork, &info, 1, 1, 1);
    free(isuppz);
    free(work);
    free(iwork);
    return (info == 0 && m == iu - il + 1) ? MESS_OK : MESS_ENUMERIC;
}

/* Haar-random orthogonal k x k (column-major) into q: QR of a Gaussian
 * matrix with the signs of R's diagonal folded into Q (Mezzadri 2007). */
static int haar_orthogonal(struct mess_rng *r, int k, double *q)
{
    double *tau = (double *)mess_malloc_array((size_t)k, sizeof(double));
    double *diag = (double *)mess_malloc_array((size_t)k, sizeof(double));
    double wq = 0, *work = NULL;
    int info = 0, lwork = -1, i, j;
    if (!tau || !diag) {
        free(tau);
        free(diag);
        return MESS_ENOMEM;
    }
    for (i = 0; i < k * k; i++)
        q[i] = mess_rng_gaussian(r);
    dgeqrf_(&k, &k, q, &k, tau, &wq, &lwork, &info);
    lwork = (int)wq;
    work = (double *)mess_malloc_array((size_t)lwork, sizeof(double));
    if (!work || info != 0) {
        free(tau);
        free(diag);
        free(work);
        return work ? MESS_ENUMERIC : MESS_ENOMEM;
    }
    dgeqrf_(&k, &k, q, &k, tau, work, &lwork, &info);
    for (i = 0; i < k; i++)
        diag[i] = q[i + (size_t)i * k];
    if (info == 0)
        dorgqr_(&k, &k, &k, q, &k, tau, work, &lwork, &info);
    free(work);
    free(tau);
    if (info != 0) {
        free(diag);
        return MESS_ENUMERIC;
    }
    for (j = 0; j < k; j++)
        if (diag[j] < 0)
            for (i = 0; i < k; i++)
                q[i + (size_t)j * k] = -q[i + (size_t)j * k];
    free(diag);
    return MESS_OK;
}

/* z = v diag(lam) v^T for k x k column-major v. */
static void congruence(int k, const double *v, const double *lam, double *z)
{
    int i, j, c;
    for (j = 0; j < k; j++)
        for (i = j; i < k; i++) {
            double s = 0;
            for (c = 0; c < k; c++)
                s += v[i + (size_t)c * k] * lam[c] * v[j + (size_t)c * k];
            z[i + (size_t)j * k] = s;
            z[j + (size_t)i * k] = s;
        }
}

static double diag_residual(int k, const double *z, double mean)
{
    double worst = 0;
    int i;
    for (i = 0; i < k; i++) {
        double e = fabs(z[i + (size_t)i * k] - mean);
        if (e > worst)
            worst = e;
    }
    return mean > 0 ? worst / mean : worst;
}

/* Lift-and-Projection (Kong & Li 2012, section 3.2): alternate between the
 * matrices with the target diagonal (lift: overwrite the diagonal) and the
 * matrices with spectrum lam (project: keep the eigenvectors, restore the
 * eigenvalues).  v (k x k, column-major) enters as the random start
 * Q0^T and leaves as V with diag(V lam V^T) ~ mean; then Q = V^T.
 * lam is descending. */
static int lift_and_project(int k, const double *lam, double *v, double tol,
                            uint32_t max_iter, double *residual,
                            uint32_t *iters)
{
    double *z = (double *)mess_malloc_array((size_t)k * k, sizeof(double));
    double *u = (double *)mess_malloc_array((size_t)k * k, sizeof(double));
    double *w = (double *)mess_malloc_array((size_t)k, sizeof(double));
    double mean = 0;
    uint32_t it = 0;
    int i, j, rc = MESS_OK;

    if (!z || !u || !w) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (i = 0; i < k; i++)
        mean += lam[i] / k;
    congruence(k, v, lam, z);
    *residual = diag_residual(k, z, mean);
    while (*residual > tol && it < max_iter) {
        for (i = 0; i < k; i++)
            z[i + (size_t)i * k] = mean; /* lift */
        rc = eig_range(k, z, 1, k, w, u); /* ascending */
        if (rc != MESS_OK)
            goto done;
        /* project: V's column i is the eigenvector of the i-th largest */
        for (j = 0; j < k; j++)
            memcpy(v + (size_t)j * k, u + (size_t)(k - 1 - j) * k,
                   (size_t)k * sizeof(double));
        congruence(k, v, lam, z);
        *residual = diag_residual(k, z, mean);
        it++;
    }
    *iters = it;
done:
    free(z);
    free(u);
    free(w);
    return rc;
}

/* PCA of one subsample: mean and top-kappa eigenpairs (descending). */
struct pca {
    double *mean;  /* d */
    double *lam;   /* kappa, descending */
    double *vec;   /* d x kappa column-major, column i <-> lam[i] */
};

static void pca_free(struct pca *p)
{
    free(p->mean);
    free(p->lam);
    free(p->vec);
    memset(p, 0, sizeof *p);
}

#define COV_CHUNK 256

/* Mean and top-k eigenpairs (descending) of the covariance of the rows
 * rows[0..m) of x (all of x when rows is NULL).  The covariance is
 * accumulated in double by BLAS dsyrk over chunks of centred rows. */
static int pca_compute(const float *x, uint32_t d, uint32_t k,
                       const uint32_t *rows, size_t m, struct pca *out)
{
    double *cov = (double *)mess_calloc_array((size_t)d * d, sizeof(double));
    double *c = (double *)mess_malloc_array((size_t)COV_CHUNK * d, sizeof(double));
    double *w = (double *)mess_malloc_array(d, sizeof(double));
    double *z = (double *)mess_malloc_array((size_t)d * k, sizeof(double));
    size_t s, b;
    uint32_t i, j;
    int rc;

    memset(out, 0, sizeof *out);
    out->mean = (double *)mess_calloc_array(d, sizeof(double));
    out->lam = (double *)mess_malloc_array(k, sizeof(double));
    out->vec = (double *)mess_malloc_array((size_t)d * k, sizeof(double));
    if (!cov || !c || !w || !z || !out->mean || !out->lam || !out->vec) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (s = 0; s < m; s++) {
        const float *row = x + (size_t)(rows ? rows[s] : s) * d;
        for (i = 0; i < d; i++)
            out->mean[i] += row[i];
    }
    for (i = 0; i < d; i++)
        out->mean[i] /= (double)m;
    for (s = 0; s < m; s += COV_CHUNK) {
        size_t nb = m - s < COV_CHUNK ? m - s : COV_CHUNK;
        for (b = 0; b < nb; b++) {
            const float *row = x + (size_t)(rows ? rows[s + b] : s + b) * d;
            for (i = 0; i < d; i++)
                c[b * d + i] = row[i] - out->mean[i];
        }
        /* c is d x nb column-major: cov += c c^T, upper triangle */
        cblas_dsyrk(CblasColMajor, CblasUpper, CblasNoTrans, (int)d, (int)nb,
                    1.0, c, (int)d, 1.0, cov, (int)d);
    }
    for (j = 0; j < d; j++)
        for (i = 0; i <= j; i++)
            cov[i + (size_t)j * d] /= (double)m;
    rc = eig_range((int)d, cov, (int)(d - k + 1), (int)d, w, z);
    if (rc != MESS_OK)
        goto done;
    for (i = 0; i < k; i++) {
        out->lam[i] = w[k - 1 - i] > 0 ? w[k - 1 - i] : 0;
        memcpy(out->vec + (size_t)i * d, z + (size_t)(k - 1 - i) * d,
               (size_t)d * sizeof(double));
    }
done:
    free(cov);
    free(c);
    free(w);
    free(z);
    if (rc != MESS_OK)
        pca_free(out);
    return rc;
}

struct train_job {
    const struct isohash_params *p;
    const float *x;
    size_t n, m;
    uint32_t block;           /* columns per rotation block, <= dim */
    const struct pca *shared; /* when every shard uses the whole set */
    struct isohash *h;
    double tol;
    uint32_t max_iter;
};

/* Writes columns [c0, c0 + nc) of shard j's P and bias: P = W V^T
 * restricted to the first nc columns of the rotated block (v is
 * kb x kb column-major, W is dim x kb). */
static void store_block(struct isohash *h, uint32_t j, uint32_t c0,
                        uint32_t nc, const struct pca *pc, uint32_t kb,
                        const double *v)
{
    const uint32_t d = h->dim;
    const size_t cols = (size_t)h->shards * h->kappa;
    const size_t off = (size_t)j * h->kappa + c0;
    uint32_t r, c, a;
    /* P[r][c] = sum_a W[r][a] Q[a][c] with Q = V^T, Q[a][c] = V[c][a] */
    for (r = 0; r < d; r++)
        for (c = 0; c < nc; c++) {
            double s = 0;
            for (a = 0; a < kb; a++)
                s += pc->vec[r + (size_t)a * d] * v[c + (size_t)a * kb];
            h->proj[(size_t)r * cols + off + c] = (float)s;
        }
}

/* Random hyperplanes (Charikar's SimHash), centred on the subsample mean:
 * the data-independent baseline of the quality comparison. */
static void store_hyperplanes(struct isohash *h, uint32_t j,
                              struct mess_rng *rng)
{
    const size_t cols = (size_t)h->shards * h->kappa;
    uint32_t r, c;
    for (r = 0; r < h->dim; r++)
        for (c = 0; c < h->kappa; c++)
            h->proj[(size_t)r * cols + (size_t)j * h->kappa + c] =
                (float)mess_rng_gaussian(rng);
}

static int train_shard(void *ctx, size_t jj, unsigned worker)
{
    struct train_job *t = (struct train_job *)ctx;
    const uint32_t d = t->p->dim, k = t->p->kappa, kb = t->block,
                   j = (uint32_t)jj;
    struct isohash *h = t->h;
    struct mess_rng rng;
    struct pca own, *pc;
    uint32_t *rows = NULL;
    double *v = NULL;
    size_t cols = (size_t)h->shards * k, i;
    uint32_t r, c, c0;
    int rc;
    (void)worker;

    memset(&own, 0, sizeof own);
    rc = mess_rng_init(&rng, t->p->seed, jj);
    if (rc != MESS_OK)
        return rc;
    if (t->shared) {
        pc = (struct pca *)t->shared;
    } else {
        /* seeded subsample: partial Fisher-Yates over the row indices */
        uint32_t *all = (uint32_t *)mess_malloc_array(t->n, sizeof(uint32_t));
        if (!all) {
            rc = MESS_ENOMEM;
            goto done;
        }
        for (i = 0; i < t->n; i++)
            all[i] = (uint32_t)i;
        for (i = 0; i < t->m; i++) {
            size_t pick = i + mess_rng_below(&rng, (uint32_t)(t->n - i));
            uint32_t tmp = all[i];
            all[i] = all[pick];
            all[pick] = tmp;
        }
        rows = all;
        rc = pca_compute(t->x, d, kb, rows, t->m, &own);
        if (rc != MESS_OK)
            goto done;
        pc = &own;
    }
    h->target[j] = 0;
    for (c = 0; c < kb; c++)
        h->target[j] += pc->lam[c] / kb;
    h->residual[j] = 0;
    h->iters[j] = 0;
    if (t->p->rotation == ISOHASH_HYPERPLANES) {
        store_hyperplanes(h, j, &rng);
        h->residual[j] = NAN;
    } else {
        v = (double *)mess_malloc_array((size_t)kb * kb, sizeof(double));
        if (!v) {
            rc = MESS_ENOMEM;
            goto done;
        }
        /* kappa > dim: stacked blocks of kb bits, each its own rotation of
         * the same top-kb principal subspace (the last block truncated) */
        for (c0 = 0; c0 < k; c0 += kb) {
            uint32_t nc = k - c0 < kb ? k - c0 : kb, it = 0;
            double res = 0;
            if (t->p->rotation == ISOHASH_PCA) {
                memset(v, 0, (size_t)kb * kb * sizeof(double));
                for (c = 0; c < kb; c++)
                    v[c + (size_t)c * kb] = 1.0;
            } else {
                rc = haar_orthogonal(&rng, (int)kb, v);
                if (rc != MESS_OK)
                    goto done;
            }
            rc = lift_and_project((int)kb, pc->lam, v, t->tol,
                                  t->p->rotation == ISOHASH_LP ? t->max_iter : 0,
                                  &res, &it);
            if (rc != MESS_OK)
                goto done;
            if (res > h->residual[j])
                h->residual[j] = res;
            if (it > h->iters[j])
                h->iters[j] = it;
            store_block(h, j, c0, nc, pc, kb, v);
        }
    }
    for (c = 0; c < k; c++) {
        double s = 0;
        for (r = 0; r < d; r++)
            s += pc->mean[r] * h->proj[(size_t)r * cols + (size_t)j * k + c];
        h->bias[(size_t)j * k + c] = (float)s;
    }
done:
    mess_rng_wipe(&rng);
    pca_free(&own);
    free(rows);
    free(v);
    return rc;
}

int isohash_train(const struct isohash_params *p, const float *train,
                  size_t n, struct isohash **out)
{
    struct train_job t;
    struct pca shared;
    struct isohash *h;
    size_t i, total;
    uint32_t blocks;
    int rc;

    if (!p || !train || !out)
        return MESS_EINVAL;
    *out = NULL;
    if (p->dim == 0 || p->kappa == 0 || p->kappa % 64 != 0 ||
        p->shards == 0 || n < 2 || p->rotation < ISOHASH_LP ||
        p->rotation > ISOHASH_HYPERPLANES || !(p->tol >= 0))
        return MESS_EINVAL;
    /* without a rotation, bits beyond the dim principal axes would repeat */
    if (p->kappa > p->dim && p->rotation == ISOHASH_PCA)
        return MESS_EINVAL;
    if (p->dim > MESS_MAX_DIM || p->kappa > MESS_MAX_BITS ||
        p->shards > MESS_MAX_SHARDS || n > UINT32_MAX)
        return MESS_ELIMIT;
    if (mess_mul_size(n, p->dim, &total) != MESS_OK)
        return MESS_ELIMIT;
    for (i = 0; i < total; i++)
        if (!isfinite(train[i]))
            return MESS_EINVAL;
    h = alloc_hash(p->dim, p->kappa, p->shards);
    if (!h)
        return MESS_ENOMEM;
    memset(&t, 0, sizeof t);
    t.p = p;
    t.x = train;
    t.n = n;
    t.m = p->sample ? p->sample : ISOHASH_DEFAULT_SAMPLE;
    if (t.m > n)
        t.m = n;
    blocks = (p->kappa + p->dim - 1) / p->dim;
    t.block = (p->kappa + blocks - 1) / blocks;
    t.h = h;
    t.tol = p->tol > 0 ? p->tol : ISOHASH_DEFAULT_TOL;
    t.max_iter = p->max_iter ? p->max_iter : ISOHASH_DEFAULT_MAX_ITER;
    memset(&shared, 0, sizeof shared);
    if (t.m == n) {
        /* every shard sees the whole set: one PCA serves all; the random
         * rotations still differ per shard */
        rc = pca_compute(train, p->dim, t.block, NULL, n, &shared);
        if (rc != MESS_OK) {
            isohash_free(h);
            return rc;
        }
        t.shared = &shared;
    }
    rc = parallel_for(p->shards, p->threads, train_shard, &t);
    pca_free(&shared);
    if (rc != MESS_OK) {
        isohash_free(h);
        return rc;
    }
    *out = h;
    return MESS_OK;
}

/* Packs y[i] > b[i] for i < kappa into words. */
static void pack_bits(const float *y, const float *b, uint32_t kappa,
                      uint64_t *code)
{
    uint32_t w, i;
    for (w = 0; w < kappa / 64; w++) {
        uint64_t word = 0;
        for (i = 0; i < 64; i++)
            word |= (uint64_t)(y[w * 64 + i] > b[w * 64 + i]) << i;
        code[w] = word;
    }
}

/* y[0..cols) = x^T p for a row-major dim x cols matrix p with row stride
 * ld, as row updates (y += x_i p_i) that the compiler vectorizes (GCC
 * needs the vectorizer asked for at -O2).  The sums are those of the
 * reference BLAS sgemv / sgemm, in the same order, and about 3x faster than
 * Debian's reference BLAS (`mess bench encode`, docs/ENCODING.md). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void project_base(const float *restrict p, size_t ld,
                         const float *restrict x, size_t dim, size_t cols,
                         float *restrict y)
{
    size_t i, c;
    memset(y, 0, cols * sizeof(float));
    for (i = 0; i < dim; i++) {
        const float *row = p + i * ld;
        const float xi = x[i];
        for (c = 0; c < cols; c++)
            y[c] += xi * row[c];
    }
}

/* The same product blocked by columns: a block of PROJ_ACC vectors of
 * columns stays in registers while all dim rows stream past it, so y is
 * written once instead of read and written dim times (the 4 MiB of
 * projections are then read at close to the rate of a plain read,
 * docs/PERFORMANCE.md).  Every y[c] is still 0 + x_0 p_0c + x_1 p_1c + ...
 * in that order, one rounded multiply and one rounded add per term
 * (separate intrinsics, never a fused multiply-add), so every bit equals
 * project_base's (tests/test_isohash.c compares both paths exactly). */
#ifdef MESS_SIMD_DISPATCH
#include <immintrin.h>
#define PROJ_DISPATCH 1
#define PROJ_ACC 16

#define PROJ_BODY(VEC, W, ZERO, SET1, LOAD, STORE, MUL, ADD)                   \
    {                                                                          \
        size_t i, c = 0, k;                                                    \
        for (; c + PROJ_ACC * (W) <= cols; c += PROJ_ACC * (W)) {              \
            VEC acc[PROJ_ACC];                                                 \
            _Pragma("GCC unroll 16") for (k = 0; k < PROJ_ACC; k++)           \
                acc[k] = ZERO();                                               \
            for (i = 0; i < dim; i++) {                                        \
                const float *row = p + i * ld + c;                             \
                VEC xi = SET1(x[i]);                                           \
                _Pragma("GCC unroll 16") for (k = 0; k < PROJ_ACC; k++)       \
                    acc[k] = ADD(acc[k], MUL(xi, LOAD(row + k * (W))));        \
            }                                                                  \
            _Pragma("GCC unroll 16") for (k = 0; k < PROJ_ACC; k++)           \
                STORE(y + c + k * (W), acc[k]);                                \
        }                                                                      \
        for (; c + (W) <= cols; c += (W)) {                                    \
            VEC acc = ZERO();                                                  \
            for (i = 0; i < dim; i++)                                          \
                acc = ADD(acc, MUL(SET1(x[i]), LOAD(p + i * ld + c)));         \
            STORE(y + c, acc);                                                 \
        }                                                                      \
        for (; c < cols; c++) {                                                \
            float acc = 0.0f;                                                  \
            for (i = 0; i < dim; i++) {                                        \
                float t = x[i] * p[i * ld + c];                                \
                acc += t;                                                      \
            }                                                                  \
            y[c] = acc;                                                        \
        }                                                                      \
    }

__attribute__((target("avx512f"))) static void
project_avx512(const float *restrict p, size_t ld, const float *restrict x,
               size_t dim, size_t cols, float *restrict y)
    PROJ_BODY(__m512, 16, _mm512_setzero_ps, _mm512_set1_ps, _mm512_loadu_ps,
              _mm512_storeu_ps, _mm512_mul_ps, _mm512_add_ps)

__attribute__((target("avx2"))) static void
project_avx2(const float *restrict p, size_t ld, const float *restrict x,
             size_t dim, size_t cols, float *restrict y)
    PROJ_BODY(__m256, 8, _mm256_setzero_ps, _mm256_set1_ps, _mm256_loadu_ps,
              _mm256_storeu_ps, _mm256_mul_ps, _mm256_add_ps)
#endif

/* The choice: SIMD_PROJECT in simd.h. */
int isohash_project_isa(void)
{
    return simd_level(SIMD_PROJECT);
}

int isohash_project_force(int isa)
{
    return simd_force(SIMD_PROJECT, isa);
}

static void project(const float *restrict p, size_t ld, const float *restrict x,
                    size_t dim, size_t cols, float *restrict y)
{
#ifdef PROJ_DISPATCH
    switch (isohash_project_isa()) {
    case 2:
        project_avx512(p, ld, x, dim, cols, y);
        return;
    case 1:
        project_avx2(p, ld, x, dim, cols, y);
        return;
    default:
        break;
    }
#endif
    project_base(p, ld, x, dim, cols, y);
}

/* P_j as a contiguous dim x kappa matrix: the side-by-side rows are M kappa
 * floats apart, a stride that maps every row to the same L1 set at M = 64. */
static float *pack_shard(const struct isohash *h, uint32_t shard)
{
    size_t cols = (size_t)h->shards * h->kappa, r;
    float *pj = (float *)mess_malloc_array((size_t)h->dim * h->kappa,
                                           sizeof(float));
    if (pj)
        for (r = 0; r < h->dim; r++)
            memcpy(pj + r * h->kappa, h->proj + r * cols + (size_t)shard * h->kappa,
                   (size_t)h->kappa * sizeof(float));
    return pj;
}

int isohash_hash(const struct isohash *h, uint32_t shard, const float *x,
                 size_t nvec, uint64_t *codes)
{
    size_t i;
    float *y, *pj;
    uint32_t words;
    if (!h || !x || !codes || shard >= h->shards)
        return MESS_EINVAL;
    words = h->kappa / 64;
    y = (float *)mess_malloc_array(h->kappa, sizeof(float));
    pj = pack_shard(h, shard);
    if (!y || !pj) {
        free(y);
        free(pj);
        return MESS_ENOMEM;
    }
    for (i = 0; i < nvec; i++) {
        project(pj, h->kappa, x + i * h->dim, h->dim, h->kappa, y);
        pack_bits(y, h->bias + (size_t)shard * h->kappa, h->kappa,
                  codes + i * words);
    }
    sodium_memzero(y, (size_t)h->kappa * sizeof(float));
    free(y);
    free(pj);
    return MESS_OK;
}

/* The codes of x for all shards from one projection onto the stacked P_j:
 * the vectorized loop, or BLAS sgemv (the reference it is measured and
 * tested against). */
int isohash_project_all(const struct isohash *h, const float *x, float *y)
{
    if (!h || !x || !y)
        return MESS_EINVAL;
    project(h->proj, (size_t)h->shards * h->kappa, x, h->dim,
            (size_t)h->shards * h->kappa, y);
    return MESS_OK;
}

static int hash_all(const struct isohash *h, const float *x, uint64_t *codes,
                    int blas)
{
    size_t cols;
    uint32_t j, words;
    float *y;
    if (!h || !x || !codes)
        return MESS_EINVAL;
    cols = (size_t)h->shards * h->kappa;
    words = h->kappa / 64;
    y = (float *)mess_malloc_array(cols, sizeof(float));
    if (!y)
        return MESS_ENOMEM;
    if (blas)
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)h->dim, (int)cols, 1.0f,
                    h->proj, (int)cols, x, 1, 0.0f, y, 1);
    else
        project(h->proj, cols, x, h->dim, cols, y);
    for (j = 0; j < h->shards; j++)
        pack_bits(y + (size_t)j * h->kappa, h->bias + (size_t)j * h->kappa,
                  h->kappa, codes + (size_t)j * words);
    sodium_memzero(y, cols * sizeof(float));
    free(y);
    return MESS_OK;
}

int isohash_hash_all(const struct isohash *h, const float *x, uint64_t *codes)
{
    return hash_all(h, x, codes, 0);
}

#define HASH_CHUNK 512

int isohash_hash_sgemm(const struct isohash *h, uint32_t shard,
                       const float *x, size_t nvec, uint64_t *codes)
{
    size_t s, i;
    float *y, *pj;
    uint32_t words;
    if (!h || !x || !codes || shard >= h->shards)
        return MESS_EINVAL;
    words = h->kappa / 64;
    y = (float *)mess_malloc_array(HASH_CHUNK, (size_t)h->kappa * sizeof(float));
    pj = pack_shard(h, shard);
    if (!y || !pj) {
        free(y);
        free(pj);
        return MESS_ENOMEM;
    }
    for (s = 0; s < nvec; s += HASH_CHUNK) {
        size_t m = nvec - s < HASH_CHUNK ? nvec - s : HASH_CHUNK;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m,
                    (int)h->kappa, (int)h->dim, 1.0f, x + s * h->dim,
                    (int)h->dim, pj, (int)h->kappa, 0.0f, y, (int)h->kappa);
        for (i = 0; i < m; i++)
            pack_bits(y + i * h->kappa, h->bias + (size_t)shard * h->kappa,
                      h->kappa, codes + (s + i) * words);
    }
    sodium_memzero(y, HASH_CHUNK * (size_t)h->kappa * sizeof(float));
    free(y);
    free(pj);
    return MESS_OK;
}

int isohash_hash_all_sgemv(const struct isohash *h, const float *x,
                           uint64_t *codes)
{
    return hash_all(h, x, codes, 1);
}

/* Serialized: u32 dim | u32 kappa | u32 shards | proj (dim x M kappa f32)
 *             | bias (M kappa f32)
 *             | M x (f64 residual | f64 target variance | u32 iterations) */
static void wr_f32(struct mess_wr *w, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    mess_wr_u32(w, u);
}

int isohash_serialize(const struct isohash *h, struct mess_wr *w)
{
    size_t cols, i;
    uint32_t j;
    if (!h || !w)
        return MESS_EINVAL;
    cols = (size_t)h->shards * h->kappa;
    mess_wr_u32(w, h->dim);
    mess_wr_u32(w, h->kappa);
    mess_wr_u32(w, h->shards);
    for (i = 0; i < (size_t)h->dim * cols; i++)
        wr_f32(w, h->proj[i]);
    for (i = 0; i < cols; i++)
        wr_f32(w, h->bias[i]);
    for (j = 0; j < h->shards; j++) {
        uint64_t u;
        memcpy(&u, &h->residual[j], 8);
        mess_wr_u64(w, u);
        memcpy(&u, &h->target[j], 8);
        mess_wr_u64(w, u);
        mess_wr_u32(w, h->iters[j]);
    }
    return w->err;
}

int isohash_deserialize(struct mess_rd *r, struct isohash **out)
{
    uint32_t dim, kappa, shards, j;
    size_t cols, nproj, need, i;
    struct isohash *h;

    if (!r || !out)
        return MESS_EINVAL;
    *out = NULL;
    if (mess_rd_u32(r, &dim) || mess_rd_u32(r, &kappa) || mess_rd_u32(r, &shards))
        return MESS_EFORMAT;
    if (dim == 0 || dim > MESS_MAX_DIM || kappa == 0 || kappa % 64 != 0 ||
        kappa > MESS_MAX_BITS || shards == 0 ||
        shards > MESS_MAX_SHARDS)
        return MESS_EFORMAT;
    cols = (size_t)shards * kappa;
    if (mess_mul_size(dim, cols, &nproj) != MESS_OK)
        return MESS_EFORMAT;
    /* every byte must be present before anything is allocated */
    need = (nproj + cols) * 4 + (size_t)shards * 20;
    if (need > mess_rd_left(r))
        return MESS_EFORMAT;
    h = alloc_hash(dim, kappa, shards);
    if (!h)
        return MESS_ENOMEM;
    for (i = 0; i < nproj + cols; i++) {
        uint32_t u = 0;
        float f;
        mess_rd_u32(r, &u);
        memcpy(&f, &u, 4);
        if (!isfinite(f)) {
            isohash_free(h);
            return MESS_EFORMAT;
        }
        if (i < nproj)
            h->proj[i] = f;
        else
            h->bias[i - nproj] = f;
    }
    for (j = 0; j < shards; j++) {
        uint64_t u = 0;
        mess_rd_u64(r, &u);
        memcpy(&h->residual[j], &u, 8);
        mess_rd_u64(r, &u);
        memcpy(&h->target[j], &u, 8);
        mess_rd_u32(r, &h->iters[j]);
    }
    *out = h;
    return MESS_OK;
}
