/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  The distributions behind the p-values of a fit (dml_summary): the
 *	  regularized incomplete beta function, and from it Student's t and
 *	  the F distribution's upper tails; the normal's from erfc.
 *
 * I_x(a, b) is evaluated by its continued fraction (modified Lentz), on
 * the side of the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where it
 * converges fast; a small tail probability is computed directly, never
 * as 1 minus something close to 1, so p-values keep their relative
 * accuracy however small.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <float.h>
#include <math.h>

#define INCBETA_MAX_ITER 1000
#define INCBETA_TINY 1e-300

/* one step of the modified Lentz method: c, d updated for term num; returns the factor */
static inline double
lentz_step(double *c, double *d, double num)
{
	*d = 1.0 + num * *d;
	*c = 1.0 + num / *c;
	if (fabs(*d) < INCBETA_TINY)
		*d = INCBETA_TINY;
	if (fabs(*c) < INCBETA_TINY)
		*c = INCBETA_TINY;
	*d = 1.0 / *d;
	return *d * *c;
}

/* the continued fraction of I_x(a, b), for x < (a + 1) / (a + b + 2) */
static double
incbeta_cf(double a, double b, double x)
{
	double		c = 1.0,
				d = 1.0 - (a + b) * x / (a + 1.0),
				f;

	if (fabs(d) < INCBETA_TINY)
		d = INCBETA_TINY;
	d = 1.0 / d;
	f = d;
	for (int m = 1; m <= INCBETA_MAX_ITER; m++)
	{
		double		delta;

		/* even step, then odd step */
		f *= lentz_step(&c, &d, m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)));
		delta = lentz_step(&c, &d, -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)));
		f *= delta;
		if (fabs(delta - 1.0) < 4 * DBL_EPSILON)
			break;
	}
	return f;
}

/* regularized incomplete beta I_x(a, b), a, b > 0, 0 <= x <= 1 */
double
dml_incbeta(double a, double b, double x)
{
	double		front;

	if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1))
		return NAN;
	if (x == 0 || x == 1)
		return x;
	front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
	if (x < (a + 1.0) / (a + b + 2.0))
		return front * incbeta_cf(a, b, x) / a;
	return 1.0 - front * incbeta_cf(b, a, 1.0 - x) / b;
}

/* P(|T| >= |t|), T ~ Student's t with df degrees of freedom */
double
dml_t_pvalue(double t, double df)
{
	if (isnan(t) || !(df > 0))
		return NAN;
	if (isinf(t))
		return 0.0;
	/* P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2) */
	return dml_incbeta(df / 2.0, 0.5, df / (df + t * t));
}

/* P(F >= f), F ~ F(d1, d2) */
double
dml_f_pvalue(double f, double d1, double d2)
{
	if (isnan(f) || !(d1 > 0) || !(d2 > 0))
		return NAN;
	if (f <= 0)
		return 1.0;
	if (isinf(f))
		return 0.0;
	return dml_incbeta(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f));
}

/* P(|Z| >= |z|), Z standard normal */
double
dml_z_pvalue(double z)
{
	return erfc(fabs(z) / sqrt(2.0));
}
