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
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "coordinator.h"
#include "dml.h"

/*
 * DmlInServerData
 *		Whether job's data suit a fit inside the server: numeric features,
 *		no validation split, no imputation, no test fault, in_server not
 *		turned off.  (exact.c, fit.c)
 */
bool
DmlInServerData(DmlJob *job)
{
	ListCell   *lc;

	if (job->nulls == DML_NULLS_IMPUTE || job->validation > 0 || job->fault != NULL ||
		job->no_in_server)
		return false;
	foreach(lc, job->features)
		if (((DmlFeature *) lfirst(lc))->kind != DML_FEAT_NUM)
			return false;
	return true;
}

/*
 * whether job can take the in-server path: robust standard errors need a
 * second pass over the rows (the residuals), which the workers make
 */
bool
DmlExactInServer(DmlJob *job)
{
	return job->optimizer == DML_JOB_OPT_EXACT && job->cov_type == DML_COV_NONROBUST &&
		DmlInServerData(job);
}

/*
 * DmlCheckCovType
 *		options => '{"cov": "HC0" | "HC1"}' applies to the fits that have
 *		standard errors: linear regression by the exact solver and binary
 *		logistic regression by Newton, HC0 only there (HC1's n / (n - p)
 *		is least squares' small-sample factor; statsmodels' Logit gives
 *		HC0's figures for it).
 */
void
DmlCheckCovType(DmlJob *job)
{
	if (job->cov_type == DML_COV_NONROBUST)
		return;
	if (job->cov_type == DML_COV_HC1 && job->optimizer == DML_JOB_OPT_NEWTON &&
		job->loss == DML_LOSS_BCE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"cov\" for logistic regression must be \"nonrobust\" or \"HC0\""),
				 errhint("HC1's small-sample factor is defined for least squares.")));
	if (!((job->optimizer == DML_JOB_OPT_EXACT && !job->classification) ||
		  (job->optimizer == DML_JOB_OPT_NEWTON && job->loss == DML_LOSS_BCE)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"cov\" applies only to linear regression by optimizer => 'exact' and logistic regression by optimizer => 'newton'"),
				 errhint("Other models have no standard errors to make robust.")));
}

/* the user's mistake, reported as the workers would */
static void
data_error(int sqlstate, const char *hint, const char *msg)
{
	ereport(ERROR, (errcode(sqlstate), errmsg("%s", msg), errhint("%s", hint)));
}

/* the name of column j of [x, 1]: a feature, or the intercept */
static const char *
term_name(DmlJob *job, int j)
{
	return j < list_length(job->features) ?
		((DmlFeature *) list_nth(job->features, j))->name : "(Intercept)";
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

/* a kernel's failure other than the user's: out of memory, or a bug */
static void
kernel_error(DmlStatus st)
{
	if (st == DML_ERR_NOMEM)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	elog(ERROR, "dml: least-squares solve failed: %s. Please report a bug.", dml_status_string(st));
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
	double	   *penalty = NULL;
	bool		constant = false;
	double		rss,
				tss;
	DmlLsqFit	fit;
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
		appendStringInfo(&sql, ", %s", ((DmlFeature *) lfirst(lc))->expr);
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
		const char *col = ((DmlFeature *) list_nth(job->features, i - 1))->name;

		if (nulls[i] >= total_rows)
			data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED, "Leave the column out of features.",
					   psprintf("column \"%s\" is NULL in every row", col));
		if (bad[i] > 0)
			data_error(ERRCODE_DATA_EXCEPTION,
					   psprintf("Leave such rows out with a view, e.g. WHERE %s NOT IN ('NaN', 'Infinity', '-Infinity'), or scale the column: it must fit a float32.", col),
					   psprintf("column \"%s\" has %.0f NaN, infinite or out-of-range values", col, bad[i]));
		if (nulls[i] > 0 && job->nulls != DML_NULLS_SKIP)
			data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED,
					   "Pass nulls => 'skip' to leave those rows out, or nulls => 'impute' to use the column's mean.",
					   psprintf("column \"%s\" has %.0f NULL values", col, nulls[i]));
	}
	if (bad[0] > 0)
		data_error(ERRCODE_DATA_EXCEPTION, "Leave such rows out with a view, or scale the target: it must fit a float32.",
				   psprintf("the target has %.0f NaN, infinite or out-of-range values", bad[0]));
	if (nulls[0] > 0 && job->nulls != DML_NULLS_SKIP)
		data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED,
				   "Pass nulls => 'skip' to leave rows without a target out.",
				   psprintf("the target column has %.0f NULL values", nulls[0]));
	if (n < 2)
		data_error(ERRCODE_DATA_EXCEPTION, "Training needs at least 2 rows with a target.",
				   psprintf("only %.0f usable row%s", n, n == 1 ? "" : "s"));

	/* moments from R'R = Z'Z: the standardization, the ridge's scale, tss */
	if ((st = dml_lsq_moments(&fit, R, d, n)) != DML_OK)
		kernel_error(st);
	for (int c = 0; c < d; c++)
		if (fit.sd[c] <= 1e-12 * fmax(1.0, fabs(fit.mu[c])))
		{
			/* a constant column is standardized to zero: weight 0, as in the workers */
			fit.sd[c] = 0;
			constant = true;
		}
	if (job->weight_decay > 0 || constant)
	{
		/* a ridge row on a constant column holds its coefficient at 0 */
		penalty = palloc(sizeof(double) * d);
		for (int c = 0; c < d; c++)
			penalty[c] = fit.sd[c] == 0 ? 1.0 : n * job->weight_decay / 2;
	}
	st = dml_lsq_fit(&fit, R, penalty, job->rank_min_norm);
	if (st == DML_ERR_SINGULAR && fit.ls.ndropped > 0)
	{
		DmlLsq		dropped = fit.ls;

		/* the message needs the names; the kernel's arrays are freed first */
		dropped.dropped = palloc(sizeof(int) * fit.ls.ndropped);
		memcpy(dropped.dropped, fit.ls.dropped, sizeof(int) * fit.ls.ndropped);
		dml_lsq_fit_free(&fit);
		collinear_error(job, &dropped);
	}
	if (st != DML_OK)
	{
		dml_lsq_fit_free(&fit);
		kernel_error(st);
	}

	/* the float64 model and the statistics of the fit */
	if (dml_model_alloc(&m, 1, sizes, DML_ACT_RELU, DML_LOSS_MSE) != DML_OK ||
		dml_lsq_fit_model(&fit, &m) != DML_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	blen = dml_model_serialized_size(&m);
	weights = palloc(VARHDRSZ + blen);
	SET_VARSIZE(weights, VARHDRSZ + blen);
	dml_model_serialize(&m, (unsigned char *) VARDATA(weights));
	dml_model_free(&m);
	{
		const char **terms = palloc(sizeof(char *) * (d ? d : 1));
		size_t		len;

		for (int c = 0; c < d; c++)
			terms[c] = term_name(job, c);
		len = dml_lsq_fit_json(&fit, terms, NULL, 0);
		stats = palloc(len);
		dml_lsq_fit_json(&fit, terms, stats, len);
	}
	rss = fit.rss;
	tss = fit.tss;
	dml_lsq_fit_free(&fit);

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	memset(result, 0, sizeof(*result));
	result->weights = weights;
	result->seconds = secs + usecs / 1e6;
	result->epochs_run = 1;
	result->final_loss = rss / n;
	result->rows_per_second = result->seconds > 0 ? n / result->seconds : 0;
	result->device = "cpu";
	result->stopped = DML_STOP_CONVERGED;
	result->metrics_json = psprintf("{\"device\": \"cpu\", \"solver\": \"in-server aggregate\", "
									"\"optimizer\": \"exact\", \"stopped\": \"converged\", \"precision\": \"float64\", "
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
