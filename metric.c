/*
 * metric.c - the exact distance of the three metrics, the one
 * implementation the client's rerank (client_finish.c) and the planner's
 * ground truth (accountant.c) share.
 */
#include <math.h>

#include "metric.h"

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

void metric_distance_many(uint32_t metric, const float *q, const float *x,
                          size_t n, uint32_t dim, double *out)
{
    size_t v = 0;
    if (metric == MESS_METRIC_L2)
        for (; v + 4 <= n; v += 4)
            l2_four(q, x + v * dim, dim, out + v);
    for (; v < n; v++)
        out[v] = metric_distance(metric, q, x + v * dim, dim);
}
