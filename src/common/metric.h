/*
 * metric.h - exact distances between float vectors.  Internal header.
 */
#ifndef MESS_METRIC_H
#define MESS_METRIC_H

#include "internal.h"

/* 1 if every component of x (dim of them) is zero: a vector that has no
 * direction, refused under MESS_METRIC_COSINE (uploads and requests). */
static inline int vector_is_zero(const float *x, uint32_t dim)
{
    uint32_t i;
    for (i = 0; i < dim; i++)
        if (x[i] != 0.0f)
            return 0;
    return 1;
}

/* Distance of q and x (dim components) under MESS_METRIC_L2 (squared
 * Euclidean), MESS_METRIC_IP (-<q,x>) or MESS_METRIC_COSINE (1 - cosine;
 * 1 when either vector is zero): smaller is closer for every metric.
 * Summed in double over four accumulators in a fixed split, so the result
 * does not depend on the machine. */
double metric_distance(uint32_t metric, const float *q, const float *x,
                       uint32_t dim);

/* out[v] = metric_distance(metric, q, x + v * dim, dim) for v < n, bit for
 * bit: the same operations in the same order for each vector, four
 * vectors interleaved so their additions overlap (one distance's sum is a
 * chain of dependent adds; four chains keep the units busy). */
void metric_distance_many(uint32_t metric, const float *q, const float *x,
                          size_t n, uint32_t dim, double *out);

/* 1 (default): metric_distance_many uses AVX when the CPU has it; 0: the
 * portable loop (tests compare both).  Process-wide, not thread-safe: it
 * sets SIMD_METRIC in simd.h's one table of these choices. */
void metric_set_simd(int on);

#endif
