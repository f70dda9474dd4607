/*-------------------------------------------------------------------------
 *
 * robust.c
 *	  Heteroskedasticity-robust (sandwich) covariances of a fit, as
 *	  statsmodels' cov_type = 'HC0' and 'HC1' define them:
 *	  V = C M C with C the model-based (X'X)^-1 (least squares) or H^-1
 *	  (logistic regression) and M = sum_i r_i^2 z_i z_i', z_i = [x_i, 1],
 *	  r_i the residual (y - fitted for least squares, y - p for logistic
 *	  regression: the score's factor); HC1 scales HC0 by n / (n - rank).
 *
 * The meat is one more pass over the rows after the fit; each rank sums
 * its own and the caller all-reduces M.  With a robust covariance
 * statsmodels reports normal (z) p-values and the slopes' Wald F test
 * instead of the classical F: dml_wald_f gives that.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * dml_hc_meat
 *		M (p, p), p = d + 1, += sum over the rows i < n of X (n, d) not
 *		skipped of r_i^2 [x_i, 1][x_i, 1]' (full, symmetric).  Blocks of
 *		rows scaled by r_i go through one DSYRK each.
 */
DmlStatus
dml_hc_meat(double *M, const double *X, const double *r, const unsigned char *skip,
			int64_t n, int d)
{
	DmlSyrkRows acc;

	if (dml_syrk_begin(&acc, d + 1) != DML_OK)
		return DML_ERR_NOMEM;
	for (int64_t i = 0; i < n; i++)
	{
		double	   *z;

		if (skip && skip[i])
			continue;
		z = dml_syrk_row(&acc);
		for (int c = 0; c < d; c++)
			z[c] = r[i] * X[(size_t) i * d + c];
		z[d] = r[i];
	}
	dml_syrk_end(&acc, M);
	return DML_OK;
}

/* buffers for rows of p; DML_ERR_NOMEM (and nothing held) when there is no memory */
DmlStatus
dml_syrk_begin(DmlSyrkRows *a, int p)
{
	a->p = p;
	a->B = 0;
	a->Z = malloc(sizeof(double) * DML_SYRK_BLOCK * p);
	a->L = calloc((size_t) p * p, sizeof(double));
	if (a->Z == NULL || a->L == NULL)
	{
		free(a->Z);
		free(a->L);
		a->Z = a->L = NULL;
		return DML_ERR_NOMEM;
	}
	return DML_OK;
}

/* L += Z' Z over the rows in Z */
static void
syrk_flush(DmlSyrkRows *a)
{
	if (a->B > 0)
		cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, a->p, a->B, 1.0, a->Z, a->p,
					1.0, a->L, a->p);
	a->B = 0;
}

/* where to write the next row (a full block is summed first) */
double *
dml_syrk_row(DmlSyrkRows *a)
{
	if (a->B == DML_SYRK_BLOCK)
		syrk_flush(a);
	return a->Z + (size_t) a->B++ * a->p;
}

/* S += the sum of the rows' outer products; frees the buffers */
void
dml_syrk_end(DmlSyrkRows *a, double *S)
{
	syrk_flush(a);
	dml_add_lower_sym(S, a->L, a->p);
	free(a->Z);
	free(a->L);
	a->Z = a->L = NULL;
}

/*
 * dml_add_lower_sym
 *		S (p, p, both halves) += the symmetric matrix whose lower half is L's
 *		(what cblas_dsyrk accumulated with CblasLower).
 */
void
dml_add_lower_sym(double *S, const double *L, int p)
{
	for (int a = 0; a < p; a++)
		for (int b = 0; b <= a; b++)
		{
			S[(size_t) a * p + b] += L[(size_t) a * p + b];
			if (b < a)
				S[(size_t) b * p + a] += L[(size_t) a * p + b];
		}
}

/* V (p, p) = scale * C M C for symmetric C and M */
DmlStatus
dml_sandwich(double *V, const double *C, const double *M, int p, double scale)
{
	double	   *T = malloc(sizeof(double) * p * p);

	if (T == NULL)
		return DML_ERR_NOMEM;
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p, p, p, 1.0, C, p, M, p, 0.0, T, p);
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p, p, p, scale, T, p, C, p, 0.0, V, p);
	free(T);
	return DML_OK;
}

/*
 * The Wald statistic of "every slope is 0" against the covariance V of
 * b (p = d + 1, the intercept last), divided by d: b_s' V_ss^-1 b_s / d.
 * NaN when V_ss is not positive definite.
 */
double
dml_wald_f(const double *b, const double *V, int d)
{
	int			p = d + 1;
	double	   *S = malloc(sizeof(double) * (d ? d : 1) * (d ? d : 1));
	double		w = 0;

	if (S == NULL || d == 0)
	{
		free(S);
		return NAN;
	}
	for (int a = 0; a < d; a++)
		for (int c = 0; c < d; c++)
			S[(size_t) a * d + c] = V[(size_t) a * p + c];
	if (dml_spd_inverse(S, d) != DML_OK)
	{
		free(S);
		return NAN;
	}
	for (int a = 0; a < d; a++)
		for (int c = 0; c < d; c++)
			w += b[a] * S[(size_t) a * d + c] * b[c];
	free(S);
	return w / d;
}
