/*-------------------------------------------------------------------------
 *
 * lsq.c
 *	  A least-squares fit from its TSQR factor, shared by the in-server
 *	  solver (extension/exact.c) and the workers (workers/exact.c): the
 *	  moments, the ridge penalty, the solve, the float64 model, and the
 *	  statistics of the fit as JSON (what dml_summary reads).
 *
 * R (q, q), q = d + 2, is the R factor of the rows [x, 1, y] (solve.c).
 * The columns are raw: Householder QR needs them neither centred nor
 * scaled, and the raw intercept then comes out of the solve itself
 * instead of from a difference of large numbers.  Moments come from
 * R'R = Z'Z; they give the standardized form the model is stored in and
 * the scale of the ridge penalty, which is the gradient optimizers' (n *
 * weight_decay / 2 on the standardized slopes), added as d rows under R.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (R'R)[i][j] for upper-triangular R (q,q) */
static double
gram(const double *R, int q, int i, int j)
{
	double		s = 0;

	for (int k = 0; k <= (i < j ? i : j); k++)
		s += R[(size_t) k * q + i] * R[(size_t) k * q + j];
	return s;
}

/*
 * The sum of squares of column c of the rows about its mean: the residual
 * of the intercept alone, from R's columns [1, c] factored again (the R
 * of two columns of Z is the R of those columns of R), never the
 * cancelling sum(x^2) - n mean^2.  A constant column gives about eps.
 */
static DmlStatus
centered_ss(const double *R, int q, int c, double *ss)
{
	int			one = q - 2;
	double		R2[4] = {0};
	double	   *cols = malloc(sizeof(double) * q * 2);
	DmlStatus	st;

	if (cols == NULL)
		return DML_ERR_NOMEM;
	for (int i = 0; i < q; i++)
	{
		cols[i * 2] = R[(size_t) i * q + one];
		cols[i * 2 + 1] = R[(size_t) i * q + c];
	}
	st = dml_qr_stack(R2, cols, q, 2);
	*ss = R2[3] * R2[3];
	free(cols);
	return st;
}

/*
 * dml_lsq_moments
 *		Start a fit of n rows from R: the inputs' means and (population)
 *		standard deviations, the target's, and the total sum of squares,
 *		the sums of squares by centered_ss.
 */
DmlStatus
dml_lsq_moments(DmlLsqFit *fit, const double *R, int d, double n)
{
	int			q = d + 2;
	DmlStatus	st = DML_OK;
	double		ss;

	memset(fit, 0, sizeof(*fit));
	fit->d = d;
	fit->n = n;
	fit->mu = malloc(sizeof(double) * (d ? d : 1));
	fit->sd = malloc(sizeof(double) * (d ? d : 1));
	if (!fit->mu || !fit->sd)
		return DML_ERR_NOMEM;
	for (int c = 0; c < d && st == DML_OK; c++)
	{
		fit->mu[c] = gram(R, q, c, d) / n;
		st = centered_ss(R, q, c, &ss);
		fit->sd[c] = sqrt(ss / n);
	}
	if (st == DML_OK)
		st = centered_ss(R, q, d + 1, &fit->tss);
	fit->ymu = gram(R, q, d, d + 1) / n;
	fit->ysd = fit->tss > 0 ? sqrt(fit->tss / n) : 1;
	return st;
}

/*
 * dml_lsq_fit
 *		Solve the fit started by dml_lsq_moments.  penalty (d) or NULL: per
 *		input, the weight of beta_c^2 on the standardized scale (n *
 *		weight_decay / 2 for ridge), stacked under R (which changes) as the
 *		rows sqrt(penalty_c) sd_c e_c with target 0.  The residual sum of
 *		squares excludes the penalty.  DML_ERR_SINGULAR: rank-deficient,
 *		fit->ls.dropped names the columns (d is the intercept).
 */
DmlStatus
dml_lsq_fit(DmlLsqFit *fit, double *R, const double *penalty, bool min_norm)
{
	int			d = fit->d,
				q = d + 2;
	DmlStatus	st;

	if (penalty)
	{
		double	   *P = calloc((size_t) d * q, sizeof(double));

		if (P == NULL)
			return DML_ERR_NOMEM;
		/* on the model's scale: an input with sd 0 is left unscaled there */
		for (int c = 0; c < d; c++)
		{
			P[(size_t) c * q + c] = sqrt(penalty[c]) * (fit->sd[c] > 0 ? fit->sd[c] : 1);
			fit->penalized |= penalty[c] > 0;
		}
		st = dml_qr_stack(R, P, d, q);
		free(P);
		if (st != DML_OK)
			return st;
	}
	st = dml_lsq_solve(&fit->ls, R, q, fit->n, min_norm);
	if (st != DML_OK)
		return st;
	fit->rss = fit->ls.rss;
	for (int c = 0; c < d && penalty; c++)
	{
		double		sd = fit->sd[c] > 0 ? fit->sd[c] : 1;

		fit->rss -= penalty[c] * sd * sd * fit->ls.coef[c] * fit->ls.coef[c];
	}
	fit->rss = fmax(fit->rss, 0);
	return DML_OK;
}

/*
 * dml_lsq_fit_model
 *		The fit as a float64 linear model (m: one layer, d inputs, one MSE
 *		output, as dml_model_alloc made it), in the standardized form every
 *		model has, so its float32 rounding serves the float32 paths well:
 *		w_c = beta_c sd_c / ysd on (x_c - mu_c) / sd_c, and the bias that
 *		gives the raw intercept back.  Inputs with sd 0 (constant columns,
 *		whose coefficient a ridge row held at 0, and one-hot levels absent
 *		from the data) get scale 0 and weight 0, as the other solvers give.
 */
DmlStatus
dml_lsq_fit_model(const DmlLsqFit *fit, DmlModel *m)
{
	int			d = fit->d;
	double		bias = fit->ls.coef[d] - fit->ymu;
	DmlStatus	st = dml_model_make_f64(m);

	if (st != DML_OK)
		return st;
	for (int c = 0; c < d; c++)
	{
		double		sd = fit->sd[c];

		m->in_mean64[c] = fit->mu[c];
		/* a constant input (or an absent one-hot level): scale 0, weight 0 */
		m->in_scale64[c] = sd > 0 ? 1.0 / sd : 0;
		m->params64[c] = sd > 0 ? fit->ls.coef[c] * sd / fit->ysd : 0;
		bias += fit->ls.coef[c] * fit->mu[c];
	}
	m->params64[d] = bias / fit->ysd;
	m->out_mean64[0] = fit->ymu;
	m->out_scale64[0] = fit->ysd;
	dml_model_sync_f32(m);
	return DML_OK;
}

void
dml_lsq_fit_free(DmlLsqFit *fit)
{
	dml_lsq_free(&fit->ls);
	free(fit->robust);
	free(fit->mu);
	free(fit->sd);
	memset(fit, 0, sizeof(*fit));
}

/* ---------------------------------------------------------------------
 * The statistics as JSON
 * --------------------------------------------------------------------- */

/* append to buf, tracking the length needed (the JSON writers of lsq.c and logit.c) */
void
dml_json_add(char *buf, size_t len, size_t *pos, const char *fmt,...)
{
	va_list		ap;
	int			n;

	va_start(ap, fmt);
	n = vsnprintf(*pos < len ? buf + *pos : NULL, *pos < len ? len - *pos : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += n;
}

/* a number with every digit of a double (17), or null when not finite */
void
dml_json_num(char *buf, size_t len, size_t *pos, const char *sep, double x)
{
	if (isfinite(x))
		dml_json_add(buf, len, pos, "%s%.17g", sep, x);
	else
		dml_json_add(buf, len, pos, "%snull", sep);
}

/* a JSON string */
void
dml_json_str(char *buf, size_t len, size_t *pos, const char *sep, const char *s)
{
	dml_json_add(buf, len, pos, "%s\"", sep);
	for (; *s; s++)
	{
		unsigned char ch = (unsigned char) *s;

		if (ch == '"' || ch == '\\')
			dml_json_add(buf, len, pos, "\\%c", ch);
		else if (ch < 0x20)
			dml_json_add(buf, len, pos, "\\u%04x", ch);
		else
			dml_json_add(buf, len, pos, "%c", ch);
	}
	dml_json_add(buf, len, pos, "\"");
}

/*
 * The opening of a fit's statistics: {"method", "solver", "terms",
 * "coefficients", "std_errors" (from scale * cov's diagonal; null without
 * cov), with the intercept (coef[d]) first.  The caller closes the object.
 */
void
dml_json_coefficients(char *buf, size_t len, size_t *pos, const char *method,
					  const char *solver, const char *const *terms, int d,
					  const double *coef, const double *cov, double scale)
{
	dml_json_add(buf, len, pos, "{\"method\": \"%s\", \"solver\": \"%s\", \"terms\": [",
				 method, solver);
	dml_json_str(buf, len, pos, "", "(Intercept)");
	for (int c = 0; c < d; c++)
		dml_json_str(buf, len, pos, ", ", terms[c]);
	dml_json_add(buf, len, pos, "], \"coefficients\": [");
	for (int k = 0; k <= d; k++)
		dml_json_num(buf, len, pos, k ? ", " : "", coef[k == 0 ? d : k - 1]);
	dml_json_add(buf, len, pos, "], \"std_errors\": [");
	for (int k = 0; k <= d; k++)
	{
		int			j = k == 0 ? d : k - 1;

		dml_json_num(buf, len, pos, k ? ", " : "",
					 cov ? sqrt(scale * cov[(size_t) j * (d + 1) + j]) : NAN);
	}
	dml_json_add(buf, len, pos, "]");
}

/*
 * dml_lsq_fit_json
 *		The statistics of the fit: terms and coefficients with the
 *		intercept first (as R and statsmodels print them), standard errors
 *		from sigma^2 (X'X)^-1 (null when penalized: they do not apply),
 *		and the model-level figures as statsmodels' OLS defines them: rank
 *		counts the intercept, df_model = rank - 1, df_resid = n - rank,
 *		the Gaussian log-likelihood, AIC and BIC with rank parameters, the
 *		condition number of [X, 1].  terms (d) names the inputs.  Returns
 *		the length needed, terminator included.
 */
size_t
dml_lsq_fit_json(const DmlLsqFit *fit, const char *const *terms, char *buf, size_t len)
{
	size_t		pos = 0;
	int			d = fit->d;
	const DmlLsq *ls = &fit->ls;
	double		n = fit->n;
	double		df_resid = n - ls->rank;
	double		df_model = ls->rank - 1;
	double		sigma2 = df_resid > 0 ? fit->rss / df_resid : NAN;
	double		r2 = fit->tss > 0 ? 1 - fit->rss / fit->tss : NAN;
	double		f = df_model > 0 && fit->rss > 0 && !fit->penalized ?
		((fit->tss - fit->rss) / df_model) / sigma2 : NAN;
	bool		robust = fit->robust && !fit->penalized;
	double		llf = fit->rss > 0 ? -n / 2 * (log(2 * M_PI) + log(fit->rss / n) + 1) : NAN;

	if (len > 0)
		buf[0] = '\0';
	/* a robust covariance: z p-values and the slopes' Wald F, as statsmodels gives them */
	if (robust)
		f = df_model == d ? dml_wald_f(ls->coef, fit->robust, d) : NAN;
	dml_json_coefficients(buf, len, &pos, "ols", "tsqr", terms, d, ls->coef,
						  fit->penalized ? NULL : robust ? fit->robust : ls->cov,
						  robust ? 1.0 : sigma2);
	if (robust)
		dml_json_add(buf, len, &pos, ", \"cov_type\": \"%s\", \"statistic\": \"z\"", fit->cov_type);
	dml_json_add(buf, len, &pos, ", \"n\": %.0f, \"rank\": %d, \"df_model\": %.0f, \"df_resid\": %.0f",
		 n, ls->rank, df_model, df_resid);
	dml_json_num(buf, len, &pos, ", \"rss\": ", fit->rss);
	dml_json_num(buf, len, &pos, ", \"tss\": ", fit->tss);
	dml_json_num(buf, len, &pos, ", \"r2\": ", r2);
	dml_json_num(buf, len, &pos, ", \"adj_r2\": ", df_resid > 0 ? 1 - (n - 1) / df_resid * (1 - r2) : NAN);
	dml_json_num(buf, len, &pos, ", \"residual_std_error\": ", sqrt(sigma2));
	dml_json_num(buf, len, &pos, ", \"f\": ", f);
	dml_json_num(buf, len, &pos, ", \"f_p_value\": ", dml_f_pvalue(f, df_model, df_resid));
	dml_json_num(buf, len, &pos, ", \"log_likelihood\": ", llf);
	dml_json_num(buf, len, &pos, ", \"aic\": ", -2 * llf + 2 * ls->rank);
	dml_json_num(buf, len, &pos, ", \"bic\": ", -2 * llf + log(n) * ls->rank);
	dml_json_num(buf, len, &pos, ", \"condition_number\": ", ls->cond);
	dml_json_add(buf, len, &pos, "}");
	return pos + 1;
}
