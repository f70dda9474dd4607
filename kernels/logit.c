/*-------------------------------------------------------------------------
 *
 * logit.c
 *	  Logistic and multinomial (softmax) regression in float64 on the raw
 *	  rows: the log-likelihood's gradient and Hessian over a set of rows
 *	  (summed across ranks by the caller), and the statistics of the fit as
 *	  JSON for dml_summary.
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
	double		nll = 0;
	DmlSyrkRows acc;			/* rows [x, 1] scaled by sqrt(p (1 - p)) */

	if (dml_syrk_begin(&acc, d + 1) != DML_OK)
		return NAN;
	for (int64_t i = 0; i < n; i++)
	{
		const double *x = X + (size_t) i * d;
		double		eta,
					u,
					pr,
					r,
					sw;
		double	   *z;

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
		z = dml_syrk_row(&acc);
		for (int c = 0; c < d; c++)
		{
			g[c] += r * x[c];
			z[c] = sw * x[c];
		}
		g[d] += r;
		z[d] = sw;
	}
	dml_syrk_end(&acc, H);
	return nll;
}

/*
 * dml_logit_json
 *		The statistics of a logistic fit of n rows: terms (d input names)
 *		and coefficients beta (p, intercept last; written intercept first),
 *		standard errors from cov (p, p) = H^-1 (NULL when penalized: null),
 *		or a robust covariance named by cov_type (NULL: H^-1's),
 *		the log-likelihood llf and the intercept-only model's llnull, and
 *		from them McFadden's pseudo R^2 (reported as r2), AIC and BIC with
 *		p parameters, as statsmodels' Logit defines them.  Returns the
 *		length needed, terminator included.
 */
size_t
dml_logit_json(const double *beta, const double *cov, const char *cov_type, int d, double n,
			   double llf, double llnull, const char *const *terms, char *buf, size_t len)
{
	size_t		pos = 0;
	int			p = d + 1;

	if (len > 0)
		buf[0] = '\0';
	dml_json_coefficients(buf, len, &pos, "logit", "newton", terms, d, beta, cov, 1.0);
	if (cov && cov_type)
		dml_json_add(buf, len, &pos, ", \"cov_type\": \"%s\"", cov_type);
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

/*
 * dml_mnlogit_stats
 *		Multinomial logistic regression over the rows i < n of X (n, d)
 *		with labels label[i] in 0 .. K-1, skipping rows where skip[i]:
 *		beta (K-1, p) holds the free classes' coefficients (class K-1 is
 *		the reference, its logit 0), each block [slopes, intercept].  g (q)
 *		+= the gradient and H (q, q) += the Hessian (full) of the negative
 *		log-likelihood, q = (K-1) p; returns its sum.  Per block of rows
 *		and pair of classes k >= l, Z' diag(p_k (1{k=l} - p_l)) Z by one
 *		DGEMM; everything in float64.
 */
double
dml_mnlogit_stats(double *g, double *H, const double *X, const int *label,
				  const unsigned char *skip, int64_t n, int d, int K, const double *beta)
{
	int			p = d + 1,
				Kf = K - 1;
	size_t		q = (size_t) Kf * p;
	double		nll = 0;
	double	   *Z = malloc(sizeof(double) * LOGIT_BLOCK * p);	/* rows [x, 1] */
	double	   *W = malloc(sizeof(double) * LOGIT_BLOCK * p);	/* weighted rows */
	double	   *P = malloc(sizeof(double) * LOGIT_BLOCK * Kf);	/* probabilities */
	double	   *Hs = malloc(sizeof(double) * p * p);
	double	   *e = malloc(sizeof(double) * (Kf ? Kf : 1));
	int			B = 0;

	if (!Z || !W || !P || !Hs || !e)
	{
		free(Z);
		free(W);
		free(P);
		free(Hs);
		free(e);
		return NAN;
	}
	for (int64_t i = 0; i <= n; i++)
	{
		const double *x = X + (size_t) i * d;
		double		mx = 0,
					den;
		double	   *z,
				   *pr;

		if (B == LOGIT_BLOCK || (i == n && B > 0))
		{
			for (int k = 0; k < Kf; k++)
				for (int l = 0; l <= k; l++)
				{
					for (int r = 0; r < B; r++)
					{
						const double *pp = P + (size_t) r * Kf;
						double		a = pp[k] * ((k == l) - pp[l]);

						for (int c = 0; c < p; c++)
							W[(size_t) r * p + c] = a * Z[(size_t) r * p + c];
					}
					cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p, p, B, 1.0, Z, p,
								W, p, 0.0, Hs, p);
					for (int a = 0; a < p; a++)
						for (int b = 0; b < p; b++)
						{
							H[((size_t) k * p + a) * q + (size_t) l * p + b] += Hs[(size_t) a * p + b];
							if (k != l)
								H[((size_t) l * p + b) * q + (size_t) k * p + a] += Hs[(size_t) a * p + b];
						}
				}
			B = 0;
		}
		if (i == n)
			break;
		if (skip && skip[i])
			continue;
		z = Z + (size_t) B * p;
		pr = P + (size_t) B * Kf;
		memcpy(z, x, sizeof(double) * d);
		z[d] = 1.0;
		for (int k = 0; k < Kf; k++)
		{
			const double *b = beta + (size_t) k * p;
			double		eta = b[d];

			for (int c = 0; c < d; c++)
				eta += b[c] * x[c];
			e[k] = eta;
			mx = eta > mx ? eta : mx;
		}
		den = exp(-mx);			/* the reference class */
		for (int k = 0; k < Kf; k++)
			den += (pr[k] = exp(e[k] - mx));
		for (int k = 0; k < Kf; k++)
		{
			double		r;

			pr[k] /= den;
			r = pr[k] - (label[i] == k);
			for (int c = 0; c < p; c++)
				g[(size_t) k * p + c] += r * z[c];
		}
		nll += log(den) + mx - (label[i] < Kf ? e[label[i]] : 0);
		B++;
	}
	free(Z);
	free(W);
	free(P);
	free(Hs);
	free(e);
	return nll;
}

/*
 * dml_mnlogit_json
 *		The statistics of a multinomial fit of n rows, as statsmodels'
 *		MNLogit reports them: the first class (classes[0]) is the
 *		reference, and each other class j has one equation of p
 *		coefficients, c_j = b_j - b_0, where b (K-1, p) are the fitted
 *		coefficients against the last class (b_{K-1} = 0); cov (q, q) is
 *		b's covariance H^-1 (NULL: standard errors null), turned into c's
 *		by the same differences.  Coefficients and standard errors are
 *		written equation by equation, the intercept first in each; llnull
 *		is the intercept-only model's log-likelihood.  Returns the length
 *		needed, terminator included.
 */
size_t
dml_mnlogit_json(const double *b, const double *cov, int d, int K, double n, double llf,
				 double llnull, const char *const *terms, const char *const *classes,
				 char *buf, size_t len)
{
	size_t		pos = 0;
	int			p = d + 1,
				Kf = K - 1;
	size_t		q = (size_t) Kf * p;
	int			nparams = Kf * p;

	/* b_k's element a (zero for the last class), and the covariance of two such */
#define MN_B(k, a) ((k) < Kf ? b[(size_t) (k) * p + (a)] : 0.0)
#define MN_COV(k, a, l, c) ((k) < Kf && (l) < Kf ? \
	cov[((size_t) (k) * p + (a)) * q + (size_t) (l) * p + (c)] : 0.0)

	if (len > 0)
		buf[0] = '\0';
	dml_json_add(buf, len, &pos, "{\"method\": \"mnlogit\", \"solver\": \"newton\", \"terms\": [");
	dml_json_str(buf, len, &pos, "", "(Intercept)");
	for (int c = 0; c < d; c++)
		dml_json_str(buf, len, &pos, ", ", terms[c]);
	dml_json_add(buf, len, &pos, "], \"reference\": ");
	dml_json_str(buf, len, &pos, "", classes[0]);
	dml_json_add(buf, len, &pos, ", \"classes\": [");
	for (int j = 1; j < K; j++)
		dml_json_str(buf, len, &pos, j > 1 ? ", " : "", classes[j]);
	dml_json_add(buf, len, &pos, "], \"coefficients\": [");
	for (int j = 1; j < K; j++)
		for (int k = 0; k <= d; k++)
		{
			int			a = k == 0 ? d : k - 1;

			dml_json_num(buf, len, &pos, j > 1 || k ? ", " : "", MN_B(j, a) - MN_B(0, a));
		}
	dml_json_add(buf, len, &pos, "], \"std_errors\": [");
	for (int j = 1; j < K; j++)
		for (int k = 0; k <= d; k++)
		{
			int			a = k == 0 ? d : k - 1;
			double		v = cov ? MN_COV(j, a, j, a) - 2 * MN_COV(j, a, 0, a) + MN_COV(0, a, 0, a) : NAN;

			dml_json_num(buf, len, &pos, j > 1 || k ? ", " : "", v >= 0 ? sqrt(v) : NAN);
		}
#undef MN_B
#undef MN_COV
	dml_json_add(buf, len, &pos, "], \"n\": %.0f, \"rank\": %d, \"df_model\": %d, \"df_resid\": %.0f",
				 n, nparams, nparams - Kf, n - nparams);
	dml_json_num(buf, len, &pos, ", \"r2\": ", 1 - llf / llnull);
	dml_json_num(buf, len, &pos, ", \"log_likelihood\": ", llf);
	dml_json_num(buf, len, &pos, ", \"log_likelihood_null\": ", llnull);
	dml_json_num(buf, len, &pos, ", \"aic\": ", -2 * llf + 2 * nparams);
	dml_json_num(buf, len, &pos, ", \"bic\": ", -2 * llf + log(n) * nparams);
	dml_json_add(buf, len, &pos, "}");
	return pos + 1;
}
