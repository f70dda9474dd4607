/*-------------------------------------------------------------------------
 *
 * exact.c
 *	  Linear regression in one pass inside the server: dml.qr_cols over the
 *	  relation (parallel-safe, run by PostgreSQL's own parallel workers,
 *	  whose R factors are combined as a TSQR reduction tree), then a
 *	  rank-revealing least-squares solve of the final R in the backend.
 *
 * For a single pass the data path decides the time: reading the rows out
 * over libpq into MPI workers costs more than the whole computation, and
 * starting mpirun alone takes about 0.4 s.  So optimizer => 'exact' on
 * numeric features uses this path unless nulls => 'impute' (which needs a
 * second pass) or sync options ask for workers; the worker implementation
 * (workers/exact.c) remains for those.
 *
 * The solution is the same as the workers': ridge weight_decay / 2 on the
 * standardized inputs only (here as p extra rows under R).  The QR runs
 * on the raw columns [x, 1, y]: Householder QR does not need them centred
 * or scaled, and the raw intercept then comes out of the solve itself
 * instead of from a difference of large numbers.  The model is float64
 * (format version 2); the statistics of the fit (standard errors, R^2, F,
 * log-likelihood, condition number) go into metrics->'statistics' for
 * dml_summary (summary.c).  MAE needs a second pass and is not reported
 * here (dml_evaluate gives it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "coordinator.h"
#include "dml.h"

/* whether job can take the in-server path */
bool
DmlExactInServer(DmlJob *job)
{
	ListCell   *lc;

	if (strcmp(job->optimizer, "exact") != 0 || strcmp(job->nulls, "impute") == 0 ||
		job->validation > 0 || job->fault != NULL || job->no_in_server)
		return false;
	foreach(lc, job->features)
		if (((DmlColumn *) lfirst(lc))->kind != DML_COL_NUM)
			return false;
	return true;
}

/* the user's mistake, reported as the workers would */
static void
data_error(int sqlstate, const char *hint, const char *msg)
{
	ereport(ERROR, (errcode(sqlstate), errmsg("%s", msg), errhint("%s", hint)));
}

/* a JSON number, or null when it is not finite */
static void
json_number(StringInfo buf, double v)
{
	if (isfinite(v))
		appendStringInfo(buf, "%.17g", v);
	else
		appendStringInfoString(buf, "null");
}

/* the name of column j of [x, 1]: a feature, or the intercept */
static const char *
term_name(DmlJob *job, int j)
{
	return j < list_length(job->features) ?
		((DmlColumn *) list_nth(job->features, j))->name : "(Intercept)";
}

/* the error for collinear features, naming the columns the solve found dependent */
static void
collinear_error(DmlJob *job, const DmlLsq *ls)
{
	StringInfoData names;

	initStringInfo(&names);
	for (int k = 0; k < ls->ndropped; k++)
		appendStringInfo(&names, "%s\"%s\"", k == 0 ? "" : ", ", term_name(job, ls->dropped[k]));
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("the features are collinear"),
			 errdetail(ls->ndropped == 1 ? "Column %s is a linear combination of the others." :
					   "Columns %s are linear combinations of the others.", names.data),
			 errhint("Remove %s, add weight_decay, or pass options => '{\"rank_deficient\": \"min_norm\"}' for the minimum-norm solution.",
					 ls->ndropped == 1 ? "it" : "them")));
}

/* (R'R)[i][j] for upper-triangular R (q,q): the Gram matrix of the rows' columns */
static double
gram(const double *R, int q, int i, int j)
{
	double		s = 0;

	for (int k = 0; k <= Min(i, j); k++)
		s += R[(size_t) k * q + i] * R[(size_t) k * q + j];
	return s;
}

/*
 * The statistics of an ordinary least-squares fit, as JSON: terms and
 * coefficients with the intercept first (as R and statsmodels print
 * them), standard errors (null under ridge, where they do not apply),
 * and the model-level figures.  rss and tss are the residual and total
 * sums of squares; rank counts the intercept.
 */
static char *
ols_statistics(DmlJob *job, const DmlLsq *ls, double n, double rss, double tss, bool ridge)
{
	StringInfoData buf;
	int			d = ls->p - 1;
	double		df_resid = n - ls->rank;
	double		df_model = ls->rank - 1;
	double		sigma2 = df_resid > 0 ? rss / df_resid : NAN;
	double		r2 = tss > 0 ? 1 - rss / tss : NAN;
	double		f = df_model > 0 && rss > 0 ? ((tss - rss) / df_model) / sigma2 : NAN;
	double		llf = rss > 0 ? -n / 2 * (log(2 * M_PI) + log(rss / n) + 1) : NAN;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"method\": \"ols\", \"solver\": \"tsqr\", \"terms\": [");
	for (int k = 0; k <= d; k++)
	{
		if (k > 0)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, term_name(job, k == 0 ? d : k - 1));
	}
	appendStringInfoString(&buf, "], \"coefficients\": [");
	for (int k = 0; k <= d; k++)
	{
		appendStringInfoString(&buf, k > 0 ? ", " : "");
		json_number(&buf, ls->coef[k == 0 ? d : k - 1]);
	}
	appendStringInfoString(&buf, "], \"std_errors\": [");
	for (int k = 0; k <= d; k++)
	{
		int			j = k == 0 ? d : k - 1;

		appendStringInfoString(&buf, k > 0 ? ", " : "");
		json_number(&buf, ridge ? NAN : sqrt(sigma2 * ls->cov[(size_t) j * ls->p + j]));
	}
	appendStringInfo(&buf, "], \"n\": %.0f, \"rank\": %d, \"df_model\": %.0f, \"df_resid\": %.0f",
					 n, ls->rank, df_model, df_resid);
	appendStringInfoString(&buf, ", \"rss\": ");
	json_number(&buf, rss);
	appendStringInfoString(&buf, ", \"tss\": ");
	json_number(&buf, tss);
	appendStringInfoString(&buf, ", \"r2\": ");
	json_number(&buf, r2);
	appendStringInfoString(&buf, ", \"adj_r2\": ");
	json_number(&buf, df_resid > 0 ? 1 - (n - 1) / df_resid * (1 - r2) : NAN);
	appendStringInfoString(&buf, ", \"residual_std_error\": ");
	json_number(&buf, sqrt(sigma2));
	appendStringInfoString(&buf, ", \"f\": ");
	json_number(&buf, ridge ? NAN : f);
	appendStringInfoString(&buf, ", \"f_p_value\": ");
	json_number(&buf, ridge ? NAN : dml_f_pvalue(f, df_model, df_resid));
	appendStringInfoString(&buf, ", \"log_likelihood\": ");
	json_number(&buf, llf);
	appendStringInfoString(&buf, ", \"aic\": ");
	json_number(&buf, -2 * llf + 2 * ls->rank);
	appendStringInfoString(&buf, ", \"bic\": ");
	json_number(&buf, -2 * llf + log(n) * ls->rank);
	appendStringInfoString(&buf, ", \"condition_number\": ");
	json_number(&buf, ls->cond);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * DmlExactSolve
 *		Fit job in the server; fills result as DmlRunJob would.  SPI is
 *		connected by the caller.
 */
void
DmlExactSolve(DmlJob *job, DmlJobResult *result, DmlProgressCallback cb, void *cb_arg)
{
	StringInfoData sql;
	ListCell   *lc;
	int			d = list_length(job->features);
	int			p = d + 1;		/* coefficients: features and intercept */
	int			q = d + 2;		/* columns of [x, 1, y] */
	TimestampTz start = GetCurrentTimestamp();
	ArrayType  *arr;
	Datum	   *e;
	bool	   *enulls;
	int			ne;
	double	   *v;
	double		n;
	const double *nulls,
			   *bad;
	double	   *R;
	double		total_rows = 0;
	double	   *mu,
			   *sd;
	double		ymu,
				ysd,
				rss,
				tss,
				lambda = 0;
	DmlLsq		ls;
	DmlStatus	st;
	DmlModel	m;
	int			sizes[2] = {d, 1};
	long		secs;
	int			usecs;
	DmlProgress prog;
	bool		isnull;
	char	   *rel;
	char	   *stats;
	size_t		blen;
	bytea	   *weights;

	/*
	 * dml.qr_cols(y, x1, ..., xd) over every row: the columns as arguments,
	 * no array per row; ARRAY[y, x1, ..., xd] beyond a function's argument
	 * limit (the state takes one of them).
	 */
	rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->relid)),
									 get_rel_name(job->relid));
	initStringInfo(&sql);
	if (d + 2 <= FUNC_MAX_ARGS)
		appendStringInfo(&sql, "SELECT dml.qr_cols(%s", job->target.expr);
	else
		appendStringInfo(&sql, "SELECT dml.qr(ARRAY[%s", job->target.expr);
	foreach(lc, job->features)
		appendStringInfo(&sql, ", %s", ((DmlColumn *) lfirst(lc))->expr);
	appendStringInfo(&sql, "%s), count(*)::float8 FROM %s", d + 2 <= FUNC_MAX_ARGS ? "" : "]", rel);
	/* no row limit: the executor runs a plan in parallel only without one */
	if (SPI_execute(sql.data, true, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "dml: the least-squares pass failed");
	if (SPI_tuptable->vals[0] == NULL)
		elog(ERROR, "dml: the least-squares pass returned nothing");
	{
		Datum		dv = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (isnull)
			data_error(ERRCODE_DATA_EXCEPTION,
					   "Training needs data: load rows first, or check row-level security policies.",
					   "the relation has no rows");
		arr = DatumGetArrayTypeP(dv);
		total_rows = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	}
	deconstruct_array(arr, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &e, &enulls, &ne);
	if (ne != 2 + 2 * p + q * q)
		elog(ERROR, "dml: dml.qr returned %d values for %d features. Please report a bug.", ne, d);
	v = palloc(sizeof(double) * ne);
	for (int i = 0; i < ne; i++)
		v[i] = DatumGetFloat8(e[i]);
	n = v[1];
	nulls = v + 2;
	bad = nulls + p;
	R = (double *) bad + p;

	/* the same checks, in the same order, as the workers' prepare_data */
	for (int i = 1; i < p; i++)
	{
		const char *col = ((DmlColumn *) list_nth(job->features, i - 1))->name;

		if (nulls[i] >= total_rows)
			data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED, "Leave the column out of features.",
					   psprintf("column \"%s\" is NULL in every row", col));
		if (bad[i] > 0)
			data_error(ERRCODE_DATA_EXCEPTION,
					   psprintf("Leave such rows out with a view, e.g. WHERE %s NOT IN ('NaN', 'Infinity', '-Infinity'), or scale the column: it must fit a float32.", col),
					   psprintf("column \"%s\" has %.0f NaN, infinite or out-of-range values", col, bad[i]));
		if (nulls[i] > 0 && strcmp(job->nulls, "skip") != 0)
			data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED,
					   "Pass nulls => 'skip' to leave those rows out, or nulls => 'impute' to use the column's mean.",
					   psprintf("column \"%s\" has %.0f NULL values", col, nulls[i]));
	}
	if (bad[0] > 0)
		data_error(ERRCODE_DATA_EXCEPTION, "Leave such rows out with a view, or scale the target: it must fit a float32.",
				   psprintf("the target has %.0f NaN, infinite or out-of-range values", bad[0]));
	if (nulls[0] > 0 && strcmp(job->nulls, "skip") != 0)
		data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED,
				   "Pass nulls => 'skip' to leave rows without a target out.",
				   psprintf("the target column has %.0f NULL values", nulls[0]));
	if (n < 2)
		data_error(ERRCODE_DATA_EXCEPTION, "Training needs at least 2 rows with a target.",
				   psprintf("only %.0f usable row%s", n, n == 1 ? "" : "s"));

	/* moments from R'R = Z'Z: they set the standardization and the ridge's scale */
	mu = palloc(sizeof(double) * d);
	sd = palloc(sizeof(double) * d);
	for (int c = 0; c < d; c++)
	{
		double		var;

		mu[c] = gram(R, q, c, d) / n;
		var = gram(R, q, c, c) / n - mu[c] * mu[c];
		sd[c] = var > 0 ? sqrt(var) : 0;
		if (sd[c] <= 1e-12 * fmax(1.0, fabs(mu[c])))
			data_error(ERRCODE_DATA_EXCEPTION, "Leave it out of features: it carries no information.",
					   psprintf("feature \"%s\" is constant (%g in every training row)",
								((DmlColumn *) list_nth(job->features, c))->name, mu[c]));
	}
	ymu = gram(R, q, d, d + 1) / n;
	ysd = gram(R, q, d + 1, d + 1) / n - ymu * ymu;
	ysd = ysd > 0 ? sqrt(ysd) : 1;

	/* tss: the residual of the intercept alone, R's columns [1, y] factored again */
	{
		double		Z2[2 * 2] = {0};
		double	   *Rs = palloc0(sizeof(double) * q * 2);

		for (int i = 0; i < q; i++)
		{
			Rs[i * 2] = R[(size_t) i * q + d];
			Rs[i * 2 + 1] = R[(size_t) i * q + d + 1];
		}
		if (dml_qr_stack(Z2, Rs, q, 2) != DML_OK)
			elog(ERROR, "dml: QR factorization failed. Please report a bug.");
		tss = Z2[3] * Z2[3];
	}

	/*
	 * ridge: (n weight_decay / 2) |w|^2 on the standardized slopes w_c =
	 * beta_c sd_c / ysd, i.e. rows sqrt(lambda) sd_c e_c with target 0 on
	 * the problem scaled by ysd
	 */
	if (job->weight_decay > 0)
	{
		double	   *P = palloc0(sizeof(double) * d * q);

		lambda = n * job->weight_decay / 2;
		for (int c = 0; c < d; c++)
			P[(size_t) c * q + c] = sqrt(lambda) * sd[c];
		if (dml_qr_stack(R, P, d, q) != DML_OK)
			elog(ERROR, "dml: QR factorization failed. Please report a bug.");
	}
	st = dml_lsq_solve(&ls, R, q, n, job->rank_min_norm);
	if (st == DML_ERR_SINGULAR && ls.ndropped > 0)
	{
		DmlLsq		copy = ls;

		/* the message is built from palloc'd copies; the kernel's arrays go first */
		ls.dropped = palloc(sizeof(int) * ls.ndropped);
		memcpy(ls.dropped, copy.dropped, sizeof(int) * ls.ndropped);
		dml_lsq_free(&copy);
		collinear_error(job, &ls);
	}
	if (st != DML_OK)
	{
		dml_lsq_free(&ls);
		if (st == DML_ERR_NOMEM)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		elog(ERROR, "dml: least-squares solve failed: %s. Please report a bug.", dml_status_string(st));
	}
	rss = ls.rss;
	for (int c = 0; c < d; c++)
		rss -= lambda * sd[c] * sd[c] * ls.coef[c] * ls.coef[c];
	rss = fmax(rss, 0);

	/*
	 * The model, float64, in the standardized form every model has (so
	 * its float32 rounding serves the float32 paths well): w_c = beta_c
	 * sd_c / ysd on (x_c - mu_c) / sd_c, and the bias that gives the raw
	 * intercept back.
	 */
	if (dml_model_alloc(&m, 1, sizes, DML_ACT_RELU, DML_LOSS_MSE) != DML_OK ||
		dml_model_make_f64(&m) != DML_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	{
		double		bias = ls.coef[d] - ymu;

		for (int c = 0; c < d; c++)
		{
			m.in_mean64[c] = mu[c];
			m.in_scale64[c] = 1.0 / sd[c];
			m.params64[c] = ls.coef[c] * sd[c] / ysd;
			bias += ls.coef[c] * mu[c];
		}
		m.params64[d] = bias / ysd;
	}
	m.out_mean64[0] = ymu;
	m.out_scale64[0] = ysd;
	dml_model_sync_f32(&m);
	blen = dml_model_serialized_size(&m);
	weights = palloc(VARHDRSZ + blen);
	SET_VARSIZE(weights, VARHDRSZ + blen);
	dml_model_serialize(&m, (unsigned char *) VARDATA(weights));
	dml_model_free(&m);
	stats = ols_statistics(job, &ls, n, rss, tss, lambda > 0);
	dml_lsq_free(&ls);

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	memset(result, 0, sizeof(*result));
	result->weights = weights;
	result->seconds = secs + usecs / 1e6;
	result->epochs_run = 1;
	result->final_loss = rss / n;
	result->rows_per_second = result->seconds > 0 ? n / result->seconds : 0;
	result->device = "cpu";
	result->metrics_json = psprintf("{\"device\": \"cpu\", \"solver\": \"in-server aggregate\", "
									"\"precision\": \"float64\", "
									"\"evaluated_on\": \"training\", \"train_rows\": %.0f, "
									"\"validation_rows\": 0, \"epochs\": 1, \"final_loss\": %.10g, "
									"\"rows_per_second\": %.1f, \"train_seconds\": %.4f, "
									"\"workers\": 0, \"rows\": %.0f, \"mse\": %.10g, \"mae\": null, "
									"\"r2\": %.10g, \"statistics\": %s}",
									n, result->final_loss, result->rows_per_second,
									result->seconds, n, result->final_loss,
									tss > 0 ? 1.0 - rss / tss : 1.0, stats);

	memset(&prog, 0, sizeof(prog));
	prog.epoch = 1;
	prog.loss = result->final_loss;
	prog.val_loss = NAN;
	prog.val_metric = NAN;
	prog.seconds = result->seconds;
	prog.rows = n;
	if (cb)
		cb(&prog, cb_arg);
}
