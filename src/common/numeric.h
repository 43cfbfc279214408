/*
 * numeric.h - numerical helpers shared by the privacy accountants
 * (accountant.c) and the correctness model (src/plan/planner.c).  Internal
 * header.
 */
#ifndef MESS_NUMERIC_H
#define MESS_NUMERIC_H

/* A flip probability in (0, 1/2]; false for NaN. */
int numeric_flip_ok(double p);

/* A flip probability in [0, 1/2]; false for NaN. */
int numeric_flip_ok0(double p);

/* Standard normal CDF. */
double numeric_normal_cdf(double x);

/* ln Binomial(n, q)(x), q1 = 1 - q passed exactly (Loader 2000, "Fast and
 * accurate computation of binomial probabilities"): accurate for any n,
 * -INFINITY outside 0 <= x <= n. */
double numeric_binom_logpmf(double x, double n, double q, double q1);

#endif
