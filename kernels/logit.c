/*-------------------------------------------------------------------------
 *
 * logit.c
 *	  Logistic regression in float64 on the raw rows: the log-likelihood's
 *	  gradient and Hessian over a set of rows (summed across ranks by the
 *	  caller), and the statistics of the fit as JSON for dml_summary.
 *
 * The workers' Newton iterations (workers/exact.c) run in float32 blocks
 * on standardized rows; their result is then polished by full Newton steps
 * computed here in float64 on the raw rows.  Near the optimum Newton
 * converges quadratically, so one or two steps reach the float64 maximum
 * of the likelihood, and the Hessian there gives the standard errors,
 * (X'WX)^-1, as statsmodels' Logit and R's glm report them.
 *
 * beta has p = d + 1 entries: the d slopes on the raw inputs, then the
 * intercept.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LOGIT_BLOCK 256			/* rows per SYRK of the Hessian */

/*
 * dml_logit_stats
 *		Over the rows i < n of X (n, d) with y (n) in {0, 1}, skipping rows
 *		where skip[i] (may be NULL): g (p) += the gradient and H (p, p) +=
 *		the Hessian (full, symmetric) of the negative log-likelihood at
 *		beta.  Returns the negative log-likelihood's sum.  Blocks of rows
 *		[x, 1] scaled by sqrt(p (1 - p)) go through one DSYRK each.
 */
double
dml_logit_stats(double *g, double *H, const double *X, const double *y,
				const unsigned char *skip, int64_t n, int d, const double *beta)
{
	int			p = d + 1;
	double		nll = 0;
	double	   *Z = malloc(sizeof(double) * LOGIT_BLOCK * p);	/* sqrt(w) [x, 1] */
	double	   *L = calloc((size_t) p * p, sizeof(double));
	int			B = 0;

	if (Z == NULL || L == NULL)
	{
		free(Z);
		free(L);
		return NAN;
	}
	for (int64_t i = 0; i <= n; i++)
	{
		const double *x = X + (size_t) i * d;
		double		eta,
					u,
					pr,
					r,
					sw;
		double	   *z;

		if (B == LOGIT_BLOCK || (i == n && B > 0))
		{
			cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, p, B, 1.0, Z, p, 1.0, L, p);
			B = 0;
		}
		if (i == n)
			break;
		if (skip && skip[i])
			continue;
		eta = beta[d];
		for (int c = 0; c < d; c++)
			eta += beta[c] * x[c];
		/* log(1 + e^eta) - y eta without overflow */
		u = exp(-fabs(eta));
		pr = eta >= 0 ? 1.0 / (1.0 + u) : u / (1.0 + u);
		nll += (eta > 0 ? eta : 0) + log1p(u) - y[i] * eta;
		r = pr - y[i];
		sw = sqrt(pr * (1 - pr));
		z = Z + (size_t) B * p;
		for (int c = 0; c < d; c++)
		{
			g[c] += r * x[c];
			z[c] = sw * x[c];
		}
		g[d] += r;
		z[d] = sw;
		B++;
	}
	for (int a = 0; a < p; a++)
		for (int b = 0; b <= a; b++)
		{
			H[(size_t) a * p + b] += L[(size_t) a * p + b];
			if (b < a)
				H[(size_t) b * p + a] += L[(size_t) a * p + b];
		}
	free(Z);
	free(L);
	return nll;
}

/*
 * dml_logit_json
 *		The statistics of a logistic fit of n rows: terms (d input names)
 *		and coefficients beta (p, intercept last; written intercept first),
 *		standard errors from cov (p, p) = H^-1 (NULL when penalized: null),
 *		the log-likelihood llf and the intercept-only model's llnull, and
 *		from them McFadden's pseudo R^2 (reported as r2), AIC and BIC with
 *		p parameters, as statsmodels' Logit defines them.  Returns the
 *		length needed, terminator included.
 */
size_t
dml_logit_json(const double *beta, const double *cov, int d, double n, double llf,
			   double llnull, const char *const *terms, char *buf, size_t len)
{
	size_t		pos = 0;
	int			p = d + 1;

	if (len > 0)
		buf[0] = '\0';
	dml_json_coefficients(buf, len, &pos, "logit", "newton", terms, d, beta, cov, 1.0);
	dml_json_add(buf, len, &pos, ", \"n\": %.0f, \"rank\": %d, \"df_model\": %d, \"df_resid\": %.0f",
		 n, p, p - 1, n - p);
	dml_json_num(buf, len, &pos, ", \"r2\": ", 1 - llf / llnull);
	dml_json_num(buf, len, &pos, ", \"log_likelihood\": ", llf);
	dml_json_num(buf, len, &pos, ", \"log_likelihood_null\": ", llnull);
	dml_json_num(buf, len, &pos, ", \"aic\": ", -2 * llf + 2 * p);
	dml_json_num(buf, len, &pos, ", \"bic\": ", -2 * llf + log(n) * p);
	dml_json_add(buf, len, &pos, "}");
	return pos + 1;
}
