/*
 * metric.c - the exact distance of the three metrics, the one
 * implementation the client's rerank (client_finish.c) and the planner's
 * ground truth (planner.c) share.
 */
#include <math.h>

#include "metric.h"
#include "simd.h"

/* Sums of q.x, q.q and x.x (the last two only when `norms`) in double, over
 * four independent accumulators so the adds pipeline; the split is fixed,
 * so the result does not depend on the machine. */
static void dot3(const float *q, const float *x, uint32_t dim, int norms,
                 double out[3])
{
    double a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0}, c[4] = {0, 0, 0, 0};
    uint32_t i, l;
    for (i = 0; i + 4 <= dim; i += 4)
        for (l = 0; l < 4; l++) {
            a[l] += (double)q[i + l] * x[i + l];
            if (norms) {
                b[l] += (double)q[i + l] * q[i + l];
                c[l] += (double)x[i + l] * x[i + l];
            }
        }
    for (; i < dim; i++) {
        a[0] += (double)q[i] * x[i];
        if (norms) {
            b[0] += (double)q[i] * q[i];
            c[0] += (double)x[i] * x[i];
        }
    }
    out[0] = (a[0] + a[1]) + (a[2] + a[3]);
    out[1] = (b[0] + b[1]) + (b[2] + b[3]);
    out[2] = (c[0] + c[1]) + (c[2] + c[3]);
}

double metric_distance(uint32_t metric, const float *q, const float *x,
                       uint32_t dim)
{
    double s[3], acc[4] = {0, 0, 0, 0};
    uint32_t i, l;
    switch (metric) {
    case MESS_METRIC_IP:
        dot3(q, x, dim, 0, s);
        return -s[0];
    case MESS_METRIC_COSINE:
        dot3(q, x, dim, 1, s);
        if (s[1] <= 0.0 || s[2] <= 0.0)
            return 1.0;
        return 1.0 - s[0] / sqrt(s[1] * s[2]);
    default:
        for (i = 0; i + 4 <= dim; i += 4)
            for (l = 0; l < 4; l++) {
                double d = (double)q[i + l] - x[i + l];
                acc[l] += d * d;
            }
        for (; i < dim; i++) {
            double d = (double)q[i] - x[i];
            acc[0] += d * d;
        }
        return (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
}

/* Four squared L2 distances, each exactly as metric_distance's L2 branch
 * computes it (same accumulator split, same order of additions): the four
 * chains of dependent additions overlap. */
static void l2_four(const float *q, const float *x, uint32_t dim, double out[4])
{
    double acc[4][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    uint32_t i, l, v;
    for (i = 0; i + 4 <= dim; i += 4)
        for (v = 0; v < 4; v++)
            for (l = 0; l < 4; l++) {
                double d = (double)q[i + l] - x[(size_t)v * dim + i + l];
                acc[v][l] += d * d;
            }
    for (; i < dim; i++)
        for (v = 0; v < 4; v++) {
            double d = (double)q[i] - x[(size_t)v * dim + i];
            acc[v][0] += d * d;
        }
    for (v = 0; v < 4; v++)
        out[v] = (acc[v][0] + acc[v][1]) + (acc[v][2] + acc[v][3]);
}

/* l2_four with AVX (run-time choice): the four accumulators of one
 * vector are the four lanes of one register, so each step is the same
 * double conversion, subtraction, multiplication and addition per lane as
 * above (separate instructions, never a fused multiply-add), in the same
 * order; the tail and the final sum are the scalar code's.  Same bits
 * (tests/test_payload_batch.c compares it with metric_distance). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && \
    !defined(MESS_NO_POPCNT_DISPATCH)
#include <immintrin.h>
#define METRIC_DISPATCH 1

__attribute__((target("avx"))) static void l2_four_avx(const float *q, const float *x,
                                                        uint32_t dim, double out[4])
{
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    double acc[4][4];
    uint32_t i, v;
    for (i = 0; i + 4 <= dim; i += 4) {
        __m256d qd = _mm256_cvtps_pd(_mm_loadu_ps(q + i)), d;
        d = _mm256_sub_pd(qd, _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(d, d));
        d = _mm256_sub_pd(qd, _mm256_cvtps_pd(_mm_loadu_ps(x + (size_t)dim + i)));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(d, d));
        d = _mm256_sub_pd(qd, _mm256_cvtps_pd(_mm_loadu_ps(x + 2 * (size_t)dim + i)));
        a2 = _mm256_add_pd(a2, _mm256_mul_pd(d, d));
        d = _mm256_sub_pd(qd, _mm256_cvtps_pd(_mm_loadu_ps(x + 3 * (size_t)dim + i)));
        a3 = _mm256_add_pd(a3, _mm256_mul_pd(d, d));
    }
    _mm256_storeu_pd(acc[0], a0);
    _mm256_storeu_pd(acc[1], a1);
    _mm256_storeu_pd(acc[2], a2);
    _mm256_storeu_pd(acc[3], a3);
    for (; i < dim; i++)
        for (v = 0; v < 4; v++) {
            double d = (double)q[i] - x[(size_t)v * dim + i];
            acc[v][0] += d * d;
        }
    for (v = 0; v < 4; v++)
        out[v] = (acc[v][0] + acc[v][1]) + (acc[v][2] + acc[v][3]);
}
#endif

/* The choice: SIMD_METRIC in simd.h. */
void metric_set_simd(int on)
{
    simd_force(SIMD_METRIC, on ? -1 : 0);
}

#ifdef METRIC_DISPATCH
static int use_avx(void)
{
    return simd_level(SIMD_METRIC);
}
#endif

void metric_distance_many(uint32_t metric, const float *q, const float *x,
                          size_t n, uint32_t dim, double *out)
{
    size_t v = 0;
#ifdef METRIC_DISPATCH
    if (metric == MESS_METRIC_L2 && use_avx())
        for (; v + 4 <= n; v += 4)
            l2_four_avx(q, x + v * dim, dim, out + v);
#endif
    if (metric == MESS_METRIC_L2)
        for (; v + 4 <= n; v += 4)
            l2_four(q, x + v * dim, dim, out + v);
    for (; v < n; v++)
        out[v] = metric_distance(metric, q, x + v * dim, dim);
}
