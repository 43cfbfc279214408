/*
 * numeric.c - the numerical helpers the privacy accountants (accountant.c)
 * and the correctness model (src/plan/planner.c) share: the range checks of
 * a flip probability, the standard normal CDF (the estimate,
 * src/plan/estimate.c, uses it too) and binomial probabilities in log space
 * (numeric.h).
 */
#include <math.h>

#include "numeric.h"

#define LN_SQRT_2PI 0.91893853320467274178
#define LN_2PI 1.83787706640934548356

int numeric_flip_ok(double p) /* (0, 1/2]; false for NaN */
{
    return p > 0.0 && p <= 0.5;
}

int numeric_flip_ok0(double p) /* [0, 1/2] */
{
    return p >= 0.0 && p <= 0.5;
}

/* Standard normal CDF. */
double numeric_normal_cdf(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

/* ln(n!) - ln(sqrt(2 pi n) (n/e)^n), the error of Stirling's formula
 * (series in 1/n with the Bernoulli-number coefficients for n > 15). */
static double stirlerr(double n)
{
    const double s0 = 1.0 / 12, s1 = 1.0 / 360, s2 = 1.0 / 1260,
                 s3 = 1.0 / 1680, s4 = 1.0 / 1188;
    double nn;
    if (n <= 15.0)
        return lgamma(n + 1.0) - (n + 0.5) * log(n) + n - LN_SQRT_2PI;
    nn = n * n;
    if (n > 500)
        return (s0 - s1 / nn) / n;
    if (n > 80)
        return (s0 - (s1 - s2 / nn) / nn) / n;
    if (n > 35)
        return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n;
    return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n;
}

/* x ln(x / m) + m - x, by a series when x is close to m (no cancellation). */
static double bd0(double x, double m)
{
    if (fabs(x - m) < 0.1 * (x + m)) {
        double v = (x - m) / (x + m), s = (x - m) * v, ej = 2.0 * x * v;
        int j;
        v *= v;
        for (j = 1; j < 1000; j++) {
            double s1;
            ej *= v;
            s1 = s + ej / (2 * j + 1);
            if (s1 == s)
                break;
            s = s1;
        }
        return s;
    }
    return x * log(x / m) + m - x;
}

/* ln Binomial(n, q)(x), q1 = 1 - q passed exactly (Loader 2000, "Fast and
 * accurate computation of binomial probabilities"). */
double numeric_binom_logpmf(double x, double n, double q, double q1)
{
    if (x < 0 || x > n)
        return -INFINITY;
    if (q == 0.0)
        return x == 0 ? 0.0 : -INFINITY;
    if (q1 == 0.0)
        return x == n ? 0.0 : -INFINITY;
    if (x == 0)
        return n * log(q1);
    if (x == n)
        return n * log(q);
    return stirlerr(n) - stirlerr(x) - stirlerr(n - x) - bd0(x, n * q) -
           bd0(n - x, n * q1) - 0.5 * (LN_2PI + log(x) + log1p(-x / n));
}
